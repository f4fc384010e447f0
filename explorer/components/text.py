"""Safe text helpers: escaping for HTML and for Streamlit markdown, and "visible" whitespace.

Streamlit renders ``st.markdown`` / ``st.error`` / ``st.caption`` / ``st.info`` bodies as Markdown (links,
emphasis, ``:red[...]`` colour directives, ``$`` maths). Template and model text must never reach those
functions raw: :func:`md` backslash-escapes every ASCII punctuation character (CommonMark allows it for all
of them), so the text shows literally. :func:`html_text` escapes for HTML built by hand.

Invisible characters (controls, bidi overrides and isolates such as U+202E, zero-width characters, BOM, line
and paragraph separators — Unicode categories Cc, Cf, Zl, Zp) are shown as escapes (``\\u202e``) by every helper
here: a U+202E in model output would otherwise reverse the displayed text and JSON after it.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


INVISIBLE_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")
_PLANES = ((0, 0x20000), (0xE0000, 0xE1000))  # where Unicode has assigned Cc/Cf/Zl/Zp characters

# The code-point ranges of those categories for Unicode 14.0 (Python 3.11's unicodedata), precomputed: scanning
# 135k code points cost 60-150 ms of a fresh server's first page view. Another Unicode version is scanned at
# import (tests/test_app_text.py checks this table against the scan).
_UNIDATA_VERSION = "14.0.0"
_RANGES_14 = ((0x0, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD),
              (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
              (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB),
              (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
              (0xE0001, 0xE0001), (0xE0020, 0xE007F))


def scan_invisible_ranges() -> tuple[tuple[int, int], ...]:
    """The code-point ranges of :data:`INVISIBLE_CATEGORIES` in this Python's Unicode database (a full scan)."""
    import unicodedata

    ranges: list[list[int]] = []
    for lo, hi in _PLANES:
        for c in range(lo, hi):
            if unicodedata.category(chr(c)) in INVISIBLE_CATEGORIES:
                if ranges and ranges[-1][1] == c - 1:
                    ranges[-1][1] = c
                else:
                    ranges.append([c, c])
    return tuple((a, b) for a, b in ranges)


def invisible_ranges() -> tuple[tuple[int, int], ...]:
    """:func:`scan_invisible_ranges`, from the precomputed table when this Python's Unicode version is its."""
    import unicodedata

    return _RANGES_14 if unicodedata.unidata_version == _UNIDATA_VERSION else scan_invisible_ranges()


def _invisible_class(ranges: tuple[tuple[int, int], ...], keep: str = "") -> str:
    kept = sorted(ord(k) for k in keep)
    pieces: list[tuple[int, int]] = []
    for a, b in ranges:
        for k in kept:  # cut each kept character out of its range
            if a <= k <= b:
                if a < k:
                    pieces.append((a, k - 1))
                a = k + 1
        if a <= b:
            pieces.append((a, b))
    # ranges, not one escape per character: the regex scans 4-5x faster
    return "[" + "".join(f"\\U{a:08x}" + (f"-\\U{b:08x}" if b > a else "") for a, b in pieces) + "]"


# Tab and newline are laid out by every view (and made visible by visible_html); the rest is escaped.
_RANGES = invisible_ranges()
INVISIBLE = re.compile(_invisible_class(_RANGES))
_INVISIBLE_NO_WS = re.compile(_invisible_class(_RANGES, keep="\t\n"))


