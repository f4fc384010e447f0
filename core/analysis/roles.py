"""Role start markers: the text that opens an assistant turn and a user turn (analysis notes §11).

Follows llama.cpp ``detect_assistant_start_marker`` / ``detect_user_start_marker``. Both feed the request
path's message delimiters; they are not preserved tokens.
"""

from __future__ import annotations

from ..diff import RenderParams, SegmentKind, segmentize_markers, trim
from . import probes as P
from .result import ReasoningAnalysis
from .session import ProbeSession


def detect_assistant_start(s: ProbeSession, reasoning: ReasoningAnalysis) -> str:
    """``[user]`` vs ``[user, assistant]``: the text before the answer, cut before any reasoning marker,
    trimmed. "" when a render fails."""
    cmp = s.compare("assistant_start", "What opens an assistant turn? A user turn alone vs followed by an answer.",
                    RenderParams([P.user()]), RenderParams([P.user(), P.assistant()]))
    if not cmp.ok:
        return ""
    u = cmp.diff.right
    i = u.find(P.ASSISTANT_MSG)
    if i < 0:
        cmp.notes.append("the answer text is not in the diff; using all of it")
    ap = u[:i] if i >= 0 else u
    for marker in (reasoning.start, reasoning.end):
        m = trim(marker)
        if marker and m in ap:
            ap = ap[:ap.find(m)]
    value = trim(ap)
    cmp.found["assistant_start"] = value
    return value


def detect_user_start(s: ProbeSession) -> str:
    """``[]`` vs ``[user]`` (or, if the template rejects empty messages, ``[user2, assistant]`` vs
    ``[user2, assistant, user]``): the markers before the user text, skipping leading end/close markers
    and whitespace, trimmed."""
    cmp = s.compare("user_start", "What opens a user turn? No messages vs one user message.",
                    RenderParams([]), RenderParams([P.user()]))
    if not cmp.ok:
        u2 = P.user(P.USER_MSG_TWO)
        cmp = s.compare("user_start-fallback",
                        "What opens a user turn? A user+assistant exchange vs followed by another user turn.",
                        RenderParams([u2, P.assistant()]), RenderParams([P.user(P.USER_MSG_TWO), P.assistant(),
                                                                         P.user()]))
        if not cmp.ok:
            return ""
    u = cmp.diff.right
    if P.USER_MSG not in u:
        cmp.notes.append("the user text is not in the diff")
    i = u.find(P.ASSISTANT_MSG)
    if i >= 0:
        u = u[i + len(P.ASSISTANT_MSG):]
    j = u.find(P.USER_MSG)
    cand = u[:j] if j >= 0 else u
    out: list[str] = []
    seen_marker = False
    for seg in segmentize_markers(cand):
        low = seg.value.lower()
        if seg.kind == SegmentKind.MARKER and not seen_marker and ("end" in low or "close" in low):
            continue
        if seg.kind == SegmentKind.TEXT and not seen_marker and not trim(seg.value):
            continue
        seen_marker |= seg.kind == SegmentKind.MARKER
        out.append(seg.value)
    value = trim("".join(out))
    cmp.found["user_start"] = value
    return value
