"""Safe text helpers: escaping for HTML and for Streamlit markdown, and "visible" whitespace.

Streamlit renders ``st.markdown`` / ``st.error`` / ``st.caption`` / ``st.info`` bodies as Markdown (links,
emphasis, ``:red[...]`` colour directives, ``$`` maths). Template and model text must never reach those
functions raw: :func:`md` backslash-escapes every ASCII punctuation character (CommonMark allows it for all
of them) and cuts the text node where Streamlit's renderer would find a URL, an e-mail address, an icon or logo
shortcode or an arrow in it (:data:`MD_CUT`), so the text shows literally and nothing in it becomes a link.
:func:`html_text` escapes for HTML built by hand.

Invisible characters (controls, bidi overrides and isolates such as U+202E, zero-width characters, BOM, line
and paragraph separators — Unicode categories Cc, Cf, Zl, Zp) are shown as escapes (``\\u202e``) by every helper
here: a U+202E in model output would otherwise reverse the displayed text and JSON after it. The escape is the
one of :mod:`core.escapes` (the CLI's too); inside JSON, JSON's own escapes, so a JSON view stays valid JSON.
"""

from __future__ import annotations

import bisect
import html
import json
import re
from typing import Any

from core.escapes import INVISIBLE_CATEGORIES, code_span, escape_char


# Some of Streamlit's Markdown features look for patterns in the parsed text, after backslash escapes and
# character references are resolved, so no escape stops them: GFM autolink literals (``https://…``, ``www.…``,
# ``a@b.c`` became clickable links), ``:streamlit:`` (a logo image), ``:material_star:`` (an icon), emoji shortcodes
# and the typographic arrows (`` -> ``, `` >= ``, `` -- `` shown as ``→ ≥ —``). Each pattern needs its text in
# one text node, with one of ``: @ . - > =`` after its first character: an empty colour directive (``:color[]``,
# drawn as an empty ``<span>``) before each of those ends the node there, so none matches — whatever text comes
# before, so two escaped pieces written side by side stay safe — and the text reads and copies as it is
# (tests/test_browser_escapes.py proves it in chromium; docs/app.md, "Untrusted text on the page").
_MD_ESCAPE = re.compile(r"(?P<cut>[:@.\->=])|[!-/:-@\[-`{-~]")
MD_CUT = ":color[]"


def _md_escape(m: "re.Match[str]") -> str:
    return (MD_CUT if m.group("cut") else "") + "\\" + m.group()


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
    """The app's one written form of an invisible character (:func:`core.escapes.escape_char`): ``\\u`` and four
    lowercase hex digits, as JSON writes it (``\\u202e``, ``\\u200b``, ``\\u001b``), so the same character reads
    the same in a text view and in a JSON view or export; beyond U+FFFF ``\\U`` and eight digits. docs/app.md,
    "One escape for invisible characters"."""
    return escape_char(ch)


def visible_text(text: Any) -> str:
    """``text`` with every invisible character except tab and newline replaced by its escape
    (:func:`escape_code`): for plain-text displays (table cells, code blocks, JSON viewers)."""
    return _INVISIBLE_NO_WS.sub(lambda m: escape_code(m.group()), str(text))


def clip_json(value: Any, clip: int | None) -> Any:
    """A copy of a JSON value whose strings longer than ``clip`` characters are cut there with a note of how many
    characters follow (``None``: the value itself)."""
    if clip is None:
        return value
    if isinstance(value, str):
        return value if len(value) <= clip else value[:clip] + f" … ({len(value) - clip:,} more characters)"
    if isinstance(value, dict):
        return {k: clip_json(v, clip) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clip_json(v, clip) for v in value]
    return value


def json_text(value: Any, clip: int | None = None, *, rows: bool = False) -> str:
    """A JSON value as indented JSON text with its invisible characters as JSON escapes (``"Hi \\u202e…"``):
    the same JSON value, valid, and its copy button copies it (:func:`visible_json_text`; ``clip``:
    :func:`clip_json`). ``rows``: a list written one item per line (a stream's deltas: a tenth of the lines)."""
    value = clip_json(value, clip)
    if rows and isinstance(value, list) and value:
        text = "[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in value) + "\n]"
    else:
        text = json.dumps(value, indent=2, ensure_ascii=False)
    return visible_json_text(text)


