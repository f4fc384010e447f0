"""The reasoning repairs written from the sixth real-output batch (tests/data/real_outputs_kept6: vLLM's own parser
tests, each case cites its source; docs/fidelity-reasoning.md "Where reasoning starts and ends (kept6)"): each
repair fires where its rule says and not elsewhere, is switchable, streams as it parses one-shot, and leaves the
llama.cpp fidelity as it was."""

from __future__ import annotations

import pytest

from core.chat.pipeline import build_chat_parser
from core.chat.realset import load_cases
from core.chat.request import ChatRequest

from .conftest import ROOT
from .test_reasoning_repairs import _names, _streamed, _template  # the same helpers over another set

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept6"))}


def _parser(case_id: str, fidelity: str = "improved", disabled=()):
    case = CASES[case_id]
    return build_chat_parser(_template(case.template), ChatRequest.from_dict(case.request), fidelity=fidelity,
                             disabled_repairs=disabled).parser


def _parse(case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None):
    parser = _parser(case_id, fidelity, disabled)
    return parser, parser.parse(CASES[case_id].output if output is None else output, False)


# -- reasoning-start-repeated in the Kimi K2 format ----------------------------------------------------------------

KIMI = "kept6-vllm-kimi-k2-r-think-tags"


@pytest.mark.parametrize("output, reasoning, content", [
    ("<think>step by step reasoning</think>final answer", "step by step reasoning", "final answer"),
    ("<think></think>final answer", "", "final answer"),
    # whitespace stays where the model wrote it, as llama.cpp's Kimi K2 parser keeps it
    ("\n<think>\nplan it\n</think>\n\nThe answer.", "\nplan it\n", "\n\nThe answer."),
])
def test_kimi_think_written_again_after_the_prompt_opened_it_is_markup(output, reasoning, content):
    parser, one = _parse(KIMI, output=output)
    assert (one.reasoning_content, one.content) == (reasoning, content)
    assert _names(one) == ["reasoning-start-repeated"]
    for size in (1, 3, 17):
        assert _streamed(parser, output, size).to_openai() == one.to_openai()


@pytest.mark.parametrize("fidelity, disabled", [("llama.cpp", ()), ("improved", ("reasoning-start-repeated",))])
def test_kimi_repeated_think_stays_reasoning_at_llama_cpp_or_switched_off(fidelity, disabled):
    _, one = _parse(KIMI, fidelity, disabled)
    assert one.reasoning_content == "<think>step by step reasoning"
    assert one.content == "final answer"
    assert "reasoning-start-repeated" not in _names(one)


def test_kimi_reasoning_without_a_second_think_fires_nothing():
    _, one = _parse(KIMI, output="plain reasoning</think>answer")
    assert (one.reasoning_content, one.content, _names(one)) == ("plain reasoning", "answer", [])


# -- tag-whitespace for auto-parsed tagged calls (MiniMax-M2: the tags back to back) --------------------------------

MM2 = "kept6-vllm-minimax-m2-two-invokes"
COMPACT = ('<minimax:tool_call><invoke name="search_web"><parameter name="query">OpenAI</parameter></invoke>'
           '<invoke name="search_web"><parameter name="query">Gemini</parameter></invoke></minimax:tool_call>')


def _calls(msg) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for c in msg.tool_calls]


@pytest.mark.parametrize("output", [
    COMPACT,
    # spaces where the template writes line breaks, and a mix of both
    COMPACT.replace("><", "> <"),
    COMPACT.replace("<minimax:tool_call>", "<minimax:tool_call>\n").replace("</invoke>", "</invoke>\n"),
])
def test_tagged_calls_without_the_templates_line_breaks_are_calls(output):
    parser, one = _parse(MM2, output=output)
    assert _calls(one) == [("search_web", '{"query":"OpenAI"}'), ("search_web", '{"query":"Gemini"}')]
    assert (one.content, one.reasoning_content) == ("", "")
    # the prompt opened <think>: the call at the very start of the output ends the reasoning
    assert _names(one) == ["call-ends-reasoning", "tag-whitespace"]
    for size in (1, 3, 17):
        assert _streamed(parser, output, size).to_openai() == one.to_openai()


