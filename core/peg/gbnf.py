"""GBNF emission from a built parser (llama.cpp ``common_peg_arena::build_grammar``, parser notes §4.2-4.3).

One GBNF rule per reachable PEG rule; the root is the parser root (non-lazy) or the sorted trigger rules
(lazy: only the tool-call part of the output is constrained). Per combinator:

* literal -> quoted string; sequence -> children joined by spaces (a nested choice/sequence in parentheses);
  choice -> ``a | b``; repetition -> ``?``, ``*``, ``+``, ``{m,n}``; space -> the ``space`` rule; any -> ``.``;
  chars -> the class as written; string content -> an escape-aware character loop; eps/start/end and the
  lookaheads emit nothing (the grammar over-approximates);
* ``until(D...)`` -> an Aho-Corasick *exclusion* automaton (rules ``until-<id>``, ``until-<id>-NN``) that can
  never produce a delimiter; ``ac(p, D...)`` -> an *inclusion* automaton (``ac-<id>...``) running through the
  first delimiter;
* ``schema(p, name, s)`` -> the JSON-schema rules of ``s`` (:class:`core.grammar.converter.GrammarBuilder`),
  unless the schema node delegates to its child (no schema, or a raw string-capable schema);
* tags and atomics are transparent; ``gbnf(p, text)`` emits ``text``.
"""

from __future__ import annotations

from typing import Any as _AnyT

from ..grammar.converter import GrammarBuilder, format_literal
from ..grammar.json_schema import may_be_string
from . import nodes as N


def _escape_class_char(c: int) -> str:
    ch = chr(c)
    if ch in "-][\\":
        return "\\" + ch
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if 0x20 <= c <= 0x7E:
        return ch
    if c <= 0xFF:
        return "\\x%02X" % c
    if c <= 0xFFFF:
        return "\\u%04X" % c
    return "\\U%08X" % c


def _char_class(chars: list[str], negate: bool) -> str:
    return ("[^" if negate else "[") + "".join(_escape_class_char(ord(c)) for c in chars) + "]"


class AhoCorasick:
    """Aho-Corasick automaton over code points of ``words`` (llama.cpp ``common_aho_corasick``).

    States are trie nodes in insertion order (0 = root); ``terminal(s)``: some word ends at ``s`` (directly or
    through a suffix link); ``next(s, c)`` follows failure links.
    """

    def __init__(self, words: list[str]):
        self.children: list[dict[str, int]] = [{}]
        self.pattern: list[int] = [-1]
        count = 0
        for w in words:
            cur = 0
            for ch in w:
                nxt = self.children[cur].get(ch)
                if nxt is None:
                    nxt = len(self.children)
                    self.children.append({})
                    self.pattern.append(-1)
                    self.children[cur][ch] = nxt
                cur = nxt
            if self.pattern[cur] < 0:
                self.pattern[cur] = count
                count += 1
        n = len(self.children)
        self.fail = [0] * n
        order: list[int] = []
        queue = [0]
        qi = 0
        while qi < len(queue):
            u = queue[qi]
            qi += 1
            order.append(u)
            for ch in sorted(self.children[u]):
                v = self.children[u][ch]
                if u != 0:
                    f = self.fail[u]
                    while f and ch not in self.children[f]:
                        f = self.fail[f]
                    t = self.children[f].get(ch)
                    self.fail[v] = t if (t is not None and t != v) else 0
                queue.append(v)
        self.match = [-1] * n
        for u in order:
            self.match[u] = self.pattern[u] if self.pattern[u] >= 0 else (self.match[self.fail[u]] if u else -1)
        self.alphabet = sorted({ch for node in self.children for ch in node})

    def terminal(self, s: int) -> bool:
        """True if state ``s`` ends (as itself or by its failure links) at one of the words."""
        return self.match[s] >= 0

    def next(self, s: int, ch: str) -> int:
        """Automaton state reached from state ``s`` on character ``ch``.

        Follows failure links until a state has a ``ch`` edge; ``0`` (the root) if none has.
        """
        while s and ch not in self.children[s]:
            s = self.fail[s]
        return self.children[s].get(ch, 0)


