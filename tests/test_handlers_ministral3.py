"""Ministral / Magistral 3 and Devstral handler: message blocks, [THINK], [TOOL_CALLS], response format."""

from __future__ import annotations

from core.chat.formats import ministral3

from .test_handlers_golden import SPECIAL, SPECIAL_OPT, args, bundle, stream_check, stream_robust

T = "mistralai-Ministral-3-14B-Reasoning-2512.jinja"


def test_adjust_messages_builds_blocks():
    out = ministral3.adjust_messages([
        {"role": "system", "content": "S", "reasoning_content": "R"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": [{"type": "text", "text": "A"}]}])
    assert out[0] == {"role": "system", "content": [{"type": "thinking", "thinking": "R"},
                                                    {"type": "text", "text": "S"}]}
    assert out[1] == {"role": "user", "content": "U"}
    assert out[2]["content"] == [{"type": "text", "text": "A"}]


def test_system_thinking_rendered():
    b = bundle(T, messages=[{"role": "system", "content": "S", "reasoning_content": "hidden plan"},
                            {"role": "user", "content": "q"}])
    assert "[THINK]hidden plan[/THINK]" in b.prompt


def test_reasoning_content_and_parallel_calls_stream():
    b = bundle(T, tools=[SPECIAL, SPECIAL_OPT], parallel_tool_calls=True)
    text = ('[THINK]plan[/THINK]Sure.[TOOL_CALLS]special_function[ARGS]{"arg1": 1}'
            '[TOOL_CALLS]special_function_with_opt[ARGS]{"arg1": 2, "arg2": 3}')
    msg = stream_check(b.parser, text)
    assert msg.reasoning_content == "plan" and msg.content == "Sure."
    assert [t.name for t in msg.tool_calls] == ["special_function", "special_function_with_opt"]
    assert args(msg, 1) == {"arg1": 2, "arg2": 3}


def test_single_call_without_parallel():
    b = bundle(T, tools=[SPECIAL])
    msg = b.parser.parse('[TOOL_CALLS]special_function[ARGS]{"arg1": 1}[TOOL_CALLS]special_function[ARGS]{"arg1": 2}')
    assert len(msg.tool_calls) == 1 and args(msg) == {"arg1": 1}


def test_grammar_and_content_only():
    assert bundle(T, tools=[SPECIAL]).parser.grammar_lazy
    assert bundle(T).parser.grammar is None
    req = bundle(T, tools=[SPECIAL], tool_choice="required").parser
    assert req.grammar and not req.grammar_lazy and req.grammar_triggers[0].value == "[TOOL_CALLS]"


def test_devstral_content_then_call():
    b = bundle("unsloth-mistral-Devstral-Small-2507.jinja", tools=[SPECIAL])
    msg = stream_check(b.parser, 'Ok.[TOOL_CALLS]special_function[ARGS]{"arg1": 5}')
    assert msg.content == "Ok." and args(msg) == {"arg1": 5}


def test_garbage_never_retracts():
    b = bundle(T, tools=[SPECIAL])
    stream_robust(b.parser, "[THINK]a[TOOL_CALLS]special_function[ARGS]{oops[/THINK]x")
