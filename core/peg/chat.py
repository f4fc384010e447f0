"""The chat vocabulary on top of the PEG builder (llama.cpp ``common_chat_peg_builder``, parser notes §2.1-2.3).

Tags read by the mapper (:mod:`core.chat.mapper`): ``reasoning``, ``content``, ``tool-open``, ``tool-close``,
``tool-id``, ``tool-name``, ``tool-args``, ``tool-arg-open``, ``tool-arg-close``, ``tool-arg-name``,
``tool-arg-value``, ``tool-arg-string-value`` (plus the grouping tags ``tool``, ``tool-arg``,
``reasoning-block``). The open/close/id/name tags are *atomic*: they produce no node until their text is
complete, so a half-streamed tool name is never reported.

Helpers: ``prefix``, ``optspace``, ``permute``, ``tagged_arg_value`` / ``tagged_args`` (parameters between tags),
and ``standard_json_tools`` (the three JSON tool-call layouts).

Options beyond llama.cpp (off by default; :func:`builder_options` switches them on for the builders created in
its scope, which is how ``fidelity="improved"`` reaches the generator and the special handlers):
``python_literal_values`` — :meth:`ChatBuilder.tool_arg_json_value` also accepts a Python literal
(:meth:`ChatBuilder.python_literal`) after the JSON it was given (improvement ``python-literal-values``);
``whitespace_call_separators`` — parallel JSON tool calls (:meth:`ChatBuilder.standard_json_tools`) may be
separated by whitespace alone as well as by ``,`` or ``;`` (improvement ``json-call-separators``; Llama 3.x
writes ``{…}; {…}``, as vLLM's llama3_json parser accepts);
``repairs`` — the names of the :mod:`core.chat.repairs` rules that act in the grammar (a frozenset; empty
at ``llama.cpp`` fidelity): ``arguments-key-alias`` and ``json-field-order`` in the flat JSON call layout,
``double-encoded-arguments`` for JSON arguments, ``calls-inside-section-markers`` for a section start of two
markers (:func:`split_marker_pair`); each accepted variant is wrapped in a quiet ``repair:NAME``
tag (:meth:`ChatBuilder.repair`) so the parse can report where it acted (and the GBNF leaves it out).
"""

from __future__ import annotations

import contextlib
import copy
import re
import contextvars
from typing import Any, Callable, Iterable, Iterator

from ..grammar.json_schema import NUMBER_TYPES, SCALAR_TYPES, tool_parameters, value_types
from . import nodes as N
from .builder import Builder, P, Parseable

REASONING_BLOCK = "reasoning-block"
REASONING = "reasoning"
CONTENT = "content"
TOOL = "tool"
TOOL_OPEN = "tool-open"
TOOL_CLOSE = "tool-close"
TOOL_ID = "tool-id"
TOOL_NAME = "tool-name"
TOOL_ARGS = "tool-args"
TOOL_ARG = "tool-arg"
TOOL_ARG_OPEN = "tool-arg-open"
TOOL_ARG_CLOSE = "tool-arg-close"
TOOL_ARG_NAME = "tool-arg-name"
TOOL_ARG_VALUE = "tool-arg-value"
TOOL_ARG_STRING_VALUE = "tool-arg-string-value"
TOOL_ARGS_ENCODED = "tool-args-encoded"
TOOL_ARGS_VALUE = "tool-args-value"
"""Arguments written as a JSON value that is no object (repair ``non-object-arguments``): the mapper keeps the text."""
TOOL_ARG_PY_VALUE = "tool-arg-py-value"
"""A Python literal as Python itself writes it (repair ``pythonic-values``): the mapper decodes it to JSON with
Python's own rules (:func:`core.chat.mapper.python_literal_to_json`), not llama.cpp's quote swap."""
TOOL_ARGS_PY = "tool-args-py"
"""A call's whole arguments written as a Python dict literal (repair ``python-dict-call``): the mapper decodes it to
JSON with Python's own rules, as :data:`TOOL_ARG_PY_VALUE`."""
#: tags that show nothing in the message by themselves (grouping, or a call/argument not yet named)
QUIET_TAGS = frozenset({REASONING_BLOCK, TOOL, TOOL_OPEN, TOOL_ARG, TOOL_ARG_OPEN})

MAX_PERMUTE = 6
PY_CHUNK = 64   # repair python-dict-call: plain characters per item of a string (a stream resumes after them)

_OPTIONS: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("chat_builder_options", default={})
BUILDER_OPTIONS = ("python_literal_values", "whitespace_call_separators", "repairs")
REPAIR_TAG_PREFIX = "repair:"
IGNORED = "ignored"
"""Tag of text a format reads and drops, as llama.cpp does (after the last message): quiet, no mapper action."""
"""Names of the :class:`ChatBuilder` options (see the module doc)."""


@contextlib.contextmanager
def builder_options(**options: Any) -> Iterator[None]:
    """Within the ``with`` block, new :class:`ChatBuilder` instances get ``options`` (names from
    :data:`BUILDER_OPTIONS`; an unknown name raises ``TypeError``). Context-local (threads and async tasks
    do not see each other's options)."""
    unknown = sorted(set(options) - set(BUILDER_OPTIONS))
    if unknown:
        raise TypeError(f"unknown chat builder option(s) {', '.join(unknown)}; known: {', '.join(BUILDER_OPTIONS)}")
    token = _OPTIONS.set({**_OPTIONS.get(), **options})
    try:
        yield
    finally:
        _OPTIONS.reset(token)


def current_repairs() -> frozenset[str]:
    """The ``repairs`` option of the enclosing :func:`builder_options` (for hand-written handlers that capture
    it when they are built)."""
    return frozenset(_OPTIONS.get().get("repairs", ()))


