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


def test_background_jobs_are_bounded_and_a_failure_is_not_kept():
    import threading

    gate = threading.Event()
    keys = [("test-bound", i, time.time_ns()) for i in range(state.MAX_JOBS + 1)]
    try:
        started = [state.start_job(k, gate.wait) for k in keys]
        # past MAX_JOBS running jobs, a page computes in its run: a visitor cannot queue work without end
        assert started == [True] * state.MAX_JOBS + [False]
        assert state.start_job(keys[0], gate.wait)          # the same key joins the running job
    finally:
        gate.set()
    for k in keys[:-1]:
        state.take_job(k).result(timeout=10)

    def boom() -> None:
        raise RuntimeError("worker killed")

    key = ("test-fail", time.time_ns())
    assert state.later(key, boom) == (False, None)
    deadline = time.monotonic() + 10
    while state.job_running(key):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    try:
        state.later(key, boom)
        raise AssertionError("the failure was not raised")
    except RuntimeError as e:
        assert str(e) == "worker killed"
    assert state.later(key, lambda: 42) == (False, None)   # not kept: asked again, the work starts again
    while state.job_running(key):
        time.sleep(0.05)
    assert state.later(key, lambda: 0) == (True, 42)        # the answer is kept once in


def test_a_fragments_main_module_gets_a_spec():
    # Streamlit installs a fresh spec-less __main__ for every run, a fragment's too (the placeholder's poll, the
    # replay); a worker started meanwhile re-ran the script file in bare mode (console noise, failed bootstrap)
    import sys
    import types

    saved = sys.modules["__main__"]
    bare = types.ModuleType("__main__")
    assert bare.__spec__ is None
    sys.modules["__main__"] = bare
    try:
        state.main_has_spec()
        assert bare.__spec__ is not None and bare.__spec__.name == "__main__"
    finally:
        sys.modules["__main__"] = saved
