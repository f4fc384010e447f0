"""Export of the GLM-4 chat format (improvement ``metadata-call-turns``, core/chat/formats/glm4_chat.py): a call is
``NAME\\n{json}`` after ``<|assistant|>``, further calls after the turn header again. Proven as every export is, by
transformers' own parser (one shot and streamed, no torch) on GLM-4-9B-chat's real outputs — the Berkeley
Function-Calling Leaderboard's raw generations kept in tests/data/real_outputs_kept4/glm4.jsonl and
real_outputs_kept5/glm4.jsonl, each line with its source URL — and on the template's generated suite."""

from __future__ import annotations

import json

import pytest

from core.export.redos import check_pattern, check_response_template
from core.export.response_template import export_response_template
from core.export.suite import METADATA_NOTE, generate_suite
from core.export.consumers import TRANSFORMERS_MIN
from core.export.verify import CheckStatus, case_from_real_output, check_case, transformers_available, verify
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates not present")
needs_transformers = pytest.mark.skipif(not transformers_available(),
                                        reason=f"transformers >= {TRANSFORMERS_MIN} not installed")

GLM4 = ["xinference-glm4-chat.jinja", "xinference-glm4-chat-1m.jinja", "xinference-glm4-0414.jinja"]
ROWS = [json.loads(line) for split in ("real_outputs_kept4", "real_outputs_kept5")
        for line in (ROOT / "tests" / "data" / split / "glm4.jsonl").read_text(encoding="utf-8").splitlines()]
CALL = next(r for r in ROWS if r["id"] == "kept4-bfcl-glm-4-9b-chat-executable-parallel-function-11")


def _template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)


@pytest.mark.parametrize("name", GLM4)
def test_improved_exports_the_call_turns(name):
    res = export_response_template(_template(name), fidelity="improved")
    assert res.exportable, res.reasons
    rt = res.response_template
    assert rt["start_anchor_pattern"] == r"<\|assistant\|>"
    assert set(rt["fields"]) == {"tool_calls", "content"}
    calls = rt["fields"]["tool_calls"]
    assert calls["content"] == "json" and calls["repeats"] and calls["transform"]["function"]["name"] == "{name}"
    assert calls["close_pattern"] == r"(?<=\})(?=\r?\n\s{0,1000}+[^\s,\]\}]|<\|assistant\|>)"
    assert check_response_template(rt) == {}
    assert any("metadata-call-turns" in n for n in res.notes)
    # vLLM serves it as it is (fields tool_calls and content only)
    vllm = export_response_template(_template(name), fidelity="improved", flavour="vllm")
    assert vllm.response_template == rt
    # at llama.cpp fidelity the parser (as llama.cpp) reads a call as content: so does the export
    assert set(export_response_template(_template(name)).response_template["fields"]) == {"content"}


def test_gbnf_export_is_the_call_turn_grammar():
    from core.export.gbnf import export_gbnf

    text = export_gbnf(_template(GLM4[0]), fidelity="improved")
    assert 'tool-0 ::= ("get_weather" [ \\t]* "\\n" space) tool-0-schema' in text
    assert 'tool-calls ::= (tool-0 | tool-1) (space "<|assistant|>" space (tool-0 | tool-1))*' in text
    assert "# lazy: true" in text


@needs_transformers
@pytest.mark.parametrize("flavour", ["transformers", "vllm"])
def test_transformers_agrees_with_our_parser_on_every_real_glm4_output(flavour):
    t = _template("xinference-glm4-chat.jinja")
    rt = export_response_template(t, fidelity="improved", flavour=flavour).response_template
    assert len(ROWS) == 14 and {r["template"] for r in ROWS} == {t.name}
    calls = 0
    for row in ROWS:
        check = check_case(rt, case_from_real_output(row), t, "improved", f"real:{row['id']}")
        assert check.status == CheckStatus.AGREE, (row["id"], check.why)
        assert check.ours["tool_calls" if row["expect"].get("tool_calls") else "content"]  # ours is the expected
        calls += bool(check.theirs.get("tool_calls"))
    assert calls == 13  # one answer is text


