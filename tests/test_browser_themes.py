"""Explain's span view, its legend and a highlighted code view in the light and the dark theme (Playwright +
Debian's chromium, the launch helpers of tests/test_browser.py): screenshots in both colour schemes at 1× and 2×
pixel density (``tests/artifacts/themes-*.png``); the WCAG AA contrast (≥ 4.5:1) of every span's, legend swatch's,
code token's and line number's text against what is behind it, as the browser computes them from the CSS the page
emits (translucent tints composited over the page); each view's panel is the page's own colour (a light panel
stayed white in the dark theme); and an underscore that renders — inside a boxed marker of the span view
(``<|im_start|>`` once read ``<|im start|>`` at 1×: the underscore sat on the box's edge) and in the code view.
Comparisons' diff split (``themes-diff-*.png``) is checked the same way."""

from __future__ import annotations

import io
import re

import pytest

from explorer.components.code_view import LINE_NUMBER, PALETTE
from explorer.components.code_view import BOX as CODE_BOX
from explorer.components.spans import COLOURS, THEMES, composite, contrast_ratio, label_contrasts

from .test_browser import ARTIFACTS, _pick, _wait_idle

pytestmark = pytest.mark.browser

RGB = re.compile(r"rgba?\((\d+), (\d+), (\d+)(?:, ([\d.]+))?\)")

# the screen box of the first "_" inside the element ``sel`` finds, and that element's box
UNDERSCORE_JS = """sel => {
  const el = document.querySelector(sel);
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const i = n.data.indexOf('_');
    if (i >= 0) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      const c = r.getBoundingClientRect(), s = el.getBoundingClientRect();
      return {x0: c.left, x1: c.right, top: s.top, bottom: s.bottom, ctop: c.top, cbottom: c.bottom};
    }
  }
  return null;
}"""

# the computed text colour of each element ``sel`` finds, with the background colours from the element up to the
# first opaque one (composited in Python, innermost last); the label is the element's data-label or class
PAINT_JS = """([root, sel]) => [...document.querySelectorAll(root + ' ' + sel)].map(e => {
  const layers = [];
  for (let b = e; b; b = b.parentElement) {
    const bg = getComputedStyle(b).backgroundColor;
    if (bg === 'transparent' || bg === 'rgba(0, 0, 0, 0)') continue;
    layers.push(bg);
    if (!bg.startsWith('rgba')) break;
  }
  return [e.dataset.label || e.className || 'text', getComputedStyle(e).color, layers];
})"""


# the computed text colour of every diff part, marker box and row label, with the background colours from the
# element up to the first opaque one (translucent tints are composited in Python, innermost last)
LAYERS_JS = """root => [...root.querySelectorAll('.cte-part, [data-legend], [data-marker], .cte-diff-row > strong')].map(e => {
  const layers = [];
  for (let b = e; b; b = b.parentElement) {
    const bg = getComputedStyle(b).backgroundColor;
    if (bg === 'transparent' || bg === 'rgba(0, 0, 0, 0)') continue;
    layers.push(bg);
    if (!bg.startsWith('rgba')) break;
  }
  const kind = e.dataset.part || (e.dataset.legend ? 'legend ' + e.dataset.legend : e.dataset.marker ? 'marker' : 'label');
  return [kind, getComputedStyle(e).color, layers];
})"""


def _rgba(css: str) -> tuple[float, float, float, float]:
    m = RGB.match(css)
    assert m, css
    r, g, b, a = m.groups()
    return float(r), float(g), float(b), 1.0 if a is None else float(a)


def _composite(layers: list[str]) -> str:
    """The colour seen through ``layers`` (innermost first, the last one opaque), as #rrggbb."""
    assert layers and _rgba(layers[-1])[3] == 1.0, layers
    out = _rgba(layers[-1])[:3]
    for css in reversed(layers[:-1]):
        r, g, b, a = _rgba(css)
        out = tuple(a * c + (1 - a) * o for c, o in zip((r, g, b), out))
    return "#" + "".join(f"{round(v):02x}" for v in out)


