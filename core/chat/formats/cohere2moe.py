"""Cohere2 MoE / North Code handler (llama.cpp ``common/parsers/cohere2moe.cpp``).

The assistant turn is fully marker-wrapped; the generation prompt ends inside the thinking block::

    <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|> REASONING <|END_THINKING|>
    ( <|START_TEXT|> CONTENT <|END_TEXT|>
    | <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "NAME", "parameters": {…}}, …]<|END_ACTION|> )
    <|END_OF_TURN_TOKEN|>

Content and tool calls are mutually exclusive. The call id is the ``tool_call_id`` value; arguments are the
model's JSON, verbatim.
"""

from __future__ import annotations

import json
from typing import Any

from ...templating import ChatTemplate
from ..request import ChatRequest
from . import _common as C
from ._common import Incomplete, Mismatch, Scanner
from ._peg_handler import peg_parser, scanner_engine, word

NAME = "cohere2moe"

TURN_START = "<|START_OF_TURN_TOKEN|>"
TURN_END = "<|END_OF_TURN_TOKEN|>"
CHATBOT = "<|CHATBOT_TOKEN|>"
USER = "<|USER_TOKEN|>"
SYSTEM = "<|SYSTEM_TOKEN|>"
THINK_START = "<|START_THINKING|>"
THINK_END = "<|END_THINKING|>"
TEXT_START = "<|START_TEXT|>"
TEXT_END = "<|END_TEXT|>"
ACTION_START = "<|START_ACTION|>"
ACTION_END = "<|END_ACTION|>"
RESULT_START = "<|START_TOOL_RESULT|>"
RESULT_END = "<|END_TOOL_RESULT|>"
GEN_PREFIX = TURN_START + CHATBOT

PRESERVED = [TURN_START, TURN_END, CHATBOT, USER, SYSTEM, THINK_START, THINK_END, TEXT_START, TEXT_END, ACTION_START,
             ACTION_END, RESULT_START, RESULT_END]
DELIMITERS = {"assistant": GEN_PREFIX, "user": TURN_START + USER, "tool": TURN_START + SYSTEM + RESULT_START,
              "system": TURN_START + SYSTEM}


