"""Shared machinery for the hand-written special-format handlers (H-F's families).

llama.cpp routes some template families to hand-written parsers (``common/parsers/*.cpp``) instead of the
auto-parser. Each of our handler modules re-implements one of them in plain Python on top of the pieces here:

* :class:`Scanner`: a cursor over ``generation_prompt + model_output`` with llama.cpp's PEG partial-input
  semantics — a literal cut at the end of the input raises :class:`Incomplete` (llama.cpp NEED_MORE_INPUT),
  text that does not fit raises :class:`Mismatch` (FAIL), and :meth:`Scanner.until` stops *before* a
  delimiter prefix at the end of the input, so a marker cut mid-way is never emitted as content.
* :class:`MessageBuilder`: builds the :class:`~core.chat.message.AssistantMessage` the way llama.cpp's
  ``common_chat_peg_mapper`` does (arguments ``"{"`` as soon as a tool name is complete, tagged arguments
  turned into compact JSON, missing braces closed at the end of a call), with marks for backtracking.
* value scanners: JSON (:func:`scan_json`), Python-or-JSON literals (:func:`scan_python_or_json`, LFM2) and
  :func:`normalize_python_to_json` (llama.cpp ``normalize_quotes_to_json``).
* :class:`Schema`: the bits of a tool parameter schema the handlers consult (``may_be_string``,
  ``value_types``, object properties, array items, ``anyOf``), after llama.cpp ``json-schema.cpp``.
* :class:`RequestView` / :func:`request_view` (the request as llama.cpp's handlers see it, continuation
  resolved) and :class:`PromptContext` (renders through the request path's prepared request, for handlers that
  rewrite messages or look at the prompt).
* :class:`HandlerParser`: the :class:`~core.chat.base.ChatOutputParser` every handler returns, with
  :class:`HandlerSession` for incremental streaming (complete values memoised across growing prefixes).
* grammars: :func:`peg_grammar` emits GBNF from llama.cpp's parser structure, which each handler describes with
  core.peg's ChatBuilder (the same structure gives :meth:`HandlerParser.describe`).
* the checks the tests run on handlers (reference cases, fuzzing) live in ``tests/handler_checks.py``.

Streaming contract for well-formed output: successive parses of growing prefixes never take back text — content
and reasoning only grow, a tool call appears once its name is complete (and never changes name or id), and
its arguments only grow. Parsing never raises: text that does not fit the format (where llama.cpp would throw)
is returned as content after whatever was recognised before it; on such malformed text a later parse may drop
a call shown earlier, as llama.cpp's parsers do (the stream layer holds those steps back).
"""

from __future__ import annotations

import contextvars
import traceback

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..base import GrammarTrigger, TriggerType
from ..mapper import json_brace_depth  # noqa: F401  (re-exported for the handlers)
from ..message import AssistantMessage, ToolCall
from ..request import ChatRequest, Continuation, ReasoningFormat, ToolChoice

# --------------------------------------------------------------------------------------------------------------
# Parse outcomes
# --------------------------------------------------------------------------------------------------------------


class Incomplete(Exception):
    """The input ended while a construct could still match (llama.cpp NEED_MORE_INPUT).

    ``end`` is how far the partial construct reaches (used for partial values, e.g. JSON arguments)."""

    def __init__(self, end: int = -1):
        super().__init__(end)
        self.end = end


# While set (by core.explain), every Mismatch made records (pos, why, handler functions on the stack): the
# furthest one is where the parse got furthest, as the PEG engine's traced run reports it. Off by default.
MISMATCH_TRACE: contextvars.ContextVar[list | None] = contextvars.ContextVar("handler_mismatch_trace", default=None)


class Mismatch(Exception):
    """The text at ``pos`` does not fit the format (llama.cpp FAIL)."""

    def __init__(self, pos: int = -1, why: str = ""):
        super().__init__(pos, why)
        self.pos = pos
        self.why = why
        trace = MISMATCH_TRACE.get()
        if trace is not None:
            frames = tuple(f.name for f in traceback.extract_stack(limit=16)[:-1]
                           if "formats" in f.filename and not f.filename.endswith("_common.py"))
            trace.append((pos, why, frames))


# --------------------------------------------------------------------------------------------------------------
# Scanner
# --------------------------------------------------------------------------------------------------------------

_SPACE_RE = re.compile(r"[ \t\n\v\f\r]*")


class Scanner:
    """A cursor over ``text`` with llama.cpp's lenient PEG semantics (parser notes §1.2–1.3).

    Positions are character offsets into ``text``. Methods advance ``pos`` only on success.
    """

    __slots__ = ("text", "pos", "n", "memo", "switches", "far", "last_until", "last_json", "ends", "cut")

    def __init__(self, text: str, pos: int = 0, memo: dict | None = None):
        self.text = text
        self.pos = pos
        self.n = len(text)
        self.memo = memo  # completed values by (kind, position), valid while the text only grows
        # alternatives that got somewhere, failed and were rolled back (see attempt): (code id, position)
        self.switches: list[tuple[int, int]] = []
        # how far the primitives looked: one past the last position examined, n + 1 once one saw the end of the
        # input (an outcome that more text could change); :func:`repeat` reuses iterations that stayed below n
        self.far = 0
        # the last until() that returned text: (start, stop, delimiters, cut, text) — the session's fast path
        self.last_until: tuple | None = None
        # the last JSON value cut by the end of the input: (start, text handed to emit)
        self.last_json: tuple | None = None
        # how many times a primitive saw the end of the input, and the last literal the input ended inside
        # ((position, literal), from check): one look, that one, means more text that keeps the input inside
        # the literal changes nothing (the session's "pending" fast path, see HandlerSession._open_region)
        self.ends = 0
        self.cut: tuple[int, str] | None = None

    # -- primitives ------------------------------------------------------------------------------------------
    def check(self, lit: str) -> int:
        """1 if ``lit`` is at the cursor, -1 if the input ends inside a prefix of it (incl. at the very end),
        0 if it does not match. ``""`` always matches."""
        pos = self.pos
        if self.text.startswith(lit, pos):
            if pos + len(lit) > self.far:
                self.far = pos + len(lit)
            return 1
        left = self.n - pos
        if left < len(lit):
            if lit.startswith(self.text[pos:]):
                self.far = self.n + 1
                self.ends += 1
                self.cut = (pos, lit)
                return -1
            if self.n > self.far:
                self.far = self.n
            return 0
        if pos + len(lit) > self.far:
            self.far = pos + len(lit)
        return 0

    def expect(self, lit: str) -> None:
        """Consume ``lit`` (llama.cpp ``literal``): :class:`Incomplete` if cut, :class:`Mismatch` if absent."""
        r = self.check(lit)
        if r == 1:
            self.pos += len(lit)
        elif r == -1:
            raise Incomplete(self.n)
        else:
            raise Mismatch(self.pos, f"expected {lit!r}")

    def optional(self, lit: str) -> bool:
        """``optional(literal)``: at the very end of the input it succeeds empty (the repetition never starts);
        a cut prefix of ``lit`` raises :class:`Incomplete`; otherwise consume ``lit`` if present."""
        if self.pos >= self.n:
            self.far = self.n + 1
            self.ends += 1
            return False
        r = self.check(lit)
        if r == 1:
            self.pos += len(lit)
            return True
        if r == -1:
            raise Incomplete(self.n)
        return False

    def peek(self, lit: str) -> bool:
        """``peek(literal)``: True/False without consuming; :class:`Incomplete` if the input ends inside it."""
        r = self.check(lit)
        if r == -1:
            raise Incomplete(self.n)
        return r == 1

    def space(self) -> str:
        """``space()``: zero or more ASCII whitespace characters; never incomplete."""
        m = _SPACE_RE.match(self.text, self.pos)
        s = m.group(0)
        self.pos = m.end()
        self._saw(self.pos + 1)
        return s

    def match(self, pattern: "re.Pattern[str]") -> str:
        """The text ``pattern`` matches at the cursor (consumed; "" when it does not match). Counts as looking
        one character past the match (a pattern like ``[0-9]*`` stops at the first other character)."""
        m = pattern.match(self.text, self.pos)
        if m is None:
            self._saw(self.pos + 1)
            return ""
        self.pos = m.end()
        self._saw(self.pos + 1)
        return m.group(0)

    def _saw(self, end: int) -> None:
        """Note that positions before ``end`` were examined (past the input: the end was seen)."""
        if end > self.n:
            self.far = self.n + 1
            self.ends += 1
        elif end > self.far:
            self.far = end

    def find_stop(self, delims: Sequence[str]) -> tuple[int, bool]:
        """Where ``until(delims)`` stops: the earliest position where a delimiter starts, or where the rest of
        the input is a proper prefix of one (a marker cut at the end). Returns ``(position, found)``;
        ``found`` is False when no delimiter (even partial) occurs, i.e. the stop is the end of input."""
        best, found, _ = self._find_stop(delims)
        return best, found

    def _find_stop(self, delims: Sequence[str]) -> tuple[int, bool, bool]:
        """:meth:`find_stop` plus whether the stop is a delimiter cut off at the end of the input."""
        text, pos, n = self.text, self.pos, self.n
        best = n
        found = cut = False
        for d in delims:
            if not d:
                continue
            i = text.find(d, pos)
            if i != -1 and i < best:
                best, found = i, True
        # a delimiter cut off at the end of the input
        for d in delims:
            k = min(len(d) - 1, n - pos)
            while k > 0:
                start = n - k
                if start >= best:
                    break
                if text.endswith(d[:k]):
                    best, found, cut = start, True, True
                    break
                k -= 1
        return best, found, cut

    def until(self, *delims: str) -> str:
        """``until_one_of(delims)`` (``rest()`` when no delimiters): consume and return the text before the
        first delimiter or before a delimiter prefix ending the input. Never raises.

        When it stops before a cut delimiter, the input is treated as ending there (the cut text is pending:
        it may become the delimiter or more of this text), so no later step takes it as something else — e.g.
        ``<t`` (a prefix of ``<tool_call>``) is neither reasoning nor content until the next character decides
        (divergence from llama.cpp, whose ``until`` succeeds there; see :mod:`core.peg.engine`)."""
        start = self.pos
        if delims:
            stop, found, cut = self._find_stop(delims)
            self._saw(stop + max(len(d) for d in delims) if found and not cut else self.n + 1)
        else:
            stop, cut = self.n, False
            self.far = self.n + 1
            self.ends += 1
        s = self.text[start:stop]
        self.pos = stop
        if s:
            self.last_until = (start, stop, delims, cut, s)
        if cut:
            self.text = self.text[:stop]
            self.n = stop
        return s

    def choose_literal(self, options: Iterable[str]) -> str:
        """The longest of ``options`` present at the cursor (tool names: ``get`` vs ``get_time``).

        Raises :class:`Incomplete` when the input ends inside one of them, or right after a complete one that
        a longer option would extend (the name is not yet decided); :class:`Mismatch` when none fits."""
        best = None
        cut: list[str] = []
        ends = self.ends
        for opt in options:
            r = self.check(opt)
            if r == 1:
                if best is None or len(opt) > len(best):
                    best = opt
            elif r == -1:
                cut.append(opt)
        if cut:
            if len(cut) > 1:
                # the input ends inside several names: one look at the end, inside their common prefix (more
                # text that stays inside it keeps every one of them cut), unless they part right at the end
                common = os.path.commonprefix(cut)
                if len(common) > self.n - self.pos:
                    self.ends = ends + 1
                    self.cut = (self.pos, common)
            raise Incomplete(self.n)
        if best is None:
            raise Mismatch(self.pos, "no known name here")
        return best


