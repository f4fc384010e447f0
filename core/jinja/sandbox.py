"""The sandbox: jinja2's ``ImmutableSandboxedEnvironment`` with every render limit of :mod:`core.jinja.limits`
enforced from the hooks a template cannot avoid calling.

Attribute and item access, calls, arithmetic, filters and every ``for`` iteration check the render deadline; an
operation that can build a large value (repetition, concatenation, ``%`` and ``str.format`` widths, padding and
``replace``/``join``/``wordwrap``, printing a container) is refused from its projected size before the value is
built; lexing, parsing and code generation are bounded by the compile time limit; dunder attributes and refused
attributes fail loudly. :func:`core.jinja.hf.make_environment` configures it as transformers does.
"""

from __future__ import annotations

import functools
import io
import pprint
import re
import string as _string
import time
import types
from typing import Any, Callable, Iterator

import jinja2
import jinja2.compiler
import jinja2.lexer
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils
import markupsafe

from .. import memo as _memo
from ..errors import RenderLimitError
from .limits import (COMPILE_TIMEOUT_S, DEFAULT_LIMITS, _Deadline, _limit_error, _local, _monotonic, starved_until,
                     check_source_size, current_limits, output_limit, projected_text_size, tick, time_limit_hit)


class _CheckedLoop:
    """What every ``for`` loop iterates: the template's iterable, with the render deadline checked on each
    item (a ``for`` over a list, a sliced range or a ``slice`` result would otherwise never check it).
    ``len`` passes through so ``loop.length`` behaves as before."""

    __slots__ = ("_it",)

    def __init__(self, it: Any):
        self._it = it

    def __iter__(self) -> Any:
        d = getattr(_local, "deadline", None)
        if d is None:
            yield from self._it
            return
        check = d.check
        for i, x in enumerate(self._it):
            if not i & 7:  # every 8th item: an empty iteration costs far less than reading the clock
                check()
            yield x

    def __len__(self) -> int:
        return len(self._it)


LOOP_FILTER = "ct_checked_loop"
"""Name of the filter every ``for`` iterable is wrapped in (by :func:`rewrite_loops`)."""


def rewrite_loops(tree: jinja2.nodes.Template) -> jinja2.nodes.Template:
    """Wrap every ``for`` loop's iterable in :data:`LOOP_FILTER`, so the loop checks the deadline whatever else
    the iterable is wrapped in (environments with their own ``_parse`` rewriting call this last). Changes
    ``tree`` in place and returns it. Only ``For.iter`` changes, so collecting the loops and wrapping each
    is all a tree transformer would do, without rebuilding every field of every node."""
    for node in _loops(tree):
        node.iter = jinja2.nodes.Filter(node.iter, LOOP_FILTER, [], [], None, None, lineno=node.lineno)
    return tree


def _loops(tree: jinja2.nodes.Node) -> list[jinja2.nodes.For]:
    """Every ``For`` node of ``tree`` (``tree.find_all(For)``, in another order), without walking expressions:
    jinja2's parser makes a ``for`` only as a statement, and no expression holds a statement (tested on the
    corpus), so the walk skips every ``Expr`` subtree — most of a chat template's nodes."""
    found = []
    for_cls, expr_cls = jinja2.nodes.For, jinja2.nodes.Expr
    stack = [tree]
    while stack:
        node = stack.pop()
        if type(node) is for_cls:
            found.append(node)
        for child in _child_nodes(node):
            if not isinstance(child, expr_cls):
                stack.append(child)
    return found


def _child_nodes(node: jinja2.nodes.Node) -> list[Any]:
    """The nodes ``node.iter_child_nodes()`` yields, in its order, as a list: each field in turn, a list field
    item by item (one loop here instead of jinja2's two nested generators per node; our walks visit every node)."""
    out = []
    node_cls = jinja2.nodes.Node
    for name in node.fields:
        item = getattr(node, name, None)
        if isinstance(item, list):
            out.extend(x for x in item if isinstance(x, node_cls))
        elif isinstance(item, node_cls):
            out.append(item)
    return out


def _dependencies(nodes: Any) -> tuple[set[str], set[str]]:
    """Names of the filters and of the tests applied in ``nodes`` and their subtrees, not looking inside
    ``{% block %}`` bodies: what jinja2's ``DependencyFinderVisitor`` collects (one walk instead of a visitor call
    per node; the names are sets, so the order of the walk does not matter)."""
    filters: set[str] = set()
    tests: set[str] = set()
    filter_cls, test_cls, block_cls = jinja2.nodes.Filter, jinja2.nodes.Test, jinja2.nodes.Block
    stack = list(nodes)
    while stack:
        node = stack.pop()
        tp = type(node)
        if tp is block_cls:
            continue
        if tp is filter_cls:
            filters.add(node.name)
        elif tp is test_cls:
            tests.add(node.name)
        stack.extend(_child_nodes(node))
    return filters, tests


