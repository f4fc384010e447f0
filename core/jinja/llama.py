"""The llama.cpp dialect: rendering as llama.cpp's Jinja engine renders, with usage tracking for the capability
probes (:mod:`core.analysis.caps`, llama.cpp ``common/jinja/caps.cpp``).

The reference analyses were produced by llama.cpp's own engine, which differs from jinja2 on constructs real
templates use — and a differing render changes the diff — so the analysis renders the way llama.cpp does (each
case found on the corpus or checked against a build of llama.cpp's engine): ``for`` over a string fails;
``str + none`` / ``str + undefined`` concatenate ""; ``str + x`` concatenates x's text; ``list.append`` / ``pop``
work; ``map`` / ``select`` return lists; ``selectattr(attr, test)`` with two arguments, ``map('filter')``,
``unique``, ``tojson(sort_keys=true)`` fail; filters llama.cpp lacks for a value's type fail; macro arguments bind
positionally as llama.cpp binds them; ``undefined in x`` fails; members of an undefined value are undefined;
``{{ mapping }}`` / ``{{ none }}`` print nothing and ``{{ list }}`` prints its items' text. The transformers
dialect (:mod:`core.jinja.hf`) is unchanged by any of this.

Two environments, one compiled code:

* the probe environment (:func:`probe_environment`): a copy of the project's sandbox (same class, filters, tests
  and globals, :func:`core.jinja.hf.make_environment`) whose ``getattr`` / ``getitem`` record member and index
  access, whose filters and tests record their name on their input, whose method calls on tracked values run
  unrecorded (as in llama.cpp, where a builtin's internals do not count as template reads), and whose parsed
  templates are rewritten so that every variable read and every ``for`` iterable passes through a recording
  function (:mod:`core.jinja.usage`); :func:`render_tracked` is one instrumented render;
* the llama.cpp renderer (:func:`render`): an ``overlay()`` of the probe environment, so usage tracking stays
  inactive outside probe renders (its variable-read filter is a plain identity, :data:`UNTRACKED_FILTERS`), plus
  two filters: ``safe`` is a no-op (jinja2 returns ``Markup``, which then HTML-escapes every string added to it)
  and ``format`` only fills ``{}`` placeholders (``"%s" | format(x)`` stays ``"%s"``; any other ``{`` fails).

llama.cpp's undefined handling (:class:`LlamaUndefined`) and printing of non-strings (:func:`_finalize`) are
defined once here and inherited through the overlay. :func:`render` raises
:class:`~core.errors.TemplateRenderError`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable

import jinja2
import jinja2.nodes
import jinja2.runtime
import jinja2.sandbox
import jinja2.utils
import jinja2.visitor

from .. import memo as _memo
from ..errors import ChatTemplateExplorerError, RenderLimitError, TemplateRenderError
from .cache import compiled_code, module_digest, template_from_code
from .hf import make_environment
from .limits import _local, _monotonic, output_limit, projected_text_size
from .sandbox import LOOP_FILTER, _CheckedLoop, _check_str_method
from .template import ChatTemplate
from .usage import (_IDENT_FILTER, _TRACKED_TYPES, TrackedDict, TrackedList, TrackedStr, UsageRecorder, _active,
                    _identifier, _is_tracked, _state, _Suppressed, _wrap_filter)


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


def _identity(value: Any) -> Any:
    return value


UNTRACKED_FILTERS: dict[str, Callable[..., Any]] = {_IDENT_FILTER: _identity}
"""Versions of the probe rewriter's filters for an overlay of the probe environment that never records usage
(:func:`render`): same results, no recorder lookup (:func:`_identifier` runs on every variable
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
    :func:`core.jinja.hf.make_environment`) that records usage on tracked values."""
    env = make_environment()
    base_cls = type(env)
    # the base class's hooks, called directly rather than through super() (these run for every member read,
    # item, call and operator of a render)
    _base_getattr, _base_getitem = base_cls.getattr, base_cls.getitem
    _base_call, _base_binop = base_cls.call, base_cls.call_binop

    class _TrackingSandbox(base_cls):  # type: ignore[misc, valid-type]
        def getattr(self, obj: Any, attribute: str) -> Any:
            tp = type(obj)
            if ((tp is TrackedDict or tp is dict) and type(attribute) is str
                    and (attribute in _NOT_DICT_MEMBERS or _not_dict_member(attribute))):
                # A mapping's key read as a member (``message.role``), the commonest access of a render.
                # Same result as the general path below (tick, key or undefined, usage marks), without
                # the sandbox first raising and catching an AttributeError for the missing attribute.
                d = getattr(_local, "deadline", None)  # self._tick(), inlined
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
                d = getattr(_local, "deadline", None)  # self._tick(), inlined
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
                        _check_str_method(owner, __obj.__name__, args, kwargs, __self._limit())
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
    env.filters[LOOP_FILTER] = _CheckedLoop
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
    and the llama.cpp-compatible renderer (:func:`render`, an overlay of that environment)
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
    :func:`render` (inherited through ``overlay()``). Unlike the undefined type, ``finalize``
    shapes code generation, so it must stay in this module, whose digest is in :func:`probe_code_tag`."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (jinja2.Undefined, dict)):
        return ""
    if isinstance(value, (list, tuple)):
        limit = output_limit()
        if projected_text_size(value, limit) > limit:
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
    module's digest is part of it): see :func:`core.jinja.cache.compiled_code`."""
    return "probe|" + module_digest(__file__)


