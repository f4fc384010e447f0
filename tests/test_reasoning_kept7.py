"""The reasoning repairs written from the seventh real-output batch (tests/data/real_outputs_kept7: serving engines'
own parser tests, each case cites its source; docs/fidelity-reasoning.md "Where reasoning starts and ends"): each
repair fires where its rule says and not elsewhere, is switchable, streams as it parses one-shot, and leaves the
llama.cpp fidelity as it was."""

from __future__ import annotations

import json

import pytest

from core.analysis.workarounds import WORKAROUNDS_BY_NAME
from core.chat.lossless import lost_word_spans, parser_marks
from core.chat.pipeline import build_chat_parser
from core.chat.realset import load_cases
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser

from .conftest import ROOT
from .test_reasoning_repairs import _names, _streamed, _template  # the same helpers over another set

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept7"))}


def _bundle(case_id: str, fidelity: str = "improved", disabled=(), **request_changes):
    case = CASES[case_id]
    req = dict(case.request, **request_changes)
    return build_chat_parser(_template(case.template), ChatRequest.from_dict(req), fidelity=fidelity,
                             disabled_repairs=disabled)


def _parse(case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None, **request_changes):
    parser = _bundle(case_id, fidelity, disabled, **request_changes).parser
    return parser, parser.parse(CASES[case_id].output if output is None else output, False)




def _calls(msg) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in msg.tool_calls]


# -- template-default-thinking -------------------------------------------------------------------------------

def test_an_unset_thinking_flag_renders_the_templates_own_default():
    bundle = _bundle("kept7-lmd-dsv3-hello-no-thinking-flag")
    assert bundle.generation_prompt.endswith("</think>")
    assert any("template-default-thinking" in n for n in bundle.notes)
    _, one = _parse("kept7-lmd-dsv3-hello-no-thinking-flag")
    assert (one.content, one.reasoning_content) == ("hello", "")


@pytest.mark.parametrize("fidelity, disabled, changes", [
    ("llama.cpp", (), {}),
    ("improved", ("template-default-thinking",), {}),
    ("improved", (), {"enable_thinking": True}),
])
def test_llama_cpp_or_a_set_flag_renders_with_thinking_on(fidelity, disabled, changes):
    bundle = _bundle("kept7-lmd-dsv3-hello-no-thinking-flag", fidelity, disabled, **changes)
    assert bundle.generation_prompt.endswith("<think>")
    assert not any("template-default-thinking" in n for n in bundle.notes)
    one = bundle.parser.parse("hello", False)
    assert (one.content, one.reasoning_content) == ("", "hello")


def test_calls_after_the_default_prompt_are_calls():
    parser, one = _parse("kept7-sgl-dsv31-two-calls")
    assert _calls(one) == [("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Paris"})]
    assert one.reasoning_content == "" and one.content == ""


def test_a_template_that_only_tests_the_flags_truth_keeps_llama_cpp_render():
    # Qwen QwQ as edited for llama.cpp closes the think block on "not enable_thinking": it counts on the caller
    # passing the flag, so an unset flag keeps llama.cpp's render
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Help me."}]})
    bundle = build_chat_parser(_template("Qwen-QwQ-32B.llamacpp-edit.jinja"), req, fidelity="improved")
    assert bundle.generation_prompt.endswith("<think>\n")
    assert not any("template-default-thinking" in n for n in bundle.notes)


# -- call-ends-reasoning ---------------------------------------------------------------------------------------

def test_a_call_opened_before_the_end_marker_ends_the_reasoning():
    case = CASES["kept7-oll-qwen3-call-inside-thinking"]
    parser, one = _parse(case.id)
    assert one.reasoning_content == "Let me think" and one.content == ""
    assert _calls(one) == [("get_weather", {"location": "San Francisco", "unit": "celsius"})]
    at = case.output.index("<tool_call>")
    assert ("call-ends-reasoning", at, at) in [(r.name, r.start, r.end) for r in one.repairs]   # where it ended
    for size in (1, 3, 17):
        assert _streamed(parser, case.output, size).to_openai() == one.to_openai()


