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

import unicodedata

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
