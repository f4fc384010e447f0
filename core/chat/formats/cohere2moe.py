"""Cohere2 MoE / North Code handler (llama.cpp ``common/parsers/cohere2moe.cpp``).

The assistant turn is fully marker-wrapped; the generation prompt ends inside the thinking block::

    <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|> REASONING <|END_THINKING|>
    ( <|START_TEXT|> CONTENT <|END_TEXT|>
    | <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "NAME", "parameters": {…}}, …]<|END_ACTION|> )
    <|END_OF_TURN_TOKEN|>

Content and tool calls are mutually exclusive (at ``improved``, repair ``action-after-text`` reads text around the
block as content). The call id is the ``tool_call_id`` value; arguments are the model's JSON, verbatim.
"""

from __future__ import annotations

from typing import Any

from ...jinja.template import ChatTemplate
from ..repairs import ACTION_AFTER_TEXT, ANSWER_MARKER_WHITESPACE, BARE_ANSWER_AFTER_REASONING
from ..request import ChatRequest
from ._request_view import RequestView, request_view
from ._peg_handler import HandlerParser, peg_parser, word

NAME = "cohere2moe"

TURN_START = "<|START_OF_TURN_TOKEN|>"
TURN_END = "<|END_OF_TURN_TOKEN|>"
CHATBOT = "<|CHATBOT_TOKEN|>"
USER = "<|USER_TOKEN|>"
SYSTEM = "<|SYSTEM_TOKEN|>"
THINK_START = "<|START_THINKING|>"
THINK_END = "<|END_THINKING|>"
TEXT_START = "<|START_TEXT|>"
TEXT_END = "<|END_TEXT|>"
ACTION_START = "<|START_ACTION|>"
ACTION_END = "<|END_ACTION|>"
RESULT_START = "<|START_TOOL_RESULT|>"
RESULT_END = "<|END_TOOL_RESULT|>"
GEN_PREFIX = TURN_START + CHATBOT

PRESERVED = [TURN_START, TURN_END, CHATBOT, USER, SYSTEM, THINK_START, THINK_END, TEXT_START, TEXT_END, ACTION_START,
             ACTION_END, RESULT_START, RESULT_END]
DELIMITERS = {"assistant": GEN_PREFIX, "user": TURN_START + USER, "tool": TURN_START + SYSTEM + RESULT_START,
              "system": TURN_START + SYSTEM}


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """Cohere2 MoE parser and grammar (llama.cpp ``common_chat_params_init_cohere2moe``); a continuation
    reopens the thinking block (and for CONTENT closes it and opens ``<|START_TEXT|>``)."""
    view = request_view(request)
    gp = generation_prompt
    if view.has_continuation:
        gp = view.prefill(GEN_PREFIX + THINK_START, THINK_END + TEXT_START)

    include_grammar = view.has_schema or view.tools_active
    lazy = not view.has_schema and view.tool_choice.value == "auto"
    return peg_parser(NAME, lambda p: _peg_root(p, view), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=include_grammar, lazy=lazy,
                      trigger=word(ACTION_START), preserved_tokens=PRESERVED, thinking_start_tag=THINK_START,
                      thinking_end_tags=[THINK_END], message_delimiters=list(DELIMITERS.items()))


def _peg_root(p: Any, view: RequestView) -> Any:
    """llama.cpp's Cohere2 MoE parser on core.peg's ChatBuilder: the format, for the parse and the grammar."""
    stops = [THINK_END, TEXT_START, ACTION_START]
    if view.extract_reasoning:
        reasoning = p.optional(p.literal(THINK_START) + p.reasoning(p.until_one_of(stops))
                               + p.optional(p.literal(THINK_END)))
    else:
        reasoning = p.optional(p.content(p.literal(THINK_START) + p.until_one_of(stops)
                                         + p.optional(p.literal(THINK_END))))
    if view.has_schema:
        text = (p.literal(TEXT_START) + p.content(p.schema(p.json(), "response-format-schema", view.json_schema))
                + p.optional(p.literal(TEXT_END)))
    else:
        text = p.literal(TEXT_START) + p.content(p.until(TEXT_END)) + p.optional(p.literal(TEXT_END))
        if ANSWER_MARKER_WHITESPACE in p.repairs:
            text = p.optional(p.repair(ANSWER_MARKER_WHITESPACE, p.chars("[ \t\r\n]", 1, -1))) + text
        if BARE_ANSWER_AFTER_REASONING in p.repairs:
            # the answer written right after <|END_THINKING|>, without its <|START_TEXT|> wrapper
            bare = (p.negate(p.choice(p.literal(TEXT_START), p.literal(ACTION_START))) + p.peek(p.any())
                    + p.content(p.until_one_of([TEXT_END, TURN_END])) + p.optional(p.literal(TEXT_END)))
            text = p.choice(text, p.repair(BARE_ANSWER_AFTER_REASONING, bare))
    gen = p.literal(GEN_PREFIX)
    if not view.tools_active:
        return gen + reasoning + text + p.optional(p.literal(TURN_END)) + p.end()
    calls = p.standard_json_tools(ACTION_START, ACTION_END, [{"type": "function", "function": {
        "name": t.name, "parameters": t.parameters}} for t in view.tools], view.parallel, True,
        name_key="tool_name", args_key="parameters", array_wrapped=True, function_is_key=False, call_id_key="",
        gen_call_id_key="tool_call_id", parameters_order=["tool_call_id", "tool_name", "parameters"])
    body = calls if view.required else p.choice(calls, text)
    if ACTION_AFTER_TEXT in p.repairs and not view.required:
        body = p.choice(*_action_after_text(p, calls), text)
    return gen + reasoning + body + p.optional(p.literal(TURN_END)) + p.end()



def _action_after_text(p: Any, calls: Any) -> tuple[Any, Any]:
    """Repair ``action-after-text``: the action block after some text (in the template's ``<|START_TEXT|>``
    wrapper, or bare where ``bare-answer-after-reasoning`` reads a bare answer) and text after the block, all
    content in order. The block alone (llama.cpp's reading) fires nothing. Two alternatives: the block, then text
    and the block. The repair node holds the block, not the text: an answer the end of the output cuts before any
    block waits there as a lead-in (:func:`core.peg.chat.repair_nodes`), not a repair that acted, and a bare answer
    reports ``bare-answer-after-reasoning`` as before."""
    stops = [ACTION_START, TEXT_END, TURN_END]
    wrapped = (p.literal(TEXT_START) + p.content(p.until_one_of(stops)) + p.literal(TEXT_END)
               + p.content(p.space()))
    leads = [wrapped]
    if BARE_ANSWER_AFTER_REASONING in p.repairs:
        # (not where white space and a marker follow: answer-marker-whitespace's, or the block after layout)
        marker = p.space() + p.choice(p.literal(TEXT_START), p.literal(ACTION_START))
        leads.append(p.repair(BARE_ANSWER_AFTER_REASONING, p.negate(marker) + p.peek(p.any())
                              + p.content(p.until_one_of(stops))))
    block = p.peek(p.literal(ACTION_START)) + calls   # (the calls parser also reads no block at all)
    after = p.optional(p.repair(ACTION_AFTER_TEXT, p.negate(p.literal(TURN_END)) + p.peek(p.any())
                                + p.content(p.until(TURN_END))))
    after_text = p.choice(*leads) + p.repair(ACTION_AFTER_TEXT, block) + p.optional(
        p.content(p.until(TURN_END)))
    return block + after, after_text
