"""Running a built :class:`~core.peg.builder.Arena` on a text: results, AST nodes, incremental cache.

Semantics follow llama.cpp ``common/peg-parser.cpp`` (parser notes §1.2-1.3), on Python ``str`` (positions are
code point indices, not bytes):

* a result is ``FAIL``, ``SUCCESS`` or ``NEED_MORE_INPUT`` (NMI) with an end position and the AST nodes made at
  that level; in *lenient* mode (the default, as llama.cpp's chat parse always is) a primitive that runs off the
  end of the input while it could still match returns NMI, and NMI short-circuits sequences, choices and
  repetitions;
* ``until`` stops before a delimiter prefix cut off at the end of the input, so a marker being streamed is
  never emitted as content; in lenient mode it then reports NMI (divergence: llama.cpp reports success
  there, so a later parser may take the cut marker as text — ``<t`` content while ``<th`` is reasoning — and
  the next character takes it back; waiting keeps successive partial parses prefix-consistent);
* rule and tag nodes are created on NMI too (``partial=True``); ``atomic`` drops them.

Speed: every node is compiled once per arena into a Python closure; ``until`` uses ``str.find`` / one regex
search, ``space``/``chars``/string bodies use ``re``, JSON uses the scanners of :mod:`core.peg.scanners`.

Incremental parsing: pass the same :class:`ParseCache` to successive parses of a growing text (a stream).
Results of rules and tags that never looked at the end of the input are memoized by (node, position) and reused
while the new text extends the old one; ``until`` remembers how far it has already searched. Anything that
touched the end of the input is recomputed, so cached and uncached parses give identical results. Long
sequences and repetitions resume after the items an earlier parse matched without looking at the end; a
repetition hands those items on as a :class:`NodeRun` over one growing list, so a stream of many tool calls
does not copy them on every parse (the engine's cost per parse stays flat along a 160k-character stream).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from itertools import chain as _chain, islice as _islice
from typing import Any as _AnyT, Callable, Iterator

from . import nodes as N
from .scanners import (FAIL, NMI, OK, scan_json_value, scan_json_value_resumable, scan_string_content,
                       string_body_regex)

_SPACE = re.compile(r"[ \t\n\v\f\r]*")
_EMPTY: tuple = ()
_WS_CHARS = frozenset(" \t\n\v\f\r")


class ResultType(enum.IntEnum):
    """Outcome of a parse (llama.cpp ``common_peg_parse_result_type``)."""

    FAIL = 0
    SUCCESS = 1
    NEED_MORE_INPUT = 2


class AstNode:
    """One node of the parse tree: a rule (``rule`` set) or a tag (``tag`` set) over ``[start, end)``.

    ``partial`` is true when the node's parser needed more input. ``children`` are the nodes made inside.
    Nodes hold positions only; :meth:`text` slices the parsed input. ``base`` (streaming with a cache, else
    None): ``(prefix, parent, offset)`` when ``children`` holds the items of a repetition replayed from the
    cache — ``children[offset:offset + len(prefix)]`` are the very objects of the sequence ``prefix``, and
    ``parent`` is the prefix that one was grown from (its items start ``prefix``) or None — so a consumer
    comparing two trees of a stream knows those children are shared without reading them
    (:class:`core.chat.stream.IncrementalMapper`). ``children`` is a tuple, except over a repetition resumed
    from the cache: a :class:`NodeRun` (reads as a tuple; its replayed items are not copied per parse), as are
    the ``prefix`` and ``parent`` of ``base``.
    """

    __slots__ = ("rule", "tag", "start", "end", "children", "partial", "base")

    def __init__(self, rule: str, tag: str, start: int, end: int, children: tuple, partial: bool):
        self.rule = rule
        self.tag = tag
        self.start = start
        self.end = end
        self.children = children
        self.partial = partial
        self.base: tuple | None = None

    def text(self, source: str) -> str:
        """The node's matched text, ``source[start:end]`` (``source`` is the whole parsed text)."""
        return source[self.start:self.end]

    def __repr__(self) -> str:
        what = f"rule={self.rule!r}" if self.rule else f"tag={self.tag!r}"
        return f"AstNode({what}, {self.start}:{self.end}{', partial' if self.partial else ''})"


_new_node = object.__new__


