"""Template capability detection by instrumented rendering, and capability-driven message normalisation.

Follows llama.cpp ``common/jinja/caps.cpp`` (``caps_get``) and the usage statistics of its Jinja engine
(``common/jinja/runtime.cpp`` / ``value.cpp``, analysis notes §3): every probe renders the template with
fixture inputs whose values *record how the template uses them*, then reads those records.

llama.cpp's engine marks a value "used" when the template evaluates it, reads a member or an index of it
(container and result both), calls a filter / method / test on it (the name goes into the value's ``ops``),
iterates it with ``for`` (op ``array_access`` / ``object_access``) or passes it to ``tojson`` / ``string``
(which mark every descendant). jinja2 has no such hook, so this module reproduces it with:

* input values wrapped in :class:`TrackedDict` / :class:`TrackedList` / :class:`TrackedStr` — subclasses of
  the plain types, so rendering, ``tojson``, ``is string`` / ``is mapping``, ``in`` and printing behave
  exactly as with plain values; they only record ``for`` iteration and Python-level reads of strings;
* a tracking copy of the project's sandbox environment (same class, filters, tests and globals as
  :mod:`core.templating`) whose ``getattr`` / ``getitem`` record member and index access, whose filters and
  tests record their name on their input, and whose method calls on tracked values run unrecorded (as in
  llama.cpp, where a builtin's internals do not count as template reads).

Public API: :func:`probe_caps` and :func:`normalize_messages`.
"""

from __future__ import annotations

import copy
import functools
import inspect
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import jinja2
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils

from .. import templating as _templating
from ..templating import ChatTemplate
from .result import Caps

__all__ = [
    "Caps",
    "ProbeResult",
    "TrackedDict",
    "TrackedList",
    "TrackedStr",
    "UsageRecorder",
    "normalize_messages",
    "probe_caps",
    "render_tracked",
]

# ---------------------------------------------------------------------------------------------------------
# usage statistics
# ---------------------------------------------------------------------------------------------------------


@dataclass
class ValueStats:
    """Usage of one input value: ``used`` and the set of operation names (``ops``) applied to it."""

    used: bool = False
    ops: set[str] = field(default_factory=set)


