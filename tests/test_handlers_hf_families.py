"""Checks across H-F's special handlers (gemma4, lfm2, ling3, minimax_m3, kimi_k2, kimi_k3, minicpm5, muse_glimmer,
cohere2moe), for every corpus template routed to one of them:

* against llama.cpp's own output for the one-tool request of reference/analysis.jsonl: grammar (GBNF text, up to
  the numbering of ``until`` helper rules), laziness, triggers, preserved tokens, additional stops, generation
  prompt;
* every grammar made for these families' reference cases is valid and accepts the constrained output;
* round trip: an assistant message with reasoning, content and two tool calls, rendered by the template, parses
  back to the same message (templates that drop a part of the message when rendering are listed).
"""

from __future__ import annotations

import importlib
import json

import pytest

from core.chat.request import ChatRequest
from core.diff import common_prefix_len
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source
from . import handler_checks as C

MODULES = ["gemma4", "lfm2", "ling3", "minimax_m3", "kimi_k2", "kimi_k3", "minicpm5", "muse_glimmer", "cohere2moe"]
TOOL = {"type": "function", "function": {"name": "special_function", "description": "I'm special", "parameters": {
    "type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}}, "required": ["arg1"]}}}


def _routed(reference_analysis):
    """(template, module) for each specialised corpus template whose first matching handler is ours."""
    from core.chat.formats import detect_family

    out = []
    for name, row in sorted(reference_analysis.items()):
        if row.get("route") != "specialized" or "apply" not in row:
            continue
        fam = detect_family(ChatTemplate(template_source(name)).normalized_source)
        if fam is not None and fam.module in MODULES:
            out.append((name, fam.module))
    return out


def test_routing_covers_every_family(reference_analysis):
    mods = {m for _, m in _routed(reference_analysis)}
    assert mods == set(MODULES)


def test_one_tool_request_matches_llama_cpp(reference_analysis):
    fails = []
    for name, module in _routed(reference_analysis):
        apply = reference_analysis[name]["apply"]
        mod = importlib.import_module(f"core.chat.formats.{module}")
        tmpl = ChatTemplate(template_source(name), name)
        req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}], "tools": [TOOL]})
        p = mod.build(tmpl, req, C.simple_generation_prompt(tmpl, req), None)
        got = {
            "grammar": C.normalize_gbnf(p.grammar or ""),
            "lazy": p.grammar_lazy,
            "triggers": [(t.type.value, t.value) for t in p.grammar_triggers],
            "preserved": p.preserved_tokens,
            "stops": p.additional_stops,
            "gp": p.generation_prompt,
        }
        kinds = {1: "word", 2: "pattern", 3: "pattern_full", 0: "token"}
        want = {
            "grammar": C.normalize_gbnf(C.by_index(apply["grammar"])),
            "lazy": apply["grammar_lazy"],
            "triggers": [(kinds[t["type"]], t["value"]) for t in apply["grammar_triggers"]],
            "preserved": apply["preserved_tokens"],
            "stops": apply["additional_stops"],
            "gp": apply["generation_prompt"],
        }
        for k in want:
            if got[k] != want[k]:
                fails.append(f"{name} [{module}] {k}: got {str(got[k])[:200]} want {str(want[k])[:200]}")
    assert not fails, "\n".join(fails)


FAMILY_TEMPLATES = {
    "gemma4": ["google-gemma-4-31B-it.jinja"],
    "lfm2": ["LFM2-8B-A1B.jinja", "LFM2.5-Instruct.jinja", "LFM2.5-8B-A1B.jinja"],
    "ling3": ["inclusionai-ling-3.0-flash.jinja"],
    "minimax_m3": ["MiniMax-M3.jinja"],
    "kimi_k2": ["Kimi-K2-Instruct.jinja", "moonshotai-Kimi-K2.llamacpp-edit.jinja"],
    "kimi_k3": ["Kimi-K3.jinja"],
    "minicpm5": ["openbmb-MiniCPM5-1B.jinja"],
    "muse_glimmer": ["muse-glimmer.jinja"],
}


def _grammar_span(parser, text: str) -> int | None:
    """Where the grammar starts constraining ``text`` (generation prompt + output): 0 for a non-lazy grammar,
    the first trigger match for a lazy one (a pattern's first group), None if no trigger fires."""
    import re

    if not parser.grammar_lazy:
        return 0

    def in_thinking(pos: int) -> bool:
        # llama.cpp does not fire triggers inside a thinking block (thinking_start_tag .. thinking_end_tags)
        start_tag = parser.thinking_start_tag
        if not start_tag:
            return False
        last_start = text.rfind(start_tag, 0, pos)
        if last_start < 0 or any(text.startswith(e, pos) for e in parser.thinking_end_tags):
            return False
        return all(text.rfind(e, 0, pos) < last_start for e in parser.thinking_end_tags)

    starts = []
    for t in parser.grammar_triggers:
        if t.type.value == "word":
            i = text.find(t.value)
            while i >= 0 and in_thinking(i):
                i = text.find(t.value, i + 1)
            if i >= 0:
                starts.append(i)
        else:
            for m in re.finditer(t.value, text):
                i = m.start(1) if m.re.groups else m.start()
                if not in_thinking(i):
                    starts.append(i)
                    break
    return min(starts) if starts else None


