"""The causes of call-format mistakes decided from the template's own renders (core/explain/call_relation.py and its
use in the triage): the call turn rendered with and without the call gives the template's call pieces, and their
relation to the output's markup names the class. Every output is a row of tests/data/triage (each cites its public
source); the templates are the shared reference templates."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from core.chat.request import ChatRequest
from core.escapes import code_span
from core.explain.call_relation import (MAX_OUTPUT, CallRelation, PieceMark, PieceRow, Relation, call_pieces,
                                        piece_rows, relate, relation_lines)
from core.explain.explain import explain
from core.explain.model import Setup, build_bundle
from core.explain.triage import Mistake, _call_relation, _context, triage
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

_ROWS = {c["id"]: c for f in sorted((ROOT / "tests" / "data" / "triage").glob("*.jsonl"))
         for c in map(json.loads, f.read_text(encoding="utf-8").splitlines()) if c}


def _relation(case_id: str, output: str | None = None):
    c = _ROWS[case_id]
    t = ChatTemplate((TEMPLATES / c["template"]).read_text(encoding="utf-8"), c["template"])
    req = ChatRequest.from_dict(c)
    ex = explain(t, req, c["input"] if output is None else output)
    s = Setup(t, req, "llama.cpp", {})
    b = build_bundle(s)
    return _call_relation(s, b, ex, _context(s, b)), ex, s, b


@pytest.mark.parametrize("case_id, relation, absent, foreign", [
    # Qwen2.5-Coder's bare JSON call: the template's `<tool_call>` … `</tool_call>` around it left out
    ("kept14-opencode-7083-qwen25coder-bare-json-todoread", Relation.OMITTED_OPENER,
     ("<tool_call>", "</tool_call>"), ()),
    # Qwen3-Coder's call without `</parameter>` and `</function>`: closers, the call's own closer written
    ("qwen3coder-missing-closing-tags", Relation.OMITTED_CLOSER, ("</parameter>", "</function>"), ()),
    # a Markdown fence where Qwen2.5 writes `<tool_call>`: a wrapper of the model's own
    ("kronk-950", Relation.FOREIGN_WRAPPER, ("<tool_call>", "</tool_call>"), ("```json",)),
    # xLAM's bare list inside `<tool_call>` tags no render of the template writes
    ("kept6-xlam-tool-call-tags", Relation.FOREIGN_WRAPPER, (), ("<tool_call>", "</tool_call>")),
    # GLM 4.7's `<tool_call>` and a JSON body: none of the template's `<arg_key>` markup inside
    ("kept9-mlx-glm47-json", Relation.TEMPLATE_MODEL_MISMATCH,
     ("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>") * 2, ()),
    # `<function_calls><invoke …>` under Qwen 3.5's template: its call pieces mostly absent, markup of its own
    ("kept4-hermes-agent-8965-qwen35-function-calls-invoke", Relation.TEMPLATE_MODEL_MISMATCH,
     ("<tool_call>", "<function=", "<parameter=", "</function>", "</tool_call>"),
     ("<function_calls>", "<invoke name=\"cronjob\">", "<parameter name=\"action\" string=\"true\">", "</invoke>",
      "</function_calls>")),
])
def test_the_relation_names_the_class_from_the_pieces(case_id, relation, absent, foreign):
    rel = _relation(case_id)[0]
    assert rel.relation == relation, rel
    assert rel.absent == absent
    assert rel.foreign == foreign


def test_pieces_absent_elsewhere_written_or_spaced_otherwise_are_left_to_the_rules():
    # Hermes 2 Pro's keys in another order: `"arguments"` is written, before `"name"` — not omitted
    rel = _relation("kept6-kept-vllm-5649-hermes2pro-call")[0]
    assert rel.relation == Relation.ALTERED and rel.absent == ('"arguments":',)
    # Qwen3-Coder's call written without the line breaks its template writes between the tags
    rel = _relation("code-graph-rag-236")[0]
    assert rel.relation == Relation.ALTERED and rel.altered == "the whitespace between the call's pieces"
    # `<tool_calls>` where DeepSeek V3.2 writes `<｜DSML｜tool_calls>`: the piece with a stretch left out
    c = _ROWS["kept9-trt-dsv4-multiple"]
    rel = _relation("kept9-trt-dsv4-multiple", c["input"].replace("｜DSML｜", "", 1))[0]
    assert rel.relation == Relation.ALTERED and rel.altered == "<tool_calls>"


def test_every_piece_in_place_and_the_parse_stopped_in_a_typed_value():
    # Spark 2.5: the template's markup throughout, `not-an-int` where the schema types `count` an integer
    rel = _relation("kept11-sglang-spark25-null-and-conversion-fallbacks")[0]
    assert rel.relation == Relation.CONSISTENT and rel.absent == () and rel.foreign == ()
    assert (rel.stop_in, rel.stop_key) == ("value", "count")


def test_muse_glimmers_tool_channel_is_the_templates_call_its_parser_does_not_read():
    # every piece (`to=`, `<|message|>`, `<atem:function_calls>`, …) in order; the analysis read it as another
    # format, then a wrapper; with the relation: the format not found, and the evidence says which pieces
    rel, ex, s, b = _relation("kept11-sglang-muse-glimmer-single-tool-call")
    assert rel.relation == Relation.CONSISTENT
    assert rel.pieces[:3] == ("to=", "<|message|>", "<atem:function_calls>")
    tg = triage(ex, s, b, seconds=30.0, reexplain=explain)
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND
    assert tg.relation is not None and tg.to_json()["relation"]["pieces"][:2] == ["to=", "<|message|>"]
    assert any("the output writes every one of them, in order" in e and "our parser" in e
               and "read by a handler of its own, not by the analysis" in e for e in tg.evidence)


def test_a_padded_integer_with_the_markup_in_place_is_a_type_mismatch_not_an_omitted_marker():
    # Poolside (kept11): the markup exactly as rendered; the rules named the value's padding an omitted marker
    rel, ex, s, b = _relation("kept10-vllm-poolside-non-string-arg-still-deserialized")
    assert rel.relation == Relation.CONSISTENT and rel.stop_in == "value"
    tg = triage(ex, s, b, seconds=30.0, reexplain=explain)
    assert tg.mistake == Mistake.TYPE_MISMATCH
    assert any("so nothing was omitted" in e for e in tg.evidence)


def test_the_pieces_come_from_the_renders_cut_at_the_fills_never_inside_a_token():
    # GLM 4.7 renders keys `a` and `b`: the cut is at the words, `<arg_key>` stays whole
    rel = _relation("kept9-mlx-glm47-json")[0]
    assert rel.pieces[0] == "<tool_call>" and "<arg_key>" in rel.pieces and rel.pieces[-1] == "</tool_call>"
    # FunctionGemma's call turn and plain turn share `model`: it is no piece of the call
    rel = _relation("kept6-vllm-functiongemma-single")[0]
    assert rel.pieces[0] == "<start_function_call>"
    # the same with the pure function, on that template's own render text
    call = call_pieces(rel.render, "", {"get_weather": "name", "location": "key", "zqv0x": "value"})
    assert call.pieces == rel.pieces and call.gaps == ("name", "key", "value")


def test_nothing_to_say_without_tools_or_beyond_the_bound():
    # gpt-oss with no tools sent (cline#5393): no tool to render a call of
    assert _relation("kept14-cline-5393-gptoss-20b-recipient-without-functions-no-tools")[0] is None
    c = _ROWS["kept14-opencode-7083-qwen25coder-bare-json-todoread"]
    assert _relation(c["id"], c["input"] + " " * MAX_OUTPUT)[0] is None
    # an empty set of pieces (a template that renders no call) relates to nothing
    assert relate(call_pieces("", "", {}), c["input"], format_found=True, rendered=frozenset()).relation \
        == Relation.NO_CALL


def test_a_rule_with_evidence_of_its_own_keeps_its_answer():
    # Mistral v3's call without `[TOOL_CALLS]` (mistral-inference#162): the relation finds the opener absent (and
    # the call's `"id"`), the stripped-tokens reading re-parsed the output with the token put back — that one stands
    rel, ex, s, b = _relation("mistral-inference-162")
    assert rel.absent[0] == "[TOOL_CALLS]" and '"id":' in rel.absent
    tg = triage(ex, s, b, seconds=30.0, reexplain=explain)
    assert tg.mistake == Mistake.SPECIAL_TOKENS_STRIPPED and tg.relation is None
    # Muse Glimmer's header without `assistant` (kept13): the header rule's answer (the prompt's tail written again
    # in part), about no call at all
    rel, ex, s, b = _relation("kept11-sglang-muse-glimmer-reasoning-header-without-recipient")
    tg = triage(ex, s, b, seconds=30.0, reexplain=explain)
    assert tg.mistake == Mistake.REPEATED_PROMPT_TAIL and tg.relation is None


# a hostile template's call markup: a tag holding a backtick (tags may hold any character but white space, <, >, =
# and a quote), rendered around a call of the request's tool
BACKTICK_WITH_CALL = 'U: hi\nA: <x`call>get_weather {"city": "F0"}</x`call>\n'
BACKTICK_WITHOUT_CALL = "U: hi\nA: \n"


@pytest.mark.parametrize("output, relation", [
    ('<x`call>get_weather {"city": "SF"}', Relation.OMITTED_CLOSER),
    ('get_weather {"city": "SF"}</x`call>', Relation.OMITTED_OPENER),
    ('<tool_call><x`call>get_weather {"city": "SF"}</x`call></tool_call>', Relation.FOREIGN_WRAPPER)])
def test_the_relation_sentence_quotes_a_piece_with_a_backtick_as_one_code_span(output, relation):
    """The sentence fenced each piece with one backtick, so a piece `<x`call>` read as the code span `<x` and
    loose text on the Explain page (the triage's evidence is Markdown); each piece is one code span as
    core.escapes.code_span writes it."""
    call = call_pieces(BACKTICK_WITH_CALL, BACKTICK_WITHOUT_CALL, {"get_weather": "name", "city": "key", "F0": "value"})
    assert call.pieces == ("<x`call>", "</x`call>")
    rel = relate(call, output, format_found=True, rendered=frozenset(call.pieces), names=frozenset({"get_weather"}))
    assert rel.relation == relation
    sentence = rel.sentence()
    assert "``<x`call>``, ``</x`call>`` around the name" in sentence, sentence
    assert "`<x`call>`," not in sentence and "`</x`call>`" not in sentence.replace("``</x`call>``", ""), sentence


