"""Render limits: what one render may cost (time, output, range, integer size, memory), the budget of a whole
analysis or command, and the projected printed size of a value (checked before the value is built).

Every environment of :mod:`core.jinja` reads the thread's current deadline from here (``_local.deadline``, set by
:meth:`core.jinja.template.ChatTemplate.render_with`) and the thread's budget (``_local.budget``, set by
:func:`analysis_budget` / :func:`command_budget`). Exceeding a limit raises :class:`~core.errors.RenderLimitError`
naming it; an exceeded command budget raises :class:`~core.errors.AnalysisError`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

from .. import transient
from ..errors import AnalysisError, RenderLimitError


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


#: The number settings read once at import: name, type, whether 0 is allowed
NUMBER_SETTINGS = (("CTE_MAX_SOURCE_CHARS", int, False), ("CTE_COMPILE_TIMEOUT_S", float, False),
                   ("CTE_CACHE_MAX_BYTES", int, True),
                   # the app's render workers (core.isolation)
                   ("CTE_ISOLATED_TIMEOUT_S", float, False), ("CTE_ISOLATED_MEMORY_MB", int, False),
                   ("CTE_ISOLATED_WORKERS", int, False), ("CTE_ISOLATED_PER_VISITOR", int, False),
                   ("CTE_ISOLATED_RUNAWAY_CPU_S", float, False), ("CTE_ISOLATED_RUNAWAY_NICE", int, True))


def _setting_value(name: str) -> tuple[Any, str | None]:
    """``($name read as its number or None when unset, why it cannot be used or None)``."""
    raw = os.environ.get(name)
    if not raw:
        return None, None
    cast, zero_ok = next((c, z) for n, c, z in NUMBER_SETTINGS if n == name)
    kind = "whole number" if cast is int else "number"
    want = f"a {kind} of 0 or more" if zero_ok else f"a positive {kind}"
    try:
        value = cast(raw)
    except ValueError:
        return None, f"{name}={raw!r} is not {want}"
    if not (0 <= value if zero_ok else 0 < value) or not value < float("inf"):  # nan fails too
        return None, f"{name}={raw!r} is not {want}"
    return value, None


def env_number(name: str, default: Any) -> Any:
    """``$name`` (one of :data:`NUMBER_SETTINGS`) as its number, or ``default`` when unset or unusable — read at
    import, where raising would end every command in a traceback; :func:`setting_problems` names what is wrong."""
    value, problem = _setting_value(name)
    return default if value is None or problem else value


def setting_problems() -> list[str]:
    """One line for each of :data:`NUMBER_SETTINGS` that is set to something it cannot be (the command line stops
    on the first, naming the variable and its value)."""
    return [problem for name, _, _ in NUMBER_SETTINGS if (problem := _setting_value(name)[1])]


#: Largest template source compiled, in characters (10x the largest of the 351 real templates, 18.7 KB);
#: ``$CTE_MAX_SOURCE_CHARS`` changes it.
MAX_SOURCE_CHARS = env_number("CTE_MAX_SOURCE_CHARS", 200_000)
#: Seconds of wall time lexing and parsing one template may take (``$CTE_COMPILE_TIMEOUT_S``).
COMPILE_TIMEOUT_S = float(env_number("CTE_COMPILE_TIMEOUT_S", 2.0))


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


#: A time limit reached while its thread had less CPU than the limit (a loaded machine, not a long render) is moved
#: on by the CPU time the thread still has, up to this many times the limit in wall time: the limits bound the
#: work a template does, so the same template passes or fails whatever the machine's load. Work inside C code,
#: which no hook sees, is bounded by the worker's wall-clock kill (:mod:`core.isolation`), not by this.
STARVED_WALL_FACTOR = 10.0


#: The share of a time limit a thread must have used as CPU for the limit to be its own work's (not the load's).
HAD_CPU_SHARE = 0.9


def starved_until(limit_s: float, wall0: float, cpu0: float, now: float) -> float | None:
    """The later deadline a wall-clock limit of ``limit_s`` seconds, started at ``wall0`` with this thread's CPU
    time at ``cpu0``, moves on to when it passes at ``now`` on a starved thread (it used under
    :data:`HAD_CPU_SHARE` of the limit as CPU); None when the thread had its CPU (the limit is hit) or
    :data:`STARVED_WALL_FACTOR` is reached."""
    used = time.thread_time() - cpu0
    cap = wall0 + limit_s * STARVED_WALL_FACTOR
    if used >= limit_s * HAD_CPU_SHARE or now >= cap:
        return None
    return min(cap, now + limit_s - used)


def time_limit_hit(limit_s: float, cpu0: float) -> None:
    """Record a time limit of ``limit_s`` seconds that this thread (its CPU time at ``cpu0`` when the limit started)
    reached for good (:func:`starved_until` gave None): as transient (:mod:`core.transient`) only when the thread
    did not have its CPU, i.e. the limit ended at :data:`STARVED_WALL_FACTOR` times its wall time. One the thread
    reached having used its CPU is the template's own work, the same on any machine: a worker that got little of
    the machine's CPU overall (other work of the call waited) must still report it as it is — the Edit page's
    check of a runaway template said "try again" where the live render of the same text said "render time"."""
    if time.thread_time() - cpu0 < limit_s * HAD_CPU_SHARE:
        transient.hit(transient.TIME)


def rss_bytes() -> int | None:
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

    __slots__ = ("limits", "until", "end", "budget", "rss0", "wall0", "cpu0", "cap")

    def __init__(self, limits: RenderLimits):
        self.limits = limits
        now = time.monotonic()
        self.wall0, self.cpu0 = now, time.thread_time()
        self.end = now + limits.timeout_s
        self.budget = getattr(_local, "budget", None)
        self.cap = self.budget.until if self.budget is not None else float("inf")  # where a starved render stops
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
            if self.budget is not None and self.budget.moved_on(now):
                # a budget that counts CPU, on a starved thread: its end moved on; past the render's own end, the
                # render's time limit decides below
                budget, render_end = self.budget, self.wall0 + self.limits.timeout_s
                self.cap, self.end = budget.until, min(render_end, budget.until)
                if budget.until >= render_end:
                    self.budget = None
                if now <= self.end:
                    self.until = min(self.end, now + MEMORY_CHECK_S)
                    return
            later = None if self.budget is not None else starved_until(self.limits.timeout_s, self.wall0,
                                                                        self.cpu0, now)
            if later is not None and now < self.cap:
                self.end = min(later, self.cap)
                self.until = min(self.end, now + MEMORY_CHECK_S)
                return
            if self.budget is not None:
                transient.hit(transient.TIME)   # the analysis' budget is wall time
                self.budget.exceeded = True
                raise RenderLimitError("<render>", self.budget.message())
            time_limit_hit(self.limits.timeout_s, self.cpu0)
            raise RenderLimitError("<render>", f"render took longer than {self.limits.timeout_s:g} s "
                                               "(limit: render time)")
        self.until = min(self.end, now + MEMORY_CHECK_S)
        rss = rss_bytes()
        if rss is None or self.rss0 is None:
            self.rss0 = None  # no procfs: the time limit and the size checks only
        elif self.rss0 < 0:
            self.rss0 = rss
        elif rss - self.rss0 > self.limits.max_memory_mb * 2**20:
            raise RenderLimitError("<render>", f"memory held by the render grew above {self.limits.max_memory_mb} "
                                               "MB (limit: render memory)")


def current_limits() -> RenderLimits:
    """The limits of the render running on this thread (:data:`DEFAULT_LIMITS` outside a render)."""
    d = getattr(_local, "deadline", None)
    return d.limits if d else DEFAULT_LIMITS


def output_limit() -> int:
    """``max_output_chars`` of the render running on this thread: the cap on any value a template builds."""
    d = getattr(_local, "deadline", None)
    return (d.limits if d else DEFAULT_LIMITS).max_output_chars


def tick() -> None:
    """Check the running render's deadline (cheap: one clock read compared with one number)."""
    d = getattr(_local, "deadline", None)
    if d is not None and _monotonic() > d.until:
        d.check()