def test_reference_case_grammars_are_valid_and_accept_the_output(reference_cases):
    """Each grammar made for a reference case of these families is well-formed for llguidance and accepts the
    constrained part of generation prompt + output (as a prefix when the case is cut off)."""
    validator = pytest.importorskip("tests.test_gbnf_validator")
    fails, checked = [], 0
    for module, templates in FAMILY_TEMPLATES.items():
        mod = importlib.import_module(f"core.chat.formats.{module}")
        for case in reference_cases:
            if case["template"] not in templates:
                continue
            tmpl = ChatTemplate(template_source(case["template"]), case["template"])
            req = ChatRequest.from_dict(case)
            p = mod.build(tmpl, req, C.simple_generation_prompt(tmpl, req), None)
            if p.grammar is None:   # a PEG family always has one when its builder emits one (problems: notes)
                if getattr(p, "grammar_error", ""):
                    fails.append(f"{case['id']}: no grammar: {p.grammar_error}")
                continue
            # llguidance's own GBNF front end builds greedy lexemes and reports "lexer error" for terminal-only
            # rules that overlap (llama.cpp's standard `[^:}]+`, JSON `char` classes); such grammars are still
            # compiled and checked below through the one-character Lark translation
            problems = [m for m in validator.gbnf_problems(p.grammar) if "lexer error" not in m]
            if problems:
                fails.append(f"{case['id']}: malformed grammar: {problems[:2]}")
                continue
            text = p.generation_prompt + case["input"]
            start = _grammar_span(p, text)
            if start is None:
                continue
            checked += 1
            ok, why = validator.gbnf_accepts(p.grammar, text[start:], complete=not case.get("is_partial"))
            if not ok:
                fails.append(f"{case['id']} [{case['template']}]: {why}")
    assert checked >= 80, checked
    assert not fails, "\n".join(fails)


ROUND_TRIP_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
        "tz": {"type": "string"}}, "required": ["tz"]}}},
]
ROUND_TRIP_MESSAGE = {
    "role": "assistant", "reasoning_content": "I should check both.", "content": "Let me look that up.",
    "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
        {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}},
    ],
}
# end-of-turn tokens: generation stops there, so they are not part of the model output
END_OF_TURN = ["<|im_end|>", "<turn|>", "<|tool_response>", "[e~[", "<|END_OF_TURN_TOKEN|>", "<|role_end|>", "<|eot|>"]
# templates that cannot round-trip because of what they render
TEMPLATE_LIMITED = {
    "Cohere2MoE.jinja": "renders either the text or the tool calls, not both",
    "LFM2-8B-A1B.jinja": "does not render tool calls",
    "LFM2.5-Instruct.jinja": "does not render tool calls",
    "muse-glimmer.jinja": "drops the content of a turn with tool calls",
    "vllm-tool_chat_template_muse_glimmer.jinja": "drops the content of a turn with tool calls",
    "hfjs-moonshotai-Kimi-K2-Thinking.jinja": "writes the message's call ids, not functions.NAME:IDX",
    "xinference-Kimi-K2.5.jinja": "writes the message's call ids, not functions.NAME:IDX",
}


def _strip_end_of_turn(text: str) -> str:
    while True:
        t = text.rstrip()
        for m in END_OF_TURN:
            if t.endswith(m):
                t = t[: -len(m)]
                break
        else:
            return t
        text = t