MUSE = "kept11-sglang-muse-glimmer-single-tool-call"                  # kept13: every piece of the tool channel written
QWEN_BARE = "kept14-opencode-7083-qwen25coder-bare-json-todoread"      # kept14: a bare JSON call, the opener absent


def _triaged(case_id: str):
    rel, ex, s, b = _relation(case_id)
    return triage(ex, s, b, seconds=30.0, reexplain=explain)


def test_the_triage_carries_the_relation_piece_by_piece_when_it_decided_or_agrees():
    # Muse Glimmer's tool channel: every piece written in order; the consistent relation decided FORMAT_NOT_FOUND
    tg = _triaged(MUSE)
    assert tg.mistake == Mistake.FORMAT_NOT_FOUND and tg.relation_decided
    assert [r.mark for r in piece_rows(tg.relation)] == [PieceMark.MATCHED] * 10
    lines = relation_lines(tg.relation, tg.relation_decided)
    assert lines[0] == "call relation: consistent (it decided the mistake) — the template's call pieces against " \
                       "the output's markup"
    assert lines[2:5] == ["matched  `to=`", "matched  `<|message|>`", "matched  `<atem:function_calls>`"]
    assert lines[-2:] == ["foreign: none (no markup of the output's own around the call)",
                          "the parse stopped in the call's name"]
    # Qwen2.5-Coder's bare JSON call: the rules named the omitted opener, the relation the same class — it goes
    # with the triage too (not deciding), and the JSON says which
    tg = _triaged(QWEN_BARE)
    assert tg.mistake == Mistake.OMITTED_OPENER and not tg.relation_decided
    assert tg.to_json()["relation"]["relation"] == "OMITTED_OPENER" and tg.to_json()["relation_decided"] is False
    assert piece_rows(tg.relation) == (PieceRow("<tool_call>", PieceMark.ABSENT),
                                       PieceRow('"name":', PieceMark.MATCHED),
                                       PieceRow('"arguments":', PieceMark.MATCHED),
                                       PieceRow("</tool_call>", PieceMark.ABSENT))
    assert relation_lines(tg.relation, False) == [
        "call relation: the opener left out (it names the mistake the rules named) — the template's call pieces against "
        "the output's markup",
        'render: `<tool_call>↵{"name":␣"todoread",␣"arguments":␣{}}↵</tool_call>`',
        "absent   `<tool_call>`", 'matched  `"name":`', 'matched  `"arguments":`', "absent   `</tool_call>`",
        "foreign: none (no markup of the output's own around the call)"]
    # what the page reads back from the worker's JSON is the same relation
    assert CallRelation.from_json(tg.to_json()["relation"]) == tg.relation