BUDGET_HINT = "set CTE_ANALYSIS_BUDGET_S or analyze(budget_s=...)"
"""How to change the analysis budget, as the budget error says it (an operator's setting: the app replaces it for
visitors of a public demo, :func:`explorer.state.for_visitor`)."""


@dataclass
class Budget:
    """Wall-clock budget of a whole analysis (every render of it). ``seconds`` given, ``until`` the
    ``time.monotonic()`` it ends at, ``exceeded`` set once a render was stopped by it. With ``cpu0`` (this thread's
    CPU time when it started, ``wall0`` the wall time) it counts CPU: :meth:`moved_on`."""

    seconds: float
    until: float
    exceeded: bool = False
    cpu0: float | None = None
    wall0: float = 0.0

    def moved_on(self, now: float) -> bool:
        """For a budget that counts CPU, past ``until`` at ``now`` on a thread that had less CPU than the budget (a
        loaded machine, not its own work): move ``until`` on by the CPU the thread still has, up to
        :data:`STARVED_WALL_FACTOR` times its wall time (:func:`starved_until`), and return True."""
        if self.cpu0 is None:
            return False
        later = starved_until(self.seconds, self.wall0, self.cpu0, now)
        if later is None:
            return False
        self.until = later
        return True

    def message(self) -> str:
        """The one-line reason naming the limit."""
        return (f"analysis took longer than its budget of {self.seconds:g} s (limit: analysis budget; "
                f"{BUDGET_HINT})")

    def check(self) -> None:
        """Raise :class:`RenderLimitError` (and mark ``exceeded``) if the budget is spent."""
        now = time.monotonic()
        if now > self.until and not self.moved_on(now):
            self.exceeded = True
            transient.hit(transient.TIME)
            raise RenderLimitError("<analysis>", self.message())


