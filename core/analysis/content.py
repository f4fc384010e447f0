"""Phase 2 — how content is marked (analysis notes §9; llama.cpp ``analyze_content``, C1).

Two comparisons share the base "an assistant answer" (tools given): against a tool-call turn
(``C1-tools``) and against a reasoning-only turn (``C1-reasoning``). If the answer shows up bare, content is
``PLAIN``; otherwise the markers around the answer are its start/end (``ALWAYS_WRAPPED``). The analysis
never produces ``WRAPPED_WITH_REASONING`` nor sets ``requires_nonnull_content``.
"""

from __future__ import annotations

from ..diff import RenderParams, trim
from . import probes as P
from .patterns import END, MARKER, REST, SPACE, lit, opt, parse_and_extract, parse_anywhere, tag
from .result import ContentAnalysis, ContentMode, ReasoningAnalysis, ReasoningMode
from .session import ProbeSession

_WRAPPED = tag("pre", MARKER + SPACE) + lit(P.ASSISTANT_MSG) + SPACE + tag("post", MARKER + SPACE) + REST


def analyze_content(s: ProbeSession, reasoning: ReasoningAnalysis) -> ContentAnalysis:
    """Run C1 and return the content markers."""
    c = ContentAnalysis()
    tools = P.tools()
    base = RenderParams([P.user(), P.assistant()], tools=tools)
    with_tools = RenderParams([P.user(), P.assistant_calls(P.call("test_func", {"arg1": "value1"}))], tools=tools)
    with_reason = RenderParams([P.user(), P.assistant("", reasoning=P.THINKING_CONTENT)], tools=tools)
    ct = s.compare("C1-tools", "Is the answer wrapped? An answer vs a tool-call turn.", base, with_tools)
    cr = s.compare("C1-reasoning", "Is the answer wrapped? An answer vs a reasoning-only turn.", base, with_reason)
    if not ct.ok or not cr.ok:
        return c
    dt, dr = ct.diff, cr.diff
    plain = False
    if trim(dt.left) == P.ASSISTANT_MSG:
        L = dr.left
        p = SPACE + lit(L) + SPACE + opt(MARKER) + SPACE + END
        if parse_and_extract(p, L).ok:
            plain = True
            cr.notes.append("the answer differs only by itself (and maybe one end marker): plain content")
        elif reasoning.mode != ReasoningMode.NONE and reasoning.end:
            if parse_anywhere(lit(reasoning.end) + SPACE + lit(P.ASSISTANT_MSG), L).ok:
                plain = True
                cr.notes.append("the answer follows the reasoning end marker directly: plain content")
        if plain:
            c.mode = ContentMode.PLAIN
            cr.found["content.mode"] = "PLAIN"
    if not plain:
        rdiff = dr.left
        if reasoning.end and reasoning.end in rdiff:
            rdiff = rdiff[rdiff.find(reasoning.end) + len(reasoning.end):]
        use_reason = len(rdiff) > len(dt.left)
        pure = rdiff if use_reason else dt.left
        m = parse_anywhere(_WRAPPED, pure)
        c.start, c.end = m["pre"], m["post"]
        src = cr if use_reason else ct
        if c.start or c.end:
            src.found["content.start"] = c.start
            src.found["content.end"] = c.end
    if c.start or c.end:
        c.mode = ContentMode.ALWAYS_WRAPPED
        (cr if "content.start" in cr.found else ct).found["content.mode"] = "ALWAYS_WRAPPED"
    return c
