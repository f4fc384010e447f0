"""Template analysis + request -> chat parser and grammar (llama.cpp ``chat-auto-parser-generator.cpp``).

``generate_parser(analysis, request, generation_prompt)`` builds, as the reference does (parser notes §3):

* root = ``prefix(generation_prompt, trim(reasoning.start)) << body`` (``+`` for pure content): the part of the
  generation prompt before the reasoning start tag is consumed as an untagged literal, the rest (a prefilled
  ``<think>`` or a whole ``<think></think>``) is left to the reasoning parser - so a forced-open block makes
  the output up to ``</think>`` reasoning, and an opened-and-closed one yields empty (dropped) reasoning;
* reasoning = ``optional(optspace(start) reasoning(until(end)) optspace(end))`` when extracting
  (``reasoning_format != none`` and a reasoning mode), else nothing (tags flow into content);
* body = response format (``json_schema``: optional ```` ```json ```` fence around a schema-typed JSON value),
  else tool calls (tools given, ``tool_choice != none``, template supports tool calls) in the analysed format
  (JSON_NATIVE / TAG_WITH_JSON / TAG_WITH_TAGGED; optional unless ``required``; repeated when
  ``parallel_tool_calls``), else content (plain, or between the always-wrapped content markers);
  every body ends with ``end()``;
* tools with an undetected format: ``eps`` after the prefix (the reference then returns an empty message and
  its server falls back to the raw text; here :meth:`GeneratedParser.parse` returns that text as content);
* grammar: included for a response format, or for tools with ``tool_choice`` ``required``, or ``auto`` with a
  trigger marker (section start, else per-call start); lazy for ``auto`` (root = trigger rules, WORD triggers).

Continuation (``continue_final_message``): the parser is built from ``generation_prompt`` (which must be
rendered *without* the continued message); the parse-time prefix (:attr:`GeneratedParser.generation_prompt`)
is rebuilt as the reference does: the prompt cut before ``reasoning.start`` + ``reasoning.start`` + the
message's reasoning, and for content continuation + ``reasoning.end`` + its content. The parse therefore
includes the prefilled text.

Robustness (beyond the reference, which throws): when the main parse fails (or, for a root without an end
anchor, stops before the end of the text), the parse is retried with the trailing unparsed text as content
(``recover-trailing``: e.g. text after the last tool call, or a tool call naming an unknown tool), then as the
main parse plus the unparsed rest as content, then with everything after the reasoning as content
(``recover-content``), then (special handlers' arenas, which have no recovery entries) as the longest prefix
that parses plus the rest as content (:func:`prefix_rest`); if even that fails the raw output is the content
— a final parse never drops text.
A *partial* parse must moreover be prefix-consistent (never take back what a shorter prefix showed): when
the text does not parse, or its parse abandoned an alternative that had shown something (an ordered choice
falling to a later alternative), its message is used only if it extends the view of the prefix where that
cause was not there yet, else that view is the answer (:func:`consistent_view`) — e.g. a tool call already
streamed stays when garbage follows it. ``parse`` never raises.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from itertools import groupby
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from ..analysis.fidelity import (CALL_TURN_HEADER, GENERATION_PROMPT_PREAMBLE, INSTRUCTION_CALL_FORMAT, JSON_ARRAY_START,
                                 OPEN_CONTENT_BEFORE_CALLS, PYTHON_LITERAL_VALUES,
                                 CONTENT_INSIDE_SECTION_START, CALL_ID_BEFORE_NAME, WRAPPED_CONTENT_TAGGED_CALLS)
from ..analysis.instructions import INFERRED_FROM_INSTRUCTIONS, INFERRED_WELL_KNOWN
from ..analysis.result import CallIdPosition, ReasoningMode, TemplateAnalysis, ToolFormat, ToolsAnalysis
from ..grammar.converter import GrammarBuilder
from ..grammar.json_schema import (SCALAR_TYPES, ObjectSchema, may_be_string, schema_from_json_lenient, tool_parameters,
                                   value_types)
from ..peg import Arena, ParseCache, ParseResult
from ..peg.builder import P
from ..peg.chat import IGNORED, TOOL_ARG_VALUE, ChatBuilder, indexed_function_tools, split_marker_pair
from .base import GrammarTrigger, TriggerType
from .mapper import map_parse
from .message import AssistantMessage, ToolCall, message_extends
from .repairs import BUILTIN_CALL_SYNTAX, CALLS_AFTER_TEXT, JSON_CALL_WRAPPERS, PYTHON_CODE_MARKERS
from .repairs import CONTENT_BETWEEN_CALLS, LEADING_THINK_BLOCK, TAG_WHITESPACE, THINK_BLOCK, THINK_BLOCK_CALLS
from .repairs import TRAILING_END_OF_TURN, WELL_KNOWN_CALL_BLOCKS, FiredRepair, next_call_section
from .repairs import (JSON_CALL_IN_TAGS, NULLABLE_NULL, QUOTED_NUMBER, SCHEMA_TYPE_ALIAS, SECTION_OPENER_REPEATED,
                      SPACED_TYPED_VALUE, STANDALONE_JSON_CALL)
from .repairs import ARGS_SEPARATOR_OMITTED, UNION_TYPED_VALUE, string_type_alias
from .repairs import CONSECUTIVE_CALL_BLOCKS, SECTION_PER_CALL
from .turn_end import turn_end_cut, turn_end_tokens
from .repairs import ANSWER_MARKER_WHITESPACE, CALL_ENDS_REASONING, INSTRUCTED_REASONING_MARKERS, REASONING_BLOCKS_INTERLEAVED, REASONING_END_UNMATCHED, REASONING_END_WITHOUT_START, REASONING_START_REPEATED, TRAILING_EOS_TOKEN, trailing_eos
from .request import ChatRequest, Continuation, ReasoningFormat, ToolChoice

_WS = " \t\n\v\f\r"
# the languages a fence around a pythonic call list is written with (calls-after-text)
PYTHONIC_FENCE_LANGUAGES = ("tool_code", "python", "")
# repair json-call-wrappers: a template whose tool instructions show the call list as WORD[{"name": …}] (linear)
_LISTED_CALLS = re.compile(r'\b([A-Za-z_][A-Za-z0-9_]{0,40})\[\{"name"')
RECOVER_TRAILING = "recover-trailing"
RECOVER_CONTENT = "recover-content"
MAIN_REST = "main+rest"
PREFIX_REST = "prefix+rest"
PARTIAL_PREFIX = "partial-prefix"
PENDING_HEADER = "pending-header"   # a partial output that is still a prefix of a repeated turn header


def covers(r: ParseResult, text: str) -> bool:
    """The parse accounts for the whole ``text``: it needs more input, or succeeded up to the end (a root
    without an end anchor may succeed earlier and leave text unparsed)."""
    return r.need_more_input or (r.success and r.end >= len(text))


def trim_ws(s: str) -> str:
    """``s`` without leading/trailing C-locale whitespace."""
    return s.strip(_WS)


def longest_good_prefix(is_good: Callable[[int], bool], lo: int, hi: int, lo_good: bool = False) -> int:
    """The largest ``k`` in ``[lo, hi)`` with ``is_good(k)`` (``hi`` itself is known bad), or -1.

    Gallops back from ``hi - 1`` (1, 2, 4, ... characters) to the first good length, then bisects the gap
    above it: O(log(hi - lo)) probes, exact when goodness is monotone (a bad text stays bad when it grows),
    and biased towards the end of the text otherwise — so it finds the boundary a stream fed piece by piece
    finds. ``lo_good``: ``is_good(lo)`` is known to be true (not probed again).
    """
    if hi <= lo:
        return -1
    bad = hi
    step = 1
    good = -1
    while True:
        k = hi - step
        if k <= lo:
            if lo_good or is_good(lo):
                good = lo
            break
        if is_good(k):
            good = k
            break
        bad = k
        step *= 2
    if good < 0:
        return -1
    while bad - good > 1:
        mid = (good + bad) // 2
        if is_good(mid):
            good = mid
        else:
            bad = mid
    return good


def _any_subset(p: Any, prefix: str, params: list[Any]) -> Any:
    """Any of ``params`` (parsers), each at most once, in any order, whitespace between them — one rule per set
    already written (``prefix-MASK``); past :data:`core.peg.chat.MAX_PERMUTE` parameters, in the given order,
    each optional (the rule count doubles per parameter)."""
    from ..peg.chat import MAX_PERMUTE

    if len(params) > MAX_PERMUTE:
        seq = p.eps()
        for h in params:
            seq = seq + p.optional(p.space() + h)
        return seq
    cache: dict[int, Any] = {}

    def after(mask: int) -> Any:
        if mask not in cache:
            alts = [(h if mask == 0 else p.space() + h) + after(mask | (1 << i))
                    for i, h in enumerate(params) if not mask & (1 << i)]
            cache[mask] = p.rule(f"{prefix}-{mask}", p.choice(*(alts + [p.eps()])))
        return cache[mask]

    return after(0)


def _finished(call: ToolCall) -> bool:
    """The call's arguments are a complete JSON object (the call did not stop half-way)."""
    try:
        return isinstance(json.loads(call.arguments), dict)
    except ValueError:
        return False


def covering_message(arena: Arena, text: str) -> tuple[AssistantMessage | None, bool]:
    """The root's message for ``text`` when its lenient parse covers it (else None), and whether a strict
    (non-lenient) parse accepts the whole text — nothing pending at its end (see :func:`prefix_rest`)."""
    try:
        r = arena.parse(text, lenient=True)
        if not covers(r, text):
            return None, False
        strict = arena.parse(text, lenient=False)
    except (RecursionError, MemoryError):
        return None, False
    return map_parse(r), strict.success and strict.end >= len(text)


def prefix_rest(text: str, floor: int, at: Callable[[int], tuple[AssistantMessage | None, bool]],
                memo: "ViewMemo | None" = None) -> AssistantMessage | None:
    """Final-parse recovery for a text the main parse fails on: the message of its longest prefix that parses,
    with the rest of the text appended as content; None when no prefix parses.

    ``at(k)`` -> ``(message of text[:k] when it parses, else None; clean)`` where ``clean`` says that nothing
    at the end of ``text[:k]`` is pending (a strict parse accepts it: no cut marker, no half name). Prefixes
    shorter than ``floor`` (the generation prompt) are not considered. When the prefix's last tool call is
    unfinished (arguments not a complete JSON object), the prefix moves back to before that call (a half
    call is not reported as a call); when the prefix is not clean, the rest starts where its message was
    first reached (pending text is never dropped — at worst a marker the parse had consumed shows as content).
    O(log n) parses; with a stream's ``memo``, O(1) once the failure point is known (it does not move while
    the text grows).

    E.g. GPT-OSS ``<|channel|>analysis<|message|>u<|end|>i``: reasoning ``u``, content ``i``, instead of the
    whole text as content (the reference throws)."""
    n = len(text)
    cache: dict[int, tuple[AssistantMessage | None, bool]] = memo.messages if memo is not None else {}

    def get(k: int) -> tuple[AssistantMessage | None, bool]:
        if k not in cache:
            cache[k] = at(k)
        return cache[k]

    def search(key: Any, good: Callable[[int], bool], lo: int, hi: int) -> int:
        d = memo.deaths.get(key) if memo is not None else None
        if d is None or not (lo <= d < hi):
            d = longest_good_prefix(good, lo, hi)
            if memo is not None and d >= 0:
                memo.deaths[key] = d
        return d

    d = search(("fail",), lambda k: get(k)[0] is not None, floor, n)
    if d < 0:
        return None
    msg, clean = get(d)
    if msg is None:
        return None
    if msg.tool_calls and not _finished(msg.tool_calls[-1]):
        calls = len(msg.tool_calls)
        d = search(("unfinished", d), lambda k: get(k)[0] is not None and len(get(k)[0].tool_calls) < calls,
                   floor, d)
        if d < 0:
            return None
        msg, clean = get(d)
        if msg is None or (msg.tool_calls and not _finished(msg.tool_calls[-1])):
            return None
    if not clean:
        target = msg
        before = search(("reached", d), lambda k: get(k)[0] != target, floor, d)
        d = before + 1 if before >= 0 else floor
    out = msg.copy()
    out.content += text[d:]
    return out


@dataclass
class Probe:
    """What :func:`consistent_view` needs to know about one prefix of the text: ``message`` (the main parse's
    message when it covers the prefix, else None), ``switches`` (:attr:`core.peg.ParseResult.switches`, or
    the hand-written handlers' equivalent) and ``recover`` (computes the message a final parse would give,
    for a prefix that does not parse)."""

    message: AssistantMessage | None
    switches: frozenset
    recover: Callable[[], AssistantMessage]


_MAX_VIEW_DEPTH = 12


