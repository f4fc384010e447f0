"""Building PEG parsers: a :class:`Builder` creates nodes in an :class:`Arena` and returns :class:`P` handles.

Handles combine with operators as in llama.cpp ``common_peg_parser`` (parser notes §1.1):

* ``a + b`` sequence (nested sequences flattened), ``a | b`` ordered choice (flattened),
  ``a << b`` = ``a + space() + b``; a plain ``str`` on either side becomes ``literal(str)``.

``Builder.build(root)`` resolves rule references and returns the :class:`Arena`, which parses
(:meth:`Arena.parse`, see :mod:`core.peg.engine`), emits GBNF (:meth:`Arena.to_gbnf`, see :mod:`core.peg.gbnf`)
and prints itself (:meth:`Arena.describe`).

Errors: :class:`PegError` (a ``ValueError``) for an unknown rule name, a missing root, an empty ``ac``
delimiter list or a bad repetition bound.
"""

from __future__ import annotations

from typing import Any as _AnyT, Callable, Iterable, Union

from . import nodes as N
from .nodes import sanitize_rule_name

_engine_parse: Callable[..., _AnyT] | None = None


class PegError(ValueError):
    """A parser could not be built (names the rule / combinator and the problem)."""


class P:
    """Handle on one parser node of a builder; supports ``+``, ``|``, ``<<`` with other handles or strings."""

    __slots__ = ("id", "b")

    def __init__(self, id: int, b: "Builder"):
        self.id = id
        self.b = b

    def _other(self, other: "Parseable") -> "P":
        return self.b.lift(other)

    def __add__(self, other: "Parseable") -> "P":
        return self.b.seq(self, self._other(other))

    def __radd__(self, other: "Parseable") -> "P":
        return self.b.seq(self._other(other), self)

    def __or__(self, other: "Parseable") -> "P":
        return self.b.choice(self, self._other(other))

    def __ror__(self, other: "Parseable") -> "P":
        return self.b.choice(self._other(other), self)

    def __lshift__(self, other: "Parseable") -> "P":
        return self.b.seq(self, self.b.space(), self._other(other))

    def __rlshift__(self, other: "Parseable") -> "P":
        return self.b.seq(self._other(other), self.b.space(), self)

    def __repr__(self) -> str:
        return f"P({self.id}: {self.b.arena.describe_node(self.id)})"


Parseable = Union[P, str]


class Arena:
    """The built parser: nodes by id, rules by (sanitized) name, a root and optional extra named entry points.

    ``parse`` / ``to_gbnf`` / ``describe`` are the public operations; nodes are read-only after ``build``.
    """

    def __init__(self) -> None:
        self.nodes: list[N.Node] = []
        self.rules: dict[str, int] = {}
        self.root: int = -1
        self.entries: dict[str, int] = {}
        self._compiled: _AnyT = None
        # tags whose nodes show nothing by themselves (grouping / opening): not counted as visible progress
        # when an alternative is abandoned (engine ParseResult.switches); set by the chat builder
        self.quiet_tags: frozenset[str] = frozenset()
        # choices made by ChatBuilder.widen_late: the grammar reads them as their one non-repair alternative
        self.repair_choices: set[int] = set()

    def add(self, node: N.Node) -> int:
        """Append ``node``, set its ``id`` to its index and return that id (``int``)."""
        node.id = len(self.nodes)
        self.nodes.append(node)
        return node.id

    def get(self, pid: int) -> N.Node:
        """The node with id ``pid``; raises ``IndexError`` if there is none."""
        return self.nodes[pid]

    def rule_id(self, name: str) -> int:
        """Id of the rule node registered under ``name``; raises :class:`PegError` if unknown."""
        try:
            return self.rules[name]
        except KeyError:
            raise PegError(f"rule not found: {name!r}") from None

    # -- operations (implemented in sibling modules) --------------------------------------------------------
    def parse(self, text: str, *, lenient: bool = True, start: int = 0, entry: str | None = None,
              cache: _AnyT = None) -> _AnyT:
        """Parse ``text`` from ``start``; see :func:`core.peg.engine.parse`."""
        global _engine_parse
        if _engine_parse is None:   # imported once (the engine imports this module); a stream parses per feed
            from .engine import parse as _engine_parse
        return _engine_parse(self, text, lenient=lenient, start=start, entry=entry, cache=cache)

    def compile(self) -> None:
        """Compile every node into the engine's closures now (done once per arena; otherwise on the first
        :meth:`parse`). A stream calls it when it is set up, before the first token, as llama.cpp builds its
        parser when the request is applied: the first feed then costs a parse, not a compilation."""
        if self._compiled is None:
            from .engine import compile_arena

            compile_arena(self)

    def to_gbnf(self, lazy: bool = False, builder: _AnyT = None) -> str:
        """GBNF text of the parser (lazy: only trigger rules); see :func:`core.peg.gbnf.build_grammar`."""
        from .gbnf import build_grammar

        return build_grammar(self, lazy=lazy, builder=builder)

    def describe(self, entry: str | None = None) -> str:
        """Readable PEG: one line per reachable rule, then the root."""
        from .describe import describe

        return describe(self, entry)

    def describe_node(self, pid: int) -> str:
        """One node as a readable expression, two levels deep (see :func:`core.peg.describe.describe_expr`)."""
        from .describe import describe_expr

        return describe_expr(self, pid, depth=2)

    def entry_id(self, entry: str | None) -> int:
        """Node id to start parsing from: the root when ``entry`` is None, else the named entry point.

        Raises :class:`PegError` when no root is set or ``entry`` is unknown (the message lists the known entries).
        """
        if entry is None:
            if self.root < 0:
                raise PegError("no root parser set")
            return self.root
        try:
            return self.entries[entry]
        except KeyError:
            raise PegError(f"unknown entry point {entry!r} (have: {', '.join(sorted(self.entries)) or 'none'})") \
                from None