# --------------------------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------------------------


def escape_json_inner(s: str) -> str:
    """``s`` JSON-escaped without the surrounding quotes (llama.cpp ``escape_json_string_inner``)."""
    return json.dumps(s, ensure_ascii=False)[1:-1]


_NUM_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUM_PREFIX_RE = re.compile(r"-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?\Z")
_NUM_CONT = frozenset("0123456789.eE+-")
_STR_BODY = {
    '"': re.compile(r'(?:[^"\\]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*'),
    "'": re.compile(r"(?:[^'\\]|\\(?:['\\/bfnrt]|u[0-9a-fA-F]{4}))*"),
}
_ESC_PREFIX_RE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")


def scan_number(text: str, pos: int) -> int:
    """End of a JSON number at ``pos`` (llama.cpp ``json_number`` with its lookahead): :class:`Incomplete` when
    the number reaches the end of the input (it may still grow), :class:`Mismatch` when absent or followed by a
    character that could extend it."""
    n = len(text)
    if pos >= n:
        raise Incomplete(n)   # a number may still start here
    m = _NUM_RE.match(text, pos)
    if m is None or m.end() == pos:
        if _NUM_PREFIX_RE.match(text, pos) and n > pos:
            raise Incomplete(n)
        raise Mismatch(pos, "expected a number")
    end = m.end()
    if end >= n:
        raise Incomplete(n)
    if text[end] in _NUM_CONT:
        # a cut exponent or fraction ("1e", "1.") is still a prefix of a number
        if _NUM_PREFIX_RE.match(text, pos):
            raise Incomplete(n)
        raise Mismatch(end, "malformed number")
    return end


def scan_quoted(text: str, pos: int, quote: str) -> int:
    """End (after the closing quote) of a quoted string at ``pos`` with JSON escapes (llama.cpp
    ``string_content``). Cut inside: :class:`Incomplete` whose ``end`` stops before a dangling escape."""
    n = len(text)
    if pos >= n:
        raise Incomplete(n)
    if text[pos] != quote:
        raise Mismatch(pos, f"expected {quote}")
    m = _STR_BODY[quote].match(text, pos + 1)
    end = m.end()
    if end >= n:
        raise Incomplete(n)
    if text[end] == quote:
        return end + 1
    # a backslash whose escape is cut by the end of the input, or an invalid escape
    if _ESC_PREFIX_RE.match(text, end):
        raise Incomplete(end)
    raise Mismatch(end, "invalid escape in string")


def scan_literal(text: str, pos: int, lit: str) -> int:
    """End of the literal ``lit`` at ``pos`` (``pos + len(lit)``).

    Raises :class:`Incomplete` when the text ends inside a prefix of ``lit``, :class:`Mismatch` otherwise.
    """
    if text.startswith(lit, pos):
        return pos + len(lit)
    rest = text[pos:]
    if len(rest) < len(lit) and lit.startswith(rest):
        raise Incomplete(len(text))
    raise Mismatch(pos, f"expected {lit!r}")


def _skip_ws(text: str, pos: int) -> int:
    return _SPACE_RE.match(text, pos).end()


def scan_json(text: str, pos: int, memo: dict | None = None) -> int:
    """End of the JSON value at ``pos`` (llama.cpp ``json()``; no leading whitespace). Raises
    :class:`Incomplete` (``end`` = how far the partial value reaches) or :class:`Mismatch`. ``memo`` caches the
    ends of complete values (nested ones too) for parses of longer texts with the same beginning."""
    if memo is not None:
        hit = memo.get(("json", pos))
        if hit is not None:
            return hit
    end = _scan_json(text, pos, memo)
    if memo is not None:
        memo[("json", pos)] = end
    return end


def _scan_json(text: str, pos: int, memo: dict | None) -> int:
    n = len(text)
    if pos >= n:
        raise Incomplete(n)
    c = text[pos]
    if c == "{" or c == "[":
        close = "}" if c == "{" else "]"

        def member(p: int) -> int:
            if c == "{":
                p = scan_quoted(text, p, '"')
                p = _skip_ws(text, p)
                p = scan_literal(text, p, ":")
                p = _skip_ws(text, p)
            return scan_json(text, p, memo)

        key = ("jc", pos)
        p = memo.get(key) if memo is not None else None  # resume after the last complete member
        if p is None:
            p = _skip_ws(text, pos + 1)
            if p >= n:
                raise Incomplete(n)
            if text[p] == close:
                return p + 1
            p = member(p)
            if memo is not None:
                memo[key] = p
        while True:
            p = _skip_ws(text, p)
            if p >= n:
                raise Incomplete(n)
            if text[p] == close:
                return p + 1
            p = scan_literal(text, p, ",")
            p = _skip_ws(text, p)
            p = member(p)
            if memo is not None:
                memo[key] = p
    if c == '"':
        return scan_quoted(text, pos, '"')
    if c == "-" or c.isdigit():
        return scan_number(text, pos)
    for lit in ("true", "false", "null"):
        if lit[0] == c:
            return scan_literal(text, pos, lit)
    raise Mismatch(pos, "expected a JSON value")


def scan_python_or_json(text: str, pos: int, memo: dict | None = None) -> int:
    """End of a Python-or-JSON literal at ``pos`` (llama.cpp ``python_or_json_value``, used by LFM2): dicts
    (quoted keys, ``ws , ws`` separators), lists (``, ws`` separators), ``'…'`` / ``"…"`` strings, numbers,
    ``True False None true false null``; containers swallow trailing whitespace. ``memo`` as :func:`scan_json`,
    but a value that reaches the end of ``text`` is not kept: a container's trailing whitespace may go on in a
    longer text (``{...}`` then spaces, then ``)``), so that end is not the value's end there."""
    if memo is not None:
        hit = memo.get(("py", pos))
        if hit is not None:
            return hit
    end = _scan_python_or_json(text, pos, memo)
    if memo is not None and end < len(text):
        memo[("py", pos)] = end
    return end


def _scan_python_or_json(text: str, pos: int, memo: dict | None) -> int:
    n = len(text)
    if pos >= n:
        raise Incomplete(n)
    c = text[pos]
    if c == "{":
        p = _skip_ws(text, pos + 1)
        if p >= n:
            raise Incomplete(n)
        if text[p] == "}":
            return _skip_ws(text, p + 1)
        while True:
            if p >= n:
                raise Incomplete(n)
            if text[p] not in "\"'":
                raise Mismatch(p, "expected a quoted key")
            p = scan_quoted(text, p, text[p])
            p = _skip_ws(text, p)
            p = scan_literal(text, p, ":")
            p = _skip_ws(text, p)
            p = scan_python_or_json(text, p, memo)
            p = _skip_ws(text, p)
            if p >= n:
                raise Incomplete(n)
            if text[p] == "}":
                return _skip_ws(text, p + 1)
            p = scan_literal(text, p, ",")
            p = _skip_ws(text, p)
    if c == "[":
        p = _skip_ws(text, pos + 1)
        if p >= n:
            raise Incomplete(n)
        if text[p] == "]":
            return _skip_ws(text, p + 1)
        while True:
            p = scan_python_or_json(text, p, memo)
            if p >= n:
                raise Incomplete(n)
            if text[p] == ",":
                p = _skip_ws(text, p + 1)
                continue
            p = _skip_ws(text, p)
            if p >= n:
                raise Incomplete(n)
            if text[p] == "]":
                return _skip_ws(text, p + 1)
            raise Mismatch(p, "expected , or ]")
    if c in "\"'":
        return scan_quoted(text, pos, c)
    if c == "-" or c.isdigit():
        return scan_number(text, pos)
    for lit in ("True", "False", "None", "true", "false", "null"):
        if lit[0] == c:
            return scan_literal(text, pos, lit)
    raise Mismatch(pos, "expected a value")


