"""An independent check of our GBNF: llguidance (Rust, from PyPI) accepts or rejects strings.

llguidance parses GBNF itself (``grammar_from("gbnf", ...)``) and we use that to check every grammar is
well-formed. For *acceptance* its GBNF front end is not usable as is: it turns every rule made only of
terminals into one greedy lexeme, and its lexer never backtracks, so an ambiguous but valid grammar (an optional
``"<|START_THINKING|>"`` next to ``"<|START_ACTION|>"``, an ``until`` automaton next to the literal it excludes)
rejects valid text. llama.cpp's GBNF engine has no lexer. So for acceptance the grammar is translated to Lark
with one-character terminals only (same language: literals become sequences of characters, classes stay
classes) and llguidance's Earley parser decides.

Helpers used by the other grammar tests: :func:`gbnf_problems`, :func:`gbnf_accepts`, :func:`gbnf_to_char_lark`.
"""

from __future__ import annotations

import json
import re

import pytest

llg = pytest.importorskip("llguidance")


class _ByteTokenizer:
    """One token per byte (plus EOS), so any text can be fed byte by byte."""

    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
    special_token_ids = [256]

    def __call__(self, s):
        if isinstance(s, str):
            s = s.encode("utf-8")
        return list(s)


_TOKENIZER = None
_LIMITS = None


def _tok():
    global _TOKENIZER, _LIMITS
    if _TOKENIZER is None:
        _TOKENIZER = llg.LLTokenizer(llg.TokenizerWrapper(_ByteTokenizer()), slices=[])
        _LIMITS = llg.LLParserLimits(max_items_in_row=200_000, step_max_items=10_000_000,
                                     initial_lexer_fuel=10**9, step_lexer_fuel=10**9, max_lexer_states=10**7,
                                     max_grammar_size=10**8)
    return _TOKENIZER


# ---------------------------------------------------------------------------------------------------------------
# GBNF -> Lark with one-character terminals

_TOKEN = re.compile(r'''
    (?P<ws>[ \t\r\n]+|\#[^\n]*)
  | (?P<defn>::=)
  | (?P<lit>"(?:[^"\\]|\\.)*")
  | (?P<cls>\[(?:[^\]\\]|\\.)*\])
  | (?P<name>[a-zA-Z0-9_-]+)
  | (?P<rep>\{\s*\d+\s*(?:,\s*\d*\s*)?\})
  | (?P<op>[()|?*+.])
''', re.X | re.S)

_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "/": "/",
        " ": " ", "'": "'", "^": "^"}


class GbnfSyntaxError(ValueError):
    pass


def _unescape(body: str) -> list[str]:
    """Characters of a literal or class body with GBNF escapes decoded (class syntax kept by the caller)."""
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            e = body[i + 1]
            n = {"x": 2, "u": 4, "U": 8}.get(e)
            if n:
                out.append(chr(int(body[i + 2:i + 2 + n], 16)))
                i += 2 + n
                continue
            out.append(_ESC.get(e, e))
            i += 2
            continue
        out.append(c)
        i += 1
    return out


def _class_to_regex(cls: str) -> str:
    body = cls[1:-1]
    neg = body.startswith("^")
    if neg:
        body = body[1:]
    # split into items (char or escaped char), keeping '-' ranges
    items: list[tuple[str, bool]] = []  # (char, is_range_dash)
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            e = body[i + 1]
            n = {"x": 2, "u": 4, "U": 8}.get(e)
            if n:
                items.append((chr(int(body[i + 2:i + 2 + n], 16)), False))
                i += 2 + n
            else:
                items.append((_ESC.get(e, e), False))
                i += 2
            continue
        items.append((c, c == "-"))
        i += 1
    parts = []
    j = 0
    while j < len(items):
        ch, _ = items[j]
        if j + 2 < len(items) and items[j + 1][1]:
            parts.append(_re_char(ch) + "-" + _re_char(items[j + 2][0]))
            j += 3
        else:
            parts.append(_re_char(ch))
            j += 1
    return "/[" + ("^" if neg else "") + "".join(parts) + "]/"


def _re_char(c: str) -> str:
    o = ord(c)
    if c.isalnum() and o < 128:
        return c
    return "\\u{%X}" % o


def _lark_lit(c: str) -> str:
    return json.dumps(c)


def _rule_name(n: str) -> str:
    return "r_" + n.replace("-", "_").lower()


def gbnf_to_char_lark(gbnf: str) -> str:
    """Translate GBNF to Lark where every terminal is one character (see module doc)."""
    toks = []
    for m in _TOKEN.finditer(gbnf):
        kind = m.lastgroup
        if kind != "ws":
            toks.append((kind, m.group(0)))
    consumed = sum(len(m.group(0)) for m in _TOKEN.finditer(gbnf))
    if consumed != len(gbnf):
        raise GbnfSyntaxError("unexpected characters in GBNF")
    rules: list[tuple[str, list[tuple[str, str]]]] = []
    i = 0
    while i < len(toks):
        if i + 1 < len(toks) and toks[i][0] == "name" and toks[i + 1][0] == "defn":
            rules.append((toks[i][1], []))
            i += 2
            continue
        if not rules:
            raise GbnfSyntaxError(f"text before the first rule: {toks[i][1]!r}")
        rules[-1][1].append(toks[i])
        i += 1
    out = ["%llguidance {}", "", "start: r_root", ""]
    for name, body in rules:
        parts: list[str] = []
        for kind, text in body:
            if kind == "lit":
                chars = _unescape(text[1:-1])
                parts.append('""' if not chars else "(" + " ".join(_lark_lit(c) for c in chars) + ")")
            elif kind == "cls":
                parts.append(_class_to_regex(text))
            elif kind == "name":
                parts.append(_rule_name(text))
            elif kind == "rep":
                parts.append(text.replace(" ", ""))
            elif text == ".":
                parts.append("/(?s:.)/")
            elif text == "|":
                parts.append("|")
            else:
                parts.append(text)
        # an empty alternative: GBNF allows "|" with nothing around it
        rhs = " ".join(parts)
        rhs = re.sub(r"(^|\||\()\s*(?=\||\)|$)", lambda m: m.group(1) + ' "" ', rhs)
        out.append(f"{_rule_name(name)}: {rhs}")
    return "\n".join(out) + "\n"


