"""Sandboxed Jinja rendering, configured as transformers' ``apply_chat_template`` configures it.

* jinja2 ``ImmutableSandboxedEnvironment`` with ``trim_blocks``, ``lstrip_blocks``, ``loopcontrols`` and the
  ``{% generation %}`` block tag (transformers' assistant-mask extension; here it only renders its body);
* globals ``raise_exception(msg)`` and ``strftime_now(fmt)`` (the clock can be pinned for tests);
* transformers' ``tojson`` (``ensure_ascii=False``, ``indent``, ``separators``, ``sort_keys``);
* resource limits: a per-render deadline and output-size cap, and a bounded ``range``.

Compiled templates are cached by source text (an LRU in memory), so re-rendering the same template with
other inputs, as the analysis and the explorer do constantly, never recompiles.

Errors: :class:`~core.errors.TemplateSyntaxError` at compile time, :class:`~core.errors.TemplateRenderError`
(and its subclasses for sandbox refusals and exceeded limits) at render time.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import io
import itertools
import json
import json.encoder
import marshal
import os
import pathlib
import pprint
import sys
import threading
import time
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import re

import jinja2
import jinja2.compiler
import jinja2.ext
import jinja2.lexer
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils
import jinja2.visitor
import markupsafe

from . import codepack
from . import memo as _memo
from . import transient
from .errors import RenderLimitError, TemplateRenderError, TemplateSecurityError, TemplateSyntaxError



@dataclass(frozen=True)
class RenderLimits:
    """Resource limits for one render.

    ``timeout_s`` (seconds of wall time), ``max_output_chars`` (characters of rendered text, also the cap on
    any single string, list or printed value a template builds — checked on the projected size, before the
    allocation), ``max_range`` (items one ``range()`` call may produce, also the cap on ``slice``/``batch``
    counts), ``max_int_bits`` (bit length of any integer arithmetic result, checked before the arithmetic),
    ``max_memory_mb`` (megabytes the process may grow by while the render runs: what the values it keeps alive
    hold, whatever their sizes one by one; resident memory sampled every :data:`MEMORY_CHECK_S` seconds, Linux).
    """

    timeout_s: float = 2.0
    max_output_chars: int = 1_000_000
    max_range: int = 100_000
    max_int_bits: int = 16_384
    max_memory_mb: int = 128


DEFAULT_LIMITS = RenderLimits()


class _TemplateRaised(Exception):
    """Raised by the template's own ``raise_exception`` call."""