def escape_code(ch: str) -> str:
    """``\\xNN`` / ``\\uNNNN`` / ``\\UNNNNNNNN`` for one character (Python escape syntax)."""
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else (f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")


def visible_text(text: Any) -> str:
    """``text`` with every invisible character except tab and newline replaced by its escape
    (:func:`escape_code`): for plain-text displays (table cells, code blocks, JSON viewers)."""
    return _INVISIBLE_NO_WS.sub(lambda m: escape_code(m.group()), str(text))


def visible_json(value: Any, clip: int | None = None) -> Any:
    """A copy of a JSON value with :func:`visible_text` applied to every string (keys too), for ``st.json``;
    strings longer than ``clip`` characters are cut there with a note of how many characters follow."""
    if isinstance(value, str):
        if clip is not None and len(value) > clip:
            return visible_text(value[:clip]) + f" … ({len(value) - clip:,} more characters)"
        return visible_text(value)
    if isinstance(value, dict):
        return {visible_text(k): visible_json(v, clip) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [visible_json(v, clip) for v in value]
    return value


def visible_json_text(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with its invisible characters as JSON escapes
    (``\\u202e``): the same JSON, and the copy button copies valid JSON. The layout's newlines stay."""
    return _INVISIBLE_NO_WS.sub(lambda m: json.dumps(m.group()).strip('"'), text)


def md(text: Any) -> str:
    """``text`` as a Markdown string that displays literally (invisible characters escaped, every ASCII
    punctuation backslash-escaped, newlines kept as hard line breaks)."""
    s = _MD_SPECIAL.sub(r"\\\1", visible_text(str(text)).replace("\t", "\\x09"))
    return s.replace("\n", "  \n")


def table_md(frame: Any) -> Any:
    """A copy of a DataFrame for ``st.table`` with every text cell escaped by :func:`md`: Streamlit draws a
    static table's cells as Markdown (a preserved token ``>\\n`` became an empty quote, ``**`` bold, a
    ``[link](…)`` in a template a live link)."""
    return frame.map(lambda v: md(v) if isinstance(v, str) else v)


def show_table(frame: Any, **kw: Any) -> None:
    """``st.table`` of :func:`table_md` of ``frame`` (every cell shown as the text it is)."""
    import streamlit as st

    st.table(table_md(frame), **kw)


def html_text(text: Any) -> str:
    """HTML-escaped text (``&``, ``<``, ``>``, both quotes)."""
    return html.escape(str(text), quote=True)


def literal(text: str) -> str:
    """A string as a JSON literal (``"<think>\\n"``): whitespace and invisible characters as JSON escapes
    (``\\u202e``), for tables and captions. Other non-ASCII characters (e.g. ``｜``) are kept as they are."""
    return INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) < 0x10000
                         else json.dumps(m.group()).strip('"'), json.dumps(text, ensure_ascii=False))


# Visible forms of whitespace inside HTML views: a faint glyph, then (for newlines) the real break.
_WS_GLYPHS = {" ": "·", "\t": "→", "\n": "↵", "\r": "␍", "\v": "␋", "\f": "␌"}
GLYPH_STYLE = "opacity:0.45"
# the theme's text colour in a box tinted over the panel's background: readable in the light and dark themes
MARKER_STYLE = "border:1px solid rgba(100,116,139,0.85);border-radius:3px;padding:0.08em 1px 0.22em;color:inherit"
MARKER_FILL = ";background:rgba(59,130,246,0.22)"


def _visible_char(m: "re.Match[str]") -> str:
    ch = m.group()
    g = _WS_GLYPHS.get(ch)
    if g is not None:
        # a visible space is a glyph, not a space: <wbr> gives the line its break opportunity back (a long line
        # ran off the view's right edge, or broke inside a word)
        return f'<span style="{GLYPH_STYLE}">{g}</span>' + ("\n" if ch == "\n" else "<wbr>" if ch in " \t" else "")
    return f'<span style="{GLYPH_STYLE}">{escape_code(ch)}</span>'


_VISIBLE_HTML = re.compile(f"[ \\t\\n\\r\\v\\f]|{INVISIBLE.pattern}")


def visible_html(text: str) -> str:
    """Escaped HTML of ``text`` with whitespace made visible: each space, tab, CR, VT, FF becomes a faint
    glyph (``·`` ``→`` ``␍`` ``␋`` ``␌``; a line may break after a space or tab), a newline becomes ``↵``
    followed by the real line break; other invisible characters (controls, bidi, zero-width) show as escapes
    (``\\x1b``, ``\\u202e``). Every piece of ``text`` goes through :func:`html.escape`."""
    return _VISIBLE_HTML.sub(_visible_char, html.escape(text, quote=True))


# The text boxes that hold code — templates and JSON — in the code font, like the code views (Jinja's indentation
# and JSON's nesting read in a fixed-width font; Streamlit draws every text area in its prose font). Drawn once per
# run by the sidebar, so each page's box keeps its place.
CODE_INPUTS = ("in_edit_source", "in_paste_text", "in_compare_text_A", "in_compare_text_B", "in_tools",
               "in_messages", "in_live_messages", "in_live_tools", "in_ov_import", "explain_expect")
CODE_INPUTS_CSS = ("<style>" + ",".join(f".st-key-{k} textarea" for k in CODE_INPUTS)
                   + "{font-family:'Source Code Pro',ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
                     "font-size:0.85rem}</style>")

TOKEN_STYLE = "white-space:nowrap"  # a special token is never broken across lines


def _marker_regex(markers: Any) -> "re.Pattern[str] | None":
    ms = sorted({m for m in markers or () if m}, key=len, reverse=True)
    return re.compile("|".join(re.escape(m) for m in ms)) if ms else None


def tokens_html(text: str, *, fill: bool = True, markers: Any = None) -> str:
    """:func:`visible_html` with the real markers boxed and special tokens kept whole.

    ``markers``: the strings to box — the analysis' markers and preserved tokens
    (:func:`explorer.components.marker_table.known_markers`); ``None`` boxes nothing. Other special-token
    shapes (``<…>`` / ``[…]`` per :func:`core.diff.segmentize_markers`) are not boxed (``"required": []``
    is not a token) but, like boxed markers, never wrap inside. ``fill=False`` leaves the box transparent
    (inside coloured diff parts)."""
    from core.diff import SegmentKind, segmentize_markers

    box = f"{MARKER_STYLE}{MARKER_FILL if fill else ''};{TOKEN_STYLE}"
    rx = _marker_regex(markers)
    pieces = [(False, text)] if rx is None else []
    if rx is not None:
        pos = 0
        for m in rx.finditer(text):
            pieces += [(False, text[pos:m.start()]), (True, m.group())]
            pos = m.end()
        pieces.append((False, text[pos:]))
    parts: list[str] = []
    for is_marker, piece in pieces:
        if is_marker:
            parts.append(f'<span data-marker="1" style="{box}">{visible_html(piece)}</span>')
            continue
        for seg in segmentize_markers(piece) if piece else ():
            body = visible_html(seg.value)
            parts.append(f'<span style="{TOKEN_STYLE}">{body}</span>' if seg.kind == SegmentKind.MARKER else body)
    return "".join(parts)


_CODE = re.compile(r"`([^`\n]+)`")
_RULE_PATH = re.compile(r" ?\((?:in )?([\w-]+(?: > [\w-]+)+)\)")


def md_code(text: Any) -> str:
    """Markdown of engine text whose ```…``` parts are code: those become inline code spans (shown literally),
    the rest is escaped as :func:`md` does — so no raw backticks reach the page."""
    s = str(text)
    out, pos = [], 0
    for m in _CODE.finditer(s):
        out.append(md(s[pos:m.start()]))
        body = visible_text(m.group(1))
        out.append(f"`` {body} ``" if body.startswith("`") or body.endswith("`") else f"`{body}`")
        pos = m.end()
    out.append(md(s[pos:]))
    return "".join(out)


def split_rule_path(text: str) -> tuple[str, str]:
    """``text`` without a grammar-rule path in parentheses (``(in tool-calls > tool-call > …)``), and the
    path(s) removed ("" when none): rule names are for a tooltip, not for the sentence."""
    paths = [m.group(1) for m in _RULE_PATH.finditer(text)]
    return _RULE_PATH.sub("", text), "; ".join(paths)
