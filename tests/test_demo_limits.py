"""Issue 24 point 5 and the missing limits: a link's state read with bounded decompression and depth-guarded
JSON, the edit store bounded and expiring, one analysis slot per visitor in demo mode, server paths kept out of
what a demo visitor is shown, ``lint`` / ``compare`` / ``explain`` under the analysis budget, and explain's
work linear in the output (counted, not timed: the times are in bench/explain_hostile.py)."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import tracemalloc
import zlib

import pytest

from core.errors import AnalysisError
from core.serving import (DEMO_LIMITS, BusyError, Limits, VisitorBusyError, WorkKind, redact_paths, set_visitor,
                          work_slot)
from core.jinja.limits import RenderLimits
from core.jinja.template import ChatTemplate

LOOP_BOMB = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"


def _x(raw: bytes) -> str:
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii").rstrip("=")


# ------------------------------------------------------------------------------------------------ URL state


def test_zip_bomb_link_is_refused_before_it_is_inflated():
    from explorer.urlstate import EXPLAIN_MAX_PARAM_CHARS, LinkStateError, read_explain

    value = _x(b'{"r":{},"o":"' + b"a" * 12_000_000 + b'"}')
    assert len(value) <= EXPLAIN_MAX_PARAM_CHARS   # short enough to be a link: only the inflating cap stops it
    tracemalloc.start()
    try:
        with pytest.raises(LinkStateError, match=r"decompresses to more than 1 MB \(limit: link size\)"):
            read_explain(value)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20   # the 12 MB were never allocated


@pytest.mark.parametrize("value, reason", [
    ("A" * 20_000, "over the 16,000 this app writes"),
    ("!!!!", "not base64url"),
    (_x(b"[" * 5000), "nests deeper than 64 levels"),
    (_x(b'{"r": [], "o": 1}'), "does not hold a request and an output"),
    (_x(b"\xff\xfe"), "UTF-8"),
    (_x(b'{"r":{},"o":"abc"}')[:-4], "cannot be read"),
])
def test_damaged_links_get_one_line_naming_why(value, reason):
    from explorer.urlstate import LinkStateError, decode_explain, read_explain

    with pytest.raises(LinkStateError) as e:
        read_explain(value)
    assert reason in str(e.value) and "\n" not in str(e.value)
    assert decode_explain(value) is None


def test_link_round_trip_and_json_depth_skips_strings():
    from explorer.urlstate import encode_explain, json_depth, load_link_json, read_explain

    req = {"messages": [{"role": "user", "content": "[[[[ {{ \"\\\\ ]]"}]}
    assert read_explain(encode_explain(req, "[" * 10_000)) == (req, "[" * 10_000)
    assert json_depth('["\\"[[", [[]]]', 64) == 3
    assert json_depth('["\\\\", [[]]]', 64) == 3
    assert load_link_json('{"a": "' + "[" * 9000 + '"}', "ov", 16384) == {"a": "[" * 9000}


# ------------------------------------------------------------------------------------------------ edit store


def test_edit_store_is_bounded_and_expires(tmp_path, monkeypatch):
    from explorer import urlstate

    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(urlstate, "EDIT_STORE_MAX_FILES", 3)
    digests = []
    for i in range(5):
        digests.append(urlstate.save_text(f"{{{{ {i} }}}}"))
        os.utime(urlstate.store_dir() / f"{digests[-1]}.jinja", (1_000_000 + i, 2_000_000_000 + i))
    kept = sorted(p.stem for p in urlstate.store_dir().glob("*.jinja"))
    assert kept == sorted(digests[2:])   # the least recently used went first
    assert urlstate.load_text(digests[4]) == "{{ 4 }}" and urlstate.load_text(digests[0]) is None
    old = urlstate.store_dir() / f"{digests[2]}.jinja"
    os.utime(old, (0, time.time() - urlstate.EDIT_TTL_S - 60))
    assert urlstate.load_text(digests[2]) is None     # expired: not served
    urlstate.save_text("{{ new }}")
    assert not old.exists()                           # and pruned at the next write
    monkeypatch.setattr(urlstate, "EDIT_MAX_BYTES", 100)
    big = urlstate.save_text("x" * 101)
    assert not (urlstate.store_dir() / f"{big}.jinja").exists()


# ------------------------------------------------------------------------------------------------ work slots


def test_one_visitor_holds_one_analysis_slot_and_leaves_the_other():
    limits = Limits(max_analyses=2, wait_seconds=0.2)
    entered = threading.Event()
    release = threading.Event()
    outcome: list[str] = []

    def other_visitor() -> None:
        set_visitor("visitor-b")
        try:
            with work_slot(WorkKind.ANALYSIS, limits):
                entered.set()
                release.wait(5)
            outcome.append("b ran")
        finally:
            set_visitor(None)

    set_visitor("visitor-a")
    try:
        with work_slot(WorkKind.ANALYSIS, limits):
            with pytest.raises(VisitorBusyError, match="you already have 1 analysis running"):
                with work_slot(WorkKind.ANALYSIS, limits):
                    pass
            t = threading.Thread(target=other_visitor)
            t.start()
            assert entered.wait(5)         # the second slot went to the other visitor
            release.set()
            t.join(5)
        with work_slot(WorkKind.ANALYSIS, limits):   # released: visitor a may start another
            pass
    finally:
        set_visitor(None)
    assert outcome == ["b ran"]
    assert issubclass(VisitorBusyError, BusyError) and DEMO_LIMITS.max_analyses == 2


# ------------------------------------------------------------------------------------------------ visitor text


@pytest.mark.parametrize("text, shown", [
    ("cannot read /home/op/.cache/huggingface/hub/models--a--b/snapshots/1/tokenizer_config.json: gated",
     "cannot read <server path>: gated"),
    ("see https://huggingface.co/org/model/blob/main/x.json", "see https://huggingface.co/org/model/blob/main/x.json"),
    ("repo org/model at 1/2", "repo org/model at 1/2"),
    ("~/.cache/x/y failed", "<server path> failed"),
    ('File "/srv/app/core/x.py", line 3', 'File "<server path>", line 3'),
    # re-attack of issue 24: each of these showed the operator's path (or its tail) before
    ("cannot read '/home/op user/.cache/hf/x.json'", "cannot read '<server path>'"),
    ("open file:///home/op/.cache/x.json", "open <server path>"),
    ("x.jinja:/home/op/models/x.jinja", "x.jinja:<server path>"),
    ("share \\\\fileserver\\op\\models failed", "share <server path> failed"),
    ("see https://host:8080/a/b and hf://org/name/x", "see https://host:8080/a/b and hf://org/name/x"),
])
def test_server_paths_are_redacted_for_visitors(text, shown):
    assert redact_paths(text) == shown


def test_demo_errors_never_name_server_paths(monkeypatch):
    from explorer.state import for_visitor

    msg = "cannot load chat template from 'org/m': /root/.cache/huggingface/hub/x/y.json is not readable"
    monkeypatch.setenv("CTE_DEMO", "1")
    assert "/root" not in for_visitor(msg) and "<server path>" in for_visitor(msg)
    monkeypatch.delenv("CTE_DEMO")
    assert for_visitor(msg) == msg   # locally the user is the operator


# ------------------------------------------------------------------------------------------------ budgets


def test_lint_compare_and_explain_run_under_the_analysis_budget():
    from core.chat.request import ChatRequest
    from core.compare import compare_templates
    from core.explain.explain import explain
    from core.lint import lint

    limits = RenderLimits(timeout_s=0.3)
    bomb = "{% if messages|length > 0 %}" + LOOP_BOMB + "{% endif %}{{ messages[0].content }}"
    with pytest.raises(AnalysisError, match=r"lint took longer than its budget of 1 s \(limit: analysis budget"):
        lint(ChatTemplate(bomb, "bomb.jinja", limits=limits), budget_s=1)
    with pytest.raises(AnalysisError, match=r"took longer than its budget of 2 s \(limit: analysis budget"):
        compare_templates(ChatTemplate(bomb, "bomb.jinja", limits=limits), ChatTemplate("{{ 1 }}", "one.jinja"),
                          budget_s=1)
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(Exception, match="limit: "):
        explain(ChatTemplate(bomb, "bomb.jinja", limits=limits), req, "hello")


def test_explain_work_is_linear_in_the_output(monkeypatch):
    """Characters parsed by the PEG engine (plain and traced parses) in one explain of 7,000 tool calls, counted:
    2 x the output (the traced parse, which also makes the message, and one re-parse at the other fidelity). It
    was 3 x while the message's parse and the traced parse were two runs of the same text, 6 x before one parse
    served both the message and the trace and the other fidelity's re-parse dropped the trace (46 parses of the
    output for Llama 3.1's 256 KB of calls)."""
    from core.chat.request import ChatRequest
    from core.explain import explain as explain_mod
    from core.explain import trace_routes
    from core.peg import builder

    root = explain_mod.__file__.rsplit("/core/", 1)[0]
    template = ChatTemplate(open(f"{root}/assets/templates/mistral-tool-calls.jinja", encoding="utf-8").read(),
                            "mistral-tool-calls.jinja")
    tools = json.load(open(f"{root}/assets/samples/tools.json", encoding="utf-8"))
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": tools,
                                 "parallel_tool_calls": True})
    output = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}' * 7000
    explain_mod.explain(template, req, output[:2000])   # analyses and parsers built before counting
    parsed = [0]
    real_traced, real_parse = trace_routes.traced_parse, builder.Arena.parse

    def counted_traced(arena, text, **kw):
        parsed[0] += len(text)
        return real_traced(arena, text, **kw)

    def counted_parse(self, text, **kw):
        parsed[0] += len(text) - kw.get("start", 0)
        return real_parse(self, text, **kw)

    monkeypatch.setattr(trace_routes, "traced_parse", counted_traced)
    monkeypatch.setattr(builder.Arena, "parse", counted_parse)
    ex = explain_mod.explain(template, req, output)
    assert len(ex.message["tool_calls"]) == 7000 and not ex.findings
    assert parsed[0] <= 2.1 * len(output), parsed[0] / len(output)


