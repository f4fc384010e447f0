"""Whitespace in exported delimiter patterns, placed so a search stays linear (checked by :mod:`core.export.redos`).

The mapping (:mod:`core.export.response_template`) makes every marker's outer whitespace optional (``\\s*X\\s*``)
and joins markers and optional sections, which leaves ``\\s*\\s*``, ``\\s*(?:\\s*X\\s*)?\\s*Y`` and
``(?:\\s*X\\s*)+``: two runs that can take the same spaces, tried in every split before a search fails. Here a
pattern is read into a small tree of atoms and groups and rewritten:

* a ``\\s*`` that every path reaches right after another ``\\s*`` is dropped (the earlier one takes the same
  spaces): ``\\s*(?:\\s*X\\s*)?\\s*Y`` becomes ``\\s*(?:X\\s*)?Y``, ``\\s*\\s*`` becomes ``\\s*``; a repeated group
  that starts and ends with ``\\s*`` gets the leading one hoisted before it: ``\\s*(?:X\\s*)+``;
* a lookahead's trailing ``\\s*`` is dropped (it can always match nothing);
* a delimiter's leading ``\\s*`` (also inside a leading optional section, alternative or lookahead) is dropped: a
  search tries every start, and a leading run makes each start inside a long run of spaces rescan the rest.
  The spaces then stay at the end of the region before the delimiter, where the consumers' ``text`` parser
  strips them and the ``json``, ``xml-inline`` and ``python-call-list`` parsers skip them.

* a ``\\s*`` inside an optional part a delimiter may start with (``(?:<section>\\s*)?<call>``) becomes
  ``\\s{0,1000}``: the ``regex`` module's partial search, which transformers runs while streaming, is quadratic on
  an unbounded run there (:mod:`core.export.redos`, ``PARTIAL``); more than 1,000 whitespace characters between a
  section opener and a call opener leave the section opener in the text before.

Both keep the set of texts a delimiter matches where it is anchored (``\\A``) and the text a region yields
after those parsers; a ``\\s*`` inside a capturing group's edge is left alone (it is part of the capture).

Then, for what transformers' streaming parser pays on every chunk (each feed searches the held-back text again
in the ``regex`` module's partial mode), rewrites that keep every match, group and partial-match start:

* every run gets an upper bound (:func:`_bound_runs`);
* a bounded one-character run after which every way on must first consume a character outside its class is
  made possessive (:func:`_possessive`): ``<|tool_calls|>\\s{0,1000}+``, ``(?P<id>[^\\s<>]{1,256}+)<|name|>`` —
  no shorter length of it could let the rest match, so none is tried;
* optional groups a delimiter starts with, before a lookbehind guard, become one alternation
  (:func:`_spread_leading_optionals`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

WS = r"\s*"


@dataclass
class _Atom:
    text: str  # one atom with its quantifier: "\s*", "a", "\(", "[^{]*?", "\Z"

    @property
    def is_ws(self) -> bool:
        return self.text == WS


@dataclass
class _Group:
    open: str  # "(", "(?:", "(?P<name>", "(?=", "(?!", "(?<=", "(?<!"
    alts: list[list[Any]] = field(default_factory=list)
    close: str = ")"  # ")" plus its quantifier

    @property
    def quant(self) -> str:
        return self.close[1:]

    @property
    def capturing(self) -> bool:
        return self.open == "(" or self.open.startswith("(?P<")

    @property
    def lookahead(self) -> bool:
        return self.open == "(?="


def _quant(p: str, i: int) -> int:
    """End of the quantifier starting at ``p[i]`` (``i`` when there is none)."""
    if i < len(p) and p[i] in "*+?":
        i += 1
    elif i < len(p) and p[i] == "{":
        j = p.find("}", i)
        if j < 0:
            return i
        i = j + 1
    else:
        return i
    if i < len(p) and p[i] in "?+":
        i += 1
    return i


def parse(p: str) -> list[list[Any]]:
    """The alternatives of ``p`` as lists of :class:`_Atom` / :class:`_Group`."""
    stack: list[_Group] = [_Group("")]
    stack[0].alts.append([])
    i = 0
    while i < len(p):
        c = p[i]
        if c == "\\":
            j = _quant(p, i + 2)
            stack[-1].alts[-1].append(_Atom(p[i:j]))
            i = j
        elif c == "[":
            j = i + 1
            if j < len(p) and p[j] == "^":
                j += 1
            if j < len(p) and p[j] == "]":
                j += 1
            while j < len(p) and p[j] != "]":
                j += 2 if p[j] == "\\" else 1
            k = _quant(p, j + 1)
            stack[-1].alts[-1].append(_Atom(p[i:k]))
            i = k
        elif c == "(":
            if p.startswith("(?P<", i):
                j = p.index(">", i) + 1
            elif p.startswith(("(?<=", "(?<!"), i):
                j = i + 4
            elif p.startswith(("(?:", "(?=", "(?!", "(?>"), i):
                j = i + 3
            else:
                j = i + 1
            g = _Group(p[i:j])
            g.alts.append([])
            stack[-1].alts[-1].append(g)
            stack.append(g)
            i = j
        elif c == ")":
            j = _quant(p, i + 1)
            stack[-1].close = p[i:j]
            stack.pop()
            i = j
        elif c == "|":
            stack[-1].alts.append([])
            i += 1
        else:
            j = _quant(p, i + 1)
            stack[-1].alts[-1].append(_Atom(p[i:j]))
            i = j
    return stack[0].alts


def render(alts: list[list[Any]]) -> str:
    """The pattern text of a parsed tree."""
    return "|".join("".join(_render(e) for e in seq) for seq in alts)


def _render(e: Any) -> str:
    return e.text if isinstance(e, _Atom) else e.open + render(e.alts) + e.close


def _zero_width(e: _Atom) -> bool:
    return e.text in (r"\Z", r"\b", r"\B", "$")


def _ends_ws(seq: list[Any], ws_before: bool) -> bool:
    """Whether every path through ``seq`` ends right after a ``\\s*`` (``ws_before``: the text before did)."""
    ws = ws_before
    for e in seq:
        if isinstance(e, _Atom):
            ws = True if e.is_ws else ws if _zero_width(e) else False
        elif e.open.startswith("(?") and e.open[2] in "=!<":
            continue
        else:
            ends = all(_ends_ws(a, ws) for a in e.alts)
            ws = (ws and ends) if e.quant[:1] in ("?", "*") else ends
    return ws


def _dedupe(seq: list[Any], ws: bool) -> tuple[list[Any], bool]:
    """``seq`` without a ``\\s*`` that follows another on every path; returns it and whether it ends after one."""
    out: list[Any] = []
    for e in seq:
        if isinstance(e, _Atom):
            if e.is_ws:
                if ws:
                    continue
                ws = True
            elif e.text == r"\A":
                ws = False
            elif not _zero_width(e):
                ws = False
            out.append(e)
            continue
        if e.open in ("(?!", "(?<=", "(?<!", "(?>"):
            out.append(e)  # left as written; zero width or atomic
            continue
        if e.lookahead:  # (?=X\s*) is (?=X)
            e.alts = [_drop_trailing_ws(_dedupe(a, ws)[0]) for a in e.alts]
            out.append(e)
            continue
        q = e.quant[:1]
        start = ws and not e.capturing
        if q in ("+", "*") and not start and not e.capturing \
                and all(a[:1] and isinstance(a[0], _Atom) and a[0].is_ws for a in e.alts) \
                and all(_ends_ws(a, False) for a in e.alts):
            out.append(_Atom(WS))  # hoisted: (?:\s*X\s*)+ -> \s*(?:X\s*)+
            start = True
        new, ends = [], []
        for a in e.alts:
            d, end = _dedupe(a, start)
            new.append(d)
            ends.append(end)
        e.alts = new
        end_ws = all(ends)
        ws = (ws and end_ws) if q in ("?", "*") else end_ws
        out.append(e)
    return out, ws


def _drop_trailing_ws(seq: list[Any]) -> list[Any]:
    while seq and isinstance(seq[-1], _Atom) and seq[-1].is_ws:
        seq = seq[:-1]
    return seq


def _strip_leading(seq: list[Any]) -> list[Any]:
    """``seq`` without the ``\\s*`` it can start with (also inside leading optional sections, alternatives and
    lookaheads), up to its first element that always consumes text."""
    out = list(seq)
    i = 0
    while i < len(out):
        e = out[i]
        if isinstance(e, _Atom):
            if e.is_ws:
                del out[i]
                continue
            return out  # \A, a literal, a class: the pattern starts here
        if e.capturing or e.open in ("(?!", "(?<=", "(?<!", "(?>"):
            return out
        e.alts = [_strip_leading(a) for a in e.alts]
        if not (e.lookahead or e.quant[:1] in ("?", "*") or any(_nullable(a) for a in e.alts)):
            return out
        i += 1
    return out


def _nullable(seq: list[Any]) -> bool:
    for e in seq:
        if isinstance(e, _Atom):
            if not (e.is_ws or _zero_width(e) or e.text[-1:] in "*?" and not e.text.endswith("\\?")):
                return False
        elif not (e.open.startswith("(?") and e.open[2] in "=!<") and e.quant[:1] not in ("?", "*") \
                and not any(_nullable(a) for a in e.alts):
            return False
    return True


WS_BOUND = 1000
"""Most whitespace characters one ``\\s`` run of a delimiter takes (``\\s*`` is written ``\\s{0,1000}``)."""
RUN_BOUND = 256
"""Most characters any other run of a delimiter takes: a tool name, a call id, a recipient, the attributes or
junk before a call's arguments (``[^\\s<>]+?`` is written ``[^\\s<>]{1,256}?``). Four times the 64 characters
OpenAI allows in a function name; the longest name or id in the reference cases and tests is 28."""
REPEAT_BOUND = 4
"""Most repeats of a repeated multi-character group (``(?:<|START_RESPONSE|>\\s*)+``: the opener from the
generation prompt and once more from the model is two)."""


def _bounded_quant(q: str, bound: int) -> str:
    """The quantifier ``q`` with an upper bound of at least ``bound`` when it has none (lazy or possessive kept)."""
    if not _unbounded_quant(q):
        return q
    core, mode = (q[:-1], q[-1]) if len(q) > 1 and q[-1] in "?+" else (q, "")
    lo = {"*": 0, "+": 1}[core] if core in ("*", "+") else int(core[1:-2])
    return "{%d,%d}%s" % (lo, max(lo, bound), mode)


def _one_char_body(g: _Group) -> bool:
    """Whether each repeat of ``g`` takes exactly one character: every alternative is lookarounds, then one
    unquantified atom (``(?:(?!X).)``, ``(?:a|b)``)."""
    for a in g.alts:
        body = [e for e in a if not (isinstance(e, _Group) and e.open.startswith("(?") and e.open[2] in "=!<")]
        if len(body) != 1 or not isinstance(body[0], _Atom) or _quant_start(body[0].text) != len(body[0].text):
            return False
    return True


def _bound_runs(seq: list[Any]) -> list[Any]:
    """``seq`` with every quantifier that has no upper bound given one (:data:`WS_BOUND`, :data:`RUN_BOUND`,
    :data:`REPEAT_BOUND`), in groups and lookarounds too."""
    out: list[Any] = []
    for e in seq:
        if isinstance(e, _Atom):
            i = _quant_start(e.text)
            base = e.text[:i]
            out.append(_Atom(base + _bounded_quant(e.text[i:], WS_BOUND if base == r"\s" else RUN_BOUND)))
            continue
        e.alts = [_bound_runs(a) for a in e.alts]
        if e.quant:
            if _one_char_body(e):
                ws = all(x.text == r"\s" for a in e.alts for x in a if isinstance(x, _Atom))
                bound = WS_BOUND if ws else RUN_BOUND
            else:
                bound = REPEAT_BOUND
            e.close = ")" + _bounded_quant(e.quant, bound)
        out.append(e)
    return out


def _bound_leading(seq: list[Any]) -> list[Any]:
    """``seq`` with each ``\\s*`` inside the optional parts it may start with bounded first, so that
    :func:`_hide_required` does not count them as parts of unbounded length."""
    for e in seq:
        if isinstance(e, _Atom):
            if _zero_width(e):
                continue
            return seq
        free = e.lookahead or e.open in ("(?!", "(?<=", "(?<!") or e.quant[:1] in ("?", "*") \
            or any(_nullable(a) for a in e.alts)
        if not free:
            return seq
        e.alts = [_bound_ws(a) for a in e.alts]
    return seq


def _bound_ws(seq: list[Any]) -> list[Any]:
    out = []
    for e in seq:
        if isinstance(e, _Atom):
            out.append(_Atom(r"\s{0,%d}" % WS_BOUND) if e.is_ws else e)
        else:
            e.alts = [_bound_ws(a) for a in e.alts]
            out.append(e)
    return out


_CLASS_ESCAPES = frozenset("sSdDwWbBAZ")
NEVER = "(?!)"  # the empty negative lookahead: an alternative that never matches


def _literal(e: Any) -> bool:
    """Whether ``e`` is one literal character, unquantified (``a``, ``\\|``, ``\\n``)."""
    if not isinstance(e, _Atom):
        return False
    t = e.text
    if t.startswith("\\"):
        return len(t) == 2 and t[1] not in _CLASS_ESCAPES and not t[1].isdigit()
    return len(t) == 1 and t not in ".^$"


def _unbounded(e: Any) -> bool:
    """Whether ``e`` can match texts of any length."""
    if isinstance(e, _Atom):
        return _unbounded_quant(e.text[_quant_start(e.text):])
    if e.open.startswith("(?") and e.open[2] in "=!<":
        return False
    return _unbounded_quant(e.quant) or any(_unbounded(x) for a in e.alts for x in a)


def _quant_start(atom: str) -> int:
    """Where the quantifier of an atom's text starts (its length when it has none)."""
    if atom.startswith("["):
        i = 1 + (atom[1:2] == "^")
        i += atom[i:i + 1] == "]"
        while i < len(atom) and atom[i] != "]":
            i += 2 if atom[i] == "\\" else 1
        return i + 1
    return 2 if atom.startswith("\\") else 1