class GenerationBlockExtension(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}``: renders the body unchanged (transformers' AssistantTracker
    marks assistant tokens with it; rendering is what matters here)."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        """Parse ``{% generation %}`` … ``{% endgeneration %}`` into a scope node rendering the body as is."""
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


#: Largest template source compiled, in characters (10x the largest of the 351 real templates, 18.7 KB);
#: ``$CTE_MAX_SOURCE_CHARS`` changes it.
MAX_SOURCE_CHARS = int(os.environ.get("CTE_MAX_SOURCE_CHARS") or 200_000)
#: Seconds of wall time lexing and parsing one template may take (``$CTE_COMPILE_TIMEOUT_S``).
COMPILE_TIMEOUT_S = float(os.environ.get("CTE_COMPILE_TIMEOUT_S") or 2.0)
#: Bytes the compiled-code disk cache may hold; the oldest files are removed beyond it (``$CTE_CACHE_MAX_BYTES``).
DISK_CACHE_MAX_BYTES = int(os.environ.get("CTE_CACHE_MAX_BYTES") or 256 * 1024 * 1024)
#: Sources longer than this are compiled but not written to the disk cache (compiled code is ~40x the source).
DISK_CACHE_MAX_SOURCE = 100_000


def check_source_size(name: str, source: str) -> None:
    """Raise :class:`RenderLimitError` naming the limit if ``source`` is above :data:`MAX_SOURCE_CHARS`."""
    if len(source) > MAX_SOURCE_CHARS:
        raise RenderLimitError(name, f"template source of {len(source)} characters is above {MAX_SOURCE_CHARS} "
                                     "(limit: compile size; set CTE_MAX_SOURCE_CHARS)")

_local = threading.local()
_monotonic = time.monotonic


#: Seconds between two samples of the process' resident memory during a render (see ``RenderLimits.max_memory_mb``):
#: the size checks bound each value a template builds, this bounds how many it keeps alive at once. Between two
#: samples a render can grow by what it allocates in that time; a render shorter than one never reads it.
MEMORY_CHECK_S = 0.005


def _rss_bytes() -> int | None:
    """Resident memory of this process in bytes (``/proc/self/statm``; opened each time: a descriptor kept open
    would read the parent's after a fork), or None where there is no procfs."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Deadline:
    """Per-render budget, checked from the sandbox hooks the template cannot avoid calling (attribute and
    item access, calls, arithmetic, filters, every ``for`` iteration). Ends at the render's ``timeout_s`` or,
    inside :func:`analysis_budget`, at the end of the whole analysis' budget, whichever comes first.

    ``until`` is when the hooks next call :meth:`check`: the end, or earlier, the next memory sample (the hooks
    compare one number, so sampling costs them nothing); ``end`` is the end itself."""

    __slots__ = ("limits", "until", "end", "budget", "rss0")

    def __init__(self, limits: RenderLimits):
        self.limits = limits
        now = time.monotonic()
        self.end = now + limits.timeout_s
        self.budget = getattr(_local, "budget", None)
        if self.budget is not None and self.budget.until < self.end:
            self.end = self.budget.until
        else:
            self.budget = None
        self.rss0: int | None = -1  # read at the first sample: renders shorter than one never read it
        self.until = min(self.end, now + MEMORY_CHECK_S)

    def check(self) -> None:
        now = time.monotonic()
        if now <= self.until:
            return
        if now > self.end:
            transient.hit(transient.TIME)
            if self.budget is not None:
                self.budget.exceeded = True
                raise RenderLimitError("<render>", self.budget.message())
            raise RenderLimitError("<render>", f"render took longer than {self.limits.timeout_s:g} s "
                                               "(limit: render time)")
        self.until = min(self.end, now + MEMORY_CHECK_S)
        rss = _rss_bytes()
        if rss is None or self.rss0 is None:
            self.rss0 = None  # no procfs: the time limit and the size checks only
        elif self.rss0 < 0:
            self.rss0 = rss
        elif rss - self.rss0 > self.limits.max_memory_mb * 2**20:
            raise RenderLimitError("<render>", f"memory held by the render grew above {self.limits.max_memory_mb} "
                                               "MB (limit: render memory)")


BUDGET_HINT = "set CTE_ANALYSIS_BUDGET_S or analyze(budget_s=...)"
"""How to change the analysis budget, as the budget error says it (an operator's setting: the app replaces it for
visitors of a public demo, :func:`explorer.state.for_visitor`)."""


@dataclass
class Budget:
    """Wall-clock budget of a whole analysis (every render of it). ``seconds`` given, ``until`` the
    ``time.monotonic()`` it ends at, ``exceeded`` set once a render was stopped by it."""

    seconds: float
    until: float
    exceeded: bool = False

    def message(self) -> str:
        """The one-line reason naming the limit."""
        return (f"analysis took longer than its budget of {self.seconds:g} s (limit: analysis budget; "
                f"{BUDGET_HINT})")

    def check(self) -> None:
        """Raise :class:`RenderLimitError` (and mark ``exceeded``) if the budget is spent."""
        if time.monotonic() > self.until:
            self.exceeded = True
            transient.hit(transient.TIME)
            raise RenderLimitError("<analysis>", self.message())


@contextlib.contextmanager
def analysis_budget(seconds: float | None) -> Iterator[Budget | None]:
    """Context manager: every render on this thread inside the block ends by ``seconds`` from now (None: no
    budget). Nested budgets keep the earlier end. Yields the :class:`Budget` (its ``exceeded`` tells whether
    a render was stopped by it)."""
    previous = getattr(_local, "budget", None)
    if seconds is None:
        yield previous
        return
    budget = Budget(seconds, time.monotonic() + seconds)
    if previous is not None and previous.until < budget.until:
        budget = previous
    _local.budget = budget
    try:
        yield budget
    finally:
        _local.budget = previous


def _limit_error(what: str, limit: Any, name: str) -> RenderLimitError:
    return RenderLimitError("<render>", f"{what} above {limit} (limit: {name})")


_END = object()


def _leaf_size(v: Any) -> int | None:
    """Printed size of a scalar (None for a container)."""
    if isinstance(v, str):
        return len(v) + 2
    if isinstance(v, bool) or v is None:
        return 4
    if isinstance(v, int):
        return v.bit_length() * 3 // 10 + 1
    if isinstance(v, (dict, list, tuple)):
        return None
    return 1


def _children(v: Any) -> Iterator[Any]:
    if isinstance(v, dict):
        return (x for kv in dict.items(v) for x in kv)
    return iter(v) if type(v) is tuple else list.__iter__(v)


def projected_text_size(value: Any, limit: int, indent: int = 0) -> int:
    """Lower bound of ``len(str(value))`` / ``len(json.dumps(value, indent=indent))`` computed without
    building it: strings count their length, numbers their digits, containers their items plus separators
    (and ``indent`` characters per nesting level and item). A container met again is counted from a memo
    (``[big] * 1000`` costs one walk of ``big``); one that contains itself is treated as endless. Returns a
    value ``> limit`` as soon as the count passes ``limit``, so the walk is O(limit) at worst."""
    first = _leaf_size(value)
    if first is not None:
        return first if first <= limit else limit + 1
    try:
        return _projected_size_recursive(value, limit, indent)
    except (_TooDeep, RecursionError):
        # nested deeper than the recursive walk goes, or called near the recursion limit: the iterative walk
        # has no depth bound
        return _projected_size_iterative(value, limit, indent)


def _projected_size_iterative(value: Any, limit: int, indent: int) -> int:
    """:func:`projected_text_size` of the container ``value``, walked with an explicit stack."""
    memo: dict[int, int] = {}
    active = {id(value)}
    frames: list[list[Any]] = [[value, 0, _children(value), 2]]
    grand = 2
    while frames:
        f = frames[-1]
        child = next(f[2], _END)
        if child is _END:
            frames.pop()
            active.discard(id(f[0]))
            memo[id(f[0])] = f[3]
            if frames:
                frames[-1][3] += f[3]
            continue
        step = 2 + (f[1] + 1) * indent
        size = _leaf_size(child)
        if size is None:
            cid = id(child)
            if cid in active:
                return limit + 1  # a container holding itself prints without end
            if cid in memo:
                size = memo[cid]
            else:
                active.add(cid)
                f[3] += step
                grand += step + 2
                frames.append([child, f[1] + 1, _children(child), 2])
                if grand > limit:
                    return limit + 1
                continue
        f[3] += step + size
        grand += step + size
        if grand > limit:
            return limit + 1
    return grand


class _TooDeep(Exception):
    pass


class _Over(Exception):
    pass


_RECURSIVE_DEPTH = 48
_chain = itertools.chain.from_iterable  # a mapping's keys and values in turn, as _children gives them


def _projected_size_recursive(value: Any, limit: int, indent: int) -> int:
    """:func:`projected_text_size` of the container ``value`` by a recursive walk: the same count in the same
    order (the same memo of containers met again, the same endless verdict for a container inside itself,
    the same stop once the running total passes ``limit``), about twice as fast for the small values templates
    print (tools, arguments). Raises :class:`_TooDeep` below :data:`_RECURSIVE_DEPTH` levels."""
    memo: dict[int, int] = {}
    active: set[int] = set()
    room = limit - 2  # limit minus the running total, which starts with the outer brackets

    def walk(v: Any, depth: int) -> int:
        nonlocal room
        if depth >= _RECURSIVE_DEPTH:
            raise _TooDeep
        vid = id(v)
        active.add(vid)
        size = 2
        step = 2 + (depth + 1) * indent
        for child in _chain(dict.items(v)) if isinstance(v, dict) else (
                v if type(v) is tuple else list.__iter__(v)):
            tc = type(child)
            if tc is str:
                n = len(child) + 2
            elif tc is bool or child is None:
                n = 4
            elif tc is int:
                n = child.bit_length() * 3 // 10 + 1
            else:
                n = _leaf_size(child)
                if n is None:
                    cid = id(child)
                    if cid in active:
                        raise _Over  # a container holding itself prints without end
                    n = memo.get(cid)
                    if n is None:
                        room -= step + 2
                        if room < 0:
                            raise _Over
                        size += step + walk(child, depth + 1)
                        continue
            size += step + n
            room -= step + n
            if room < 0:
                raise _Over
        active.discard(vid)
        memo[vid] = size
        return size

    try:
        return walk(value, 0)
    except _Over:
        return limit + 1


class _CheckedLoop:
    """What every ``for`` loop iterates: the template's iterable, with the render deadline checked on each
    item (a ``for`` over a list, a sliced range or a ``slice`` result would otherwise never check it).
    ``len`` passes through so ``loop.length`` behaves as before."""

    __slots__ = ("_it",)

    def __init__(self, it: Any):
        self._it = it

    def __iter__(self) -> Any:
        d = _ENV._deadline
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

    The project's environments are built with ``optimized=False`` (:func:`_make_environment`): jinja2's constant
    folder re-walked every expression at every nesting level during code generation (a third of it on the corpus)
    to precompute what a render computes anyway — same values through the same sandbox hooks and filters, so the
    analyses of all 351 corpus templates are byte-identical without it (tests/test_perf.py). It also evaluated
    filters at compile time, outside any render deadline."""

    _until: float = 0.0
    _visits: int = 0

    def visit(self, node: jinja2.nodes.Node, *args: Any, **kwargs: Any) -> Any:
        # code generation, like parsing, is bounded by the compile time limit
        self._visits += 1
        if not self._visits & 255:
            if not self._until:
                self._until = time.monotonic() + COMPILE_TIMEOUT_S
            elif time.monotonic() > self._until:
                transient.hit(transient.TIME)
                raise RenderLimitError(self.name or "<template>", f"compiling took longer than {COMPILE_TIMEOUT_S:g} s "
                                                                  "(limit: compile time; set CTE_COMPILE_TIMEOUT_S)")
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
    import string as _string

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
        limit = _ENV._limit()
        if conversion and isinstance(value, (list, tuple, dict)) and projected_text_size(value, limit) > limit:
            raise _limit_error("format field size", limit, "output size")
        return super().convert_field(value, conversion)  # type: ignore[misc]

    def format_field(self, value: Any, format_spec: str) -> Any:
        _ENV._tick()
        limit = _ENV._limit()
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

    def _limits(self) -> RenderLimits:
        # read from the thread's deadline directly, as _tick does (every environment shares it: the analysis'
        # environments read _ENV's), not through the _deadline property: one lookup per operator and filter
        d = getattr(_local, "deadline", None)
        return d.limits if d else DEFAULT_LIMITS

    def _limit(self) -> int:
        return self._limits().max_output_chars

    def _parse(self, source: str, name: str | None, filename: str | None) -> jinja2.nodes.Template:
        # The raw tree _check_syntax parsed is handed to the first compile of the same source by any environment
        # that parses alike (same lexer and extensions), so a new template is lexed and parsed once, not
        # twice. Taken, not shared: code generation and the rewriters change the tree in place.
        node = _PARSED.pop(source, None)
        if node is None or not _parses_alike(self):
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
        until = time.monotonic() + COMPILE_TIMEOUT_S

        def check() -> None:
            if time.monotonic() > until:
                transient.hit(transient.TIME)
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

    def _tick(self) -> None:
        # the hottest function of a render (every attribute, item, call, operator, filter): no property hops
        d = getattr(_local, "deadline", None)
        if d is not None and _monotonic() > d.until:
            d.check()

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


# source -> parsed tree awaiting its compile (see _LimitedSandbox._parse); a few entries, as a template is
# compiled right after it is checked.
_PARSED: "dict[str, jinja2.nodes.Template]" = {}
_PARSED_MAX = 8
_PARSED_MAX_CHARS = 500_000


def _parses_alike(env: jinja2.Environment) -> bool:
    """True when ``env`` lexes and parses exactly as the project environment (same lexer settings, whose
    Lexer jinja2 shares, and the same extensions), so a tree or a parse verdict of one holds for the other."""
    return env.lexer is _ENV.lexer and env.extensions.keys() == _ENV.extensions.keys()


def _tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # transformers' override: no HTML escaping, keys in insertion order unless asked.
    if separators is not None:
        separators = tuple(separators)
    limit = _ENV._limit()
    if isinstance(indent, int) and not isinstance(indent, bool) and indent > limit:
        raise _limit_error("tojson indent", limit, "output size")
    if isinstance(indent, str) and len(indent) > limit:
        raise _limit_error("tojson indent", limit, "output size")
    step = indent if isinstance(indent, int) else len(indent) if isinstance(indent, str) else 0
    if projected_text_size(value, limit, max(step, 0)) > limit:
        raise _limit_error("tojson result size", limit, "output size")
    if separators is None and (type(indent) is int or type(indent) is str):
        # json's indenting encoder is pure Python (a generator per container, ~10x its C encoder); this one
        # writes the same text, and hands anything it does not know to json.dumps (same result or error)
        try:
            return _indented_json(value, indent if type(indent) is str else " " * indent, ensure_ascii, sort_keys)
        except (_NotPlainJson, RecursionError):
            pass
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class _NotPlainJson(Exception):
    pass


def _json_float(f: float) -> str:
    if f != f:
        return "NaN"
    if f == float("inf"):
        return "Infinity"
    if f == float("-inf"):
        return "-Infinity"
    return float.__repr__(f)


def _indented_json(value: Any, indent: str, ensure_ascii: bool, sort_keys: bool) -> str:
    """``json.dumps(value, indent=..., ensure_ascii=..., sort_keys=...)`` (default separators) for strings,
    numbers, booleans, None, lists, tuples and dicts with str/number/bool/None keys — the same text, built by a
    recursive walk over parts. Raises :class:`_NotPlainJson` for anything else (the caller lets json decide)."""
    quote = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    out: list[str] = []
    put = out.append

    def leaf(v: Any) -> str | None:
        if isinstance(v, str):
            return quote(v)
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, int):
            return int.__repr__(v)
        if isinstance(v, float):
            return _json_float(v)
        return None

    def key_text(k: Any) -> str:
        if isinstance(k, str):
            return quote(k)
        if isinstance(k, float):
            return quote(_json_float(k))
        if k is True:
            return '"true"'
        if k is False:
            return '"false"'
        if k is None:
            return '"null"'
        if isinstance(k, int):
            return quote(int.__repr__(k))
        raise _NotPlainJson

    def walk(v: Any, level: int) -> None:
        text = leaf(v)
        if text is not None:
            put(text)
            return
        if isinstance(v, (list, tuple)):
            if not v:
                put("[]")
                return
            newline = "\n" + indent * (level + 1)
            put("[" + newline)
            sep = "," + newline
            first = True
            for x in v:
                if first:
                    first = False
                else:
                    put(sep)
                if type(x) is str:  # the commonest item: no call
                    put(quote(x))
                else:
                    walk(x, level + 1)
            put("\n" + indent * level + "]")
        elif isinstance(v, dict):
            if not v:
                put("{}")
                return
            newline = "\n" + indent * (level + 1)
            put("{" + newline)
            sep = "," + newline
            first = True
            for k, x in (sorted(v.items()) if sort_keys else v.items()):
                if first:
                    first = False
                else:
                    put(sep)
                put((quote(k) if type(k) is str else key_text(k)) + ": ")
                if type(x) is str:
                    put(quote(x))
                else:
                    walk(x, level + 1)
            put("\n" + indent * level + "}")
        else:
            raise _NotPlainJson

    walk(value, 0)
    return "".join(out)


class _CheckedPrettyPrinter(pprint.PrettyPrinter):
    """pprint whose printing of every element passes the render's time and memory check: it prints each subtree
    again at each level it descends (nested values cost size x depth) and a dict's key widens the indent of every
    line under it, all in the stdlib's code, where no sandbox hook runs."""

    def format(self, object: Any, context: Any, maxlevels: Any, level: Any) -> Any:  # noqa: A002 - stdlib's name
        _ENV._tick()
        return super().format(object, context, maxlevels, level)


class _CappedText(io.StringIO):
    """The pprint stream: refuses text past the output cap as it is written (indents can multiply the input)."""

    def __init__(self, limit: int):
        super().__init__()
        self._left = limit

    def write(self, s: str) -> int:
        self._left -= len(s)
        if self._left < 0:
            raise _limit_error("pprint filter result size", _ENV._limit(), "output size")
        return super().write(s)


def _pprint(value: Any) -> str:
    """jinja2's ``pprint`` filter (``pprint.pformat``), through :class:`_CheckedPrettyPrinter`."""
    out = _CappedText(_ENV._limit())
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
    limit = _ENV._limit()
    out = list(start)
    for x in iterable:
        _ENV._tick()
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
        limit = _ENV._limit()
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
        if isinstance(n, int) and n > _ENV._limits().max_range:
            raise _limit_error(f"{name} count", _ENV._limits().max_range, "range size")
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
        d = getattr(_local, "deadline", None)  # _ENV._tick() and _ENV._limit(), inlined: every filter call
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
        limit = _ENV._limit()
        if projected_text_size(value, limit) > limit:
            raise _limit_error("printed value size", limit, "output size")
    return value


def _raise_exception(message: Any = "") -> None:
    raise _TemplateRaised(str(message))


@dataclass
class Clock:
    """Source of ``strftime_now``; ``fixed`` pins the date (tests and reproducible renders)."""

    fixed: _dt.datetime | None = None

    def now(self) -> _dt.datetime:
        """The pinned ``fixed`` datetime, else the current local time (naive ``datetime``)."""
        return self.fixed or _dt.datetime.now()


_clock = Clock()


def pin_clock(when: _dt.datetime | None) -> _dt.datetime | None:
    """Pin (or with ``None`` unpin) the date every template's ``strftime_now`` and the request path's
    ``datetime`` / ``date_string`` see. Returns the previous pin (``None`` when the clock was live), so a caller
    can restore it; :func:`pinned_clock` does that for a block."""
    previous, _clock.fixed = _clock.fixed, when
    return previous


@contextlib.contextmanager
def pinned_clock(when: _dt.datetime | None) -> Iterator[None]:
    """Context manager: the clock pinned to ``when`` inside the block, the previous pin restored after it."""
    previous = pin_clock(when)
    try:
        yield
    finally:
        pin_clock(previous)


def now() -> _dt.datetime:
    """What templates see as "now": the pinned datetime if any (tests, reproducible renders), else local time."""
    return _clock.now()


def _strftime_now(fmt: str) -> str:
    return _clock.now().strftime(fmt)


def _make_environment() -> _LimitedSandbox:
    env = _LimitedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationBlockExtension, jinja2.ext.loopcontrols],
        finalize=_checked_print,
        optimized=False,
    )
    env.filters["tojson"] = _tojson
    env.filters["pprint"] = _pprint
    env.filters["sum"] = _sum
    for name in ("center", "indent", "wordwrap", "truncate"):
        env.filters[name] = _width_checked(env.filters[name])
    for name, fn in list(env.filters.items()):
        env.filters[name] = _size_checked(name, fn)
    env.filters[LOOP_FILTER] = _CheckedLoop
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


