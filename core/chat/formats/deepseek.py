"""DeepSeek V3.2 / V4 DSML tool calls (llama.cpp ``common/parsers/deepseek.cpp``).

Output shape (after the ``<｜Assistant｜>`` generation prefix)::

    [<think>]reasoning</think> content
    <｜DSML｜tool_calls>            (V3.2: function_calls)
    <｜DSML｜invoke name="NAME">
    <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜tool_calls>

* ``string="true"`` parameters (the schema may be a string) are raw text, others JSON; required parameters
  in schema order, then optional ones in any order.
* With thinking on, reasoning may also end directly at the tool-call block (``\\n\\n<｜DSML｜tool_calls>``);
  with thinking off (reasoning extraction on) the prefilled empty block (V3.2 ``<think></think>``, V4 a bare
  ``</think>``) is consumed.
* Request side (V4): consecutive tool results are reordered by the call order of the preceding assistant
  message; a response format is passed to the template as ``response_format``.
"""

from __future__ import annotations

import os
from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..prompt import generation_prompt as compute_generation_prompt, render_prompt
from ..repairs import (CALL_SECTION_OMITTED, JSON_ARGUMENTS_BODY, MISTYPED_VALUE_AS_STRING, TAG_WHITESPACE,
                       any_order_args, next_call_section)
from ..request import Continuation, ReasoningFormat, ToolChoice
from ._peg_handler import (foreach_function_indexed, foreach_parameter, function_parameters_schema, grammar_for,
                           has_response_format, make_parser, prepared_for, word)
from ...grammar.json_schema import may_be_string

NAME = "deepseek-v3.2"
DSML = "｜DSML｜"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<｜Assistant｜>"
TC_SEPARATOR = "\n\n"


