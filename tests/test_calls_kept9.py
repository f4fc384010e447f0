"""The tool-call class of the ninth real-output batch (tests/data/real_outputs_kept9, the model text mlx-lm's,
TensorRT-LLM's and lmdeploy's own parser tests feed their parsers; development data since its first measure).

Repairs ``json-arguments-body``, ``section-opener-repeated``, ``schema-type-alias`` and the widened
``tag-whitespace`` (DeepSeek DSML), ``call-marker-whitespace`` (Kimi K2 between calls) and ``json-call-in-tags``
(GLM), and ``nullable-null`` (read on kept7's MiniMax-M2 explicit null) (core/chat/repairs.py,
docs/realset-baseline.md "kept9 as development data"). Each is shown on the kept9
cases that need it (each case cites its public source in its file): right at ``improved`` one-shot and streamed,
with its record; switched off, the case fails again; at ``llama.cpp`` fidelity the message stays llama.cpp's. The
shapes beside them are checked on outputs written here from each format's markup."""

from __future__ import annotations

import json

import pytest

from core.chat.char_audit import audit_parse
from core.chat.realset import load_cases
from core.chat.repairs import string_type_alias

from .conftest import ROOT, TEMPLATES
from .test_calls_kept7 import _parser, check_repairs_needed

CASES = {c.id: c for d in ("real_outputs_kept9", "real_outputs_kept7")
         for c in load_cases(str(ROOT / "tests" / "data" / d))}

# case id -> the repairs its right message needs (switched off together, the case fails)
NEEDS = {
    "kept9-trt-dsv32-single": {"tag-whitespace"},
    "kept9-trt-dsv4-single": {"tag-whitespace"},
    "kept9-trt-dsv32-json-body": {"json-arguments-body"},
    "kept9-trt-dsv4-json-body": {"json-arguments-body"},
    "kept9-trt-dsv32-multiple": {"tag-whitespace", "json-arguments-body"},
    "kept9-trt-dsv4-multiple": {"tag-whitespace", "json-arguments-body"},
    "kept9-trt-dsv3-multiple": {"section-opener-repeated"},
    "kept9-trt-dsv31-multiple": {"section-opener-repeated"},
    "kept9-trt-kimi-multiple": {"call-marker-whitespace"},
    "kept9-mlx-minimax-temperature": {"schema-type-alias"},
    "kept9-mlx-glm47-json": {"json-call-in-tags"},
    "kept7-sgl-minimaxm2-anyof-null": {"nullable-null"},
}


@pytest.mark.parametrize("case_id", sorted(NEEDS))
def test_each_repair_on_the_kept9_cases_that_need_it(case_id):
    check_repairs_needed(CASES[case_id], NEEDS[case_id])


def _args(msg) -> list[dict]:
    return [json.loads(c.arguments) for c in msg.tool_calls]


def test_a_dsml_body_that_is_no_json_object_stays_content():
    case = CASES["kept9-trt-dsv32-json-body"]
    parser = _parser(case.template, case.request)
    for body in ('["test"]', '{ "query": "test" ', "query=test"):
        out = ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="search_web">\n' + body
               + '\n</｜DSML｜invoke>\n</｜DSML｜function_calls>')
        msg = parser.parse(out)
        assert not msg.tool_calls and msg.content == out, body


def test_a_dsml_call_in_the_templates_layout_is_read_without_a_repair():
    case = CASES["kept9-trt-dsv32-single"]
    out = ('<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="location" '
           'string="true">NYC</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>')
    msg = _parser(case.template, case.request).parse(out)
    assert _args(msg) == [{"location": "NYC"}] and not msg.repairs


def test_a_section_opener_repeated_with_no_call_after_it_is_no_call():
    case = CASES["kept9-trt-dsv31-multiple"]
    parser = _parser(case.template, case.request)
    first = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"location": "Paris"}<｜tool▁call▁end｜>'
    out = first + "<｜tool▁calls▁begin｜>done"
    msg = parser.parse(out)
    assert [c.name for c in msg.tool_calls] == ["get_weather"]
    assert "section-opener-repeated" not in {r.name for r in msg.repairs}
    # the text after the stray opener is content; the opener, the section's own markup, is accounted as markup
    assert msg.content == "done" and not audit_parse(parser, out, msg).lost()
    # three calls, the opener written again before each further one
    second = first.replace("Paris", "Rome")
    msg = parser.parse(first + second + second.replace("Rome", "Oslo") + "<｜tool▁calls▁end｜>")
    assert _args(msg) == [{"location": "Paris"}, {"location": "Rome"}, {"location": "Oslo"}] and not msg.content


def test_a_str_typed_parameter_keeps_its_text_and_other_types_are_unchanged():
    case = CASES["kept9-mlx-minimax-temperature"]
    parser = _parser(case.template, case.request)
    out = ('<minimax:tool_call><invoke name="get_current_temperature">\n<parameter name="location">123'
           '</parameter>\n</invoke></minimax:tool_call>')
    assert _args(parser.parse(out)) == [{"location": "123"}]   # the raw text, not the number JSON would read
    typed = json.loads(json.dumps(case.request))
    typed["tools"][0]["function"]["parameters"]["properties"]["location"]["type"] = "integer"
    msg = _parser(case.template, typed).parse(out)
    assert _args(msg) == [{"location": 123}] and "schema-type-alias" not in {r.name for r in msg.repairs}


@pytest.mark.parametrize("schema,alias", [({"type": "str"}, True), ({"type": " Text "}, True),
                                          ({"type": "string"}, False), ({"type": "integer"}, False),
                                          ({"type": ["str", "null"]}, False), ({}, False), (None, False)])
def test_string_type_alias(schema, alias):
    assert string_type_alias(schema) is alias


def test_whitespace_between_kimi_calls_is_read_only_at_improved():
    case = CASES["kept9-trt-kimi-multiple"]
    out = case.output.replace("<|tool_calls_section_end|>", "\n<|tool_calls_section_end|>")
    msg = _parser(case.template, case.request).parse(out)
    assert [c.name for c in msg.tool_calls] == ["get_weather", "search_web"] and not msg.content
    plain = _parser(case.template, case.request, "llama.cpp").parse(out)
    assert [c.name for c in plain.tool_calls] == ["get_weather"]


def test_a_json_call_in_glm_tags_needs_a_declared_tool():
    case = CASES["kept9-mlx-glm47-json"]
    out = case.output.replace('"multiply"', '"divide"')
    msg = _parser(case.template, case.request).parse(out)
    assert not msg.tool_calls and msg.content == out


def test_only_an_exact_null_of_a_nullable_string_parameter_is_null():
    case = CASES["kept7-sgl-minimaxm2-anyof-null"]
    parser = _parser(case.template, case.request)
    for text, value in (("null", None), ("nullable", "nullable"), (" null", " null"), ("Null", "Null")):
        out = case.output.replace(">null<", ">" + text + "<")
        assert _args(parser.parse(out)) == [{"args": value}], text
    plain = json.loads(json.dumps(case.request))
    plain["tools"][0]["function"]["parameters"]["properties"]["args"] = {"type": "string"}
    msg = _parser(case.template, plain).parse(case.output)
    assert _args(msg) == [{"args": "null"}] and "nullable-null" not in {r.name for r in msg.repairs}
