"""GPT-OSS output cut inside a recipient (issue 25's re-attack: every reference output cut at every position).
A call to a built-in tool (``to=container.exec``, ``to=python``) is read and dropped by llama.cpp's grammar and
its text is only reported (``unparsed-text`` why ``kept-out``, the documented exception). Before the fix the
exception also took a cut ``to=functi`` for a built-in call, and ``to=assistant`` (ref-0430's header) made every
unparsed tail of that output kept out: those fragments now reach the content, at both fidelities."""

from __future__ import annotations

import json

import pytest

from core.chat.casefiles import parse_case
from core.chat.lossless import lost_word_spans, parser_marks
from core.chat.stream import stream_deltas

from .conftest import REFERENCE, TEMPLATES

FIDELITIES = ["llama.cpp", "improved"]


def _ref(case_id: str, fidelity: str) -> tuple[dict, object]:
    """The reference row ``case_id`` and its parser at ``fidelity``."""
    with open(REFERENCE / "cases.jsonl", encoding="utf-8") as f:
        (row,) = [d for d in map(json.loads, f) if d["id"] == case_id]
    request = {k: v for k, v in row.items() if k not in ("id", "template", "input", "is_partial", "expect")}
    return row, parse_case(str(TEMPLATES), row["template"], request, "", fidelity)[0]


def _cut(case_id: str, cut: int, fidelity: str):
    row, parser = _ref(case_id, fidelity)
    out = row["input"][:cut]
    return parser, out, parser.parse(out)


@pytest.mark.parametrize("fidelity", FIDELITIES)
@pytest.mark.parametrize("case_id,cut,tail,content", [
    ("ref-0421", 10, " to=functi", " to=functi"),        # cut inside "to=functions.special_function"
    ("ref-0430", 31, "to=assist", "assist"),             # "to=" is the grammar's markup
    ("ref-0430", 50, "<|channel|>analy", "analy"),       # after the complete "to=assistant"
    ("ref-0428", 104, "to=container.e", "container.e"),  # a built-in recipient, still cut
])
def test_a_cut_recipient_is_content(fidelity, case_id, cut, tail, content):
    parser, out, msg = _cut(case_id, cut, fidelity)
    assert out.endswith(tail)
    assert msg.content == content and not msg.tool_calls
    assert [(r.name, r.why) for r in msg.repairs] == [("unparsed-text", "content")]
    assert lost_word_spans(out, msg, parser_marks(parser)) == []
    for chunk in (1, 3, len(out)):
        assert stream_deltas(parser, out, chunk=chunk)[1].to_openai() == msg.to_openai()


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_text_after_a_complete_built_in_recipient_stays_kept_out(fidelity):
    """The documented exception, unchanged: ``…assistant to=container.exec<|channel|>co`` is a built-in call
    llama.cpp drops; the message keeps only the reasoning and the record holds the text."""
    parser, out, msg = _cut("ref-0428", 120, fidelity)
    assert out.endswith("to=container.exec<|channel|>co")
    assert msg.content == "" and msg.reasoning_content == "I will execute python to say hello"
    (rec,) = msg.repairs
    assert (rec.name, rec.why) == ("unparsed-text", "kept-out") and "container.exec" in rec.text


@pytest.mark.parametrize("fidelity", FIDELITIES)
@pytest.mark.parametrize("case_id", ["ref-0428", "ref-0430"])
def test_whole_outputs_keep_the_reference_message(fidelity, case_id):
    row, parser = _ref(case_id, fidelity)
    msg = parser.parse(row["input"]).to_openai()
    assert {k: v for k, v in msg.items() if v} == {k: v for k, v in row["expect"].items() if v}
