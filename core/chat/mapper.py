"""From a chat parse tree to an OpenAI assistant message (llama.cpp ``common_chat_peg_mapper``, notes §2.2).

:func:`map_parse` walks the AST pre-order and reacts to the chat tags of :mod:`core.peg.chat`:

* ``reasoning`` / ``content`` text is concatenated (several blocks allowed); whitespace-only reasoning (e.g. a
  ``<think>\\n\\n</think>`` prefill) is dropped at the end;
* ``tool-open`` starts a pending call; ``tool-name`` names it and makes it visible (arguments start as ``{``
  unless arguments were already buffered); ``tool-id`` sets the id (surrounding quotes removed);
* ``tool-args`` whose text starts with ``{`` (JSON formats) becomes the arguments verbatim;
* tagged arguments are assembled as compact JSON: ``tool-arg-name`` adds ``"key":`` (with ``,`` between),
  ``tool-arg-string-value`` adds a JSON-escaped string (the schema declared a string), ``tool-arg-value`` adds
  the value text as JSON (Python-style ``'x'``/``True``/``None`` normalized), ``tool-arg-close`` closes an open
  string, ``tool-close`` closes open strings and braces;
* a call that never got a name is discarded.

Arguments therefore only grow as the input grows (streaming monotonicity). Tool-call ids stay "" unless the
format carries them (llama.cpp leaves them empty too; the server fills random ones).
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring as _encode_string   # what json.dumps(s, ensure_ascii=False) uses
from typing import Callable, Iterable

from ..peg import chat as T
from ..peg.engine import AstNode, ParseResult
from ..peg.nodes import VALUE_HOOK_PREFIX
from .message import AssistantMessage, ToolCall

_WS = " \t\n\v\f\r"
_WORD = re.compile(r"[A-Za-z0-9_]*")
_PY_LITERAL_HINT = re.compile(r"(?<![A-Za-z0-9_])[TFN]")
_PY_LITERALS = (("True", "true"), ("False", "false"), ("None", "null"))


def _rstrip(s: str) -> str:
    return s.rstrip(_WS)


def _trim_key(s: str) -> str:
    if s and s[0] in _WS:
        s = s[1:]
    return s.rstrip(_WS)


def encode_json_string(s: str) -> str:
    """``s`` as a JSON string (``json.dumps(s, ensure_ascii=False)``)."""
    return _encode_string(s)


def escape_json_inner(s: str) -> str:
    """``s`` JSON-escaped, without the surrounding quotes (``json.dumps(s, ensure_ascii=False)``'s escaping:
    its string encoder, called without building an encoder per string)."""
    return _encode_string(s)[1:-1]


def normalize_python_value(text: str) -> str:
    """Python-style literal text -> JSON text: single-quoted strings become double-quoted (escapes handled),
    and outside strings ``True``/``False``/``None`` (or a prefix of one, for streaming) become
    ``true``/``false``/``null``. Everything else is copied (llama.cpp ``normalize_quotes_to_json``)."""
    if "'" not in text and not _PY_LITERAL_HINT.search(text):
        return text
    out: list[str] = []
    in_single = in_double = False
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if in_single:
                if nxt == "'":
                    out.append("'")
                elif nxt == '"':
                    out.append('\\"')
                else:
                    out.append(c + nxt)
                i += 2
                continue
            if in_double:
                out.append(c + nxt)
                i += 2
                continue
            out.append(c)
            i += 1
            continue
        if c == '"':
            if in_single:
                out.append('\\"')
            else:
                in_double = not in_double
                out.append(c)
        elif c == "'":
            if in_double:
                out.append(c)
            else:
                in_single = not in_single
                out.append('"')
        elif (not in_single and not in_double and c in "TFN"
              and (i == 0 or not (text[i - 1].isascii() and (text[i - 1].isalnum() or text[i - 1] == "_")))):
            token = _WORD.match(text, i).group(0)  # type: ignore[union-attr]
            k = len(token)
            for py, js in _PY_LITERALS:
                if py[:k] == token:
                    out.append(js[:k])
                    i += k
                    break
            else:
                out.append(c)
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


_PY_SIMPLE_ESCAPES = {"n": "\\n", "t": "\\t", "r": "\\r", "b": "\\b", "f": "\\f", "\\": "\\\\", "/": "/",
                      "'": "'", '"': '\\"', "a": "\\u0007", "v": "\\u000b"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_DIGIT_RUN = re.compile(r"[0-9]+")


def _json_char(cp: int) -> str:
    """One code point inside a JSON string (a lone surrogate as its ``\\uXXXX`` escape)."""
    return "\\u%04x" % cp if 0xD800 <= cp <= 0xDFFF else escape_json_inner(chr(cp))


def python_literal_to_json(text: str, cut: bool = False) -> str:
    """Repair ``pythonic-values``: a Python literal's text as JSON text, by Python's rules rather than llama.cpp's
    quote swap (:func:`normalize_python_value`): a string's escapes are decoded (``\\'``, ``\\x41``, ``\\101``,
    an unknown ``\\d`` keeps its backslash, a backslash-newline joins lines) and its raw control characters
    escaped; an integer's leading zeros dropped (``07`` -> ``7``); a tuple ``( … )`` becomes a list; a trailing
    comma before ``]`` / ``}`` / ``)`` is dropped; ``True`` / ``False`` / ``None`` become ``true`` / ``false`` /
    ``null``; a quote inside a string that no ``,`` ``)`` ``]`` ``}`` ``:`` (or the end) follows is the string's
    own. ``cut``: the text may go on (a partial parse) — what could still change (a number that starts
    with ``0``, a comma, an escape cut short) is held back, so the result only grows as the text grows."""
    out: list[str] = []
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                k = i + 1
                while k < n and text[k] in _WS:
                    k += 1
                if k >= n and cut:
                    break
                if k >= n or text[k] in ",)]}:":
                    out.append('"')
                    quote = ""
                else:   # a quote no closer follows is the string's own (the grammar reads it so)
                    out.append('\\"' if c == '"' else c)
                i += 1
            elif c == "\\":
                if i + 1 >= n:
                    break
                e = text[i + 1]
                if e in _PY_SIMPLE_ESCAPES:
                    out.append(_PY_SIMPLE_ESCAPES[e])
                    i += 2
                elif e == "\n":
                    i += 2
                elif e in "xuU":
                    width = {"x": 2, "u": 4, "U": 8}[e]
                    digits = text[i + 2:i + 2 + width]
                    if len(digits) < width and all(d in _HEX_DIGITS for d in digits):
                        if cut or i + 2 + len(digits) >= n:
                            break
                    if len(digits) == width and all(d in _HEX_DIGITS for d in digits):
                        out.append(_json_char(min(int(digits, 16), 0x10FFFF)))
                        i += 2 + width
                    else:
                        out.append("\\\\" + escape_json_inner(e))
                        i += 2
                elif "0" <= e <= "7":
                    k = i + 1
                    while k < n and k < i + 4 and "0" <= text[k] <= "7":
                        k += 1
                    if k >= n and cut and k < i + 4:
                        break
                    out.append(_json_char(int(text[i + 1:k], 8)))
                    i = k
                else:
                    out.append("\\\\" + escape_json_inner(e))
                    i += 2
            elif c == '"':
                out.append('\\"')
                i += 1
            else:
                out.append(escape_json_inner(c) if c < " " else c)
                i += 1
            continue
        if c in "'\"":
            quote = c
            out.append('"')
            i += 1
        elif c == "(":
            out.append("[")
            i += 1
        elif c == ")":
            out.append("]")
            i += 1
        elif c == ",":
            k = i + 1
            while k < n and text[k] in _WS:
                k += 1
            if k >= n and cut:
                break
            if k < n and text[k] in "]})":
                i = k
                continue
            out.append(c)
            i += 1
        elif c.isdigit() and not (out and (out[-1][-1:].isalnum() or out[-1][-1:] in "._")):
            run = _DIGIT_RUN.match(text, i).group(0)  # type: ignore[union-attr]
            end = i + len(run)
            if run[0] == "0" and cut and end >= n:
                break
            if len(run) > 1 and run[0] == "0" and (end >= n or text[end] not in ".eE"):
                run = run.lstrip("0") or "0"
            out.append(run)
            i = end
        elif c in "TFN" and (i == 0 or not (text[i - 1].isascii() and (text[i - 1].isalnum() or text[i - 1] == "_"))):
            token = _WORD.match(text, i).group(0)  # type: ignore[union-attr]
            k = len(token)
            for py, js in _PY_LITERALS:
                if py[:k] == token:
                    out.append(js[:k])
                    break
            else:
                out.append(token)
            i += k
        else:
            out.append(c)
            i += 1
    return "".join(out)


# a double-quoted JSON string, possibly cut off at the end of the text (then it runs to the end)
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.S)


def json_brace_depth(s: str) -> int:
    """``{`` minus ``}`` outside double-quoted strings (backslash escapes honoured), as llama.cpp's mapper
    counts them (strings cut out with one regex)."""
    outside = _JSON_STRING.sub("", s)
    return outside.count("{") - outside.count("}")


class ChatMapper:
    """One mapping run (fresh state per parse). Use :func:`map_parse` unless you need to map in steps."""

    def __init__(self, source: str):
        self.source = source
        self.msg = AssistantMessage()
        self.pending: ToolCall | None = None
        self.current: ToolCall | None = None
        self.arg_count = 0
        self.quote_pending = False
        self.args_buffer = ""

    # the arguments destination: the named current call, else the buffer
    def _target_get(self) -> str:
        cur = self.current
        return cur.arguments if (cur is not None and cur.name) else self.args_buffer

    def _target_set(self, value: str) -> None:
        cur = self.current
        if cur is not None and cur.name:
            cur.arguments = value
        else:
            self.args_buffer = value

    def map_nodes(self, nodes: Iterable[AstNode]) -> bool:
        """Map every tagged node of ``nodes`` and their descendants, in pre-order (document order). Returns True
        if some node had an action (only an action changes the message; ``tool`` and the like have none)."""
        actions = ACTIONS
        acted = False
        stack = list(nodes)
        stack.reverse()
        while stack:
            node = stack.pop()
            if node.tag:
                act = actions.get(node.tag)
                if act is not None:
                    act(self, node)
                    acted = True
                    if node.tag in HOOK_TAGS:   # the hook read the subtree
                        continue
            if node.children:
                stack.extend(reversed(node.children))
        return acted

    def map(self, node: AstNode) -> None:
        """Apply one tagged AST node to the message being built; untagged or unknown tags change nothing.

        reasoning / content text is appended; ``tool-open`` starts a pending call, ``tool-name`` makes it visible
        (arguments ``"{"`` or what was buffered), ``tool-args`` sets JSON arguments, ``tool-arg-name`` /
        ``tool-arg-value`` / ``tool-arg-string-value`` / ``tool-arg-close`` append one tagged argument as JSON,
        ``tool-close`` closes a pending quote and the unclosed braces. Follows llama.cpp
        ``common_chat_peg_mapper::map``. One action per tag (:data:`ACTIONS`), looked up, not tested in turn.
        """
        act = ACTIONS.get(node.tag)
        if act is not None:
            act(self, node)

    def _reasoning(self, node: AstNode) -> None:
        self.msg.reasoning_content += self.source[node.start:node.end]

    def _content(self, node: AstNode) -> None:
        self.msg.content += self.source[node.start:node.end]

    def _tool_open(self, node: AstNode) -> None:
        self.pending = ToolCall()
        self.current = self.pending
        self.arg_count = 0
        self.args_buffer = ""
        self.quote_pending = False

    def _tool_id(self, node: AstNode) -> None:
        if self.current is not None:
            text = _rstrip(self.source[node.start:node.end])
            if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
                text = text[1:-1]
            self.current.id = text

    def _tool_name(self, node: AstNode) -> None:
        cur = self.current
        if cur is not None:
            cur.name = _rstrip(self.source[node.start:node.end])
            if self.args_buffer:
                cur.arguments = self.args_buffer
                self.args_buffer = ""
            elif not cur.arguments:
                cur.arguments = "{"
            if self.pending is not None:
                self.msg.tool_calls.append(self.pending)
                self.current = self.pending
                self.pending = None

    def _tool_args(self, node: AstNode) -> None:
        if self.current is not None:
            text = _rstrip(self.source[node.start:node.end])
            if text.startswith("{"):
                self._target_set(text)

    def _tool_args_encoded(self, node: AstNode) -> None:
        # repair double-encoded-arguments: a complete JSON string holding an object is the arguments
        if self.current is not None:
            try:
                inner = json.loads(self.source[node.start:node.end])
                ok = isinstance(inner, str) and isinstance(json.loads(inner), dict)
            except ValueError:
                ok = False
            if ok:
                self._target_set(inner.strip(_WS))

    def _tool_args_value(self, node: AstNode) -> None:
        # repair non-object-arguments: a JSON value that is no object, kept as written (settling rejects it)
        if self.current is not None:
            self._target_set(_rstrip(self.source[node.start:node.end]))

    def _tool_arg_open(self, node: AstNode) -> None:
        self.quote_pending = False

    def _tool_arg_name(self, node: AstNode) -> None:
        cur = self.current
        if cur is not None:
            key = _encode_string(_trim_key(self.source[node.start:node.end]))
            entry = ("," + key + ":") if self.arg_count > 0 else key + ":"
            self.arg_count += 1
            # (_target_get / _target_set, inlined here and below: a stream maps an argument per parsing feed)
            if cur.name:
                cur.arguments = (cur.arguments or "{") + entry
            else:
                self.args_buffer = (self.args_buffer or "{") + entry

    def _tool_arg_value(self, node: AstNode) -> None:
        if self.current is not None:
            value = self.source[node.start:node.end]
            add = normalize_python_value(value) if value else ""
            if add:
                self._target_set(self._target_get() + add)

    def _tool_arg_py_value(self, node: AstNode) -> None:
        # repair pythonic-values: the literal decoded by Python's rules; a value that runs to the end of the
        # text may still grow (a partial parse), so what could change is held back
        if self.current is not None:
            value = self.source[node.start:node.end]
            add = python_literal_to_json(value, cut=node.end >= len(self.source)) if value else ""
            if add:
                self._target_set(self._target_get() + add)

    def _tool_args_py(self, node: AstNode) -> None:
        # repair python-dict-call: the arguments' dict literal decoded by Python's rules once it is complete
        # (decoding the open literal at every feed of a stream would read it again each time)
        if self.current is not None and not node.partial:
            value = self.source[node.start:node.end]
            if value:
                self._target_set(python_literal_to_json(value))

    def _tool_arg_string_value(self, node: AstNode) -> None:
        cur = self.current
        if cur is not None:
            value = self.source[node.start:node.end]
            if not value:
                add = '"'
                self.quote_pending = True
            else:
                add = ""
                if not self.quote_pending:
                    add = '"'
                    self.quote_pending = True
                add += _encode_string(value)[1:-1]
            if cur.name:
                cur.arguments += add
            else:
                self.args_buffer += add

    def _tool_arg_close(self, node: AstNode) -> None:
        cur = self.current
        if cur is not None and self.quote_pending:
            if cur.name:
                cur.arguments += '"'
            else:
                self.args_buffer += '"'
            self.quote_pending = False

    def _tool_close(self, node: AstNode) -> None:
        cur = self.current
        if cur is not None:
            if not cur.name and self.args_buffer:
                cur.arguments = self.args_buffer
                self.args_buffer = ""
            if self.quote_pending:
                cur.arguments += '"'
                self.quote_pending = False
            depth = json_brace_depth(cur.arguments)
            if depth > 0:
                cur.arguments += "}" * depth
            if self.pending is not None:
                if cur.name:
                    self.msg.tool_calls.append(self.pending)
                self.pending = None
                # b11549: the closed call is gone, so nothing after its close may attach to it
                self.current = None

    def finish(self) -> AssistantMessage:
        """The finished :class:`AssistantMessage`: a named pending call is appended (buffered arguments and a
        pending quote completed); reasoning that is only whitespace becomes "". End of llama.cpp
        ``common_chat_peg_mapper::from_ast``.
        """
        p = self.pending
        if p is not None and p.name:
            if self.args_buffer:
                p.arguments = self.args_buffer
            if self.quote_pending and p.arguments:
                p.arguments += '"'
            self.msg.tool_calls.append(p)
            self.pending = None
        r = self.msg.reasoning_content
        if r and not r.strip(" \n\r\t"):
            self.msg.reasoning_content = ""
        return self.msg


# the action of each chat tag (a tag missing here, like ``tool`` or a rule's "", changes nothing)
ACTIONS = {
    T.REASONING: ChatMapper._reasoning,
    T.CONTENT: ChatMapper._content,
    T.TOOL_OPEN: ChatMapper._tool_open,
    T.TOOL_ID: ChatMapper._tool_id,
    T.TOOL_NAME: ChatMapper._tool_name,
    T.TOOL_ARGS: ChatMapper._tool_args,
    T.TOOL_ARGS_ENCODED: ChatMapper._tool_args_encoded,
    T.TOOL_ARGS_VALUE: ChatMapper._tool_args_value,
    T.TOOL_ARG_OPEN: ChatMapper._tool_arg_open,
    T.TOOL_ARG_NAME: ChatMapper._tool_arg_name,
    T.TOOL_ARG_VALUE: ChatMapper._tool_arg_value,
    T.TOOL_ARG_STRING_VALUE: ChatMapper._tool_arg_string_value,
    T.TOOL_ARG_PY_VALUE: ChatMapper._tool_arg_py_value,
    T.TOOL_ARGS_PY: ChatMapper._tool_args_py,
    T.TOOL_ARG_CLOSE: ChatMapper._tool_arg_close,
    T.TOOL_CLOSE: ChatMapper._tool_close,
}


TOOL_ARGS_AS = VALUE_HOOK_PREFIX
"""Prefix of the tag of arguments written in a family's own value syntax (:func:`register_args_converter`)."""

