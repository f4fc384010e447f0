"""Kimi K2 / K2 Thinking handler (llama.cpp ``common/parsers/kimi-k2.cpp``).

Output shape (after ``<|im_assistant|>assistant<|im_middle|>``)::

    [<think> REASONING [</think>]] CONTENT
    [<|tool_calls_section_begin|>]
    <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{JSON}[<|tool_call_end|>] …
    [<|tool_calls_section_end|>]

The call id is the whole ``functions.NAME:IDX``. Reasoning also ends at a tool-call marker (the model may call
a tool without closing its think block). Arguments are the model's JSON, verbatim.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ...templating import ChatTemplate
from ..request import ChatRequest
from . import _common as C
from ...peg.chat import current_repairs
from ._common import Incomplete, Mismatch, Scanner
from ._peg_handler import peg_parser, scanner_engine, word
from ..request import ToolChoice

NAME = "kimi_k2"

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<|im_assistant|>assistant<|im_middle|>"
_DIGITS = re.compile(r"[0-9]+")
PRESERVED = [SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGS_BEGIN, CALL_END, THINK_START, THINK_END]


def _make_body(view: C.RequestView, repairs: frozenset[str] = frozenset()):
    names = [t.name for t in view.tools]
    opens = {"functions." + n: n for n in names}

    def call(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(CALL_BEGIN)
        id_start = sc.pos
        head = sc.choose_literal(opens)
        sc.pos += len(head)
        sc.expect(":")
        if not sc.match(_DIGITS):
            if sc.pos >= sc.n:
                raise Incomplete(sc.n)
            raise Mismatch(sc.pos, "expected the call index")
        call_id = sc.text[id_start:sc.pos]
        sc.expect(ARGS_BEGIN)
        b.open_call(opens[head], call_id=call_id)
        sc.pos = C.json_arguments(sc, b, repairs)
        sc.optional(CALL_END)
        b.close_call()

    def tool_calls(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.optional(SECTION_BEGIN)
        C.repeat(sc, b, call, 1 if view.required else 0, None if view.parallel else 1, resumable=True)
        sc.optional(SECTION_END)

    def body(sc: Scanner, b: C.MessageBuilder) -> None:
        sc.expect(GEN_PROMPT)
        if view.extract_reasoning and sc.pos < sc.n:
            r = sc.check(THINK_START)
            if r == -1:
                raise Incomplete(sc.n)
            if r == 1:
                sc.pos += len(THINK_START)
                b.add_reasoning(sc.until(THINK_END, SECTION_BEGIN, CALL_BEGIN))
                sc.optional(THINK_END)
        if not view.tools_active:
            b.add_content(sc.until())
            return
        b.add_content(sc.until(SECTION_BEGIN, CALL_BEGIN))
        tool_calls(sc, b)
        if sc.pos < sc.n:
            raise Mismatch(sc.pos, "text after the tool calls")

    return body


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> Any:
    """Kimi K2 parser and grammar (llama.cpp ``common_chat_params_init_kimi_k2``); a continuation reopens
    ``<think>`` after the assistant header."""
    view = C.request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(GEN_PROMPT + THINK_START, THINK_END)
    if not scanner_engine():
        return peg_parser(NAME, lambda p: _peg_root(p, view), generation_prompt=gp,
                          parser_generation_prompt=generation_prompt, include=view.tools_active,
                          lazy=view.tool_choice == ToolChoice.AUTO, trigger=word(CALL_BEGIN),
                          preserved_tokens=PRESERVED, thinking_start_tag=THINK_START, thinking_end_tags=[THINK_END])

    return C.HandlerParser(
        name=NAME,
        body=_make_body(view, current_repairs()),
        generation_prompt=gp,
        preserved_tokens=PRESERVED,
        thinking_start_tag=THINK_START,
        thinking_end_tags=[THINK_END],
        pending_literals=True,   # the body reads the end only through the scanner (checked: see _make_body)
        json_value_fast_path=True,
        after_arguments=_after_arguments(view),
        **C.grammar_fields(lambda p: _peg_root(p, view), include=view.tools_active,
                           lazy=view.tool_choice.value == "auto", trigger=C.word_trigger(CALL_BEGIN)),
    )


def _lit(w: str, i: int, lit: str) -> int | None:
    """The position after ``lit`` at ``i`` in ``w``; -1 when ``w`` ends inside it (or at ``i``); None when it is
    not there."""
    if w.startswith(lit, i):
        return i + len(lit)
    return -1 if lit.startswith(w[i:]) else None


def _after_arguments(view: C.RequestView) -> Any:
    """Streaming (``HandlerParser.after_arguments``): whether ``w``, the text after a call's JSON arguments,
    leaves the message as it is — it only goes on as ``_make_body`` reads it, through the optional call end and
    then the next call's begin marker, ``functions.NAME:IDX`` and part of its argument marker (nothing of the
    next call is visible before that marker is complete) or the optional section end (one call only: the
    section end), and stops before the end of any of them. None when no call can be made, or when a tool's
    name holds a character of the markers (``:``, ``<``)."""
    if not view.tools_active or any(":" in t.name or "<" in t.name for t in view.tools):
        return None
    heads = ["functions." + t.name for t in view.tools]
    parallel = view.parallel
    # most of the characters between two calls: the fixed run up to the names (a proper prefix of it is taken
    # at once)
    fixed = CALL_END + CALL_BEGIN + os.path.commonprefix(heads) if parallel else CALL_END + SECTION_END

    def header(w: str, i: int) -> bool:
        rest = w[i:]
        best = None
        for h in heads:                      # Scanner.choose_literal: the longest name, pending while cut
            if rest.startswith(h):
                if best is None or len(h) > len(best):
                    best = h
            elif h.startswith(rest):
                return True
        if best is None:
            return False
        r = _lit(w, i + len(best), ":")
        if r is None:
            return False
        if r == -1:
            return True
        m = _DIGITS.match(w, r)
        if m is None:
            return r == len(w)
        k = m.end()
        return len(w) - k < len(ARGS_BEGIN) and ARGS_BEGIN.startswith(w[k:])

    def after(w: str) -> bool:
        if len(w) < len(fixed) and fixed.startswith(w):
            return True
        r = _lit(w, 0, CALL_END)
        if r == -1:
            return True
        i = 0 if r is None else r
        if parallel:
            r = _lit(w, i, CALL_BEGIN)
            if r == -1:
                return True
            if r is not None:
                return header(w, r)
        r = _lit(w, i, SECTION_END)
        return r == -1 or r == len(w)

    return after


def _peg_root(p: Any, view: C.RequestView) -> Any:
    """llama.cpp's Kimi K2 parser structure (core.peg ChatBuilder), used for the grammar."""
    reasoning = p.eps()
    if view.extract_reasoning:
        reasoning = p.optional(THINK_START + p.reasoning(p.until_one_of([THINK_END, SECTION_BEGIN, CALL_BEGIN]))
                               + p.optional(p.literal(THINK_END)))
    gen = p.literal(GEN_PROMPT)
    if not view.tools_active:
        return gen + reasoning + p.content(p.rest()) + p.end()
    choices = []
    for spec in view.tools:
        tool_id = p.tool_id(p.literal("functions.") + p.tool_name(p.literal(spec.name)) + p.literal(":")
                            + p.chars("[0-9]", 1, -1))
        call = p.tool(p.tool_open(tool_id + p.literal(ARGS_BEGIN))
                      + p.json_tool_args(spec.name, spec.parameters)
                      + p.tool_close(p.optional(p.literal(CALL_END))))
        choices.append(p.rule("tool-" + spec.name, call))
    calls = p.rule("tool-calls", p.optional(p.literal(SECTION_BEGIN)) + p.trigger_rule(
        "tool-call", p.repeat(CALL_BEGIN + p.choice(*choices), 1 if view.required else 0, -1 if view.parallel else 1)
        + p.optional(p.literal(SECTION_END))))
    return gen + reasoning + p.content(p.until_one_of([SECTION_BEGIN, CALL_BEGIN])) + calls + p.end()
