"""Spans and stop point of one parse, per route kind: PEG parsers (auto-parser and PEG handlers) and the
hand-written handlers (scanner + message builder). Both replay the parse the parser itself chose."""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from ..chat.generator import (MAIN_REST, GeneratedParser, PREFIX_REST, RECOVER_CONTENT, RECOVER_TRAILING, covers,
                              trim_ws)
from ..analysis.instructions import braced_end
from ..chat.message import AssistantMessage
from ..peg import chat as T
from ..peg.trace import Expectation, FurthestFailure, traced_parse
from .spans import Span, SpanLabel, marker_labels, relabel_unparsed, same_message, settled_as, spans_from_ast

MAIN = "main"
RAW = "raw"
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


def trace_peg(parser: Any, output: str, report: Any = None, parsed: Any = None) -> ParseTrace:
    """Replay a PEG parser's final parse of ``output`` (see :meth:`GeneratedParser.parse_detailed`) traced.
    A turn header the output repeats (repair ``repeated-turn-header``) is skipped as the parse skips it, and
    shown as a marker span. ``parsed``: ``parse_detailed(output)`` when the caller has it."""
    cut = parser.header_cut(output) if hasattr(parser, "header_cut") else 0
    if not cut:
        return _trace_peg(parser, output, report, parsed)
    return _after_header(_trace_peg(parser, output[cut:], report, parsed or parser.parse_detailed(output)), parser,
                         output, cut)


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


def _trace_peg(parser: Any, output: str, report: Any = None, parsed: Any = None) -> ParseTrace:
    """:func:`trace_peg` of an ``output`` without a repeated turn header; ``parsed``: the
    ``parse_detailed`` result when the caller has it (of the output with its header)."""
    msg, _res, entry = parsed if parsed is not None else parser.parse_detailed(output)
    text = parser.generation_prompt + output
    gp = len(parser.generation_prompt)
    labels = _labels(parser, report)
    arena = parser.arena
    main = traced_parse(arena, text, labels=labels) if not parser.eps_fallback else None
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
                if len(text) <= STRICT_TRACE_CHARS:
                    strict = traced_parse(arena, text, labels=labels, lenient=False)
                    exp = strict.furthest.expected if strict.furthest.pos >= len(text) else []
                tr.truncated_at = len(text)
                tr.truncated_expect = FurthestFailure(len(text), exp, open_path)
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
        rec = traced_parse(arena, text, labels=labels, entry=entry).result
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
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if not node.partial:
            continue
        path.append(node.rule or node.tag)
        hit = hit or node.tag in _OPEN_TAGS or node.rule.startswith("tool")
        stack = list(node.children)
    return tuple(path) if hit else ()


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


# ---------------------------------------------------------------------------------------------- handlers


class _EventBuilder:
    """Wraps a handler's :class:`MessageBuilder`: records each call that adds message text with the scanner
    position, and forgets the calls an alternative that failed had made (``mark`` / ``reset``)."""

    def __init__(self, builder: Any, scanner: Any):
        self._b = builder
        self._sc = scanner
        self.events: list[tuple] = []   # (method, value, scanner pos, call index[, end])

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._b, name)
        if name == "converted_args":
            def conv(text: str, start: int, end: int) -> None:
                attr(text, start, end)
                self.events.append(("converted_span", text, start, len(self._b.calls) - 1, end))
            return conv
        if name in ("add_content", "add_reasoning", "open_call", "set_args", "arg_name", "arg_string",
                    "arg_raw", "arg_json"):
            def call(value: Any = "", *args: Any, **kw: Any) -> Any:
                out = attr(value, *args, **kw)
                self.events.append((name, value if isinstance(value, str) else "", self._sc.pos,
                                    len(self._b.calls) - 1))
                converted = kw.get("args", args[1] if len(args) > 1 else "{")
                if name == "open_call" and converted not in ("", "{"):
                    # the handler converted its own argument syntax: the raw arguments start at the cursor and
                    # end where the handler next expects a literal (its closer), if it gets that far
                    self.events.append(("converted_args", converted, self._sc.pos, len(self._b.calls) - 1, -1))
                    if hasattr(self._sc, "on_expect"):
                        ix = len(self.events) - 1
                        self._sc.on_expect = lambda pos: self._close_converted(ix, pos)
                if name == "open_call" and kw.get("call_id"):
                    # before the name: an id that contains the name (Kimi's functions.NAME:0) is painted first
                    self.events.insert(len(self.events) - 1 - (converted not in ("", "{")),
                                       ("call_id", kw["call_id"], self._sc.pos, len(self._b.calls) - 1))
                return out
            return call
        if name == "mark":
            return lambda: (attr(), len(self.events))
        if name == "reset":
            def reset(mark: Any) -> None:
                attr(mark[0])
                del self.events[mark[1]:]
            return reset
        return attr


    def _close_converted(self, ix: int, pos: int) -> None:
        if ix < len(self.events) and self.events[ix][0] == "converted_args":
            self.events[ix] = self.events[ix][:4] + (pos,)
        self._sc.on_expect = None


