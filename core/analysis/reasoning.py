"""Phase 1 — how reasoning is marked (analysis notes §8; llama.cpp ``analyze_reasoning``).

* R1 ``compare_reasoning_presence``: an assistant turn without vs with ``reasoning_content``;
* R2 ``compare_thinking_enabled``: the generation prompt with ``enable_thinking`` false vs true;
* R3 ``compare_reasoning_scope`` (only when the template supports tool calls): reasoning on a content turn
  vs on a tool-call turn — reasoning shown only with tool calls is ``TOOLS_ONLY``.
"""

from __future__ import annotations

from ..diff import RenderParams, SegmentKind, prune_whitespace_segments, segmentize_markers, trim
from . import probes as P
from .patterns import MARKER, REST, SPACE, lit, opt, parse_anywhere, tag
from .fidelity import REASONING_FIELD, REASONING_TURN_HEADER
from .result import ReasoningAnalysis, ReasoningMode
from .session import ProbeSession

_R1_WRAPPED = tag("pre", MARKER + SPACE) + lit(P.THINKING_CONTENT) + tag("post", SPACE + MARKER + SPACE) + REST
_R1_DELIM = lit(P.THINKING_CONTENT) + SPACE + opt(tag("post", MARKER + SPACE) + REST)
_R3_WRAPPED = tag("pre", MARKER + SPACE) + lit(P.THINKING_CONTENT) + SPACE + tag("post", MARKER + SPACE)
_R3_DELIM = lit(P.THINKING_CONTENT) + SPACE + opt(tag("post", MARKER + SPACE))


def analyze_reasoning(s: ProbeSession, supports_tool_calls: bool) -> ReasoningAnalysis:
    """Run R1, R2 and (if ``supports_tool_calls``) R3; return the reasoning markers."""
    r = ReasoningAnalysis()
    _r1(s, r)
    _r2(s, r)
    if supports_tool_calls:
        _r3(s, r)
    return r


def _set(cmp, r: ReasoningAnalysis, **kw) -> None:
    for k, v in kw.items():
        setattr(r, k, v)
        cmp.found[f"reasoning.{k}"] = v.value if isinstance(v, ReasoningMode) else v


REASONING_FIELDS = ("reasoning", "thinking")
"""The names besides ``reasoning_content`` that templates read reasoning under (improvement
``reasoning-field``): Solar Open's ``message.reasoning``, gpt-oss's ``message.thinking``."""
TOOL_PLAN_FIELD = "tool_plan"
"""The name Cohere's Command R7B / Command A templates read a tool-call turn's reasoning under (R3, improvement
``reasoning-field``)."""


def _r1(s: ProbeSession, r: ReasoningAnalysis) -> None:
    a = RenderParams([P.user(), P.assistant()])
    b = RenderParams([P.user(), P.assistant(reasoning=P.THINKING_CONTENT)])
    cmp = s.compare("R1", "Is reasoning_content rendered? An answer without vs with reasoning.", a, b)
    if not cmp.ok:
        return
    d = cmp.diff
    if not d.right or P.THINKING_CONTENT not in d.right:
        cmp.notes.append("reasoning text does not appear in the diff: the template drops reasoning_content")
        if REASONING_FIELD not in s.improvements:
            return
        cmp = _r1_other_field(s, a, b)
        if cmp is None:
            return
    m = parse_anywhere(_R1_WRAPPED, cmp.output_b)
    if not m.ok:
        m = parse_anywhere(_R1_DELIM, cmp.output_b)
    if m.ok:
        if m["pre"] and m["post"]:
            start, end = m["pre"], m["post"]
            if REASONING_TURN_HEADER in s.improvements:
                turn = _reasoning_turn(cmp.output_a, cmp.output_b, P.THINKING_CONTENT, end)
                if turn is not None:
                    header = turn[1][len(end):]
                    s.note_improvement(REASONING_TURN_HEADER, f"reasoning end {end!r} is followed by the turn "
                                                              f"header {header!r} again: start {turn[0]!r}, end "
                                                              f"{turn[1]!r}")
                    cmp.notes.append(f"improvement {REASONING_TURN_HEADER}: the turn header {header!r} is written "
                                     "again after the reasoning end, before the answer")
                    start, end = turn
            _set(cmp, r, mode=ReasoningMode.TAG_BASED, start=start, end=end)
        elif m["post"]:
            _set(cmp, r, mode=ReasoningMode.TAG_BASED, end=m["post"])


def _r1_other_field(s: ProbeSession, a: RenderParams, b: RenderParams):
    """Improvement ``reasoning-field``: R1 again with the reasoning also under each name of
    :data:`REASONING_FIELDS`; the first that the template renders stays in force for the session's later
    renders (``s.reasoning_field``) and its comparison is returned. None (and no name kept) when neither is
    rendered."""
    for name in REASONING_FIELDS:
        s.reasoning_field = name
        cmp = s.compare(f"R1-{name}", f"Is reasoning rendered from the '{name}' field? An answer without vs with "
                                      "reasoning.", a, b)
        if cmp.ok and cmp.diff.right and P.THINKING_CONTENT in cmp.diff.right:
            s.note_improvement(REASONING_FIELD, f"the template reads reasoning from message.{name}, not "
                                                "reasoning_content")
            return cmp
    s.reasoning_field = ""
    return None


