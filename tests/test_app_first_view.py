"""A session's first view of Overview paints before the analysis: on a template this process has not analysed
(a deep link on a fresh server), the first run shows the title and a placeholder and ends, the analysis runs on a
background thread, and the page's rerun shows the analysis — the same one a synchronous run computes."""

from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from explorer import state

from .test_app_helpers import APP, TIMEOUT, errors, metrics, page, start


def _bundled_with_comment(note: str) -> state.CurrentTemplate:
    # a bundled example with a Jinja comment appended: the same format, a source no other test analysed
    base = state.load_bundled("chatml-think-tools.jinja")
    source = base.source + "{# " + note + " #}"
    return state.CurrentTemplate(base.name, source, {"default": source}, origin="bundled")


def _placeholder(at: AppTest) -> bool:
    return any("Analysing the template" in i.value for i in at.info)


def test_first_view_paints_a_placeholder_then_the_analysis():
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.session_state["template"] = _bundled_with_comment(f"first view {time.time_ns()}")
    at.switch_page("explorer/pages/overview.py").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["Overview"]
    assert _placeholder(at) and not metrics(at)        # painted before the analysis, which is not in this run
    tpl = at.session_state["template"]
    deadline = time.monotonic() + TIMEOUT
    while state.analysis_pending(tpl):                   # the background analysis (this thread is not a session)
        assert time.monotonic() < deadline
        time.sleep(0.1)
    at.run()                                             # what the placeholder's fragment does: rerun the page
    assert not at.exception and not errors(at), errors(at)
    assert not _placeholder(at)
    assert metrics(at) == {"Reasoning": "TAG_BASED", "Content": "PLAIN", "Tool calls": "JSON_NATIVE"}


def test_later_views_and_analysed_templates_compute_in_the_run():
    at = start()                                          # the session's first run is the front page
    at.session_state["template"] = _bundled_with_comment(f"later view {time.time_ns()}")
    page(at, "overview")
    assert not _placeholder(at)
    assert metrics(at)["Tool calls"] == "JSON_NATIVE"
    # a second visitor's first view of a template already analysed here is drawn at once
    again = AppTest.from_file(APP, default_timeout=TIMEOUT)
    again.session_state["template"] = at.session_state["template"]
    again.switch_page("explorer/pages/overview.py").run()
    assert not again.exception, again.exception
    assert not _placeholder(again) and metrics(again)["Reasoning"] == "TAG_BASED"
