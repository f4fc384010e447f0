"""Repairs written from the misses of the development sets real_outputs_kept13, real_outputs_kept14 and
real_outputs_kept15: each on the sets' own cases (every case cites its public source), where it fires, that it
is switchable and that the llama.cpp fidelity reads the output as before."""

from __future__ import annotations

import json

import pytest

from core.chat.casefiles import parse_case
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES
from .repair_checks import calls, cases_of, check_streams, parse_in
from .test_reasoning_repairs import _names

CASES = cases_of("real_outputs_kept13", "real_outputs_kept14", "real_outputs_kept15")
_calls, _check_streams = calls, check_streams


def _parse(case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None):
    return parse_in(CASES, case_id, fidelity, disabled, output)


# -- args-separator-omitted (Hy v4: no <tool_sep:opensource> after the name) -------------------------------------

NO_SEPARATOR = {
    "kept13-vllm-hy-v4-value-coercion-s-beijing": ("typed", {"s": "Beijing"}),
    "kept13-vllm-hy-v4-value-coercion-s-empty": ("typed", {"s": ""}),
    "kept13-vllm-hy-v4-value-coercion-i-3": ("typed", {"i": 3}),
    "kept13-vllm-hy-v4-value-coercion-i-minus-7": ("typed", {"i": -7}),
    "kept13-vllm-hy-v4-value-coercion-b-true": ("typed", {"b": True}),
    "kept14-sglang-hunyuan-hy4-format-without-tool-separator": ("get_weather", {"city": "Beijing"}),
}


