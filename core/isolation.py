"""Run a core function on picklable inputs in a limited worker process: a memory limit and a wall-clock kill.

The in-process limits (:mod:`core.jinja`) stop every runaway we know of inside the sandbox's hooks; work
inside CPython's C code (``==`` on two deep lists) runs on without calling any hook, holding the interpreter
lock. A front end serving several people therefore runs every template render here, so one visitor's runaway
template costs a worker, never the server: :func:`call` sends ``fn(*args, **kwargs)`` to a worker and waits on
the pipe without holding the interpreter lock; past ``timeout_s`` the worker is killed and
:class:`WorkerLimitError` names the limit.

Workers are forked from a ``forkserver`` (safe from a threaded server, and cheap: it has ``core`` imported),
cap their own address space with ``RLIMIT_AS`` and serve calls one after the other: a worker is reused until
it misbehaves (killed at the time limit, out of memory, died, or grown past half its memory limit), so a call
pays a pipe round trip, not a process start. At most :data:`MAX_WORKERS` run at once; more callers wait for
one. ``fn`` must be a module-level function (pickled by reference); arguments and results are pickled.

Errors raised by ``fn`` come back as the same class of :mod:`core.errors` with the same message. A
:class:`WorkerLimitError` says nothing about the inputs (the same call may pass on a quieter machine):
callers must not cache it as the inputs' verdict. So is a call during which the worker hit a limit that depends
on the moment (:mod:`core.transient`): a ``MemoryError`` anywhere in it, or a wall-clock limit (render time,
analysis budget, compile time) while the worker got less than :data:`STARVED_CPU_SHARE` of the call's wall
time as CPU — whatever ``fn`` made of that error, the caller gets a :class:`WorkerLimitError`. A time limit hit
with the CPU at hand is the template's own, and comes back as raised.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import transient
from .errors import AnalysisError, ChatTemplateExplorerError
from .jinja.limits import env_number, rss_bytes
from .serving import current_visitor

#: Wall-clock seconds one call may take before its worker is killed (``$CTE_ISOLATED_TIMEOUT_S``).
DEFAULT_TIMEOUT_S = float(env_number("CTE_ISOLATED_TIMEOUT_S", 20.0))
#: Address-space limit of a worker in MB (``$CTE_ISOLATED_MEMORY_MB``); the analysis of a real template peaks
#: well under 100 MB.
DEFAULT_MEMORY_MB = env_number("CTE_ISOLATED_MEMORY_MB", 500)
#: Workers running at once (``$CTE_ISOLATED_WORKERS``); further calls wait for one.
MAX_WORKERS = env_number("CTE_ISOLATED_WORKERS", 4)
#: Workers one visitor's calls may hold at once (``$CTE_ISOLATED_PER_VISITOR``, default half of
#: :data:`MAX_WORKERS`): a visitor is who :func:`core.serving.set_visitor` named on the calling thread (the app:
#: the browser session); calls of no named visitor (the CLI, tests, the corpus batch) are bounded by the pool only.
PER_VISITOR = max(1, env_number("CTE_ISOLATED_PER_VISITOR", MAX_WORKERS // 2))
#: Workers kept idle for the next calls.
MAX_IDLE = 2
#: Calls one worker serves before it is replaced (its caches are bounded; this bounds fragmentation too).
MAX_CALLS = 500
#: CPU seconds a call may use before its worker yields the CPU (``$CTE_ISOLATED_RUNAWAY_CPU_S``; 0: never): past
#: them the worker's scheduling priority drops to :data:`RUNAWAY_NICE`, so on a busy machine the server's own
#: threads (every other visitor's page) and other calls go first while a runaway template burns its worker. CPU
#: time, not wall time: a real template's analysis uses at most 0.7 s of it however loaded the machine is, so
#: only a runaway (or a long explain of a hostile output) gets there. Linux (``/proc``); elsewhere never.
RUNAWAY_CPU_S = float(env_number("CTE_ISOLATED_RUNAWAY_CPU_S", 1.0))
#: The nice value a worker drops to past :data:`RUNAWAY_CPU_S` (``$CTE_ISOLATED_RUNAWAY_NICE``): at 10 it gets
#: about a tenth of the CPU share of a process at 0 when both want the same core.
RUNAWAY_NICE = env_number("CTE_ISOLATED_RUNAWAY_NICE", 10)
#: How often a waiting caller looks at its worker's CPU time until it is demoted (it is woken at once by a reply).
_RUNAWAY_POLL_S = 0.1
#: A call that hit a wall-clock limit with less CPU than this share of its wall time was starved by the machine's
#: load: its failure is transient (a CPU-bound render on a quiet machine gets close to 1).
STARVED_CPU_SHARE = 0.5


class WorkerLimitError(AnalysisError):
    """The worker was killed at the time limit, ran out of memory or died, or no worker was free in time: a
    transient failure of this run, not a verdict on the inputs (never cache it as one). ``what`` is the work
    ("analysis", "render", …): an analysis says "cannot analyse template …", other work "template … stopped"."""

    def __init__(self, name: str, message: str, what: str = "analysis"):
        super().__init__(name, message)
        if what != "analysis":
            Exception.__init__(self, f"template {name!r} stopped: {message}")


@dataclass(frozen=True)
class _Failure:
    """An error raised in the worker, as plain data: its class (module and name), its text and its plain
    attributes (``name``, ``message``, ``field``, ``lineno``, …)."""

    module: str
    cls: str
    text: str
    attrs: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def of(e: BaseException) -> "_Failure":
        attrs = tuple((k, v) for k, v in vars(e).items()
                      if isinstance(v, (str, int, float, bool, type(None))) and not k.startswith("_"))
        return _Failure(type(e).__module__, type(e).__qualname__, str(e), attrs)


_ctx_lock = threading.Lock()
_ctx: Any = None


def _context() -> Any:
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            methods = multiprocessing.get_all_start_methods()
            _ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            if "forkserver" in methods:
                _ctx.set_forkserver_preload(["core.analysis", "core.isolation", "core.isolated_ops"])
        return _ctx


def _cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` used so far; None where /proc cannot tell (not Linux, gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read()
        fields = s[s.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _rss_mb() -> float:
    return (rss_bytes() or 0) / 2**20


def _serve(conn: Any, memory_mb: int) -> None:
    """Worker body: limit memory, then answer ``(fn, args, kwargs)`` requests with ``("ok", result, rss_mb)`` or
    ``("err", _Failure, rss_mb)`` until the pipe closes or ``None`` arrives. Exits after a MemoryError (its
    state may be broken)."""
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # pragma: no cover - non-POSIX: time limit only
        resource = None  # type: ignore[assignment]
    _die_with_parent()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        fn, args, kwargs, timeout = request
        if resource is not None:
            # a backstop that needs no caller: if the caller is gone and cannot kill this worker, the kernel
            # does (SIGXCPU) once the call has used its time in CPU seconds, and some more
            used = resource.getrusage(resource.RUSAGE_SELF)
            cpu = int(used.ru_utime + used.ru_stime + 2 * timeout + 5)
            try:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
            except (ValueError, OSError):  # pragma: no cover
                pass
        broken = False
        before, cpu0, wall0 = transient.hits(), time.process_time(), time.monotonic()
        try:
            reply: tuple[Any, ...] = ("ok", fn(*args, **kwargs))
        except MemoryError:
            reply, broken = ("err", _Failure("builtins", "MemoryError", "")), True
        except BaseException as e:  # noqa: BLE001 - everything goes back as data
            reply = ("err", _Failure.of(e))
        moment = transient_failure(before, transient.hits(), time.process_time() - cpu0, time.monotonic() - wall0)
        if moment is not None:
            reply, broken = ("err", moment), broken or moment.cls == "MemoryError"
        try:
            conn.send((*reply, _rss_mb()))
        except MemoryError:
            return
        except Exception as e:  # noqa: BLE001 - a result that does not pickle
            try:
                conn.send(("err", _Failure("builtins", "TypeError", f"result not transferable ({type(e).__name__})"),
                           _rss_mb()))
            except Exception:  # noqa: BLE001
                return
        if broken:
            return


def transient_failure(before: dict[str, int], after: dict[str, int], cpu_s: float, wall_s: float
                      ) -> "_Failure | None":
    """The failure to report instead of a call's own outcome when the call hit a limit that depends on the moment
    (:mod:`core.transient` counts ``before`` and ``after`` it): a memory limit, or a time limit while the worker
    got ``cpu_s`` of CPU in ``wall_s`` — under :data:`STARVED_CPU_SHARE` of it. None: the outcome stands."""
    if after[transient.MEMORY] > before[transient.MEMORY]:
        return _Failure("builtins", "MemoryError", "")
    if after[transient.TIME] > before[transient.TIME] and cpu_s < STARVED_CPU_SHARE * wall_s:
        return _Failure("core.isolation", "Starved", "", (("cpu_s", cpu_s), ("wall_s", wall_s)))
    return None


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when its parent (the forkserver, which exits with the server) dies, so a
    worker busy in C code does not outlive a server that was killed."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


class _Worker:
    __slots__ = ("proc", "conn", "memory_mb", "calls", "demoted")

    def __init__(self, memory_mb: int):
        ctx = _context()
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_serve, args=(child, memory_mb), daemon=True)
        self.proc.start()
        child.close()
        self.memory_mb = memory_mb
        self.calls = 0
        self.demoted: int | None = None  # the nice value to restore after a call that used RUNAWAY_CPU_S

    def wait(self, timeout: float) -> bool:
        """Whether the worker answered within ``timeout`` seconds; once the call used :data:`RUNAWAY_CPU_S` of
        CPU the worker is demoted to :data:`RUNAWAY_NICE` for the rest of it."""
        start = _cpu_seconds(self.proc.pid) if RUNAWAY_CPU_S > 0 else None
        if start is None:
            return self.conn.poll(timeout)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return self.conn.poll(0)
            if self.demoted is not None:
                return self.conn.poll(left)
            if self.conn.poll(min(_RUNAWAY_POLL_S, left)):
                return True
            used = _cpu_seconds(self.proc.pid)
            if used is None:
                return self.conn.poll(max(0.0, deadline - time.monotonic()))
            if used - start >= RUNAWAY_CPU_S:
                self._demote()

    def _demote(self) -> None:
        try:
            nice = os.getpriority(os.PRIO_PROCESS, self.proc.pid)
            if nice < RUNAWAY_NICE:
                os.setpriority(os.PRIO_PROCESS, self.proc.pid, RUNAWAY_NICE)
            self.demoted = nice
        except (OSError, AttributeError):  # gone already, or no priorities here: the kill still bounds it
            self.demoted = RUNAWAY_NICE

    def restore(self) -> bool:
        """Give a demoted worker its priority back; False when the system refuses (raising a priority needs
        privileges a server seldom has): the worker is then not reused."""
        if self.demoted is None or self.demoted >= RUNAWAY_NICE:
            self.demoted = None
            return True
        try:
            os.setpriority(os.PRIO_PROCESS, self.proc.pid, self.demoted)
        except (OSError, AttributeError):
            return False
        self.demoted = None
        return True

    def kill(self) -> None:
        try:
            self.conn.close()
        except OSError:  # pragma: no cover
            pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


_pool_lock = threading.Lock()
_idle: list[_Worker] = []
_slots = threading.BoundedSemaphore(MAX_WORKERS)


_share = threading.Condition()
_held: dict[str, int] = {}  # visitor -> calls in flight


def _enter_share(visitor: str, timeout: float, name: str, what: str) -> None:
    """Count a call of ``visitor``, waiting up to ``timeout`` for one of the visitor's own calls to end when it
    already has :data:`PER_VISITOR` in flight; then :class:`WorkerLimitError`. The other workers stay free for
    other visitors, however many renders one visitor starts (reruns, tabs)."""
    deadline = time.monotonic() + timeout
    with _share:
        while _held.get(visitor, 0) >= PER_VISITOR:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerLimitError(name, f"you already have {PER_VISITOR} renders or analyses running on this "
                                             "server (limit: isolated workers per visitor; wait for them to finish)",
                                       what)
            _share.wait(left)
        _held[visitor] = _held.get(visitor, 0) + 1


def _leave_share(visitor: str) -> None:
    with _share:
        left = _held.get(visitor, 1) - 1
        if left > 0:
            _held[visitor] = left
        else:
            _held.pop(visitor, None)
        _share.notify_all()


def _take(memory_mb: int) -> _Worker:
    with _pool_lock:
        while _idle:
            w = _idle.pop()
            if w.memory_mb == memory_mb and w.proc.is_alive():
                return w
            w.kill()
    return _Worker(memory_mb)


def _give_back(w: _Worker, rss_mb: float) -> None:
    if w.calls >= MAX_CALLS or rss_mb > w.memory_mb / 2 or not w.proc.is_alive() or not w.restore():
        w.kill()
        return
    with _pool_lock:
        if len(_idle) < MAX_IDLE:
            _idle.append(w)
            return
    w.kill()


def warm(memory_mb: int | None = None) -> None:
    """Start one idle worker now (a server calls it at start-up, so the first visitor pays no start)."""
    memory = DEFAULT_MEMORY_MB if memory_mb is None else memory_mb
    with _pool_lock:
        if any(w.memory_mb == memory for w in _idle):
            return
    w = _Worker(memory)
    with _pool_lock:
        if len(_idle) < MAX_IDLE:
            _idle.append(w)
            return
    w.kill()


def shutdown() -> None:
    """Stop the idle workers (running calls end on their own)."""
    with _pool_lock:
        workers, _idle[:] = list(_idle), []
    for w in workers:
        w.kill()


def _rebuild(f: _Failure, name: str, what: str, memory_mb: int) -> Exception:
    """The worker's error in this process: the same class of ours (a :class:`ChatTemplateExplorerError` of a
    ``core`` module) with the same text and attributes; anything else as an :class:`AnalysisError`."""
    if f.cls == "MemoryError":
        return WorkerLimitError(name, f"the {what} ran out of its {memory_mb} MB memory limit "
                                      f"(limit: isolated {what} memory)", what)
    if f.cls == "Starved" and f.module == "core.isolation":
        a = dict(f.attrs)
        return WorkerLimitError(name, f"the {what} hit a time limit while the server was busy (it got "
                                      f"{a.get('cpu_s', 0):.1f} s of CPU in {a.get('wall_s', 0):.1f} s; try again) "
                                      f"(limit: isolated {what} time under load)", what)
    cls: Any = None
    if f.module == "core" or f.module.startswith("core."):
        try:
            cls = importlib.import_module(f.module)
            for part in f.cls.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError):
            cls = None
    if isinstance(cls, type) and issubclass(cls, ChatTemplateExplorerError):
        err = cls.__new__(cls)
        Exception.__init__(err, f.text)
        for k, v in f.attrs:
            setattr(err, k, v)
        return err
    return AnalysisError(name, f"{f.cls}: {f.text}")


def call(fn: Callable[..., Any], *args: Any, timeout_s: float | None = None, memory_mb: int | None = None,
         name: str = "<template>", what: str = "work", **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a worker limited to ``timeout_s`` seconds of wall time (default
    :data:`DEFAULT_TIMEOUT_S`, counted from when a worker is free) and ``memory_mb`` MB of address space
    (default :data:`DEFAULT_MEMORY_MB`). ``name`` (the template's) and ``what`` ("analysis", "render", …) word
    the limit messages.

    Returns ``fn``'s result. Raises what ``fn`` raised (the same :mod:`core.errors` class and message; other
    exceptions as :class:`~core.errors.AnalysisError` with their type and message), or
    :class:`WorkerLimitError` naming the limit when the worker was killed, ran out of memory or died, when
    no worker was free within ``timeout_s``, or when the calling thread's visitor (:func:`core.serving.set_visitor`)
    kept :data:`PER_VISITOR` calls running that long."""
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    memory = DEFAULT_MEMORY_MB if memory_mb is None else memory_mb
    visitor = current_visitor()
    if visitor is not None:
        _enter_share(visitor, timeout, name, what)
    try:
        return _call(fn, args, kwargs, timeout, memory, name, what)
    finally:
        if visitor is not None:
            _leave_share(visitor)


