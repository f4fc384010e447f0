"""Readable PEG text of a built parser (for the explorer app and error messages).

Notation: ``"lit"``, ``a b`` sequence, ``a / b`` ordered choice, ``x?`` ``x*`` ``x+`` ``x{m,n}``, ``&x`` peek,
``!x`` negative lookahead, ``.`` any character, ``_`` space, ``[a-z]`` classes, ``until("<x>")``, ``rest``,
``str('"')`` string body, ``json``, ``schema<name>(x)``, ``@tag(x)`` tags, ``atomic(x)``, ``$`` end of input,
``ε`` empty. Rules are listed one per line as ``name <- expr`` (``name* <-`` for lazy-grammar triggers).
"""

from __future__ import annotations

import json
from typing import Any as _AnyT

from . import nodes as N
from .gbnf import reachable_rules


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _quant(lo: int, hi: int) -> str:
    if (lo, hi) == (0, 1):
        return "?"
    if (lo, hi) == (0, -1):
        return "*"
    if (lo, hi) == (1, -1):
        return "+"
    if hi == -1:
        return "{%d,}" % lo
    return "{%d}" % lo if lo == hi else "{%d,%d}" % (lo, hi)


def describe_expr(arena: _AnyT, pid: int, depth: int = 1_000_000) -> str:  # noqa: C901
    """One parser node as an expression (rules appear by name)."""
    n = arena.nodes[pid]
    if depth <= 0:
        return "…"
    d = depth - 1

    def sub(c: int) -> str:
        s = describe_expr(arena, c, d)
        if isinstance(arena.nodes[c], (N.Sequence, N.Choice)):
            return "(" + s + ")"
        return s

    if isinstance(n, N.Epsilon):
        return "ε"
    if isinstance(n, N.Start):
        return "^"
    if isinstance(n, N.End):
        return "$"
    if isinstance(n, N.Literal):
        return _q(n.text)
    if isinstance(n, N.Sequence):
        return " ".join(sub(c) for c in n.items) if n.items else "ε"
    if isinstance(n, N.Choice):
        return " / ".join(sub(c) for c in n.items) if n.items else "!ε"
    if isinstance(n, N.Repeat):
        return sub(n.child) + _quant(n.min, n.max)
    if isinstance(n, N.And):
        return "&" + sub(n.child)
    if isinstance(n, N.Not):
        return "!" + sub(n.child)
    if isinstance(n, N.Ahead):
        return f"&…{n.opener[:n.min_cut]!r}"
    if isinstance(n, N.Any):
        return "."
    if isinstance(n, N.Space):
        return "_"
    if isinstance(n, N.Chars):
        return n.pattern + _quant(n.min, n.max)
    if isinstance(n, N.StringContent):
        return f"str({n.delimiter!r})"
    if isinstance(n, N.Until):
        ds = [x for x in n.delimiters if x]
        return "rest" if not ds else "until(" + " | ".join(_q(x) for x in ds) + ")"
    if isinstance(n, N.Schema):
        return f"schema<{n.name}>({describe_expr(arena, n.child, d)})"
    if isinstance(n, N.Rule):
        return n.name
    if isinstance(n, N.Ref):
        return n.name
    if isinstance(n, N.Atomic):
        return f"atomic({describe_expr(arena, n.child, d)})"
    if isinstance(n, N.Tag):
        return f"@{n.tag}({describe_expr(arena, n.child, d)})"
    if isinstance(n, N.Gbnf):
        return describe_expr(arena, n.child, depth)
    if isinstance(n, N.Ac):
        return describe_expr(arena, n.child, depth)
    return type(n).__name__


def describe(arena: _AnyT, entry: str | None = None) -> str:
    """All rules reachable from the root (or ``entry``), then ``root <- expr``. JSON rules are summarized."""
    root = arena.entry_id(entry)
    reach = reachable_rules(arena, root)
    lines = []
    json_rules = {"json-value", "json-object", "json-array", "json-string", "json-number", "json-bool",
                  "json-null"}
    for name, rid in arena.rules.items():
        if name not in reach or name in json_rules:
            continue
        r = arena.nodes[rid]
        star = "*" if r.trigger else ""
        lines.append(f"{name}{star} <- {describe_expr(arena, r.child)}")
    if reach & json_rules:
        lines.append("json-value <- (any JSON value)")
    lines.append(f"root <- {describe_expr(arena, root)}")
    return "\n".join(lines)
