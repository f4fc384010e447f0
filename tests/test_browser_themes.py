"""Explain's span view in the light and the dark theme (Playwright + Debian's chromium, the launch helpers of
tests/test_browser.py): screenshots of the view in both colour schemes at 1× and 2× pixel density
(``tests/artifacts/themes-*.png``), the WCAG AA contrast (≥ 4.5:1) of every span's and legend swatch's text
against its background as the browser computes them from the CSS the page emits, and an underscore that renders
inside a boxed marker (``<|im_start|>`` once read ``<|im start|>`` at 1×: the underscore sat on the box's edge).
Comparisons' diff split (``themes-diff-*.png``) takes its colours from the theme — the theme's text on translucent
tints of the page's background — so its contrast is computed with each tint laid over what is behind it."""

from __future__ import annotations

import io
import re

import pytest

from explorer.components.spans import COLOURS, TEXT, contrast_ratio

from .test_browser import ARTIFACTS, _pick, _wait_idle

pytestmark = pytest.mark.browser

RGB = re.compile(r"rgba?\((\d+), (\d+), (\d+)(?:, ([\d.]+))?\)")

# the computed text and background colour of every span and legend swatch (a transparent background is the
# panel's: walk up to the first opaque one)
COLOURS_JS = """root => [...root.querySelectorAll('.cte-span, .cte-legend-item')].map(e => {
  let b = e, bg = getComputedStyle(b).backgroundColor;
  while (b && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) { b = b.parentElement; bg = getComputedStyle(b).backgroundColor; }
  return [e.dataset.label, getComputedStyle(e).color, bg];
})"""

# the screen box of the first "_" inside the generation prompt's boxed span, and that span's box
UNDERSCORE_JS = """() => {
  const span = document.querySelector('pre.cte-spans .cte-span[data-label="generation prompt"]');
  const walker = document.createTreeWalker(span, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const i = n.data.indexOf('_');
    if (i >= 0) {
      const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
      const c = r.getBoundingClientRect(), s = span.getBoundingClientRect();
      return {x0: c.left, x1: c.right, top: s.top, bottom: s.bottom};
    }
  }
  return null;
}"""


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


def test_palette_meets_wcag_aa() -> None:
    assert all(contrast_ratio(TEXT, bg) >= 4.5 for bg in COLOURS.values())


@pytest.mark.parametrize("scheme,scale", [("light", 1), ("dark", 1), ("light", 2), ("dark", 2)])
def test_span_view_reads_in_both_themes(app_url, browser, scheme, scale):  # noqa: F811 - fixtures
    from PIL import Image

    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=scale,
                              color_scheme=scheme)
    page = ctx.new_page()
    page.goto(app_url + "/explain", wait_until="networkidle")
    page.get_by_role("heading", name="Explain").wait_for(timeout=60_000)
    _wait_idle(page)
    view = page.locator("pre.cte-spans")
    view.wait_for(timeout=60_000)
    _theme_is(page, scheme)
    page.locator(".cte-legend").scroll_into_view_if_needed()
    page.locator(".cte-legend").screenshot(path=str(ARTIFACTS / f"themes-legend-{scheme}-{scale}x.png"))
    view.screenshot(path=str(ARTIFACTS / f"themes-spans-{scheme}-{scale}x.png"))

    pairs = page.locator("[data-testid=stMain]").evaluate(COLOURS_JS)
    labels = {p[0] for p in pairs}
    assert {"generation prompt", "marker", "reasoning", "tool name"} <= labels and set(COLOURS) <= labels, labels
    low = [(lab, fg, bg, round(contrast_ratio(_hex(fg), _hex(bg)), 2)) for lab, fg, bg in pairs
           if contrast_ratio(_hex(fg), _hex(bg)) < 4.5]
    assert not low, low

    # "_" renders: under the underscore's columns, a row of text-coloured pixels above the box's bottom border
    box = page.evaluate(UNDERSCORE_JS)
    assert box is not None
    shot = Image.open(io.BytesIO(page.screenshot(clip={"x": box["x0"], "y": box["top"], "width": box["x1"] - box["x0"],
                                                       "height": box["bottom"] - box["top"]})))
    img = shot.convert("RGB")
    w, h = img.size
    border = max(1, scale)                     # the 1px CSS border, in device pixels
    inside = range(border, h - border)         # rows between the box's top and bottom border lines
    bg = sorted(_lum(img.getpixel((x, y))) for y in inside for x in range(w))[w * len(inside) // 2]  # fill
    # a thin underscore is anti-aliased at 1x (a grey line, not the text's near-black): darker than half the fill
    dark_rows = [y for y in inside if sum(_lum(img.getpixel((x, y))) < 0.5 * bg for x in range(w)) >= 0.6 * w]
    assert dark_rows, f"no underscore drawn inside the box ({scheme} {scale}x)"
    ctx.close()


@pytest.mark.parametrize("scheme,scale", [("light", 1), ("dark", 1), ("light", 2), ("dark", 2)])
def test_comparisons_diff_reads_in_both_themes(app_url, browser, scheme, scale):  # noqa: F811 - fixtures
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=scale,
                              color_scheme=scheme)
    page = ctx.new_page()
    page.goto(app_url + "/comparisons", wait_until="networkidle")
    page.get_by_role("heading", name="Comparisons").wait_for(timeout=60_000)
    _wait_idle(page)
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