def _unbounded_quant(q: str) -> bool:
    return q[:1] in ("*", "+") or q.startswith("{") and q.rstrip("?+").endswith(",}")


def _starts_literal(seq: list[Any]) -> bool:
    """Whether every match of ``seq`` begins with one literal character (lookarounds before it allowed)."""
    for e in seq:
        if isinstance(e, _Atom):
            return _literal(e)
        if e.open.startswith("(?") and e.open[2] in "=!<":
            continue
        return len(e.alts) == 1 and e.quant[:1] not in ("?", "*", "{") and _starts_literal(e.alts[0])
    return False


def _hide_required(seq: list[Any], after: bool) -> tuple[list[Any], bool]:
    """``seq`` with each literal text that every match needs after a part of unbounded length written as
    ``(?:TEXT|(?!))``; returns it and whether an unbounded part has been passed."""
    out: list[Any] = []
    i = 0
    while i < len(seq):
        e = seq[i]
        if after and _literal(e):
            j = i
            while j < len(seq) and _literal(seq[j]):
                j += 1
            out.append(_Group("(?:", [seq[i:j], [_Atom(NEVER)]]))
            i = j
            continue
        if isinstance(e, _Group) and len(e.alts) == 1 and not (e.open.startswith("(?") and e.open[2] in "=!<") \
                and e.quant[:1] not in ("?", "*", "{"):
            e.alts = [_hide_required(e.alts[0], after)[0]]
        after = after or _unbounded(e)
        out.append(e)
        i += 1
    return out, after


