"""Coloured view of a diff split (prefix / left / right / suffix) of two renders.

The analysis compares render A with render B; :class:`core.diff.DiffSplit` says which part both share
(prefix, suffix) and what differs (left in A, right in B). This view draws A and B on two rows with the four
parts coloured, whitespace visible and special tokens boxed. All text is escaped
(:func:`explorer.components.text.tokens_html`); the HTML around it is ours.
"""

from __future__ import annotations

from typing import Any

from .text import html_text, tokens_html

# Colours from the theme: the panel's text is the theme's own (inherited), its background the page's, and each
# part a translucent tint laid over it — so the same CSS reads on Streamlit's light and dark backgrounds (the
# theme's text on a tint of its own background keeps the theme's contrast; tests/test_browser_themes.py computes
# it for both). A fixed light panel stayed white in the dark theme.
COLOURS = {
    "prefix": "rgba(100,116,139,0.16)",   # shared, grey
    "left": "rgba(239,68,68,0.24)",       # only in A, red
    "right": "rgba(34,197,94,0.24)",      # only in B, green
    "suffix": "rgba(100,116,139,0.16)",   # shared, grey
}
BORDER = "rgba(128,128,128,0.4)"
FAINT = "opacity:0.75"   # notes and ∅: the theme's text, dimmed (still ≥ 4.5:1 on both themes' backgrounds)
BOX_STYLE = ("font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:0.85rem;"
             "white-space:pre-wrap;overflow-wrap:anywhere;line-height:1.8;color:inherit;background:transparent;"
             f"border:1px solid {BORDER};border-radius:6px;padding:6px 8px;margin:4px 0")


def _part(kind: str, text: str, markers: Any = None) -> str:
    return (f'<span class="cte-part" data-part="{kind}" title="{kind}" style="background:{COLOURS[kind]}">'
            f"{tokens_html(text, fill=kind in ('prefix', 'suffix'), markers=markers)}</span>")


def _clip_prefix(prefix: str, context: int | None) -> tuple[str, int]:
    if context is None or len(prefix) <= context:
        return prefix, 0
    return prefix[-context:], len(prefix) - context


def _clip_suffix(suffix: str, context: int | None) -> tuple[str, int]:
    if context is None or len(suffix) <= context:
        return suffix, 0
    return suffix[:context], len(suffix) - context


def _elided(n: int) -> str:
    return f'<span style="{FAINT};font-style:italic">… {n} more characters …</span>' if n else ""


def diff_html(diff: Any, *, label_a: str = "A", label_b: str = "B", context: int | None = 400,
              markers: Any = None) -> str:
    """HTML for a diff split: row A = prefix + left + suffix, row B = prefix + right + suffix.

    ``diff`` has ``prefix``, ``left``, ``right``, ``suffix`` (str) — a :class:`core.diff.DiffSplit`.
    ``context`` limits how much of the shared prefix (its end) and suffix (its start) is shown; ``None``
    shows everything. Empty differing parts are shown as ``∅`` so "nothing here" is visible. ``markers``:
    the strings boxed as markers (see :func:`explorer.components.text.tokens_html`).
    """
    prefix, cut_p = _clip_prefix(diff.prefix, context)
    suffix, cut_s = _clip_suffix(diff.suffix, context)

    def row(label: str, kind: str, middle: str) -> str:
        mid = _part(kind, middle, markers) if middle else (
            f'<span class="cte-part" data-part="{kind}" style="background:{COLOURS[kind]}">'
            f'<span style="{FAINT}">∅</span></span>')
        return (f'<div class="cte-diff-row" style="{BOX_STYLE}"><strong>{html_text(label)}</strong>&nbsp; '
                f"{_elided(cut_p)}{_part('prefix', prefix, markers)}{mid}{_part('suffix', suffix, markers)}"
                f"{_elided(cut_s)}</div>")

    legend = ('<div class="cte-diff-legend" style="font-size:0.8rem">'
              + " ".join(f'<span data-legend="{k}" style="background:{COLOURS[k]};padding:0 4px;'
                         f'border-radius:3px">{k}</span>' for k in ("prefix", "left", "right", "suffix"))
              + ' &nbsp;· space ↵ newline → tab; boxed = marker of the analysis or preserved token</div>')
    return f'<div class="cte-diff">{legend}{row(label_a, "left", diff.left)}{row(label_b, "right", diff.right)}</div>'


def parts_html(diff: Any, markers: Any = None) -> str:
    """HTML table of the four parts of a diff split, one row each, whitespace visible."""
    rows = []
    for kind in ("prefix", "left", "right", "suffix"):
        text = getattr(diff, kind)
        rows.append(f'<tr><td style="padding:2px 8px;vertical-align:top"><strong>{kind}</strong><br>'
                    f'<span style="{FAINT};font-size:0.75rem">{len(text)} chars</span></td>'
                    f'<td style="padding:2px 8px"><div style="{BOX_STYLE};max-height:14rem;overflow:auto">'
                    f'{_part(kind, text, markers) if text else "∅"}</div></td></tr>')
    return f'<table class="cte-parts" style="width:100%;border-collapse:collapse">{"".join(rows)}</table>'


WINDOW = 20_000  # characters of a long text drawn at once (drawing is per character; 1 MB froze the tab)


def text_html(text: str, *, max_height: str = "22rem", markers: Any = None, start: int = 0,
              window: int = WINDOW) -> str:
    """A text (a render, a model output) in a scrollable box with whitespace visible and ``markers`` boxed.
    Only ``window`` characters from ``start`` are drawn; a note says which part of how many is shown."""
    if not text:
        return f'<div class="cte-text" style="{BOX_STYLE}"><i>(empty)</i></div>'
    start = max(0, min(start, len(text) - 1))
    part = text[start:start + window]
    note = ""
    if len(part) < len(text):
        note = (f'<div style="{FAINT};font-size:0.8rem">characters {start + 1:,}–{start + len(part):,} '
                f"of {len(text):,}</div>")
    return (f'{note}<div class="cte-text" style="{BOX_STYLE};max-height:{max_height};overflow:auto">'
            f"{tokens_html(part, markers=markers)}</div>")


def show_diff(diff: Any, **kw: Any) -> None:
    """Render :func:`diff_html` with ``st.html``."""
    import streamlit as st

    st.html(diff_html(diff, **kw))


def show_text(text: str, *, key: str | None = None, **kw: Any) -> None:
    """Render :func:`text_html` with ``st.html``. A text longer than the window gets a slider (widget
    ``key``, required then) choosing which window is drawn."""
    import streamlit as st

    window = kw.get("window", WINDOW)
    if key is not None and len(text) > window:
        starts = list(range(0, len(text), window))
        if st.session_state.get(key) not in starts:
            st.session_state[key] = 0
        kw["start"] = st.select_slider("Part shown", starts, key=key,
                                       format_func=lambda s: f"{s + 1:,}–{min(s + window, len(text)):,}")
    st.html(text_html(text, **kw))
