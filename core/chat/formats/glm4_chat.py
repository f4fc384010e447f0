"""GLM-4 chat call turns (improvement ``metadata-call-turns``; not a llama.cpp family).

GLM-4-9B chat's templates render a tool call as an assistant turn whose ``metadata`` is the function name and whose
``content`` is the JSON arguments — ``<|assistant|>NAME\\n{"a": 1}`` — and never read ``tool_calls``, so the
analysis finds no tool format and llama.cpp returns a call as content. The model writes exactly that turn after the
generation prompt ``<|assistant|>``, so the output of a call is::

    NAME\\n{json arguments}

and a plain answer starts with the line break the template writes before a turn's content. The layout is learned
from renders of the template (:func:`call_layout_of`), never from a file name or an output: the text between the
name and the arguments (a line break, GLM-4-0414's ``" \\n"``), and the text between two call turns (the turn
header again), which is how parallel calls are read.

Policy (read from GLM-4's own OpenAI server, ``THUDM/GLM-4`` ``basic_demo/openai_api_server.py``
``process_response``): the first line (whitespace around it ignored) is the name of a tool of the request and the
arguments after the line break are a JSON object; anything else is content. Unlike that server, text after a
call's arguments is content (the lossless contract; the server would return the whole output as content), and a
further call turn after the learned separator is a call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...memo import MISSING, BoundedMemo
from ..prompt import render_prompt
from ..request import ToolChoice
from ._peg_handler import function_parameters_schema, foreach_function_indexed, pattern, peg_parser, prepared_for

NAME = "glm4-chat"

_PROBE_NAME = "probe_function_name"
_PROBE_NAME_2 = "probe_function_other"
_PROBE_ARGS = '{"probe_key": "probe_value"}'
_LAYOUT_CACHE = BoundedMemo("metadata call layout", max_entries=1024, max_bytes=16 * 2**20)


@dataclass(frozen=True)
class CallTurnLayout:
    """How a template renders a call turn after its generation prompt: ``separator`` (the whitespace between
    the name and the arguments; it holds a line break) and ``between`` (the text between two call turns, the
    turn header again, stripped of whitespace; "" when two call turns do not render one after the other).
    ``tools_in_messages``: the template renders the tools a message carries (``message.tools``, GLM-4-9B chat's
    convention) and not the request's top-level ``tools``."""

    separator: str
    between: str = ""
    tools_in_messages: bool = False


def _render(template: Any, messages: list[dict], add_generation_prompt: bool, tools: list | None = None
            ) -> str | None:
    try:
        return template.render({"messages": messages, "tools": tools or [], "bos_token": "", "eos_token": "",
                                "add_generation_prompt": add_generation_prompt})
    except Exception:  # noqa: BLE001 - a template that cannot render the probe has no such layout
        return None


def _after_prompt(text: str | None, prompt: str) -> str | None:
    return text[len(prompt):] if text is not None and prompt and text.startswith(prompt) else None


def call_layout_of(template: Any) -> CallTurnLayout | None:
    """The call-turn layout ``template`` renders, or None.

    Renders a user message with the generation prompt (P), then the same user message followed by an assistant
    turn ``{"metadata": NAME, "content": ARGS}`` (C): the layout exists when C is P followed by NAME, whitespace
    holding a line break, and ARGS (then only whitespace). Two such turns rendered in a row give ``between``.
    Cached per normalised source; never raises."""
    key = template.normalized_source
    hit = _LAYOUT_CACHE.get(key)
    if hit is not MISSING:
        return hit
    found = _learn(template)
    _LAYOUT_CACHE.put(key, found, len(key) + 100)
    return found


