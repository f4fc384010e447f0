"""The front page in a real browser (Playwright + Debian's chromium): the root URL opens it, its three story
links lead to their pages, the glossary is on it, and the Overview's mode metrics carry the glossary as a
tooltip. Screenshots of it in the light and dark theme at 1× and 2× go to ``tests/artifacts/home-*.png``."""

from __future__ import annotations

import pytest

from .conftest import APP_LOG_NAME
from .test_browser import ARTIFACTS, _wait_idle

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("scheme,scale", [("light", 1), ("dark", 2)])
def test_front_page_and_its_entry_points(app_url, browser, scheme, scale):  # noqa: F811 - fixtures
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=scale,
                              color_scheme=scheme)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(app_url, wait_until="networkidle")
    page.get_by_role("heading", name="Chat Template Explorer").wait_for(timeout=60_000)
    _wait_idle(page)
    main = page.locator('[data-testid="stMain"]')
    for story in ("A model's output parses wrong", "I am writing a template", "How was a model's format found?"):
        main.get_by_text(story).wait_for(timeout=10_000)
    assert "TAG_WITH_TAGGED" in main.inner_text() and "chatml-think-tools.jinja" in main.inner_text()
    page.screenshot(path=str(ARTIFACTS / f"home-{scheme}-{scale}x.png"), full_page=True)
    # every page is listed in the navigation (none folded behind "View more")
    nav = page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
    assert len(nav) == 13 and nav[0].split()[-1] == "here", nav

    main.get_by_role("link", name="Explain an output").click()
    page.get_by_role("heading", name="Explain").wait_for(timeout=60_000)
    _wait_idle(page)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Start here").click()
    page.get_by_role("heading", name="Chat Template Explorer").wait_for(timeout=60_000)
    main.get_by_role("link", name="Overview of the analysis").click()
    page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
    _wait_idle(page)
    # the mode metric's tooltip explains the mode shown
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="Reasoning").first
    metric.hover()
    metric.locator('[data-testid="stTooltipIcon"], [data-testid="stTooltipHoverTarget"]').first.hover()
    page.get_by_text("Reasoning sits between a start and an end marker", exact=False).first.wait_for(timeout=10_000)
    assert not errors, errors
    ctx.close()


def test_server_console_stays_quiet(app_url, browser):  # noqa: F811 - fixtures
    """Every page of a session opened (the analysis worker started): the server log has no "missing
    ScriptRunContext!" (a worker process re-ran the page script in bare mode, ~56 lines a session) nor the bare
    mode "streamlit run" hint."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/overview", wait_until="networkidle")
    page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
    _wait_idle(page)
    page.locator('[data-testid="stMetric"]').first.wait_for(timeout=60_000)
    for title in ("Comparisons", "Playground", "Explain", "Edit", "Lint", "Export"):
        page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
        page.get_by_role("heading", name=title).wait_for(timeout=60_000)
        _wait_idle(page)
    page.close()
    log = (ARTIFACTS / APP_LOG_NAME).read_text(encoding="utf-8", errors="replace")
    assert "Uvicorn server started" in log or "You can now view" in log   # the log is this server's (shared by
    # every browser test of the session, so it covers their sessions too)
    assert "missing ScriptRunContext" not in log and "streamlit run" not in log, log[-3000:]