def _scanner(text: str) -> Any:
    """A handler :class:`Scanner` over ``text`` that reports the position of each ``expect`` to ``on_expect``
    (set by :class:`_EventBuilder` while converted arguments wait for their end)."""
    from ..chat.formats._common import Scanner

    class _TracingScanner(Scanner):
        __slots__ = ("on_expect",)

        def expect(self, lit: str) -> None:
            hook = self.on_expect
            if hook is not None:
                hook(self.pos)
            super().expect(lit)

    sc = _TracingScanner(text, 0, None)
    sc.on_expect = None
    return sc


_EVENT_LABELS = {
    "add_content": (SpanLabel.CONTENT, ""), "add_reasoning": (SpanLabel.REASONING, ""),
    "open_call": (SpanLabel.TOOL_NAME, ""), "set_args": (SpanLabel.ARGUMENTS, ""),
    "arg_name": (SpanLabel.ARGUMENT_NAME, ""), "arg_string": (SpanLabel.ARGUMENT_VALUE, "string"),
    "arg_raw": (SpanLabel.ARGUMENT_VALUE, "json"), "arg_json": (SpanLabel.ARGUMENT_VALUE, "json"),
    "call_id": (SpanLabel.CALL_ID, ""), "converted_args": (SpanLabel.ARGUMENTS, ""),
    "converted_span": (SpanLabel.ARGUMENTS, ""),
}


def _braced_end(text: str, pos: int) -> int:
    """End of the ``{…}`` group starting at ``pos`` (brace depth, double-quoted strings skipped); the end of the
    text when it does not close."""
    end = braced_end(text, pos)
    return len(text) if end < 0 else end


def _repaired_args(events: list, text: str, fired: list | None) -> list:
    """``events`` with each ``set_args`` whose value a repair made (``double-encoded-arguments``: the handler
    hands over the decoded object, which is not in the text) turned into a ``converted_span`` over the raw range
    the repair acted on, so the span carries the JSON the same parse put in the message. A repair range
    ``(name, start, end)`` of the builder's ``fired`` list matches the ``set_args`` made at ``start``."""
    if not fired:
        return events
    ranges = {start: end for _name, start, end in fired}
    out = []
    for ev in events:
        name, value, pos, call, *_more = ev
        if name == "set_args" and value and ranges.get(pos, pos) > pos and not text.startswith(value, pos):
            ev = ("converted_span", value, pos, call, ranges[pos])
        out.append(ev)
    return out


