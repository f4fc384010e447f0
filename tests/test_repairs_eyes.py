"""Fresh-eyes findings on issue 10 (repairs), each with the reproducer it came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}}
REQUEST = {"messages": [{"role": "user", "content": "weather?"}], "tools": [WEATHER], "parallel_tool_calls": True}


def _parser(template: str, fidelity: str = "llama.cpp"):
    tmpl = ChatTemplate((TEMPLATES / template).read_text(encoding="utf-8"), template)
    return build_chat_parser(tmpl, ChatRequest.from_dict(REQUEST), fidelity=fidelity).parser


def test_cli_stream_prints_the_settled_message(tmp_path):
    """`parse --stream` on an output cut inside a call: the last line (the message) used to be the raw
    accumulation of the deltas, with the cut call's arguments '{"city":"Par' — a final message with arguments
    that are not a JSON object. It is now the message a client keeps (core.chat.repairs.settled): the call
    dropped (its text in content) and reported as truncated-call, as the one-shot parse says. With --partial the call
    stays."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps(REQUEST), encoding="utf-8")
    out = "Hi\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"
    base = [sys.executable, "-m", "core", "parse", str(TEMPLATES / "Qwen3-Coder.jinja"), "--request", str(req)]

    def last(*extra):
        proc = subprocess.run(base + list(extra), input=out.encode(), capture_output=True, cwd=ROOT, check=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
        return json.loads(proc.stdout.decode().splitlines()[-1])

    one = last("--compact")
    streamed = last("--stream", "--chunk", "7")
    assert "tool_calls" not in streamed and streamed["content"] == out   # the cut call's text is content
    assert [r["name"] for r in streamed["repairs"]] == ["truncated-call"]
    assert streamed == json.loads(json.dumps(one))
    kept = last("--stream", "--chunk", "7", "--partial")
    assert [c["function"]["arguments"] for c in kept["tool_calls"]] == ['{"city":"Par']


@pytest.mark.parametrize("template, output, start", [
    # Llama 4 (unmarked-calls): the call object starts the output
    ("gguf-ollama-llama4-latest.jinja", '{"name": "get_weather", "parameters": {"city": "Pa', 0),
    # Qwen2.5 (unmarked-calls): a complete call, then the cut one
    ("Qwen-Qwen2.5-7B-Instruct.jinja",
     '{"name": "get_weather", "arguments": {"city": "Paris"}}\n{"name": "get_weather", "arguments": {"city": "Ro', 56),
    # Qwen2.5 (fenced-calls): the object after the fence
    ("Qwen-Qwen2.5-7B-Instruct.jinja", '```json\n{"name": "get_weather", "arguments": {"city": "Pa', 8),
])
def test_truncated_unmarked_call_span_starts_at_its_object(template, output, start):
    """A JSON call cut off without the template's markers: the truncated-call span used to start at the
    tool's name (10: 'get_weather", "parameters": …'), so the reported raw text was not the call's. It starts
    at the call's '{' now."""
    msg = _parser(template, "improved").parse(output)
    (cut,) = [r for r in msg.repairs if r.name == "truncated-call"]
    assert (cut.start, cut.end, cut.detail) == (start, len(output), "get_weather")
    assert cut.text == output[start:] and cut.text.startswith('{"name"')


def test_stream_consistent_final_example_fires_it():
    """The rule's documented example used to be a Qwen3-Coder call with an integer parameter given
    "2026-01-15": that output is settled by truncated-call (the call dropped), never by stream-consistent-final
    (the stream stops inside the value, so what it showed is not a JSON object). The example is now the suite's
    Mistral v0.3 case (mlx-lm issue 1374), which fires the rule at both fidelities; the old one is what the
    text now says it is."""
    from core.chat.repairs import REPAIRS_BY_NAME

    rule = REPAIRS_BY_NAME["stream-consistent-final"]
    output = rule.example.split("   ")[0]
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hi"}], "tools": [
        {"type": "function", "function": {"name": "calculator", "parameters": {
            "type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]})
    name = "hfjs-mistralai-Mistral-7B-Instruct-v0.3-JSON-Schema.jinja"
    tmpl = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
    for fidelity in ("llama.cpp", "improved"):
        msg = build_chat_parser(tmpl, req, fidelity=fidelity).parser.parse(output)
        # improved reads the call without its id in the grammar (call-id-optional), llama.cpp through the view
        assert [r.name for r in msg.repairs] == (["stream-consistent-final"] if fidelity == "llama.cpp"
                                                 else ["call-id-optional"])
        assert [json.loads(c.arguments) for c in msg.tool_calls] == [{"expression": "2+3"}]
    old = ("<tool_call>\n<function=get_weather>\n<parameter=days>\n2026-01-15\n</parameter>\n</function>\n"
           "</tool_call>")
    msg = _parser("Qwen3-Coder.jinja").parse(old)
    assert [r.name for r in msg.repairs] == ["truncated-call"] and not msg.tool_calls
    assert "truncated-call settles the call instead" in rule.accepts


def test_disable_repair_that_switches_nothing_off_says_so(tmp_path):
    """`parse --improved --disable-repair truncated-call` (a contract rule) and `parse --disable-repair
    tag-whitespace` without --improved were accepted silently and changed nothing; each now says so on stderr
    (as an override that changes nothing does), the message is unchanged, the exit status 0."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps(REQUEST), encoding="utf-8")
    base = [sys.executable, "-m", "core", "parse", str(TEMPLATES / "Qwen3-Coder.jinja"), "--request", str(req),
            "--compact"]

    def run(*extra):
        return subprocess.run(base + list(extra), input=b"Hi", capture_output=True, cwd=ROOT, check=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)

    p = run("--improved", "--disable-repair", "truncated-call", "--disable-repair", "tag-whitespace")
    assert p.stderr.decode().splitlines() == [
        "note: --disable-repair truncated-call changes nothing: a contract repair holds at every fidelity"]
    p = run("--disable-repair", "tag-whitespace")
    assert p.stderr.decode().splitlines() == [
        "note: --disable-repair tag-whitespace changes nothing: tolerance repairs are off at llama.cpp fidelity "
        "(add --improved)"]
    assert json.loads(p.stdout) == {"role": "assistant", "content": "Hi"}


def test_playground_replay_finish_drops_the_cut_call():
    """Playground, output cut inside a call: "Parsed message" had no call (truncated-call badge), but the
    streaming replay's last step (the finish) still showed the call with arguments '{"city":"Par'. At the finish
    the replay's message is now what a client keeps (the call dropped, = the parsed message) and a caption
    names the cut call; with "output is cut off" the call stays."""
    from .test_app_helpers import json_views, page, start, unmd, use_corpus

    at = use_corpus(start(), "Qwen3-Coder.jinja")
    at.session_state["in_tools"] = json.dumps([WEATHER])
    at.session_state["in_output"] = "Hi\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"
    at = page(at, "playground")
    parsed, at_finish = json.loads(json_views(at)[0].value), json.loads(json_views(at)[2].value)
    assert parsed == at_finish == {"role": "assistant",      # the cut call's text is content (lossless)
                                   "content": "Hi\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar"}
    assert any("the last call (get_weather) was cut off" in unmd(c.value) for c in at.caption)
    at.session_state["in_partial"] = True
    at.run()
    at_finish = json.loads(json_views(at)[2].value)
    assert [c["function"]["arguments"] for c in at_finish["tool_calls"]] == ['{"city":"Par']


def test_playground_names_a_rejected_call_apart_from_a_cut_one():
    """A complete call that does not fit the tools (here days before the required city, at llama.cpp fidelity)
    is settled by truncated-call too; the finish caption and the badge say it was rejected, not cut off."""
    from .test_app_helpers import json_views, page, start, unmd, use_corpus

    at = use_corpus(start(), "Qwen3-Coder.jinja")
    at.session_state["in_tools"] = json.dumps([WEATHER])
    at.session_state["in_output"] = ("<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n"
                                     "<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>")
    at = page(at, "playground")
    captions = [unmd(c.value) for c in at.caption]
    assert any("the last call (get_weather) was rejected" in c for c in captions), captions
    assert not any("was cut off" in c for c in captions)