def _theme_is(page, scheme: str) -> None:
    """The page really is in ``scheme`` (Streamlit follows the browser's colour scheme)."""
    app_bg = _hex(page.locator('[data-testid="stApp"]').evaluate("e => getComputedStyle(e).backgroundColor"))
    assert (contrast_ratio(app_bg, "#000000") < 3) == (scheme == "dark"), app_bg


def _hex(css: str) -> str:
    m = RGB.match(css)
    assert m, css
    return "#" + "".join(f"{int(v):02x}" for v in m.groups()[:3])


def _lum(rgb) -> float:
    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    return 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2])


def test_palettes_meet_wcag_aa() -> None:
    """Every label tint keeps each theme's text at ≥ 4.5:1, and every code colour is ≥ 4.5:1 on its theme's panel
    (the panel's grey tint over the theme's background)."""
    low = {k: round(v, 2) for k, v in label_contrasts().items() if v < 4.5}
    assert not low, low
    tint = re.search(r"background:(rgba\([^)]*\))", CODE_BOX).group(1)
    for i, name in enumerate(("light", "dark")):
        panel = composite(tint, THEMES[name][1])
        pairs = {str(k): p[i] for k, p in PALETTE.items()} | {"line number": LINE_NUMBER[i]}
        low = {k: round(contrast_ratio(c, panel), 2) for k, c in pairs.items() if contrast_ratio(c, panel) < 4.5}
        assert not low, (name, low)


def _low_contrast(seen: list) -> list:
    """The (label, colour, background, ratio) of every painted element under 4.5:1."""
    low = []
    for label, fg, layers in seen:
        bg = _composite(layers)
        ratio = contrast_ratio(_hex(fg), bg)
        if ratio < 4.5:
            low.append((label, fg, bg, round(ratio, 2)))
    return low


def _panel_is_page(page, selector: str, app_bg: str) -> None:
    """The panel ``selector`` finds shows the page's own colour (a faint tint at most): no light box in dark."""
    layers = page.evaluate(PAINT_JS, ["[data-testid=stMain]", selector])[0][2]
    assert contrast_ratio(_composite(layers), app_bg) < 1.2, (selector, layers, app_bg)


