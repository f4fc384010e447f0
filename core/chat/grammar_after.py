"""What may follow a call's JSON arguments without changing the message, read from the grammar.

Streaming fast path (issue 16, P6 "calls"): once a call's verbatim JSON arguments close, the text that follows
— the call's closing literal(s), whitespace, the next call's opening literal(s) up to where its name completes —
changes nothing in the message, yet each piece of it used to need a parse. :class:`GrammarAfter` decides, for
the text after the arguments, whether a parse of the whole text would give the very same message, by running
the PEG from where the arguments' tag ends, with the engine's semantics (:mod:`core.peg.engine`: ordered choice,
greedy repetitions, atomics that drop unfinished nodes, lenient end of input), over a small subset of
combinators. It answers True only when it can prove it; anything it does not model is a "no" (a parse decides).

Exactness argument: the tool-args tag's parse is the same (the value closed), every node still open on the
way out reads no text (grouping and rule nodes), and every node the continuation creates has a tag whose
mapping leaves the message as it is (``tool``, ``tool-open``, ``tool-close`` of a named call with complete
arguments) or lies inside an atomic that stays unfinished (its nodes are dropped). The continuation is the
static path from the tags ``tool-args`` up to the root; where the grammar reaches that tag along several
paths, every path must agree (the one the parse is on is among them). Any failure that would reach a node
begun before the arguments closed (ordered choice retrying, an optional dropping the call) is a "no", as is
any switch (a choice or repetition abandoning shown progress). Source of the semantics: our engine; of the
need: llama.cpp re-parses the whole text per token (``common_chat_peg_parse``), which the stream mirrors.

Two starting points: the ``tool-args`` tags (the stream's JSON-arguments region, once the value closed) and a
rule node the engine memoized (final: a call's wrapper such as ``tool-call`` once ``</tool_call>`` closed it;
the stream's region "after", :meth:`core.chat.stream.PegStreamSession._after_wrapper`). Split: the predicate
says no where a node that was open before the text closes for good (text follows its end): that close is
left to a parse, so that no single parse both closes a call and opens the
next (the costliest parse per call sets the p99 of a stream of calls). Example (Qwen3): after the arguments
``}`` and whitespace stream without a parse, ``}\n`` needs one; after the wrapper closed,
``\n<tool_call>\n{"name": "get_wea`` streams without one, ``"get_weather"`` (the name) needs one.
"""

from __future__ import annotations

import re

from ..peg import nodes as N

OK, NMI, FAIL = 0, 1, 2
_SPACE = re.compile(r"[ \t\n\v\f\r]*").match
# tags whose nodes never change the message when the continuation creates them, given a named current call with
# complete JSON arguments (see module docstring): the call's grouping, a new call's opening (a pending call has
# no name: it is not shown), the close (no quote pending, no brace missing, nothing pending)
_HARMLESS = frozenset({"", "tool", "tool-open", "tool-close"})
# tags allowed on the path above the arguments (their node only grows: no text-dependent action)
_PATH_TAGS = frozenset({"", "tool"})
_MAX_PATHS = 256
_MAX_TEXT = 256
_CACHE_SIZE = 4096


class _No(Exception):
    """The continuation leaves the modelled subset, or the message may change: a parse decides."""


