"""Syntax-highlighted source views (pygments), for Jinja templates and GBNF grammars.

Pygments escapes every token it emits, so template text is shown as text; styles are inline
(``noclasses=True``) so no stylesheet is needed. GBNF has no pygments lexer, so a small one is defined here
(display only: it colours rule names, strings, character classes and operators).
"""

from __future__ import annotations

from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import RegexLexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Operator, Punctuation, String, Text, Whitespace

# a light panel in every theme (pygments' "friendly" colours are for a light background; the text colour is set
# too, or the dark theme's near-white text would land on it)
BOX = ("font-size:0.82rem;border:1px solid #e2e8f0;border-radius:6px;overflow:auto;background:#f8f8f8;"
       "color:#0f172a;color-scheme:light;padding:4px 8px")
# long lines (a GBNF rule, a one-line template) wrap instead of scrolling sideways inside the page
PRE_STYLE = "white-space:pre-wrap;overflow-wrap:anywhere;margin:0;line-height:1.5"


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
    """HTML of ``source`` highlighted with pygments (``language``: ``"jinja"``, ``"gbnf"``, ``"json"``, …).
    Every token is escaped by pygments' formatter."""
    from .text import visible_text

    source = visible_text(source)  # a bidi override in a template must not reorder the lines shown
    lexer = GbnfLexer() if language == "gbnf" else get_lexer_by_name(language)
    fmt = HtmlFormatter(noclasses=True, style="friendly", linenos="inline" if line_numbers else False,
                        nobackground=True, prestyles=PRE_STYLE)
    body = highlight(source, lexer, fmt)
    return f'<div class="cte-code" style="{BOX};max-height:{max_height}">{body}</div>'


def show_code(source: str, language: str = "jinja", **kw: Any) -> None:
    """Render :func:`highlighted_html` with ``st.html`` (an empty source shows an info line)."""
    import streamlit as st

    if not source:
        st.caption("(empty)")
        return
    st.html(highlighted_html(source, language, **kw))
