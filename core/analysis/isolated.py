"""Analysis in a worker process with a hard wall-clock and memory limit, for templates from untrusted users.

The in-process limits (:mod:`core.jinja`: checks before arithmetic and allocation, per-render deadline,
analysis budget) stop every runaway we know of; this is the backstop for the ones we do not. The worker comes
from :mod:`core.isolation` (a pool of limited workers, reused while they behave); past ``timeout_s`` the worker
is killed and :class:`~core.isolation.WorkerLimitError` (an :class:`~core.errors.AnalysisError`) names the
limit.
"""

from __future__ import annotations

from typing import Any

from .. import isolation
from ..jinja.template import ChatTemplate
from .analyzer import analyze
from ..jinja.limits import default_budget_s

#: Wall-clock seconds an isolated analysis may take before its worker is killed (``$CTE_ISOLATED_TIMEOUT_S``).
DEFAULT_TIMEOUT_S = isolation.DEFAULT_TIMEOUT_S
#: Address-space limit of the worker in MB (``$CTE_ISOLATED_MEMORY_MB``).
DEFAULT_MEMORY_MB = isolation.DEFAULT_MEMORY_MB


def _analyze(source: str, name: str, kwargs: dict[str, Any]) -> Any:
    return analyze(ChatTemplate(source, name), **kwargs)


def analyze_isolated(source: str, name: str = "<template>", *, timeout_s: float | None = None,
                     memory_mb: int | None = None, **analyze_kwargs: Any) -> Any:
    """:func:`core.analysis.analyze` of ``ChatTemplate(source, name)`` in a worker process limited to
    ``timeout_s`` seconds of wall time (default :data:`DEFAULT_TIMEOUT_S`) and ``memory_mb`` MB of address
    space (default :data:`DEFAULT_MEMORY_MB`). ``analyze_kwargs`` go to ``analyze`` (``fidelity``,
    ``budget_s`` — default: this process's :func:`~core.jinja.limits.default_budget_s` —, …; plain data
    only). Returns the :class:`~core.analysis.AnalysisReport`.

    Raises what ``analyze`` raises (rebuilt in this process: the same error class and message), or
    :class:`~core.isolation.WorkerLimitError` naming the limit when the worker was killed at ``timeout_s``,
    ran out of memory, or died."""
    # the caller's budget setting, not the one the long-lived forkserver saw when it started
    analyze_kwargs.setdefault("budget_s", default_budget_s())
    return isolation.call(_analyze, source, name, analyze_kwargs, timeout_s=timeout_s, memory_mb=memory_mb,
                          name=name, what="analysis")