class Builder:
    """Creates parser nodes. Every method returns a :class:`P` handle.

    The combinator list and semantics follow llama.cpp ``common_peg_parser_builder`` (parser notes §1.2, §1.4).
    """

    def __init__(self) -> None:
        self.arena = Arena()

    # -- plumbing -------------------------------------------------------------------------------------------
    def _add(self, node: N.Node) -> P:
        return P(self.arena.add(node), self)

    def lift(self, p: Parseable) -> P:
        """A handle for ``p``; a ``str`` becomes ``literal(p)``."""
        if isinstance(p, P):
            return p
        if isinstance(p, str):
            return self.literal(p)
        raise PegError(f"cannot use {type(p).__name__} as a parser (expected a parser handle or a string)")

    def node(self, p: P) -> N.Node:
        """The arena node behind handle ``p``."""
        return self.arena.get(p.id)

    # -- primitives -----------------------------------------------------------------------------------------
    def eps(self) -> P:
        """Matches nothing, always succeeds."""
        return self._add(N.Epsilon())

    def start(self) -> P:
        """Matches only at position 0."""
        return self._add(N.Start())

    def end(self) -> P:
        """Matches only at the end of input (never NEED_MORE_INPUT)."""
        return self._add(N.End())

    def literal(self, text: str) -> P:
        """An exact string."""
        return self._add(N.Literal(text=text))

    def _flat(self, parts: tuple[Parseable, ...], kind: type) -> list[int]:
        """The ids of ``parts``, the items of a ``kind`` node spliced in its place."""
        items: list[int] = []
        for part in parts:
            h = self.lift(part)
            n = self.arena.get(h.id)
            if isinstance(n, kind):
                items.extend(n.items)
            else:
                items.append(h.id)
        return items

    def seq(self, *parts: Parseable) -> P:
        """Sequence; nested sequences are flattened."""
        return self._add(N.Sequence(items=self._flat(parts, N.Sequence)))

    sequence = seq

    def choice(self, *parts: Parseable) -> P:
        """Ordered choice; nested choices are flattened. ``choice()`` with no parts always fails."""
        return self._add(N.Choice(items=self._flat(parts, N.Choice)))

    def repeat(self, p: Parseable, min: int, max: int | None = None) -> P:
        """``p{min,max}``; ``max=None`` means exactly ``min``; ``max=-1`` unbounded."""
        if max is None:
            max = min
        if min < 0 or (max != -1 and max < min):
            raise PegError(f"bad repetition bounds {{{min},{max}}}")
        return self._add(N.Repeat(child=self.lift(p).id, min=min, max=max))

    def optional(self, p: Parseable) -> P:
        """``p?``: ``repeat(p, 0, 1)``."""
        return self.repeat(p, 0, 1)

    def zero_or_more(self, p: Parseable) -> P:
        """``p*``: ``repeat(p, 0, -1)``."""
        return self.repeat(p, 0, -1)

    def one_or_more(self, p: Parseable) -> P:
        """``p+``: ``repeat(p, 1, -1)``."""
        return self.repeat(p, 1, -1)

    def peek(self, p: Parseable) -> P:
        """Positive lookahead (zero width)."""
        return self._add(N.And(child=self.lift(p).id))

    def negate(self, p: Parseable) -> P:
        """Negative lookahead (zero width)."""
        return self._add(N.Not(child=self.lift(p).id))

    def any(self) -> P:
        """One character."""
        return self._add(N.Any())

    def space(self) -> P:
        """Zero or more whitespace characters."""
        return self._add(N.Space())

    def chars(self, classes: str, min: int = 1, max: int = -1) -> P:
        """Characters of a class (``[a-z]``, ``[^"\\\\]``, bare ``0-9``), ``min``..``max`` times."""
        ranges, negated = N.parse_char_class(classes)
        return self._add(N.Chars(pattern=classes, ranges=ranges, negated=negated, min=min, max=max))

    def one(self, classes: str) -> P:
        """Exactly one character of the class ``classes`` (``chars(classes, 1, 1)``)."""
        return self.chars(classes, 1, 1)

    def until(self, delimiter: str) -> P:
        """Everything up to ``delimiter`` (not consumed)."""
        return self._add(N.Until(delimiters=[delimiter]))

    def opener_ahead(self, opener: str, min_cut: int) -> P:
        """Zero width: ``opener`` lies ahead, whole or cut by the end after ``min_cut`` characters (:class:`N.Ahead`)."""
        if not opener or not 0 < min_cut <= len(opener):
            raise ValueError(f"opener_ahead needs a non-empty opener and 0 < min_cut <= its length, got {min_cut}")
        return self._add(N.Ahead(opener=opener, min_cut=min_cut))

    def until_one_of(self, delimiters: Iterable[str]) -> P:
        """Everything up to the first of ``delimiters`` (not consumed)."""
        return self._add(N.Until(delimiters=list(delimiters)))

    def rest(self) -> P:
        """Everything to the end of input."""
        return self._add(N.Until(delimiters=[]))

    def string_content(self, delimiter: str) -> P:
        """A string body up to the first unescaped ``delimiter`` (one character)."""
        if len(delimiter) != 1:
            raise PegError(f"string_content needs a one-character delimiter, got {delimiter!r}")
        return self._add(N.StringContent(delimiter=delimiter))

    def schema(self, p: Parseable, name: str, schema: _AnyT, raw: bool = False) -> P:
        """Parse like ``p``; the GBNF of this spot comes from ``schema`` (a JSON-schema dict or a parsed
        :class:`core.grammar.json_schema.SchemaNode`). A schema outside the supported subset is kept as
        "any value" (the parser does not change; only the grammar is looser)."""
        from ..grammar.json_schema import SchemaNode, schema_from_json_lenient

        node = schema if (schema is None or isinstance(schema, SchemaNode)) else schema_from_json_lenient(schema)
        return self._add(N.Schema(child=self.lift(p).id, name=name, schema=node, raw=raw))

    def atomic(self, p: Parseable) -> P:
        """NEED_MORE_INPUT inside drops the AST nodes produced inside."""
        return self._add(N.Atomic(child=self.lift(p).id))

    def tag(self, tag: str, p: Parseable) -> P:
        """Create an AST node tagged ``tag``."""
        return self._add(N.Tag(child=self.lift(p).id, tag=tag))

    def gbnf(self, p: Parseable, grammar: str) -> P:
        """Parse like ``p``, emit ``grammar`` verbatim in GBNF ("" emits nothing)."""
        return self._add(N.Gbnf(child=self.lift(p).id, grammar=grammar))

    def ac(self, p: Parseable, delimiters: str | Iterable[str]) -> P:
        """Parse like ``p``; GBNF matches everything up to and including the first delimiter."""
        delims = [delimiters] if isinstance(delimiters, str) else list(delimiters)
        if not delims:
            raise PegError("ac() needs at least one delimiter")
        return self._add(N.Ac(child=self.lift(p).id, delimiters=delims))

    # -- rules ----------------------------------------------------------------------------------------------
    def ref(self, name: str) -> P:
        """Reference to a rule (resolved at build time; allows recursion)."""
        return self._add(N.Ref(name=sanitize_rule_name(name)))

    def rule(self, name: str, p: Parseable | Callable[[], Parseable], trigger: bool = False) -> P:
        """Register rule ``name`` (sanitized) and return a reference to it.

        ``p`` a parser: (re)defines the rule (a second definition of the same name wins). ``p`` a callable:
        defined once (later calls just return a reference), and the callable may ``ref(name)`` itself.
        """
        clean = sanitize_rule_name(name)
        if callable(p) and not isinstance(p, P):
            if clean in self.arena.rules:
                return self.ref(clean)
            placeholder = self.arena.add(N.Rule(name=clean, child=self.any().id, trigger=trigger))
            self.arena.rules[clean] = placeholder
            body = self.lift(p())
            rid = self.arena.add(N.Rule(name=clean, child=body.id, trigger=trigger))
            self.arena.rules[clean] = rid
            return self.ref(clean)
        body = self.lift(p)
        rid = self.arena.add(N.Rule(name=clean, child=body.id, trigger=trigger))
        self.arena.rules[clean] = rid
        return self.ref(clean)

    def trigger_rule(self, name: str, p: Parseable | Callable[[], Parseable]) -> P:
        """A rule marked as an entry point of the lazy grammar."""
        return self.rule(name, p, trigger=True)

    # -- JSON (memoized rules; parsed by native scanners, see core.peg.scanners) ------------------------------
    def _native_rule(self, name: str, native: str, body: Callable[[], Parseable]) -> P:
        h = self.rule(name, body)
        rid = self.arena.rules[name]
        rule = self.arena.get(rid)
        assert isinstance(rule, N.Rule)
        rule.native = native
        return h

    def json_number(self) -> P:
        """``-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`` then ``!([0-9.eE+-])`` (a number at the end
        of lenient input is NEED_MORE_INPUT)."""
        def body() -> P:
            int_part = self.choice("0", self.seq(self.chars("[1-9]", 1, 1), self.chars("[0-9]", 0, -1)))
            frac = self.seq(".", self.chars("[0-9]"))
            exp = self.seq(self.choice("e", "E"), self.optional(self.chars("[+-]", 1, 1)), self.chars("[0-9]"))
            return self.seq(self.optional("-"), int_part, self.optional(frac), self.optional(exp),
                            self.negate(self.chars("[0-9.eE+-]", 1, 1)))
        return self._native_rule("json-number", "json-number", body)

    def json_string(self) -> P:
        """``"`` string content ``"``."""
        return self._native_rule("json-string", "json-string",
                                 lambda: self.seq('"', self.string_content('"'), '"'))

    def json_bool(self) -> P:
        """Rule ``json-bool``: ``true`` | ``false``; follows llama.cpp ``common_peg_parser_builder::json_bool``."""
        return self.rule("json-bool", lambda: self.choice("true", "false"))

    def json_null(self) -> P:
        """Rule ``json-null``: the literal ``null``; follows llama.cpp ``common_peg_parser_builder::json_null``."""
        return self.rule("json-null", lambda: self.literal("null"))

    def json_object(self) -> P:
        """Rule ``json-object``: ``{`` ws (``}`` | member (ws ``,`` ws member)* ws ``}``),
        member = json-string ws ``:`` ws json-value.

        Run by the engine's native ``json-object`` scanner;
        follows llama.cpp ``common_peg_parser_builder::json_object``.
        """
        def body() -> P:
            ws = self.space()
            member = self.seq(self.json_string(), ws, ":", ws, self.json())
            members = self.seq(member, self.zero_or_more(self.seq(ws, ",", ws, member)))
            return self.seq("{", ws, self.choice("}", self.seq(members, ws, "}")))
        return self._native_rule("json-object", "json-object", body)

    def json_array(self) -> P:
        """Rule ``json-array``: ``[`` ws (``]`` | value (ws ``,`` ws value)* ws ``]``).

        Run by the engine's native ``json-array`` scanner; follows llama.cpp ``common_peg_parser_builder::json_array``.
        """
        def body() -> P:
            ws = self.space()
            elements = self.seq(self.json(), self.zero_or_more(self.seq(ws, ",", ws, self.json())))
            return self.seq("[", ws, self.choice("]", self.seq(elements, ws, "]")))
        return self._native_rule("json-array", "json-array", body)

    def json(self) -> P:
        """Any JSON value (``json-value``: object | array | string | number | bool | null)."""
        return self._native_rule("json-value", "json-value", lambda: self.choice(
            self.json_object(), self.json_array(), self.json_string(), self.json_number(), self.json_bool(),
            self.json_null()))

    def json_member(self, key: str, p: Parseable) -> P:
        """``"key"`` ws ``:`` ws ``p``."""
        ws = self.space()
        return self.seq('"' + key + '"', ws, ":", ws, p)

    # -- Python-style values (LFM2-like formats; plain combinators) -----------------------------------------
    def double_quoted_string(self) -> P:
        """Rule ``double-quoted-string``: ``"`` string content ``"``; follows llama.cpp ``double_quoted_string``."""
        return self.rule("double-quoted-string", lambda: self.seq('"', self.string_content('"'), '"'))

    def single_quoted_string(self) -> P:
        """Rule ``single-quoted-string``: ``'`` string content ``'``; follows llama.cpp ``single_quoted_string``."""
        return self.rule("single-quoted-string", lambda: self.seq("'", self.string_content("'"), "'"))

    def python_string(self) -> P:
        """Rule ``python-string``: double- or single-quoted string; follows llama.cpp ``python_string``."""
        return self.rule("python-string", lambda: self.choice(self.double_quoted_string(),
                                                              self.single_quoted_string()))

    def python_bool(self) -> P:
        """Rule ``python-bool``: ``True`` | ``False``; follows llama.cpp ``python_bool``."""
        return self.rule("python-bool", lambda: self.choice("True", "False"))

    def python_null(self) -> P:
        """Rule ``python-none``: the literal ``None``; follows llama.cpp ``python_null``."""
        return self.rule("python-none", lambda: self.literal("None"))

    def marker(self) -> P:
        """``<...>`` or ``[...]``."""
        return self.choice(self.seq("<", self.until(">"), ">"), self.seq("[", self.until("]"), "]"))

    # -- build ----------------------------------------------------------------------------------------------
    def build(self, root: Parseable, entries: dict[str, Parseable] | None = None) -> Arena:
        """Set the root (and optional extra named entry points), resolve references, return the arena.

        Raises :class:`PegError` if a reference names an unknown rule.
        """
        arena = self.arena
        late = getattr(self, "late", None)
        while late:   # changes made once the tree is complete (ChatBuilder.widen_late): their nodes come last
            late.pop(0)()
        arena.root = self.lift(root).id
        for name, p in (entries or {}).items():
            arena.entries[name] = self.lift(p).id
        _resolve_refs(arena)
        return arena


def _resolve_refs(arena: Arena) -> None:
    def resolve(pid: int) -> int:
        n = arena.nodes[pid]
        if isinstance(n, N.Ref):
            return arena.rule_id(n.name)
        return pid

    for n in arena.nodes:
        if isinstance(n, (N.Sequence, N.Choice)):
            n.items = [resolve(c) for c in n.items]
        elif hasattr(n, "child") and isinstance(getattr(n, "child"), int) and getattr(n, "child") >= 0:
            n.child = resolve(n.child)  # type: ignore[attr-defined]
    arena.root = resolve(arena.root)
    for k, v in list(arena.entries.items()):
        arena.entries[k] = resolve(v)


def build_peg_parser(fn: Callable[[Builder], Parseable]) -> Arena:
    """``Builder()``, root = ``fn(builder)``, build."""
    b = Builder()
    return b.build(fn(b))
