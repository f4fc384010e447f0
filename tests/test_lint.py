"""core.lint (issue 12): each finding kind on a real corpus template that shows it and on one that does not;
the round-trip failures tests/test_roundtrip.py names are reported by lint with the same cause; the CLI."""

from __future__ import annotations

import functools
import json

import pytest

from core.chat import roundtrip as RT
from core.lint import Kind, Severity, lint
from core.lint.model import LintReport, suppress, visible
from core.lint.shapes import Needs, shapes
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source
from .test_roundtrip import KNOWN_PARSER_FAILURES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

CLEAN = "gguf-ollama-llama3-8b.jinja"  # no finding of any kind (corpus run, 2026-12-01)


def _tmpl(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


@functools.lru_cache(maxsize=None)
def _lint(name: str) -> LintReport:
    return lint(_tmpl(name))


def _ids(name: str, kind: Kind) -> set[str]:
    return {f.id for f in _lint(name).findings if f.kind == kind}


def test_matrix_has_at_least_40_openai_shapes():
    s = shapes()
    assert len(s) >= 40 and len({x.id for x in s}) == len(s)
    needs = {x.needs for x in s}
    assert needs == set(Needs)
    roles = {m["role"] for x in s for m in x.messages}
    assert roles == {"system", "user", "assistant", "tool", "developer"}
    # content null, typed parts, string and object arguments, parallel calls all present
    msgs = [m for x in s for m in x.messages]
    assert any(m.get("content") is None for m in msgs)
    assert any(isinstance(m.get("content"), list) for m in msgs)
    args = [c["function"]["arguments"] for m in msgs for c in m.get("tool_calls") or []]
    assert any(isinstance(a, str) for a in args) and any(isinstance(a, dict) for a in args)
    assert any(len(m.get("tool_calls") or []) == 2 for m in msgs)


def test_clean_template_has_no_finding_of_any_kind():
    r = _lint(CLEAN)
    assert r.error is None and r.shapes >= 40
    assert r.findings == [] and set(r.by_kind().values()) == {0}


def test_render_matrix_error_names_the_message():
    # transformers passes tools=None when no tools are sent; this template takes len() of it
    r = _lint("vllm-tool_chat_template_functiongemma.jinja")
    f = r.get("render/user")
    assert f is not None and f.severity == Severity.ERROR
    assert "object of type 'NoneType' has no len()" in f.evidence["error"]
    assert "user" in r.shapes_raising
    assert "render/user" not in _ids(CLEAN, Kind.RENDER)


def test_render_matrix_severity_follows_caps():
    # Qwen2.5 takes string content only: typed parts raise, reported as info (llama.cpp joins them)
    r = _lint("Qwen-Qwen2.5-7B-Instruct.jinja")
    f = r.get("render/typed-user")
    assert f is not None and f.severity == Severity.INFO
    assert "can only concatenate str (not \"list\") to str" in f.evidence["error"]


@pytest.mark.parametrize("name", sorted(KNOWN_PARSER_FAILURES) + [
    "mistral-common-v3.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja", "vllm-tool_chat_template_hermes.jinja",
    "Qwen-QwQ-32B.jinja"])
def test_roundtrip_failures_of_test_roundtrip_are_reported_with_the_same_cause(name):
    expected = RT.round_trip(_tmpl(name), report=None, reduce=False)
    assert not expected.ok
    found = [f for f in _lint(name).findings
             if f.id.startswith("roundtrip/standard/") and f.id != "roundtrip/standard/drops-ids"]
    assert len(found) == 1, [f.id for f in _lint(name).findings]
    f = found[0]
    assert f.data["status"] == expected.status.value and f.data["why"] == expected.why
    if name in KNOWN_PARSER_FAILURES:
        assert f.id in ("roundtrip/standard/parser-mismatch", "roundtrip/standard/parser-error")
        assert f.severity == Severity.ERROR
    else:
        assert f.severity == Severity.WARNING


def test_roundtrip_causes_named():
    assert _lint("vllm-tool_chat_template_hermes.jinja").get("roundtrip/standard/drops-content") is not None
    assert _lint("mistral-common-v3.jinja").get("roundtrip/standard/raises") is not None
    assert "roundtrip/standard/drops-reasoning" in _ids("Qwen-QwQ-32B.jinja", Kind.ROUNDTRIP)
    # Qwen2.5 round-trips every part but does not render call ids (information only)
    assert _ids("Qwen-Qwen2.5-7B-Instruct.jinja", Kind.ROUNDTRIP) == {"roundtrip/standard/drops-ids",
                                                                    "roundtrip/single-call/drops-ids"}
    assert _lint("Qwen-Qwen2.5-7B-Instruct.jinja").get("roundtrip/standard/drops-ids").severity == Severity.INFO
    assert _ids("mistral-common-v7.jinja", Kind.ROUNDTRIP) == set()  # [TOOL_CALLS] … with call ids


def test_prefix_generation_prompt_named_separately():
    f = _lint("Qwen-QwQ-32B.jinja").get("prefix/generation-prompt")
    assert f is not None
    assert f.data["generation_prompt"] == "<|im_start|>assistant\n<think>\n"
    assert f.evidence["generation prompt"] == "<|im_start|>assistant↵<think>↵"
    assert _ids(CLEAN, Kind.PREFIX) == set() and _ids("Qwen-Qwen2.5-7B-Instruct.jinja", Kind.PREFIX) == set()
    assert _ids("Kimi-K3.jinja", Kind.PREFIX) == set()


def test_prefix_history_first_differing_position():
    # Mistral v3 moves the system message into the last user turn: the first turn changes once a turn is added
    f = _lint("mistral-common-v3.jinja").get("prefix/history")
    assert f is not None and f.data["position"] == 6
    assert f.evidence["before"].startswith("[INST]⟦You␣are␣a␣helpful␣assistant.")
    # Qwen3 drops reasoning from earlier turns: named apart, as information
    g = _lint("Qwen-Qwen3-0.6B.jinja").get("prefix/reasoning-dropped")
    assert g is not None and g.severity == Severity.INFO


def test_divergence_html_escaping_of_safe():
    f = _lint("mistral-common-v3.jinja").get("divergence/safe")
    assert f is not None and "&#34;name&#34;" in f.evidence["transformers"]
    assert '"name"' in f.evidence["llama.cpp"] and "call-object-args" in f.data["shapes"]
    assert _ids(CLEAN, Kind.DIVERGENCE) == set()


def test_probe_failure_with_safe_retry():
    f = _lint("Qwen-Qwen3-0.6B.jinja").get("probe/R3")
    assert f is not None and "'None' has no attribute 'lstrip'" in f.evidence["error"]
    assert f.data["recovered"] is True and f.data["fixes"] == ['content: null → ""']
    g = _lint("mistral-common-v3.jinja").get("probe/C1-reasoning")
    assert g is not None and g.data["recovered"] is False
    assert _ids("Qwen-Qwen2.5-7B-Instruct.jinja", Kind.PROBE) == set()


def test_marker_instructions_describe_a_format_never_rendered():
    # Granite 3.3 tells the model to answer with <|tool_call|> but renders past calls without it
    f = _lint("ibm-granite-granite-3.3-2B-Instruct.jinja").get("marker/instructions/tool_call")
    assert f is not None and "<|tool_call|>" in f.title
    # Qwen2.5 describes <tool_call> and renders it
    assert _ids("Qwen-Qwen2.5-7B-Instruct.jinja", Kind.MARKER) == set()


def test_marker_ordinary_text():
    f = _lint("fireworks-ai-llama-3-firefunction-v2.llamacpp-edit.jinja").get(
        "marker/ordinary-text/tools.format.section_start")
    assert f is not None
    assert _ids(CLEAN, Kind.MARKER) == set()


def test_generation_block_keeps_end_of_turn_inside():
    # phi4-reasoning closes {% generation %} after <|im_end|>: no finding; moving the marker out gives one
    name = "gguf-ollama-phi4-reasoning-14b.jinja"
    assert "marker/generation-block" not in _ids(name, Kind.MARKER)
    src = template_source(name)
    inside = "{{message['content'] + '<|im_end|>'}}{% endgeneration %}"
    assert inside in src
    moved = ChatTemplate(src.replace(inside, "{{message['content']}}{% endgeneration %}<|im_end|>"), "moved")
    f = lint(moved).get("marker/generation-block")
    assert f is not None and "<|im_end|>" in f.title


def test_time_dependent_output():
    f = _lint("hfjs-HuggingFaceTB-SmolLM3-3B.jinja").get("time/render")
    assert f is not None and "2026" in f.evidence["at 2026-11-30"] and "2024" in f.evidence["at 2024-02-29"]
    assert _ids("Qwen-Qwen2.5-7B-Instruct.jinja", Kind.TIME) == set()


def test_suppression_and_visible():
    r = _lint("Qwen-QwQ-32B.jinja")
    kept, dropped = suppress(r.findings, ["render/*", "prefix/generation-prompt"])
    assert dropped and all(i.startswith("render/") or i == "prefix/generation-prompt" for i in dropped)
    assert not any(f.id.startswith("render/") for f in kept)
    again = lint(_tmpl("Qwen-QwQ-32B.jinja"), suppressed=["render/*"])
    assert again.suppressed == sorted(again.suppressed, key=lambda i: i) or again.suppressed
    assert not any(f.id.startswith("render/") for f in again.findings)
    assert visible("a b\n\u202e\u200bx\r") == "a␣b↵\\u202e\\u200bx\\u000d"   # core.escapes: one escape
    assert LintReport.from_json(json.loads(json.dumps(r.to_json()))).ids() == r.ids()


def test_cli_lint(capsys, tmp_path):
    from core.cli import main

    path = str(TEMPLATES / "vllm-tool_chat_template_functiongemma.jinja")
    assert main(["lint", path, "--json"]) == 1  # error-severity findings
    out = json.loads(capsys.readouterr().out)
    assert "render/user" in {f["id"] for f in out["findings"]}
    assert main(["lint", path, "--suppress", "render/*", "--suppress", "roundtrip/*"]) == 0
    text = capsys.readouterr().out
    assert "render/user" not in text and "suppressed" in text
    assert main(["lint", str(TEMPLATES / CLEAN), "--fail-on", "info"]) == 0
    (tmp_path / "bad.jinja").write_text("{% if %}", encoding="utf-8")
    assert main(["lint", str(tmp_path / "bad.jinja")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bad.jinja" in err and "Traceback" not in err
    (tmp_path / "a.jinja").write_text(template_source(CLEAN), encoding="utf-8")
    (tmp_path / "b.jinja").write_text("{{ messages[0].content }}", encoding="utf-8")
    assert main(["lint", "--batch", str(tmp_path), "--workers", "0"]) == 0
    cap = capsys.readouterr()
    rows = [json.loads(x) for x in cap.out.splitlines()]
    assert [r["template"] for r in rows] == ["a.jinja", "b.jinja", "bad.jinja"] and rows[0]["findings"] == []
    assert rows[2]["error"].startswith("cannot load:")  # a batch never stops on a bad file
    assert "| render |" in cap.err


def test_error_location_line_and_column():
    from core.lint.locate import check_source

    t, loc = check_source("{% for m in messages %}\n{{ m.content }\n{% endfor %}")
    assert t is None and (loc.kind, loc.line, loc.column) == ("syntax", 2, 14)
    assert loc.excerpt.splitlines()[2] == "  |              ^"
    t, loc = check_source("{% for m in messages %}\n  {{ m.content.nope() }}\n{% endfor %}")
    assert t is not None and (loc.kind, loc.line, loc.column) == ("render", 2, 16)
    assert loc.headline().startswith("Render error at line 2, column 16: UndefinedError")
    assert check_source("{{ messages[0].content }}") [1] is None
