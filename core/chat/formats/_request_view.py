"""The request as the special families see it, and the prompt they render (docs/engine.md).

llama.cpp resolves a request before it calls a family's builder (``common_chat_templates_apply_jinja``):
:func:`request_view` does the same (``enable_thinking`` overridable by ``chat_template_kwargs``, a continuation
``AUTO`` resolved), and :class:`PromptContext` renders the request through the request path's prepared request
for the families that rewrite messages before rendering. :func:`param_nodes` gives a tool's top-level
parameters as parsed schema nodes (llama.cpp ``foreach_parameter``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from ...grammar.json_schema import SchemaNode, may_be_string, schema_from_json_lenient, value_types
from ..repairs import NULLABLE_NULL, TAG_ATTRIBUTE_SPACE, TAG_ATTRIBUTE_SPACES
from ..request import ChatRequest, Continuation, ReasoningFormat, ToolChoice
from .. import prompt as _prompt
from ...jinja.template import apply_template


@dataclass
class ToolSpec:
    """One function tool of the request: ``name``, ``parameters`` (a JSON schema object, ``{"type": "object",
    "properties": {}}`` when absent or empty, as llama.cpp ``common_chat_tool_parameters``)."""

    name: str
    parameters: dict[str, Any]
    index: int = 0   # position in the request's ``tools`` (b11549 names grammar rules ``tool-<index>``)


def function_tools(tools: Iterable[dict[str, Any]] | None) -> list[ToolSpec]:
    """The function tools of an OpenAI ``tools`` list (others skipped, as llama.cpp ``foreach_function``)."""
    out = []
    for i, t in enumerate(tools or []):
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("function"), dict):
            continue
        fn = t["function"]
        params = fn.get("parameters")
        if not isinstance(params, dict) or not params:
            params = {"type": "object", "properties": {}}
        out.append(ToolSpec(str(fn.get("name", "")), params, i))
    return out


@dataclass
class RequestView:
    """What the handlers read from a :class:`ChatRequest`, resolved as llama.cpp's request path does."""

    tools: list[ToolSpec]
    tool_choice: ToolChoice
    parallel: bool
    extract_reasoning: bool
    enable_thinking: bool
    json_schema: dict[str, Any] | None
    continuation: Continuation  # NONE, REASONING or CONTENT (AUTO resolved)
    continue_msg: dict[str, Any] | None

    @property
    def has_tools(self) -> bool:
        """True if the request has function tools."""
        return bool(self.tools)

    @property
    def tools_active(self) -> bool:
        """Tools given and ``tool_choice`` is not none."""
        return bool(self.tools) and self.tool_choice != ToolChoice.NONE

    @property
    def required(self) -> bool:
        """True if ``tool_choice`` is ``required``."""
        return self.tool_choice == ToolChoice.REQUIRED

    @property
    def has_schema(self) -> bool:
        """True if a response-format JSON schema (a dict) is given."""
        return isinstance(self.json_schema, dict)

    @property
    def has_continuation(self) -> bool:
        """True if the final message is continued (``continuation`` is not NONE)."""
        return self.continuation != Continuation.NONE

    def continue_reasoning(self) -> str:
        """``reasoning_content`` of the continued message ("" if none or not a string)."""
        m = self.continue_msg or {}
        r = m.get("reasoning_content")
        return r if isinstance(r, str) else ""

    def continue_content(self) -> str:
        """Content of the continued message as text (:func:`render_content`; "" if none)."""
        return render_content((self.continue_msg or {}).get("content"))

    def prefill(self, reasoning_open: str, content_open: str) -> str:
        """The generation prompt of a continuation as the handlers rebuild it: ``reasoning_open`` + the continued
        reasoning, then, when the content is continued, ``content_open`` + the continued content."""
        gp = reasoning_open + self.continue_reasoning()
        if self.continuation == Continuation.CONTENT:
            gp += content_open + self.continue_content()
        return gp


