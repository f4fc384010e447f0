"""Kimi K3 handler (llama.cpp ``common/parsers/kimi-k3.cpp``).

Sections are XTML tags ``<|open|>TAG attrs<|sep|>`` … ``<|close|>TAG<|sep|>``; the generation prompt opens
the message and its think section::

    REASONING <|close|>think<|sep|>
    <|open|>response<|sep|> CONTENT <|close|>response<|sep|>
    <|open|>tools<|sep|>
      <|open|>call tool="NAME" index="N"<|sep|>
        <|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|> …
      <|close|>call<|sep|> …
    <|close|>tools<|sep|>
    <|close|>message<|sep|><|end_of_msg|>

The value's JSON type comes from the tool schema (a parameter without a string ``type`` counts as a string),
not from the ``type`` attribute. Missing closers are tolerated where llama.cpp tolerates them.
"""

from __future__ import annotations

from typing import Any

from ...templating import ChatTemplate
from ..request import ChatRequest
from . import _common as C
from ._common import Incomplete, Mismatch, Scanner
from ._peg_handler import peg_parser, scanner_engine, word

NAME = "kimi_k3"

SEP = "<|sep|>"
MSG_START = '<|open|>message role="assistant"<|sep|>'
THINK_START = "<|open|>think<|sep|>"
THINK_END = "<|close|>think<|sep|>"
RESP_START = "<|open|>response<|sep|>"
RESP_END = "<|close|>response<|sep|>"
TOOLS_START = "<|open|>tools<|sep|>"
TOOLS_END = "<|close|>tools<|sep|>"
CALL_START = '<|open|>call tool="'
CALL_END = "<|close|>call<|sep|>"
ARG_START = '<|open|>argument key="'
ARG_END = "<|close|>argument<|sep|>"
MSG_END = "<|close|>message<|sep|>"
EOM = "<|end_of_msg|>"

PRESERVED = ["<|open|>", "<|close|>", SEP, EOM]
DELIMITERS = {"assistant": MSG_START, "user": '<|open|>message role="user"<|sep|>',
              "tool": '<|open|>message role="tool"', "system": '<|open|>message role="system"'}


def _param_is_string(schema: C.Schema) -> bool:
    t = schema.node.get("type")
    return not isinstance(t, str) or t == "string"


