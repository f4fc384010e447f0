"""Repairs written from the misses of real_outputs_kept11 (development data since the round after its first
measure): each on the batch's own cases (every case cites its public source), where it fires, that it is
switchable and that the llama.cpp fidelity reads the output as before."""

from __future__ import annotations

from core.chat.casefiles import parse_case
from core.chat.realset import load_cases

from .conftest import ROOT, TEMPLATES
from .test_reasoning_repairs import _names, _streamed

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept11"))}
CHANNEL = "kept11-vllm-gemma4-reasoning-reasoning"
CHANNEL_OPEN = "kept11-vllm-gemma4-reasoning-no-content"
# the same fixture file's invalid_simple: an end marker with no <|channel> before it (not read by the repair)
NO_START = "kept11-vllm-gemma4-reasoning-invalid-simple"
TWO_SECTIONS = "kept11-sglang-apertus-multiple-blocks-trailing-text"
ONE_SECTION = "kept11-sglang-apertus-single-block-control"


def _parse(case_id: str, fidelity: str = "improved", disabled=()):
    case = CASES[case_id]
    return parse_case(str(TEMPLATES), case.template, case.request, case.output, fidelity, disabled_repairs=disabled)


# -- thought-label-omitted (Gemma 4) -----------------------------------------------------------------------------

def test_gemma4_channel_without_its_label_is_the_reasoning():
    parser, msg = _parse(CHANNEL)
    assert (msg.reasoning_content, msg.content) == ("This is a reasoning section", "This is the rest")
    assert _names(msg) == ["thought-label-omitted"]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[CHANNEL].output, size).to_openai() == msg.to_openai()


def test_gemma4_channel_never_closed_is_reasoning_to_the_end():
    parser, msg = _parse(CHANNEL_OPEN)
    assert (msg.reasoning_content, msg.content) == ("This is reasoning", "")
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[CHANNEL_OPEN].output, size).to_openai() == msg.to_openai()


def test_gemma4_channel_without_its_label_stays_content_without_the_repair():
    for kw in ({"disabled": ("thought-label-omitted",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(CHANNEL, **kw)
        assert not msg.reasoning_content and msg.content == CASES[CHANNEL].output


def test_gemma4_end_marker_without_a_channel_is_not_read_as_reasoning():
    _, msg = _parse(NO_START)
    assert not msg.reasoning_content and "thought-label-omitted" not in _names(msg)


# -- content-between-calls, JSON call sections (Apertus) ---------------------------------------------------------

def test_apertus_second_section_after_text_is_read():
    # (the arguments keep the JSON text as written: the output spells Zürich Z\u00fcrich)
    parser, msg = _parse(TWO_SECTIONS)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [
        ("get_weather", '{"city": "Z\\u00fcrich"}'), ("get_time", "{}"), ("get_weather", '{"city": "Tokyo"}')]
    assert msg.content == "beforebetweendone" and _names(msg) == ["content-between-calls"]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[TWO_SECTIONS].output, size).to_openai() == msg.to_openai()


def test_apertus_second_section_without_the_repair_stays_content():
    tail = '<|tools_prefix|>[{"get_time": {}}, {"get_weather": {"city": "Tokyo"}}]<|tools_suffix|>done'
    for kw in ({"disabled": ("content-between-calls",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(TWO_SECTIONS, **kw)
        assert len(msg.tool_calls) == 1 and msg.content == "beforebetween" + tail


def test_apertus_one_section_with_text_after_it_records_no_repair():
    _, msg = _parse(ONE_SECTION)
    assert [c.name for c in msg.tool_calls] == ["get_time"] and msg.content == "done" and _names(msg) == []