class ViewMemo:
    """Per-stream memo of :func:`consistent_view` (valid while each text extends the previous one; resets
    itself otherwise): the views of the shorter prefixes it looked at, where the causes of a bad text (a
    failure, a set of switches) began, and what the previous text was like (a lower bound for the searches).
    With it, successive parses of a stream cost O(1) extra parses, not O(log n)."""

    __slots__ = ("text", "views", "deaths", "messages", "last_len", "last_covers", "last_switches")

    def __init__(self) -> None:
        self.text: str | None = ""
        self.views: dict[int, AssistantMessage] = {}
        self.deaths: dict[Any, int] = {}
        self.messages: dict[int, AssistantMessage | None] = {}   # prefix_rest's messages of prefixes
        self.last_len = -1
        self.last_covers = False
        self.last_switches: frozenset = frozenset()

    def trust(self) -> None:
        """From now on the owner vouches that each text extends the previous one (a stream that only appends,
        and makes a new memo otherwise): :meth:`sync` then compares nothing and the memo keeps no reference to
        the text (which lets the owner grow it in place)."""
        self.text = None

    def sync(self, text: str) -> None:
        """Start a step on ``text`` (forget everything when it does not extend the previous text)."""
        if self.text is None:   # trusted (see trust)
            return
        if not text.startswith(self.text):
            self.views = {}
            self.deaths = {}
            self.messages = {}
            self.last_len = -1
            self.last_covers = False
            self.last_switches = frozenset()
        self.text = text

    def note(self, text: str, covered: bool, switches: frozenset) -> None:
        """Record the outcome of the main parse of ``text`` (the step's text)."""
        self.sync(text)
        self.last_len = len(text)
        self.last_covers = covered
        self.last_switches = switches


def consistent_view(text: str, floor: int, probe: Callable[[int], Probe], top: Probe,
                    memo: ViewMemo | None = None, found: list[int] | None = None) -> AssistantMessage:
    """The prefix-consistent message of a partial ``text`` (``top``: the probe of the whole text; ``probe(k)``
    parses ``text[:k]``; prefixes shorter than ``floor``, the generation prompt, are never looked at).

    A text is *clean* when its main parse covers it and abandoned no alternative that had shown something;
    then its message is the answer. Otherwise there is a shorter prefix on which the cause was not there yet
    — the longest prefix that parses (for a failure) or on which one of the abandoned alternatives was still
    alive (for switches) — found with :func:`longest_good_prefix`; its view (recursively) is what a stream
    may already have shown. The text's own candidate (its recovered message when it does not parse, else its
    message) is the answer when it extends that view, else the view: a partial parse never takes back what a
    shorter prefix showed, yet text that merely continues it (an unknown tool name read as content, a string
    that first looked like JSON) still streams. Depth is bounded (``_MAX_VIEW_DEPTH`` causes).

    Rationale: llama.cpp maps what a failed partial parse recognised and lets an ordered choice fall to a later
    alternative, both of which may take back streamed text (the server then fails the diff).
    """
    n = len(text)
    probes: dict[int, Probe] = {n: top}

    def get(k: int) -> Probe:
        pr = probes.get(k)
        if pr is None:
            pr = probes[k] = probe(k)
        return pr

    if memo is not None:
        memo.sync(text)
    chain: list[tuple[int, AssistantMessage]] = []
    base: AssistantMessage | None = None
    k = n
    while True:
        if k < n and memo is not None and k in memo.views:
            base = memo.views[k]
            break
        pr = get(k)
        if pr.message is not None and not pr.switches:
            base = pr.message
            break
        if len(chain) >= _MAX_VIEW_DEPTH:
            base = pr.message if pr.message is not None else pr.recover()
            break
        if pr.message is None:
            key: Any = ("fail",)
            cand = pr.recover()

            def good(m: int) -> bool:
                return get(m).message is not None
            lo_good = memo is not None and k == n and memo.last_covers and floor <= memo.last_len < k
        else:
            switches = pr.switches
            key = ("switch", switches)
            cand = pr.message

            def good(m: int, switches: frozenset = switches) -> bool:
                return not switches <= get(m).switches
            lo_good = (memo is not None and k == n and floor <= memo.last_len < k
                       and not switches <= memo.last_switches)
        chain.append((k, cand))
        d = memo.deaths.get(key) if memo is not None else None
        if d is None or not (floor <= d < k):
            lo = memo.last_len if lo_good and memo is not None else floor
            d = longest_good_prefix(good, lo, k, lo_good)
            if memo is not None and d >= 0:
                memo.deaths[key] = d
        if d < 0:
            break
        k = d
    ref = base
    for kk, cand in reversed(chain):
        if ref is None or message_extends(ref, cand):
            ref = cand
        if memo is not None and kk < n:
            memo.views[kk] = ref
    if found is not None and ref is not None and ref is base and k < n:
        found.append(k)   # the prefix whose clean parse is the view
    return ref if ref is not None else AssistantMessage()


class _PrefixRuns:
    """Main-root parses of prefixes of one text for :func:`consistent_view`'s search, in any order.

    Each probe used to parse its prefix from scratch (about 15 full parses of a 256 KB text whose call at the
    end does not parse). Here a prefix is parsed on a copy of the stream cache of a shorter *base* prefix
    (:class:`~core.peg.ParseCache`: what the engine memoized there never looked at the base's end, so it
    holds for every longer prefix; copying keeps the base valid for the next probe, whatever its length).
    A new base is laid only when a probe falls below every base, far enough back (``_BASE_REACH`` times the
    probe's distance from the end) that a galloping search needs O(1) bases. Same results as uncached
    parses: the engine's cache never changes a result."""

    def __init__(self, arena: Arena, text: str, floor: int) -> None:
        self.arena = arena
        self.text = text
        self.floor = floor
        self.bases: list[tuple[int, ParseCache]] = []

    def _parse(self, k: int, cache: ParseCache | None) -> ParseResult | None:
        try:
            return self.arena.parse(self.text[:k], lenient=True, entry=None, cache=cache)
        except (RecursionError, MemoryError):
            return None

    def run(self, k: int) -> ParseResult | None:
        base = None
        for p, c in self.bases:
            if p <= k and (base is None or p > base[0]):
                base = (p, c)
        if base is None:
            n = len(self.text)
            p = max(self.floor, n - _BASE_REACH * max(1, n - k), 0)
            if p > k:
                p = k
            c = ParseCache()
            if self._parse(p, c) is None:
                return self._parse(k, None)
            base = (p, c)
            self.bases.append(base)
        return self._parse(k, base[1].fork())


_BASE_REACH = 64


@dataclass
class ParserState:
    """Per-stream memo for :meth:`GeneratedParser.parse` (one :class:`~core.peg.ParseCache` per entry point,
    and the :class:`ViewMemo` of the partial view).

    Pass the same state to successive parses of a growing output; it resets itself when the text is not an
    extension of the previous one.
    """

    caches: dict[str | None, ParseCache] = field(default_factory=dict)
    view: ViewMemo = field(default_factory=ViewMemo)

    def cache(self, entry: str | None) -> ParseCache:
        """This stream's :class:`~core.peg.ParseCache` for entry point ``entry`` (``None`` = main root), made on
        first use."""
        c = self.caches.get(entry)
        if c is None:
            c = self.caches[entry] = ParseCache()
        return c


_PARTIAL_MEMO: tuple[Any, str, tuple[AssistantMessage, ParseResult | None, str | None], int | None] | None = None
"""The last partial :meth:`GeneratedParser.parse_detailed` without a stream state: (weak reference to the
parser, output, result, :meth:`GeneratedParser.partial_view_end`). One entry for the process (a 256 KB output and its message at most), replaced as one
tuple so threads never see half of it."""
Runs = Callable[[Optional[str], str], Optional[ParseResult]]
"""A maker of lenient parses (``(entry, text) -> result``) a caller hands :meth:`GeneratedParser.parse_detailed`."""
_LAST_RUNS = threading.local()
"""Per thread, the uncached parses (:meth:`GeneratedParser._run` without a stream state) of the last
``_LAST_RUNS_KEPT`` texts, by entry point: a final parse, the partial parse that settles it and explain's trace
parse the same 256 KB text from the same entries. A result is never modified once made."""
_LAST_RUNS_KEPT = 2
_LAST_RUNS_CHARS = 1 << 19   # longer texts are not kept (their parse trees would stay alive with the thread)
_VIEW_END = threading.local()   # the partial parse's view prefix, handed from _parse_detailed to parse_detailed