_VISIT_HANDLERS: "dict[tuple[type, type], Any]" = {}  # (generator class, node class) -> visit_<Class> or None
_MISSING = object()


class _LimitedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Compiles ``a ~ b`` to a size-checked join, so string doubling in a loop stops at the output cap
    instead of exhausting memory (jinja2 otherwise calls ``str_join`` directly); bounds code generation by the
    compile time limit.

    The project's environments are built with ``optimized=False``: jinja2's constant folder precomputes what a
    render computes anyway (same values, same hooks) at a third of code generation's cost, and it would evaluate
    filters at compile time, outside any render deadline."""

    _until: float = 0.0
    _wall0: float = 0.0
    _cpu0: float = 0.0
    _visits: int = 0

    def visit(self, node: jinja2.nodes.Node, *args: Any, **kwargs: Any) -> Any:
        # code generation, like parsing, is bounded by the compile time limit
        self._visits += 1
        if not self._visits & 255:
            if not self._until:
                self._wall0, self._cpu0 = time.monotonic(), time.thread_time()
                self._until = self._wall0 + COMPILE_TIMEOUT_S
            elif time.monotonic() > self._until:
                later = starved_until(COMPILE_TIMEOUT_S, self._wall0, self._cpu0, time.monotonic())
                if later is None:
                    time_limit_hit(COMPILE_TIMEOUT_S, self._cpu0)
                    raise RenderLimitError(self.name or "<template>", f"compiling took longer than "
                                           f"{COMPILE_TIMEOUT_S:g} s (limit: compile time; set CTE_COMPILE_TIMEOUT_S)")
                self._until = later
        # jinja2's NodeVisitor.visit, with the handler from a per-class table (no name formatting, lookup or
        # bound method per node; nothing sets visit_* methods on an instance)
        key = (type(self), type(node))
        handler = _VISIT_HANDLERS.get(key, _MISSING)
        if handler is _MISSING:
            handler = _VISIT_HANDLERS[key] = getattr(key[0], f"visit_{key[1].__name__}", None)
        if handler is not None:
            return handler(self, node, *args, **kwargs)
        return self.generic_visit(node, *args, **kwargs)

    def blockvisit(self, nodes: Any, frame: Any) -> None:
        # jinja2 opens every block with a ``pass`` line (about 27 per chat template): written here only when the
        # block's code came out empty, so the Python block is never empty either way
        start = self.stream.tell()
        try:
            for node in nodes:
                self.visit(node, frame)
        except jinja2.compiler.CompilerExit:
            pass
        if self.stream.tell() == start:
            self.writeline("pass")

    def pull_dependencies(self, nodes: Any) -> None:
        # jinja2 binds each filter and test a template uses with an eight-line try/except per name (a stub that
        # raises when called if the name is missing at render time); one statement per kind here, the same
        # bindings, the same error when a missing one is called (_LimitedSandbox.bind_dependencies): those
        # blocks were about a fifth of a chat template's generated code and of Python's compile() of it
        filters, tests = _dependencies(nodes)
        for kind, idents, names in (("filters", self.filters, filters), ("tests", self.tests, tests)):
            if not names:
                continue
            targets = []
            for name in sorted(names):
                ident = idents.get(name)
                if ident is None:
                    ident = idents[name] = self.temporary_identifier()
                targets.append(ident)
            self.writeline(f"{', '.join(targets)}, = environment.bind_dependencies({kind!r}, "
                           f"{tuple(sorted(names))!r})")

    def _plain_call(self, node: Any, frame: Any, kind: str) -> bool:
        """Write a filter or test applied with no arguments, ``t_1(<value>)``, and return True — what jinja2's
        ``_filter_test_common`` writes for it, without its context manager and argument writer — when nothing
        else goes in the call: a known function that takes no context, eval context or environment, synchronous
        code, no constant folder. Otherwise write nothing and return False (jinja2's method then runs)."""
        if (node.node is None or node.args or node.kwargs or node.dyn_args is not None
                or node.dyn_kwargs is not None or self.environment.is_async or self.optimizer is not None):
            return False
        func = getattr(self.environment, kind).get(node.name)
        if func is None or jinja2.utils._PassArg.from_obj(func) is not None:
            return False
        self.write(f"{getattr(self, kind)[node.name]}(")
        self.visit(node.node, frame)
        self.write(")")
        return True

    def visit_Filter(self, node: jinja2.nodes.Filter, frame: Any) -> None:
        # the probe environment wraps every name a template reads in a filter: ~70 per chat template
        if not self._plain_call(node, frame, "filters"):
            super().visit_Filter(node, frame)

    def visit_Test(self, node: jinja2.nodes.Test, frame: Any) -> None:
        if not self._plain_call(node, frame, "tests"):
            super().visit_Test(node, frame)

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Any) -> None:
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


