"""Improvement ``instruction-call-format`` (core.analysis.instructions): the tool-call format read from the tool
instructions when no call is ever rendered (issue 10, point 5).

The reading itself on the instruction texts of the corpus and of an agent's prompt; the templates it fires on
(each checked by writing a call in the inferred format and parsing it back, one-shot and streamed); that
llama.cpp fidelity is untouched; the request-time half (the request's own system message).
"""

from __future__ import annotations

import json

import pytest

from core.analysis import analyze
from core.analysis.fidelity import INSTRUCTION_CALL_FORMAT
from core.analysis.instructions import (INFERRED_FROM_INSTRUCTIONS, example_call, format_for_request,
                                        read_call_format, system_text)
from core.analysis.result import ToolFormat
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

# template → (opener, closer, arguments key, list-wrapped) as read from its instructions
FIRES_ON = {
    "gguf-ollama-granite3.1-moe-1b.jinja": ("<|tool_call|>", "", "arguments", True),
    "gguf-ollama-granite3.2-8b.jinja": ("<|tool_call|>", "", "arguments", True),
    "gguf-ollama-granite3.3-2b.jinja": ("<|tool_call|>", "", "arguments", True),
    "ibm-granite-granite-3.3-2B-Instruct.jinja": ("<|tool_call|>", "", "arguments", True),
    "gguf-ollama-llama3.2-vision-90b.jinja": ("", "", "parameters", False),
    "hfjs-meta-llama-Llama-3.2-11B-Vision-Instruct.jinja": ("", "", "parameters", False),
    "vllm-tool_chat_template_llama3.2_json.jinja": ("", "", "parameters", False),
    "hfjs-HuggingFaceTB-SmolLM3-3B.jinja": ("<tool_call>", "</tool_call>", "arguments", False),
    "xinference-qwen1.5-chat.jinja": ("<tool_call>", "</tool_call>", "arguments", False),
    "hfjs-MadeAgents-Hammer2.1.jinja": ("", "", "arguments", True),
}
"""The corpus templates the improvement fires on (10 when written)."""

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}}]

# the agent prompt's format line (granite-retrieval-agent, granite_autogen_rag.py, ASSISTANT_PROMPT)
AGENT_LINE = ('Respond in the format: <function_call> {"name": function name, "arguments": dictionary of argument '
              'name and its value}. Do not use variables.')


def _tmpl(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


@pytest.mark.parametrize("text, expected", [
    (AGENT_LINE, ("<function_call>", "", "arguments", False)),
    ("respond with <|tool_call|> followed by a JSON list of tools used.", ("<|tool_call|>", "", "arguments", True)),
    ('Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.',
     ("", "", "parameters", False)),
    ('within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
     '<args-json-object>}\n</tool_call>', ("<tool_call>", "</tool_call>", "arguments", False)),
    ('```\n[\n    {"name": "func_name1", "arguments": {"argument1": "value1", "argument2": "value2"}},\n'
     '    ... (more tool calls as required)\n```', ("", "", "arguments", True)),
])
def test_read_call_format(text, expected):
    fmt = read_call_format(text)
    assert fmt is not None
    assert (fmt.opener, fmt.closer, fmt.args_key, fmt.array) == expected
    assert fmt.name_key == "name" and fmt.evidence


@pytest.mark.parametrize("text", [
    "",
    "You are a helpful assistant.",
    # a tool definition is not an example call (its name is followed by a description)
    '{"name": "get_weather", "description": "x", "parameters": {}}',
    # a tagged format described in prose (GLM) is not read
    "<tool_call>function_name\n<arg_key>parameter_name</arg_key>\n<arg_value>parameter_value</arg_value>\n</tool_call>",
])
def test_read_call_format_reads_nothing(text):
    assert read_call_format(text) is None


def test_read_call_format_on_hostile_text():
    # a request's system message can be anything: unclosed example objects repeated, or the example far down
    assert read_call_format('{"name": x, "arguments": {' * 20000) is None
    fmt = read_call_format("x" * 100000 + " " + AGENT_LINE)
    assert fmt is not None and fmt.opener == "<function_call>"


@pytest.mark.parametrize("name", sorted(FIRES_ON))
def test_fires_on_corpus_template_and_parses_back(name):
    rep = analyze(_tmpl(name), fidelity="improved")
    f = rep.analysis.tools.format
    assert rep.improvements_applied == [INSTRUCTION_CALL_FORMAT]
    assert rep.analysis.tools.inferred_from == INFERRED_FROM_INSTRUCTIONS
    assert rep.to_json(comparisons=False)["analysis"]["tools"]["inferred_from"] == "instructions"
    opener, closer, args_key, array = FIRES_ON[name]
    assert f.mode == ToolFormat.JSON_NATIVE
    assert (f.section_start or f.per_call_start, f.section_end or f.per_call_end, f.args_field,
            f.tools_array_wrapped) == (opener, closer, args_key, array)
    i1 = rep.comparison("I1")
    assert i1 is not None and i1.found["tools.inferred_from"] == "instructions"
    # llama.cpp fidelity: no format, no I1, nothing in the JSON
    plain = analyze(_tmpl(name))
    assert plain.analysis.tools.format.mode == ToolFormat.NONE and plain.comparison("I1") is None
    assert "inferred_from" not in plain.to_json(comparisons=False)["analysis"]["tools"]

    call = example_call(f, "get_weather", {"city": "Paris", "days": 2})
    out = f"Let me check.\n{call}\nDone."
    # thinking off: with it on, SmolLM3's text before the call would be reasoning (reasoning-end-without-start)
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS,
                                 "enable_thinking": False})
    parser = build_chat_parser(_tmpl(name), req, fidelity="improved").parser
    msg = parser.parse(out).to_openai()
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]] == [
        ("get_weather", {"city": "Paris", "days": 2})]
    assert msg["content"].split() == ["Let", "me", "check.", "Done."]
    sp = StreamingParser(parser)
    for ch in out:
        sp.feed(ch)
    sp.finish()
    assert sp.message.to_openai() == msg
    assert not build_chat_parser(_tmpl(name), req).parser.parse(out).to_openai().get("tool_calls")


