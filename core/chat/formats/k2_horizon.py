"""K2 Horizon (llama.cpp b11549 ``common/parsers/k2-horizon.cpp``; template ``IFM-K2-Horizon.jinja`` in
b11549's ``models/templates/``).

Output shape after the ``<|ifm|im_start|>assistant\\n`` generation prefix::

    [<ifm|think>\\n REASONING </ifm|think>] CONTENT <ifm|tool_calls>
    <ifm|tool_call>NAME
    <ifm|arg_key>K</ifm|arg_key>
    [<ifm|arg_type>T</ifm|arg_type>]      (xml_typed; models often leave it out)
    <ifm|arg_value>V</ifm|arg_value>
    </ifm|tool_call> … </ifm|tool_calls>

The think tag follows ``reasoning_effort`` (high ``ifm|think``, medium ``ifm|think_fast``, low
``ifm|think_faster``); a template that reads ``enable_thinking`` closes an empty ``ifm|think`` block when thinking
is off. ``tool_call_format`` (a template variable) picks the call body: ``xml`` (default), ``xml_typed`` or
``json`` (``{"name": …, "arguments": {…}}`` inside ``<ifm|tool_call>``). String parameters are raw text, others
JSON; a parameter that may be a string or something else is JSON when the text is a JSON value directly followed
by ``</ifm|arg_value>``, else a string. With a response format the answer is bare JSON after the think block.
The template raises on an assistant turn without a thinking field, so every assistant message gets an empty
``reasoning_content`` before rendering. Detected by ``<|ifm|im_start|>`` and ``<ifm|tool_calls>``.
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..prompt import generation_prompt as compute_generation_prompt, render_prompt
from ..request import ReasoningFormat, ToolChoice
from ._peg_handler import (foreach_function_indexed, foreach_parameter, grammar_for, has_response_format,
                           make_parser, prepared_for, word)

NAME = "k2-horizon"
GEN_PREFIX = "<|ifm|im_start|>assistant\n"
SECTION_START = "<ifm|tool_calls>"
SECTION_END = "</ifm|tool_calls>"
CALL_START = "<ifm|tool_call>"
CALL_END = "</ifm|tool_call>"
ARG_KEY = "<ifm|arg_key>"
ARG_KEY_END = "</ifm|arg_key>"
ARG_TYPE = "<ifm|arg_type>"
ARG_TYPE_END = "</ifm|arg_type>"
ARG_VAL = "<ifm|arg_value>"
ARG_VAL_END = "</ifm|arg_value>"
THINK_BY_EFFORT = {"medium": "ifm|think_fast", "low": "ifm|think_faster"}


def detect(src: str) -> bool:
    """``<|ifm|im_start|>`` and ``<ifm|tool_calls>`` in the source."""
    return "<|ifm|im_start|>" in src and "<ifm|tool_calls>" in src


def with_thinking_fields(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with ``reasoning_content: ""`` on every assistant message that has none."""
    return [dict(m, reasoning_content="") if isinstance(m, dict) and m.get("role") == "assistant"
            and "reasoning_content" not in m else m for m in messages]