_SAMPLE = frozenset(map(chr, range(256))) | frozenset(c for c in map(chr, range(0x3001)) if c.isspace()) \
    | frozenset("\u0660\uff10\u0436\u03bb\u6771\uff5c\u2581é\U0001f600")
"""Characters two classes are compared on (:func:`_disjoint`): Latin-1, every whitespace character, digits and
letters of other scripts, and the pattern's own literal characters (added per pattern)."""
_CO_FINITE = (".", r"\S", r"\D", r"\W")


@dataclass(frozen=True)
class _First:
    """What can start the rest of a pattern: the one-character classes it may consume first (``classes``), and
    whether it can reach the pattern's end without consuming (``end``)."""

    classes: frozenset[str] = frozenset()
    end: bool = False

    def __or__(self, other: "_First") -> "_First":
        return _First(self.classes | other.classes, self.end or other.end)


_END = _First(end=True)


def _quant_range(q: str) -> tuple[int, float]:
    core = q[:-1] if len(q) > 1 and q[-1] in "?+" else q
    if core in ("", "?", "*", "+"):
        return {"": (1, 1), "?": (0, 1), "*": (0, float("inf")), "+": (1, float("inf"))}[core]
    lo, _, hi = core[1:-1].partition(",")
    return int(lo or 0), (float("inf") if _ and not hi else int(hi or lo))


