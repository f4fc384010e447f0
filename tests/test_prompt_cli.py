"""``python -m core parse | grammar | conform`` (core.chat.cli_commands) and the pipeline around them."""

from __future__ import annotations

import io
import json

import pytest

from core.chat import pipeline
from core.chat.request import ChatRequest
from core.cli import main

from .conftest import REFERENCE, TEMPLATES
from .test_handlers_golden import SPECIAL, bundle, template

QWEN = str(TEMPLATES / "Qwen3.5-4B.jinja")
HERMES = str(TEMPLATES / "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")
CALL = "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>"


@pytest.fixture
def request_file(tmp_path):
    path = tmp_path / "req.json"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}], "tools": [SPECIAL]}))
    return str(path)


def _run(argv, capsys, monkeypatch, stdin=""):
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_parse_prints_message(request_file, capsys, monkeypatch):
    code, out, _ = _run(["parse", QWEN, "--request", request_file], capsys, monkeypatch, "plan\n</think>\n\n" + CALL)
    assert code == 0
    msg = json.loads(out)
    assert msg["reasoning_content"] == "plan\n"      # Qwen's handler ends reasoning at "</think>"
    assert msg["tool_calls"][0]["function"] == {"name": "special_function", "arguments": '{"arg1":1}'}


def test_parse_stream_chunks(request_file, capsys, monkeypatch):
    code, out, _ = _run(["parse", QWEN, "--request", request_file, "--stream", "--chunk", "5"], capsys, monkeypatch,
                        "plan\n</think>\n\nHello there")
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and len(lines) > 3
    deltas, final = lines[:-1], lines[-1]
    assert "".join(d.get("content", "") for d in deltas) == "Hello there" == final["content"]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "plan\n"


def test_grammar_json(request_file, capsys, monkeypatch):
    code, out, _ = _run(["grammar", QWEN, "--request", request_file, "--json"], capsys, monkeypatch)
    data = json.loads(out)
    assert code == 0 and data["grammar_lazy"] is True and data["format"] == "qwen3-coder"
    assert data["grammar_triggers"] == [{"type": "word", "value": "<tool_call>"}]
    assert "root ::=" in data["grammar"]
    code, out, _ = _run(["grammar", HERMES, "--request", request_file], capsys, monkeypatch)
    assert code == 0 and "# lazy: true" in out and '# trigger word: "<tool_call>\\n"' in out


def test_conform_lines(tmp_path, capsys, monkeypatch):
    rows = [json.loads(line) for line in (REFERENCE / "cases.jsonl").read_text().splitlines()[:2]]
    rows.append(dict(rows[0], id="broken", template="no-such.jinja"))
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(r) for r in rows))
    code, out, _ = _run(["conform", str(cases), "--templates", str(TEMPLATES)], capsys, monkeypatch)
    lines = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and [x["id"] for x in lines] == ["ref-0000", "ref-0001", "broken"]
    assert lines[0]["message"]["content"] == "Hello, world!\nWhat's up?"
    assert all(isinstance(d, dict) for d in lines[0]["deltas"]) and len(lines[0]["deltas"]) > 5
    assert "no-such.jinja" in lines[2]["error"]


def test_errors_are_one_line(tmp_path, capsys, monkeypatch):
    code, _, err = _run(["parse", str(tmp_path / "missing.jinja")], capsys, monkeypatch)
    assert code == 2 and "missing.jinja" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, _, err = _run(["parse", QWEN, "--request", str(bad)], capsys, monkeypatch)
    assert code == 2 and "bad.json" in err and "not valid JSON" in err
    bad.write_text(json.dumps({"messages": [{"content": "no role"}]}))
    code, _, err = _run(["grammar", QWEN, "--request", str(bad)], capsys, monkeypatch)
    assert code == 2 and "messages[0]" in err


def test_pipeline_caches_analysis_per_source(monkeypatch):
    pipeline.clear_cache()
    calls = []
    real = pipeline.analyze   # the name the pipeline calls

    def counting(t, *a, **k):
        calls.append(t.name)
        return real(t, *a, **k)

    monkeypatch.setattr(pipeline, "analyze", counting)
    t = template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")
    for msg in ("a", "b", "c"):
        b = pipeline.build_chat_parser(t, ChatRequest.from_dict({"messages": [{"role": "user", "content": msg}]}))
        assert b.route.kind == "autoparser" and b.report is not None
    assert len(calls) == 1


def test_force_autoparser_and_report_reuse():
    b = bundle("GigaChat3-10B-A1.8B.jinja", tools=[SPECIAL])
    assert b.format == "gigachat-v3"
    g = pipeline.build_chat_parser(template("GigaChat3-10B-A1.8B.jinja"),
                                   ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}],
                                                          "tools": [SPECIAL]}), force_autoparser=True)
    assert g.route.kind == "autoparser" and g.format == "peg-native" and g.report is not None
    text = '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "special_function", "arguments": {"arg1": 1}}'
    assert g.parser.parse(text).tool_calls[0].name == b.parser.parse(text).tool_calls[0].name == "special_function"
    again = pipeline.build_chat_parser(template("Qwen3.5-4B.jinja"), ChatRequest.from_dict(
        {"messages": [{"role": "user", "content": "x"}]}), report=g.report, force_autoparser=True)
    assert again.report is g.report     # a given report is used as is (the explorer passes its overrides')


def test_tool_use_variant_chosen_for_tool_requests(tmp_path, request_file, capsys, monkeypatch):
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"chat_template": [
        {"name": "default", "template": "{% for m in messages %}{{ m.content }}{% endfor %}DEFAULT"},
        {"name": "tool_use", "template": "{% for m in messages %}{{ m.content }}{% endfor %}TOOLS"
                                         "{% if add_generation_prompt %}<gen>{% endif %}"}]}))
    code, out, _ = _run(["grammar", str(cfg), "--request", request_file, "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["generation_prompt"] == "<gen>"
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}]}))
    code, out, _ = _run(["grammar", str(cfg), "--request", str(plain), "--json"], capsys, monkeypatch)
    assert code == 0 and json.loads(out)["generation_prompt"] == ""