def sort_tool_results(messages: list[dict]) -> list[dict]:
    """DeepSeek V4: inside each run of user/tool messages, tool results are reordered (stable) by the index of
    their ``tool_call_id`` in the preceding assistant message's calls (unknown ids first, as index 0)."""
    out = [dict(m) for m in messages]
    order: dict[str, int] = {}
    i = 0
    while i < len(out):
        role = out[i].get("role", "")
        calls = out[i].get("tool_calls")
        if role == "assistant" and isinstance(calls, list) and calls:
            order = {}
            for k, c in enumerate(calls):
                cid = c.get("id", "") if isinstance(c, dict) else ""
                if cid:
                    order[cid] = k
            i += 1
            continue
        if role not in ("user", "tool"):
            i += 1
            continue
        positions = []
        j = i
        while j < len(out):
            r = out[j].get("role", "")
            if r == "tool":
                positions.append(j)
            elif r != "user":
                break
            j += 1
        if len(positions) > 1 and order:
            results = sorted((out[k] for k in positions), key=lambda m: order.get(m.get("tool_call_id", ""), 0))
            for k, m in zip(positions, results):
                out[k] = m
        i = j
    return out


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for a DeepSeek V3.2 / V4 template (see module doc)."""
    prep = prepared_for(template, request, prepared)
    is_v4 = "function_calls" not in template.source
    msgs = sort_tool_results(prep.messages) if is_v4 else None
    has_tools = bool(request.tools)
    has_rf = has_response_format(request, allow_empty=True)
    extract = request.reasoning_format != ReasoningFormat.NONE
    include_grammar = has_rf or (has_tools and request.tool_choice != ToolChoice.NONE)
    extra = {"response_format": request.json_schema} if (is_v4 and has_rf) else None

    tc_block = "tool_calls" if is_v4 else "function_calls"
    fc_start = "<" + DSML + tc_block + ">"
    fc_end = "</" + DSML + tc_block + ">"
    invoke_start = "<" + DSML + "invoke"
    invoke_end = "</" + DSML + "invoke>"
    param_start = "<" + DSML + "parameter"
    param_end = "</" + DSML + "parameter>"

    prompt = render_prompt(prep, messages_override=msgs, additional_context=extra)
    gp = compute_generation_prompt(prep, messages_override=msgs, additional_context=extra)
    parser_gp = gp
    if prep.has_continuation:
        if is_v4 and not prep.continue_reasoning:
            gp = GEN_PROMPT + THINK_END
            if prep.continuation == Continuation.CONTENT:
                gp += prep.continue_content
        else:
            gp = prep.prefill(GEN_PROMPT + THINK_START, THINK_END)
        prompt += gp

    require_tools = request.tool_choice == ToolChoice.REQUIRED
    has_tool_calls = has_tools and request.tool_choice != ToolChoice.NONE

    late: list[Any] = []   # repair widenings made once the tree is built (the grammar stays llama.cpp's)

    def root(p):
        tree = body(p)
        for widen in late:
            widen()
        return tree

    def body(p):
        prefix = p.literal(GEN_PROMPT)
        end = p.end()
        choices = []
        for idx, fn in (foreach_function_indexed(request.tools) if has_tool_calls else []):
            name = fn["name"]
            required, optional = [], []
            for j, (pname, pschema, is_req) in enumerate(foreach_parameter(fn)):
                is_string = may_be_string(pschema)
                value = (p.tool_arg_string_value(p.until(param_end)) if is_string else
                         p.tool_arg_json_value(p.schema(p.json(), f"tool-{idx}-arg-{j}-schema", pschema)))
                arg = p.tool_arg(
                    p.tool_arg_open(p.literal(param_start + ' name="') + p.tool_arg_name(p.literal(pname))
                                    + p.literal('" string="' + ("true" if is_string else "false") + '">'))
                    + value + p.tool_arg_close(p.literal(param_end)))
                if not is_string and MISTYPED_VALUE_AS_STRING in p.repairs:
                    # repair mistyped-value-as-string: a string="false" value that is no JSON of its type (prose)
                    # is kept as the string it is, not the call dropped (tried after the JSON reading)
                    late.append(lambda arg=arg, pname=pname: p.widen_late(arg, MISTYPED_VALUE_AS_STRING, lambda _: (
                        p.tool_arg(p.tool_arg_open(p.literal(param_start + ' name="') + p.tool_arg_name(
                            p.literal(pname)) + p.literal('" string="false">')) + p.tool_arg_string_value(
                            p.until(param_end)) + p.tool_arg_close(p.literal(param_end))))))
                named = p.rule(f"tool-{idx}-arg-{j}", arg)
                (required if is_req else optional).append(named)
            args = p.required_then_optional(required, optional)
            if "argument-order" in p.repairs:
                # repair argument-order: the parameters in any order (tried after the template's)
                any_order = any_order_args(p, f"tool-{idx}-any-order", required, optional, p.space())
                if any_order is not None:
                    args = p.choice(args, any_order)
            func = p.tool(p.tool_open(p.literal(invoke_start + ' name="') + p.tool_name(p.literal(name))
                                      + p.literal('">\n'))
                          + args + p.space() + p.tool_close(p.literal(invoke_end)))
            late.extend(_loose_invokes(p, func, idx, fn, args, invoke_start, invoke_end))
            choices.append(p.rule(f"tool-{idx}", func))
        tool_choice = p.choice(*choices)
        if request.parallel_tool_calls:
            tool_calls = p.trigger_rule("tool-call", p.literal(fc_start) + p.space() + tool_choice
                                        + p.zero_or_more(p.space() + tool_choice) + p.space() + p.literal(fc_end))
            next_call_section(p, end, fc_start, "tool-call")   # repair consecutive-call-blocks
        else:
            tool_calls = p.trigger_rule("tool-call", p.literal(fc_start) + p.space() + tool_choice + p.space()
                                        + p.literal(fc_end))
        obligatory = tool_calls
        if not require_tools:
            tool_calls = p.optional(tool_calls)

        reasoning = p.eps()
        reasoning_with_tc = p.eps()
        allow_reasoning_with_tc = False
        if extract and prep.enable_thinking:
            reasoning = p.optional(THINK_START + p.reasoning(p.until(THINK_END)) + THINK_END)
            reasoning_with_tc = (THINK_START + p.reasoning(p.until_one_of([TC_SEPARATOR + fc_start, fc_start,
                                                                           THINK_END]))
                                 + p.space() + obligatory)
            allow_reasoning_with_tc = True
        elif extract:
            reasoning = (p.optional(p.literal(THINK_END)) if is_v4 else
                         p.optional(p.literal(THINK_START) + p.until(THINK_END) + p.literal(THINK_END)))

        if has_rf:
            response_format = p.rule("response-format", p.literal("```json") + p.space()
                                     + p.content(p.schema(p.json(), "response-format-schema", request.json_schema))
                                     + p.space() + p.literal("```"))
            return prefix + reasoning + response_format + end
        if not has_tool_calls:
            return prefix + reasoning + p.content(p.rest()) + end
        text_before = p.content(p.until_one_of([TC_SEPARATOR + fc_start, fc_start]))
        content_before = p.negate(p.literal(THINK_START)) + text_before + p.space()
        if CALL_SECTION_OMITTED in p.repairs:
            # repair call-section-omitted: the invokes written whole without the section's markers, after the
            # content, up to the end of the output (tried first; an output with the section, or with text after
            # the invokes, reads as before). A look-ahead that never waits for more text tries it only where an
            # invoke opener lies ahead (whole, or cut by the end past the prefix it shares with the section
            # marker, which the content holds back as llama.cpp's does); it resumes where it stopped in a
            # stream, and a stream whose text holds no opener keeps its fast path (core.peg.engine: pending_ahead).
            # The invokes must read whole to the end before any of them shows
            def bare() -> Any:
                more = p.zero_or_more(p.space() + tool_choice) if request.parallel_tool_calls else p.eps()
                invokes = p.space() + tool_choice + more + p.space() + p.end()
                shared = len(os.path.commonprefix([invoke_start, fc_start]))
                return (p.opener_ahead(invoke_start, shared + 1)
                        + p.content(p.until_one_of([TC_SEPARATOR + fc_start, fc_start, TC_SEPARATOR
                                                    + invoke_start, "\n" + invoke_start, invoke_start]))
                        + p.peek(invokes) + invokes)
            late.append(lambda: p.widen_late(text_before, CALL_SECTION_OMITTED, lambda _: bare(), first=True))
        if allow_reasoning_with_tc:
            return prefix + p.choice(reasoning_with_tc, reasoning + content_before + tool_calls) + end
        return prefix + reasoning + content_before + tool_calls + end

    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    grammar, lazy, triggers = grammar_for(arena, notes, include=include_grammar,
                                          lazy=has_tools and not require_tools, triggers=[word(fc_start)])
    return make_parser(
        NAME, arena, generation_prompt=gp, parser_generation_prompt=parser_gp, prompt=prompt, grammar=grammar,
        grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=[DSML, THINK_START, THINK_END],
        supports_thinking=True, thinking_start_tag=THINK_START, thinking_end_tags=[THINK_END, fc_start],
        message_delimiters=[("assistant", GEN_PROMPT), ("user", "<｜User｜>")], notes=notes)


def _loose_invokes(p: Any, func: Any, idx: int, fn: dict, args: Any, invoke_start: str, invoke_end: str) -> list[Any]:
    """The late widenings of one invoke ``func`` (tried after the template's layout): repair ``tag-whitespace``
    (any whitespace, or none, after the opener's ``">`` where the template writes one line break) and repair
    ``json-arguments-body`` (the arguments as one JSON object in place of the parameter tags)."""
    def opener() -> Any:
        return p.tool_open(p.literal(invoke_start + ' name="') + p.tool_name(p.literal(fn["name"]))
                           + p.literal('">')) + p.space()

    def close() -> Any:
        return p.space() + p.tool_close(p.literal(invoke_end))

    out = []
    if TAG_WHITESPACE in p.repairs:
        out.append(lambda: p.widen_late(func, TAG_WHITESPACE, lambda _: p.tool(opener() + args + close())))
    if JSON_ARGUMENTS_BODY in p.repairs:
        out.append(lambda: p.widen_late(func, JSON_ARGUMENTS_BODY, lambda _: p.tool(opener() + p.tool_args(
            p.schema(p.json_object(), f"tool-{idx}-body-schema", function_parameters_schema(fn))) + close())))
    return out


__all__ = ["NAME", "build", "sort_tool_results"]
