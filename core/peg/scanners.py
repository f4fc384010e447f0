"""Native scanners for the hot leaf parsers: JSON values, JSON numbers, string bodies.

Each scanner accepts exactly what the corresponding combinator grammar of :class:`core.peg.builder.Builder`
accepts (llama.cpp ``json()`` / ``json_number()`` / ``string_content()``, parser notes §1.2, §1.4), including
the partial-input semantics: a value cut off by the end of lenient input is NEED_MORE_INPUT, never FAIL; a
number at the very end is NEED_MORE_INPUT (it might continue); a dangling backslash or an incomplete ``\\uXXXX``
escape is left out of the matched span.

All scanners return ``(status, end, touched)``: status ``FAIL`` / ``OK`` / ``NMI``, end position, and whether
the answer depended on the end of the input (results that did not are stable when the input grows; the
incremental cache relies on it). They scan with ``re`` and ``json`` (C code), not per-character Python loops,
except inside numbers (a few characters).
"""

from __future__ import annotations

import json
import re
from typing import Any

FAIL, OK, NMI = 0, 1, 2

_WS = re.compile(r"[ \t\n\v\f\r]*")
_DIGITS = re.compile(r"[0-9]*")
_HEX = frozenset("0123456789abcdefABCDEF")
_NUMBER_CONT = frozenset("0123456789.eE+-")


def _reject_constant(name: str) -> None:
    raise ValueError(name)


_DECODER = json.JSONDecoder(strict=False, parse_constant=_reject_constant)

_STRING_BODY: dict[str, re.Pattern[str]] = {}


def string_body_regex(delim: str) -> re.Pattern[str]:
    """Regex matching a valid string body for ``delim`` (stops at the delimiter or at a bad/cut escape)."""
    rx = _STRING_BODY.get(delim)
    if rx is None:
        d = re.escape(delim)
        rx = re.compile(rf'[^{d}\\]*(?:\\(?:[{d}\\/bfnrt]|u[0-9a-fA-F]{{4}})[^{d}\\]*)*', re.S)
        _STRING_BODY[delim] = rx
    return rx


_STRING_BODY_QUOTE = string_body_regex('"').match


def scan_string_content(text: str, pos: int, n: int, lenient: bool, delim: str = '"',
                        stop: int = -1) -> tuple[int, int, bool]:
    """String body from ``pos`` up to (not including) the closing ``delim``. ``stop``: where
    :func:`string_body_regex` stops matching from ``pos``, when the caller already knows it."""
    e = stop if stop >= 0 else string_body_regex(delim).match(text, pos).end()  # type: ignore[union-attr]
    if e >= n:
        return (NMI, n, True) if lenient else (FAIL, pos, True)
    if text[e] == delim:
        return OK, e, False
    # a backslash starting an escape that is invalid, or cut off by the end of input
    if e + 1 >= n:
        return (NMI, e, True) if lenient else (FAIL, pos, True)
    if text[e + 1] == "u":
        tail = text[e + 2:e + 6]
        if len(tail) < 4 and all(c in _HEX for c in tail):
            return (NMI, e, True) if lenient else (FAIL, pos, True)
    return FAIL, pos, False


def _literal(text: str, pos: int, n: int, lit: str, lenient: bool) -> tuple[int, int, bool]:
    if text.startswith(lit, pos):
        return OK, pos + len(lit), False
    if n - pos < len(lit) and lit.startswith(text[pos:]):
        return (NMI, n, True) if lenient else (FAIL, pos, True)
    return FAIL, pos, False


def scan_number(text: str, pos: int, n: int, lenient: bool) -> tuple[int, int, bool]:
    """A JSON number followed by the lookahead ``!([0-9.eE+-])``."""
    eof = (NMI, n, True) if lenient else (FAIL, pos, True)
    i = pos
    if i < n and text[i] == "-":
        i += 1
    if i >= n:
        return eof
    c = text[i]
    if c == "0":
        i += 1
    elif "1" <= c <= "9":
        i = _DIGITS.match(text, i + 1).end()  # type: ignore[union-attr]
    else:
        return FAIL, pos, False
    if i < n and text[i] == ".":
        if i + 1 >= n:
            return eof
        k = _DIGITS.match(text, i + 1).end()  # type: ignore[union-attr]
        if k == i + 1:
            return FAIL, pos, False
        i = k
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        if j >= n:
            return eof
        k = _DIGITS.match(text, j).end()  # type: ignore[union-attr]
        if k == j:
            return FAIL, pos, False
        i = k
    if i >= n:
        # the lookahead needs one more character
        return (NMI, n, True) if lenient else (OK, i, True)
    if text[i] in _NUMBER_CONT:
        return FAIL, pos, False
    return OK, i, False


