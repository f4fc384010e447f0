"""The one written form of a character that cannot be shown as itself, for every view of text (the CLI, lint
evidence, explain, the app): controls other than tab and newline, format characters (bidi overrides and
isolates, zero-width characters, BOM, soft hyphen) and the line and paragraph separators — Unicode categories
Cc, Cf, Zl, Zp.

Each is written as JSON writes it, ``\\u`` and four lowercase hex digits (``\\u202e``, ``\\u200b``, ``\\u001b``),
so the same character reads the same in a line of text and in JSON, and a JSON text with these escapes is still
the same JSON; a character beyond U+FFFF (where JSON writes a surrogate pair) as ``\\U`` and eight digits. Space,
tab and newline are layout, not escaped: plain-text views show them as ``␣`` ``→`` ``↵`` where whitespace
matters. A leaf module (no imports of ours).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

INVISIBLE_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")
WS_GLYPHS = {" ": "␣", "\n": "↵", "\t": "→"}


def escape_char(ch: str) -> str:
    """``\\u202e`` for U+202E (four lowercase hex digits), ``\\U000e0041`` beyond U+FFFF."""
    o = ord(ch)
    return f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def is_invisible(ch: str) -> bool:
    """Whether ``ch`` is a control, format or separator character (:data:`INVISIBLE_CATEGORIES`)."""
    return unicodedata.category(ch) in INVISIBLE_CATEGORIES


def escape_invisible(s: str, keep: str = "\t\n") -> str:
    """``s`` with every invisible character but those in ``keep`` written by :func:`escape_char`."""
    if s.isascii() and s.isprintable():
        return s
    return "".join(escape_char(ch) if ch not in keep and is_invisible(ch) else ch for ch in s)


def visible(s: str, *, spaces: bool = True) -> str:
    """``s`` on one line with its whitespace seen: space, newline, tab as ``␣`` ``↵`` ``→`` (a space kept as it
    is when ``spaces`` is False) and every other invisible character escaped (:func:`escape_char`)."""
    glyphs = WS_GLYPHS if spaces else {k: v for k, v in WS_GLYPHS.items() if k != " "}
    return "".join(glyphs.get(ch) or (escape_char(ch) if is_invisible(ch) else ch) for ch in s)


_BACKTICK_RUN = re.compile("`+")


def code_span(text: str) -> str:
    """``text`` as one Markdown inline code span that CommonMark reads back as exactly ``text``: fenced by one
    backtick more than its longest run of backticks (a tool name ``a`b`` is ````a`b````, not ```a`b``` whose
    first two backticks pair), with a space inside each fence when ``text`` starts or ends with a backtick (else
    the fence would run on into it) or starts and ends with a space (a reader strips one of each)."""
    fence = "`" * (max((len(m.group()) for m in _BACKTICK_RUN.finditer(text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == " " and text[-1:] == " " and text.strip(" ")) \
        else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def json_visible(value: Any, **kw: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **kw)`` with every invisible character written as JSON's own escape
    (``\\u202e``; a pair of ``\\u`` surrogates beyond U+FFFF): the same JSON, read back to the same value, but a
    bidi override in a tool name cannot reorder the line a terminal or a diff shows. JSON itself escapes only the
    controls below U+0020; the format characters and the other controls stay raw in ``ensure_ascii=False``."""
    text = json.dumps(value, ensure_ascii=False, **kw)
    if text.isascii() and "\x7f" not in text:
        return text
    # below U+007F only layout can be raw (JSON escapes the controls inside strings), so only the rest is looked at
    table = {ord(ch): _json_escape(ch) for ch in set(text) if ch >= "\x7f" and is_invisible(ch)}
    return text.translate(table) if table else text


def _json_escape(ch: str) -> str:
    """JSON's escape of ``ch``: ``\\u202e``, or the surrogate pair beyond U+FFFF (``\\udb40\\udc41``)."""
    o = ord(ch)
    if o < 0x10000:
        return f"\\u{o:04x}"
    o -= 0x10000
    return f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}"
