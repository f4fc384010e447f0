"""A chat request: what the parser generator needs to know besides the template analysis.

Field names and values follow OpenAI / llama.cpp and ``reference/cases.jsonl``: ``messages``, ``tools``,
``tool_choice`` (auto / required / none), ``parallel_tool_calls``, ``reasoning_format``
(none / auto / deepseek / deepseek-legacy), ``enable_thinking``, ``add_generation_prompt``,
``continue_final_message`` (llama-server b11549: true / false / null / "content" / "reasoning_content"; also
none / auto / reasoning), ``json_schema`` (response format),
``chat_template_kwargs``.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import RequestError


class ToolChoice(str, enum.Enum):
    """OpenAI ``tool_choice``: ``auto`` (the model may call tools), ``required`` (it must call one),
    ``none`` (the parser reads no tool calls and the grammar allows none).
    """
    AUTO = "auto"
    REQUIRED = "required"
    NONE = "none"


class ReasoningFormat(str, enum.Enum):
    """llama.cpp ``reasoning_format``: ``none`` keeps reasoning in the content; ``auto`` / ``deepseek`` /
    ``deepseek-legacy`` extract it into ``reasoning_content`` (the parsers only distinguish none from the rest).
    """
    NONE = "none"
    AUTO = "auto"
    DEEPSEEK = "deepseek"
    DEEPSEEK_LEGACY = "deepseek-legacy"


class Continuation(str, enum.Enum):
    """``continue_final_message``: ``none``; ``reasoning`` / ``content`` continue the last message's reasoning or
    content; ``auto`` resolves to ``reasoning`` when that message has reasoning and no content, else ``content``.
    """
    NONE = "none"
    AUTO = "auto"
    REASONING = "reasoning"
    CONTENT = "content"


def _flag(data: dict[str, Any], name: str, default: bool) -> bool:
    """A boolean field: missing or null -> ``default``; anything but true/false -> :class:`RequestError`
    (``"false"`` must not silently mean True)."""
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise RequestError(name, f"must be true or false, got {value!r}")
    return value


#: deepest nesting (objects/arrays) accepted in a tool's parameters or the response-format schema; deeper
#: schemas would exhaust the recursion of the schema-to-grammar conversion.
MAX_SCHEMA_DEPTH = 200
#: most properties one object schema may list: the grammar of an object's optional properties (llama.cpp's
#: converter chains each to the rest) grows with the square of their count and recurses once per property.
MAX_SCHEMA_PROPERTIES = 500


def _check_depth(value: Any, name: str, limit: int = MAX_SCHEMA_DEPTH) -> None:
    """Raise :class:`RequestError` naming ``name`` when ``value`` nests dicts/lists deeper than ``limit``
    or an object schema lists more than :data:`MAX_SCHEMA_PROPERTIES` properties (iterative: safe on any
    depth)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children = v.values()
            props = v.get("properties")
            if isinstance(props, dict) and len(props) > MAX_SCHEMA_PROPERTIES:
                raise RequestError(name, f"an object schema lists {len(props)} properties, more than the "
                                         f"{MAX_SCHEMA_PROPERTIES} supported (limit: schema properties)")
        elif isinstance(v, list):
            children = v
        else:
            continue
        if d > limit:
            raise RequestError(name, f"nested too deeply (more than {limit} levels)")
        stack.extend((c, d + 1) for c in children)


def _check_refs(schema: dict[str, Any], name: str, prefix: str = "") -> None:
    """Raise :class:`RequestError` when a ``$ref`` in ``schema`` does not resolve (llama.cpp's schema reader
    throws on it, so the request fails there; it must not become "any value" here)."""
    from ..grammar.json_schema import check_refs  # local: keeps request importable without the grammar part

    problem = check_refs(schema)
    if problem is not None:
        raise RequestError(name, f"{prefix}{problem}")


# llama-server's wire values (common_chat_continuation_parse at b11549), then this project's own spellings,
# which the reference cases use (null / auto / reasoning / content)
_CONTINUATION_WIRE: dict[Any, Continuation] = {
    "content": Continuation.CONTENT, "reasoning_content": Continuation.REASONING,
    "none": Continuation.NONE, "auto": Continuation.AUTO, "reasoning": Continuation.REASONING,
}