def probe_code(source: str) -> Any:
    """Python code of ``source`` compiled by the probe environment, through the in-memory and disk caches
    of compiled templates. The llama.cpp-compatible renderer (:func:`render`, an overlay of
    this environment with the same code generation) runs the same code. Raises jinja2's
    ``TemplateSyntaxError`` for bad Jinja."""
    return compiled_code(_probe_env(), source, probe_code_tag())


def plain_globals(template: jinja2.Template) -> jinja2.Template:
    """``template`` with its globals copied into a plain dict (returned as is): jinja2 gives a template a
    ``ChainMap`` over its environment's globals, which every render copies twice in Python (~5 µs of a ~100 µs
    analysis render). Only for templates of environments whose globals never change after they are built
    (the probe and llama.cpp-compatible environments)."""
    template.globals = dict(template.globals)
    return template


@functools.lru_cache(maxsize=512)
def _compile_tracking(source: str) -> jinja2.Template:
    return plain_globals(template_from_code(_probe_env(), probe_code(source)))


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
# rendering as llama.cpp (the analysis' renders)
# ---------------------------------------------------------------------------------------------------------


def _safe(value: Any) -> Any:
    return value


def _llama_format(value: Any, *args: Any, **kwargs: Any) -> str:
    if not isinstance(value, str):
        raise jinja2.exceptions.TemplateRuntimeError("format() first argument must be a string")
    out: list[str] = []
    i = 0
    k = 0
    n = len(value)
    while i < n:
        c = value[i]
        if c != "{":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n or value[i + 1] != "}":
            raise jinja2.exceptions.TemplateRuntimeError("format() only supports simple '{}' placeholders")
        if k >= len(args):
            raise jinja2.exceptions.TemplateRuntimeError("format(): not enough arguments")
        a = args[k]
        out.append("" if a is None or isinstance(a, jinja2.Undefined) else str(a))
        k += 1
        i += 2
    return "".join(out)


@functools.lru_cache(maxsize=1)
def _llama_env() -> Any:
    base = probe_environment()
    env = base.overlay()
    env.filters = dict(base.filters)
    env.filters["safe"] = _safe
    env.filters["format"] = _llama_format
    env.filters.update(UNTRACKED_FILTERS)  # no usage recorded here
    # undefined type and finalize: inherited from the probe environment (LlamaUndefined, _finalize)
    return env


