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

from typing import Any

from ...jinja.template import ChatTemplate
from ..request import ChatRequest, ToolChoice
from ._request_view import RequestView, request_view
from ._peg_handler import HandlerParser, peg_parser, word
from ..repairs import REASONING_START_REPEATED, SECTION_OPENER_WHITESPACE, next_call_section

NAME = "kimi_k2"

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
THINK_START = "<think>"
THINK_END = "</think>"
GEN_PROMPT = "<|im_assistant|>assistant<|im_middle|>"
PRESERVED = [SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGS_BEGIN, CALL_END, THINK_START, THINK_END]


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """Kimi K2 parser and grammar (llama.cpp ``common_chat_params_init_kimi_k2``); a continuation reopens
    ``<think>`` after the assistant header."""
    view = request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(GEN_PROMPT + THINK_START, THINK_END)
    return peg_parser(NAME, lambda p: _widened_root(p, view), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=view.tools_active,
                      lazy=view.tool_choice == ToolChoice.AUTO, trigger=word(CALL_BEGIN),
                      preserved_tokens=PRESERVED, thinking_start_tag=THINK_START, thinking_end_tags=[THINK_END])


def _widened_root(p: Any, view: RequestView) -> Any:
    """:func:`_peg_root`, then the repair widenings it asked for (``widen_late``: the grammar stays llama.cpp's,
    rule numbers included)."""
    late: list[Any] = []
    root = _peg_root(p, view, late)
    for widen in late:
        widen()
    return root


def _peg_root(p: Any, view: RequestView, late: list[Any] | None = None) -> Any:
    """The format: llama.cpp's Kimi K2 parser (``common/parsers/kimi-k2.cpp``) on core.peg's ChatBuilder; the
    parse and the grammar both come from it. ``late`` collects the repair widenings to make once it is built."""
    reasoning = p.eps()
    if view.extract_reasoning:
        body = p.reasoning(p.until_one_of([THINK_END, SECTION_BEGIN, CALL_BEGIN]))
        opened = p.literal(THINK_START)   # made after the body, as llama.cpp's tree numbers its nodes
        if late is not None and REASONING_START_REPEATED in p.repairs:
            # repair reasoning-start-repeated: <think> written again after the one the generation prompt opened
            # (an empty block after it included: vLLM's Kimi K2 parser reads <think></think> as no reasoning)
            late.append(lambda: p.widen_late(opened, REASONING_START_REPEATED,
                                             lambda one: one + p.space() + p.literal(THINK_START), first=True))
        reasoning = p.optional(opened + body + p.optional(p.literal(THINK_END)))
    gen = p.literal(GEN_PROMPT)
    if not view.tools_active:
        return gen + reasoning + p.content(p.rest()) + p.end()
    # repair call-marker-whitespace (vLLM's policy): whitespace around the id and the arguments;
    # repair call-id-namespace-optional: NAME:IDX, the id kept as written. Each a repair alternative of a choice
    # (left out of the grammar, which asks for the template's form), built only when the repair is on.
    loose_ws = "call-marker-whitespace" in p.repairs
    loose_id = "call-id-namespace-optional" in p.repairs

    def ws() -> Any:
        return p.chars("[ \t\r\n]", 1, -1)

    choices = []
    call_ends: list[Any] = []   # the <|tool_call_end|> nodes (repair call-marker-whitespace widens them)

    def call_end() -> Any:
        end = p.literal(CALL_END)
        call_ends.append(end)
        return end

    for spec in view.tools:
        def call_of(namespace: Any, gap: Any) -> Any:
            tool_id = p.tool_id(namespace + p.tool_name(p.literal(spec.name)) + p.literal(":")
                                + p.chars("[0-9]", 1, -1))
            args = p.json_tool_args(spec.index, spec.parameters)
            if gap is None:   # the template's form (llama.cpp's grammar, node for node)
                return (p.tool_open(tool_id + p.literal(ARGS_BEGIN)) + args
                        + p.tool_close(p.optional(call_end())))
            return (p.tool_open(gap() + tool_id + gap() + p.literal(ARGS_BEGIN)) + gap() + args
                    + p.tool_close(gap() + p.optional(call_end())))

        strict = call_of(p.literal("functions."), None)
        if loose_ws or loose_id:
            opt_ws = (lambda: p.optional(ws())) if loose_ws else None
            alts = [strict]
            if loose_ws:
                alts.append(p.repair("call-marker-whitespace", call_of(p.literal("functions."), opt_ws)))
            if loose_id:
                alts.append(p.repair("call-id-namespace-optional", call_of(p.eps(), opt_ws)))
            body = p.choice(*alts)
        else:
            body = strict
        choices.append(p.rule(f"tool-{spec.index}", p.tool(body)))
    section_begin = p.literal(SECTION_BEGIN)
    calls = p.rule("tool-calls", p.optional(section_begin) + p.trigger_rule(
        "tool-call", p.repeat(CALL_BEGIN + p.choice(*choices), 1 if view.required else 0, -1 if view.parallel else 1)
        + p.optional(p.literal(SECTION_END))))
    if loose_ws and late is not None:
        # repair call-marker-whitespace: whitespace (a line break) after a call's <|tool_call_end|> when the next
        # call or the section's end follows it (between the calls of one section); other text after it stays
        # content as before, and whitespace that ends the output is never waited on (a prefix ending there stays
        # clean, so a failed parse's rest starts after the closer, as without the repair)
        for end in call_ends:
            late.append(lambda end=end: p.widen_late(end, "call-marker-whitespace", lambda orig: (
                orig + p.negate(ws() + p.end()) + ws()
                + p.peek(p.choice(p.literal(CALL_BEGIN), p.literal(SECTION_END)))), first=True))
    if SECTION_OPENER_WHITESPACE in p.repairs and late is not None:
        # repair section-opener-whitespace: whitespace (a line break) after the section's opener when a call's
        # marker follows it; whitespace that ends the output is never waited on (as after a call's end above)
        late.append(lambda: p.widen_late(section_begin, SECTION_OPENER_WHITESPACE, lambda orig: (
            orig + p.negate(ws() + p.end()) + ws() + p.peek(p.literal(CALL_BEGIN))), first=True))
    final_end = p.end()
    if view.parallel:   # repair consecutive-call-blocks: a further section after the first
        next_call_section(p, final_end, SECTION_BEGIN, "tool-calls")
    return gen + reasoning + p.content(p.until_one_of([SECTION_BEGIN, CALL_BEGIN])) + calls + final_end
