"""Template capability detection by instrumented rendering, and capability-driven message normalisation.

Follows llama.cpp ``common/jinja/caps.cpp`` (``caps_get``) and the usage statistics of its Jinja engine
(``common/jinja/runtime.cpp`` / ``value.cpp``, analysis notes §3): every probe renders the template with
fixture inputs whose values *record how the template uses them*, then reads those records.

llama.cpp's engine marks a value "used" when the template evaluates an identifier bound to it, reads a
member or an index of it (container and result both), calls a filter / method / test on it (the name goes
into the value's ``ops``), iterates it with ``for`` (op ``array_access`` / ``object_access``) or passes it
to ``tojson`` / ``string`` (which mark every descendant). jinja2 has no such hook, so this module
reproduces it with:

* input values wrapped in :class:`TrackedDict` / :class:`TrackedList` / :class:`TrackedStr` — subclasses of
  the plain types with their own identity, so rendering, ``tojson``, ``is string`` / ``is mapping``,
  ``in`` and printing behave exactly as with plain values;
* a tracking copy of the project's sandbox environment (same class, filters, tests and globals as
  :mod:`core.templating`) whose ``getattr`` / ``getitem`` record member and index access, whose filters and
  tests record their name on their input, whose method calls on tracked values run unrecorded (as in
  llama.cpp, where a builtin's internals do not count as template reads), and whose parsed templates are
  rewritten so that every variable read and every ``for`` iterable passes through a recording function.

Whether a probe *renders at all*, and what it prints, decides several flags, so probe renders also follow
llama.cpp's engine where it differs from jinja2 (each case found on the corpus or checked against a build
of llama.cpp's engine): ``for`` over a string fails; ``str + none`` / ``str + undefined`` concatenate "";
``str + x`` concatenates x's text; ``list.append`` / ``pop`` work; ``map`` / ``select`` return lists;
``selectattr(attr, test)`` with two arguments, ``map('filter')``, ``unique``, ``tojson(sort_keys=true)``
fail; macro arguments bind positionally as llama.cpp binds them; ``undefined in x`` fails; members of an
undefined value are undefined; ``{{ mapping }}`` / ``{{ none }}`` print nothing and ``{{ list }}`` prints
its items' text. Only probe renders change; :mod:`core.templating` renders as transformers does.

Public API: :func:`probe_caps`, :func:`probe_caps_report` (every probe kept for display),
:func:`normalize_messages`, :func:`render_tracked` (one instrumented render) and
:func:`probe_environment`.
"""

from __future__ import annotations

import copy
import functools
import threading
from types import GeneratorType as _GeneratorType
from dataclasses import dataclass, field
from typing import Any, Callable

import jinja2
import jinja2.nodes
import jinja2.sandbox
import jinja2.runtime
import jinja2.utils
import jinja2.visitor

from .. import memo as _memo
from .. import templating as _templating
from ..errors import RenderLimitError
from ..templating import ChatTemplate
from .result import Caps