@dataclass
class GeneratedParser:
    """A generated chat-output parser with its grammar (implements :class:`core.chat.base.ChatOutputParser`).

    ``generation_prompt``: the text prepended to the model output before parsing (for a continuation, the
    rebuilt one with the prefilled text; a request pipeline appends it to the prompt).
    ``parser_generation_prompt``: the generation prompt the parser was built from.
    ``grammar`` is GBNF or ``None``; ``grammar_triggers`` are WORD triggers of a lazy grammar.
    ``notes`` lists degradations (undetected tool format, schema parts the grammar could not express).
    """

    arena: Arena
    generation_prompt: str
    parser_generation_prompt: str
    grammar: str | None = None
    grammar_lazy: bool = False
    grammar_triggers: list[GrammarTrigger] = field(default_factory=list)
    preserved_tokens: list[str] = field(default_factory=list)
    additional_stops: list[str] = field(default_factory=list)
    format: str = "peg-native"
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: list[str] = field(default_factory=list)
    eps_fallback: bool = False
    notes: list[str] = field(default_factory=list)
    turn_header: str = ""
    # whether whitespace after a repeated turn_header is cut with it (core.chat.repairs.header_space)
    turn_header_space: bool = True
    content_header: str = ""
    # repair repeated-prompt-tail (set by the pipeline at improved): core.chat.repairs.prompt_tails
    prompt_tails: tuple[str, ...] = ()
    # repair trailing-end-of-turn (set by the pipeline at improved): (template, request, caps) the end-of-turn
    # tokens are derived from, core.chat.turn_end.turn_end_tokens
    turn_end_source: Any = None
    # repair calls-after-text: the fence openers of the stops that end content before a fenced pythonic call
    # list; a final parse gives a tail held back as a prefix of one of them (a closing ``` at the end) to content
    released_stops: tuple[str, ...] = ()

    def header_cut(self, output: str, is_partial: bool = False) -> int | None:
        """Repair ``repeated-turn-header`` (on when ``turn_header`` is set, see
        :func:`core.chat.repairs.turn_header`): how many leading characters of ``output`` are the assistant
        turn header repeated (with the whitespace after it) — 0 when it does not start with it, ``None`` for a
        partial ``output`` that is still a proper prefix of the header (nothing to show yet). Otherwise the
        same for ``content_header`` (improvement ``content-turn-header``,
        :func:`core.chat.roundtrip.content_turn_header`)."""
        from .repairs import header_cut

        cut = header_cut(self.turn_header, output, is_partial, self.turn_header_space)
        if cut == 0 and self.content_header:
            cut = header_cut(self.content_header, output, is_partial)
        for tail in self.prompt_tails if cut == 0 else ():
            cut = header_cut(tail, output, is_partial)
            if cut != 0:
                break
        return cut

    hold_calls_in_reasoning: str = ""   # repair call-ends-reasoning's call opener, when it is in the arena (held_view)

    def new_state(self) -> ParserState:
        """A fresh per-stream state for :meth:`parse` (``state=``)."""
        return ParserState()

    def parse(self, output: str, is_partial: bool = False, *, state: ParserState | None = None,
              detailed: tuple[AssistantMessage, ParseResult | None, str | None] | None = None) -> AssistantMessage:
        """Parse model ``output`` (text after the prompt) into an assistant message; never raises.

        The parse is always lenient (a marker cut at the end is not content, an unterminated block keeps its
        text), as the reference's is. When the output does not fit the format, a final parse keeps every
        character (the unparsed rest becomes content, see :meth:`parse_detailed`), and a partial parse
        (``is_partial``) gives a prefix-consistent view (:func:`consistent_view`: a call already streamed is
        never taken back, neither by text that does not parse nor by an ordered choice falling to a later
        alternative).
        ``state``: reuse work across successive prefixes of one stream. ``detailed``: :meth:`parse_detailed` of
        this very ``output`` and ``is_partial`` when the caller has it (explain traces the same parse).
        Without ``state`` the result is settled by :func:`core.chat.repairs.settle` (a final parse extends the
        partial view of the same output; a call cut off at the end is reported in ``.repairs``).
        """
        if state is None and not is_partial and detailed is None and self.turn_end_source is not None:
            end = turn_end_cut(turn_end_tokens(self), output)
            if end < len(output):   # repair trailing-end-of-turn: the stop tokens are not content
                kept = output[:end]   # parsed as it is: the cut took the whole trailing run its scan reads
                msg = self.parse(kept, False, detailed=self.parse_detailed(kept)).copy()
                msg.repairs = list(msg.repairs) + [FiredRepair(TRAILING_END_OF_TURN, end, len(output),
                                                               text=output[end:])]
                return msg
        msg, r, entry = detailed if detailed is not None and state is None else \
            self.parse_detailed(output, state=state, is_partial=is_partial)
        if state is not None:     # a step of a stream: StreamingParser.finish() settles with a one-shot parse
            return msg
        from .repairs import REPEATED_PROMPT_TAIL, REPEATED_TURN_HEADER, grammar_repairs, settle

        cut = self.header_cut(output, is_partial) or 0
        lead_in: int | None = None
        if r is not None and entry != RECOVER_CONTENT and self._has_repair_tags():
            fired, cut_at = grammar_repairs(r, len(self.generation_prompt) - cut, output)
            if fired:
                msg = msg.copy()
                msg.repairs = msg.repairs + fired
            if not is_partial:
                lead_in = cut_at
        if cut and self.turn_header and output.startswith(self.turn_header):
            msg = msg.copy()
            msg.repairs = [FiredRepair(REPEATED_TURN_HEADER, 0, cut, text=output[:cut])] + msg.repairs
        elif cut and any(output.startswith(t) for t in self.prompt_tails):
            msg = msg.copy()
            msg.repairs = [FiredRepair(REPEATED_PROMPT_TAIL, 0, cut, text=output[:cut])] + msg.repairs
        if is_partial:
            return settle(self, output, msg, True, view=msg, partial_entry=entry)
        clean = entry is None and r is not None and not r.switched   # the partial view is this very parse
        if clean:
            # the grammar read every character to the end, none held back and none read to be dropped: repair
            # unparsed-characters has no tail to keep, and its character audit is not run
            whole = r.success and r.end >= len(self.generation_prompt) + len(output) - cut \
                and IGNORED not in self.arena.quiet_tags
            return settle(self, output, msg, False, view=msg, partial_entry=None, read_whole=whole, lead_in=lead_in)
        return settle(self, output, msg, False, lead_in=lead_in)

    def _has_repair_tags(self) -> bool:
        """Whether the arena has ``repair:NAME`` nodes (built with tolerance repairs on): only then is the
        parse tree searched for the repairs that acted."""
        tags = getattr(self.arena, "quiet_tags", ())
        return any(t.startswith("repair:") for t in tags)

    def _run(self, entry: str | None, text: str, state: ParserState | None, runs: Runs | None = None
             ) -> ParseResult | None:
        """The lenient parse of ``text`` from ``entry``; None on absurd nesting (RecursionError/MemoryError).
        ``runs``: the caller's maker of that parse (see :meth:`parse_detailed`), used instead of parsing."""
        if state is None and len(text) <= _LAST_RUNS_CHARS:
            last = _LAST_RUNS.__dict__.setdefault("runs", [])
            for arena, t, results in last:
                if arena is self.arena and t == text:
                    if entry not in results:
                        results[entry] = self._run_uncached(entry, text, runs)
                    return results[entry]
            r = self._run_uncached(entry, text, runs)
            last.insert(0, (self.arena, text, {entry: r}))
            del last[_LAST_RUNS_KEPT:]
            return r
        if state is None:
            return self._run_uncached(entry, text, runs)
        try:
            return self.arena.parse(text, lenient=True, entry=entry, cache=state.cache(entry))
        except (RecursionError, MemoryError):
            return None

    def _run_uncached(self, entry: str | None, text: str, runs: Runs | None = None) -> ParseResult | None:
        if runs is not None:
            return runs(entry, text)
        try:
            return self.arena.parse(text, lenient=True, entry=entry)
        except (RecursionError, MemoryError):
            return None

    def parse_detailed(self, output: str, *, state: ParserState | None = None, is_partial: bool = False,
                       runs: Runs | None = None) -> tuple[AssistantMessage, ParseResult | None, str | None]:
        """See :meth:`_parse_detailed`. The partial parse of a whole output (no ``state``) is kept for the next
        call with the same parser and output: on a text that does not parse it probes O(log n) prefixes, and a
        final parse asks for it again (:func:`core.chat.repairs.settle`, explain's trace of a settled view).
        ``runs`` (a final parse without ``state`` only): ``runs(entry, text)`` makes the lenient parse of ``text``
        (``generation_prompt`` + ``output`` after a repeated turn header) from ``entry`` (None: the main root),
        or None where the engine gives up on absurd nesting, in place of the parser's own — explain passes its
        traced runs (:func:`core.peg.trace.traced_parse`: the same parses, their matched literals extra nodes
        the mapper ignores), so a text it explains is parsed once from each entry, not twice."""
        global _PARTIAL_MEMO
        if state is not None or not is_partial:
            return self._parse_detailed(output, state=state, is_partial=is_partial,
                                        runs=runs if state is None and not is_partial else None)
        memo = _PARTIAL_MEMO
        if memo is not None and memo[0]() is self and memo[1] == output:
            msg, r, entry = memo[2]
            return msg.copy(), r, entry
        _VIEW_END.value = None
        msg, r, entry = self._parse_detailed(output, state=None, is_partial=True)
        seen = _VIEW_END.value
        end = seen[1] if seen is not None and seen[0] is output else None   # (a header cut: no hint)
        _PARTIAL_MEMO = (weakref.ref(self), output, (msg.copy(), r, entry), end)
        return msg, r, entry

    def partial_view_end(self, output: str) -> int | None:
        """When the partial parse of ``output`` (the last one, :meth:`parse_detailed`) is the message of a shorter
        prefix that parses cleanly: that prefix's length in ``output``; else None."""
        memo = _PARTIAL_MEMO
        if memo is not None and memo[0]() is self and memo[1] == output:
            return memo[3]
        return None

    def _parse_detailed(self, output: str, *, state: ParserState | None = None, is_partial: bool = False,
                        runs: Runs | None = None) -> tuple[AssistantMessage, ParseResult | None, str | None]:
        """Like :meth:`parse`, also returning the PEG result used and its entry point: ``None`` = main root,
        ``"recover-trailing"``, ``"recover-content"``, ``"main+rest"`` (the main root stopped before the end
        of the text: its message plus the rest as content), ``"prefix+rest"`` (:func:`prefix_rest`),
        ``"partial-prefix"`` (the partial view of the
        longest parsing prefix; the result is that prefix's), ``"raw"`` (result ``None``, the output as
        content), or ``"pending-header"`` (partial: the output is still a proper prefix of the repeated turn
        header, an empty message; repair ``repeated-turn-header`` strips a complete one first, see
        :meth:`header_cut`).

        Order: the main root when it covers the whole text (success up to the end, or need-more-input); else
        ``recover-trailing`` (the body, then the rest as content), the main root's message plus the unparsed
        rest, ``recover-content``, the longest prefix that parses plus the rest (for special handlers, whose
        arenas have no recovery entries) (everything after the reasoning as content), the raw output — so a final
        parse never drops text. For ``is_partial`` that recovered message — or the main root's, when it
        covers the text but an alternative that had shown something was abandoned on the way
        (``ParseResult.switched``: a shorter prefix may have shown it) — is returned only when it extends the
        view of the prefix where the cause was not there yet (:func:`consistent_view`), else that view."""
        cut = self.header_cut(output, is_partial)
        if cut is None:
            return AssistantMessage(), None, PENDING_HEADER
        output = output[cut:]
        text = self.generation_prompt + output
        if self.eps_fallback:
            r = self._run(RECOVER_CONTENT, text, state) if RECOVER_CONTENT in self.arena.entries else None
            if r is not None and not r.fail:
                return map_parse(r), r, RECOVER_CONTENT
            return AssistantMessage(content=output), None, "raw"
        main = self._run(None, text, state, runs)
        covered = main is not None and covers(main, text)
        if covered and not (is_partial and main.switched):
            if state is not None and is_partial:
                state.view.note(text, True, frozenset())
            msg = map_parse(main)
            held = held_view(self, main, text, msg) if is_partial else None
            if held is not None:
                msg = held
            if not is_partial and self.released_stops and main.pending_until is not None:
                tail = text[max(main.pending_until[0], len(self.generation_prompt)):]
                if tail and any(stop.startswith(tail) for stop in self.released_stops):
                    msg.content += tail
            return msg, main, None
        if not is_partial or main is None:
            return (map_parse(main), main, None) if covered else self._recover(text, output, main, state,
                                                                                runs=runs)
        gp_len = len(self.generation_prompt)
        recovered: list = []

        def recover_top() -> AssistantMessage:
            recovered.append(self._recover(text, output, main, state, True))
            return recovered[-1][0]
        top = Probe(map_parse(main) if covered else None, main.switches, recover_top)

        prefixes = _PrefixRuns(self.arena, text, gp_len)

        def probe(k: int) -> Probe:
            t = text[:k]
            r = prefixes.run(k)
            if r is None:
                return Probe(None, frozenset(), lambda: AssistantMessage(content=t[gp_len:]))
            return Probe(map_parse(r) if covers(r, t) else None, r.switches,
                         lambda: self._recover(t, t[gp_len:], r, None)[0])
        memo = state.view if state is not None else None
        at: list[int] = []
        msg = consistent_view(text, gp_len, probe, top, memo, at)
        if state is None and at:
            _VIEW_END.value = (output, at[0] - gp_len)   # read by parse_detailed for partial_view_end
        if memo is not None:
            memo.note(text, covered, main.switches)
        if msg is top.message:
            return held_view(self, main, text, msg) or msg, main, None
        if recovered and msg is recovered[-1][0]:
            return recovered[-1]
        return msg, None, PARTIAL_PREFIX

    def _covering(self, text: str) -> tuple[AssistantMessage | None, bool]:
        """:func:`prefix_rest`'s ``at``: the main root's message for ``text`` when it covers it (else None),
        and whether a strict parse accepts ``text`` whole (nothing pending at its end). No cache."""
        return covering_message(self.arena, text)

    def _recover(self, text: str, output: str, main: ParseResult | None, state: ParserState | None,
                 partial: bool = False, runs: Runs | None = None
                 ) -> tuple[AssistantMessage, ParseResult | None, str | None]:
        """The recovered message of a text the main root does not cover (see :meth:`parse_detailed`);
        ``partial``: a step of the stream ``state`` belongs to (its memo may be used); ``runs``: as there."""
        tried_main = False
        for entry in (RECOVER_TRAILING, MAIN_REST, RECOVER_CONTENT, PREFIX_REST):
            if entry == MAIN_REST:
                if main is None or main.fail or tried_main:
                    continue
                tried_main = True
                msg = map_parse(main)
                rest = text[max(main.end, len(self.generation_prompt)):]
                msg.content += rest
                r = main
            elif entry == PREFIX_REST:
                if main is None or not main.fail:
                    continue
                found = prefix_rest(text, len(self.generation_prompt), lambda k: self._covering(text[:k]),
                                    state.view if (state is not None and partial) else None)
                if found is None:
                    continue
                msg, r = found, None
            else:
                if entry not in self.arena.entries:
                    continue
                r = self._run(entry, text, state, runs)
                if r is None or r.fail:
                    continue
                msg = map_parse(r)
            return msg, r, entry
        return AssistantMessage(content=output), None, "raw"

    def describe(self) -> str:
        """Readable PEG of the parser (rules, then the root)."""
        head = []
        if self.eps_fallback:
            head.append("# tool format not detected: the parser stops after the prefix (eps);"
                        " parse() returns the output as content")
        return "\n".join(head + [self.arena.describe()])

    def to_json(self) -> dict[str, Any]:
        """Grammar-related fields with llama.cpp ``common_chat_params`` names (trigger type 1 = word)."""
        codes = {TriggerType.TOKEN: 0, TriggerType.WORD: 1, TriggerType.PATTERN: 2, TriggerType.PATTERN_FULL: 3}
        return {
            "format": self.format,
            "generation_prompt": self.generation_prompt,
            "grammar": self.grammar or "",
            "grammar_lazy": self.grammar_lazy,
            "grammar_triggers": [{"type": codes[t.type], "value": t.value} for t in self.grammar_triggers],
            "supports_thinking": self.supports_thinking,
            "thinking_start_tag": self.thinking_start_tag,
            "thinking_end_tags": list(self.thinking_end_tags),
            "preserved_tokens": list(self.preserved_tokens),
            "additional_stops": list(self.additional_stops),
        }


# ---------------------------------------------------------------------------------------------------------------

def _render_content(msg: dict, delimiter: str = "\n\n") -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return delimiter.join(p.get("text", "") for p in content
                              if isinstance(p, dict) and p.get("type") == "text")
    return ""


