"""Colours and HTML of Explain's span view ("where every character went") and its legend.

The view is drawn on its own light panel in every theme (a stated fixed theme; the diff view's colours come from
the theme instead): dark text on pastel label colours, so the same colours read in Streamlit's light and dark
themes alike. Every pair of text and background colour used here meets WCAG AA for normal text (contrast ≥ 4.5:1,
:func:`contrast_ratio`); the browser test checks what the page actually computes.

Spans get vertical padding: an underscore is drawn at the very bottom of a monospace glyph's box, exactly where a
marker's border line (or the next background) would sit, so at 1× ``<|im_start|>`` read ``<|im start|>``.
"""

from __future__ import annotations

import html

PANEL_BG = "#ffffff"
TEXT = "#0f172a"            # slate-900: every label's text
BORDER = "#64748b"          # marker / generation prompt box
STOP_FG, STOP_BG = "#ffffff", "#b91c1c"

# background per label (text is TEXT on all of them)
COLOURS = {
    "generation prompt": "#e5e7eb", "reasoning": "#ede9fe", "content": "#ffffff", "tool name": "#bbf7d0",
    "call id": "#a7f3d0", "arguments": "#fef3c7", "argument name": "#fde68a", "argument value": "#fef9c3",
    "marker": "#dbeafe", "whitespace": "#f8fafc", "unparsed": "#fecaca", "ignored": "#fee2e2",
    "held back": "#e9d5ff",
}

# what a newcomer reads in the legend's tooltips
MEANINGS = {
    "generation prompt": "text the template wrote before the model's output (the parser reads it first)",
    "reasoning": "went to reasoning_content", "content": "went to content",
    "tool name": "a tool call's function name", "call id": "a tool call's id", "arguments": "a call's arguments",
    "argument name": "an argument's name (tagged formats)", "argument value": "an argument's value",
    "marker": "a marker the analysis learned (kept out of the message)", "whitespace": "whitespace the format skips",
    "unparsed": "text the parser could not place", "ignored": "text the parser dropped",
    "held back": "not shown yet while streaming (might be the start of a marker)",
}

# padding: room below the glyphs so an underscore never sits on the box's bottom edge
SPAN_PAD = "padding:0.08em 0 0.22em"
BOX = f"border:1px solid {BORDER};border-radius:3px;padding:0.08em 1px 0.22em"
PANEL = (f"white-space:pre-wrap;font-size:0.9em;line-height:1.9;color:{TEXT};background:{PANEL_BG};"
         "border:1px solid #cbd5e1;border-radius:6px;padding:0.5em 0.7em;color-scheme:light")


def span_style(label: str) -> str:
    """Inline CSS of a span with ``label``: its background, the text colour, a box for markers."""
    style = f"background:{COLOURS.get(label, PANEL_BG)};color:{TEXT};"
    style += BOX if label in ("marker", "generation prompt") else SPAN_PAD
    if label in ("unparsed", "ignored"):
        style += ";text-decoration:underline wavy #b91c1c;text-underline-offset:0.25em"
    return style


def stop_html(words: str, kind: str) -> str:
    """The "stopped here" / "cut off here" badge with ``words`` as its tooltip."""
    return (f'<span class="cte-stop" data-kind="{kind}" style="color:{STOP_FG};background:{STOP_BG};'
            f'border-radius:3px;padding:0.08em 3px 0.22em;font-weight:bold" title="{html.escape(words, quote=True)}">'
            f'{"stopped here" if kind == "stop" else "cut off here"}</span>')


def legend_html() -> str:
    """The legend: one swatch per label, its meaning as a tooltip, on the same light panel as the view."""
    items = "".join(f'<span class="cte-legend-item" data-label="{html.escape(k)}" style="{span_style(k)};'
                    f'border:1px solid #cbd5e1;padding:0.08em 4px 0.22em;margin:0 4px 4px 0;display:inline-block" '
                    f'title="{html.escape(MEANINGS.get(k, k), quote=True)}">{html.escape(k)}</span>'
                    for k in COLOURS)
    return (f'<div class="cte-legend" style="font-size:0.8em;margin-bottom:6px;color:{TEXT};background:{PANEL_BG};'
            f'border-radius:6px;padding:4px 6px 0;color-scheme:light">{items}</div>')


def panel_html(css_class: str, body: str) -> str:
    """``body`` (span HTML) in the view's ``<pre>`` panel."""
    return f'<pre class="{css_class}" style="{PANEL}">{body}</pre>'


def _luminance(hex_colour: str) -> float:
    h = hex_colour.lstrip("#")
    rgb = [int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_ratio(fg: str, bg: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    a, b = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)
