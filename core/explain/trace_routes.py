"""Spans and stop point of one parse (the auto-parser's and the special families' PEG parsers alike): the
parse the parser itself chose, replayed with the tracer."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..chat.generator import (MAIN_REST, GeneratedParser, PREFIX_REST, RECOVER_CONTENT, RECOVER_TRAILING, covers,
                              trim_ws)
from ..chat.turn_end import turn_end_cut as cut_turn_end, turn_end_tokens
from ..chat.message import AssistantMessage
from ..peg import chat as T
from ..peg.trace import Expectation, FurthestFailure, traced_parse
from .spans import Span, SpanLabel, marker_labels, relabel_unparsed, same_message, settled_as, spans_from_ast

MAIN = "main"
# control-token-shaped markers (<|x|>, <x|>, <|x>, [X]): a handler that stops before one of these at the end of
# the output dropped an end-of-turn marker, not text
_IGNORABLE = re.compile(r"<\|[^<>\s]{0,40}\|>|<[A-Za-z_]{1,40}\|>|<\|[A-Za-z_]{1,40}>|\[[A-Z_]{2,30}\]")


@dataclass
class ParseTrace:
    """What one parse did: the message, the entry point that produced it (``main``, ``recover-trailing``,
    ``recover-content``, ``main+rest``, ``prefix+rest``, ``raw``), the spans, and where the main parse stopped.

    ``stop``: position in ``text`` where the main (strict-as-llama.cpp) parse could go no further, -1 when it
    accounts for the whole text; ``furthest``: the furthest failure of that parse (expected, rule path);
    ``truncated_at``: -1, or the end of the text when the text is accepted only as a prefix (lenient parse
    covers it, strict does not) — ``truncated_expect`` is what a strict parse wanted there.
    """

    text: str
    gp_len: int
    message: AssistantMessage
    entry: str
    spans: list[Span]
    stop: int = -1
    furthest: FurthestFailure = field(default_factory=FurthestFailure)
    truncated_at: int = -1
    truncated_expect: FurthestFailure = field(default_factory=FurthestFailure)


def _labels(parser: Any, report: Any) -> dict[str, str]:
    analysis = getattr(report, "analysis", None)
    if analysis is None or getattr(parser, "name", None):   # handlers: their literals are their own
        return {}
    return marker_labels(analysis.to_json())


STRICT_TRACE_CHARS = 1 << 20
"""Longest text whose cut-off end gets the strict parse's expectations (``truncated_expect``): one more traced
parse of the whole text, ~5 CPU s for 100,000 tool calls (8 MB) where the rest of an explanation took as much."""


def trace_peg(parser: Any, output: str, report: Any = None, parsed: Any = None,
              runs: TracedRuns | None = None, *, expect: bool = True, spans: bool = True) -> ParseTrace:
    """Replay a PEG parser's final parse of ``output`` (see :meth:`GeneratedParser.parse_detailed`) traced.
    A turn header the output repeats (repair ``repeated-turn-header``) is skipped as the parse skips it, and
    shown as a marker span. ``parsed``: ``parse_detailed(output)`` when the caller has it; ``runs``: the traced
    runs that parse was made from (``parse_detailed(output, runs=runs)``), reused here. ``expect=False``: no
    ``truncated_expect`` (a caller that takes only the spans spares the strict parse it needs); ``spans=False``:
    no spans when the parse recovered (entry not ``main``: a caller that replaces them spares making them)."""
    cut = parser.header_cut(output) if hasattr(parser, "header_cut") else 0
    if not cut:
        return _trace_peg(parser, output, report, parsed, runs, expect, spans)
    return _after_header(_trace_peg(parser, output[cut:], report, parsed or parser.parse_detailed(output), runs,
                                    expect, spans), parser, output, cut)


class TracedRuns:
    """The traced runs (:func:`core.peg.trace.traced_parse`) a final parse is made from: handed to
    :meth:`GeneratedParser.parse_detailed` as ``runs``, it parses each entry the parse tries once, traced — the
    message comes from the same run as the spans (the traced run is the plain one plus marker nodes, which the
    mapper ignores), and the trace reuses them instead of parsing the text again."""

    def __init__(self, parser: Any, report: Any = None):
        self.arena = parser.arena
        self.labels = _labels(parser, report)
        self.made: dict[str | None, tuple[str, Any]] = {}

    def __call__(self, entry: str | None, text: str) -> Any:
        try:
            traced = traced_parse(self.arena, text, labels=self.labels, entry=entry)
        except (RecursionError, MemoryError):   # as the parser's own run: no result (the trace raises again)
            traced = None
        self.made[entry] = (text, traced)
        return traced.result if traced is not None else None

    def get(self, entry: str | None, text: str) -> Any:
        """The traced run of ``text`` from ``entry`` when one was made, else None."""
        made = self.made.get(entry)
        return made[1] if made is not None and made[0] == text else None


def _after_header(tr: ParseTrace, parser: Any, output: str, cut: int) -> ParseTrace:
    """The trace ``tr`` of ``output[cut:]`` (the output without the turn header it repeats, repair
    ``repeated-turn-header``) as a trace of ``output``: positions after the generation prompt shifted by
    ``cut``, the header one marker span."""
    gp = tr.gp_len

    def at(pos: int) -> int:
        return pos + cut if pos >= gp else pos
    header = Span(gp, gp + cut, SpanLabel.MARKER, output[:cut])
    spans = ([sp for sp in tr.spans if sp.end <= gp] + [header]
             + [replace(sp, start=at(sp.start), end=at(sp.end)) for sp in tr.spans if sp.end > gp])
    return replace(tr, text=parser.generation_prompt + output, spans=spans,
                   stop=at(tr.stop) if tr.stop >= 0 else tr.stop,
                   furthest=replace(tr.furthest, pos=at(tr.furthest.pos)) if tr.furthest.pos >= 0 else tr.furthest,
                   truncated_at=at(tr.truncated_at) if tr.truncated_at >= 0 else tr.truncated_at,
                   truncated_expect=(replace(tr.truncated_expect, pos=at(tr.truncated_expect.pos))
                                     if tr.truncated_expect.pos >= 0 else tr.truncated_expect))


def _trace_peg(parser: Any, output: str, report: Any = None, parsed: Any = None,
               runs: TracedRuns | None = None, expect: bool = True, spans: bool = True) -> ParseTrace:
    """:func:`trace_peg` of an ``output`` without a repeated turn header; ``parsed``: the
    ``parse_detailed`` result when the caller has it (of the output with its header), ``runs`` the traced runs
    it was made from; ``expect``, ``spans``: as there."""
    msg, _res, entry = parsed if parsed is not None else parser.parse_detailed(output)
    text = parser.generation_prompt + output
    gp = len(parser.generation_prompt)
    labels = _labels(parser, report)
    arena = parser.arena
    main = None
    if not parser.eps_fallback:
        main = (runs.get(None, text) if runs is not None else None) or traced_parse(arena, text, labels=labels)
    tr = ParseTrace(text, gp, msg, entry or MAIN, [])
    if main is not None:
        r = main.result
        if not covers(r, text):
            tr.stop = max(main.furthest.pos, r.end if not r.fail else gp, gp)
            tr.furthest = main.furthest
        else:
            open_path = _open_structures(r.nodes)
            if open_path:
                # the output ends inside a call or a reasoning block: what a strict parse wanted there (a second
                # traced parse of the whole text: left out for texts over STRICT_TRACE_CHARS)
                exp = []
                if expect and len(text) <= STRICT_TRACE_CHARS:
                    strict = traced_parse(arena, text, labels=labels, lenient=False)
                    exp = strict.furthest.expected if strict.furthest.pos >= len(text) else []
                tr.truncated_at = len(text)
                tr.truncated_expect = FurthestFailure(len(text), exp, open_path)
    if not spans and entry is not None:   # (the main entry's spans also decide its entry and stop point)
        return tr
    if entry is None:
        tr.spans = spans_from_ast(main.result.nodes, text, gp, len(text))
        dropped = next((sp for sp in tr.spans if sp.label == SpanLabel.IGNORED), None)
        if dropped is not None:
            # the format read and dropped the rest (as llama.cpp does); more than an end-of-turn marker dropped
            # is where the format stopped
            tr.entry = "main+ignored"
            if _IGNORABLE.sub("", text[dropped.start:]).strip() and tr.stop < 0:
                far = main.furthest if main is not None and main.furthest.pos >= dropped.start else None
                tr.furthest = far or FurthestFailure(dropped.start, [Expectation("end", "")], ())
                tr.stop = max(tr.furthest.pos, gp)
    elif entry in (RECOVER_TRAILING, RECOVER_CONTENT):
        rec = ((runs.get(entry, text) if runs is not None else None)
               or traced_parse(arena, text, labels=labels, entry=entry)).result
        spans = spans_from_ast(rec.nodes, text, gp, len(text))
        last = rec.nodes[-1] if rec.nodes else None
        cut = tr.stop if tr.stop >= 0 else len(text)
        if entry == RECOVER_TRAILING and last is not None and last.tag == T.CONTENT and last.end == len(text):
            cut = last.start
        tr.spans = relabel_unparsed(spans, max(cut, gp))
    elif entry == MAIN_REST:
        tr.spans = spans_from_ast(main.result.nodes, text, gp, max(main.result.end, gp))
    elif entry == PREFIX_REST:
        d = _prefix_cut(text, gp, msg, lambda t: _peg_message(arena, t))
        if d is None:
            tr.spans = _raw_spans(text, gp)
        else:
            pre = traced_parse(arena, text[:d], labels=labels).result
            tr.spans = spans_from_ast(pre.nodes, text[:d], gp, d) + _raw_spans(text[d:], 0, offset=d)
    else:
        tr.spans = _raw_spans(text, gp)
    return tr


_OPEN_TAGS = frozenset({T.TOOL, T.TOOL_OPEN, T.TOOL_NAME, T.TOOL_ID, T.TOOL_ARGS, T.TOOL_ARG, T.TOOL_ARG_OPEN,
                        T.TOOL_ARG_NAME, T.TOOL_ARG_VALUE, T.TOOL_ARG_STRING_VALUE, T.TOOL_ARG_PY_VALUE,
                        T.REASONING_BLOCK,
                        T.REASONING})


def _open_structures(nodes: Any) -> tuple[str, ...]:
    """Rule names / tags of the AST nodes still open at the end of the text (``partial``), outermost first,
    when one of them is a tool call or a reasoning block (an open content run is not a cut-off output)."""
    path: list[str] = []
    hit = False
    innermost = ""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if not node.partial:
            continue
        path.append(node.rule or node.tag)
        innermost = node.tag
        hit = hit or node.tag in _OPEN_TAGS or node.rule.startswith("tool")
        stack = list(node.children)
    # text after the last call read as content (repair content-between-calls) ends the output inside the calls'
    # rule, but in a content run
    return tuple(path) if hit and innermost != T.CONTENT else ()


def peg_message(parser: Any, output: str) -> tuple[AssistantMessage, bool] | None:
    """``parser.parse(output)`` and whether :func:`trace_parse` of ``output`` would be clean (main entry, no stop
    point, nothing cut off), from the parser's own parse without tracing it; None for a parser this cannot
    tell (hand-written handlers, parsers without a main trace)."""
    if not isinstance(parser, GeneratedParser) or parser.eps_fallback:
        return None
    parsed = parser.parse_detailed(output)
    _msg, r, entry = parsed
    clean = entry is None and r is not None and not _open_structures(r.nodes)
    return parser.parse(output, detailed=parsed), clean


def _peg_message(arena: Any, text: str) -> AssistantMessage | None:
    from ..chat.mapper import map_parse

    r = arena.parse(text, lenient=True)
    return map_parse(r) if covers(r, text) else None


def _prefix_cut(text: str, gp: int, msg: AssistantMessage, message_at: Any) -> int | None:
    """The ``d`` of :func:`core.chat.generator.prefix_rest`: the longest prefix ``text[:d]`` whose message plus
    ``text[d:]`` as content is ``msg`` (tried from the longest rest the content allows)."""
    n = len(text)
    lo = max(gp, n - len(msg.content))
    for d in range(lo, n + 1):
        rest = text[d:]
        if not msg.content.endswith(rest):
            continue
        m = message_at(text[:d])
        if m is None:
            continue
        m = m.copy()
        m.content += rest
        if same_message(m, msg):
            return d
    return None


def _raw_spans(text: str, gp: int, offset: int = 0) -> list[Span]:
    out = []
    if gp:
        out.append(Span(offset, offset + gp, SpanLabel.GENERATION_PROMPT, text[:gp], in_prompt=True))
    if len(text) > gp:
        out.append(Span(offset + gp, offset + len(text), SpanLabel.UNPARSED, text[gp:]))
    return out


@dataclass
class StreamStep:
    """One step of a streaming replay: the output prefix ``[0, end)``, the text this step added
    (``[new_start, end)`` of the output) and the spans of the partial parse of the prefix, where the text the
    parser holds back (a possible marker prefix, an unfinished name) is labelled ``held back``."""

    end: int
    new_start: int
    spans: list[Span]


REPLAY_STEPS = 400
"""At most this many steps in a streaming replay: a longer output is replayed in wider steps (each one a traced parse
of the prefix, so the steps times the output's length is the work)."""
REPLAY_WINDOW = 4000
"""Each step keeps the spans of at most this many characters before its end (the text an earlier step showed is
not sent again: a replay of n steps over the whole prefix is quadratic in memory)."""


def replay_chunk(output_len: int, chunk: int) -> int:
    """The step width a replay of ``output_len`` characters asked in steps of ``chunk`` uses: ``chunk``, or wider
    so that there are at most :data:`REPLAY_STEPS` steps."""
    return max(chunk, -(-output_len // REPLAY_STEPS))


def _from(spans: list[Span], lo: int) -> list[Span]:
    """``spans`` from position ``lo`` on: a span across ``lo`` keeps its part after it."""
    out = []
    for sp in spans:
        if sp.end <= lo:
            continue
        if sp.start < lo:
            sp = replace(sp, start=lo, text=sp.text[lo - sp.start:])
        out.append(sp)
    return out


def stream_steps(parser: Any, output: str, chunk: int = 8, report: Any = None,
                 window: int | None = None) -> list[StreamStep]:
    """The streaming replay of ``output`` in steps of :func:`replay_chunk` characters (``chunk``, wider for a long
    output): per step the spans of the lenient parse of the prefix so far (the traced run of the main root),
    with the text the parse has not yet accounted for marked ``held back``; with ``window``, only the spans of the
    last ``window`` characters of each step. Raises ``ValueError`` for ``chunk < 1``."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 (got {chunk})")
    chunk = replay_chunk(len(output), chunk)
    gp = len(parser.generation_prompt)
    steps: list[StreamStep] = []
    for end in list(range(chunk, len(output), chunk)) + [len(output)]:
        text = parser.generation_prompt + output[:end]
        if hasattr(parser, "arena") and not parser.eps_fallback:
            r = traced_parse(parser.arena, text, labels=_labels(parser, report)).result
            consumed = r.end if (r.need_more_input or r.success) else gp
            spans = spans_from_ast(r.nodes, text, gp, max(consumed, gp))
        else:
            spans = _raw_spans(text, gp)
        spans = [replace(s, label=SpanLabel.HELD_BACK) if s.label == SpanLabel.UNPARSED else s for s in spans]
        if spans and spans[-1].label == SpanLabel.MARKER and not spans[-1].field and spans[-1].end == len(text):
            # consumed by no node yet: a marker or name still being written
            spans[-1] = replace(spans[-1], label=SpanLabel.HELD_BACK)
        if window is not None:
            spans = _from(spans, max(0, len(text) - window))
        steps.append(StreamStep(end, steps[-1].end if steps else 0, spans))
    return steps


def _trace_raw(parser: Any, output: str, report: Any = None, parsed: Any = None,
               runs: TracedRuns | None = None, *, expect: bool = True, spans: bool = True) -> ParseTrace:
    """:func:`trace_peg`: the spans of the parser's own final parse, before :func:`core.chat.repairs.settle`
    (``message`` is that parse's)."""
    return trace_peg(parser, output, report, parsed, runs, expect=expect, spans=spans)


def _raw_message(parser: Any, output: str) -> AssistantMessage:
    """The parser's final parse of ``output`` before it is settled (what :func:`_trace_raw` replays)."""
    return parser.parse_detailed(output)[0]


_VIEW_SCAN = 2000
"""At most this many output prefixes are tried one by one for the partial view (:func:`_trace_view`)."""


def _trace_view(parser: Any, output: str, report: Any, final: AssistantMessage) -> ParseTrace | None:
    """The trace of the partial view a settled final parse fell back to (``stream-consistent-final``): the
    view is the message of the longest output prefix whose final parse shows it (the prefixes a stream was
    fed); that prefix is replayed and the rest of the output is ``unparsed`` under the repair (not in the
    message), entry ``partial-prefix``. None when no prefix gives the view."""
    view = parser.parse(output, True)
    if not same_message(settled_as(view, final), final):
        return None
    from ..chat.generator import longest_good_prefix, message_extends

    gp = len(parser.generation_prompt)
    n = len(output)
    seen: dict[int, AssistantMessage] = {}
    traced: dict[int, tuple[Any, TracedRuns]] = {}

    def raw(k: int, trace: bool = False) -> AssistantMessage:   # each prefix parsed once (the search asks again)
        if k not in seen:
            if trace:   # the prefix likely replayed below: parsed through traced runs the replay reuses
                runs = TracedRuns(parser, report)
                parsed = parser.parse_detailed(output[:k], runs=runs)
                traced[k] = (parsed, runs)
                seen[k] = parsed[0]
            else:
                seen[k] = _raw_message(parser, output[:k])
        return seen[k]
    # the stream's prefixes: the longest whose final parse the view extends (galloping back from the end, as
    # the partial parse searched), then, if that one does not give the view itself, every shorter one (bounded)
    # the partial parse found the longest prefix that parses cleanly; when its final parse extends the view and
    # the next prefix's does not, it is what the search below finds whenever goodness is monotone (the search's
    # own assumption): two parses instead of O(log n)
    hint = parser.partial_view_end(output) if isinstance(parser, GeneratedParser) else None
    if hint is not None and 0 <= hint < n and message_extends(raw(hint, True), view) \
            and not message_extends(raw(hint + 1), view):
        best = hint
    else:
        best = longest_good_prefix(lambda k: message_extends(raw(k), view), 0, n, True)
    tried = [best] if best >= 0 else []
    tried += [d for d in range(n, max(-1, n - _VIEW_SCAN - 1), -1) if d != best]
    for d in tried:
        if not same_message(raw(d), view):
            continue
        # only the spans and the entry are taken from this trace (trace_parse): no strict parse for what a cut-off
        # end expected
        tr = _trace_raw(parser, output[:d], report, *traced.get(d, (None, None)), expect=False)
        if d == len(output):
            return tr
        from ..chat.generator import PARTIAL_PREFIX
        from ..chat.repairs import STREAM_CONSISTENT_FINAL

        # the format did not account for the rest, and the settled message leaves it out (rebuild_message
        # skips unparsed text whose field names this repair; attach_repairs may relabel its repair)
        text = parser.generation_prompt + output
        tr.spans = list(tr.spans) + [Span(gp + d, len(text), SpanLabel.UNPARSED, output[d:],
                                          field=STREAM_CONSISTENT_FINAL, repair=STREAM_CONSISTENT_FINAL)]
        tr.text, tr.entry = text, PARTIAL_PREFIX
        return tr
    return None


def trace_parse(parser: Any, output: str, report: Any = None, *, turn_end_cut: bool = True) -> ParseTrace:
    """The trace of ``parser.parse(output)`` as the parser returns it: its final parse replayed (:func:`trace_peg`) and settled as
    :func:`core.chat.repairs.settle` settles it — when the final parse does not extend the partial view
    (``stream-consistent-final``) the spans are the view's (its prefix replayed, the rest ``unparsed``), a call
    cut off at the end (``truncated-call``) keeps its spans but is left out of the message — with the fired
    repairs laid over the spans (``repaired: NAME``, :func:`core.explain.spans.attach_repairs`). ``message``
    is the settled message; ``stop`` / ``truncated_at`` stay those of the parse of the whole output."""
    from .spans import attach_repairs

    if not hasattr(parser, "arena") and hasattr(parser, "reason"):
        # no parser (core.chat.pipeline.ContentOnlyParser: the template does not render): all of it content
        msg = parser.parse(output)
        return ParseTrace(output, 0, msg, "no-parser", [Span(0, len(output), SpanLabel.UNPARSED, output)] if output
                          else [])
    if turn_end_cut and isinstance(parser, GeneratedParser) and getattr(parser, "turn_end_source", None) is not None:
        end = cut_turn_end(turn_end_tokens(parser), output)
        if end < len(output):   # the parse does not cut again what remains (GeneratedParser.parse)
            return _after_turn_end(trace_parse(parser, output[:end], report, turn_end_cut=False), parser, output, end)
    parsed = runs = None
    if isinstance(parser, GeneratedParser):
        # one run per entry for the message and the spans: parse_detailed maps the traced runs, the trace
        # reuses them
        runs = TracedRuns(parser, report)
        parsed = parser.parse_detailed(output, runs=runs)
        final = parser.parse(output, detailed=parsed)
    else:
        final = parser.parse(output)
    view = None
    if parsed is not None and not same_message(settled_as(parsed[0], final), final):
        # the settled message is the partial view's: its spans replace the final parse's (made only if needed)
        view = _trace_view(parser, output, report, final)
    tr = _trace_raw(parser, output, report, parsed, runs, spans=view is None)
    if parsed is None and not same_message(settled_as(tr.message, final), final):
        view = _trace_view(parser, output, report, final)
    if view is not None:
        tr.spans, tr.entry = view.spans, view.entry
    tr.message = final
    if final.repairs:
        tr.spans = attach_repairs(tr.spans, [(r.name, (r.start, r.end)) for r in final.repairs], tr.gp_len)
    return tr


def _after_turn_end(tr: ParseTrace, parser: Any, output: str, end: int) -> ParseTrace:
    """The trace ``tr`` of ``output[:end]`` as a trace of ``output`` whose end-of-turn token from ``end`` on was cut
    before the parse (repair ``trailing-end-of-turn``): that tail an ignored span under the repair, the message the
    parser's own (which records the repair)."""
    from .spans import attach_repairs

    final = parser.parse(output)
    tail = Span(len(tr.text), len(tr.text) + len(output) - end, SpanLabel.IGNORED, output[end:])
    spans = attach_repairs(tr.spans + [tail], [(r.name, (r.start, r.end)) for r in final.repairs
                                                if r.start >= end], tr.gp_len)
    return replace(tr, text=tr.text + output[end:], spans=spans, message=final)


__all__ = ["REPLAY_STEPS", "REPLAY_WINDOW", "ParseTrace", "StreamStep", "replay_chunk", "stream_steps", "trace_parse",
           "trace_peg", "trim_ws"]