def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float, memory: int,
          name: str, what: str) -> Any:
    if not _slots.acquire(timeout=timeout):
        raise WorkerLimitError(name, f"the server is busy: no worker was free for {timeout:g} s "
                                     f"(limit: isolated workers; try again)", what)
    try:
        w = _take(memory)
        ok = False
        try:
            w.calls += 1
            try:
                w.conn.send((fn, args, kwargs, timeout))
            except (BrokenPipeError, ConnectionResetError):  # an idle worker died since: one fresh try
                w.kill()
                w = _Worker(memory)
                w.calls += 1
                w.conn.send((fn, args, kwargs, timeout))
            if not w.wait(timeout):
                raise WorkerLimitError(name, f"the {what} was stopped after {timeout:g} s "
                                             f"(limit: isolated {what} time; set CTE_ISOLATED_TIMEOUT_S)", what)
            try:
                kind, payload, rss = w.conn.recv()
            except (EOFError, OSError):
                w.proc.join(1)
                raise WorkerLimitError(name, f"the {what} worker died (exit code {w.proc.exitcode}); it may have "
                                             f"exceeded its {memory} MB memory limit (limit: isolated {what} "
                                             "memory)", what) from None
            ok = kind == "ok" or payload.cls != "MemoryError"
        finally:
            if ok:
                _give_back(w, rss)
            else:
                w.kill()
    finally:
        _slots.release()
    if kind == "ok":
        return payload
    raise _rebuild(payload, name, what, memory)