def _is_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def normalize_python_to_json(s: str) -> str:
    """Python-literal text to JSON text (llama.cpp ``normalize_quotes_to_json``): single-quoted strings become
    double-quoted, bare ``True``/``False``/``None`` (and their prefixes, so partial text stays monotonic)
    become ``true``/``false``/``null``; everything else is copied. Valid JSON passes through unchanged."""
    out: list[str] = []
    _normalize_run(s, 0, False, False, out)
    return "".join(out)


def normalize_python_to_json_cached(s: str, memo: dict | None, key: Any) -> str:
    """:func:`normalize_python_to_json` for a text that only grows between calls with the same ``key`` (a
    streamed value): resumes from the checkpoint kept in ``memo`` instead of starting over."""
    if memo is None:
        return normalize_python_to_json(s)
    ck = memo.get(("norm", key))
    if ck is not None and ck[0] <= len(s) and s.startswith(ck[4]):
        i, in_single, in_double, prefix, _ = ck
        out = [prefix]
    else:
        i, in_single, in_double, out = 0, False, False, []
    si, ss, sd, nparts = _normalize_run(s, i, in_single, in_double, out)
    memo[("norm", key)] = (si, ss, sd, "".join(out[:nparts]), s[:si])
    return "".join(out)


_PLAIN_IN_STRING = re.compile(r"""[^\\'"]+""")
_PLAIN_OUTSIDE = re.compile(r"""[^\\'"TFN]+""")


def _normalize_run(s: str, i: int, in_single: bool, in_double: bool, out: list[str]) -> tuple[int, bool, bool, int]:
    """Normalise ``s[i:]`` from the given string state, appending to ``out``. Returns a checkpoint
    ``(index, in_single, in_double, len(out))`` from which a longer text with the same beginning can resume (the
    start of the last step that did not depend on where the text ends)."""
    n = len(s)
    safe = (i, in_single, in_double, len(out))
    while i < n:
        if i == 0 or not _is_word(s[i - 1]):
            safe = (i, in_single, in_double, len(out))
        c = s[i]
        if c == "\\" and i + 1 < n:
            nxt = s[i + 1]
            if in_single:
                out.append("'" if nxt == "'" else '\\"' if nxt == '"' else c + nxt)
                i += 2
            elif in_double:
                out.append(c + nxt)
                i += 2
            else:
                out.append(c)
                i += 1
            continue
        if c == '"':
            if in_single:
                out.append('\\"')
            else:
                in_double = not in_double
                out.append(c)
            i += 1
            continue
        if c == "'":
            if in_double:
                out.append(c)
            else:
                in_single = not in_single
                out.append('"')
            i += 1
            continue
        if not in_single and not in_double and c in "TFN" and (i == 0 or not _is_word(s[i - 1])):
            j = i
            while j < n and _is_word(s[j]):
                j += 1
            tok = s[i:j]
            for py, js in (("True", "true"), ("False", "false"), ("None", "null")):
                if py.startswith(tok):
                    out.append(js[: len(tok)])
                    i = j
                    break
            else:
                out.append(c)
                i += 1
            continue
        m = (_PLAIN_IN_STRING if (in_single or in_double) else _PLAIN_OUTSIDE).match(s, i)
        j = m.end() if m else i + 1
        out.append(s[i:j])
        i = j
    return safe


# --------------------------------------------------------------------------------------------------------------
# Message building (llama.cpp common_chat_peg_mapper semantics)
# --------------------------------------------------------------------------------------------------------------


class _Call:
    __slots__ = ("call", "arg_count", "quote_open", "frozen")

    def __init__(self, call: ToolCall):
        self.call = call
        self.arg_count = 0
        self.quote_open = False
        # a ToolCall standing for this call once it is settled (replayed from a session memo): never mutated
        # again, the same object in every message built from it (see MessageBuilder.current)
        self.frozen: ToolCall | None = None

    def clone(self) -> "_Call":
        c = _Call(ToolCall(self.call.name, self.call.arguments, self.call.id))
        c.arg_count = self.arg_count
        c.quote_open = self.quote_open
        return c

    def state(self) -> tuple:
        """The call's comparable state (name, arguments, id, argument count, open quote)."""
        return (self.call.name, self.call.arguments, self.call.id, self.arg_count, self.quote_open)


def _call_from_state(st: tuple) -> _Call:
    c = _Call(ToolCall(st[0], st[1], st[2]))
    c.arg_count, c.quote_open = st[3], st[4]
    return c


class MessageBuilder:
    """Accumulates content, reasoning and tool calls the way llama.cpp's generic mapper does.

    * :meth:`open_call` — name complete: the call is visible with arguments ``"{"`` (or ``args`` if given);
    * tagged arguments: :meth:`arg_name` (``"key":`` with a comma after the first), :meth:`arg_string`
      (quoted and escaped; the closing quote only when complete), :meth:`arg_raw` (Python→JSON normalised);
    * :meth:`set_args` — verbatim JSON arguments (JSON-native formats);
    * :meth:`close_call` — closes a pending quote and every unclosed brace.

    :meth:`mark` / :meth:`reset` undo what an alternative that failed had added. Only the last call is ever
    changed (through :attr:`current`), so a mark copies that one call, not all of them.
    """

    def __init__(self, drop_blank_reasoning: bool = True):
        self.content = ""
        self.reasoning = ""
        self.calls: list[_Call] = []
        self.drop_blank_reasoning = drop_blank_reasoning
        self.version = 0  # bumped by every change to the message (:func:`attempt` tells what a failure undid)
        self.fired: list[tuple[str, int, int]] = []  # repairs that acted: (name, start, end) in the parsed text
        # the last text added to a field: (field, text, version after) — the session's fast path checks that
        # the parse ended right after it
        self.last_add: tuple | None = None
        # calls replayed from a repetition memo: (index of the first, the memo's calls, their frozen ToolCalls,
        # how many) — result() copies that block of ToolCalls in one slice
        self.frozen_span: tuple | None = None
        # a streaming session's list of ToolCalls from a message it is done with: (the memo's frozen
        # ToolCalls it starts with, how many, the list) — result() brings it up to date instead of copying
        self.spare: tuple | None = None

    # -- backtracking ----------------------------------------------------------------------------------------
    def mark(self) -> tuple:
        """A snapshot for :meth:`reset`: lengths of content, reasoning and calls, and the last call's state."""
        calls = self.calls
        last = calls[-1] if calls else None
        return (len(self.content), len(self.reasoning), len(calls), last,
                last.state() if last is not None else None)

    def reset(self, mark: tuple) -> None:
        """Return to the snapshot ``mark`` (from :meth:`mark`): truncate content / reasoning, restore the calls."""
        lc, lr, n, last, state = mark
        self.content = self.content[:lc]
        self.reasoning = self.reasoning[:lr]
        del self.calls[n:]
        if last is not None and (self.calls[-1] is not last or last.state() != state):
            self.calls[-1] = _call_from_state(state)
        self.last_add = None

    # -- text ------------------------------------------------------------------------------------------------
    def add_content(self, s: str) -> None:
        """Append ``s`` to the content (nothing for "")."""
        if s:
            self.content += s
            self.version += 1
            self.last_add = ("content", s, self.version)

    def add_reasoning(self, s: str) -> None:
        """Append ``s`` to the reasoning (nothing for "")."""
        if s:
            self.reasoning += s
            self.version += 1
            self.last_add = ("reasoning_content", s, self.version)

    # -- tool calls ------------------------------------------------------------------------------------------
    @property
    def current(self) -> _Call:
        """The last opened call (for changing it); ``IndexError`` if none is open."""
        c = self.calls[-1]
        if c.frozen is not None:     # settled calls are shared between parses: change a copy
            c = self.calls[-1] = c.clone()
        return c

    def open_call(self, name: str, call_id: str = "", args: str = "{") -> None:
        """Start a visible call named ``name`` with arguments ``args`` (default ``"{"``) and id ``call_id``."""
        self.calls.append(_Call(ToolCall(name=name, arguments=args, id=call_id)))
        self.version += 1

    def set_args(self, text: str) -> None:
        """Verbatim JSON arguments (mapper ``tool-args`` starting with ``{``; trailing whitespace trimmed)."""
        t = text.rstrip(" \t\n\r\v\f")
        if t.startswith("{"):
            self.current.call.arguments = t
            self.version += 1
            self.last_add = ("arguments", text, self.version)

    def converted_args(self, text: str, start: int, end: int) -> None:
        """Arguments the handler converted from its own syntax, ``text`` (JSON, maybe still open), read from
        ``[start, end)`` of the parsed text; the positions are for :mod:`core.explain` (which records them)."""
        self.current.call.arguments = text
        self.version += 1

    def arg_name(self, name: str) -> None:
        """Append ``"name":`` (JSON-quoted, with a ``,`` before every key but the first) to the current
        call's arguments (llama.cpp mapper ``tool-arg-name``).
        """
        c = self.current
        c.call.arguments += ("," if c.arg_count else "") + json.dumps(name, ensure_ascii=False) + ":"
        c.arg_count += 1
        c.quote_open = False
        self.version += 1

    def arg_string(self, value: str, closed: bool) -> None:
        """Append the string value ``value`` JSON-escaped, opening the quote if needed; ``closed`` adds the
        closing quote (llama.cpp mapper ``tool-arg-string-value``).
        """
        c = self.current
        if not c.quote_open:
            c.call.arguments += '"'
            c.quote_open = True
        c.call.arguments += escape_json_inner(value)
        if closed:
            c.call.arguments += '"'
            c.quote_open = False
        self.version += 1

    def arg_raw(self, value: str, memo: dict | None = None, key: Any = None) -> None:
        """A typed value's text, Python literals normalised to JSON (``memo``/``key``: resume the normalisation
        of a value that grows across streamed parses)."""
        if value:
            self.current.call.arguments += (normalize_python_to_json_cached(value, memo, key) if memo is not None
                                            else normalize_python_to_json(value))
            self.version += 1

    def arg_json(self, value: str) -> None:
        """A value already read as JSON (or a prefix of JSON): appended as is (normalising it changes nothing)."""
        if value:
            self.current.call.arguments += value
            self.version += 1

    def arg_close(self) -> None:
        """End of one tagged argument: close a pending string quote (mapper ``tool-arg-close``)."""
        c = self.current
        if c.quote_open:
            c.call.arguments += '"'
            c.quote_open = False
            self.version += 1

    def close_call(self) -> None:
        """Close the current call: a pending quote, then one ``}`` per unclosed brace (llama.cpp ``tool-close``)."""
        c = self.current
        if c.quote_open:
            c.call.arguments += '"'
            c.quote_open = False
        c.call.arguments += "}" * max(0, json_brace_depth(c.call.arguments))
        self.version += 1

    # -- result ----------------------------------------------------------------------------------------------
    def result(self) -> AssistantMessage:
        """The message so far as an :class:`AssistantMessage` (copies of the calls); whitespace-only
        reasoning becomes "" when ``drop_blank_reasoning``. An open string value stays open.
        """
        reasoning = self.reasoning
        if self.drop_blank_reasoning and reasoning and not reasoning.strip(" \n\r\t"):
            reasoning = ""
        # a string value still open stays open (llama.cpp closes quotes only for calls not yet named), so
        # successive partial parses only ever append to the arguments
        calls = self._tool_calls()
        msg = AssistantMessage(content=self.content, reasoning_content=reasoning, tool_calls=calls,
                               repairs=list(self.fired))
        span = self.frozen_span
        if span is not None and span[0] == 0 and len(calls) >= span[3] and calls[span[3] - 1] is span[2][span[3] - 1]:
            # the first calls are the memo's settled ones (an append-only list): see stream_deltas_between
            msg.shared_calls = (span[2], span[3])
        return msg

    def _tool_calls(self) -> list[ToolCall]:
        """ToolCalls of :attr:`calls`: the frozen ones shared, the others copied."""
        calls = self.calls
        span = self.frozen_span
        if span is not None:
            i0, mcalls, tcs, m = span
            end = i0 + m
            if m and len(calls) >= end and calls[i0] is mcalls[0] and calls[end - 1] is mcalls[m - 1]:
                # only the last call is ever replaced (current / reset): both ends in place = the block is
                spare = self.spare
                if spare is not None and spare[0] is tcs and not i0:
                    # the memo's ToolCalls list only grows: the spare's first ones are still its first ones
                    self.spare = None
                    out = spare[2]
                    keep = min(spare[1], m)
                    del out[keep:]
                    if m > keep:
                        out += tcs[keep:m]
                else:
                    out = tcs[:m] if m < len(tcs) else list(tcs)
                if i0:
                    out[0:0] = _copies(calls[:i0])
                if end < len(calls):
                    out.extend(_copies(calls[end:]))
                return out
        return _copies(calls)


