"""GPT-OSS harmony channels (llama.cpp ``common/parsers/gpt-oss.cpp``).

Output shape: messages ``<|start|>assistant<|channel|>CHANNEL<|message|>TEXT<|end|>`` — ``analysis`` is
reasoning, ``commentary`` without a recipient is a preamble (content), ``final`` is the answer (content, to
the end). A tool call names its recipient ``to=functions.NAME`` in the role header or after the channel,
optionally with ``<|constrain|>json``, and its JSON arguments follow ``<|message|>``. Calls to other
recipients (``to=python``, ``to=container.exec``) are consumed and dropped. The generation prompt is
``<|start|>assistant``, so the model output starts at the channel.

Request side: ``reasoning_content`` of history messages is passed to the template as ``thinking`` (and the
content of an assistant message with tool calls is dropped), as the template expects.
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..prompt import generation_prompt as compute_generation_prompt, render_prompt
from ..repairs import HARMONY_BARE_HEADER, MESSAGE_CLOSER_AT_END, MESSAGES_AFTER_CALL
from ..request import ReasoningFormat, ToolChoice
from ._peg_handler import (foreach_function_indexed,
                           function_parameters_schema, grammar_for, has_response_format,
                           make_parser, pattern, prepared_for)

NAME = "gpt-oss"


def adjust_messages(messages: list[dict]) -> list[dict]:
    """Copy ``reasoning_content`` to ``thinking``; drop ``content`` of such a message when it has tool calls."""
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("reasoning_content"), str):
            m["thinking"] = m["reasoning_content"]
            if isinstance(m.get("tool_calls"), list) and m["tool_calls"]:
                m.pop("content", None)
        out.append(m)
    return out


def harmony_prompt(template: Any, request: Any, prepared: Any = None) -> tuple[Any, str, str, str]:
    """``(prep, prompt, gp, parser_gp)`` of a Harmony template (GPT-OSS and its dialects such as LLM-jp-4.1):
    the prompt rendered with :func:`adjust_messages`, its last ``<|return|>`` swapped for ``<|end|>`` when no
    generation prompt is added (inference, as the reference does), and the generation prompt — extended with the
    prefilled analysis (and final) channel when the request continues the last assistant message, in which case
    ``parser_gp`` keeps the plain one."""
    prep = prepared_for(template, request, prepared)
    msgs = adjust_messages(prep.messages)
    prompt = render_prompt(prep, messages_override=msgs)
    if not prep.add_generation_prompt:
        i = prompt.rfind("<|return|>")
        if i >= 0:
            prompt = prompt[:i] + "<|end|>" + prompt[i + len("<|return|>"):]
    gp = compute_generation_prompt(prep, messages_override=msgs)
    parser_gp = gp
    if prep.has_continuation:
        gp = prep.prefill("<|start|>assistant<|channel|>analysis<|message|>",
                          "<|end|><|start|>assistant<|channel|>final<|message|>")
        prompt += gp
    return prep, prompt, gp, parser_gp


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for a GPT-OSS template (see module doc)."""
    prep, prompt, gp, parser_gp = harmony_prompt(template, request, prepared)

    has_tools = bool(request.tools)
    has_rf = has_response_format(request, allow_empty=True)
    tools_active = has_tools and request.tool_choice != ToolChoice.NONE
    include_grammar = has_rf or tools_active
    extract = request.reasoning_format != ReasoningFormat.NONE
    ends_with_arguments = []

    def root(p):
        start = p.rule("start", p.literal("<|start|>assistant"))
        end = p.rule("end", p.literal("<|end|>"))
        content = p.rule("message-content", p.until("<|end|>"))
        channel = p.literal("<|channel|>") + p.choice(p.literal("commentary"), p.literal("analysis"))
        constrain_type = p.chars("[A-Za-z0-9_-]", 1, -1)
        stray = p.optional(p.literal("<|channel|>commentary") + p.optional(p.literal(" to=assistant")))
        start_analysis = stray + p.literal("<|channel|>analysis<|message|>")
        if extract:
            p.rule("analysis", start_analysis + p.reasoning(content) + end)
        else:
            p.rule("analysis", p.content(start_analysis + content + end))
        analysis = p.ref("analysis")
        preamble = p.rule("preamble", p.literal("<|channel|>commentary<|message|>") + p.content(content) + end)
        closed = p.eps()
        if MESSAGE_CLOSER_AT_END in p.repairs:   # repair message-closer-at-end: <|end|> that ends the output
            closed = p.optional(p.repair(MESSAGE_CLOSER_AT_END, p.negate(p.end()) + p.literal("<|end|>") + p.end()))
        final_msg = p.rule("final", stray + p.literal("<|channel|>final<|message|>") + p.content(content) + closed)
        unsolicited = p.rule("unsolicited", p.atomic(p.optional(channel) + p.literal(" to=") + content + end))
        any_msg = p.rule("any", p.choice(preamble, analysis))

        if has_rf:
            constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
            response_format = p.rule("response-format", p.literal("<|channel|>final") + constraint
                                     + p.literal("<|message|>")
                                     + p.content(p.schema(p.json(), "response-format-schema", request.json_schema)))
            return p.zero_or_more(start + analysis) + start + response_format

        if tools_active:
            choices = []
            for idx, fn in foreach_function_indexed(request.tools):
                name = fn["name"]
                params = function_parameters_schema(fn)
                func_name = p.literal(" to=functions.") + p.tool_name(p.literal(name))
                constraint = p.optional(p.space() + p.optional(p.literal("<|constrain|>")) + constrain_type)
                args = p.json_tool_args(idx, params, leading_ws=True)
                in_role = p.tool(p.tool_open(func_name + channel + constraint + p.literal("<|message|>")) + args)
                in_channel = p.tool(p.tool_open(channel + func_name + constraint + p.literal("<|message|>")) + args)
                choices.append(p.rule(f"tool-{idx}", p.choice(in_role, in_channel)))
            tool_call = p.trigger_rule("tool-call", p.choice(*choices))
            if "trailing-stop-token" in p.repairs:   # <|call|> ends the generation; a logged output keeps it
                stop = p.repair("trailing-stop-token", p.literal("<|call|>"))
                if MESSAGES_AFTER_CALL in p.repairs:   # the turn went on past <|call|>: its messages, not raw text
                    head = start
                    if HARMONY_BARE_HEADER in p.repairs:   # the next message opened at <|channel|>, or after a filler
                        filler = p.repair(HARMONY_BARE_HEADER, p.literal("commentary"))
                        head = p.optional(filler) + p.choice(start, p.repair(HARMONY_BARE_HEADER, p.peek(
                            p.literal("<|channel|>"))))
                    msg = any_msg
                    if request.parallel_tool_calls:   # further calls, each ended by its own <|call|>
                        msg = p.choice(any_msg, tool_call + p.optional(stop))
                    stop = stop + p.optional(p.repair(MESSAGES_AFTER_CALL,
                                                      p.choice(p.zero_or_more(start + any_msg) + start + final_msg,
                                                               p.one_or_more(head + msg)
                                                               + p.optional(head + final_msg))))
                tool_call = tool_call + p.optional(stop)
            if MESSAGE_CLOSER_AT_END in p.repairs:   # a call closed by <|end|>, not <|call|>, ending the output
                tool_call = tool_call + p.optional(p.repair(MESSAGE_CLOSER_AT_END, p.negate(p.end())
                                                                          + p.literal("<|end|>") + p.end()))
            if "trailing-stop-token" not in p.repairs:
                ends_with_arguments.append(True)
            if request.tool_choice == ToolChoice.REQUIRED:
                return p.zero_or_more(start + any_msg) + start + tool_call
            return p.zero_or_more(start + any_msg) + start + p.choice(tool_call, final_msg)

        return p.zero_or_more(start + any_msg) + start + p.choice(final_msg, unsolicited)

    return harmony_parser(NAME, build_chat_peg_parser(root), request, prompt, gp, parser_gp,
                          grammar=include_grammar, has_rf=has_rf,
                          # the root ends with the call's arguments: what follows them is recovered as content
                          # (<|call|>, which ends the generation, included unless the repair takes it)
                          after_arguments="content" if ends_with_arguments else None)