def continuation_prompt(analysis: TemplateAnalysis, request: ChatRequest, generation_prompt: str) -> str:
    """The parse-time prefix for ``continue_final_message`` (parser notes §3.2); ``generation_prompt``
    unchanged when there is nothing to continue."""
    mode = request.continue_final_message
    if mode == Continuation.NONE or not request.messages:
        return generation_prompt
    msg = request.messages[-1]
    if not (msg.get("content") or msg.get("reasoning_content") or msg.get("tool_calls") or msg.get("name")
            or msg.get("tool_call_id")):
        return generation_prompt
    reasoning = msg.get("reasoning_content") or ""
    if not isinstance(reasoning, str):
        reasoning = ""
    if mode == Continuation.AUTO:
        has_content = bool(msg.get("content"))
        mode = Continuation.REASONING if (reasoning and not has_content) else Continuation.CONTENT
    gp = generation_prompt
    start = analysis.reasoning.start
    if start:
        i = gp.find(start)
        gp = (gp if i < 0 else gp[:i]) + start + reasoning
        if mode == Continuation.CONTENT:
            gp += analysis.reasoning.end
    if mode == Continuation.CONTENT:
        gp += _render_content(msg)
    return gp


class _Gen:
    """Builds the parser for one (analysis, request) pair; mirrors the reference's build functions."""

    def __init__(self, analysis: TemplateAnalysis, request: ChatRequest, improvements: frozenset[str] = frozenset(),
                 reasoning_preamble: str = "", generation_prompt: str = "", template_source: str = "",
                 reasoning_first: bool = False, instructed: tuple = ()):
        self.a = analysis
        self.template_source = template_source or ""
        self.req = request
        self.improvements = improvements
        self.reasoning_preamble = reasoning_preamble
        self.reasoning_first = reasoning_first
        self.instructed = instructed   # (start phrases, end phrases): repair instructed-reasoning-markers
        self.next_section = ""   # repair consecutive-call-blocks: the call section's start, set by the tag formats
        self.next_section_rule = CONSECUTIVE_CALL_BLOCKS, "tool-calls"   # (the repair, the section's rule name)
        self.later_sections: tuple[str, P] | None = None   # repair content-between-calls (json_native)
        self.generation_prompt = generation_prompt
        self.p = ChatBuilder(python_literal_values=True if PYTHON_LITERAL_VALUES in improvements else None)
        self.extracting = (request.reasoning_format != ReasoningFormat.NONE
                           and analysis.reasoning.mode != ReasoningMode.NONE)
        self.notes: list[str] = []
        self.released_stops: tuple[str, ...] = ()
        self.interleaved = False   # repair reasoning-blocks-interleaved (generate_parser's interleaved_reasoning)
        self.holds_calls = ""   # repair call-ends-reasoning built into the reasoning parser: the call opener
        self.compact_calls: P | None = None   # repair tag-whitespace: the calls with their layout whitespace optional
        self.first_call: P | None = None   # repair call-ends-reasoning: one call, where the calls' rule may wait
        # improvement instruction-call-format: the format was read from the tool instructions, not from a call
        # the template renders (core.analysis.instructions)
        # repair well-known-call-blocks: the template shows no format at all, the parser reads the well-known one
        self.well_known = analysis.tools.inferred_from == INFERRED_WELL_KNOWN
        self.inferred = analysis.tools.inferred_from == INFERRED_FROM_INSTRUCTIONS or self.well_known
        # Node ids name the until/ac automata in the GBNF; the placeholder eps/choice nodes below are created
        # where the reference creates them, so that the ids (hence the grammar text) match its output.
        self.p.eps()
        self.reasoning = self.reasoning_parser()

    # -- reasoning / content --------------------------------------------------------------------------------
    def reasoning_parser(self) -> P:
        p, r = self.p, self.a.reasoning
        if self.instructed and r.mode == ReasoningMode.NONE and self.req.reasoning_format != ReasoningFormat.NONE \
                and INSTRUCTED_REASONING_MARKERS in p.repairs:
            starts, ends = self.instructed
            self.notes.append(f"repair {INSTRUCTED_REASONING_MARKERS}: the prompt asks for {starts[0]!r} / "
                              f"{ends[0]!r}: the text between them is reasoning")
            block = (p.choice(*[p.literal(t) for t in starts]) + p.reasoning(p.until_one_of(list(ends)))
                     + p.optional(p.choice(*[p.literal(t) for t in ends])))
            return p.optional(p.repair(INSTRUCTED_REASONING_MARKERS, block))
        if self.reads_unplaced_think_block():   # the template shows no reasoning, the output opens with a block
            return p.optional(self.unplaced_think_block())
        if not self.extracting:
            return p.eps()
        if r.mode in (ReasoningMode.TAG_BASED, ReasoningMode.TOOLS_ONLY) and r.end:
            end = trim_ws(r.end)
            if r.start:
                start = p.optspace(r.start)
                if self.reasoning_preamble:  # improvement generation-prompt-preamble
                    start = start + p.optional(p.literal(self.reasoning_preamble) + p.space())
                    self.notes.append(f"improvement {GENERATION_PROMPT_PREAMBLE}: {self.reasoning_preamble!r} "
                                      "after the reasoning start is the template's, not reasoning")
                if REASONING_START_REPEATED in p.repairs:
                    # the model writes the opener again after the one the generation prompt (or it) wrote
                    start = start + p.optional(p.repair(REASONING_START_REPEATED,
                                                        p.space() + p.optspace(r.start)))
                block = start + p.reasoning(p.until(end)) + p.optspace(r.end)
                ahead = self.call_ahead(end) if CALL_ENDS_REASONING in p.repairs else None
                if ahead is not None:
                    # a call in the template's format opened before the end marker, with no end marker after it,
                    # ends the reasoning (the model went on to act); else the reasoning goes on past the opener.
                    # One reasoning prefix for every alternative (nothing shown is abandoned); a stream holds the
                    # text from the opener back until the end marker or the end of the output decides
                    block = (start + p.reasoning(p.until_one_of([end, ahead[0]]))
                             + p.choice(p.optspace(r.end), p.repair(CALL_ENDS_REASONING, p.peek(ahead[1])),
                                        p.reasoning(p.until(end)) + p.optspace(r.end)))
                    self.holds_calls = ahead[0]
                    self.notes.append(f"repair {CALL_ENDS_REASONING}: a call opened with {ahead[0]!r} before "
                                      f"{end!r} ends the reasoning")
                if self.reasoning_first and REASONING_END_WITHOUT_START in p.repairs:
                    # thinking is on and the prompt does not open it: the model reasons from its first token
                    # (a stripped or never-written start marker) until the end marker or a call opener
                    stops = [end] + [o for o in self.call_openers() if o != end]
                    # text that opens with JSON or a bracket is a call or a JSON answer (unmarked-calls, a
                    # response format), not reasoning
                    implicit = p.negate(p.space() + p.choice(p.literal("{"), p.literal("["))) + p.repair(
                        REASONING_END_WITHOUT_START, p.reasoning(p.until_one_of(stops)) + p.optional(p.optspace(r.end)))
                    self.notes.append(f"repair {REASONING_END_WITHOUT_START}: thinking is on and the generation "
                                      f"prompt does not open {trim_ws(r.start)!r}: the output is reasoning until "
                                      f"{end!r}" + (" or a call" if len(stops) > 1 else ""))
                    return p.optional(p.choice(block, implicit))
                return p.optional(block)
            return p.optional(p.reasoning(p.until(end)) + p.optspace(r.end))
        return p.eps()

    def call_openers(self) -> list[str]:
        """The marker that opens this request's tool calls (its section, else its call), [] without tools."""
        f, req = self.a.tools.format, self.req
        if not req.tools or req.tool_choice == ToolChoice.NONE or f.mode == ToolFormat.NONE:
            return []
        return [o for o in (trim_ws(f.section_start or ""), trim_ws(f.per_call_start or "")) if o][:1]

    def call_ahead(self, end: str) -> tuple[str, P] | None:
        """Repair ``call-ends-reasoning``: ``(opener, a parser that looks ahead at complete calls of this request,
        as the format's own call rule reads them, with no reasoning ``end`` marker after them)``, or None without
        tools. The call rule is referred to by :data:`CALL_AHEAD_RULE`, defined once the calls are built
        (:meth:`define_call_ahead`): a call the format cannot read (another layout, cut) never ends the reasoning,
        and a call quoted in reasoning that the model then closes stays reasoning (llama.cpp's reference case
        ref-0303)."""
        openers = self.call_openers()
        if not openers or not end:
            return None
        p = self.p
        head = end[0]
        # runs of characters that cannot start the end marker, else one character that does not start it
        skip = p.negate(p.literal(end)) + p.any()
        if head not in "]\\^-":
            skip = p.choice(p.chars(f"[^{head}]", 1, -1), skip)
        return openers[0], p.ref(CALL_AHEAD_RULE) + p.zero_or_more(skip) + p.end()

    def define_call_ahead(self) -> None:
        """The rule :meth:`call_ahead` refers to: the format's top call rule (``tool-calls``, else ``tool-call``);
        a parser that never matches when the format has none."""
        p = self.p
        rules = p.arena.rules
        top = next((n for n in ("tool-calls", "tool-call") if n in rules), None)
        calls = p.ref(top) if top is not None else p.negate(p.eps())
        if top == "tool-call" and self.first_call is not None:
            # the look-ahead skips what follows the call itself, so the first call decides; the calls' rule
            # would wait at the end of the output on text after the last call (content-between-calls)
            calls = self.first_call
        if self.compact_calls is not None:
            calls = p.choice(calls, self.compact_calls)
        p.rule(CALL_AHEAD_RULE, calls)

    def content_pre(self) -> P:
        """The content body without its final ``end()``."""
        p, c = self.p, self.a.content
        if c.is_always_wrapped():
            if self.extracting:
                if ANSWER_MARKER_WHITESPACE in p.repairs:
                    gap = p.optional(p.repair(ANSWER_MARKER_WHITESPACE, p.chars("[ \t\r\n]", 1, -1)))
                    return self.reasoning + gap + c.start + p.content(p.until(c.end)) + c.end
                return self.reasoning + c.start + p.content(p.until(c.end)) + c.end
            return p.content(p.until(c.start)) + c.start + p.content(p.until(c.end)) + c.end
        end = trim_ws(self.a.reasoning.end)
        start = trim_ws(self.a.reasoning.start)
        if self.extracting and end and start and self.interleaved and REASONING_BLOCKS_INTERLEAVED in p.repairs:
            # further reasoning blocks between pieces of the answer: reasoning, the text around them content
            block = p.repair(REASONING_BLOCKS_INTERLEAVED,
                             p.literal(start) + p.reasoning(p.until(end)) + p.optional(p.literal(end)))
            if REASONING_END_UNMATCHED in p.repairs:
                block = p.choice(block, p.repair(REASONING_END_UNMATCHED, p.literal(end)))
            piece = p.content(p.until_one_of([start, end])) + block
            return self.reasoning + p.zero_or_more(piece) + p.content(p.rest())
        if self.extracting and end and REASONING_END_UNMATCHED in p.repairs:
            # the end marker again after the reasoning closed (or with none open) closes nothing: markup
            stray = p.content(p.until(end)) + p.repair(REASONING_END_UNMATCHED, p.literal(end))
            return self.reasoning + p.zero_or_more(stray) + p.content(p.rest())
        return self.reasoning + p.content(p.rest())

    def optional_wrapped(self) -> P:
        p, c = self.p, self.a.content
        if c.is_always_wrapped():
            return p.optional(c.start + p.content(p.until(c.end)) + c.end)
        return p.eps()

    # -- tools ----------------------------------------------------------------------------------------------
    def tools_pre(self) -> P | None:
        mode = self.a.tools.format.mode
        if mode == ToolFormat.JSON_NATIVE:
            return self.json_native()
        if mode == ToolFormat.TAG_WITH_JSON:
            return self.tag_json()
        if mode == ToolFormat.TAG_WITH_TAGGED:
            return self.tag_tagged()
        if mode == ToolFormat.PYTHONIC:
            return self.pythonic()
        return None

    def pythonic(self) -> P:
        """The explorer's PYTHONIC format (improved fidelity only): optional content up to the section start,
        the section (``section_start`` calls ``section_end``; optional unless tool_choice is required), then
        optional content — templates of this format write the content after the calls."""
        p, f, req = self.p, self.a.tools.format, self.req
        calls = p.pythonic_tool_calls(req.tools, req.parallel_tool_calls, f.tools_array_wrapped)
        body = p.literal(f.section_start) + p.space() + calls + p.space() + p.literal(f.section_end)
        if PYTHON_CODE_MARKERS in p.repairs and not f.section_start and not f.section_end:
            # repair python-code-markers: Llama 4 writes the list inside <|python_start|> … <|python_end|>
            # (the end token may be left out), Llama 3.x after <|python_tag|>; the template renders it bare
            def marker(text: str) -> P:
                return p.repair(PYTHON_CODE_MARKERS, p.literal(text))
            body = p.choice(body,
                            marker("<|python_start|>") + p.space() + calls + p.space()
                            + p.optional(marker("<|python_end|>")),
                            marker("<|python_tag|>") + p.space() + calls)
        section = p.trigger_rule("tool-call", body)
        names = [fn["name"] for _, fn in indexed_function_tools(req.tools)]
        if (CALLS_AFTER_TEXT in p.repairs and req.tool_choice != ToolChoice.REQUIRED and not f.section_start
                and f.tools_array_wrapped and names):
            # repair calls-after-text: a call list may follow text, and text may sit between two lists; a list
            # starts where "[" meets a tool's name and "(" (or a code marker), never at any bracket of the text
            stops = [f"[{n}(" for n in names]
            if PYTHON_CODE_MARKERS in p.repairs:
                stops += ["<|python_start|>", "<|python_tag|>"]
            # a Markdown fence that holds only the list (Gemma 3 writes ```tool_code) is markup of the calls
            fences = [f"```{lang}\n" for lang in PYTHONIC_FENCE_LANGUAGES]
            stops += [fence + stop for fence in fences for stop in stops if stop.startswith("[")]
            fenced = p.choice(*(p.literal(fence) for fence in fences)) + section + p.space() + p.literal("```")
            self.released_stops = tuple(fences)
            section = p.choice(section, p.repair(CALLS_AFTER_TEXT, fenced))
            text = p.content(p.until_one_of(stops))
            return (self.reasoning + p.optional(section) + text
                    + p.zero_or_more(p.repair(CALLS_AFTER_TEXT, section) + text) + p.optional(p.content(p.rest())))
        if req.tool_choice != ToolChoice.REQUIRED:
            section = p.optional(section)
        before = p.until(f.section_start) if f.section_start else p.eps()
        return self.reasoning + p.optional(p.content(before)) + section + p.optional(p.content(p.rest()))

    def json_native(self) -> P:
        p, f = self.p, self.a.tools.format
        req = self.req
        name_field, args_field = f.name_field, f.args_field
        if f.function_field and f.function_field != "function" and "." not in name_field:
            name_field = f.function_field + "." + name_field
            args_field = f.function_field + "." + args_field
        force = req.tool_choice == ToolChoice.REQUIRED
        kw = dict(name_key=name_field, args_key=args_field, array_wrapped=f.tools_array_wrapped,
                  function_is_key=f.fun_name_is_key, call_id_key=f.id_field, gen_call_id_key=f.gen_id_field,
                  parameters_order=f.parameter_order, accept_openai_wrapper=f.openai_wrapper_trigger)
        if self.inferred:
            kw["optional_end"] = True
        pair = split_marker_pair(f.section_start) if not f.section_end else None
        if pair and CONTENT_INSIDE_SECTION_START in self.improvements:
            kw["content_inside_pair"] = True
            self.notes.append(f"improvement {CONTENT_INSIDE_SECTION_START}: content may sit between {pair[0]!r} and "
                              f"{pair[1]!r} before the calls")
        if not f.section_start and f.per_call_start:
            single = p.standard_json_tools(f.per_call_start, f.per_call_end, req.tools, req.parallel_tool_calls,
                                           force, **kw)
            tools = p.trigger_rule("tool-calls", p.one_or_more(single + p.space()))
            self.text_between_json_calls(single, trim_ws(f.per_call_start))
            if self.well_known:
                tools = p.repair(WELL_KNOWN_CALL_BLOCKS, tools)
        else:
            tools = p.standard_json_tools(f.section_start, f.section_end, req.tools, req.parallel_tool_calls,
                                          force, **kw)
            self.text_between_call_sections(tools, trim_ws(f.section_start), trim_ws(f.section_end), force)
        if self.a.content.is_always_wrapped():
            opened = self.open_content_before_calls(f.section_start or f.per_call_start)
            if opened is not None:
                return self.reasoning + opened + tools
            return self.reasoning + self.optional_wrapped() + tools
        tool_start = f.section_start or f.per_call_start or "{"
        if not f.section_start and not f.per_call_start and f.tools_array_wrapped \
                and JSON_ARRAY_START in self.improvements:
            tool_start = "["
            self.notes.append(f"improvement {JSON_ARRAY_START}: the content before the call array ends at '['")
        spaced: list[str] = []
        if "tag-whitespace" in p.repairs and trim_ws(tool_start):
            # the marker may come without its line breaks (p.flexible): the content also ends where it comes so
            spaced = line_break_spellings(tool_start)[1:]
            tool_start = trim_ws(tool_start)
        if pair and ("calls-inside-section-markers" in p.repairs or kw.get("content_inside_pair")):
            tool_start = pair[0]               # the calls (or the content) may follow the first marker alone
        stops, variants = self.json_call_variants()
        if variants:
            # issue 25 repairs: the content also ends where a wrapper of the calls starts, and the calls may come
            # in that wrapper (each variant starts with its own marker, so it fails where another text stands)
            body = p.optional(p.content(p.until_one_of([tool_start] + spaced + stops))) + p.choice(*variants, tools)
        elif spaced:
            body = p.optional(p.content(p.until_one_of([tool_start] + spaced))) + tools
        else:
            body = p.optional(p.content(p.until(tool_start))) + tools
        if self.inferred:
            # instructions say how a call starts, not that the answer ends with it: text after the calls is content
            body = body + p.optional(p.content(p.rest()))
        if self.inferred and not self.well_known:
            self.notes.append(f"improvement {INSTRUCTION_CALL_FORMAT}: the tool-call format was read from the tool "
                              "instructions; its end marker is optional and content may follow the calls")
        unmarked = self.unmarked_calls(bool(f.section_start or f.per_call_start))
        if unmarked is not None:
            body = p.choice(unmarked, body)
        self.calls_in_think_block(body, trim_ws(tool_start))
        return self.reasoning + body

    def calls_in_think_block(self, body: P, opener: str) -> None:
        """Repair ``think-block-calls``: the JSON calls' ``body`` also reads, first, the leading ``<think>`` block
        holding the call ``opener`` (:meth:`unplaced_think_block`), then the calls after it (widened once the tree
        is built: the grammar stays the template's). A stream shows the open block as content; a block never
        closed is thought to the end (content, no call)."""
        if opener and self.reads_unplaced_think_block(opener):
            self.p.late.append(lambda: self.p.widen_late(body, THINK_BLOCK_CALLS,
                                                         lambda orig: self.unplaced_think_block(opener) + orig,
                                                         first=True))

    def reads_unplaced_think_block(self, call_opener: str = "") -> bool:
        """Whether :meth:`unplaced_think_block` reads a block for this template and request: the template places
        none (its analysis finds no reasoning markup) and the repair is on — ``leading-think-block`` (no
        ``call_opener``) when reasoning is extracted, ``think-block-calls`` when the template's source has no
        ``<think>``."""
        if self.a.reasoning.mode != ReasoningMode.NONE:
            return False
        if not call_opener:
            return LEADING_THINK_BLOCK in self.p.repairs and self.req.reasoning_format != ReasoningFormat.NONE
        return THINK_BLOCK_CALLS in self.p.repairs and THINK_BLOCK[0] not in self.template_source

    def unplaced_think_block(self, call_opener: str = "") -> P:
        """The one reader of a ``<think>`` … ``</think>`` block (:data:`THINK_BLOCK`) that opens the output of a
        template placing none, for the two repairs that read it (:meth:`reads_unplaced_think_block` says when):

        * ``leading-think-block`` (no ``call_opener``): the text inside is reasoning, to the end when the block
          never closes (a record of its own);
        * ``think-block-calls`` (the JSON calls' ``call_opener``): a closed block holding ``call_opener`` is
          content as written, the calls inside it thought, not calls (the caller's widening records it).

        Either way the block is read before the template's own reading, so the calls after it are read as usual;
        with both on, the first reads the block and the second is never needed."""
        p = self.p
        start, end = THINK_BLOCK
        if not call_opener:
            self.notes.append(f"repair {LEADING_THINK_BLOCK}: a {start!r} block at the start of the output is "
                              "reasoning")
            return p.repair(LEADING_THINK_BLOCK, p.optspace(start) + p.reasoning(p.until(end))
                            + p.optional(p.optspace(end)))
        # (the peek first: a cut "<t" must not show as content before the block is known to open)
        return p.peek(p.literal(start)) + p.content(p.literal(start) + p.until_one_of([end, call_opener])
                                                    + p.literal(call_opener) + p.until(end) + p.literal(end))

    def text_between_json_calls(self, single: P, opener: str) -> None:
        """Repair ``content-between-calls`` for JSON calls each in its own marker block (Granite 4, Hermes:
        ``<tool_call>{…}</tool_call>``): where a further call block is expected and text stands instead, the text
        up to the next block's ``opener`` is content and the block a call (``single``, widened once the tree is
        built and tried after the template's reading: the grammar, and the stream's fast path after a call, stay
        as they were). The whitespace right after a call stays layout; text after the last call is the trailing
        content it always was."""
        p = self.p
        if CONTENT_BETWEEN_CALLS not in p.repairs or not opener or not self.req.parallel_tool_calls:
            return
        # the text stops at a reasoning end marker too: a call followed by one was quoted in the reasoning
        # (call-ends-reasoning leaves it there), not a call with text after it
        stops = [opener] + [m for m in (trim_ws(self.a.reasoning.end),) if m]
        node = p.arena.nodes[single.id]
        # standard_json_tools gives the block optional unless the calls are required: widen the block itself
        block = P(node.child, p) if getattr(node, "min", None) == 0 and getattr(node, "max", None) == 1 else single
        p.late.append(lambda: p.widen_late(block, CONTENT_BETWEEN_CALLS, lambda orig: (
            p.content(p.until_one_of(stops)) + p.peek(p.literal(opener)) + orig)))

    def text_between_call_sections(self, tools: P, start: str, end: str, force: bool) -> None:
        """Repair ``content-between-calls`` for JSON calls in a marked section (Apertus
        ``<|tools_prefix|>[…]<|tools_suffix|>``): keeps the section's ``start`` marker and node for :meth:`build`,
        which lets text and a further section, once or more, come where the end of the output was expected."""
        p = self.p
        if CONTENT_BETWEEN_CALLS not in p.repairs or not start or not end or force or not self.req.parallel_tool_calls:
            return
        node = p.arena.nodes[tools.id]
        section = P(node.child, p) if getattr(node, "min", None) == 0 and getattr(node, "max", None) == 1 else tools
        self.later_sections = (start, section)

    def sections_after_text(self, final_end: P) -> None:
        """The second half of :meth:`text_between_call_sections`: once the tree is built, the root's ``final_end``
        may instead be preceded by text and a further section, once or more, and text after the last (tried only
        where the end of the output is not there; the grammar stays the template's). Text after the last section
        reads as before."""
        if self.later_sections is None:
            return
        p, (start, section) = self.p, self.later_sections
        # the text is read a character at a time up to the marker and the variant fails, cleanly, at the end of
        # the output: with no further section it reads nothing (an until would wait there for more, and the
        # lenient parse would take the wait for a reading of the text)
        text = p.content(p.zero_or_more(p.negate(p.end()) + p.negate(p.literal(start)) + p.any()))
        further = text + p.negate(p.end()) + p.peek(p.literal(start)) + section
        p.late.append(lambda: p.widen_late(final_end, CONTENT_BETWEEN_CALLS, lambda orig: (
            p.one_or_more(further) + p.optional(p.content(p.rest())) + orig)))

    def json_call_variants(self) -> tuple[list[str], list[P]]:
        """The issue-25 repairs of a JSON call format, as ``(stops, variants)``: markers where the content before
        the calls also ends, and call sections that start with one of them (tried before the template's).

        * ``python-code-markers`` / ``builtin-call-syntax``, a format without markers whose template knows Llama
          3.x's ``<|python_tag|>`` or is written in Llama 3's chat format (``<|start_header_id|>``; vLLM's
          llama3_json takes the tag for every Llama 3.x): the tag, then the template's JSON call(s) or — when the
          template writes ``.call(`` — a built-in tool call ``NAME.call(key=value, …)``;
        * ``json-call-wrappers``, a format without markers (xLAM) or opened by ``<|tool_call|>`` (Granite): the
          JSON call(s) in a ```` ```json ```` / ```` ``` ```` fence, in ``<tool_call>`` … ``</tool_call>`` (the
          closers optional), or after ``[TOOL_CALLS]``; a format without markers whose template's instructions
          show the calls as ``WORD[{"name": …}, …]`` (Phi-4-mini's ``functools[…]``): the calls in ``WORD[`` … ``]``.
        """
        p, f, req = self.p, self.a.tools.format, self.req
        calls = p.last_json_calls
        stops: list[str] = []
        variants: list[P] = []
        start = trim_ws(f.section_start or f.per_call_start)
        if calls is None or trim_ws(f.section_end or f.per_call_end):
            return stops, variants
        tag = "<|python_tag|>"
        # the token of Llama 3.x's tokenizer: the template names it, or is written in Llama 3's chat format
        if not start and (tag in self.template_source or "<|start_header_id|>" in self.template_source):
            alts: list[P] = []
            if PYTHON_CODE_MARKERS in p.repairs:
                alts.append(calls)
            if BUILTIN_CALL_SYNTAX in p.repairs and ".call(" in self.template_source:
                alts.append(p.repair(BUILTIN_CALL_SYNTAX, p.pythonic_tool_calls(req.tools, False, False, ".call",
                                                                              "builtin-call-")))
            if alts:
                marker = p.repair(PYTHON_CODE_MARKERS, p.literal(tag)) if PYTHON_CODE_MARKERS in p.repairs \
                    else p.literal(tag)
                stops.append(tag)
                tagged = marker + p.space() + p.choice(*alts)
                if PYTHON_CODE_MARKERS in p.repairs and req.parallel_tool_calls:
                    # the tag again before each further call (SGLang's Llama 3.2 detector splits on it)
                    tagged = tagged + p.zero_or_more(p.space() + p.repair(PYTHON_CODE_MARKERS, p.literal(tag))
                                                     + p.space() + p.choice(*alts))
                variants.append(p.trigger_rule("tool-call-python-tag", tagged))
        listed = _LISTED_CALLS.search(self.template_source) if not start else None
        if JSON_CALL_WRAPPERS in p.repairs and listed is not None:
            # the template's tool instructions show the calls as WORD[{"name": …}, …] (Phi-4-mini's functools[…])
            def named(text: str) -> P:
                return p.repair(JSON_CALL_WRAPPERS, p.literal(text))
            word = listed.group(1)
            stops.append(word + "[")
            if f.tools_array_wrapped:
                body = named(word) + calls
            else:
                body = named(word + "[") + p.space() + calls + p.space() + p.optional(named("]"))
            variants.append(p.trigger_rule("tool-call-listed", body))
        if JSON_CALL_WRAPPERS in p.repairs and start in ("", "<|tool_call|>"):
            def mark(text: str) -> P:
                return p.repair(JSON_CALL_WRAPPERS, p.literal(text))
            opener = "[" if f.tools_array_wrapped else "{"
            stops += ["```json", "```" + opener, "```\n" + opener, "<tool_call>", "[TOOL_CALLS]"]
            variants.append(p.trigger_rule("tool-call-wrapped", p.choice(
                p.choice(mark("```json"), mark("```")) + p.space() + calls + p.space() + p.optional(mark("```")),
                mark("<tool_call>") + p.space() + calls + p.space() + p.optional(mark("</tool_call>")),
                mark("[TOOL_CALLS]") + p.space() + calls)))
        return stops, variants

    def unmarked_calls(self, has_markers: bool) -> P | None:
        """Repairs ``fenced-calls`` / ``unmarked-calls`` (:mod:`core.chat.repairs`): the JSON calls at the very
        start of the answer inside a Markdown code fence, or (when the format has call markers) without their
        markers, then optional content. None when neither repair is on or there are no calls to reuse."""
        p = self.p
        calls = p.last_json_calls
        if calls is None:
            return None
        alts: list[P] = []
        if "fenced-calls" in p.repairs:
            fence = p.literal("```") + p.optional(p.choice(p.literal("json"), p.literal("tool_call"))) + p.space()
            alts.append(p.repair("fenced-calls", fence + calls + p.space() + "```"))
        if "unmarked-calls" in p.repairs and has_markers:
            alts.append(p.repair("unmarked-calls", calls))
        if not alts:
            return None
        return p.space() + p.choice(*alts) + p.optional(p.content(p.rest()))

    def open_content_before_calls(self, tool_start: str) -> P | None:
        """Improvement ``open-content-before-calls``: wrapped content that the generation prompt already opened
        (it ends with ``content.start``) is written without its start marker and may end where the tool calls
        start instead of at ``content.end``; None when the improvement is off or does not apply."""
        p, c = self.p, self.a.content
        start = trim_ws(c.start)
        if OPEN_CONTENT_BEFORE_CALLS not in self.improvements or not tool_start or not start \
                or not self.generation_prompt.rstrip(_WS).endswith(start):
            return None
        stops = [d for d in (trim_ws(c.end), tool_start) if d]
        if TAG_WHITESPACE in p.repairs:
            stops += line_break_spellings(tool_start)[1:]
        self.notes.append(f"improvement {OPEN_CONTENT_BEFORE_CALLS}: the generation prompt opens the content; it "
                          f"ends at {' or '.join(repr(s) for s in stops)}")
        return p.optional(p.content(p.until_one_of(stops)) + p.optional(p.literal(trim_ws(c.end))))

    def func_parser(self, name: str, call_id: P, have_call_id: bool, args: P, atomic_peek: P | None,
                    after_name: tuple[str, ...] = ()) -> P:
        """One call of tool ``name``; ``after_name``: the markers that may follow the name at once when the
        model leaves the template's args separator out (repair ``args-separator-omitted``; empty: never)."""
        p, fn, f = self.p, self.a.tools.function, self.a.tools.format
        cid = self.a.tools.call_id
        if CALL_ID_BEFORE_NAME in self.improvements and cid.pos == CallIdPosition.PRE_FUNC_NAME and cid.suffix \
                and fn.name_prefix.startswith(cid.suffix):
            # the id sits inside the opening, before the name: the mapper reads it once the call has started
            note = (f"improvement {CALL_ID_BEFORE_NAME}: the call id is read before the function name, up to "
                    f"{cid.suffix!r}")
            if note not in self.notes:
                self.notes.append(note)
            open_ = p.tool_open(p.optional(p.tool_id(p.until(cid.suffix))) + fn.name_prefix
                                + p.tool_name(p.literal(name)) + fn.name_suffix)
        else:
            open_ = p.tool_open(fn.name_prefix + p.tool_name(p.literal(name)) + fn.name_suffix)
        if fn.args_separator:
            sep = p.literal(fn.args_separator)
            if ARGS_SEPARATOR_OMITTED in p.repairs and after_name:
                # repair args-separator-omitted: the name followed at once by the first argument's marker or
                # the call's closer (a longer declared name never matches: the marker must come next); widened
                # once the tree is built, so the grammar stays byte-identical to llama.cpp's
                p.late.append(lambda: p.widen_late(sep, ARGS_SEPARATOR_OMITTED, lambda _: p.peek(
                    p.choice(*(p.literal(m) for m in after_name)))))
            open_ = open_ + p.space() + sep
        matched_atomic = True
        if fn.name_suffix:
            body = open_ + call_id + p.space() + args
        elif have_call_id:
            body = p.atomic(open_ + call_id) + p.space() + args
        elif atomic_peek is not None:
            body = p.atomic(open_ + call_id + p.space() + atomic_peek) + args
        else:
            body = open_ + call_id + p.space() + args
            matched_atomic = False
        if fn.close:
            body = body + p.space() + p.tool_close(p.literal(fn.close))
        elif f.per_call_end:
            if self.a.tools.arguments.tolerate_intertag_whitespace:
                peek = p.peek(p.space() + p.literal(f.per_call_end))
            else:
                peek = p.peek(p.literal(f.per_call_end))
                if "call-marker-whitespace" in p.repairs:
                    # repair call-marker-whitespace: a line break before the call's closer the template omits
                    peek = p.choice(peek, p.repair("call-marker-whitespace", p.chars("[ \t\r\n]", 1, -1))
                                    + p.peek(p.literal(f.per_call_end)))
            body = body + p.tool_close(peek)
        else:
            body = body + p.tool_close(p.space())
        if not matched_atomic:
            body = p.atomic(body)
        return body

    def loose_marker(self, text: str) -> P:
        """``text`` as the template writes it or, with repair ``call-marker-whitespace``, with any whitespace
        (or none) where it has line breaks and after it (a marker without whitespace: also whitespace before
        it); the exact text is tried first."""
        p = self.p
        if "call-marker-whitespace" not in p.repairs or not text.strip():
            return p.literal(text)
        if "\n" in text:
            return p.flexible(text, "call-marker-whitespace")
        return p.choice(p.literal(text), p.repair("call-marker-whitespace", p.chars("[ \t\r\n]", 1, -1)
                                                  + p.literal(text)))

    def call_id_section(self, inside_suffix: bool) -> tuple[P, bool]:
        p, cid, args = self.p, self.a.tools.call_id, self.a.tools.arguments
        eps = p.eps()
        if cid.pos == CallIdPosition.BETWEEN_FUNC_AND_ARGS and cid.prefix and (cid.suffix or args.start):
            if cid.suffix:
                if inside_suffix:
                    return p.optional(cid.prefix + p.tool_id(p.until(cid.suffix)) + cid.suffix), True
                return p.optional(cid.prefix + p.tool_id(p.until(cid.suffix))) + cid.suffix, True
            return p.optional(cid.prefix + p.tool_id(p.until(args.start))), True
        return eps, False

    def call_separator(self) -> P:
        """Between parallel calls that have no per-call markers: the reference's ``", "``, or whitespace
        (divergence: templates such as MiniMax-M2 write consecutive ``<invoke …>`` blocks separated by the
        newline their close marker ends with; with only ``", "`` the second call made the whole section
        unparsable and every call fell back to content — found by the round-trip test,
        ``core.chat.roundtrip``)."""
        p = self.p
        return p.choice(p.literal(", "), p.space())

    def content_before_tagged_calls(self, trigger: str, before: P) -> P:
        """The optional content before tag-based calls: plain text up to ``trigger`` (llama.cpp), or, with
        improvement ``wrapped-content-tagged-calls`` and always-wrapped content, first the wrapped form: the
        content start marker, the content up to its end marker or ``trigger``, the end marker optional (a
        template whose content end is its end of turn never has it in an answer)."""
        p, c = self.p, self.a.content
        plain = p.optional(p.content(before))
        start, end = trim_ws(c.start), trim_ws(c.end)
        if WRAPPED_CONTENT_TAGGED_CALLS not in self.improvements or not c.is_always_wrapped() or not start \
                or not end:
            return plain
        self.notes.append(f"improvement {WRAPPED_CONTENT_TAGGED_CALLS}: content after {start!r} ends at {end!r} "
                          f"(optional){' or ' + repr(trigger) if trigger else ''}")
        stops = [end] + ([trigger] if trigger else [])
        wrapped = p.literal(start) + p.content(p.until_one_of(stops)) + p.optional(p.literal(end))
        return p.choice(wrapped, plain)

    def _trigger_content(self) -> tuple[str, P]:
        p, f = self.p, self.a.tools.format
        trigger = f.section_start or f.per_call_start
        return trigger, (p.until(trigger) if trigger else p.eps())

    def tag_json(self) -> P:
        p, f, args_a = self.p, self.a.tools.format, self.a.tools.arguments
        req = self.req
        p.choice()
        choices: list[P] = []
        for idx, fn in indexed_function_tools(req.tools):
            name = fn["name"]
            call_id, have_id = self.call_id_section(inside_suffix=False)
            args = p.tool_args(p.schema(p.json(), f"tool-{idx}-schema", tool_parameters(fn)))
            if args_a.start:
                args = p.literal(args_a.start) + args
            if args_a.end:
                args = args + p.literal(args_a.end)
            peek = p.peek(p.literal(args_a.start)) if args_a.start else None
            choices.append(p.rule(f"tool-{idx}", self.func_parser(name, call_id, have_id, args, peek)))
        choice = p.choice(*choices)
        if f.per_call_start:
            wrapped = f.per_call_start + choice + f.per_call_end
            if req.parallel_tool_calls:
                next_call = p.space() + wrapped
                calls = p.trigger_rule("tool-call", wrapped + p.zero_or_more(next_call))
                opener = trim_ws(f.section_start)
                if opener and f.section_end and SECTION_OPENER_REPEATED in p.repairs:
                    # repair section-opener-repeated: the section's opener written again before a further call
                    p.late.append(lambda: p.widen_late(next_call, SECTION_OPENER_REPEATED, lambda orig: (
                        p.space() + p.literal(opener) + orig)))
            else:
                calls = p.trigger_rule("tool-call", wrapped)
            if f.section_start:
                calls = p.trigger_rule("tool-calls", p.literal(f.section_start) + p.space() + calls + p.space()
                                       + (p.end() if not f.section_end else p.literal(f.section_end)))
                if f.section_end and req.parallel_tool_calls:   # repair consecutive-call-blocks (build())
                    self.next_section = trim_ws(f.section_start)
        else:
            if req.parallel_tool_calls:
                calls = p.trigger_rule("tool-call", f.section_start + choice
                                       + p.zero_or_more(self.call_separator() + choice) + f.section_end)
            else:
                calls = p.trigger_rule("tool-call", f.section_start + choice + f.section_end)
        if req.tool_choice != ToolChoice.REQUIRED:
            calls = p.optional(calls)
        trigger, before = self._trigger_content()
        with_content = self.content_before_tagged_calls(trigger, before) + calls
        bare = self.bare_first_call(choice)
        if bare is not None:
            return self.reasoning + p.choice(bare, with_content)
        return self.reasoning + with_content

    def bare_first_call(self, choice: P) -> P | None:
        """Improvement ``call-turn-header``: when every call is its own turn and the generation prompt ends with
        that turn's header (the per-call start), a model that calls a tool straight away writes the first call
        without it (``get_weather\n<|content|>{…}`` after ``…<|recipient|>``); the calls after it keep theirs.
        None when the improvement is off or does not apply."""
        p, f = self.p, self.a.tools.format
        start = trim_ws(f.per_call_start)
        if CALL_TURN_HEADER not in self.improvements or not start or f.section_start \
                or not self.generation_prompt.rstrip(_WS).endswith(start):
            return None
        self.notes.append(f"improvement {CALL_TURN_HEADER}: the generation prompt writes the first call's "
                          f"header {start!r}; a call may start the output without it")
        first = choice + f.per_call_end
        if self.req.parallel_tool_calls:
            wrapped = f.per_call_start + choice + f.per_call_end
            return p.rule("tool-call-bare", first + p.zero_or_more(p.space() + wrapped))
        return p.rule("tool-call-bare", first)

    def tag_tagged(self) -> P:
        p, req = self.p, self.req
        calls = self.tagged_calls("")
        compact = compact_tools(self.a.tools) if TAG_WHITESPACE in p.repairs else None
        if compact is not None:
            # repair tag-whitespace: the same calls with the markers' layout whitespace optional (the template
            # writes <minimax:tool_call>\n<invoke name="f">\n…; engines' fixtures write the tags back to back),
            # built on a copy of the format whose markers are trimmed, rule names apart; tried after the template's
            whole = self.a
            self.a = replace(whole, tools=compact)
            try:
                loose = p.repair(TAG_WHITESPACE, self.tagged_calls("compact-"))
            finally:
                self.a = whole
            self.compact_calls = loose
            calls = p.choice(calls, loose)
        if req.tool_choice != ToolChoice.REQUIRED:
            calls = p.optional(calls)
        trigger, before = self._trigger_content()
        if compact is not None and trim_ws(trigger) != trigger:
            before = p.until(trim_ws(trigger))   # the content before the calls ends at the marker without its layout
        content = self.content_before_tagged_calls(trigger, before)
        opener = trim_ws(self.a.tools.format.per_call_start)
        if STANDALONE_JSON_CALL in p.repairs and opener == "<tool_call>" and not self.a.tools.format.section_start:
            # repair standalone-json-call: the answer starts with a Hermes JSON call with no markers at all, text
            # after it is content; widened once the tree is built (the grammar stays the template's), tried first.
            # Only at the answer's start: a variant that first scans text for a later call would run off the end
            # of every answer without one, and a stream could not tell text from a call's lead-in
            p.late.append(lambda: p.widen_late(content, STANDALONE_JSON_CALL, lambda _: (
                p.space() + p.flat_json_call(req.tools, rule_prefix="standalone-json-tool-")
                + p.optional(p.content(p.rest()))), first=True))
        return self.reasoning + content + calls

    def tagged_calls(self, prefix: str) -> P:
        """The TAG_WITH_TAGGED calls of the analysed format (without the content before them); ``prefix`` sets the
        rule names apart (repair ``tag-whitespace`` builds a second copy)."""
        p, f, a = self.p, self.a.tools.format, self.a.tools.arguments
        req = self.req
        until_suffix = p.rule(prefix + "until-suffix", p.until(a.value_suffix))
        mistyped = "mistyped-value-as-string" in p.repairs
        p.choice()
        choices: list[P] = []
        for idx, fn in indexed_function_tools(req.tools):
            name = fn["name"]
            params = tool_parameters(fn)
            root = schema_from_json_lenient(params)
            required: list[P] = []
            optional: list[P] = []
            props = root.properties if isinstance(root, ObjectSchema) else []
            raw_props = params.get("properties") if isinstance(params, dict) else None
            for j, prop in enumerate(props):
                if may_be_string(prop.schema):
                    text = p.tool_arg_string_value(until_suffix)
                    value = text + p.tool_arg_close(p.literal(a.value_suffix))
                    if a.value_suffix:
                        value = p.ac(value, a.value_suffix)
                    if NULLABLE_NULL in p.repairs and a.value_suffix and "null" in value_types(prop.schema):
                        # repair nullable-null: the text null, alone up to the value's closing tag, is JSON null
                        p.late.append(lambda text=text: p.widen_late(text, NULLABLE_NULL, lambda _: (
                            p.tool_arg_json_value(p.literal("null")) + p.peek(p.literal(a.value_suffix))),
                            first=True))
                    others = union_other_types(value_types(prop.schema))
                    if UNION_TYPED_VALUE in p.repairs and a.value_suffix and others:
                        # repair union-typed-value: a JSON value of a type the union allows besides string,
                        # alone up to the value's closing tag, is that value (atomic: known at its end)
                        p.late.append(lambda text=text, others=others: p.widen_late(
                            text, UNION_TYPED_VALUE, lambda _: p.atomic(p.tag(TOOL_ARG_VALUE, p.choice(
                                *(_JSON_READERS[t](p) for t in others))) + p.peek(p.literal(a.value_suffix))),
                            first=True))
                elif SCHEMA_TYPE_ALIAS in p.repairs and a.value_suffix and string_type_alias(
                        raw_props.get(prop.name) if isinstance(raw_props, dict) else None):
                    # repair schema-type-alias: a type written "str" / "text" is a string (the raw text, tried
                    # first), not the any-JSON value llama.cpp makes of an unknown type (the grammar stays its)
                    typed = p.tool_arg_json_value(p.schema(p.json(), f"{prefix}tool-{idx}-arg-{j}-schema",
                                                           prop.schema))
                    value = typed + p.tool_arg_close(p.literal(a.value_suffix))
                    p.late.append(lambda typed=typed: p.widen_late(typed, SCHEMA_TYPE_ALIAS, lambda _: (
                        p.tool_arg_string_value(until_suffix)), first=True))
                else:
                    typed = p.tool_arg_json_value(p.schema(p.json(), f"{prefix}tool-{idx}-arg-{j}-schema",
                                                           prop.schema))
                    value = typed + p.tool_arg_close(p.literal(a.value_suffix))
                    if SPACED_TYPED_VALUE in p.repairs and a.value_suffix:
                        # repair spaced-typed-value: whitespace before or after the JSON value, up to the value's
                        # closing tag (atomic: a stream shows the value once it is whole; a value without any
                        # whitespace fails here and is read as before)
                        p.late.append(lambda typed=typed: p.widen_late(typed, SPACED_TYPED_VALUE, lambda orig: (
                            p.atomic(p.choice(p.chars("[ \t\r\n]", 1, -1) + orig + p.space(),
                                              orig + p.chars("[ \t\r\n]", 1, -1))
                                     + p.peek(p.literal(a.value_suffix)))), first=True))
                    if mistyped and a.value_suffix and _scalar_only(prop.schema):
                        # repair mistyped-value-as-string: the whole typed value (atomic: its type is known
                        # at its end), else the text up to the value suffix as a string
                        as_string = p.ac(p.tool_arg_string_value(until_suffix)
                                         + p.tool_arg_close(p.literal(a.value_suffix)), a.value_suffix)
                        value = p.choice(p.atomic(value), p.repair("mistyped-value-as-string", as_string))
                    if QUOTED_NUMBER in p.repairs and a.value_suffix:
                        value = p.quoted_number_first(value, prop.schema, p.tool_arg_close(p.literal(a.value_suffix)))
                # repair call-marker-whitespace: the key's closer and the value's opener with any whitespace
                arg = p.tool_arg(p.tool_arg_open(a.name_prefix + p.tool_arg_name(p.literal(prop.name))
                                                 + self.loose_marker(a.name_suffix))
                                 + self.loose_marker(a.value_prefix) + value)
                named = p.rule(f"{prefix}tool-{idx}-arg-{j}", arg)
                (required if prop.required else optional).append(named)
            seq = p.required_then_optional(required, optional)
            if "argument-order" in p.repairs:
                from .repairs import any_order_args   # repair argument-order: any order, tried after

                any_order = any_order_args(p, f"{prefix}tool-{idx}-any-order", required, optional, p.space())
                if any_order is not None:
                    seq = p.choice(seq, any_order)
            if "missing-required-argument" in p.repairs and required:
                # repair missing-required-argument: the declared parameters, each at most once, the required
                # ones may be missing (checking the schema is the client's job), tried last
                seq = p.choice(seq, p.repair("missing-required-argument",
                                             _any_subset(p, f"{prefix}tool-{name}-subset", required + optional)))
            if a.start:
                seq = p.literal(a.start) + seq
            if a.end:
                seq = seq + p.literal(a.end)
            call_id, have_id = self.call_id_section(inside_suffix=True)
            peek = p.peek(p.literal(a.name_prefix)) if (a.name_prefix and required) else None
            after_name = tuple(m for m in (trim_ws(a.start) or trim_ws(a.name_prefix), trim_ws(self.a.tools.function.close),
                                           trim_ws(f.per_call_end)) if m)
            choices.append(p.rule(f"{prefix}tool-{idx}", self.func_parser(name, call_id, have_id, seq, peek,
                                                                            after_name)))
        choice = p.choice(*choices)
        if JSON_CALL_IN_TAGS in p.repairs and not prefix and trim_ws(f.per_call_start) == "<tool_call>":
            # repair json-call-in-tags: the Hermes JSON call inside the template's <tool_call> (GLM), tried after
            p.late.append(lambda: p.widen_late(choice, JSON_CALL_IN_TAGS, lambda _: p.flat_json_call(req.tools)))
        rule = p.rule if prefix else p.trigger_rule
        if f.per_call_start:
            wrapped = f.per_call_start + p.space() + choice + p.space() + f.per_call_end
            if req.parallel_tool_calls:
                next_call = p.space() + wrapped
                if "content-between-calls" in p.repairs:
                    # repair content-between-calls: text between two calls is content (whitespace included)
                    # (the text stops at the section end, and never runs to the end of the output: text after
                    # the last call is the trailing content it always was)
                    stops = [f.per_call_start] + ([f.section_end] if f.section_end else [])
                    next_call = p.choice(next_call, p.repair("content-between-calls", p.content(
                        p.until_one_of(stops)) + p.negate(p.end()) + wrapped))
                    if not prefix and not f.section_end:
                        # that text runs to the end of the output after the last call and waits there (lenient
                        # parse), so the look-ahead of call-ends-reasoning reads the first call alone
                        self.first_call = wrapped
                calls = rule(prefix + "tool-call", wrapped + p.zero_or_more(next_call) + p.space())
            else:
                calls = rule(prefix + "tool-call", wrapped + p.space())
            if f.section_start:
                calls = rule(prefix + "tool-calls", p.literal(f.section_start) + p.space() + calls + p.space()
                                       + (p.end() if not f.section_end else p.literal(f.section_end) + p.space()))
                if f.section_end and req.parallel_tool_calls and not prefix:   # repair consecutive-call-blocks
                    self.next_section = trim_ws(f.section_start)
        else:
            if req.parallel_tool_calls:
                calls = rule(prefix + "tool-call", f.section_start + p.space() + choice
                                       + p.zero_or_more(self.call_separator() + choice) + p.space()
                                       + f.section_end)
                if trim_ws(f.section_start) and trim_ws(f.section_end) and not prefix \
                        and SECTION_PER_CALL in p.repairs:
                    # repair section-per-call: a further section (one call each) right after the first (build())
                    self.next_section = trim_ws(f.section_start)
                    self.next_section_rule = SECTION_PER_CALL, "tool-call"
            else:
                calls = rule(prefix + "tool-call", f.section_start + p.space() + choice + p.space()
                                       + f.section_end)
        return calls

    # -- top level ------------------------------------------------------------------------------------------
    def build(self, generation_prompt: str) -> tuple[Arena, bool]:
        p, a, req = self.p, self.a, self.req
        has_tools = bool(req.tools)
        has_rf = isinstance(req.json_schema, dict) and bool(req.json_schema)
        pure_content = a.reasoning.mode == ReasoningMode.NONE
        eps_fallback = False
        p.eps()
        if has_rf:
            rf = p.rule("response-format", p.content(p.schema(p.json(), "response-format-schema", req.json_schema)))
            pre = self.reasoning + p.space() + p.choice(p.literal("```json") + p.space() + rf + p.space() + "```",
                                                        p.space() + rf + p.space())
            pure_content = False
        elif has_tools and req.tool_choice != ToolChoice.NONE and (a.caps.supports_tool_calls
                                                                   or self.inferred):
            pre = self.tools_pre()
            pure_content = False
            if pre is None:
                eps_fallback = True
                self.notes.append("the template seems to support tool calls but its tool format was not "
                                  "detected: tool calls will not be parsed")
        else:
            pre = self.content_pre()
        if self.holds_calls:
            self.define_call_ahead()
        prefix = p.prefix(generation_prompt, trim_ws(a.reasoning.start))
        if pre is None:
            root = prefix << p.eps()
        else:
            if not pure_content and not has_rf and TRAILING_EOS_TOKEN in p.repairs:
                pre = pre + trailing_eos(p)   # a stop token the server left after the last call
            final_end = p.end()
            body = pre + final_end
            root = prefix + body if pure_content else prefix << body
            if self.next_section:   # repair consecutive-call-blocks: further call sections before the end
                next_call_section(p, final_end, self.next_section, self.next_section_rule[1],
                                  self.next_section_rule[0])
            self.sections_after_text(final_end)   # repair content-between-calls: sections after text
        entries: dict[str, P] = {RECOVER_CONTENT: prefix + self.reasoning + p.content(p.rest())}
        if pre is not None:
            entries[RECOVER_TRAILING] = prefix + pre + p.content(p.rest()) if pure_content \
                else prefix << (pre + p.content(p.rest()))
        return p.build(root, entries), eps_fallback


