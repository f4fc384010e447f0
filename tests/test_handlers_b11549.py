"""The families llama.cpp b11549 added (K2 Horizon, LLM-jp-4.1, TranslateGemma) and Ling 3's response format (see
docs/llama-cpp-sync.md): llama.cpp's own
test cases for them (tests/data/b11549/cases.jsonl, each with its line in b11549's tests/test-chat.cpp), parsed
one-shot and streamed character by character, plus the prompt checks of b11549's ``test_translate_gemma``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES
from .test_handlers_golden import stream_check

DATA = Path(__file__).parent / "data" / "b11549"
CASES = [json.loads(line) for line in (DATA / "cases.jsonl").read_text(encoding="utf-8").splitlines()]


def _template(name: str) -> ChatTemplate:
    """A b11549 template from tests/data/b11549, else the shared corpus (Ling 3)."""
    path = DATA / name if (DATA / name).exists() else TEMPLATES / name
    return ChatTemplate(path.read_text(encoding="utf-8"), name)


def _same(got, want: dict) -> None:
    assert got.content.strip() == want.get("content", "").strip()
    assert got.reasoning_content.strip() == want.get("reasoning_content", "").strip()
    calls = want.get("tool_calls", [])
    assert [c.name for c in got.tool_calls] == [c["function"]["name"] for c in calls]
    for g, w in zip(got.tool_calls, calls):
        assert json.loads(g.arguments) == json.loads(w["function"]["arguments"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_upstream_case(case):
    bundle = build_chat_parser(_template(case["template"]), ChatRequest.from_dict(case))
    assert bundle.route.kind == "specialized"
    _same(bundle.parser.parse(case["input"], case["is_partial"]), case["expect"])
    _same(stream_check(bundle.parser, case["input"], case["is_partial"]), case["expect"])


def test_k2_horizon_rules_are_named_by_index():
    case = next(c for c in CASES if c["id"] == "k2h-xml-call")
    grammar = build_chat_parser(_template(case["template"]), ChatRequest.from_dict(case)).parser.grammar
    names = {line.split(" ::= ")[0] for line in grammar.splitlines()}
    assert {"tool-0", "tool-0-arg-0"} <= names              # b11549's expect_rules({"tool-0", "tool-0-arg-0"})


def test_k2_horizon_grammar_switches():
    case = next(c for c in CASES if c["id"] == "k2h-xml-call")
    tmpl = _template(case["template"])
    auto = build_chat_parser(tmpl, ChatRequest.from_dict(case)).parser
    assert auto.grammar_lazy and [t.value for t in auto.grammar_triggers] == ["<ifm|tool_calls>"]
    required = build_chat_parser(tmpl, ChatRequest.from_dict(dict(case, tool_choice="required"))).parser
    assert not required.grammar_lazy and required.grammar_triggers == []
    schema = next(c for c in CASES if c["id"] == "k2h-schema")
    rf = build_chat_parser(tmpl, ChatRequest.from_dict(schema)).parser
    assert rf.grammar and not rf.grammar_lazy and "response-format" in rf.grammar


def test_k2_horizon_effort_picks_the_think_tag():
    tmpl = _template("IFM-K2-Horizon.jinja")
    req = {"messages": [{"role": "user", "content": "Hey there!"}], "reasoning_format": "auto",
           "chat_template_kwargs": {"reasoning_effort": "medium"}}
    b = build_chat_parser(tmpl, ChatRequest.from_dict(req))
    assert b.generation_prompt == "<|ifm|im_start|>assistant\n<ifm|think_fast>\n"
    assert b.parser.thinking_end_tags == ["</ifm|think_fast>"]
    msg = b.parser.parse("hmm</ifm|think_fast>ok")
    assert (msg.reasoning_content, msg.content) == ("hmm", "ok")


def test_k2_horizon_renders_assistant_turns_without_thinking():
    """The template raises on an assistant turn without a thinking field; the handler adds an empty one."""
    req = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "user", "content": "c"}]}
    b = build_chat_parser(_template("IFM-K2-Horizon.jinja"), ChatRequest.from_dict(req))
    assert "<|ifm|im_start|>assistant\n<ifm|think>\n</ifm|think>b<|ifm|im_end|><|ifm|im_start|>user\nc" in b.prompt


KW = {"source_lang_code": "en", "target_lang_code": "fr"}


def test_translate_gemma_prompt_as_b11549():
    """b11549 tests/test-chat.cpp ``test_translate_gemma``."""
    tmpl = _template("google-translategemma-4b-it.jinja")
    b = build_chat_parser(tmpl, ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hey there!"}],
                                                       "chat_template_kwargs": KW}))
    assert "English (en) to French (fr) translator" in b.prompt
    assert "into French:\n\n\nHey there!<end_of_turn>\n" in b.prompt
    assert b.generation_prompt == "<start_of_turn>model\n" and b.prompt.endswith(b.generation_prompt)
    parts = {"role": "user", "content": [{"type": "text", "text": "Hey"}, {"type": "text", "text": "there"}]}
    b = build_chat_parser(tmpl, ChatRequest.from_dict({"messages": [parts], "chat_template_kwargs": KW}))
    assert "into French:\n\n\nHey\nthere<end_of_turn>\n" in b.prompt
    b = build_chat_parser(tmpl, ChatRequest.from_dict({
        "messages": [{"role": "user", "content": "Hey there!"},
                     {"role": "assistant", "content": "Hello, ", "reasoning_content": "I'm thinking"}],
        "add_generation_prompt": False, "continue_final_message": "content", "chat_template_kwargs": KW}))
    assert b.generation_prompt == "<start_of_turn>model\nHello, "
    assert b.prompt.endswith("Hey there!<end_of_turn>\n<start_of_turn>model\nHello, ")


def test_translate_gemma_defaults_to_en_gb():
    b = build_chat_parser(_template("google-translategemma-4b-it.jinja"),
                          ChatRequest.from_dict({"messages": [{"role": "user", "content": "How are you?"}]}))
    assert "English (en-GB) to English (en-GB) translator" in b.prompt and "How are you?" in b.prompt


def test_ling3_response_format_grammar_is_not_lazy():
    case = next(c for c in CASES if c["id"] == "ling3-response-format-thinking")
    p = build_chat_parser(_template(case["template"]), ChatRequest.from_dict(case)).parser
    assert p.grammar and not p.grammar_lazy and "response-format" in p.grammar
    assert [t.value for t in p.grammar_triggers] == ["<tool_call>"]      # b11549 sets the trigger all the same


APPLIES = json.loads((DATA / "applies.json").read_text(encoding="utf-8"))["rows"]


def _apply_id(i: int, row: dict) -> str:
    req = row["request"]
    return f"{row['template']}:{'tools' if req.get('tools') else 'schema' if req.get('json_schema') else 'plain'}:{i}"


@pytest.mark.parametrize("row", APPLIES, ids=[_apply_id(i, r) for i, r in enumerate(APPLIES)])
def test_apply_is_llama_cpp_b11549s(row):
    """The new families' prompt, generation prompt, grammar, laziness, triggers, preserved tokens, stops and
    thinking tags equal what b11549 itself answers (tests/data/b11549/applies.json, recorded from the b11549
    oracle with the reference clock that conftest pins here too)."""
    from .handler_checks import normalize_gbnf
    from .test_handlers_golden import TRIGGER_CODES

    req = {k: v for k, v in row["request"].items() if k not in ("op", "template")}
    b = build_chat_parser(_template(row["template"]), ChatRequest.from_dict(req))
    p, want = b.parser, row["answer"]
    got = {"prompt": b.prompt, "generation_prompt": b.generation_prompt, "grammar_lazy": p.grammar_lazy,
           "grammar_triggers": [{"type": TRIGGER_CODES[t.type.value], "value": t.value} for t in p.grammar_triggers],
           "preserved_tokens": p.preserved_tokens, "additional_stops": p.additional_stops,
           "supports_thinking": p.supports_thinking, "thinking_start_tag": p.thinking_start_tag,
           "thinking_end_tags": p.thinking_end_tags}
    assert got == {k: want[k] for k in got}
    assert normalize_gbnf(p.grammar or "") == normalize_gbnf(want["grammar"])
