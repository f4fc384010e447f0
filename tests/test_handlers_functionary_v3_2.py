"""Functionary v3.2 recipients handler."""

from __future__ import annotations

from core.chat.base import TriggerType

from .test_handlers_golden import SPECIAL, args, bundle, stream_check, stream_robust

T = "meetkai-functionary-medium-v3.2.jinja"


def test_generation_prompt_ends_with_recipient_marker():
    assert bundle(T).generation_prompt.endswith(">>>")


def test_content_then_call_streams():
    b = bundle(T, tools=[SPECIAL])
    msg = stream_check(b.parser, 'all\nLet me check.>>>special_function\n{"arg1": 7}')
    assert msg.content == "Let me check." and args(msg) == {"arg1": 7}


def test_parallel_calls_without_content():
    b = bundle(T, tools=[SPECIAL], parallel_tool_calls=True)
    msg = b.parser.parse('special_function\n{"arg1": 1}>>>special_function\n{"arg1": 2}')
    assert [args(msg, i) for i in range(2)] == [{"arg1": 1}, {"arg1": 2}]


def test_trigger_is_a_pattern():
    p = bundle(T, tools=[SPECIAL]).parser
    assert [(t.type, t.value) for t in p.grammar_triggers] == [(TriggerType.PATTERN, ">>>(?!all)")]
    assert bundle(T).parser.grammar is None


def test_garbage_never_retracts():
    stream_robust(bundle(T, tools=[SPECIAL]).parser, "unknown\n{}>>>all\nhi")
