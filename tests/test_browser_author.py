"""The author's loop in a real browser (Playwright + Debian's chromium): edit a template with its live render
beside the editor, analyse, reload the page, then Compare: side B is the loaded source (not a bundled example
picked behind the visitor's back), the analysis diff says the parser changes and the source diff beside it shows
the edited lines; Revert to loaded still works after the reload. Screenshots: ``tests/artifacts/author-*.png``."""

from __future__ import annotations

import pytest

from .test_browser import _shot, _start, _wait_idle
from .test_browser_edit import _analyse, _source_area

pytestmark = pytest.mark.browser


def _nav(page, title: str) -> None:
    page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
    page.get_by_role("heading", name=title).wait_for(timeout=60_000)
    _wait_idle(page)


def test_edit_live_render_reload_then_compare(app_url, browser):  # noqa: F811 - fixtures
    page, errors = _start(browser, app_url, "Edit", height=1100)
    area = _source_area(page)
    area.wait_for(timeout=60_000)
    original = area.input_value()
    live = page.locator(".cte-text").filter(has_text="tomorrow?").first
    live.wait_for(timeout=60_000)
    assert "<tool_call>" in live.inner_text()
    _shot(page, "author-01-edit-live-render")

    edited = original.replace("<tool_call>", "<function_call>").replace("</tool_call>", "</function_call>")
    area.fill(edited)
    area.press("Control+Enter")
    _wait_idle(page)
    live = page.locator(".cte-text").filter(has_text="tomorrow?").filter(has_text="<function_call>").first
    live.wait_for(timeout=60_000)                                         # the render follows the text
    assert "<tool_call>" not in live.inner_text()
    _analyse(page)
    page.get_by_text("Analysis of the current source").wait_for(timeout=60_000)
    assert "base=bundled" in page.url, page.url

    page.reload(wait_until="networkidle")
    page.get_by_role("heading", name="Edit").wait_for(timeout=60_000)
    _wait_idle(page)
    # the restored text arrives with the run's widget values, which can come after the idle flag on a loaded
    # machine (a full-suite run at load 12 read the box empty): wait for it, then check it whole
    from playwright.sync_api import expect

    expect(_source_area(page)).to_have_value(edited, timeout=60_000)
    assert _source_area(page).input_value() == edited

    _nav(page, "Compare")
    # after an edit, Compare opens old -> new, as `compare OLD NEW`: A the loaded source, B the edit
    for side, want in (("Side A", "Loaded source (before editing)"), ("Side B", "Current template")):
        radio = page.locator('[data-testid="stRadio"]').filter(has_text=side)
        checked = radio.locator('input[type="radio"]:checked').evaluate("e => e.closest('label').innerText")
        assert checked.strip() == want, (side, checked)
    page.get_by_text("Source diff").first.wait_for(timeout=60_000)
    diff = page.locator('[data-testid="stCode"]').filter(has_text="+++ B/").first
    diff.wait_for(timeout=60_000)
    text = diff.inner_text()
    assert "<function_call>" in text and "<tool_call>" in text, text[:500]
    parser = page.locator('[data-testid="stMetric"]').filter(has_text="Parser changes").first
    assert "yes" in parser.inner_text()
    _shot(page, "author-02-compare-after-reload")
    # the field table fits the page's left half: no sideways scroll, no cell's text running past its cell (the
    # B column was cut off, and long field names ran into the next column)
    fields = page.locator(".st-key-cte_fields_table")
    fields.wait_for(timeout=60_000)
    heads = fields.locator("th").all_inner_texts()
    assert [h.strip() for h in heads] == ["field", "changes the parser", "A", "B"], heads
    over = fields.evaluate("""e => { const t = e.querySelector('[data-testid=stTable]'), out = [];
        if (t.scrollWidth > t.clientWidth + 1) out.push(['table', t.scrollWidth, t.clientWidth]);
        for (const td of e.querySelectorAll('td')) for (const p of td.querySelectorAll('p'))
            if (p.getBoundingClientRect().right > td.getBoundingClientRect().right + 1
                || p.scrollWidth > p.clientWidth + 1)
                out.push([p.innerText, p.scrollWidth, td.clientWidth]);
        return out; }""")
    assert not over, over

    _nav(page, "Edit")
    page.get_by_role("button", name="Revert to loaded").click()
    _wait_idle(page)
    assert _source_area(page).input_value() == original
    assert "base=" not in page.url and "src=bundled" in page.url, page.url
    assert not errors, errors
    page.close()
