"""Parser node types of the PEG library: plain data, one class per combinator.

The set and the semantics follow llama.cpp ``common/peg-parser.h`` (parser notes §1.2): ``Epsilon``, ``Start``,
``End``, ``Literal``, ``Sequence``, ``Choice``, ``Repeat``, ``And`` (peek), ``Not`` (negative lookahead), ``Any``,
``Space``, ``Chars``, ``StringContent``, ``Until``, ``Schema``, ``Rule``, ``Ref``, ``Atomic``, ``Tag``, ``Gbnf``
and ``Ac``; ``Ahead`` (a repair's look-ahead for an opener, zero width) is this project's own. Nodes live in an
:class:`~core.peg.builder.Arena` and point at their children by integer id. Execution is in
:mod:`core.peg.engine`, GBNF emission in :mod:`core.peg.gbnf`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any as _AnyT

_INVALID_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")


def sanitize_rule_name(name: str) -> str:
    """Replace every run of characters outside ``[a-zA-Z0-9-]`` by one ``-`` (llama.cpp ``rule_name``).

    ``"tool-special_function"`` -> ``"tool-special-function"``.
    """
    return _INVALID_RULE_CHARS.sub("-", name)


@dataclass
class Node:
    """Base class; ``id`` is the node's index in its arena."""

    id: int = -1

    def children(self) -> list[int]:
        """Ids of the child nodes in the arena (``list[int]``); ``[]`` for a leaf."""
        return []

    def kind(self) -> str:
        """Lower-case class name (e.g. ``"sequence"``), used by ``describe`` and the engine's dispatch."""
        return type(self).__name__.lower()


@dataclass
class Epsilon(Node):
    """Matches nothing, always succeeds."""


@dataclass
class Start(Node):
    """Succeeds only at position 0."""


@dataclass
class End(Node):
    """Succeeds only at the end of input; never NEED_MORE_INPUT (a hard wall against leftover text)."""


@dataclass
class Literal(Node):
    """An exact string. A prefix of it at the end of lenient input is NEED_MORE_INPUT."""

    text: str = ""


@dataclass
class Sequence(Node):
    """All children in order (nested sequences are flattened by the builder)."""

    items: list[int] = field(default_factory=list)

    def children(self) -> list[int]:
        """The items' node ids, in order (``list[int]``)."""
        return self.items


@dataclass
class Choice(Node):
    """Ordered choice: the first child result that is not FAIL wins (nested choices are flattened)."""

    items: list[int] = field(default_factory=list)

    def children(self) -> list[int]:
        """The alternatives' node ids, in order of trial (``list[int]``)."""
        return self.items


@dataclass
class Repeat(Node):
    """``child{min,max}``; ``max == -1`` is unbounded. ``optional`` is ``{0,1}``."""

    child: int = -1
    min: int = 0
    max: int = -1

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


@dataclass
class And(Node):
    """Positive lookahead (``peek``): the child's result type, zero width, no AST nodes."""

    child: int = -1

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


@dataclass
class Not(Node):
    """Negative lookahead: child SUCCESS -> FAIL, FAIL -> SUCCESS, NEED_MORE_INPUT propagates."""

    child: int = -1

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


@dataclass
class Any(Node):
    """Exactly one character (one code point: the engine works on ``str``)."""


@dataclass
class Space(Node):
    """Zero or more C-locale whitespace characters (space, \\t, \\n, \\v, \\f, \\r); never NEED_MORE_INPUT."""


@dataclass
class Chars(Node):
    """Characters of a class like ``[a-z]`` or ``[^0-9]``, between ``min`` and ``max`` (-1: unbounded) times.

    ``pattern`` is the class as written (kept for GBNF); ``ranges`` are inclusive code point pairs.
    """

    pattern: str = ""
    ranges: list[tuple[int, int]] = field(default_factory=list)
    negated: bool = False
    min: int = 1
    max: int = -1


@dataclass
class StringContent(Node):
    """A string body up to (not including) the first unescaped ``delimiter`` (JSON escapes only)."""

    delimiter: str = '"'


@dataclass
class Until(Node):
    """Everything up to the first delimiter (not consumed); stops before a delimiter prefix cut off at the end.

    No delimiters: the rest of the input (``rest()``).
    """

    delimiters: list[str] = field(default_factory=list)


