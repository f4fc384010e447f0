"""Colours and HTML of Explain's span view ("where every character went") and its legend.

The colours follow the theme, as the diff view's do: the panel's text is the theme's own (inherited), its
background the page's, and each label a translucent tint laid over it — so the same CSS reads on Streamlit's
light and dark backgrounds. Every label's tint keeps the theme's text at WCAG AA for normal text (contrast
≥ 4.5:1) on both themes' backgrounds (:data:`THEMES`, :func:`label_contrasts`); the browser test checks what the
page actually computes. A fixed light panel stayed a white box in the dark theme.

Spans get vertical padding: an underscore is drawn at the very bottom of a monospace glyph's box, exactly where a
marker's border line (or the next background) would sit, so at 1× ``<|im_start|>`` read ``<|im start|>``.
"""

from __future__ import annotations

import html

BORDER = "rgba(100,116,139,0.85)"   # marker / generation prompt box: ≥ 3:1 on both themes (a graphic, WCAG 1.4.11)
STOP_FG, STOP_BG = "#ffffff", "#b91c1c"   # the stop badge: its own colours, 6.5:1, on either theme
WAVY = "#ef4444"                     # underline of unparsed / ignored text: ≥ 3:1 on both backgrounds
NEW_OUTLINE = "#d97706"              # the streaming replay's new characters: ≥ 3:1 on both backgrounds

# tint per label, laid over the page's background (content has none: it is the plain text)
COLOURS = {
    "generation prompt": "rgba(100,116,139,0.22)", "reasoning": "rgba(139,92,246,0.20)",
    "content": "rgba(0,0,0,0)", "tool name": "rgba(34,197,94,0.32)", "call id": "rgba(20,184,166,0.32)",
    "arguments": "rgba(245,158,11,0.14)", "argument name": "rgba(245,158,11,0.40)",
    "argument value": "rgba(234,179,8,0.24)", "marker": "rgba(59,130,246,0.24)",
    "whitespace": "rgba(100,116,139,0.08)", "unparsed": "rgba(239,68,68,0.32)", "ignored": "rgba(239,68,68,0.14)",
    "held back": "rgba(168,85,247,0.32)",
}

# Streamlit's two themes as this app gets them (text, background), for :func:`label_contrasts`
THEMES = {"light": ("#2f2d2b", "#ffffff"), "dark": ("#edebe8", "#171614")}

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
PANEL = ("white-space:pre-wrap;overflow-wrap:anywhere;font-size:0.9em;line-height:1.9;color:inherit;background:transparent;"
         "border:1px solid rgba(128,128,128,0.4);border-radius:6px;padding:0.5em 0.7em")


def span_style(label: str) -> str:
    """Inline CSS of a span with ``label``: its tint, the theme's text, a box for markers."""
    style = f"background:{COLOURS.get(label, COLOURS['content'])};color:inherit;"
    style += BOX if label in ("marker", "generation prompt") else SPAN_PAD
    if label in ("unparsed", "ignored"):
        style += f";text-decoration:underline wavy {WAVY};text-underline-offset:0.25em"
    return style


def stop_html(words: str, kind: str) -> str:
    """The "stopped here" / "cut off here" badge with ``words`` as its tooltip."""
    return (f'<span class="cte-stop" data-kind="{kind}" style="color:{STOP_FG};background:{STOP_BG};'
            f'border-radius:3px;padding:0.08em 3px 0.22em;font-weight:bold" title="{html.escape(words, quote=True)}">'
            f'{"stopped here" if kind == "stop" else "cut off here"}</span>')


def legend_html() -> str:
    """The legend: one swatch per label, its meaning as a tooltip, in the theme's colours like the view."""
    items = "".join(f'<span class="cte-legend-item" data-label="{html.escape(k)}" style="{span_style(k)};'
                    f'border:1px solid rgba(128,128,128,0.4);padding:0.08em 4px 0.22em;margin:0 4px 4px 0;'
                    f'display:inline-block" title="{html.escape(MEANINGS.get(k, k), quote=True)}">'
                    f'{html.escape(k)}</span>' for k in COLOURS)
    return f'<div class="cte-legend" style="font-size:0.8em;margin-bottom:6px;color:inherit">{items}</div>'


def panel_html(css_class: str, body: str) -> str:
    """``body`` (span HTML) in the view's ``<pre>`` panel."""
    return f'<pre class="{css_class}" style="{PANEL}">{body}</pre>'


def composite(tint: str, background: str) -> str:
    """The ``#rrggbb`` seen where an ``rgba(r,g,b,a)`` (or ``#rrggbb``) ``tint`` is laid over ``background``."""
    if tint.startswith("#"):
        return tint
    r, g, b, a = (float(v) for v in tint[tint.index("(") + 1:-1].split(","))
    bg = [int(background.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)]
    return "#" + "".join(f"{round(a * c + (1 - a) * o):02x}" for c, o in zip((r, g, b), bg))


def label_contrasts() -> dict[tuple[str, str], float]:
    """(theme, label) -> contrast of the theme's text on the label's tint over the theme's background."""
    return {(name, label): contrast_ratio(fg, composite(tint, bg))
            for name, (fg, bg) in THEMES.items() for label, tint in COLOURS.items()}


def _luminance(hex_colour: str) -> float:
    h = hex_colour.lstrip("#")
    rgb = [int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_ratio(fg: str, bg: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    a, b = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)