def _shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` clipped to ``limit`` characters: a hostile request value stays a short error line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def continuation_from_wire(value: Any) -> Continuation:
    """``continue_final_message`` as llama-server b11549 reads it: null or ``false`` -> none, ``true`` -> auto,
    ``"content"`` / ``"reasoning_content"``; also this project's ``"none"`` / ``"auto"`` / ``"reasoning"``.
    Anything else (a number, another string, a list) is a :class:`RequestError`."""
    if isinstance(value, Continuation):
        return value
    if value is None or value is False:
        return Continuation.NONE
    if value is True:
        return Continuation.AUTO
    if isinstance(value, str) and value in _CONTINUATION_WIRE:
        return _CONTINUATION_WIRE[value]
    raise RequestError("continue_final_message", f"unknown value {_shown(value)} (allowed: true, false, null, "
                       '"content", "reasoning_content"; also "none", "auto", "reasoning")')


def _enum(cls: type[enum.Enum], value: Any, name: str) -> Any:
    if isinstance(value, cls):
        return value
    if cls is Continuation:
        return continuation_from_wire(value)
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)  # type: ignore[attr-defined]
        raise RequestError(name, f"unknown value {_shown(value)} (allowed: {allowed})") from None


@dataclass
class ChatRequest:
    """Inputs of one request. Build with :meth:`from_dict` to get validation.

    ``messages``/``tools`` are OpenAI-shaped lists of dicts (``tools`` may be empty).
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: ToolChoice = ToolChoice.AUTO
    parallel_tool_calls: bool = False
    reasoning_format: ReasoningFormat = ReasoningFormat.AUTO
    enable_thinking: bool = True
    add_generation_prompt: bool = True
    continue_final_message: Continuation = Continuation.NONE
    json_schema: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # False when the request did not say (``enable_thinking`` missing or null): llama.cpp renders with true all
    # the same; repair template-default-thinking renders with the template's own default instead
    enable_thinking_given: bool = True

    def to_row(self) -> dict[str, Any]:
        """The request keys of a ``reference/cases.jsonl`` row, which :meth:`from_dict` reads back (enums as
        their values, no tools and no continuation as ``None``; ``enable_thinking`` ``None`` when the request left it
        unset; ``chat_template_kwargs`` only when there are some)."""
        def val(v: Any) -> Any:
            return v.value if isinstance(v, enum.Enum) else v
        cont = val(self.continue_final_message)
        row = {"messages": self.messages, "tools": self.tools or None, "tool_choice": val(self.tool_choice),
               "parallel_tool_calls": self.parallel_tool_calls, "reasoning_format": val(self.reasoning_format),
               "enable_thinking": self.enable_thinking if self.enable_thinking_given else None,
               "add_generation_prompt": self.add_generation_prompt,
               "continue_final_message": cont if cont not in ("", "none") else None,
               "json_schema": self.json_schema}
        if self.chat_template_kwargs:  # a reference row has none; a request edit or reproducer must keep them
            row["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        return row

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ChatRequest":
        """Build and validate from a dict shaped like a ``reference/cases.jsonl`` row (extra keys such as
        ``id``/``input``/``expect`` are ignored). Raises :class:`~core.errors.RequestError` naming the field."""
        if not isinstance(data, dict):
            raise RequestError("request", f"expected a JSON object, got {type(data).__name__}")
        messages = data.get("messages") or []
        tools = data.get("tools") or []
        if not isinstance(messages, list):
            raise RequestError("messages", "must be a list of message objects")
        if not isinstance(tools, list):
            raise RequestError("tools", "must be a list of tool objects")
        for i, m in enumerate(messages):
            validate_message(m, f"messages[{i}]")
        for i, t in enumerate(tools):
            validate_tool(t, f"tools[{i}]")
        schema = data.get("json_schema")
        if schema is not None and not isinstance(schema, dict):
            raise RequestError("json_schema", "must be a JSON object (a JSON schema) or null")
        if schema is not None:
            _check_depth(schema, "json_schema")
            _check_refs(schema, "json_schema")
        kwargs = data.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise RequestError("chat_template_kwargs", "must be a JSON object")
        enable_thinking = _flag(data, "enable_thinking", True)
        # llama.cpp's server lets the template kwarg decide: a boolean `enable_thinking` there overrides the
        # request's flag for the parser too (else the render closes the reasoning the parser expects open), a
        # string is refused, any other value is passed to the template only (server-common.cpp).
        kwarg = kwargs.get("enable_thinking")
        if isinstance(kwarg, bool):
            enable_thinking = kwarg
        elif isinstance(kwarg, str):
            raise RequestError("chat_template_kwargs.enable_thinking", f"must be true or false, got {kwarg!r}")
        return cls(
            messages=messages,
            tools=tools,
            tool_choice=_enum(ToolChoice, data.get("tool_choice", "auto") or "auto", "tool_choice"),
            parallel_tool_calls=_flag(data, "parallel_tool_calls", False),
            reasoning_format=_enum(ReasoningFormat, data.get("reasoning_format", "auto") or "auto",
                                   "reasoning_format"),
            enable_thinking=enable_thinking,
            add_generation_prompt=_flag(data, "add_generation_prompt", True),
            continue_final_message=_enum(Continuation, data.get("continue_final_message"),
                                         "continue_final_message"),
            json_schema=schema,
            chat_template_kwargs=kwargs,
            enable_thinking_given=data.get("enable_thinking") is not None or isinstance(kwarg, bool),
        )

    def tool_names(self) -> list[str]:
        """Function names of ``tools``, in order."""
        return [t["function"]["name"] for t in self.tools]


_ROLES = {"system", "developer", "user", "assistant", "tool"}


def validate_message(m: Any, where: str) -> None:
    """Check one OpenAI message; raises :class:`RequestError` naming ``where`` (e.g. ``messages[2]``)."""
    if not isinstance(m, dict):
        raise RequestError(where, "must be an object with 'role' and 'content'")
    role = m.get("role")
    if role is None:
        raise RequestError(where, "missing 'role'")
    if role not in _ROLES:
        raise RequestError(f"{where}.role", f"unknown role {role!r} (allowed: {', '.join(sorted(_ROLES))})")
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise RequestError(f"{where}.content", "must be a string, a list of content parts, or null")
    calls = m.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise RequestError(f"{where}.tool_calls", "must be a list of tool calls or null")
    for j, tc in enumerate(calls or []):
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise RequestError(f"{where}.tool_calls[{j}]", "needs function.name")
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                json.loads(args)
            except json.JSONDecodeError as e:
                raise RequestError(f"{where}.tool_calls[{j}].function.arguments",
                                   f"is not valid JSON: {e.msg} at char {e.pos}") from None
        elif args is not None and not isinstance(args, dict):
            raise RequestError(f"{where}.tool_calls[{j}].function.arguments", "must be a JSON string or object")


def validate_tool(t: Any, where: str) -> None:
    """Check one OpenAI tool definition (``{"type": "function", "function": {name, parameters}}``)."""
    if not isinstance(t, dict) or not isinstance(t.get("function"), dict):
        raise RequestError(where, "must be {'type': 'function', 'function': {...}}")
    if t.get("type", "function") != "function":  # llama.cpp: "Unsupported tool type"
        raise RequestError(f"{where}.type", f"unsupported tool type {t.get('type')!r} (only 'function')")
    fn = t["function"]
    if not isinstance(fn.get("name"), str) or not fn["name"]:
        raise RequestError(f"{where}.function.name", "missing or empty")
    params = fn.get("parameters")
    if params is None:
        raise RequestError(f"{where}.function.parameters", "missing (use {'type': 'object', 'properties': {}})")
    if not isinstance(params, dict):
        raise RequestError(f"{where}.function.parameters", "must be a JSON schema object")
    _check_depth(params, f"{where}.function.parameters")
    _check_refs(params, f"{where}.function.parameters", f"tool {fn['name']!r}: ")
