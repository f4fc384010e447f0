"""The tool-call class of the sixth real-output batch (tests/data/real_outputs_kept6, vLLM's own parser tests;
development data since its first measure): how calls are found and read, at ``improved`` fidelity.

Each repair is shown on the kept6 cases that need it (each case cites its public source in its file): right at
``improved`` one-shot and streamed, with its record; switched off, the case fails again; at ``llama.cpp`` fidelity
the message stays llama.cpp's. The class around each case (a call to an undeclared tool, a cut block, a template
with a format of its own) is checked on outputs written here from the format's markup."""

from __future__ import annotations

import pytest

from core.chat.realset import load_cases, run_case
from core.chat.repairs import REPAIRS, RepairStage
from core.chat.roundtrip import compare_messages

from .conftest import ROOT, TEMPLATES
from .test_calls_kept7 import _parser

TOLERANCE = {r.name for r in REPAIRS if r.stage is RepairStage.TOLERANCE}
CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept6"))}

# case id -> the repairs its right message needs
NEEDS = {
    "kept6-vllm-ernie45-single": {"well-known-call-blocks"},
    "kept6-vllm-ernie45-multiple": {"well-known-call-blocks"},
    "kept6-vllm-ernie45-content-before": {"well-known-call-blocks"},
    "kept6-vllm-granite4-content-between": {"content-between-calls"},
    "kept6-vllm-minimax-m3-partial-start": {"cut-marker-text"},
    "kept6-vllm-minimax-m3-cut-second-invoke": {"cut-call-own-text"},
    "kept6-vllm-functiongemma-stream-two-keys": {"glued-arguments"},
    "kept6-vllm-functiongemma-stream-three-keys": {"glued-arguments"},
    "kept6-vllm-minimax-m3-nested": {"free-object-elements", "leading-zero-integer"},
}


@pytest.mark.parametrize("case_id", sorted(NEEDS))
def test_each_repair_on_the_kept6_cases_that_need_it(case_id):
    case = CASES[case_id]
    msg = _parser(case.template, case.request).parse(case.output)
    assert compare_messages(case.expect, msg.to_openai()) is None
    assert NEEDS[case_id] <= {r.name for r in msg.repairs}
    result = run_case(case, str(TEMPLATES), "improved")   # streamed at 1, 3, 17, whole; nothing lost
    assert result.ok, result.reason
    plain = _parser(case.template, case.request, "llama.cpp").parse(case.output)
    assert compare_messages(case.expect, plain.to_openai()) is not None
    assert not {r.name for r in plain.repairs} & TOLERANCE   # the contract rules act at every fidelity
    off = _parser(case.template, case.request, disabled=sorted(NEEDS[case_id] | {"unparsed-characters"})).parse(
        case.output)
    assert compare_messages(case.expect, off.to_openai()) is not None
    assert not NEEDS[case_id] & {r.name for r in off.repairs}


# -- well-known-call-blocks ---------------------------------------------------------------------------------------

ERNIE = "xinference-Ernie4.5.jinja"   # renders no tools at all
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def _request(tools=WEATHER, **kw) -> dict:
    return {"messages": [{"role": "user", "content": "Help me."}], "tools": tools, **kw}


def _block(name: str, args: str = '{"city": "Paris"}') -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def test_well_known_blocks_are_calls_with_the_text_around_them_content():
    out = "Let me look.\n" + _block("get_weather") + "\nDone."
    msg = _parser(ERNIE, _request()).parse(out)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"city": "Paris"}')]
    assert msg.content == "Let me look.\nDone."
    fired = [r for r in msg.repairs if r.name == "well-known-call-blocks"]
    assert len(fired) == 1 and out[fired[0].start:fired[0].end].startswith("<tool_call>")


def test_a_block_naming_an_undeclared_tool_stays_content():
    out = _block("rm_everything")
    msg = _parser(ERNIE, _request()).parse(out)
    assert msg.tool_calls == [] and msg.content == out