_PERCENT_SPEC = re.compile(r"[-+ #0]*(\*|\d*)(?:\.(\*|\d*))?")


def _check_percent(fmt: str, limit: int) -> None:
    """Refuse a printf-style format whose width or precision (``%9999999s``, ``%.9999999d``,
    ``%(a)9999999s``, ``%*s``) could build a string above ``limit`` — before formatting. A mapping key is
    skipped the way Python reads it, counting nested parentheses (``%((a))9999999s`` has the key ``(a)``)."""
    i = fmt.find("%")
    while i != -1:
        j = i + 1
        if fmt.startswith("%", j):  # "%%" is a literal percent sign
            i = fmt.find("%", j + 1)
            continue
        if fmt.startswith("(", j):
            level = 0
            while j < len(fmt):
                level += {"(": 1, ")": -1}.get(fmt[j], 0)
                j += 1
                if level == 0:
                    break
        m = _PERCENT_SPEC.match(fmt, j)
        for g in m.groups():
            if g == "*" or (g and int(g) > limit):
                raise _limit_error("printf-style width/precision", limit, "output size")
        i = fmt.find("%", max(m.end(), i + 1))


def _check_format_spec(fmt: str, limit: int, depth: int = 0) -> None:
    """Refuse a ``str.format`` string whose field widths/precisions exceed ``limit`` (``{:>999999999}``)."""
    try:
        fields = list(_string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises its own error
    for _lit, _name, spec, _conv in fields:
        if spec:
            if any(int(d) > limit for d in re.findall(r"\d+", spec)):
                raise _limit_error("format width/precision", limit, "output size")
            if "{" in spec and depth < 2:
                _check_format_spec(spec, limit, depth + 1)


_NUMBER = re.compile(r"\d+")


class _LimitedFormatterMixin:
    """``str.format`` as the sandbox runs it, with each field's format spec checked once its nested fields are
    resolved (``'{0:>{1}}'.format(x, '999999999')``: the width arrives as a string argument), every value's
    printed size projected before ``!r``/``!s`` or formatting builds it, and the text built so far counted."""

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self._cte_built = 0
        return super().vformat(format_string, args, kwargs)  # type: ignore[misc]

    def convert_field(self, value: Any, conversion: Any) -> Any:
        limit = output_limit()
        if conversion and isinstance(value, (list, tuple, dict)) and projected_text_size(value, limit) > limit:
            raise _limit_error("format field size", limit, "output size")
        return super().convert_field(value, conversion)  # type: ignore[misc]

    def format_field(self, value: Any, format_spec: str) -> Any:
        tick()
        limit = output_limit()
        if any(int(n) > limit for n in _NUMBER.findall(str(format_spec))):
            raise _limit_error("format width/precision", limit, "output size")
        if isinstance(value, (list, tuple, dict)) and projected_text_size(value, limit) > limit:
            raise _limit_error("format field size", limit, "output size")
        out = super().format_field(value, format_spec)  # type: ignore[misc]
        self._cte_built = getattr(self, "_cte_built", 0) + len(out)
        if self._cte_built > limit:
            raise _limit_error("str.format result size", limit, "output size")
        return out


class _LimitedFormatter(_LimitedFormatterMixin, jinja2.sandbox.SandboxedFormatter):
    pass


class _LimitedEscapeFormatter(_LimitedFormatterMixin, jinja2.sandbox.SandboxedEscapeFormatter):
    pass


def _check_args_size(args: Any, limit: int) -> None:
    for a in args:
        if isinstance(a, (list, tuple, dict)) and projected_text_size(a, limit) > limit:
            raise _limit_error("printed argument size", limit, "output size")


# (environment class, object type, attribute) -> is_safe_attribute verdict (_LimitedSandbox._attribute_is_safe)
_SAFE_ATTRIBUTES: "dict[tuple[type, type, Any], bool]" = {}

PLAIN_STR_TYPES: "set[type]" = {str}
"""Types whose ``a + b`` is exactly ``str.__add__`` (a plain ``str`` result): ``str`` and subclasses that do not
override it (the analysis' tracked strings add themselves). ``markupsafe.Markup`` is not one: it escapes."""


class _LimitedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Immutable sandbox whose attribute access, calls, arithmetic, filters and loops check the active
    render budget, and whose operations that can build a large value check its projected size first."""

    code_generator_class = _LimitedCodeGenerator
    intercepted_binops = frozenset(["*", "**", "+", "%"])

    # per thread: the app renders on several threads at once
    @property
    def _deadline(self) -> _Deadline | None:
        return getattr(_local, "deadline", None)

    @_deadline.setter
    def _deadline(self, value: _Deadline | None) -> None:
        _local.deadline = value

    # the thread's deadline, read directly (every environment shares it), not through the _deadline property: one
    # lookup per operator and filter; _tick is the hottest function of a render
    _limits = staticmethod(current_limits)
    _limit = staticmethod(output_limit)
    _tick = staticmethod(tick)

    def _parse(self, source: str, name: str | None, filename: str | None) -> jinja2.nodes.Template:
        # The raw tree check_syntax parsed is handed to the first compile of the same source by any environment
        # that parses alike (same lexer and extensions), so a new template is lexed and parsed once, not
        # twice. Taken, not shared: code generation and the rewriters change the tree in place.
        kept = _PARSED.pop(source, None)
        if kept is not None and parses_alike(self, kept[0]):
            node = kept[1]
        else:
            node = super()._parse(source, name, filename)
        return rewrite_loops(self._rewrite_tree(node))

    def parse_raw(self, source: str, name: str | None = None) -> jinja2.nodes.Template:
        """The template's tree as jinja2 parses it (time-limited lexing), before any rewriting."""
        return jinja2.Environment._parse(self, source, name, None)

    def _rewrite_tree(self, tree: jinja2.nodes.Template) -> jinja2.nodes.Template:
        """Hook for subclasses rewriting the parsed template; the loop checks are added after it."""
        return tree

    def _tokenize(self, source: str, name: str | None, filename: str | None = None,
                  state: str | None = None) -> jinja2.lexer.TokenStream:
        # Lexing and parsing are pure Python driven by this token stream: checking the clock as tokens are
        # consumed bounds the whole parse (code generation and Python's compile are linear in its result).
        # Built as jinja2's Environment._tokenize and Lexer.tokenize build it, with the clock check between
        # the raw tokenizer and jinja2's token wrapper: one generator more per token, not two plus a stream.
        check_source_size(name or "<template>", source)
        source = self.preprocess(source, name, filename)
        lexer = self.lexer
        wall0, cpu0 = time.monotonic(), time.thread_time()
        until = wall0 + COMPILE_TIMEOUT_S

        def check() -> None:
            nonlocal until
            now = time.monotonic()
            if now > until:
                later = starved_until(COMPILE_TIMEOUT_S, wall0, cpu0, now)
                if later is not None:
                    until = later
                    return
                time_limit_hit(COMPILE_TIMEOUT_S, cpu0)
                raise RenderLimitError(name or "<template>", f"compiling took longer than {COMPILE_TIMEOUT_S:g} s "
                                                             "(limit: compile time; set CTE_COMPILE_TIMEOUT_S)")

        raw = lexer.tokeniter(source, name, filename, state)

        def timed() -> Iterator[tuple[int, str, str]]:
            for i, tok in enumerate(raw):
                if not i & 255:
                    check()
                yield tok

        stream = jinja2.lexer.TokenStream(lexer.wrap(timed(), name, filename), name, filename)
        for ext in self.iter_extensions():
            stream = ext.filter_stream(stream)
            if not isinstance(stream, jinja2.lexer.TokenStream):
                stream = jinja2.lexer.TokenStream(stream, name, filename)
        return stream

    def bind_dependencies(self, kind: str, names: tuple[str, ...]) -> list[Callable[..., Any]]:
        """What compiled code binds the filters (``kind`` "filters") or tests ("tests") ``names`` to at the
        start of a render, in order: the environment's function of that name, or :meth:`missing_dependency`'s
        stub when it has none (jinja2's generated code binds each the same way, one ``try``/``except`` each)."""
        table = getattr(self, kind)
        return [table.get(name) or self.missing_dependency(kind, name) for name in names]

    @staticmethod
    def missing_dependency(kind: str, name: str) -> Callable[..., Any]:
        """What compiled code binds a filter or test to when the environment has none of that name at render
        time (``kind`` "filters" or "tests"): a function raising jinja2's ``TemplateRuntimeError`` "No filter
        named 'x' found." when called, as jinja2's own generated stub does."""

        @jinja2.utils.internalcode
        def missing(*unused: Any) -> Any:
            raise jinja2.exceptions.TemplateRuntimeError(f"No {kind[:-1]} named {name!r} found.")

        return missing

    def checked_concat(self, parts: Any) -> str:
        self._tick()
        limit = self._limit()
        if sum(projected_text_size(p, limit) if not isinstance(p, str) else len(p) for p in parts) > limit:
            raise _limit_error("string length", limit, "output size")
        out = "".join(map(str, parts))
        if len(out) > limit:
            raise _limit_error("string length", limit, "output size")
        return out

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # jinja2 returns a silent Undefined for a refused attribute; refuse loudly instead, so a payload
        # never renders as "" and the user sees what the template tried to do.
        raise jinja2.exceptions.SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is not allowed")

    def getattr(self, obj: Any, attribute: str) -> Any:
        self._tick()
        if attribute in ("format", "format_map") and isinstance(obj, str):
            # the sandbox hands back its own wrapper of str.format (no __self__ for call() to see)
            _check_format_spec(obj, self._limit())
        if isinstance(attribute, str) and attribute.startswith("__"):
            # No chat template needs dunder attributes; refusing them all (even missing ones) makes every
            # introspection attempt fail loudly instead of rendering as an empty Undefined.
            raise jinja2.exceptions.SecurityError(f"access to attribute {attribute!r} is not allowed")
        # jinja2's sandboxed member read (the attribute, else the item of that name, else undefined; str.format
        # wrapped), with the attribute's safety verdict cached per type (see _attribute_is_safe)
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                return self.undefined(obj=obj, name=attribute)
        fmt = self.wrap_str_format(value)
        if fmt is not None:
            return fmt
        if self._attribute_is_safe(obj, attribute, value):
            return value
        return self.unsafe_undefined(obj, attribute)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """jinja2's sandboxed ``str.format`` / ``format_map`` (same arguments and errors), through
        :class:`_LimitedFormatterMixin`: widths and precisions are checked whatever type gave them."""
        if not isinstance(value, (types.MethodType, types.BuiltinMethodType)) \
                or value.__name__ not in ("format", "format_map"):
            return None
        owner = value.__self__
        if not isinstance(owner, str):
            return None
        owner_type = type(owner)
        formatter: Any = (_LimitedEscapeFormatter(self, escape=owner.escape) if isinstance(owner, markupsafe.Markup)
                          else _LimitedFormatter(self))
        is_map = value.__name__ == "format_map"

        def wrapper(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs:
                    raise TypeError("format_map() takes no keyword arguments")
                if len(args) != 1:
                    raise TypeError(f"format_map() takes exactly one argument ({len(args)} given)")
                args, kwargs = (), args[0]
            return owner_type(formatter.vformat(owner, args, kwargs))

        return functools.update_wrapper(wrapper, value)

    def _attribute_is_safe(self, obj: Any, attribute: str, value: Any) -> bool:
        """``self.is_safe_attribute(obj, attribute, value)``, cached per (environment class, type of ``obj``,
        ``attribute``): the verdicts of jinja2's immutable sandbox and of the project's environments depend on
        the object's type and the attribute's name only, never on the value (a member read costs ~15
        ``isinstance`` checks, some against abstract base classes, without the cache)."""
        try:
            key = (type(self), type(obj), attribute)
            return _SAFE_ATTRIBUTES[key]
        except KeyError:
            safe = bool(self.is_safe_attribute(obj, attribute, value))
            if len(_SAFE_ATTRIBUTES) >= 8192:  # names come from template sources: bounded all the same
                _SAFE_ATTRIBUTES.clear()
            _SAFE_ATTRIBUTES[key] = safe
            return safe
        except TypeError:  # an unhashable attribute (only ever a str here)
            return self.is_safe_attribute(obj, attribute, value)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self._tick()
        return super().getitem(obj, argument)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        __self._tick()
        owner = getattr(__obj, "__self__", None)
        if owner is None:  # the sandbox's wrapper of str.format keeps the bound method as __wrapped__
            owner = getattr(getattr(__obj, "__wrapped__", None), "__self__", None)
        if isinstance(owner, str):
            name = getattr(__obj, "__name__", "")
            if name == "join" and args:
                args = (_sized(args[0]), *args[1:])
            _check_str_method(owner, name, args, kwargs, __self._limit())
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        d = getattr(_local, "deadline", None)  # _tick() and _limits() in one lookup
        if d is not None and _monotonic() > d.until:
            d.check()
        limits = d.limits if d else DEFAULT_LIMITS
        limit = limits.max_output_chars
        if operator == "+" and type(left) in PLAIN_STR_TYPES and type(right) in PLAIN_STR_TYPES:
            # string building, most of a render's arithmetic: the checks below reduce to this one
            if len(left) + len(right) > limit:
                raise _limit_error("value size", limit, "output size")
            return left + right
        if operator == "*":
            seq, n = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > limit:
                raise _limit_error("string/list repetition size", limit, "output size")
            if (isinstance(left, int) and isinstance(right, int)
                    and left.bit_length() + right.bit_length() > limits.max_int_bits):
                raise _limit_error("integer product bit length", limits.max_int_bits, "integer size")
        if operator == "%" and isinstance(left, str):
            _check_percent(left, limit)
            _check_args_size(right if isinstance(right, tuple) else (right,), limit)
        if operator == "**" and isinstance(right, (int, float)):
            if abs(right) > 1000:
                raise _limit_error("exponent", 1000, "integer size")
            if (isinstance(left, int) and isinstance(right, int) and right > 0
                    and left.bit_length() * right > limits.max_int_bits):
                raise _limit_error("integer power bit length", limits.max_int_bits, "integer size")
        if operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            if len(left) + len(right) > limit:
                raise _limit_error("value size", limit, "output size")
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, (str, list)) and len(result) > limit:
            raise _limit_error("value size", limit, "output size")
        return result


def _check_str_method(owner: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], limit: int) -> None:
    """Projected size of a ``str`` method's result, refused above ``limit`` before the call: padding widths
    (center, ljust, rjust, zfill), ``expandtabs``, ``replace``, ``join``, ``format``/``format_map``."""
    values = (*args, *kwargs.values())
    if any(isinstance(a, int) and not isinstance(a, bool) and a > limit for a in values):
        raise _limit_error("string method argument", limit, "output size")
    projected = 0
    if name == "expandtabs":
        size = args[0] if args and isinstance(args[0], int) else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            projected = len(owner) + owner.count("\t") * max(size, 0)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        projected = _projected_replace(owner, args[0], args[1], args[2] if len(args) > 2 else -1)
    elif name == "join" and args:
        projected = _projected_join(owner, args[0], limit)
    elif name in ("format", "format_map"):
        _check_format_spec(owner, limit)
        _check_args_size((*args, *kwargs.values()), limit)
    if projected > limit:
        raise _limit_error(f"str.{name} result size", limit, "output size")