class GrammarAfter:
    """Predicate over the text after a call's JSON arguments closed: True when a parse of the text so far plus
    that text gives the same message (see the module docstring). Built by :func:`grammar_after`; answers are
    memoized per text (the same closing text repeats call after call). Never raises."""

    def __init__(self, arena, paths: list[list[tuple[int, int]]], split: bool = False):
        self.arena = arena
        self.split = split
        self.nodes = arena.nodes
        self.paths = paths
        self.quiet = getattr(arena, "quiet_tags", frozenset())
        self.cache: dict[str, bool] = {}
        self._selected: dict[tuple, "GrammarAfter | None"] = {}

    def select(self, spine: tuple) -> "GrammarAfter | None":
        """The predicate for the ways up whose rule and tag nodes are ``spine`` — ``(rule, tag)`` of each node
        from the top of the parse tree down to the parent of the ``tool-args`` node, as the parse has them —
        or None when no way matches. The ways that differ only in untagged combinators all stay (each must
        agree). Memoized per spine."""
        known = self._selected.get(spine)
        if known is not None or spine in self._selected:
            return known
        nodes = self.nodes
        keep = []
        for path in self.paths:
            sig = []
            for pid, _ in reversed(path):
                nd = nodes[pid]
                if nd.__class__ is N.Rule:
                    sig.append((nd.name, ""))
                elif nd.__class__ is N.Tag:
                    sig.append(("", nd.tag))
            if tuple(sig) == spine:
                keep.append(path)
        out = GrammarAfter(self.arena, keep, self.split) if keep else None
        if len(self._selected) < 64:
            self._selected[spine] = out
        return out

    def __call__(self, text: str) -> bool:
        hit = self.cache.get(text)
        if hit is not None:
            return hit
        if len(text) > _MAX_TEXT:
            return False
        try:
            ok = all(self._path(p, text) for p in self.paths)
        except (_No, RecursionError):
            ok = False
        if len(self.cache) < _CACHE_SIZE:
            self.cache[text] = ok
        return ok

    # -- the continuation, frame by frame -------------------------------------------------------------------
    def _path(self, frames: list[tuple[int, int]], text: str) -> bool:
        self.text, self.n, self.made, self.switches = text, len(text), 0, 0
        pos = 0
        nodes = self.nodes
        for k, (pid, idx) in enumerate(frames):
            node = nodes[pid]
            if self.split and pos < self.n and (node.__class__ is N.Tag or node.__class__ is N.Rule):
                # split: a node that was open before the text closes for good (text follows it) in a parse,
                # not on the fast path — so the parse that closes a call is not also the one that opens the
                # next (one parse doing both is the costliest feed of a stream of calls, and the p99 of such a
                # stream is its costliest parse per call)
                return False
            if isinstance(node, N.Sequence):
                for item in node.items[idx + 1:]:
                    st, pos, bad = self._run(item, pos)
                    if st == FAIL:
                        return False
                    if st == NMI:
                        return self._stop(frames[k + 1:], bad)
                    if bad:
                        return False
            elif isinstance(node, N.Repeat):
                if node.max == 1:
                    continue
                if node.max != -1 or node.min > 1:
                    return False
                st, pos, bad = self._loop(node.child, pos)
                if st == NMI:
                    return self._stop(frames[k + 1:], bad)
                if bad:
                    return False
            elif isinstance(node, N.Tag):
                if node.tag not in _PATH_TAGS:
                    return False
            elif not isinstance(node, (N.Choice, N.Rule, N.Ref, N.Atomic, N.Schema, N.Gbnf, N.Ac)):
                return False
        # the root returned OK: a success covering the whole text maps the same
        return pos >= self.n and self.switches == 0

    def _stop(self, outer: list[tuple[int, int]], bad: int) -> bool:
        """The parse needs more input here: the message is the same unless a node that changes it was made,
        a switch was recorded, or an atomic on the way out drops the nodes it has (the call's own)."""
        if bad or self.switches:
            return False
        nodes = self.nodes
        return not any(isinstance(nodes[pid], (N.Atomic, N.And, N.Not)) for pid, _ in outer)

    def _loop(self, child: int, pos: int) -> tuple[int, int, int]:
        """Further iterations of an unbounded repetition whose current iteration just ended (engine: repeat)."""
        n = self.n
        bad = 0
        while True:
            if pos >= n:
                return OK, pos, bad
            made = self.made
            st, end, b = self._run(child, pos)
            if st == OK:
                if end == pos:
                    return OK, pos, bad
                bad += b
                pos = end
                continue
            if st == NMI:
                return NMI, end, bad + b
            if self.made != made:
                self.switches += 1
            return OK, pos, bad

    def _run(self, pid: int, pos: int) -> tuple[int, int, int]:
        """Run node ``pid`` from ``pos`` as the engine would (lenient): (status, end, nodes made that may
        change the message). Raises _No for a combinator it does not model."""
        node = self.nodes[pid]
        text, n = self.text, self.n
        cls = node.__class__
        if cls is N.Literal:
            lit = node.text
            if text.startswith(lit, pos):
                return OK, pos + len(lit), 0
            if n - pos < len(lit) and lit.startswith(text[pos:]):
                return NMI, n, 0
            return FAIL, pos, 0
        if cls is N.Space:
            return OK, _SPACE(text, pos).end(), 0
        if cls is N.Sequence:
            bad = 0
            for item in node.items:
                st, end, b = self._run(item, pos)
                if st == FAIL:
                    return FAIL, pos, 0
                bad += b
                if st == NMI:
                    return NMI, end, bad
                pos = end
            return OK, pos, bad
        if cls is N.Choice:
            for item in node.items:
                made = self.made
                r = self._run(item, pos)
                if r[0] != FAIL:
                    return r
                if self.made != made:
                    self.switches += 1
            return FAIL, pos, 0
        if cls is N.Repeat:
            if node.min == 0 and node.max == 1:
                if pos >= n:
                    return OK, pos, 0
                made = self.made
                st, end, b = self._run(node.child, pos)
                if st == OK:
                    return (OK, end, b) if end != pos else (OK, pos, 0)
                if st == NMI:
                    return NMI, end, b
                if self.made != made:
                    self.switches += 1
                return OK, pos, 0
            count, bad = 0, 0
            hi = node.max
            start = pos
            while hi == -1 or count < hi:
                if pos >= n:
                    break
                made = self.made
                st, end, b = self._run(node.child, pos)
                if st == OK:
                    if end == pos:
                        break
                    bad += b
                    pos = end
                    count += 1
                    continue
                if st == NMI:
                    return NMI, end, bad + b
                if self.made != made:
                    self.switches += 1
                break
            if count < node.min:
                return (NMI, pos, bad) if pos >= n else (FAIL, start, 0)
            return OK, pos, bad
        if cls is N.Tag or cls is N.Rule:
            if cls is N.Rule and node.native:
                raise _No
            st, end, b = self._run(node.child, pos)
            if st == FAIL:
                return FAIL, end, 0
            if cls is N.Tag:
                if node.tag not in _HARMLESS:
                    b += 1
                if end > pos and node.tag not in self.quiet:
                    self.made += 1
            return st, end, b
        if cls is N.Ref:
            return self._run(self.arena.rule_id(node.name), pos)
        if cls is N.Atomic:
            made, switches = self.made, self.switches
            st, end, b = self._run(node.child, pos)
            self.switches = switches     # (the engine drops the switches inside an atomic)
            if st != OK:
                self.made = made
                return st, end, 0        # unfinished: its nodes are never shown
            return st, end, b
        if cls is N.End:
            return (OK, pos, 0) if pos >= n else (FAIL, pos, 0)
        if cls is N.Schema or cls is N.Gbnf or cls is N.Ac:
            return self._run(node.child, pos)
        raise _No


