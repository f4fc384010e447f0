"""Ministral / Magistral (Large) 3 — also Devstral (llama.cpp ``common/parsers/ministral3.cpp``).

Output shape: ``[THINK]reasoning[/THINK]`` (optional), content, then ``[TOOL_CALLS]NAME[ARGS]{json}`` calls
(repeated when parallel calls are allowed). A response format is JSON in a ```` ```json ```` fence. There is no
generation prefix to match (the template's generation prompt is empty; a continuation prefill is
``[THINK]reasoning[/THINK]content``).

Request side: system and assistant messages get list content — a ``thinking`` block from
``reasoning_content``, then the text — as the template reads them.
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..prompt import generation_prompt as compute_generation_prompt, render_prompt
from ..repairs import REASONING_END_UNMATCHED, REASONING_START_WHITESPACE, TRAILING_EOS_TOKEN, trailing_eos
from ..request import ReasoningFormat, ToolChoice
from ._peg_handler import (foreach_function_indexed,
                           function_parameters_schema, grammar_for, has_response_format,
                           make_parser, prepared_for, word)

NAME = "ministral-3"


def adjust_messages(messages: list[dict]) -> list[dict]:
    """System and assistant messages: content becomes blocks ``[{type: thinking}, {type: text}]`` (thinking
    only when ``reasoning_content`` is a string; list content is appended as is); ``reasoning_content``
    removed. Other messages unchanged."""
    out = []
    for m in messages:
        if m.get("role") not in ("system", "assistant"):
            out.append(m)
            continue
        blocks: list[Any] = []
        if isinstance(m.get("reasoning_content"), str):
            blocks.append({"type": "thinking", "thinking": m["reasoning_content"]})
        if "content" in m:
            c = m["content"]
            if isinstance(c, str):
                blocks.append({"type": "text", "text": c})
            elif isinstance(c, list):
                blocks.extend(c)
        adj = dict(m)
        adj["content"] = blocks
        adj.pop("reasoning_content", None)
        out.append(adj)
    return out


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for a Ministral 3 template (see module doc)."""
    prep = prepared_for(template, request, prepared)
    msgs = adjust_messages(prep.messages)
    prompt = render_prompt(prep, messages_override=msgs)
    gp = compute_generation_prompt(prep, messages_override=msgs)
    parser_gp = gp
    if prep.has_continuation:
        gp = prep.prefill("[THINK]", "[/THINK]")
        prompt += gp

    has_tools = bool(request.tools)
    has_rf = has_response_format(request)
    extract = request.reasoning_format != ReasoningFormat.NONE
    tools_active = has_tools and request.tool_choice != ToolChoice.NONE
    include_grammar = has_rf or tools_active

    def root(p):
        prefix = p.eps()
        if extract:
            # the body before the opener: node ids name the grammar's until-N rules, in llama.cpp's order
            body = p.reasoning(p.until("[/THINK]"))
            opener: Any = "[THINK]"
            if REASONING_START_WHITESPACE in p.repairs:
                # a choice, so that the grammar leaves the repair's variant out (core.peg.gbnf.is_repair_variant)
                opener = p.choice(p.literal("[THINK]"), p.repair(REASONING_START_WHITESPACE, p.space() + "[THINK]"))
            reasoning = p.optional(opener + body + "[/THINK]")
        else:
            reasoning = p.eps()

        def answer(until: str = "") -> Any:
            """The content (up to ``until``); repair reasoning-end-unmatched drops a [/THINK] that closes
            nothing (vLLM's Mistral parser since PR 30391)."""
            body = p.content(p.until(until)) if until else p.content(p.rest())
            if not (extract and REASONING_END_UNMATCHED in p.repairs):
                return body
            stops = ["[/THINK]", until] if until else ["[/THINK]"]
            stray = p.content(p.until_one_of(stops)) + p.repair(REASONING_END_UNMATCHED, p.literal("[/THINK]"))
            return p.zero_or_more(stray) + body
        if has_rf:
            return prefix + (reasoning << "```json" << p.content(p.schema(p.json(), "response-format",
                                                                            request.json_schema)) << "```")
        if tools_active:
            choices = []
            for idx, fn in foreach_function_indexed(request.tools):
                name = fn["name"]
                schema = function_parameters_schema(fn)
                choices.append(p.rule(f"tool-{idx}", p.tool_open(p.tool_name(p.literal(name)) + "[ARGS]")
                                      + p.tool_args(p.schema(p.json(), f"tool-{idx}-schema", schema))))
            tool_choice = p.choice(*choices)
            min_calls = 1 if request.tool_choice == ToolChoice.REQUIRED else 0
            max_calls = -1 if request.parallel_tool_calls else 1
            tool_calls = p.trigger_rule("tool-call", p.repeat("[TOOL_CALLS]" + tool_choice, min_calls, max_calls))
            if TRAILING_EOS_TOKEN in p.repairs:   # the template's eos_token after the calls, left in by the server
                tool_calls = tool_calls + trailing_eos(p)
            return prefix + (reasoning << answer("[TOOL_CALLS]") << tool_calls)
        return prefix + (reasoning << answer())

    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    grammar, lazy, triggers = grammar_for(arena, notes, include=include_grammar,
                                          lazy=has_tools and request.tool_choice == ToolChoice.AUTO,
                                          triggers=[word("[TOOL_CALLS]")])
    return make_parser(
        NAME, arena, generation_prompt=gp, parser_generation_prompt=parser_gp, prompt=prompt, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=["[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"],
        supports_thinking=True, thinking_start_tag="[THINK]", thinking_end_tags=["[/THINK]"], notes=notes)


__all__ = ["NAME", "build", "adjust_messages"]
