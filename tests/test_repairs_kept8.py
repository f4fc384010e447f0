"""Repairs written from the misses of real_outputs_kept8 (development data since its first measure): each on the
batch's own cases (every case cites its public source), where it fires, that it is switchable and that the
llama.cpp fidelity reads the output as before."""

from __future__ import annotations

from core.chat.pipeline import build_chat_parser
from core.chat.casefiles import parse_case
from core.chat.realset import load_cases
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES
from .test_reasoning_repairs import _names, _streamed

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept8"))}


def _parse(case_id: str, fidelity: str = "improved", disabled=()):
    case = CASES[case_id]
    return parse_case(str(TEMPLATES), case.template, case.request, case.output, fidelity, disabled_repairs=disabled)


# -- reasoning-start-repeated in the Kimi K3 format --------------------------------------------------------------

def test_kimi_k3_think_opener_written_again_is_markup():
    parser, msg = _parse("kept8-vllm-kimik3-xtml")   # <|open|>think<|sep|>step<|close|>think<|sep|>…answer
    assert (msg.reasoning_content, msg.content) == ("step", "answer")
    assert "reasoning-start-repeated" in _names(msg)
    for size in (1, 3, 17):
        assert _streamed(parser, CASES["kept8-vllm-kimik3-xtml"].output, size).to_openai() == msg.to_openai()


def test_kimi_k3_repeated_opener_without_the_repair_stays_reasoning():
    for kw in ({"disabled": ("reasoning-start-repeated",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse("kept8-vllm-kimik3-split-open", **kw)
        assert msg.reasoning_content == "<|open|>think<|sep|>step"
        assert "reasoning-start-repeated" not in _names(msg)


# -- content-between-calls in the MiniCPM5 format ----------------------------------------------------------------

def test_minicpm5_text_between_and_after_calls_is_content_with_its_whitespace():
    parser, msg = _parse("kept8-sgl-minicpm5-interleaved")   # Head\n<function…>…\nTXT\n<function…>…\nTail\n
    assert msg.content == "Head\n\nTXT\n\nTail\n"
    assert [c.name for c in msg.tool_calls] == ["get_weather", "sum_values"]
    assert [(r.name, r.text) for r in msg.repairs] == [("content-between-calls", "\nTXT\n"),
                                                        ("content-between-calls", "\nTail\n")]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES["kept8-sgl-minicpm5-interleaved"].output, size).to_openai() == msg.to_openai()


def test_minicpm5_without_the_repair_ends_the_calls_at_the_text():
    for kw in ({"disabled": ("content-between-calls",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse("kept8-sgl-minicpm5-interleaved", **kw)
        assert [c.name for c in msg.tool_calls] == ["get_weather"]
        assert msg.content.startswith("Head\nTXT\n<function name=\"sum_values\">")


# -- json-calls-in-call-markers (LFM2) ------------------------------------------------------------------------------

def test_lfm2_json_call_list_inside_its_call_markers_is_a_call():
    parser, msg = _parse("kept8-sgl-lfm2-json")   # <|tool_call_start|>[{"name": "search", …}]<|tool_call_end|>
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("search", '{"query": "sglang"}')]
    assert msg.content == "" and _names(msg) == ["json-calls-in-call-markers"]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES["kept8-sgl-lfm2-json"].output, size).to_openai() == msg.to_openai()


def test_lfm2_json_call_list_without_the_repair_stays_content():
    for kw in ({"disabled": ("json-calls-in-call-markers",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse("kept8-sgl-lfm2-json", **kw)
        assert msg.tool_calls == [] and msg.content == CASES["kept8-sgl-lfm2-json"].output


def test_lfm2_pythonic_list_is_still_read_first():
    _, msg = _parse("kept8-sgl-lfm2-two-calls")
    assert [c.name for c in msg.tool_calls] == ["get_weather", "search"] and not _names(msg)


# -- quoted-number (GLM-4.5 tagged arguments) -------------------------------------------------------------------------

def test_glm45_quoted_digits_for_a_number_parameter_are_the_number():
    parser, msg = _parse("kept8-sgl-glm45-type-coercion")   # <arg_key>count</arg_key>\n<arg_value>"42"</arg_value>
    assert msg.tool_calls[0].arguments == '{"city":"北京","count":42,"filters":{"a": 1}}'
    assert "quoted-number" in _names(msg)
    for size in (1, 3, 17):
        assert _streamed(parser, CASES["kept8-sgl-glm45-type-coercion"].output, size).to_openai() == msg.to_openai()


def test_glm45_quoted_digits_without_the_repair_stay_a_string():
    _, msg = _parse("kept8-sgl-glm45-type-coercion", disabled=("quoted-number",))
    assert msg.tool_calls[0].arguments == '{"city":"北京","count":"42","filters":{"a": 1}}'
    assert "quoted-number" not in _names(msg)
    _, msg = _parse("kept8-sgl-glm45-type-coercion", fidelity="llama.cpp")   # the line breaks are not its layout
    assert msg.tool_calls == [] and msg.content == CASES["kept8-sgl-glm45-type-coercion"].output


# -- content-between-calls in the Qwen3-Coder format (kept6 and kept8 cases) ---------------------------------------

KEPT6 = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept6"))}


def test_qwen3_coder_text_after_the_call_keeps_its_line_breaks():
    case = KEPT6["kept6-vllm-qwen3xml-surrounding-text"]   # …for you.\n\n<tool_call>…</tool_call>\n\nI will get…
    template = ChatTemplate((TEMPLATES / case.template).read_text(encoding="utf-8"), case.template)
    for disabled, content in (((), "Let me check the weather for you.\n\n\n\nI will get that information."),
                              (("content-between-calls",), "Let me check the weather for you.\n\nI will get that "
                                                           "information.")):
        parser = build_chat_parser(template, ChatRequest.from_dict(case.request), fidelity="improved",
                                   disabled_repairs=disabled).parser
        msg = parser.parse(case.output, False)
        assert msg.content == content and [c.name for c in msg.tool_calls] == ["get_weather"]
        assert ("content-between-calls" in _names(msg)) is not bool(disabled)
        for size in (1, 3, 17):
            assert _streamed(parser, case.output, size).to_openai() == msg.to_openai()


def test_step35_text_between_two_calls_is_content_and_the_second_call_a_call():
    _, msg = _parse("kept8-sgl-step35-interleaved")   # hello<tool_call>…</tool_call>between<tool_call>…bye
    assert [c.name for c in msg.tool_calls] == ["bash", "weather"] and msg.content == "betweenbye"
    assert msg.reasoning_content == "hello"   # the prompt opened <think>: the policy of docs/fidelity-reasoning.md