@needs_transformers
@pytest.mark.parametrize("name", GLM4)
def test_the_generated_suite_agrees(name):
    t = _template(name)
    suite = generate_suite(t, fidelity="improved")
    assert {c["id"] for c in suite.cases} >= {"suite-one_call", "suite-parallel_calls", "suite-nested_arguments",
                                              "suite-unicode_arguments", "suite-marker_in_argument"}
    assert all(c.get("note") == METADATA_NOTE for c in suite.cases if c["expect"].get("tool_calls"))
    assert "text beside a call" in suite.skipped["call_after_text"]
    rt = export_response_template(t, fidelity="improved").response_template
    v = verify(rt, t, fidelity="improved", suite=suite)
    assert v.agrees and v.count(CheckStatus.AGREE) == 7, v.to_json()
    assert v.count(CheckStatus.TRUNCATED_UNSUPPORTED) == 1  # the second call cut inside its arguments


def _hand(text: str, parallel: bool = True):
    t = _template("xinference-glm4-chat.jinja")
    rt = export_response_template(t, fidelity="improved").response_template
    case = {**case_from_real_output(CALL), "parallel_tool_calls": parallel, "input": text}
    return check_case(rt, case, t, "improved", "hand")


@needs_transformers
@pytest.mark.parametrize("after, content", [("\nI converted it.", "I converted it."),
                                            ("\n\nI converted it.", "I converted it."),
                                            ("<|assistant|>\nHello", "<|assistant|>\nHello")])
def test_text_after_a_call_is_content_in_both(after, content):
    check = _hand(CALL["output"] + after)
    assert check.status == CheckStatus.AGREE, check.why
    assert check.theirs["content"] == content and len(check.theirs["tool_calls"]) == 1


@needs_transformers
@pytest.mark.parametrize("sep", ["<|assistant|>", "\n<|assistant|>"])
def test_a_second_call_turn_after_a_call_is_a_call_and_after_text_is_content(sep):
    check = _hand(CALL["output"] + sep + CALL["output"])
    assert check.status == CheckStatus.AGREE and len(check.theirs["tool_calls"]) == 2
    text = _hand("\nLet me check." + sep + CALL["output"])
    assert text.status == CheckStatus.AGREE and "tool_calls" not in text.theirs


@needs_transformers
def test_pretty_printed_nested_arguments_end_at_the_outer_brace():
    out = 'convert_currency\n{\n  "amount": 5000,\n  "meta": {\n    "a": {"b": 1}\n  }\n}\nDone.'
    check = _hand(out)
    assert check.status == CheckStatus.AGREE
    assert check.theirs["tool_calls"][0]["function"]["arguments"] == {"amount": 5000, "meta": {"a": {"b": 1}}}


@needs_transformers
def test_the_limits_of_the_format():
    # a first line that is no tool of the request, then a JSON object: our parser keeps it as content; the
    # export cannot know the request's tools, so transformers reads a call named "Result"
    word = _hand('\nResult\n{"a": 1}')
    assert word.status == CheckStatus.DISAGREE and word.theirs["tool_calls"][0]["function"]["name"] == "Result"
    # text on the call's last line after its "}": no line break ends the JSON region, transformers raises
    same_line = _hand(CALL["output"] + " Done.")
    assert same_line.status == CheckStatus.DISAGREE and "could not parse region as JSON" in same_line.why
    # parallel_tool_calls false: our parser keeps a second call turn as content; a response_template reads it
    # (vLLM refuses such requests: core/export/consumers.py)
    assert _hand(CALL["output"] + "<|assistant|>" + CALL["output"], parallel=False).status == CheckStatus.DISAGREE


def test_a_lookbehind_start_is_not_run_across():
    # the close pattern starts after a "}" only: its whitespace run cannot cross a new start (core/export/redos.py)
    assert check_pattern(r"(?<=\})(?=\r?\n\s{0,1000}+[^\s,\]\}]|<\|assistant\|>)", streamed=True) == []
    assert [f.kind for f in check_pattern(r"(?=\r?\n\s{0,1000}+[^\s,\]\}]|<\|assistant\|>)")] == ["SPAN"]
    # a run that can match the character the lookbehind wants still crosses starts
    assert [f.kind for f in check_pattern(r"(?<=\})(?=\n[\s}]{0,1000}+x)")] == ["SPAN"]