class NodeRun:
    """A read-only sequence of AST nodes, ``head + run[:k] + tail``, that a stream builds without copying.

    A repetition resumed from a :class:`ParseCache` (tool calls repeated thousands of times) replays the
    items it matched before; as a tuple, its nodes were copied on every parse of the stream (O(items) per
    feed). Here the replayed items live in one list that only ever grows (``run``, shared by the successive
    parses of the stream: appending never changes what an existing view shows, since each view reads the
    first ``k`` items only), and a parse adds its own nodes before (``head``) or after (``tail``) as tuples.
    Behaves as a tuple for reading: ``len``, indexing (negative too), slicing (gives a tuple), iteration,
    ``reversed``, ``==`` with a tuple or another run, hashing, ``index``/``count``, ``+`` with a tuple (gives
    a run). Only an :class:`AstNode`'s ``children`` (of a node over a resumed repetition) and ``base``
    prefixes are runs.
    """

    __slots__ = ("head", "run", "k", "tail", "_n", "_t")

    def __init__(self, head: tuple, run: list, k: int, tail: tuple):
        self.head = head
        self.run = run
        self.k = k
        self.tail = tail
        self._t = t = len(head) + k       # where the tail starts
        self._n = t + len(tail)

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __getitem__(self, i: _AnyT) -> _AnyT:
        if i.__class__ is int:
            if i >= self._t:    # in the tail, what the last parse added (a stream's mapper reads there)
                return self.tail[i - self._t]
            if i < 0:
                i += self._n
                if i >= self._t:   # (``run[-1]``: the last item, most often in the tail)
                    return self.tail[i - self._t]
                if i < 0:
                    raise IndexError("node run index out of range")
            h = len(self.head)
            if i < h:
                return self.head[i]
            i -= h
            if i < self.k:
                return self.run[i]
            return self.tail[i - self.k]
        if i.__class__ is slice:
            if i.stop is None and i.step is None and i.start is not None and i.start >= self._t:
                return self.tail[i.start - self._t:]
            lo, hi, step = i.indices(self._n)
            if step != 1:
                return tuple(self)[i]
            if hi <= lo:
                return ()
            head, k = self.head, self.k
            h = len(head)
            out: tuple = head[lo:hi] if lo < h else ()
            a, b = max(lo - h, 0), min(hi - h, k)
            if a < b:
                out += tuple(self.run[a:b])
            if hi > h + k:
                out += self.tail[max(lo - h - k, 0):hi - h - k]
            return out
        return tuple(self)[i]

    def __iter__(self) -> Iterator[AstNode]:
        return _chain(self.head, _islice(self.run, self.k), self.tail)

    def __reversed__(self) -> Iterator[AstNode]:
        run = self.run
        return _chain(reversed(self.tail), _islice(reversed(run), len(run) - self.k, None), reversed(self.head))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, NodeRun)):
            return len(other) == self._n and tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: object) -> "NodeRun":
        if other.__class__ is tuple:
            return NodeRun(self.head, self.run, self.k, self.tail + other) if other else self
        return NotImplemented

    def __radd__(self, other: object) -> "NodeRun":
        if other.__class__ is tuple:
            return NodeRun(other + self.head, self.run, self.k, self.tail) if other else self
        return NotImplemented

    def index(self, value: object, *args: int) -> int:
        """As ``tuple.index`` (raises ``ValueError`` when absent)."""
        return tuple(self).index(value, *args)

    def count(self, value: object) -> int:
        """As ``tuple.count``."""
        return tuple(self).count(value)

    def grown(self, items: list) -> "NodeRun":
        """A run of this one's nodes followed by ``items`` (head and tail folded into the shared list when
        this view is not the list's last one: then the new run gets a list of its own)."""
        if not self.head and not self.tail and len(self.run) == self.k:
            self.run.extend(items)
            return NodeRun((), self.run, self.k + len(items), ())
        run = list(self)
        run.extend(items)
        return NodeRun((), run, len(run), ())

    def __repr__(self) -> str:
        return f"NodeRun({tuple(self)!r})"


_RESULT_TYPES = (ResultType.FAIL, ResultType.SUCCESS, ResultType.NEED_MORE_INPUT)   # by FAIL, OK, NMI
_NO_SWITCHES: frozenset = frozenset()


@dataclass
class ParseResult:
    """Result of :func:`parse`: type, ``[start, end)``, the top-level AST nodes and the parsed text.

    ``switches``: the alternatives (of a choice or a repetition) that failed after they had made non-empty
    tagged nodes outside any ``atomic``, as ``(node id, position, alternative index)`` — on a shorter prefix
    of the text, where such an alternative was still alive, the message may have been different (the
    streaming layer checks that the message still extends that prefix's). ``switched``: there is one.
    """

    type: ResultType
    start: int
    end: int
    nodes: tuple
    text: str
    switches: frozenset = frozenset()
    # (position, literal) when the parse needed more input only because the text ends inside that literal
    # (literal "": a JSON value of the native scanner starts at the very end, nothing of it yet) and nothing
    # else looked at the end (but whitespace runs that stopped there, when the literal starts
    # with another character): appending text that keeps the rest a proper prefix of it gives the same
    # parse (the same nodes, those ending at the end of the text longer)
    pending: tuple | None = None
    # ``pending`` with whitespace runs that reached the end and the literal at the very end (nothing of it
    # yet): appended whitespace only makes those runs longer, the literal still pending at the new end
    pending_ws: bool = False
    # ``pending`` is a plain literal item of a sequence: the plain literals (str) and whitespace runs (None)
    # after it in that sequence, which text completing the literal meets next (see _literal_chains)
    pending_chain: tuple = ()
    # (where it stopped, its delimiters) when the parse needed more input only because one ``until`` reached
    # the end (nothing else looked at it): text holding no delimiter (and the cut one it stopped before, if
    # any, still cut or grown into text) gives the same parse, that until's text longer
    pending_until: tuple | None = None
    # (``pending_until`` as above, triggers) when besides that ``until`` only ``opener_ahead`` searches that found
    # nothing looked at the end: text that also holds none of the triggers (each such opener's first ``min_cut``
    # characters; no opener, whole or cut past them, can end up ahead without one) gives the same parse
    pending_ahead: tuple | None = None
    # nothing looked at the end of the text (no parser reached it): a longer text gives the very same result
    # (a success that stopped early stays one, with the same nodes, and the text after ``end`` stays unread)
    blind: bool = False

    @property
    def switched(self) -> bool:
        """True if some alternative was abandoned after making visible tagged nodes (``switches`` non-empty)."""
        return bool(self.switches)

    @property
    def success(self) -> bool:
        """True if the result type is SUCCESS."""
        return self.type == ResultType.SUCCESS

    @property
    def need_more_input(self) -> bool:
        """True if the result type is NEED_MORE_INPUT (lenient parse stopped at the end of a partial text)."""
        return self.type == ResultType.NEED_MORE_INPUT

    @property
    def fail(self) -> bool:
        """True if the result type is FAIL."""
        return self.type == ResultType.FAIL

    def visit(self) -> Iterator[AstNode]:
        """All AST nodes, pre-order (a node, then its children in order)."""
        stack = list(reversed(self.nodes))
        while stack:
            node = stack.pop()
            yield node
            if node.children:
                stack.extend(reversed(node.children))

    def tags(self) -> dict[str, str]:
        """``{tag: text}`` of every tagged node; the last one of a tag wins (llama.cpp tag-based mapper)."""
        out: dict[str, str] = {}
        for node in self.visit():
            if node.tag:
                out[node.tag] = node.text(self.text)
        return out