def test_the_templates_own_layout_fires_no_tag_whitespace():
    output = ('<minimax:tool_call>\n<invoke name="search_web">\n<parameter name="query">OpenAI</parameter>\n'
              '</invoke>\n</minimax:tool_call>')
    _, one = _parse(MM2, output=output)
    assert _calls(one) == [("search_web", '{"query":"OpenAI"}')]
    assert _names(one) == ["call-ends-reasoning"]


@pytest.mark.parametrize("fidelity, disabled", [("llama.cpp", ()), ("improved", ("tag-whitespace",))])
def test_compact_calls_stay_reasoning_at_llama_cpp_or_switched_off(fidelity, disabled):
    _, one = _parse(MM2, fidelity, disabled, output=COMPACT)
    assert one.tool_calls == [] and one.reasoning_content == COMPACT


def test_a_compact_call_the_output_cuts_keeps_its_markup_in_the_message():
    # the section never closed: the cut call's text, its opener included, is content (the lossless contract)
    output = 'Let me look.<minimax:tool_call><invoke name="search_web"><parameter name="query">OpenAI</parameter>'
    _, one = _parse(MM2, output=output)
    assert one.tool_calls == []
    assert one.reasoning_content + one.content == output


def test_compact_copy_only_for_markers_with_layout_whitespace():
    from core.analysis.result import ToolsAnalysis, ToolFormatAnalysis
    from core.chat.generator import compact_tools

    tight = ToolsAnalysis(format=ToolFormatAnalysis(section_start="<calls>", section_end="</calls>"))
    assert compact_tools(tight) is None
    loose = ToolsAnalysis(format=ToolFormatAnalysis(section_start="<calls>\n", section_end="\n</calls>"))
    got = compact_tools(loose)
    assert (got.format.section_start, got.format.section_end) == ("<calls>", "</calls>")


# -- force-nonempty-content (the request's chat_template_kwargs ask for it) -----------------------------------------

NM3 = "kept6-vllm-nemotron-v3-r-promote-unclosed"


@pytest.mark.parametrize("output, reasoning", [
    ("<think>4", "4"),                              # reasoning never closed
    ("<think>plan</think>", "plan"),                # closed, nothing after it
])
def test_a_turn_of_reasoning_only_also_answers_with_it_when_the_request_asks(output, reasoning):
    parser, one = _parse(NM3, output=output)
    assert (one.reasoning_content, one.content) == (reasoning, reasoning)
    assert _names(one)[-1] == "force-nonempty-content"
    for size in (1, 3, 17):
        assert _streamed(parser, output, size).to_openai() == one.to_openai()


@pytest.mark.parametrize("output", ["<think>reason</think>real answer", "\n</think>\n"])
def test_a_turn_with_an_answer_or_nothing_to_repeat_is_left_as_it_is(output):
    _, one = _parse(NM3, output=output)
    assert "force-nonempty-content" not in _names(one)
    assert one.content != one.reasoning_content or not one.content


@pytest.mark.parametrize("fidelity, disabled, kwargs", [
    ("llama.cpp", (), {"force_nonempty_content": True}),
    ("improved", ("force-nonempty-content",), {"force_nonempty_content": True}),
    ("improved", (), {}),
    ("improved", (), {"force_nonempty_content": "yes"}),   # only a JSON true asks for it
])
def test_without_the_flag_or_the_repair_reasoning_stays_reasoning(fidelity, disabled, kwargs):
    case = CASES[NM3]
    req = dict(case.request, chat_template_kwargs=kwargs)
    parser = build_chat_parser(_template(case.template), ChatRequest.from_dict(req), fidelity=fidelity,
                               disabled_repairs=disabled).parser
    one = parser.parse("4", False)   # the generation prompt opened <think>
    assert (one.reasoning_content, one.content) == ("4", "")
    assert "force-nonempty-content" not in _names(one)


