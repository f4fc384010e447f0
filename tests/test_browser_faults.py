"""Faults that must not lose a visitor's view (Playwright + Debian's chromium): the server restarts under an open
page; the page reconnects, and its next click (a page switch, which drops the query string) still shows the
template the URL named — not the default one with the URL rewritten (explorer/resume.py)."""

from __future__ import annotations

import os

import pytest

from bench.browser import free_port, serve

from .test_browser import ARTIFACTS, _shot, _wait_idle

pytestmark = pytest.mark.browser


def test_a_restarted_server_keeps_the_view(browser, tmp_path):  # noqa: F811 - fixture
    env = dict(os.environ, HF_HUB_OFFLINE="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
               CTE_CACHE_DIR=str(tmp_path / "cache"))
    port = free_port()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    with open(ARTIFACTS / "streamlit-restart.log", "w") as log:
        with serve(log, env=env, port=port) as url:
            page.goto(f"{url}/overview?src=bundled:mistral-tool-calls.jinja", wait_until="networkidle")
            page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
            _wait_idle(page)
            page.get_by_text("mistral-tool-calls.jinja").first.wait_for(timeout=60_000)
        with serve(log, env=env, port=port) as url:      # the same address: the open page reconnects
            page.wait_for_timeout(3000)
            page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Comparisons", exact=True).click()
            page.get_by_role("heading", name="Comparisons").wait_for(timeout=60_000)
            _wait_idle(page)
            assert "src=bundled%3Amistral-tool-calls.jinja" in page.url or \
                "src=bundled:mistral-tool-calls.jinja" in page.url, page.url
            page.get_by_text("mistral-tool-calls.jinja").first.wait_for(timeout=30_000)
            _shot(page, "faults-01-after-restart")
    page.close()


def test_a_fresh_visit_to_the_front_page_is_not_redirected(browser, tmp_path):  # noqa: F811 - fixture
    env = dict(os.environ, HF_HUB_OFFLINE="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
               CTE_CACHE_DIR=str(tmp_path / "cache"))
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    with open(ARTIFACTS / "streamlit-restart.log", "w") as log, serve(log, env=env) as url:
        page = ctx.new_page()
        page.goto(f"{url}/overview?src=bundled:mistral-tool-calls.jinja", wait_until="networkidle")
        page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
        _wait_idle(page)
        other = ctx.new_page()                      # same browser (same cookie), a new tab on the root URL
        other.goto(url, wait_until="networkidle")
        other.get_by_role("heading", name="Chat Template Explorer").wait_for(timeout=60_000)
        _wait_idle(other)
        assert "chatml-think-tools.jinja" in other.locator('[data-testid="stMain"]').inner_text()
    ctx.close()
