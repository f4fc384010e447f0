"""Result dataclasses of the differential analysis, one struct per concern.

Mirrors the split of llama.cpp's ``common/chat-auto-parser.h`` (``jinja_caps``, ``analyze_reasoning``,
``analyze_content``, ``analyze_tools`` with ``format`` / ``function`` / ``arguments`` / ``call_id``).
``to_json()`` produces exactly the field names and mode values of ``reference/analysis.jsonl``; a few
llama.cpp fields that the reference does not print (``openai_wrapper_trigger``,
``tolerate_intertag_whitespace``, ``additional_stops``) are emitted as extra keys.
``from_json()`` is the inverse, so a parser can be built from a stored (or reference) analysis.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from dataclasses import dataclass, field
from typing import Any


class ReasoningMode(str, enum.Enum):
    """How reasoning is marked. ``TAG_BASED`` may have an empty start (delimiter style)."""

    NONE = "NONE"
    TAG_BASED = "TAG_BASED"
    TOOLS_ONLY = "TOOLS_ONLY"


class ContentMode(str, enum.Enum):
    """How content is marked."""

    PLAIN = "PLAIN"
    ALWAYS_WRAPPED = "ALWAYS_WRAPPED"
    WRAPPED_WITH_REASONING = "WRAPPED_WITH_REASONING"


class ToolFormat(str, enum.Enum):
    """How tool calls are written. ``PYTHONIC`` (``name(arg="v", n=1)`` calls) is found only at ``improved``
    fidelity (:mod:`core.analysis.fidelity`, improvement ``pythonic-calls``); llama.cpp reads such templates
    as ``TAG_WITH_TAGGED``."""

    NONE = "NONE"
    JSON_NATIVE = "JSON_NATIVE"
    TAG_WITH_JSON = "TAG_WITH_JSON"
    TAG_WITH_TAGGED = "TAG_WITH_TAGGED"
    PYTHONIC = "PYTHONIC"


class CallIdPosition(str, enum.Enum):
    """Where a call id is written relative to the function name and arguments."""

    NONE = "NONE"
    PRE_FUNC_NAME = "PRE_FUNC_NAME"
    BETWEEN_FUNC_AND_ARGS = "BETWEEN_FUNC_AND_ARGS"
    POST_ARGS = "POST_ARGS"


@dataclass
class Caps:
    """Template capabilities found by probing renders (llama.cpp ``jinja/caps.cpp``)."""

    supports_object_arguments: bool = False
    supports_parallel_tool_calls: bool = True
    supports_preserve_reasoning: bool = False
    supports_reasoning_effort: bool = False
    supports_string_content: bool = True
    supports_system_role: bool = True
    supports_tool_calls: bool = True
    supports_tools: bool = True
    supports_typed_content: bool = False


@dataclass
class ReasoningAnalysis:
    """Reasoning markers. Markers keep surrounding whitespace (e.g. ``"<think>\\n"``)."""

    mode: ReasoningMode = ReasoningMode.NONE
    start: str = ""
    end: str = ""


@dataclass
class ContentAnalysis:
    """Content markers (``ALWAYS_WRAPPED`` when start/end wrap every answer)."""

    mode: ContentMode = ContentMode.PLAIN
    start: str = ""
    end: str = ""
    requires_nonnull_content: bool = False

    def is_always_wrapped(self) -> bool:
        """True if mode is ALWAYS_WRAPPED and both markers are non-empty (llama.cpp
        ``analyze_content::is_always_wrapped``).
        """
        return self.mode == ContentMode.ALWAYS_WRAPPED and bool(self.start) and bool(self.end)


@dataclass
class ToolFormatAnalysis:
    """Tool-call container markers and, for JSON_NATIVE, the JSON field mapping."""

    mode: ToolFormat = ToolFormat.NONE
    section_start: str = ""
    section_end: str = ""
    per_call_start: str = ""
    per_call_end: str = ""
    fun_name_is_key: bool = False
    tools_array_wrapped: bool = False
    function_field: str = "function"
    name_field: str = "name"
    args_field: str = "arguments"
    id_field: str = ""
    gen_id_field: str = ""
    parameter_order: list[str] = field(default_factory=list)
    openai_wrapper_trigger: bool = False


@dataclass
class ToolFunctionAnalysis:
    """Markers around one function name and the close of one call."""

    name_prefix: str = ""
    name_suffix: str = ""
    args_separator: str = ""
    close: str = ""


@dataclass
class ToolArgumentsAnalysis:
    """Markers around arguments (TAG_WITH_TAGGED: around each name and value)."""

    start: str = ""
    end: str = ""
    name_prefix: str = ""
    name_suffix: str = ""
    value_prefix: str = ""
    value_suffix: str = ""
    separator: str = ""
    tolerate_intertag_whitespace: bool = False


@dataclass
class ToolCallIdAnalysis:
    """Position and markers of the call id."""

    pos: CallIdPosition = CallIdPosition.NONE
    prefix: str = ""
    suffix: str = ""


@dataclass
class ToolsAnalysis:
    """Everything about tool calls. ``inferred_from``: "" when the format was found by diffing rendered calls
    (always, at llama.cpp fidelity), ``"instructions"`` when it was read from the tool instructions the template
    or the request writes (improvement ``instruction-call-format``, :mod:`core.analysis.instructions`); only
    a non-empty value is written by ``to_json()``."""

    format: ToolFormatAnalysis = field(default_factory=ToolFormatAnalysis)
    function: ToolFunctionAnalysis = field(default_factory=ToolFunctionAnalysis)
    arguments: ToolArgumentsAnalysis = field(default_factory=ToolArgumentsAnalysis)
    call_id: ToolCallIdAnalysis = field(default_factory=ToolCallIdAnalysis)
    inferred_from: str = ""


@dataclass
class TemplateAnalysis:
    """The whole analysis of one template (llama.cpp ``autoparser`` struct).

    ``to_json()`` gives the ``analysis`` object of ``reference/analysis.jsonl``.
    """

    caps: Caps = field(default_factory=Caps)
    user_start: str = ""
    assistant_start: str = ""
    reasoning: ReasoningAnalysis = field(default_factory=ReasoningAnalysis)
    content: ContentAnalysis = field(default_factory=ContentAnalysis)
    tools: ToolsAnalysis = field(default_factory=ToolsAnalysis)
    preserved_tokens: list[str] = field(default_factory=list)
    additional_stops: list[str] = field(default_factory=list)
    analysis_complete: bool = False

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON dict with the reference's field names; enums become their names. ``tools.inferred_from``
        appears only when set (llama.cpp fidelity output keeps the reference's shape)."""
        out = _to_plain(self)
        if not out["tools"].get("inferred_from"):
            out["tools"].pop("inferred_from", None)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TemplateAnalysis":
        """Build from a dict shaped like ``to_json()`` or reference ``analysis``; unknown keys are
        ignored, missing keys keep their defaults. Raises ``ValueError`` on an unknown mode value."""
        return _from_plain(cls, data)

    def copy(self) -> "TemplateAnalysis":
        """Deep copy (analysis results are mutated by workarounds and overrides)."""
        return _from_plain(TemplateAnalysis, _to_plain(self))