__all__ = [
    "Caps",
    "CapsProbe",
    "CapsReport",
    "LlamaUndefined",
    "ProbeResult",
    "TrackedDict",
    "TrackedList",
    "TrackedStr",
    "UsageRecorder",
    "normalize_messages",
    "probe_caps",
    "probe_caps_report",
    "probe_environment",
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
        # ids of the tracked values, of those used, and the ops applied per id: plain sets, not a record per
        # value (a render marks ~20 values used, most of them many times over)
        self._tracked: set[int] = set()
        self._used: set[int] = set()
        self._ops: dict[int, set[str]] = {}
        self._keep: list[Any] = []  # keeps tracked objects alive so ids stay unique
        self.suppressed = 0

    def wrap(self, value: Any) -> Any:
        """Deep copy of a JSON-like ``value`` made of tracked containers and strings (other scalars as is)."""
        tp = type(value)
        if tp is str:
            out: Any = TrackedStr(value)
        elif tp is dict or (tp is not list and isinstance(value, dict)):
            wrap = self.wrap
            out = TrackedDict({k: wrap(v) for k, v in value.items()})
        elif tp is list or isinstance(value, (list, tuple)):
            wrap = self.wrap
            out = TrackedList([wrap(v) for v in value])
        elif isinstance(value, str):
            out = TrackedStr(value)
        else:
            return value
        self._keep.append(out)
        self._tracked.add(id(out))
        return out

    def stats(self, value: Any) -> ValueStats:
        """Stats of ``value`` (a snapshot; an unused record for anything untracked or unused)."""
        key = id(value)
        if key not in self._tracked:
            return ValueStats()
        return ValueStats(key in self._used, set(self._ops.get(key, ())))

    def used(self, value: Any) -> bool:
        """True if the template read the tracked ``value`` during the render."""
        return id(value) in self._used

    def has_op(self, value: Any, op: str) -> bool:
        """True if operation ``op`` (e.g. a filter or method name) was applied to the tracked ``value``."""
        return op in self._ops.get(id(value), ())

    def mark(self, value: Any, op: str | None = None, deep: bool = False) -> None:
        """Mark ``value`` used (adding ``op`` to its ops). ``deep`` also marks every tracked value inside
        it, looking through untracked containers too (``dict(a=tracked)|tojson`` marks ``tracked``)."""
        key = id(value)
        if key in self._tracked:
            self._used.add(key)
            if op:
                ops = self._ops.get(key)
                if ops is None:
                    self._ops[key] = {op}
                else:
                    ops.add(op)
        if deep:
            self._mark_deep(value)

    def _mark_deep(self, value: Any) -> None:
        # Iterative, each container visited once (a list holding itself twice made the recursive walk
        # exponential), depth-bounded, with the render deadline checked as it goes.
        seen: set[int] = set()
        stack = [(value, 0)]
        tick = _templating._ENV._tick
        while stack:
            v, depth = stack.pop()
            if id(v) in self._tracked:
                self._used.add(id(v))
            if depth >= 50 or not isinstance(v, (dict, list, tuple)) or id(v) in seen:
                continue
            seen.add(id(v))
            tick()
            items = dict.values(v) if isinstance(v, dict) else v if type(v) is tuple else list.__iter__(v)
            stack.extend((x, depth + 1) for x in items)


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


def _is_tracked(value: Any) -> bool:
    # by exact type: the recorder only ever creates these three (a failed isinstance on a jinja2 Namespace
    # costs a Python-level __class__ lookup, and this runs on every member read)
    return type(value) in _TRACKED_TYPES


class TrackedDict(dict):
    """A ``dict`` whose usage is recorded (member access and ``for`` loops are seen by the tracking
    environment). Behaves exactly as a plain dict (``tojson``, ``is mapping``, ``in``, printing)."""

    __slots__ = ()


class TrackedList(list):
    """A ``list`` whose usage is recorded by the tracking environment; otherwise a plain list."""

    __slots__ = ()


class TrackedStr(str):
    """A ``str`` with its own identity, so its usage can be recorded; otherwise a plain string
    (``is string``, ``tojson``, methods, printing, comparison)."""

    __slots__ = ()


_TRACKED_TYPES = frozenset({TrackedDict, TrackedList, TrackedStr})
# a TrackedStr concatenates exactly as a str (no __add__ of its own): the sandbox's string fast path takes it
_templating.PLAIN_STR_TYPES.add(TrackedStr)


# ---------------------------------------------------------------------------------------------------------
# tracking environment
# ---------------------------------------------------------------------------------------------------------

# filters that mark their input and all its descendants used (llama.cpp value.cpp: tojson, string)
_DEEP_FILTERS = frozenset({"tojson", "string"})


def _wrap_filter(name: str, fn: Callable[..., Any], op_prefix: str = "",
                 check: Callable[[Any], None] | None = None) -> Callable[..., Any]:
    """``fn`` recording its use on its input (op ``op_prefix + name``; ``tojson`` and ``string`` mark all of
    it), running unrecorded inside, with ``check(input)`` (:func:`_llama_check`) before it and a generator
    result made a list (llama.cpp's filters return arrays)."""
    idx = 1 if jinja2.utils._PassArg.from_obj(fn) is not None else 0
    op = op_prefix + name
    deep = not op_prefix and name in _DEEP_FILTERS

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # _active() and _Suppressed inlined: this runs for every filter and test of a probe render
        rec = getattr(_state, "recorder", None)
        if rec is None:
            if check is not None and len(args) > idx:
                check(args[idx])
            result = fn(*args, **kwargs)
        else:
            if not rec.suppressed and len(args) > idx:
                rec.mark(args[idx], op, deep=deep)
            rec.suppressed += 1
            try:
                if check is not None and len(args) > idx:
                    check(args[idx])
                result = fn(*args, **kwargs)
            finally:
                rec.suppressed -= 1
        if type(result) is _GeneratorType:
            # llama.cpp's map/select/... return arrays (``|tojson`` works on them)
            with _Suppressed():
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
# bound on a list a template grows with append() (a loop appending to the list it walks never ends)
_MAX_LIST_ITEMS = 100_000

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


_IN_FILTER = "ct_contains"


def _contains(item: Any, container: Any) -> bool:
    """``item in container`` as llama.cpp's engine evaluates it: ``x in undefined`` is False, and an
    undefined ``item`` is an error ("Cannot perform operation in on undefined values")."""
    if isinstance(container, jinja2.Undefined):
        return False
    if isinstance(item, jinja2.Undefined):
        raise jinja2.exceptions.TemplateRuntimeError("cannot perform operation 'in' on an undefined value")
    return item in container


_IDENT_FILTER = "ct_identifier"


def _identifier(value: Any) -> Any:
    """Applied to every variable read in probe renders: llama.cpp marks a value used whenever an identifier
    bound to it is evaluated (``{% set c = m.get('x') %}{% if c %}`` uses ``x``'s value)."""
    # runs for every variable read of every analysis render: _active() and mark() inlined
    rec = getattr(_state, "recorder", None)
    if rec is not None and not rec.suppressed and id(value) in rec._tracked:
        rec._used.add(id(value))
    return value


def _identity(value: Any) -> Any:
    return value


UNTRACKED_FILTERS: dict[str, Callable[..., Any]] = {_IDENT_FILTER: _identity}
"""Versions of the probe rewriter's filters for an overlay of the probe environment that never records usage
(:mod:`core.analysis.engine`): same results, no recorder lookup (:func:`_identifier` runs on every variable
read). Not a change of behaviour, so they need no compiled code of their own."""


class _ProbeRewriter(jinja2.visitor.NodeTransformer):
    """Rewrites a parsed template for probe renders: every variable read goes through :func:`_identifier`,
    every ``for`` iterable through :func:`_for_iterable`, every single ``a in b`` / ``a not in b`` through
    :func:`_contains`."""

    def visit_Name(self, node: jinja2.nodes.Name) -> jinja2.nodes.Node:
        if node.ctx != "load":
            return node
        return jinja2.nodes.Filter(node, _IDENT_FILTER, [], [], None, None, lineno=node.lineno)

    def visit_For(self, node: jinja2.nodes.For) -> jinja2.nodes.Node:
        self.generic_visit(node)
        node.iter = jinja2.nodes.Filter(node.iter, _FOR_FILTER, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Compare(self, node: jinja2.nodes.Compare) -> jinja2.nodes.Node:
        self.generic_visit(node)
        if len(node.ops) == 1 and node.ops[0].op in ("in", "notin"):
            call = jinja2.nodes.Filter(node.expr, _IN_FILTER, [node.ops[0].expr], [], None, None,
                                       lineno=node.lineno)
            return jinja2.nodes.Not(call, lineno=node.lineno) if node.ops[0].op == "notin" else call
        return node


def _two_arg_selectattr(v: Any, *a: Any, **kw: Any) -> str | None:
    # llama.cpp reads ``x | selectattr(a, b)`` as the test ``a`` with argument ``b``
    if len(a) == 2 and not kw and isinstance(a[0], str) and a[0] not in _LLAMA_TESTS:
        return f"unknown test {a[0]!r}"
    return None


def _map_filter_mapping(v: Any, *a: Any, **kw: Any) -> str | None:
    return "filter-mapping not implemented" if a else None


def _unique_array(v: Any, *a: Any, **kw: Any) -> str | None:
    return "unique not implemented" if isinstance(v, (list, tuple)) else None


def _join_non_array(v: Any, *a: Any, **kw: Any) -> str | None:
    return "join of a string or mapping not implemented" if isinstance(v, (str, dict)) else None


def _tojson_sort_keys(v: Any, *a: Any, **kw: Any) -> str | None:
    sort = kw.get("sort_keys", a[3] if len(a) > 3 else False)
    return "sort_keys=true not implemented" if sort else None


def _replace_count(v: Any, *a: Any, **kw: Any) -> str | None:
    return "replace with count not implemented" if len(a) > 2 or "count" in kw else None


# Filter uses llama.cpp's engine refuses (value.cpp raises or "not implemented"), so a probe that
# reaches them fails there; jinja2 would render. Checked before the filter runs in probe renders.
_LLAMA_REFUSALS: dict[str, Callable[..., str | None]] = {
    "selectattr": _two_arg_selectattr,
    "rejectattr": _two_arg_selectattr,
    "map": _map_filter_mapping,
    "unique": _unique_array,
    "join": _join_non_array,
    "tojson": _tojson_sort_keys,
    "replace": _replace_count,
}


def _llama_refusal(name: str, fn: Callable[..., Any], check: Callable[..., str | None]) -> Callable[..., Any]:
    idx = 1 if jinja2.utils._PassArg.from_obj(fn) is not None else 0

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if len(args) > idx:
            problem = check(*args[idx:], **kwargs)
            if problem:
                raise jinja2.exceptions.TemplateRuntimeError(f"{name}: {problem}")
        return fn(*args, **kwargs)

    return wrapper


# Builtins (filters and methods) llama.cpp's engine has per input type (value.cpp ``*_t::get_builtins``);
# anything else fails there ("Unknown (built-in) filter"), or is undefined when read as a member.
_LLAMA_BUILTINS: dict[str, frozenset[str]] = {
    "int": frozenset("abs default float int safe string tojson".split()),
    "float": frozenset("abs default float int safe string tojson".split()),
    "bool": frozenset("default float int safe string tojson".split()),
    "string": frozenset("capitalize default endswith float format indent int join length lower lstrip replace "
                        "rsplit rstrip safe slice split startswith string strip title tojson upper".split()),
    "array": frozenset("append default first join last length list map max min pop reject rejectattr reverse "
                       "select selectattr slice sort string tojson unique".split()),
    "object": frozenset("dictsort get items join keys length string tojson values".split()),
    "none": frozenset("default items map reject rejectattr safe select selectattr string tojson unique".split()),
    "undefined": frozenset("capitalize default first items join last length list lower map max min reject "
                           "rejectattr replace reverse safe select selectattr sort string strip sum title "
                           "truncate unique upper wordcount".split()),
}
_FILTER_ALIASES = {"count": "length", "d": "default", "e": "escape", "trim": "strip"}
# filters llama.cpp applies to the string form of a non-string input
_STRING_COERCED = frozenset("capitalize lower replace strip title upper wordcount".split())


def _llama_kind(tp: type) -> str | None:
    """llama.cpp's value kind of Python type ``tp`` (see :func:`_llama_type`)."""
    if issubclass(tp, jinja2.Undefined):
        return "undefined"
    if tp is type(None):
        return "none"
    if issubclass(tp, bool):
        return "bool"
    if issubclass(tp, int):
        return "int"
    if issubclass(tp, float):
        return "float"
    if issubclass(tp, str):
        return "string"
    if issubclass(tp, (list, tuple)):
        return "array"
    if issubclass(tp, dict):
        return "object"
    return None  # namespaces, loop objects, ranges…: not checked


# type -> llama.cpp kind; a handful of types ever reach a template (bounded all the same)
_KINDS: dict[type, str | None] = {}


def _llama_type(value: Any) -> str | None:
    """llama.cpp's kind of ``value`` ("string", "array", "object", "int", …; None for other objects), by
    its type (cached: every member read and filter of an analysis render asks)."""
    tp = type(value)
    try:
        return _KINDS[tp]
    except KeyError:
        kind = _llama_kind(tp)
        if len(_KINDS) < 1024:
            _KINDS[tp] = kind
        return kind


# public names that are no member of dict (nor of TrackedDict, which adds none): a mapping's key read as a member
_NOT_DICT_MEMBERS: set[str] = set()
_deadline_local = _templating._local
_monotonic = _templating._monotonic


def _not_dict_member(name: str) -> bool:
    """True if ``name`` is public (no leading ``_``) and no attribute of ``dict``; remembered in
    :data:`_NOT_DICT_MEMBERS` (bounded: names come from template sources)."""
    if name[:1] == "_" or hasattr(dict, name):
        return False
    if len(_NOT_DICT_MEMBERS) >= 8192:
        _NOT_DICT_MEMBERS.clear()
    _NOT_DICT_MEMBERS.add(name)
    return True


# (type, name) -> hasattr(type, name), for member reads (bounded: names come from template sources)
_TYPE_HAS: dict[tuple[type, str], bool] = {}


def _type_has(tp: type, name: str) -> bool:
    """``hasattr(tp, name)``, cached per (type, name)."""
    key = (tp, name)
    try:
        return _TYPE_HAS[key]
    except KeyError:
        has = hasattr(tp, name)
        if len(_TYPE_HAS) >= 8192:
            _TYPE_HAS.clear()
        _TYPE_HAS[key] = has
        return has


def _llama_check(name: str) -> Callable[[Any], None]:
    """Check of filter ``name``'s input: refuses (``TemplateRuntimeError``) a filter llama.cpp's engine does
    not have for the input's type."""
    llama_name = _FILTER_ALIASES.get(name, name)
    coerced = llama_name in _STRING_COERCED

    def check(value: Any) -> None:
        kind = _llama_type(value)
        if coerced and kind not in (None, "undefined", "string"):
            kind = "string"
        if kind is not None and llama_name not in _LLAMA_BUILTINS[kind]:
            raise jinja2.exceptions.TemplateRuntimeError(f"unknown (built-in) filter {name!r} for a {kind} value")

    return check


def _property_op(obj: Any, key: Any) -> str:
    if isinstance(obj, dict):
        return "object_access"
    if isinstance(key, slice):
        return "slice"
    if isinstance(key, (int, bool)):
        return "array_access"
    return "object_access"


def _llama_macro_binding(env: Any, macro: jinja2.runtime.Macro, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Arguments as llama.cpp binds them to a macro: with N arguments given (positional plus keyword),
    each of the first N parameters takes the keyword of its name or else the positional argument at its
    index (undefined if there is none); only parameters from index N on get their defaults. So
    ``m(x, flag=True)`` for ``m(a, b=none, flag=false)`` binds ``b`` to undefined and ``flag`` to false."""
    names = list(macro.arguments)
    given = {k: v for k, v in kwargs.items() if k != "caller"}  # a {% call %} block's caller is no argument
    if len(args) > len(names) or not given:
        return args, kwargs
    total = len(args) + len(given)
    bound: dict[str, Any] = {k: v for k, v in kwargs.items() if k not in names}
    for i, name in enumerate(names[:total]):
        if name in given:
            bound[name] = given[name]
        elif i < len(args):
            bound[name] = args[i]
        else:
            bound[name] = env.undefined(name=name)
    return (), bound


_BUILTIN_METHOD = type("".strip)
_MACRO = jinja2.runtime.Macro
_NAMESPACE = jinja2.utils.Namespace
_PLAIN_OWNERS = frozenset({dict, TrackedDict, list, TrackedList, str, TrackedStr})


def _call_plain(env: Any, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call ``fn`` as jinja2's ``Context.call`` calls a callable that takes no context: without the loop and
    block variables the generated code passes along, a ``StopIteration`` read as undefined."""
    kwargs.pop("_block_vars", None)
    kwargs.pop("_loop_vars", None)
    try:
        return fn(*args, **kwargs)
    except StopIteration:
        return env.undefined("value was undefined because a callable raised a StopIteration exception")


@functools.lru_cache(maxsize=1)
def _tracking_env() -> jinja2.Environment:
    """A copy of the project's rendering environment (same class and configuration, built by
    ``core.templating._make_environment``) that records usage on tracked values."""
    env = _templating._make_environment()
    base_cls = type(env)
    # the base class's hooks, called directly rather than through super() (these run for every member read,
    # item, call and operator of a render)
    _base_getattr, _base_getitem = base_cls.getattr, base_cls.getitem
    _base_call, _base_binop = base_cls.call, base_cls.call_binop

    class _TrackingSandbox(base_cls):  # type: ignore[misc, valid-type]
        # share the render budget that ChatTemplate.render installs on the main environment
        @property
        def _deadline(self) -> Any:  # type: ignore[override]
            return _templating._ENV._deadline

        @_deadline.setter
        def _deadline(self, value: Any) -> None:
            pass

        def getattr(self, obj: Any, attribute: str) -> Any:
            tp = type(obj)
            if ((tp is TrackedDict or tp is dict) and type(attribute) is str
                    and (attribute in _NOT_DICT_MEMBERS or _not_dict_member(attribute))):
                # A mapping's key read as a member (``message.role``), the commonest access of a render.
                # Same result as the general path below (tick, key or undefined, usage marks), without
                # the sandbox first raising and catching an AttributeError for the missing attribute.
                d = getattr(_deadline_local, "deadline", None)  # self._tick(), inlined
                if d is not None and _monotonic() > d.until:
                    d.check()
                try:
                    result = obj[attribute]
                except KeyError:
                    result = self.undefined(obj=obj, name=attribute)
                if tp is TrackedDict:
                    rec = _active()
                    if rec is not None:
                        rec.mark(obj, "object_access")
                        rec.mark(result)
                return result
            kind = _llama_type(obj)
            if kind is None:
                # a loop, a namespace, a range…: never tracked, no llama.cpp member rules
                return _base_getattr(self, obj, attribute)
            if (kind in ("string", "array", "object") and isinstance(attribute, str)
                    and attribute[:1] != "_"  # internals: the sandbox refuses them loudly
                    and _type_has(tp, attribute) and attribute not in _LLAMA_BUILTINS[kind]):
                # a Python method llama.cpp lacks: a mapping's key of that name, else undefined
                if kind == "object" and attribute in obj:
                    result = dict.__getitem__(obj, attribute)
                else:
                    result = self.undefined(obj=obj, name=attribute)
            else:
                result = _base_getattr(self, obj, attribute)
            if tp in _TRACKED_TYPES:
                rec = _active()
                if rec is not None:
                    is_method = isinstance(attribute, str) and _type_has(tp, attribute)
                    rec.mark(obj, attribute if is_method else _property_op(obj, attribute))
                    rec.mark(result)
            return result

        def getitem(self, obj: Any, argument: Any) -> Any:
            tp = type(obj)
            ta = type(argument)
            if ((ta is str and (tp is dict or tp is TrackedDict))
                    or (ta is int and (tp is list or tp is TrackedList))):
                # a mapping's key or a list's index that exists (``message['content']``, ``messages[0]``):
                # the sandbox's result without its fallbacks (a member of that name, undefined)
                d = getattr(_deadline_local, "deadline", None)  # self._tick(), inlined
                if d is not None and _monotonic() > d.until:
                    d.check()
                try:
                    result = obj[argument]
                except LookupError:
                    result = _base_getitem(self, obj, argument)
                if tp is TrackedDict or tp is TrackedList:
                    rec = _active()
                    if rec is not None:
                        rec.mark(obj, "object_access" if tp is TrackedDict else "array_access")
                        rec.mark(result)
                return result
            result = _base_getitem(self, obj, argument)
            if tp in _TRACKED_TYPES:
                rec = _active()
                if rec is not None:
                    rec.mark(obj, _property_op(obj, argument))
                    rec.mark(result)
            return result

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            # The commonest calls first — a macro, ``namespace(...)``, a method of a string, list or mapping
            # (``message.get('x')``, ``content.strip()``) — with the same checks, in the same order, as the
            # general path below (the sandbox's and jinja2's call, which find them harmless: no context or
            # environment to pass, always safe to call).
            tp = type(__obj)
            if tp is _BUILTIN_METHOD:
                owner = __obj.__self__
                towner = type(owner)
                if towner in _PLAIN_OWNERS:
                    if ((towner is list or towner is TrackedList) and __obj.__name__ == "append"
                            and len(owner) >= _MAX_LIST_ITEMS):
                        raise RenderLimitError("<render>", f"list grown beyond {_MAX_LIST_ITEMS} items by "
                                                              "append() (limit: list size)")
                    __self._tick()
                    if towner is str or towner is TrackedStr:
                        _templating._check_str_method(owner, __obj.__name__, args, kwargs, __self._limit())
                    if towner in _TRACKED_TYPES:  # a builtin's internals are not template reads
                        rec = getattr(_state, "recorder", None)
                        if rec is not None:
                            rec.suppressed += 1
                            try:
                                return _call_plain(__self, __obj, args, kwargs)
                            finally:
                                rec.suppressed -= 1
                    return _call_plain(__self, __obj, args, kwargs)
            elif tp is _MACRO:
                args, kwargs = _llama_macro_binding(__self, __obj, args, kwargs)
                __self._tick()
                return _call_plain(__self, __obj, args, kwargs)
            elif __obj is _NAMESPACE:
                __self._tick()
                return _call_plain(__self, __obj, args, kwargs)
            owner = getattr(__obj, "__self__", None)
            if (isinstance(owner, list) and getattr(__obj, "__name__", "") == "append"
                    and len(owner) >= _MAX_LIST_ITEMS):
                raise RenderLimitError("<render>", f"list grown beyond {_MAX_LIST_ITEMS} items by append() "
                                                      "(limit: list size)")
            if isinstance(__obj, jinja2.runtime.Macro):
                args, kwargs = _llama_macro_binding(__self, __obj, args, kwargs)
            elif _is_tracked(owner):
                with _Suppressed():
                    return _base_call(__self, __context, __obj, *args, **kwargs)
            return _base_call(__self, __context, __obj, *args, **kwargs)

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
            return _base_binop(self, context, operator, left, right)

        def _rewrite_tree(self, tree: jinja2.nodes.Template) -> jinja2.nodes.Template:
            return _ProbeRewriter().visit(tree)

    env.__class__ = _TrackingSandbox
    env.filters = {k: _wrap_filter(k, f, check=_llama_check(k)) for k, f in env.filters.items()}
    for k in ("lipsum", "cycler", "joiner"):  # jinja2 globals llama.cpp's engine does not have
        env.globals.pop(k, None)
    for k, check in _LLAMA_REFUSALS.items():
        if k in env.filters:
            env.filters[k] = _llama_refusal(k, env.filters[k], check)
    env.filters[_FOR_FILTER] = _for_iterable
    env.filters[_templating.LOOP_FILTER] = _templating._CheckedLoop
    env.filters[_IN_FILTER] = _contains
    env.filters[_IDENT_FILTER] = _identifier
    env.tests = {k: _wrap_filter(k, f, "test_is_") for k, f in env.tests.items()}
    return env


# Methods llama.cpp gives an undefined value (value.cpp ``value_undefined_t::get_builtins``): each returns
# an empty value of its kind; None stands for "undefined". (``default`` is llama.cpp's ``default_value``,
# which returns its argument; here ``undefined.default(x)`` stays undefined — no corpus template uses it.)
_UNDEFINED_BUILTINS: dict[str, Any] = {
    "capitalize": "", "first": None, "items": (), "join": "", "last": None, "length": 0, "list": (),
    "lower": "", "map": (), "max": None, "min": None, "reject": (), "rejectattr": (), "replace": "",
    "reverse": (), "safe": "", "select": (), "selectattr": (), "sort": (), "string": "", "strip": "",
    "sum": 0, "title": "", "truncate": "", "unique": (), "upper": "", "wordcount": 0, "default": None,
}


class LlamaUndefined(jinja2.ChainableUndefined):
    """Undefined as llama.cpp's engine treats it: a member or item of an undefined value is undefined (no
    error), and its builtin methods (``items()``, ``join()``, ``default()``, …; table
    :data:`_UNDEFINED_BUILTINS`) return empty values instead of failing.

    The single definition of llama.cpp's undefined values in the project: the probe environment uses it,
    and the llama.cpp-compatible renderer (:mod:`core.analysis.engine`, an overlay of that environment)
    inherits it together with :func:`_finalize`. Runtime-only: the undefined type does not shape the code
    jinja2 generates, so it is not part of any compiled-code cache key."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name[:2] == "__":
            raise AttributeError(name)
        if name in _UNDEFINED_BUILTINS:
            empty = _UNDEFINED_BUILTINS[name]

            def method(*args: Any, **kwargs: Any) -> Any:
                return LlamaUndefined(name=name) if empty is None else (
                    [] if empty == () else empty)

            return method
        return self


def _finalize(value: Any) -> Any:
    """What ``{{ value }}`` prints in llama.cpp's engine: strings and numbers as text, a list as its items'
    text concatenated, and nothing at all for a mapping, none or undefined. Shared with
    :mod:`core.analysis.engine` (inherited through ``overlay()``). Unlike the undefined type, ``finalize``
    shapes code generation, so it must stay in this module, whose digest is in :func:`probe_code_tag`."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (jinja2.Undefined, dict)):
        return ""
    if isinstance(value, (list, tuple)):
        limit = _templating._ENV._limit()
        if _templating.projected_text_size(value, limit) > limit:
            raise RenderLimitError("<render>", f"printed value size above {limit} (limit: output size)")
        return "".join(str(_finalize(v)) for v in value if isinstance(v, (str, int, float, list, tuple)))
    return value


@functools.lru_cache(maxsize=1)
def _probe_env() -> jinja2.Environment:
    """The environment probe renders compile with: :func:`_tracking_env` plus llama.cpp's undefined values
    and output of non-strings."""
    return _tracking_env().overlay(undefined=LlamaUndefined, finalize=_finalize)


def probe_environment() -> jinja2.Environment:
    """The probe environment: the project's sandbox configuration plus the llama.cpp engine behaviours
    listed in the module docstring (and usage recording, active only inside :func:`render_tracked`).
    Shared, cached; callers that change filters must ``overlay()`` it first."""
    return _probe_env()


def probe_code_tag() -> str:
    """Cache tag of code compiled by :func:`probe_environment` (its AST rewriter lives in this module, so the
    module's digest is part of it): see :func:`core.templating.compiled_code`."""
    return "probe|" + _templating.module_digest(__file__)


def probe_code(source: str) -> Any:
    """Python code of ``source`` compiled by the probe environment, through the in-memory and disk caches
    of compiled templates. The llama.cpp-compatible renderer (:mod:`core.analysis.engine`, an overlay of
    this environment with the same code generation) runs the same code. Raises jinja2's
    ``TemplateSyntaxError`` for bad Jinja."""
    return _templating.compiled_code(_probe_env(), source, probe_code_tag())


def plain_globals(template: jinja2.Template) -> jinja2.Template:
    """``template`` with its globals copied into a plain dict (returned as is): jinja2 gives a template a
    ``ChainMap`` over its environment's globals, which every render copies twice in Python (~5 µs of a ~100 µs
    analysis render). Only for templates of environments whose globals never change after they are built
    (the probe and llama.cpp-compatible environments)."""
    template.globals = dict(template.globals)
    return template


@functools.lru_cache(maxsize=512)
def _compile_tracking(source: str) -> jinja2.Template:
    return plain_globals(_templating.template_from_code(_probe_env(), probe_code(source)))


_memo.register_cache("probe templates", _compile_tracking.cache_clear)  # see core.memo.clear_caches
_memo.register_cache("per-type verdicts of probe renders",
                     lambda: (_KINDS.clear(), _NOT_DICT_MEMBERS.clear(), _TYPE_HAS.clear()))


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
    try:
        compiled = _compile_tracking(template.source)
    except Exception as e:  # same config as the main env, so this only fails where ChatTemplate failed
        return ProbeResult(False, "", f"{type(e).__name__}: {e}", rec, ctx)
    previous = getattr(_state, "recorder", None)
    _state.recorder = rec
    try:
        out = template.render_with(compiled, ctx, template_tracebacks=False)  # failures: message only
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


@dataclass
class CapsProbe:
    """One capability probe, kept for display: ``id`` (e.g. ``"system_role"``), ``title`` (a sentence),
    ``inputs`` (the plain globals rendered: messages, tools, extra variables), ``success``, ``output``,
    ``error``, ``observed`` (what the probe read from the usage records, e.g.
    ``{"messages[0].content used": False}``) and ``changed`` (flags this probe set, name -> value)."""

    id: str
    title: str
    inputs: dict[str, Any]
    success: bool
    output: str
    error: str | None
    observed: dict[str, Any] = field(default_factory=dict)
    changed: dict[str, bool] = field(default_factory=dict)


@dataclass
class CapsReport:
    """:func:`probe_caps_report` result: the final ``caps`` and every ``probes`` entry in run order."""

    caps: Caps
    probes: list[CapsProbe]


class _Runner:
    """Runs the probes of one template; after a probe hits a render *time* limit the remaining probes are
    not rendered (they count as failed), so a pathological template costs one time budget, not seven."""

    def __init__(self, template: ChatTemplate) -> None:
        self.template = template
        self.timed_out: str | None = None
        self.probes: list[CapsProbe] = []

    def run(self, pid: str, title: str, context: dict[str, Any], **kw: Any) -> tuple[ProbeResult, CapsProbe]:
        # not copied: every probe builds its context afresh and nothing changes it after this call (the render
        # gets tracked copies of it, see render_tracked)
        inputs = {k: v for k, v in context.items() if k not in ("bos_token", "eos_token")}
        if self.timed_out:
            rec = UsageRecorder()
            res = ProbeResult(False, "", f"skipped: an earlier probe hit the time limit ({self.timed_out})",
                              rec, _wrapped_copy(rec, context, kw))
        else:
            res = render_tracked(self.template, context, **kw)
            if not res.success and res.error and "longer than" in res.error:
                self.timed_out = res.error
            elif not res.success:
                retry = _with_empty_reasoning(context)
                if retry is not None:   # b11549 caps.cpp: one retry, for templates that need the field
                    context, inputs = retry, {k: v for k, v in retry.items() if k not in ("bos_token", "eos_token")}
                    res = render_tracked(self.template, context, **kw)
        probe = CapsProbe(pid, title, inputs, res.success, res.output, res.error)
        self.probes.append(probe)
        return res, probe


def _with_empty_reasoning(context: dict[str, Any]) -> dict[str, Any] | None:
    """``context`` with ``reasoning_content: ""`` added to every assistant message that has none (llama.cpp
    b11549 retries a failed probe render once so, for templates such as K2 Horizon's that require a thinking
    field on every assistant turn); None when no message lacked it (no retry)."""
    messages = context.get("messages")
    if not isinstance(messages, list):
        return None
    added = False
    out = []
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant" and "reasoning_content" not in m:
            m = dict(m, reasoning_content="")
            added = True
        out.append(m)
    return dict(context, messages=out) if added else None


def _wrapped_copy(rec: UsageRecorder, context: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    ctx = dict(context)
    for k in kw.get("tracked_keys", ("messages", "tools")):
        if k in ctx:
            ctx[k] = rec.wrap(ctx[k])
    for alias, key in (kw.get("aliases") or {}).items():
        ctx[alias] = ctx[key]
    return ctx


def _set(caps: Caps, probe: CapsProbe, flag: str, value: bool) -> None:
    if getattr(caps, flag) != value:
        probe.changed[flag] = value
    setattr(caps, flag, value)


def probe_caps_report(template: ChatTemplate) -> CapsReport:
    """Probe a template's capabilities by instrumented renders, as llama.cpp's ``caps_get`` does
    (``common/jinja/caps.cpp``; analysis notes §3), and keep every probe for display.

    Probes in upstream order: typed content (plus a second typed-content probe with ``content: []`` when
    the template tested ``content is string``), system role, one tool call with object arguments, one
    with string arguments (only if object arguments were not seen), two parallel calls, preserved
    reasoning, reasoning effort. Each renders with globals ``messages``, ``tools`` (``[]`` when the probe
    has none), ``bos_token=""``, ``eos_token=""``, ``add_generation_prompt=True`` and probe-specific
    variables. Template errors are swallowed (a failed probe clears flags or infers nothing, as upstream),
    so this never raises for a template that compiled.
    """
    caps = Caps()
    run = _Runner(template)
    rec_has = UsageRecorder.has_op

    # 1. typed content
    r, p = run.run("typed_content", "Is string content rendered, or is content read as a list of parts?",
                   _base_context([{"role": "user", "content": STRING_MARKER}], None))
    content = r.context["messages"][0]["content"]
    checks_for_string = rec_has(r.recorder, content, "test_is_string")
    used_as_array = rec_has(r.recorder, content, "selectattr") or rec_has(r.recorder, content, "array_access")
    p.observed = {"messages[0].content ops": sorted(r.recorder.stats(content).ops),
                  "marker in output": STRING_MARKER in r.output}
    if used_as_array:
        _set(caps, p, "supports_typed_content", True)
    if not r.success:
        _set(caps, p, "supports_string_content", False)
    elif used_as_array and STRING_MARKER not in r.output:
        _set(caps, p, "supports_string_content", False)

    if checks_for_string:
        r, p = run.run("typed_content_list", "The template tests `content is string`: is list content read?",
                       _base_context([{"role": "user", "content": []}], None))
        content = r.context["messages"][0]["content"]
        used_as_array = rec_has(r.recorder, content, "selectattr") or rec_has(r.recorder, content, "array_access")
        p.observed = {"messages[0].content ops": sorted(r.recorder.stats(content).ops)}
        if used_as_array and r.success:
            _set(caps, p, "supports_typed_content", True)

    # 2. system role
    r, p = run.run("system_role", "Is the system message's content read?", _base_context([
        {"role": "system", "content": "System message"},
        {"role": "user", "content": "User message"},
    ], None))
    used = r.recorder.used(r.context["messages"][0]["content"])
    p.observed = {"messages[0].content used": used}
    if not used:
        _set(caps, p, "supports_system_role", False)

    # 3. one tool call, object arguments
    r, p = run.run("tool_call_object_args", "One tool call with object arguments: are tools, calls and "
                   "argument values read?",
                   _base_context(_tool_conversation([_tool_call("call00001", {"arg": "value"})]), _probe_tools()))
    if r.success:
        msgs, tools = r.context["messages"], r.context["tools"]
        tool_calls = msgs[1]["tool_calls"]
        p.observed = {
            "tools[0].function.name used": r.recorder.used(tools[0]["function"]["name"]),
            "messages[1].tool_calls used": r.recorder.used(tool_calls),
            "messages[1].tool_calls[0].function.arguments.arg used":
                r.recorder.used(tool_calls[0]["function"]["arguments"]["arg"]),
        }
        if not r.recorder.used(tools[0]["function"]["name"]):
            _set(caps, p, "supports_tools", False)
        if not r.recorder.used(tool_calls):
            _set(caps, p, "supports_tool_calls", False)
        elif r.recorder.used(tool_calls[0]["function"]["arguments"]["arg"]):
            _set(caps, p, "supports_object_arguments", True)

    # 4. one tool call, string arguments
    if not caps.supports_object_arguments:
        r, p = run.run("tool_call_string_args", "One tool call with arguments as a JSON string: does it render, "
                       "are tools and calls read?",
                       _base_context(_tool_conversation([_tool_call("call00001", '{"arg": "value"}')]),
                                     _probe_tools()))
        if not r.success:
            _set(caps, p, "supports_tool_calls", False)
            _set(caps, p, "supports_tools", False)
        else:
            msgs, tools = r.context["messages"], r.context["tools"]
            p.observed = {"tools[0].function.name used": r.recorder.used(tools[0]["function"]["name"]),
                          "messages[1].tool_calls used": r.recorder.used(msgs[1]["tool_calls"])}
            if not r.recorder.used(tools[0]["function"]["name"]):
                _set(caps, p, "supports_tools", False)
            if not r.recorder.used(msgs[1]["tool_calls"]):
                _set(caps, p, "supports_tool_calls", False)

    # 5. parallel tool calls
    args: Any = {"arg": "value"} if caps.supports_object_arguments else '{"arg": "value"}'
    r, p = run.run("parallel_tool_calls", "Two tool calls in one message: is the second call read?",
                   _base_context(_tool_conversation([_tool_call("call00001", args),
                                                     _tool_call("call00002", copy.deepcopy(args))]),
                                 _probe_tools()))
    if not r.success:
        _set(caps, p, "supports_parallel_tool_calls", False)
    else:
        used = r.recorder.used(r.context["messages"][1]["tool_calls"][1]["function"])
        p.observed = {"messages[1].tool_calls[1].function used": used}
        if not used:
            _set(caps, p, "supports_parallel_tool_calls", False)

    # 6. preserve reasoning (judged on the output only: a test on reasoning_content is not enough)
    ctx = _base_context([
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": REASONING_PLACEHOLDER},
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
        {"role": "user", "content": "User message"},
    ], None)
    ctx.update(enable_thinking=True, preserve_thinking=True, clear_thinking=False,
               truncate_history_thinking=False, drop_thinking=False)
    r, p = run.run("preserve_reasoning", "Is reasoning of an earlier assistant turn rendered?", ctx)
    p.observed = {"placeholder in output": REASONING_PLACEHOLDER in r.output}
    if REASONING_PLACEHOLDER in r.output:
        _set(caps, p, "supports_preserve_reasoning", True)

    # 7. reasoning effort: reasoning_effort and reasoning_strength are bound to one shared value
    ctx = _base_context([{"role": "user", "content": "User message"}], None)
    ctx.update(enable_thinking=True, reasoning_effort="low")
    r, p = run.run("reasoning_effort", "Is `reasoning_effort` (or `reasoning_strength`) read?", ctx,
                   tracked_keys=("messages", "tools", "reasoning_effort"),
                   aliases={"reasoning_strength": "reasoning_effort"})
    used = r.recorder.used(r.context["reasoning_effort"])
    p.observed = {"reasoning_effort used": used}
    _set(caps, p, "supports_reasoning_effort", used)
    return CapsReport(caps, run.probes)


def probe_caps(template: ChatTemplate) -> Caps:
    """The capabilities of ``template`` (a :class:`core.analysis.result.Caps`), probed as llama.cpp's
    ``caps_get`` does; see :func:`probe_caps_report` for the probes. Never raises for a compiled template."""
    return probe_caps_report(template).caps


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
