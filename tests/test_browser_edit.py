"""Real-browser test of editing a template in place (issue 12): introduce a syntax error (its line shown, the
previous analysis kept), fix it while changing a marker (the analysis and the parser follow), reload the page
and find the edit. Reuses tests/test_browser.py's launch helpers (streamlit + Debian's chromium)."""

from __future__ import annotations

import pytest

from .test_browser import _shot, _start, _wait_idle

pytestmark = pytest.mark.browser


def _tokens(page) -> str:
    """The parser's preserved tokens as the Edit page shows them (a code block after its caption)."""
    block = page.locator('[data-testid="stCode"]').filter(has_text="</think>").first
    block.wait_for(timeout=60_000)
    return block.inner_text()


def _source_area(page):
    return page.locator('[data-testid="stTextArea"]').filter(has_text="Template source").locator("textarea")


def _analyse(page) -> None:
    page.get_by_role("button", name="Analyse").click()
    _wait_idle(page)


def test_edit_error_fix_marker_reload(app_url, browser):  # noqa: F811 - fixtures
    page, errors = _start(browser, app_url, "Edit")
    area = _source_area(page)
    area.wait_for(timeout=60_000)
    original = area.input_value()
    assert "<tool_call>" in original
    assert "<tool_call>" in _tokens(page)

    # a syntax error: shown with its line; the analysis of the loaded source stays
    area.fill(original.replace("{%- endmacro -%}", "{%- endmacro -%", 1))
    area.press("Control+Enter")
    _wait_idle(page)
    _analyse(page)
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="Syntax error at line 7").first
    alert.wait_for(timeout=60_000)
    page.get_by_text("still that of the last good source").first.wait_for(timeout=30_000)
    assert "<tool_call>" in _tokens(page)
    _shot(page, "edit-01-syntax-error")

    # fixed, with the call marker renamed: the analysis and the parser change
    edited = original.replace("<tool_call>", "<function_call>").replace("</tool_call>", "</function_call>")
    area.fill(edited)
    area.press("Control+Enter")
    _wait_idle(page)
    _analyse(page)
    page.get_by_text("Analysis of the current source").wait_for(timeout=60_000)
    assert page.locator('[data-testid="stAlert"]').filter(has_text="Syntax error").count() == 0
    tokens = _tokens(page)
    assert "<function_call>" in tokens and "<tool_call>" not in tokens, tokens
    assert "src=text%3A" in page.url or "src=text:" in page.url, page.url
    _shot(page, "edit-02-marker-changed")

    # a reload keeps the edit (URL state) and its analysis
    page.reload(wait_until="networkidle")
    page.get_by_role("heading", name="Edit").wait_for(timeout=60_000)
    _wait_idle(page)
    area = _source_area(page)
    area.wait_for(timeout=60_000)
    assert area.input_value() == edited
    assert "<function_call>" in _tokens(page)
    _shot(page, "edit-03-after-reload")
    assert not errors, errors
    page.close()