def _projected_replace(s: str, old: str, new: str, count: Any = -1) -> int:
    n = (len(s) + 1) if old == "" else s.count(old)
    if isinstance(count, int) and count >= 0:
        n = min(n, count)
    return len(s) + n * (len(new) - len(old))


def _sized(items: Any) -> Any:
    """``items`` as a list when it is an iterator (``map``, ``select``, ``unique`` … give generators), so a join's
    size can be projected before ``str.join`` builds it in one allocation (a 9,000-character separator between
    100,000 mapped items was 900 MB); sized values as they are. Consuming the iterator runs its filters' hooks."""
    if isinstance(items, (str, list, tuple, dict, range, _RangeView)) or not hasattr(items, "__iter__"):
        return items
    return list(items)


def _projected_join(sep: str, items: Any, limit: int) -> int:
    if not isinstance(items, (list, tuple, dict, str, _RangeView, range)):
        return 0
    n = len(items)
    total = len(sep) * max(n - 1, 0)
    if total > limit:
        return total
    for x in (items if not isinstance(items, dict) else list(items)):
        total += len(x) if isinstance(x, str) else projected_text_size(x, limit)
        if total > limit:
            break
    return total


# source -> (environment that parsed it, parsed tree awaiting its compile), see _LimitedSandbox._parse; a few
# entries, as a template is compiled right after it is checked (core.jinja.cache.check_syntax).
_PARSED: "dict[str, tuple[jinja2.Environment, jinja2.nodes.Template]]" = {}
_PARSED_MAX = 8
_PARSED_MAX_CHARS = 500_000