def _json_value_tag(arena, pid: int) -> bool:
    """Whether the tag ``pid`` wraps exactly a JSON value of the engine's native scanner (through schema,
    GBNF and ``ac`` wrappers and rule references)."""
    node = arena.nodes[arena.nodes[pid].child]
    for _ in range(16):
        if isinstance(node, (N.Schema, N.Gbnf, N.Ac)):
            node = arena.nodes[node.child]
        elif isinstance(node, N.Ref):
            node = arena.nodes[arena.rule_id(node.name)]
        elif isinstance(node, N.Rule):
            if node.native:
                return node.native in ("json-value", "json-object")
            node = arena.nodes[node.child]
        else:
            return False
    return False


def _parents(arena) -> dict[int, list[tuple[int, int]]]:
    """For each node id: the (parent id, index among the parent's items) pairs that reach it."""
    out: dict[int, list[tuple[int, int]]] = {}
    for node in arena.nodes:
        pid = node.id
        if isinstance(node, (N.Sequence, N.Choice)):
            kids = list(node.items)
        elif isinstance(node, N.Ref):
            try:
                kids = [arena.rule_id(node.name)]
            except Exception:  # noqa: BLE001 - an unresolved reference reaches nothing
                kids = []
        elif isinstance(node, N.Rule) and node.native:
            kids = []
        else:
            c = getattr(node, "child", -1)
            kids = [c] if isinstance(c, int) and c >= 0 else []
        for i, c in enumerate(kids):
            out.setdefault(c, []).append((pid, i))
    return out


def grammar_after(arena, rule: str | None = None) -> "GrammarAfter | None":
    """The :class:`GrammarAfter` of ``arena`` for what follows its ``tool-args`` tags (``rule`` None; split:
    it stops where the call's wrappers close), or the rule ``rule`` (a call's wrapper that closed: what
    follows it up to the next call's name), or None when there is none or the ways from it up to the root
    are too many or recursive. Built once per arena and target (kept on the arena)."""
    known = getattr(arena, "_grammar_after", None)
    if known is None:
        known = {}
        try:
            arena._grammar_after = known
        except AttributeError:  # pragma: no cover
            pass
    if rule in known and rule != "":
        return known[rule]
    result = None
    try:
        parents = known.get("")     # (a rule name is never empty: the parents map is kept under "")
        if parents is None:
            parents = known[""] = _parents(arena)
        root = arena.entry_id(None)
        paths: list[list[tuple[int, int]]] = []
        if rule is None:
            targets = [nd.id for nd in arena.nodes if isinstance(nd, N.Tag) and nd.tag == "tool-args"]
            # the continuation starts where the tag ends, which is where its JSON value ends only when the
            # tag is the value itself (through schema wrappers): any other shape, and no predicate at all
            for t in targets:
                if not _json_value_tag(arena, t):
                    raise _No
        else:
            targets = [arena.rule_id(rule)]

        def up(pid: int, acc: list[tuple[int, int]], seen: frozenset) -> None:
            if len(paths) > _MAX_PATHS:
                raise _No
            if pid == root:
                paths.append(acc)
                return
            for parent in parents.get(pid, ()):
                if parent[0] in seen:
                    raise _No       # a recursive way up: not modelled
                up(parent[0], acc + [parent], seen | {parent[0]})

        for t in targets:
            up(t, [], frozenset({t}))
        if paths:
            result = GrammarAfter(arena, paths, split=True)
    except (_No, RecursionError, Exception):  # noqa: BLE001 - an optimisation: no fast path then
        result = None
    if len(known) < 64:
        known[rule] = result
    return result