def _make_body(view: C.RequestView):
    tools = {t.name: t for t in view.tools}

    def header(sc: Scanner, opener: str, names: dict) -> str:
        """``opener`` (ending in an opening quote), one of ``names``, the closing quote and the rest of the header
        up to ``<|sep|>``; returns the name."""
        sc.expect(opener)
        name = sc.choose_literal(names)
        sc.pos += len(name)
        sc.expect('"')
        sc.until(SEP)
        sc.expect(SEP)
        return name

    def argument(sc: Scanner, b: C.MessageBuilder, params: dict[str, bool]) -> None:
        key = header(sc, ARG_START, params)
        b.arg_name(key)
        start = sc.pos
        text = sc.until(ARG_END)
        if params[key]:
            b.arg_string(text, closed=False)
        else:
            b.arg_raw(text, sc.memo, start)
        sc.expect(ARG_END)
        b.arg_close()

    def call(sc: Scanner, b: C.MessageBuilder) -> None:
        name = header(sc, CALL_START, tools)
        b.open_call(name)
        params = {p: _param_is_string(s) for p, s, _ in tools[name].params()}
        while params and sc.pos < sc.n:
            r = sc.check(ARG_START)
            if r == -1:
                raise Incomplete(sc.n)
            if r == 0:
                break
            argument(sc, b, params)
        sc.expect(CALL_END)
        b.close_call()

    def tools_section(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(TOOLS_START)
        call(sc, b)
        while sc.pos < sc.n:
            r = sc.check(CALL_START)
            if r == -1:
                raise Incomplete(sc.n)
            if r == 0:
                break
            call(sc, b)
        sc.expect(TOOLS_END)
        sc.optional(MSG_END)
        sc.optional(EOM)

    def body(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.optional(MSG_START)
        if sc.pos < sc.n:
            sc.optional(THINK_START)
            text = sc.until(THINK_END, RESP_START)
            (b.add_reasoning if view.extract_reasoning else b.add_content)(text)
            sc.optional(THINK_END)
        sc.optional(RESP_START)
        b.add_content(sc.until(RESP_END, TOOLS_START, MSG_END))
        sc.optional(RESP_END)
        if view.tools_active:
            if view.required:
                tools_section(sc, b)
            else:
                C.optional(sc, b, tools_section)
        sc.optional(MSG_END)
        sc.optional(EOM)
        if sc.pos < sc.n:
            raise Mismatch(sc.pos, "text after the end of the message")

    return body


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> C.HandlerParser:
    """Kimi K3 parser and grammar (llama.cpp ``common_chat_params_init_kimi_k3``); a continuation reopens the
    message and think section (and the response section for CONTENT)."""
    view = C.request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(MSG_START + THINK_START, THINK_END + RESP_START)
    if not scanner_engine():
        return peg_parser(NAME, lambda p: _peg_root(p, view), generation_prompt=gp,
                          parser_generation_prompt=generation_prompt, include=view.tools_active,
                          lazy=not view.required, trigger=word(TOOLS_START), preserved_tokens=PRESERVED,
                          thinking_start_tag=THINK_START, thinking_end_tags=[THINK_END],
                          message_delimiters=list(DELIMITERS.items()))

    return C.HandlerParser(
        name=NAME,
        body=_make_body(view),
        generation_prompt=gp,
        preserved_tokens=PRESERVED,
        thinking_start_tag=THINK_START,
        thinking_end_tags=[THINK_END],
        message_delimiters=DELIMITERS,
        **C.grammar_fields(lambda p: _peg_root(p, view), include=view.tools_active,
                           lazy=not view.required, trigger=C.word_trigger(TOOLS_START)),
    )


def _peg_root(p: Any, view: C.RequestView) -> Any:
    """llama.cpp's Kimi K3 parser structure (core.peg ChatBuilder), used for the grammar."""
    start = p.optional(p.literal(MSG_START))
    stops = [THINK_END, RESP_START]
    think_body = p.reasoning(p.until_one_of(stops)) if view.extract_reasoning else p.content(p.until_one_of(stops))
    reasoning = p.optional(p.optional(p.literal(THINK_START)) + think_body + p.optional(p.literal(THINK_END)))
    response = (p.optional(p.literal(RESP_START)) + p.content(p.until_one_of([RESP_END, TOOLS_START, MSG_END]))
                + p.optional(p.literal(RESP_END)))
    trailer = p.optional(p.literal(MSG_END)) + p.optional(p.literal(EOM))
    if not view.tools_active:
        return start + reasoning + response + trailer + p.end()
    choices = []
    for spec in view.tools:
        props = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
        args = p.eps()
        if isinstance(props, dict) and props:
            arg_choices = []
            for key, pdef in props.items():
                is_string = not (isinstance(pdef, dict) and isinstance(pdef.get("type"), str)) or pdef["type"] == "string"
                value = (p.tool_arg_string_value(p.until(ARG_END)) if is_string
                         else p.tool_arg_value(p.until(ARG_END)))
                arg_choices.append(p.rule(f"kimi-k3-arg-{spec.name}-{key}", p.tool_arg(
                    p.tool_arg_open(p.literal(ARG_START)) + p.tool_arg_name(p.literal(key)) + p.literal('"')
                    + p.until(SEP) + p.literal(SEP) + value + p.tool_arg_close(p.literal(ARG_END)))))
            args = p.zero_or_more(p.choice(*arg_choices))
        call = p.tool(p.tool_open(p.literal(CALL_START) + p.tool_name(p.literal(spec.name)) + p.literal('"')
                                  + p.until(SEP) + p.literal(SEP)) + p.tool_args(args)
                      + p.tool_close(p.literal(CALL_END)))
        choices.append(p.rule(f"kimi-k3-tool-{spec.name}", call))
    section = p.trigger_rule("kimi-k3-tool-call", p.literal(TOOLS_START) + p.one_or_more(p.choice(*choices))
                             + p.literal(TOOLS_END) + p.optional(p.literal(MSG_END)) + p.optional(p.literal(EOM)))
    tools = section if view.required else p.optional(section)
    return start + reasoning + response + tools + trailer + p.end()