def gbnf_problems(gbnf: str) -> list[str]:
    """Errors llguidance's own GBNF front end reports for ``gbnf`` ([] when well-formed)."""
    try:
        grm = llg.grammar_from("gbnf", gbnf)
    except ValueError as e:
        return [str(e)]
    is_err, msgs = llg.LLMatcher.validate_grammar_with_warnings(grm, _tok())
    return list(msgs) if is_err else []


def gbnf_accepts(gbnf: str, text: str, *, complete: bool = True) -> tuple[bool, str]:
    """Whether the grammar accepts ``text`` (``complete=False``: accepts it as a prefix of a longer text).

    Returns ``(ok, reason)``.
    """
    lark = gbnf_to_char_lark(gbnf)
    m = llg.LLMatcher(_tok(), llg.grammar_from("lark", lark), limits=_LIMITS, log_level=0)
    if m.is_error():
        return False, "grammar error: " + m.get_error()[:300]
    data = text.encode("utf-8")
    for i, b in enumerate(data):
        if not m.consume_token(b):
            return False, f"rejected byte {i} ({data[max(0, i - 20):i + 1]!r})"
    if complete and not m.is_accepting():
        return False, "text ends before the grammar is satisfied"
    return True, ""


# ---------------------------------------------------------------------------------------------------------------
# self-tests of the translation (so a translation bug cannot hide a grammar bug)

AMBIGUOUS = r'''root ::= space ("<|START_THINKING|>" until-4 "<|END_THINKING|>")? tool-call
space ::= | " " | "\n"{1,2} [ \t]{0,20}
tool-call ::= "<|START_ACTION|>" [0-9]+ "<|END_ACTION|>"
until-4 ::= | [<] until-4-01 | [^<] until-4
until-4-01 ::= | [<] until-4-01 | [|] until-4-02 | [^<|] until-4
until-4-02 ::= | [<] until-4-01 | [E] until-4-03 | [^<E] until-4
until-4-03 ::= | [<] until-4-01 | [^<N] until-4
'''


@pytest.mark.parametrize("text, ok", [
    ("<|START_THINKING|>a<|b<|E<|START_THINKING|><|END_THINKING|><|START_ACTION|>12<|END_ACTION|>", True),
    ("<|START_ACTION|>7<|END_ACTION|>", True),
    ("\n<|START_ACTION|>7<|END_ACTION|>", True),
    ("<|START_THINKING|>a<|EN<|END_THINKING|><|START_ACTION|>7<|END_ACTION|>", False),
    ("<|START_ACTION|><|END_ACTION|>", False),
])
def test_translation_keeps_the_language_of_an_ambiguous_grammar(text, ok):
    assert gbnf_problems(AMBIGUOUS) == []
    assert gbnf_accepts(AMBIGUOUS, text)[0] is ok


@pytest.mark.parametrize("gbnf, text, ok", [
    (r'root ::= "a\"b\\c\n" [\x41-\x43]{2} "\u00e9"', 'a"b\\c\nAC\u00e9', True),
    (r'root ::= "a\"b\\c\n" [\x41-\x43]{2} "\u00e9"', 'a"b\\c\nAD\u00e9', False),
    (r'root ::= [^"\\\x7F\x00-\x1F]+ | "x"', "héllo", True),
    (r'root ::= [^"\\\x7F\x00-\x1F]+', "a\x01", False),
    (r'root ::= . . "|"', "\n\u4e2d|", True),
    (r'root ::= ("a" | "b")+ "-" [a\-z]', "abba--", True),
    (r'root ::= ("a" | "b")+ "-" [a\-z]', "abba-b", False),
])
def test_translation_of_literals_classes_and_escapes(gbnf, text, ok):
    assert gbnf_accepts(gbnf, text)[0] is ok


def test_prefix_acceptance_and_malformed_grammar():
    assert gbnf_accepts(r'root ::= "hello" " world"', "hello wo", complete=False)[0]
    assert not gbnf_accepts(r'root ::= "hello" " world"', "hello wo")[0]
    assert gbnf_problems('root ::= undefined-rule "x"')


def test_optional_rest_is_a_plain_star():
    """``optional(content(rest()))`` (content after the calls, improved fidelity) is ``.*``: ``.*?`` read as a lazy
    star, or as an optional star, by different GBNF readers."""
    from core.peg.chat import ChatBuilder

    p = ChatBuilder()
    root = p.literal("<c>") + p.optional(p.content(p.rest()))
    grammar = p.build(root).to_gbnf()
    assert ".*?" not in grammar and '"<c>" .*' in grammar, grammar
    assert gbnf_problems(grammar) == []
    assert gbnf_accepts(grammar, "<c>")[0] and gbnf_accepts(grammar, "<c> then text")[0]