def test_a_piece_written_altered_and_a_piece_past_the_outputs_end_are_marked_so():
    # `<tool_calls>` where DeepSeek V3.2 writes `<｜DSML｜tool_calls>` (kept9's TRT-LLM output, the prefix cut)
    c = _ROWS["kept9-trt-dsv4-multiple"]
    rel = _relation("kept9-trt-dsv4-multiple", c["input"].replace("｜DSML｜", "", 1))[0]
    rows = piece_rows(rel)
    assert rows[0] == PieceRow("<｜DSML｜tool_calls>", PieceMark.ALTERED, "<tool_calls>")
    assert "altered  `<｜DSML｜tool_calls>` written `<tool_calls>`" in relation_lines(rel, False)
    # Qwen2.5-Coder's call cut after `"arguments":` (the output ends there): `</tool_call>` is the turn's end
    rel = relate(call_pieces(_relation(QWEN_BARE)[0].render, "", {"todoread": "name"}), '{"name": "todoread", '
                 '"arguments":', format_found=True, rendered=frozenset({"<tool_call>", "</tool_call>"}))
    assert [r.mark for r in piece_rows(rel)] == [PieceMark.ABSENT, PieceMark.MATCHED, PieceMark.MATCHED,
                                                 PieceMark.PAST_END]


