"""Real-browser tests of the app as a public demo (issue 15): Playwright drives Debian's chromium against
``streamlit run app.py`` started the way an operator deploys it (``CTE_DEMO=1``, one allowed folder).

* no request leaves localhost while every page loads (no usage statistics, no favicon or font from the internet);
* typed server paths — ``/etc``, ``/root``, a ``..`` walk and symlinks out of the allowed folder — are refused on
  the Sources and Corpus pages, and the file planted outside the allowed folder never shows on any page.

The launch and wait helpers are those of ``tests/test_browser.py``. Skipped only when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import os
import urllib.parse

import pytest

from .conftest import ROOT
from .test_browser import _shot, _start, _wait_idle, streamlit_server

pytestmark = pytest.mark.browser

SECRET = "DEPLOY-SECRET-7f3a"  # planted outside the allowed folder; must never reach the browser
PAGES = ["Sources", "Comparisons", "Overrides", "Playground", "Grammar", "Corpus", "Overview"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """``allowed/`` (the operator's root: one template, a symlink to a file outside, a symlink to the outside
    folder, a model folder whose template links outside) beside ``outside/`` holding the secret."""
    base = tmp_path_factory.mktemp("deploy")
    allowed, outside = base / "allowed", base / "outside"
    allowed.mkdir()
    outside.mkdir()
    (outside / "secret.jinja").write_text(f"API_KEY={SECRET}\n{{{{ messages[0].content }}}}", encoding="utf-8")
    (allowed / "ok.jinja").write_text((ROOT / "assets" / "templates" / "plain-chat.jinja").read_text("utf-8"),
                                      encoding="utf-8")
    (allowed / "link.jinja").symlink_to(outside / "secret.jinja")
    (allowed / "linkdir").symlink_to(outside, target_is_directory=True)
    (allowed / "model").mkdir()
    (allowed / "model" / "chat_template.jinja").symlink_to(outside / "secret.jinja")
    return allowed, outside


@pytest.fixture(scope="module")
def demo_url(planted):
    allowed, _ = planted
    # no command-line overrides of .streamlit/config.toml: the shipped settings are under test
    env = dict(os.environ, HF_HUB_OFFLINE="1", CTE_DEMO="1", CTE_ALLOW_ROOTS=str(allowed))
    with streamlit_server(env, "streamlit-deploy.log") as url:
        yield url


def _open(page, title: str) -> None:
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).click()
    page.get_by_role("heading", name=title).wait_for(timeout=60_000)
    _wait_idle(page)


def _no_secret(page) -> None:
    assert SECRET not in page.content()


def test_no_request_leaves_localhost(demo_url, browser):  # noqa: F811 - pytest fixture
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    page.goto(demo_url + "/overview", wait_until="networkidle")
    page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
    _wait_idle(page)
    for title in PAGES:
        _open(page, title)
    page.wait_for_load_state("networkidle")
    hosts = {urllib.parse.urlsplit(u).hostname for u in urls if urllib.parse.urlsplit(u).scheme in ("http", "https",
                                                                                                      "ws", "wss")}
    assert hosts == {"127.0.0.1"}, sorted(u for u in urls if urllib.parse.urlsplit(u).hostname != "127.0.0.1")
    assert len(urls) > 10  # the pages really loaded through the recorder
    # the page icon is this server's own file
    icons = page.evaluate("() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
    assert icons and all(urllib.parse.urlsplit(i).hostname in ("127.0.0.1", None) for i in icons), icons
    page.close()


def _type_folder(page, label: str, text: str) -> None:
    box = page.locator('[data-testid="stTextInput"]').filter(has_text=label).locator("input")
    box.fill(text)
    box.press("Enter")
    _wait_idle(page)


def test_server_paths_confined_to_the_allowed_folder(demo_url, browser, planted):  # noqa: F811
    allowed, outside = planted
    page, errors = _start(browser, demo_url)
    _open(page, "Sources")
    page.get_by_text("Local folder").click()
    _wait_idle(page)
    # the allowed folder lists only what resolves inside it: no link.jinja, linkdir or model (links out)
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text="Template (")
    box.wait_for(timeout=30_000)
    assert "Template (1 files)" in box.inner_text(), box.inner_text()
    box.locator("input").first.click()
    options = page.get_by_role("option")
    options.first.wait_for(timeout=10_000)
    assert options.all_inner_texts() == ["ok.jinja"]
    page.keyboard.press("Escape")
    attempts = ["/etc", "/root", f"{allowed}/../outside", f"{allowed}/linkdir", f"{allowed}/link.jinja"]
    for text in attempts:
        _type_folder(page, "Folder", text)
        alert = page.locator('[data-testid="stAlert"]').filter(has_text="cannot be read")
        alert.first.wait_for(timeout=30_000)
        assert "outside the allowed folders" in alert.first.inner_text(), text
        assert page.locator('[data-testid="stSelectbox"]').filter(has_text="Template (").count() == 0, text
        _no_secret(page)
    _shot(page, "40-deploy-sources-refused")
    # inside a model folder whose template links outside, that template is not offered
    _type_folder(page, "Folder", f"{allowed}/model")
    page.get_by_text("No .jinja / .json / .gguf files", exact=False).first.wait_for(timeout=30_000)
    _no_secret(page)

    _open(page, "Corpus")
    for text in ["/etc", f"{allowed}/../../../.."]:
        _type_folder(page, "Folder of templates", text)
        page.locator('[data-testid="stAlert"]').filter(has_text="outside the allowed folders").first.wait_for(
            timeout=30_000)
        assert page.get_by_role("button", name="Analyse", exact=False).count() == 0, text
        _no_secret(page)
    _type_folder(page, "Folder of templates", str(allowed))
    page.get_by_role("button", name="Analyse 1 templates").click()
    page.get_by_text("Select a row to open it.", exact=False).wait_for(timeout=120_000)
    _wait_idle(page)
    _shot(page, "41-deploy-corpus-allowed")
    _open(page, "Overview")
    _no_secret(page)
    assert not errors, errors
    page.close()
