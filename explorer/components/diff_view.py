"""Coloured view of a diff split (prefix / left / right / suffix) of two renders.

The analysis compares render A with render B; :class:`core.diff.DiffSplit` says which part both share
(prefix, suffix) and what differs (left in A, right in B). This view draws A and B on two rows with the four
parts coloured, whitespace visible and special tokens boxed. All text is escaped
(:func:`explorer.components.text.tokens_html`); the HTML around it is ours.
"""

from __future__ import annotations

from typing import Any

from .text import html_text, tokens_html

COLOURS = {
    "prefix": ("#f1f5f9", "#475569"),   # shared, grey
    "left": ("#fee2e2", "#7f1d1d"),     # only in A, red
    "right": ("#dcfce7", "#14532d"),    # only in B, green
    "suffix": ("#f1f5f9", "#475569"),   # shared, grey
}
BOX_STYLE = ("font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:0.85rem;"
             "white-space:pre-wrap;word-break:break-all;line-height:1.5;color:#0f172a;background:#ffffff;"
             "border:1px solid #e2e8f0;border-radius:6px;padding:6px 8px;margin:4px 0")


def _part(kind: str, text: str) -> str:
    bg, fg = COLOURS[kind]
    return (f'<span data-part="{kind}" title="{kind}" style="background:{bg};color:{fg}">'
            f"{tokens_html(text, fill=kind in ('prefix', 'suffix'))}</span>")


def _clip_prefix(prefix: str, context: int | None) -> tuple[str, int]:
    if context is None or len(prefix) <= context:
        return prefix, 0
    return prefix[-context:], len(prefix) - context


def _clip_suffix(suffix: str, context: int | None) -> tuple[str, int]:
    if context is None or len(suffix) <= context:
        return suffix, 0
    return suffix[:context], len(suffix) - context


def _elided(n: int) -> str:
    return f'<span style="color:#94a3b8;font-style:italic">… {n} more characters …</span>' if n else ""


def diff_html(diff: Any, *, label_a: str = "A", label_b: str = "B", context: int | None = 400) -> str:
    """HTML for a diff split: row A = prefix + left + suffix, row B = prefix + right + suffix.

    ``diff`` has ``prefix``, ``left``, ``right``, ``suffix`` (str) — a :class:`core.diff.DiffSplit`.
    ``context`` limits how much of the shared prefix (its end) and suffix (its start) is shown; ``None``
    shows everything. Empty differing parts are shown as ``∅`` so "nothing here" is visible.
    """
    prefix, cut_p = _clip_prefix(diff.prefix, context)
    suffix, cut_s = _clip_suffix(diff.suffix, context)

    def row(label: str, kind: str, middle: str) -> str:
        mid = _part(kind, middle) if middle else (
            f'<span data-part="{kind}" style="background:{COLOURS[kind][0]};color:#94a3b8">∅</span>')
        return (f'<div style="{BOX_STYLE}"><strong style="color:#334155">{html_text(label)}</strong>&nbsp; '
                f"{_elided(cut_p)}{_part('prefix', prefix)}{mid}{_part('suffix', suffix)}{_elided(cut_s)}</div>")

    legend = ('<div style="font-size:0.8rem;color:#475569">'
              + " ".join(f'<span style="background:{COLOURS[k][0]};color:{COLOURS[k][1]};padding:0 4px;'
                         f'border-radius:3px">{k}</span>' for k in ("prefix", "left", "right", "suffix"))
              + ' &nbsp;· space ↵ newline → tab; boxed = special token</div>')
    return f'<div class="cte-diff">{legend}{row(label_a, "left", diff.left)}{row(label_b, "right", diff.right)}</div>'


def parts_html(diff: Any) -> str:
    """HTML table of the four parts of a diff split, one row each, whitespace visible."""
    rows = []
    for kind in ("prefix", "left", "right", "suffix"):
        text = getattr(diff, kind)
        rows.append(f'<tr><td style="padding:2px 8px;vertical-align:top"><strong>{kind}</strong><br>'
                    f'<span style="color:#64748b;font-size:0.75rem">{len(text)} chars</span></td>'
                    f'<td style="padding:2px 8px"><div style="{BOX_STYLE};max-height:14rem;overflow:auto">'
                    f'{_part(kind, text) if text else "∅"}</div></td></tr>')
    return f'<table class="cte-parts" style="width:100%;border-collapse:collapse">{"".join(rows)}</table>'


def text_html(text: str, *, max_height: str = "22rem") -> str:
    """A whole text (a render, a model output) in a scrollable box with whitespace and tokens visible."""
    return (f'<div class="cte-text" style="{BOX_STYLE};max-height:{max_height};overflow:auto">'
            f"{tokens_html(text) if text else '<i>(empty)</i>'}</div>")


def show_diff(diff: Any, **kw: Any) -> None:
    """Render :func:`diff_html` with ``st.html``."""
    import streamlit as st

    st.html(diff_html(diff, **kw))


def show_text(text: str, **kw: Any) -> None:
    """Render :func:`text_html` with ``st.html``."""
    import streamlit as st

    st.html(text_html(text, **kw))