class ParseCache:
    """Memo shared by successive parses of a growing text (see module doc).

    Valid only for one arena, entry point and lenient flag; reset automatically when the text is not an
    extension of the previous one.
    """

    __slots__ = ("text", "memo", "hints", "key", "fast")

    def __init__(self) -> None:
        self.text = ""
        self.memo: dict = {}
        self.hints: dict = {}
        self.key: tuple = ()
        self.fast: tuple | None = None     # (arena, entry, lenient, start, compiled entry) of the last parse

    def fork(self) -> "ParseCache":
        """A copy to parse a longer text with, leaving this one valid for the text it was made on: the memo and
        hints are copied (the entries themselves are never changed once made, so they are shared)."""
        other = ParseCache()
        other.text, other.key, other.fast = self.text, self.key, self.fast
        other.memo, other.hints = dict(self.memo), dict(self.hints)
        return other

    def prepare(self, text: str, key: tuple) -> None:
        """Get ready to parse ``text`` with settings ``key`` (arena / entry / lenient tuple).

        Keeps the memo and hints when ``key`` is unchanged and ``text`` extends the previously parsed text;
        otherwise clears them. Raises nothing.
        """
        if key != self.key or (text is not self.text and not text.startswith(self.text)):
            self.memo = {}
            self.hints = {}
            if key != self.key:
                self.fast = None
            self.key = key
        self.text = text

    def vouch(self, text: str) -> None:
        """The caller vouches that ``text`` extends the text parsed so far (a stream appends): the next
        ``prepare`` of this very object skips the comparison."""
        self.text = text

    def reset(self) -> None:
        """Forget the text, memo, hints and key (the next ``prepare`` starts from scratch)."""
        self.text = ""
        self.memo = {}
        self.hints = {}
        self.key = ()
        self.fast = None


class _Ctx:
    __slots__ = ("text", "n", "lenient", "memo", "hints", "made", "switches", "ends", "cut",
                 "spaces", "base", "chain", "until", "ahead", "triggers")

    def __init__(self, text: str, lenient: bool, memo: dict | None, hints: dict | None):
        self.text = text
        self.n = len(text)
        self.lenient = lenient
        self.memo = memo
        self.hints = hints
        self.made = 0                       # non-empty tagged nodes made so far (outside unfinished atomics)
        self.switches: list[tuple] = []     # see ParseResult.switches
        self.ends = 0                       # how many times a parser looked at the end of the input
        self.cut: tuple | None = None       # (position, literal) of the last literal cut by the end
        self.spaces = 0                     # of the looks at the end: whitespace runs that reached it
        self.base: tuple | None = None      # (nodes, (prefix, parent)) of the last resumed repetition
        self.chain: tuple | None = None     # (cut, what follows that literal in its sequence: _literal_chains)
        self.until: tuple | None = None     # (where it stopped, delimiters) of the last until that reached the end
        self.ahead = 0                      # of the looks at the end: opener_ahead searches that found nothing
        self.triggers: tuple = ()           # what would have made those searches succeed (each opener's first part)


Fn = Callable[[_Ctx, int], tuple]


def parse(arena: _AnyT, text: str, *, lenient: bool = True, start: int = 0, entry: str | None = None,
          cache: ParseCache | None = None) -> ParseResult:
    """Run the arena's root (or the named ``entry``) on ``text`` from ``start``.

    ``lenient`` (default): the text may be a prefix of a longer one (streaming); llama.cpp's chat parse is
    always lenient. ``cache``: reuse work across parses of a growing text. Raises
    :class:`~core.peg.builder.PegError` for an unknown entry; never raises on the text itself.
    """
    if cache is not None:
        fast = cache.fast
        if fast is not None and fast[0] is arena and fast[1] == entry and fast[2] == lenient and fast[3] == start:
            # a stream's next parse: same settings as the last one (what prepare would find)
            root = fast[4]
            if text is not cache.text and not text.startswith(cache.text):
                cache.memo = {}
                cache.hints = {}
            cache.text = text
        else:
            pid = arena.entry_id(entry)
            root = _compiled(arena)[pid]
            cache.prepare(text, (id(arena), pid, lenient, start))
            cache.fast = (arena, entry, lenient, start, root)
        ctx = _Ctx(text, lenient, cache.memo, cache.hints)
    else:
        root = _compiled(arena)[arena.entry_id(entry)]
        ctx = _Ctx(text, lenient, None, None)
    return _result(ctx, root(ctx, start), start, text)


def parse_next(cache: ParseCache, text: str) -> ParseResult | None:
    """The next parse of a stream: :func:`parse` of ``text`` with the arena, entry, lenient flag and start of
    the last parse made with ``cache`` (None when there was none), for a caller that keeps one cache per
    entry (:class:`core.chat.stream.PegStreamSession`). Same result as :func:`parse`; raises nothing of its own."""
    fast = cache.fast
    if fast is None:
        return None
    if text is not cache.text and not text.startswith(cache.text):
        cache.memo = {}
        cache.hints = {}
    cache.text = text
    ctx = _Ctx(text, fast[2], cache.memo, cache.hints)
    start = fast[3]
    return _result(ctx, fast[4](ctx, start), start, text)


