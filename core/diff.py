"""String and diff helpers of the differential analysis.

Ports the semantics of llama.cpp's ``common/chat-auto-parser-helpers.cpp`` (analysis notes §4):

* :func:`segmentize_markers` splits text into TEXT and MARKER segments (``<…>`` / ``[…]``);
* :func:`calculate_diff_split` splits two renders into a shared ``prefix``/``suffix`` and the differing
  ``left``/``right`` middles, matching whole segments first and refining by characters only between
  TEXT boundaries (so a marker such as ``<|im_end|>`` is never cut in half);
* :func:`until_common_prefix`.

"Whitespace" is always the C-locale ``isspace`` set (`` \\t\\n\\v\\f\\r``), never Unicode spaces.
"""

from __future__ import annotations

import copy
import enum
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from .memo import MISSING, BoundedMemo

WS = " \t\n\v\f\r"
"""The C-locale ``isspace`` characters."""


def trim(s: str) -> str:
    """Strip C-locale whitespace from both ends."""
    return s.strip(WS)


def trim_leading(s: str) -> str:
    """Strip C-locale whitespace from the left end."""
    return s.lstrip(WS)


class SegmentKind(str, enum.Enum):
    """Kind of a :class:`Segment`."""

    TEXT = "TEXT"
    MARKER = "MARKER"


class Segment(NamedTuple):
    """One piece of segmented text: ``kind`` (TEXT or MARKER) and its ``value`` (markers keep their brackets)."""

    kind: SegmentKind
    value: str


# a marker (an opener up to its first matching closer, nested openers included), else a lone opener: one
# without its closer, where segmentation stops (the rest is text)
_MARKER_RE = re.compile(r"<[^>]*>|\[[^\]]*\]|[<\[]")
_TEXT = SegmentKind.TEXT
_MARKER = SegmentKind.MARKER


# Segments of recent texts: a render is diffed against several others (two thirds of the segmentations of an
# analysis are of a text segmented before). Shared lists: callers only read them.
_SEGMENTS_MEMO = BoundedMemo("segments", max_entries=4096, max_bytes=32 * 2**20)


def _segments(text: str) -> list[tuple[SegmentKind, str]]:
    """:func:`segmentize_markers` as plain ``(kind, value)`` tuples (equal to the :class:`Segment` s; cheaper to
    build, which matters to :func:`calculate_diff_split`: ~20 segments per render, two renders per diff).
    Memoized (bounded); the list returned must not be changed."""
    hit = _SEGMENTS_MEMO.get(text)
    if hit is MISSING:
        hit = _scan_segments(text)
        _SEGMENTS_MEMO.put(text, hit, 3 * len(text) + 40 * len(hit) + 100)
    return hit


def _scan_segments(text: str) -> list[tuple[SegmentKind, str]]:
    out: list[tuple[SegmentKind, str]] = []
    border = 0
    for m in _MARKER_RE.finditer(text):
        start, end = m.span()
        if start > border:
            out.append((_TEXT, text[border:start]))
        border = start
        if end - start == 1:  # an opener never closed
            break
        out.append((_MARKER, text[start:end]))
        border = end
    if border < len(text):
        out.append((_TEXT, text[border:]))
    return out


def segmentize_markers(text: str) -> list[Segment]:
    """Split ``text`` into TEXT and MARKER segments, left to right.

    Outside a marker, ``<`` or ``[`` opens one; inside, only the matching closer (``>`` / ``]``) ends it, so
    nested openers are part of the marker. An unterminated marker is TEXT, which can leave two adjacent TEXT
    segments (``"test<tag"`` → TEXT ``test``, TEXT ``<tag``). Follows llama.cpp ``segmentize_markers``.
    """
    return [Segment(k, v) for k, v in _scan_segments(text)]


def prune_whitespace_segments(segments: list[Segment]) -> list[Segment]:
    """Drop segments whose value is empty after trimming whitespace."""
    return [s for s in segments if trim(s.value)]


@dataclass(frozen=True)
class DiffSplit:
    """Result of :func:`calculate_diff_split`: ``a == prefix + left + suffix`` and ``b == prefix + right +
    suffix`` (up to the degenerate cases documented there)."""

    prefix: str = ""
    suffix: str = ""
    left: str = ""
    right: str = ""

    def to_json(self) -> dict[str, str]:
        """``{"prefix", "left", "right", "suffix"}`` (all ``str``)."""
        return {"prefix": self.prefix, "left": self.left, "right": self.right, "suffix": self.suffix}


def common_prefix_len(a: str, b: str) -> int:
    """Length (characters) of the longest common prefix of ``a`` and ``b``."""
    # halving the differing range with slice comparisons (memcmp) instead of a Python step per character:
    # renders share hundreds of characters
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def common_suffix_len(a: str, b: str) -> int:
    """The length of the longest common suffix of ``a`` and ``b`` (slice comparisons in a binary search: C-speed
    on long texts)."""
    la, lb = len(a), len(b)
    n = min(la, lb)
    if a[la - n:] == b[lb - n:]:
        return n
    lo, hi = 0, n  # the last lo characters agree, the last hi do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
            lo = mid
        else:
            hi = mid
    return lo


def common_prefix(a: str, b: str) -> str:
    """Longest common (character) prefix of two strings."""
    return a[:common_prefix_len(a, b)]


