"""Improvement ``metadata-call-turns``: GLM-4 chat's calls (``NAME\\n{json}``), read with the layout its template
renders (core/chat/formats/glm4_chat.py).

The outputs are GLM-4-9B-chat's raw generations from the Berkeley Function-Calling Leaderboard's result files
(tests/data/real_outputs_kept4/glm4.jsonl; each line carries its source URL), used exact or cut."""

from __future__ import annotations

import json
import re

import pytest

from core.analysis import analyze
from core.analysis.fidelity import IMPROVEMENTS_BY_NAME, METADATA_CALL_TURNS
from core.chat.formats.glm4_chat import CallTurnLayout, call_layout_of
from core.chat.lossless import lost_word_spans, parser_marks
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES, template_source

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

GLM4 = "xinference-glm4-chat.jinja"
CASES = {c["id"]: c for c in map(json.loads, (ROOT / "tests" / "data" / "real_outputs_kept4" / "glm4.jsonl")
                                  .read_text(encoding="utf-8").splitlines())}
CALL = CASES["kept4-bfcl-glm-4-9b-chat-executable-parallel-function-11"]
TEXT = CASES["kept4-bfcl-glm-4-9b-chat-relevance-11"]


def _tmpl(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


def _bundle(case: dict, fidelity: str = "improved", report=None, **changes):
    req = ChatRequest.from_dict({**case["request"], **changes})
    return build_chat_parser(_tmpl(case["template"]), req, fidelity=fidelity, report=report)


def _streamed(parser, text: str, size: int):
    sp = StreamingParser(parser)
    for i in range(0, len(text), size):
        sp.feed(text[i:i + size])
    sp.finish()
    return sp.message


def test_layout_learned_from_renders():
    assert call_layout_of(_tmpl(GLM4)) == CallTurnLayout("\n", "<|assistant|>", tools_in_messages=True)
    assert call_layout_of(_tmpl("xinference-glm4-chat-1m.jinja")) == CallTurnLayout("\n", "<|assistant|>", True)
    assert call_layout_of(_tmpl("xinference-glm4-0414.jinja")) == CallTurnLayout(" \n", "<|assistant|>", False)
    # templates that render tool_calls, or no metadata, have no such layout
    for name in ("glm_4_5.jinja", "Qwen-Qwen3-0.6B.jinja", "xinference-glm-edge-chat.jinja",
                 "vllm-tool_chat_template_functiongemma.jinja"):
        assert call_layout_of(_tmpl(name)) is None, name
    assert IMPROVEMENTS_BY_NAME[METADATA_CALL_TURNS].example == GLM4


def test_the_call_parses_at_improved_only():
    b = _bundle(CALL)
    assert b.format == "glm4-chat" and any(METADATA_CALL_TURNS in n for n in b.notes)
    msg = b.parser.parse(CALL["output"]).to_openai()
    assert not msg.get("content")
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]] == [
        ("convert_currency", {"amount": 5000, "from_currency": "JPY", "to_currency": "USD"})]
    # llama.cpp fidelity, and improved with the improvement switched off: the auto-parser, the call is content
    assert _bundle(CALL, "llama.cpp").parser.parse(CALL["output"]).to_openai() == {
        "role": "assistant", "content": CALL["output"]}
    off = analyze(_tmpl(GLM4), fidelity="improved", disabled_improvements=[METADATA_CALL_TURNS])
    b_off = _bundle(CALL, report=off)
    assert b_off.format != "glm4-chat"
    assert b_off.parser.parse(CALL["output"]).to_openai()["content"] == CALL["output"]
    # no tools, or tool_choice none: the auto-parser as before
    assert _bundle(CALL, tools=[]).format != "glm4-chat"
    assert _bundle(CALL, tool_choice="none").format != "glm4-chat"


def test_a_text_answer_stays_content_with_its_line_break():
    b = _bundle(TEXT)
    assert b.format == "glm4-chat"
    assert b.parser.parse(TEXT["output"]).to_openai() == TEXT["expect"]


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_every_cut_streams_as_it_parses_and_loses_no_word(case_id):
    case = CASES[case_id]
    parser = _bundle(case).parser
    out = case["output"]
    for k in range(1, len(out) + 1, 3):
        text = out[:k]
        one = parser.parse(text, False)
        assert not lost_word_spans(text, one, parser_marks(parser)), text
        for size in (1, 4, len(text)):
            assert _streamed(parser, text, size).to_openai() == one.to_openai(), (text, size)
        if one.tool_calls:   # a call is returned only once its arguments are a complete object
            assert json.loads(one.tool_calls[0].arguments) == json.loads(case["expect"]["tool_calls"][0]
                                                                          ["function"]["arguments"])


def test_text_after_the_call_is_content_and_parallel_calls_follow_the_turn_header():
    out = CALL["output"]
    b = _bundle(CALL)
    after = b.parser.parse(out + "\nI converted it.").to_openai()
    assert after["content"] == "I converted it." and len(after["tool_calls"]) == 1
    # the second call as the template renders two call turns; without parallel calls it is content
    two = out + "<|assistant|>" + out
    assert b.parser.parse(two).to_openai()["content"] == "<|assistant|>" + out
    par = _bundle(CALL, parallel_tool_calls=True).parser
    msg = par.parse(two).to_openai()
    assert not msg.get("content") and [c["function"]["name"] for c in msg["tool_calls"]] == ["convert_currency"] * 2
    assert _streamed(par, two, 5).to_openai() == msg
    assert par.preserved_tokens == ["<|assistant|>"]


def test_grammar_starts_at_a_tool_name():
    b = _bundle(CALL)
    p = b.parser
    assert p.grammar_lazy and len(p.grammar_triggers) == 1
    trig = p.grammar_triggers[0]
    assert trig.type.value == "pattern"
    m = re.search(trig.value, CALL["output"])
    assert m and m.start(1) == 0 and m.group(1) == "convert_currency\n"
    assert not re.search(trig.value, TEXT["output"])
    assert 'root ::= tool-calls' in p.grammar and '"convert_currency"' in p.grammar
    req = _bundle(CALL, tool_choice="required").parser
    assert not req.grammar_lazy and "root ::= space tool-calls" in req.grammar


def test_a_hostile_tool_name_is_a_literal_in_the_trigger():
    name = "a.b(c)*|d"
    tool = {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    p = _bundle(CALL, tools=[tool]).parser
    pat = p.grammar_triggers[0].value
    assert re.search(pat, name + "\n{}") and not re.search(pat, "aXb(c)\n{}") and not re.search(pat, "d\n{}")
    msg = p.parse(name + "\n{}").to_openai()
    assert msg["tool_calls"][0]["function"]["name"] == name


def test_the_request_tools_reach_a_template_that_reads_them_from_a_message():
    # BFCL attached the tools to the user turn (kept in the request): the prompt is the request path's
    b = _bundle(CALL)
    assert b.prompt.count("## convert_currency") == 1
    # an OpenAI request with top-level tools only: they go in a first system turn, as GLM-4's own server puts them
    user_only = [{k: v for k, v in m.items() if k != "tools"} for m in CALL["request"]["messages"]]
    prompt = _bundle(CALL, messages=user_only).prompt
    assert prompt.startswith("[gMASK]<sop><|system|>\n") and prompt.count("## convert_currency") == 1
    assert prompt.index("## convert_currency") < prompt.index("<|user|>") and prompt.endswith("<|assistant|>")
    assert "## convert_currency" not in _bundle(CALL, "llama.cpp", messages=user_only).prompt