_ENV = _make_environment()


def normalize_source(source: str) -> str:
    """Source as llama.cpp's lexer sees it: CRLF and lone CR become LF, one trailing ``\\n`` removed.
    All substring tests (workarounds, handler detection) use this form."""
    s = source.replace("\r\n", "\n").replace("\r", "\n")
    return s[:-1] if s.endswith("\n") else s


# Bump when the code generator or environment changes what compiled code looks like (edits of this file are
# picked up automatically: its digest is part of every cache key).
_CODEGEN_VERSION = "4"


def _disk_cache_dir() -> pathlib.Path | None:
    """Where compiled templates persist across restarts: ``$CTE_CACHE_DIR`` or ``~/.cache/chat-template-explorer``;
    ``CTE_NO_DISK_CACHE=1`` disables it."""
    if os.environ.get("CTE_NO_DISK_CACHE") == "1":
        return None
    base = os.environ.get("CTE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chat-template-explorer")
    return pathlib.Path(base) / "jinja"


@functools.lru_cache(maxsize=None)
def module_digest(path: str) -> str:
    """sha256 prefix of a source file's bytes ("" if unreadable): part of compiled-code cache keys, so editing
    a module that shapes code generation (this one, an AST rewriter) invalidates what it compiled."""
    try:
        return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def _cache_hash(source: str, env_tag: str = "") -> Any:
    tag = f"{_CODEGEN_VERSION}|{jinja2.__version__}|{sys.version_info[:2]}|{module_digest(__file__)}|{env_tag}|".encode()
    return hashlib.sha256(tag + source.encode("utf-8", "surrogatepass"))


