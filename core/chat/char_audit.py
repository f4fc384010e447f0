"""The lossless contract to the character: where every character of a model output went.

:func:`audit_chars` walks an output (forward, and backward when that reading loses less) and gives each
character one account (:class:`Account`):

* ``FIELD`` — text of a standard field: ``content``, ``reasoning_content``, a call's ``name``, ``id`` or
  ``arguments`` (a key or a value of the decoded arguments, in any of the spellings a format writes it: as JSON,
  JSON-escaped, raw, Python's ``True``/``None``);
* ``MARKUP`` — markup the analysis or the format identified (a marker, a special token, a literal of the parser's
  grammar), or call syntax (quotes, braces, ``=``, ``,``, ``:`` between the pieces of a call; a key the call's
  elements write again, ``</source>``: :func:`_key_again`);
* ``TRIMMED`` — whitespace a documented rule trims (:class:`TrimRule`: the edges of the output, beside markup,
  between two fields);
* ``PENDING`` — the tail a partial (streaming) parse holds back because it may still become a marker;
* ``LOST`` — in no field and no markup (:class:`LostKind`: text, stray punctuation, a whitespace run collapsed, a
  marker's prefix cut by the end of the output).

How: the message's content and reasoning are *tapes* read in output order (a field is the output's text with
markup taken out, so its characters appear in the output in order); each call is a short queue of pieces (its name,
id, whole arguments, each key and value) read in order with a small look-ahead; markup strings are matched where
they start. At each position the longest match wins (a field on a tie), so a marker inside content written as
content (``reasoning_format`` none) stays content. A tape that holds text the output does not (a generation prompt
prepended) skips ahead to where the output resumes it, within :data:`RESYNC_WINDOW` characters. Every step either
consumes the characters it compared or compares at most the length of the longest markup string, so the audit is
linear in the output for a fixed parser.

The audit reads the final message, not the parser's internals: it holds for every format and for the message a
stream settles on. It does not prove a character went to the *right* field (two fields with the same text may be
swapped in the span list); it proves that no character went nowhere.
"""

from __future__ import annotations

import bisect
import enum
import json
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable

from .lossless import DRIFTED_CLOSER, SKIPPED_MARKUP, markup_of, tool_names, trigger_words
from .message import AssistantMessage

RESYNC_WINDOW = 64
"""How far ahead in a field a tape looks for the output's next characters after text the output does not hold."""
RESYNC_MIN = 3
"""Characters of the output that must match for a tape to skip ahead (a lone stray ``}`` never resyncs)."""
LOOKAHEAD = 16
"""Pieces of a call tried beyond its first unread one (a format may write keys out of the message's order)."""
_NONE: tuple[list[int], list[str]] = ([], [])
CALL_WINDOW = 3
"""Calls tried at once from the first one not yet read (calls are written in the message's order)."""
KEY_MAX = 128
"""Longest key a call's syntax may write again (:func:`_key_again`); a longer one written twice stays lost."""


CLOSED_FINAL_CALL = "unclosed-final-call"
"""The record of the repair that closes a last call whose closer the output cut (core.chat.repairs names it; this
module cannot import repairs, which imports it)."""


class Account(enum.Enum):
    """Where one character of an output went."""

    FIELD = "field"
    MARKUP = "markup"
    TRIMMED = "trimmed"
    PENDING = "pending"
    LOST = "lost"


class TrimRule(enum.Enum):
    """The documented whitespace trims (llama.cpp trims a field's edges; the formats put whitespace around
    markers that belongs to neither side)."""

    OUTPUT_EDGE = "output-edge"          # leading / trailing whitespace of the whole output
    BESIDE_MARKUP = "beside-markup"      # whitespace next to a marker or call syntax: a field's trimmed edge
    BETWEEN_FIELDS = "between-fields"    # whitespace where one field ends and another begins


class LostKind(enum.Enum):
    """Classes of lost text."""

    TEXT = "text"                        # letters or digits
    STRAY_PUNCTUATION = "stray-punctuation"   # punctuation outside any call (a stray ``}`` or ``<`` after a call)
    WHITESPACE = "whitespace"            # a whitespace run inside a field, collapsed or dropped
    MARKER_PREFIX = "marker-prefix"      # the end of a final output that is the start of a marker (cut by max tokens)