def show_json(value: Any, *, clip: int | None = None, height: int | str = "content", rows: bool = False) -> None:
    """A JSON view: :func:`json_text` in a code block (``height`` in pixels scrolls a long one). Not ``st.json``:
    its tree shows a string JSON-escaped, so an escape we put in the string read ``\\\\u202e`` there and its
    copy gave the escape's text instead of the character — no JSON escape could be shown as one."""
    import streamlit as st

    st.code(json_text(value, clip, rows=rows), language="json", wrap_lines=True, height=height)


def visible_json_text(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with its invisible characters as JSON escapes
    (``\\u202e``): the same JSON, and the copy button copies valid JSON. The layout's newlines stay."""
    return _INVISIBLE_NO_WS.sub(lambda m: json.dumps(m.group()).strip('"'), text)


NOTICE_KINDS = 4       # kinds of invisible character named in a text box's notice, then "+N more kinds"
NOTICE_PLACES = 3      # places named per kind, then "+N more"


def _char_name(ch: str) -> str:
    import unicodedata

    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'control character' if ord(ch) < 0xA0 else 'unnamed')}"


def invisible_places(text: str, keep: int = NOTICE_PLACES,
                     kinds_shown: int = NOTICE_KINDS) -> dict[str, tuple[list[tuple[int, int]], int]]:
    """Each invisible character of ``text`` but tab and newline (:data:`INVISIBLE_CATEGORIES`), in order of first
    appearance → (its first ``keep`` places as (line, column), both counted from 1 in characters; how many
    times it occurs), for the first ``kinds_shown`` kinds (the others: ``([], 0)``). Searched per kind with the
    string methods: a megabyte of U+200B took 3.5 s match by match."""
    plain_ascii = text.isascii() and text.replace("\n", "").replace("\t", "").isprintable()  # 10x the search's speed
    if plain_ascii or not _INVISIBLE_NO_WS.search(text):
        return {}
    kinds = sorted((ch for ch in set(text) if _INVISIBLE_NO_WS.match(ch)), key=text.find)
    places: dict[str, tuple[list[tuple[int, int]], int]] = {}
    for i, ch in enumerate(kinds):
        if i >= kinds_shown:
            places[ch] = ([], 0)
            continue
        where, pos = [], text.find(ch)
        while pos >= 0 and len(where) < keep:
            where.append((text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)))
            pos = text.find(ch, pos + 1)
        places[ch] = (where, text.count(ch))
    return places


def invisible_notice(text: str) -> str | None:
    """One line naming each kind of invisible character in ``text`` and where it is ("U+202E RIGHT-TO-LEFT
    OVERRIDE at line 3, col 7 …", a few places per kind, then "+N more"), or None when there is none: a text box
    shows such characters as the browser applies them (a U+202E reorders what follows, a U+200B is not seen)."""
    places = invisible_places(text)
    if not places:
        return None
    parts = []
    for ch, (where, n) in list(places.items())[:NOTICE_KINDS]:
        more = f" (+{n - len(where)} more)" if n > len(where) else ""
        parts.append(f"{_char_name(ch)} at " + "; ".join(f"line {ln}, col {col}" for ln, col in where) + more)
    rest = len(places) - NOTICE_KINDS
    return ("Invisible characters in this text, used as typed and shown escaped below: " + " · ".join(parts)
            + (f" · +{rest} more kind{'s' if rest > 1 else ''}" if rest > 0 else ""))


