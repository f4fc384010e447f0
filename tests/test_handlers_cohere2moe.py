"""Cohere2 MoE special handler: no reference cases exist, so these check the documented format directly."""

from __future__ import annotations

import json

import pytest

from core.chat.formats import cohere2moe, detect_family
from core.chat.message import AssistantMessage, apply_deltas, compute_deltas
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .conftest import template_source
from . import handler_checks as C

TEMPLATE = "Cohere2MoE.jinja"
TOOL = {"type": "function", "function": {"name": "special_function", "parameters": {
    "type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}}


def _parser(**req):
    tmpl = ChatTemplate(template_source(TEMPLATE), TEMPLATE)
    request = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}], **req})
    return cohere2moe.build(tmpl, request, C.simple_generation_prompt(tmpl, request), None)


def _stream(parser, text):
    prev = acc = AssistantMessage()
    for i in range(1, len(text) + 1):
        cur = parser.parse(text[:i], i < len(text))
        acc = apply_deltas(acc, compute_deltas(prev, cur))  # raises on retraction
        prev = cur
    return acc


def test_detect():
    assert detect_family(ChatTemplate(template_source(TEMPLATE)).normalized_source).name == "cohere2moe"
    cmd_r = ChatTemplate(template_source("CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja"))
    assert detect_family(cmd_r.normalized_source) is None


def test_generation_prompt_opens_thinking():
    assert _parser().generation_prompt == "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>"


@pytest.mark.parametrize("fmt, reasoning, content", [
    ("auto", "Let me think.", "Hello there."),
    ("none", "", "<|START_THINKING|>Let me think.<|END_THINKING|>Hello there."),
])
def test_reasoning_and_text(fmt, reasoning, content):
    out = "Let me think.<|END_THINKING|><|START_TEXT|>Hello there.<|END_TEXT|><|END_OF_TURN_TOKEN|>"
    p = _parser(reasoning_format=fmt)
    for msg in (p.parse(out), _stream(p, out)):
        assert msg.reasoning_content == reasoning
        assert msg.content == content
        assert msg.tool_calls == []


def test_tool_calls_parallel_with_ids():
    p = _parser(tools=[TOOL], parallel_tool_calls=True)
    out = ('Need the tool.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": '
           '"special_function", "parameters": {"arg1": 1}},\n    {"tool_call_id": "1", "tool_name": '
           '"special_function", "parameters": {"arg1": 2}}\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>')
    for msg in (p.parse(out), _stream(p, out)):
        assert msg.reasoning_content == "Need the tool."
        assert msg.content == ""
        assert [(c.name, json.loads(c.arguments), c.id) for c in msg.tool_calls] == [
            ("special_function", {"arg1": 1}, "0"), ("special_function", {"arg1": 2}, "1")]
    assert p.grammar_lazy and p.grammar_triggers[0].value == "<|START_ACTION|>"


def test_partial_call_streams_arguments():
    p = _parser(tools=[TOOL])
    out = ('x<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "special_function", '
           '"parameters": {"arg1": ')
    msg = p.parse(out, True)
    assert [(c.name, c.id) for c in msg.tool_calls] == [("special_function", "0")]
    assert msg.tool_calls[0].arguments == '{"arg1":'  # trailing whitespace trimmed, as llama.cpp's mapper


def test_garbage_becomes_content():
    p = _parser(tools=[TOOL])
    msg = p.parse("x<|END_THINKING|><|START_ACTION|>not json<|END_ACTION|>")
    assert msg.reasoning_content == "x"
    assert "not json" in msg.content


def test_mutated_outputs_never_raise():
    tmpl = ChatTemplate(template_source(TEMPLATE), TEMPLATE)
    out = ('Need the tool.<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "special_function", '
           '"parameters": {"arg1": 1}}]<|END_ACTION|><|END_OF_TURN_TOKEN|>')
    case = {"id": "synthetic", "messages": [{"role": "user", "content": "Hello"}], "tools": [TOOL],
            "parallel_tool_calls": True, "input": out}
    assert C.fuzz_problems(cohere2moe, tmpl, case, trials=30) == []