def test_the_reasoning_streams_as_it_comes_and_the_call_waits_for_the_end():
    case = CASES["kept7-oll-qwen3-call-inside-thinking"]
    parser, _ = _parse(case.id)
    sp, shown, calls = StreamingParser(parser), [], []
    for ch in case.output:
        for d in sp.feed(ch):
            shown.append(d.reasoning_content or "")
            calls += [d.tool_call] if d.tool_call is not None else []
    assert "".join(shown) == "Let me think" and calls == []   # the call is released by the final parse
    sp.finish()
    assert _calls(sp.message) == [("get_weather", {"location": "San Francisco", "unit": "celsius"})]


@pytest.mark.parametrize("fidelity, disabled", [("llama.cpp", ()), ("improved", ("call-ends-reasoning",))])
def test_without_the_repair_the_call_stays_reasoning(fidelity, disabled):
    case = CASES["kept7-oll-qwen3-call-inside-thinking"]
    _, one = _parse(case.id, fidelity, disabled)
    assert one.tool_calls == [] and one.reasoning_content.startswith("Let me think<tool_call>")


def test_prose_naming_the_opener_stays_reasoning():
    case = CASES["kept7-oll-qwen3-call-inside-thinking"]
    text = "I could use <tool_call> tags here. Let me think</think>Answer."
    _, one = _parse(case.id, output=text)
    assert (one.reasoning_content, one.content, one.tool_calls) == (
        "I could use <tool_call> tags here. Let me think", "Answer.", [])
    assert "call-ends-reasoning" not in _names(one)


def test_a_call_quoted_in_reasoning_that_goes_on_to_the_end_marker_stays_reasoning():
    # the shape of llama.cpp's reference case ref-0303: a call inside the reasoning, more reasoning, </think>, a call
    case = CASES["kept7-oll-qwen3-call-inside-thinking"]
    call = case.output[case.output.index("<tool_call>"):]
    text = "Let me think" + call + " hmm</think>" + call
    parser, one = _parse(case.id, output=text)
    assert one.reasoning_content == "Let me think" + call + " hmm" and len(one.tool_calls) == 1
    assert "call-ends-reasoning" not in _names(one)
    for size in (1, 3, 17):
        assert _streamed(parser, text, size).to_openai() == one.to_openai()


def test_a_closed_reasoning_block_is_read_as_before():
    case = CASES["kept7-oll-qwen3-call-inside-thinking"]
    call = case.output[case.output.index("<tool_call>"):]
    _, one = _parse(case.id, output="Let me think</think>" + call)
    assert one.reasoning_content == "Let me think" and len(one.tool_calls) == 1
    assert "call-ends-reasoning" not in _names(one)


# -- bare-answer-after-reasoning -------------------------------------------------------------------------------

def test_an_answer_without_its_text_marker_is_content():
    case = CASES["kept7-oll-cohere-bare-content"]
    parser, one = _parse(case.id)
    assert (one.reasoning_content, one.content) == ("thought", "Just plain text output")
    fired = [(r.name, case.output[r.start:r.end]) for r in one.repairs]
    assert fired == [("bare-answer-after-reasoning", "Just plain text output")]
    for size in (1, 3, 17):
        assert _streamed(parser, case.output, size).to_openai() == one.to_openai()


@pytest.mark.parametrize("fidelity, disabled", [("llama.cpp", ()), ("improved", ("bare-answer-after-reasoning",))])
def test_without_the_repair_the_marker_stays_in_the_content(fidelity, disabled):
    _, one = _parse("kept7-oll-cohere-bare-content", fidelity, disabled)
    assert one.content == "<|END_THINKING|>Just plain text output"


def test_a_wrapped_answer_does_not_fire_the_repair():
    _, one = _parse("kept7-oll-cohere-thinking-then-text")
    assert one.content == "Hello world!" and "bare-answer-after-reasoning" not in _names(one)


# -- apertus-inner-thoughts and reasoning-blocks-interleaved -----------------------------------------------------

def test_apertus_markers_are_found_at_improved_fidelity_only():
    rule = WORKAROUNDS_BY_NAME["apertus-inner-thoughts"]
    assert rule.origin == "explorer" and not rule.active_at("llama.cpp") and rule.active_at("improved")
    _, one = _parse("kept7-sgl-apertus-one-block")
    assert (one.reasoning_content, one.content) == ("thoughts", "answer")
    _, before = _parse("kept7-sgl-apertus-one-block", "llama.cpp")
    assert before.content == CASES["kept7-sgl-apertus-one-block"].output