def scan_string(text: str, pos: int, n: int, lenient: bool) -> tuple[int, int, bool]:
    """``"`` body ``"``."""
    if pos >= n:
        return (NMI, n, True) if lenient else (FAIL, pos, True)
    if text[pos] != '"':
        return FAIL, pos, False
    st, e, touched = scan_string_content(text, pos + 1, n, lenient, '"')
    if st != OK:
        return st, e, touched
    return OK, e + 1, False


def _ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]


def _scalar(text: str, pos: int, n: int, lenient: bool) -> tuple[int, int, bool]:
    """A JSON value that is not a container (string, number, ``true``/``false``/``null``) at ``pos``; a
    container start gives ``(OK, pos, False)`` with nothing consumed — the caller opens it."""
    if pos >= n:
        return (NMI, n, True) if lenient else (FAIL, pos, True)
    c = text[pos]
    if c == "{" or c == "[":
        return OK, pos, False
    if c == '"':
        return scan_string(text, pos, n, lenient)
    if c == "-" or "0" <= c <= "9":
        return scan_number(text, pos, n, lenient)
    if c == "t":
        return _literal(text, pos, n, "true", lenient)
    if c == "f":
        return _literal(text, pos, n, "false", lenient)
    if c == "n":
        return _literal(text, pos, n, "null", lenient)
    return FAIL, pos, False


def _slow_value(text: str, pos: int, n: int, lenient: bool, resume: tuple | None = None,
                checkpoint: list | None = None) -> tuple[int, int, bool]:
    """A JSON value at ``pos`` with PEG partial semantics, containers
    ``{ ws ( } | member (ws , ws member)* ws } )`` / ``[ ... ]`` at any depth (an explicit stack, no recursion:
    a value nested 10,000 levels deep is still a value).

    Results as the recursive grammar gives them: a value cut off by the end of lenient input is NMI (end =
    where the innermost part stopped); a failure inside a container fails the outermost one at its start
    (touched = not lenient); a container that fails on its own (bad separator, missing ``:``) fails at its
    start (touched False), or when cut off in strict mode at its start (touched True).

    Streaming (:func:`scan_json_value_resumable`): ``checkpoint`` (a 3-item list) receives the state at the
    start of the last value scanned — its position, the open containers, and for a string value where its
    body scan stopped — and ``resume`` (such a state from a scan of a shorter prefix of the same text from the
    same ``pos``) starts there. The scan is a left-to-right automaton whose steps before that value never
    looked at the end of the input, so resuming ends exactly where a scan from ``pos`` would."""
    stack: tuple | None = None              # open containers, innermost first: (is_object, start, outer)
    i = pos
    sfrm = -1
    if resume is not None:
        i, stack, sfrm = resume

    def inner(r: tuple[int, int, bool]) -> tuple[int, int, bool]:
        # a non-OK result of something inside the open containers, as the outermost one (at pos) reports it
        if r[0] == NMI:
            return NMI, r[1], True
        return FAIL, pos, not lenient

    def own(r: tuple[int, int, bool], outer: tuple | None) -> tuple[int, int, bool]:
        # the innermost open container (whose enclosing containers are ``outer``) ended with a non-OK result
        return r if outer is None else inner(r)

    def eof(start: int) -> tuple[int, int, bool]:
        return (NMI, n, True) if lenient else (FAIL, start, True)

    while True:
        # a value starts at i
        if checkpoint is not None and i < n:  # at the end, i itself may still move (whitespace before it)
            checkpoint[0] = i
            checkpoint[1] = stack
            checkpoint[2] = -1
        if i < n and text[i] == '"':
            stop = _STRING_BODY_QUOTE(text, sfrm if sfrm > i else i + 1).end()  # type: ignore[union-attr]
            if checkpoint is not None:  # i < n here
                checkpoint[2] = stop
            st, e, t = scan_string_content(text, i + 1, n, lenient, '"', stop)
            r = (OK, e + 1, False) if st == OK else (st, e, t)
        else:
            r = _scalar(text, i, n, lenient)
        sfrm = -1
        if r[0] != OK:
            return inner(r) if stack is not None else r
        if r[1] == i:                   # a container opens
            is_object = text[i] == "{"
            close = "}" if is_object else "]"
            outer = stack
            stack = (is_object, i, outer)
            j = _ws(text, i + 1)
            if j >= n:
                return own(eof(i), outer)
            if text[j] == close:
                r = (OK, j + 1, False)
                stack = outer
            else:
                if is_object:
                    k = _key(text, j, n, lenient)
                    if k[0] != OK:
                        return own(k, outer) if k[0] == NMI else inner(k)
                    j = k[1]
                    if j < 0:
                        return own(eof(i), outer) if j == -1 else own((FAIL, i, False), outer)
                i = j
                continue
        # a complete value ending at r[1]: continue the containers that hold it
        while stack is not None:
            is_object, start, outer = stack
            close = "}" if is_object else "]"
            e = r[1]
            if e >= n:
                return own(eof(start), outer)
            j = _ws(text, e)
            if j >= n:
                return own(eof(start), outer)
            if text[j] == ",":
                j = _ws(text, j + 1)
                if is_object:
                    k = _key(text, j, n, lenient)
                    if k[0] != OK:
                        return own(k, outer) if k[0] == NMI else inner(k)
                    j = k[1]
                    if j < 0:
                        return own(eof(start), outer) if j == -1 else own((FAIL, start, False), outer)
                i = j
                break
            if text[j] == close:
                stack = outer
                r = (OK, j + 1, False)
                continue
            return own((FAIL, start, False), outer)
        else:
            return r


