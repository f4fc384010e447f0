"""Lint a directory of templates on worker processes, with progress, and summarise by finding kind."""

from __future__ import annotations

import collections
import contextlib
import multiprocessing as mp
import os
import pathlib
from typing import Any, Callable, Iterable

from .model import Kind, LintReport, Severity
from ..errors import ChatTemplateExplorerError, TemplateLoadError
from ..jinja.template import ChatTemplate
from ..sources import read_template_file
from .run import lint

ProgressFn = Callable[[int, int, str], None]
"""``progress(done, total, template name)``, called after each template."""


def lint_file(path: str, fidelity: str = "llama.cpp", suppressed: tuple[str, ...] = ()) -> LintReport:
    """Load one template file and :func:`core.lint.lint` it; a file that cannot be loaded or compiled gives a
    report with ``error`` set (never raises)."""
    name = os.path.basename(path)
    try:
        template = ChatTemplate(read_template_file(path), name)
    except (OSError, UnicodeDecodeError, ChatTemplateExplorerError) as e:
        return LintReport(name, error=f"cannot load: {e}")
    try:
        return lint(template, fidelity=fidelity, suppressed=suppressed)
    except ChatTemplateExplorerError as e:  # the lint's budget ran out (core.jinja.limits)
        return LintReport(name, error=str(e))
    except Exception as e:  # noqa: BLE001 - a batch never stops on one template
        return LintReport(name, error=f"internal error: {type(e).__name__}: {e}")


def _task(args: tuple[int, str, str, tuple[str, ...]]) -> tuple[int, dict[str, Any]]:
    i, path, fidelity, suppressed = args
    return i, lint_file(path, fidelity, suppressed).to_json()


def template_files(directory: str | os.PathLike, pattern: str = "*.jinja") -> list[str]:
    """The template files of ``directory`` matching ``pattern``, sorted by name. Raises
    :class:`~core.errors.TemplateLoadError` when it is not a directory."""
    d = pathlib.Path(directory)
    if not d.is_dir():
        raise TemplateLoadError(str(d), "not a directory")
    return [str(p) for p in sorted(d.glob(pattern))]


def lint_corpus(paths: Iterable[str], *, workers: int = 2, fidelity: str = "llama.cpp",
                suppressed: Iterable[str] = (), progress: ProgressFn | None = None) -> list[LintReport]:
    """:func:`lint_file` for every path, on ``workers`` forked processes (0 or 1: in this process; the command
    line's, so forking is safe), in input order. ``progress`` is called as templates finish."""
    paths = list(paths)
    sup = tuple(suppressed)
    out: list[LintReport | None] = [None] * len(paths)
    tasks = [(i, p, fidelity, sup) for i, p in enumerate(paths)]
    done = 0
    with contextlib.ExitStack() as stack:
        if workers <= 1 or len(paths) < 4:
            rows: Iterable[tuple[int, dict[str, Any]]] = map(_task, tasks)
        else:
            ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
            rows = stack.enter_context(ctx.Pool(workers)).imap_unordered(_task, tasks, chunksize=2)
        for i, row in rows:
            out[i] = LintReport.from_json(row)
            done += 1
            if progress:
                progress(done, len(paths), out[i].template)
    return [r for r in out if r is not None]


def summary_rows(reports: list[LintReport]) -> list[dict[str, Any]]:
    """One row per finding kind: ``kind``, ``templates`` (with at least one finding of the kind),
    ``findings``, ``error`` / ``warning`` / ``info`` counts and ``top`` (the three most common ids with
    counts)."""
    rows = []
    for kind in Kind:
        fs = [(r.template, f) for r in reports for f in r.findings if f.kind == kind]
        sev = collections.Counter(f.severity for _, f in fs)
        top = collections.Counter(f.id for _, f in fs).most_common(3)
        rows.append({"kind": kind.value, "templates": len({t for t, _ in fs}), "findings": len(fs),
                     "error": sev[Severity.ERROR], "warning": sev[Severity.WARNING], "info": sev[Severity.INFO],
                     "top": top})
    return rows


def summary_markdown(reports: list[LintReport]) -> str:
    """:func:`summary_rows` as a Markdown table (the one docs/authoring.md shows)."""
    lines = [f"| kind | templates with a finding (of {len(reports)}) | findings | error / warning / info | "
             "most common ids |", "|---|---|---|---|---|"]
    for r in summary_rows(reports):
        top = ", ".join(f"`{i}` ({n})" for i, n in r["top"])
        lines.append(f"| {r['kind']} | {r['templates']} | {r['findings']} | {r['error']} / {r['warning']} / "
                     f"{r['info']} | {top} |")
    return "\n".join(lines)
