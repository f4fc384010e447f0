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
value, while the template writes it as nested elements); a recursive reference is read as a JSON value. At
``improved``, repairs ``free-object-elements`` (an object without declared properties written as elements) and
``leading-zero-integer`` (``018956`` for an integer) widen the value reading (:mod:`core.chat.repairs`).
"""

from __future__ import annotations

import json
from typing import Any

from ...grammar import json_schema as JS
from ...peg.engine import AstNode
from ...jinja.template import ChatTemplate
from ..mapper import encode_json_string, escape_json_inner, normalize_python_value, register_args_hook
from ..request import ChatRequest
from ._peg_handler import HandlerParser, peg_parser, word
from ._request_view import RequestView, request_view
from ..repairs import FREE_OBJECT_ELEMENTS, LEADING_ZERO_INTEGER, MISTYPED_VALUE_AS_STRING

NAME = "minimax_m3"

NS = "]<]minimax[>["
THINK_START = "<mm:think>"
THINK_END = "</mm:think>"
FC_START = NS + "<tool_call>"
FC_END = NS + "</tool_call>"
INVOKE_END = NS + "</invoke>"
DELIMITERS = {"assistant": "]~b]ai", "user": "]~b]user", "tool": "]~b]tool", "system": "]~b]system"}


# ------------------------------------------------------------------------------------------------------------
# Schema-typed XML values -> JSON (llama.cpp ``common_chat_peg_minimax_m3_mapper``). The PEG reads each value as
# its schema says and tags how (its own tags, none of the mapper's); the value hook turns that subtree into the
# call's JSON arguments. A value cut by the end of the input gives its growing partial JSON (containers and
# strings left open until their close tag is complete).
# ------------------------------------------------------------------------------------------------------------

MEMBER, OPEN, KEY, STRING, JSON_VALUE, OBJECT, ARRAY, ITEM, CLOSE = (
    "mm-member", "mm-open", "mm-key", "mm-string", "mm-json", "mm-object", "mm-array", "mm-item", "mm-close")
# repairs free-object-elements (an object without declared properties, written as elements) and
# leading-zero-integer (an integer element written 018956)
FREE_OBJECT, ZERO_INT = "mm-free-object", "mm-zero-int"
_OWN = frozenset({MEMBER, KEY, STRING, JSON_VALUE, OBJECT, ARRAY, ITEM, CLOSE, FREE_OBJECT, ZERO_INT})
FREE_DEPTH = 3
"""How deep free-object-elements reads elements inside elements (the grammar of each level is its own rule)."""


def _tagged(node: AstNode) -> list[AstNode]:
    """The nearest nodes below ``node`` that carry one of this module's tags, in document order."""
    out: list[AstNode] = []
    stack = list(reversed(node.children or ()))
    while stack:
        c = stack.pop()
        if c.tag in _OWN:
            out.append(c)
        elif c.children:
            stack.extend(reversed(c.children))
    return out


def _members(source: str, node: AstNode) -> tuple[list[str], bool]:
    """The JSON members of the ``MEMBER`` elements below ``node``, and whether the last one is complete."""
    parts: list[str] = []
    for el in _tagged(node):
        if el.tag != MEMBER:
            continue
        kids = _tagged(el)
        if len(kids) < 2 or kids[0].tag != KEY or kids[0].partial:
            return parts, False
        value, done = _value(source, kids[1:])
        parts.append(encode_json_string(source[kids[0].start:kids[0].end]) + ":" + value)
        if not done:
            return parts, False
    return parts, True


def _value(source: str, kids: list[AstNode]) -> tuple[str, bool]:
    """The JSON of one element's value (its tagged nodes after the key or ``<item>``), and whether it is
    complete (its close tag read)."""
    v = kids[0]
    closed = kids[-1].tag == CLOSE and not kids[-1].partial
    if v.tag == STRING:
        return '"' + escape_json_inner(source[v.start:v.end]) + ('"' if closed else ""), closed
    if v.tag == JSON_VALUE:
        return normalize_python_value(source[v.start:v.end]), closed
    if v.tag == ZERO_INT:   # shown once complete (a stream cannot take back a 0 shown before its digits)
        digits = source[v.start:v.end]
        return (str(int(digits)), True) if closed and digits.lstrip("-").isdigit() else ("", False)
    if v.tag == FREE_OBJECT:   # shown whole once closed: a later repeated key turns a value into a list
        return (_free_object(source, v), True) if closed else ("", False)
    if v.tag == OBJECT:
        parts, done = _members(source, v)
        return "{" + ",".join(parts) + ("}" if done and closed else ""), done and closed
    if v.tag == ARRAY:
        items: list[str] = []
        done = True
        for item in _tagged(v):
            inner = _tagged(item)
            if not inner:
                done = False
                break
            text, done = _value(source, inner)
            items.append(text)
            if not done:
                break
        return "[" + ",".join(items) + ("]" if done and closed else ""), done and closed
    return "", False


