"""The reasoning repairs of issue 25 class 4 (docs/fidelity-reasoning.md), on real outputs of the evaluation set
(tests/data/real_outputs: each case cites its public source): each repair fires where its rule says, not where
it does not, is switchable, and leaves the llama.cpp fidelity as it was."""

from __future__ import annotations

import pytest

from core.chat.lossless import GLUED_WORD_MAX, _glued_to_markup
from core.chat.pipeline import build_chat_parser
from core.chat.prompt import prepare_request, thinking_switched_on
from core.chat.realset import load_cases
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs"))}


def _template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)


def _parse(case_id: str, fidelity: str = "improved", disabled=(), **request_changes):
    case = CASES[case_id]
    req = dict(case.request, **request_changes)
    parser = build_chat_parser(_template(case.template), ChatRequest.from_dict(req), fidelity=fidelity,
                               disabled_repairs=disabled).parser
    return parser, parser.parse(case.output, False)


def _streamed(parser, output: str, size: int):
    sp = StreamingParser(parser)
    for i in range(0, len(output), size):
        sp.feed(output[i:i + size])
    sp.finish()
    return sp.message


def _names(msg) -> list[str]:
    return [r.name for r in msg.repairs]


# -- reasoning-end-without-start ------------------------------------------------------------------------------

def test_thinking_switch_is_read_from_the_template():
    qwen3, llama = _template("Qwen-Qwen3-0.6B.jinja"), _template("meta-llama-Llama-3.1-8B-Instruct.jinja")
    seed = _template("ByteDance-Seed-OSS.jinja")
    msgs = [{"role": "user", "content": "Help me."}]
    assert thinking_switched_on(prepare_request(qwen3, ChatRequest.from_dict({"messages": msgs})))
    assert not thinking_switched_on(prepare_request(qwen3, ChatRequest.from_dict(
        {"messages": msgs, "chat_template_kwargs": {"enable_thinking": False}})))
    assert thinking_switched_on(prepare_request(seed, ChatRequest.from_dict({"messages": msgs})))
    assert not thinking_switched_on(prepare_request(seed, ChatRequest.from_dict(
        {"messages": msgs, "chat_template_kwargs": {"thinking_budget": 0}})))
    assert not thinking_switched_on(prepare_request(llama, ChatRequest.from_dict({"messages": msgs})))


def test_an_end_marker_without_start_closes_reasoning_when_thinking_is_on():
    parser, msg = _parse("seedr-only-end")             # Some reasoning</seed:think>This is the rest
    assert (msg.reasoning_content, msg.content) == ("Some reasoning", "This is the rest")
    assert "reasoning-end-without-start" in _names(msg)
    for size in (1, 3):
        assert _streamed(parser, CASES["seedr-only-end"].output, size).to_openai() == msg.to_openai()


def test_the_stream_shows_the_reasoning_at_once():
    """Nothing is held back: the first character fed is already a reasoning delta."""
    parser, _ = _parse("seedr-only-end")
    sp = StreamingParser(parser)
    deltas = sp.feed(CASES["seedr-only-end"].output[:2])
    assert "".join(d.reasoning_content or "" for d in deltas) == "So"


def test_without_thinking_or_without_the_repair_the_text_is_content():
    out = "Some reasoning</seed:think>This is the rest"
    for kwargs in ({"disabled": ("reasoning-end-without-start",)}, {"fidelity": "llama.cpp"},
                   {"chat_template_kwargs": {"thinking_budget": 0}}):
        _, msg = _parse("seedr-only-end", **kwargs)
        assert "Some reasoning" not in msg.reasoning_content and msg.content.startswith("Some reasoning"), kwargs
        assert "reasoning-end-without-start" not in _names(msg)
    assert CASES["seedr-only-end"].output == out


def test_a_plain_answer_with_thinking_on_is_reasoning_and_off_is_content():
    _, msg = _parse("q3-without-think")               # Qwen3, no think tags at all
    assert (msg.reasoning_content, msg.content) == ("This is the rest", "")
    _, msg = _parse("q3-without-think", chat_template_kwargs={"enable_thinking": False})
    assert (msg.reasoning_content, msg.content) == ("", "This is the rest")