def _result(ctx: _Ctx, res: tuple, start: int, text: str) -> ParseResult:
    """The :class:`ParseResult` of the root's result ``res`` (status, end, nodes) over ``text``."""
    st, end, nodes = res
    pending = None
    pending_ws = False
    if st == NMI and ctx.cut is not None:
        if ctx.ends == 1:
            pending = ctx.cut
        elif ctx.ends == ctx.spaces + 1 and ctx.cut[0] == ctx.n and ctx.cut[1][:1] not in _WS_CHARS:
            # whitespace that ran to the end, then the literal: a non-space first character of the literal
            # ends those runs where they ended
            pending = ctx.cut
            pending_ws = True
    chain = ctx.chain
    # (the dataclass's __init__, inlined: one result per parse of a stream's parsing feed)
    r = _new_node(ParseResult)
    r.type = _RESULT_TYPES[st]
    r.start = start
    r.end = end
    r.nodes = nodes if nodes.__class__ is tuple else tuple(nodes)
    r.text = text
    r.switches = frozenset(ctx.switches) if ctx.switches else _NO_SWITCHES
    r.pending = pending
    r.pending_ws = pending_ws
    r.pending_chain = chain[1] if pending is not None and chain is not None and chain[0] is pending else ()
    r.pending_until = ctx.until if st == NMI and ctx.ends == 1 and ctx.until is not None else None
    r.pending_ahead = ((ctx.until, ctx.triggers) if ctx.ahead and st == NMI and ctx.ends == ctx.ahead + 1
                       and ctx.until is not None else None)
    r.blind = ctx.ends == 0
    return r


# ---------------------------------------------------------------------------------------------------------------
# compilation

def compile_arena(arena: _AnyT) -> None:
    """Compile ``arena`` (every node) now if it is not yet: see :meth:`core.peg.builder.Arena.compile`."""
    _compiled(arena)


def _compiled(arena: _AnyT) -> list[Fn]:
    fns = arena._compiled
    if fns is None:
        fns = _Compiler(arena).run()
        arena._compiled = fns
    return fns


class _Compiler:
    def __init__(self, arena: _AnyT):
        self.arena = arena
        self.fns: list[Fn | None] = [None] * len(arena.nodes)
        self.in_progress: set[int] = set()

    def run(self) -> list[Fn]:
        for pid in range(len(self.arena.nodes)):
            self.get(pid)
        return self.fns  # type: ignore[return-value]

    def get(self, pid: int) -> Fn:
        fn = self.fns[pid]
        if fn is not None:
            return fn
        if pid in self.in_progress:
            fns = self.fns

            def forward(ctx: _Ctx, pos: int, _pid: int = pid) -> tuple:
                return fns[_pid](ctx, pos)  # type: ignore[misc]
            return forward
        self.in_progress.add(pid)
        fn = self.make(self.arena.nodes[pid])
        self.in_progress.discard(pid)
        self.fns[pid] = fn
        return fn

    def make(self, node: N.Node) -> Fn:  # noqa: C901 - one branch per combinator
        if isinstance(node, N.Epsilon):
            return lambda ctx, pos: (OK, pos, _EMPTY)
        if isinstance(node, N.Start):
            return lambda ctx, pos: (OK if pos == 0 else FAIL, pos, _EMPTY)
        if isinstance(node, N.End):
            return _make_end()
        if isinstance(node, N.Literal):
            return _make_literal(node.text)
        if isinstance(node, N.Sequence):
            return _make_sequence([self.get(c) for c in node.items], node.id,
                                  _literal_chains([self.arena.nodes[c] for c in node.items]))
        if isinstance(node, N.Choice):
            return _make_choice(node.id, [self.get(c) for c in node.items])
        if isinstance(node, N.Repeat):
            return _make_repeat(node.id, self.get(node.child), node.min, node.max)
        if isinstance(node, N.And):
            return _make_and(self.get(node.child))
        if isinstance(node, N.Not):
            return _make_not(self.get(node.child))
        if isinstance(node, N.Any):
            return _make_any()
        if isinstance(node, N.Space):
            return _make_space()
        if isinstance(node, N.Chars):
            return _make_chars(node)
        if isinstance(node, N.StringContent):
            return _make_string_content(node.id, node.delimiter)
        if isinstance(node, N.Until):
            return _make_until(node.id, node.delimiters)
        if isinstance(node, N.Ahead):
            return _make_ahead(node.id, node.opener, node.min_cut)
        if isinstance(node, (N.Schema, N.Gbnf, N.Ac)):
            return self.get(node.child)
        if isinstance(node, N.Rule):
            if node.native:
                body = _make_native(node.id, node.native)
            else:
                body = self.get(node.child)
            return _make_node(node.id, body, node.name, "")
        if isinstance(node, N.Ref):
            return self.get(self.arena.rule_id(node.name))
        if isinstance(node, N.Atomic):
            return _make_atomic(self.get(node.child))
        if isinstance(node, N.Tag):
            return _make_node(node.id, self.get(node.child), "", node.tag,
                              node.tag not in getattr(self.arena, "quiet_tags", ()))
        raise TypeError(f"unknown parser node {type(node).__name__}")


def _make_end() -> Fn:
    def f(ctx: _Ctx, pos: int) -> tuple:
        if pos >= ctx.n:
            ctx.ends += 1
            return OK, pos, _EMPTY
        return FAIL, pos, _EMPTY
    return f


def _make_literal(lit: str) -> Fn:
    size = len(lit)

    def f(ctx: _Ctx, pos: int) -> tuple:
        text = ctx.text
        if text.startswith(lit, pos):
            return OK, pos + size, _EMPTY
        n = ctx.n
        if n - pos < size and lit.startswith(text[pos:]):
            ctx.ends += 1
            ctx.cut = (pos, lit)
            return (NMI, n, _EMPTY) if ctx.lenient else (FAIL, pos, _EMPTY)
        return FAIL, pos, _EMPTY
    return f


def _concat(ctx: _Ctx, nodes: tuple, ns: tuple) -> tuple:
    """``nodes + ns``, keeping track of where a replayed repetition prefix (``ctx.base``) lands."""
    out = nodes + ns
    b = ctx.base
    if b is not None:
        if ns is b[0]:
            p, parent, off = b[1]
            ctx.base = (out, (p, parent, off + len(nodes)))
        elif nodes is b[0]:
            ctx.base = (out, b[1])
    return out


_RESUMABLE_SEQUENCE = 4   # sequences of at least this many items resume in a stream (see below)


