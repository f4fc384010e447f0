"""Muse Glimmer handler (llama.cpp ``common/parsers/muse-glimmer.cpp``).

An assistant turn is one or more messages ``<|start|>assistant to=RECIPIENT<|message|>BODY<|eom|>`` (the last
one ends with ``<|eot|>``); the generation prompt is just ``<|start|>assistant``::

    to=self   → chain of thought (reasoning), ends with <|eom|>
    to=user   → the answer (content); " to=user" may be omitted
    to=TOOL   → <atem:function_calls><atem:invoke name="NAME">
                  <atem:parameter name="K">VALUE</atem:parameter>…
                </atem:invoke></atem:function_calls>

String parameters are raw text, others JSON. Calls may follow the answer after ``<|eom|>``. Text after the
last recognised message is ignored, as llama.cpp does.
"""

from __future__ import annotations

from typing import Any

from ...jinja.template import ChatTemplate
from ..request import ChatRequest
from ._request_view import RequestView, request_view, string_or_json_params
from ._peg_handler import HandlerParser, pattern, peg_parser

NAME = "muse_glimmer"

START = "<|start|>assistant"
MESSAGE = "<|message|>"
EOM = "<|eom|>"
EOT = "<|eot|>"
SELF = " to=self<|message|>"
TO_USER = " to=user"
FCALLS = "<atem:function_calls>"
FCALLS_END = "</atem:function_calls>"
INVOKE_END = "</atem:invoke>"
PARAM_END = "</atem:parameter>"
PRESERVED = ["<|start|>", MESSAGE, EOM, EOT, FCALLS, "<atem:invoke", "<atem:parameter", PARAM_END, INVOKE_END,
             FCALLS_END]
DELIMITERS = {"assistant": START, "user": "<|start|>user", "system": "<|start|>system", "tool": "<|start|>tool"}
TRIGGER_PATTERN = "(?:^|<\\|start\\|>assistant)( to=(?!self<\\|message\\|>)(?!user<\\|message\\|>)[^<]*?<\\|message\\|>)"


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """Muse Glimmer parser and grammar (llama.cpp ``common_chat_params_init_muse_glimmer``). The generation
    prompt is always ``<|start|>assistant``; a continuation reopens the ``to=self`` message (and for CONTENT
    closes it and opens the ``to=user`` one)."""
    view = request_view(request)
    gp = START
    if view.has_continuation:
        gp = view.prefill(START + SELF, EOM + START + TO_USER + MESSAGE)

    include_grammar = view.has_schema or view.tools_active
    lazy = not (view.has_schema or (view.tools_active and view.required))
    # text after the last message (its <|eot|> end token, anything else) is read and ignored, as llama.cpp
    # does; not part of the grammar, which stops at the message
    return peg_parser(NAME, lambda p: _peg_root(p, view) + p.ignored(p.rest()), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=include_grammar, lazy=lazy,
                      trigger=pattern(TRIGGER_PATTERN), preserved_tokens=PRESERVED,
                      message_delimiters=list(DELIMITERS.items()))


def _peg_root(p: Any, view: RequestView) -> Any:
    """llama.cpp's Muse Glimmer parser on core.peg's ChatBuilder: the format, for the parse and the grammar."""
    start = p.rule("start", p.literal(START))
    if not view.extract_reasoning and not (view.has_schema or view.tools_active):
        return start + p.content(p.rest())
    if view.extract_reasoning:
        p.rule("analysis", p.literal(SELF) + p.reasoning(p.until(EOM)) + p.literal(EOM))
    else:
        p.rule("analysis", p.literal(SELF) + p.content(p.until(EOM)) + p.literal(EOM))
    analysis = p.ref("analysis")
    recipient = p.optional(p.literal(TO_USER))
    final = p.rule("final", recipient + p.literal(MESSAGE) + p.content(p.until_one_of([EOT, EOM])))
    if view.has_schema:
        response_json = p.content(p.schema(p.json(), "response-format-schema", view.json_schema))
        response = p.rule("response-format", recipient + p.literal(MESSAGE) + (
            (p.literal("```json") + p.space() + response_json + p.space() + p.literal("```")) | response_json))
        return p.zero_or_more(start + analysis) + start + response
    if not view.tools_active:
        return p.zero_or_more(start + analysis) + start + final
    string_value = p.ac(p.tool_arg_string_value(p.until(PARAM_END)) + p.tool_arg_close(p.literal(PARAM_END)),
                        PARAM_END)
    choices = []
    for spec in view.tools:
        args = string_or_json_params(p, spec, "<atem:parameter", PARAM_END, string_value)
        call = p.tool(p.tool_open(p.literal(" to=") + p.until(MESSAGE) + p.literal(MESSAGE + FCALLS) + p.space()
                                  + p.literal('<atem:invoke name="') + p.tool_name(p.literal(spec.name))
                                  + p.literal('">') + p.space())
                      << p.tool_args(args)
                      << p.tool_close(p.literal(INVOKE_END) + p.space() + p.literal(FCALLS_END)))
        choices.append(p.rule(f"tool-{spec.index}", call))
    one = p.choice(*choices)
    calls = (p.trigger_rule("tool-call", one + p.zero_or_more(p.literal(EOM) + start + one)) if view.parallel
             else p.trigger_rule("tool-call", one))
    if view.required:
        return p.zero_or_more(start + analysis) + start + calls
    trailing = p.optional(p.literal(EOM) + start + calls)
    return p.zero_or_more(start + analysis) + start + (calls | (final + trailing))
