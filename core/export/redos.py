"""Linear-time check of the regexes we emit (exported ``response_template`` delimiters and tag patterns, parser
and grammar trigger patterns): a static check on the pattern's parse tree, plus hostile outputs for a timed fuzz.

The consumers run our patterns on model output with ``search`` (transformers' ``ResponseParser`` tries every
start position, with the ``regex`` module's partial matching while streaming) or ``finditer``, with ``DOTALL``.
A *run* is a repeat of one character class with no upper bound or a bound above one (``\\s*``, ``[^<>]+?``,
``.*?``). The check reports, per pattern, :class:`Finding` rows of these kinds:

* ``ADJACENT``: two runs whose classes share a character can match the same text one after the other (only
  optional or zero-width items between them: ``\\s*\\s*``, ``\\s*(?:\\s*X)?``, ``(?:X\\s*)?\\s*``) — every split
  of a long run of that character is tried before failing: quadratic from one start, cubic over all starts;
* ``NESTED``: a repeated group whose body can end and start with runs sharing a character, or match the empty
  text (``(?:\\s*X\\s*)+``, ``(\\w+\\s?)*``) — exponential or polynomial;
* ``LEADING``: a search pattern that can begin with a run (directly, after optional items, or inside a leading
  lookahead) and is not anchored at ``\\A``: each start position inside a long run scans the rest of it
  (quadratic; the ``regex`` module's partial matching stays quadratic even behind a lookbehind);
* ``SPAN``: a run that can match the text a match goes through before reaching it (the pattern's start, as far
  as the run): on a text repeating that start, the match from each occurrence can scan across all later ones
  (quadratic over the starts);
* ``PARTIAL``: a run without an upper bound inside an optional part the pattern may start with
  (``(?:<s>\\s*)?<f>``): linear for ``re``, but the ``regex`` module's partial search — what transformers runs
  on every streamed chunk — is quadratic on a text repeating the first character (measured: 0.06 s at 5k,
  1.6 s at 20k characters of ``<``), where ``(?:<s>\\s{0,1000})?<f>`` is not;
* ``STREAM`` (delimiters only: ``open_pattern`` / ``close_pattern``): a match that can reach more than
  :data:`STREAM_MAX_CHARS` characters, or any run or repeat without an upper bound. transformers'
  ``ResponseParser`` holds a delimiter back while it may still grow (a partial match, or a complete one ending
  at the buffer's end) and searches it again from its start on every chunk: a name, id or whitespace run that
  keeps growing is read again on each feed, quadratic in the stream (Solar Open's llama.cpp export: 26.6 s of
  CPU for 20,000 letters fed 3 at a time). :mod:`core.export.linear` bounds every run.

A pattern that is one run and nothing else is exempt from LEADING and SPAN (it never fails after scanning).

Failure model: the check is sound for these four shapes over the syntax we emit (literals, classes, categories,
groups, alternations, optional/repeated groups, lookarounds, ``\\A``/``\\Z``) and conservative: a flagged
pattern may still be fast in a given engine (required-string shortcuts), never the reverse for these shapes.
It does not model back-references or conditionals (treated as matching anything, no runs), and classes are
compared on a finite alphabet: ASCII, the pattern's own literal characters and a few non-ASCII letters and
spaces — two classes that share only a character outside it would go unreported. A possessive repeat or atomic
group gives nothing back, so it ends no ambiguity with what follows (it may still start one). A tempered run
``(?:(?!X)c)*`` counts as a run of ``c`` that never crosses a new start (we temper with the pattern's own
opener); a run right after a lookbehind ``(?<!C)`` with ``C`` holding its characters is no leading run; a pattern
that starts with a one-character lookbehind ``(?<=C)`` starts only after a ``C``, so a run that cannot match ``C``
never runs across a new start (SPAN). The timed
fuzz (:func:`fuzz_outputs`, ``bench/redos.py``) covers what the static check does not model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any, Iterable


@dataclass(frozen=True)
class Finding:
    """One reason a pattern is not linear: ``kind`` (ADJACENT, NESTED, LEADING, SPAN, PARTIAL, STREAM) and
    ``detail``."""

    kind: str
    detail: str


_EXTRA = "\u00a0\u2028\u3000é東｜▁"
_CATEGORY = {C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_DIGIT: r"\d",
             C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
             C.CATEGORY_LINEBREAK: r"\n", C.CATEGORY_NOT_LINEBREAK: r"[^\n]"}
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)


@dataclass
class _Run:
    chars: frozenset[str]
    text: str
    node: int = 0  # id() of the repeat's body in the parse tree
    tempered: bool = False  # (?:(?!X)c)*: stops at X, so it cannot run across a new start
    guarded: bool = False  # after (?<![^c]): every start of it follows a character it cannot match
    unbounded: bool = True
    early: bool = False  # inside an optional part the pattern may start with


@dataclass
class _Info:
    nullable: bool
    first: frozenset[str]
    heads: list[_Run] = field(default_factory=list)
    tails: list[_Run] = field(default_factory=list)
    lead: list[_Run] = field(default_factory=list)  # heads, including those inside a leading lookahead
    anchored: bool = False
    free: bool = True  # can be passed without consuming text and without an \A anchor


class _Checker:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.tree = P.parse(pattern, re.DOTALL)
        lits = {chr(av) for op, av in self._walk(self.tree) if op in (C.LITERAL, C.NOT_LITERAL) and av < 0x110000}
        self.alphabet = frozenset(map(chr, range(128))) | frozenset(_EXTRA) | frozenset(lits)
        self.findings: list[Finding] = []
        self.runs: list[_Run] = []

    def _walk(self, items: Any) -> Iterable[tuple[Any, Any]]:
        for op, av in items:
            yield op, av
            if op in _REPEATS:
                yield from self._walk(av[2])
            elif op is C.SUBPATTERN:
                yield from self._walk(av[3])
            elif op is C.BRANCH:
                for alt in av[1]:
                    yield from self._walk(alt)
            elif op in (C.ASSERT, C.ASSERT_NOT):
                yield from self._walk(av[1])
            elif op is C.ATOMIC_GROUP:
                yield from self._walk(av)
            elif op is C.IN:
                yield from ((o, a) for o, a in av if o in (C.LITERAL, C.NOT_LITERAL))

    def _charset(self, op: Any, av: Any) -> frozenset[str] | None:
        """The characters a one-character item matches (None: not a one-character item)."""
        a = self.alphabet
        if op is C.LITERAL:
            return frozenset({chr(av)})
        if op is C.NOT_LITERAL:
            return a - {chr(av)}
        if op is C.ANY:
            return a
        if op is C.IN:
            neg, got = False, set()
            for o, v in av:
                if o is C.NEGATE:
                    neg = True
                elif o is C.LITERAL:
                    got.add(chr(v))
                elif o is C.RANGE:
                    got |= {c for c in a if v[0] <= ord(c) <= v[1]}
                elif o is C.CATEGORY:
                    rx = re.compile(_CATEGORY.get(v, r"[\s\S]"))
                    got |= {c for c in a if rx.match(c)}
            return a - got if neg else frozenset(got)
        return None

    def starts(self, items: Any, i: int, run: _Run, limit: int = 64) -> list[tuple[frozenset[str], ...]]:
        """The texts a match of ``items[i:]`` goes through before it reaches ``run`` (or ``limit`` characters),
        as sequences of character sets: when ``run`` can match each of them in turn, the run of one start can
        scan across the starts after it. Other runs count as their shortest text."""
        prefix: list[frozenset[str]] = []
        if limit <= 0:
            return [()]
        while i < len(items) and len(prefix) < limit:
            op, av = items[i]
            cs = self._charset(op, av)
            if cs is not None:
                prefix.append(cs)
                i += 1
                continue
            if op is C.AT and av in (C.AT_BEGINNING_STRING, C.AT_BEGINNING) and not prefix:
                return []  # this path matches only at the start of the text: no new start to run across
            if op is C.ASSERT and av[0] == 1 and not prefix:  # the lookahead's text is where the match starts
                return self.starts(list(av[1]), 0, run, limit)
            if op is C.ASSERT and av[0] == -1 and not prefix and len(av[1]) == 1 \
                    and (behind := self._charset(*list(av[1])[0])) is not None:
                # (?<=C): a start follows a character of C, which a run crossing that start must match too
                prefix.append(behind)
                i += 1
                continue
            if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
                i += 1
                continue
            if op in _REPEATS and len(av[2]) == 1 and av[1] > 1 and self._charset(*av[2][0]) is not None:
                if id(av[2]) == run.node:
                    return [tuple(prefix)]
                prefix.extend([self._charset(*av[2][0])] * min(av[0], limit))
                i += 1
                continue
            if prefix:
                return [tuple(prefix) + s for s in self.starts(items, i, run, limit - len(prefix))]
            if op in _REPEATS:
                body, optional = av[2], av[0] == 0
            elif op is C.SUBPATTERN:
                body, optional = av[3], False
            elif op is C.ATOMIC_GROUP:
                body, optional = av, False
            elif op is C.BRANCH:
                return [s for alt in _live(av[1]) for s in self.starts(list(alt) + list(items[i + 1:]), 0, run, limit)]
            else:
                return [()]
            out = self.starts(list(body) + list(items[i + 1:]), 0, run, limit)
            if optional:
                out += self.starts(items, i + 1, run, limit)
            return out
        return [tuple(prefix)]

    def seq(self, items: Any, top: bool = False) -> _Info:
        nullable, first, heads, lead, pending = True, set(), [], [], []
        anchored, leading, guard = False, True, frozenset()
        for op, av in items:
            made = len(self.runs)
            x = self.item(op, av, top and leading)
            if top and leading and x.free:
                for r in self.runs[made:]:
                    r.early = True
            if guard:  # (?<![^c])c+ : a start inside a run of c fails at the lookbehind
                for r in x.lead:
                    r.guarded = r.guarded or r.chars <= guard
                x.lead = [r for r in x.lead if not r.guarded]
            guard = frozenset()
            if op is C.ASSERT_NOT and av[0] == -1 and len(av[1]) == 1:
                guard = self._charset(*av[1][0]) or frozenset()
            for t in pending:
                for h in x.heads:
                    if t.chars & h.chars:
                        self.findings.append(Finding("ADJACENT", f"{t.text} then {h.text} can match the same "
                                                                 f"{_show(t.chars & h.chars)}"))
            if leading:
                anchored = anchored or x.anchored
                first |= x.first
                heads += x.heads
                lead += x.lead
                if not x.free:
                    leading = False
            pending = x.tails + (pending if x.nullable else [])
            nullable = nullable and x.nullable
        return _Info(nullable, frozenset(first), heads, pending, [] if anchored else lead, anchored,
                     leading)

    def item(self, op: Any, av: Any, top: bool = False) -> _Info:
        cs = self._charset(op, av)
        if cs is not None:
            return _Info(False, cs, free=False)
        if op in _REPEATS:
            lo, hi, body = av
            one = self._charset(*body[0]) if len(body) == 1 else None
            tempered = len(body) == 2 and body[0][0] is C.ASSERT_NOT and body[0][1][0] == 1 \
                and self._charset(*body[1]) is not None
            if tempered:
                self.seq(body[0][1][1])
                one = self._charset(*body[1])
            if one is not None and hi > 1 and hi != lo:
                run = _Run(one, _show_run(body[-1], lo, hi, op), id(body), tempered, unbounded=hi == C.MAXREPEAT)
                self.runs.append(run)
                tails = [] if op is C.POSSESSIVE_REPEAT else [run]
                return _Info(lo == 0, one, [run], tails, [run], free=lo == 0)
            if one is not None and hi == lo:  # c{4}: a fixed text, no run
                return _Info(lo == 0, one, free=lo == 0)
            b = self.seq(body)
            if hi > 1 and hi != lo:
                for t in b.tails:
                    for h in b.heads:
                        if t.chars & h.chars:
                            self.findings.append(Finding("NESTED", f"a repeated group ends with {t.text} and starts "
                                                                   f"with {h.text} (both {_show(t.chars & h.chars)})"))
                if b.nullable:
                    self.findings.append(Finding("NESTED", "a repeated group can match the empty text"))
            tails = [] if op is C.POSSESSIVE_REPEAT else b.tails
            return _Info(lo == 0 or b.nullable, b.first, b.heads, tails, b.lead, free=lo == 0 or b.free)
        if op is C.SUBPATTERN:
            return self.seq(av[3], top)
        if op is C.ATOMIC_GROUP:
            b = self.seq(av)
            return _Info(b.nullable, b.first, b.heads, [], b.lead, b.anchored, b.free)
        if op is C.BRANCH:
            infos = [self.seq(alt, top) for alt in _live(av[1])] or [_Info(False, frozenset(), free=False)]
            return _Info(any(i.nullable for i in infos), frozenset().union(*(i.first for i in infos)),
                         [r for i in infos for r in i.heads], [r for i in infos for r in i.tails],
                         [r for i in infos for r in i.lead], all(i.anchored for i in infos),
                         any(i.free for i in infos))
        if op in (C.ASSERT, C.ASSERT_NOT):
            b = self.seq(av[1])
            return _Info(True, frozenset(), lead=b.lead if (op is C.ASSERT and av[0] == 1) else [])
        if op is C.AT:
            at_start = av in (C.AT_BEGINNING_STRING, C.AT_BEGINNING)
            return _Info(True, frozenset(), anchored=at_start, free=not at_start)
        return _Info(True, self.alphabet)  # back-references, conditionals: anything, no runs


def _dead(alt: Any) -> bool:
    """Whether an alternative begins with ``(?!)``, the empty negative lookahead: it never matches."""
    return bool(alt) and alt[0][0] is C.ASSERT_NOT and not alt[0][1][1]


def _live(alts: Any) -> list[Any]:
    return [alt for alt in alts if not _dead(alt)]


def _show(chars: frozenset[str]) -> str:
    s = sorted(chars)
    return "characters " + "".join(s[:6]).encode("unicode_escape").decode("ascii") + ("…" if len(s) > 6 else "")


def _show_run(item: Any, lo: int, hi: int, op: Any) -> str:
    q = {(0, C.MAXREPEAT): "*", (1, C.MAXREPEAT): "+"}.get((lo, hi), f"{{{lo},{hi}}}")
    return f"run {_item_text(item)}{q}{'?' if op is C.MIN_REPEAT else '+' if op is C.POSSESSIVE_REPEAT else ''}"


def _item_text(item: Any) -> str:
    op, av = item
    if op is C.LITERAL:
        return re.escape(chr(av))
    if op is C.ANY:
        return "."
    if op is C.IN and len(av) == 1 and av[0][0] is C.CATEGORY:
        return _CATEGORY.get(av[0][1], "[…]")
    return "[…]"


def check_pattern(pattern: str, *, search: bool = True, partial: bool = True,
                  streamed: bool = False) -> list[Finding]:
    """The findings for ``pattern`` ([] when linear for the shapes above). ``search``: the consumer tries every
    start position (delimiters, tag patterns); False for a pattern only ever matched at one position.
    ``partial``: the consumer may run the search in the regex module's partial mode (transformers' delimiters);
    False leaves out the two ``PARTIAL`` shapes (Python's ``re``, ``finditer`` over a finished text, llama.cpp's
    triggers). ``streamed``: the pattern is a delimiter transformers' ``ResponseParser`` watches while streaming
    (``open_pattern`` / ``close_pattern``): also the ``STREAM`` shape. Raises ``re.error`` for a pattern Python's
    ``re`` cannot parse."""
    ch = _Checker(pattern)
    info = ch.seq(ch.tree, top=True)
    out = list(ch.findings)
    if search and partial:
        for r in ch.runs:
            if r.early and r.unbounded and not info.anchored:
                out.append(Finding("PARTIAL", f"{r.text} sits in an optional part the pattern may start with: the "
                                              "regex module's partial matching (transformers' streaming) then "
                                              "rescans the rest of the text from each start; bound it"))
    if search and partial and not info.anchored and not _literal_start(ch.tree):
        lit = _required_after_run(ch.tree)
        if lit is not None:
            out.append(Finding("PARTIAL", f"the pattern does not start with one literal text, and every match needs "
                                          f"{lit!r} after a run: the regex module's partial search (transformers' "
                                          "streaming) looks for it again from every start position; start with a "
                                          "literal, or leave the text to an alternation"))
    # [^a-z]+ alone never fails after scanning its run
    lone_run = len(ch.tree) == 1 and ch.tree[0][0] in _REPEATS and len(ch.runs) == 1
    if search and not lone_run:
        for r in info.lead:
            out.append(Finding("LEADING", f"the pattern can start with {r.text}: every start inside a long run "
                                          "rescans it"))
        for r in ch.runs:
            if r.tempered or r.guarded:
                continue
            crossed = [s for s in ch.starts(list(ch.tree), 0, r) if all(r.chars & c for c in s)]
            if crossed and not info.anchored:
                shown = "".join(next(iter(c)) if len(c) == 1 else "…" for c in crossed[0])
                out.append(Finding("SPAN", f"{r.text} can run across a new start of the pattern "
                                           f"({shown!r})"))
    if streamed:
        width = _scan_width(ch.tree)
        if width is None or width > STREAM_MAX_CHARS:
            what = f"{_unbounded_run(ch.tree)} has no upper bound" if width is None \
                else f"a match can reach {width:,} characters"
            out.append(Finding("STREAM", f"{what}: transformers' streaming parser searches a delimiter that may still "
                                         "grow again from its start on every chunk; bound every run "
                                         f"(at most {STREAM_MAX_CHARS:,} characters a match)"))
    seen, uniq = set(), []
    for f in out:
        if (f.kind, f.detail) not in seen:
            seen.add((f.kind, f.detail))
            uniq.append(f)
    return uniq


def _literal_start(items: Any) -> bool:
    """Whether every match of ``items`` begins with one fixed literal character (lookarounds before it are
    allowed): what lets the regex module skip the start positions without it by a plain string search."""
    for op, av in items:
        if op in (C.ASSERT, C.ASSERT_NOT):
            continue
        if op is C.LITERAL:
            return True
        if op is C.SUBPATTERN:
            return _literal_start(av[3])
        if op is C.ATOMIC_GROUP:
            return _literal_start(av)
        if op in _REPEATS and av[0] >= 1:
            return _literal_start(av[2])
        return False
    return False


STREAM_MAX_CHARS = 8192
"""Most characters a streamed delimiter may reach from its start, lookaheads included: what each chunk fed to
transformers' ``ResponseParser`` can cost again while the delimiter is pending (the corpus's exports reach at
most 5,581 with :mod:`core.export.linear`'s bounds)."""


