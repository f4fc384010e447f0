"""A faster tokenizer for the project's jinja2 environments (issue 14: cold compiles with an empty cache).

:func:`tokenize` returns the list of :class:`jinja2.lexer.Token` that ``Lexer.tokenize`` (``tokeniter`` then
``wrap``) yields for the same source — same types, values (numbers converted, strings unescaped, data
whitespace-controlled by ``-``/``+``, ``trim_blocks`` and ``lstrip_blocks``) and line numbers — or ``None``
whenever it is not certain to: another lexer configuration (:func:`supports`), a lexer start state, any
input jinja2's lexer would reject (an unexpected character, unbalanced brackets, an unterminated comment or raw
block, an identifier, number or string it refuses) and a few legal but unusual spellings (``{{ a %}}``, where
jinja2 reads ``%`` as an operator; a raw block opened at the very end). ``None`` means "let jinja2's own lexer
do the whole template", so its errors and line numbers stay jinja2's.

Design (our own; behaviour read from jinja2 3.1's lexer and checked against it by tests/test_fastlex.py on the
corpus and a mutation fuzz): one compiled pattern scanned with ``Pattern.scanner`` over the whole template, whose
alternatives are the in-tag tokens (whitespace folded into the next token) and an end-of-tag mark glued to the
template data after it and the next tag's opening mark — so a typical tag costs one match per token and one for
"end, data, next opening". Comments and raw blocks are finished in Python. jinja2 tries its rules in order at
each position and keeps the first that matches; an alternation of the same rules in the same order picks the
same one (names go first: no other rule can match where a name not starting with a digit does). Its speed:
~0.37 ms per corpus template against ~1.5 ms for jinja2's tokeniter + wrap (2026-12-02, CPU, min of 7).
"""

from __future__ import annotations

import re
from ast import literal_eval
from itertools import repeat
from typing import Callable

import jinja2
from jinja2._identifier import pattern as _name_pattern
from jinja2.lexer import (TOKEN_BLOCK_BEGIN, TOKEN_BLOCK_END, TOKEN_DATA, TOKEN_FLOAT, TOKEN_INTEGER,
                          TOKEN_NAME, TOKEN_STRING, TOKEN_VARIABLE_BEGIN, TOKEN_VARIABLE_END, Token, operators)

__all__ = ["supports", "tokenize", "triples", "LEXER_SETTINGS"]

#: The environment settings this tokenizer reproduces (the project environment's): default delimiters, no line
#: statements or line comments, ``trim_blocks`` and ``lstrip_blocks`` on, ``\n`` newlines, the trailing newline
#: dropped. Any other environment gets jinja2's lexer.
LEXER_SETTINGS = {
    "block_start_string": "{%", "block_end_string": "%}",
    "variable_start_string": "{{", "variable_end_string": "}}",
    "comment_start_string": "{#", "comment_end_string": "#}",
    "line_statement_prefix": None, "line_comment_prefix": None,
    "trim_blocks": True, "lstrip_blocks": True,
    "newline_sequence": "\n", "keep_trailing_newline": False,
}
_SETTINGS = tuple(LEXER_SETTINGS.items())
_LAST: tuple = (None, False)  # the last lexer asked about and its verdict, replaced whole (threads read it)


def supports(env: jinja2.Environment) -> bool:
    """True when ``env``'s lexer settings are :data:`LEXER_SETTINGS` exactly and its lexer is jinja2's own
    class (a subclass may lex differently). The last lexer's verdict is remembered (jinja2 shares one lexer
    among environments of the same settings)."""
    global _LAST
    lexer = env.lexer
    last = _LAST
    if last[0] is lexer:
        return last[1]
    ok = type(lexer) is jinja2.lexer.Lexer and all(
        getattr(env, k, None) == v and type(getattr(env, k, None)) is type(v) for k, v in _SETTINGS)
    _LAST = (lexer, ok)
    return ok


# --- the pattern -------------------------------------------------------------------------------------------
# Data after an end of tag (or at the start, or after a comment/raw block): everything up to the first opening
# mark, then that mark — a raw block's opening (tried first, as jinja2 does), a tag's opening with its optional
# whitespace-control sign — or the end of the template.
_TAIL = (r"(?P<text>[^{]*(?:\{(?![{%#])[^{]*)*)"
         r"(?:(?P<raw>\{%[-+]?\s*raw\s*(?:-%\}\s*|%\}))|(?P<open>\{[{%#][-+]?)|\Z)")