def _first(seq: list[Any], i: int, after: Any) -> _First | None:
    """What can start ``seq[i:]`` followed by ``after()`` (None: an item this does not model: ``\\A``, ``\\b``,
    ``$``…)."""
    acc = _First()
    for j in range(i, len(seq)):
        e = seq[j]
        if isinstance(e, _Atom):
            k = _quant_start(e.text)
            base = e.text[:k]
            if e.text in (r"\Z", NEVER):
                return acc  # only the text's end, or never: no character can follow
            if base in (r"\A", r"\b", r"\B", "$", "^") or base.startswith("\\") and base[1:].isdigit():
                return None
            acc = acc | _First(frozenset({base}))
            if _quant_range(e.text[k:])[0] >= 1:
                return acc
            continue
        if e.open in ("(?<=", "(?<!"):
            continue  # looks back: what follows still has to match
        if e.open == "(?!":
            if e.alts == [[]]:
                return acc  # (?!): this path never matches
            continue
        rest = lambda j=j: _first(seq, j + 1, after)  # noqa: E731 - the continuation after this group
        if e.lookahead:
            inside = _alts_first(e.alts, lambda: _END)
            if inside is None:
                return None
            if inside.end:
                continue
            return acc | inside  # the next character must start the lookahead's text
        lo, hi = _quant_range(e.quant)
        body = _alts_first(e.alts, rest)
        if body is None:
            return None
        acc = acc | body
        if lo >= 1 and not body.end:
            return acc
        nxt = rest()
        return None if nxt is None else acc | nxt
    nxt = after()
    return None if nxt is None else acc | nxt