def harmony_parser(name: str, arena: Any, request: Any, prompt: str, gp: str, parser_gp: str, *, grammar: bool,
                   has_rf: bool, space: str = "", after_arguments: str | None = None):
    """The parser of a Harmony family from its PEG ``arena``: grammar, triggers, preserved tokens and message
    delimiters shared by GPT-OSS and its dialects; ``space`` is the regex the dialect allows after
    ``<|start|>`` and ``<|channel|>`` in the triggers."""
    notes: list[str] = []
    grammar_text, lazy, triggers = grammar_for(
        arena, notes, include=grammar,
        lazy=not (has_rf or (bool(request.tools) and request.tool_choice == ToolChoice.REQUIRED)),
        triggers=[pattern(r"^\s+to$"),
                  pattern(rf"^<\|channel\|>{space}(?:commentary|analysis)\s+to=functions$"),
                  pattern(rf"<\|start\|>{space}assistant(\s+to)"),
                  pattern(rf"<\|start\|>{space}assistant(<\|channel\|>{space}(?:commentary|analysis)\s+to)")])
    return make_parser(
        name, arena, generation_prompt=gp, parser_generation_prompt=parser_gp, prompt=prompt, grammar=grammar_text,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=["<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"],
        supports_thinking=True, thinking_start_tag="<|channel|>analysis<|message|>", thinking_end_tags=["<|end|>"],
        message_delimiters=[("assistant", "<|start|>assistant"), ("user", "<|start|>user"),
                            ("system", "<|start|>developer"), ("system", "<|start|>system"),
                            ("tool", "<|start|>functions")],
        notes=notes, after_arguments=after_arguments)


__all__ = ["NAME", "build", "adjust_messages", "harmony_parser"]
