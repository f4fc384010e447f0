"""Syntax-highlighted source views (pygments' lexers), for Jinja templates and GBNF grammars.

The tokens are coloured by this module, not by a pygments style: each token kind has a colour for the light and
one for the dark theme, chosen with CSS ``light-dark()`` — Streamlit sets ``color-scheme`` on the app root to the
theme in use, so the view follows the theme (not the OS) — and each colour meets WCAG AA (≥ 4.5:1) on the panel
of its theme (tests/test_browser_themes.py computes it in both). The panel is a translucent grey over the page and
its plain text is the theme's own (inherited). A browser without ``light-dark()`` ignores the colours: the text
is then the theme's own, uncoloured and still readable. Every token is escaped here (``html.escape``), so
template text is shown as text. GBNF has no pygments lexer, so a small one is defined here (display only: it
colours rule names, strings, character classes and operators).
"""

from __future__ import annotations

import html
from typing import Any

from pygments.lexer import RegexLexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text, Whitespace

# the panel: the page's background under a faint grey tint, the theme's text; long lines (a GBNF rule, a
# one-line template) wrap instead of scrolling sideways inside the page
BOX = ("font-size:0.82rem;border:1px solid rgba(128,128,128,0.35);border-radius:6px;overflow:auto;"
       "background:rgba(128,128,128,0.08);color:inherit;padding:4px 8px")
PRE_STYLE = ("white-space:pre-wrap;overflow-wrap:anywhere;margin:0;line-height:1.5;background:transparent;"
             "color:inherit;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace")

# token kind -> (colour on the light theme, colour on the dark theme); a kind not listed takes its parent's, and
# plain text (Text, Punctuation, Other) the theme's own colour
PALETTE: dict[Any, tuple[str, str]] = {
    Comment.Preproc: ("#86198f", "#f0abfc"),   # Jinja's {% %} {{ }} delimiters
    Comment: ("#57534e", "#a8a29e"),
    Keyword: ("#6d28d9", "#c4b5fd"),
    Name.Function: ("#1d4ed8", "#93c5fd"),    # a GBNF rule's definition, a Jinja filter or macro
    Name.Tag: ("#1d4ed8", "#93c5fd"),         # a JSON key
    Name.Builtin: ("#155e75", "#67e8f9"),
    Name.Variable: ("#115e59", "#5eead4"),    # a GBNF rule's use, a Jinja variable
    String.Regex: ("#92400e", "#fcd34d"),     # a GBNF character class
    String: ("#166534", "#86efac"),
    Number: ("#9a3412", "#fdba74"),
    Operator: ("#be123c", "#fda4af"),
}
LINE_NUMBER = ("#57534e", "#a8a29e")
_CLASS = {kind: f"t{i}" for i, kind in enumerate(PALETTE)}

# One stylesheet per view, scoped to it (a long template has tens of thousands of tokens: a class each, not an
# inline style). light-dark() picks by the color-scheme Streamlit set for its theme. Each line is a block whose
# wrapped rows are indented under its text, not under the line numbers (--cte-w: the numbers' width).
STYLE = ("<style>"
         + "".join(f".cte-code .{_CLASS[k]}{{color:light-dark({lt},{dk})"
                   f"{';font-style:italic' if k is Comment else ''}}}" for k, (lt, dk) in PALETTE.items())
         + ".cte-code .cte-line{display:block;min-height:1.5em;padding-left:calc(var(--cte-w) + 1ch);"
           "text-indent:calc(-1 * (var(--cte-w) + 1ch))}"
           ".cte-code .cte-lineno{display:inline-block;width:var(--cte-w);margin-right:1ch;text-align:right;"
           f"text-indent:0;user-select:none;color:light-dark({LINE_NUMBER[0]},{LINE_NUMBER[1]})}}"
           "</style>")


def token_class(ttype: Any) -> str:
    """The CSS class of a pygments token type ("" for plain text)."""
    t = ttype
    while t is not None and t not in PALETTE:
        t = t.parent
    return "" if t is None else _CLASS[t]


class GbnfLexer(RegexLexer):
    """GBNF (llama.cpp grammar) lexer for display: ``name ::= alternatives``."""

    name = "GBNF"
    aliases = ["gbnf"]
    tokens = {
        "root": [
            (r"#.*?$", Comment.Single),
            (r"^[A-Za-z0-9_-]+(?=\s*::=)", Name.Function),
            (r"::=", Keyword),
            (r'"(\\.|[^"\\])*"', String),
            (r"\[(\\.|[^\]\\])*\]", String.Regex),
            (r"[A-Za-z0-9_-]+", Name.Variable),
            (r"\{[0-9,\s]*\}", Operator),
            (r"[|*+?]", Operator),
            (r"[()]", Punctuation),
            (r"\s+", Whitespace),
            (r".", Text),
        ]
    }


def highlighted_html(source: str, language: str = "jinja", *, max_height: str = "32rem",
                     line_numbers: bool = True) -> str:
    """HTML of ``source`` highlighted (``language``: ``"jinja"``, ``"gbnf"``, ``"json"``, …), every token
    escaped, with line numbers unless ``line_numbers`` is false."""
    from .text import visible_text

    source = visible_text(source)  # a bidi override in a template must not reorder the lines shown
    lexer = GbnfLexer() if language == "gbnf" else get_lexer_by_name(language)
    lines: list[list[str]] = [[]]
    for ttype, value in lexer.get_tokens(source):
        cls = token_class(ttype)
        for i, piece in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if piece:
                text = html.escape(piece, quote=True)
                lines[-1].append(f'<span class="{cls}">{text}</span>' if cls else text)
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the lexer's final newline
    width = len(str(len(lines))) if line_numbers else -1   # -1: no numbers, no indent
    body = "".join('<span class="cte-line">' + (f'<span class="cte-lineno">{n}</span>' if line_numbers else "")
                   + "".join(parts) + "</span>" for n, parts in enumerate(lines, 1))
    return (f'<div class="cte-code" style="{BOX};--cte-w:{width}ch;max-height:{max_height}">{STYLE}'
            f'<pre style="{PRE_STYLE}">{body}</pre></div>')


def show_code(source: str, language: str = "jinja", **kw: Any) -> None:
    """Render :func:`highlighted_html` with ``st.html`` (an empty source shows an info line)."""
    import streamlit as st

    if not source:
        st.caption("(empty)")
        return
    st.html(highlighted_html(source, language, **kw))