def _cache_key(source: str, env_tag: str = "") -> str:
    return _cache_hash(source, env_tag).hexdigest()


_CODE_MEMO: "dict[tuple[str, str], Any]" = {}
_CODE_MEMO_MAX = 1024


def compiled_code(env: jinja2.Environment, source: str, env_tag: str = "") -> Any:
    """Python code object of ``source`` compiled by ``env`` (jinja2 ``Environment.compile``), memoized in
    memory and in the disk cache (see :func:`_disk_cache_dir`; stored by :mod:`core.codepack`) under
    ``env_tag`` — a string naming the environment's code-generation configuration (and a digest of any module
    that customises parsing or code generation). Loading marshalled code is ~10x cheaper than jinja2's compile
    (lexing, parsing, code generation, Python ``compile``). Raises ``jinja2.TemplateSyntaxError`` (and ``RecursionError``) as
    ``env.compile`` does; failures are not cached."""
    key = (env_tag, source)
    code = _CODE_MEMO.get(key)
    if code is not None:
        return code
    directory = _disk_cache_dir()
    pack = codepack.pack_for(str(directory)) if directory is not None else None
    digest = _cache_hash(source, env_tag).digest() if pack is not None else b""
    if pack is not None:
        data = pack.get(digest)
        if data is not None:
            try:
                code = marshal.loads(data)
            except (ValueError, EOFError, TypeError):
                code = None
    if code is None:
        code = env.compile(source)
        if pack is not None and len(source) <= DISK_CACHE_MAX_SOURCE:
            try:
                data = marshal.dumps(code)
                try:
                    pack.put(digest, data)
                except FileNotFoundError:  # the first entry of a new cache directory
                    os.makedirs(directory, exist_ok=True)
                    pack.put(digest, data)
                _note_disk_write(directory)
                if _parses_alike(env):  # lets _check_syntax of a later process skip its parse
                    _note_parsed(directory, source)
            except OSError:
                pass  # a read-only or full cache only costs speed
    if len(_CODE_MEMO) >= _CODE_MEMO_MAX:
        _CODE_MEMO.pop(next(iter(_CODE_MEMO)))
    _CODE_MEMO[key] = code
    return code