def _free_object(source: str, node: AstNode) -> str:
    """The JSON of a complete free-object-elements value: its elements by key, in order, a repeated key's
    values gathered in a list; a text value is a string."""
    out: dict[str, Any] = {}
    for el in _tagged(node):
        kids = _tagged(el) if el.tag == MEMBER else []
        if len(kids) < 2 or kids[0].tag != KEY:
            continue
        key, v = source[kids[0].start:kids[0].end], kids[1]
        value: Any = json.loads(_free_object(source, v)) if v.tag == FREE_OBJECT else source[v.start:v.end]
        if key not in out:
            out[key] = value
        elif isinstance(out[key], list) and key in _listed(out):
            out[key].append(value)
        else:
            out[key] = [out[key], value]
            _listed(out).add(key)
    out.pop(_LISTED_KEY, None)
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


_LISTED_KEY = "\x00listed"


def _listed(out: dict[str, Any]) -> set:
    """The keys of ``out`` whose value is a list gathered from repeats (not a list the text held)."""
    return out.setdefault(_LISTED_KEY, set())


def _arguments(source: str, node: AstNode) -> str:
    """The value hook: ``{`` and the members read so far (the call's close adds the ``}``)."""
    return "{" + ",".join(_members(source, node)[0])


# an open string value ends the partial arguments (_value): its text streams escaped (mapper.HOOK_STRINGS)
ARGS_TAG = register_args_hook("minimax-m3", _arguments, strings=(STRING,))


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """MiniMax-M3 parser and grammar (llama.cpp ``common_chat_params_init_minimax_m3``). The parse starts with
    the generation prompt up to its first ``<mm:think>``; a continuation appends ``<mm:think>`` + the continued
    reasoning (+ ``</mm:think>`` + content)."""
    view = request_view(request)
    gen = generation_prompt
    cut = gen.find(THINK_START)
    gen_literal = gen if cut == -1 else gen[:cut]
    gp = gen
    if view.has_continuation:
        gp = view.prefill(gen + THINK_START, THINK_END)
    return peg_parser(NAME, lambda p: _peg_root(p, view, gen_literal), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=view.has_schema or view.tools_active,
                      lazy=not (view.has_schema or (view.tools_active and view.required)), trigger=word(FC_START),
                      preserved_tokens=[NS, "<tool_call>", "</tool_call>", THINK_START, THINK_END],
                      format="peg-minimax-m3", thinking_start_tag=THINK_START, thinking_end_tags=[THINK_END],
                      message_delimiters=list(DELIMITERS.items()))