# ------------------------------------------------------------------------------------------------ the app


def test_demo_edit_box_is_capped_and_nothing_over_it_is_stored(tmp_path, monkeypatch):
    from .test_app_helpers import errors, page, start

    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CTE_ALLOW_ROOTS", raising=False)
    monkeypatch.setenv("CTE_DEMO", "1")
    at = page(start(), "edit")
    big = "{# " + "x" * (DEMO_LIMITS.max_paste_bytes + 10) + " #}"
    at.text_area(key="in_edit_source").input(big).run()
    assert any("over this server's 262,144-byte cap (limit: paste size)" in e for e in errors(at)), errors(at)
    assert [b.disabled for b in at.button if b.label == "Analyse"] == [True]
    assert "draft" not in at.query_params
    stored = list((tmp_path / "edits").glob("*.jinja")) if (tmp_path / "edits").exists() else []
    assert all(p.stat().st_size < DEMO_LIMITS.max_paste_bytes for p in stored)
    assert at.session_state["template"].origin == "bundled"


def test_zip_bomb_link_on_the_explain_page_is_one_line_on_the_page(tmp_path, monkeypatch):
    from .test_app_edit import start_with
    from .test_app_helpers import errors

    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path))
    at = start_with({"x": _x(b'{"r":{},"o":"' + b"a" * 12_000_000 + b'"}')})
    at.switch_page("explorer/pages/explain.py").run()   # the page that reads the link says so at once
    assert not at.exception, at.exception
    shown = [e for e in errors(at) if "x=" in e]
    assert shown and "decompresses to more than 1 MB (limit: link size)" in shown[0], errors(at)
    assert len(shown[0].splitlines()) == 1