_disk_writes = 0


def _note_disk_write(directory: pathlib.Path) -> None:
    """Prune the disk cache on the first write of the process and every 32nd after it."""
    global _disk_writes
    if _disk_writes % 32 == 0:
        prune_disk_cache(directory, DISK_CACHE_MAX_BYTES)
    _disk_writes += 1


def prune_disk_cache(directory: pathlib.Path | None = None, max_bytes: int | None = None) -> int:
    """Delete the least recently written compiled-code files of ``directory`` (default: the disk cache)
    until its code store (:mod:`core.codepack`: pack and index, removed together) and parse log
    (:data:`PARSED_LOG`) take at most ``max_bytes`` (default :data:`DISK_CACHE_MAX_BYTES`); deletes the
    ``*.bin`` files and ``*.ok`` syntax markers older versions wrote (one per template, no longer read) and
    leftover ``*.tmp`` files older than an hour. Returns the number of files removed; never raises."""
    directory = directory or _disk_cache_dir()
    limit = DISK_CACHE_MAX_BYTES if max_bytes is None else max_bytes
    if directory is None:
        return 0
    removed = 0
    try:
        entries = []
        now = time.time()
        for e in os.scandir(directory):
            st = e.stat()
            if e.name.endswith(".tmp") and now - st.st_mtime > 3600:
                os.unlink(e.path)
                removed += 1
            elif e.name.endswith((".bin", ".ok")):  # what older versions wrote, one file per template: never read
                with contextlib.suppress(FileNotFoundError):  # now, and scanning thousands of them slows every prune
                    os.unlink(e.path)
                    removed += 1
            elif e.name == PARSED_LOG:
                entries.append((st.st_mtime, st.st_size, e.path))
            elif e.name == codepack.PACK:  # the code store goes as a whole, with its index
                index = os.path.join(directory, codepack.INDEX)
                entries.append((st.st_mtime, st.st_size + (os.path.getsize(index) if os.path.exists(index) else 0),
                                e.path, index))
        total = sum(e[1] for e in entries)
        for _, size, *paths in sorted(entries):
            if total <= limit:
                break
            for p in paths:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)
                    removed += 1
            total -= size
    except OSError:
        pass
    return removed