def _scan_width(items: Any) -> int | None:
    """The most characters a match of ``items`` reads from where it starts, lookaheads included (lookbehinds
    read back, before the start); None when unbounded."""
    w = _widths(items)
    return None if w is None else w[1]


def _widths(items: Any) -> tuple[int, int] | None:
    """(most characters consumed, most characters read) by a match of ``items``; None when unbounded."""
    used = reach = 0
    for op, av in items:
        if op in _REPEATS:
            b = _widths(av[2])
            if b is None or (av[1] == C.MAXREPEAT and b[0] > 0):
                return None
            n = av[1] if b[0] > 0 else min(av[1], 1)
            w = (b[0] * n, b[0] * (n - 1) + b[1]) if n else (0, 0)
        elif op is C.SUBPATTERN:
            w = _widths(av[3])
        elif op is C.ATOMIC_GROUP:
            w = _widths(av)
        elif op is C.BRANCH:
            ws = [_widths(alt) for alt in av[1]]
            w = None if None in ws else (max((x[0] for x in ws), default=0), max((x[1] for x in ws), default=0))
        elif op in (C.ASSERT, C.ASSERT_NOT):
            b = _widths(av[1]) if av[0] == 1 else (0, 0)
            w = None if b is None else (0, b[1])
        elif op is C.AT:
            w = (0, 0)
        elif op in (C.GROUPREF, C.GROUPREF_EXISTS):
            w = None
        else:
            w = (1, 1)
        if w is None:
            return None
        reach = max(reach, used + w[1])
        used += w[0]
    return used, reach