def _copies(calls: list[_Call]) -> list[ToolCall]:
    return [c.frozen if c.frozen is not None else ToolCall(c.call.name, c.call.arguments, c.call.id)
            for c in calls]


# keys of a streaming session's memo: lists it is done with, for the next parse to bring up to date
_SPARE_CALLS = ("spare", "calls")
_SPARE_TOOL_CALLS = ("spare", "tool-calls")


def attempt(sc: Scanner, b: "MessageBuilder", fn: Callable[..., Any], *args: Any) -> bool:
    """One PEG alternative: run ``fn(sc, b, *args)``; on :class:`Mismatch` restore the cursor (and the input
    a cut delimiter had shortened) and what was built, and return False — noting in ``sc.switches`` an
    alternative that had added to the message or got past its first position (on a shorter prefix it was
    alive and may have shown something). :class:`Incomplete` propagates (the input ended inside: the parse
    stops there)."""
    save, mark, text, n, version = sc.pos, b.mark(), sc.text, sc.n, b.version
    try:
        fn(sc, b, *args)
        return True
    except Mismatch as e:
        failed_at = max(sc.pos, e.pos)
        sc.pos, sc.text, sc.n = save, text, n
        if b.version != version or failed_at > save:
            # the alternative had got somewhere before it failed: a shorter prefix, on which it was still
            # alive, may have shown something of it (see core.chat.generator.consistent_view)
            sc.switches.append((id(getattr(fn, "__code__", fn)), save))   # the same for every parse
        b.reset(mark)
        return False


def optional(sc: Scanner, b: "MessageBuilder", fn: Callable[..., Any], *args: Any) -> bool:
    """``optional(fn)``: at the very end of the input it is not tried (llama.cpp repetition), else
    :func:`attempt`."""
    if sc.pos >= sc.n:
        sc.ends += 1
        return False
    return attempt(sc, b, fn, *args)


class _RepeatMemo:
    """What the settled iterations of one repetition built (per streaming session, by repetition and start).

    An iteration is settled when it succeeded, consumed text and looked only at positions before the end of
    the input (:attr:`Scanner.far`): the same text followed by anything gives the same iteration. Cumulative
    records (end position, calls, content and reasoning added, switches, fired repairs) let a parse replay
    any number of them at once; the calls are frozen (:attr:`_Call.frozen`), so every message shares them."""

    __slots__ = ("pre", "ends", "fars", "calls", "tcs", "content", "reasoning", "switches", "fired", "n_calls",
                 "n_content", "n_reasoning", "n_switches", "n_fired", "open")

    def __init__(self, sc: Scanner, b: "MessageBuilder"):
        self.pre = self._pre(sc, b)
        self.ends: list[int] = []
        self.fars: list[int] = []          # how far the iterations so far looked (cumulative maximum)
        self.calls: list[_Call] = []
        self.tcs: list[ToolCall] = []       # their frozen ToolCalls
        self.content = self.reasoning = ""
        self.switches: list = []
        self.fired: list = []
        self.n_calls: list[int] = []       # cumulative counts after each iteration
        self.n_content: list[int] = []
        self.n_reasoning: list[int] = []
        self.n_switches: list[int] = []
        self.n_fired: list[int] = []
        self.open = True                   # still recording (no unsettled iteration seen yet)

    @staticmethod
    def _pre(sc: Scanner, b: "MessageBuilder") -> tuple:
        last = b.calls[-1] if b.calls else None
        return (len(b.content), len(b.reasoning), len(b.calls), last.state() if last is not None else None,
                len(b.fired))

    def matches(self, sc: Scanner, b: "MessageBuilder") -> bool:
        """Whether the builder is in the state this memo was recorded from (so its iterations may replay)."""
        return self._pre(sc, b) == self.pre

    def replay(self, sc: Scanner, b: "MessageBuilder", hi: int | None) -> int:
        """Apply the remembered iterations (at most ``hi``) to ``sc`` / ``b``; returns how many."""
        k = len(self.ends) if hi is None else min(len(self.ends), hi)
        if k == 0 or self.ends[k - 1] >= sc.n:
            return 0
        m = self.n_calls[k - 1]
        if m:
            if b.frozen_span is None:
                b.frozen_span = (len(b.calls), self.calls, self.tcs, m)
            spare = sc.memo.pop(_SPARE_CALLS, None) if sc.memo is not None and not b.calls else None
            if spare is not None and spare[0] is self.calls:
                # a stream's previous builder list of these same replayed calls (this memo's list only grows)
                calls = spare[2]
                keep = min(spare[1], m)
                del calls[keep:]
                if m > keep:
                    calls += self.calls[keep:m]
                b.calls = calls
            else:
                b.calls.extend(self.calls[:m] if m < len(self.calls) else self.calls)
        if self.n_content[k - 1]:
            b.content += self.content[:self.n_content[k - 1]]
        if self.n_reasoning[k - 1]:
            b.reasoning += self.reasoning[:self.n_reasoning[k - 1]]
        if self.n_switches[k - 1]:
            sc.switches.extend(self.switches[:self.n_switches[k - 1]])
        if self.n_fired[k - 1]:
            b.fired.extend(self.fired[:self.n_fired[k - 1]])
        b.version += 1
        b.last_add = None
        sc.pos = self.ends[k - 1]
        sc._saw(self.fars[k - 1])
        return k

    def watch(self, sc: Scanner, b: "MessageBuilder") -> tuple:
        """The builder's state before an iteration (message lengths, the last call and its state, switches,
        fired repairs): :meth:`record` takes what the iteration added from it and checks that nothing before
        it changed."""
        return (len(b.content), len(b.reasoning), len(b.calls), b.calls[-1] if b.calls else None,
                b.calls[-1].state() if b.calls else None, len(sc.switches), len(b.fired))

    def record(self, sc: Scanner, b: "MessageBuilder", watch: tuple, far: int, count: int, before: int) -> None:
        """After an iteration from ``before`` that succeeded (``far``: how far it looked; ``count`` iterations
        before it): remember it if it is settled, else stop recording for this parse."""
        lc, lr, nc, last, state, ns, nf = watch
        if (far > sc.n or sc.pos == before or count != len(self.ends) or len(b.calls) < nc
                or (last is not None and (b.calls[nc - 1] is not last or last.state() != state))):
            self.open = False
            return
        for c in b.calls[nc:]:
            c.frozen = ToolCall(c.call.name, c.call.arguments, c.call.id)
            self.calls.append(c)
            self.tcs.append(c.frozen)
        self.content += b.content[lc:]
        self.reasoning += b.reasoning[lr:]
        self.switches.extend(sc.switches[ns:])
        self.fired.extend(b.fired[nf:])
        self.ends.append(sc.pos)
        self.fars.append(max(far, self.fars[-1]) if self.fars else far)
        self.n_calls.append(len(self.calls))
        self.n_content.append(len(self.content))
        self.n_reasoning.append(len(self.reasoning))
        self.n_switches.append(len(self.switches))
        self.n_fired.append(len(self.fired))