def _literal_chains(items: list) -> list:
    """For each item of a sequence that is a plain literal: the plain literals and whitespace runs that follow
    it in the sequence (a literal as its text, a whitespace run as None), up to the first other item or a
    literal starting with whitespace after a run (the run would take that whitespace); None for other items.
    Streaming uses it (``ParseResult.pending_chain``) to follow a marker's fixed continuation without a parse."""
    out: list = []
    for i, node in enumerate(items):
        if not isinstance(node, N.Literal):
            out.append(None)
            continue
        chain: list = []
        after_space = False
        for nxt in items[i + 1:]:
            if isinstance(nxt, N.Space):
                chain.append(None)
                after_space = True
            elif isinstance(nxt, N.Literal) and nxt.text and not (after_space and nxt.text[0] in _WS_CHARS):
                chain.append(nxt.text)
                after_space = False
            else:
                break
        out.append(tuple(chain))
    return out


def _make_sequence(children: list[Fn], pid: int = -1, chains: list | None = None) -> Fn:
    if not children:
        return lambda ctx, pos: (OK, pos, _EMPTY)
    if chains is None or not any(chains):
        chains = [None] * len(children)

        def f(ctx: _Ctx, pos: int) -> tuple:
            nodes: tuple = _EMPTY
            start = pos
            for child in children:
                st, end, ns = child(ctx, pos)
                if st == FAIL:
                    return FAIL, end if end > start else start, _EMPTY
                if ns:
                    nodes = (nodes + ns if (b := ctx.base) is None or (ns is not b[0] and nodes is not b[0])
                             else _concat(ctx, nodes, ns)) if nodes else ns
                if st == NMI:
                    return NMI, end, nodes
                pos = end
            return OK, pos, nodes
    else:
        f = _make_chained_sequence(children, chains)
    return _resumable_sequence(children, pid, chains, f)


def _note_chain(ctx: _Ctx, pos: int, chain: tuple) -> None:
    """A sequence's item at ``pos`` needs more input: when the end cut a literal right there (``ctx.cut``),
    record the fixed literals and whitespace runs that follow it in the sequence (``ctx.chain``), which the
    streaming fast path reads as ``ParseResult.pending_chain``."""
    cut = ctx.cut
    if cut is not None and cut[0] == pos:
        ctx.chain = (cut, chain)


def _make_chained_sequence(children: list[Fn], chains: list) -> Fn:
    """A sequence with plain literal items (see _literal_chains): one cut by the end names what follows it."""
    def f(ctx: _Ctx, pos: int) -> tuple:
        nodes: tuple = _EMPTY
        start = pos
        for i, child in enumerate(children):
            st, end, ns = child(ctx, pos)
            if st == FAIL:
                return FAIL, end if end > start else start, _EMPTY
            if ns:
                nodes = (nodes + ns if (b := ctx.base) is None or (ns is not b[0] and nodes is not b[0])
                         else _concat(ctx, nodes, ns)) if nodes else ns
            if st == NMI:
                if chains[i]:
                    _note_chain(ctx, pos, chains[i])
                return NMI, end, nodes
            pos = end
        return OK, pos, nodes
    return f


def _resumable_sequence(children: list[Fn], pid: int, chains: list, f: Fn) -> Fn:
    if len(children) < _RESUMABLE_SEQUENCE:
        return f
    count = len(children)

    def resumable(ctx: _Ctx, pos: int) -> tuple:
        # Streaming: as a repetition does, resume after the items an earlier parse of this sequence (same
        # position, a shorter prefix of the text) matched without looking at the end of the input, replaying
        # what they did to the switch bookkeeping: per feed inside a tool call, the items of its opening
        # (``{``, ``"name"``, ``:`` ...) are not matched again.
        hints = ctx.hints
        if hints is None:
            return f(ctx, pos)
        key = (pid, pos, "seq")
        h = hints.get(key)
        made0, sw0 = ctx.made, len(ctx.switches)
        start = pos
        if h is not None:
            i, pos, nodes, made_d, sw = h
            ctx.made += made_d
            if sw:
                ctx.switches.extend(sw)
        else:
            i, nodes = 0, _EMPTY
        e0 = ctx.ends       # a look at the end since here: the items from there on are not settled
        while i < count:
            st, end, ns = children[i](ctx, pos)
            if st != OK:
                break
            if ns:
                nodes = (nodes + ns if (b := ctx.base) is None or (ns is not b[0] and nodes is not b[0])
                         else _concat(ctx, nodes, ns)) if nodes else ns
            pos = end
            i += 1
            if ctx.ends != e0:
                # this item looked at the end: it and the ones after it are not settled (no hints from here)
                while i < count:
                    st, end, ns = children[i](ctx, pos)
                    if st != OK:
                        break
                    if ns:
                        nodes = (nodes + ns if (b := ctx.base) is None or (ns is not b[0] and nodes is not b[0])
                                 else _concat(ctx, nodes, ns)) if nodes else ns
                    pos = end
                    i += 1
                else:
                    return OK, pos, nodes
                break
            if i < count:
                sw = ctx.switches
                hints[key] = (i, pos, nodes, ctx.made - made0, tuple(sw[sw0:]) if len(sw) > sw0 else _EMPTY)
        else:
            return OK, pos, nodes
        if st == FAIL:
            return FAIL, end if end > start else start, _EMPTY
        if ns:
            nodes = (nodes + ns if (b := ctx.base) is None or (ns is not b[0] and nodes is not b[0])
                     else _concat(ctx, nodes, ns)) if nodes else ns
        if chains[i]:
            _note_chain(ctx, pos, chains[i])
        return NMI, end, nodes
    return resumable


def _make_choice(pid: int, children: list[Fn]) -> Fn:
    def f(ctx: _Ctx, pos: int) -> tuple:
        for i, child in enumerate(children):
            made = ctx.made
            r = child(ctx, pos)
            if r[0] != FAIL:
                return r
            if ctx.made != made:
                ctx.switches.append((pid, pos, i))
        return FAIL, pos, _EMPTY
    return f