def _alts_first(alts: list[list[Any]], after: Any) -> _First | None:
    out = _First()
    for a in alts:
        f = _first(a, 0, after)
        if f is None:
            return None
        out = out | f
    return out


def _disjoint(a: str, b: str, sample: frozenset[str]) -> bool:
    """Whether the one-character classes ``a`` and ``b`` share no character (of ``sample``; two classes that
    each match all but a few characters always share one)."""
    if (a.startswith("[^") or a in _CO_FINITE) and (b.startswith("[^") or b in _CO_FINITE):
        return False
    ra, rb = re.compile(a, re.DOTALL), re.compile(b, re.DOTALL)
    return not any(ra.fullmatch(c) and rb.fullmatch(c) for c in sample)


def _possessive(seq: list[Any], after: Any, sample: frozenset[str]) -> None:
    """Make possessive (in place) each bounded one-character run of ``seq`` after which every way on must
    consume a character outside the run's class first (or meet ``\\Z`` or an always-failing ``(?!)``): giving a
    character back would leave one of the run's own next, where nothing that follows can match, so the
    possessive run matches exactly the texts of the greedy or lazy one, with the same groups. What changes is
    the work: the ``regex`` module no longer tries every shorter length of the run before failing at a start
    (``<|tool_calls|>`` and 1,000 spaces: 1,000 tries per partial search, on every streamed chunk)."""
    for j, e in enumerate(seq):
        rest = lambda j=j: _first(seq, j + 1, after)  # noqa: E731
        if isinstance(e, _Group):
            if e.open in ("(?<=", "(?<!"):
                continue
            if e.open.startswith("(?") and e.open[2] in "=!":
                for a in e.alts:
                    _possessive(a, lambda: _END, sample)
                continue
            _, hi = _quant_range(e.quant)
            if hi > 1:
                def cont(rest=rest, e=e):
                    again, nxt = _alts_first(e.alts, rest), rest()
                    return None if again is None or nxt is None else again | nxt
            else:
                cont = rest
            for a in e.alts:
                _possessive(a, cont, sample)
            continue
        if e.text == NEVER:
            continue
        k = _quant_start(e.text)
        q = e.text[k:]
        if not q or q.endswith("+") and len(q) > 1 and q != "+" or _unbounded_quant(q) or _quant_range(q)[1] <= 1:
            continue
        base = e.text[:k]
        if base in (r"\A", r"\Z", r"\b", r"\B", "$", "^"):
            continue
        f = rest()
        if f is None or f.end or not all(_disjoint(base, c, sample) for c in f.classes):
            continue
        e.text = base + (q[:-1] if q.endswith("?") else q) + "+"


