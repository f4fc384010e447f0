"""Ling 3.0 / Bailing V3 handler (llama.cpp ``common/parsers/ling3.cpp``).

Output shape (the generation prompt ``<role>ASSISTANT</role>\\n<think>`` opens the think block; with thinking
off it is ``…<think></think>``)::

    REASONING [</think>] CONTENT <tool_call>NAME
    <arg_key>K</arg_key>
    <arg_value>V</arg_value>
    </tool_call> … [TEXT] [<|role_end|>]

While the think block is open, reasoning also ends at a ``<tool_call>`` (the model may call a tool before
closing it). String parameters are raw text; other types are JSON; a parameter that may be either is JSON
when the text is a JSON value directly followed by ``</arg_value>``, else a string. ``<|role_end|>`` is an
additional stop string and is consumed if it arrives as text.
"""

from __future__ import annotations

from typing import Any

from ...grammar.json_schema import SchemaNode, value_types
from ...jinja.template import ChatTemplate
from ..request import ChatRequest, Continuation
from ._request_view import RequestView, param_nodes, request_view
from ._peg_handler import HandlerParser, grammar_for, has_response_format, make_parser, peg_parser, word
from ...peg.chat import build_chat_peg_parser

NAME = "ling3"

ROLE = "<role>ASSISTANT</role>"
THINK_START = "<think>"
THINK_END = "</think>"
CALL_START = "<tool_call>"
CALL_END = "</tool_call>"
ARG_KEY = "<arg_key>"
ARG_KEY_END = "</arg_key>"
ARG_VAL = "<arg_value>"
ARG_VAL_END = "</arg_value>"
ROLE_END = "<|role_end|>"
PRESERVED = [THINK_START, THINK_END, CALL_START, CALL_END, ARG_KEY, ARG_KEY_END, ARG_VAL, ARG_VAL_END, ROLE_END]
DELIMITERS = {"assistant": ROLE, "user": "<role>HUMAN</role>", "tool": "<role>OBSERVATION</role>",
              "system": "<role>SYSTEM</role>"}


def value_mode(schema: SchemaNode) -> str:
    """``json`` (no string type), ``string`` (only strings) or ``mixed`` (JSON first, else string)."""
    types = value_types(schema)
    if "string" not in types:
        return "json"
    if types == {"string"}:
        return "string"
    return "mixed"


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """Ling 3 parser and grammar (llama.cpp ``common_chat_params_init_ling3``). The think block counts as open
    when the generation prompt's last ``<think>`` is not closed (or for a reasoning continuation)."""
    view = request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(ROLE + "\n" + THINK_START, THINK_END)
        think_open = view.continuation != Continuation.CONTENT
    else:
        last_open, last_close = gp.rfind(THINK_START), gp.rfind(THINK_END)
        think_open = last_open != -1 and (last_close == -1 or last_open > last_close)
    if has_response_format(request):
        return _response_format_parser(request, gp, think_open, view.extract_reasoning)
    return peg_parser(NAME, lambda p: _peg_root(p, view, think_open), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=view.tools_active,
                      lazy=not view.required, trigger=word(CALL_START), preserved_tokens=PRESERVED,
                      additional_stops=[ROLE_END], thinking_start_tag=THINK_START,
                      thinking_end_tags=[THINK_END, CALL_START], message_delimiters=list(DELIMITERS.items()))


def _response_format_parser(request: ChatRequest, gp: str, think_open: bool, extract: bool) -> Any:
    """llama.cpp b11549: with a response format the think block must close before the JSON answer, which the
    schema's grammar then constrains (not lazy). Declared on the chat PEG builder."""
    def root(p: Any) -> Any:
        opener = p.optional(p.literal(ROLE) + p.optional(p.space()))
        body_end = p.until_one_of([THINK_END, CALL_START]) if think_open else p.until_one_of([THINK_END])
        think_body = p.reasoning(body_end) if extract else p.content(body_end)
        closed_reasoning = p.literal(THINK_START) + think_body + p.literal(THINK_END)
        answer = p.content(p.schema(p.json(), "response-format", request.json_schema))
        return opener + (closed_reasoning << answer) + p.end()

    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    grammar, lazy, triggers = grammar_for(arena, notes, include=True, lazy=False, triggers=[word(CALL_START)])
    return make_parser(NAME, arena, generation_prompt=gp, grammar=grammar, grammar_lazy=lazy,
                       grammar_triggers=triggers,
                       preserved_tokens=PRESERVED,
                       additional_stops=[ROLE_END], supports_thinking=True, thinking_start_tag=THINK_START,
                       thinking_end_tags=[THINK_END, CALL_START],
                       message_delimiters=list(DELIMITERS.items()),
                       notes=notes)


def _peg_root(p: Any, view: RequestView, think_open: bool) -> Any:
    """llama.cpp's Ling 3 parser on core.peg's ChatBuilder: the format, for the parse and the grammar."""
    opener = p.optional(p.literal(ROLE) + p.optional(p.space()))
    body_end = p.until_one_of([THINK_END, CALL_START]) if think_open else p.until_one_of([THINK_END])
    think_body = p.reasoning(body_end) if view.extract_reasoning else p.content(body_end)
    reasoning = p.optional(p.optional(p.literal(THINK_START)) + think_body + p.optional(p.literal(THINK_END)))
    content = p.optional(p.content(p.until_one_of([CALL_START])))
    tail = p.optional(p.content(p.until(ROLE_END))) + p.optional(p.literal(ROLE_END))
    if not view.tools_active:
        return opener + reasoning + tail + p.end()

    arg_close = p.tool_arg_close(p.literal(ARG_VAL_END))
    arg_string = p.rule("ling3-arg-string", p.tool_arg_string_value(p.until(ARG_VAL_END)) + arg_close)
    choices = []
    for spec in view.tools:
        required, optional = [], []
        for j, (pname, node, is_required) in enumerate(param_nodes(spec)):
            rule_name = f"ling3-arg-{spec.index}-{j}"
            mode = value_mode(node)
            if mode == "json":
                value = p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", node)) + arg_close
            elif mode == "string":
                value = arg_string
            else:
                value = p.gbnf(p.atomic(p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", node))
                                        + arg_close) | arg_string, "ling3-arg-string")
            arg = p.rule(rule_name, p.optional(p.space()) + p.tool_arg(
                p.tool_arg_open(p.literal(ARG_KEY) + p.tool_arg_name(p.literal(pname)) + p.literal(ARG_KEY_END))
                + p.optional(p.space()) + p.literal(ARG_VAL) + value))
            (required if is_required else optional).append(arg)
        args = p.permute(f"ling3-{spec.index}-args", required)
        if optional:
            args = args + p.zero_or_more(p.choice(*optional))
        call = p.tool(p.tool_open(p.literal(CALL_START) + p.tool_name(p.literal(spec.name)) + p.optional(p.space()))
                      + p.tool_args(args) + p.tool_close(p.optional(p.space()) + p.literal(CALL_END)))
        choices.append(p.rule(f"ling3-tool-{spec.index}", call))
    one = p.choice(*choices)
    calls = one + p.zero_or_more(p.space() + one) if view.parallel else one
    section = p.trigger_rule("ling3-tool-call", calls + p.space() + p.optional(p.content(p.until(ROLE_END)))
                             + p.optional(p.literal(ROLE_END)))
    tools = section if view.required else p.optional(section)
    return opener + reasoning + content + tools + tail + p.end()
