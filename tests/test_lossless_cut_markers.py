"""A final output that ends inside a call opener holding the tool's name (Llama 4's pythonic ``[get_weather(``):
found by cutting a real output at every position (issue 25's re-attack). The opener's text is model text, not
markup: before the fix ``[get_wea`` came back as content ``wea`` and ``Hi there [get_weather`` as ``Hi there ``,
and the lossless check saw no lost word because the name's words were taken for markup words of the opener."""

from __future__ import annotations

import json

import pytest

from core.chat.casefiles import parse_case
from core.chat.lossless import lost_word_spans, parser_marks
from core.chat.stream import stream_deltas

from .conftest import ROOT, TEMPLATES

# vLLM's Llama 4 pythonic tool-parser fixture (source URL in the case): "[get_weather()]"
CASE_ID = "l4py-parameterless"


def _case() -> dict:
    with open(ROOT / "tests" / "data" / "real_outputs" / "llama4-pythonic.jsonl", encoding="utf-8") as f:
        (case,) = [d for d in map(json.loads, f) if d["id"] == CASE_ID]
    return case


def _parser(fidelity: str):
    case = _case()
    return parse_case(str(TEMPLATES), case["template"], case["request"], "", fidelity)[0]


@pytest.mark.parametrize("cut,content", [(4, "[get"), (8, "[get_wea"), (12, "[get_weather")])
def test_output_cut_inside_a_named_opener_keeps_the_text(cut, content):
    parser = _parser("improved")
    out = _case()["output"][:cut]
    assert out == content
    msg = parser.parse(out)
    assert msg.content == content and not msg.tool_calls
    assert [r.name for r in msg.repairs] == ["unparsed-text"]
    for chunk in (1, 2, 3, 7, len(out)):
        assert stream_deltas(parser, out, chunk=chunk)[1].to_openai() == msg.to_openai()


def test_text_then_a_cut_named_opener_keeps_the_text():
    parser = _parser("improved")
    out = "Hi there " + _case()["output"][:12]
    assert parser.parse(out).content == "Hi there [get_weather"


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_a_dropped_name_inside_an_opener_is_a_lost_word(fidelity):
    """The check itself: a message without the name loses the words of the name (they are not markup)."""
    from core.chat.message import AssistantMessage

    parser = _parser(fidelity)
    assert [w for w, _ in lost_word_spans("Hi there [get_weather", AssistantMessage(content="Hi there "),
                                          parser_marks(parser))] == ["get", "weather"]