@dataclass
class Ahead(Node):
    """Zero width: succeeds where ``opener`` lies at or after the position, whole or cut by the end of the input
    after at least ``min_cut`` of its characters, else fails; never needs more input. A repair's look-ahead
    (call-section-omitted tries its variant only where an invoke opener lies ahead), searched with ``str.find``
    and resumed in a stream where the last search stopped. No grammar construct: GBNF gets nothing for it, as for
    a lookahead, and it is no markup (``core.chat.lossless`` reads literals and delimiters)."""

    opener: str = ""
    min_cut: int = 1


@dataclass
class Schema(Node):
    """Parses like ``child``; carries a JSON schema so that GBNF enforces it (parser notes §4.2).

    ``schema`` is a :class:`core.grammar.json_schema.SchemaNode` or ``None``; ``raw``: the grammar may accept a
    raw (unquoted) string where the schema allows a string.
    """

    child: int = -1
    name: str = ""
    schema: _AnyT = None
    raw: bool = False

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


@dataclass
class Rule(Node):
    """A named rule: creates an AST node (``rule=name``) when the child does not FAIL.

    ``trigger`` marks an entry point of a lazy grammar. ``native`` optionally names a built-in scanner
    (``"json-value"``, ``"json-string"``, ``"json-number"``) that the engine runs instead of the child; it must
    accept exactly what the child accepts (the child stays the source of the GBNF and of ``describe``).
    """

    name: str = ""
    child: int = -1
    trigger: bool = False
    native: str | None = None

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


@dataclass
class Ref(Node):
    """A reference to a rule by name, resolved when the arena is built."""

    name: str = ""


@dataclass
class Atomic(Node):
    """Runs the child; on NEED_MORE_INPUT drops the child's AST nodes (a half-matched part is never mapped)."""

    child: int = -1

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


VALUE_HOOK_PREFIX = "tool-args-as:"
"""Tags starting with this mark a node whose arguments a mapper value hook makes (:mod:`core.chat.mapper`); such
a tag is transparent in GBNF (a sequence under it is emitted as part of the enclosing sequence)."""


@dataclass
class Tag(Node):
    """Creates an AST node with ``tag`` (e.g. ``content``, ``tool-name``) when the child does not FAIL."""

    child: int = -1
    tag: str = ""

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


@dataclass
class Gbnf(Node):
    """Parses like ``child``; emits ``grammar`` verbatim in GBNF ("" = nothing)."""

    child: int = -1
    grammar: str = ""

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


@dataclass
class Ac(Node):
    """Parses like ``child``; GBNF is "everything up to and including the first delimiter" (Aho-Corasick)."""

    child: int = -1
    delimiters: list[str] = field(default_factory=list)

    def children(self) -> list[int]:
        """``[child]``: the one wrapped node id."""
        return [self.child]


# ---------------------------------------------------------------------------------------------------------------
# character classes

def _parse_class_char(content: str, i: int) -> tuple[int, int]:
    """One (possibly escaped) character of a class body at ``i`` -> (code point, length consumed)."""
    c = content[i]
    if c == "\\" and i + 1 < len(content):
        nxt = content[i + 1]
        hex_len = {"x": 2, "u": 4, "U": 8}.get(nxt)
        if hex_len is not None:
            digits = content[i + 2:i + 2 + hex_len]
            if len(digits) == hex_len and all(d in "0123456789abcdefABCDEF" for d in digits):
                return int(digits, 16), 2 + hex_len
            return ord(nxt), 2
        simple = {"n": "\n", "t": "\t", "r": "\r"}
        return ord(simple.get(nxt, nxt)), 2
    return ord(c), 1


def parse_char_class(classes: str) -> tuple[list[tuple[int, int]], bool]:
    """Parse ``[a-z]``, ``[^0-9]`` or a bare ``a-z`` into inclusive code point ranges and a negation flag.

    Escapes: ``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH``, ``\\n``, ``\\t``, ``\\r`` and ``\\c`` = literal c (so ``\\-``
    is a dash). A dash at the end is literal. Follows llama.cpp ``parse_char_classes``.
    """
    content = classes
    if content.startswith("["):
        content = content[1:]
    if content.endswith("]") and not content.endswith("\\]"):
        content = content[:-1]
    negated = False
    if content.startswith("^"):
        negated = True
        content = content[1:]
    ranges: list[tuple[int, int]] = []
    i = 0
    while i < len(content):
        start, n = _parse_class_char(content, i)
        i += n
        if i + 1 < len(content) and content[i] == "-":
            end, n2 = _parse_class_char(content, i + 1)
            ranges.append((start, end))
            i += 1 + n2
        else:
            ranges.append((start, start))
    return ranges, negated