def _underscore_drawn(page, selector: str, scale: int, border: bool) -> bool:
    """True when the first "_" inside ``selector`` has a row of pixels that stands out from the fill behind it
    across ≥ 60% of the character's width (a thin underscore is anti-aliased at 1×: a faint line, not the text's
    full colour). ``border``: the element's 1px border lines are left out of the rows looked at."""
    from PIL import Image

    box = page.evaluate(UNDERSCORE_JS, selector)
    assert box is not None, selector
    top, bottom = (box["top"], box["bottom"]) if border else (box["ctop"], box["cbottom"] + 1)
    shot = Image.open(io.BytesIO(page.screenshot(clip={"x": box["x0"], "y": top, "width": box["x1"] - box["x0"],
                                                       "height": bottom - top})))
    img = shot.convert("RGB")
    w, h = img.size
    edge = max(1, scale) if border else 0          # the 1px CSS border, in device pixels
    inside = range(edge, h - edge)
    fill = sorted(_lum(img.getpixel((x, y))) for y in inside for x in range(w))[w * len(inside) // 2]

    def stands_out(px) -> bool:
        a, b = sorted((_lum(px), fill))
        return (b + 0.05) / (a + 0.05) >= 1.6
    return any(sum(stands_out(img.getpixel((x, y))) for x in range(w)) >= 0.6 * w for y in inside)


def _theme_colours(page, scheme: str) -> str:
    """The app's background; its text and background are the ones :data:`THEMES` states for ``scheme``."""
    app = page.locator('[data-testid="stApp"]')
    fg, bg = (_hex(app.evaluate(f"e => getComputedStyle(e).{p}")) for p in ("color", "backgroundColor"))
    assert (fg, bg) == THEMES[scheme], (fg, bg)
    return bg


def _open(page, url: str, heading: str) -> None:
    """Go to ``url`` and wait until its page's heading shows and its script run is over."""
    page.goto(url, wait_until="networkidle")
    page.get_by_role("heading", name=heading).wait_for(timeout=60_000)
    _wait_idle(page)


def _themed_page(browser, scheme: str, scale: int, url: str, heading: str):
    """A new context in ``scheme`` at ``scale``, on ``url`` opened as :func:`_open` does: (context, page)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=scale,
                              color_scheme=scheme)
    page = ctx.new_page()
    _open(page, url, heading)
    return ctx, page


@pytest.mark.parametrize("scheme,scale", [("light", 1), ("dark", 1), ("light", 2), ("dark", 2)])
def test_span_view_reads_in_both_themes(app_url, browser, scheme, scale):  # noqa: F811 - fixtures
    ctx, page = _themed_page(browser, scheme, scale, app_url + "/explain", "Explain")
    view = page.locator("pre.cte-spans")
    view.wait_for(timeout=60_000)
    _theme_is(page, scheme)
    app_bg = _theme_colours(page, scheme)
    page.locator(".cte-legend").scroll_into_view_if_needed()
    page.locator(".cte-legend").screenshot(path=str(ARTIFACTS / f"themes-legend-{scheme}-{scale}x.png"))
    view.screenshot(path=str(ARTIFACTS / f"themes-spans-{scheme}-{scale}x.png"))

    seen = page.evaluate(PAINT_JS, ["[data-testid=stMain]", ".cte-span, .cte-legend-item, .cte-stop"])
    labels = {label for label, _, _ in seen}
    assert {"generation prompt", "marker", "reasoning", "tool name"} <= labels and set(COLOURS) <= labels, labels
    assert not _low_contrast(seen), _low_contrast(seen)
    _panel_is_page(page, "pre.cte-spans", app_bg)
    _panel_is_page(page, ".cte-legend", app_bg)
    # the labels stay told apart: each tint is its own colour on the page
    tints = {label: _composite(layers) for label, _, layers in seen if label in COLOURS and label != "content"}
    assert len(set(tints.values())) == len(tints), tints
    assert _underscore_drawn(page, 'pre.cte-spans .cte-span[data-label="generation prompt"]', scale, border=True), \
        f"no underscore drawn inside the marker box ({scheme} {scale}x)"
    ctx.close()


@pytest.mark.parametrize("scheme,scale", [("light", 1), ("dark", 1), ("light", 2), ("dark", 2)])
def test_code_view_reads_in_both_themes(app_url, browser, scheme, scale):  # noqa: F811 - fixtures
    """The Grammar page's GBNF (a pygments-highlighted code view, as the Overview's template source)."""
    ctx, page = _themed_page(browser, scheme, scale, app_url + "/grammar", "Grammar")
    code = page.locator(".cte-code").first
    code.wait_for(timeout=60_000)
    _theme_is(page, scheme)
    app_bg = _theme_colours(page, scheme)
    code.screenshot(path=str(ARTIFACTS / f"themes-code-{scheme}-{scale}x.png"))

    seen = page.evaluate(PAINT_JS, [".cte-code", "pre, pre span"])
    assert not _low_contrast(seen), _low_contrast(seen)
    _panel_is_page(page, ".cte-code", app_bg)
    # highlighted in this theme's palette: rule names, strings, character classes, operators, line numbers
    shown = {_hex(fg) for _, fg, _ in seen}
    want = {PALETTE[k][scheme == "dark"] for k in PALETTE if str(k) in (
        "Token.Name.Function", "Token.Literal.String", "Token.Literal.String.Regex", "Token.Operator")}
    assert want | {LINE_NUMBER[scheme == "dark"]} <= shown, (shown, want)
    assert _underscore_drawn(page, ".cte-code pre", scale, border=False), f"no underscore drawn ({scheme} {scale}x)"
    ctx.close()


@pytest.mark.parametrize("scheme,scale", [("light", 1), ("dark", 1), ("light", 2), ("dark", 2)])
def test_comparisons_diff_reads_in_both_themes(app_url, browser, scheme, scale):  # noqa: F811 - fixtures
    ctx, page = _themed_page(browser, scheme, scale, app_url + "/comparisons", "Comparisons")
    _theme_is(page, scheme)
    _pick(page, "Show", "T1")
    diff = page.locator(".cte-diff").first
    diff.wait_for(timeout=30_000)
    diff.scroll_into_view_if_needed()
    diff.screenshot(path=str(ARTIFACTS / f"themes-diff-{scheme}-{scale}x.png"))

    seen = diff.evaluate(LAYERS_JS)
    kinds = {k for k, _, _ in seen}
    assert {"prefix", "left", "right", "suffix", "marker", "label", "legend left", "legend right"} <= kinds, kinds
    app_bg = _hex(page.locator('[data-testid="stApp"]').evaluate("e => getComputedStyle(e).backgroundColor"))
    low = []
    for kind, fg, layers in seen:
        bg = _composite(layers)
        # the panel is the page's own colour underneath (it stayed white in the dark theme)
        assert contrast_ratio(_composite(layers[-1:]), app_bg) < 1.2, (kind, layers, app_bg)
        ratio = contrast_ratio(_hex(fg), bg)
        if ratio < 4.5:
            low.append((kind, fg, bg, round(ratio, 2)))
    assert not low, low
    # the parts stay told apart: A's own part and B's own part are different colours, and not the shared grey
    tint = {k: _composite(layers) for k, _, layers in seen if k in ("prefix", "left", "right")}
    assert len(set(tint.values())) == 3, tint
    ctx.close()


def test_code_inputs_use_the_code_font(app_url, browser):  # noqa: F811 - fixtures
    """The Edit page's template box is fixed-width (Streamlit draws text areas in its prose font), the Explain
    page's model output box is not (prose and markup): the same number of "i" and "W" take the same width."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    widths = """e => { const c = document.createElement('canvas').getContext('2d'), s = getComputedStyle(e);
        c.font = s.fontSize + ' ' + s.fontFamily;
        return [c.measureText('iiiiiiii').width, c.measureText('WWWWWWWW').width]; }"""
    for path, title, key, fixed in (("edit", "Edit", "in_edit_source", True),
                                    ("explain", "Explain", "in_output", False)):
        _open(page, f"{app_url}/{path}", title)
        box = page.locator(f".st-key-{key} textarea")
        box.wait_for(timeout=60_000)
        narrow, wide = box.evaluate(widths)
        assert (abs(narrow - wide) < 0.5) == fixed, (path, narrow, wide,
                                                     box.evaluate("e => getComputedStyle(e).fontFamily"))
    page.close()


def test_long_lines_wrap_between_words(app_url, browser):  # noqa: F811 - fixtures
    """A long line of model output in Explain's span view wraps inside the panel, between words: a visible
    space is a glyph, not a space, and such a line ran 3× past the panel's right edge."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    _open(page, app_url + "/explain", "Explain")
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Model output").locator("textarea")
    area.fill("The user wants the weather in Paris, so I should think about it carefully before answering. " * 5
              + "\n</think>\n\nIt is sunny.")
    area.press("Control+Enter")
    _wait_idle(page)
    view = page.locator("pre.cte-spans")
    view.filter(has_text="sunny").wait_for(timeout=60_000)
    width, inner = view.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width <= inner, (width, inner)
    # no word is cut across two lines: each "carefully" is drawn in one box
    split = view.evaluate("""e => { const out = [], w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
        for (let n = w.nextNode(); n; n = w.nextNode()) for (let i = n.data.indexOf('carefully'); i >= 0;
             i = n.data.indexOf('carefully', i + 1)) {
            const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 9);
            out.push(r.getClientRects().length); }
        return out; }""")
    assert len(split) == 5 and set(split) == {1}, split
    page.close()


def test_static_table_shows_markdown_characters_as_text(app_url, browser):  # noqa: F811 - fixtures
    """xml-function-tags' preserved tokens include ``>\\n``: Streamlit's static table drew it as an empty quote
    (its cells are Markdown); it reads ``>`` now, and no table cell holds Markdown's own elements."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    _open(page, app_url + "/grammar?src=bundled:xml-function-tags.jinja", "Grammar")
    tokens = page.locator('[data-testid="stTable"]').filter(has_text="<function=").first
    tokens.wait_for(timeout=60_000)
    cells = [c.strip() for c in tokens.locator("td").all_inner_texts()]
    assert ">" in cells and "" not in cells, cells
    assert page.locator('[data-testid="stTable"] td :is(blockquote, a, strong, em, code, h1, h2)').count() == 0
    page.close()
