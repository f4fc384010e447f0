"""Template linter: everything a template author should know before release, from renders and our parser.

:func:`lint` runs every check of :mod:`core.lint.checks` on one template and returns a
:class:`~core.lint.model.LintReport`; :func:`core.lint.corpus.lint_corpus` does it for a directory on worker
processes. Finding kinds (:class:`~core.lint.model.Kind`): ``render`` (render matrix over
:func:`~core.lint.shapes.shapes`), ``roundtrip``, ``prefix``, ``divergence``, ``probe``, ``marker``, ``time``.
"""

from __future__ import annotations

from .model import Finding, Kind, LintReport, Severity, visible
from .run import lint

__all__ = ["lint", "Finding", "Kind", "LintReport", "Severity", "visible"]
