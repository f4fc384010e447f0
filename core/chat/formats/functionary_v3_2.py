"""Functionary v3.2 recipients (llama.cpp ``common/parsers/functionary-v3-2.cpp``).

Output shape: the generation prompt ends with ``>>>``, so the model writes a recipient first —
``all\\n`` followed by content, or ``NAME\\n`` followed by the JSON arguments of a call; further messages
start with ``>>>`` again (``>>>NAME\\n{json}``).

Deviation from the reference (which cannot parse these and then fails the whole parse): the ``>>>`` that
separates content from a following call, and parallel calls from each other, is consumed. The lazy grammar is
unchanged for single-call requests.
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..prompt import render_prompt
from ..request import ToolChoice
from ._peg_handler import (foreach_function_indexed, function_parameters_schema, grammar_for,
                           make_parser, pattern, prepared_for)

NAME = "functionary-v3.2"
PREFIX = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>"


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for a Functionary v3.2 template (see module doc)."""
    prep = prepared_for(template, request, prepared)
    prompt = render_prompt(prep)
    gp = generation_prompt
    has_tools = bool(request.tools)
    tools_active = has_tools and request.tool_choice != ToolChoice.NONE
    if prep.has_continuation:
        gp = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n" + prep.continue_content
        prompt += gp

    def root(p):
        content_until_tool = p.literal("all\n") + p.content(p.until(">>>")) + p.literal(">>>")
        content_until_end = p.literal("all\n") + p.content(p.rest())
        prefix = p.literal(PREFIX)
        if not tools_active:
            return prefix + content_until_end + p.end()
        choices = []
        for idx, fn in foreach_function_indexed(request.tools):
            name = fn["name"]
            schema = function_parameters_schema(fn)
            choices.append(p.rule(f"tool-{idx}", p.tool(
                p.tool_open(p.tool_name(p.literal(name)) + p.literal("\n"))
                + p.tool_args(p.schema(p.json(), f"tool-{idx}-schema", schema)))))
        tool_choice = p.choice(*choices)
        content_only = content_until_end
        if request.parallel_tool_calls:
            tools_only = p.trigger_rule("tools", tool_choice + p.zero_or_more(p.literal(">>>") + tool_choice))
        else:
            tools_only = p.trigger_rule("tools", p.one_or_more(tool_choice))
        content_and_tools = content_until_tool + tools_only
        if request.tool_choice == ToolChoice.REQUIRED:
            if request.parallel_tool_calls:
                ret = p.choice(content_and_tools, tools_only) + p.end()
            else:
                ret = p.choice(content_until_tool + tool_choice, tools_only) + p.end()
        elif request.parallel_tool_calls:
            ret = p.choice(content_and_tools, content_only, tools_only) + p.end()
        else:
            ret = p.choice(content_until_tool + tool_choice, content_only, tool_choice) + p.end()
        return prefix + ret

    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    grammar, lazy, triggers = grammar_for(arena, notes, include=tools_active,
                                          lazy=request.tool_choice == ToolChoice.AUTO, triggers=[pattern(">>>(?!all)")])
    return make_parser(NAME, arena, generation_prompt=gp, parser_generation_prompt=generation_prompt, prompt=prompt,
                       grammar=grammar, grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=[">>>all"],
                       notes=notes)


__all__ = ["NAME", "build"]