def _unbounded_run(items: Any) -> str:
    """The text of the first repeat in ``items`` without an upper bound."""
    for op, av in items:
        if op in _REPEATS and av[1] == C.MAXREPEAT:
            return _show_run(av[2][0], av[0], av[1], op)[4:] if len(av[2]) == 1 else "a repeated group"
        for body in ([av[2]] if op in _REPEATS else [av[3]] if op is C.SUBPATTERN else list(av[1])
                     if op is C.BRANCH else [av[1]] if op in (C.ASSERT, C.ASSERT_NOT) else
                     [av] if op is C.ATOMIC_GROUP else []):
            found = _unbounded_run(body)
            if found:
                return found
    return ""


def _unbounded(items: Any) -> bool:
    """Whether ``items`` can match texts of any length."""
    for op, av in items:
        if op in _REPEATS and (av[1] == C.MAXREPEAT or _unbounded(av[2])):
            return True
        if op is C.SUBPATTERN and _unbounded(av[3]) or op is C.ATOMIC_GROUP and _unbounded(av):
            return True
        if op is C.BRANCH and any(_unbounded(alt) for alt in _live(av[1])):
            return True
    return False


def _required_after_run(items: Any, after: bool = False) -> str | None:
    """A literal character every match of ``items`` contains after a part of unbounded length (``after``: such a
    part came before ``items``), found as the regex module finds the literal it requires: in the sequence and its
    plain groups and required repeats, not inside alternations or optional parts. None when there is none."""
    for i, (op, av) in enumerate(items):
        if op is C.LITERAL and after:
            text = ""
            for o, a in items[i:]:
                if o is not C.LITERAL:
                    break
                text += chr(a)
            return text
        if op is C.SUBPATTERN or op is C.ATOMIC_GROUP or op in _REPEATS and av[0] >= 1:
            body = av[3] if op is C.SUBPATTERN else av if op is C.ATOMIC_GROUP else av[2]
            found = _required_after_run(body, after)
            if found is not None:
                return found
        if op in _REPEATS and av[1] == C.MAXREPEAT or _unbounded([(op, av)]):
            after = True
    return None