def _spread_leading_optionals(seq: list[Any]) -> list[Any]:
    """``G1? G2? … Gk? (?<!C)…`` as ``(?:G1 G2? … Gk?|G2 … Gk?|…|Gk|)(?<!C)…``: the same texts, groups and
    order of tries (each branch is what the optional groups' greedy tries did in turn, the empty one last), for
    a delimiter that can start with a guarded run (Solar Open's call id behind ``(?<![^\\s<>])``). The ``regex``
    module tries one alternation at every start of a partial search where it tried each optional group in turn:
    about a third less work per streamed chunk on such a delimiter."""
    k = 0
    while k < len(seq) and isinstance(seq[k], _Group) and seq[k].open == "(?:" and seq[k].quant == "?":
        k += 1
    if k == 0 or k >= len(seq) or not isinstance(seq[k], _Group) or seq[k].open not in ("(?<=", "(?<!"):
        return seq
    branches = []
    for i in range(k):
        g = seq[i]
        first = list(g.alts[0]) if len(g.alts) == 1 else [_Group("(?:", g.alts)]
        branches.append(copy.deepcopy(first + seq[i + 1:k]))
    branches.append([])
    return [_Group("(?:", branches)] + seq[k:]


def linear_delimiter(pattern: str, *, search: bool = True, bounded: bool = True) -> str:
    """``pattern`` with its whitespace runs placed as the module says (``search``: also without a leading
    ``\\s*`` and, unless it starts with a literal, the literal texts it needs after a run of unbounded length
    left to an alternation; ``bounded``: every run and repeat given an upper bound)."""
    alts = [_dedupe(seq, False)[0] for seq in parse(pattern)]
    if search:
        alts = [_bound_leading(_strip_leading(seq)) for seq in alts]
        if len(alts) == 1 and not _starts_literal(alts[0]) and not (
                alts[0] and isinstance(alts[0][0], _Atom) and alts[0][0].text == r"\A"):
            alts = [_hide_required(alts[0], False)[0]]
    if bounded:
        alts = [_bound_runs(seq) for seq in alts]
        if search:
            alts = [_spread_leading_optionals(seq) for seq in alts]
        sample = _SAMPLE | frozenset(pattern)
        for seq in alts:
            _possessive(seq, lambda: _END, sample)
    return render(alts)


def linear_response_template(rt: dict[str, Any]) -> None:
    """Rewrite every ``open_pattern`` / ``close_pattern`` of ``rt`` in place (:func:`linear_delimiter`)."""
    for f in (rt.get("fields") or {}).values():
        for key in ("open_pattern", "close_pattern"):
            if f.get(key):
                f[key] = linear_delimiter(f[key])
