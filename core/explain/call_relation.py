"""The cause of a call-format mistake decided by construction from the template's own renders.

The triage renders the assistant turn with one call (the tool and argument names the output writes) and the same
turn without it; what the two renders do not share is the template's **call markup**, cut at the tool's name, the
argument keys and values into its literal **pieces** in order (opener, inner markers, closer). The relation between
those pieces and the output's markup names the class:

- every piece present, in order, and the analysis found no tool format → ``FORMAT_NOT_FOUND``;
- some pieces absent: the opener → ``OMITTED_OPENER``, else the closer → ``OMITTED_CLOSER``, else an inner piece →
  ``OMITTED_MARKER``;
- every piece present and markup no render writes right around the call → ``FOREIGN_WRAPPER``;
- none present while the output writes call-shaped markup of its own → ``TEMPLATE_MODEL_MISMATCH``;
- an absent piece written altered (another case, a suffix more or less) → ``ALTERED``: the marker-affix and
  whitespace rules read it; every piece present and nothing around → ``CONSISTENT``: the relation has nothing to say.

Everything here is a pure function of text; rendering is the caller's (:mod:`core.explain.triage`, through
:mod:`core.jinja`). Every pattern is linear-time and every scan bounded.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ..escapes import code_span, visible

_WS = " \t\n\v\f\r"
MAX_PIECES = 24            # pieces of one rendered call compared (a longer render is cut there)
MAX_TOKENS = 256           # markup tokens of the output looked at
MAX_OUTPUT = 256 * 1024    # characters of the output the relation reads

# markup of any family: control tokens (`<|x|>`, `<|x>`, `<x|>`, `<｜x｜>`, `[TOOL_CALLS]`), tags, code fences
MARKUP = re.compile(r"<\|[^|<>\n]{1,40}\|>|<\|[^|<>\s]{1,40}>|<[^|<>\s]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>"
                    r"|</?[A-Za-z_][\w:.\-]{0,40}(?:\s[^<>\n]{0,80})?>|\[[A-Z_]{3,30}\]|```[\w\-]{0,16}")
# a piece worth comparing: it holds a letter, a digit or a control token's bar (`{`, `">`, `:` alone do not)
_SIGNIFICANT = re.compile(r"[A-Za-z0-9|｜]")
# a piece is cut further at the markup it holds, so `<|"|>}<tool_call|>` gives `<|"|>`, `}`, `<tool_call|>`, and a
# tag's head cut at an attribute or a name stays whole (`<function=`, `<｜DSML｜invoke`)
_CUT = re.compile(MARKUP.pattern + r"""|</?[^\s<>="]{1,60}[>=]?|"[^"\s]{1,64}":?|[^\s<\[`"]+|[<\[`"]""")
_TAG_HEAD = re.compile(r"(</?[^\s<>=\"|]{1,60})[\s=]")


class Relation(str, enum.Enum):
    """How the output's markup stands to the template's call pieces; a decisive value is a ``Mistake``'s name."""

    FORMAT_NOT_FOUND = "FORMAT_NOT_FOUND"
    OMITTED_OPENER = "OMITTED_OPENER"
    OMITTED_CLOSER = "OMITTED_CLOSER"
    OMITTED_MARKER = "OMITTED_MARKER"
    FOREIGN_WRAPPER = "FOREIGN_WRAPPER"
    TEMPLATE_MODEL_MISMATCH = "TEMPLATE_MODEL_MISMATCH"
    ALTERED = "altered"            # a piece written with another case or suffix: the affix rules read it
    CONSISTENT = "consistent"      # every piece present, nothing foreign around: nothing to say
    NO_CALL = "no call"            # no piece present and no call-shaped markup: nothing to say


DECISIVE = frozenset({Relation.FORMAT_NOT_FOUND, Relation.OMITTED_OPENER, Relation.OMITTED_CLOSER,
                      Relation.OMITTED_MARKER, Relation.FOREIGN_WRAPPER, Relation.TEMPLATE_MODEL_MISMATCH})


# what an altered relation names when every piece is written: the text the render strings them together with, or
# only the whitespace between them
ALTERED_LITERAL = "the call's literal text between its pieces"
ALTERED_WHITESPACE = "the whitespace between the call's pieces"

@dataclass(frozen=True)
class CallRelation:
    """The relation and its evidence: the template's pieces matched and absent (in render order), the output's
    markup no render writes around the call, the render the pieces came from."""

    relation: Relation
    pieces: tuple[str, ...]
    matched: tuple[str, ...]
    absent: tuple[str, ...]
    foreign: tuple[str, ...]
    render: str
    altered: str = ""          # the output's token that is an absent piece written otherwise
    stop_in: str = ""          # with every piece in place: what fills the place the parse stopped in (``value``, …)
    stop_key: str = ""         # and the key written before that place

    def to_json(self) -> dict[str, object]:
        """JSON-ready dict (``explain --json``: ``triage.relation``)."""
        return {"relation": self.relation.value, "pieces": list(self.pieces), "matched": list(self.matched),
                "absent": list(self.absent), "foreign": list(self.foreign), "render": self.render,
                "altered": self.altered, "stop_in": self.stop_in, "stop_key": self.stop_key}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> CallRelation:
        """The relation back from :meth:`to_json` (the Explain page gets the JSON from its worker)."""
        def strs(key: str) -> tuple[str, ...]:
            return tuple(str(x) for x in data.get(key) or ())  # type: ignore[union-attr]

        return cls(Relation(data["relation"]), strs("pieces"), strs("matched"), strs("absent"), strs("foreign"),
                   str(data.get("render") or ""), str(data.get("altered") or ""), str(data.get("stop_in") or ""),
                   str(data.get("stop_key") or ""))

    def sentence(self) -> str:
        """The evidence as one sentence (every piece quoted, nothing of the output's own text beyond its markup); each
        quoted piece one Markdown code span whatever backticks it holds (:func:`core.escapes.code_span`)."""
        def q(xs: tuple[str, ...]) -> str:
            return ", ".join(code_span(x) for x in xs[:6]) + (" …" if len(xs) > 6 else "")

        head = f"the template's render of the call writes the pieces {q(self.pieces)} around the name and arguments"
        r = self.relation
        if r == Relation.FORMAT_NOT_FOUND:
            return head + "; the output writes every one of them, in order, yet the analysis found no tool format " \
                          "for this template: the template writes the call, our analysis did not find it"
        if r in (Relation.OMITTED_OPENER, Relation.OMITTED_CLOSER, Relation.OMITTED_MARKER):
            where = {Relation.OMITTED_OPENER: "the opener", Relation.OMITTED_CLOSER: "the closer",
                     Relation.OMITTED_MARKER: "a marker inside the call"}[r]
            return head + f"; the output writes {q(self.matched)} but not {q(self.absent)}: it left out {where} " \
                          f"{code_span(self.absent[0])}"
        if r == Relation.FOREIGN_WRAPPER:
            return head + f"; the output writes every one of them and wraps the call in {q(self.foreign)}, which no " \
                          "render of the template writes"
        if r == Relation.TEMPLATE_MODEL_MISMATCH and self.matched:
            return head + f"; the output writes {q(self.matched)} but none of the markup the template writes inside " \
                          f"the call ({q(self.absent)}): its call inside is written in another format"
        if r == Relation.TEMPLATE_MODEL_MISMATCH:
            return head + f"; the output writes none of them and writes its call with {q(self.foreign)}, markup of " \
                          "another format"
        if r == Relation.ALTERED and self.absent and self.altered.startswith(("<", "[")):
            return head + f"; the output writes {code_span(self.altered)} where the template writes " \
                          f"{code_span(self.absent[0])}"
        if r == Relation.ALTERED:
            return head + f"; the output differs in {self.altered}"
        return head


@dataclass(frozen=True)
class CallPieces:
    """The template's call markup: ``pieces`` (the significant ones, in render order), ``segments``, the literal
    stretches around the fills, each a list of its tokens with the whitespace the render writes before each, and
    ``gaps``, what fills the place after each segment but the last (``name``, ``key``, ``value``, ``id``)."""

    pieces: tuple[str, ...]
    segments: tuple[tuple[tuple[str, str], ...], ...]
    stretch: str
    gaps: tuple[str, ...] = ()


def _token_char(c: str) -> bool:
    return c.isalnum() or c in "_|｜:="


def call_pieces(with_call: str, without_call: str, fills: dict[str, str]) -> CallPieces:
    """The template's call markup: the part of ``with_call`` (the turn rendered with the call) that
    ``without_call`` (the same turn with no call) does not share at either end — never cutting a token — cut at
    every ``fills`` string (the tool's name, the argument keys and values it was rendered with, the call id; each
    mapped to what it is) where it stands as a word, each literal stretch cut into tokens at whitespace and at the
    markup it holds; the significant pieces are the tokens with a letter, a digit or a control token's bar (`{`,
    `":` alone are not)."""
    a, b = with_call, without_call
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    while 0 < k < len(a) and a[k - 1] not in _WS + ">]" and _token_char(a[k]):
        k -= 1          # (not inside a token the two renders begin alike)
    e = 0
    while e < min(len(a), len(b)) - k and a[len(a) - 1 - e] == b[len(b) - 1 - e]:
        e += 1
    while 0 < e < len(a) - k and a[len(a) - e] not in _WS + "<[" and _token_char(a[len(a) - e - 1]):
        e -= 1          # (not inside a token the two renders end alike)
    stretch = a[k:len(a) - e]
    texts = sorted({f for f in fills if f}, key=len, reverse=True)
    cut = re.compile("(" + "|".join(rf"(?<![\w]){re.escape(f)}(?![\w])" for f in texts) + ")") if texts else None
    parts = cut.split(stretch) if cut else [stretch]
    pieces: list[str] = []
    segments: list[tuple[tuple[str, str], ...]] = []
    for part in parts[::2][:MAX_PIECES]:
        seg: list[tuple[str, str]] = []
        at = 0
        for m in _CUT.finditer(part):
            seg.append((part[at:m.start()], m.group(0)))
            at = m.end()
            if _SIGNIFICANT.search(m.group(0)) and len(pieces) < MAX_PIECES:
                pieces.append(m.group(0))
        segments.append(tuple(seg))
    gaps = tuple(fills.get(f, "") for f in parts[1::2][:len(segments) - 1])
    return CallPieces(tuple(pieces), tuple(segments), stretch, gaps)


def _spans(segments: tuple[tuple[tuple[str, str], ...], ...], text: str, strict: bool
           ) -> list[tuple[int, int]] | None:
    """Where the render's literal stretches are found in ``text``, in order, each a run of its tokens with only
    whitespace between them (``strict``: the whitespace the render writes there); one span per segment, or None."""
    at = 0
    spans: list[tuple[int, int]] = []
    for seg in segments:
        body = "".join((re.escape(ws) if strict and i else (r"\s*" if i else "")) + re.escape(tok)
                       for i, (ws, tok) in enumerate(seg))
        m = re.compile(body).search(text, at)
        if m is None:
            return None
        spans.append((m.start(), m.end()))
        at = m.end()
    return spans


def _skeleton(segments: tuple[tuple[tuple[str, str], ...], ...], text: str, strict: bool) -> tuple[int, int] | None:
    """The span from the first of the render's literal stretches found in ``text`` to the end of the last
    (:func:`_spans`), or None."""
    spans = [sp for sp, seg in zip(_spans(segments, text, strict) or [], segments) if seg]
    return (spans[0][0], spans[-1][1]) if spans else None


def _in_order(pieces: tuple[str, ...], text: str) -> tuple[list[tuple[str, int, int]], list[str]]:
    """Each piece found in order after the previous one's end: ``(piece, start, end)`` of those found and the
    pieces not found (searched for from where the last found one ended)."""
    found: list[tuple[str, int, int]] = []
    absent: list[str] = []
    at = 0
    for p in pieces:
        i = text.find(p, at)
        if i < 0:
            absent.append(p)
            continue
        found.append((p, i, i + len(p)))
        at = i + len(p)
    return found, absent


def _key(token: str) -> str:
    """A markup token as compared with the renders: a tag by its head alone (its attributes hold names and values)."""
    m = _TAG_HEAD.match(token)
    return m.group(1) if m else token


def _affixed(token: str, piece: str) -> bool:
    """``token`` is ``piece`` in another case, or with a stretch of it left out or one put in (`<tool_calls>` for
    `<｜DSML｜tool_calls>`, `<|tool_call|>` for `<|tool_call:opensource|>`): what the two share at their start
    and at their end covers the shorter, at least four characters, each end sharing one."""
    a, b = token.lower(), piece.lower()
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) < 4:
        return False
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    j = 0
    while j < len(short) - i and short[-1 - j] == long_[-1 - j]:
        j += 1
    return i >= 1 and j >= 1 and i + j >= len(short) or a == b


_JSON_KEY = re.compile(r'"[\w\-]{1,64}":')


_JSON_NAME = re.compile(r'"name"\s{0,8}:\s{0,8}"([^"\\\n]{1,64})"')


def relate(call: CallPieces, output: str, *, format_found: bool, rendered: frozenset[str], stop: int = -1,
           names: frozenset[str] = frozenset()) -> CallRelation:
    """The relation between the template's call (``call``, from :func:`call_pieces`) and ``output``.
    ``rendered``: every markup token the template's renders write (the call turn, the turn without it, with
    reasoning, the prompt), so markup around the call that is none of them is foreign; ``format_found``: whether
    the analysis found a tool format; ``stop``: where the parse stopped in the output (-1: nowhere); ``names``:
    the request's tools (a JSON object naming one is a call of the output's own shape)."""
    pieces, render = call.pieces, call.stretch
    out = output[:MAX_OUTPUT]
    tokens = [m for _, m in zip(range(MAX_TOKENS), MARKUP.finditer(out))]
    rendered = frozenset(_key(t) for t in rendered)
    own = tuple(dict.fromkeys(m.group(0) for m in tokens if _key(m.group(0)) not in rendered))

    def rel(kind: Relation, matched: tuple[str, ...] = (), absent: tuple[str, ...] = (),
            foreign: tuple[str, ...] = (), altered: str = "") -> CallRelation:
        return CallRelation(kind, pieces, matched, absent, foreign, render, altered)

    if not pieces:
        return rel(Relation.NO_CALL, foreign=own)
    found, absent = _in_order(pieces, out)
    matched = tuple(p for p, _, _ in found)
    # a piece present only as punctuation-sized text everywhere (`>`, `=`) says nothing: count the markup ones
    solid = [p for p in matched if MARKUP.fullmatch(p) or len(p) >= 3]
    if not solid:
        # (call-shaped: markup of its own around a requested tool's name, or a JSON object naming one — a fence or
        # a tag alone is no call)
        named = tuple(m.group(0) for _, m in zip(range(MAX_TOKENS), _JSON_NAME.finditer(out)) if m.group(1) in names)
        shaped = (own if any(n and n in out for n in names) else ()) + named[:1]
        return rel(Relation.TEMPLATE_MODEL_MISMATCH if shaped else Relation.NO_CALL, (), pieces, shaped)
    if absent and found and not out[found[-1][2]:].strip(_WS):
        # the output ends right after a piece: the pieces the render writes after it are the turn's end, which a
        # server's stop (or the end of generation) leaves out — not the model's omission
        last = max(i for i, p in enumerate(pieces) if p == found[-1][0])
        absent = [p for p in absent if p not in pieces[last + 1:]]
    if absent:
        return _partial(pieces, call.segments, matched, tuple(absent), found, out, tokens, rendered, render)
    span = _skeleton(call.segments, out, strict=False)
    if span is None:
        # every piece written, but not as the render strings them together (another brace, a body in between):
        # the format reading of the rules, not an omission
        return rel(Relation.ALTERED, matched, altered=ALTERED_LITERAL)
    if _skeleton(call.segments, out, strict=True) is None:
        return rel(Relation.ALTERED, matched, altered=ALTERED_WHITESPACE)
    start, end = span
    around = tuple(dict.fromkeys(m.group(0) for m in tokens if _key(m.group(0)) not in rendered
                                 and _adjacent(out, m, start, end)))
    if around and any(m.end() <= start and m.group(0) in around and not m.group(0).startswith("</") for m in tokens):
        # (a wrapper opens before the call: a closer there ends a block before it, `</think>`; markup only after
        # the call is text after it, the rules' reading)
        return rel(Relation.FOREIGN_WRAPPER, matched, foreign=around)
    if re.search(r"[{\[]", MARKUP.sub("", out[:start])) or re.search(r"[}\]]", MARKUP.sub("", out[end:])):
        return rel(Relation.ALTERED, matched, altered="brackets around the call")
    if not format_found:
        return rel(Relation.FORMAT_NOT_FOUND, matched)
    where, key = _stop_place(call, out, stop)
    return CallRelation(Relation.CONSISTENT, pieces, matched, (), (), render, stop_in=where, stop_key=key)


def _stop_place(call: CallPieces, out: str, stop: int) -> tuple[str, str]:
    """What fills the place between two of the render's literal stretches where the parse stopped (``name``,
    ``key``, ``value``) and the output's text in the key's place before it; ``("", "")`` elsewhere."""
    spans = _spans(call.segments, out, strict=False) if stop >= 0 else None
    if not spans:
        return "", ""
    key = ""
    for i, kind in enumerate(call.gaps):
        lo, hi = spans[i][1], spans[i + 1][0]
        if kind == "key":
            key = out[lo:hi].strip(_WS)
        if lo <= stop < hi:
            return kind, key
    return "", ""


def _respaced(segments: tuple[tuple[tuple[str, str], ...], ...], out: str) -> str:
    """"the whitespace between the call's pieces" when the output writes two tokens the render writes next to each
    other with other whitespace between them (and never as rendered), else ``""``."""
    for seg in segments:
        for (_, a), (ws, b) in zip(seg, seg[1:]):
            if not (MARKUP.fullmatch(a) or MARKUP.fullmatch(b)) or a + ws + b in out:
                continue
            if re.search(re.escape(a) + r"\s{0,16}" + re.escape(b), out):
                return "the whitespace between the call's pieces"
    return ""


def _partial(pieces: tuple[str, ...], segments: tuple[tuple[tuple[str, str], ...], ...], matched: tuple[str, ...],
             absent: tuple[str, ...], found: list[tuple[str, int, int]], out: str, tokens: list[re.Match[str]],
             rendered: frozenset[str], render: str) -> CallRelation:
    """The relation when some of the template's pieces are not in the output (in order)."""
    def rel(kind: Relation, foreign: tuple[str, ...] = (), altered: str = "") -> CallRelation:
        return CallRelation(kind, pieces, matched, absent, foreign, render, altered)

    first = absent[0]
    lo, hi = found[0][1], found[-1][2]
    for m in tokens:            # the absent piece written otherwise: case, or a piece of it more or less
        t = m.group(0)
        if t != first and _key(t) not in rendered and first.startswith(("<", "[")) and _affixed(t, first):
            return rel(Relation.ALTERED, altered=t)
    own = tuple(dict.fromkeys(m.group(0) for m in tokens if _key(m.group(0)) not in rendered))
    if own and 2 * len(matched) < len(pieces):
        # most of the template's call missing and markup of the output's own in its place: another format
        return rel(Relation.TEMPLATE_MODEL_MISMATCH, own)
    inner = pieces[1:-1]
    if inner and pieces[0] in matched and all(p in absent for p in inner):
        # the template's opener and none of its markup inside: the call is written in another format within
        return rel(Relation.TEMPLATE_MODEL_MISMATCH)
    before = tuple(dict.fromkeys(m.group(0) for m in tokens if _key(m.group(0)) not in rendered
                                 and m.end() <= lo and not m.group(0).startswith("</") and _adjacent(out, m, lo, hi)))
    if before:
        # markup of the output's own right before the call (where the template writes its opener, or around its
        # first piece): a wrapper — the outer fault first, whatever the call inside lacks
        return rel(Relation.FOREIGN_WRAPPER, before)
    spaced = _respaced(segments, out)
    if spaced:
        return rel(Relation.ALTERED, altered=spaced)
    if any(p in out for p in absent if MARKUP.fullmatch(p) or len(p) >= 3):
        return rel(Relation.ALTERED, altered="a piece written out of the template's order")
    if any(_JSON_KEY.fullmatch(p) for p in absent) and _JSON_KEY.search(out[lo:hi] or out):
        return rel(Relation.ALTERED, altered="a JSON key of another name")
    gone = set(absent)
    if _skeleton(tuple(tuple(t for t in seg if t[1] not in gone) for seg in segments), out, strict=False) is None:
        # without the absent pieces the render's literal text still is not the output's: not an omission alone
        # (another syntax around it — `(` for `{` —, a body of another format): the rules' reading
        return rel(Relation.ALTERED, altered="the call's literal text around the absent pieces")
    if first == pieces[0]:
        return rel(Relation.OMITTED_OPENER)
    if all(p.startswith("</") or p == pieces[-1] for p in absent):
        return rel(Relation.OMITTED_CLOSER)
    return rel(Relation.OMITTED_MARKER)


def _adjacent(out: str, m: re.Match[str], start: int, end: int) -> bool:
    """Markup right around the call: outside it, separated from it only by whitespace, other markup and the
    brackets a call opens with (the render's `{` before its first piece)."""
    if m.end() > start and m.start() < end:
        return False        # (inside the call: its arguments' own markup, not a wrapper)
    gap = out[m.end():start] if m.end() <= start else out[end:m.start()] if m.start() >= end else ""
    return len(gap) <= 256 and not MARKUP.sub("", gap).strip(_WS + "{[(")


class PieceMark(str, enum.Enum):
    """How the output stands to one of the template's call pieces (:func:`piece_rows`)."""

    MATCHED = "matched"            # written, in the template's order
    ABSENT = "absent"              # not written (after the pieces before it)
    ALTERED = "altered"            # not written as the template writes it, written otherwise (``written``)
    PAST_END = "past the end"      # the render writes it after the piece the output ends with: the turn's end


@dataclass(frozen=True)
class PieceRow:
    """One of the template's call pieces, in render order, and how the output stands to it."""

    piece: str
    mark: PieceMark
    written: str = ""              # (ALTERED) the output's token in its place


def piece_rows(rel: CallRelation) -> tuple[PieceRow, ...]:
    """Each of the template's pieces marked. ``matched`` and ``absent`` are in render order and interleave to the
    pieces (a piece once absent is absent at every later place, so a piece equal to both heads is the matched
    one); a piece in neither is one the render writes after the output's end (:func:`relate` leaves those out);
    the first absent piece is ``altered`` when the output writes a token of its own in its place."""
    rows: list[PieceRow] = []
    mi = ai = 0
    token = rel.altered if rel.relation == Relation.ALTERED and rel.altered.startswith(("<", "[")) else ""
    for p in rel.pieces:
        if mi < len(rel.matched) and rel.matched[mi] == p:
            rows.append(PieceRow(p, PieceMark.MATCHED))
            mi += 1
        elif ai < len(rel.absent) and rel.absent[ai] == p:
            rows.append(PieceRow(p, PieceMark.ALTERED, token) if ai == 0 and token else PieceRow(p, PieceMark.ABSENT))
            ai += 1
        else:
            rows.append(PieceRow(p, PieceMark.PAST_END))
    return tuple(rows)


RENDER_SHOWN = 160      # characters of the template's render shown in the relation's lines
# the values the triage renders a call with (``triage._FILL``, ``_NUMBER_FILL``: text no template writes, so the
# render can be cut at them) are no text of the template's: the lines show each as ``‹value›``
PROBE_VALUE = re.compile(r"zqv\d{1,2}x|(?<!\d)97531\d{1,2}(?!\d)")
VALUE_SHOWN = "‹value›"
# each relation in the field's words (the decisive ones are Mistake names, internal)
RELATION_WORDS = {Relation.FORMAT_NOT_FOUND: "every piece written, a format the analysis did not find",
                  Relation.OMITTED_OPENER: "the opener left out", Relation.OMITTED_CLOSER: "the closer left out",
                  Relation.OMITTED_MARKER: "a marker inside the call left out",
                  Relation.FOREIGN_WRAPPER: "every piece written, inside markup the template does not render",
                  Relation.TEMPLATE_MODEL_MISMATCH: "no piece written, call markup of the model's own instead",
                  Relation.ALTERED: "a piece written otherwise", Relation.CONSISTENT: "consistent",
                  Relation.NO_CALL: "no call"}
FOREIGN_SHOWN = 12      # tokens of the output's own markup shown there


def _code(text: str) -> str:
    """Text as one inline code span, whitespace and invisible characters made visible (``␣``, ``\\u202e``)."""
    return code_span(visible(text))


def relation_lines(rel: CallRelation, decided: bool) -> list[str]:
    """The relation as lines, the same in the CLI's text and on the Explain page: a head naming the class and
    whether it decided the mistake (``decided``) or names the one the rules named, the template's render, each
    piece in render order with its mark, then the output's markup no render writes (every piece and token an
    inline code span with its whitespace and invisible characters shown: no text breaks out of it)."""
    role = "it decided the mistake" if decided else "it names the mistake the rules named"
    plain = PROBE_VALUE.sub(VALUE_SHOWN, rel.render)
    render = plain if len(plain) <= RENDER_SHOWN else plain[:RENDER_SHOWN] + "…"
    lines = [f"call relation: {RELATION_WORDS[rel.relation]} ({role}) — the template's call pieces against the "
             "output's markup",
             f"render: {_code(render)}" + (f" ({VALUE_SHOWN}: an argument's value)" if plain != rel.render else "")]
    rows = piece_rows(rel)
    width = max((len(r.mark.value) for r in rows), default=0)
    for row in rows:
        lines.append(f"{row.mark.value:<{width}}  {_code(row.piece)}"
                     + (f" written {_code(row.written)}" if row.written else ""))
    if rel.relation == Relation.ALTERED and rel.altered and not rel.altered.startswith(("<", "[")):
        lines.append(f"altered: {rel.altered}")
    more = f" … {len(rel.foreign) - FOREIGN_SHOWN} more" if len(rel.foreign) > FOREIGN_SHOWN else ""
    lines.append("foreign: " + (", ".join(_code(t) for t in rel.foreign[:FOREIGN_SHOWN]) + more if rel.foreign
                                else "none (no markup of the output's own around the call)"))
    if rel.stop_in:
        key = rel.stop_key if len(rel.stop_key) <= 60 else rel.stop_key[:60] + "…"
        lines.append(f"the parse stopped in the call's {rel.stop_in}" + (f", after the key {_code(key)}" if key
                                                                          else ""))
    return lines
