"""The strict mini-PEG the analysis uses to pick markers out of renders (analysis notes §5).

A port of the few primitives of llama.cpp's ``peg-parser.cpp`` that ``chat-diff-analyzer.cpp`` uses, in
strict (non-lenient) mode, so every parse either succeeds or fails:

* ``lit(s)`` exact text; ``ANY`` one character; ``END`` end of input; ``SPACE`` zero or more C-locale
  whitespace characters; ``REST`` everything left;
* ``until(*delims)`` consumes up to the first position where a delimiter matches fully, or where the rest
  of the input is a non-empty proper prefix of a delimiter (llama.cpp's trie "partial match"); it always
  succeeds and never consumes the delimiter;
* ``MARKER`` = ``<`` … ``>`` or ``[`` … ``]``;
* ``a + b`` sequence, ``a | b`` ordered choice, ``neg(x)`` negative lookahead, ``opt(x)``, ``star(x)``
  (greedy, never backtracks, stops at end of input or on an empty match), ``tag(name, x)`` capture.

Captures: only those on the successful path survive; when a name is captured more than once, the last in
pre-order wins; a missing tag reads as "".

Drivers: :func:`parse_and_extract` (from position 0, need not consume everything) and
:func:`parse_anywhere` (first start position 0..len-1 that succeeds).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

_WS = frozenset(" \t\n\v\f\r")

Caps = list  # list of (name, text) pairs, pre-order


class Pattern:
    """A PEG expression. ``match(s, pos, caps)`` returns the end position or -1; a failing match leaves
    ``caps`` as it found it."""

    __slots__ = ()

    def match(self, s: str, pos: int, caps: Caps) -> int:  # pragma: no cover - abstract
        """End position (``int``) of a match of this pattern at ``pos`` in ``s``, or -1; captures are appended to
        ``caps``, which a failure leaves unchanged. Raises ``NotImplementedError`` on the base class.
        """
        raise NotImplementedError

    def __add__(self, other: "Pattern | str") -> "Pattern":
        return Seq(self, _p(other))

    def __radd__(self, other: str) -> "Pattern":
        return Seq(_p(other), self)

    def __or__(self, other: "Pattern | str") -> "Pattern":
        return Choice(self, _p(other))

    def __lshift__(self, other: "Pattern | str") -> "Pattern":
        """``a << b`` is ``a SPACE b``."""
        return Seq(self, SPACE, _p(other))


def _p(x: "Pattern | str") -> Pattern:
    return Lit(x) if isinstance(x, str) else x


class Lit(Pattern):
    """Exact text (``lit(s)``)."""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """``pos + len(text)`` if ``s`` has ``text`` at ``pos``, else -1."""
        return pos + len(self.text) if s.startswith(self.text, pos) else -1

    def __repr__(self) -> str:
        return f"lit({self.text!r})"


class _Any(Pattern):
    __slots__ = ()

    def match(self, s: str, pos: int, caps: Caps) -> int:
        return pos + 1 if pos < len(s) else -1

    def __repr__(self) -> str:
        return "any"


class _End(Pattern):
    __slots__ = ()

    def match(self, s: str, pos: int, caps: Caps) -> int:
        return pos if pos >= len(s) else -1

    def __repr__(self) -> str:
        return "end"


class _Space(Pattern):
    __slots__ = ()

    def match(self, s: str, pos: int, caps: Caps) -> int:
        n = len(s)
        while pos < n and s[pos] in _WS:
            pos += 1
        return pos

    def __repr__(self) -> str:
        return "space"


class _Rest(Pattern):
    __slots__ = ()

    def match(self, s: str, pos: int, caps: Caps) -> int:
        return max(pos, len(s))

    def __repr__(self) -> str:
        return "rest"


class _Marker(Pattern):
    """``lit("<") until(">") lit(">")`` or ``lit("[") until("]") lit("]")``."""

    __slots__ = ()

    def match(self, s: str, pos: int, caps: Caps) -> int:
        if pos >= len(s):
            return -1
        c = s[pos]
        if c == "<":
            e = s.find(">", pos + 1)
        elif c == "[":
            e = s.find("]", pos + 1)
        else:
            return -1
        return e + 1 if e >= 0 else -1

    def __repr__(self) -> str:
        return "marker"


class Until(Pattern):
    """``until(*delims)``: consumes up to the first full or end-of-input partial delimiter match (see the
    module doc); empty delimiters are dropped; never fails.
    """
    __slots__ = ("delims", "maxlen")

    def __init__(self, *delims: str):
        self.delims = tuple(d for d in delims if d)
        self.maxlen = max((len(d) for d in self.delims), default=0)

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """Where the scan from ``pos`` stops (:func:`until_stop`); never -1."""
        return until_stop(s, pos, self.delims, self.maxlen)

    def __repr__(self) -> str:
        return f"until{self.delims!r}"


def until_stop(s: str, pos: int, delims: tuple[str, ...], maxlen: int) -> int:
    """Where ``until(*delims)`` starting at ``pos`` stops (see module doc)."""
    n = len(s)
    if pos >= n or not delims:
        return max(pos, n)
    stop = n
    for d in delims:
        i = s.find(d, pos)
        if 0 <= i < stop:
            stop = i
    # partial match: the rest of the input is a proper non-empty prefix of a delimiter
    first = max(pos, n - maxlen + 1)
    for p in range(first, min(stop, n)):
        rest = s[p:]
        for d in delims:
            if len(d) > len(rest) and d.startswith(rest):
                return p
    return stop


class Seq(Pattern):
    """Sequence ``a + b``: every item in order."""
    __slots__ = ("items",)

    def __init__(self, *items: Pattern):
        self.items = tuple(x for it in items for x in (it.items if isinstance(it, Seq) else (it,)))

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """End after all items, or -1 (captures of a failed sequence removed)."""
        n0 = len(caps)
        for it in self.items:
            pos = it.match(s, pos, caps)
            if pos < 0:
                del caps[n0:]
                return -1
        return pos

    def __repr__(self) -> str:
        return "(" + " ".join(map(repr, self.items)) + ")"


class Choice(Pattern):
    """Ordered choice ``a | b``: the first alternative that matches."""
    __slots__ = ("alts",)

    def __init__(self, *alts: Pattern):
        self.alts = tuple(x for a in alts for x in (a.alts if isinstance(a, Choice) else (a,)))

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """End of the first alternative that matches, or -1."""
        for a in self.alts:
            e = a.match(s, pos, caps)
            if e >= 0:
                return e
        return -1

    def __repr__(self) -> str:
        return "(" + " | ".join(map(repr, self.alts)) + ")"


class Not(Pattern):
    """Negative lookahead ``neg(x)``: zero width, succeeds where ``x`` does not match."""
    __slots__ = ("child",)

    def __init__(self, child: Pattern):
        self.child = child

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """``pos`` if the child fails at ``pos`` (its captures discarded), else -1."""
        return -1 if self.child.match(s, pos, []) >= 0 else pos

    def __repr__(self) -> str:
        return f"!{self.child!r}"


class Opt(Pattern):
    """Optional ``opt(x)``: the child or nothing."""
    __slots__ = ("child",)

    def __init__(self, child: Pattern):
        self.child = child

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """End of the child if it matches, else ``pos``; never -1."""
        e = self.child.match(s, pos, caps)
        return e if e >= 0 else pos

    def __repr__(self) -> str:
        return f"{self.child!r}?"


class Star(Pattern):
    """Greedy ``star(x)``: the child zero or more times, no backtracking."""
    __slots__ = ("child", "_stop", "_seek")

    def __init__(self, child: Pattern):
        self.child = child
        # ``star(neg(x) + ANY)`` — "up to where x matches" — is scanned without a Seq/Not/ANY match per character,
        # jumping over the characters x cannot start with (it is run at every position of every render)
        self._stop: Pattern | None = None
        self._seek: Any = None
        if (type(child) is Seq and len(child.items) == 2 and type(child.items[0]) is Not
                and type(child.items[1]) is _Any):
            self._stop = child.items[0].child
            self._seek = _seeker(first_chars(self._stop))

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """Position after the last child match; stops on a failure, an empty match or end of input; never -1."""
        n = len(s)
        stop = self._stop
        if stop is not None:
            seek = self._seek
            while pos < n:
                if seek is not None:
                    m = seek(s, pos)
                    if m is None:
                        return n
                    pos = m.start()
                if stop.match(s, pos, []) >= 0:
                    break
                pos += 1
            return pos
        child = self.child
        while pos < n:
            n0 = len(caps)
            e = child.match(s, pos, caps)
            if e < 0:
                break
            if e == pos:
                del caps[n0:]
                break
            pos = e
        return pos

    def __repr__(self) -> str:
        return f"{self.child!r}*"


class Tag(Pattern):
    """Capture ``tag(name, x)``: records ``(name, matched text)`` in pre-order."""
    __slots__ = ("name", "child")

    def __init__(self, name: str, child: Pattern):
        self.name = name
        self.child = child

    def match(self, s: str, pos: int, caps: Caps) -> int:
        """End of the child or -1; on success ``(name, s[pos:end])`` is placed before the child's own
        captures.
        """
        i = len(caps)
        caps.append(None)
        e = self.child.match(s, pos, caps)
        if e < 0:
            del caps[i:]
            return -1
        caps[i] = (self.name, s[pos:e])
        return e

    def __repr__(self) -> str:
        return f"{self.name}:{self.child!r}"


def first_chars(p: Pattern) -> frozenset[str] | None:
    """The characters a match of ``p`` can start with, or None when unknown or when ``p`` can match the empty
    string (then it may match anywhere): a literal's first character, a marker's opener, a sequence's first
    item's, a capture's child's, a choice's alternatives' together."""
    tp = type(p)
    if tp is Lit:
        return frozenset(p.text[0]) if p.text else None
    if tp is _Marker:
        return frozenset("<[")
    if tp is Seq:
        return first_chars(p.items[0]) if p.items else None
    if tp is Tag:
        return first_chars(p.child)
    if tp is Choice:
        out: set[str] = set()
        for a in p.alts:
            f = first_chars(a)
            if f is None:
                return None
            out |= f
        return frozenset(out)
    return None