def _make_repeat(pid: int, child: Fn, lo: int, hi: int) -> Fn:
    if lo == 0 and hi == 1:
        return _make_optional(pid, child)

    def plain(ctx: _Ctx, pos: int) -> tuple:
        start = pos
        n = ctx.n
        count = 0
        nodes: list | None = None
        while hi == -1 or count < hi:
            if pos >= n:
                ctx.ends += 1
                break
            made = ctx.made
            st, end, ns = child(ctx, pos)
            if st == OK:
                if end == pos:
                    break
                if ns:
                    if nodes is None:
                        nodes = list(ns)
                    else:
                        nodes.extend(ns)
                pos = end
                count += 1
                continue
            if st == NMI:
                if nodes is None:
                    return NMI, end, ns
                if ns:
                    nodes.extend(ns)
                return NMI, end, tuple(nodes)
            if ctx.made != made:
                ctx.switches.append((pid, pos, -1))
            break
        out = tuple(nodes) if nodes else _EMPTY
        if count < lo:
            if pos >= n and ctx.lenient:
                return NMI, pos, out
            return FAIL, start, _EMPTY
        return OK, pos, out

    def f(ctx: _Ctx, pos: int) -> tuple:
        hints = ctx.hints
        if hints is None:
            return plain(ctx, pos)
        # Streaming: resume after the items an earlier parse of this repetition (same rule and position, a
        # shorter prefix of the text) matched without looking at the end of the input — they match the same
        # way now — replaying what they did to the switch bookkeeping, as a memoized node does. Per feed this
        # costs the items still open, not every item since the start (repeated tool calls); the items
        # replayed (``prefix``) are a NodeRun, never copied.
        key = (pid, pos, "repeat")
        h = hints.get(key)
        start = pos
        made0 = ctx.made
        switches = ctx.switches
        sw0 = len(switches)
        if h is None:
            count = 0
            prefix: _AnyT = _EMPTY
            parent = None
        else:
            count, pos, prefix, made_d, sw, parent = h
            if made_d:
                ctx.made = made0 + made_d
            if sw:
                switches.extend(sw)
        # settled: the items matched without looking at the end; where they stop (s_pos, s_k, s_made, s_sw) is
        # set with it, and read only once settled > resumed
        resumed = settled = count
        nodes: list | None = None           # nodes of the items matched by this call
        n = ctx.n
        r = None
        while hi == -1 or count < hi:
            if pos >= n:
                ctx.ends += 1
                break
            made = ctx.made
            e = ctx.ends
            st, end, ns = child(ctx, pos)
            touched = ctx.ends != e
            if st == OK:
                if end == pos:
                    break
                if ns:
                    if nodes is None:
                        nodes = list(ns)
                    else:
                        nodes.extend(ns)
                pos = end
                count += 1
                if not touched and settled == count - 1:
                    settled, s_pos, s_k, s_made, s_sw = count, pos, len(nodes) if nodes else 0, ctx.made, len(switches)
                continue
            if st == NMI:
                if nodes is None and prefix is _EMPTY:
                    # the only item, cut by the end: its nodes as they are
                    r = (NMI, end, ns)
                    break
                if ns:
                    if nodes is None:
                        nodes = list(ns)
                    else:
                        nodes.extend(ns)
                if prefix is _EMPTY:
                    r = (NMI, end, tuple(nodes))
                else:
                    # (prefix + tuple(nodes), built without NodeRun.__add__)
                    r = (NMI, end, NodeRun(prefix.head, prefix.run, prefix.k, prefix.tail + tuple(nodes))
                         if nodes else prefix)
                    ctx.base = (r[2], (prefix, parent, 0))
                break
            if ctx.made != made:
                switches.append((pid, pos, -1))
            break
        if settled > resumed:
            if s_k:
                grown = prefix.grown(nodes[:s_k]) if prefix is not _EMPTY else NodeRun(_EMPTY, nodes[:s_k], s_k, _EMPTY)
            else:
                grown = prefix
            hints[key] = (settled, s_pos, grown, s_made - made0, tuple(switches[sw0:s_sw]),
                          None if prefix is _EMPTY else prefix)
        if r is not None:
            return r
        if prefix is _EMPTY:
            out = tuple(nodes) if nodes else _EMPTY
        else:
            out = prefix + tuple(nodes) if nodes else prefix
            ctx.base = (out, (prefix, parent, 0))
        if count < lo:
            if pos >= n and ctx.lenient:
                return NMI, pos, out
            return FAIL, start, _EMPTY
        return OK, pos, out
    return f


def _make_optional(pid: int, child: Fn) -> Fn:
    """``child?``: a repetition of at most one item (no replay from the hints: one item is the child's own
    memoized result). Its nodes are the child's, as they are."""
    def f(ctx: _Ctx, pos: int) -> tuple:
        if pos >= ctx.n:
            ctx.ends += 1
            return OK, pos, _EMPTY
        made = ctx.made
        r = child(ctx, pos)
        st = r[0]
        if st == OK:
            return r if r[1] != pos else (OK, pos, _EMPTY)
        if st == NMI:
            return r
        if ctx.made != made:
            ctx.switches.append((pid, pos, -1))
        return OK, pos, _EMPTY
    return f


def _lookahead(child: Fn, ctx: _Ctx, pos: int) -> int:
    """Run a lookahead's child: its status; what it made or switched does not count (its nodes are
    dropped)."""
    made, switches = ctx.made, len(ctx.switches)
    st = child(ctx, pos)[0]
    ctx.made = made
    del ctx.switches[switches:]
    return st


def _make_and(child: Fn) -> Fn:
    return lambda ctx, pos: (_lookahead(child, ctx, pos), pos, _EMPTY)


