"""GigaChat V3 handler (GigaChat 3.1 goes to the auto-parser)."""

from __future__ import annotations

from .test_handlers_golden import SPECIAL, args, bundle, stream_check, stream_robust

T = "GigaChat3-10B-A1.8B.jinja"
CALL = '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "special_function", "arguments": {"arg1": 3}}'


def test_content_and_call_stream():
    b = bundle(T, tools=[SPECIAL])
    assert b.generation_prompt.endswith("assistant<|role_sep|>\n")
    msg = stream_check(b.parser, "Calling." + CALL)
    assert msg.content == "Calling." and args(msg) == {"arg1": 3}


def test_grammar_lazy_word_trigger():
    p = bundle(T, tools=[SPECIAL]).parser
    assert p.grammar_lazy and [t.value for t in p.grammar_triggers] == [
        "<|message_sep|>\n\nfunction call<|role_sep|>\n"]
    assert bundle(T).parser.grammar is None


def test_continuation_content():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Hel"}]
    b = bundle(T, messages=msgs, continue_final_message="content")
    assert b.parser.parse("lo").content == "Hello"


def test_garbage_never_retracts():
    stream_robust(bundle(T, tools=[SPECIAL]).parser, 'x<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "zz"}')
