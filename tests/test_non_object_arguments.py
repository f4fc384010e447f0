"""Repair ``non-object-arguments`` (improved): a JSON call whose arguments are a value other than an object keeps
that value's text as its arguments, as vLLM's Hermes parser returns it (``"5"``), instead of llama.cpp's ``{}``
(its mapper takes a call's argument text only when it opens with ``{``: common/chat-peg-parser.cpp) followed by
the rest of the call's text as content. As the last call, arguments that are no object are settled by the contract
rule truncated-call: the call's text is content whole, why ``rejected``. Outputs are
written here from the Hermes / Qwen 2.5 call markup (``<tool_call>\\n{"name": …, "arguments": …}\\n</tool_call>``,
the templates' own render of a call) with the value changed."""

from __future__ import annotations

import pytest

from core.chat.char_audit import audit_parse
from core.chat.request import ChatRequest
from core.chat.stream import stream_deltas
from core.explain.explain import explain
from core.explain.spans import rebuild_message, same_message
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES as DIR
from .test_calls_kept6 import _request
from .test_calls_kept7 import _parser

TEMPLATES = ("Qwen-Qwen2.5-7B-Instruct.jinja", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")


def _call(args: str, name: str = "get_weather") -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("value", ["5", "[1, 2]", "true", "null", '"Paris"'])
def test_a_value_that_is_not_an_object_leaves_the_call_content_whole(template, value):
    out = _call(value)
    parser = _parser(template, _request())
    msg = parser.parse(out)
    assert msg.tool_calls == [] and msg.content == out
    assert [(r.name, r.start, r.why) for r in msg.repairs if r.name != "double-encoded-arguments"] == [
        ("non-object-arguments", 49, ""), ("truncated-call", 0, "rejected")]
    assert audit_parse(parser, out, msg).lost() == []
    for chunk in (1, 3, 17, len(out)):
        assert stream_deltas(parser, out, chunk=chunk)[1].to_openai() == msg.to_openai()


@pytest.mark.parametrize("template", TEMPLATES)
def test_llama_cpp_and_the_repair_off_keep_llama_cpps_empty_arguments(template):
    out = _call("5")
    for parser in (_parser(template, _request(), "llama.cpp"), _parser(template, _request(), disabled=[
            "non-object-arguments", "unparsed-characters"])):
        msg = parser.parse(out)
        assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", "{}")] and msg.content == ""


@pytest.mark.parametrize("template", TEMPLATES)
def test_objects_and_strings_holding_one_are_still_the_arguments(template):
    parser = _parser(template, _request())
    for args in ('{"city": "Paris"}', '"{\\"city\\": \\"Paris\\"}"'):
        msg = parser.parse(_call(args))
        assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"city": "Paris"}')], args
        assert msg.content == ""


@pytest.mark.parametrize("template", TEMPLATES)
def test_with_the_repair_off_the_dropped_value_is_still_audited(template):
    """The grammar reads the whole output and the mapper drops the 5: the character audit's gate audits a call
    with empty arguments, so unparsed-characters still keeps the text (llama.cpp's message plus the tail)."""
    out = _call("5")
    msg = _parser(template, _request(), disabled=["non-object-arguments"]).parse(out)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", "{}")]
    assert msg.content == "5}\n</tool_call>" and [r.name for r in msg.repairs] == ["unparsed-characters"]


@pytest.mark.parametrize("template", TEMPLATES)
def test_before_another_call_the_value_is_the_arguments(template):
    out = _call("5") + "\n" + _call('{"city": "Paris"}')
    parser = _parser(template, _request())
    msg = parser.parse(out)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", "5"),
                                                               ("get_weather", '{"city": "Paris"}')]
    assert msg.content == "" and [r.name for r in msg.repairs] == ["non-object-arguments"]
    assert audit_parse(parser, out, msg).lost() == []
    for chunk in (1, 3, 17, len(out)):
        assert stream_deltas(parser, out, chunk=chunk)[1].to_openai() == msg.to_openai()


@pytest.mark.parametrize("output", [_call("5"), _call("5") + "\n" + _call('{"city": "Paris"}')])
def test_explain_rebuilds_the_message_from_its_spans(output):
    name = TEMPLATES[0]
    template = ChatTemplate((DIR / name).read_text(encoding="utf-8"), name)
    ex = explain(template, ChatRequest.from_dict(_request()), output, fidelity="improved")
    assert same_message(rebuild_message(ex.spans), _parser(name, _request()).parse(output))
    assert ex.message == _parser(name, _request()).parse(output).to_openai()