def repair_nodes(nodes: Iterable[Any], offset: int = 0, text: str = ""
                 ) -> tuple[list[tuple[str, int, int]], list[tuple[int, int]]]:
    """The ``repair:NAME`` nodes of the parse tree ``nodes`` of ``text`` (the parsed text) in one walk, positions
    shifted by ``-offset`` (the generation prompt's length, so spans index the model output), as ``(fired,
    lead_ins)``:

    - ``fired``: ``(name, start, end)`` of every repair node that acted, in pre-order;
    - ``lead_ins``: ``(start, end)`` of the outermost repair nodes the end of the text cut before anything was read
      into the message from their start on (no call name, no text of a field; the parse waits there for more of a
      call or of the variant): the lead-in of a call written without markers (Gemma's ``call:b`` without its opener
      token or ``<|tool_call>:call:`` with a stray colon, the ``{"name":"get_w`` of a JSON call without markers),
      which only the variant's own literals read (and white space before them). Such a variant has not acted: it is
      not in ``fired``."""
    nodes = list(nodes)
    lead_in = _lead_in_from(nodes, text)
    fired: list[tuple[str, int, int]] = []
    lead_ins: list[tuple[int, int]] = []
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        tag = node.tag
        if tag and tag.startswith(REPAIR_TAG_PREFIX):
            span = (max(node.start - offset, 0), max(node.end - offset, 0))
            if node.start >= lead_in:   # (its children start there too: none of them acted)
                lead_ins.append(span)
                continue
            fired.append((tag[len(REPAIR_TAG_PREFIX):], *span))
        if node.children:
            stack.extend(reversed(node.children))
    return fired, lead_ins


def _lead_in_from(nodes: list[Any], text: str) -> float:
    """Where the text after the last node that reads into the message (:func:`_reads_message`) starts when the
    parse tree ``nodes`` of ``text`` waits at the end of it for more of a call or a repair's variant (a grouping or
    ``repair:NAME`` node cut by the end: partial); else infinity. A field's text that reaches the end (an ``until``
    that may go on) is no such wait, and reads."""
    stack = list(nodes)
    waits = False
    read = 0
    while stack:
        n = stack.pop()
        tag = n.tag
        if n.partial and tag and (tag in QUIET_TAGS or tag.startswith(REPAIR_TAG_PREFIX)):
            waits = True
        if _reads_message(n, text):
            read = max(read, n.end)
        if n.children:
            stack.extend(n.children)
    return read if waits else float("inf")


def _reads_message(node: Any, text: str) -> bool:
    """Whether ``node``'s own tag puts something into the message: a call's name or id, an argument over at least
    one character, content or reasoning that is more than white space (of ``text``, when given: a variant may read
    the white space before a call as content). Grouping, markup and repair tags do not."""
    tag = node.tag
    if tag in (CONTENT, REASONING) and text:
        return bool(text[node.start:node.end].strip())
    return tag in (TOOL_NAME, TOOL_ID) or bool(
        tag and node.end > node.start and tag not in QUIET_TAGS and tag not in (TOOL_CLOSE, TOOL_ARG_CLOSE, IGNORED)
        and not tag.startswith(REPAIR_TAG_PREFIX))


def function_tools(tools: Any) -> list[dict]:
    """The ``function`` objects of OpenAI tools that have ``type == "function"`` (others are skipped)."""
    return [fn for _, fn in indexed_function_tools(tools)]


def indexed_function_tools(tools: Any) -> list[tuple[int, dict]]:
    """``(index, function)`` of the function tools, ``index`` the tool's position in ``tools`` (skipped tools
    keep their slot), as llama.cpp b11549 ``foreach_function`` numbers them: grammar rules are named by these
    indexes (``tool-<i>``, ``tool-<i>-arg-<j>``), so two names that sanitize alike cannot share a rule."""
    out = []
    for i, t in enumerate(tools or []):
        if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict):
            out.append((i, t["function"]))
    return out


def _split_key(key: str) -> tuple[str, str]:
    if "." not in key:
        return "", key
    a, b = key.split(".", 1)
    return a, b


def split_marker_pair(marker: str) -> tuple[str, str] | None:
    """``(first, second)`` when ``marker`` (trimmed) is two adjacent tags ``<…><…>`` (Llama 4's section start
    ``<|python_start|><|python_end|>``), else None. Used by repair ``calls-inside-section-markers``."""
    m = re.fullmatch(r"\s*(<[^<>\s]+>)\s*(<[^<>\s]+>)\s*", marker or "")
    return (m.group(1), m.group(2)) if m else None


def _tagger(tag: str, atomic: bool = False) -> Any:
    """A builder method tagging its parser ``tag`` (llama.cpp ``common_chat_peg_builder``'s method of that name);
    ``atomic``: also wrapped in ``atomic`` (no AST node while half-matched)."""
    if atomic:
        def method(self: "ChatBuilder", p: Parseable) -> P:
            return self.atomic(self.tag(tag, p))
    else:
        def method(self: "ChatBuilder", p: Parseable) -> P:
            return self.tag(tag, p)
    method.__doc__ = f"``p`` tagged ``{tag}``" + (", atomic" if atomic else "") + "."
    return method