@pytest.mark.parametrize("case_id", sorted(NO_SEPARATOR))
def test_call_without_its_args_separator_is_read(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert _calls(msg) == [NO_SEPARATOR[case_id]]
    assert not msg.content
    fired = [r for r in msg.repairs if r.name == "args-separator-omitted"]
    name = NO_SEPARATOR[case_id][0]
    # the record sits right after the name, where the separator was left out
    assert [(r.start, r.end) for r in fired] == [(output.index(name) + len(name),) * 2]
    _check_streams(parser, output, msg)


@pytest.mark.parametrize("case_id", sorted(NO_SEPARATOR))
def test_call_without_its_args_separator_is_content_without_the_repair(case_id):
    for kw in ({"disabled": ("args-separator-omitted",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(case_id, **kw)
        assert not msg.tool_calls and msg.content == CASES[case_id].output
        assert "args-separator-omitted" not in _names(msg)


def test_the_repair_leaves_the_grammar_byte_identical():
    """The separator was made a choice in the tree as it was built, so the GBNF at improved wrapped it in
    parentheses (`("<tool_sep:opensource>")`) where the repair switched off writes it bare; widened once the tree
    is built, as the other tolerance repairs are, the grammar is the same text."""
    case = CASES["kept14-sglang-hunyuan-hy4-format-without-tool-separator"]
    template = ChatTemplate((TEMPLATES / case.template).read_text(encoding="utf-8"), case.template)
    grammars = [build_chat_parser(template, ChatRequest.from_dict(case.request), fidelity="improved",
                                  disabled_repairs=off).parser.grammar for off in ((), ("args-separator-omitted",))]
    assert '"<tool_sep:opensource>"' in grammars[1]
    assert grammars[0] == grammars[1]


def test_call_with_its_separator_does_not_fire_the_repair():
    # the same call as the template writes it (kept14's case with <tool_sep:opensource> put back after the name)
    case_id = "kept14-sglang-hunyuan-hy4-format-without-tool-separator"
    output = CASES[case_id].output.replace("get_weather", "get_weather<tool_sep:opensource>")
    parser, msg = _parse(case_id, output=output)
    assert _calls(msg) == [("get_weather", {"city": "Beijing"})]
    assert "args-separator-omitted" not in _names(msg)
    _check_streams(parser, output, msg)


# -- action-after-text (Cohere's action block after text, text after it) ------------------------------------------

ACTION_AFTER_TEXT_CASES = {
    "kept14-sglang-cohere4-parallel-calls-leading-text": "Sure! ",
    "kept14-sglang-cohere4-streaming-text-then-block": "Let me check. ",
    "kept14-sglang-cohere4-stream-leading-text-complete-call": "Let me check.",
    "kept14-sglang-cohere4-stream-trailing-text-preserved": "Let me check.All set.",
    "kept14-sglang-cohere4-stream-two-calls-one-action-block": "Let me check.",
}


@pytest.mark.parametrize("case_id", sorted(ACTION_AFTER_TEXT_CASES))
def test_action_block_after_text_is_read(case_id):
    parser, msg = _parse(case_id)
    case = CASES[case_id]
    output = case.output
    assert msg.content == ACTION_AFTER_TEXT_CASES[case_id]
    assert _calls(msg) == [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in case.expect["tool_calls"]]
    fired = [(r.start, r.end) for r in msg.repairs if r.name == "action-after-text"]
    block = (output.index("<|START_ACTION|>"), output.index("<|END_ACTION|>") + len("<|END_ACTION|>"))
    assert block in fired
    _check_streams(parser, output, msg)


@pytest.mark.parametrize("case_id", sorted(ACTION_AFTER_TEXT_CASES))
def test_action_block_after_text_is_content_without_the_repair(case_id):
    for kw in ({"disabled": ("action-after-text",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(case_id, **kw)
        assert not msg.tool_calls and "action-after-text" not in _names(msg)
        assert "<|START_ACTION|>" in msg.content


def test_action_block_alone_and_answer_alone_fire_nothing_new():
    # kept14's block with no text around it (SGLang's test_single_tool_call), its plain answers
    # (test_no_tool_call, test_plain_text): read as before, the repair not reported
    for case_id in ("kept14-sglang-cohere4-single-tool-call", "kept14-sglang-cohere4-no-tool-call",
                    "kept14-sglang-cohere4-stream-plain-text"):
        parser, msg = _parse(case_id)
        _, before = _parse(case_id, disabled=("action-after-text",))
        assert msg.to_openai() == before.to_openai() and msg.repairs == before.repairs, case_id
        assert "action-after-text" not in _names(msg)
        _check_streams(parser, CASES[case_id].output, msg)


# -- tag-attribute-space (MiniCPM5: <functionname=…>, <paramĠname=…>) --------------------------------------------

COLLAPSED = ["kept13-vllm-minicpm5-tokenizer-space-marker", "kept13-vllm-minicpm5-collapsed-function-and-param-tags",
             "kept13-vllm-minicpm5-collapsed-param-tags-tokenizer-space-function",
             "kept13-vllm-minicpm5-collapsed-tags-current-weather"]


@pytest.mark.parametrize("case_id", COLLAPSED)
def test_collapsed_or_marked_tag_space_is_read(case_id):
    parser, msg = _parse(case_id)
    case = CASES[case_id]
    output = case.output
    assert _calls(msg) == [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in case.expect["tool_calls"]]
    assert not msg.content.strip()
    fired = [output[r.start:r.end] for r in msg.repairs if r.name == "tag-attribute-space"]
    # one record per tag written without its plain space: the function's and each parameter's
    tags = [t for t in ("<functionname=\"", "<function\u0120name=\"", "<paramname=\"", "<param\u0120name=\"")
            for _ in range(output.count(t))]
    assert sorted(fired) == sorted(tags) and len(fired) == output.count("name=")
    _check_streams(parser, output, msg)


@pytest.mark.parametrize("case_id", COLLAPSED)
def test_collapsed_tag_space_is_content_without_the_repair(case_id):
    for kw in ({"disabled": ("tag-attribute-space",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(case_id, **kw)
        assert not msg.tool_calls and "tag-attribute-space" not in _names(msg)
        assert msg.content.strip() == CASES[case_id].output.strip()


def test_tags_as_the_template_writes_them_fire_nothing():
    # kept13's MiniCPM5 call streamed in pieces (vLLM's test_streaming_partial_chunks): the template's own tags
    case_id = "kept13-vllm-minicpm5-streaming-partial-chunks"
    parser, msg = _parse(case_id)
    assert msg.tool_calls and "tag-attribute-space" not in _names(msg)
    _check_streams(parser, CASES[case_id].output, msg)


# -- python-literal-values (improvement): no literal of a type the schema does not allow -------------------------

def test_number_for_a_string_or_null_parameter_stays_a_string():
    # vLLM's test_anyof_string_null_keeps_value_as_string: code is anyOf string | null, the value 42 is the text "42"
    case_id = "kept13-vllm-qwen3coder-shared-anyof-string-null-keeps-string"
    parser, msg = _parse(case_id)
    assert _calls(msg) == [("set_code", {"code": "42"})]
    _check_streams(parser, CASES[case_id].output, msg)


# -- union-typed-value (GLM-4.7: a string-or-other value typed by the JSON it is) ---------------------------------

UNION = {
    "kept15-sglang-glm47-field-types-string-or-integer-7": 7,
    "kept15-sglang-glm47-field-types-string-or-object-object": {"ok": False},
}


@pytest.mark.parametrize("case_id", sorted(UNION))
def test_union_value_is_typed_by_its_json(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert _calls(msg) == [("inspect", {"value": UNION[case_id]})]
    fired = [output[r.start:r.end] for r in msg.repairs if r.name == "union-typed-value"]
    assert fired == [output[output.index("<arg_value>") + len("<arg_value>"):output.index("</arg_value>")]]
    _check_streams(parser, output, msg)


@pytest.mark.parametrize("case_id", sorted(UNION))
def test_union_value_is_a_string_without_the_repair(case_id):
    for kw in ({"disabled": ("union-typed-value",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(case_id, **kw)
        assert "union-typed-value" not in _names(msg)
        assert _calls(msg) == [("inspect", {"value": json.dumps(UNION[case_id]) if case_id.endswith("object")
                                            else str(UNION[case_id])})]


def test_union_value_that_is_no_other_type_stays_a_string():
    # SGLang's table entry ({"type": ["integer", "string"]}, "auto"): the text is no integer, so the string "auto"
    case_id = "kept15-sglang-glm47-field-types-integer-or-string-auto"
    parser, msg = _parse(case_id)
    assert _calls(msg) == [("inspect", {"value": "auto"})]
    assert "union-typed-value" not in _names(msg)
    _check_streams(parser, CASES[case_id].output, msg)


# -- string-opener-omitted (Gemma 4: key:text<|"|> without the opening <|"|>) ------------------------------------

UNOPENED = {
    "kept15-sglang-gemma4-omitted-opening-delimiter": {"query": "weather in Tokyo"},
    "kept15-sglang-gemma4-omitted-opening-delimiter-with-comma": {"query": "Paris, France", "limit": 5},
    "kept15-sglang-gemma4-omitted-opening-delimiter-in-nested-object": {"filters": {"city": "Tokyo"}, "query": "x"},
    "kept15-sglang-gemma4-omitted-opening-delimiter-in-array": {"query": ["a", "b"]},
}


@pytest.mark.parametrize("case_id", sorted(UNOPENED))
def test_string_without_its_opening_delimiter_is_read(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert _calls(msg) == [("web_search", UNOPENED[case_id])]
    assert not msg.content
    fired = [output[r.start:r.end] for r in msg.repairs if r.name == "string-opener-omitted"]
    assert len(fired) == 1 and fired[0].endswith('<|"|>') and not fired[0].startswith('<|"|>')
    _check_streams(parser, output, msg)


@pytest.mark.parametrize("case_id", sorted(UNOPENED))
def test_string_without_its_opening_delimiter_is_content_without_the_repair(case_id):
    for kw in ({"disabled": ("string-opener-omitted",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(case_id, **kw)
        assert not msg.tool_calls and "string-opener-omitted" not in _names(msg)
        assert msg.content == CASES[case_id].output


def test_recorded_gemma4_value_opened_by_a_plain_quote_is_read():
    # gemma4:e4b through ollama (https://github.com/ollama/ollama/issues/15315, triage row
    # kept12-ollama-15315-gemma4-e4b-plain-quote-for-delimiter): `pattern:':\s*\w+'<|"|>`, a plain ' where the
    # opening <|"|> belongs; the value is the text up to the closing delimiter
    row = next(json.loads(line) for line in open(ROOT / "tests" / "data" / "triage" / "kept12.jsonl", encoding="utf-8")
               if json.loads(line)["id"] == "kept12-ollama-15315-gemma4-e4b-plain-quote-for-delimiter")
    request = {k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls") if k in row}
    parser, msg = parse_case(str(TEMPLATES), row["template"], request, row["input"], "improved")
    assert _calls(msg) == [("grep", {"include": "*.py", "output_mode": "content", "path": "/data/robotics/experiment1",
                                     "pattern": "':\\s*\\w+'"})]
    assert "string-opener-omitted" in _names(msg)
    _check_streams(parser, row["input"], msg)
    _, before = parse_case(str(TEMPLATES), row["template"], request, row["input"], "llama.cpp")
    assert not before.tool_calls