def show_invisible_notice(text: str) -> None:
    """Under a text box: :func:`invisible_notice` and the text around the first such character in the escaped
    view every page uses (:func:`explorer.components.diff_view.text_html`); nothing when there is none. The
    caller keeps it in one container, shown or not, so the boxes below keep their places."""
    notice = invisible_notice(text)
    if notice is None:
        return
    import streamlit as st

    from .diff_view import WINDOW, text_html

    first = _INVISIBLE_NO_WS.search(text)
    st.warning(md(notice), icon=":material/visibility:")
    st.html(text_html(text, max_height="8rem", start=max(0, first.start() - WINDOW // 4)))


def md(text: Any) -> str:
    """``text`` as a Markdown string that displays literally (invisible characters escaped, every ASCII
    punctuation backslash-escaped, :data:`MD_CUT` before each ``: @ . - > =`` so no URL, e-mail address, icon
    or arrow is found in it, newlines kept as hard line breaks)."""
    s = _MD_ESCAPE.sub(_md_escape, visible_text(str(text)).replace("\t", "\\t"))
    return s.replace("\n", "  \n")


def md_cell(value: Any) -> str:
    """One cell of a Markdown table, shown literally: as :func:`md`, and a tab or line break, which a table row
    cannot hold, written ``\\t`` / ``\\n``; every ``|`` is escaped, so no text can end the cell. A bool reads
    ``true`` / ``false`` as in ``st.table``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    s = visible_text("" if value is None else str(value)).replace("\t", "\\t").replace("\n", "\\n")
    return _MD_ESCAPE.sub(_md_escape, s)


def md_table(frame: Any) -> str:
    """A DataFrame as one Markdown table (its columns and rows, no index), every cell escaped by :func:`md_cell`.
    One Markdown block for the whole table: ``st.table`` draws each cell as a block of its own, and the
    browser runs Streamlit's Markdown renderer once per block."""
    rows = ["| " + " | ".join(md_cell(c) for c in frame.columns) + " |",
            "|" + "---|" * len(frame.columns)]
    rows += ["| " + " | ".join(md_cell(v) for v in r) + " |" for r in frame.itertuples(index=False, name=None)]
    return "\n".join(rows)


def show_md_table(frame: Any) -> None:
    """``st.markdown`` of :func:`md_table` (one element, one Markdown block)."""
    import streamlit as st

    st.markdown(md_table(frame))


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
_WS_GLYPHS = {" ": "·", "\t": "→", "\n": "↵"}   # layout; CR, VT, FF are controls: escaped like the others
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


_VISIBLE_HTML = re.compile(f"[ \\t\\n]|{INVISIBLE.pattern}")


def visible_html(text: str) -> str:
    """Escaped HTML of ``text`` with whitespace made visible: each space and tab becomes a faint glyph (``·``
    ``→``; a line may break after it), a newline becomes ``↵`` followed by the real line break; every other
    invisible character (controls — CR, VT, FF too —, bidi, zero-width) shows faint as its escape (``\\u000d``,
    ``\\u202e``, :func:`escape_code`). Every piece of ``text`` goes through :func:`html.escape`."""
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


_BACKTICKS = re.compile("`+")
_RULE_PATH = re.compile(r" ?\((?:in )?([\w-]+(?: > [\w-]+)+)\)")


def md_code(text: Any) -> str:
    """Markdown of engine text whose code spans (as CommonMark pairs them: a run of N backticks closed by the next
    run of exactly N, on the same line; the engine fences a name holding backticks with a longer run,
    :func:`core.escapes.code_span`) stay inline code spans, written again with a fence longer than any backtick
    run inside; the rest is escaped as :func:`md` does, a backtick that closes nothing included — so no text of the
    engine's leaves a code span or opens one."""
    s = str(text)
    out, pos = [], 0
    for start, end, body in _code_spans(s):
        out.append(md(s[pos:start]))
        out.append(_code_md(visible_text(body)))
        pos = end
    out.append(md(s[pos:]))
    return "".join(out)


_ICON_PREFIX = ":material/"


def _code_md(body: str) -> str:
    """``body`` as inline code Streamlit shows as written: its renderer rewrites every ``:material/`` of a Markdown
    source to ``:material_`` before it parses it, inside code spans too, and no escape works in a code span — so
    the code is cut after that colon into two spans joined by :data:`MD_CUT` (which shows nothing; copying the
    text gives it back whole)."""
    parts = body.replace(_ICON_PREFIX, ":\0" + _ICON_PREFIX[1:]).split("\0")   # (visible_text escapes a NUL)
    return MD_CUT.join(code_span(p) for p in parts)


def _code_spans(s: str) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of the CommonMark code spans of ``s`` that do not cross a line break, in order:
    the content without the one space a fence pads it with on each side. A backtick run without a closer is
    text, and the spans after it are looked for from the end of that run."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(s)]
    by_length: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(runs):
        by_length.setdefault(b - a, []).append(i)
    spans: list[tuple[int, int, str]] = []
    i = 0
    while i < len(runs):
        a, b = runs[i]
        same = by_length[b - a]
        k = bisect.bisect_right(same, i)
        line_end = s.find("\n", b)
        j = same[k] if k < len(same) else None
        if j is None or (line_end >= 0 and runs[j][0] > line_end):
            i += 1
            continue
        body = s[b:runs[j][0]]
        if len(body) > 1 and body[0] == " " and body[-1] == " " and body.strip(" "):
            body = body[1:-1]
        spans.append((a, runs[j][1], body))
        i = j + 1
    return spans


def split_rule_path(text: str) -> tuple[str, str]:
    """``text`` without a grammar-rule path in parentheses (``(in tool-calls > tool-call > …)``), and the
    path(s) removed ("" when none): rule names are for a tooltip, not for the sentence."""
    paths = [m.group(1) for m in _RULE_PATH.finditer(text)]
    return _RULE_PATH.sub("", text), "; ".join(paths)