def parses_alike(env: jinja2.Environment, other: jinja2.Environment) -> bool:
    """True when ``env`` lexes and parses exactly as ``other`` (same lexer settings, whose Lexer jinja2 shares,
    and the same extensions), so a tree or a parse verdict of one holds for the other."""
    return env.lexer is other.lexer and env.extensions.keys() == other.extensions.keys()


def keep_parsed(env: jinja2.Environment, source: str, node: jinja2.nodes.Template) -> None:
    """Keep the raw tree ``env`` parsed from ``source`` for the first compile of it (one parse per template)."""
    if len(source) > _PARSED_MAX_CHARS:  # a huge tree is not kept waiting: its compile parses again
        return
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)), None)
    _PARSED[source] = (env, node)


class _CheckedPrettyPrinter(pprint.PrettyPrinter):
    """pprint whose printing of every element passes the render's time and memory check: it prints each subtree
    again at each level it descends (nested values cost size x depth) and a dict's key widens the indent of every
    line under it, all in the stdlib's code, where no sandbox hook runs."""

    def format(self, object: Any, context: Any, maxlevels: Any, level: Any) -> Any:  # noqa: A002 - stdlib's name
        tick()
        return super().format(object, context, maxlevels, level)


class _CappedText(io.StringIO):
    """The pprint stream: refuses text past the output cap as it is written (indents can multiply the input)."""

    def __init__(self, limit: int):
        super().__init__()
        self._left = limit

    def write(self, s: str) -> int:
        self._left -= len(s)
        if self._left < 0:
            raise _limit_error("pprint filter result size", output_limit(), "output size")
        return super().write(s)