def line_break_spellings(marker: str) -> list[str]:
    """``marker`` without the whitespace at its ends, then the same marker with every inner run of whitespace that
    holds a line break written as one space or as nothing (Command R+'s ``Action:\\n```json`` written ``Action:
    ```json``): the spellings :meth:`~core.peg.chat.ChatBuilder.flexible` reads (repair ``tag-whitespace``), as
    literal stops for the content before the marker. At most 3**3 spellings (the runs after the third keep theirs)."""
    runs = [("".join(g), ws) for ws, g in groupby(trim_ws(marker), key=lambda ch: ch in _WS)]
    spellings, varied = [""], 0
    for run, ws in runs:
        ways = [run]
        if ws and "\n" in run and varied < 3:
            ways, varied = [run, " ", ""], varied + 1
        spellings = [s + w for s in spellings for w in ways]
    return list(dict.fromkeys(spellings))


def compact_tools(tools: ToolsAnalysis) -> ToolsAnalysis | None:
    """Repair ``tag-whitespace`` for tagged calls: a copy of ``tools`` whose markers are trimmed of the layout
    whitespace the template writes around them (``<minimax:tool_call>\n`` → ``<minimax:tool_call>``, ``">\n`` →
    ``">``); the parser allows whitespace between the trimmed markers. None when no marker has any."""
    f, fn, a, cid = tools.format, tools.function, tools.arguments, tools.call_id
    trimmed = replace(
        tools,
        format=replace(f, section_start=trim_ws(f.section_start), section_end=trim_ws(f.section_end),
                       per_call_start=trim_ws(f.per_call_start), per_call_end=trim_ws(f.per_call_end)),
        function=replace(fn, name_prefix=trim_ws(fn.name_prefix), name_suffix=trim_ws(fn.name_suffix),
                         args_separator=trim_ws(fn.args_separator), close=trim_ws(fn.close)),
        arguments=replace(a, start=trim_ws(a.start), end=trim_ws(a.end), name_prefix=trim_ws(a.name_prefix),
                          name_suffix=trim_ws(a.name_suffix), value_prefix=trim_ws(a.value_prefix),
                          value_suffix=trim_ws(a.value_suffix)),
        call_id=replace(cid, prefix=trim_ws(cid.prefix), suffix=trim_ws(cid.suffix)))
    return None if trimmed == tools else trimmed


