"""Where every character went: labelled spans over ``generation_prompt + output``, and the message they rebuild.

Spans come from the parse that made the message:

the AST of a traced run (:func:`core.peg.trace.traced_parse`) of the same arena and entry point the parser used
(the auto-parser and the special families alike) — chat tags give reasoning / content / tool name / call id /
argument name and value, a value hook's tag gives the arguments it made, matched literals give markers
(labelled with the analysis field whose value they are), the rest of what the parse consumed is whitespace.

Text the parse did not consume but the final parse kept as content (llama.cpp would have thrown) is
``unparsed``. :func:`rebuild_message` rebuilds the OpenAI message from the spans alone; the tests check it
equals the parser's message. :func:`attach_repairs` lays fired repairs (name, ``[start, end)`` of the raw
output) over the spans for the ``repaired: NAME`` label.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, replace
from typing import Any, Iterable

from ..chat.mapper import ARGS_CONVERTERS, TOOL_ARGS_AS, normalize_python_value, python_literal_to_json
from ..chat.repairs import (PINNED_DROP_FORMATS, STREAM_CONSISTENT_FINAL, TRUNCATED_CALL, UNPARSED_CHARACTERS,
                             UNPARSED_TEXT, content_with_tail)
from ..chat.message import AssistantMessage, ToolCall
from ..peg import chat as T
from ..peg.trace import MARKER_TAG

_WS = " \t\n\v\f\r"


class SpanLabel(str, enum.Enum):
    """What a run of characters became (the legend of the span view)."""

    GENERATION_PROMPT = "generation prompt"
    REASONING = "reasoning"
    CONTENT = "content"
    TOOL_NAME = "tool name"
    CALL_ID = "call id"
    ARGUMENTS = "arguments"          # a JSON arguments object taken verbatim
    ARGUMENT_NAME = "argument name"
    ARGUMENT_VALUE = "argument value"
    MARKER = "marker"
    WHITESPACE = "whitespace"
    UNPARSED = "unparsed"            # not consumed by the format; the final parse kept it as content
    IGNORED = "ignored"              # after the end of the format; the parser drops it (as llama.cpp does)
    HELD_BACK = "held back"          # streaming: the end of a prefix that may still become a marker


# the members as module constants, for the per-node and per-span loops (an enum member read from its class costs
# several times a global read, and set membership hashes an enum in Python)
_REASONING, _CONTENT, _MARKER, _WHITESPACE = (SpanLabel.REASONING, SpanLabel.CONTENT, SpanLabel.MARKER,
                                              SpanLabel.WHITESPACE)
_UNPARSED, _PROMPT, _ARGUMENTS = SpanLabel.UNPARSED, SpanLabel.GENERATION_PROMPT, SpanLabel.ARGUMENTS
_TOOL_NAME, _CALL_ID, _ARGUMENT_NAME, _ARGUMENT_VALUE = (SpanLabel.TOOL_NAME, SpanLabel.CALL_ID,
                                                         SpanLabel.ARGUMENT_NAME, SpanLabel.ARGUMENT_VALUE)

#: labels whose text is part of the message
MESSAGE_LABELS = frozenset({SpanLabel.REASONING, SpanLabel.CONTENT, SpanLabel.TOOL_NAME, SpanLabel.CALL_ID,
                            SpanLabel.ARGUMENTS, SpanLabel.ARGUMENT_NAME, SpanLabel.ARGUMENT_VALUE,
                            SpanLabel.UNPARSED})


@dataclass(slots=True)
class Span:
    """``text[start:end]`` (code points into ``generation_prompt + output``) became ``label``.

    ``field``: for a marker, the analysis field it matched (``tools.format.per_call_start``) or ``""`` for a
    literal of the format that is no analysis field (a handler's, or JSON punctuation); for the other labels
    the chat tag or builder call it came from. ``call``: tool-call index (-1 outside calls). ``kind``: for an
    argument value, ``"string"``, ``"json"`` or ``"python"`` (repair ``pythonic-values``). ``in_prompt``: inside the
    generation prompt prefix.
    ``repair``: the name of a repair that fired over this span (:func:`attach_repairs`), else ``""``.
    """

    start: int
    end: int
    label: SpanLabel
    text: str
    field: str = ""
    call: int = -1
    kind: str = ""
    in_prompt: bool = False
    repair: str = ""

    @property
    def display_label(self) -> str:
        """``repaired: NAME`` when a repair fired here, else the label's value."""
        return f"repaired: {self.repair}" if self.repair else self.label.value

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``label`` as its value; empty optional fields omitted)."""
        out: dict[str, Any] = {"start": self.start, "end": self.end, "label": self.label.value, "text": self.text}
        if self.field:
            out["field"] = self.field
        if self.call >= 0:
            out["call"] = self.call
        if self.kind:
            out["kind"] = self.kind
        if self.in_prompt:
            out["in_prompt"] = True
        if self.repair:
            out["repair"] = self.repair
        return out


_TAG_LABELS = {
    T.REASONING: (SpanLabel.REASONING, ""),
    T.CONTENT: (SpanLabel.CONTENT, ""),
    T.TOOL_NAME: (SpanLabel.TOOL_NAME, ""),
    T.TOOL_ID: (SpanLabel.CALL_ID, ""),
    T.TOOL_ARGS: (SpanLabel.ARGUMENTS, ""),
    T.TOOL_ARG_NAME: (SpanLabel.ARGUMENT_NAME, ""),
    T.TOOL_ARG_VALUE: (SpanLabel.ARGUMENT_VALUE, "json"),
    T.TOOL_ARG_STRING_VALUE: (SpanLabel.ARGUMENT_VALUE, "string"),
    T.TOOL_ARG_PY_VALUE: (SpanLabel.ARGUMENT_VALUE, "python"),
}


def marker_labels(analysis_json: dict[str, Any] | None, generation_prompt_prefix: str = "") -> dict[str, str]:
    """Literal text -> analysis field name, for :func:`core.peg.trace.traced_parse`.

    Every non-empty string field under ``reasoning``, ``content`` and ``tools`` of the analysis (field names of
    ``reference/analysis.jsonl``) maps its value, its whitespace-trimmed value and (for JSON key fields) the
    quoted key; fields with the same value are joined with `` / ``. ``generation_prompt_prefix`` (the part of
    the generation prompt the parser consumes as one literal) maps to ``generation_prompt``.
    """
    out: dict[str, list[str]] = {}

    def add(text: str, name: str) -> None:
        if text and name not in out.setdefault(text, []):
            out[text].append(name)

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else k)
        elif isinstance(node, str) and node and path.split(".")[-1] != "mode":
            add(node, path)
            add(node.strip(_WS), path)
            if path.endswith("_field"):
                add(json.dumps(node), path)
                for part in node.split("."):
                    add(json.dumps(part), path)

    for key in ("reasoning", "content", "tools"):
        walk((analysis_json or {}).get(key), key)
    labels = {k: " / ".join(v) for k, v in out.items()}
    if generation_prompt_prefix:
        labels[generation_prompt_prefix] = "generation_prompt"
    return labels


ID_HOLDS_NAME = "id"  # inside a call id: only a tool-name tag paints (its literals are the id's text)


def spans_from_ast(nodes: Iterable[Any], text: str, gp_len: int, consumed: int) -> list[Span]:
    """Spans of ``text`` from a traced chat AST (:func:`core.peg.trace.traced_parse`).

    A chat tag paints its range with its label; a marker node paints a marker unless it lies inside a tag
    whose text is message text (a tool name literal is the name, not a marker); deeper nodes paint over
    shallower. Unpainted characters before ``consumed`` (where the parse that made the message stopped) are
    whitespace, or ``marker`` if not blank; from ``consumed`` on they are ``unparsed``. Tool-call indexes
    follow the mapper: a call counts from its ``tool-open`` and only once named.
    """
    return _runs(text, _paints(nodes, text, gp_len), gp_len, consumed)


# what a tag does in spans_from_ast (looked up once per distinct tag, not tested in turn per node)
_K_NONE, _K_OPEN, _K_NAME, _K_ARGS, _K_ENCODED, _K_IGNORED, _K_ARGS_AS, _K_LABEL, _K_MARKER, _K_VALUE = range(10)


ARGS_VALUE_KIND = "value"
"""The ``kind`` of an arguments span whose text is a JSON value kept as written (repair ``non-object-arguments``)."""


def _tag_kind(tag: str) -> int:
    if tag == T.TOOL_OPEN:
        return _K_OPEN
    if tag == T.TOOL_NAME:
        return _K_NAME
    if tag == T.TOOL_ARGS:
        return _K_ARGS
    if tag == T.TOOL_ARGS_ENCODED:
        return _K_ENCODED
    if tag == T.TOOL_ARGS_VALUE:
        return _K_VALUE
    if tag == T.IGNORED:
        return _K_IGNORED
    if tag.startswith(TOOL_ARGS_AS):
        return _K_ARGS_AS
    if tag in _TAG_LABELS:
        return _K_LABEL
    if tag.startswith(MARKER_TAG):
        return _K_MARKER
    return _K_NONE


def _paints(nodes: Iterable[Any], text: str, gp_len: int) -> list[tuple[int, int, tuple]]:
    """The paint operations of the AST, ``(start, end, (label, field, call, kind))`` in the order they apply
    (pre-order: a later one paints over an earlier one), empty ranges left out."""
    ops: list[tuple[int, int, tuple]] = []
    add = ops.append
    kinds: dict[str, int] = {}
    named = 0
    cur = -1
    pending = False
    stack: list[tuple[Any, bool | str]] = [(node, False) for node in reversed(list(nodes))]
    pop = stack.pop
    push = stack.append
    while stack:
        node, in_value = pop()
        tag = node.tag
        value = in_value
        if tag:
            k = kinds.get(tag)
            if k is None:
                k = kinds[tag] = _tag_kind(tag)
            if k == _K_OPEN:
                cur, pending = named, True
            elif k == _K_NAME and pending:
                named += 1
                pending = False
            if k == _K_ARGS and not text.startswith(("{", '"'), node.start, node.end):
                pass    # tagged arguments inside: the mapper ignores this text, its children carry the values
                # (a JSON string is a value: Kimi K2 at llama.cpp fidelity keeps double-encoded arguments as they are)
            elif k == _K_ENCODED:
                if not in_value:
                    # repair double-encoded-arguments: the raw JSON string is the arguments; the field carries the
                    # object the mapper decoded from it (nothing when it does not decode: the mapper sets nothing)
                    inner = _decoded_args(text[node.start:node.end])
                    if inner:
                        if node.end > node.start:
                            add((node.start, node.end, (_ARGUMENTS, inner, cur, "")))
                        value = True
            elif k == _K_IGNORED:
                if not in_value:
                    if node.end > node.start:
                        add((node.start, node.end, _IGNORED_PAINT))
                    value = True
            elif k == _K_VALUE:
                if in_value is not True:
                    # repair non-object-arguments: the value as written is the arguments (kind "value")
                    if node.end > node.start:
                        add((node.start, node.end, (_ARGUMENTS, "", cur, ARGS_VALUE_KIND)))
                    value = True
            elif k == _K_ARGS_AS:
                if in_value is not True:
                    # arguments in a family's own syntax: the field carries the JSON the mapper's value hook made
                    convert = ARGS_CONVERTERS.get(tag)
                    js = convert(text, node) if convert else ""
                    if node.end > node.start:
                        add((node.start, node.end, (_ARGUMENTS, js, cur, "")))
                    value = True
            elif k == _K_NAME or k == _K_ARGS or k == _K_LABEL:
                if in_value is not True:
                    label, kind = _TAG_LABELS[tag]
                    call = cur if label is not _REASONING and label is not _CONTENT else -1
                    # an id around the name is painted in two pieces: its field keeps the whole id (rebuild_message)
                    whole = text[node.start:node.end] if tag == T.TOOL_ID and _holds(node, T.TOOL_NAME) else ""
                    if node.end > node.start:
                        add((node.start, node.end, (label, whole, call, kind)))
                    # a call id may hold the tool name (Kimi K2's functions.NAME:IDX): the name paints over it
                    value = ID_HOLDS_NAME if tag == T.TOOL_ID else True
            elif k == _K_MARKER:
                if not in_value and node.end > node.start:
                    name = tag[len(MARKER_TAG):]
                    in_gp = name == "generation_prompt" or (not name and node.end <= gp_len)
                    label = _PROMPT if in_gp else _MARKER
                    if label is _MARKER and not text[node.start:node.end].strip(_WS):
                        label, name = _WHITESPACE, ""   # an optional newline around a marker
                    add((node.start, node.end, (label, name, -1, "")))
        children = node.children
        if children:
            if len(children) == 1:
                push((children[0], value))
            else:
                for c in reversed(children):
                    push((c, value))
    return ops


_IGNORED_PAINT = (SpanLabel.IGNORED, "", -1, "")


def _segments(ops: list[tuple[int, int, tuple]], n: int) -> list[tuple[int, int, tuple | None]]:
    """``[start, end)`` runs of equal paint covering ``[0, n)`` (None: unpainted), where a later operation of
    ``ops`` paints over an earlier one. Operations from an AST nest (a node's range holds its children's, siblings
    follow each other): one pass with a stack of the open ones; anything else is painted character by
    character."""
    segs: list[tuple[int, int, tuple | None]] = []
    emit = segs.append
    pos = 0
    stack: list[tuple[int, tuple]] = []
    for s, e, v in ops:
        while stack and stack[-1][0] <= s:
            te, tv = stack.pop()
            if te > pos:
                emit((pos, te, tv))
                pos = te
        if s < pos or e > n or (stack and e > stack[-1][0]):
            return _painted_runs(ops, n)
        if s > pos:
            emit((pos, s, stack[-1][1] if stack else None))
            pos = s
        stack.append((e, v))
    while stack:
        te, tv = stack.pop()
        if te > pos:
            emit((pos, te, tv))
            pos = te
    if pos < n:
        emit((pos, n, None))
    out: list[tuple[int, int, tuple | None]] = []
    for seg in segs:   # runs of equal paint from different nodes are one run (as equal characters are)
        if out and out[-1][2] == seg[2]:
            out[-1] = (out[-1][0], seg[1], seg[2])
        else:
            out.append(seg)
    return out


def _painted_runs(ops: list[tuple[int, int, tuple]], n: int) -> list[tuple[int, int, tuple | None]]:
    from itertools import groupby

    paint: list[tuple | None] = [None] * n
    for s, e, v in ops:
        paint[s:e] = [v] * (e - s)
    out = []
    i = 0
    for v, group in groupby(paint):   # runs of equal paint, found in C
        end = i + sum(1 for _ in group)
        out.append((i, end, v))
        i = end
    return out


def _holds(node: Any, tag: str) -> bool:
    """Whether a node below ``node`` carries ``tag``."""
    stack = list(node.children or ())
    while stack:
        c = stack.pop()
        if c.tag == tag:
            return True
        stack.extend(c.children or ())
    return False


def _decoded_args(raw: str) -> str:
    """The JSON object a JSON string ``raw`` holds, as the mapper takes it (``T.TOOL_ARGS_ENCODED``), or ``""``."""
    try:
        inner = json.loads(raw)
        ok = isinstance(inner, str) and isinstance(json.loads(inner), dict)
    except ValueError:
        return ""
    return inner.strip(_WS) if ok else ""


def _runs(text: str, ops: list[tuple[int, int, tuple]], gp_len: int, consumed: int) -> list[Span]:
    """The spans of the painted runs: a run is cut where the generation prompt ends (and, unpainted, at
    ``consumed``); unpainted pieces are labelled as :func:`spans_from_ast` says; neighbours with the same label,
    field, call, kind and place (in the prompt or not) are one span when whitespace, unparsed or prompt text."""
    rows: list[list] = []   # [start, end, (label, field, call, kind), in_prompt], Spans made once at the end
    for i, end, v in _segments(ops, len(text)):
        if i < gp_len < end or (v is None and i < consumed < end):
            cuts = sorted({c for c in (gp_len, consumed if v is None else -1) if i < c < end}) + [end]
        else:
            cuts = (end,)
        for j in cuts:
            r = v if v is not None else _unpainted(text, i, j, gp_len, consumed)
            ip = i < gp_len
            lab = r[0]
            if (lab is _WHITESPACE or lab is _UNPARSED or lab is _PROMPT) and rows and rows[-1][2] == r \
                    and rows[-1][3] == ip:
                rows[-1][1] = j
            else:
                rows.append([i, j, r, ip])
            i = j
    return [Span(a, b, r[0], text[a:b], r[1], r[2], r[3], ip) for a, b, r, ip in rows]


def _unpainted(text: str, i: int, j: int, gp_len: int, consumed: int) -> tuple:
    if i >= consumed:
        return _UNPARSED_PAINT
    if i < gp_len:
        return _PROMPT_PAINT
    if not text[i:j].strip(_WS):
        return _WHITESPACE_PAINT
    return _MARKER_PAINT


_UNPARSED_PAINT = (_UNPARSED, "", -1, "")
_PROMPT_PAINT = (_PROMPT, "", -1, "")
_WHITESPACE_PAINT = (_WHITESPACE, "", -1, "")
_MARKER_PAINT = (_MARKER, "", -1, "")


def _merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    parts: list[list[str]] = []   # the texts of each output span, joined once (not re-concatenated per merge)
    for s in spans:
        p = out[-1] if out else None
        if (p is not None and p.end == s.start and p.label == s.label and p.field == s.field and p.call == s.call
                and p.kind == s.kind and p.in_prompt == s.in_prompt
                and s.label in (SpanLabel.WHITESPACE, SpanLabel.UNPARSED, SpanLabel.GENERATION_PROMPT)):
            out[-1] = replace(p, end=s.end)
            parts[-1].append(s.text)
        else:
            out.append(s)
            parts.append([s.text])
    return [sp if len(t) == 1 else replace(sp, text="".join(t)) for sp, t in zip(out, parts)]


def relabel_unparsed(spans: list[Span], stop: int) -> list[Span]:
    """Content spans at or after ``stop`` become ``unparsed`` (a recovery entry point took the rest of the text
    as content: it is content in the message, but the format did not account for it); a span across ``stop``
    is split."""
    out: list[Span] = []
    for s in spans:
        if s.label == SpanLabel.CONTENT and s.end > stop:
            if s.start < stop:
                out.append(replace(s, end=stop, text=s.text[:stop - s.start]))
                s = replace(s, start=stop, text=s.text[stop - s.start:])
            s = replace(s, label=SpanLabel.UNPARSED)
        out.append(s)
    return _merge(out)


def attach_repairs(spans: list[Span], fired: Iterable[tuple[str, tuple[int, int]]], offset: int) -> list[Span]:
    """Lay fired repairs over ``spans``: each ``(name, (start, end))`` — a range of the raw *output*, as the
    repairs of improved fidelity report them on the parsed message — is shifted by ``offset`` (the generation
    prompt's length) and every span it overlaps is split so the overlapping part carries ``repair=name``
    (shown as ``repaired: NAME``); labels are kept. The lossless contract's records change what
    :func:`rebuild_message` makes of the spans they cover: ``truncated-call`` (its call's text becomes content)
    and ``unparsed-text`` (its text is appended to content). Both run to the end of the output and
    ``unparsed-text`` fires after ``truncated-call`` from an earlier start, so a span that carries
    ``truncated-call`` keeps it (both starts stay visible)."""
    out = list(spans)
    for name, (a, b) in fired:
        a, b = a + offset, b + offset
        nxt: list[Span] = []
        for s in out:
            if s.end <= a or s.start >= b or b <= a or (s.repair == TRUNCATED_CALL and name == UNPARSED_TEXT):
                nxt.append(s)
                continue
            lo, hi = max(s.start, a), min(s.end, b)
            if s.start < lo:
                nxt.append(replace(s, end=lo, text=s.text[:lo - s.start]))
            nxt.append(replace(s, start=lo, end=hi, text=s.text[lo - s.start:hi - s.start], repair=name))
            if hi < s.end:
                nxt.append(replace(s, start=hi, text=s.text[hi - s.start:]))
        out = nxt
    return out


def check_cover(spans: list[Span], text: str) -> str:
    """``""`` when ``spans`` cover ``text`` exactly once, in order, each with its own text; else what is wrong."""
    pos = 0
    for s in spans:
        if s.start != pos:
            return f"gap or overlap at {pos} (next span starts at {s.start})"
        if s.end <= s.start:
            return f"empty span at {s.start}"
        if len(s.text) != s.end - s.start or not text.startswith(s.text, s.start):
            return f"span text differs at {s.start}"
        pos = s.end
    return "" if pos == len(text) else f"spans end at {pos}, text at {len(text)}"


def rebuild_message(spans: list[Span], drop_blank_reasoning: bool = True) -> AssistantMessage:
    """The assistant message the labelled spans stand for, from the spans alone: content = content and
    unparsed text, reasoning = reasoning text (whitespace-only dropped), one call per call index with a tool
    name (name and id trimmed as the mapper does, a JSON ``arguments`` span verbatim, else the argument names
    and values assembled into a JSON object).

    The records of :func:`core.chat.repairs.settle` over the spans (:func:`attach_repairs`) apply as there:
    unparsed text whose ``field`` is ``stream-consistent-final`` (the rest after the partial view's prefix) is
    not content; with ``truncated-call`` the last call is not returned and the raw text from the first span
    carrying it is appended to the content; then the raw text from the first ``unparsed-text`` span on is
    appended (labels are kept: a call read inside these ranges stays a call, as in the parser's message), unless the record only reports text GPT-OSS's grammar drops (:func:`_kept_out`). Spans
    labelled ``unparsed`` with ``field`` ``unparsed-text`` (explain's view of text the format dropped) are
    content only through that tail."""
    cut = _first_repaired(spans, TRUNCATED_CALL)
    moved = _first_repaired(spans, UNPARSED_TEXT)
    msg = AssistantMessage()
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, list[Any]] = {}   # call index -> [name, id, args or None, [[arg name, value, kind]...]]
    as_written: set[int] = set()   # calls whose arguments are a value kept as written (non-object-arguments)
    for s in spans:
        label = s.label
        if label == _MARKER or label == _WHITESPACE:
            continue
        if label == _CONTENT:
            content.append(s.text)
        elif label == _UNPARSED:
            if s.field != STREAM_CONSISTENT_FINAL and s.field != UNPARSED_TEXT:
                content.append(s.text)
            # else not content of the parse: the settled message leaves it out or takes it as a tail
        elif label == _REASONING:
            reasoning.append(s.text)
        elif s.call >= 0 and (label == _TOOL_NAME or label == _ARGUMENTS or label == _ARGUMENT_NAME
                              or label == _ARGUMENT_VALUE or label == _CALL_ID):   # the other MESSAGE_LABELS
            c = calls.get(s.call)
            if c is None:
                c = calls[s.call] = ["", "", None, []]
            if label == _TOOL_NAME:
                c[0] += s.text
            elif label == _CALL_ID:
                # a handler that reads the id around the name (Kimi: functions.NAME:0) records it as the field
                if s.field:
                    c[1] = s.field
                else:
                    c[1] += s.text
            elif label == _ARGUMENTS:
                # a handler that converts its own argument syntax records the JSON it made as the field
                c[2] = (c[2] or "") + (s.field if s.field.startswith("{") else s.text)
                if s.kind == ARGS_VALUE_KIND:
                    as_written.add(s.call)
            elif label == _ARGUMENT_NAME:
                c[3].append([s.text, None, ""])
            elif label == _ARGUMENT_VALUE and c[3]:
                pair = c[3][-1]
                pair[1] = (pair[1] or "") + s.text
                pair[2] = s.kind
    msg.content = "".join(content)
    msg.reasoning_content = "".join(reasoning)
    if drop_blank_reasoning and not msg.reasoning_content.strip(" \n\r\t"):
        msg.reasoning_content = ""
    if cut >= 0:
        # the last call is the cut or rejected one: not returned, its raw text (from its opener, which may be a
        # section marker before calls that stay) appended to the content
        named = [i for i in sorted(calls) if calls[i][0].rstrip(_WS)]
        if named:
            del calls[named[-1]]
        msg.content = content_with_tail(msg.content, _text_from(spans, cut))
    chars = _first_repaired(spans, UNPARSED_CHARACTERS)
    if moved >= 0 and not _kept_out(spans):
        msg.content = content_with_tail(msg.content, _text_from(spans, moved))
    if chars >= 0:   # repair unparsed-characters: the raw text from its start, appended as it is
        msg.content += _text_from(spans, chars)
    for i in sorted(calls):
        name, cid, args, pairs = calls[i]
        name = name.rstrip(_WS)
        if not name:
            continue
        cid = cid.rstrip(_WS)
        if len(cid) >= 2 and cid[0] == '"' and cid[-1] == '"':
            cid = cid[1:-1]
        if args is not None and (args.lstrip(_WS).startswith("{") or i in as_written):
            args = args.rstrip(_WS)
        else:
            parts = []
            for k, v, kind in pairs:
                key = json.dumps(k.strip(_WS), ensure_ascii=False)
                if kind == "string":
                    parts.append(f"{key}:{json.dumps(v or '', ensure_ascii=False)}")
                elif kind == "python" and v is not None:   # repair pythonic-values: Python's reading
                    parts.append(f"{key}:{python_literal_to_json(v)}")
                elif v is not None:
                    parts.append(f"{key}:{normalize_python_value(v)}")
                else:
                    # no value span: the only value a parse can close empty is a string (a JSON value has at least
                    # one character); a call cut there is compared as a prefix (same_message)
                    parts.append(f'{key}:""')
            args = "{" + ",".join(parts) + "}"
        msg.tool_calls.append(ToolCall(name=name, arguments=args, id=cid))
    return msg


def _first_repaired(spans: list[Span], name: str) -> int:
    """Where the first span carrying repair ``name`` starts, else -1."""
    return next((s.start for s in spans if s.repair == name), -1)


def _text_from(spans: list[Span], pos: int) -> str:
    """The text of the spans from ``pos`` (a span start) to the end: the raw output from there."""
    return "".join(s.text for s in spans if s.start >= pos)


def _kept_out(spans: list[Span]) -> bool:
    """Whether an ``unparsed-text`` record only reports text (why ``kept-out``): settle keeps llama.cpp's message
    when GPT-OSS's grammar read and dropped a call to a built-in tool (``PINNED_DROP_FORMATS``). The spans do not
    name the format; the sign of it is a match of the format's pattern (`` to=python``) that the parse consumed
    as markup: a ``marker`` span holds the match's start."""
    out = [s for s in spans if not s.in_prompt]
    if not out:
        return False
    base = out[0].start
    text = "".join(s.text for s in out)
    markers = [(s.start - base, s.end - base) for s in out if s.label == SpanLabel.MARKER]
    for pattern in PINNED_DROP_FORMATS.values():
        for m in re.finditer(pattern, text):
            if any(a <= m.start() < b for a, b in markers):
                return True
    return False


def settled_as(msg: AssistantMessage, final: AssistantMessage) -> AssistantMessage:
    """``msg`` (a parse of the output: the parser's raw final parse, or the partial view) as
    :func:`core.chat.repairs.settle` leaves it under the lossless contract records ``final`` carries: with a
    ``truncated-call`` the last call is not returned and its raw text is appended to the content, then the text
    of an ``unparsed-text`` record (why ``content``) is appended. For the explain trace, which must find the
    parse whose spans rebuild ``final`` (``same_message(settled_as(view, final), final)``)."""
    records = [r for r in getattr(final, "repairs", None) or []
               if getattr(r, "name", "") in (TRUNCATED_CALL, UNPARSED_CHARACTERS)
               or (getattr(r, "name", "") == UNPARSED_TEXT and getattr(r, "why", "") == "content")]
    if not records:
        return msg
    out = msg.copy()
    for r in records:
        if r.name == TRUNCATED_CALL:
            out.tool_calls = out.tool_calls[:-1]
        if r.name == UNPARSED_CHARACTERS:   # characters in no field: appended as they are
            out.content += r.text
        else:
            out.content = content_with_tail(out.content, r.text)
    return out


def same_message(a: AssistantMessage, b: AssistantMessage) -> bool:
    """Equal as ``reference/README.md`` compares messages: content, reasoning, and per call name, id and the
    arguments as parsed JSON; when either does not parse (a call cut off by the end of the output, which the
    parser leaves unclosed), one must be a prefix of the other."""
    if a.content != b.content or a.reasoning_content != b.reasoning_content:
        return False
    if len(a.tool_calls) != len(b.tool_calls):
        return False
    for x, y in zip(a.tool_calls, b.tool_calls):
        if x.name != y.name or x.id != y.id:
            return False
        if x.arguments == y.arguments:  # the same text is the same JSON (and the same prefix): no parse
            continue
        try:
            if json.loads(x.arguments) != json.loads(y.arguments):
                return False
        except ValueError:
            # a call cut off by the end of the output: its arguments are a prefix of the closed ones
            if not (x.arguments.startswith(y.arguments) or y.arguments.startswith(x.arguments)):
                return False
    return True