def _learn(template: Any) -> CallTurnLayout | None:
    user = {"role": "user", "content": "hi"}

    def turn(name: str) -> dict:
        return {"role": "assistant", "metadata": name, "content": _PROBE_ARGS}

    prompt = _render(template, [user], True)
    if not prompt:
        return None
    one = _after_prompt(_render(template, [user, turn(_PROBE_NAME)], False), prompt)
    if one is None or not one.startswith(_PROBE_NAME):
        return None
    rest = one[len(_PROBE_NAME):]
    sep = rest[:len(rest) - len(rest.lstrip())]
    if "\n" not in sep or not rest[len(sep):].startswith(_PROBE_ARGS) or rest[len(sep) + len(_PROBE_ARGS):].strip():
        return None
    between = ""
    two = _after_prompt(_render(template, [user, turn(_PROBE_NAME), turn(_PROBE_NAME_2)], False), prompt)
    head = _PROBE_NAME + sep + _PROBE_ARGS
    if two is not None and two.startswith(head):
        mid, found, tail = two[len(head):].partition(_PROBE_NAME_2 + sep + _PROBE_ARGS)
        if found and not tail.strip() and mid.strip():
            between = mid.strip()
    probe = [{"type": "function", "function": {"name": _PROBE_NAME, "description": "probe",
                                               "parameters": {"type": "object", "properties": {}}}}]
    in_message = _render(template, [{"role": "system", "content": "", "tools": probe}, user], True)
    top_level = _render(template, [user], True, probe)
    tools_in_messages = (in_message is not None and _PROBE_NAME in in_message
                         and top_level is not None and _PROBE_NAME not in top_level)
    return CallTurnLayout(sep, between, tools_in_messages)


def _regex_literal(text: str) -> str:
    """``text`` as a regex that matches it literally in Python's ``re`` and in llama.cpp's ECMAScript
    ``std::regex`` over UTF-8 bytes: ASCII letters, digits and ``_`` as they are, other ASCII as ``\\xHH``,
    non-ASCII characters as they are (no meaning in either engine)."""
    return "".join(c if (c.isascii() and (c.isalnum() or c == "_")) or not c.isascii() else f"\\x{ord(c):02x}"
                   for c in text)


def build(template: Any, request: Any, generation_prompt: str, layout: CallTurnLayout, *,
          prepared: Any = None) -> Any:
    """The parser (and lazy grammar) of a template with ``layout``, for ``request`` (see module doc). The
    parse starts with the request path's ``generation_prompt``; the grammar starts at a call's name. When the
    template reads tools from a message only (``layout.tools_in_messages``) and no message of the request carries
    them, the prompt renders the request's tools in a first system message, as GLM-4's own server does
    (``process_messages``); else the request path's prompt."""
    tools = foreach_function_indexed(request.tools)
    tools_active = bool(tools) and request.tool_choice != ToolChoice.NONE
    parallel = bool(layout.between) and bool(request.parallel_tool_calls)

    def root(p: Any) -> Any:
        turn = p.gbnf(p.literal(generation_prompt), "")   # parse-only: the prompt already holds it
        if not tools_active:
            return turn + p.content(p.rest())
        sep = p.chars("[ \\t]", 0, -1) + p.literal("\n") + p.space()
        choices = []
        for idx, fn in tools:
            schema = function_parameters_schema(fn)
            choices.append(p.rule(f"tool-{idx}", p.tool(
                p.tool_open(p.tool_name(p.literal(fn["name"])) + sep)
                + p.tool_args(p.schema(p.json(), f"tool-{idx}-schema", schema)))))
        call = p.choice(*choices)
        calls = call + p.zero_or_more(p.space() + p.literal(layout.between) + p.space() + call) if parallel else call
        # text after the calls is content for the parse; the grammar ends with the calls
        after = p.gbnf(p.space() + p.content(p.rest()), "")
        with_calls = p.space() + p.trigger_rule("tool-calls", calls) + after
        if request.tool_choice == ToolChoice.REQUIRED:
            return turn + with_calls
        return turn + p.choice(with_calls, p.content(p.rest()))

    names = "|".join(_regex_literal(fn["name"]) for _, fn in tools)
    prompt = None
    prep = prepared_for(template, request, prepared)
    if layout.tools_in_messages and tools_active and not any(isinstance(m, dict) and m.get("tools")
                                                             for m in prep.messages):
        # the request's tools reach the template as GLM-4's own server passes them: a first system turn holding them
        prompt = render_prompt(prep, messages_override=[{"role": "system", "content": "", "tools": prep.tools}]
                               + list(prep.messages))
    return peg_parser(NAME, root, generation_prompt=generation_prompt, parser_generation_prompt=generation_prompt,
                      prompt=prompt,
                      include=tools_active, lazy=request.tool_choice == ToolChoice.AUTO,
                      trigger=pattern(rf"^\s*((?:{names})[ \t]*\n)"),
                      preserved_tokens=[layout.between] if parallel else [], supports_thinking=False,
                      format="peg-glm4-chat")


__all__ = ["NAME", "CallTurnLayout", "build", "call_layout_of"]