def test_a_call_is_an_answer():
    case = CASES[NM3]
    tools = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
    req = dict(case.request, tools=tools)
    parser = build_chat_parser(_template(case.template), ChatRequest.from_dict(req), fidelity="improved").parser
    one = parser.parse("<think>need the time\n</think>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
                       False)
    assert [c.name for c in one.tool_calls] == ["get_time"] and one.content == ""
    assert "force-nonempty-content" not in _names(one)


# -- leading-think-block (a template that shows no reasoning) -------------------------------------------------------

KEPT = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept"))}
M1 = KEPT["kept-doc-m1-two-searches"]


def _m1(output: str, fidelity: str = "improved", disabled=(), **changes):
    req = dict(M1.request, **changes)
    parser = build_chat_parser(_template(M1.template), ChatRequest.from_dict(req), fidelity=fidelity,
                               disabled_repairs=disabled).parser
    return parser, parser.parse(output, False)


def test_a_think_block_opening_the_output_is_reasoning_before_the_calls():
    parser, one = _m1(M1.output)
    assert one.reasoning_content.strip() == "Okay, I will search for the OpenAI and Gemini latest release."
    assert [c.name for c in one.tool_calls] == ["search_web", "search_web"] and one.content.strip() == ""
    assert _names(one) == ["leading-think-block"]
    for size in (1, 3, 17):
        assert _streamed(parser, M1.output, size).to_openai() == one.to_openai()


@pytest.mark.parametrize("output, reasoning, content", [
    ("<think>plan</think>The answer.", "plan", "The answer."),
    ("  <think>still thinking when cut", "still thinking when cut", ""),   # never closed: all reasoning
    ("The tag <think> opens reasoning.", "", "The tag <think> opens reasoning."),   # not at the start: content
    ("Plain answer.", "", "Plain answer."),
])
def test_only_a_block_at_the_start_is_reasoning(output, reasoning, content):
    parser, one = _m1(output)
    assert (one.reasoning_content, one.content) == (reasoning, content)
    assert _names(one) == (["leading-think-block"] if reasoning else [])
    for size in (1, 3, 17):
        assert _streamed(parser, output, size).to_openai() == one.to_openai()


@pytest.mark.parametrize("fidelity, disabled, changes", [
    ("llama.cpp", (), {}),
    ("improved", ("leading-think-block",), {}),
    ("improved", (), {"reasoning_format": "none"}),
])
def test_the_block_stays_content_at_llama_cpp_switched_off_or_without_reasoning_extraction(fidelity, disabled,
                                                                                            changes):
    _, one = _m1("<think>plan</think>The answer.", fidelity, disabled, **changes)
    assert (one.reasoning_content, one.content) == ("", "<think>plan</think>The answer.")


def test_a_template_with_its_own_reasoning_markers_is_not_concerned():
    # MiniMax-M2's template renders <think>: its reasoning parser reads the block, the repair is not built
    parser = _parser("kept6-vllm-minimax-m2-plain")
    one = parser.parse("plan</think>The answer.", False)
    assert (one.reasoning_content, one.content, _names(one)) == ("plan", "The answer.", [])


def test_a_call_cut_inside_prompt_opened_reasoning_ends_it_and_its_text_is_content():
    # call-ends-reasoning's lookahead cannot tell a cut call from a prefix of one: the reasoning before the opener
    # stays reasoning, the cut call's text is content (unparsed-text), nothing lost
    output = 'Let me see.<minimax:tool_call><invoke name="search_web"><parameter name="query">Op'
    parser, one = _parse(MM2, output=output)
    assert (one.reasoning_content, one.content, one.tool_calls) == ("Let me see.", output[len("Let me see."):], [])
    assert "unparsed-text" in _names(one)   # (a parse waiting for more text reports no empty record)
    for size in (1, 3, 17):
        assert _streamed(parser, output, size).to_openai() == one.to_openai()