def repeat(sc: Scanner, b: "MessageBuilder", fn: Callable[..., Any], lo: int = 0, hi: int | None = None,
           resumable: bool = False) -> int:
    """``fn{lo,hi}`` (``hi`` None: unbounded) with llama.cpp's repetition rules: stop at the end of the input, at
    the first rolled-back :class:`Mismatch` or after an iteration that consumed nothing; fewer than ``lo``
    raises :class:`Incomplete` at the end of the input, else :class:`Mismatch`. Returns the count.

    ``resumable``: ``fn`` reads the text only through the scanner's primitives (so :attr:`Scanner.far` says
    how far it looked) and changes only calls it opens. Then, in a streaming session (``sc.memo``), the
    iterations that did not look at the end of the input are remembered with what they built, and the parse
    of a longer text replays them at once instead of re-running them (:class:`_RepeatMemo`)."""
    count = 0
    memo = None
    if resumable and sc.memo is not None and sc.pos < sc.n and type(b) is MessageBuilder:
        key = ("repeat", id(fn), sc.pos)
        memo = sc.memo.get(key)
        if memo is None or not memo.matches(sc, b):
            memo = sc.memo[key] = _RepeatMemo(sc, b)
        count = memo.replay(sc, b, hi)
        memo.open = count == len(memo.ends)
    while (hi is None or count < hi) and sc.pos < sc.n:
        before = sc.pos
        tracking = memo is not None and memo.open
        if tracking:
            far0, sc.far = sc.far, 0
            watch = memo.watch(sc, b)
        if not attempt(sc, b, fn):
            if tracking:
                sc.far = max(far0, sc.far)
            break
        if tracking:
            far, sc.far = sc.far, max(far0, sc.far)
            memo.record(sc, b, watch, far, count, before)
        if sc.pos == before:
            break
        count += 1
    if sc.pos >= sc.n and (hi is None or count < hi):
        sc.ends += 1     # stopped by the end of the input (no far: iterations settled stay so)
    if count < lo:
        if sc.pos >= sc.n:
            raise Incomplete(sc.n)
        raise Mismatch(sc.pos, f"expected at least {lo}")
    return count


# --------------------------------------------------------------------------------------------------------------
# Tagged argument values (XML-ish formats: Ling 3, MiniCPM5, Muse Glimmer, MiniMax-M3 leaves)
# --------------------------------------------------------------------------------------------------------------


def json_arguments(sc: Scanner, b: "MessageBuilder", repairs: frozenset[str] = frozenset()) -> int:
    """A call's JSON arguments at ``sc.pos`` (:func:`streamed_json_value` into ``b.set_args``); with repair
    ``double-encoded-arguments`` a JSON string holding the object is decoded once complete (nothing is shown
    while it streams). Returns the end of the value."""
    if "double-encoded-arguments" not in repairs or not sc.text.startswith('"', sc.pos):
        return streamed_json_value(sc, b.set_args)
    start = sc.pos

    def emit(text: str) -> None:
        try:
            inner = json.loads(text)
            ok = isinstance(inner, str) and isinstance(json.loads(inner), dict)
        except ValueError:
            return
        if ok:
            b.set_args(inner.strip())
            b.fired.append(("double-encoded-arguments", start, start + len(text)))
    return streamed_json_value(sc, emit)


def streamed_json_value(sc: Scanner, emit: Callable[[str], None]) -> int:
    """The JSON value at ``sc.pos`` (:func:`scan_json`, the scanner's memo) handed to ``emit`` as far as it
    goes: when the input ends inside it, ``emit(partial text)`` and :class:`Incomplete` is re-raised; else
    ``emit(value text)`` and its end is returned (``sc.pos`` is left for the caller to move). :class:`Mismatch`
    propagates with nothing emitted. Serves JSON arguments (``set_args`` / ``arg_json``) and JSON content
    (response-format output, ``add_content``)."""
    start = sc.pos
    try:
        end = scan_json(sc.text, start, sc.memo)
    except Incomplete as e:
        sc.far = sc.n + 1
        sc.ends += 1
        partial = sc.text[start:max(start, e.end)]
        sc.last_json = (start, partial)
        emit(partial)
        raise
    sc._saw(end + 1)   # a number is known to end only by the character after it
    emit(sc.text[start:end])
    return end


# --------------------------------------------------------------------------------------------------------------
# JSON schema (the subset the handlers consult; after llama.cpp json-schema.cpp)
# --------------------------------------------------------------------------------------------------------------

TYPES = ("null", "boolean", "number", "integer", "string", "array", "object")


class Schema:
    """A view of one JSON-schema node. ``kind`` is one of ``any ref anyOf allOf const enum null boolean number
    integer string array tuple object``; refs (``#/…``) resolve against the root document."""

    def __init__(self, node: Any, root: Any = None):
        self.node = node if isinstance(node, dict) else {}
        self.root = root if root is not None else self.node

    def _child(self, node: Any) -> "Schema":
        return Schema(node, self.root)

    @property
    def kind(self) -> str:
        """Schema kind (``str``): ``any ref anyOf allOf const enum null boolean number integer string array
        tuple object``, by the keyword precedence of llama.cpp ``common/json-schema.cpp``.
        """
        s = self.node
        if "$ref" in s:
            return "ref"
        if "oneOf" in s or "anyOf" in s:
            return "anyOf"
        t = s.get("type")
        if isinstance(t, list):
            return "anyOf"
        if "const" in s:
            return "const"
        if "enum" in s:
            return "enum"
        has_props = "properties" in s or ("additionalProperties" in s and s["additionalProperties"] is not True)
        if t is None:
            if has_props:
                return "object"
            if "allOf" in s:
                return "allOf"
            if "items" in s or "prefixItems" in s:
                return "tuple" if isinstance(s.get("items", s.get("prefixItems")), list) else "array"
            if any(k in s for k in ("pattern", "minLength", "maxLength", "format")):
                return "string"
            return "any"
        if t == "object":
            return "allOf" if (not has_props and "allOf" in s) else "object"
        if t == "string":
            return "allOf" if "allOf" in s else "string"
        if t == "array":
            return "tuple" if isinstance(s.get("items", s.get("prefixItems")), list) else "array"
        if t in ("integer", "number", "boolean", "null"):
            return t
        return "any"

    def target(self) -> "Schema | None":
        """The schema a local ``$ref`` (``#/a/b``) points at; ``None`` if no ``$ref``, not local or unresolvable."""
        ref = self.node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return None
        cur: Any = self.root
        for tok in ref[2:].split("/"):
            if isinstance(cur, dict) and tok in cur:
                cur = cur[tok]
            elif isinstance(cur, list) and tok.isdigit() and int(tok) < len(cur):
                cur = cur[int(tok)]
            else:
                return None
        return self._child(cur)

    def alternatives(self) -> list["Schema"]:
        """The branches: ``oneOf`` / ``anyOf`` entries, one schema per type of a ``type`` list, or the ``allOf``
        entries; ``[]`` when none.
        """
        s = self.node
        if "oneOf" in s or "anyOf" in s:
            alts = s.get("oneOf", s.get("anyOf"))
            return [self._child(a) for a in alts] if isinstance(alts, list) else []
        t = s.get("type")
        if isinstance(t, list):
            return [self._child({**s, "type": x}) for x in t]
        if "allOf" in s and isinstance(s["allOf"], list):
            return [self._child(a) for a in s["allOf"]]
        return []

    def properties(self) -> list[tuple[str, "Schema", bool]]:
        """``(name, schema, required)`` in schema order (objects only)."""
        props = self.node.get("properties")
        if not isinstance(props, dict):
            return []
        req = self.node.get("required")
        required = set(req) if isinstance(req, list) else set()
        return [(k, self._child(v), k in required) for k, v in props.items()]

    def items(self) -> "Schema":
        """The ``items`` (else ``prefixItems``) schema when it is an object; an any-schema otherwise."""
        it = self.node.get("items", self.node.get("prefixItems"))
        return self._child(it if isinstance(it, dict) else {})

    def value_types(self, _seen: frozenset = frozenset()) -> set[str]:
        """The JSON types a matching value can have (``number`` implies ``integer`` too)."""
        k = self.kind
        if k == "any":
            return set(TYPES)
        if k in ("null", "boolean", "integer", "string", "object"):
            return {k}
        if k == "number":
            return {"number", "integer"}
        if k in ("array", "tuple"):
            return {"array"}
        if k == "const":
            return {json_type(self.node["const"])}
        if k == "enum":
            vals = self.node["enum"] if isinstance(self.node["enum"], list) else []
            return {json_type(v) for v in vals}
        if k == "ref":
            t = self.target()
            key = self.node.get("$ref")
            if t is None or key in _seen:
                return set()
            return t.value_types(_seen | {key})
        if k == "anyOf":
            out: set[str] = set()
            for a in self.alternatives():
                out |= a.value_types(_seen)
            return out
        if k == "allOf":
            out = set(TYPES)
            for a in self.alternatives():
                out &= a.value_types(_seen)
            return out
        return set()

    def may_be_string(self, _seen: frozenset = frozenset()) -> bool:
        """Whether a matching value may be a string through any branch (llama.cpp ``may_be_string``)."""
        k = self.kind
        if k == "string":
            return True
        if k == "const":
            return isinstance(self.node["const"], str)
        if k == "enum":
            vals = self.node["enum"] if isinstance(self.node["enum"], list) else []
            return any(isinstance(v, str) for v in vals)
        if k == "ref":
            t = self.target()
            key = self.node.get("$ref")
            if t is None or key in _seen:
                return False
            return t.may_be_string(_seen | {key})
        if k == "anyOf":
            return any(a.may_be_string(_seen) for a in self.alternatives())
        if k == "allOf":
            any_string = False
            for a in self.alternatives():
                if a.kind == "any":
                    continue
                if not a.may_be_string(_seen):
                    return False
                any_string = True
            return any_string
        return False