def test_a_cut_block_is_content_not_a_call():
    out = "Hi " + _block("get_weather")[:40]
    msg = _parser(ERNIE, _request()).parse(out)
    assert msg.tool_calls == [] and msg.content == out
    assert ("truncated-call", "cut") in {(r.name, r.why) for r in msg.repairs}


def test_no_blocks_are_read_without_tools_or_with_tool_choice_none():
    out = _block("get_weather")
    assert _parser(ERNIE, _request(tools=[])).parse(out).content == out
    assert _parser(ERNIE, _request(tool_choice="none")).parse(out).content == out


def test_a_template_with_a_format_of_its_own_is_not_read_the_well_known_way():
    # MiniMax-M1 renders its calls in <tool_calls> … </tool_calls>: a <tool_call> block there is not its format
    out = _block("get_weather")
    msg = _parser("MiniMax-M1.jinja", _request()).parse(out)
    assert "well-known-call-blocks" not in {r.name for r in msg.repairs}


# -- content-between-calls in JSON call blocks ------------------------------------------------------------------

GRANITE = "ibm-granite-granite-4.0.jinja"   # <tool_call>\n{…}\n</tool_call>, one block per call


def _granite_call(city: str) -> str:
    return f'<tool_call> {{"name": "get_weather", "arguments": {{"city": "{city}"}}}} </tool_call>'


def test_text_between_json_call_blocks_is_content():
    out = "A\n" + _granite_call("Paris") + " B \n " + _granite_call("Rome") + " C"
    msg = _parser(GRANITE, _request(parallel_tool_calls=True)).parse(out)
    assert [c.arguments for c in msg.tool_calls] == ['{"city": "Paris"}', '{"city": "Rome"}']
    # the whitespace right after a call block is layout (the stream's fast path after a call keeps it so)
    assert msg.content == "A\nB \n C"
    fired = [out[r.start:r.end] for r in msg.repairs if r.name == "content-between-calls"]
    assert fired[0] == "B \n " + _granite_call("Rome")


def test_whitespace_alone_between_json_call_blocks_stays_layout():
    out = _granite_call("Paris") + "\n" + _granite_call("Rome") + "\n"
    msg = _parser(GRANITE, _request(parallel_tool_calls=True)).parse(out)
    assert len(msg.tool_calls) == 2 and msg.content == ""
    assert "content-between-calls" not in {r.name for r in msg.repairs}


def test_text_between_json_call_blocks_needs_parallel_calls():
    out = _granite_call("Paris") + " then " + _granite_call("Rome")
    msg = _parser(GRANITE, _request(parallel_tool_calls=False)).parse(out)
    assert len(msg.tool_calls) == 1 and msg.content == "then " + _granite_call("Rome")
    assert "content-between-calls" not in {r.name for r in msg.repairs}


def test_a_block_naming_no_declared_tool_after_text_stays_content():
    bad = '<tool_call> {"name": "rm_rf", "arguments": {}} </tool_call>'
    out = _granite_call("Paris") + " then " + bad
    msg = _parser(GRANITE, _request(parallel_tool_calls=True)).parse(out)
    assert [c.name for c in msg.tool_calls] == ["get_weather"]
    assert bad in msg.content


# -- cut-marker-text, cut-call-own-text ---------------------------------------------------------------------------

QWEN3_CODER = "Qwen-Qwen3-Coder-30B-A3B-Instruct.jinja"


def _xml_call(city: str) -> str:
    return f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize("cut", ["<", "<tool_c", "<tool_call"])
def test_a_marker_cut_by_the_end_of_a_final_output_is_content(cut):
    out = "Let me check. " + cut
    msg = _parser(QWEN3_CODER, _request()).parse(out)
    assert msg.content == out and msg.tool_calls == []
    plain = _parser(QWEN3_CODER, _request(), "llama.cpp").parse(out)
    assert plain.content == "Let me check. "   # llama.cpp fidelity: held back, as before