_FLOAT = r"(?<!\.)(?i:(?:\d+_)*\d+(?:(?:\.(?:\d+_)*\d+)?e[+\-]?(?:\d+_)*\d+|\.(?:\d+_)*\d+))"
_INT = r"(?i:0b(?:_?[01])+|0o(?:_?[0-7])+|0x(?:_?[\da-f])+|[1-9](?:_?\d)*|0(?:_?0)*)"
_STRING = r"""'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*\""""
_OPS = r"//|\*\*|==|!=|>=|<=|[-+/*%~=.:|,;<>]"
_MAIN = re.compile(
    # whitespace without a line break is skipped before a token; whitespace with one is a match of its own
    # (jinja2's whitespace token: only the line count needs it)
    r"[^\S\n]*(?:"
    # jinja2's rules in its order where two can match at one position (the end of a tag before operators, a
    # float before an integer before a name); names first where no other rule can: the commonest token
    r"(?P<name>(?!\d)" + _name_pattern.pattern + ")"
    r"|(?P<end>(?:(?P<bend>\+%\}|-%\}\s*|%\}\n?)|(?P<vend>-\}\}\s*|\}\}))" + _TAIL + ")"
    r"|(?P<op>" + _OPS + ")"
    r"|(?P<string>" + _STRING + ")"
    r"|(?P<opening>[(\[{])"
    r"|(?P<closing>[)\]}])"
    r"|(?P<nl>\s+)"
    r"|(?P<float>" + _FLOAT + ")"
    r"|(?P<int>" + _INT + "))", re.S)
_TAIL_RE = re.compile(_TAIL, re.S)
_COMMENT_BODY = re.compile(r".*?(?P<cend>\+#\}|-#\}\s*|#\}\n?)", re.S)
_RAW_BODY = re.compile(r"(?P<text>.*?)(?P<rawend>\{%(?P<sign>[-+]?)\s*endraw\s*(?:\+%\}|-%\}\s*|%\}\n?))", re.S)

_G = _MAIN.groupindex
_END_GROUPS = tuple(_G[g] for g in ("bend", "vend", "text", "raw", "open"))
_CLOSER = {"(": ")", "[": "]", "{": "}"}
_OPENER_TYPE = {"{{": TOKEN_VARIABLE_BEGIN, "{%": TOKEN_BLOCK_BEGIN}
_MAKE = tuple.__new__


class _GiveUp(Exception):
    """Internal: the template is left to jinja2's lexer."""


def _lstrip(text: str, sign: str, line_starting: bool) -> str:
    """The data before a block, comment or raw opening mark, as jinja2 emits it: ``-`` strips all trailing
    whitespace, ``+`` none; otherwise (``lstrip_blocks``) whitespace between the last line start and the mark."""
    if sign == "-":
        return text.rstrip()
    if sign == "+":
        return text
    start = text.rfind("\n") + 1
    if (start or line_starting) and text[start:].isspace():
        return text[:start]
    return text


def triples(source: str, check: "Callable[[], None] | None" = None) -> "list[tuple[int, str, object]] | None":
    """:func:`tokenize`'s tokens as plain ``(lineno, type, value)`` tuples (for a consumer that does not need
    :class:`jinja2.lexer.Token` objects, ~20 % of the time), or ``None``."""
    try:
        return _tokenize(source, check)
    except _GiveUp:
        return None


def tokenize(source: str, check: "Callable[[], None] | None" = None) -> "list[Token] | None":
    """The tokens of ``source`` (a template already through ``Environment.preprocess``) for an environment
    :func:`supports` accepts: ``list(env.lexer.tokenize(source))`` exactly, or ``None`` when this tokenizer is
    not certain to match it (see the module docstring). ``check`` is called every 256 tokens or so (the caller's
    clock check; what it raises propagates). Never raises otherwise."""
    try:
        return list(map(_MAKE, repeat(Token), _tokenize(source, check)))
    except _GiveUp:
        return None


def _data(text: str, raw: "str | None", opening: "str | None", line_starting: bool) -> str:
    """The data token's value for ``text`` before ``raw`` (a raw block's opening) or ``opening`` (a tag's)."""
    if opening is not None:
        if opening[1] == "{":  # lstrip_blocks leaves print tags alone
            return text.rstrip() if opening[2:] == "-" else text
        return _lstrip(text, opening[2:], line_starting)
    if raw is not None:
        return _lstrip(text, raw[2] if raw[2] in "-+" else "", line_starting)
    return text


