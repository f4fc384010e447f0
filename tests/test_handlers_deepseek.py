"""DeepSeek V3.2 / V4 DSML handler: tool result ordering, thinking on/off prefills, typed parameters."""

from __future__ import annotations

from core.chat.formats import deepseek

from .test_handlers_golden import SPECIAL, args, bundle, stream_check, stream_robust

V4 = "deepseek-ai-DeepSeek-V4.jinja"
V32 = "deepseek-ai-DeepSeek-V3.2.jinja"
MIXED = {"type": "function", "function": {"name": "mixed", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "opt": {"type": "boolean"}},
    "required": ["city", "days"]}}}


def _call(block: str) -> str:
    return (f'<｜DSML｜{block}>\n<｜DSML｜invoke name="mixed">\n'
            '<｜DSML｜parameter name="city" string="true">Paris "FR"</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="opt" string="false">true</｜DSML｜parameter>\n'
            f'</｜DSML｜invoke>\n</｜DSML｜{block}>')


def test_sort_tool_results_follows_call_order():
    msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a"}, {"id": "b"}]},
            {"role": "tool", "content": "B", "tool_call_id": "b"},
            {"role": "tool", "content": "A", "tool_call_id": "a"},
            {"role": "user", "content": "next"}]
    out = deepseek.sort_tool_results(msgs)
    assert [m["content"] for m in out] == ["", "A", "B", "next"]


def test_v4_typed_parameters_stream():
    b = bundle(V4, tools=[MIXED], reasoning_format="deepseek")
    msg = stream_check(b.parser, "Plan</think>" + _call("tool_calls"))
    assert msg.reasoning_content == "Plan"
    assert args(msg) == {"city": 'Paris "FR"', "days": 3, "opt": True}


def test_v32_block_name_and_thinking_off_prefill():
    b = bundle(V32, tools=[MIXED], enable_thinking=False)
    assert b.parser.grammar_triggers[0].value == "<｜DSML｜function_calls>"
    msg = stream_check(b.parser, "Hi.\n\n" + _call("function_calls"))
    assert msg.content == "Hi." and msg.tool_calls[0].name == "mixed"


def test_v4_thinking_off_generation_prompt():
    b = bundle(V4, enable_thinking=False)
    assert b.generation_prompt.endswith("</think>")
    assert stream_check(b.parser, "Hello").content == "Hello"


def test_v4_response_format_reaches_template():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    b = bundle(V4, json_schema=schema)
    assert '"a"' in b.prompt and "Response Format" in b.prompt
    msg = b.parser.parse('ok</think>```json\n{"a": 1}\n```')
    assert msg.content == '{"a": 1}'


def test_garbage_never_retracts():
    b = bundle(V4, tools=[SPECIAL], reasoning_format="deepseek")
    stream_robust(b.parser, 'x</think><｜DSML｜tool_calls>\n<｜DSML｜invoke name="nope">\n</｜DSML｜invoke>')


def test_v4_parameters_out_of_order_at_improved_fidelity():
    """Repair argument-order (llama.cpp #24351 / PR #24516, the same drift in DSML): the optional parameter
    first and the required ones swapped; llama.cpp rejects the complete call, improved takes it and reports it."""
    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest

    from .test_handlers_golden import template

    text = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="mixed">\n'
            '<｜DSML｜parameter name="opt" string="false">true</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
            '</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}], "tools": [MIXED]})
    improved = build_chat_parser(template(V4), req, fidelity="improved").parser
    # improved streams release a call whole once accepted (docs/fidelity-lossless.md), so the deltas are not
    # the partial parse of every prefix: the stream adds up to the one-shot parse
    from core.chat.message import AssistantMessage, apply_deltas
    from core.chat.stream import StreamingParser

    sp, acc = StreamingParser(improved), AssistantMessage()
    for ch in text:
        acc = apply_deltas(acc, sp.feed(ch))
    msg = improved.parse(text)
    assert apply_deltas(acc, sp.finish(False)) == msg and sp.held_back == 0
    assert args(msg) == {"opt": True, "days": 3, "city": "Paris"}
    (r,) = msg.repairs
    assert r.name == "argument-order" and text[r.start:r.end].startswith('<｜DSML｜parameter name="opt"')
    plain = build_chat_parser(template(V4), req).parser.parse(text)
    assert plain.tool_calls == [] and [(x.name, x.why) for x in plain.repairs] == [("truncated-call", "rejected")]