#: Append-only list of the sources known to parse (one digest a line) in the disk cache directory: the analysis
#: only compiles with its probe environment, whose entries :func:`_check_syntax` cannot name without importing the
#: analysis. Appending a line costs a few µs; creating one empty marker file per template, as before, cost
#: ~0.5 ms of system time on this machine's file system.
PARSED_LOG = "parsed.log"
_PARSED_LOG_MAX_BYTES = 4 * 1024 * 1024  # ~120k sources; past it the list starts over (costs only re-parses)
_parsed_known: "dict[str, set[str]]" = {}  # directory -> digests read from its log (and appended by us)
_parsed_lock = threading.Lock()


def _parsed_digest(source: str) -> str:
    return _cache_key(source, "parsed")[:32]


def _parsed_set(directory: pathlib.Path) -> "set[str]":
    """The digests of ``directory``'s parse log, read once per process (a source that parsed always parses,
    so an entry never goes stale; one appended by another process later is only a missed shortcut)."""
    key = str(directory)
    known = _parsed_known.get(key)
    if known is None:
        try:
            with open(os.path.join(key, PARSED_LOG), "rb") as f:
                known = {line.decode("ascii", "replace") for line in f.read().split(b"\n") if len(line) == 32}
        except OSError:
            known = set()
        with _parsed_lock:
            known = _parsed_known.setdefault(key, known)
    return known


