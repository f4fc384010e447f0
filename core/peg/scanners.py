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

FAIL, OK, NMI = 0, 1, 2

_WS = re.compile(r"[ \t\n\v\f\r]*")
_DIGITS = re.compile(r"[0-9]*")
_HEX = frozenset("0123456789abcdefABCDEF")
_NUMBER_CONT = frozenset("0123456789.eE+-")
_MAX_DEPTH = 400


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


def scan_string_content(text: str, pos: int, n: int, lenient: bool, delim: str = '"') -> tuple[int, int, bool]:
    """String body from ``pos`` up to (not including) the closing ``delim``."""
    e = string_body_regex(delim).match(text, pos).end()  # type: ignore[union-attr]
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


def _slow_value(text: str, pos: int, n: int, lenient: bool, depth: int) -> tuple[int, int, bool]:
    if pos >= n:
        return (NMI, n, True) if lenient else (FAIL, pos, True)
    c = text[pos]
    if c == "{":
        return _slow_container(text, pos, n, lenient, depth, True)
    if c == "[":
        return _slow_container(text, pos, n, lenient, depth, False)
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


def _slow_container(text: str, pos: int, n: int, lenient: bool, depth: int,
                    is_object: bool) -> tuple[int, int, bool]:
    """``{ ws ( } | member (ws , ws member)* ws } )`` or the array equivalent, with PEG partial semantics."""
    if depth > _MAX_DEPTH:
        return FAIL, pos, False
    eof = (NMI, n, True) if lenient else (FAIL, pos, True)
    close = "}" if is_object else "]"
    i = _ws(text, pos + 1)
    if i >= n:
        return eof
    if text[i] == close:
        return OK, i + 1, False
    while True:
        if is_object:
            st, e, _ = scan_string(text, i, n, lenient)
            if st != OK:
                return (st, e, True) if st == NMI else (FAIL, pos, not lenient)
            i = _ws(text, e)
            if i >= n:
                return eof
            if text[i] != ":":
                return FAIL, pos, False
            i = _ws(text, i + 1)
        st, e, _ = _slow_value(text, i, n, lenient, depth + 1)
        if st != OK:
            return (st, e, True) if st == NMI else (FAIL, pos, not lenient)
        i = e
        if i >= n:
            return eof
        j = _ws(text, i)
        if j >= n:
            return eof
        if text[j] == ",":
            i = _ws(text, j + 1)
            continue
        if text[j] == close:
            return OK, j + 1, False
        return FAIL, pos, False


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
    return _slow_value(text, pos, n, lenient, 0)
