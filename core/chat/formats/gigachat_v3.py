"""GigaChat V3 (llama.cpp ``common/parsers/gigachat-v3.cpp``).

Output shape (after the ``assistant<|role_sep|>\\n`` generation prefix): content, then at most one call
``<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{"name": "NAME", "arguments": {...}}`` (no parallel calls).
GigaChat 3.1 templates contain ``<|function_call|>`` and go to the auto-parser instead.
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..prompt import render_prompt
from ..repairs import TRAILING_EOS_TOKEN, trailing_eos
from ..request import ToolChoice
from ._peg_handler import function_parameters_schema, grammar_for, make_parser, prepared_for, word

NAME = "gigachat-v3"
PREFIX = "assistant<|role_sep|>\n"
TOOL_CALL_START = "<|message_sep|>\n\nfunction call<|role_sep|>\n"


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for a GigaChat V3 template (see module doc)."""
    prep = prepared_for(template, request, prepared)
    prompt = render_prompt(prep)
    gp = generation_prompt
    if prep.has_continuation:
        gp = PREFIX + prep.continue_content
        prompt += gp
    has_tools = bool(request.tools)
    tools_active = has_tools and request.tool_choice != ToolChoice.NONE

    def root(p):
        if tools_active:
            choices = []
            for idx, tool in enumerate(request.tools):  # the reference iterates every tool, not only functions
                fn = tool.get("function") or {}
                name = fn.get("name", "")
                schema = function_parameters_schema(fn)
                tool_name = p.json_member("name", '"' + p.tool_name(p.literal(name)) + '"')
                tool_args = p.json_member("arguments", p.tool_args(p.schema(p.json(), f"tool-{idx}-schema",
                                                                             schema)))
                tool_open = p.tool_open(p.literal("{") << tool_name)
                choices.append(p.rule(f"tool-{idx}", tool_open << "," << tool_args << "}"))
            tool_choice = p.choice(*choices)
            min_calls = 1 if request.tool_choice == ToolChoice.REQUIRED else 0
            tool_call = p.rule("tool-call", p.literal(TOOL_CALL_START) + tool_choice)
            tool_calls = p.trigger_rule("tool-call-root", p.repeat(tool_call, min_calls, 1))
            ret = p.content(p.until("<|message_sep|>\n\n")) << tool_calls
            if TRAILING_EOS_TOKEN in p.repairs:   # a stop token the server left after the call
                ret = ret << trailing_eos(p)
        else:
            ret = p.content(p.rest())
        return p.literal(PREFIX) + ret

    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    grammar, lazy, triggers = grammar_for(arena, notes, include=tools_active,
                                          lazy=request.tool_choice == ToolChoice.AUTO, triggers=[word(TOOL_CALL_START)])
    return make_parser(NAME, arena, generation_prompt=gp, parser_generation_prompt=generation_prompt, prompt=prompt,
                       grammar=grammar, grammar_lazy=lazy, grammar_triggers=triggers,
                       preserved_tokens=["<|message_sep|>\n\n", "<|role_sep|>\n"], notes=notes)


__all__ = ["NAME", "build"]