def _events_to_spans(events: list, text: str, gp: int, consumed: int, calls: list | None = None,
                     fired: list | None = None) -> list[Span]:
    """Place each builder call's value at the scanner position of the call: the value starts at the cursor
    (a JSON value handed over before the cursor moves) or ends at it (text handed over after ``until``);
    otherwise the nearest occurrence before the cursor after the previous placed span. Values not found in the
    text (a name the handler mapped) get no span; what remains is markers / whitespace / unparsed. Arguments a
    repair in ``fired`` (the builder's ``(name, start, end)`` list) made cover the raw range it acted on
    (:func:`_repaired_args`)."""
    events = _repaired_args(events, text, fired)
    paint: list = [None] * len(text)
    floor = 0
    for name, value, pos, call, *more in events:
        if not value:
            continue
        label, kind = _EVENT_LABELS[name]
        if name == "converted_span":
            final = calls[call].call.arguments if calls and 0 <= call < len(calls) else value
            paint[pos:more[0]] = [(label, final, call, "")] * (more[0] - pos)
            floor = max(floor, more[0])
            continue
        if name == "call_id":
            a = text.rfind(value, floor, max(pos, floor + len(value)))
            if a >= 0:
                paint[a:a + len(value)] = [(label, value, call, "")] * len(value)
            continue
        if name == "converted_args":
            if not text.startswith("{", pos):
                continue
            end = _braced_end(text, pos)
            if more and pos < more[0] < end:
                end = more[0]    # the handler's closer came first (its values need not balance braces)
            paint[pos:end] = [(label, value, call, "")] * (end - pos)
            floor = end
            continue
        if text.startswith(value, pos):
            a = pos
        elif pos - len(value) >= floor and text[pos - len(value):pos] == value:
            a = pos - len(value)
        else:
            a = text.rfind(value, floor, max(pos, floor + len(value)))
            if a < 0:
                continue
        call_ix = call if label not in (SpanLabel.CONTENT, SpanLabel.REASONING) else -1
        paint[a:a + len(value)] = [(label, name, call_ix, kind)] * len(value)
        floor = a + len(value)
    from .spans import _runs

    return _runs(text, paint, gp, consumed)


def trace_handler(parser: Any, output: str) -> ParseTrace:
    """Replay a hand-written handler's final parse of ``output`` (before it is settled, see :func:`trace_parse`)
    with its builder calls recorded."""
    from ..chat.formats._common import MISMATCH_TRACE, Incomplete, MessageBuilder, Mismatch

    cut = parser.header_cut(output) if hasattr(parser, "header_cut") else 0
    if cut:
        return _after_header(trace_handler(parser, output[cut:]), parser, output, cut)
    msg = _raw_message(parser, output)
    text = parser.generation_prompt + output
    gp = len(parser.generation_prompt)

    def run(t: str) -> tuple[Any, Any, Any, BaseException | None]:
        sc = _scanner(t)
        b = _EventBuilder(MessageBuilder(parser.drop_blank_reasoning), sc)
        try:
            parser.body(sc, b)
        except Incomplete as e:
            return sc, b, b._b.result(), e
        except Mismatch as e:
            return sc, b, None, e
        return sc, b, b._b.result(), None

    mismatches: list = []
    token = MISMATCH_TRACE.set(mismatches)
    try:
        sc, b, m, err = run(text)
    finally:
        MISMATCH_TRACE.reset(token)
    tr = ParseTrace(text, gp, msg, MAIN, [])
    if m is not None and same_message(m, msg):
        tr.spans = _events_to_spans(b.events, text, gp, len(text) if err is not None else max(sc.pos, gp),
                                    b._b.calls, b._b.fired)
        if sc.pos < len(text) and err is None:
            # the body finished early and the handler ignores the rest (as llama.cpp does)
            tr.entry = "main+ignored"
            if _IGNORABLE.sub("", text[sc.pos:]).strip():
                # more than an end-of-turn marker was dropped: that is where the format stopped
                tr.furthest = _furthest_mismatch(mismatches, sc.pos, None) if mismatches else FurthestFailure(
                    sc.pos, [Expectation("end", "")], ())
                tr.stop = max(tr.furthest.pos, gp)
            tr.spans = [replace(s, label=SpanLabel.IGNORED) if s.label == SpanLabel.UNPARSED else s
                        for s in tr.spans]
        if isinstance(err, Incomplete) and (msg.tool_calls or msg.reasoning_content
                                            or not msg.content.endswith(text[max(gp, sc.pos):])):
            tr.truncated_at = len(text)
            tr.truncated_expect = FurthestFailure(len(text), [], _frames(err))
        return tr
    assert err is not None or m is not None
    if isinstance(err, Mismatch):
        tr.furthest = _furthest_mismatch(mismatches, max(sc.pos, err.pos), err)
        tr.stop = max(tr.furthest.pos, gp)
    tr.entry = PREFIX_REST

    def message_at(t: str) -> AssistantMessage | None:
        _sc, _b, mm, e = run(t)
        return mm if not isinstance(e, Mismatch) else None
    d = _prefix_cut(text, gp, msg, message_at)
    if d is None:
        tr.entry = RAW
        tr.spans = _raw_spans(text, gp)
        return tr
    _sc, pb, _m, _e = run(text[:d])
    tr.spans = (_events_to_spans(pb.events, text[:d], gp, d, pb._b.calls, pb._b.fired)
                + _raw_spans(text[d:], 0, offset=d))
    return tr