def json_type(v: Any) -> str:
    """The JSON type name of a decoded JSON value (``null``, ``boolean``, ``integer``, ``number``, ``string``,
    ``array``, ``object``), as llama.cpp's schema helpers name a ``const`` / ``enum`` value's type."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


@dataclass
class ToolSpec:
    """One function tool of the request: ``name``, ``parameters`` (a JSON schema object, ``{"type": "object",
    "properties": {}}`` when absent or empty, as llama.cpp ``common_chat_tool_parameters``)."""

    name: str
    parameters: dict[str, Any]
    index: int = 0   # position in the request's ``tools`` (b11549 names grammar rules ``tool-<index>``)

    @property
    def schema(self) -> Schema:
        """``parameters`` as a :class:`Schema` (root = the parameters)."""
        return Schema(self.parameters)

    def params(self) -> list[tuple[str, Schema, bool]]:
        """``(name, schema, required)`` of the top-level parameters, in schema order."""
        return self.schema.properties() if self.schema.kind == "object" else []


def function_tools(tools: Iterable[dict[str, Any]] | None) -> list[ToolSpec]:
    """The function tools of an OpenAI ``tools`` list (others skipped, as llama.cpp ``foreach_function``)."""
    out = []
    for i, t in enumerate(tools or []):
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("function"), dict):
            continue
        fn = t["function"]
        params = fn.get("parameters")
        if not isinstance(params, dict) or not params:
            params = {"type": "object", "properties": {}}
        out.append(ToolSpec(str(fn.get("name", "")), params, i))
    return out


# --------------------------------------------------------------------------------------------------------------
# Request helpers
# --------------------------------------------------------------------------------------------------------------


@dataclass
class RequestView:
    """What the handlers read from a :class:`ChatRequest`, resolved as llama.cpp's request path does."""

    tools: list[ToolSpec]
    tool_choice: ToolChoice
    parallel: bool
    extract_reasoning: bool
    enable_thinking: bool
    json_schema: dict[str, Any] | None
    continuation: Continuation  # NONE, REASONING or CONTENT (AUTO resolved)
    continue_msg: dict[str, Any] | None

    @property
    def has_tools(self) -> bool:
        """True if the request has function tools."""
        return bool(self.tools)

    @property
    def tools_active(self) -> bool:
        """Tools given and ``tool_choice`` is not none."""
        return bool(self.tools) and self.tool_choice != ToolChoice.NONE

    @property
    def required(self) -> bool:
        """True if ``tool_choice`` is ``required``."""
        return self.tool_choice == ToolChoice.REQUIRED

    @property
    def has_schema(self) -> bool:
        """True if a response-format JSON schema (a dict) is given."""
        return isinstance(self.json_schema, dict)

    @property
    def has_continuation(self) -> bool:
        """True if the final message is continued (``continuation`` is not NONE)."""
        return self.continuation != Continuation.NONE

    def continue_reasoning(self) -> str:
        """``reasoning_content`` of the continued message ("" if none or not a string)."""
        m = self.continue_msg or {}
        r = m.get("reasoning_content")
        return r if isinstance(r, str) else ""

    def continue_content(self) -> str:
        """Content of the continued message as text (:func:`render_content`; "" if none)."""
        return render_content((self.continue_msg or {}).get("content"))

    def prefill(self, reasoning_open: str, content_open: str) -> str:
        """The generation prompt of a continuation as the handlers rebuild it: ``reasoning_open`` + the continued
        reasoning, then, when the content is continued, ``content_open`` + the continued content."""
        gp = reasoning_open + self.continue_reasoning()
        if self.continuation == Continuation.CONTENT:
            gp += content_open + self.continue_content()
        return gp