def test_round_trip(reference_analysis):
    from core.chat import prompt as P

    from core.chat.formats import detect_family

    names = sorted(p.name for p in TEMPLATES.glob("*.jinja"))

    passed, failed = [], []
    for name in names:
        tmpl = ChatTemplate(template_source(name), name)
        fam = detect_family(tmpl.normalized_source)
        if fam is None or fam.module not in MODULES:
            continue
        mod = importlib.import_module(f"core.chat.formats.{fam.module}")
        base = [{"role": "user", "content": "Weather and time in Paris?"}]
        req = ChatRequest.from_dict({"messages": base, "tools": ROUND_TRIP_TOOLS, "parallel_tool_calls": True})
        prep = P.prepare_request(tmpl, req)
        parser = mod.build(tmpl, req, P.generation_prompt(prep), None, prepared=prep)
        with_gp = P.render_prompt(prep, add_generation_prompt=True)
        full_req = ChatRequest.from_dict({"messages": base + [ROUND_TRIP_MESSAGE], "tools": ROUND_TRIP_TOOLS})
        full = P.render_prompt(P.prepare_request(tmpl, full_req), add_generation_prompt=False)
        i = common_prefix_len(with_gp, full)
        got = parser.parse(_strip_end_of_turn(full[i:])).to_openai()
        want = {k: v for k, v in ROUND_TRIP_MESSAGE.items() if k != "reasoning_content"}
        want["tool_calls"] = [{**tc, "id": "", "function": {**tc["function"], "arguments": json.dumps(
            tc["function"]["arguments"])}} for tc in ROUND_TRIP_MESSAGE["tool_calls"]]
        why = C.compare_messages(want, {**got, "reasoning_content": ""})
        reasoning = (got.get("reasoning_content") or "").strip()  # absent when the template does not render it
        if why is None and reasoning and reasoning != ROUND_TRIP_MESSAGE["reasoning_content"]:
            why = f"reasoning {reasoning!r}"
        (failed if why else passed).append((name, why))
    unexpected = [f"{n}: {w}" for n, w in failed if n not in TEMPLATE_LIMITED]
    assert not unexpected, "\n".join(unexpected)
    assert {n for n, _ in failed} == set(TEMPLATE_LIMITED)
    assert len(passed) >= 15


RECURSIVE_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "object"},
    "b": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "object", "properties": {
        "x": {"$ref": "#/properties/b"}}}}]}}, "required": ["a"]}}}
EXTREME_OUTPUTS = ["", "\x00\ud800", "[" * 3000, "{" * 3000 + "a", "<|tool_call>call:f{a:" + "[" * 3000,
                   "<|tool_call_start|>[f(a=" + "[" * 3000,
                   "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
                   + '{"a":' * 2000,
                   ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="f">'
                   + "]<]minimax[>[<b>]<]minimax[>[<item>]<]minimax[>[<x>" * 200,
                   "<tool_call>f<arg_key>a</arg_key><arg_value>" + "{" * 3000, "x" * 100_000]


def test_extreme_inputs_and_recursive_schemas(reference_analysis):
    """Deep nesting, huge text, invalid characters and a recursive ``$ref`` schema: grammars still build and
    parsing never raises (recursion too deep falls back to the text as content)."""
    seen = set()
    for name, module in _routed(reference_analysis):
        if module in seen:
            continue
        seen.add(module)
        mod = importlib.import_module(f"core.chat.formats.{module}")
        tmpl = ChatTemplate(template_source(name), name)
        for choice in ("auto", "required"):
            req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": [RECURSIVE_TOOL],
                                         "tool_choice": choice, "parallel_tool_calls": True})
            p = mod.build(tmpl, req, "", None)
            assert p.grammar, (module, p.grammar_error)
            for out in EXTREME_OUTPUTS:
                for partial in (False, True):
                    assert isinstance(p.parse(out, partial).content, str)
    assert seen == set(MODULES)


def test_minimax_follows_a_ref_once_per_path():
    from core.chat.formats import minimax_m3

    tmpl = ChatTemplate(template_source("MiniMax-M3.jinja"), "MiniMax-M3.jinja")
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": [RECURSIVE_TOOL]})
    p = minimax_m3.build(tmpl, req, "]~b]ai\n", None)
    ns = "]<]minimax[>["
    out = (f'</mm:think>{ns}<tool_call>\n{ns}<invoke name="f">{ns}<a>{{"k": 1}}{ns}</a>{ns}<b>{ns}<item>{ns}<x>'
           f"{ns}<item>{ns}<x>5{ns}</x>{ns}</item>{ns}</x>{ns}</item>{ns}</b>{ns}</invoke>\n{ns}</tool_call>")
    calls = p.parse(out).tool_calls
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("f", {"a": {"k": 1}, "b": [{"x": [{"x": 5}]}]})]


@pytest.mark.parametrize("fmt", ["auto", "none"])
def test_describe_shows_the_format(reference_analysis, fmt):
    for name, module in _routed(reference_analysis):
        mod = importlib.import_module(f"core.chat.formats.{module}")
        tmpl = ChatTemplate(template_source(name), name)
        for tools in ([], [TOOL]):
            req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": tools,
                                         "reasoning_format": fmt})
            text = mod.build(tmpl, req, "", None).describe()
            assert "root <-" in text, (name, text)
            assert ("tool-0 <-" in text) == bool(tools), (name, text)