def _furthest_mismatch(mismatches: list, pos: int, err: Any) -> FurthestFailure:
    """The furthest of the mismatches the body made (alternatives that failed and were rolled back
    included): position, what was expected there, the handler functions it was in."""
    far = max([m[0] for m in mismatches] + [pos])
    expected: list[Expectation] = []
    path: tuple[str, ...] = ()
    for p, why, frames in mismatches:
        if p == far:
            for e in _why(why):
                if e not in expected:
                    expected.append(e)
            path = path or frames
    if err is None:
        return FurthestFailure(far, expected, path)
    return FurthestFailure(far, expected or _why(err.why), path or _frames(err))


def _why(why: str) -> list[Expectation]:
    if why.startswith("expected ") and len(why) > 10 and why[9] in "'\"":
        import ast

        try:
            return [Expectation("literal", ast.literal_eval(why[9:]))]
        except (ValueError, SyntaxError):
            pass
    if why == "no known name here":
        return [Expectation("phrase", "a name the request declares")]
    return [Expectation("phrase", why or "something else")]


def _frames(err: BaseException) -> tuple[str, ...]:
    names = []
    for fr in traceback.extract_tb(err.__traceback__):
        if "/formats/" in fr.filename.replace("\\", "/") and not fr.filename.endswith("_common.py"):
            names.append(fr.name)
    return tuple(names)


@dataclass
class StreamStep:
    """One step of a streaming replay: the output prefix ``[0, end)``, the text this step added
    (``[new_start, end)`` of the output) and the spans of the partial parse of the prefix, where the text the
    parser holds back (a possible marker prefix, an unfinished name) is labelled ``held back``."""

    end: int
    new_start: int
    spans: list[Span]