class UsageRecorder:
    """Collects :class:`ValueStats` per tracked value (keyed by object identity) during one render."""

    def __init__(self) -> None:
        self._stats: dict[int, ValueStats] = {}
        self._keep: list[Any] = []  # keeps tracked objects alive so ids stay unique
        self.suppressed = 0

    def wrap(self, value: Any) -> Any:
        """Deep copy of a JSON-like ``value`` made of tracked containers and strings (other scalars as is)."""
        if isinstance(value, dict):
            out: Any = TrackedDict((k, self.wrap(v)) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            out = TrackedList(self.wrap(v) for v in value)
        elif isinstance(value, str):
            out = TrackedStr(value)
        else:
            return value
        self._keep.append(out)
        self._stats[id(out)] = ValueStats()
        return out

    def stats(self, value: Any) -> ValueStats:
        """Stats of a tracked value (a fresh, unused record for anything untracked)."""
        return self._stats.get(id(value)) or ValueStats()

    def used(self, value: Any) -> bool:
        return self.stats(value).used

    def has_op(self, value: Any, op: str) -> bool:
        return op in self.stats(value).ops

    def mark(self, value: Any, op: str | None = None, deep: bool = False) -> None:
        """Mark ``value`` used (adding ``op`` to its ops). ``deep`` also marks every tracked value inside
        it, looking through untracked containers too (``dict(a=tracked)|tojson`` marks ``tracked``)."""
        st = self._stats.get(id(value))
        if st is not None:
            st.used = True
            if op:
                st.ops.add(op)
        if deep:
            self._mark_deep(value, 0)

    def _mark_deep(self, value: Any, depth: int) -> None:
        if depth > 50:
            return
        st = self._stats.get(id(value))
        if st is not None:
            st.used = True
        if isinstance(value, dict):
            for v in dict.values(value):
                self._mark_deep(v, depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value if type(value) is tuple else list.__iter__(value):
                self._mark_deep(v, depth + 1)


_state = threading.local()


def _active() -> UsageRecorder | None:
    """The recorder of the render running on this thread, unless recording is suppressed."""
    rec = getattr(_state, "recorder", None)
    if rec is None or rec.suppressed:
        return None
    return rec


class _Suppressed:
    """Context manager: operations done inside a builtin (filter, method) are not template reads."""

    __slots__ = ("rec",)

    def __enter__(self) -> None:
        self.rec = getattr(_state, "recorder", None)
        if self.rec is not None:
            self.rec.suppressed += 1

    def __exit__(self, *exc: Any) -> None:
        if self.rec is not None:
            self.rec.suppressed -= 1


def _touch(value: Any, op: str | None = None) -> None:
    rec = _active()
    if rec is not None:
        rec.mark(value, op)


def _is_tracked(value: Any) -> bool:
    return isinstance(value, (TrackedDict, TrackedList, TrackedStr))


class TrackedDict(dict):
    """A ``dict`` whose usage is recorded (member access and ``for`` loops are seen by the tracking
    environment). Behaves exactly as a plain dict (``tojson``, ``is mapping``, ``in``, printing)."""

    __slots__ = ()


class TrackedList(list):
    """A ``list`` whose usage is recorded by the tracking environment; otherwise a plain list."""

    __slots__ = ()


def _str_hook(name: str, op: str | None = None) -> Callable[..., Any]:
    base = getattr(str, name)

    def method(self: str, *args: Any) -> Any:
        _touch(self, op)
        return base(self, *args)

    method.__name__ = name
    return method


class TrackedStr(str):
    """A ``str`` that records being read at Python level: printed (``str()``), compared, concatenated,
    formatted or searched. Otherwise a plain string (``is string``, ``tojson``, methods)."""

    __slots__ = ()

    __str__ = _str_hook("__str__")
    __format__ = _str_hook("__format__")
    __eq__ = _str_hook("__eq__")
    __ne__ = _str_hook("__ne__")
    __lt__ = _str_hook("__lt__")
    __le__ = _str_hook("__le__")
    __gt__ = _str_hook("__gt__")
    __ge__ = _str_hook("__ge__")
    __add__ = _str_hook("__add__")
    __mul__ = _str_hook("__mul__")
    __rmul__ = _str_hook("__rmul__")
    __mod__ = _str_hook("__mod__")
    __contains__ = _str_hook("__contains__")

    def __radd__(self, other: Any) -> Any:
        _touch(self)
        if isinstance(other, str):
            return str.__add__(other, str.__str__(self))
        return NotImplemented

    def __rmod__(self, other: Any) -> Any:
        _touch(self)
        if isinstance(other, str):
            return str.__mod__(other, str.__str__(self))
        return NotImplemented

    __hash__ = str.__hash__


# ---------------------------------------------------------------------------------------------------------
# tracking environment
# ---------------------------------------------------------------------------------------------------------

# filters that mark their input and all its descendants used (llama.cpp value.cpp: tojson, string)
_DEEP_FILTERS = frozenset({"tojson", "string"})


def _wrap_filter(name: str, fn: Callable[..., Any], op_prefix: str = "") -> Callable[..., Any]:
    idx = 1 if jinja2.utils._PassArg.from_obj(fn) is not None else 0
    op = op_prefix + name
    deep = not op_prefix and name in _DEEP_FILTERS

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = _active()
        if rec is not None and len(args) > idx:
            rec.mark(args[idx], op, deep=deep)
        with _Suppressed():
            result = fn(*args, **kwargs)
            if inspect.isgenerator(result):
                # llama.cpp's map/select/... return arrays (``|tojson`` works on them)
                result = list(result)
        return result

    return wrapper


# tests known to llama.cpp's engine (value.cpp global builtins ``test_is_*``)
_LLAMA_TESTS = frozenset({
    "boolean", "callable", "odd", "even", "false", "true", "divisibleby", "string", "integer", "float",
    "number", "iterable", "sequence", "mapping", "lower", "upper", "none", "defined", "undefined", "eq",
    "equalto", "ge", "gt", "greaterthan", "lt", "lessthan", "ne", "in", "test", "sameas", "escaped", "filter",
})

# list methods llama.cpp's engine lets a template call although they mutate (value.cpp array builtins)
_LLAMA_MUTATORS = frozenset({"append", "pop"})

_FOR_FILTER = "ct_for_iterable"


def _for_iterable(value: Any) -> Any:
    """Applied to every ``for`` loop's iterable in probe renders: records the loop on a tracked value
    (op ``array_access``, or ``object_access`` for a mapping; recorded before the type check, as
    llama.cpp does) and refuses strings and scalars as llama.cpp's engine does ("Expected iterable or
    object type in for loop"). Undefined iterates as empty."""
    rec = _active()
    if rec is not None:
        rec.mark(value, "array_access")
        if isinstance(value, dict):
            rec.mark(value, "object_access")
    if isinstance(value, jinja2.Undefined):
        return ()
    if isinstance(value, str) or value is None or isinstance(value, (int, float)):
        raise TypeError(f"Expected iterable or object type in for loop: got {type(value).__name__}")
    return value


def _selectattr_check(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """llama.cpp reads ``x | selectattr(a, b)`` (two arguments) as the test ``a`` with argument ``b`` and
    fails when ``a`` is no test name; reproduce that failure, keep jinja2's behaviour otherwise."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # args: (context, value, *filter_args)
        if len(args) == 4 and not kwargs and isinstance(args[2], str) and args[2] not in _LLAMA_TESTS:
            raise jinja2.exceptions.TemplateRuntimeError(f"{name}: unknown test {args[2]!r}")
        return fn(*args, **kwargs)

    return wrapper


def _property_op(obj: Any, key: Any) -> str:
    if isinstance(obj, dict):
        return "object_access"
    if isinstance(key, slice):
        return "slice"
    if isinstance(key, (int, bool)):
        return "array_access"
    return "object_access"


@functools.lru_cache(maxsize=1)
def _tracking_env() -> jinja2.Environment:
    """A copy of the project's rendering environment (same class and configuration, built by
    ``core.templating._make_environment``) that records usage on tracked values."""
    env = _templating._make_environment()
    base_cls = type(env)

    class _TrackingSandbox(base_cls):  # type: ignore[misc, valid-type]
        # share the render budget that ChatTemplate.render installs on the main environment
        @property
        def _deadline(self) -> Any:  # type: ignore[override]
            return _templating._ENV._deadline

        @_deadline.setter
        def _deadline(self, value: Any) -> None:
            pass

        def getattr(self, obj: Any, attribute: str) -> Any:
            result = super().getattr(obj, attribute)
            rec = _active()
            if rec is not None and _is_tracked(obj):
                is_method = isinstance(attribute, str) and hasattr(type(obj), attribute)
                rec.mark(obj, attribute if is_method else _property_op(obj, attribute))
                rec.mark(result)
            return result

        def getitem(self, obj: Any, argument: Any) -> Any:
            result = super().getitem(obj, argument)
            rec = _active()
            if rec is not None and _is_tracked(obj):
                rec.mark(obj, _property_op(obj, argument))
                rec.mark(result)
            return result

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            if _is_tracked(getattr(__obj, "__self__", None)):
                with _Suppressed():
                    return super().call(__context, __obj, *args, **kwargs)
            return super().call(__context, __obj, *args, **kwargs)

        def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
            if isinstance(obj, list) and attr in _LLAMA_MUTATORS:
                return jinja2.sandbox.SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)
            return super().is_safe_attribute(obj, attr, value)

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            # llama.cpp: ``str + none/undefined`` treats the missing side as "", and ``str + x``
            # concatenates x's string form; jinja2 would raise.
            if operator == "+" and (isinstance(left, str) != isinstance(right, str)):
                other = right if isinstance(left, str) else left
                text = "" if other is None or isinstance(other, jinja2.Undefined) else str(other)
                left, right = (left, text) if isinstance(left, str) else (text, right)
            return super().call_binop(context, operator, left, right)

        def _parse(self, source: str, name: str | None, filename: str | None) -> jinja2.nodes.Template:
            tree = super()._parse(source, name, filename)
            for node in tree.find_all(jinja2.nodes.For):
                node.iter = jinja2.nodes.Filter(node.iter, _FOR_FILTER, [], [], None, None, lineno=node.lineno)
            return tree

    env.__class__ = _TrackingSandbox
    env.filters = {k: _wrap_filter(k, f) for k, f in env.filters.items()}
    for k in ("selectattr", "rejectattr"):
        env.filters[k] = _selectattr_check(k, env.filters[k])
    env.filters[_FOR_FILTER] = _for_iterable
    env.tests = {k: _wrap_filter(k, f, "test_is_") for k, f in env.tests.items()}
    return env


@functools.lru_cache(maxsize=256)
def _compile_tracking(source: str) -> jinja2.Template:
    return _tracking_env().from_string(source)


@dataclass
class ProbeResult:
    """One instrumented render: ``success`` (False if the template raised), ``output`` ("" on failure),
    ``error`` (message or None), ``recorder`` (usage of the tracked inputs), ``context`` (tracked globals)."""

    success: bool
    output: str
    error: str | None
    recorder: UsageRecorder
    context: dict[str, Any]


def render_tracked(template: ChatTemplate, context: dict[str, Any],
                   tracked_keys: tuple[str, ...] = ("messages", "tools"),
                   aliases: dict[str, str] | None = None) -> ProbeResult:
    """Render ``template`` with ``context`` as globals, the values under ``tracked_keys`` wrapped so their
    usage is recorded; ``aliases`` binds further names to the very same tracked value (``{alias: key}``).
    Never raises for template errors (they give ``success=False``), as llama.cpp's ``caps_try_execute``
    swallows them. Uses the template's render limits."""
    rec = UsageRecorder()
    ctx = dict(context)
    for k in tracked_keys:
        if k in ctx:
            ctx[k] = rec.wrap(ctx[k])
    for alias, key in (aliases or {}).items():
        ctx[alias] = ctx[key]
    probe = copy.copy(template)
    try:
        probe._compiled = _compile_tracking(template.source)
    except Exception as e:  # same config as the main env, so this only fails where ChatTemplate failed
        return ProbeResult(False, "", f"{type(e).__name__}: {e}", rec, ctx)
    previous = getattr(_state, "recorder", None)
    _state.recorder = rec
    try:
        out = probe.render(ctx)
        return ProbeResult(True, out, None, rec, ctx)
    except Exception as e:
        return ProbeResult(False, "", str(e), rec, ctx)
    finally:
        _state.recorder = previous


# ---------------------------------------------------------------------------------------------------------
# the probes (llama.cpp caps_get)
# ---------------------------------------------------------------------------------------------------------

STRING_MARKER = "STRING_MARKER"
REASONING_PLACEHOLDER = "<REASONING_CONTENT_PLACEHOLDER>"


def _probe_tools() -> list[dict[str, Any]]:
    return [{
        "name": "tool",
        "type": "function",
        "function": {
            "name": "tool1",
            "description": "Tool description",
            "parameters": {
                "type": "object",
                "properties": {"arg": {"type": "string", "description": "Arg description"}},
                "required": ["arg"],
            },
        },
    }]


def _tool_call(call_id: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "tool1", "arguments": arguments}}


def _tool_conversation(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"},
    ]


def _base_context(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {
        "messages": messages,
        "tools": tools if tools is not None else [],
        "bos_token": "",
        "eos_token": "",
        "add_generation_prompt": True,
    }


def probe_caps(template: ChatTemplate) -> Caps:
    """Probe a template's capabilities by instrumented renders, as llama.cpp's ``caps_get`` does
    (analysis notes §3; probes in upstream order: typed content, system role, tools with object arguments,
    tools with string arguments, parallel calls, preserve reasoning, reasoning effort).

    Every probe renders with globals ``messages``, ``tools`` (``[]`` when the probe has none),
    ``bos_token=""``, ``eos_token=""``, ``add_generation_prompt=True`` plus probe-specific variables.
    Template errors are swallowed (a failed probe clears or leaves flags as upstream does), so this never
    raises for a template that compiled. Returns a :class:`core.analysis.result.Caps`.
    """
    caps = Caps()

    # 1. typed content
    r = render_tracked(template, _base_context([{"role": "user", "content": STRING_MARKER}], None))
    content = r.context["messages"][0]["content"]
    checks_for_string = r.recorder.has_op(content, "test_is_string")
    used_as_array = r.recorder.has_op(content, "selectattr") or r.recorder.has_op(content, "array_access")
    if used_as_array:
        caps.supports_typed_content = True
    if not r.success:
        caps.supports_string_content = False
    elif used_as_array and STRING_MARKER not in r.output:
        caps.supports_string_content = False

    if checks_for_string:
        r = render_tracked(template, _base_context([{"role": "user", "content": []}], None))
        content = r.context["messages"][0]["content"]
        used_as_array = r.recorder.has_op(content, "selectattr") or r.recorder.has_op(content, "array_access")
        if used_as_array and r.success:
            caps.supports_typed_content = True

    # 2. system role
    r = render_tracked(template, _base_context([
        {"role": "system", "content": "System message"},
        {"role": "user", "content": "User message"},
    ], None))
    if not r.recorder.used(r.context["messages"][0]["content"]):
        caps.supports_system_role = False

    # 3. one tool call, object arguments
    r = render_tracked(template, _base_context(
        _tool_conversation([_tool_call("call00001", {"arg": "value"})]), _probe_tools()))
    if r.success:
        msgs, tools = r.context["messages"], r.context["tools"]
        if not r.recorder.used(tools[0]["function"]["name"]):
            caps.supports_tools = False
        tool_calls = msgs[1]["tool_calls"]
        if not r.recorder.used(tool_calls):
            caps.supports_tool_calls = False
        elif r.recorder.used(tool_calls[0]["function"]["arguments"]["arg"]):
            caps.supports_object_arguments = True

    # 4. one tool call, string arguments
    if not caps.supports_object_arguments:
        r = render_tracked(template, _base_context(
            _tool_conversation([_tool_call("call00001", '{"arg": "value"}')]), _probe_tools()))
        if not r.success:
            caps.supports_tool_calls = False
            caps.supports_tools = False
        else:
            msgs, tools = r.context["messages"], r.context["tools"]
            if not r.recorder.used(tools[0]["function"]["name"]):
                caps.supports_tools = False
            if not r.recorder.used(msgs[1]["tool_calls"]):
                caps.supports_tool_calls = False

    # 5. parallel tool calls
    args: Any = {"arg": "value"} if caps.supports_object_arguments else '{"arg": "value"}'
    r = render_tracked(template, _base_context(
        _tool_conversation([_tool_call("call00001", args), _tool_call("call00002", copy.deepcopy(args))]),
        _probe_tools()))
    if not r.success:
        caps.supports_parallel_tool_calls = False
    elif not r.recorder.used(r.context["messages"][1]["tool_calls"][1]["function"]):
        caps.supports_parallel_tool_calls = False

    # 6. preserve reasoning (judged on the output only)
    ctx = _base_context([
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": REASONING_PLACEHOLDER},
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
        {"role": "user", "content": "User message"},
    ], None)
    ctx.update(enable_thinking=True, preserve_thinking=True, clear_thinking=False,
               truncate_history_thinking=False, drop_thinking=False)
    r = render_tracked(template, ctx)
    if REASONING_PLACEHOLDER in r.output:
        caps.supports_preserve_reasoning = True

    # 7. reasoning effort: reasoning_effort and reasoning_strength are bound to one shared value
    ctx = _base_context([{"role": "user", "content": "User message"}], None)
    ctx.update(enable_thinking=True, reasoning_effort="low")
    r = render_tracked(template, ctx, tracked_keys=("messages", "tools", "reasoning_effort"),
                       aliases={"reasoning_strength": "reasoning_effort"})
    caps.supports_reasoning_effort = r.recorder.used(r.context["reasoning_effort"])
    return caps


# ---------------------------------------------------------------------------------------------------------
# message normalisation (analysis notes §2; llama.cpp chat.cpp messages_inp_normalizer)
# ---------------------------------------------------------------------------------------------------------


def _concat_content_parts(parts: list[Any]) -> str:
    """Join text parts with ``\\n``; no newline next to a ``media_marker`` part; other part types dropped."""
    text = ""
    last_was_media = False
    for part in parts:
        ptype = part.get("type", "") if isinstance(part, dict) else ""
        if ptype == "text":
            add_newline = not last_was_media and text != ""
            last_was_media = False
        elif ptype == "media_marker":
            add_newline = False
            last_was_media = True
        else:
            continue
        if add_newline:
            text += "\n"
        value = part.get("text", "")
        text += value if isinstance(value, str) else str(value)
    return text


def normalize_messages(messages: list[dict[str, Any]], caps: Caps) -> list[dict[str, Any]]:
    """Messages as llama.cpp passes them to a template with capabilities ``caps`` (analysis notes §2).

    * string content only (``supports_string_content and not supports_typed_content``): list content
      becomes one string (text parts joined with ``\\n``, see :func:`_concat_content_parts`);
    * typed content only: string content becomes ``[{"type": "text", "text": s}]`` (``""`` included,
      ``None`` stays ``None``);
    * otherwise (both or neither) the messages are returned unchanged.

    Returns a new list of shallow-copied message dicts; the input is never modified. Non-dict entries
    are passed through as they are.
    """
    only_string = caps.supports_string_content and not caps.supports_typed_content
    only_typed = caps.supports_typed_content and not caps.supports_string_content
    if not (only_string or only_typed) or not isinstance(messages, list):
        return messages
    out: list[dict[str, Any]] = []
    for msg in messages:
        if not isinstance(msg, dict) or "content" not in msg:
            out.append(msg)
            continue
        m = dict(msg)
        c = m["content"]
        if only_typed and isinstance(c, str):
            m["content"] = [{"type": "text", "text": c}]
        elif only_string and isinstance(c, list):
            m["content"] = _concat_content_parts(c)
        out.append(m)
    return out
