"""Analysis in a worker process with a hard wall-clock and memory limit, for templates from untrusted users.

The in-process limits (:mod:`core.templating`: checks before arithmetic and allocation, per-render deadline,
analysis budget) stop every runaway we know of; this is the backstop for the ones we do not. A worker is
forked from a ``forkserver`` (safe to start from a threaded server such as Streamlit's, and cheap: the
server process has ``core.analysis`` imported already), caps its own address space with ``RLIMIT_AS``,
runs :func:`core.analysis.analyze` and sends back the report (plain dataclasses, pickled) or the error as
plain data. The caller waits without holding the interpreter lock, so other sessions stay responsive;
past ``timeout_s`` the worker is killed and :class:`~core.errors.AnalysisError` names the limit.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import AnalysisError, ChatTemplateExplorerError

#: Wall-clock seconds an isolated analysis may take before its worker is killed (``$CTE_ISOLATED_TIMEOUT_S``).
DEFAULT_TIMEOUT_S = float(os.environ.get("CTE_ISOLATED_TIMEOUT_S") or 20.0)
#: Address-space limit of the worker in MB (``$CTE_ISOLATED_MEMORY_MB``); the analysis of a real template
#: peaks well under 100 MB.
DEFAULT_MEMORY_MB = int(os.environ.get("CTE_ISOLATED_MEMORY_MB") or 500)

_ctx_lock = threading.Lock()
_ctx: Any = None


@dataclass(frozen=True)
class _Failure:
    """An error raised in the worker, as plain data: class name, the ``name``/``message`` attributes of our
    errors (or ``str(e)``)."""

    cls: str
    name: str
    message: str
    lineno: int | None = None


def _context() -> Any:
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            methods = multiprocessing.get_all_start_methods()
            _ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            if "forkserver" in methods:
                _ctx.set_forkserver_preload(["core.analysis", "core.analysis.isolated"])
        return _ctx


def _worker(conn: Any, source: str, name: str, kwargs: dict[str, Any], memory_mb: int) -> None:
    """Worker body: limit memory, analyse, send ``("ok", report)`` or ``("err", _Failure)``."""
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # pragma: no cover - non-POSIX: time limit only
        pass
    try:
        from ..templating import ChatTemplate
        from .analyzer import analyze

        report = analyze(ChatTemplate(source, name), **kwargs)
        conn.send(("ok", report))
    except MemoryError:
        conn.send(("err", _Failure("MemoryError", name, "")))
    except BaseException as e:  # noqa: BLE001 - everything goes back as data
        try:
            conn.send(("err", _Failure(type(e).__name__, getattr(e, "name", name),
                                       getattr(e, "message", None) or str(e), getattr(e, "lineno", None))))
        except MemoryError:  # pragma: no cover
            pass
    finally:
        conn.close()


def _rebuild(f: _Failure, name: str, memory_mb: int) -> Exception:
    from .. import errors

    if f.cls == "MemoryError":
        return AnalysisError(name, f"the analysis ran out of its {memory_mb} MB memory limit "
                                   "(limit: isolated analysis memory)")
    cls = getattr(errors, f.cls, None)
    if isinstance(cls, type) and issubclass(cls, ChatTemplateExplorerError):
        try:
            return cls(f.name, f.message, f.lineno) if f.cls == "TemplateSyntaxError" else cls(f.name, f.message)
        except TypeError:
            pass
    return AnalysisError(name, f"{f.cls}: {f.message}")


def analyze_isolated(source: str, name: str = "<template>", *, timeout_s: float | None = None,
                     memory_mb: int | None = None, **analyze_kwargs: Any) -> Any:
    """:func:`core.analysis.analyze` of ``ChatTemplate(source, name)`` in a worker process limited to
    ``timeout_s`` seconds of wall time (default :data:`DEFAULT_TIMEOUT_S`) and ``memory_mb`` MB of address
    space (default :data:`DEFAULT_MEMORY_MB`). ``analyze_kwargs`` go to ``analyze`` (``fidelity``,
    ``budget_s`` — default: this process's :func:`~core.analysis.analyzer.default_budget_s` —, …; plain data
    only). Returns the :class:`~core.analysis.AnalysisReport`.

    Raises what ``analyze`` raises (rebuilt in this process: the same error class and message), or
    :class:`~core.errors.AnalysisError` naming the limit when the worker was killed at ``timeout_s``, ran out
    of memory, or died."""
    from .analyzer import default_budget_s

    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    memory = DEFAULT_MEMORY_MB if memory_mb is None else memory_mb
    # the caller's budget setting, not the one the long-lived forkserver saw when it started
    analyze_kwargs.setdefault("budget_s", default_budget_s())
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(send, source, name, analyze_kwargs, memory), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(timeout):
            raise AnalysisError(name, f"the analysis was stopped after {timeout:g} s "
                                      "(limit: isolated analysis time; set CTE_ISOLATED_TIMEOUT_S)")
        try:
            kind, payload = recv.recv()
        except (EOFError, OSError):
            proc.join(1)
            code = proc.exitcode
            raise AnalysisError(name, f"the analysis worker died (exit code {code}); it may have exceeded its "
                                      f"{memory} MB memory limit (limit: isolated analysis memory)") from None
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join(5)
    if kind == "ok":
        return payload
    raise _rebuild(payload, name, memory)
