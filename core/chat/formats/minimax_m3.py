"""MiniMax-M3 handler (llama.cpp ``common/parsers/minimax-m3.cpp`` + ``common_chat_peg_minimax_m3_mapper``).

Every tool tag carries the namespace token ``]<]minimax[>[`` (written ``NS`` below)::

    [<mm:think> REASONING </mm:think> | </mm:think>] CONTENT
    NS<tool_call>
    NS<invoke name="NAME">NS<param>VALUE NS</param>…NS</invoke>
    NS</tool_call>

Values are written as the template's ``to_xml`` macro writes them: strings raw, numbers and booleans as JSON
text, objects as nested ``NS<key>…NS</key>`` elements and arrays as ``NS<item>…NS</item>`` elements, so the
parameter schema decides how each value is read (a union tries its alternatives in order; a union that may be
a string is read as a string). The arguments are rebuilt as JSON from that structure. One deliberate difference
from llama.cpp: a ``$ref`` is followed once per path (llama.cpp reads a referenced object or array as one JSON
value, while the template writes it as nested elements); a recursive reference is read as a JSON value.
"""

from __future__ import annotations

import json
from typing import Any

from ...jinja.template import ChatTemplate
from ..request import ChatRequest
from . import _common as C
from ._common import Incomplete, Mismatch, Scanner

NAME = "minimax_m3"

NS = "]<]minimax[>["
THINK_START = "<mm:think>"
THINK_END = "</mm:think>"
FC_START = NS + "<tool_call>"
FC_END = NS + "</tool_call>"
INVOKE_END = NS + "</invoke>"


# ------------------------------------------------------------------------------------------------------------
# Schema-driven XML values → JSON. Each reader returns (json_text, done); done False = the input ended inside
# (json_text is the partial conversion, containers left open). Mismatch when the text does not fit.
# ------------------------------------------------------------------------------------------------------------


def _value(sc: Scanner, schema: C.Schema, close: str, depth: int = 0,
           refs: frozenset = frozenset()) -> tuple[str, bool]:
    if depth > 64:
        raise Mismatch(sc.pos, "schema nests too deeply")
    if schema.kind == "ref":
        # a $ref is expanded once per path; a recursive one is read as a JSON value below
        ref = schema.node.get("$ref")
        target = schema.target()
        if target is not None and ref not in refs:
            return _value(sc, target, close, depth + 1, refs | {ref})
    if schema.may_be_string():
        text = sc.until(close)
        if sc.check(close) == 1:
            sc.pos += len(close)
            return '"' + C.escape_json_inner(text) + '"', True
        return '"' + C.escape_json_inner(text), False
    kind = schema.kind
    if kind == "anyOf":
        save = sc.pos
        for alt in schema.alternatives():
            try:
                return _value(sc, alt, close, depth + 1, refs)
            except Mismatch:
                sc.pos = save
        raise Mismatch(sc.pos, "no alternative of the union fits")
    if kind == "object" and schema.properties():
        members, done = _members(sc, schema, depth + 1, refs)
        if not done:
            return "{" + ",".join(members), False
        sc.space()
        return _close(sc, "{" + ",".join(members), "}", close)
    if kind == "array":
        items: list[str] = []
        item_close = NS + "</item>"
        while True:
            save = sc.pos
            sc.space()
            r = sc.check(NS + "<item>")
            if r == -1:
                return "[" + ",".join(items), False
            if r == 0:
                sc.pos = save
                break
            sc.pos += len(NS + "<item>")
            v, done = _value(sc, schema.items(), item_close, depth + 1, refs)
            items.append(v)
            if not done:
                return "[" + ",".join(items), False
        sc.space()
        return _close(sc, "[" + ",".join(items), "]", close)
    start = sc.pos
    try:
        end = C.scan_json(sc.text, start, sc.memo)
    except Incomplete as e:
        return sc.text[start:max(start, e.end)], False
    sc.pos = end
    return _close(sc, sc.text[start:end], "", close)


def _close(sc: Scanner, json_text: str, bracket: str, close: str) -> tuple[str, bool]:
    r = sc.check(close)
    if r == 1:
        sc.pos += len(close)
        return json_text + bracket, True
    if r == -1:
        return json_text, False
    raise Mismatch(sc.pos, f"expected {close!r}")


