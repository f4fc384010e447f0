"""P7 (issue 12): ``python -m core lint --batch`` over the corpus in a fresh process — wall time, and CPU time of
the process and its workers (user + sys, from ``getrusage(RUSAGE_CHILDREN)``), which other jobs sharing the
cores do not inflate. Opt-in: ``python -m bench --only P7``."""

from __future__ import annotations

import os
import pathlib
import resource
import subprocess
import sys
import time
from typing import Any

from .stats import Spread


def _templates_dir(b: Any) -> tuple[pathlib.Path, int]:
    files = sorted(b.templates.glob("*.jinja"))
    if not b.limit:
        return b.templates, len(files)
    d = b.tmp / "p6-templates"
    d.mkdir(parents=True, exist_ok=True)
    for f in files[:b.limit]:
        (d / f.name).write_bytes(f.read_bytes())
    return d, min(len(files), b.limit)


def _run_lint(b: Any, directory: pathlib.Path, cache: pathlib.Path, root: pathlib.Path) -> tuple[float, float, int]:
    env = dict(os.environ, CTE_CACHE_DIR=str(cache), PYTHONPATH=str(root))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "core", "lint", "--batch", str(directory), "--workers",
                           str(b.workers)], cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"core lint --batch failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, len(proc.stdout.splitlines())


def bench_lint(b: Any, root: pathlib.Path, row: Any, progress: Any) -> None:
    """Append rows ``P7-empty`` (empty disk cache per run: every template compiled) and ``P7-warm`` (the disk
    cache of a first, uncounted run) to ``b.rows``; target ≤ 30 s on 2 cores (issue 12)."""
    directory, n = _templates_dir(b)
    warm = b.tmp / "p6-warm"
    for mode in ("empty", "warm"):
        walls, cpus = [], []
        if mode == "warm":
            _run_lint(b, directory, warm, root)  # fill the cache
        t0 = time.perf_counter()
        for r in range(b.repeats):
            cache = warm if mode == "warm" else b.tmp / f"p6-empty-{r}"
            wall, cpu, rows = _run_lint(b, directory, cache, root)
            walls.append(wall)
            cpus.append(cpu)
            progress(r + 1, b.repeats, f"P7 lint ({mode} disk cache)", t0)
            b.raw.setdefault(f"p6_{mode}", []).append({"wall_s": wall, "cpu_s": cpu, "templates": rows})
        sp, cp = Spread.of(walls), Spread.of(cpus)
        b.rows.append(row(f"P7-{mode}", f"lint: {n} templates, `python -m core lint --batch` on {b.workers} "
                                        f"workers, fresh process, {mode} disk cache", sp.fmt(2, " s"),
                          f"CPU {cp.fmt(1, ' s')} (process + workers), {cp.value / b.workers:.1f} s per core: the wall "
                          f"time on {b.workers} cores no other job uses", "", "≤ 30 s", sp.value <= 30))
