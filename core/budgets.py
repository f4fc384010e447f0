"""The analysis budget for the commands that render more than an analysis does: ``lint``, ``compare``,
``explain``.

:func:`core.analysis.analyze` runs every render of one analysis under a wall-clock budget
(:func:`core.templating.analysis_budget`, ``$CTE_ANALYSIS_BUDGET_S``, default 5 s). The linter renders a matrix
of conversation shapes on two renderers, the comparison analyses and lints two templates, and explain renders
the prompt and re-parses the output under candidate fixes; with only the per-render time limit, a template whose
every render runs to that limit made ``lint`` take minutes where ``analyze`` stopped in seconds. Here each
command runs as a whole under the same budget (per template), and ends with an
:class:`~core.errors.AnalysisError` naming the limit when the budget ran out.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from . import transient
from .errors import AnalysisError
from .templating import BUDGET_HINT, Budget, analysis_budget

__all__ = ["command_budget", "budget_seconds"]


def budget_seconds(budget_s: float | None = None, templates: int = 1) -> float | None:
    """Seconds of the budget: ``budget_s``, else :func:`core.analysis.analyzer.default_budget_s`, times
    ``templates`` (a comparison works on two); None when the setting is ``0`` or negative (no budget)."""
    from .analysis.analyzer import default_budget_s

    seconds = default_budget_s() if budget_s is None else budget_s
    return seconds * templates if seconds > 0 else None


@contextlib.contextmanager
def command_budget(what: str, name: str, budget_s: float | None = None, templates: int = 1
                   ) -> Iterator[Budget | None]:
    """Run the block with every render on this thread under the analysis budget (:func:`budget_seconds`);
    nested budgets (the analysis inside a lint) keep the earlier end. When a render was stopped by the budget,
    raise :class:`AnalysisError` for ``name``: ``"<what> took longer than its budget of N s (limit: analysis
    budget; …)"`` — also when the block itself caught that render's error (the linter turns render errors into
    findings). Yields the :class:`~core.templating.Budget` (None without a budget)."""
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
    import time

    from .templating import _local  # the thread's current budget, as analysis_budget keeps it

    b = getattr(_local, "budget", None)
    if b is None or time.monotonic() <= b.until:
        return False
    transient.hit(transient.TIME)  # what was left out depends on the machine's load: core/transient.py
    if mark:
        b.exceeded = True
    return True