def _scalar_only(schema: Any) -> bool:
    """Whether a value of ``schema`` can only be a number / integer / boolean / null (repair
    ``mistyped-value-as-string`` takes other text for such a parameter as a string)."""
    types = value_types(schema)
    return bool(types) and types <= SCALAR_TYPES


def _grammar(arena: Arena, lazy: bool, notes: list[str]) -> str:
    gb = GrammarBuilder()
    text = arena.to_gbnf(lazy=lazy, builder=gb)
    for e in gb.errors:
        notes.append("grammar: " + e)
    for w in gb.warnings:
        notes.append("grammar: " + w)
    return text


def reasoning_preamble(analysis: TemplateAnalysis, generation_prompt: str) -> str:
    """The text the generation prompt writes after the reasoning start marker (trimmed), "" when there is
    none or when the generation prompt also closes reasoning. Such text is the template's (e.g. Apriel's
    ``Here are my reasoning steps:``), not the model's reasoning (improvement ``generation-prompt-preamble``)."""
    r = analysis.reasoning
    start, end = trim_ws(r.start), trim_ws(r.end)
    if not start:
        return ""
    i = generation_prompt.find(start)
    if i < 0:
        return ""
    after = generation_prompt[i + len(start):]
    if end and end in after:
        return ""
    return trim_ws(after)


