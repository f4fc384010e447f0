"""LLM-jp-4.1 (llama.cpp b11549 ``common/parsers/llm-jp-harmony.cpp``): the GPT-OSS Harmony format with two
differences, chosen by the template declaring ``chat_format=llm-jp-harmony-v1``.

- The tokenizer writes spaces after special tokens: ``<|channel|> analysis<|message|> text``,
  ``<|start|> assistant``. Any run of spaces may follow ``<|channel|>``, ``<|start|>`` and ``<|constrain|>``;
  exactly one optional space follows ``<|message|>`` (a second one belongs to the text).
- Parallel calls are consecutive assistant messages, all but the last closed by ``<|end|>``.

Unlike :mod:`gpt_oss` there is no stray-commentary or unsolicited-recipient handling, and a response format may be
an empty object. Request side as GPT-OSS: ``reasoning_content`` goes to the template as ``thinking``.
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..request import ReasoningFormat, ToolChoice
from ._peg_handler import foreach_function_indexed, function_parameters_schema, has_response_format
from .gpt_oss import harmony_parser, harmony_prompt

NAME = "llm-jp-harmony"
DECLARATION = "chat_format=llm-jp-harmony-v1"


def detect(src: str) -> bool:
    """The template declares ``chat_format=llm-jp-harmony-v1``."""
    return DECLARATION in src


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for an LLM-jp-4.1 template (see module doc)."""
    prep, prompt, gp, parser_gp = harmony_prompt(template, request, prepared)

    has_tools = bool(request.tools)
    has_rf = has_response_format(request, allow_empty=True)
    tools_active = has_tools and request.tool_choice != ToolChoice.NONE
    extract = request.reasoning_format != ReasoningFormat.NONE

    def root(p):
        sp = p.chars("[ ]", 0, -1)    # not p.space(): GBNF ``space`` takes one space only
        channel_tag = p.literal("<|channel|>") + sp
        message = p.literal("<|message|>") + p.optional(p.literal(" "))
        start = p.rule("start", p.literal("<|start|>") + sp + p.literal("assistant"))
        end = p.rule("end", p.literal("<|end|>"))
        content = p.rule("message-content", p.until("<|end|>"))
        channel = channel_tag + p.choice(p.literal("commentary"), p.literal("analysis"))
        constrain_type = p.chars("[A-Za-z0-9_-]", 1, -1)
        constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>") + sp) + constrain_type)
        start_analysis = channel_tag + p.literal("analysis") + message
        if extract:
            p.rule("analysis", start_analysis + p.reasoning(content) + end)
        else:
            p.rule("analysis", p.content(start_analysis + content + end))
        analysis = p.ref("analysis")
        preamble = p.rule("preamble", channel_tag + p.literal("commentary") + message + p.content(content) + end)
        final_msg = p.rule("final", channel_tag + p.literal("final") + message + p.content(content))
        any_msg = p.rule("any", p.choice(preamble, analysis))

        if has_rf:
            response_format = p.rule("response-format", channel_tag + p.literal("final") + constraint + message
                                     + p.content(p.schema(p.json(), "response-format-schema", request.json_schema)))
            return p.zero_or_more(start + analysis) + start + response_format
        if tools_active:
            choices = []
            for idx, fn in foreach_function_indexed(request.tools):
                func_name = p.literal(" to=functions.") + p.tool_name(p.literal(fn["name"]))
                args = p.tool_args(p.schema(p.json(), f"tool-{idx}-schema", function_parameters_schema(fn)))
                in_role = p.tool(p.tool_open(func_name + channel + constraint + message) + args)
                in_channel = p.tool(p.tool_open(channel + func_name + constraint + message) + args)
                choices.append(p.rule(f"tool-{idx}", p.choice(in_role, in_channel)))
            one = p.choice(*choices)
            # parallel calls are separated by <|end|>, inside the trigger rule so the lazy grammar covers them all
            calls = one + p.zero_or_more(end + start + one) if request.parallel_tool_calls else one
            tool_call = p.trigger_rule("tool-call", calls)
            if request.tool_choice == ToolChoice.REQUIRED:
                return p.zero_or_more(start + any_msg) + start + tool_call
            return p.zero_or_more(start + any_msg) + start + p.choice(tool_call, final_msg)
        return p.zero_or_more(start + any_msg) + start + final_msg

    return harmony_parser(NAME, build_chat_peg_parser(root), request, prompt, gp, parser_gp,
                          grammar=has_rf or tools_active, has_rf=has_rf, space=r"\s*")


__all__ = ["NAME", "DECLARATION", "detect", "build"]