def response_template_patterns(rt: dict[str, Any]) -> list[tuple[str, str]]:
    """Every regex of an exported response_template: (where, pattern) — the start anchor, each field's
    ``open_pattern``/``close_pattern``, literal ``open``/``close`` (escaped: transformers compiles them too) and
    ``content_args.tag_pattern``."""
    out: list[tuple[str, str]] = []
    if rt.get("start_anchor_pattern"):
        out.append(("start_anchor_pattern", rt["start_anchor_pattern"]))
    for name, f in (rt.get("fields") or {}).items():
        for key in ("open_pattern", "close_pattern"):
            if f.get(key):
                out.append((f"{name}.{key}", f[key]))
        for key in ("open", "close"):
            v = f.get(key)
            for lit in ([v] if isinstance(v, str) else v or []):
                out.append((f"{name}.{key}", re.escape(lit)))
        tag = (f.get("content_args") or {}).get("tag_pattern")
        if tag:
            out.append((f"{name}.tag_pattern", tag))
    return out


def check_response_template(rt: dict[str, Any]) -> dict[str, list[Finding]]:
    """Where → findings, for every pattern of ``rt`` that has any."""
    out: dict[str, list[Finding]] = {}
    for where, pattern in response_template_patterns(rt):
        # the start anchor and tag patterns run with finditer over a finished text, never in partial mode
        # open_pattern / close_pattern are the delimiters the streaming parser watches (STREAM)
        found = check_pattern(pattern, partial=not where.endswith(("start_anchor_pattern", "tag_pattern")),
                              streamed=where.endswith(("open_pattern", "close_pattern")))
        if found:
            out[f"{where}: {pattern}"] = found
    return out