def _is_parsed(directory: pathlib.Path, source: str) -> bool:
    """True when ``directory``'s parse log lists ``source``."""
    return _parsed_digest(source) in _parsed_set(directory)


def _note_parsed(directory: pathlib.Path, source: str) -> None:
    """Append ``source``'s digest to ``directory``'s parse log (one ``write`` of 33 bytes with ``O_APPEND``, so
    lines of concurrent writers do not interleave). Raises ``OSError`` as the file system does."""
    digest = _parsed_digest(source)
    known = _parsed_set(directory)
    if digest in known:
        return
    path = os.path.join(directory, PARSED_LOG)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size > _PARSED_LOG_MAX_BYTES:
            os.ftruncate(fd, 0)
        os.write(fd, digest.encode("ascii") + b"\n")
    finally:
        os.close(fd)
    known.add(digest)


def template_from_code(env: jinja2.Environment, code: Any) -> jinja2.Template:
    """A jinja2 ``Template`` of ``env`` running ``code`` (from :func:`compiled_code`)."""
    return env.template_class.from_code(env, code, env.make_globals(None), None)


def _load_compiled(source: str) -> jinja2.Template:
    """Compile ``source`` with the project environment, through :func:`compiled_code`'s caches."""
    return template_from_code(_ENV, compiled_code(_ENV, source))


@functools.lru_cache(maxsize=512)
def _compile(source: str, name: str) -> jinja2.Template:
    try:
        return _load_compiled(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateSyntaxError(name, e.message or str(e), e.lineno) from None
    except RecursionError:
        raise TemplateSyntaxError(name, "template nests too deeply to compile") from None
    except SyntaxError as e:
        # Python refused the generated code (a macro naming an argument twice; ifs nested past Python's 100
        # indentation levels); its line number is one of the generated source, which means nothing to the
        # template's author and moves whenever the code generator changes, so it is left out
        raise TemplateSyntaxError(name, f"the template compiles to code Python refuses: {e.msg}") from None


@functools.lru_cache(maxsize=1024)
def _check_syntax(source: str, name: str) -> None:
    """Raise :class:`TemplateSyntaxError` if ``source`` does not parse. Skipped when compiled code for it is
    already memoized or on disk (it parsed before); otherwise the tree is kept for the first compile (one
    parse per template, see ``_LimitedSandbox._parse``). Errors found only by code generation (an unknown filter)
    surface at the first render, as the same error class."""
    if ("", source) in _CODE_MEMO:
        return
    directory = _disk_cache_dir()
    if directory is not None and (_is_parsed(directory, source)
                                  or codepack.pack_for(str(directory)).has(_cache_hash(source).digest())):
        return
    try:
        node = _ENV.parse_raw(source, name)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateSyntaxError(name, e.message or str(e), e.lineno) from None
    except RecursionError:
        raise TemplateSyntaxError(name, "template nests too deeply to parse") from None
    if len(source) > _PARSED_MAX_CHARS:  # a huge tree is not kept waiting: its compile parses again
        return
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)), None)
    _PARSED[source] = node


# compiled templates and parsed trees, bounded in number; emptied by core.memo.clear_caches
_memo.register_cache("compiled code", _CODE_MEMO.clear)
_memo.register_cache("parsed trees", _PARSED.clear)
_memo.register_cache("syntax checks", _check_syntax.cache_clear)
_memo.register_cache("templates", _compile.cache_clear)


def source_digest(source: str) -> str:
    """Short stable id of a template source (sha256 prefix, 16 hex chars). An analysis asks 2-3 times for the
    same source, so digests of sources up to 64 KB are memoized (1,024 of them: the corpus; at most 64 MB of
    sources held); a larger source is hashed each time."""
    if len(source) <= _DIGEST_MEMO_MAX_CHARS:
        return _small_source_digest(source)
    return _sha256_16(source)


_DIGEST_MEMO_MAX_CHARS = 65_536