def _text_kwarg(extra: dict[str, Any], key: str, default: str) -> str:
    value = extra.get(key, default)
    return value if isinstance(value, str) else default


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for a K2 Horizon template (see module doc)."""
    prep = prepared_for(template, request, prepared)
    msgs = with_thinking_fields(prep.messages)
    prompt = render_prompt(prep, messages_override=msgs)
    gp = compute_generation_prompt(prep, messages_override=msgs)
    parser_gp = gp

    effort = _text_kwarg(prep.extra_context, "reasoning_effort", "high")
    call_format = _text_kwarg(prep.extra_context, "tool_call_format", "xml")
    thinking_off = not prep.enable_thinking and "enable_thinking" in template.source
    think = "ifm|think" if thinking_off else THINK_BY_EFFORT.get(effort, "ifm|think")
    think_start, think_end_tag = "<" + think + ">", "</" + think + ">"
    end_tags = [think_end_tag]

    has_tools = bool(request.tools)
    has_rf = has_response_format(request)
    extract = request.reasoning_format != ReasoningFormat.NONE
    tools_active = has_tools and request.tool_choice != ToolChoice.NONE
    required = request.tool_choice == ToolChoice.REQUIRED

    if prep.has_continuation:
        gp = prep.prefill(GEN_PREFIX + think_start + "\n", think_end_tag)
        prompt += gp

    def root(p):
        opener = p.literal(GEN_PREFIX)
        think_end = p.choice(*[p.literal(t) for t in end_tags])
        think_body = p.until_one_of(end_tags)

        def think_block(body):
            return p.optional(p.literal(think_start) + p.space() + p.ac(body + think_end, end_tags))

        reasoning = think_block(p.reasoning(think_body)) if extract else p.eps()
        if has_rf:
            # the answer must be bare JSON, so the think block is consumed even when it is not extracted
            thoughts = reasoning if extract else think_block(think_body)
            return opener + (thoughts << p.content(p.schema(p.json(), "response-format", request.json_schema)))
        if not tools_active:
            return opener + (reasoning << p.content(p.rest()))

        if call_format == "json":
            tool_choice = p.standard_json_tools(CALL_START, CALL_END, request.tools, False, True)
        else:
            tool_choice = _xml_calls(p, request.tools, typed=call_format == "xml_typed")
        calls = tool_choice + p.zero_or_more(p.space() + tool_choice) if request.parallel_tool_calls else tool_choice
        tool_calls = p.trigger_rule("tool-calls", p.repeat(p.literal(SECTION_START) << calls << SECTION_END,
                                                          1 if required else 0, 1))
        if required and not extract:
            reasoning = p.content(think_block(think_body))   # required calls skip the content parser
        content = p.eps() if required else p.content(p.until(SECTION_START))
        return opener + (reasoning << content << tool_calls)

    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    lazy = not (has_rf or required)
    grammar, lazy, triggers = grammar_for(arena, notes, include=has_rf or tools_active, lazy=lazy,
                                          triggers=[word(SECTION_START)] if lazy else [])
    return make_parser(
        NAME, arena, generation_prompt=gp, parser_generation_prompt=parser_gp, prompt=prompt, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers,
        preserved_tokens=end_tags + [think_start, SECTION_START, SECTION_END, CALL_START, CALL_END, ARG_KEY,
                                     ARG_KEY_END, ARG_TYPE, ARG_TYPE_END, ARG_VAL, ARG_VAL_END],
        supports_thinking=True, thinking_start_tag=think_start, thinking_end_tags=end_tags,
        message_delimiters=[("assistant", "<|ifm|im_start|>assistant"), ("user", "<|ifm|im_start|>user"),
                            ("tool", "<|ifm|im_start|>tool"), ("system", "<|ifm|im_start|>system")],
        notes=notes)


def _xml_calls(p: Any, tools: Any, typed: bool) -> Any:
    """The choice of one ``<ifm|tool_call>NAME\\n`` call per function tool, arguments as key/value tags."""
    arg_close = p.tool_arg_close(p.literal(ARG_VAL_END))
    arg_string = p.rule("xml-arg-string", p.ac(p.tool_arg_string_value(p.until(ARG_VAL_END)) + arg_close,
                                               ARG_VAL_END))
    # the models leave out <ifm|arg_type> even when asked for xml_typed
    arg_type = (p.optional(p.literal(ARG_TYPE) + p.until(ARG_TYPE_END) + p.literal(ARG_TYPE_END) + p.space())
                if typed else p.eps())
    choices = []
    for idx, fn in foreach_function_indexed(tools):
        required_args, optional_args = [], []
        for j, (pname, pschema, is_req) in enumerate(foreach_parameter(fn)):
            rule_name = f"tool-{idx}-arg-{j}"
            value = p.tagged_arg_value(rule_name, pschema, arg_string, arg_close)
            arg = p.space() + p.tool_arg(p.tool_arg_open(p.literal(ARG_KEY) + p.tool_arg_name(p.literal(pname))
                                                         + p.literal(ARG_KEY_END))
                                         << arg_type + p.literal(ARG_VAL) + value)
            (required_args if is_req else optional_args).append(p.rule(rule_name, arg))
        args = p.tagged_args(idx, required_args, optional_args)
        choices.append(p.rule(f"tool-{idx}", p.tool(
            p.tool_open(p.literal(CALL_START) + p.tool_name(p.literal(fn["name"])) + "\n") + p.tool_args(args)
            << p.tool_close(p.literal(CALL_END)))))
    return p.choice(*choices)


__all__ = ["NAME", "detect", "build", "with_thinking_fields"]
