"""Real-browser test (issue 24): a template whose bomb fires only on a given request cannot stop the server.

The template renders like ChatML until ``messages[0].content`` is ``"detonate"``; then it compares two
separately built binary trees of lists 64 levels deep with ``==`` — 2^64 comparisons inside CPython's C code,
where no sandbox hook and no Python time check runs. The analysis never sends that message, so the template
loads and analyses; the visitor's own request reaches it on the Playground (the prompt render behind the
parser) and on Explain. Before issue 24 those renders ran in the Streamlit process: the server sat at 100 % CPU
holding the interpreter lock, and health checks and every other visitor timed out.

Server: demo mode (``CTE_DEMO=1``), ``CTE_ISOLATED_TIMEOUT_S=15``. Visitor A detonates through the Playground,
then through Explain; each time, while A's run is still under way (Streamlit's run state, not a stopwatch),
visitor B (a second browser context: its own session) reloads its Overview, which must show its metrics, and
``/_stcore/health`` must answer ``ok``; then A's page shows one line naming the limit. "B answered while A's
run was still under way" is the proof (a server held by A's render answers nobody until it is free). The
seconds B's reload took at rest (before A's request) and during A's runaway, and the health check's, are
written to ``tests/artifacts/isolation-timings.json``; the acceptance figure is 2 s, asserted with a wide
margin (:data:`RESPONSE_BOUND_S`) because the shared 2-core machine runs many other jobs.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

from bench import bomb_reload
from bench.browser import IDLE_JS

from .test_browser import (ARTIFACTS, _shot, _wait_idle, paste_template,  # noqa: F401
                           streamlit_server, wait_for_metrics)

pytestmark = pytest.mark.browser

TRIPWIRE = bomb_reload.TRIPWIRE  # ChatML until the first message is "detonate", then `==` on deep lists
TIMEOUT_S = 15
RUNNING_JS = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
              " return !!a && a.getAttribute('data-test-script-state') === 'running'; }")
#: the acceptance figure is 2 s; asserted with room for a loaded machine (the measured figures are written out)
RESPONSE_BOUND_S = 12.0


def _health(url: str) -> tuple[bytes, float]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=10) as r:
        return r.read().strip(), time.perf_counter() - t0


def _reload_overview(b) -> float:
    """Reload B's Overview; seconds until its metrics show."""
    t0 = time.perf_counter()
    b.reload()
    b.get_by_role("heading", name="Overview").wait_for(timeout=30_000)
    shown = wait_for_metrics(b, "TAG_BASED", timeout=30_000)
    page_s = time.perf_counter() - t0
    assert "TAG_BASED" in shown, shown
    return page_s


def _second_visitor_answers(b, url: str, a, timings: dict, label: str) -> None:
    """While A's run is under way: B's Overview reloads with its metrics and the health check answers."""
    assert a.evaluate(RUNNING_JS), f"{label}: A's run ended before B asked"
    page_s = _reload_overview(b)
    status, health_s = _health(url)
    assert status == b"ok"
    assert a.evaluate(RUNNING_JS), f"{label}: A's run ended before B's page answered: nothing was concurrent"
    timings[label] = {"second_visitor_page_s": round(page_s, 3), "health_s": round(health_s, 3)}
    assert page_s <= RESPONSE_BOUND_S and health_s <= RESPONSE_BOUND_S, timings


def _limit_line(a, what: str) -> str:
    alert = a.locator('[data-testid="stAlert"]').filter(has_text=f"limit: isolated {what} time")
    alert.first.wait_for(timeout=(TIMEOUT_S + 30) * 1000)
    a.wait_for_function(IDLE_JS, timeout=30_000)
    return alert.first.inner_text().strip()


def test_request_triggered_bomb_leaves_the_server_responsive(browser):  # noqa: F811 - the browser fixture
    env = dict(os.environ, HF_HUB_OFFLINE="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", CTE_DEMO="1",
               CTE_ISOLATED_TIMEOUT_S=str(TIMEOUT_S))
    env.pop("CTE_ALLOW_ROOTS", None)
    timings: dict = {}
    with streamlit_server(env=env, log_name="streamlit-isolation.log") as url:
        ctx_a = browser.new_context(viewport={"width": 1400, "height": 1000})
        ctx_b = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            # B first opens its Overview (the default example, analysed once: what it reloads later is cached)
            b = ctx_b.new_page()
            b.goto(f"{url}/overview", wait_until="networkidle")   # the root is the front page
            b.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
            b.locator('[data-testid="stMetric"]').first.wait_for(timeout=60_000)
            _wait_idle(b)
            timings["at_rest"] = {"second_visitor_page_s": round(_reload_overview(b), 3),
                                  "health_s": round(_health(url)[1], 3)}
            _wait_idle(b)

            # A pastes the tripwire template: it loads and analyses (the analysis never sends "detonate")
            a = ctx_a.new_page()
            a.goto(f"{url}/sources", wait_until="networkidle")
            a.get_by_role("heading", name="Sources").wait_for(timeout=30_000)
            _wait_idle(a)
            paste_template(a, "tripwire.jinja", TRIPWIRE)
            a.get_by_text("Loaded tripwire.jinja", exact=False).first.wait_for(timeout=30_000)
            _wait_idle(a)

            # --- Playground: A's request reaches the bomb in the prompt render behind the parser
            a.locator('[data-testid="stSidebarNav"] a').filter(has_text="Playground").click()
            a.get_by_role("heading", name="Playground").wait_for(timeout=30_000)
            _wait_idle(a)
            a.get_by_text("messages (JSON)").first.click()
            area = a.locator('[data-testid="stExpander"]').filter(has_text="messages (JSON)").locator("textarea")
            area.fill(json.dumps([{"role": "user", "content": "detonate"}]))
            area.press("Control+Enter")
            a.wait_for_function(RUNNING_JS, timeout=30_000)
            _second_visitor_answers(b, url, a, timings, "playground")
            text = _limit_line(a, "render")
            assert "\n" not in text, text
            assert text == ("template 'tripwire.jinja' stopped: the render was stopped after "
                            f"{TIMEOUT_S} s (limit: isolated render time; set CTE_ISOLATED_TIMEOUT_S)"), text
            _shot(a, "isolation-01-playground-stopped")

            # --- Explain: the same request, through explain() (its prompt render), in a fresh worker
            a.locator('[data-testid="stSidebarNav"] a').filter(has_text="Explain").click()
            a.get_by_role("heading", name="Explain").wait_for(timeout=30_000)
            a.wait_for_function(RUNNING_JS, timeout=30_000)
            _second_visitor_answers(b, url, a, timings, "explain")
            text = _limit_line(a, "explanation")
            assert "\n" not in text, text
            assert text == ("template 'tripwire.jinja' stopped: the explanation was stopped after "
                            f"{TIMEOUT_S} s (limit: isolated explanation time; set CTE_ISOLATED_TIMEOUT_S)"), text
            _shot(a, "isolation-02-explain-stopped")

            # the failure was not cached as the template's verdict: an ordinary request renders again
            a.locator('[data-testid="stSidebarNav"] a').filter(has_text="Playground").click()
            a.get_by_role("heading", name="Playground").wait_for(timeout=30_000)
            _wait_idle(a)
            status, _ = _health(url)
            assert status == b"ok"
        finally:
            (ARTIFACTS / "isolation-timings.json").write_text(json.dumps(timings, indent=2) + "\n")
            ctx_a.close()
            ctx_b.close()