def _members(sc: Scanner, schema: C.Schema, depth: int, refs: frozenset = frozenset()) -> tuple[list[str], bool]:
    """Object members ``NS<key>value NS</key>`` in any order (llama.cpp: required ones in schema order, then
    optional ones in any order). Returns the JSON members and whether the input still continues."""
    props = {name: s for name, s, _ in schema.properties()}
    opens = {NS + "<" + name + ">": name for name in props}
    members: list[str] = []
    while True:
        save = sc.pos
        sc.space()
        if sc.pos >= sc.n:
            return members, False
        try:
            tag = sc.choose_literal(opens)
        except Incomplete:
            return members, False
        except Mismatch:
            sc.pos = save
            return members, True
        sc.pos += len(tag)
        name = opens[tag]
        v, done = _value(sc, props[name], NS + "</" + name + ">", depth, refs)
        members.append(json.dumps(name, ensure_ascii=False) + ":" + v)
        if not done:
            return members, False


def _make_body(view: C.RequestView, gen_literal: str):
    tools = {t.name: t for t in view.tools}
    opens = {NS + '<invoke name="' + name + '">': name for name in tools}

    def reasoning(sc: Scanner, b: C.MessageBuilder) -> None:
        if sc.pos >= sc.n:
            return
        r = sc.check(THINK_START)
        if r == -1:
            raise Incomplete(sc.n)
        if r == 1:
            sc.pos += len(THINK_START)
            if view.enable_thinking:
                sc.space()
                b.add_reasoning(sc.until(THINK_END))
            else:
                sc.until(THINK_END)  # a think block while thinking is off is dropped
            sc.expect(THINK_END)
            return
        sc.optional(THINK_END)

    def invoke(sc: Scanner, b: C.MessageBuilder) -> None:
        tag = sc.choose_literal(opens)
        sc.pos += len(tag)
        name = opens[tag]
        b.open_call(name)
        spec = tools[name]
        sc.space()
        start = sc.pos
        if spec.schema.kind == "object":
            members, more = _members(sc, spec.schema, 0)
        else:
            members, more = [], True
        b.converted_args("{" + ",".join(members), start, sc.pos)
        if not more:
            raise Incomplete(sc.n)
        sc.space()
        sc.expect(INVOKE_END)
        b.current.call.arguments += "}"

    def tool_calls(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(FC_START)
        sc.space()
        invoke(sc, b)
        if view.parallel:
            while True:
                save = sc.pos
                sc.space()
                r = sc.check(NS + "<invoke")
                if r == -1:
                    raise Incomplete(sc.n)
                if r == 0:
                    sc.pos = save
                    break
                invoke(sc, b)
        sc.space()
        sc.expect(FC_END)

    def body(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(gen_literal)
        if view.extract_reasoning:
            reasoning(sc, b)
        if view.has_schema:
            sc.expect("```json")
            sc.space()
            sc.pos = C.streamed_json_value(sc, b.add_content)
            sc.space()
            sc.expect("```")
        elif not view.tools_active:
            b.add_content(sc.until())
        else:
            b.add_content(sc.until(FC_START))
            if view.required:
                tool_calls(sc, b)
            else:
                C.optional(sc, b, tool_calls)
        if sc.pos < sc.n:
            raise Mismatch(sc.pos, "text after the tool calls")

    return body


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> C.HandlerParser:
    """MiniMax-M3 parser and grammar (llama.cpp ``common_chat_params_init_minimax_m3``). The parse starts with
    the generation prompt up to its first ``<mm:think>``; a continuation appends ``<mm:think>`` + the continued
    reasoning (+ ``</mm:think>`` + content)."""
    view = C.request_view(request)
    gen = generation_prompt
    cut = gen.find(THINK_START)
    gen_literal = gen if cut == -1 else gen[:cut]
    gp = gen
    if view.has_continuation:
        gp = view.prefill(gen + THINK_START, THINK_END)

    include_grammar = view.has_schema or view.tools_active
    return C.HandlerParser(
        name=NAME,
        body=_make_body(view, gen_literal),
        generation_prompt=gp,
        preserved_tokens=[NS, "<tool_call>", "</tool_call>", THINK_START, THINK_END],
        format="peg-minimax-m3",
        thinking_start_tag=THINK_START,
        thinking_end_tags=[THINK_END],
        message_delimiters={"assistant": "]~b]ai", "user": "]~b]user", "tool": "]~b]tool",
                            "system": "]~b]system"},
        drop_blank_reasoning=False,
        **C.grammar_fields(lambda p: _peg_root(p, view, gen_literal), include=include_grammar,
                           lazy=not (view.has_schema or (view.tools_active and view.required)),
                           trigger=C.word_trigger(FC_START)),
    )


def _peg_root(p: Any, view: C.RequestView, gen_literal: str) -> Any:
    """llama.cpp's MiniMax-M3 parser structure (core.peg ChatBuilder), used for the grammar."""
    from ...grammar import json_schema as JS

    gen = p.literal(gen_literal) if gen_literal else p.eps()
    reasoning = p.eps()
    if view.extract_reasoning:
        if view.enable_thinking:
            block = (p.literal(THINK_START) + p.space()
                     + p.ac(p.reasoning(p.until(THINK_END)) + p.literal(THINK_END), THINK_END))
        else:
            block = p.literal(THINK_START) + p.ac(p.until(THINK_END) + p.literal(THINK_END), THINK_END)
        reasoning = p.optional(p.choice(block, p.literal(THINK_END)))
    if view.has_schema:
        response = p.rule("response-format", p.literal("```json") + p.space() + p.content(
            p.schema(p.json(), "response-format-schema", view.json_schema)) + p.space() + p.literal("```"))
        return gen + reasoning + response + p.end()
    if not view.tools_active:
        return gen + reasoning + p.content(p.rest()) + p.end()

    def resolve(node: Any, refs: frozenset) -> tuple[Any, frozenset]:
        # a $ref is expanded once per path (as the parser does); a recursive one stays a JSON value
        while isinstance(node, JS.RefSchema) and node.target is not None and node.ref not in refs:
            refs = refs | {node.ref}
            node = node.target
        return node, refs

    def element(tag: str, node: Any, rule_name: str, refs: frozenset) -> Any:
        close = NS + "</" + tag + ">"
        return p.rule(rule_name, p.tool_arg(p.tool_arg_open(p.literal(NS + "<") + p.tool_arg_name(p.literal(tag))
                                                            + p.literal(">")) + value_of(node, rule_name, close, refs)))

    def value_of(node: Any, rule_name: str, close: str, refs: frozenset) -> Any:
        close_tag = p.tool_arg_close(p.literal(close))
        if JS.may_be_string(node):
            return p.ac(p.tool_arg_string_value(p.until(close)) + close_tag, close)
        target, refs = resolve(node, refs)
        if isinstance(target, JS.AnyOf):
            return p.choice(*[value_of(alt, f"{rule_name}-{i}", close, refs) for i, alt in enumerate(target.children)])
        if isinstance(target, JS.ObjectSchema) and target.properties:
            return p.tag("tool-arg-object", members_of(target, rule_name, refs)) + p.space() + close_tag
        if isinstance(target, JS.ArraySchema):
            item = p.rule(rule_name + "-item", p.tag("tool-arg-item", p.literal(NS + "<item>") + value_of(
                target.items, rule_name + "-item", NS + "</item>", refs)))
            return p.tag("tool-arg-array", p.repeat(p.space() + item, 0, -1)) + p.space() + close_tag
        return p.tool_arg_json_value(p.schema(p.json(), rule_name + "-schema", node)) + close_tag

    def members_of(obj: Any, prefix: str, refs: frozenset = frozenset()) -> Any:
        required, optional = [], []
        for j, prop in enumerate(obj.properties):
            el = element(prop.name, prop.schema, f"{prefix}-{j}", refs)
            (required if prop.required else optional).append(el)
        return p.required_then_optional(required, optional)

    choices = []
    for spec in view.tools:
        root, refs = resolve(C.schema_node(spec.parameters), frozenset())
        body = members_of(root, f"tool-{spec.index}-arg", refs) if isinstance(root, JS.ObjectSchema) else p.eps()
        call = p.tool(p.tool_open(p.literal(NS + '<invoke name="') + p.tool_name(p.literal(spec.name))
                                  + p.literal('">')) + p.space() + body + p.space()
                      + p.tool_close(p.literal(INVOKE_END)))
        choices.append(p.rule(f"tool-{spec.index}", call))
    one = p.choice(*choices)
    if view.parallel:
        calls = p.trigger_rule("tool-call", p.literal(FC_START) + p.space() + one + p.zero_or_more(p.space() + one)
                               + p.space() + p.literal(FC_END))
    else:
        calls = p.trigger_rule("tool-call", p.literal(FC_START) + p.space() + one + p.space() + p.literal(FC_END))
    if not view.required:
        calls = p.optional(calls)
    return gen + reasoning + p.content(p.until(FC_START)) + calls + p.end()