@dataclass(frozen=True)
class Span:
    """Characters ``[start, end)`` of the output and their account. ``where``: the field (``content``,
    ``reasoning_content``, ``tool_calls[2].name`` / ``.arguments`` / ``.id``), ``markup`` / ``call-syntax``, the
    :class:`TrimRule` value, ``pending``, or the :class:`LostKind` value."""

    start: int
    end: int
    account: Account
    where: str

    def text(self, output: str) -> str:
        """The characters of ``output`` this span covers."""
        return output[self.start:self.end]


@dataclass
class CharAudit:
    """The accounts of one output (:func:`audit_chars`): ``spans`` cover the output in order, without gaps."""

    output: str
    spans: list[Span] = field(default_factory=list)

    def lost(self) -> list[Span]:
        """The spans whose characters are in no field and no markup, in output order."""
        return [s for s in self.spans if s.account is Account.LOST]

    def lost_chars(self) -> int:
        """How many characters :meth:`lost` covers."""
        return sum(s.end - s.start for s in self.lost())

    def counts(self) -> dict[str, int]:
        """Characters per account (``field``, ``markup``, ``trimmed``, ``pending``, ``lost``)."""
        out = {a.value: 0 for a in Account}
        for s in self.spans:
            out[s.account.value] += s.end - s.start
        return out

    def lost_by_kind(self) -> dict[str, int]:
        """Lost characters per kind (:class:`LostKind` value: text, stray punctuation, whitespace, marker prefix)."""
        out: dict[str, int] = {}
        for s in self.lost():
            out[s.where] = out.get(s.where, 0) + s.end - s.start
        return out

    def explain(self, limit: int = 5) -> list[str]:
        """One line per lost span (at most ``limit``): where, what kind, the text escaped."""
        return [f"{s.start}-{s.end} {s.where}: {json.dumps(s.text(self.output), ensure_ascii=False)[:80]}"
                for s in self.lost()[:limit]]


# --- the pieces of a message -----------------------------------------------------------------------------------

@dataclass
class _Tape:
    where: str
    text: str
    pos: int = 0


@dataclass
class _Call:
    index: int
    name: str                           # read wherever the format writes it (GPT-OSS-like: to=NAME, then again)
    whole: str                          # the arguments as written (a JSON-written call matches it verbatim)
    groups: list[tuple[str, tuple[str, ...]]]   # (where, spellings) in order; reading one spelling reads the group
    done: list[bool] = field(default_factory=list)
    first: int = 0                      # first unread group
    args_read: bool = False             # a piece of the arguments was read (the whole no longer can be)
    name_reads: int = 0
    keys: frozenset[int] = frozenset()  # the groups that are keys of the decoded arguments
    keys_read: set[str] = field(default_factory=set)   # spellings of the keys read: the call may write them again

    by_char: dict[str, tuple[list[int], list[str]]] = field(default_factory=dict)   # first char -> groups, forms

    def __post_init__(self) -> None:
        self.done = [False] * len(self.groups)
        for g, (_, forms) in enumerate(self.groups):
            for f in forms:
                gs, fs = self.by_char.setdefault(f[0], ([], []))
                gs.append(g)
                fs.append(f)

    def read(self, g: int) -> None:
        self.done[g] = True
        if g in self.keys:
            self.keys_read.update(self.groups[g][1])
        self.args_read = self.args_read or self.groups[g][0].endswith(".arguments")
        while self.first < len(self.groups) and self.done[self.first]:
            self.first += 1


class _RawNumber(str):
    """A number of the arguments as their JSON text writes it (``1.5e10``, not ``15000000000.0``)."""


def _spellings(value: Any) -> tuple[str, ...]:
    """The ways a format writes a scalar value: raw, JSON-escaped (both ensure_ascii settings), Python's."""
    if isinstance(value, _RawNumber):   # as written; an integer with leading zeros (pythonic 07) is the same value
        forms = [str(value)]
        if value.isdigit():
            forms += ["0" + value, "00" + value]
    elif isinstance(value, str):
        py = value.replace("\\", "\\\\")
        forms = [value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1],
                 py.replace("'", "\\'"), py.replace('"', '\\"')]
    elif isinstance(value, bool):
        forms = ["true" if value else "false", "True" if value else "False"]
    elif value is None:
        forms = ["null", "None"]
    else:
        forms = [json.dumps(value), str(value)]
    return tuple(dict.fromkeys(f for f in forms if f))