def _literals(pattern: str) -> list[str]:
    """The literal strings of ``pattern`` (maximal runs of literal characters, two or more long)."""
    out, cur = [], []

    def flush() -> None:
        if len(cur) >= 2:
            out.append("".join(cur))
        cur.clear()

    def walk(items: Any) -> None:
        for op, av in items:
            if op is C.LITERAL:
                cur.append(chr(av))
                continue
            flush()
            if op in _REPEATS:
                walk(av[2])
            elif op is C.SUBPATTERN:
                walk(av[3])
            elif op is C.BRANCH:
                for alt in av[1]:
                    walk(alt)
                    flush()
            elif op in (C.ASSERT, C.ASSERT_NOT):
                walk(av[1])
            flush()
        flush()

    walk(P.parse(pattern, re.DOTALL))
    return out


def fuzz_outputs(rt: dict[str, Any], n: int = 10_000) -> dict[str, str]:
    """Hostile model outputs for ``rt``, about ``n`` characters each: ``n`` spaces (with and without a final
    letter), and for every marker (literal text of its patterns): the marker repeated, the marker less its last
    character repeated (near misses), a long run of each of its characters followed by a letter, and the marker
    followed by ``n`` spaces or by ``n`` letters (a name or id that never ends). Name → output."""
    outs = {"spaces": " " * n, "spaces+letter": " " * n + "a", "newlines+letter": "\n" * n + "a"}
    markers: list[str] = []
    for _, p in response_template_patterns(rt):
        for lit in _literals(p):
            if lit.strip() and lit not in markers:
                markers.append(lit)
    for m in markers:
        k = max(1, n // len(m))
        outs[f"repeat {m!r}"] = m * k
        if len(m) > 1:
            outs[f"near-miss {m[:-1]!r}"] = m[:-1] * max(1, n // (len(m) - 1)) + "a"
        outs[f"{m!r}+spaces"] = m + " " * n + "a"
        outs[f"{m!r}+letters"] = m + "a" * n
        for c in sorted(set(m)):
            outs.setdefault(f"run {c!r}", c * n + "a")
    return outs
