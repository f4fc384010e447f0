"""Usage tracking: which input values a template reads, as llama.cpp's Jinja engine records it (analysis notes §3;
``common/jinja/runtime.cpp`` / ``value.cpp``).

llama.cpp marks a value "used" when the template evaluates an identifier bound to it, reads a member or an index
of it (container and result both), calls a filter / method / test on it (the name goes into the value's ``ops``),
iterates it with ``for`` (op ``array_access`` / ``object_access``) or passes it to ``tojson`` / ``string`` (which
mark every descendant). jinja2 has no such hook, so input values are wrapped in :class:`TrackedDict` /
:class:`TrackedList` / :class:`TrackedStr` — subclasses of the plain types with their own identity, so rendering,
``tojson``, ``is string`` / ``is mapping``, ``in`` and printing behave exactly as with plain values — and the
llama.cpp dialect's environment (:mod:`core.jinja.llama`) records reads on them into the thread's
:class:`UsageRecorder`.
"""

from __future__ import annotations

import functools
import threading
from types import GeneratorType as _GeneratorType
from typing import Any, Callable

import jinja2.utils

from .limits import tick
from .sandbox import PLAIN_STR_TYPES


class UsageRecorder:
    """Records, per tracked value (keyed by object identity), whether one render used it and the operation names
    (``ops``) applied to it."""

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
PLAIN_STR_TYPES.add(TrackedStr)


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


_IDENT_FILTER = "ct_identifier"


def _identifier(value: Any) -> Any:
    """Applied to every variable read in probe renders: llama.cpp marks a value used whenever an identifier
    bound to it is evaluated (``{% set c = m.get('x') %}{% if c %}`` uses ``x``'s value)."""
    # runs for every variable read of every analysis render: _active() and mark() inlined
    rec = getattr(_state, "recorder", None)
    if rec is not None and not rec.suppressed and id(value) in rec._tracked:
        rec._used.add(id(value))
    return value