def _reasoning_turn(without: str, with_: str, text: str, end: str) -> tuple[str, str] | None:
    """Improvement ``reasoning-turn-header``: ``(start, end + H)`` when the render ``with_`` reasoning is
    ``without`` plus one inserted block ``start + text + end + H`` that starts with a marker, where H is the
    turn header that opened the reasoning turn (the text before the block ends with it), written again to open
    the answer. Of the places the block can sit (it slides while the text it passes equals the text after it),
    the last one that starts at a marker is taken: right after the header. Solar Open: ``<|think|>``,
    ``<|end|><|begin|>assistant``; gpt-oss: ``<|channel|>analysis<|message|>``, ``<|end|><|start|>assistant``.
    None otherwise."""
    i = with_.find(text)
    n = len(with_) - len(without)
    if i < 0 or n <= len(text):
        return None
    for p in range(i, i + len(text) - n - 1, -1):  # the block [p, p + n) holds the text [i, i + len(text))
        if with_[:p] + with_[p + n:] != without:
            continue
        start, tail = with_[p:i], with_[i + len(text):p + n]
        header = tail[len(end):]
        segs = segmentize_markers(start)
        if segs and segs[0].kind == SegmentKind.MARKER and tail.startswith(end) and header.strip() \
                and with_[:p].endswith(header):
            return start, tail
    return None


def _r2(s: ProbeSession, r: ReasoningAnalysis) -> None:
    a = RenderParams([P.user()], add_generation_prompt=True, enable_thinking=False)
    b = RenderParams([P.user()], add_generation_prompt=True, enable_thinking=True)
    cmp = s.compare("R2", "Does enable_thinking change the generation prompt? Thinking off vs on.", a, b)
    if not cmp.ok:
        return
    d = cmp.diff
    lt, rt = trim(d.left), trim(d.right)
    out_a, out_b = cmp.output_a, cmp.output_b
    if not lt and d.right:
        # thinking adds text at the end (e.g. an opening <think>)
        if rt and out_b.endswith(rt) and not r.start:
            _set(cmp, r, start=d.right, mode=ReasoningMode.TAG_BASED)
    elif not rt and d.left:
        # thinking off adds text (e.g. an empty <think></think>)
        if lt and out_a.endswith(lt) and not r.end:
            seg = prune_whitespace_segments(segmentize_markers(out_a))
            if len(seg) >= 2 and seg[-1].value == lt and seg[-2].kind == SegmentKind.MARKER:
                _set(cmp, r, start=seg[-2].value)
            _set(cmp, r, end=d.left, mode=ReasoningMode.TAG_BASED)
    elif lt and rt:
        # both sides differ (e.g. a changed system prompt): anchor on the tail of one render
        for base, ext in ((out_b, out_a), (out_a, out_b)):
            n = min(len(base), 64)
            anchor = base[len(base) - n:]
            pos = ext.rfind(anchor)
            if pos < 0 or pos + n >= len(ext):
                continue
            extra = trim(ext[pos + n:])
            if not extra:
                continue
            seg = prune_whitespace_segments(segmentize_markers(extra))
            if len(seg) == 2 and seg[0].kind == SegmentKind.MARKER and seg[1].kind == SegmentKind.MARKER:
                if not r.start:
                    _set(cmp, r, start=seg[0].value)
                if not r.end:
                    _set(cmp, r, end=seg[1].value)
                _set(cmp, r, mode=ReasoningMode.TAG_BASED)
                break
    if r.mode == ReasoningMode.NONE and not r.start and r.end:
        _set(cmp, r, mode=ReasoningMode.TAG_BASED)


def _r3(s: ProbeSession, r: ReasoningAnalysis) -> None:
    tools = P.tools()
    a = RenderParams([P.user(), P.assistant(reasoning=P.THINKING_CONTENT)], tools=tools)
    b = RenderParams([P.user(), P.assistant(None, reasoning=P.THINKING_CONTENT, tool_calls=[
        P.call(P.FUN_FIRST, {P.ARG_FIRST: "VVVV", P.ARG_SECOND: "XXXX"})])], tools=tools)
    cmp = s.compare("R3", "Is reasoning shown only on tool-call turns? Reasoning with an answer vs with a call.",
                    a, b)
    if not cmp.ok:
        return
    in_a = P.THINKING_CONTENT in cmp.output_a
    in_b = P.THINKING_CONTENT in cmp.output_b
    if not in_a and not in_b and REASONING_FIELD in s.improvements and not s.reasoning_field:
        # improvement reasoning-field: a tool-call turn's plan under the name the template reads (Cohere's
        # tool_plan, written between <|START_THINKING|> and <|END_THINKING|>)
        s.reasoning_field = TOOL_PLAN_FIELD
        alt = s.compare("R3-tool_plan", "Is reasoning shown on tool-call turns from the 'tool_plan' field? "
                                        "Reasoning with an answer vs with a call.", a, b)
        if alt.ok and P.THINKING_CONTENT in alt.output_b and P.THINKING_CONTENT not in alt.output_a:
            s.note_improvement(REASONING_FIELD, f"the template reads a tool-call turn's reasoning from "
                                                f"message.{TOOL_PLAN_FIELD}, not reasoning_content")
            cmp, in_a, in_b = alt, False, True
        else:
            s.reasoning_field = ""
    if in_a or not in_b:
        return
    _set(cmp, r, mode=ReasoningMode.TOOLS_ONLY)
    m = parse_anywhere(_R3_WRAPPED, cmp.output_b)
    if m.ok:
        _set(cmp, r, start=m["pre"], end=m["post"])
        return
    m = parse_anywhere(_R3_DELIM, cmp.output_b)
    if m.ok:
        _set(cmp, r, end=m["post"])
    else:
        _set(cmp, r, mode=ReasoningMode.NONE)