ARGS_CONVERTERS: dict[str, Callable[[str, AstNode], str]] = {}
"""Tag -> the value hook ``hook(source, node)`` that turns a tagged node (possibly cut by the end of the input)
into JSON arguments."""

HOOK_TAGS: set[str] = set()
"""The tags of :data:`ARGS_CONVERTERS`: the mapper does not go into such a node's subtree (its tags are the
family's own, read by the hook; none of them has an action), so a growing argument tree is walked once per parse,
by its hook."""


HOOK_STRINGS: dict[str, frozenset[str]] = {}
"""Tag of a value hook -> the names (a node's tag, or its rule when untagged) of the nodes below it that read a
raw string value up to its close delimiter: while such a node is the last open one, the hook's JSON ends with
:func:`escape_json_inner` of the node's text (the JSON string left open), so text the node takes only appends its
escape to the arguments — the stream's fast path (``core.chat.stream``) then appends it without a parse."""


def register_args_hook(name: str, hook: Callable[[str, AstNode], str], strings: Iterable[str] = ()) -> str:
    """A value hook on the mapper: a node tagged with the returned tag has its arguments made by
    ``hook(source, node)`` — from the node's text, or from its subtree, whose tags (the family's own, none of
    :data:`ACTIONS`) say how each value was read (MiniMax-M3's schema-typed elements). The node may be cut by
    the end of a partial parse: ``hook`` must give JSON that only grows as the text grows (a partial value
    left open), or "" for nothing yet. Registered once per module (the same ``name`` again replaces the hook):
    what differs per request goes into the parse tree, not into the tag table. ``strings``: see
    :data:`HOOK_STRINGS` (declare only names whose open value the hook shows as it grows)."""
    tag = TOOL_ARGS_AS + name
    ARGS_CONVERTERS[tag] = hook
    HOOK_TAGS.add(tag)
    HOOK_STRINGS[tag] = frozenset(strings)

    def action(m: ChatMapper, node: AstNode) -> None:
        if m.current is not None:
            js = hook(m.source, node)
            if js:
                m._target_set(js)

    ACTIONS[tag] = action
    return tag


def register_args_converter(name: str, convert: Callable[[str], str], strings: Iterable[str] = ()) -> str:
    """:func:`register_args_hook` for a hook that reads the node's text alone: ``convert(text)`` (Gemma 4's
    ``{key:<|"|>v<|"|>}`` dicts, llama.cpp's ``common_chat_peg_gemma4_mapper``)."""
    return register_args_hook(name, lambda source, node: convert(source[node.start:node.end]), strings)


def map_parse(result: ParseResult) -> AssistantMessage:
    """The assistant message for a chat parse result (any type; a FAIL result has no nodes)."""
    m = ChatMapper(result.text)
    m.map_nodes(result.nodes)
    return m.finish()


def map_nodes(nodes: Iterable[AstNode], source: str) -> AssistantMessage:
    """Like :func:`map_parse` for a node list over ``source``."""
    m = ChatMapper(source)
    m.map_nodes(nodes)
    return m.finish()