def _to_plain(obj: Any) -> Any:
    if isinstance(obj, enum.Enum):  # before str: the modes are str enums
        return obj.value
    if isinstance(obj, (str, bool, int, float)) or obj is None:
        return obj
    if isinstance(obj, list):
        return [_to_plain(x) for x in obj]
    if dataclasses.is_dataclass(obj):
        return {name: _to_plain(getattr(obj, name)) for name, _, _ in _field_kinds(type(obj))}
    return obj


_FIELD_KINDS: dict[type, tuple[tuple[str, str, Any], ...]] = {}


def _field_kinds(cls: type) -> tuple[tuple[str, str, Any], ...]:
    """``(name, kind, type)`` per field of dataclass ``cls``: kind "dataclass", "enum" or "plain". Resolved
    once per class (``typing.get_type_hints`` evaluates every annotation string and costs ~0.1 ms)."""
    kinds = _FIELD_KINDS.get(cls)
    if kinds is None:
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            if isinstance(hint, type) and dataclasses.is_dataclass(hint):
                out.append((f.name, "dataclass", hint))
            elif isinstance(hint, type) and issubclass(hint, enum.Enum):
                out.append((f.name, "enum", hint))
            else:
                out.append((f.name, "plain", hint))
        kinds = _FIELD_KINDS[cls] = tuple(out)
    return kinds


def _from_plain(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for name, kind, hint in _field_kinds(cls):
        if name not in data:
            continue
        value = data[name]
        if kind == "dataclass":
            kwargs[name] = _from_plain(hint, value or {})
        elif kind == "enum":
            kwargs[name] = hint(value)
        elif isinstance(value, list):
            kwargs[name] = list(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)