def _sha256_16(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_small_source_digest = functools.lru_cache(maxsize=1024)(_sha256_16)


_memo.register_cache("source digests", _small_source_digest.cache_clear)  # it holds the sources themselves
_memo.register_cache("sandbox attribute verdicts", _SAFE_ATTRIBUTES.clear)
_memo.register_cache("parse logs read", _parsed_known.clear)  # read again on next use
_memo.register_cache("tree-walk dispatch tables", _VISIT_HANDLERS.clear)


@dataclass
class ChatTemplate:
    """A compiled chat template: ``render(context)`` → text.

    ``source`` is the Jinja text, ``name`` a label used in error messages (file name, repo id).
    Construction compiles (cached by source) and raises :class:`TemplateSyntaxError` on bad Jinja.
    """

    source: str
    name: str = "<template>"
    limits: RenderLimits = field(default=DEFAULT_LIMITS)

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise TypeError(f"template source must be str, got {type(self.source).__name__}")
        check_source_size(self.name, self.source)
        _check_syntax(self.source, self.name)

    @property
    def _compiled(self) -> jinja2.Template:
        # Compiled on first render: the analysis renders through its own environments, so compiling here too
        # would double the cold cost of every new template (a parse is a third of a compile).
        compiled = self.__dict__.get("_compiled_template")
        if compiled is None:
            compiled = self.__dict__["_compiled_template"] = _compile(self.source, self.name)
        return compiled

    @_compiled.setter
    def _compiled(self, value: jinja2.Template) -> None:
        self.__dict__["_compiled_template"] = value

    @property
    def normalized_source(self) -> str:
        """See :func:`normalize_source`."""
        return normalize_source(self.source)

    def render(self, context: dict[str, Any]) -> str:
        """Render with ``context`` as the template globals. Returns the text.

        Raises :class:`TemplateRenderError` (template raised, undefined value misuse, type errors),
        :class:`TemplateSecurityError` (sandbox refusal) or :class:`RenderLimitError`; on the first render
        :class:`TemplateSyntaxError` for errors only code generation finds (an unknown filter).
        """
        return self.render_with(self._compiled, context)  # _compiled may raise TemplateSyntaxError

    def render_with(self, compiled: jinja2.Template, context: dict[str, Any], *,
                    template_tracebacks: bool = True) -> str:
        """Render ``context`` with ``compiled`` — this template's source compiled by another environment (the
        analysis' probe and llama.cpp-compatible environments) — under this template's name and limits, as
        :meth:`render` does (same errors raised, same messages). ``template_tracebacks=False``: a failure keeps
        Python's traceback instead of jinja2's rewrite of it into template lines (which ``core.lint`` reads, and
        which costs ~0.1 ms per failure), for callers that keep only the message (the analysis' renders)."""
        deadline = _Deadline(self.limits)
        ctx = dict(context)
        ctx.setdefault("range", _bounded_range(deadline))
        previous = _ENV._deadline
        _ENV._deadline = deadline
        try:
            out: list[str] = []
            size = 0
            for chunk in (compiled.generate(ctx) if template_tracebacks else _chunks(compiled, ctx)):
                size += len(chunk)
                if size > self.limits.max_output_chars:
                    raise RenderLimitError(self.name, f"output longer than {self.limits.max_output_chars} characters "
                                                      "(limit: output size)")
                out.append(chunk)
                if _monotonic() > deadline.until:
                    deadline.check()
            return "".join(out)
        except RenderLimitError as e:
            raise RenderLimitError(self.name, e.message) from None
        except _TemplateRaised as e:
            raise TemplateRenderError(self.name, f"raise_exception: {e}") from None
        except jinja2.exceptions.SecurityError as e:
            raise TemplateSecurityError(self.name, f"sandbox refused: {e}") from None
        except RecursionError:
            raise RenderLimitError(self.name, "recursion too deep (limit: recursion depth)") from None
        except MemoryError:
            transient.hit(transient.MEMORY)  # not a verdict on the template: core/transient.py
            raise RenderLimitError(self.name, "out of memory (limit: memory)") from None
        except TemplateRenderError:
            raise
        except TypeError as e:
            if "no loader" in str(e):
                raise TemplateSecurityError(self.name, "templates may not import, include or extend other templates") from None
            raise TemplateRenderError(self.name, f"TypeError: {e}") from None
        except Exception as e:  # any other template-level failure: undefined, TypeError, …
            raise TemplateRenderError(self.name, f"{type(e).__name__}: {e}") from None
        finally:
            _ENV._deadline = previous


def _chunks(compiled: jinja2.Template, ctx: dict[str, Any]) -> Iterator[str]:
    """``compiled.generate(ctx)`` without jinja2's traceback rewrite, except for a syntax error (whose message
    the rewrite changes): the same chunks, the same exceptions."""
    try:
        yield from compiled.root_render_func(compiled.new_context(ctx))
    except jinja2.exceptions.TemplateSyntaxError:
        compiled.environment.handle_exception()


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


def apply_template(
    template: ChatTemplate,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    enable_thinking: bool = True,
    extra_context: dict[str, Any] | None = None,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    """Render the way llama.cpp's analysis does (analysis notes §2): globals in this order —
    ``messages``, ``bos_token``/``eos_token``, ``enable_thinking``, ``tools`` only when non-empty,
    each ``extra_context`` key, and ``add_generation_prompt`` **only when true** (otherwise undefined).

    Raises what :meth:`ChatTemplate.render` raises.
    """
    ctx: dict[str, Any] = {
        "messages": messages,
        "bos_token": bos_token,
        "eos_token": eos_token,
        "enable_thinking": enable_thinking,
    }
    if tools:
        ctx["tools"] = tools
    if extra_context:
        ctx.update(extra_context)
    if add_generation_prompt:
        ctx["add_generation_prompt"] = True
    return template.render(ctx)