_CALL_ENDS_REASONING_TAG = "repair:" + CALL_ENDS_REASONING
CALL_AHEAD_RULE = "reasoning-call-ahead"   # repair call-ends-reasoning: the calls the reasoning may end at
_HOLD_SCAN_NODES = 64   # the reasoning block is among the first nodes of a parse (after the generation prompt's)


def _ended_reasoning_at_call(result: ParseResult, text: str, opener: str) -> bool:
    """Whether repair ``call-ends-reasoning`` acted in the parse ``result`` of ``text``: its (empty) node is there,
    at the call ``opener``. It follows the first reasoning node, among the first nodes of the parse: the walk stops
    after :data:`_HOLD_SCAN_NODES` nodes, whatever the length of the text."""
    stack = list(reversed(list(result.nodes)))
    seen = 0
    while stack and seen < _HOLD_SCAN_NODES:
        node = stack.pop()
        seen += 1
        if node.tag == _CALL_ENDS_REASONING_TAG:
            return text.startswith(opener, node.end)
        if node.children:
            stack.extend(reversed(node.children))
    return False


def held_view(parser: Any, result: ParseResult | None, text: str, msg: AssistantMessage) -> AssistantMessage | None:
    """Repair ``call-ends-reasoning`` in a partial view of ``text`` (generation prompt + output): when the
    reasoning of ``result`` (its parse by ``parser``) ended at a call opener, the view holds everything from there
    back until the final parse (an end marker may still come and make the call reasoning: llama.cpp's reference
    case ref-0303), so it is ``msg``'s reasoning alone; else None."""
    opener = getattr(parser, "hold_calls_in_reasoning", "")
    # the repair fires only where the format read complete calls: a view without calls needs no walk
    if result is None or not opener or not msg.tool_calls or not _ended_reasoning_at_call(result, text, opener):
        return None
    return AssistantMessage(reasoning_content=msg.reasoning_content)