def _make_body(view: C.RequestView):
    names = [t.name for t in view.tools]
    name_opens = {json.dumps(n, ensure_ascii=False): n for n in names}

    def key(sc: Scanner, k: str) -> None:
        sc.expect(f'"{k}"')
        sc.space()
        sc.expect(":")
        sc.space()

    def call(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect("{")
        sc.space()
        call_id = ""
        r = sc.check('"tool_call_id"')
        if r == -1:
            raise Incomplete(sc.n)
        if r == 1:
            key(sc, "tool_call_id")
            start = sc.pos
            if sc.pos < sc.n and sc.text[sc.pos] == '"':
                end = C.scan_quoted(sc.text, start, '"')
                call_id = json.loads(sc.text[start:end])
            else:
                end = C.scan_number(sc.text, start)
                call_id = sc.text[start:end]
            sc.pos = end
            sc.space()
            sc.expect(",")
            sc.space()
        key(sc, "tool_name")
        quoted = sc.choose_literal(name_opens)
        sc.pos += len(quoted)
        b.open_call(name_opens[quoted], call_id=call_id)
        sc.space()
        sc.expect(",")
        sc.space()
        key(sc, "parameters")
        sc.pos = C.streamed_json_value(sc, b.set_args)
        sc.space()
        sc.expect("}")
        b.close_call()

    def tool_calls(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(ACTION_START)
        sc.space()
        sc.expect("[")
        sc.space()
        call(sc, b)
        while view.parallel:
            save = sc.pos
            sc.space()
            r = sc.check(",")
            if r == -1:
                raise Incomplete(sc.n)
            if r == 0:
                sc.pos = save
                break
            sc.pos += 1
            sc.space()
            call(sc, b)
        sc.space()
        sc.expect("]")
        sc.space()
        sc.expect(ACTION_END)

    def text_content(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(TEXT_START)
        if view.has_schema:
            sc.pos = C.streamed_json_value(sc, b.add_content)
        else:
            b.add_content(sc.until(TEXT_END))
        sc.optional(TEXT_END)

    def body(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(GEN_PREFIX)
        if sc.pos < sc.n:
            r = sc.check(THINK_START)
            if r == -1:
                raise Incomplete(sc.n)
            if r == 1:
                start = sc.pos
                sc.pos += len(THINK_START)
                if view.extract_reasoning:
                    b.add_reasoning(sc.until(THINK_END, TEXT_START, ACTION_START))
                    sc.optional(THINK_END)
                else:
                    try:
                        sc.until(THINK_END, TEXT_START, ACTION_START)
                        sc.optional(THINK_END)
                    except Incomplete:
                        b.add_content(sc.text[start:])
                        raise
                    b.add_content(sc.text[start:sc.pos])
        if view.tools_active:
            if view.required:
                tool_calls(sc, b)
            else:
                r = sc.check(ACTION_START)
                if r == -1:
                    raise Incomplete(sc.n)
                if r == 1:
                    tool_calls(sc, b)
                else:
                    text_content(sc, b)
        else:
            text_content(sc, b)
        sc.optional(TURN_END)
        if sc.pos < sc.n:
            raise Mismatch(sc.pos, "text after the end of the turn")

    return body


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> C.HandlerParser:
    """Cohere2 MoE parser and grammar (llama.cpp ``common_chat_params_init_cohere2moe``); a continuation
    reopens the thinking block (and for CONTENT closes it and opens ``<|START_TEXT|>``)."""
    view = C.request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(GEN_PREFIX + THINK_START, THINK_END + TEXT_START)

    include_grammar = view.has_schema or view.tools_active
    lazy = not view.has_schema and view.tool_choice.value == "auto"
    if not scanner_engine():
        return peg_parser(NAME, lambda p: _peg_root(p, view), generation_prompt=gp,
                          parser_generation_prompt=generation_prompt, include=include_grammar, lazy=lazy,
                          trigger=word(ACTION_START), preserved_tokens=PRESERVED, thinking_start_tag=THINK_START,
                          thinking_end_tags=[THINK_END], message_delimiters=list(DELIMITERS.items()))
    return C.HandlerParser(
        name=NAME,
        body=_make_body(view),
        generation_prompt=gp,
        preserved_tokens=PRESERVED,
        thinking_start_tag=THINK_START,
        thinking_end_tags=[THINK_END],
        message_delimiters=DELIMITERS,
        **C.grammar_fields(lambda p: _peg_root(p, view), include=include_grammar, lazy=lazy,
                           trigger=C.word_trigger(ACTION_START)),
    )


def _peg_root(p: Any, view: C.RequestView) -> Any:
    """llama.cpp's Cohere2 MoE parser structure (core.peg ChatBuilder), used for the grammar."""
    stops = [THINK_END, TEXT_START, ACTION_START]
    if view.extract_reasoning:
        reasoning = p.optional(p.literal(THINK_START) + p.reasoning(p.until_one_of(stops))
                               + p.optional(p.literal(THINK_END)))
    else:
        reasoning = p.optional(p.content(p.literal(THINK_START) + p.until_one_of(stops)
                                         + p.optional(p.literal(THINK_END))))
    if view.has_schema:
        text = (p.literal(TEXT_START) + p.content(p.schema(p.json(), "response-format-schema", view.json_schema))
                + p.optional(p.literal(TEXT_END)))
    else:
        text = p.literal(TEXT_START) + p.content(p.until(TEXT_END)) + p.optional(p.literal(TEXT_END))
    gen = p.literal(GEN_PREFIX)
    if not view.tools_active:
        return gen + reasoning + text + p.optional(p.literal(TURN_END)) + p.end()
    calls = p.standard_json_tools(ACTION_START, ACTION_END, [{"type": "function", "function": {
        "name": t.name, "parameters": t.parameters}} for t in view.tools], view.parallel, True,
        name_key="tool_name", args_key="parameters", array_wrapped=True, function_is_key=False, call_id_key="",
        gen_call_id_key="tool_call_id", parameters_order=["tool_call_id", "tool_name", "parameters"])
    body = calls if view.required else p.choice(calls, text)
    return gen + reasoning + body + p.optional(p.literal(TURN_END)) + p.end()
