"""Tool-call classes of the tenth real-output batch (tests/data/real_outputs_kept10, the model text ollama's and
vLLM's own parser tests feed their parsers; development data since its first measure), read by widened repairs
(core/chat/repairs.py, docs/realset-baseline.md "kept10 and reports2 as development data"):

* ``tag-whitespace`` on a JSON call section whose start marker holds a line break: Command R+'s
  ``Action:\\n```json`` written ``Action: ```json`` (ollama's command-r parser and its Command R+ template);
* ``nullable-null`` in the MiniCPM5 / Muse Glimmer string-or-JSON parameters (ollama's Glimmer parser);
* ``spaced-typed-value``: whitespace around a typed value between its tags (vLLM's GLM-4 / Poolside parsers);
* ``call-object-id``: an ``"id"`` member in a flat JSON call whose template writes none (OpenAI's call shape). No
  public raw output with the member was found: its tests use the project review's variant of a Hermes call.

Each is shown on the cases that need it (each case cites its public source in its file): right at ``improved``
one-shot and streamed, with its record; switched off, the case fails again; at ``llama.cpp`` fidelity the message
stays llama.cpp's."""

from __future__ import annotations

import json

import pytest

from core.chat.char_audit import audit_parse
from core.chat.generator import line_break_spellings
from core.chat.realset import load_cases

from .conftest import ROOT
from .test_calls_kept7 import _parser, check_repairs_needed
from .test_reasoning_repairs import _streamed

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept10"))}

# case id -> the repairs its right message needs (switched off together, the case fails)
NEEDS = {
    "kept10-ollama-commandr-single-tool-call": {"tag-whitespace"},
    "kept10-ollama-commandr-multiple-tool-calls": {"tag-whitespace"},
    "kept10-ollama-commandr-content-before-action": {"tag-whitespace"},
    "kept10-ollama-commandr-streaming-token-by-token": {"tag-whitespace"},
    "kept10-ollama-glimmer-atem-value-types-and-whitespace": {"nullable-null"},
    "kept10-vllm-poolside-non-string-arg-still-deserialized": {"spaced-typed-value"},
}


@pytest.mark.parametrize("case_id", sorted(NEEDS))
def test_each_repair_on_the_kept10_cases_that_need_it(case_id):
    check_repairs_needed(CASES[case_id], NEEDS[case_id])


def test_line_break_spellings_of_a_section_start():
    assert line_break_spellings("Action:\n```json\n") == ["Action:\n```json", "Action: ```json", "Action:```json"]
    assert line_break_spellings("<|message_sep|>\n\nfunction call<|role_sep|>\n") == [
        "<|message_sep|>\n\nfunction call<|role_sep|>", "<|message_sep|> function call<|role_sep|>",
        "<|message_sep|>function call<|role_sep|>"]
    assert line_break_spellings("<tool_call>\n") == ["<tool_call>"]   # no inner line break: the marker alone
    assert line_break_spellings("a b") == ["a b"]                     # a space is not a line break
    assert len(line_break_spellings("a\nb\nc\nd\ne\n")) == 27        # the first three runs only


def test_command_r_plus_marker_is_markup_and_the_prose_before_it_content():
    case = CASES["kept10-ollama-commandr-content-before-action"]
    msg = _parser(case.template, case.request).parse(case.output)
    assert msg.content == "I'll look up the weather for you.\n"
    spans = [(r.name, r.text) for r in msg.repairs]
    assert spans == [("tag-whitespace", "Action: ```json\n")]


def test_command_r_plus_template_layout_needs_no_repair():
    case = CASES["kept10-ollama-commandr-single-tool-call"]
    out = case.output.replace("Action: ```json", "Action:\n```json")
    for fidelity in ("improved", "llama.cpp"):
        msg = _parser(case.template, case.request, fidelity).parse(out)
        assert [c.name for c in msg.tool_calls] == ["get_weather"] and not msg.repairs, fidelity


def test_command_r_plus_plain_answer_stays_content():
    case = CASES["kept10-ollama-commandr-plain-text-response"]
    request = dict(CASES["kept10-ollama-commandr-single-tool-call"].request)   # with the tool declared
    msg = _parser(case.template, request).parse(case.output)
    assert msg.content == case.output and not msg.tool_calls and not msg.repairs


def test_glimmer_null_for_a_nullable_string_only():
    case = CASES["kept10-ollama-glimmer-atem-value-types-and-whitespace"]
    msg = _parser(case.template, case.request).parse(case.output)
    assert json.loads(msg.tool_calls[0].arguments)["choice"] is None
    assert [(r.name, r.text) for r in msg.repairs] == [
        ("nullable-null", '<atem:parameter name="choice">null</atem:parameter>')]
    # the same text for a parameter declared a string only stays the string it is
    strict = json.loads(json.dumps(case.request))
    strict["tools"][0]["function"]["parameters"]["properties"]["choice"] = {"type": "string"}
    msg = _parser(case.template, strict).parse(case.output)
    assert json.loads(msg.tool_calls[0].arguments)["choice"] == "null" and not msg.repairs