def test_a_bare_json_call_with_thinking_on_is_still_a_call():
    """ollama issue 11662 (tests/data/triage): Qwen3 with thinking on writes the call as bare JSON."""
    import json

    case = next(json.loads(line) for line in (ROOT / "tests" / "data" / "triage" / "cases.jsonl").open(encoding="utf-8")
                if '"ollama-11662"' in line)
    parser = build_chat_parser(_template(case["template"]), ChatRequest.from_dict(case), fidelity="improved").parser
    msg = parser.parse(case["input"], False)
    assert [c.name for c in msg.tool_calls] == ["repeat_string"] and msg.reasoning_content == ""
    assert "unmarked-calls" in _names(msg)


# -- reasoning-start-repeated in the Qwen3.5 format ---------------------------------------------------------------

def test_a_think_the_model_writes_again_after_the_prompt_opened_it_is_markup():
    _, msg = _parse("q35-tool-call-with-think-no-end")
    assert msg.reasoning_content == "I need to read the file.\n\n" and msg.tool_calls[0].name == "bash"
    assert "reasoning-start-repeated" in _names(msg)
    _, msg = _parse("q35-with-think", fidelity="llama.cpp")
    assert msg.reasoning_content == "<think>This is a reasoning section"


# -- reasoning-end-unmatched / reasoning-start-whitespace ------------------------------------------------------------

def test_an_end_marker_that_closes_nothing_is_dropped_from_the_answer():
    parser, msg = _parse("mm2-double-end")             # reasoning</think>content A</think>content B
    assert (msg.reasoning_content, msg.content) == ("reasoning", "content Acontent B")
    assert _streamed(parser, CASES["mm2-double-end"].output, 1).to_openai() == msg.to_openai()
    _, msg = _parse("mm2-double-end", disabled=("reasoning-end-unmatched",))
    assert msg.content == "content A</think>content B"


def test_magistral_end_without_start_is_content_as_vllm_reads_it_since_pr_30391():
    _, msg = _parse("mag-simple")                      # This is a reasoning section[/THINK]This is the rest
    assert (msg.reasoning_content, msg.content) == ("", "This is a reasoning sectionThis is the rest")


def test_a_newline_before_magistral_think_is_skipped():
    _, msg = _parse("mag-new-line")
    assert msg.reasoning_content == "This is a reasoning section" and msg.content.strip() == "This is the rest"
    _, msg = _parse("mag-new-line", fidelity="llama.cpp")
    assert msg.reasoning_content == ""


# -- trailing-eos-token / messages-after-call / instructed-reasoning-markers ----------------------------------------

@pytest.mark.parametrize("case_id", ["g3-mixed-eos", "g31-mixed-eos"])
def test_an_eos_token_after_the_last_call_is_not_content(case_id):
    _, msg = _parse(case_id)
    assert msg.content == "I'll check that for you." and len(msg.tool_calls) == 1
    assert "trailing-eos-token" in _names(msg)
    _, msg = _parse(case_id, disabled=("trailing-eos-token",))
    assert msg.content.endswith("</s>")


def test_harmony_messages_after_a_call_are_messages():
    _, msg = _parse("gptoss-call-then-final")
    assert msg.content == "This text should be truncated." and msg.tool_calls[0].name == "read_file"
    _, msg = _parse("gptoss-call-then-final", disabled=("messages-after-call",))
    assert "<|start|>assistant" in msg.content


def test_granite_reasoning_phrases_when_the_prompt_asks_for_them():
    parser, msg = _parse("granite-think-multiple-lines")
    assert (msg.reasoning_content, msg.content) == ("This\nThat", "This is the rest\nThat")
    assert _streamed(parser, CASES["granite-think-multiple-lines"].output, 3).to_openai() == msg.to_openai()
    _, msg = _parse("granite-think-multiple-lines", chat_template_kwargs={"thinking": False})
    assert msg.reasoning_content == "" and msg.content.startswith("Here is my thought process:")


def test_a_glued_markup_word_is_not_lost_and_long_words_are_not_split():
    marks, no_edges = frozenset({"Here"}), (set(), set())
    assert _glued_to_markup("sectionHere", {"section"}, marks, no_edges)
    assert not _glued_to_markup("sectionThere", {"section"}, marks, no_edges)
    assert not _glued_to_markup("x" * GLUED_WORD_MAX + "Here", {"x" * GLUED_WORD_MAX}, marks, no_edges)
    # a piece shorter than a word glued before markup counts where a field ends with it ("Th" + "ought"), not elsewhere
    assert _glued_to_markup("Thought", set(), frozenset({"ought"}), (set(), {"Th"}))
    assert not _glued_to_markup("Thought", set(), frozenset({"ought"}), no_edges)


