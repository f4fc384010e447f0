"""MiniCPM5 handler (llama.cpp ``common/parsers/minicpm5.cpp``).

Output shape (after ``<|im_start|>assistant\\n``; the generation prompt opens ``<think>``, or writes an empty
think block when thinking is off)::

    <think> REASONING </think> CONTENT
    <function name="NAME"><param name="K">VALUE</param>…</function> …

String parameters are raw text up to ``</param>``, or the inside of ``<![CDATA[…]]>`` (so a value may
contain ``</param>``); other parameters are JSON.
"""

from __future__ import annotations

from typing import Any

from ...jinja.template import ChatTemplate
from ..repairs import CONTENT_BETWEEN_CALLS, REASONING_START_REPEATED, XML_ARGUMENTS_WRAPPER
from ..request import ChatRequest
from ._request_view import RequestView, attribute_tag, request_view, string_or_json_params
from ._peg_handler import HandlerParser, peg_parser, word

NAME = "minicpm5"

GEN_PROMPT = "<|im_start|>assistant\n"
THINK_START = "<think>"
THINK_END = "</think>"
FUNC = "<function"
FUNC_END = "</function>"
PARAM_END = "</param>"

PRESERVED = [FUNC, "<param", FUNC_END, PARAM_END, THINK_START, THINK_END]
DELIMITERS = {"assistant": "<|im_start|>assistant", "tool": "<|im_start|>user\n<tool_response>",
              "user": "<|im_start|>user", "system": "<|im_start|>system"}


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """MiniCPM5 parser and grammar (llama.cpp ``common_chat_params_init_minicpm5``); a continuation reopens
    ``<think>\\n`` (and closes it with ``\\n</think>\\n\\n`` for CONTENT)."""
    view = request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(GEN_PROMPT + THINK_START + "\n", "\n" + THINK_END + "\n\n")

    include_grammar = view.has_schema or view.tools_active
    lazy = not (view.has_schema or (view.tools_active and view.required))
    return peg_parser(NAME, lambda p: _peg_root(p, view), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=include_grammar, lazy=lazy,
                      trigger=word(FUNC), preserved_tokens=PRESERVED, thinking_start_tag=THINK_START,
                      thinking_end_tags=[THINK_END], message_delimiters=list(DELIMITERS.items()))


def _peg_root(p: Any, view: RequestView) -> Any:
    """llama.cpp's MiniCPM5 parser on core.peg's ChatBuilder: the format, for the parse and the grammar; the
    repairs widen it once it is built (``widen_late``: the grammar stays llama.cpp's, rule numbers included)."""
    late: list[Any] = []
    root = _peg_tree(p, view, late)
    for widen in late:
        widen()
    return root


def _peg_tree(p: Any, view: RequestView, late: list[Any]) -> Any:
    """The format; ``late`` collects the repair widenings to make once the tree is complete."""
    gen = p.literal(GEN_PROMPT)
    reasoning = p.eps()
    if view.extract_reasoning:
        opened = p.literal(THINK_START)
        if REASONING_START_REPEATED in p.repairs:
            # repair reasoning-start-repeated: <think> written again after the one the generation prompt opened
            late.append(lambda: p.widen_late(opened, REASONING_START_REPEATED, lambda one: one + p.space() + one
                                             + p.negate(p.space() + p.literal(THINK_END)), first=True))
        reasoning = (opened << p.reasoning(p.until(THINK_END)) << THINK_END) + p.space()
    if view.has_schema:
        return gen + reasoning + p.content(p.schema(p.json(), "response-format", view.json_schema))
    if not view.tools_active:
        return gen + reasoning + p.content(p.rest()) + p.end()
    close = lambda: p.tool_arg_close(p.literal(PARAM_END))  # noqa: E731
    string_value = p.choice(
        p.literal("<![CDATA[") + p.ac(p.tool_arg_string_value(p.until("]]>")) + p.literal("]]>"), "]]>") + close(),
        p.negate(p.literal("<![CDATA[")) + p.ac(p.tool_arg_string_value(p.until(PARAM_END)) + close(), PARAM_END))
    choices = []
    for spec in view.tools:
        args = string_or_json_params(p, spec, "<param", PARAM_END, string_value)
        if XML_ARGUMENTS_WRAPPER in p.repairs:
            # repair xml-arguments-wrapper: the params inside <arguments>…</arguments> (tried first: the plain
            # params may be empty, and the wrapper's opener never starts a param or the closer)
            late.append(lambda args=args: p.widen_late(args, XML_ARGUMENTS_WRAPPER, lambda plain: p.literal(
                "<arguments>") + p.space() + plain + p.literal("</arguments>") + p.space(), first=True))
        call = p.tool(p.tool_open(attribute_tag(p, FUNC, "name") + p.tool_name(p.literal(spec.name)) + p.literal('">'))
                      << p.tool_args(args) << p.tool_close(p.literal(FUNC_END)))
        choices.append(p.rule(f"tool-{spec.index}", call))
    one = p.choice(*choices)
    after = p.space()
    if CONTENT_BETWEEN_CALLS in p.repairs:
        # repair content-between-calls: text after a call, up to the next call or the end, is content with the
        # whitespace around it (the template glues the text it renders to the calls); whitespace alone stays layout
        # (the peek decides before any of it shows: whitespace then the end, or then a call, is not this)
        late.append(lambda: p.widen_late(after, CONTENT_BETWEEN_CALLS, lambda _: p.peek(
            p.space() + p.negate(p.end()) + p.negate(p.literal(FUNC))) + p.content(p.space() + p.until(FUNC)),
            first=True))
    calls = p.trigger_rule("tool-call", p.repeat(one + after, 1, -1 if view.parallel else 1))
    return gen + reasoning + p.content(p.until(FUNC)) + calls + p.end()