def render_content(content: Any) -> str:
    """A message's content as text: a string as is, typed parts concatenated (llama.cpp ``render_content``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def request_view(request: ChatRequest) -> RequestView:
    """Resolve the request the way llama.cpp's ``common_chat_templates_apply_jinja`` does before calling a
    handler: ``enable_thinking`` overridable by ``chat_template_kwargs``; continuation AUTO → REASONING when
    the last message has reasoning and no content, else CONTENT."""
    cont = request.continue_final_message
    msg = request.messages[-1] if (cont != Continuation.NONE and request.messages) else None
    if cont == Continuation.AUTO:
        cont = Continuation.CONTENT
        if msg is not None:
            r = msg.get("reasoning_content")
            c = msg.get("content")
            if isinstance(r, str) and r and not c:
                cont = Continuation.REASONING
    enable_thinking = request.enable_thinking
    kw = request.chat_template_kwargs or {}
    if "enable_thinking" in kw:
        v = kw["enable_thinking"]
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except ValueError:
                pass
        enable_thinking = bool(v)
    return RequestView(
        tools=function_tools(request.tools),
        tool_choice=request.tool_choice,
        parallel=request.parallel_tool_calls,
        extract_reasoning=request.reasoning_format != ReasoningFormat.NONE,
        enable_thinking=enable_thinking,
        json_schema=request.json_schema if isinstance(request.json_schema, dict) else None,
        continuation=cont,
        continue_msg=msg,
    )


class PromptContext:
    """Renders the request for handlers that need the prompt itself (llama.cpp handlers call
    ``common_chat_template_direct_apply_impl`` / ``…generation_prompt_impl``, sometimes with rewritten messages).

    Uses the request path's :class:`core.chat.prompt.PreparedRequest` (``prepared``, or prepared here) so the
    messages are normalised exactly as for the real prompt; if that is unavailable it renders the raw messages
    with :func:`core.templating.apply_template`. ``messages`` are the messages to render (a continued last
    message removed). Rendering failures give "" (a handler must not fail because of them).
    """

    def __init__(self, template: Any, request: ChatRequest, prepared: Any = None):
        self.template = template
        self.request = request
        self.prep = prepared
        self._prompt_mod: Any = None
        try:
            from .. import prompt as _prompt

            self._prompt_mod = _prompt
            if self.prep is None:
                self.prep = _prompt.prepare_request(template, request)
        except Exception:  # noqa: BLE001 - request path unavailable or failing: plain rendering below
            self.prep = None
        if self.prep is not None:
            self.messages: list[dict[str, Any]] = list(self.prep.messages)
        else:
            view = request_view(request)
            self.messages = list(request.messages[:-1] if view.has_continuation else request.messages)

    def render(self, add_generation_prompt: bool, messages: list[dict[str, Any]] | None = None) -> str:
        """The prompt for ``messages`` (default: the context's ``messages``), with or without the generation
        prompt; "" if rendering fails (llama.cpp ``common_chat_template_direct_apply_impl``).
        """
        msgs = self.messages if messages is None else messages
        try:
            if self.prep is not None:
                return self._prompt_mod.render_prompt(self.prep, add_generation_prompt=add_generation_prompt,
                                                      messages_override=msgs)
            from ...jinja.template import apply_template

            view = request_view(self.request)
            return apply_template(self.template, msgs, self.request.tools or None, add_generation_prompt,
                                  view.enable_thinking, dict(self.request.chat_template_kwargs or {}))
        except Exception:  # noqa: BLE001
            return ""

    @property
    def add_generation_prompt(self) -> bool:
        """Whether the real prompt ends with the generation prompt (False when the final message is continued)."""
        if self.prep is not None:
            return bool(self.prep.add_generation_prompt)
        return self.request.add_generation_prompt and request_view(self.request).continuation == Continuation.NONE


# --------------------------------------------------------------------------------------------------------------
# Grammars: each handler describes llama.cpp's PEG structure with core.peg's ChatBuilder and emits its GBNF
# --------------------------------------------------------------------------------------------------------------


def peg_grammar(build_root: Callable[[Any], Any], lazy: bool) -> tuple[str | None, str]:
    """GBNF of the parser ``build_root(builder)`` returns (a :class:`core.peg.chat.ChatBuilder` root), lazy or
    not (llama.cpp ``build_grammar`` over the handler's parser). Returns ``(grammar, error)``: on any failure
    the grammar is None and ``error`` says why (the handler still parses)."""
    try:
        from ...peg.chat import build_chat_peg_parser

        arena = build_chat_peg_parser(build_root)
        return arena.to_gbnf(lazy=lazy), ""
    except Exception as e:  # noqa: BLE001 - a grammar problem must not break parsing
        return None, f"{type(e).__name__}: {e}"


def grammar_fields(peg: Callable[[Any], Any], *, include: bool, lazy: bool,
                   trigger: GrammarTrigger) -> dict[str, Any]:
    """The grammar keyword arguments of a :class:`HandlerParser` (``grammar``, ``grammar_lazy``,
    ``grammar_triggers``, ``grammar_error``, ``peg``) for the handlers whose llama.cpp builder emits a grammar
    only when ``include`` (tools active and/or a response schema): then the GBNF of ``peg`` (see
    :func:`peg_grammar`), lazy or not, with the one ``trigger``; otherwise no grammar, not lazy, no trigger.
    ``peg`` is kept either way (it also serves :meth:`HandlerParser.describe`)."""
    if not include:
        return {"grammar": None, "grammar_lazy": False, "grammar_triggers": [], "grammar_error": "", "peg": peg}
    grammar, error = peg_grammar(peg, lazy)
    return {"grammar": grammar, "grammar_lazy": lazy, "grammar_triggers": [trigger], "grammar_error": error,
            "peg": peg}


def schema_node(schema: Any) -> Any:
    """core.grammar's parsed schema node for a JSON-schema dict (unsupported parts become "any")."""
    from ...grammar.json_schema import schema_from_json_lenient

    return schema_from_json_lenient(schema)


def param_nodes(spec: "ToolSpec") -> list[tuple[str, Any, bool, "Schema"]]:
    """``(name, schema node for the grammar, required, Schema view)`` of a tool's top-level parameters (llama.cpp
    ``foreach_parameter``: nothing unless the parameters schema is an object)."""
    root = schema_node(spec.parameters)
    views = {n: (s, r) for n, s, r in spec.params()}
    out = []
    for prop in getattr(root, "properties", None) or []:
        view, _ = views.get(prop.name, (Schema({}), False))
        out.append((prop.name, prop.schema, bool(prop.required), view))
    return out


# --------------------------------------------------------------------------------------------------------------
# The parser object
# --------------------------------------------------------------------------------------------------------------

ParseBody = Callable[[Scanner, MessageBuilder], None]


@dataclass
class HandlerParser:
    """A special handler's parser: implements :class:`core.chat.base.ChatOutputParser`.

    ``parse(output, is_partial)`` parses ``generation_prompt + output`` with ``body`` (which fills a
    :class:`MessageBuilder` and may raise :class:`Incomplete` or :class:`Mismatch`). An :class:`Incomplete`
    ends the parse with what was recognised (llama.cpp lenient parsing, also on the final parse). A
    :class:`Mismatch` escaping the body (llama.cpp would throw) keeps what was recognised before the failing
    position and returns the text from there on as content, so parsing never raises; for a partial parse that
    message — or the body's own, when it abandoned an alternative that had shown something (a shorter prefix
    may have shown it) — is used only if it extends the view of the prefix where that cause was not there
    yet (:func:`core.chat.generator.consistent_view`), else that view (a call already streamed is not taken
    back).

    Besides the protocol fields: ``name`` (handler), ``format`` (llama.cpp format name), ``supports_thinking``, ``thinking_start_tag``, ``thinking_end_tags``,
    ``message_delimiters`` (role → marker), ``description`` (readable PEG, for the app), ``prompt`` (the full
    prompt when the handler renders it differently from the request path — rewritten messages or an appended
    suffix — else None and the request path renders it, appending ``generation_prompt`` for a continuation),
    ``grammar_error`` (why ``grammar`` is None although one was due, else ""), ``peg`` (builds llama.cpp's
    parser structure for this request with a :class:`core.peg.chat.ChatBuilder`; used by :meth:`describe`).
    """

    name: str
    body: ParseBody
    generation_prompt: str = ""
    grammar: str | None = None
    grammar_lazy: bool = False
    grammar_triggers: list[GrammarTrigger] = field(default_factory=list)
    preserved_tokens: list[str] = field(default_factory=list)
    additional_stops: list[str] = field(default_factory=list)
    format: str = "peg-native"
    supports_thinking: bool = True
    thinking_start_tag: str = ""
    thinking_end_tags: list[str] = field(default_factory=list)
    message_delimiters: dict[str, str] = field(default_factory=dict)
    description: str = ""
    drop_blank_reasoning: bool = True
    prompt: str | None = None
    grammar_error: str = ""
    peg: Callable[[Any], Any] | None = None
    turn_header: str = ""
    # the body looks at the end of the input only through the scanner's primitives (and repeat/optional),
    # and an Incomplete it raises ends the parse: a streaming session may then skip the parses of text that
    # only grows a literal the input ends inside (HandlerSession._open_region, "pending")
    pending_literals: bool = False
    # the call's JSON arguments are read by streamed_json_value alone: a streaming session may follow the whole
    # open value without a parse (HandlerSession._open_json_value), not only its strings
    json_value_fast_path: bool = False
    # with json_value_fast_path: whether the text after a call's JSON arguments (from their close to the end
    # of the input) leaves the message as the parse at the close gives it (Kimi K2: the call end, the next
    # call's begin and id, up to its arguments); a session then streams it without a parse
    after_arguments: Callable[[str], bool] | None = None

    def header_cut(self, output: str, is_partial: bool = False) -> int | None:
        """Repair ``repeated-turn-header`` (on when ``turn_header`` is set): see
        :func:`core.chat.repairs.header_cut`."""
        from ..repairs import header_cut

        return header_cut(self.turn_header, output, is_partial)

    def parse(self, output: str, is_partial: bool = False) -> AssistantMessage:
        """Parse model ``output`` (text after the prompt). Never raises; see the class docstring. Settled by
        :func:`core.chat.repairs.settle` (final parse extends the partial view; cut calls reported)."""
        from ..repairs import REPEATED_TURN_HEADER, FiredRepair, from_spans, settle

        msg = self._parse(output, is_partial, None)
        cut = (self.header_cut(output, is_partial) or 0) if isinstance(output, str) else 0
        if msg.repairs:
            msg = msg.copy()
            msg.repairs = from_spans(msg.repairs, len(self.generation_prompt) - cut, output)
        if cut:
            msg = msg.copy()
            msg.repairs = [FiredRepair(REPEATED_TURN_HEADER, 0, cut, text=output[:cut])] + msg.repairs
        return settle(self, output, msg, is_partial, view=msg if is_partial else None)

    def session(self) -> "HandlerSession":
        """A parsing session for streaming (used by :class:`core.chat.stream.StreamingParser`): parses of
        growing prefixes reuse the complete values found by earlier parses."""
        return HandlerSession(self)

    def _run(self, text: str, memo: dict | None) -> tuple[AssistantMessage | None, "Scanner", "MessageBuilder"]:
        """Run the body on ``text``: (message, scanner, builder); message None on :class:`Mismatch`.
        RecursionError propagates. (A body may finish before the end of the text — Gemma 4 and Muse Glimmer
        ignore what follows, as llama.cpp does, e.g. an end-of-turn marker the reference cases expect
        dropped.)"""
        sc = Scanner(text, 0, memo)
        b = MessageBuilder(self.drop_blank_reasoning)
        if memo is not None:
            b.spare = memo.pop(_SPARE_TOOL_CALLS, None)
        try:
            self.body(sc, b)
        except Incomplete:
            pass
        except Mismatch:
            return None, sc, b
        return b.result(), sc, b

    def _run_clean(self, text: str) -> tuple[AssistantMessage | None, bool]:
        """The body's message for ``text`` (None on :class:`Mismatch`) and whether it finished without
        :class:`Incomplete` and without a cut delimiter (nothing pending at the end)."""
        sc = Scanner(text, 0, None)
        b = MessageBuilder(self.drop_blank_reasoning)
        try:
            self.body(sc, b)
        except Incomplete:
            return b.result(), False
        except Mismatch:
            return None, False
        return b.result(), sc.n == len(text)

    def _probe(self, text: str) -> Any:
        """:class:`core.chat.generator.Probe` of ``text`` (a prefix of the stream's text; no memo)."""
        from ..generator import Probe

        gp_len = len(self.generation_prompt)
        try:
            msg, sc, b = self._run(text, None)
        except RecursionError:
            return Probe(None, frozenset(), lambda: AssistantMessage(content=text[gp_len:]))
        return Probe(msg, frozenset(sc.switches), lambda: self._recovered(text, sc, b))

    def _recovered(self, text: str, sc: "Scanner", b: "MessageBuilder", memo: Any = None) -> AssistantMessage:
        """After a :class:`Mismatch`: the message of the longest prefix the body accepts (before an
        unfinished last call), then the rest as content (:func:`core.chat.generator.prefix_rest`, ``memo`` a
        stream's :class:`~core.chat.generator.ViewMemo`); failing that, what was recognised, then the
        unparsed rest (never the generation prompt) as content."""
        from ..generator import prefix_rest

        def at(k: int) -> tuple[AssistantMessage | None, bool]:
            try:
                return self._run_clean(text[:k])
            except RecursionError:
                return None, False
        found = prefix_rest(text, len(self.generation_prompt), at, memo)
        if found is not None:
            return found
        rest = text[max(sc.pos, len(self.generation_prompt)):]
        msg = b.result()
        msg.content += rest
        return msg

    def _parse(self, output: str, is_partial: bool, memo: dict | None, view_memo: Any = None,
               clean: list | None = None, text: str | None = None) -> AssistantMessage:
        if text is None:   # else ``text`` is generation_prompt + output after the cut, built by the caller
            if not isinstance(output, str):
                output = "" if output is None else str(output)
            cut = self.header_cut(output, is_partial)
            if cut is None:      # still a prefix of a repeated turn header: nothing to show yet
                return AssistantMessage()
            output = output[cut:]
            text = self.generation_prompt + output
        try:
            msg, sc, b = self._run(text, memo)
        except RecursionError:
            return AssistantMessage(content=text[len(self.generation_prompt):])
        if msg is not None and not (is_partial and sc.switches):
            if view_memo is not None and is_partial:
                view_memo.note(text, True, frozenset())
            if clean is not None:   # the body's own message is the answer: the session may look at its end
                clean.extend((text, sc, b, msg))
            return msg
        if not is_partial:
            if msg is not None:
                return msg
            if view_memo is not None:
                view_memo.sync(text)
            return self._recovered(text, sc, b, view_memo)
        # a partial parse must not take back what a shorter prefix showed (e.g. a call already streamed)
        from ..generator import Probe, consistent_view

        switches = frozenset(sc.switches)
        top = Probe(msg, switches, lambda: self._recovered(text, sc, b, view_memo))
        out = consistent_view(text, len(self.generation_prompt), lambda k: self._probe(text[:k]), top, view_memo)
        if view_memo is not None:
            view_memo.note(text, msg is not None, switches)
        return out

    def describe(self) -> str:
        """Readable PEG of the format: llama.cpp's parser structure for this request (the hand-written parser
        follows it), or ``description`` when that cannot be built."""
        head = f"{self.name} special handler (hand-written parser following llama.cpp common/parsers)"
        text = self.description
        if self.peg is not None:
            try:
                from ...peg.chat import build_chat_peg_parser

                text = build_chat_peg_parser(self.peg).describe()
            except Exception:  # noqa: BLE001 - describing must not fail
                pass
        return head + ("\n" + text if text else "")


class HandlerSession:
    """Incremental parsing for a stream: ``parse(output, is_partial)`` as :meth:`HandlerParser.parse`, but while
    each ``output`` extends the previous one, the ends of complete JSON / Python / Gemma values found earlier are
    reused instead of re-scanned (a value complete in a prefix is the same value in any longer text), which
    keeps streaming of large arguments close to linear. Another text resets the cache."""

    def __init__(self, parser: HandlerParser):
        from ..generator import ViewMemo

        from ..stream import TurnHeaderCut

        self.parser = parser
        self._full = parser.generation_prompt   # generation_prompt + the output (after a repeated header)
        self._cutter = TurnHeaderCut(parser)
        self._memo: dict = {}
        self._view = ViewMemo()
        self._view.trust()   # this session checks that texts extend (parse) or is told so (parse_appended)
        # after a partial parse: the open region more text may only extend (see _open_region), else None
        self.open_region: Any = None
        self._json_scan: tuple | None = None
        self._json_value_scan: tuple | None = None   # (value start, scanned up to, advance_json_value state)
        self._spare: tuple | None = None    # see recycle

    def parse(self, output: str, is_partial: bool = False) -> AssistantMessage:
        """Message for ``output`` as :meth:`HandlerParser.parse`, reusing value ends found in the previous
        (shorter) text of the stream; never raises on arbitrary text.
        """
        from ..stream import TurnHeaderCut

        self.open_region = None
        if not is_partial:   # the final parse is the one-shot parse (settled by core.chat.repairs)
            return self.parser.parse(output, False)
        if not isinstance(output, str):
            output = "" if output is None else str(output)
        cutter = TurnHeaderCut(self.parser)
        eff = cutter.append(output)
        if eff is None:      # still a prefix of a repeated turn header: nothing to show yet
            return AssistantMessage()
        self._cutter = cutter
        full = self.parser.generation_prompt + eff
        if not full.startswith(self._full):
            from ..generator import ViewMemo

            self._memo = {}
            self._json_scan = None
            self._json_value_scan = None
            self._view = ViewMemo()
            self._view.trust()
        self._full = full
        return self._parse_full(full)

    def parse_appended(self, added: str, is_partial: bool = True) -> AssistantMessage:
        """:meth:`parse` of the previous output followed by ``added`` (the caller vouches the text only grew:
        :class:`core.chat.stream.StreamingParser`), without comparing or re-joining the whole text."""
        self.open_region = None
        eff = self._cutter.append(added)
        if eff is not None:
            full, self._full = self._full, ""
            full += eff     # in place when nothing else holds the text (a local: CPython's concatenation)
            self._full = full
        gp = self.parser.generation_prompt
        if not is_partial:
            return self.parser.parse(self._cutter.raw(self._full[len(gp):]), False)
        if eff is None:      # still a prefix of a repeated turn header: nothing to show yet
            return AssistantMessage()
        return self._parse_full(self._full)

    def tail(self, k: int) -> str:
        """The last ``k`` characters of the output so far (``k`` > 0)."""
        return self._full[max(len(self.parser.generation_prompt), len(self._full) - k):]

    def _parse_full(self, full: str) -> AssistantMessage:
        memo = self._memo
        spare = self._spare
        if spare is not None:
            self._spare = None
            memo[_SPARE_TOOL_CALLS] = spare
        clean: list = []
        msg = self.parser._parse(None, True, memo, self._view, clean, text=full)
        memo.pop(_SPARE_TOOL_CALLS, None)
        if clean:
            try:
                self.open_region = self._open_region(*clean)
            except Exception:  # noqa: BLE001 - the fast path is an optimisation: without it every feed parses
                self.open_region = None
            b = clean[2]
            span = b.frozen_span
            calls = b.calls
            if span is not None and not span[0] and span[3] and len(calls) >= span[3] \
                    and calls[0] is span[1][0] and calls[span[3] - 1] is span[1][span[3] - 1]:
                # the builder is done with: its list of calls (the replayed ones first) serves the next parse
                memo[_SPARE_CALLS] = (span[1], span[3], calls)
            if msg is clean[3] and getattr(msg, "shared_calls", None) is not None:
                msg.recycler = self     # only the caller holds it: it may give its list back (recycle)
        return msg

    def recycle(self, msg: AssistantMessage) -> None:
        """Take back the tool-call list of ``msg``, a message of this session nobody reads any more
        (:class:`core.chat.stream.StreamingParser` once it has the next one): the next message's list is that
        one brought up to date, not a copy of every call."""
        if getattr(msg, "recycler", None) is self:
            msg.recycler = None
            shared = msg.shared_calls
            self._spare = (shared[0], min(shared[1], len(msg.tool_calls) - 1), msg.tool_calls)

    def _open_region(self, text: str, sc: Scanner, b: MessageBuilder, msg: AssistantMessage) -> Any:
        """The region of ``msg`` that appended text can only extend, or None (then the next feed parses).

        * content / reasoning: the body's last step was an ``until`` that ran to the end of the input (or
          stopped before a delimiter cut by it) and added its text to that field; nothing after it consumed
          text or changed the message. Any text holding no delimiter (and not ending inside one) extends that
          ``until`` the same way, and what follows it still sees only the end of the input.
        * JSON arguments: the parse ended inside a string of a call's verbatim JSON arguments (no escape
          pending) and nothing changed the message after :meth:`MessageBuilder.set_args` of them.
        * pending literal (parsers with ``pending_literals``): the only primitive that saw the end of the input
          was a literal the input ends inside (:attr:`Scanner.cut`, :attr:`Scanner.ends`): text that keeps the
          input inside it (a marker being streamed, ``<|tool_ca``) changes nothing; with ``json_value_fast_path``
          too, JSON arguments that start at the end of the input (an object opening there is followed by the
          whole-value fast path).

        Shapes as :class:`core.chat.stream.OpenRegion` (the same fast path as PEG-built parsers)."""
        from ..stream import OpenRegion

        cut = sc.cut
        js = sc.last_json
        if (js is not None and js[0] == sc.n == len(text) and sc.ends == 1 and self.parser.pending_literals
                and self.parser.json_value_fast_path and b.calls and msg.tool_calls
                and msg.tool_calls[-1].arguments == "{"):
            # the one look at the end was the call's JSON arguments starting there (the call's arguments are
            # "{" already): an object opening there continues as the whole-value fast path
            region = OpenRegion("pending", ())
            region.json_start = True
            region.after = self.parser.after_arguments
            return region
        if cut is not None and sc.ends == 1 and self.parser.pending_literals and sc.n == len(text):
            # the one look at the end was that literal's: more text that keeps the input inside it gives the
            # same run (every other primitive read only text before the end), so the same message
            region = OpenRegion("pending", ())
            region.held = text[cut[0]:]
            region.lit = cut[1]
            return region
        add = b.last_add
        if add is None or add[2] != b.version:
            return None
        field, added = add[0], add[1]
        if field == "arguments":
            js = sc.last_json
            if js is None or js[1] is not added or not b.calls or js[0] + len(added) != len(text):
                return None
            if self.parser.json_value_fast_path:
                return self._open_json_value(text, js[0])
            return self._open_json_string(js[0], added)
        u = sc.last_until
        # the very string the until returned (a fresh slice: one-character strings are shared by CPython, so
        # they do not tell which until they came from)
        if u is None or u[4] is not added or len(added) < 2 or not (u[1] == sc.pos == sc.n):
            return None
        start, stop, delims, cut, _ = u
        if not cut and stop != len(text):
            return None
        value = msg.content if field == "content" else msg.reasoning_content
        if not value.endswith(added) or (field == "reasoning_content" and not value.strip(" \n\r\t")):
            return None
        region = OpenRegion(field, tuple(d for d in delims if d))
        if cut:
            region.held = text[stop:]
        return region

    def _open_json_value(self, text: str, start: int) -> Any:
        """JSON arguments from ``start`` cut by the end of ``text`` anywhere inside the value (a string, a
        number, a literal, between tokens): the whole-value fast path region (the PEG sessions' one, see
        :func:`core.chat.stream.advance_json_value`), or None — an escape cut at the end, a value the scan
        does not follow, a closed one. The scan resumes from where the previous parse's left it."""
        from ..stream import JSON_VALUE_CLOSED, JSON_VALUE_START, OpenRegion, advance_json_value

        if not text.startswith("{", start):
            return None
        st = self._json_value_scan
        if st is None or st[0] != start or st[1] > len(text):
            st = (start, start, JSON_VALUE_START)
        state = advance_json_value(text, st[1], len(text), st[2], [])
        if state is None or state[3] or state[0] == JSON_VALUE_CLOSED[0]:
            self._json_value_scan = None
            return None
        self._json_value_scan = (start, len(text), state)
        region = OpenRegion("json-arguments", ())
        region.json = state
        region.after = self.parser.after_arguments
        return region

    def _open_json_string(self, start: int, value: str) -> Any:
        """JSON arguments ``value`` (from ``start``) cut inside a string: the fast-path region, or None. The
        string state is scanned on from where the previous feed left it."""
        from ..stream import advance_json_string, json_arguments_region

        if not value.startswith("{"):
            return None
        st = self._json_scan
        if st is None or st[0] != start or st[1] > len(value):
            st = (start, 0, False, False)
        _, i, in_str, esc = st
        in_str, esc = advance_json_string(value, i, len(value), in_str, esc)
        self._json_scan = (start, len(value), in_str, esc)
        if not in_str or esc:
            return None
        return json_arguments_region(value)


def word_trigger(value: str) -> GrammarTrigger:
    """A ``word`` grammar trigger on ``value`` (the literal text)."""
    return GrammarTrigger(TriggerType.WORD, value)


def pattern_trigger(value: str) -> GrammarTrigger:
    """A ``pattern`` grammar trigger on ``value`` (a regex)."""
    return GrammarTrigger(TriggerType.PATTERN, value)


