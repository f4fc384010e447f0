"""The request path: from a chat request to the rendered prompt and the generation prompt.

Follows llama.cpp ``common_chat_templates_apply_jinja`` (analysis notes §14, steps 1-7):

1. choose the template variant (``tool_use`` when tools are given and that variant exists);
2. StepFun templates: trim every message's content, reasoning and typed text parts;
3. convert messages to llama.cpp's canonical OpenAI JSON (``content`` always present, ``reasoning_content`` /
   ``name`` / ``tool_call_id`` / call ``id`` only when non-empty, call arguments as JSON text) and normalise
   string vs typed content by the template's caps;
4. continuation: pop the last message into ``continue_msg``; AUTO resolves to REASONING when that message has
   reasoning and no content, else CONTENT; ``add_generation_prompt`` is then off;
5. message workarounds: ``developer`` → ``system`` (not for ``<|channel|>`` templates), merge a first system
   message into the next one when the template has no system role, ``content: ""`` on tool-call messages,
   string tool arguments → objects when the template reads object arguments;
6. ``extra_context`` = ``datetime`` (``%b %d %Y``) and ``date_string`` (``%d %b %Y``) plus
   ``chat_template_kwargs`` (which may override ``enable_thinking``; ``preserve_reasoning`` and
   ``reasoning_effort`` bind their companion variables at render time);
7. the prompt (a normal render) and the generation prompt (character-level longest common prefix of the
   renders without and with ``add_generation_prompt``; the rest of the second one).

The result, :class:`PreparedRequest`, is llama.cpp's ``generation_params``: what the parser generator and every
special handler consume. Handlers that rewrite messages (GPT-OSS, Ministral 3, DeepSeek V4) call
:func:`render_prompt` / :func:`generation_prompt` with ``messages_override``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ..jinja import llama as _llama
from ..analysis.caps import normalize_messages, probe_caps
from ..analysis.result import Caps
from ..errors import RenderLimitError, RequestError, TemplateRenderError
from ..analysis.generation_prompt import request_extra_context
from ..diff import common_prefix_len
from ..jinja.template import ChatTemplate, chat_globals
from .request import ChatRequest, Continuation

STEPFUN_TRIM_TRIGGER = "You have access to the following functions in JSONSchema format"
"""Source substring that makes llama.cpp trim message text before rendering (StepFun, issue #24181)."""

GPT_OSS_CHANNEL = "<|channel|>"
"""Templates containing this keep the ``developer`` role (GPT-OSS)."""

_WS = " \t\n\r\v\f"


def trim_ws(s: str) -> str:
    """Strip C ``isspace`` characters from both ends (llama.cpp ``trim_whitespace``)."""
    return s.strip(_WS)


# ------------------------------------------------------------------------------------------------ variants


def choose_variant(variants: Mapping[str, str], request: ChatRequest) -> str:
    """Name of the template variant llama.cpp uses for ``request``: ``"tool_use"`` when the request has tools
    and that variant exists, otherwise ``"default"`` (or the only/first variant when there is no default)."""
    if request.tools and "tool_use" in variants:
        return "tool_use"
    if "default" in variants:
        return "default"
    return next(iter(variants)) if variants else "default"


# ------------------------------------------------------------------------------------------------ messages


def _compact_json(value: Any) -> str:
    # nlohmann::json::dump() without indent: no spaces, UTF-8 kept
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _text_of_parts(parts: list[Any], where: str) -> list[dict[str, str]]:
    out = []
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or "type" not in part:
            raise RequestError(f"{where}.content[{j}]", "content part needs a 'type'")
        kind = part["type"]
        if kind not in ("text", "media_marker"):
            raise RequestError(f"{where}.content[{j}].type", f"unsupported content part type {kind!r}")
        text = part.get("text", "")
        if not isinstance(text, str):
            raise RequestError(f"{where}.content[{j}].text", "must be a string")
        out.append({"type": kind, "text": text})
    return out


def concat_content_parts(parts: list[dict[str, str]]) -> str:
    """Join text parts with ``\\n``; no newline next to a ``media_marker`` part (llama.cpp
    ``concat_content_parts``)."""
    text = ""
    last_media = False
    for part in parts:
        kind = part.get("type", "")
        if kind == "text":
            newline = not last_media and bool(text)
            last_media = False
        elif kind == "media_marker":
            newline = False
            last_media = True
        else:
            continue
        if newline:
            text += "\n"
        text += part.get("text", "")
    return text


def canonical_message(m: dict[str, Any], where: str = "message", *, trim: bool = False) -> dict[str, Any]:
    """One OpenAI message as llama.cpp round-trips it (``common_chat_msgs_parse_oaicompat`` then
    ``to_json_oaicompat``): keys ``role``, ``content`` (always; ``""`` for null/empty; typed parts kept as
    ``[{type, text}]`` unless a media marker forces joining), then ``reasoning_content``, ``name``,
    ``tool_call_id`` and ``tool_calls`` only when non-empty; call ``arguments`` become JSON text (objects are
    dumped compactly) and a call ``id`` is kept only when non-empty. ``trim`` applies the StepFun trim.

    Raises :class:`RequestError` naming ``where`` for malformed parts.
    """
    if not isinstance(m, dict) or "role" not in m:
        raise RequestError(where, "message must be an object with a 'role'")
    content = m.get("content")
    reasoning = m.get("reasoning_content") or ""
    if not isinstance(reasoning, str):
        raise RequestError(f"{where}.reasoning_content", "must be a string")
    out: dict[str, Any] = {"role": m["role"]}
    if isinstance(content, list):
        parts = _text_of_parts(content, where)
        if trim:
            parts = [{"type": p["type"], "text": trim_ws(p["text"]) if p["type"] == "text" else p["text"]}
                     for p in parts]
        if not parts:
            out["content"] = ""
        elif any(p["type"] == "media_marker" for p in parts):
            out["content"] = concat_content_parts(parts)
        else:
            out["content"] = parts
    elif isinstance(content, str):
        out["content"] = trim_ws(content) if trim else content
    elif content is None:
        out["content"] = ""
    else:
        raise RequestError(f"{where}.content", "must be a string, a list of content parts, or null")
    if trim:
        reasoning = trim_ws(reasoning)
    if reasoning:
        out["reasoning_content"] = reasoning
    if m.get("name"):
        out["name"] = m["name"]
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    calls = m.get("tool_calls") or []
    if calls:
        out_calls = []
        for j, tc in enumerate(calls):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise RequestError(f"{where}.tool_calls[{j}]", "needs function.name")
            args = fn.get("arguments", "")
            if not isinstance(args, str):
                args = _compact_json(args)
            call: dict[str, Any] = {"type": "function", "function": {"name": fn["name"], "arguments": args}}
            if tc.get("id"):
                call["id"] = tc["id"]
            out_calls.append(call)
        out["tool_calls"] = out_calls
    return out


def canonical_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Tools as llama.cpp re-serialises them (``common_chat_tools_to_json_oaicompat``):
    ``{"type": "function", "function": {"name", "description" ("" when absent), "parameters"}}``.
    ``None`` when there are no tools (the template then sees ``tools`` undefined)."""
    if not tools:
        return None
    out = []
    for t in tools:
        fn = t.get("function") or {}
        params = fn.get("parameters")
        out.append({"type": "function", "function": {
            "name": fn.get("name", ""),
            "description": fn.get("description", "") or "",
            "parameters": copy.deepcopy(params) if params is not None else {},
        }})
    return out


def message_text(msg: dict[str, Any] | None, delimiter: str = "\n\n") -> str:
    """The message's content as text (llama.cpp ``common_chat_msg::render_content``): the string, or the
    text parts joined with ``delimiter`` (default ``"\\n\\n"`` as llama.cpp)."""
    if not msg:
        return ""
    c = msg.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return delimiter.join(p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text")
    return ""


def message_is_empty(msg: dict[str, Any] | None) -> bool:
    """llama.cpp ``common_chat_msg::empty()``: no content, parts, tool calls, reasoning, name or call id."""
    if not msg:
        return True
    return not any(msg.get(k) for k in ("content", "tool_calls", "reasoning_content", "name", "tool_call_id"))


# ------------------------------------------------------------------------------------------------ context


def extra_context(request: ChatRequest) -> dict[str, Any]:
    """``datetime`` / ``date_string`` (the templating clock's, :func:`core.jinja.hf.now`) plus
    ``chat_template_kwargs`` (later keys win), as llama.cpp ``common_chat_extra_context`` + kwargs."""
    return {**request_extra_context(), **(request.chat_template_kwargs or {})}


# ------------------------------------------------------------------------------------------------ prepared


@dataclass
class PreparedRequest:
    """llama.cpp ``generation_params``: the request after steps 1-6, ready to render.

    ``messages``: canonical, caps-normalised, workaround-adjusted messages to render (the continued message
    removed). ``tools``: canonical tools or ``None``. ``continue_msg``: the popped message (canonical form) or
    ``None``. ``continuation``: resolved (never AUTO when a message was popped). ``extra_context``: dict of
    extra template globals. ``request``: the original request; ``template``: the chosen template; ``caps``:
    the template's caps. ``llama_engine``: render as llama.cpp's Jinja engine does (``core.jinja.llama``,
    more lenient than jinja2 on undefined values, ``tojson`` of generators, ``str + none``…) when available;
    False renders as transformers does (:func:`core.jinja.template.apply_template`).
    """

    request: ChatRequest
    template: ChatTemplate
    caps: Caps
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    add_generation_prompt: bool
    enable_thinking: bool
    extra_context: dict[str, Any] = field(default_factory=dict)
    continuation: Continuation = Continuation.NONE
    continue_msg: dict[str, Any] | None = None
    llama_engine: bool = True
    # repair template-default-thinking: render without the enable_thinking global, so the template's own
    # default decides (the request did not set the flag)
    template_default_thinking: bool = False

    @property
    def has_continuation(self) -> bool:
        """True when a final message is continued (llama.cpp ``has_continuation``)."""
        return self.continuation != Continuation.NONE and not message_is_empty(self.continue_msg)

    @property
    def has_tools(self) -> bool:
        """True if the request has tools (after preparation)."""
        return bool(self.tools)

    @property
    def continue_reasoning(self) -> str:
        """``reasoning_content`` of the continued message ("" if none)."""
        return (self.continue_msg or {}).get("reasoning_content", "") or ""

    @property
    def continue_content(self) -> str:
        """Content of the continued message as text (:func:`message_text`; "" if none)."""
        return message_text(self.continue_msg)

    def prefill(self, reasoning_open: str, content_open: str) -> str:
        """The generation prompt of a continuation as a family rebuilds it: ``reasoning_open`` + the continued
        reasoning, then, when the content is continued, ``content_open`` + the continued content."""
        gp = reasoning_open + self.continue_reasoning
        if self.continuation == Continuation.CONTENT:
            gp += content_open + self.continue_content
        return gp


def prepare_request(template: ChatTemplate, request: ChatRequest, *, caps: Caps | None = None) -> PreparedRequest:
    """Apply llama.cpp's request-path steps 2-6 to ``request`` for ``template`` (already the chosen variant,
    see :func:`choose_variant`). ``caps`` defaults to probing the template (:func:`core.analysis.caps.probe_caps`).

    Raises :class:`RequestError` for malformed messages or tool arguments that are not JSON when the template
    needs objects.
    """
    caps = caps or probe_caps(template)
    src = template.source
    trim = STEPFUN_TRIM_TRIGGER in src
    msgs = [canonical_message(m, f"messages[{i}]", trim=trim) for i, m in enumerate(request.messages)]
    msgs = normalize_messages(msgs, caps)
    msgs = [dict(m) for m in msgs]

    add_gp = request.add_generation_prompt
    continuation = request.continue_final_message
    continue_msg = None
    if continuation != Continuation.NONE:
        add_gp = False
        if request.messages:
            msgs.pop()
            # llama.cpp keeps the original (untrimmed, un-normalised) message as continue_msg
            continue_msg = canonical_message(request.messages[-1], f"messages[{len(request.messages) - 1}]")
        if continuation == Continuation.AUTO and request.messages:
            raw = request.messages[-1]
            has_content = bool(raw.get("content"))
            continuation = Continuation.CONTENT
            if (raw.get("reasoning_content") or "") and not has_content:
                continuation = Continuation.REASONING

    if GPT_OSS_CHANNEL not in src:
        for m in msgs:
            if m.get("role") == "developer":
                m["role"] = "system"
    if not caps.supports_system_role and msgs and msgs[0].get("role") == "system":
        first = msgs.pop(0)
        if msgs:
            second = msgs[0]
            second["content"] = _as_text(first.get("content")) + "\n" + _as_text(second.get("content"))
    if caps.supports_tool_calls:
        for m in msgs:
            if "tool_calls" in m and "content" not in m:
                m["content"] = ""
    if caps.supports_object_arguments:
        for i, m in enumerate(msgs):
            for j, tc in enumerate(m.get("tool_calls") or []):
                args = tc.get("function", {}).get("arguments")
                if isinstance(args, str):
                    try:
                        tc["function"]["arguments"] = json.loads(args)
                    except json.JSONDecodeError as e:
                        raise RequestError(f"messages[{i}].tool_calls[{j}].function.arguments",
                                           f"is not valid JSON: {e.msg} at char {e.pos}") from None

    return PreparedRequest(
        request=request, template=template, caps=caps, messages=msgs, tools=canonical_tools(request.tools),
        add_generation_prompt=add_gp, enable_thinking=request.enable_thinking,
        extra_context=extra_context(request), continuation=continuation, continue_msg=continue_msg,
    )


def _as_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return concat_content_parts(content)
    return ""


# ------------------------------------------------------------------------------------------------ rendering


def _render_context(prep: PreparedRequest, additional_context: Mapping[str, Any] | None) -> dict[str, Any]:
    ctx = dict(prep.extra_context)
    if additional_context:
        ctx.update(additional_context)
    if isinstance(ctx.get("preserve_reasoning"), bool):
        on = ctx["preserve_reasoning"]
        for k, v in (("preserve_thinking", on), ("clear_thinking", not on),
                     ("truncate_history_thinking", not on), ("drop_thinking", not on)):
            ctx.setdefault(k, v)
    effort = ctx.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        ctx.setdefault("reasoning_strength", effort)
    return ctx


def render_prompt(prep: PreparedRequest, *, add_generation_prompt: bool | None = None,
                  messages_override: list[dict[str, Any]] | None = None,
                  additional_context: Mapping[str, Any] | None = None) -> str:
    """Render the prepared request (llama.cpp ``common_chat_template_direct_apply_impl``).

    ``add_generation_prompt`` defaults to the prepared value (off for continuations). ``messages_override``
    and ``additional_context`` replace the messages / add context keys, as handlers that rewrite messages need.
    Raises :class:`~core.errors.TemplateRenderError` when the template fails.
    """
    agp = prep.add_generation_prompt if add_generation_prompt is None else add_generation_prompt
    msgs = copy.deepcopy(messages_override if messages_override is not None else prep.messages)
    tools = copy.deepcopy(prep.tools) if prep.tools else None
    extra = _render_context(prep, additional_context)
    ctx = chat_globals(msgs, tools, agp, prep.enable_thinking, extra)
    if prep.template_default_thinking and "enable_thinking" not in extra:
        del ctx["enable_thinking"]
    if not prep.llama_engine:
        return prep.template.render(ctx)
    return _llama.render(prep.template, ctx)


def generation_prompt(prep: PreparedRequest, *, messages_override: list[dict[str, Any]] | None = None,
                      additional_context: Mapping[str, Any] | None = None) -> str:
    """What the template appends for the assistant turn: render without and with ``add_generation_prompt``
    (continuation ignored), return the second render after their character-level longest common prefix
    (llama.cpp ``common_chat_template_generation_prompt_impl``, analysis notes §14). "" when the template
    ignores the flag."""
    kw = dict(messages_override=messages_override, additional_context=additional_context)
    without = render_prompt(prep, add_generation_prompt=False, **kw)
    with_gp = render_prompt(prep, add_generation_prompt=True, **kw)
    return with_gp[common_prefix_len(without, with_gp):]


THINKING_OFF_CONTEXT: Mapping[str, Any] = {"enable_thinking": False, "thinking": False, "thinking_budget": 0}
"""The switches the field's templates read to turn thinking off (Qwen3 / GLM ``enable_thinking``, Granite and
DeepSeek-V3.1 ``thinking``, Seed-OSS ``thinking_budget`` 0), set together by :func:`thinking_switched_on`."""


def thinking_switched_on(prep: PreparedRequest) -> bool:
    """True when the template has a thinking switch and ``prep`` leaves it on: the prompt rendered for the
    request differs from the prompt rendered with every switch of :data:`THINKING_OFF_CONTEXT` off (Qwen3 with
    ``enable_thinking`` true, Seed-OSS without a budget of 0, Granite with ``thinking`` true). A template that
    ignores the switches, or a request that turns thinking off, gives False; so does a template that fails to
    render with the switches off. A render stopped by a limit raises: the answer would depend on the machine's
    load, and a silent False would change the parse without a word."""
    try:
        on = render_prompt(prep)
        off = render_prompt(replace(prep, enable_thinking=False), additional_context=THINKING_OFF_CONTEXT)
    except RenderLimitError:
        raise
    except TemplateRenderError:
        return False
    return on != off


def continuation_generation_prompt(generation_prompt_: str, prep: PreparedRequest, reasoning_start: str,
                                   reasoning_end: str) -> str:
    """The parse-time generation prompt of a continuation for the auto-parser (llama.cpp
    ``peg_generator::generate_parser``): the generation prompt cut before ``reasoning_start`` + the start +
    the continued reasoning (+ ``reasoning_end`` for CONTENT), then for CONTENT the continued content.
    Returns ``generation_prompt_`` unchanged without a continuation."""
    if not prep.has_continuation:
        return generation_prompt_
    gp = generation_prompt_
    content_mode = prep.continuation == Continuation.CONTENT
    if reasoning_start:
        idx = gp.find(reasoning_start)
        gp = gp[:idx] if idx >= 0 else gp
        gp += reasoning_start + prep.continue_reasoning
        if content_mode:
            gp += reasoning_end
    if content_mode:
        gp += prep.continue_content
    return gp