class ChatBuilder(Builder):
    """:class:`~core.peg.builder.Builder` plus the chat tags and tool-call helpers.

    ``python_literal_values`` / ``whitespace_call_separators``: see the module doc; ``None`` takes the
    value set by :func:`builder_options` (default False, llama.cpp's behaviour).
    """

    def __init__(self, *, python_literal_values: bool | None = None,
                 whitespace_call_separators: bool | None = None, repairs: Iterable[str] | None = None) -> None:
        super().__init__()
        self.arena.quiet_tags = QUIET_TAGS
        self.late: list[Callable[[], None]] = []   # run by build() before it resolves the tree (widen_late)
        opts = _OPTIONS.get()
        self.python_literal_values = bool(opts.get("python_literal_values", False)
                                          if python_literal_values is None else python_literal_values)
        self.whitespace_call_separators = bool(opts.get("whitespace_call_separators", False)
                                               if whitespace_call_separators is None else whitespace_call_separators)
        self.repairs: frozenset[str] = frozenset(opts.get("repairs", ()) if repairs is None else repairs)
        self.last_json_calls: P | None = None

    def json_tool_args(self, index: int, params: Any, leading_ws: bool = False) -> P:
        """A call's JSON arguments (``tool-args`` over the schema-typed JSON value of rule
        ``tool-INDEX-schema``, INDEX the tool's position in the request); with repair
        ``double-encoded-arguments`` also a JSON string holding them
        (:meth:`tool_args_encoded`), with ``leading_ws`` and repair ``tag-whitespace`` also whitespace
        before them."""
        args = self.tool_args(self.schema(self.json(), f"tool-{index}-schema", params))
        self.value_arguments(args, lambda: self.negate("{"))
        if "double-encoded-arguments" in self.repairs:
            # the string alternative first: json() would also take the string (and map it to nothing)
            encoded = self.tool_args_encoded(self.json_string())
            self.value_arguments(encoded, lambda: self.negate(self.literal('"') + self.space() + "{"),
                                 self.json_string)
            args = self.choice(self.repair("double-encoded-arguments", encoded), args)
        if leading_ws and "tag-whitespace" in self.repairs:
            args = self.optional(self.repair("tag-whitespace", self.chars("[ \t\r\n]", 1, -1))) + args
        return args

    def value_arguments(self, args: P, not_object: Callable[[], P], value: Callable[[], P] | None = None) -> None:
        """Repair ``non-object-arguments``: the JSON ``args`` node (``tool-args``, or ``tool-args-encoded``) also
        reads, first, a JSON value (``value()``, any by default) that ``not_object()`` (a zero-width test) says is
        no object, tagged ``tool-args-value`` (:data:`TOOL_ARGS_VALUE`): its text is the arguments as written,
        where the mapper would leave ``{}`` and drop it, so the call's settling sees arguments that are no object.
        Both are made once the tree is built (widened late: the grammar stays the template's)."""
        if "non-object-arguments" in self.repairs:
            self.late.append(lambda: self.widen_late(
                args, "non-object-arguments",
                lambda orig: not_object() + self.tag(TOOL_ARGS_VALUE, (value or self.json)()), first=True))

    def flexible(self, text: str, name: str = "tag-whitespace") -> P:
        """``text`` (a marker with line breaks), or — when repair ``name`` is on — the same marker with any
        whitespace (or none) where it has line breaks, the variant tagged ``repair:NAME``. The exact text is
        tried first, so output that follows the template parses as before."""
        exact = self.literal(text)
        pieces = [x for x in text.split("\n") if x]
        if name not in self.repairs or "\n" not in text or not pieces:
            return exact
        loose = self.space() if text.startswith("\n") else self.eps()
        for i, piece in enumerate(pieces):
            loose = loose + (self.space() if i else self.eps()) + self.literal(piece)
        if text.endswith("\n"):
            loose = loose + self.space()
        return self.choice(exact, self.repair(name, loose))

    def repair(self, name: str, p: Parseable) -> P:
        """``p`` tagged ``repair:NAME``: a variant accepted by repair ``name`` (:mod:`core.chat.repairs`). The
        tag is quiet (shows nothing by itself; the mapper ignores it); :func:`repair_nodes` finds it."""
        tag = REPAIR_TAG_PREFIX + name
        self.arena.quiet_tags = self.arena.quiet_tags | {tag}
        return self.tag(tag, p)

    def widen_late(self, target: P, name: str, variant: Callable[[P], Parseable], first: bool = False) -> None:
        """Make node ``target`` (already part of the tree) also accept repair ``name``'s ``variant(original)``
        (``original``: a handle on what ``target`` parsed until now), tried before it when ``first``.

        Call it once the tree is built: ``target`` keeps its id and becomes a choice, every node the variant
        needs is created after all the others, so the grammar is byte-identical to the one without the repair
        (rule numbers follow node ids; the choice counts as its one non-repair alternative). ``target`` must not
        be an ``until`` / ``ac`` node (their rules are numbered by their own id)."""
        arena = self.arena
        old = arena.nodes[target.id]
        if isinstance(old, (N.Until, N.Ac)):
            raise TypeError("widen_late: an until/ac node is named by its id; widen its parent instead")
        moved = copy.copy(old)
        moved_id = arena.add(moved)
        alt = self.repair(name, variant(P(moved_id, self)))
        items = [alt.id, moved_id] if first else [moved_id, alt.id]
        choice = N.Choice(items=items)
        choice.id = target.id
        arena.nodes[target.id] = choice
        arena.repair_choices.add(target.id)
        arena._compiled = None

    def ignored(self, p: Parseable) -> P:
        """``p`` read and dropped (:data:`IGNORED`; outside the grammar): text llama.cpp's parser reads past
        without a message part, e.g. a turn's end token and what follows the last message."""
        self.arena.quiet_tags = self.arena.quiet_tags | {IGNORED}
        return self.gbnf(self.tag(IGNORED, p), "")

    # -- tags -----------------------------------------------------------------------------------------------
    reasoning_block = _tagger(REASONING_BLOCK)
    reasoning = _tagger(REASONING)
    content = _tagger(CONTENT)
    tool = _tagger(TOOL)
    tool_args = _tagger(TOOL_ARGS)
    tool_arg = _tagger(TOOL_ARG)
    tool_arg_value = _tagger(TOOL_ARG_VALUE)
    tool_arg_string_value = _tagger(TOOL_ARG_STRING_VALUE)
    tool_open = _tagger(TOOL_OPEN, atomic=True)
    tool_close = _tagger(TOOL_CLOSE, atomic=True)
    tool_id = _tagger(TOOL_ID, atomic=True)
    tool_name = _tagger(TOOL_NAME, atomic=True)
    tool_arg_open = _tagger(TOOL_ARG_OPEN, atomic=True)
    tool_arg_close = _tagger(TOOL_ARG_CLOSE, atomic=True)
    tool_arg_name = _tagger(TOOL_ARG_NAME, atomic=True)

    def tool_args_encoded(self, p: Parseable) -> P:
        """``p`` (a JSON string) tagged ``tool-args-encoded`` (:data:`TOOL_ARGS_ENCODED`): arguments written as a
        JSON string holding the object (repair ``double-encoded-arguments``); the mapper decodes it once it is
        complete."""
        return self.tag(TOOL_ARGS_ENCODED, p)

    def tool_arg_json_value(self, p: Parseable) -> P:
        """``tool-arg-value`` around a JSON value parser ``p``; with ``python_literal_values``, a Python literal
        (:meth:`python_literal`) is accepted where ``p`` fails (the mapper turns it into JSON text)."""
        if self.python_literal_values:
            p = self.choice(p, self.python_literal())
        return self.tag(TOOL_ARG_VALUE, p)

    def python_literal(self) -> P:
        """A Python literal as Jinja prints a value decoded from JSON: dict ``{'k': v, ...}``, list ``[...]``,
        quoted string (single or double), number, ``True`` / ``False`` / ``None`` (JSON ``true`` / ``false`` /
        ``null`` too, for mixed output). Whitespace only inside brackets and around ``,`` / ``:`` — never
        after the value, so a delimiter that starts with whitespace still matches."""
        def body() -> P:
            ws = self.space()
            v = self.ref("python-literal")
            member = self.seq(self.python_string(), ws, ":", ws, v)

            def items(opener: str, item: Parseable, closer: str) -> P:
                more = self.zero_or_more(self.seq(ws, ",", ws, item))
                return self.seq(opener, ws, self.choice(closer, self.seq(item, more, ws, closer)))

            return self.choice(items("{", member, "}"), items("[", v, "]"),
                               self.python_string(), self.json_number(),
                               self.choice("True", "False", "None", "true", "false", "null"))
        return self.rule("python-literal", body)

    def tool_arg_py_value(self, p: Parseable) -> P:
        """``p`` tagged ``tool-arg-py-value`` (:data:`TOOL_ARG_PY_VALUE`): a Python literal the mapper decodes by
        Python's rules (repair ``pythonic-values``)."""
        return self.tag(TOOL_ARG_PY_VALUE, p)

    def python_lenient_string(self, chunk: int = -1) -> P:
        """Repair ``pythonic-values``: a Python string literal as Python reads it — single or double quotes, any
        backslash escape (``\\'``, ``\\x41``, an unknown ``\\d``), raw line breaks and other control
        characters inside — and, as vLLM's LFM2 parser, an unescaped quote of its own kind that is not followed
        (after whitespace) by ``,`` ``)`` ``]`` ``}`` or ``:``: it cannot close the string, so it is text.
        ``chunk``: the longest run of plain characters one item of the string reads (-1: any), so that a stream
        resumes a long string after its settled runs instead of reading it again at every feed."""
        def body() -> P:
            def quoted(q: str) -> P:
                plain = self.chars("[^" + q + "\\\\]", 1, chunk)
                # a quote that no closer follows is the string's own (command='sed -n '1,9p' f.py')
                inner = self.seq(q, self.negate(self.seq(self.space(), self.one("[,)\\]}:]"))))
                return self.seq(q, self.zero_or_more(self.choice(plain, self.seq("\\", self.any()), inner)), q)
            return self.choice(quoted("'"), quoted('"'))
        return self.rule("py-lenient-string" if chunk == -1 else f"py-lenient-string-{chunk}", body)

    def python_json_safe_string(self) -> P:
        """A quoted string (either quote) that llama.cpp's quote swap turns into a valid JSON string: JSON
        escapes only, no raw control character (repair ``pythonic-values`` takes the others)."""
        def body() -> P:
            def quoted(q: str) -> P:
                plain = self.chars("[^" + q + "\\\\\\x00-\\x1f]", 1, -1)
                esc = self.seq("\\", self.choice(self.one("[" + q + "\\\\/bfnrt]"),
                                                 self.seq("u", self.chars("[0-9a-fA-F]", 4, 4))))
                return self.seq(q, self.zero_or_more(self.choice(plain, esc)), q)
            return self.choice(quoted('"'), quoted("'"))
        return self.rule("py-json-safe-string", body)

    def python_safe_literal(self) -> P:
        """:meth:`python_literal` whose strings are :meth:`python_json_safe_string` (repair ``pythonic-values``:
        the strict reading, which llama.cpp's quote swap maps to valid JSON; other values go to the lenient one)."""
        def body() -> P:
            ws = self.space()
            v = self.ref("py-safe-literal")
            member = self.seq(self.python_json_safe_string(), ws, ":", ws, v)

            def items(opener: str, item: Parseable, closer: str) -> P:
                more = self.zero_or_more(self.seq(ws, ",", ws, item))
                return self.seq(opener, ws, self.choice(closer, self.seq(item, more, ws, closer)))

            return self.choice(items("{", member, "}"), items("[", v, "]"),
                               self.python_json_safe_string(), self.json_number(),
                               self.choice("True", "False", "None", "true", "false", "null"))
        return self.rule("py-safe-literal", body)

    def python_lenient_literal(self, chunk: int = -1) -> P:
        """Repair ``pythonic-values``: a Python literal as Python writes it (vLLM's pythonic / LFM2 parsers read
        it with ``ast``): :meth:`python_lenient_string`, an integer with leading zeros (``07``), a JSON number,
        ``True`` / ``False`` / ``None`` and the JSON names, dicts, lists and tuples whose items may end with a
        comma. Read by :func:`core.chat.mapper.python_literal_to_json` (tag ``tool-arg-py-value``). ``chunk``: as
        :meth:`python_lenient_string`'s."""
        name = "py-lenient-literal" if chunk == -1 else f"py-lenient-literal-{chunk}"

        def body() -> P:
            ws = self.space()
            v = self.ref(name)
            number = self.seq(self.optional("-"), self.chars("[0-9]", 1, -1),
                              self.optional(self.seq(".", self.chars("[0-9]", 1, -1))),
                              self.optional(self.seq(self.one("[eE]"), self.optional(self.one("[+-]")),
                                                     self.chars("[0-9]", 1, -1))),
                              self.negate(self.one("[0-9.eE+-]")))
            member = self.seq(self.choice(self.python_lenient_string(chunk), number), ws, ":", ws, v)

            def items(opener: str, item: Parseable, closer: str) -> P:
                more = self.zero_or_more(self.seq(ws, ",", ws, item))
                return self.seq(opener, ws, self.choice(closer, self.seq(item, more, ws, self.optional(","), ws,
                                                                         closer)))

            return self.choice(items("{", member, "}"), items("[", v, "]"), items("(", v, ")"),
                               self.python_lenient_string(chunk), number,
                               self.choice("True", "False", "None", "true", "false", "null"))
        return self.rule(name, body)

    def quoted_number(self, close: Parseable) -> P:
        """Repair ``quoted-number``'s reading of a tagged value: a JSON number in string quotes (``"42"``), taken as
        the number, then ``close``; atomic, so a stream shows it once it is whole."""
        return self.atomic(self.literal('"') + self.tool_arg_json_value(self.json_number()) + self.literal('"')
                           + close)

    def quoted_number_first(self, value: P, schema: Any, close: Parseable) -> P:
        """Repair ``quoted-number`` for a tagged value of a number-only ``schema``: a number in string quotes read
        first (:meth:`quoted_number`, then ``close``), before ``value`` (whose JSON reading takes it as a string);
        ``value`` itself for any other schema."""
        types = value_types(schema)
        if not types or not types <= NUMBER_TYPES:
            return value
        return self.choice(self.repair("quoted-number", self.quoted_number(close)), value)

    def tagged_arg_value(self, rule_name: str, schema: Any, arg_string: Parseable, close: Parseable, *,
                         mistyped: bool = False, quoted: bool = False) -> P:
        """The value of one parameter written between tags (``<parameter=K>V</parameter>``,
        ``<arg_value>V</arg_value>``), by the JSON types its ``schema`` node allows: raw text (``arg_string``, which
        ends with its own close) for a string-only parameter; JSON checked against the schema, then ``close``, for one
        that cannot be a string; for one that may be either, the JSON value tried first (atomic) and the text after
        it (the string alternative takes any text, so only the parser needs the JSON ones). ``mistyped``: repair
        ``mistyped-value-as-string`` — a scalar-typed value that is no such JSON is kept as text. ``quoted``: repair
        ``quoted-number`` — for a number-only parameter, a number in string quotes is that number."""
        types = value_types(schema)
        if "string" not in types:
            value = self.tool_arg_json_value(self.schema(self.json(), rule_name + "-schema", schema)) + close
            if mistyped and types and types <= SCALAR_TYPES:
                # whole typed value first (atomic: its type is only known at its end), else the text as a string
                value = self.choice(self.atomic(value), self.repair("mistyped-value-as-string", arg_string))
            if quoted:
                value = self.quoted_number_first(value, schema, close)
            return value
        if types == {"string"}:
            return arg_string  # type: ignore[return-value]
        alts = []
        if "object" in types:
            alts.append(self.json_object())
        if "array" in types:
            alts.append(self.json_array())
        if "number" in types or "integer" in types:
            alts.append(self.json_number())
        if "boolean" in types:
            alts.append(self.json_bool())
        if "null" in types:
            alts.append(self.json_null())
        typed: P = self.choice(*alts)
        if self.python_literal_values:
            # improvement python-literal-values, for a value that may be a string: only a literal of a type the
            # schema allows besides string (a dict, a list, True / False, None; a number is JSON's already), by
            # its first character, so a number for a string-or-null parameter stays the string it is
            starts = "".join(c for t, c in (("object", "{"), ("array", "\\["), ("boolean", "TF"), ("null", "N"))
                             if t in types)
            if starts:
                typed = self.choice(typed, self.peek(self.one(f"[{starts}]")) + self.python_literal())
        return self.gbnf(self.choice(self.atomic(self.tag(TOOL_ARG_VALUE, typed) + close), arg_string),
                         "xml-arg-string")

    def tagged_args(self, idx: int, required: list[Parseable], optional: list[Parseable],
                    any_order: Callable[..., Any] | None = None) -> P:
        """Arguments of function ``idx``: the required ones in any order (``permute``), then optional ones in any
        order. ``any_order``: repair ``argument-order`` (:func:`core.chat.repairs.any_order_args`), tried after."""
        args = self.permute(f"tool-{idx}-args", required)
        if optional:
            args = args + self.zero_or_more(self.choice(*optional))
            if any_order is not None:
                alt = any_order(self, f"tool-{idx}-any-order", required, optional)
                if alt is not None:
                    args = self.choice(args, alt)
        return args

    # -- helpers --------------------------------------------------------------------------------------------
    def prefix(self, s: str, delimiter: str = "") -> P:
        """``s`` up to the first ``delimiter`` (all of ``s`` if absent or no delimiter); ``eps`` for empty ``s``."""
        if not s:
            return self.eps()
        if not delimiter:
            return self.literal(s)
        i = s.find(delimiter)
        return self.literal(s if i < 0 else s[:i])

    def optspace(self, tag: str) -> P:
        """``tag`` with each leading and trailing whitespace character optional."""
        i = 0
        while i < len(tag) and tag[i].isspace() and tag[i] in " \t\n\v\f\r":
            i += 1
        j = len(tag)
        while j > i and tag[j - 1] in " \t\n\v\f\r":
            j -= 1
        if i == len(tag):
            j = len(tag)
        p = self.eps()
        for c in tag[:i]:
            p = p + self.optional(c)
        p = p + self.literal(tag[i:j])
        for c in tag[j:]:
            p = p + self.optional(c)
        return p

    def permute(self, rule_prefix: str, parsers: list[Parseable]) -> P:
        """Every parser exactly once, in any order (up to ``MAX_PERMUTE``; beyond that, in the given order)."""
        if not parsers:
            return self.eps()
        hs = [self.lift(x) for x in parsers]
        if len(hs) == 1 or len(hs) > MAX_PERMUTE:
            return self.seq(*hs)
        cache: dict[int, P] = {}

        def remaining_of(mask: int) -> P:
            if mask == 0:
                return self.eps()
            if mask in cache:
                return cache[mask]
            alts = [hs[i] + remaining_of(mask & ~(1 << i)) for i in range(len(hs)) if mask & (1 << i)]
            r = self.rule(f"{rule_prefix}-{mask}", self.choice(*alts))
            cache[mask] = r
            return r

        return remaining_of((1 << len(hs)) - 1)

    def required_then_optional(self, required: list[Parseable], optional: list[Parseable]) -> P:
        """Tool arguments as llama.cpp's tagged-argument builders lay them out: the ``required`` ones in the
        given order with whitespace between them, then any of the ``optional`` ones (each after whitespace), any
        number of times. Serves the auto-parser's tagged arguments and the DeepSeek / MiniMax-M3 handlers."""
        seq = self.eps()
        for i, r in enumerate(required):
            if i > 0:
                seq = seq + self.space()
            seq = seq + r
        if optional:
            seq = seq + self.repeat(self.space() + self.choice(*optional), 0, -1)
        return seq

    # -- JSON tool calls ------------------------------------------------------------------------------------
    def _id_field(self, key: str | P, allow_number: bool = True) -> P:
        """A call object's id member ``"KEY": "…"`` (or a number, when ``allow_number``), its value the call's id;
        ``key`` a node to read the key's text with something other than a literal."""
        ws = self.space
        value = '"' + self.tool_id(self.string_content('"')) + '"'
        if allow_number:
            value = self.choice(value, self.tool_id(self.json_number()))
        return self.atomic('"' + key + '"' + ws() + ":" + ws() + value)

    def _object_id(self) -> P:
        """Repair ``call-object-id``'s member ``"id": "…"`` (or a number), its value the call's id."""
        return self._id_field(self.chars("[i]", 1, 1) + self.chars("[d]", 1, 1))

    def _json_tools_function_is_key(self, funcs: list[tuple[int, dict]], args_key: str, eff_args_key: str,
                                    call_id_key: str,
                                    gen_id_key: str) -> P:
        ws = self.space
        choices = []
        for idx, fn in funcs:
            name = fn["name"]
            params = tool_parameters(fn)
            inner: list[P] = []
            if call_id_key:
                idp = self.atomic('"' + call_id_key + '"' + ws() + ":" + ws() + '"'
                                  + self.tool_id(self.string_content('"')) + '"')
                inner.append(self.optional(idp + ws() + self.optional("," + ws())))
            if gen_id_key:
                inner.append(self.optional(self._id_field(gen_id_key) + ws() + self.optional("," + ws())))
            schema_args = self.tool_args(self.schema(self.json(), f"tool-{idx}-schema", params))
            if not args_key:
                inner.append(schema_args)
            else:
                inner.append('"' + eff_args_key + '"' + ws() + ":" + ws() + schema_args)
            if not args_key and len(inner) == 1:
                inner_obj = inner[0]
            else:
                inner_obj = self.literal("{") + ws()
                for i, f in enumerate(inner):
                    inner_obj = inner_obj + f
                    if i < len(inner) - 1:
                        inner_obj = inner_obj + ws()
                inner_obj = inner_obj + ws() + "}"
            body = self.tool(self.tool_open("{") + ws() + '"' + self.tool_name(self.literal(name)) + '"' + ws()
                             + ":" + ws() + inner_obj + ws() + self.tool_close("}"))
            choices.append(self.rule(f"tool-{idx}", body))
        return self.choice(*choices)

    def _json_tools_nested(self, funcs: list[tuple[int, dict]], name_key: str, args_key: str, call_id_key: str,
                           gen_id_key: str) -> P:
        ws = self.space
        name_spec, args_spec = _split_key(name_key), _split_key(args_key)
        nested_prefix = name_spec[0] or args_spec[0]
        nested_name = name_spec[1] if name_spec[0] else name_key
        nested_args = args_spec[1] if args_spec[0] else args_key
        choices = []
        for idx, fn in funcs:
            name = fn["name"]
            params = tool_parameters(fn)
            n_part = '"' + nested_name + '"' + ws() + ":" + ws() + self.atomic('"' + self.tool_name(self.literal(name))
                                                                              + '"')
            a_part = '"' + nested_args + '"' + ws() + ":" + ws() + self.tool_args(
                self.schema(self.json(), f"tool-{idx}-schema", params))
            nested_obj = "{" + ws() + n_part + ws() + "," + ws() + a_part + ws() + "}"
            body = self.tool_open("{") + ws()
            if call_id_key and not _split_key(call_id_key)[0]:
                idp = self.atomic('"' + call_id_key + '"' + ws() + ":" + ws() + '"'
                                  + self.tool_id(self.string_content('"')) + '"')
                body = body + self.optional(idp + ws() + "," + ws())
            if gen_id_key and not _split_key(gen_id_key)[0]:
                body = body + self.optional(self._id_field(gen_id_key) + ws() + "," + ws())
            body = body + ('"' + nested_prefix + '"') + ws() + ":" + ws() + nested_obj + ws() + self.tool_close("}")
            choices.append(self.rule(f"tool-{idx}", self.tool(body)))
        return self.choice(*choices)

    def flat_json_call(self, tools: Any, name_key: str = "name", args_key: str = "arguments",
                       rule_prefix: str = "json-tool-") -> P:
        """One flat JSON call ``{"NAME_KEY": "name", "ARGS_KEY": {...}}`` of a known function tool (a choice over
        ``tools``), each in a rule ``RULE_PREFIX + name`` (so a format with its own ``tool-NAME`` rules can use
        it beside them). The flat-layout repairs in force apply. ``eps`` when there are no function tools."""
        funcs = indexed_function_tools(tools)
        if not funcs:
            return self.eps()
        return self._json_tools_flat(funcs, name_key, args_key, "", "", [name_key, args_key], False, rule_prefix)

    def _json_tools_flat(self, funcs: list[tuple[int, dict]], name_key: str, args_key: str, call_id_key: str,
                         gen_id_key: str,
                         order: list[str], openai_wrapper: bool, rule_prefix: str = "tool-") -> P:
        ws = self.space
        choices = []
        for idx, fn in funcs:
            name = fn["name"]
            params = tool_parameters(fn)
            args_value = self.json_tool_args(idx, params)
            args_name = self.literal('"' + args_key + '"')
            alias = {"arguments": "parameters", "parameters": "arguments"}.get(args_key)
            if alias and "arguments-key-alias" in self.repairs:
                args_name = self.choice(args_name, self.repair("arguments-key-alias", self.literal('"' + alias + '"')))
            fields: list[tuple[P, str]] = [
                (self.literal('"' + name_key + '"') + ws() + ":" + ws()
                 + self.atomic('"' + self.tool_name(self.literal(name)) + '"'), name_key),
                (args_name + ws() + ":" + ws() + args_value, args_key),
            ]
            if call_id_key:
                fields.append((self.optional(self._id_field(call_id_key)), call_id_key))
            if gen_id_key:
                fields.append((self.optional(self._id_field(gen_id_key)), gen_id_key))

            def rank(key: str) -> int:
                return order.index(key) if key in order else len(order)

            fields.sort(key=lambda f: rank(f[1]))
            body = self.tool_open("{") + ws()
            if openai_wrapper:
                body = body + self.optional(self.literal('"type"') + ws() + ":" + ws() + '"function"' + ws() + ","
                                            + ws())

            def joined(items: list[P]) -> P:
                out = items[0]
                for f in items[1:]:
                    out = out + ws() + "," + ws() + f
                return out
            in_order = joined([f for f, _ in fields])
            if "json-field-order" in self.repairs and len(fields) == 2:
                in_order = self.choice(in_order, self.repair("json-field-order", joined([fields[1][0], fields[0][0]])))
            id_keys = [k for k in (call_id_key, gen_id_key) if k]
            if "call-id-optional" in self.repairs and id_keys:
                # repair call-id-optional: the id field(s) the template renders left out with their comma, the
                # name and the arguments in either order (Mistral v0.3 writes [{"name": …, "arguments": …}])
                two = [f for f, k in fields if k not in id_keys]
                ids = self.eps()
                for k in id_keys:
                    ids = ids + self.optional(ws() + "," + ws() + self._id_field(k))
                in_order = self.choice(in_order, self.repair("call-id-optional", self.choice(
                    joined(two) + ids, joined(list(reversed(two))) + ids)))
            body = body + in_order + ws() + self.tool_close("}")
            tool = self.tool(body)
            if "call-object-id" in self.repairs and not id_keys:
                # repair call-object-id: an "id" member before or after the fields the template writes is the
                # call's id (widened once the tree is built, tried after the template's object: grammar unchanged)
                # (the key is no literal: as markup, the character audit would take an "id" key inside the
                # arguments for call syntax; it reads the member as the call's id field)
                self.late.append(lambda tool=tool, fields=in_order: self.widen_late(tool, "call-object-id", lambda _: (
                    self.tool(self.tool_open("{") + ws() + self.choice(
                        self._object_id() + ws() + "," + ws() + fields,
                        fields + ws() + "," + ws() + self._object_id()) + ws() + self.tool_close("}")))))
            if "python-dict-call" in self.repairs and not id_keys and not openai_wrapper:
                # repair python-dict-call: the call object written as a Python dict literal ({'name': 'f',
                # 'arguments': {...}}), either order; widened once the tree is built (grammar unchanged)
                self.late.append(lambda tool=tool, name=name, keys=(name_key, args_key): self.widen_late(
                    tool, "python-dict-call", lambda _: self.python_dict_call(name, *keys)))
            choices.append(self.rule(f"{rule_prefix}{idx}", tool))
        return self.choice(*choices)

    def python_dict_call(self, name: str, name_key: str, args_key: str) -> P:
        """Repair ``python-dict-call``: ``{'NAME_KEY': 'name', 'ARGS_KEY': {...}}`` (either order) with the
        arguments a Python dict literal (:meth:`python_lenient_literal`, tagged :data:`TOOL_ARGS_PY`)."""
        ws = self.space
        name_field = (self.literal("'" + name_key + "'") + ws() + ":" + ws()
                      + self.atomic("'" + self.tool_name(self.literal(name)) + "'"))
        args_field = (self.literal("'" + args_key + "'") + ws() + ":" + ws()
                      + self.tag(TOOL_ARGS_PY, self.peek(self.literal("{")) + self.python_lenient_literal(PY_CHUNK)))
        fields = self.choice(name_field + ws() + "," + ws() + args_field,
                             args_field + ws() + "," + ws() + name_field)
        return self.tool(self.tool_open("{") + ws() + fields + ws() + self.tool_close("}"))

    def standard_json_tools(self, section_start: str, section_end: str, tools: Any, parallel: bool, force: bool,
                            name_key: str = "", args_key: str = "", array_wrapped: bool = False,
                            function_is_key: bool = False, call_id_key: str = "", gen_call_id_key: str = "",
                            parameters_order: Iterable[str] = (), accept_openai_wrapper: bool = False,
                            optional_end: bool = False, content_inside_pair: bool = False) -> P:
        """JSON tool calls between ``section_start`` and ``section_end`` (parser notes §3.6.1).

        Layouts: ``function_is_key`` (``{"name": {...args}}``), nested keys (``function.name``), or flat keys
        (fields ordered by ``parameters_order``). ``parallel``: ``, call`` repetitions; ``array_wrapped``:
        ``[ ... ]``; ``force``: the section is required (else optional). Registers the trigger rule
        ``tool-call``. No function tools: ``eps``. With ``whitespace_call_separators`` the ``,`` between
        parallel calls is optional. ``optional_end``: ``section_end`` may be missing (a format read from
        instructions, improvement ``instruction-call-format``). ``content_inside_pair``: a section start of two
        adjacent markers without a section end may hold the turn's content between its markers
        (``<|python_start|>text<|python_end|>{…}``, improvement ``content-inside-section-start``).
        """
        funcs = indexed_function_tools(tools)
        if not funcs:
            return self.eps()
        eff_name = name_key or "name"
        eff_args = args_key or "arguments"
        if function_is_key:
            calls = self._json_tools_function_is_key(funcs, args_key, eff_args, call_id_key, gen_call_id_key)
        elif _split_key(eff_name)[0] or _split_key(eff_args)[0]:
            calls = self._json_tools_nested(funcs, eff_name, eff_args, call_id_key, gen_call_id_key)
        else:
            calls = self._json_tools_flat(funcs, eff_name, eff_args, call_id_key, gen_call_id_key,
                                          list(parameters_order), accept_openai_wrapper)
        tool_calls = calls
        if parallel:
            if self.whitespace_call_separators:
                sep = self.space() + self.optional(self.choice(",", ";")) + self.space()
            else:
                sep = self.space() + "," + self.space()
            tool_calls = tool_calls + self.zero_or_more(sep + calls)
        listed = tool_calls
        if array_wrapped:
            tool_calls = self.literal("[") + self.space() + tool_calls + self.space() + "]"
        self.last_json_calls = tool_calls   # the calls without their section markers (repair unmarked-calls)
        end = self.flexible(section_end)
        if optional_end and section_end:
            end = self.optional(end)
        opener = self.flexible(section_start)
        body = opener + self.space() + tool_calls + self.space() + end
        bare = section_start.rstrip(" \t")
        if bare != section_start and bare.strip() and "\n" not in section_start \
                and "marker-space-omitted" in self.repairs:
            # repair marker-space-omitted: the section's opener without the space(s) the template ends it with
            # ("[TOOL_CALLS]" for "[TOOL_CALLS] "), tried after it; made once the tree is built (grammar unchanged)
            self.late.append(lambda: self.widen_late(opener, "marker-space-omitted", lambda _: self.literal(bare)))
        if array_wrapped and section_start.strip() and "call-list-unbracketed" in self.repairs:
            # repair call-list-unbracketed: between the section's markers, the call list without its [ ]; made
            # once the tree is built, so the grammar stays the template's
            self.late.append(lambda: self.widen_late(body, "call-list-unbracketed", lambda _: (
                self.flexible(section_start) + self.space() + listed + self.space() + end)))
        pair = split_marker_pair(section_start) if not section_end else None
        if pair and "calls-inside-section-markers" in self.repairs:
            # repair calls-inside-section-markers: the calls between the two markers of the section start
            body = self.choice(body, self.repair("calls-inside-section-markers", self.literal(pair[0]) + self.space()
                                                 + tool_calls + self.space() + self.literal(pair[1])))
        if pair and content_inside_pair:
            # improvement content-inside-section-start: the template writes the content between the two markers
            body = self.choice(body, self.literal(pair[0]) + self.content(self.until(pair[1])) + self.literal(pair[1])
                               + self.space() + tool_calls)
        section = self.trigger_rule("tool-call", body)
        return section if force else self.optional(section)

    def pythonic_tool_calls(self, tools: Any, parallel: bool, array_wrapped: bool, name_suffix: str = "",
                            rule_prefix: str = "tool-") -> P:
        """Python-style calls ``name(arg="v", n=1, obj={'k': 'v'})`` (the explorer's ``PYTHONIC`` format, see
        :mod:`core.analysis.fidelity`): arguments in any order, string-typed ones a quoted string (either
        quote), the others a :meth:`python_literal`; parallel calls separated by ``,`` and/or whitespace;
        ``array_wrapped``: the calls are inside ``[`` … ``]``. Values are mapped to JSON by the mapper's
        quote/literal normalisation. ``name_suffix``: written between the name and ``(`` (Llama 3.1's built-in
        ``brave_search.call(…)``, repair ``builtin-call-syntax``); ``rule_prefix``: of the rule names (another
        format's ``tool-N`` rules may sit beside them)."""
        funcs = indexed_function_tools(tools)
        if not funcs:
            return self.eps()
        ws = self.space
        choices = []
        for idx, fn in funcs:
            name = fn["name"]
            params = tool_parameters(fn)
            props = params.get("properties") if isinstance(params, dict) else None
            args = self.eps()
            if isinstance(props, dict) and props:
                arg_choices = []
                for j, (pname, pdef) in enumerate(props.items()):
                    is_string = isinstance(pdef, dict) and pdef.get("type") == "string"
                    if "pythonic-values" in self.repairs:
                        # repair pythonic-values: what llama.cpp's quote swap reads right stays its own, the
                        # rest is decoded by Python's rules
                        strict = self.python_json_safe_string() if is_string else self.python_safe_literal()
                        # the strict reading must end where the argument does (a quote that did not close
                        # the string leaves text before the next ',' / ')'), else the lenient one is tried;
                        # atomic: a stream shows the value once that is known (never a string closed too early)
                        strict = self.atomic(self.tool_arg_value(strict) + self.peek(self.seq(ws(), self.one("[,)]"))))
                        value = self.choice(strict, self.repair(
                            "pythonic-values", self.tool_arg_py_value(self.python_lenient_literal())))
                    else:
                        value = self.tool_arg_value(self.python_string() if is_string else self.python_literal())
                    arg_choices.append(self.rule(f"{rule_prefix}{idx}-arg-{j}", self.tool_arg(
                        self.tool_arg_open(self.tool_arg_name(self.literal(pname)) + ws() + "=" + ws())
                        + value + self.tool_arg_close(self.eps()))))
                if "undeclared-arguments" in self.repairs:
                    declared = self.choice(*[self.literal(n) for n in props]) + ws() + "="
                    arg_choices.append(self.undeclared_py_arg(declared))
                one_arg = self.choice(*arg_choices)
                args = self.optional(one_arg + self.zero_or_more(ws() + "," + ws() + one_arg))
            elif "undeclared-arguments" in self.repairs:
                one_arg = self.undeclared_py_arg(None)
                args = self.optional(one_arg + self.zero_or_more(ws() + "," + ws() + one_arg))
            opener = self.tool_name(self.literal(name)) + (self.literal(name_suffix) if name_suffix else self.eps())
            body = self.tool(self.tool_open(opener + "(") + ws() + self.tool_args(args)
                             + ws() + self.optional(",") + ws() + self.tool_close(")"))
            choices.append(self.rule(f"{rule_prefix}{idx}", body))
        one = self.choice(*choices)
        calls = one + self.zero_or_more(ws() + self.optional(",") + ws() + one) if parallel else one
        if array_wrapped:
            calls = self.literal("[") + ws() + calls + ws() + "]"
        return calls

    def undeclared_py_arg(self, declared: P | None) -> P:
        """Repair ``undeclared-arguments``: ``ident=VALUE`` for a keyword the tool does not declare (``declared``:
        the declared ``name=`` openers, never taken here), the value a Python literal (vLLM's and SGLang's
        pythonic parsers pass every keyword on; checking the schema is the client's job)."""
        ident = self.chars("[A-Za-z_]", 1, 1) + self.chars("[A-Za-z0-9_]", 0)
        opener = (self.negate(declared) if declared is not None else self.eps()) + self.tool_arg_name(ident)
        return self.repair("undeclared-arguments", self.tool_arg(
            self.tool_arg_open(opener + self.space() + "=" + self.space())
            + self.tool_arg_py_value(self.python_lenient_literal()) + self.tool_arg_close(self.eps())))


def build_chat_peg_parser(fn: Any, entries: dict[str, Any] | None = None) -> Any:
    """``ChatBuilder()``, root = ``fn(builder)``, build (optional extra entry points from the same builder:
    ``entries`` maps names to callables ``builder -> parser``)."""
    b = ChatBuilder()
    root = fn(b)
    extra = {k: f(b) for k, f in (entries or {}).items()}
    return b.build(root, extra)