@functools.lru_cache(maxsize=256)
def _seeker(chars: frozenset[str] | None) -> Any:
    """``search(s, pos)`` of the first of ``chars`` at or after ``pos`` (None for None or no characters)."""
    if not chars:
        return None
    return re.compile("[" + "".join(re.escape(c) for c in sorted(chars)) + "]").search


ANY = _Any()
END = _End()
SPACE = _Space()
REST = _Rest()
MARKER = _Marker()


def lit(s: str) -> Pattern:
    """Pattern for the exact text ``s``."""
    return Lit(s)


def until(*delims: str) -> Pattern:
    """Pattern consuming up to the first of ``delims`` (partial match at the end counts); see the module doc."""
    return Until(*delims)


def seq(*items: "Pattern | str") -> Pattern:
    """Sequence of ``items`` (strings become literals)."""
    return Seq(*(_p(i) for i in items))


def choice(*alts: "Pattern | str") -> Pattern:
    """Ordered choice of ``alts`` (strings become literals)."""
    return Choice(*(_p(a) for a in alts))


def neg(x: "Pattern | str") -> Pattern:
    """Negative lookahead of ``x``."""
    return Not(_p(x))


def opt(x: "Pattern | str") -> Pattern:
    """``x`` or nothing."""
    return Opt(_p(x))