def test_a_cut_marker_is_held_back_while_the_output_may_go_on():
    out = "Let me check. <tool_c"
    assert _parser(QWEN3_CODER, _request()).parse(out, True).content == "Let me check. "


def test_a_cut_marker_comes_back_once_with_the_lost_word_it_holds():
    case = CASES["kept6-vllm-minimax-m3-partial-start"]
    out = "plain ]<]mini"
    msg = _parser(case.template, case.request).parse(out)
    assert msg.content == out
    assert [r.name for r in msg.repairs] == ["cut-marker-text"]


def test_a_cut_call_after_a_kept_one_in_its_own_block_keeps_its_opener():
    # the cut call's own <tool_call> opens it: the tail starts there already, nothing to narrow
    out = "Hi " + _xml_call("Paris") + "\n" + _xml_call("Rome")[:-40]
    msg = _parser(QWEN3_CODER, _request(parallel_tool_calls=True)).parse(out)
    assert [c.name for c in msg.tool_calls] == ["get_weather"]
    assert msg.content == "Hi " + _xml_call("Rome")[:-40]
    assert "cut-call-own-text" not in {r.name for r in msg.repairs}


def test_the_cut_second_invoke_is_content_once_and_the_first_a_call():
    case = CASES["kept6-vllm-minimax-m3-cut-second-invoke"]
    msg = _parser(case.template, case.request).parse(case.output)
    first_end = case.output.index("]<]minimax[>[</invoke>") + len("]<]minimax[>[</invoke>")
    assert msg.content == "plain " + case.output[first_end:]
    assert case.output[first_end:first_end + 1] == "\n"


# -- glued-arguments (the Gemma call syntax) ----------------------------------------------------------------------

GEMMA4 = "google-gemma-4-31B-it.jinja"
TYPED = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "unit": {"type": "string"}, "days": {"type": "integer"}}}}}]


def _gemma4(args: str) -> str:
    return "<|tool_call>call:get_weather{" + args + "}<tool_call|>"


S = '<|"|>'


@pytest.mark.parametrize("args,want", [
    (f"city:{S}Paris{S}unit:{S}c{S}", '{"city":"Paris","unit":"c"}'),
    (f"city:{S}Paris{S}days:3", '{"city":"Paris","days":3}'),
    (f"city:{S}Paris{S},unit:{S}c{S}days:3", '{"city":"Paris","unit":"c","days":3}'),
])
def test_a_key_right_after_a_strings_closing_delimiter_is_the_next_argument(args, want):
    msg = _parser(GEMMA4, _request(tools=TYPED)).parse(_gemma4(args))
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", want)]
    assert "glued-arguments" in {r.name for r in msg.repairs}
    plain = _parser(GEMMA4, _request(tools=TYPED), "llama.cpp").parse(_gemma4(args))
    assert plain.tool_calls == []


def test_commas_written_fire_no_repair():
    msg = _parser(GEMMA4, _request(tools=TYPED)).parse(_gemma4(f"city:{S}Paris{S},days:3"))
    assert [c.arguments for c in msg.tool_calls] == ['{"city":"Paris","days":3}'] and not msg.repairs


def test_a_number_run_into_the_next_key_stays_rejected():
    out = _gemma4(f"days:3unit:{S}c{S}")
    msg = _parser(GEMMA4, _request(tools=TYPED)).parse(out)
    assert msg.tool_calls == [] and msg.content == out


# -- think-block-calls -------------------------------------------------------------------------------------------

M1 = "MiniMax-M1.jinja"   # JSON calls in <tool_calls> … </tool_calls>; the template knows no <think>


def _m1_calls(name: str, city: str = "Miami") -> str:
    return f'<tool_calls>\n{{"name": "{name}", "arguments": {{"city": "{city}"}}}}\n</tool_calls>'