def test_apertus_plain_text_stays_content_with_thinking_on():
    # the model writes its markers itself, anywhere: reasoning-end-without-start does not apply
    _, one = _parse("kept7-sgl-apertus-plain-text")
    assert (one.content, one.reasoning_content) == ("hello world", "")


@pytest.mark.parametrize("case_id, reasoning, content", [
    ("kept7-sgl-apertus-text-before-block", "think", "hello world"),
    ("kept7-sgl-apertus-two-blocks", "ab", "xy"),
])
def test_later_blocks_are_reasoning_and_the_text_around_them_content(case_id, reasoning, content):
    parser, one = _parse(case_id)
    assert (one.reasoning_content, one.content) == (reasoning, content)
    assert "reasoning-blocks-interleaved" in _names(one)
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[case_id].output, size).to_openai() == one.to_openai()
    _, off = _parse(case_id, disabled=("reasoning-blocks-interleaved",))
    assert "<|inner_prefix|>" in off.content


def test_interleaved_blocks_are_not_read_in_other_formats():
    case = CASES["kept7-oll-qwen3-think-no-opener"]
    text = "Let me think...</think>Answer <think>more</think> end."
    _, one = _parse(case.id, output=text)
    assert one.reasoning_content == "Let me think..." and "<think>more" in one.content


# -- harmony-bare-header (with messages-after-call) ----------------------------------------------------------------

@pytest.mark.parametrize("case_id, calls, reasoning, content", [
    ("kept7-sgl-harmony-two-calls-commentary-filler",
     [("get_weather", {"location": "SF"}), ("get_temp", {"location": "NYC"})], "", "Done"),
    ("kept7-sgl-harmony-repeated-calls-filler", [("get_weather", {"city": "Boston"})] * 3,
     "Need to get weatherTool not responding", "Unable to fetch weather data"),
])
def test_harmony_messages_after_a_call_without_their_header(case_id, calls, reasoning, content):
    case = CASES[case_id]
    parser, one = _parse(case_id)
    assert (_calls(one), one.reasoning_content, one.content) == (calls, reasoning, content)
    assert "harmony-bare-header" in _names(one)
    assert lost_word_spans(case.output, one, parser_marks(parser)) == []
    for size in (1, 3, 17):
        assert _streamed(parser, case.output, size).to_openai() == one.to_openai()
    _, off = _parse(case_id, disabled=("harmony-bare-header",))
    assert len(off.tool_calls) == 1 and "<|channel|>" in off.content


def test_harmony_without_parallel_calls_reads_one_call():
    _, one = _parse("kept7-sgl-harmony-two-calls-commentary-filler", parallel_tool_calls=False)
    assert _calls(one) == [("get_weather", {"location": "SF"})]


def test_harmony_text_with_its_special_tokens_stripped_stays_content():
    # policy (docs/fidelity-reasoning.md): SGLang's text strategy reads a leading "analysis" as a channel; a plain
    # answer may start with that word, so the text stays content
    _, one = _parse("kept7-sgl-harmony-text-format-analysis")
    assert (one.content, one.reasoning_content) == ("analysis test content", "")


def test_a_word_joined_to_a_non_neighbour_word_is_found_and_a_piece_of_a_word_is_not():
    from core.chat.lossless import _joined_to_a_word

    # kept7-sgl-harmony-repeated-calls-filler: "weather" and "Tool" end two analysis messages, calls between them
    out_words = {"Need", "weather", "Boston", "Tool", "responding"}
    assert _joined_to_a_word("Tool", {"weatherTool", "responding"}, out_words)
    assert not _joined_to_a_word("Tool", {"weatherTools"}, out_words)       # "weatherTools" is not two words
    assert not _joined_to_a_word("book", {"booking"}, {"book", "king"})     # "ing" is no word of the output
    assert not _joined_to_a_word("x" * 65, {"y" + "x" * 65}, {"y"})         # longer than GLUED_WORD_MAX