def _make_not(child: Fn) -> Fn:
    def f(ctx: _Ctx, pos: int) -> tuple:
        st = _lookahead(child, ctx, pos)
        if st == OK:
            return FAIL, pos, _EMPTY
        if st == NMI:
            return NMI, pos, _EMPTY
        return OK, pos, _EMPTY
    return f


def _make_any() -> Fn:
    def f(ctx: _Ctx, pos: int) -> tuple:
        if pos < ctx.n:
            return OK, pos + 1, _EMPTY
        ctx.ends += 1
        return (NMI, pos, _EMPTY) if ctx.lenient else (FAIL, pos, _EMPTY)
    return f


def _make_space() -> Fn:
    match = _SPACE.match

    def f(ctx: _Ctx, pos: int) -> tuple:
        end = match(ctx.text, pos).end()  # type: ignore[union-attr]
        if end >= ctx.n:
            ctx.ends += 1
            ctx.spaces += 1
        return OK, end, _EMPTY
    return f


def _class_regex(ranges: list[tuple[int, int]], negated: bool) -> str:
    parts = []
    for a, b in ranges:
        if a > b:
            continue
        if a == b:
            parts.append(re.escape(chr(a)))
        else:
            parts.append(re.escape(chr(a)) + "-" + re.escape(chr(b)))
    body = "".join(parts)
    if not body:
        return r"[\s\S]" if negated else r"(?!)"
    return f"[{'^' if negated else ''}{body}]"


def _make_chars(node: N.Chars) -> Fn:
    lo, hi = node.min, node.max
    quant = "{0,}" if hi == -1 else "{0,%d}" % hi
    match = re.compile(_class_regex(node.ranges, node.negated) + quant, re.S).match

    def f(ctx: _Ctx, pos: int) -> tuple:
        end = match(ctx.text, pos).end()  # type: ignore[union-attr]
        count = end - pos
        n = ctx.n
        if end >= n and (hi == -1 or count < hi):
            ctx.ends += 1
        if count < lo:
            if end >= n and ctx.lenient:
                return NMI, end, _EMPTY
            return FAIL, pos, _EMPTY
        return OK, end, _EMPTY
    return f


def _make_string_content(pid: int, delim: str) -> Fn:
    body = string_body_regex(delim).match

    def f(ctx: _Ctx, pos: int) -> tuple:
        hints = ctx.hints
        if hints is None:
            st, end, touched = scan_string_content(ctx.text, pos, ctx.n, ctx.lenient, delim)
        else:
            # Streaming: resume the body scan where the previous parse of this string stopped at the end of
            # its text (a boundary between whole characters and escapes, so scanning on from there ends
            # exactly where a scan from ``pos`` would) instead of re-reading the whole open string per feed.
            frm = hints.get((pid, pos), pos)
            stop = body(ctx.text, frm).end()  # type: ignore[union-attr]
            st, end, touched = scan_string_content(ctx.text, pos, ctx.n, ctx.lenient, delim, stop)
            if touched:
                hints[(pid, pos)] = stop
        if touched:
            ctx.ends += 1
            if pos >= ctx.n:    # a value that starts at the very end: pending like a literal, nothing of it yet
                ctx.cut = (pos, "")
        return st, end, _EMPTY
    return f


def _make_native(pid: int, kind: str) -> Fn:
    def f(ctx: _Ctx, pos: int) -> tuple:
        if ctx.hints is None:
            st, end, touched = scan_json_value(ctx.text, pos, ctx.n, ctx.lenient, kind)
        else:
            st, end, touched = scan_json_value_resumable(ctx.text, pos, ctx.n, ctx.lenient, kind, ctx.hints,
                                                         (pid, pos))
        if touched:
            ctx.ends += 1
            if pos >= ctx.n:    # a value that starts at the very end: pending like a literal, nothing of it yet
                ctx.cut = (pos, "")
        return st, end, _EMPTY
    return f


# a delimiter longer than this (a request's tool name of thousands of characters inside a tag) is matched by
# _PartialScan: the regex's nested groups, one per character, overflow the re module's recursive parser
_NESTED_MAX = 200


class _PartialScan:
    """``search(text, pos)`` as the regex of :func:`_partial_regex` does it, by hand: its match's start or None."""

    __slots__ = ("delims", "longest", "firsts")

    def __init__(self, delims: list[str]):
        self.delims = [d for d in delims if len(d) > 1]
        self.longest = max(len(d) for d in self.delims) - 1
        self.firsts = "".join(sorted({d[0] for d in self.delims}))

    def search(self, text: str, pos: int) -> "_ScanStart | None":
        n = len(text)
        p = max(pos, n - self.longest)
        while p < n:
            # (only where a delimiter's first character stands, and its first characters before the rest)
            p = min((i for i in (text.find(c, p) for c in self.firsts) if i >= 0), default=n)
            if p >= n:
                break
            k = n - p
            near = [d for d in self.delims if k < len(d) and text.startswith(d[:min(k, 8)], p)]
            if any(text.startswith(d[:k], p) for d in near):
                return _ScanStart(p)
            p += 1
        return None


class _ScanStart:
    __slots__ = ("_start",)

    def __init__(self, start: int):
        self._start = start

    def start(self) -> int:
        return self._start


def _partial_regex(delims: list[str]) -> Callable[[str, int], _AnyT] | None:
    """``search(text, pos)`` for the leftmost position from which the rest of ``text`` is a proper prefix of
    some delimiter (``None`` when every delimiter is one character long)."""
    if any(len(d) > _NESTED_MAX for d in delims):
        return _PartialScan(delims).search
    alts = []
    for d in delims:
        s = d[:-1]
        if not s:
            continue
        rx = re.escape(s[-1])
        for ch in reversed(s[:-1]):
            rx = re.escape(ch) + "(?:" + rx + ")?"
        alts.append(rx)
    if not alts:
        return None
    return re.compile("(?:" + "|".join(alts) + r")\Z", re.S).search


