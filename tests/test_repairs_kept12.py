"""Repairs written from the parse-class misses of the development sets (real_outputs_kept11, real_outputs_kept12,
real_outputs_reports3): each on the sets' own cases (every case cites its public source), where it fires, that it
is switchable and that the llama.cpp fidelity reads the output as before."""

from __future__ import annotations

import json

import pytest

from core.chat.casefiles import parse_case
from core.chat.char_audit import audit_parse
from core.chat.realset import load_cases

from .conftest import ROOT, TEMPLATES
from .test_reasoning_repairs import _names, _streamed

CASES = {c.id: c for name in ("real_outputs_kept12", "real_outputs_kept11", "real_outputs_kept6")
         for c in load_cases(str(ROOT / "tests" / "data" / name))}
DRIFTED = ["kept12-sglang-qwen3coder-drifted-end-marker-parameter1",
           "kept12-sglang-qwen3coder-drifted-end-marker-parameter-function",
           "kept12-sglang-qwen3coder-drifted-end-marker-bare"]
MARKERS = ["</parameter1>", "</parameter_function>", "</parameter"]
# SGLang's test_closed_value_ending_like_a_marker_is_kept (the same file as the three cases above,
# https://github.com/sgl-project/sglang/blob/0bbe61a61a1964be3758c1672c5522aa3aafdd6b/test/registered/unit/
# function_call/test_qwen3_coder_detector.py): its _call() around the value "x </parameterList>" closed by a real
# </parameter>; the detector keeps the value whole
CLOSED_LIKE_A_MARKER = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nx </parameterList>\n</parameter>\n"
                        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")


def _parse(case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None):
    case = CASES[case_id]
    return parse_case(str(TEMPLATES), case.template, case.request, case.output if output is None else output,
                      fidelity, disabled_repairs=disabled)


# -- drifted-closing-tag (Qwen3-Coder) -----------------------------------------------------------------------------

@pytest.mark.parametrize("case_id,marker", list(zip(DRIFTED, MARKERS)))
def test_drifted_parameter_closer_is_markup(case_id, marker):
    parser, msg = _parse(case_id)
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [
        ("get_weather", {"city": "Shanghai", "days": 3})]
    assert not msg.content
    fired = [r for r in msg.repairs if r.name == "drifted-closing-tag"]
    assert [r.text.strip() for r in fired] == [marker]
    assert CASES[case_id].output[fired[0].start:fired[0].end].strip() == marker
    assert not audit_parse(parser, CASES[case_id].output, msg).lost()
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[case_id].output, size).to_openai() == msg.to_openai()


@pytest.mark.parametrize("case_id,marker", list(zip(DRIFTED, MARKERS)))
def test_drifted_parameter_closer_stays_in_the_value_without_the_repair(case_id, marker):
    for kw in ({"disabled": ("drifted-closing-tag",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(case_id, **kw)
        assert "drifted-closing-tag" not in _names(msg)
        assert marker in (msg.content + "".join(c.arguments for c in msg.tool_calls))


def test_value_closed_by_its_real_closer_keeps_a_marker_like_ending():
    parser, msg = _parse(DRIFTED[0], output=CLOSED_LIKE_A_MARKER)
    assert [json.loads(c.arguments) for c in msg.tool_calls] == [{"city": "x </parameterList>", "days": 3}]
    assert "drifted-closing-tag" not in _names(msg)
    for size in (1, 3, 17):
        assert _streamed(parser, CLOSED_LIKE_A_MARKER, size).to_openai() == msg.to_openai()


# -- call-section-omitted (DeepSeek V4 DSML) ---------------------------------------------------------------------

BARE_INVOKE = "kept11-sglang-dsv4-preamble-before-bare-invoke"
# the V3.2 section marker around V4's invokes: the V4 parser reads neither it nor the invoke inside as a call
OTHER_SECTION = "kept6-vllm-dsv4-function-calls-block"
NO_CALL = "kept6-vllm-dsv32-no-tool-call"


def test_invoke_without_its_section_is_a_call_after_the_content():
    parser, msg = _parse(BARE_INVOKE)
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [("get_weather", {"city": "SF"})]
    assert msg.content.strip() == "Checking."
    assert _names(msg) == ["call-section-omitted"]
    assert not audit_parse(parser, CASES[BARE_INVOKE].output, msg).lost()
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[BARE_INVOKE].output, size).to_openai() == msg.to_openai()


def test_invoke_without_its_section_stays_content_without_the_repair():
    for kw in ({"disabled": ("call-section-omitted",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(BARE_INVOKE, **kw)
        assert not msg.tool_calls and msg.content == CASES[BARE_INVOKE].output


@pytest.mark.parametrize("case_id", [OTHER_SECTION, NO_CALL])
def test_outputs_without_a_bare_invoke_record_no_section_repair(case_id):
    _, msg = _parse(case_id)
    assert "call-section-omitted" not in _names(msg)
    assert msg.to_openai()["content"].strip() == (CASES[case_id].expect.get("content") or "").strip()


@pytest.mark.parametrize("flood", ["<" * 400, "a<b " * 100, "<｜DSML｜i" * 50, "<｜DSML｜invoke" * 40])
def test_a_flood_of_opener_starts_before_a_bare_invoke(flood):
    """call-section-omitted's scan looks ahead for the invoke opener at every ``<`` (its first character first, so
    a text of many ``<`` is not read an opener's length ahead at each): a flood of ``<`` or of cut openers before
    the case's bare invoke is content and the invoke still the call; whole openers in the content end it there,
    the invokes do not read from there, and the whole output is content. Streamed as one-shot, nothing lost."""
    out = CASES[BARE_INVOKE].output
    text = out.replace("Checking.", "Checking." + flood, 1)
    parser, msg = _parse(BARE_INVOKE, output=text)
    if flood.endswith("invoke"):
        assert msg.tool_calls == [] and msg.content == text and not _names(msg)
    else:
        assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [("get_weather", {"city": "SF"})]
        assert msg.content == "Checking." + flood
        assert _names(msg) == ["call-section-omitted"]
    assert not audit_parse(parser, text, msg).lost()
    for size in (1, 3, 17):
        assert _streamed(parser, text, size).to_openai() == msg.to_openai()


# SGLang's V4 detector case with the section (kept11-sglang-dsv4-preamble-in-same-delta, the same test file as the
# bare invoke): its output cut by the end inside the section, before the call's name is read
IN_SECTION = "kept11-sglang-dsv4-preamble-in-same-delta"


@pytest.mark.parametrize("cut", [41, 42, 54, 55])
def test_a_call_section_cut_before_the_name_is_given_back_whole(cut):
    """Cut after ``<｜DSML｜tool_calls>\\n<｜DSML｜i`` (or ``…invoke name="g``): with call-section-omitted on, the
    final parse kept only ``Let me check.\\n`` and lost the rest — the repair's ``\\n<｜DSML｜invoke`` literal let
    the character audit place the content's line break after the section opener, and a field after the lost
    text's start kept unparsed-characters from giving it back. It is given back as without the repair."""
    out = CASES[IN_SECTION].output[:cut]
    parser, msg = _parse(IN_SECTION, output=out)
    assert msg.content == out and msg.tool_calls == [] and _names(msg) == ["unparsed-characters"]
    assert not audit_parse(parser, out, msg).lost()
    _, without = _parse(IN_SECTION, output=out, disabled=("call-section-omitted",))
    assert without.to_openai() == msg.to_openai()