def _peg_root(p: Any, view: RequestView, gen_literal: str) -> Any:
    """The format: llama.cpp's MiniMax-M3 parser on core.peg's ChatBuilder, for the parse and the grammar."""
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
        opener = p.atomic(p.tag(OPEN, p.literal(NS + "<") + p.atomic(p.tag(KEY, p.literal(tag))) + p.literal(">")))
        member = p.tag(MEMBER, opener + value_of(node, rule_name, close, refs))
        if MISTYPED_VALUE_AS_STRING in p.repairs and not JS.may_be_string(node):
            # repair mistyped-value-as-string: an element whose text is no value of its type is kept as the text
            # it is (a string), the call kept; made once the tree is built, so the grammar stays llama.cpp's
            p.late.append(lambda: p.widen_late(member, MISTYPED_VALUE_AS_STRING, lambda _: p.tag(MEMBER, p.atomic(
                p.tag(OPEN, p.literal(NS + "<") + p.atomic(p.tag(KEY, p.literal(tag))) + p.literal(">")))
                + p.ac(p.tag(STRING, p.until(close)) + p.atomic(p.tag(CLOSE, p.literal(close))), close))))
        return p.rule(rule_name, member)

    def value_of(node: Any, rule_name: str, close: str, refs: frozenset) -> Any:
        close_tag = p.atomic(p.tag(CLOSE, p.literal(close)))
        if JS.may_be_string(node):
            return p.ac(p.tag(STRING, p.until(close)) + close_tag, close)
        target, refs = resolve(node, refs)
        if isinstance(target, JS.AnyOf):
            return p.choice(*[value_of(alt, f"{rule_name}-{i}", close, refs) for i, alt in enumerate(target.children)])
        if isinstance(target, JS.ObjectSchema) and target.properties:
            return p.tag(OBJECT, members_of(target, rule_name, refs)) + p.space() + close_tag
        if isinstance(target, JS.ArraySchema):
            item = p.rule(rule_name + "-item", p.tag(ITEM, p.literal(NS + "<item>") + value_of(
                target.items, rule_name + "-item", NS + "</item>", refs)))
            return p.tag(ARRAY, p.repeat(p.space() + item, 0, -1)) + p.space() + close_tag
        value = p.schema(p.json(), rule_name + "-schema", node)
        if p.python_literal_values:   # improved fidelity: a Python literal where JSON fails
            value = p.choice(value, p.python_literal())
        json_value = p.tag(JSON_VALUE, value)
        if LEADING_ZERO_INTEGER in p.repairs and isinstance(target, JS.IntegerSchema):
            # repair leading-zero-integer: 018956 is the integer 18956 (tried first; the grammar stays llama.cpp's)
            p.late.append(lambda: p.widen_late(json_value, LEADING_ZERO_INTEGER, lambda _: p.tag(
                ZERO_INT, p.optional(p.literal("-")) + p.chars("[0]", 1, -1) + p.chars("[0-9]", 1, -1)), first=True))
        if FREE_OBJECT_ELEMENTS in p.repairs and isinstance(target, JS.ObjectSchema) and not target.properties:
            # repair free-object-elements: the template's to_xml writes every mapping as elements, declared
            # properties or not; tried first, the JSON value after it
            p.late.append(lambda: p.widen_late(json_value, FREE_OBJECT_ELEMENTS, lambda _: p.tag(
                FREE_OBJECT, p.one_or_more(p.space() + free_element(rule_name + "-free", FREE_DEPTH))) + p.space()
                + p.peek(p.literal(close)), first=True))
        return json_value + close_tag

    def free_element(rule_name: str, depth: int) -> Any:
        # NS<key>text NS</key> or, below the depth bound, NS<key> elements NS</key> (the closing name unchecked)
        name = p.chars("[A-Za-z0-9_.-]", 1, -1)
        close_any = p.atomic(p.tag(CLOSE, p.literal(NS + "</") + name + p.literal(">")))
        opener = p.atomic(p.tag(OPEN, p.literal(NS + "<") + p.atomic(p.tag(KEY, name)) + p.literal(">")))
        text = p.tag(STRING, p.until(NS + "</")) + close_any
        if depth > 0:
            inner = p.tag(FREE_OBJECT, p.one_or_more(p.space() + free_element(f"{rule_name}-{depth}", depth - 1)))
            text = p.choice(inner + p.space() + close_any, text)
        return p.rule(f"{rule_name}-{depth}", p.tag(MEMBER, opener + text))

    def members_of(obj: Any, prefix: str, refs: frozenset = frozenset()) -> Any:
        required, optional = [], []
        for j, prop in enumerate(obj.properties):
            el = element(prop.name, prop.schema, f"{prefix}-{j}", refs)
            (required if prop.required else optional).append(el)
        return p.required_then_optional(required, optional)

    choices = []
    for spec in view.tools:
        root, refs = resolve(JS.schema_from_json_lenient(spec.parameters), frozenset())
        if isinstance(root, JS.ObjectSchema):
            body = p.tag(ARGS_TAG, members_of(root, f"tool-{spec.index}-arg", refs))
            # one whitespace node on both sides of the arguments: the arena then numbers the grammar's helper
            # rules (ac-N) as it did before the hook's tag existed
            opener = p.tool_open(p.literal(NS + '<invoke name="') + p.tool_name(p.literal(spec.name)) + p.literal('">'))
            space = p.space()
            call = p.tool(opener + space + body + space + p.tool_close(p.literal(INVOKE_END)))
        else:
            call = p.tool(p.tool_open(p.literal(NS + '<invoke name="') + p.tool_name(p.literal(spec.name))
                                      + p.literal('">')) + p.space() + p.eps() + p.space()
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
