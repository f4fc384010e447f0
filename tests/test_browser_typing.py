"""Text typed while a rerun is under way is never lost (Playwright + Debian's chromium, issue 28).

A text area sends its value only when it loses focus (or on Ctrl+Enter), so what a visitor types while the
page's script runs lives only in the browser until then. Streamlit replaces it when the run sends the widget a
value: every run used to re-assign each ``in_*`` widget's value (to keep it across pages), which the browser
applied as the widget's new value — the text typed during the run was overwritten ("The template text is
empty." after a correct paste). ``explorer.state.keep_inputs`` now never assigns a widget that is there.

The slow rerun is real: the Playground of a template whose renders run until the analysis time limit (a
wall-clock limit, tests/data/pathological_templates.json ``nested_range_loops``). Switching the fidelity asks for
a new analysis at the top of the page (the banner), so the run stalls for that limit before it draws the text
boxes — the moment an old value sent back would land on what the visitor typed meanwhile.
"""

from __future__ import annotations

import json

import pytest

from bench.browser import IDLE_JS

from .test_browser import _shot, _wait_idle

pytestmark = pytest.mark.browser

SLOW = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{{ messages[0].content }}")
RUNNING_JS = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
              " return !!a && a.getAttribute('data-test-script-state') === 'running'; }")


def _area(page, label: str):
    return page.locator('[data-testid="stTextArea"]').filter(has_text=label).locator("textarea")


def _load_pasted(page, url: str, text: str) -> None:
    page.goto(f"{url}/sources", wait_until="networkidle")
    page.get_by_role("heading", name="Sources").wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_text("Paste text", exact=True).click()
    _wait_idle(page)
    area = _area(page, "Jinja template")
    area.fill(text)
    area.press("Control+Enter")
    _wait_idle(page)
    page.get_by_role("button", name="Use this text").click()
    page.get_by_text("Loaded pasted.jinja").first.wait_for(timeout=60_000)
    _wait_idle(page)


def _fidelity(page, value: str) -> None:
    page.locator('[data-testid="stSidebar"]').get_by_text(value, exact=True).click()


def test_text_typed_during_a_slow_rerun_is_kept(app_url, browser):  # noqa: F811 - fixtures
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    typed_during_run = []
    for attempt in range(3):  # each attempt a new template: a new analysis, so a run that lasts the time limit
        _load_pasted(page, app_url, SLOW + f"{{# attempt {attempt} #}}")
        page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Playground", exact=True).click()
        page.get_by_role("heading", name="Playground").wait_for(timeout=60_000)
        _wait_idle(page)  # the llama.cpp analysis stopped at the time limit; its failure is cached
        output = _area(page, "Text the model generated")
        output.wait_for(timeout=60_000)
        before = output.input_value()
        text = f"typed while the page was running, attempt {attempt}"
        _fidelity(page, "improved")                      # a new analysis: the run stalls in the banner
        page.wait_for_function(RUNNING_JS, timeout=30_000)
        output.click()
        output.press("Control+A")
        page.keyboard.type(text)                         # in the browser only: no blur, nothing sent yet
        if page.evaluate(RUNNING_JS):                    # the whole text was typed while the run was under way
            typed_during_run.append(attempt)
        page.wait_for_function(IDLE_JS, timeout=60_000)  # the run has drawn the box and finished
        page.wait_for_timeout(300)
        assert output.input_value() == text, f"attempt {attempt}: the run replaced the typed text with {before!r}"
        _fidelity(page, "llama.cpp")
        _wait_idle(page)
        if typed_during_run:
            break
    assert typed_during_run, "no attempt typed its text while a run was under way"
    _shot(page, "typing-01-after-slow-run")
    page.close()


def test_text_typed_on_a_page_is_back_after_visiting_another(app_url, browser):  # noqa: F811 - fixtures
    # keep_inputs put the text back into the session on the page that did not draw its box; the run that drew
    # the box again sent the browser no value, so the box came back empty while the page parsed the kept text
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{app_url}/playground", wait_until="networkidle")
    page.get_by_role("heading", name="Playground").wait_for(timeout=60_000)
    _wait_idle(page)
    nav = page.locator('[data-testid="stSidebarNav"]')
    for label, text in (("Text the model generated", "typed on the Playground"),
                        ("tools (JSON list", '[{"type": "function", "function": {"name": "typed_tool"}}]')):
        box = _area(page, label)
        box.fill(text)
        box.press("Control+Enter")
        _wait_idle(page)
        nav.get_by_role("link", name="Overview", exact=True).click()
        page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
        _wait_idle(page)
        nav.get_by_role("link", name="Playground", exact=True).click()
        page.get_by_role("heading", name="Playground").wait_for(timeout=60_000)
        _wait_idle(page)
        assert _area(page, label).input_value() == text, label
    _shot(page, "typing-02-back-from-another-page")
    page.close()