def test_disabled_improvement_and_templates_that_render_calls():
    name = "gguf-ollama-granite3.2-8b.jinja"
    off = analyze(_tmpl(name), fidelity="improved", disabled_improvements=[INSTRUCTION_CALL_FORMAT])
    assert off.analysis.tools.format.mode == ToolFormat.NONE and off.comparison("I1") is None
    # a template that renders calls keeps its diffed format: I1 never runs
    qwen = analyze(_tmpl("Qwen-Qwen3-0.6B.jinja"), fidelity="improved")
    assert qwen.comparison("I1") is None and qwen.analysis.tools.inferred_from == ""


def test_grammar_for_an_inferred_format():
    from .test_gbnf_validator import gbnf_accepts, gbnf_problems

    name = "gguf-ollama-granite3.2-8b.jinja"
    call = '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    for choice, lazy in (("auto", True), ("required", False)):
        req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hi"}], "tools": TOOLS,
                                     "tool_choice": choice})
        p = build_chat_parser(_tmpl(name), req, fidelity="improved").parser
        assert p.grammar and p.grammar_lazy is lazy and gbnf_problems(p.grammar) == []
        assert ".*?" not in p.grammar
        if lazy:
            assert [t.value for t in p.grammar_triggers] == ["<|tool_call|>"]
            assert gbnf_accepts(p.grammar, call)[0]


def test_request_system_message_spells_the_format():
    """granite-retrieval-agent's prompt (drift case granite32-function-call-tag): the request's own instructions
    win over the template's (Granite 3.2 writes no tool instructions when a system message is given)."""
    name = "gguf-ollama-granite3.2-8b.jinja"
    system = "You are an AI assistant.\n    # Tool Use\n    " + AGENT_LINE + "\n    Only call one tool at a time.\n"
    assert system_text([{"role": "system", "content": [{"type": "text", "text": system}]}]) == system
    req = ChatRequest.from_dict({"messages": [{"role": "system", "content": system},
                                              {"role": "user", "content": "Hi"}], "tools": TOOLS})
    out = '<function_call>{"name": "get_weather", "arguments": {"city": "Kathmandu"}}</function_call>##ANSWER##'
    b = build_chat_parser(_tmpl(name), req, fidelity="improved")
    msg = b.parser.parse(out).to_openai()
    assert msg["content"] == "##ANSWER##"
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"city": "Kathmandu"}
    assert b.report.analysis.tools.format.per_call_start == "<function_call>"
    assert any(INSTRUCTION_CALL_FORMAT in n for n in b.notes)
    # the closing tag is optional (the prompt names none)
    msg = b.parser.parse(out.replace("</function_call>", "")).to_openai()
    assert msg["tool_calls"] and msg["content"] == "##ANSWER##"
    # llama.cpp fidelity, or the improvement switched off: all content
    assert not build_chat_parser(_tmpl(name), req).parser.parse(out).to_openai().get("tool_calls")
    off = analyze(_tmpl(name), fidelity="improved", disabled_improvements=[INSTRUCTION_CALL_FORMAT])
    assert not build_chat_parser(_tmpl(name), req, report=off).parser.parse(out).to_openai().get("tool_calls")
    # a template with a rendered format ignores the system message
    qwen = analyze(_tmpl("Qwen-Qwen3-0.6B.jinja"), fidelity="improved").analysis
    assert format_for_request(qwen, req.messages) is None
    assert format_for_request(analyze(_tmpl(name), fidelity="improved").analysis,
                              [{"role": "user", "content": AGENT_LINE}]) is None  # only a system message counts


def test_cli_says_where_the_format_comes_from(capsys):
    from core.cli import main

    path = str(TEMPLATES / "hfjs-MadeAgents-Hammer2.1.jinja")
    assert main(["analyze", path, "--improved", "--no-comparisons"]) == 0
    assert "Tools: JSON_NATIVE  (inferred from instructions: comparison I1)" in capsys.readouterr().out
    assert main(["analyze", path, "--no-comparisons"]) == 0
    assert "Tools: NONE\n" in capsys.readouterr().out
    assert main(["analyze", path, "--improved", "--json", "--no-comparisons"]) == 0
    assert json.loads(capsys.readouterr().out)["analysis"]["tools"]["inferred_from"] == "instructions"