def stream_steps(parser: Any, output: str, chunk: int = 8, report: Any = None) -> list[StreamStep]:
    """The streaming replay of ``output`` in steps of ``chunk`` characters: per step the spans of the lenient
    parse of the prefix so far (PEG: the traced run of the main root; handlers: the builder calls of the body),
    with the text the parse has not yet accounted for marked ``held back``. Raises ``ValueError`` for
    ``chunk < 1``."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 (got {chunk})")
    gp = len(parser.generation_prompt)
    steps: list[StreamStep] = []
    for end in list(range(chunk, len(output), chunk)) + [len(output)]:
        text = parser.generation_prompt + output[:end]
        if hasattr(parser, "arena") and not parser.eps_fallback:
            r = traced_parse(parser.arena, text, labels=_labels(parser, report)).result
            consumed = r.end if (r.need_more_input or r.success) else gp
            spans = spans_from_ast(r.nodes, text, gp, max(consumed, gp))
        elif hasattr(parser, "arena"):
            spans = _raw_spans(text, gp)
        else:
            spans = _handler_prefix_spans(parser, text, gp)
        spans = [replace(s, label=SpanLabel.HELD_BACK) if s.label == SpanLabel.UNPARSED else s for s in spans]
        if spans and spans[-1].label == SpanLabel.MARKER and not spans[-1].field and spans[-1].end == len(text):
            # consumed by no node yet: a marker or name still being written
            spans[-1] = replace(spans[-1], label=SpanLabel.HELD_BACK)
        steps.append(StreamStep(end, steps[-1].end if steps else 0, spans))
    return steps


def _handler_prefix_spans(parser: Any, text: str, gp: int) -> list[Span]:
    from ..chat.formats._common import Incomplete, MessageBuilder, Mismatch

    sc = _scanner(text)
    b = _EventBuilder(MessageBuilder(parser.drop_blank_reasoning), sc)
    try:
        parser.body(sc, b)
        consumed = len(text)
    except Incomplete:
        consumed = max(sc.pos, gp)
    except Mismatch:
        consumed = max(sc.pos, gp)
    return _events_to_spans(b.events, text, gp, consumed, b._b.calls)


def _trace_raw(parser: Any, output: str, report: Any = None, parsed: Any = None) -> ParseTrace:
    """:func:`trace_peg` for PEG parsers (they have an ``arena``), else :func:`trace_handler`: the spans of the
    parser's own final parse, before :func:`core.chat.repairs.settle` (``message`` is that parse's)."""
    if hasattr(parser, "arena"):
        return trace_peg(parser, output, report, parsed)
    return trace_handler(parser, output)


def _raw_message(parser: Any, output: str) -> AssistantMessage:
    """The parser's final parse of ``output`` before it is settled (what :func:`_trace_raw` replays)."""
    if hasattr(parser, "arena"):
        return parser.parse_detailed(output)[0]
    return parser._parse(output, False, None)


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
    # the stream's prefixes: the longest whose final parse the view extends (galloping back from the end, as
    # the partial parse searched), then, if that one does not give the view itself, every shorter one (bounded)
    best = longest_good_prefix(lambda k: message_extends(_raw_message(parser, output[:k]), view), 0, n, True)
    tried = [best] if best >= 0 else []
    tried += [d for d in range(n, max(-1, n - _VIEW_SCAN - 1), -1) if d != best]
    for d in tried:
        if not same_message(_raw_message(parser, output[:d]), view):
            continue
        tr = _trace_raw(parser, output[:d], report)
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


def trace_parse(parser: Any, output: str, report: Any = None) -> ParseTrace:
    """The trace of ``parser.parse(output)`` as the parser returns it: its final parse replayed (PEG:
    :func:`trace_peg`, hand-written handlers: :func:`trace_handler`) and settled as
    :func:`core.chat.repairs.settle` settles it — when the final parse does not extend the partial view
    (``stream-consistent-final``) the spans are the view's (its prefix replayed, the rest ``unparsed``), a call
    cut off at the end (``truncated-call``) keeps its spans but is left out of the message — with the fired
    repairs laid over the spans (``repaired: NAME``, :func:`core.explain.spans.attach_repairs`). ``message``
    is the settled message; ``stop`` / ``truncated_at`` stay those of the parse of the whole output."""
    from .spans import attach_repairs

    parsed = None
    if isinstance(parser, GeneratedParser):  # one parse for the message and the trace (not two)
        parsed = parser.parse_detailed(output)
        final = parser.parse(output, detailed=parsed)
    else:
        final = parser.parse(output)
    tr = _trace_raw(parser, output, report, parsed)
    if not same_message(settled_as(tr.message, final), final):
        view = _trace_view(parser, output, report, final)
        if view is not None:
            tr.spans, tr.entry = view.spans, view.entry
    tr.message = final
    if final.repairs:
        tr.spans = attach_repairs(tr.spans, [(r.name, (r.start, r.end)) for r in final.repairs], tr.gp_len)
    return tr


__all__ = ["ParseTrace", "StreamStep", "stream_steps", "trace_parse", "trace_peg", "trace_handler", "trim_ws"]