def _ac_grammar(builder: GrammarBuilder, prefix: str, words: list[str], including: bool) -> str:
    ac = AhoCorasick(words)

    def name(s: int) -> str:
        if s == 0:
            return prefix
        num = str(s)
        return prefix + "-" + ("0" + num if len(num) == 1 else num)

    for q in range(len(ac.children)):
        if ac.terminal(q):
            continue
        buckets: dict[int, list[str]] = {}
        completing: list[str] = []
        specific: list[str] = []
        for c in ac.alphabet:
            d = ac.next(q, c)
            if ac.terminal(d):
                completing.append(c)
                specific.append(c)
            elif d != 0:
                buckets.setdefault(d, []).append(c)
                specific.append(c)
        if including:
            alts = []
            if completing:
                alts.append(_char_class(completing, False))
            for d in sorted(buckets):
                alts.append(_char_class(buckets[d], False) + " " + name(d))
            alts.append(_char_class(specific, True) + " " + name(0))
            rhs = " | ".join(alts)
        else:
            rhs = "|"
            for d in sorted(buckets):
                rhs += " " + _char_class(buckets[d], False) + " " + name(d) + " |"
            rhs += " " + _char_class(specific, True) + " " + name(0)
        builder.add_rule(name(q), rhs)
    if ac.terminal(0):
        builder.add_rule(prefix, "|")
    return name(0)


def _quantifier(lo: int, hi: int) -> str:
    if lo == 0 and hi == 1:
        return "?"
    if lo == 0 and hi == -1:
        return "*"
    if lo == 1 and hi == -1:
        return "+"
    if hi == -1:
        return "{%d,}" % lo
    if lo == hi:
        return "" if lo == 1 else "{%d}" % lo
    return "{%d,%d}" % (lo, hi)


def _schema_delegates(node: N.Schema) -> bool:
    return node.schema is None or (node.raw and may_be_string(node.schema))


class _Emitter:
    def __init__(self, arena: _AnyT, builder: GrammarBuilder):
        self.arena = arena
        self.builder = builder

    def effective(self, pid: int) -> N.Node:
        nodes = self.arena.nodes
        while True:
            n = nodes[pid]
            if isinstance(n, (N.Tag, N.Atomic)):
                pid = n.child
            elif isinstance(n, N.Schema) and _schema_delegates(n):
                pid = n.child
            elif isinstance(n, N.Choice) and pid in getattr(self.arena, "repair_choices", ()):
                pid = next(c for c in n.items if not self.is_repair(c))
            else:
                return n

    def is_value_hook(self, pid: int) -> bool:
        """Whether node ``pid`` is a value hook's tag (:data:`N.VALUE_HOOK_PREFIX`): grammar-transparent."""
        n = self.arena.nodes[pid]
        return isinstance(n, N.Tag) and n.tag.startswith(N.VALUE_HOOK_PREFIX)

    def is_repair(self, pid: int) -> bool:
        """:func:`is_repair_variant` in this arena."""
        return is_repair_variant(self.arena, pid)

    def gbnf(self, pid: int) -> str:  # noqa: C901 - one branch per combinator
        n = self.arena.nodes[pid]
        if isinstance(n, (N.Epsilon, N.Start, N.End, N.And, N.Not, N.Ahead)):
            return ""
        if isinstance(n, N.Literal):
            return format_literal(n.text)
        if isinstance(n, N.Sequence):
            parts = []
            for c in n.items:
                g = self.gbnf(c)
                if not g:
                    continue
                eff = self.effective(c)
                if isinstance(eff, N.Choice) or (isinstance(eff, N.Sequence) and not self.is_value_hook(c)):
                    g = "(" + g + ")"
                parts.append(g)
            return " ".join(parts)
        if isinstance(n, N.Choice) and pid in getattr(self.arena, "repair_choices", ()):
            return self.gbnf(next(c for c in n.items if not self.is_repair(c)))   # its parent adds any parentheses
        if isinstance(n, N.Choice):
            parts = []
            items = [c for c in n.items if not self.is_repair(c)]
            # an alternative declared parse-only (gbnf(..., "")) is not in the grammar, unless it is the only one
            items = [c for c in items if not _parse_only(self.arena, c)] or items
            for c in items or n.items:
                g = self.gbnf(c)
                if isinstance(self.effective(c), N.Choice):
                    g = "(" + g + ")"
                parts.append(g)
            return " | ".join(parts)
        if isinstance(n, N.Repeat):
            g = self.gbnf(n.child)
            if not g:
                return ""
            inner = self.effective(n.child)
            if n.min == 0 and isinstance(inner, N.Until) and not [d for d in inner.delimiters if d]:
                return g  # optional(rest()): ".*" already matches nothing; ".*?" reads as a lazy star to a reader
            if isinstance(self.effective(n.child), (N.Choice, N.Sequence)):
                g = "(" + g + ")"
            return g + _quantifier(n.min, n.max)
        if isinstance(n, N.Any):
            return "."
        if isinstance(n, N.Space):
            return "space"
        if isinstance(n, N.Chars):
            pattern = n.pattern if n.pattern.startswith("[") else "[" + n.pattern + "]"
            return pattern + _quantifier(n.min, n.max)
        if isinstance(n, N.StringContent):
            d = n.delimiter
            dq = "\\" + d if d in "-][\\" else d
            return '( [^' + dq + '\\\\] | "\\\\" ( [' + dq + '\\\\/ bfnrt] | "u" [0-9a-fA-F]{4} ) )*'
        if isinstance(n, N.Until):
            delims = [d for d in n.delimiters if d]
            if not delims:
                return ".*"
            return _ac_grammar(self.builder, f"until-{pid}", delims, including=False)
        if isinstance(n, N.Ac):
            return _ac_grammar(self.builder, f"ac-{pid}", [d for d in n.delimiters if d], including=True)
        if isinstance(n, N.Schema):
            if _schema_delegates(n):
                return self.gbnf(n.child)
            return self.builder.add_schema(n.name, n.schema)
        if isinstance(n, (N.Rule, N.Ref)):
            return n.name
        if isinstance(n, (N.Tag, N.Atomic)):
            return self.gbnf(n.child)
        if isinstance(n, N.Gbnf):
            return n.grammar
        raise TypeError(f"unknown parser node {type(n).__name__}")


