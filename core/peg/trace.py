"""A traced run of a built arena: the same combinators as :mod:`core.peg.engine`, plus what a triage needs.

:func:`traced_parse` compiles the arena a second time (the hot path of :func:`core.peg.engine.parse` is not
touched, so parsing speed and the GBNF are unchanged) with two additions:

* every literal that matched becomes an AST node tagged ``marker:<label>`` (``<label>`` from ``labels``, the
  caller's map from literal text to a name such as the analysis field it came from; ``marker:`` alone when
  the text is not in the map). The chat mapper ignores unknown tags, so the message of a traced parse is the
  message of the plain parse — the spans a caller builds from these nodes come from the parse that made the
  message, not from a second pass over the text;
* the *furthest failure*: the rightmost position where a terminal (literal, character class, end, JSON
  value, tool name…) failed, what was expected there, and the rule/tag path that was being tried — the
  classic PEG error report ("expected `</parameter>` or `<parameter=`; found `</function>`"). Failures inside
  a negative lookahead do not count (they are how ``until``-like constructs succeed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..escapes import code_span, escape_invisible
from . import nodes as N
from .engine import AstNode, ParseResult, _Compiler, _Ctx, _result
from .scanners import FAIL, OK

MARKER_TAG = "marker:"
"""Prefix of the tags :func:`traced_parse` gives matched literals (``marker:<label>``)."""


@dataclass(frozen=True)
class Expectation:
    """One thing the parser would have accepted at the furthest failure: ``kind`` (``literal``, ``chars``,
    ``end``, ``json``, ``string``, ``any``) and ``text`` (the literal, a class description or a JSON kind)."""

    kind: str
    text: str

    def words(self) -> str:
        """Readable form: a literal as one code span (line breaks and tabs as ``\\n`` ``\\t``, every other invisible
        character escaped: a tool name's bidi override cannot reorder the line), else a phrase."""
        if self.kind == "literal":
            return code_span(escape_invisible(self.text.replace("\n", "\\n").replace("\t", "\\t")))
        if self.kind == "end":
            return "the end of the output"
        if self.kind == "json":
            return "a JSON " + self.text.replace("json-", "").replace("value", "value")
        if self.kind == "string":
            return "string text"
        if self.kind == "any":
            return "any character"
        return self.text


@dataclass
class FurthestFailure:
    """Where a parse got furthest before failing: ``pos`` (code point index into the parsed text, -1 when
    nothing failed), ``expected`` (in the order first tried) and ``path`` (rule names / tags open there,
    outermost first)."""

    pos: int = -1
    expected: list[Expectation] = field(default_factory=list)
    path: tuple[str, ...] = ()


class _TraceCtx(_Ctx):
    __slots__ = ("far", "stack", "neg")

    def __init__(self, text: str, lenient: bool):
        super().__init__(text, lenient, None, None)
        self.far = FurthestFailure()
        self.stack: list[str] = []
        self.neg = 0

    def failed(self, pos: int, exp: Expectation) -> None:
        if self.neg:
            return
        far = self.far
        if pos > far.pos:
            far.pos = pos
            far.expected = [exp]
            far.path = tuple(self.stack)
        elif pos == far.pos and exp not in far.expected:
            far.expected.append(exp)


def _chars_words(node: N.Chars) -> str:
    parts = []
    for a, b in node.ranges:
        parts.append(repr(chr(a))[1:-1] if a == b else f"{repr(chr(a))[1:-1]}-{repr(chr(b))[1:-1]}")
    return ("a character not in " if node.negated else "one of ") + "[" + "".join(parts) + "]"


class _TraceCompiler(_Compiler):
    def __init__(self, arena: Any, labels: dict[str, str]):
        super().__init__(arena)
        self.labels = labels

    def make(self, node: N.Node) -> Any:  # noqa: C901 - one wrapper per traced node kind
        base = super().make(node)
        if isinstance(node, N.Literal):
            exp = Expectation("literal", node.text)
            tag = MARKER_TAG + self.labels.get(node.text, "")

            def lit(ctx: Any, pos: int) -> tuple:
                st, end, ns = base(ctx, pos)
                if st == FAIL:
                    ctx.failed(pos, exp)
                elif st == OK and end > pos:
                    return st, end, (AstNode("", tag, pos, end, (), False),)
                return st, end, ns
            return lit
        exp = None
        if isinstance(node, N.Chars):
            exp = Expectation("chars", _chars_words(node))
        elif isinstance(node, N.End):
            exp = Expectation("end", "")
        elif isinstance(node, N.Any):
            exp = Expectation("any", "")
        elif isinstance(node, N.StringContent):
            exp = Expectation("string", node.delimiter)
        elif isinstance(node, N.Rule) and node.native:
            exp = Expectation("json", node.native)
        if exp is not None:
            terminal = exp

            def term(ctx: Any, pos: int) -> tuple:
                r = base(ctx, pos)
                if r[0] == FAIL:
                    ctx.failed(max(pos, r[1]), terminal)
                return r
            if not isinstance(node, N.Rule):
                return term
            inner = term
        else:
            inner = base
        if isinstance(node, N.Not):
            def neg(ctx: Any, pos: int) -> tuple:
                ctx.neg += 1
                try:
                    return inner(ctx, pos)
                finally:
                    ctx.neg -= 1
            return neg
        if isinstance(node, (N.Rule, N.Tag)):
            name = node.name if isinstance(node, N.Rule) else node.tag

            def named(ctx: Any, pos: int) -> tuple:
                ctx.stack.append(name)
                try:
                    return inner(ctx, pos)
                finally:
                    ctx.stack.pop()
            return named
        return inner


@dataclass
class TracedResult:
    """:func:`traced_parse`'s answer: the :class:`~core.peg.engine.ParseResult` (its AST has the marker nodes)
    and the :class:`FurthestFailure`."""

    result: ParseResult
    furthest: FurthestFailure


def traced_parse(arena: Any, text: str, *, labels: dict[str, str] | None = None, lenient: bool = True,
                 entry: str | None = None) -> TracedResult:
    """Parse ``text`` from the arena's root (or ``entry``) as :func:`core.peg.engine.parse` does, recording
    matched literals as ``marker:<label>`` nodes and the furthest failure (see the module doc).

    ``labels``: literal text -> label. No cache; compiles the arena each call (a few ms for a chat parser). The
    result carries what :func:`core.peg.engine.parse`'s does (pending literal, switches…), so a caller may use
    it as that parse (:meth:`core.chat.generator.GeneratedParser.parse_detailed`'s ``main``).
    Raises :class:`~core.peg.builder.PegError` for an unknown entry, ``RecursionError`` on absurd nesting.
    """
    pid = arena.entry_id(entry)
    fns = _TraceCompiler(arena, labels or {}).run()
    ctx = _TraceCtx(text, lenient)
    return TracedResult(_result(ctx, fns[pid](ctx, 0), 0, text), ctx.far)