@contextlib.contextmanager
def analysis_budget(seconds: float | None, cpu: bool = False) -> Iterator[Budget | None]:
    """Context manager: every render on this thread inside the block ends by ``seconds`` from now (None: no
    budget; ``cpu``: ``seconds`` of this thread's CPU time, so a loaded machine does not end it earlier —
    :meth:`Budget.moved_on`). Nested budgets keep the earlier end. Yields the :class:`Budget` (its ``exceeded``
    tells whether a render was stopped by it)."""
    previous = getattr(_local, "budget", None)
    if seconds is None:
        yield previous
        return
    now = time.monotonic()
    budget = Budget(seconds, now + seconds, cpu0=time.thread_time() if cpu else None, wall0=now)
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


DEFAULT_ANALYSIS_BUDGET_S = 5.0
"""Default wall-clock budget of one analysis, in seconds (the slowest of the 351 real templates takes
in 0.7 s cold on the 2-core development machine; see docs/security.md, "Resource limits")."""


def default_budget_s() -> float:
    """``$CTE_ANALYSIS_BUDGET_S`` if set (a number of seconds; ``0``: no budget), else
    :data:`DEFAULT_ANALYSIS_BUDGET_S`. Raises :class:`AnalysisError` for a value that is not a number."""
    raw = os.environ.get("CTE_ANALYSIS_BUDGET_S")
    if not raw:
        return DEFAULT_ANALYSIS_BUDGET_S
    try:
        return float(raw)
    except ValueError:
        raise AnalysisError("<settings>", f"CTE_ANALYSIS_BUDGET_S={raw!r} is not a number of seconds") from None


# The analysis budget for the commands that render more than an analysis does (``lint``, ``compare``,
# ``explain``): the linter renders a matrix of conversation shapes on two renderers, the comparison analyses and
# lints two templates, explain renders the prompt and re-parses the output under candidate fixes; with only the
# per-render time limit, a template whose every render runs to that limit made ``lint`` take minutes where
# ``analyze`` stopped in seconds. Each command runs as a whole under the same budget (per template) and ends with
# an AnalysisError naming the limit when the budget ran out.


def budget_seconds(budget_s: float | None = None, templates: int = 1) -> float | None:
    """Seconds of the budget: ``budget_s``, else :func:`default_budget_s`, times ``templates`` (a comparison
    works on two); None when the setting is ``0`` or negative (no budget)."""
    seconds = default_budget_s() if budget_s is None else budget_s
    return seconds * templates if seconds > 0 else None


@contextlib.contextmanager
def command_budget(what: str, name: str, budget_s: float | None = None, templates: int = 1
                   ) -> Iterator[Budget | None]:
    """Run the block with every render on this thread under the analysis budget (:func:`budget_seconds`);
    nested budgets (the analysis inside a lint) keep the earlier end. When a render was stopped by the budget,
    raise :class:`AnalysisError` for ``name``: ``"<what> took longer than its budget of N s (limit: analysis
    budget; …)"`` — also when the block itself caught that render's error (the linter turns render errors into
    findings). Yields the :class:`Budget` (None without a budget)."""
    seconds = budget_seconds(budget_s, templates)
    with analysis_budget(seconds) as b:
        yield b
    if b is not None and b.exceeded:
        raise AnalysisError(name, f"{what} took longer than its budget of {b.seconds:g} s (limit: analysis budget; "
                                  f"{BUDGET_HINT})")


def over_budget(mark: bool = True) -> bool:
    """True when the budget of the enclosing :func:`command_budget` (or analysis) is spent — for loops of
    non-render work that check it between steps. ``mark``: also mark the budget exceeded, so the command ends
    with the budget error (``False``: the caller leaves optional work out instead, as explain's re-parses)."""
    b = getattr(_local, "budget", None)
    now = time.monotonic()
    if b is None or now <= b.until or b.moved_on(now):
        return False
    transient.hit(transient.TIME)  # what was left out depends on the machine's load: core/transient.py
    if mark:
        b.exceeded = True
    return True
