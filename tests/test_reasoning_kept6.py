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