def test_every_piece_of_the_relations_lines_is_one_code_span_with_its_invisible_characters_shown():
    # a piece built to attack a view (backtick runs, an icon, a link, a bidi override: no model wrote it)
    from .test_explain_hostile import HOSTILE_NAME

    rel = _relation(QWEN_BARE)[0]
    hostile = HOSTILE_NAME + "\u202e"
    evil = CallRelation(Relation.OMITTED_OPENER, (hostile,) + rel.pieces[1:], rel.matched, (hostile, "</tool_call>"),
                        ("<x>" + HOSTILE_NAME,), rel.render + "\u2028")
    lines = relation_lines(evil, True)
    assert lines[2] == "absent   " + code_span(HOSTILE_NAME.replace(" ", "␣") + "\\u202e")
    assert lines[-1] == "foreign: " + code_span("<x>" + HOSTILE_NAME.replace(" ", "␣"))
    assert lines[1].endswith("\\u2028`") and not any(c in "".join(lines) for c in "\u202e\u2028")


def test_the_cli_text_prints_the_relations_lines(tmp_path):
    c = _ROWS[QWEN_BARE]
    req = tmp_path / "request.json"
    req.write_text(json.dumps({k: c[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls")}),
                   encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "core", "explain", str(TEMPLATES / c["template"]), "--request",
                          str(req)], input=c["input"], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "\ncall relation: the opener left out (it names the mistake the rules named) — the template's call pieces " \
           "against the output's markup\n  render: `<tool_call>↵{\"name\":␣\"todoread\",␣\"arguments\":␣{}}" \
           "↵</tool_call>`\n  absent   `<tool_call>`\n  matched  `\"name\":`\n" in out, out