def _value_groups(value: Any, where: str, out: list, keys: set[int], depth: int = 0) -> None:
    if depth > 256:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            keys.add(len(out))
            out.append((where, _spellings(str(k))))
            _value_groups(v, where, out, keys, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _value_groups(v, where, out, keys, depth + 1)
    else:
        forms = _spellings(value)
        if forms:
            out.append((where, forms))


_NUMBER = re.compile(r"-?\d{1,40}(?:\.\d{1,40})?")
CALL_KEY = "call-key"
"""``where`` of a key of a call's arguments written again (:func:`_key_again`): call syntax."""
CALL_INDEX = "call-index"
"""``where`` of a call's ordinal the format writes (Kimi K3's ``index="1"``): markup, not a field."""

_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"?|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null')


def _partial_groups(arguments: str, where: str, out: list) -> None:
    """The strings and scalars of arguments that are not (yet) JSON: a partial parse's ``{"arg1":`` or a cut
    string, each token as written and decoded."""
    for m in _TOKEN.finditer(arguments):
        if m.group(1) is not None:
            raw = m.group(1)
            try:
                decoded = json.loads('"' + raw + '"')
            except ValueError:
                decoded = raw
            out.append((where, tuple(dict.fromkeys(f for f in (raw, decoded) if f))))
        else:
            out.append((where, (m.group(0),)))


def _calls(msg: AssistantMessage) -> list[_Call]:
    calls = []
    for k, c in enumerate(msg.tool_calls):
        groups: list[tuple[str, tuple[str, ...]]] = []
        keys: set[int] = set()
        if c.id:
            # the id as written, or as the member of a JSON call object that carries it (repair call-object-id
            # reads "id": "x1" where the template writes no id field; the key is no marker of the format)
            members = [json.dumps(c.id, ensure_ascii=False)] + ([c.id] if _NUMBER.fullmatch(c.id) else [])
            groups.append((f"tool_calls[{k}].id", tuple(f'"id":{sp}{m}' for m in members for sp in (" ", ""))
                           + (c.id,)))
        groups.append((CALL_INDEX, (str(k), str(k + 1))))
        try:
            value = json.loads(c.arguments, parse_float=_RawNumber, parse_int=_RawNumber) if c.arguments else None
        except (ValueError, RecursionError):
            value = None
        if value is not None:
            _value_groups(value, f"tool_calls[{k}].arguments", groups, keys)
        elif c.arguments:   # arguments that are not JSON (a partial call)
            _partial_groups(c.arguments, f"tool_calls[{k}].arguments", groups)
        calls.append(_Call(k, c.name, c.arguments if len(c.arguments) > 2 else "", groups, keys=frozenset(keys)))
    return calls


def markup_pieces(markup: Iterable[str], names: Iterable[str] = ()) -> list[str]:
    """``markup`` with each tool name (3+ characters, standing apart) cut out of it: Llama 4's pythonic opener
    ``[get_weather(`` is markup ``[`` and ``(`` around the name, which must reach a call (or the content)."""
    names = sorted({n for n in names if len(n) >= 3}, key=len, reverse=True)
    cut = re.compile("|".join(r"(?<![^\W_])%s(?![^\W_])" % re.escape(n) for n in names)) if names else None
    out: set[str] = set()
    for s in markup:
        if not isinstance(s, str) or not s:
            continue
        # a letter or two of a grammar's character class ("e" of a JSON number) is no marker: it would hide text
        out.update(p for p in (cut.split(s) if cut else [s]) if p and not (p.isalnum() and len(p) < 3))
    return sorted(out, key=len, reverse=True)


# --- the walk --------------------------------------------------------------------------------------------------

def _common(a: str, i: int, b: str, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``, compared in slices that double while they match
    and halve at a mismatch (C-speed comparisons; the cost stays linear in the length found)."""
    limit = min(len(a) - i, len(b) - j)
    n, step = 0, 16
    while n < limit:
        k = min(step, limit - n)
        if a[i + n:i + n + k] == b[j + n:j + n + k]:
            n += k
            step *= 2
        elif k == 1:
            break
        else:
            step = k // 2
    return n


_PUNCT = frozenset('{}[]()"\'\\:,=;')


def audit_chars(output: str, msg: AssistantMessage, markup: Iterable[str], *, partial: bool = False,
                names: Iterable[str] = (), openers: Iterable[str] = ()) -> CharAudit:
    """Account for every character of ``output`` against the parsed ``msg`` and the ``markup`` strings of its
    parser (see the module doc; ``names``: tool names to cut out of markup, :func:`markup_pieces`; ``openers``: the
    markers that open a call or reasoning, which a final output cut inside loses, :func:`_cut_marker`).
    ``partial``: the output is a stream's prefix, and a tail that is neither field nor markup is ``PENDING``.

    The walk runs forward and backward and keeps the reading that loses fewer characters: a field that repeats
    text written earlier (the unparsed tail of a second call whose keys the first call also has) is read from its
    end, a field that repeats text written later (content that names the call it announces) from its start. Each
    reading uses every character of a field at most once, so either one losing nothing proves nothing was lost."""
    pieces = markup_pieces(markup, names)
    closed = [(r.start, r.end) for r in msg.repairs if getattr(r, "name", "") == CLOSED_FINAL_CALL]
    drifted = [(r.start, r.end) for r in msg.repairs if getattr(r, "name", "") == DRIFTED_CLOSER]
    forward = _drifted(_settle(output, _inside_markup(output, _merge(_walk(output, msg, pieces, False)), pieces),
                               pieces, partial, closed, tuple(openers)), drifted)
    lost = sum(s.end - s.start for s in forward if s.account is Account.LOST)
    if not lost:
        return CharAudit(output, forward)
    n = len(output)
    back = [(n - e, n - s, acc, where) for s, e, acc, where in reversed(_walk(output[::-1], msg, pieces, True))]
    backward = _drifted(_settle(output, _inside_markup(output, _merge(back), pieces), pieces, partial, closed,
                                tuple(openers)), drifted)
    if sum(s.end - s.start for s in backward if s.account is Account.LOST) < lost:
        return CharAudit(output, backward)
    return CharAudit(output, forward)


def _walk(output: str, msg: AssistantMessage, pieces: list[str], reverse: bool) -> list:
    """``(start, end, account, where)`` of each run the fields and markup read (account ``None``: a character
    nothing read), walking ``output`` — reversed with every field, piece and call when ``reverse``."""
    flip = (lambda x: x[::-1]) if reverse else (lambda x: x)
    by_char: dict[str, list[str]] = {}
    for p in sorted((flip(p) for p in pieces), key=len, reverse=True):
        by_char.setdefault(p[0], []).append(p)
    longest = max(map(len, pieces), default=0)
    tapes = [_Tape(w, flip(t)) for w, t in (("content", msg.content), ("reasoning_content", msg.reasoning_content))
             if t]
    calls = _calls(msg)
    if reverse:
        calls = [_Call(c.index, flip(c.name), flip(c.whole),
                       [(w, tuple(flip(f) for f in forms)) for w, forms in reversed(c.groups)],
                       keys=frozenset(len(c.groups) - 1 - g for g in c.keys)) for c in reversed(calls)]
    order = {id(c): k for k, c in enumerate(calls)}
    cur = 0
    n = len(output)
    marks: list[tuple[int, int, Account | None, str]] = []
    i = 0
    last_tape = ""
    window_at, starts = -1, set()
    while i < n:
        ch = output[i]
        best_len, best_where, best_kind, best_ref = 0, "", Account.FIELD, None
        for t in tapes:
            j = _skip_space(t, ch)
            if j < len(t.text) and t.text[j] == ch:
                k = _common(output, i, t.text, j)
                if k > best_len or (k == best_len and t.where == last_tape):
                    best_len, best_where, best_kind, best_ref = k, t.where, Account.FIELD, (t, j)
        if window_at != cur:   # the first characters any piece of the calls tried starts with
            window_at = cur
            starts = set()
            for c in calls[cur:cur + CALL_WINDOW]:
                starts.update(c.by_char)
                starts.update(x[0] for x in (c.name, c.whole) if x)
        for c in (calls[cur:cur + CALL_WINDOW] if ch in starts else ()):
            # a name is read once, or twice before the arguments (to=NAME then name="NAME"): a call the parse
            # dropped after a kept one of the same name does not lend it its name
            if c.name and len(c.name) > best_len and (c.name_reads == 0 or (c.name_reads == 1 and not c.args_read)) \
                    and output.startswith(c.name, i):
                best_len, best_where, best_kind, best_ref = len(c.name), f"tool_calls[{c.index}].name", \
                    Account.FIELD, (c, -2)
            if c.whole and not c.args_read and len(c.whole) > best_len and output.startswith(c.whole, i):
                best_len, best_where, best_kind, best_ref = len(c.whole), f"tool_calls[{c.index}].arguments", \
                    Account.FIELD, (c, -1)
            gs, fs = c.by_char.get(ch, _NONE)
            for k in range(bisect.bisect_left(gs, c.first), len(gs)):
                g = gs[k]
                if g > c.first + LOOKAHEAD:
                    break
                f = fs[k]
                if len(f) > best_len and not c.done[g] and output.startswith(f, i):
                    where = c.groups[g][0]
                    best_len, best_where, best_ref = len(f), where, (c, g)
                    best_kind = Account.MARKUP if where == CALL_INDEX else Account.FIELD
        for p in by_char.get(ch, ()):
            if len(p) <= best_len:
                break   # longest first: nothing shorter can win
            if output.startswith(p, i):
                best_len, best_where, best_kind, best_ref = len(p), "markup", Account.MARKUP, None
                break
        if calls and marks and marks[-1][2] is Account.MARKUP and marks[-1][1] == i:
            k = _key_again(output, i, calls[cur], by_char)
            if k > best_len:
                best_len, best_where, best_kind, best_ref = k, CALL_KEY, Account.MARKUP, None
        if best_len:
            if best_ref is not None and isinstance(best_ref[0], _Tape):
                t, j = best_ref
                best_len = _until_markup(output, i, best_len, by_char, longest)
                t.pos = j + best_len
                last_tape = t.where
            elif best_ref is not None:
                c, g = best_ref
                if g == -1:
                    for h in range(len(c.groups)):
                        if c.groups[h][0].endswith(".arguments"):
                            c.read(h)
                elif g >= 0:
                    c.read(g)
                else:
                    c.name_reads += 1
                cur = max(cur, order[id(c)])
            marks.append((i, i + best_len, best_kind, best_where))
            i += best_len
            continue
        if _resync(output, i, tapes):
            continue
        marks.append((i, i + 1, None, ""))
        i += 1
    return marks


def _key_again(output: str, i: int, call: _Call, by_char: dict[str, list[str]]) -> int:
    """Length of a key of ``call``'s arguments, already read, written again at ``i`` between two markup pieces
    (0 if none): XML-like elements write a key in their closing element (``</source>``) and a list as its key
    repeated (``<tag>a</tag><tag>b</tag>``), which is call syntax. A key written again with a value the message
    does not hold leaves that value lost. Compares at most :data:`KEY_MAX` positions, each against the pieces
    starting with its character."""
    if not call.keys_read:
        return 0
    for p in range(i + 1, min(len(output), i + KEY_MAX + 1)):
        if any(output.startswith(piece, p) for piece in by_char.get(output[p], ())) and output[i:p] in call.keys_read:
            return p - i
    return 0


def _until_markup(output: str, i: int, length: int, by_char: dict[str, list[str]], longest: int) -> int:
    """``length``, or less where a markup piece starts inside the field's match and runs past its end: content
    ``<answer></answer>`` around a call list ``<tool_calls>…</tool_calls>`` reads ``<answer>``, not ``<answer><``
    (the piece would then be unreadable). Compares at most the longest piece per character."""
    end = i + length
    for p in range(max(i + 1, end - longest), end):   # a piece that starts earlier ends inside the match
        for piece in by_char.get(output[p], ()):
            if len(piece) <= end - p:
                break
            if output.startswith(piece, p):
                return p - i
    return length


def _skip_space(t: _Tape, ch: str) -> int:
    """Where the tape reads ``ch``: here, or past whitespace the field holds and the output does not (a
    generation prompt's ``<think>\\n`` puts a line break before the reasoning), within :data:`RESYNC_WINDOW`."""
    j = t.pos
    if ch.isspace():
        return j
    end = min(len(t.text), j + RESYNC_WINDOW)
    while j < end and t.text[j].isspace():
        j += 1
    return j


def _resync(output: str, i: int, tapes: list[_Tape]) -> bool:
    """Move a tape past text the output does not hold (a generation prompt prepended, a separator the parser put
    between two pieces), when the output's next characters are found within :data:`RESYNC_WINDOW`."""
    want = output[i:i + 8]
    if len(want) < RESYNC_MIN:
        return False
    for t in tapes:
        q = t.text.find(want, t.pos, t.pos + RESYNC_WINDOW + len(want))
        if q > t.pos:
            t.pos = q
            return True
    return False


def _merge(marks: list[tuple[int, int, Account | None, str]]) -> list[tuple[int, int, Account | None, str]]:
    out: list[tuple[int, int, Account | None, str]] = []
    for m in marks:
        if out and out[-1][2] is m[2] and out[-1][3] == m[3] and out[-1][1] == m[0]:
            out[-1] = (out[-1][0], m[1], m[2], m[3])
        else:
            out.append(m)
    return out


def _inside_markup(output: str, marks: list[tuple[int, int, Account | None, str]], pieces: list[str]
                   ) -> list[tuple[int, int, Account | None, str]]:
    """Characters nothing read that lie inside an occurrence of a markup piece whose other characters were read as
    markup (or by nothing) are that piece's: markup. The walk takes the longest piece where it stands, and two
    pieces can overlap — DeepSeek V4's ``\n<｜DSML｜invoke`` (call-section-omitted's look-ahead) taken at the line
    break left the `` name="`` of ``<｜DSML｜invoke name="`` unread, lost, though the message is whole. A character
    in a field is never markup, so a piece over one does not count."""
    if not pieces or all(acc is not None for _, _, acc, _ in marks):
        return marks
    by_char: dict[str, list[str]] = {}
    for p in pieces:   # longest first, as pieces are
        by_char.setdefault(p[0], []).append(p)
    longest = len(pieces[0])
    starts = [m[0] for m in marks]

    def only_markup(a: int, b: int) -> bool:
        k = bisect.bisect_right(starts, a) - 1
        while k < len(marks) and marks[k][0] < b:
            if marks[k][2] not in (Account.MARKUP, None):
                return False
            k += 1
        return True

    out = []
    for s, e, acc, where in marks:
        if acc is None and any(output.startswith(p, a) and only_markup(a, a + len(p))
                               for a in range(max(0, e - longest), s + 1)
                               for p in by_char.get(output[a], ()) if a + len(p) >= e):
            acc, where = Account.MARKUP, "markup"
        out.append((s, e, acc, where))
    return _merge(out)


def _is_call(where: str) -> bool:
    return where.startswith("tool_calls[")


def _settle(output: str, marks: list, pieces: list[str], partial: bool, closed: list[tuple[int, int]],
            openers: tuple[str, ...]) -> list[Span]:
    """Give the characters no field or markup read an account: call syntax, a trim rule, pending, or lost."""
    spans: list[Span] = []
    n = len(output)
    # a partial parse holds back what it cannot place yet: text after the last character a field read (a call's
    # name between its cut markers, functions.get_weather: of Kimi K2) is pending, not lost
    held = max((e for s, e, acc, _ in marks if acc is Account.FIELD), default=0) if partial else n
    for k, (s, e, acc, where) in enumerate(marks):
        if acc is not None:
            spans.append(Span(s, e, acc, where))
            continue
        text = output[s:e]
        left = marks[k - 1] if k else None
        right = marks[k + 1] if k + 1 < len(marks) else None
        left_w = left[3] if left else ""
        right_w = right[3] if right else ""
        beside_markup = (left is not None and left[2] is Account.MARKUP) or (right is not None
                                                                               and right[2] is Account.MARKUP)
        beside_call = _is_call(left_w) or _is_call(right_w)
        if not text.strip():
            if s == 0 or e == n:
                spans.append(Span(s, e, Account.TRIMMED, TrimRule.OUTPUT_EDGE.value))
            elif beside_markup or beside_call:
                spans.append(Span(s, e, Account.TRIMMED, TrimRule.BESIDE_MARKUP.value))
            elif left_w != right_w:
                spans.append(Span(s, e, Account.TRIMMED, TrimRule.BETWEEN_FIELDS.value))
            else:
                spans.append(Span(s, e, Account.LOST, LostKind.WHITESPACE.value))
            continue
        if partial and (e == n or s >= held):
            spans.append(Span(s, e, Account.PENDING, "pending"))
            continue
        if all(c in _PUNCT or c.isspace() for c in text) and (
                beside_call or (left is not None and left[2] is Account.MARKUP and right is not None
                                and right[2] is Account.MARKUP)):
            spans.append(Span(s, e, Account.MARKUP, "call-syntax"))
            continue
        spans.append(Span(s, e, Account.LOST, _lost_kind(text, e == n, pieces)))
    return _cut_marker(output, _keys_beside_loss(output, spans), pieces, closed, openers)


def _drifted(spans: list[Span], ranges: list[tuple[int, int]]) -> list[Span]:
    """Lost characters inside a range a drifted-closing-tag record covers are the misspelled closer it read:
    markup."""
    if not ranges:
        return spans
    return [Span(s.start, s.end, Account.MARKUP, DRIFTED_CLOSER)
            if s.account is Account.LOST and any(a <= s.start and s.end <= b for a, b in ranges) else s
            for s in spans]


def _keys_beside_loss(output: str, spans: list[Span]) -> list[Span]:
    """A key written again is call syntax only between text that is read: one whose nearest field or loss on either
    side (past markup, trimmed whitespace and other keys written again) is a loss — the key of a call the parse
    dropped, written like a key the kept call has, or the element of a value the message lacks — is lost text."""
    def beside(order: Iterable[int]) -> list[bool]:
        out, lost = [False] * len(spans), False
        for k in order:
            s = spans[k]
            if s.where == CALL_KEY:
                out[k] = lost
            elif s.account not in (Account.MARKUP, Account.TRIMMED):
                lost = s.account is Account.LOST
        return out
    left, right = beside(range(len(spans))), beside(reversed(range(len(spans))))
    return [Span(s.start, s.end, Account.LOST, _lost_kind(s.text(output), False, []))
            if s.where == CALL_KEY and (left[k] or right[k]) else s for k, s in enumerate(spans)]


def _cut_marker(output: str, spans: list[Span], pieces: list[str], closed: list[tuple[int, int]],
                openers: tuple[str, ...]) -> list[Span]:
    """A final output that ends inside a marker: the marker's start (markup read just before the lost tail,
    ``]<]minimax[>[<`` of ``]<]minimax[>[<tool_ca``) joins the tail. Right after a call, a cut marker that does not
    start an opener (``openers``: the call triggers and the reasoning start) is that call's closer, ``</tool_`` of
    ``</tool_call>``: markup; so is one the parse closed itself (``closed``: the ranges of its unclosed-final-call
    records). Else it opened a construct nothing read (``<|tool_call>ca`` after a whole call, ``<`` after
    content), and all of it is lost (``marker-prefix``). Looks back at most 64 characters."""
    n = len(output)
    t = len(spans) - 1   # the lost tail; a marker's middle read as markup may end it (</ lost, ｜DSML｜ markup)
    while t > 0 and spans[t].account is Account.MARKUP and spans[t].start >= n - 64:
        t -= 1
    if not spans or spans[t].account is not Account.LOST or spans[t].start < n - 64 or (
            t < len(spans) - 1 and not _is_prefix(output[spans[t].start:], pieces)) or spans[-1].end != n:
        return spans
    last = spans[t]
    lo = last.start   # the marker may start in the markup (or lost text) read just before the lost tail
    j = len(spans) - 1
    while j > 0 and spans[j - 1].account in (Account.MARKUP, Account.LOST) and spans[j - 1].start >= n - 64:
        j -= 1
        lo = spans[j].start
    if j > 0 and spans[j - 1].account is Account.MARKUP and spans[j - 1].end > n - 64:
        lo = max(spans[j - 1].start, n - 64)
    start = next((k for k in range(lo, last.start + 1) if _is_prefix(output[k:], pieces)), -1)
    if start < 0:
        if last.where != LostKind.MARKER_PREFIX.value:
            return spans
        start = last.start
    keep = [x for x in spans if x.end <= start]
    keep += [Span(x.start, start, x.account, x.where) for x in spans if x.start < start < x.end]
    cut = output[start:].lstrip()
    before = next((x for x in reversed(keep) if x.account is Account.FIELD or x.where == "call-syntax"), None)
    after_call = before is not None and (_is_call(before.where) or before.where == "call-syntax")
    if any(a <= start < b for a, b in closed) or (after_call and not any(o.startswith(cut) for o in openers)):
        return keep + [Span(start, n, Account.MARKUP, "cut-closer")]
    return keep + [Span(start, n, Account.LOST, LostKind.MARKER_PREFIX.value)]


def _is_prefix(text: str, pieces: list[str]) -> bool:
    return bool(text) and any(len(p) > len(text) and p.startswith(text) for p in pieces)


def _lost_kind(text: str, at_end: bool, pieces: list[str]) -> str:
    if at_end:
        # the tail from some marker-like character on is the start of a marker: cut by the end of the output
        for k in range(max(0, len(text) - 64), len(text)):   # a marker is short: the last characters only
            if text[k].isalnum() and k:
                continue
            tail = text[k:].lstrip()
            if tail and any(len(p) > len(tail) and p.startswith(tail) for p in pieces):
                return LostKind.MARKER_PREFIX.value
    if any(c.isalnum() for c in text):
        return LostKind.TEXT.value
    return LostKind.STRAY_PUNCTUATION.value


_LAST_AUDIT = threading.local()
"""The last :func:`audit_parse` of this thread: ``(weakref to the parser, key, audit)``."""


def _audit_key(output: str, msg: AssistantMessage, partial: bool) -> tuple:
    """What an audit of ``output`` reads of ``msg``: its fields, its calls and the spans a closed final call covers."""
    return (output, partial, msg.content, msg.reasoning_content,
            tuple((c.name, c.arguments, c.id) for c in msg.tool_calls),
            tuple((r.start, r.end) for r in msg.repairs if getattr(r, "name", "") in (CLOSED_FINAL_CALL,
                                                                                         DRIFTED_CLOSER)))


def audit_parse(parser: Any, output: str, msg: AssistantMessage, *, partial: bool = False) -> CharAudit:
    """:func:`audit_chars` with the markup of ``parser`` (:func:`core.chat.lossless.markup_of` with the request and
    analysis :func:`core.chat.pipeline.build_chat_parser` attached, and the words its grammar skips).

    The last audit of the thread is kept: the same parser, output and message (repair ``unparsed-characters``
    audits a final parse, then a caller checking that message — :func:`core.chat.realset.run_case`, a stream's
    finish — audits it again) give the same :class:`CharAudit` without a second walk. Treat it as read-only."""
    key = _audit_key(output, msg, partial)
    last = getattr(_LAST_AUDIT, "audit", None)
    if last is not None and last[0]() is parser and last[1] == key:
        return last[2]
    request, analysis, fmt = getattr(parser, "lossless_context", None) or (None, None, "")
    strs = markup_of(parser, request, analysis) + list(SKIPPED_MARKUP.get(fmt, ()))
    openers = trigger_words(parser)
    openers.append(getattr(parser, "thinking_start_tag", "") or "")
    audit = audit_chars(output, msg, strs, partial=partial, names=tool_names(request),
                        openers=[o for o in openers if o])
    try:
        _LAST_AUDIT.audit = (weakref.ref(parser), key, audit)
    except TypeError:   # a parser that takes no weak reference is audited every time
        _LAST_AUDIT.audit = None
    return audit


__all__ = ["Account", "CharAudit", "LostKind", "Span", "TrimRule", "audit_chars", "audit_parse", "markup_pieces"]