def generate_parser(analysis: TemplateAnalysis, request: ChatRequest, generation_prompt: str, *,
                    improvements: Any = (), template_source: str = "", reasoning_first: bool = False,
                    instructed: tuple = (), interleaved_reasoning: bool = False) -> GeneratedParser:
    """Build the chat parser and grammar for ``request`` from a template ``analysis``.

    ``improvements``: names of the parser-stage improvements of :mod:`core.analysis.fidelity` to apply
    (beyond llama.cpp; default none): ``python-literal-values`` (also taken from
    :func:`core.peg.chat.builder_options`), ``json-array-start``, ``open-content-before-calls``,
    ``generation-prompt-preamble``.

    ``generation_prompt``: what the template adds for the assistant turn (render with minus without
    ``add_generation_prompt``, for the request's messages - without the continued message when
    ``continue_final_message`` is set). The parser prepends it (or the continuation prefix) to the output.
    ``reasoning_first``: the request switches thinking on and the generation prompt does not open reasoning
    (:func:`core.chat.prompt.thinking_switched_on`); with repair ``reasoning-end-without-start`` the output is
    then reasoning until the end marker even without a start marker (as vLLM's DeepSeek-R1 parser reads it).
    ``instructed``: ``(start phrases, end phrases)`` the prompt tells the model to write its reasoning between
    (:data:`core.chat.repairs.INSTRUCTED_MARKERS`; repair ``instructed-reasoning-markers``), or ().
    ``interleaved_reasoning``: the model writes its reasoning as blocks anywhere in its turn
    (:data:`core.analysis.workarounds.MODEL_WRITTEN_REASONING`; repair ``reasoning-blocks-interleaved``).
    Follows llama.cpp ``peg_generator::generate_parser`` / ``autoparser::build_parser``; never raises for a
    valid analysis and request (schema parts the grammar cannot express are noted in ``notes``).
    ``template_source``: the template's text, where a repair looks for a token the template knows
    (``<|python_tag|>``, repair ``python-code-markers``); "" when unknown.
    """
    active = frozenset(improvements or ())
    preamble = ""
    if GENERATION_PROMPT_PREAMBLE in active and request.reasoning_format != ReasoningFormat.NONE:
        preamble = reasoning_preamble(analysis, generation_prompt)
    gen = _Gen(analysis, request, active, preamble, generation_prompt, template_source, reasoning_first, instructed)
    gen.interleaved = interleaved_reasoning
    arena, eps_fallback = gen.build(generation_prompt)
    out = GeneratedParser(
        arena=arena,
        generation_prompt=continuation_prompt(analysis, request, generation_prompt),
        parser_generation_prompt=generation_prompt,
        preserved_tokens=list(analysis.preserved_tokens),
        additional_stops=list(analysis.additional_stops),
        eps_fallback=eps_fallback,
        notes=gen.notes,
        released_stops=gen.released_stops,
    )
    r = analysis.reasoning
    out.hold_calls_in_reasoning = gen.holds_calls
    out.supports_thinking = r.mode != ReasoningMode.NONE
    if out.supports_thinking:
        out.thinking_start_tag = trim_ws(r.start)
        end = trim_ws(r.end)
        out.thinking_end_tags = [end] if end else []
    f = analysis.tools.format
    has_tools = f.mode != ToolFormat.NONE and bool(request.tools)
    trigger = f.section_start or f.per_call_start
    has_rf = isinstance(request.json_schema, dict) and bool(request.json_schema)
    include = has_rf or (has_tools and ((request.tool_choice == ToolChoice.AUTO and bool(trigger))
                                        or request.tool_choice == ToolChoice.REQUIRED))
    if include:
        out.grammar_lazy = not has_rf and request.tool_choice == ToolChoice.AUTO
        out.grammar = _grammar(arena, out.grammar_lazy, out.notes)
        if out.grammar_lazy:
            out.grammar_triggers = [GrammarTrigger(TriggerType.WORD, trigger)]
            if f.openai_wrapper_trigger:
                out.grammar_triggers.append(GrammarTrigger(TriggerType.WORD, '{"type": "function",'))
    return out



# repair union-typed-value: the JSON reader of each type a string-or-other union may be read as
_JSON_READERS: dict[str, Callable[[ChatBuilder], P]] = {
    "object": lambda p: p.json_object(), "array": lambda p: p.json_array(), "number": lambda p: p.json_number(),
    "integer": lambda p: p.json_number(), "boolean": lambda p: p.json_bool()}


def union_other_types(types: frozenset[str]) -> tuple[str, ...]:
    """Repair ``union-typed-value``: the types besides string a value of a string-or-other union may be read as
    (object, array, number — an integer too —, boolean; null is ``nullable-null``'s), in that order; () for a
    parameter that cannot be a string or can only be one."""
    if "string" not in types:
        return ()
    return tuple(t for t in _JSON_READERS if t in types and not (t == "integer" and "number" in types))

__all__ = ["GeneratedParser", "ParserState", "ViewMemo", "Probe", "generate_parser", "continuation_prompt",
           "trim_ws", "covers", "message_extends", "longest_good_prefix", "consistent_view", "prefix_rest",
           "covering_message",
           "RECOVER_TRAILING", "RECOVER_CONTENT", "MAIN_REST", "PREFIX_REST", "PARTIAL_PREFIX", "PENDING_HEADER"]