def is_repair_variant(arena: _AnyT, pid: int) -> bool:
    """Whether node ``pid`` is (under atomic / tag wrappers) a ``repair:NAME`` tag: a variant the parser
    accepts for a tolerance repair (:mod:`core.chat.repairs`). Such an alternative of a choice is left out of
    the grammar when another one remains — a grammar asks for the template's own format, the repairs only widen
    what the parser reads."""
    nodes = arena.nodes
    while True:
        n = nodes[pid]
        if isinstance(n, N.Tag) and n.tag.startswith("repair:"):
            return True
        if not isinstance(n, (N.Tag, N.Atomic)):
            return False
        pid = n.child


def reachable_rules(arena: _AnyT, start: int, skip_repairs: bool = False) -> set[str]:
    """Names of the rules reachable from node ``start`` (following children and references; with
    ``skip_repairs`` not into the repair alternatives of a choice, which the grammar leaves out)."""
    seen: set[str] = set()
    visited: set[int] = set()
    stack = [start]
    nodes = arena.nodes
    while stack:
        pid = stack.pop()
        if pid in visited:
            continue
        visited.add(pid)
        n = nodes[pid]
        if isinstance(n, N.Rule):
            seen.add(n.name)
        if isinstance(n, N.Ref):
            stack.append(arena.rule_id(n.name))
        elif skip_repairs and isinstance(n, N.Choice):
            kept = [c for c in n.items if not is_repair_variant(arena, c)]
            stack.extend(kept or n.items)
        else:
            stack.extend(n.children())
    return seen


def build_grammar(arena: _AnyT, lazy: bool = False, builder: GrammarBuilder | None = None) -> str:
    """GBNF text for ``arena`` (rules sorted by name, ``root`` included, ``space`` always present).

    ``lazy``: root = the trigger rules (sorted, ``|``-joined) and only what they reach.
    ``builder``: an existing rule table to add to (e.g. shared with other schemas).
    """
    gb = builder if builder is not None else GrammarBuilder()
    em = _Emitter(arena, gb)
    rules = arena.rules
    if lazy:
        reach: set[str] = set()
        for name, rid in rules.items():
            r = arena.nodes[rid]
            if isinstance(r, N.Rule) and r.trigger:
                reach.add(name)
                reach |= reachable_rules(arena, rid, skip_repairs=True)
    else:
        reach = reachable_rules(arena, arena.root, skip_repairs=True) if arena.root >= 0 else set()
    for name, rid in rules.items():
        if name in reach:
            r = arena.nodes[rid]
            if isinstance(r, N.Rule):
                gb.add_rule(r.name, em.gbnf(r.child))
    if lazy:
        triggers = sorted(r.name for r in (arena.nodes[i] for i in rules.values())
                          if isinstance(r, N.Rule) and r.trigger)
        gb.add_rule("root", " | ".join(triggers))
    elif arena.root >= 0:
        gb.add_rule("root", em.gbnf(arena.root))
    return gb.format()


def _parse_only(arena: _AnyT, pid: int) -> bool:
    """A ``gbnf(p, "")`` node: the parse reads it, the grammar leaves it out."""
    n = arena.nodes[pid]
    return isinstance(n, N.Gbnf) and n.grammar == ""