def test_a_declared_call_inside_the_think_block_is_not_returned():
    think = "<think>Maybe " + _m1_calls("get_weather", "Rome") + " first.</think>"
    out = think + "\nSure. " + _m1_calls("get_weather")
    msg = _parser(M1, _request(), disabled=["leading-think-block"]).parse(out)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"city": "Miami"}')]
    assert msg.content == think + "\nSure. "
    assert "think-block-calls" in {r.name for r in msg.repairs}
    # with leading-think-block (on at improved) the block is reasoning; the call inside it is still not returned
    both = _parser(M1, _request()).parse(out)
    assert [(c.name, c.arguments) for c in both.tool_calls] == [("get_weather", '{"city": "Miami"}')]
    assert both.reasoning_content == think[len("<think>"):-len("</think>")] and both.content.strip() == "Sure."


def test_a_think_block_without_a_call_parses_as_before():
    out = "<think>plan</think>\nSure. " + _m1_calls("get_weather")
    msg = _parser(M1, _request(), disabled=["leading-think-block"]).parse(out)
    assert [c.name for c in msg.tool_calls] == ["get_weather"] and msg.content == "<think>plan</think>\nSure. "
    assert "think-block-calls" not in {r.name for r in msg.repairs}


def test_a_think_block_never_closed_is_thought_to_the_end():
    out = "<think>Maybe " + _m1_calls("get_weather")
    msg = _parser(M1, _request(), disabled=["leading-think-block"]).parse(out)
    assert msg.tool_calls == [] and msg.content == out   # as the stream showed it: content, never a call
    off = _parser(M1, _request(), disabled=["think-block-calls", "leading-think-block"]).parse(out)
    assert [c.name for c in off.tool_calls] == ["get_weather"]


# -- free-object-elements, leading-zero-integer (MiniMax-M3) ------------------------------------------------------

NS = "]<]minimax[>["


def _m3(body: str) -> str:
    return f'{NS}<tool_call>\n{NS}<invoke name="create_order">{body}{NS}</invoke>\n{NS}</tool_call>'


def _el(key: str, inner: str) -> str:
    return f"{NS}<{key}>{inner}{NS}</{key}>"


def _m3_parse(body: str, fidelity: str = "improved"):
    case = CASES["kept6-vllm-minimax-m3-nested"]
    return _parser(case.template, case.request, fidelity).parse(_m3(body))


@pytest.mark.parametrize("body,want", [
    (_el("metadata", _el("source", "mobile")), {"metadata": {"source": "mobile"}}),
    (_el("duplicate_demo", _el("tag", "a") + _el("tag", "b") + _el("tag", "c")),
     {"duplicate_demo": {"tag": ["a", "b", "c"]}}),
    (_el("duplicate_demo", _el("outer", _el("inner", "x"))), {"duplicate_demo": {"outer": {"inner": "x"}}}),
])
def test_an_object_without_declared_properties_is_read_from_its_elements(body, want):
    import json

    msg = _m3_parse(body)
    assert [json.loads(c.arguments) for c in msg.tool_calls] == [want]
    assert "free-object-elements" in {r.name for r in msg.repairs}
    assert _m3_parse(body, "llama.cpp").tool_calls == []


def test_an_object_without_properties_written_as_json_reads_as_before():
    msg = _m3_parse(_el("metadata", '{"source": "mobile"}'))
    assert [c.arguments for c in msg.tool_calls] == ['{"metadata":{"source": "mobile"}}'] and not msg.repairs


def test_an_integer_with_leading_zeros_is_its_value_and_no_word_is_lost():
    body = _el("user_id", "0042")
    msg = _m3_parse(body)
    assert [c.arguments for c in msg.tool_calls] == ['{"user_id":42}']
    assert msg.content == "" and "leading-zero-integer" in {r.name for r in msg.repairs}
    assert _m3_parse(_el("user_id", "42")).repairs == []
