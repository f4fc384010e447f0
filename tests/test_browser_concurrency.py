"""Real-browser test (issue 16): one visitor's runaway template does not stall the others.

Session A pastes a template whose every render loops until a limit stops it (nested ``range(100000)``) and
opens the Overview, which starts its analysis; while A is still analysing, session B (a second browser
context: its own Streamlit session) opens the app and its Overview of the default bundled example renders —
its analysis is computed then, in its own worker, beside A's. Then A ends with a one-line error naming the
limit, and the server still answers ``/_stcore/health``.

The server runs with ``CTE_ANALYSIS_BUDGET_S=0`` (no in-process analysis budget) so that A runs until the
worker backstop kills it (``CTE_ISOLATED_TIMEOUT_S``): the case this test is about is the runaway the
in-process limits do not stop. "B done while A still runs" is checked on A's page state (Streamlit's run
state, no error and no metrics yet on its Overview), not with a stopwatch.
"""

from __future__ import annotations

import os
import urllib.request

import pytest

from bench.browser import CHROME_ARGS, IDLE_JS

from .test_browser import (ARTIFACTS, _shot, _wait_idle, paste_template,  # noqa: F401
                           streamlit_server, wait_for_metrics)

pytestmark = pytest.mark.browser

# every render of every probe loops 10^10 times; each render is cut by the 2 s render-time limit, and with no
# analysis budget the analysis goes on probe after probe until the worker is killed
RUNAWAY = ("{%- for i in range(100000) -%}{%- for j in range(100000) -%}{{ '' }}{%- endfor -%}{%- endfor -%}"
           "{{ messages[0].content }}")
ISOLATED_TIMEOUT_S = 15
RUNNING_JS = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
              " return !!a && a.getAttribute('data-test-script-state') === 'running'; }")


def _health(url: str) -> bytes:
    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as r:
        return r.read().strip()


def test_runaway_in_one_session_leaves_another_responsive(browser):  # noqa: F811 - the browser fixture
    env = dict(os.environ, HF_HUB_OFFLINE="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
               CTE_ANALYSIS_BUDGET_S="0", CTE_ISOLATED_TIMEOUT_S=str(ISOLATED_TIMEOUT_S))
    env.pop("CTE_DEMO", None)
    with streamlit_server(env=env, log_name="streamlit-concurrency.log") as url:
        ctx_a = browser.new_context(viewport={"width": 1400, "height": 1000})
        ctx_b = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            # --- session A: paste the runaway on the Sources page (no analysis has run on this server yet)
            a = ctx_a.new_page()
            a.goto(f"{url}/sources", wait_until="networkidle")
            a.get_by_role("heading", name="Sources").wait_for(timeout=30_000)
            _wait_idle(a)
            paste_template(a, "runaway.jinja", RUNAWAY)
            a.get_by_text("Loaded runaway.jinja", exact=False).first.wait_for(timeout=30_000)
            _wait_idle(a)
            # open the Overview: the analysis starts and A's script run stays "running" until the worker stops
            a.locator('[data-testid="stSidebarNav"] a').filter(has_text="Overview").click()
            a.get_by_role("heading", name="Overview").wait_for(timeout=10_000)
            a.get_by_text("runaway.jinja · string", exact=False).first.wait_for(timeout=10_000)
            a.wait_for_function(RUNNING_JS, timeout=10_000)
            _shot(a, "50-concurrency-a-analysing")

            # --- session B, while A analyses: the default bundled example's Overview renders with its metrics
            b = ctx_b.new_page()
            b.goto(f"{url}/overview")
            b.get_by_role("heading", name="Overview").wait_for(timeout=8_000)
            shown = wait_for_metrics(b, "TAG_BASED", "JSON_NATIVE", timeout=8_000)
            assert "TAG_BASED" in shown and "JSON_NATIVE" in shown, shown
            _shot(b, "51-concurrency-b-overview")
            # …and A has not finished: its run is still under way, no error and no metrics yet
            assert a.evaluate(RUNNING_JS), "session A finished before B rendered: nothing was concurrent"
            assert a.locator('[data-testid="stAlert"]').filter(has_text="limit:").count() == 0
            assert a.locator('[data-testid="stMetric"]').count() == 0

            # --- A ends with one line naming the limit (the worker was killed at CTE_ISOLATED_TIMEOUT_S)
            alert = a.locator('[data-testid="stAlert"]').filter(has_text="limit: isolated analysis time")
            alert.first.wait_for(timeout=(ISOLATED_TIMEOUT_S + 10) * 1000)
            a.wait_for_function(IDLE_JS, timeout=10_000)
            text = alert.first.inner_text().strip()
            assert "\n" not in text, text
            assert text == ("cannot analyse template 'runaway.jinja': the analysis was stopped after "
                            f"{ISOLATED_TIMEOUT_S} s (limit: isolated analysis time; set CTE_ISOLATED_TIMEOUT_S)"), text
            assert a.locator('[data-testid="stMetric"]').count() == 0
            _shot(a, "52-concurrency-a-stopped")
            assert _health(url) == b"ok"
        finally:
            ctx_a.close()
            ctx_b.close()