def _make_until(pid: int, delimiters: list[str]) -> Fn:
    delims = [d for d in delimiters if d]
    if not delims:
        def rest(ctx: _Ctx, pos: int) -> tuple:
            ctx.ends += 1
            n = ctx.n
            ctx.until = (n if n > pos else pos, ())
            if ctx.lenient:
                return NMI, n if n > pos else pos, _EMPTY
            return OK, n if n > pos else pos, _EMPTY
        return rest

    maxlen = max(len(d) for d in delims)
    partial = _partial_regex(delims)
    dtuple = tuple(delims)

    def partial_start(text: str, lo: int, hi: int) -> int:
        if partial is None or lo >= hi:
            return -1
        m = partial(text, lo)
        return m.start() if (m is not None and m.start() < hi) else -1
    if len(delims) == 1:
        d0 = delims[0]

        def find(text: str, frm: int) -> int:
            return text.find(d0, frm)
    else:
        search = re.compile("|".join(re.escape(d) for d in sorted(delims, key=len, reverse=True))).search

        def find(text: str, frm: int) -> int:
            m = search(text, frm)
            return m.start() if m else -1

    def f(ctx: _Ctx, pos: int) -> tuple:
        text = ctx.text
        n = ctx.n
        hints = ctx.hints
        frm = pos
        if hints is not None:
            h = hints.get((pid, pos))
            if h is not None and h > frm:
                frm = h
        idx = find(text, frm)
        tail = n - maxlen + 1
        if tail < pos:
            tail = pos
        if idx != -1:
            if idx >= tail:
                p = partial_start(text, tail, idx)
                if p != -1:
                    ctx.ends += 1
                    ctx.until = (p, dtuple)
                    return (NMI if ctx.lenient else OK), p, _EMPTY
            return OK, idx, _EMPTY
        ctx.ends += 1
        if hints is not None and tail > frm:
            hints[(pid, pos)] = tail
        p = partial_start(text, tail, n)
        if p == -1:
            p = n
        ctx.until = (p, dtuple)
        return (NMI if ctx.lenient else OK), p, _EMPTY
    return f


def _make_ahead(pid: int, opener: str, min_cut: int) -> Fn:
    """``opener_ahead``: the first ``min_cut`` characters of ``opener`` found (``str.find``) where the opener follows
    whole or the end cuts it; an occurrence followed by anything else is passed over for good. In a stream the next
    search starts where this one left off (the hints): positions before the last ``min_cut - 1`` characters were
    decided, so each feed reads only the new text — the cost per feed does not grow with the output."""
    trigger = opener[:min_cut]
    size = len(opener)
    triggers = (trigger,)

    def f(ctx: _Ctx, pos: int) -> tuple:
        text = ctx.text
        n = ctx.n
        hints = ctx.hints
        frm = pos
        if hints is not None:
            h = hints.get((pid, pos))
            if h is not None and h > frm:
                frm = h
        idx = text.find(trigger, frm)
        while idx != -1:
            if text.startswith(opener, idx):
                return OK, pos, _EMPTY
            if n - idx < size and opener.startswith(text[idx:]):
                ctx.ends += 1      # cut by the end: more text decides
                return OK, pos, _EMPTY
            frm = idx + 1
            idx = text.find(trigger, frm)
        ctx.ends += 1
        ctx.ahead += 1
        if trigger not in ctx.triggers:
            ctx.triggers = ctx.triggers + triggers if ctx.triggers else triggers
        if hints is not None:
            tail = n - min_cut + 1
            hints[(pid, pos)] = tail if tail > frm else frm
        return FAIL, pos, _EMPTY
    return f


def _make_atomic(child: Fn) -> Fn:
    def f(ctx: _Ctx, pos: int) -> tuple:
        made, switches = ctx.made, len(ctx.switches)
        r = child(ctx, pos)
        # inside an atomic nothing was shown before it finished: its switches are harmless
        del ctx.switches[switches:]
        if r[0] != OK:
            ctx.made = made     # nodes of an unfinished atomic are never shown
            if r[0] == NMI and r[2]:
                return NMI, r[1], _EMPTY
        return r
    return f


def _make_node(pid: int, child: Fn, rule: str, tag: str, shows: bool = False) -> Fn:
    """A rule or tag node (``shows``: a non-empty node of this tag counts as visible progress, see
    ``ParseResult.switches``)."""
    def f(ctx: _Ctx, pos: int) -> tuple:
        memo = ctx.memo
        if memo is None:
            st, end, ns = child(ctx, pos)
            if st == FAIL:
                return FAIL, end, _EMPTY
            if shows and end > pos:
                ctx.made += 1
            return st, end, (AstNode(rule, tag, pos, end, ns, st == NMI),)
        key = (pid, pos)
        r = memo.get(key)
        if r is not None:
            if r.__class__ is list:
                # [result, made, switches]: replay what the memoized subtree did to the switch bookkeeping
                ctx.made += r[1]
                if r[2]:
                    ctx.switches.extend(r[2])
                return r[0]
            return r
        e0 = ctx.ends
        made0, switches0 = ctx.made, len(ctx.switches)
        st, end, ns = child(ctx, pos)
        if st == FAIL:
            r = (FAIL, end, _EMPTY)
        else:
            if shows and end > pos:
                ctx.made += 1
            # (AstNode's __init__, inlined: a class call through a Python __init__ costs twice as much, and
            # a stream's parsing feed makes a node per level of the open call)
            node = _new_node(AstNode)
            node.rule = rule
            node.tag = tag
            node.start = pos
            node.end = end
            node.children = ns
            node.partial = st == NMI
            b = ctx.base
            node.base = b[1] if b is not None and ns is b[0] else None
            r = (st, end, (node,))
        if ctx.ends != e0:     # looked at the end: not memoized
            return r
        if ctx.made != made0 or len(ctx.switches) != switches0:
            memo[key] = [r, ctx.made - made0, tuple(ctx.switches[switches0:])]
        else:
            memo[key] = r
        return r
    return f
