"""LFM2 / LFM2.5 handler (llama.cpp ``common/parsers/lfm2.cpp``, ``python_style_tool_calls``).

Output shape (after the generation prompt ``<|im_start|>assistant\\n``)::

    [<think> REASONING </think>] CONTENT [<|tool_call_start|>[name(arg=value, …), …]<|tool_call_end|>]

Arguments are Python-style literals (``"…"``/``'…'`` strings, numbers, ``True``/``False``/``None`` and the JSON
spellings, dicts and lists) converted to JSON; string-typed parameters take a quoted string. Tool names may
contain dots (``Calendar.create_event``). LFM2 templates mark the tool list with ``<|tool_list_start|>`` /
``<|tool_list_end|>`` (kept as preserved tokens); LFM2.5 templates write a plain ``List of tools: [``.
"""

from __future__ import annotations

from typing import Any

from ...jinja.template import ChatTemplate
from ..request import ChatRequest
from ._request_view import PromptContext, RequestView, request_view
from . import family_by_name
from ..repairs import CALL_LIST_SPACING, JSON_CALLS_IN_CALL_MARKERS, PYTHONIC_VALUES, next_call_section
from ._peg_handler import HandlerParser, peg_parser, word

NAME = "lfm2"

GEN_PROMPT = "<|im_start|>assistant\n"
THINK_START = "<think>"
THINK_END = "</think>"
CALL_START = "<|tool_call_start|>"
CALL_END = "<|tool_call_end|>"
LIST_START = "<|tool_list_start|>"
LIST_END = "<|tool_list_end|>"


def prepare_messages(messages: list[dict[str, Any]], normalized_source: str = "") -> list[dict[str, Any]]:
    """Copy each message's ``reasoning_content`` into the ``thinking`` field the template reads."""
    out = []
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("reasoning_content"), str):
            m = {**m, "thinking": m["reasoning_content"]}
        out.append(m)
    return out


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """LFM2 / LFM2.5 parser, prompt and grammar (llama.cpp ``common_chat_params_init_lfm2``). Reasoning is
    extracted when ``reasoning_format`` is not none and the template knows ``<think>``; the prompt is rendered
    with each message's reasoning copied to ``thinking``; a continuation reopens ``<think>``."""
    view = request_view(request)
    src = template.normalized_source
    tool_list_tokens = family_by_name("lfm2").detect(src)  # LFM2 proper: <|tool_list_start|> … <|tool_list_end|>
    extract = view.extract_reasoning and THINK_START in template.source
    ctx = PromptContext(template, request, prepared)
    msgs = prepare_messages(ctx.messages)
    prompt = ctx.render(ctx.add_generation_prompt, msgs)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(GEN_PROMPT + THINK_START, THINK_END)
        prompt += gp

    preserved = [CALL_START, CALL_END, THINK_START, THINK_END]
    if tool_list_tokens:
        preserved += [LIST_START, LIST_END]

    include_grammar = view.has_schema or view.tools_active
    lazy = not (view.has_schema or (view.tools_active and view.required))
    return peg_parser(NAME, lambda p: _peg_root(p, view, extract), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=include_grammar, lazy=lazy,
                      trigger=word(CALL_START), preserved_tokens=preserved, thinking_start_tag=THINK_START,
                      thinking_end_tags=[THINK_END], prompt=prompt or None)


def _python_or_json_value(p: Any) -> Any:
    """llama.cpp ``python_or_json_value``: Python literals whose leaves also take JSON ``true/false/null``, at
    every depth (dict members ``ws , ws``, list items ``, ws``, containers followed by ``ws``)."""

    def body() -> Any:
        value = _python_or_json_value(p)
        member = p.seq(p.python_string(), p.space(), p.literal(":"), p.space(), value)
        members = p.seq(member, p.zero_or_more(p.seq(p.space(), p.literal(","), p.space(), member)))
        dct = p.rule("python-or-json-dict", lambda: p.seq(
            p.literal("{"), p.space(), p.choice(p.literal("}"), p.seq(members, p.space(), p.literal("}"))), p.space()))
        elements = p.seq(value, p.zero_or_more(p.seq(p.literal(","), p.space(), value)))
        arr = p.rule("python-or-json-array", lambda: p.seq(
            p.literal("["), p.space(), p.choice(p.literal("]"), p.seq(elements, p.space(), p.literal("]"))), p.space()))
        return p.choice(dct, arr, p.python_string(), p.json_number(), p.python_bool(), p.python_null(),
                        p.json_bool(), p.json_null())

    return p.rule("python-or-json-value", body)


def _value_end(p: Any) -> Any:
    """What follows an argument value (``,`` or ``)``): a value llama.cpp's grammar reads that something else
    follows (a quote that did not close the string) goes to repair ``pythonic-values`` instead. Used inside
    ``atomic``: until that next character is there a stream shows nothing of the value, so a string the strict
    reading closed too early is never shown closed."""
    return p.peek(p.space() + p.one("[,)]"))


