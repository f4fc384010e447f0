"""H-D's special handlers against llama.cpp's own ``apply`` output (reference/analysis.jsonl): for every corpus
template routed to qwen3-coder, gpt-oss, ministral-3, deepseek-v3.2, functionary-v3.2 or gigachat-v3, the
request "user Hello + special_function" gives the same prompt, generation prompt, GBNF grammar (text), lazy flag,
triggers, preserved tokens and thinking tags. Also shared helpers for the per-family handler tests."""

from __future__ import annotations

import json

import pytest

from core.chat.message import AssistantMessage, apply_deltas
from core.chat.pipeline import build_chat_parser
from core.chat.repairs import settled
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.chat.formats import detect_family
from core.jinja.cache import normalize_source
from core.jinja.template import ChatTemplate

from .conftest import REFERENCE, SHARED, TEMPLATES
from .handler_checks import by_index

MY_FAMILIES = ("qwen3-coder", "gpt-oss", "ministral-3", "deepseek-v3.2", "functionary-v3.2", "gigachat-v3")
TRIGGER_CODES = {"token": 0, "word": 1, "pattern": 2, "pattern_full": 3}

SPECIAL = {"type": "function", "function": {"name": "special_function", "description": "I'm special",
                                            "parameters": {"type": "object",
                                                           "properties": {"arg1": {"type": "integer"}},
                                                           "required": ["arg1"]}}}
SPECIAL_OPT = {"type": "function", "function": {"name": "special_function_with_opt", "parameters": {
    "type": "object", "properties": {"arg1": {"type": "integer"}, "arg2": {"type": "integer"}},
    "required": ["arg1"]}}}
PYTHON = {"type": "function", "function": {"name": "python", "parameters": {
    "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}


def template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)


def bundle(name: str, **req):
    """Build the pipeline for corpus template ``name`` with request fields ``req`` (default: user "Hello")."""
    req.setdefault("messages", [{"role": "user", "content": "Hello"}])
    return build_chat_parser(template(name), ChatRequest.from_dict(req))


def stream_check(parser, text: str, is_partial: bool = False) -> AssistantMessage:
    """Feed ``text`` one character at a time: after every step the accumulated deltas equal the parse of the
    prefix and nothing was held back; at the end they equal the one-shot parse. Returns that parse."""
    sp = StreamingParser(parser)
    acc = AssistantMessage()
    for i, ch in enumerate(text):
        acc = apply_deltas(acc, sp.feed(ch))
        assert acc == parser.parse(text[:i + 1], True), f"after {text[:i + 1]!r}"
    acc = apply_deltas(acc, sp.finish(is_partial))
    final = parser.parse(text, is_partial)
    assert acc == final
    assert sp.held_back == 0
    return final


def stream_robust(parser, text: str) -> None:
    """For arbitrary text: feeding never raises, the accumulated message only grows (every field extends the
    previous one), and unless the stream reports ``final_mismatch`` (the format itself took something back,
    where llama.cpp would raise "Invalid diff") the deltas add up to the one-shot parse."""
    sp = StreamingParser(parser)
    acc = AssistantMessage()
    for ch in text:
        new = apply_deltas(acc, sp.feed(ch))
        assert new.content.startswith(acc.content) and new.reasoning_content.startswith(acc.reasoning_content)
        assert len(new.tool_calls) >= len(acc.tool_calls)
        acc = new
    acc = apply_deltas(acc, sp.finish())
    one = parser.parse(text)
    if not sp.final_mismatch:
        # the streaming contract (core.chat.repairs): a call cut off at the end whose fragments were already
        # streamed is reported as truncated-call by both, and the client drops it (deltas are never taken back)
        assert settled(acc, one) == one
    assert acc == sp.message


def args(msg: AssistantMessage, i: int = 0) -> dict:
    return json.loads(msg.tool_calls[i].arguments)


def _rows():
    with open(REFERENCE / "analysis.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_reference_apply_matches_for_my_families():
    tools = json.loads((SHARED / "tools" / "oracle" / "tools.json").read_text())
    seen = {f: 0 for f in MY_FAMILIES}
    mismatches = []
    for row in _rows():
        if row.get("route") != "specialized" or "apply" not in row:
            continue
        fam = detect_family(normalize_source((TEMPLATES / row["template"]).read_text(encoding="utf-8")))
        if fam is None or fam.name not in MY_FAMILIES:
            continue
        b = bundle(row["template"], tools=tools)
        if b.format not in MY_FAMILIES:
            continue
        seen[b.format] += 1
        a, p = row["apply"], b.parser
        got = {
            "prompt": b.prompt, "generation_prompt": b.generation_prompt, "grammar": p.grammar or "",
            "grammar_lazy": p.grammar_lazy,
            "grammar_triggers": [{"type": TRIGGER_CODES[t.type.value], "value": t.value} for t in p.grammar_triggers],
            "preserved_tokens": p.preserved_tokens, "additional_stops": p.additional_stops,
            "supports_thinking": p.supports_thinking, "thinking_start_tag": p.thinking_start_tag,
            "thinking_end_tags": p.thinking_end_tags,
        }
        want = dict(a, grammar=by_index(a["grammar"]) if a["grammar"] else a["grammar"])
        for k, v in got.items():
            if v != want[k]:
                mismatches.append((row["template"], k))
    assert not mismatches, mismatches
    assert seen == {"qwen3-coder": 14, "gpt-oss": 2, "ministral-3": 6, "deepseek-v3.2": 3, "functionary-v3.2": 1,
                    "gigachat-v3": 1}


@pytest.mark.parametrize("name,family", [
    ("Qwen3.5-4B.jinja", "qwen3-coder"), ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "qwen3-coder"),
    ("StepFun3.5-Flash.jinja", "qwen3-coder"), ("openai-gpt-oss-120b.jinja", "gpt-oss"),
    ("unsloth-mistral-Devstral-Small-2507.jinja", "ministral-3"), ("deepseek-ai-DeepSeek-V3.2.jinja", "deepseek-v3.2"),
    ("meetkai-functionary-medium-v3.2.jinja", "functionary-v3.2"), ("GigaChat3-10B-A1.8B.jinja", "gigachat-v3"),
    ("GigaChat3.1-10B-A1.8B.jinja", None), ("Mistral-Small-3.2-24B-Instruct-2506.jinja", None),
])
def test_routing(name, family):
    b = bundle(name)
    if family is None:
        assert b.route.kind == "autoparser" and b.format == "peg-native"
    else:
        assert b.route.kind == "specialized" and b.format == family
        assert b.parser.describe().startswith(f"# special handler: {family}")
