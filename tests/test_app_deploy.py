"""The app under the operator's serving policy (AppTest): no server-path input by default, demo caps with clear
messages, the Hub field never reads local files nor sends the operator's token in demo mode, and no network
answers quickly (the browser side is tests/test_browser_deploy.py)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from core import serving
from core.serving import WorkKind, work_slot

from .conftest import ROOT
from .test_app_helpers import errors, json_views, page, start, unmd
from .test_serving import no_network  # noqa: F401 - fixture

PAGES = ["overview", "sources", "comparisons", "overrides", "playground", "grammar", "corpus"]


@pytest.fixture
def demo(monkeypatch):
    """Demo mode without waiting for a busy slot (the test holds it and expects the message at once)."""
    monkeypatch.delenv("CTE_ALLOW_ROOTS", raising=False)
    monkeypatch.setenv("CTE_DEMO", "1")
    monkeypatch.setattr(serving, "DEMO_LIMITS", dataclasses.replace(serving.DEMO_LIMITS, wait_seconds=0.0))


def test_default_app_has_no_server_path_input(monkeypatch):
    monkeypatch.delenv("CTE_ALLOW_ROOTS", raising=False)
    at = start()
    for name in PAGES:
        at = page(at, name)
        labels = [t.label for t in at.text_input]
        assert not [x for x in labels if "folder" in x.lower() or "path" in x.lower()], (name, labels)
        for r in at.radio:
            assert "Local folder" not in r.options, name
    assert "bundled examples" in " ".join(unmd(c.value) for c in at.caption)  # the Corpus page: our own examples
    assert [b.label for b in at.button if b.label.startswith("Analyse")] == ["Analyse 6 templates"]


def _hub_fetch(at, repo: str):
    at.radio(key="in_source_kind").set_value("Hugging Face Hub").run()
    at.text_input(key="in_hub_repo").input(repo).run()
    [b for b in at.button if b.label == "Fetch"][0].click().run()
    assert not at.exception, at.exception
    return at


def test_hub_field_never_reads_a_server_file(monkeypatch, tmp_path):
    """``core/cli.py`` has the shape of a repo id and exists relative to the server's folder: not read."""
    assert (ROOT / "core" / "cli.py").is_file()
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    at = _hub_fetch(page(start(), "sources"), "core/cli.py")
    assert not at.success
    assert any("core/cli.py" in e and "offline mode is on" in e for e in errors(at)), errors(at)


def test_hub_offline_fails_at_once_with_one_message(no_network):  # noqa: F811
    at = _hub_fetch(page(start(), "sources"), "acme/never-downloaded")
    errs = errors(at)
    assert len(errs) == 1 and "the Hub cannot be reached" in errs[0], errs


def test_demo_hub_sends_no_token(demo, monkeypatch):
    import core.sources

    seen = {}

    def fake(spec, variant=None, **kw):
        seen.update(spec=spec, **kw)
        return core.sources.load_file(ROOT / "assets" / "templates" / "plain-chat.jinja")

    monkeypatch.setattr(core.sources, "load_hub_spec", fake)
    at = _hub_fetch(page(start(), "sources"), "visitor/repo")
    assert seen["spec"] == "visitor/repo" and seen["token"] is False
    assert seen["max_json_bytes"] == 8 * 1024 * 1024 and seen["max_bytes"] == 256 * 1024  # capped as uploads
    assert any("Public repositories only" in unmd(c.value) for c in at.caption)
    monkeypatch.setenv("CTE_DEMO", "0")
    _hub_fetch(page(start(), "sources"), "visitor/repo")
    assert seen["token"] is None  # local mode: huggingface_hub's usual token lookup


CAP = 256 * 1024


def test_demo_caps_pastes_and_text_boxes(demo, monkeypatch):
    # the browser takes up to 4x the cap (Streamlit's max_chars), so a too-long paste arrives and is refused with
    # a message instead of being cut or dropped silently
    at = page(start(), "sources")
    at.radio(key="in_source_kind").set_value("Paste text").run()
    assert at.text_area(key="in_paste_text").max_chars == 4 * CAP
    at = page(at, "playground")
    assert at.text_area(key="in_output").max_chars == 4 * CAP
    assert at.text_area(key="in_tools").max_chars == 4 * CAP
    at = page(at, "overrides")
    assert at.text_area(key="in_ov_import").max_chars == 4 * CAP
    monkeypatch.setenv("CTE_DEMO", "0")
    assert not page(start(), "playground").text_area(key="in_output").max_chars  # local mode: no cap (proto 0)