def _pprint(value: Any) -> str:
    """jinja2's ``pprint`` filter (``pprint.pformat``), through :class:`_CheckedPrettyPrinter`."""
    out = _CappedText(output_limit())
    _CheckedPrettyPrinter(stream=out).pprint(value)
    return out.getvalue()[:-1]  # pprint() ends with the newline pformat() leaves out


@jinja2.pass_environment
def _sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """jinja2's ``sum`` filter, concatenating lists or tuples in one pass: Python's ``sum`` copies the running
    total at every item, quadratic work in C code where no hook runs (100,000 one-item lists: over 60 s)."""
    if attribute is not None:
        iterable = map(jinja2.filters.make_attrgetter(environment, attribute), iterable)
    if not isinstance(start, (list, tuple)):
        return sum(iterable, start)
    kind = list if isinstance(start, list) else tuple
    limit = output_limit()
    out = list(start)
    for x in iterable:
        tick()
        if not isinstance(x, kind):  # what start + x raises
            raise TypeError(f'can only concatenate {kind.__name__} (not "{type(x).__name__}") to {kind.__name__}')
        out.extend(x)
        if len(out) > limit:
            raise _limit_error("sum filter result size", limit, "output size")
    return out if kind is list else tuple(out)


def _width_checked(filter_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a padding/width filter so a huge width argument is refused before allocating."""

    @functools.wraps(filter_fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        limit = output_limit()
        if any(isinstance(a, int) and not isinstance(a, bool) and a > limit for a in (*args[1:], *kwargs.values())):
            raise _limit_error("filter width", limit, "output size")
        return filter_fn(*args, **kwargs)

    return wrapper


def _projected_filter_size(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], limit: int) -> int:
    """Projected result size of the filters that can amplify their input (0 when not one of them)."""
    value = args[0] if args else None
    rest = args[1:]
    if name == "indent" and isinstance(value, str):
        width = rest[0] if rest else kwargs.get("width", 4)
        w = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        return len(value) + (value.count("\n") + 1) * max(w, 0)
    if name == "wordwrap" and isinstance(value, str):
        return _projected_wordwrap(value, rest, kwargs, limit)
    if name == "replace" and isinstance(value, str) and len(rest) >= 2:
        old, new = str(rest[0]), str(rest[1])
        return _projected_replace(value, old, new, rest[2] if len(rest) > 2 else kwargs.get("count", -1))
    if name == "join":
        sep = rest[0] if rest and isinstance(rest[0], str) else kwargs.get("d", "")
        return _projected_join(sep if isinstance(sep, str) else "", value, limit)
    if name in ("string", "format", "e", "escape", "forceescape", "safe"):
        size = projected_text_size(value, limit) if not isinstance(value, str) else len(value)
        if name == "format" and isinstance(value, str):
            _check_percent(value, limit)
            _check_args_size((*rest, *kwargs.values()), limit)
        return size
    if name in ("slice", "batch"):
        n = rest[0] if rest else kwargs.get("slices", kwargs.get("linecount", 0))
        if isinstance(n, int) and n > current_limits().max_range:
            raise _limit_error(f"{name} count", current_limits().max_range, "range size")
    if name == "sum":
        start = rest[1] if len(rest) > 1 else kwargs.get("start", 0)
        if isinstance(start, (list, tuple, str)):
            return projected_text_size(value, limit)
    return 0


# the filters _projected_filter_size projects (it returns 0 for every other name)
_PROJECTED_FILTERS = frozenset({"indent", "replace", "join", "string", "format", "e", "escape", "forceescape", "safe",
                                "slice", "batch", "sum", "wordwrap"})

_WORD = re.compile(r"\S+")

#: Characters textwrap may copy while it breaks long words (see _projected_wordwrap): ~0.1-0.5 s of memmove.
WORDWRAP_MAX_WORK = 2_000_000_000


def _projected_wordwrap(value: str, rest: tuple[Any, ...], kwargs: dict[str, Any], limit: int) -> int:
    """Projected size of ``value|wordwrap(width, break_long_words, wrapstring)``, refusing first the work of
    textwrap's long-word breaking: it slices the rest of a long word once per line, len**2 / (2 * width)
    characters copied in the stdlib where no hook runs (a 990,000-character word at width 1: minutes). Each
    line break inserts ``wrapstring`` (a 100 KB wrapstring at width 1 built 883 MB in one join)."""
    args = dict(zip(("width", "break_long_words", "wrapstring", "break_on_hyphens"), rest))
    width = args.get("width", kwargs.get("width", 79))
    breaks = args.get("break_long_words", kwargs.get("break_long_words", True))
    wrap = args.get("wrapstring", kwargs.get("wrapstring"))
    if not isinstance(width, int) or width <= 0:
        return len(value)  # textwrap raises its own error
    work = 0
    if breaks:
        for m in _WORD.finditer(value):
            n = m.end() - m.start()
            if n > width:
                work += n * n // (2 * width)
        if work > WORDWRAP_MAX_WORK:
            raise _limit_error("wordwrap work (long words broken at a small width)", WORDWRAP_MAX_WORK, "render time")
    lines = len(value) // width + value.count("\n") + 1  # at most: a break every width characters
    return len(value) + lines * (len(wrap) if isinstance(wrap, str) else 2)


# text filters that print a list or dict they are given (``str(value)`` in C, or pprint's and xmlattr's and
# urlencode's own printing) before their work: ``['x' * 100000] * 3000 | upper`` printed 300 MB in one call,
# outside every hook. A list/dict value is projected first.
_PRINTING_FILTERS = frozenset({"capitalize", "center", "indent", "lower", "pprint", "replace", "striptags", "title",
                               "trim", "truncate", "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"})


def _size_checked(name: str, filter_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a filter so a result larger than the output cap stops the render: refused from its projected
    size before the call for the filters that amplify (:func:`_projected_filter_size`), checked after it for
    every other string or list result (``join`` or ``replace`` in a loop can otherwise double a string until
    memory runs out)."""

    # filters marked pass_context / pass_eval_context / pass_environment (jinja2's async-capable ones, e.g.
    # join, sum, slice) get that object before the value
    skip = 1 if jinja2.utils._PassArg.from_obj(filter_fn) is not None else 0

    projects = name in _PROJECTED_FILTERS
    prints = name in _PRINTING_FILTERS

    @functools.wraps(filter_fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        d = getattr(_local, "deadline", None)  # tick() and output_limit(), inlined: every filter call
        if d is not None and _monotonic() > d.until:
            d.check()
        limit = (d.limits if d else DEFAULT_LIMITS).max_output_chars
        if name == "join" and len(args) > skip:
            args = (*args[:skip], _sized(args[skip]), *args[skip + 1:])
        if projects and _projected_filter_size(name, args[skip:], kwargs, limit) > limit:
            raise _limit_error(f"{name} filter result size", limit, "output size")
        if prints and len(args) > skip and isinstance(args[skip], (list, tuple, dict)) \
                and projected_text_size(args[skip], limit) > limit:
            raise _limit_error(f"{name} filter input size", limit, "output size")
        result = filter_fn(*args, **kwargs)
        if isinstance(result, (str, list)) and len(result) > limit:
            raise _limit_error(f"{name} filter result size", limit, "output size")
        return result

    return wrapper


def _checked_print(value: Any) -> Any:
    """``finalize`` of the project environment: a printed list or mapping is refused from its projected text
    size before ``str()`` builds it (``{{ [big_list] * 1000 }}``); the value itself is returned unchanged."""
    if isinstance(value, (list, tuple, dict)):
        limit = output_limit()
        if projected_text_size(value, limit) > limit:
            raise _limit_error("printed value size", limit, "output size")
    return value


def _bounded_range(deadline: _Deadline) -> Callable[..., Any]:
    def _range(*args: int) -> Any:
        r = range(*args)
        if len(r) > deadline.limits.max_range:
            raise _limit_error(f"range() of {len(r)} items:", deadline.limits.max_range, "range size")
        return _RangeView(r, deadline)

    return _range


class _RangeView:
    """What ``range()`` returns inside templates: iterable (with deadline checks), ``len``-able and
    indexable like a real range, so ``range(n)|list`` and ``range(n)[0]`` keep working; a slice of it is
    again a checked view (``range(n)[:]`` would otherwise be a plain Python range)."""

    __slots__ = ("_r", "_deadline")

    def __init__(self, r: range, deadline: _Deadline):
        self._r = r
        self._deadline = deadline

    def __iter__(self) -> Any:
        check = self._deadline.check
        for x in self._r:
            check()
            yield x

    def __len__(self) -> int:
        return len(self._r)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return _RangeView(self._r[i], self._deadline)
        return self._r[i]

    def __reversed__(self) -> Any:
        return iter(_RangeView(self._r[::-1], self._deadline))

    def __contains__(self, x: Any) -> bool:
        return x in self._r


_memo.register_cache("parsed trees", _PARSED.clear)
_memo.register_cache("sandbox attribute verdicts", _SAFE_ATTRIBUTES.clear)
_memo.register_cache("tree-walk dispatch tables", _VISIT_HANDLERS.clear)