def render_content(content: Any) -> str:
    """A message's content as text: a string as is, typed parts concatenated (llama.cpp ``render_content``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def request_view(request: ChatRequest) -> RequestView:
    """Resolve the request the way llama.cpp's ``common_chat_templates_apply_jinja`` does before calling a
    handler: ``enable_thinking`` overridable by ``chat_template_kwargs``; continuation AUTO → REASONING when
    the last message has reasoning and no content, else CONTENT."""
    cont = request.continue_final_message
    msg = request.messages[-1] if (cont != Continuation.NONE and request.messages) else None
    if cont == Continuation.AUTO:
        cont = Continuation.CONTENT
        if msg is not None:
            r = msg.get("reasoning_content")
            c = msg.get("content")
            if isinstance(r, str) and r and not c:
                cont = Continuation.REASONING
    enable_thinking = request.enable_thinking
    kw = request.chat_template_kwargs or {}
    if "enable_thinking" in kw:
        v = kw["enable_thinking"]
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except ValueError:
                pass
        enable_thinking = bool(v)
    return RequestView(
        tools=function_tools(request.tools),
        tool_choice=request.tool_choice,
        parallel=request.parallel_tool_calls,
        extract_reasoning=request.reasoning_format != ReasoningFormat.NONE,
        enable_thinking=enable_thinking,
        json_schema=request.json_schema if isinstance(request.json_schema, dict) else None,
        continuation=cont,
        continue_msg=msg,
    )


class PromptContext:
    """Renders the request for handlers that need the prompt itself (llama.cpp handlers call
    ``common_chat_template_direct_apply_impl`` / ``…generation_prompt_impl``, sometimes with rewritten messages).

    Uses the request path's :class:`core.chat.prompt.PreparedRequest` (``prepared``, or prepared here) so the
    messages are normalised exactly as for the real prompt; if that is unavailable it renders the raw messages
    with :func:`core.jinja.template.apply_template`. ``messages`` are the messages to render (a continued last
    message removed). Rendering failures give "" (a handler must not fail because of them).
    """

    def __init__(self, template: Any, request: ChatRequest, prepared: Any = None):
        self.template = template
        self.request = request
        self.prep = prepared
        self._prompt_mod: Any = None
        try:
            self._prompt_mod = _prompt
            if self.prep is None:
                self.prep = _prompt.prepare_request(template, request)
        except Exception:  # noqa: BLE001 - request path unavailable or failing: plain rendering below
            self.prep = None
        if self.prep is not None:
            self.messages: list[dict[str, Any]] = list(self.prep.messages)
        else:
            view = request_view(request)
            self.messages = list(request.messages[:-1] if view.has_continuation else request.messages)

    def render(self, add_generation_prompt: bool, messages: list[dict[str, Any]] | None = None) -> str:
        """The prompt for ``messages`` (default: the context's ``messages``), with or without the generation
        prompt; "" if rendering fails (llama.cpp ``common_chat_template_direct_apply_impl``).
        """
        msgs = self.messages if messages is None else messages
        try:
            if self.prep is not None:
                return self._prompt_mod.render_prompt(self.prep, add_generation_prompt=add_generation_prompt,
                                                      messages_override=msgs)

            view = request_view(self.request)
            return apply_template(self.template, msgs, self.request.tools or None, add_generation_prompt,
                                  view.enable_thinking, dict(self.request.chat_template_kwargs or {}))
        except Exception:  # noqa: BLE001
            return ""

    @property
    def add_generation_prompt(self) -> bool:
        """Whether the real prompt ends with the generation prompt (False when the final message is continued)."""
        if self.prep is not None:
            return bool(self.prep.add_generation_prompt)
        return self.request.add_generation_prompt and request_view(self.request).continuation == Continuation.NONE


def param_nodes(spec: ToolSpec) -> list[tuple[str, SchemaNode, bool]]:
    """``(name, schema node, required)`` of a tool's top-level parameters in schema order (llama.cpp
    ``foreach_parameter``: nothing unless the parameters schema is an object)."""
    root = schema_from_json_lenient(spec.parameters)
    return [(prop.name, prop.schema, bool(prop.required)) for prop in getattr(root, "properties", None) or []]


def attribute_tag(p: Any, element: str, attribute: str) -> Any:
    """``ELEMENT ATTRIBUTE="`` (``<param name="``) as the template writes it; with repair ``tag-attribute-space``
    also with the space left out or written as the byte-level tokenizer's space mark ``Ġ`` (tried after the
    template's spelling, widened once the tree is built: the grammar stays llama.cpp's)."""
    tag = p.literal(f'{element} {attribute}="')
    if TAG_ATTRIBUTE_SPACE in p.repairs:
        p.late.append(lambda: p.widen_late(tag, TAG_ATTRIBUTE_SPACE, lambda _: p.choice(*(
            p.literal(f'{element}{space}{attribute}="') for space in TAG_ATTRIBUTE_SPACES))))
    return tag


def string_or_json_params(p: Any, spec: ToolSpec, param_open: str, param_end: str, string_value: Any) -> Any:
    """The parameters of one call written ``PARAM_OPEN name="K">VALUE PARAM_END``, in any order with optional
    space after each (llama.cpp's MiniCPM5 and Muse Glimmer): ``string_value`` (which reads its own close) for a
    parameter that may be a string, else JSON checked against its schema. Repair ``nullable-null``: for a
    parameter that may also be null, the text ``null`` alone up to ``param_end`` is JSON null (tried first,
    widened once the tree is built: the grammar stays llama.cpp's)."""
    def named(pname: str) -> Any:
        return attribute_tag(p, param_open, "name") + p.tool_arg_name(p.literal(pname)) + p.literal('">')

    arg_rules = []
    for j, (pname, node, _) in enumerate(param_nodes(spec)):
        if may_be_string(node):
            value = string_value
        else:
            value = (p.tool_arg_json_value(p.schema(p.json(), f"tool-{spec.index}-arg-{j}-schema", node))
                     + p.tool_arg_close(p.literal(param_end)))
        arg = p.tool_arg(p.tool_arg_open(named(pname)) + value)
        if may_be_string(node) and NULLABLE_NULL in p.repairs and "null" in value_types(node):
            p.late.append(lambda arg=arg, pname=pname: p.widen_late(arg, NULLABLE_NULL, lambda _: p.tool_arg(
                p.tool_arg_open(named(pname)) + p.tool_arg_json_value(p.literal("null"))
                + p.tool_arg_close(p.literal(param_end))), first=True))
        arg_rules.append(arg)
    return p.zero_or_more(p.choice(*arg_rules) + p.space()) if arg_rules else p.eps()