def test_demo_paste_over_the_cap_in_bytes_is_refused_and_kept(demo):
    at = page(start(), "sources")
    at.radio(key="in_source_kind").set_value("Paste text").run()
    text = "é" * (200 * 1024)  # 200 K characters, 400 KB of UTF-8
    at.text_area(key="in_paste_text").input(text).run()
    assert errors(at) == ["The template text is 409,600 bytes, over this server's 262,144-byte cap (limit: paste "
                          "size). It is kept in the box but not used; shorten it to go on."]
    assert [b for b in at.button if b.label == "Use this text"][0].disabled
    assert at.text_area(key="in_paste_text").value == text  # nothing the user typed is lost


def test_demo_playground_output_over_the_cap_is_refused_and_kept(demo):
    at = page(start(), "playground")
    text = "x" * (CAP + 1)
    at.text_area(key="in_output").input(text).run()
    assert "The model output is 262,145 characters, over this server's 262,144-character cap (limit: paste size). "\
           "It is kept in the box but not used; shorten it to go on." in errors(at)
    assert at.text_area(key="in_output").value == text
    assert not json_views(at)  # nothing parsed


def test_demo_over_cap_tools_are_refused_by_the_request(demo):
    at = page(start(), "grammar")  # the grammar page reads the Playground's tools through state.request_dict
    at.session_state["in_tools"] = "[" + " " * CAP + "]"
    at.run()
    assert any("invalid request field 'tools': is 262,146 characters, over this server's 262,144-character cap "
               "(limit: paste size)" in e for e in errors(at))


def test_demo_budget_error_names_no_operator_setting(demo):
    from explorer.state import for_visitor
    from core.jinja.limits import Budget

    msg = Budget(2.5, 0.0).message()
    assert "CTE_ANALYSIS_BUDGET_S" in msg
    assert for_visitor(msg) == ("analysis took longer than its budget of 2.5 s (limit: analysis budget; a limit "
                                "set by the server's operator)")


def test_local_budget_error_keeps_the_setting(monkeypatch):
    from explorer.state import for_visitor
    from core.jinja.limits import Budget

    monkeypatch.setenv("CTE_DEMO", "0")
    msg = Budget(5, 0.0).message()
    assert for_visitor(msg) == msg and "set CTE_ANALYSIS_BUDGET_S" in msg


def _hold(kind: WorkKind, limits, entered: threading.Event, release: threading.Event) -> threading.Thread:
    def run():
        with work_slot(kind, limits):
            entered.set()
            release.wait(30)

    t = threading.Thread(target=run)
    t.start()
    assert entered.wait(30)
    return t


def test_demo_bounds_concurrent_analyses_and_corpus_runs(demo):
    limits = serving.DEMO_LIMITS
    at = page(start(), "sources")
    release = threading.Event()
    holders = [_hold(WorkKind.ANALYSIS, limits, threading.Event(), release) for _ in range(limits.max_analyses)]
    holders.append(_hold(WorkKind.CORPUS, limits, threading.Event(), release))
    try:
        at.radio(key="in_source_kind").set_value("Paste text").run()
        at.text_area(key="in_paste_text").input("{{ messages[0].content }} busy-test-7c1").run()
        [b for b in at.button if b.label == "Use this text"][0].click().run()
        at = page(at, "overview")
        assert any("the server is busy: 2 analyses already running" in e for e in errors(at)), errors(at)
        at = page(at, "corpus")
        [b for b in at.button if b.label.startswith("Analyse")][0].click().run()
        assert any("the server is busy: 1 corpus run already running" in e for e in errors(at)), errors(at)
    finally:
        release.set()
        for t in holders:
            t.join(30)
    at = page(at, "overview")  # the slots are free again: the same template is analysed
    assert not errors(at)