def test_glimmer_grammar_is_llama_cpps_with_the_repair_on():
    case = CASES["kept10-ollama-glimmer-atem-value-types-and-whitespace"]
    on = _parser(case.template, case.request)
    off = _parser(case.template, case.request, disabled=("nullable-null",))
    assert on.grammar and on.grammar == off.grammar   # the repair widens the parser, never the grammar


def test_spaced_typed_value_reads_the_json_value_and_leaves_strings_as_written():
    case = CASES["kept10-vllm-poolside-non-string-arg-still-deserialized"]
    parser = _parser(case.template, case.request)
    msg = parser.parse(case.output)
    assert json.loads(msg.tool_calls[0].arguments) == {"content": "hi", "mode": 420}
    assert [(r.name, r.text) for r in msg.repairs] == [("spaced-typed-value", " 420 ")]
    # line breaks are whitespace too; a spaced string keeps its spaces (the sibling case of the same test file)
    msg = parser.parse(case.output.replace(" 420 ", "\n420\n"))
    assert json.loads(msg.tool_calls[0].arguments)["mode"] == 420
    kept = CASES["kept10-vllm-poolside-string-arg-preserves-whitespace"]
    msg = _parser(kept.template, kept.request).parse(kept.output)
    assert "spaced-typed-value" not in {r.name for r in msg.repairs}
    # whitespace after the value alone; none at all is the template's layout, no repair
    msg = parser.parse(case.output.replace(" 420 ", "420\n"))
    assert json.loads(msg.tool_calls[0].arguments)["mode"] == 420 and msg.repairs[0].text == "420\n"
    msg = parser.parse(case.output.replace(" 420 ", "420"))
    assert json.loads(msg.tool_calls[0].arguments)["mode"] == 420 and not msg.repairs
    # text that is no JSON value inside the spaces stays the string mistyped-value-as-string keeps
    msg = parser.parse(case.output.replace(" 420 ", " 4 20 "))
    assert json.loads(msg.tool_calls[0].arguments)["mode"] == " 4 20 "
    assert [r.name for r in msg.repairs] == ["mistyped-value-as-string"]


def test_spaced_typed_value_keeps_the_grammar():
    case = CASES["kept10-vllm-poolside-non-string-arg-still-deserialized"]
    on = _parser(case.template, case.request)
    off = _parser(case.template, case.request, disabled=("spaced-typed-value",))
    assert on.grammar and on.grammar == off.grammar


# the project review's variant of a Hermes / Qwen call (no public raw output with the member was found)
QWEN = "Qwen-Qwen2.5-7B-Instruct.jinja"
WEATHER = {"messages": [{"role": "user", "content": "What's the weather in Paris?"}],
           "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
               "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}
ID_AFTER = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "x1"}\n</tool_call>'


@pytest.mark.parametrize("output,call_id", [
    (ID_AFTER, "x1"),
    ('<tool_call>\n{"id": "x1", "name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', "x1"),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}, "id": 7}\n</tool_call>', "7"),
])
def test_call_object_id_is_the_calls_id_and_nothing_is_lost(output, call_id):
    parser = _parser(QWEN, WEATHER)
    msg = parser.parse(output)
    assert [(c.name, c.arguments, c.id) for c in msg.tool_calls] == [("get_weather", '{"city": "Paris"}', call_id)]
    assert msg.content == "" and [r.name for r in msg.repairs] == ["call-object-id"]
    assert not audit_parse(parser, output, msg).lost()
    for size in (1, 3, 17, len(output)):
        assert _streamed(parser, output, size).to_openai() == msg.to_openai(), size


def test_call_object_id_off_keeps_the_member_as_before():
    # llama.cpp: the call the stream showed, its member's text in no field; improved without the repair: the text
    # from the key on is content (unparsed-characters)
    for kw, content in (({"fidelity": "llama.cpp"}, ""), ({"disabled": ("call-object-id",)}, 'id": "x1"}\n</tool_call>')):
        msg = _parser(QWEN, WEATHER, **kw).parse(ID_AFTER)
        assert [c.name for c in msg.tool_calls] == ["get_weather"] and msg.tool_calls[0].id != "x1"
        assert msg.content == content and "call-object-id" not in {r.name for r in msg.repairs}


def test_call_object_id_keeps_the_grammar_and_an_id_key_inside_arguments_stays_a_field():
    on, off = _parser(QWEN, WEATHER), _parser(QWEN, WEATHER, disabled=("call-object-id",))
    assert on.grammar and on.grammar == off.grammar
    # GLM-4.7's todo list (its items carry "id" keys) read where the flat JSON call is among the parser's rules
    case = next(c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs")) if c.id == "glm47-array-json")
    parser = _parser(case.template, case.request)
    msg = parser.parse(case.output)
    assert json.loads(msg.tool_calls[0].arguments)["todos"][0]["id"] == "1"
    assert not audit_parse(parser, case.output, msg).lost()