# -- answer-marker-whitespace ---------------------------------------------------------------------------------------

# Cohere's own output parser test (cohere-ai/melody parsing/stream_filter_test.go at 1e571356, "thinking and
# response with citations"): a line break between <|END_THINKING|> and <|START_RESPONSE|>; the <co> citation markup
# is Cohere's own answer syntax, kept in content as every other parser here keeps it
MELODY_OUTPUT = ("<|START_THINKING|>This is a rainbow <co>emoji: 🌈</co: 0:[1]><|END_THINKING|>\n<|START_RESPONSE|>"
                 "foo <co>bar</co: 0:[1,2],1:[3,4]><|END_RESPONSE|>")
HELLO = {"messages": [{"role": "user", "content": "Hello"}]}


def _parse_output(template: str, output: str, fidelity: str = "improved", disabled=()):
    parser = build_chat_parser(_template(template), ChatRequest.from_dict(HELLO), fidelity=fidelity,
                               disabled_repairs=disabled).parser
    return parser, parser.parse(output, False)


@pytest.mark.parametrize("template", ["hfjs-CohereLabs-command-a-reasoning-08-2025.jinja",
                                      "CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja"])
def test_a_line_break_before_the_answer_marker_is_layout(template):
    parser, msg = _parse_output(template, MELODY_OUTPUT)
    assert (msg.reasoning_content, msg.content) == ("This is a rainbow <co>emoji: 🌈</co: 0:[1]>",
                                                    "foo <co>bar</co: 0:[1,2],1:[3,4]>")
    assert [(r.name, MELODY_OUTPUT[r.start:r.end]) for r in msg.repairs] == [("answer-marker-whitespace", "\n")]
    for size in (1, 3, 17):
        assert _streamed(parser, MELODY_OUTPUT, size).to_openai() == msg.to_openai()
    _, off = _parse_output(template, MELODY_OUTPUT, disabled=("answer-marker-whitespace",))
    assert off.content.startswith("\n<|START_RESPONSE|>foo")   # the markers left in the content, as before


def test_llama_cpp_fidelity_reads_the_line_break_as_before():
    _, a = _parse_output("hfjs-CohereLabs-command-a-reasoning-08-2025.jinja", MELODY_OUTPUT, "llama.cpp")
    assert (a.reasoning_content, a.content) == ("", "<|START_THINKING|>This is a rainbow <co>emoji: 🌈</co: 0:[1]>"
                                                    "<|END_THINKING|>\nfoo <co>bar</co: 0:[1,2],1:[3,4]>")
    _, r7b = _parse_output("CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja", MELODY_OUTPUT,
                           "llama.cpp")
    assert r7b.content == "\n<|START_RESPONSE|>foo <co>bar</co: 0:[1,2],1:[3,4]><|END_RESPONSE|>"
    assert not a.repairs and not r7b.repairs


def test_cohere2moe_reads_whitespace_before_its_text_marker():
    """The same class in the Cohere2 MoE format (its answer marker is <|START_TEXT|>): ollama's real output
    kept7-oll-cohere-thinking-then-text with the line break of Cohere's parser test put before the marker."""
    output = "Let me think about this.<|END_THINKING|>\n<|START_TEXT|>Hello world!<|END_TEXT|>"
    parser, msg = _parse_output("Cohere2MoE.jinja", output)
    assert (msg.reasoning_content, msg.content) == ("Let me think about this.", "Hello world!")
    assert _names(msg) == ["answer-marker-whitespace"]
    for size in (1, 3, 17):
        assert _streamed(parser, output, size).to_openai() == msg.to_openai()
    _, off = _parse_output("Cohere2MoE.jinja", output, disabled=("answer-marker-whitespace",))
    assert off.content == "\n<|START_TEXT|>Hello world!"   # bare-answer-after-reasoning kept the markers
    _, plain = _parse_output("Cohere2MoE.jinja", output.replace("\n", ""))
    assert plain.content == "Hello world!" and not plain.repairs