@functools.lru_cache(maxsize=1)
def _own_names() -> tuple[str, ...]:
    """Filter and test names whose function differs from the probe environment's (``safe``, ``format``)."""
    base = probe_environment()
    env = _llama_env()
    untracked = UNTRACKED_FILTERS  # same behaviour: the probe code serves
    names = {k for k, f in env.filters.items() if base.filters.get(k) is not f and k not in untracked}
    names |= {k for k, f in env.tests.items() if base.tests.get(k) is not f}
    return tuple(sorted(names))


@functools.lru_cache(maxsize=1)
def _own_use_parts() -> "tuple[re.Pattern[str], re.Pattern[str]] | None":
    """The search of :func:`_uses_own`: the names followed by a word boundary, and what must precede them —
    whitespace, then ``|``, ``filter`` or ``is`` / ``is not`` — written backwards, to be matched on the reversed
    text from where a name starts. None when there are no names."""
    names = _own_names()
    if not names:
        return None
    name_at = re.compile("(?:" + "|".join(re.escape(n) for n in names) + r")\b")
    before_reversed = re.compile(r"\s*(?:\||\bretlif\b|(?:\bton\s+)?\bsi\b)")
    return name_at, before_reversed


def _uses_own(source: str) -> bool:
    """True when ``source`` may apply one of :func:`_own_names`: after ``|`` (filter), ``filter`` (filter block)
    or ``is`` / ``is not`` (test) — the only syntax that makes a Filter/Test node jinja2 could fold. One regex of
    that shape costs ~100 µs a template (every ``i``, ``f`` and ``|`` is a start to try); this finds the names
    first (rare, by substring search) and matches what precedes each one, reversed, on the reversed source: the
    same verdict (tests/test_compile_cache.py checks it against that regex)."""
    parts = _own_use_parts()
    if parts is None:
        return False
    name_at, before_reversed = parts
    rev = None
    for name in _own_names():
        i = source.find(name)
        while i >= 0:
            if name_at.match(source, i):
                if rev is None:
                    rev = source[::-1]
                if before_reversed.match(rev, len(source) - i):
                    return True
            i = source.find(name, i + 1)
    return False


def _code_tag() -> str:
    return "llama|" + probe_code_tag()


@functools.lru_cache(maxsize=512)
def _compile_llama(source: str) -> jinja2.Template:
    # This environment is an overlay of the probe environment that changes only runtime objects (two
    # filters, the undefined type). Code generation differs only where jinja2's optimizer folds a constant
    # through one of those filters (``"…" | safe`` becomes a Markup constant), so a source that never names
    # them runs the probe environment's compiled code (shared, disk-cached); others get their own entry.
    env = _llama_env()
    if _uses_own(source):
        code = compiled_code(env, source, _code_tag())
    else:
        code = probe_code(source)
    return plain_globals(template_from_code(env, code))


_memo.register_cache("llama.cpp templates", _compile_llama.cache_clear)  # see core.memo.clear_caches


def render(template: ChatTemplate, context: dict[str, Any], *, template_tracebacks: bool = True) -> str:
    """Render ``template`` with ``context`` as globals the way llama.cpp's engine would (within the
    template's render limits). Raises :class:`TemplateRenderError` (or a subclass) when it fails; with
    ``template_tracebacks=False`` its cause keeps Python's traceback, not jinja2's rewrite of it into template
    lines (see :meth:`ChatTemplate.render_with`)."""
    try:
        compiled = _compile_llama(template.source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateRenderError(template.name, f"syntax error: {e}") from None
    try:
        return template.render_with(compiled, context, template_tracebacks=template_tracebacks)
    except ChatTemplateExplorerError:
        raise
    except Exception as e:  # pragma: no cover - ChatTemplate.render already classifies
        raise TemplateRenderError(template.name, f"{type(e).__name__}: {e}") from None
