"""GPT-OSS harmony handler: message adjustment, channels, recipients, grammar switches, streaming."""

from __future__ import annotations

from core.chat.base import TriggerType
from core.chat.formats import gpt_oss

from .test_handlers_golden import SPECIAL, args, bundle, stream_check, stream_robust

T = "openai-gpt-oss-120b.jinja"


def test_adjust_messages_moves_reasoning_to_thinking():
    out = gpt_oss.adjust_messages([
        {"role": "assistant", "content": "c", "reasoning_content": "r"},
        {"role": "assistant", "content": "", "reasoning_content": "r2",
         "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "u"}])
    assert out[0]["thinking"] == "r" and out[0]["content"] == "c"
    assert out[1]["thinking"] == "r2" and "content" not in out[1]
    assert out[2] == {"role": "user", "content": "u"}


def test_developer_role_kept_and_history_reasoning_rendered():
    msgs = [{"role": "developer", "content": "Be terse."}, {"role": "user", "content": "q"}]
    b = bundle(T, messages=msgs)
    assert "Be terse." in b.prompt and b.prepared.messages[0]["role"] == "developer"
    assert b.generation_prompt == "<|start|>assistant"


def test_preamble_analysis_and_final_stream():
    b = bundle(T)
    text = ("<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary<|message|>pre"
            "<|end|><|start|>assistant<|channel|>final<|message|>Answer")
    msg = stream_check(b.parser, text)
    assert msg.reasoning_content == "think" and msg.content == "preAnswer"


def test_tool_call_in_channel_header_streams_arguments():
    b = bundle(T, tools=[SPECIAL])
    text = '<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{"arg1": 42}'
    msg = stream_check(b.parser, text)
    assert msg.tool_calls[0].name == "special_function" and args(msg) == {"arg1": 42}


def test_grammar_switches():
    auto = bundle(T, tools=[SPECIAL]).parser
    assert auto.grammar_lazy and len(auto.grammar_triggers) == 4
    assert all(t.type == TriggerType.PATTERN for t in auto.grammar_triggers)
    req = bundle(T, tools=[SPECIAL], tool_choice="required").parser
    assert req.grammar and not req.grammar_lazy
    plain = bundle(T).parser
    assert plain.grammar is None


def test_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    b = bundle(T, json_schema=schema)
    msg = b.parser.parse('<|channel|>final <|constrain|>json<|message|>{"a": 1}')
    assert msg.content == '{"a": 1}'
    assert b.parser.grammar and not b.parser.grammar_lazy


def test_garbage_never_retracts():
    b = bundle(T, tools=[SPECIAL])
    stream_robust(b.parser, "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.spec<|oops|>")
    stream_robust(b.parser, "plain text without channels")
