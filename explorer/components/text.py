"""Safe text helpers: escaping for HTML and for Streamlit markdown, and "visible" whitespace.

Streamlit renders ``st.markdown`` / ``st.error`` / ``st.caption`` / ``st.info`` bodies as Markdown (links,
emphasis, ``:red[...]`` colour directives, ``$`` maths). Template and model text must never reach those
functions raw: :func:`md` backslash-escapes every ASCII punctuation character (CommonMark allows it for all
of them), so the text shows literally. :func:`html_text` escapes for HTML built by hand.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def md(text: Any) -> str:
    """``text`` as a Markdown string that displays literally (every ASCII punctuation backslash-escaped,
    newlines kept as hard line breaks)."""
    s = _MD_SPECIAL.sub(r"\\\1", str(text))
    return s.replace("\n", "  \n")


def html_text(text: Any) -> str:
    """HTML-escaped text (``&``, ``<``, ``>``, both quotes)."""
    return html.escape(str(text), quote=True)


def literal(text: str) -> str:
    """A string as a JSON literal (``"<think>\\n"``): whitespace and control characters visible, for tables
    and captions. Non-ASCII characters (e.g. ``｜``) are kept as they are."""
    return json.dumps(text, ensure_ascii=False)


# Visible forms of whitespace inside HTML views: a faint glyph, then (for newlines) the real break.
_WS_GLYPHS = {" ": "·", "\t": "→", "\n": "↵", "\r": "␍", "\v": "␋", "\f": "␌"}
GLYPH_STYLE = "opacity:0.45"
MARKER_STYLE = "border:1px solid #94a3b8;border-radius:3px;padding:0 1px;color:#1e3a8a"
MARKER_FILL = ";background:rgba(191,219,254,0.45)"


def visible_html(text: str) -> str:
    """Escaped HTML of ``text`` with whitespace made visible: each space, tab, CR, VT, FF becomes a faint
    glyph (``·`` ``→`` ``␍`` ``␋`` ``␌``), a newline becomes ``↵`` followed by the real line break; other
    control characters show as ``\\xNN``. Every piece of ``text`` goes through :func:`html.escape`."""
    out: list[str] = []
    for ch in text:
        g = _WS_GLYPHS.get(ch)
        if g is not None:
            tail = "\n" if ch == "\n" else ""
            out.append(f'<span style="{GLYPH_STYLE}">{g}</span>{tail}')
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f'<span style="{GLYPH_STYLE}">\\x{ord(ch):02x}</span>')
        else:
            out.append(html.escape(ch, quote=True))
    return "".join(out)


def tokens_html(text: str, *, fill: bool = True) -> str:
    """:func:`visible_html` with special tokens boxed: the text is split into markers (``<…>`` / ``[…]``)
    and plain text with :func:`core.diff.segmentize_markers` (the analysis' own notion of a marker).
    ``fill=False`` leaves the box transparent (inside coloured diff parts)."""
    from core.diff import SegmentKind, segmentize_markers

    parts: list[str] = []
    for seg in segmentize_markers(text):
        body = visible_html(seg.value)
        if seg.kind == SegmentKind.MARKER:
            parts.append(f'<span style="{MARKER_STYLE}{MARKER_FILL if fill else ""}">{body}</span>')
        else:
            parts.append(body)
    return "".join(parts)