def _tokenize(source: str, check: "Callable[[], None] | None") -> list:
    if "\r" in source:
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    if source.endswith("\n"):
        source = source[:-1]
    n = len(source)
    out: list = []
    add = out.append
    lineno = 1
    stack: list = []  # closing brackets expected, innermost last
    next_check = 256
    scan = _MAIN.scanner
    g = _MAIN.groupindex
    END, NL, INT, NAME, STRING, OPENING, CLOSING, OP = (
        g["end"], g["nl"], g["int"], g["name"], g["string"], g["opening"], g["closing"], g["op"])
    end_groups = _END_GROUPS
    ops = operators
    m = _TAIL_RE.match(source, 0)
    text, raw, opening = m.group("text", "raw", "open")
    pos = m.end()
    line_starting = True  # the last match ended a line: lstrip_blocks applies at the start of the next data
    if text:
        data = _data(text, raw, opening, line_starting)
        if data:
            add((lineno, TOKEN_DATA, data))
        lineno += text.count("\n")
    while True:
        # ``pos`` is after data and the mark that ended it: a tag's opening, a comment's, a raw block's or none
        if opening is None and raw is None:
            break
        if raw is not None:
            lineno += raw.count("\n")
            line_starting = raw[-1] == "\n"
            rm = _RAW_BODY.match(source, pos)
            if rm is None:
                raise _GiveUp
            body, end, sign = rm.group("text", "rawend", "sign")
            data = _lstrip(body, sign, line_starting)
            if data:
                add((lineno, TOKEN_DATA, data))
            lineno += body.count("\n") + end.count("\n")
            line_starting = end[-1] == "\n"
            pos = rm.end()
        elif opening[1] == "#":
            cm = _COMMENT_BODY.match(source, pos)
            if cm is None:
                if pos == n:  # jinja2 ends the stream there without an error
                    break
                raise _GiveUp
            body = cm.group()
            lineno += body.count("\n")
            line_starting = body[-1] == "\n"
            pos = cm.end()
        else:
            kind = opening[:2]
            add((lineno, _OPENER_TYPE[kind], opening))
            end_type = TOKEN_BLOCK_END if kind == "{%" else TOKEN_VARIABLE_END
            block = kind == "{%"
            while True:  # scan tags until a comment, a raw block or the end; restarted after a bracketed mark
                m = None
                restart = False
                for m in iter(scan(source, pos).match, None):
                    k = m.lastindex
                    if k == NAME:
                        v = m[k]
                        if not v.isidentifier():
                            raise _GiveUp
                        add((lineno, TOKEN_NAME, v))
                    elif k == OP:
                        v = m[k]
                        add((lineno, ops[v], v))
                    elif k == END:
                        bend, vend, text, raw, opening = m.group(*end_groups)
                        e = bend if block else vend
                        if e is None or stack:
                            if not stack:
                                raise _GiveUp  # jinja2 lexes it as operators and fails on the unbalanced "}"
                            # inside brackets jinja2 skips the end-of-tag rule: the mark's first character is
                            # an operator of its own; carry on after it
                            s = m.start(k)
                            c = source[s]
                            if c == "}" and stack.pop() != "}":
                                raise _GiveUp
                            add((lineno, ops[c], c))
                            pos = s + 1
                            restart = True
                            break
                        add((lineno, end_type, e))
                        lineno += e.count("\n")
                        line_starting = e[-1] == "\n"
                        if text:
                            data = _data(text, raw, opening, line_starting)
                            if data:
                                add((lineno, TOKEN_DATA, data))
                            lineno += text.count("\n")
                        if len(out) > next_check and check is not None:
                            check()
                            next_check = len(out) + 256
                        if opening is not None and opening[1] != "#":
                            kind = opening[:2]
                            add((lineno, _OPENER_TYPE[kind], opening))
                            block = kind == "{%"
                            end_type = TOKEN_BLOCK_END if block else TOKEN_VARIABLE_END
                            continue
                        pos = m.end()
                        break
                    elif k == STRING:
                        v = m[k]
                        value = v[1:-1]
                        if "\\" in value:
                            try:
                                value = value.encode("ascii", "backslashreplace").decode("unicode-escape")
                            except Exception:
                                raise _GiveUp from None
                        add((lineno, TOKEN_STRING, value))
                        if "\n" in v:
                            lineno += v.count("\n")
                    elif k == OPENING:
                        v = m[k]
                        stack.append(_CLOSER[v])
                        add((lineno, ops[v], v))
                    elif k == CLOSING:
                        v = m[k]
                        if not stack or stack.pop() != v:
                            raise _GiveUp
                        add((lineno, ops[v], v))
                    elif k == NL:
                        lineno += m[k].count("\n")
                    elif k == INT:
                        try:
                            add((lineno, TOKEN_INTEGER, int(m[k].replace("_", ""), 0)))
                        except ValueError:
                            raise _GiveUp from None
                    else:
                        try:
                            add((lineno, TOKEN_FLOAT, literal_eval(m[k].replace("_", ""))))
                        except (ValueError, SyntaxError):
                            raise _GiveUp from None
                else:
                    # no token at this position: the end of the template inside a tag (jinja2 stops there
                    # quietly), else a character jinja2 rejects
                    if m is not None:
                        pos = m.end()
                    if pos == n:
                        return out
                    raise _GiveUp
                if restart:
                    continue  # after an operator at ``pos``
                break  # ``pos``, ``raw``, ``opening`` are the next mark's: handled by the outer loop
            continue
        m = _TAIL_RE.match(source, pos)
        text, raw, opening = m.group("text", "raw", "open")
        pos = m.end()
        if text:
            data = _data(text, raw, opening, line_starting)
            if data:
                add((lineno, TOKEN_DATA, data))
            lineno += text.count("\n")
    return out
