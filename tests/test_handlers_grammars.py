"""H-F's special handlers against llama.cpp's own output for the one-tool request of reference/analysis.jsonl:
grammar (GBNF text, up to the numbering of ``until`` helper rules), laziness, triggers, preserved tokens,
additional stops and generation prompt, for every corpus template routed to one of these handlers."""

from __future__ import annotations

import importlib

import pytest

from core.chat.handlers import _common as C
from core.chat.request import ChatRequest
from core.templating import ChatTemplate

from .conftest import template_source

MODULES = ["gemma4", "lfm2", "ling3", "minimax_m3", "kimi_k2", "kimi_k3", "minicpm5", "muse_glimmer", "cohere2moe"]
TOOL = {"type": "function", "function": {"name": "special_function", "description": "I'm special", "parameters": {
    "type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}}, "required": ["arg1"]}}}


def _routed(reference_analysis):
    """(template, module) for each specialised corpus template whose first matching handler is ours."""
    from core.chat.handlers import detect_family

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
        mod = importlib.import_module(f"core.chat.handlers.{module}")
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
            "grammar": C.normalize_gbnf(apply["grammar"]),
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