def star(x: "Pattern | str") -> Pattern:
    """``x`` zero or more times, greedy."""
    return Star(_p(x))


def tag(name: str, x: "Pattern | str") -> Pattern:
    """``x`` with its matched text captured as ``name``."""
    return Tag(name, _p(x))


# ``LASTM`` = the last marker plus any non-marker tail up to the end of input.
LAST_MARKER = MARKER + star(neg(MARKER) + ANY) + END


@dataclass
class Match:
    """Outcome of a parse: ``ok`` and the captured ``tags`` (empty on failure). ``tags.get(name, "")``."""

    ok: bool
    tags: dict[str, str] = field(default_factory=dict)
    start: int = 0
    end: int = -1

    def __getitem__(self, name: str) -> str:
        return self.tags.get(name, "")


def _tags(caps: Caps) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in caps:
        if c is not None:
            out[c[0]] = c[1]
    return out


def parse_and_extract(p: Pattern, s: str) -> Match:
    """Parse ``s`` with ``p`` from position 0 (llama.cpp ``parse_and_extract``, strict mode)."""
    caps: Caps = []
    e = p.match(s, 0, caps)
    if e < 0:
        return Match(False)
    return Match(True, _tags(caps), 0, e)


def parse_anywhere(p: Pattern, s: str) -> Match:
    """First success of ``p`` starting at 0, 1, …, len(s)-1 (one try at 0 for empty input); failure with no
    tags otherwise (llama.cpp ``parse_anywhere_and_extract``)."""
    if not s:
        return parse_and_extract(p, s)
    seek = _seeker(first_chars(p))  # start positions where p cannot match are skipped
    n = len(s)
    i = 0
    while i < n:
        if seek is not None:
            m = seek(s, i)
            if m is None:
                break
            i = m.start()
        caps: Caps = []
        e = p.match(s, i, caps)
        if e >= 0:
            return Match(True, _tags(caps), i, e)
        i += 1
    return Match(False)