def _lenient_value(p: Any) -> Any:
    """Repair ``pythonic-values``: the value as Python writes it, decoded by Python's rules."""
    return p.repair(PYTHONIC_VALUES, p.tool_arg_py_value(p.python_lenient_literal()))


def _python_style_calls(p: Any, view: RequestView) -> Any:
    """llama.cpp ``python_style_tool_calls(tools, parallel, allow_json_literals=true)``."""
    choices = []
    for spec in view.tools:
        args = p.eps()
        props = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
        if isinstance(props, dict) and props:
            arg_choices = []
            for pname, pdef in props.items():
                if isinstance(pdef, dict) and pdef.get("type") == "string":
                    value = p.tool_arg_value(p.choice(p.literal('"') + p.string_content('"') + p.literal('"'),
                                                      p.literal("'") + p.string_content("'") + p.literal("'")))
                    if PYTHONIC_VALUES in p.repairs:
                        value = p.choice(p.atomic(p.tool_arg_value(p.python_json_safe_string()) + _value_end(p)),
                                         _lenient_value(p))
                elif PYTHONIC_VALUES in p.repairs:
                    # the strict reading with JSON-safe strings (a raw line break inside goes to the lenient one)
                    value = p.choice(p.atomic(p.tool_arg_value(p.python_safe_literal()) + _value_end(p)),
                                     _lenient_value(p))
                else:
                    value = p.tool_arg_value(_python_or_json_value(p))
                arg_choices.append(p.tool_arg(p.tool_arg_open(p.tool_arg_name(p.literal(pname)) + p.literal("="))
                                              + value + p.tool_arg_close(p.eps())))
            one_arg = p.choice(*arg_choices)
            # the parse also takes a call without arguments (main's parser did; the grammar stays llama.cpp's)
            args = p.choice(one_arg + p.zero_or_more("," + p.space() + one_arg), p.gbnf(p.peek(p.literal(")")), ""))
        body = p.tool(p.tool_open(p.tool_name(p.literal(spec.name)) + p.literal("(")) + p.space() + p.tool_args(args)
                      + p.space() + p.tool_close(p.literal(")")))
        choices.append(p.rule(f"tool-{spec.index}", body))
    one = p.choice(*choices)
    if view.parallel:
        return "[" + p.space() + one + p.zero_or_more("," + p.space() + one) + p.space() + "]"
    return "[" + p.space() + one + p.space() + "]"


def _peg_root(p: Any, view: RequestView, extract: bool) -> Any:
    """llama.cpp's LFM2 parser on core.peg's ChatBuilder: the format, for the parse and the grammar."""
    gen = p.literal(GEN_PROMPT)
    reasoning = p.optional(THINK_START + p.reasoning(p.until(THINK_END)) + THINK_END) if extract else p.eps()
    if not view.tools_active:
        if view.has_schema:
            return gen + reasoning + p.content(p.schema(p.json(), "response-format-schema", view.json_schema)) + p.end()
        return gen + reasoning + p.content(p.rest()) + p.end()
    start = p.literal(CALL_START)
    if CALL_LIST_SPACING in p.repairs:
        # repair call-list-spacing: whitespace around the call list inside the markers (vLLM strips it)
        start = start + p.optional(p.repair(CALL_LIST_SPACING, p.chars("[ \t\r\n]", 1, -1)))
    end = p.literal(CALL_END)
    if CALL_LIST_SPACING in p.repairs:
        end = p.optional(p.repair(CALL_LIST_SPACING, p.chars("[ \t\r\n]", 1, -1))) + end
    body = start + _python_style_calls(p, view) + end
    calls = p.rule("tool-calls", p.trigger_rule("tool-call", body))
    final_end = p.end()
    if view.parallel:   # repair consecutive-call-blocks: a further marked call list right after one
        next_call_section(p, final_end, CALL_START, "tool-calls")
    tree = gen + reasoning + p.content(p.until(CALL_START)) + calls + final_end
    if JSON_CALLS_IN_CALL_MARKERS in p.repairs:
        # repair json-calls-in-call-markers: the list in JSON, tried after the pythonic one (made once the tree
        # is built, so the grammar stays llama.cpp's)
        p.widen_late(body, JSON_CALLS_IN_CALL_MARKERS, lambda _: p.literal(CALL_START) + p.space()
                     + _json_calls(p, view) + p.space() + p.literal(CALL_END))
    return tree


def _json_calls(p: Any, view: RequestView) -> Any:
    """Repair ``json-calls-in-call-markers``: ``[{"name": …, "arguments": {…}}, …]`` of the declared tools."""
    tools = [{"type": "function", "function": {"name": s.name, "parameters": s.parameters}} for s in view.tools]
    one = p.flat_json_call(tools)
    more = p.zero_or_more(p.space() + "," + p.space() + one) if view.parallel else p.eps()
    return "[" + p.space() + one + more + p.space() + "]"