# The analysis diffs the same pairs of (memoized) renders on every re-analysis of a template.
_DIFF_MEMO = BoundedMemo("diffs", max_entries=32_768, max_bytes=128 * 2**20)


def calculate_diff_split(left: str, right: str) -> DiffSplit:
    """Split two renders into shared prefix/suffix and differing middles.

    Matches segment sequences from both ends at once (markers are atomic), then refines character by
    character only where both boundary segments are TEXT. Two fix-ups: identical inputs give
    ``prefix = left``; when ``left`` is a prefix of ``right`` the split is forced to
    ``prefix = left, right = the rest``. Follows llama.cpp ``calculate_diff_split`` exactly (analysis notes §4).
    Memoized (bounded, :mod:`core.memo`; a :class:`DiffSplit` is frozen, so the memoized one is returned).
    """
    key = (left, right)
    hit = _DIFF_MEMO.get(key)
    if hit is MISSING:
        hit = _calculate_diff_split(left, right)
        _DIFF_MEMO.put(key, hit, 2 * (len(left) + len(right)) + 200)
    return hit


def _calculate_diff_split(left: str, right: str) -> DiffSplit:
    # segments as (kind, value) tuples: [0] is the kind, [1] the value
    ls = _segments(left)
    rs = _segments(right)
    if not ls:
        return DiffSplit(right=right)
    if not rs:
        return DiffSplit(left=left)

    a, b = 0, len(ls) - 1
    c, d = 0, len(rs) - 1
    pre: list[str] = []
    suf: list[str] = []  # collected in reverse
    lfc = rfc = False
    while a != b and c != d:
        moved = False
        if ls[a] == rs[c]:
            pre.append(ls[a][1])
            a += 1
            c += 1
            moved = True
        if ls[b] == rs[d]:
            suf.append(ls[b][1])
            if a != b:
                b -= 1
            else:
                lfc = True
            if c != d:
                d -= 1
            else:
                rfc = True
            moved = True
        if not moved:
            break

    if a == b and c != d:
        if ls[a] == rs[d]:
            suf.append(rs[d][1])
            d -= 1
            lfc = True
        elif ls[a] == rs[c]:
            pre.append(rs[c][1])
            c += 1
            lfc = True
    elif c == d and a != b:
        if ls[b] == rs[c]:
            suf.append(ls[b][1])
            b -= 1
            rfc = True
        elif ls[a] == rs[c]:
            pre.append(ls[a][1])
            a += 1
            rfc = True
    elif a == b and c == d and ls[a] == rs[c] and ls[a][0] is _MARKER:
        pre.append(rs[c][1])
        lfc = rfc = True

    text_suffix_ok = ls[b][0] is _TEXT and rs[d][0] is _TEXT
    text_prefix_ok = ls[a][0] is _TEXT and rs[c][0] is _TEXT
    rem_l = "".join([s[1] for s in ls[a:(b if lfc else b + 1)]])
    rem_r = "".join([s[1] for s in rs[c:(d if rfc else d + 1)]])
    sl = common_suffix_len(rem_l, rem_r) if text_suffix_ok else 0
    pl = common_prefix_len(rem_l[:len(rem_l) - sl], rem_r[:len(rem_r) - sl]) if text_prefix_ok else 0

    prefix = "".join(pre) + rem_l[:pl]
    suffix = rem_l[len(rem_l) - sl:] + "".join(reversed(suf))
    d_left = rem_l[pl:len(rem_l) - sl]
    d_right = rem_r[pl:len(rem_r) - sl]
    if d_left == "" and d_right == "":
        prefix, suffix = left, ""
    if d_left == "" and d_right != "" and right.startswith(left):
        prefix, suffix, d_right = left, "", right[len(left):]
    return DiffSplit(prefix=prefix, suffix=suffix, left=d_left, right=d_right)


def until_common_prefix(full: str, left: str, right: str) -> str:
    """Text of ``full`` before the first occurrence of the common prefix of ``left`` and ``right``;
    "" when they share no prefix or it does not occur in ``full``."""
    p = common_prefix(left, right)
    if not p:
        return ""
    pos = full.find(p)
    return "" if pos < 0 else full[:pos]


@dataclass
class RenderParams:
    """Inputs of one render of the analysis (llama.cpp ``template_params``).

    ``messages`` (OpenAI-shaped list), ``tools`` (list or None; passed only when non-empty),
    ``add_generation_prompt`` (set only when true), ``enable_thinking`` (also written into the extra
    context, as llama.cpp does), ``extra_context`` (dict or None).
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = False
    enable_thinking: bool = True
    extra_context: dict[str, Any] | None = None

    def copy(self) -> "RenderParams":
        """A deep copy (messages and tools included)."""
        return copy.deepcopy(self)

    def to_json(self) -> dict[str, Any]:
        """``{"messages", "tools", "add_generation_prompt", "enable_thinking"}`` plus ``extra_context`` when
        non-empty.
        """
        d: dict[str, Any] = {
            "messages": self.messages,
            "tools": self.tools,
            "add_generation_prompt": self.add_generation_prompt,
            "enable_thinking": self.enable_thinking,
        }
        if self.extra_context:
            d["extra_context"] = self.extra_context
        return d