def _key(text: str, j: int, n: int, lenient: bool) -> tuple[int, int, bool]:
    """An object member's ``"key" ws : ws`` at ``j``: ``(OK, value position, False)``; ``(OK, -1, _)`` when
    the input ends after the key, ``(OK, -2, _)`` when the ``:`` is missing; the string's own NMI / FAIL
    otherwise."""
    st, e, t = scan_string(text, j, n, lenient)
    if st != OK:
        return st, e, t
    k = _ws(text, e)
    if k >= n:
        return OK, -1, True
    if text[k] != ":":
        return OK, -2, False
    return OK, _ws(text, k + 1), False


def scan_json_value(text: str, pos: int, n: int, lenient: bool, kind: str = "json-value") -> tuple[int, int, bool]:
    """A JSON value of ``kind`` (``json-value``, ``json-object``, ``json-array``, ``json-string``,
    ``json-number``) at ``pos``. Complete containers go through the C decoder; anything it rejects (cut off,
    invalid, or outside its whitespace set) through the PEG-exact slow path."""
    if kind == "json-string":
        return scan_string(text, pos, n, lenient)
    if kind == "json-number":
        return scan_number(text, pos, n, lenient)
    if pos < n:
        c = text[pos]
        if kind == "json-object" and c != "{":
            return FAIL, pos, False
        if kind == "json-array" and c != "[":
            return FAIL, pos, False
        if c == "{" or c == "[":
            try:
                _, end = _DECODER.raw_decode(text, pos)
                return OK, end, False
            except (ValueError, RecursionError):
                pass
    elif kind in ("json-object", "json-array"):
        return (NMI, n, True) if lenient else (FAIL, pos, True)
    return _slow_value(text, pos, n, lenient)


def scan_json_value_resumable(text: str, pos: int, n: int, lenient: bool, kind: str, hints: dict,
                              key: Any) -> tuple[int, int, bool]:
    """:func:`scan_json_value` for a text that grows between calls (streaming), same results: a container
    cut off by the end of the text is scanned on from the checkpoint its previous scan left in
    ``hints[key]`` (see :func:`_slow_value`) instead of from ``pos``, so each feed costs the new text, not
    the whole open value. The C decoder (which cannot resume) runs only once the value is complete — it
    accepts only complete values, which the slow path also accepts with the same end."""
    if kind not in ("json-value", "json-object", "json-array") or pos >= n or text[pos] not in "{[":
        return scan_json_value(text, pos, n, lenient, kind)
    if (kind == "json-object" and text[pos] != "{") or (kind == "json-array" and text[pos] != "["):
        return FAIL, pos, False
    resume = hints.get(key)
    if resume is None:
        # no earlier scan of this value left a checkpoint: it may well be complete already (a stream that
        # took the value's characters on a fast path parses again only at its close), which C decides at once
        try:
            return OK, _DECODER.raw_decode(text, pos)[1], False
        except (ValueError, RecursionError):
            pass
    checkpoint: list = [pos, None, -1]
    r = _slow_value(text, pos, n, lenient, resume, checkpoint)
    if r[0] == OK:
        hints.pop(key, None)
        return scan_json_value(text, pos, n, lenient, kind)
    if r[2]:
        hints[key] = tuple(checkpoint)
    return r
