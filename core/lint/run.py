"""One lint run: every check of :mod:`core.lint.checks` on one template, under the command budget."""

from __future__ import annotations

import time
from typing import Any, Iterable

from ..errors import ChatTemplateExplorerError
from ..jinja.limits import command_budget, over_budget
from ..jinja.template import ChatTemplate
from .model import SEVERITY_ORDER, Finding, LintReport, suppress


def _checks() -> list[Any]:
    from . import checks as C

    return [C.check_render_matrix, C.check_roundtrip, C.check_prefix_stability, C.check_divergence,
            C.check_probes, C.check_markers, C.check_time]


def lint(template: ChatTemplate, *, fidelity: str = "llama.cpp", report: Any = None,
         suppressed: Iterable[str] = (), budget_s: float | None = None) -> LintReport:
    """Lint ``template`` (a compiled :class:`~core.jinja.template.ChatTemplate`).

    ``fidelity``: ``"llama.cpp"`` (default) or ``"improved"`` — the analysis and parser the round trip uses.
    ``report``: an analysis report to reuse (e.g. with overrides); computed (cached) otherwise. ``suppressed``:
    shell-style patterns of finding ids to leave out (listed in ``LintReport.suppressed``). Never raises for a
    template that fails: a failed analysis skips the checks that need it (noted in ``error``), a failed render
    is a finding. Findings are sorted by severity, then id.

    ``budget_s``: wall-clock seconds for every render of the lint (the analysis budget, default
    ``$CTE_ANALYSIS_BUDGET_S`` or 5 s; ``0``: none, :mod:`core.jinja.limits`). When it runs out the lint stops and
    raises :class:`~core.errors.AnalysisError` naming the limit (a template whose every render runs to the
    render time limit would otherwise cost that limit for each of the ~70 renders).
    """
    with command_budget("lint", template.name, budget_s):
        return _lint(template, fidelity, report, suppressed)


def _lint(template: ChatTemplate, fidelity: str, report: Any, suppressed: Iterable[str]) -> LintReport:
    from .checks import LintContext

    t0 = time.perf_counter()
    error = None
    if report is None:
        from ..chat.pipeline import cached_analysis

        try:
            report = cached_analysis(template, fidelity)
        except ChatTemplateExplorerError as e:
            error = f"analysis failed: {e}"
        except Exception as e:  # noqa: BLE001 - report, never crash the linter
            error = f"analysis failed: {type(e).__name__}: {e}"
    ctx = LintContext(template, report, fidelity)
    findings: list[Finding] = []
    for check in _checks():
        if over_budget():  # every render from here would fail at once: the lint ends with the budget error
            break
        try:
            findings += check(ctx)
        except Exception as e:  # noqa: BLE001 - one check's bug must not hide the others' findings
            error = (error + "; " if error else "") + f"{check.__name__} failed: {type(e).__name__}: {e}"
    findings.sort(key=lambda f: (SEVERITY_ORDER[f.severity], f.id))
    kept, dropped = suppress(findings, suppressed)
    raising = [s.id for s in ctx.shapes if ctx.shape_render(s).error is not None]
    return LintReport(template.name, kept, dropped, len(ctx.shapes), raising, error,
                      (time.perf_counter() - t0) * 1000)
