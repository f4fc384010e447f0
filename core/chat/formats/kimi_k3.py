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

from ...jinja.template import ChatTemplate
from ..request import ChatRequest
from ._request_view import RequestView, request_view
from ._peg_handler import HandlerParser, peg_parser, word
from ..mapper import ACTIONS, ChatMapper
from ..repairs import ATTRIBUTE_ENTITIES, REASONING_START_REPEATED, UNDECLARED_ARGUMENTS, next_call_section

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


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """Kimi K3 parser and grammar (llama.cpp ``common_chat_params_init_kimi_k3``); a continuation reopens the
    message and think section (and the response section for CONTENT)."""
    view = request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(MSG_START + THINK_START, THINK_END + RESP_START)
    return peg_parser(NAME, lambda p: _peg_root(p, view), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=view.tools_active,
                      lazy=not view.required, trigger=word(TOOLS_START), preserved_tokens=PRESERVED,
                      thinking_start_tag=THINK_START, thinking_end_tags=[THINK_END],
                      message_delimiters=list(DELIMITERS.items()))


def escape_attr(value: str) -> str:
    """An attribute value as the template writes it (its ``escape_attr`` macro: ``&`` then ``"``)."""
    return value.replace("&", "&amp;").replace('"', "&quot;")


def unescape_attr(text: str) -> str:
    """The inverse of :func:`escape_attr`."""
    return text.replace("&quot;", '"').replace("&amp;", "&")


ESCAPED_NAME = "kimi-k3-escaped-tool-name"
"""Tag of a tool name written with the template's attribute escaping (repair ``attribute-entities``): the mapper
takes the name unescaped."""


def _escaped_tool_name(m: ChatMapper, node: Any) -> None:
    cur = m.current
    m._tool_name(node)
    if cur is not None:
        cur.name = unescape_attr(cur.name)


ACTIONS[ESCAPED_NAME] = _escaped_tool_name


def _peg_root(p: Any, view: RequestView) -> Any:
    """llama.cpp's Kimi K3 parser on core.peg's ChatBuilder: the format, for the parse and the grammar."""
    start = p.optional(p.literal(MSG_START))
    stops = [THINK_END, RESP_START]
    think_body = p.reasoning(p.until_one_of(stops)) if view.extract_reasoning else p.content(p.until_one_of(stops))
    opened = p.literal(THINK_START)
    reasoning = p.optional(p.optional(opened) + think_body + p.optional(p.literal(THINK_END)))
    late: list[Any] = []   # repair widenings made once the tree is built (the grammar stays llama.cpp's)
    if view.extract_reasoning and REASONING_START_REPEATED in p.repairs:
        # repair reasoning-start-repeated: the think section the generation prompt opened, opened again
        late.append(lambda: p.widen_late(opened, REASONING_START_REPEATED,
                                         lambda one: one + p.space() + p.literal(THINK_START), first=True))
    response = (p.optional(p.literal(RESP_START)) + p.content(p.until_one_of([RESP_END, TOOLS_START, MSG_END]))
                + p.optional(p.literal(RESP_END)))
    trailer = p.optional(p.literal(MSG_END)) + p.optional(p.literal(EOM))
    if not view.tools_active:
        tree = start + reasoning + response + trailer + p.end()
        for widen in late:
            widen()
        return tree
    choices = []
    for spec in view.tools:
        props = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
        args = p.eps()
        if isinstance(props, dict) and props:
            arg_choices = []
            for j, (key, pdef) in enumerate(props.items()):
                is_string = not (isinstance(pdef, dict) and isinstance(pdef.get("type"), str)) or pdef["type"] == "string"
                value = (p.tool_arg_string_value(p.until(ARG_END)) if is_string
                         else p.tool_arg_value(p.until(ARG_END)))
                arg_choices.append(p.rule(f"kimi-k3-arg-{spec.index}-{j}", p.tool_arg(
                    p.tool_arg_open(p.literal(ARG_START)) + p.tool_arg_name(p.literal(key)) + p.literal('"')
                    + p.until(SEP) + p.literal(SEP) + value + p.tool_arg_close(p.literal(ARG_END)))))
            one_arg = p.choice(*arg_choices)
            args = p.zero_or_more(one_arg)
            if UNDECLARED_ARGUMENTS in p.repairs:
                late.append(lambda one_arg=one_arg, keys=list(props): p.widen_late(
                    one_arg, UNDECLARED_ARGUMENTS, lambda _: _undeclared_arg(p, keys)))
        name = p.tool_name(p.literal(spec.name))
        if ATTRIBUTE_ENTITIES in p.repairs and escape_attr(spec.name) != spec.name:
            # repair attribute-entities: the name as the template writes it in tool="…" (made once the tree is
            # built, so the grammar stays llama.cpp's)
            late.append(lambda name=name, text=escape_attr(spec.name): p.widen_late(
                name, ATTRIBUTE_ENTITIES, lambda _: p.atomic(p.tag(ESCAPED_NAME, p.literal(text)))))
        call = p.tool(p.tool_open(p.literal(CALL_START) + name + p.literal('"')
                                  + p.until(SEP) + p.literal(SEP)) + p.tool_args(args)
                      + p.tool_close(p.literal(CALL_END)))
        choices.append(p.rule(f"kimi-k3-tool-{spec.index}", call))
    section = p.trigger_rule("kimi-k3-tool-call", p.literal(TOOLS_START) + p.one_or_more(p.choice(*choices))
                             + p.literal(TOOLS_END) + p.optional(p.literal(MSG_END)) + p.optional(p.literal(EOM)))
    tools = section if view.required else p.optional(section)
    final_end = p.end()
    if view.parallel:   # repair consecutive-call-blocks: a further tools section after the first
        next_call_section(p, final_end, TOOLS_START, "kimi-k3-tool-call")
    tree = start + reasoning + response + tools + trailer + final_end
    for widen in late:
        widen()
    return tree


def _undeclared_arg(p: Any, declared: list[str]) -> Any:
    """Repair ``undeclared-arguments``: an argument whose key the tool does not declare, its JSON type read off
    its own ``type`` attribute, as SGLang's K3 detector reads it: ``type="string"`` the raw text, another type a
    JSON value (shown once complete), and text that is no JSON the string it is. Only reached when no declared
    key matched."""
    known = p.choice(*[p.literal(k + '"') for k in declared])

    def close() -> Any:
        return p.tool_arg_close(p.literal(ARG_END))

    def raw() -> Any:
        return p.tool_arg_string_value(p.until(ARG_END)) + close()

    string = p.literal(' type="string"') + p.literal(SEP) + raw()
    other = p.until(SEP) + p.literal(SEP) + p.choice(p.atomic(p.tool_arg_value(p.json()) + close()), raw())
    return p.tool_arg(p.tool_arg_open(p.literal(ARG_START)) + p.negate(known) + p.tool_arg_name(p.until('"'))
                      + p.literal('"') + p.choice(string, other))
