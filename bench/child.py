"""Measurements that need a fresh process: ``python -m bench.child MODE [options]`` prints one JSON object.

Modes:

* ``p1-cold``: analyse every template of ``--templates`` once (each source new to this process: ChatTemplate
  construction = compile, caps probes and every render included) and report per-template wall times in ms,
  plus ``cpu_ms`` (process CPU time per template, which other jobs on a shared machine do not inflate),
  ``rss_mb`` (peak resident set of the process) and ``baseline_rss_mb`` (after imports and a warm-up
  analysis of a tiny template that is not in the corpus, so one-time environment set-up is not charged to
  the first template). The disk cache is whatever ``$CTE_CACHE_DIR`` holds: empty for "cold, empty disk
  cache", populated by an earlier run for "cold process, warm disk cache".
* ``p1-mem``: the same loop under ``tracemalloc``; reports ``peak_mb`` (peak of Python allocations during
  the loop, caches included) — a separate run because tracing slows everything down.

The templates are given as ``--templates DIR`` and ``--limit N`` (first N files in name order).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import sys
import time
from typing import Any

WARMUP_TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
                   "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def template_files(directory: str, limit: int | None = None) -> list[pathlib.Path]:
    """The ``*.jinja`` files of ``directory`` in name order (the first ``limit`` when given). Raises
    ``FileNotFoundError`` naming the directory when it has none."""
    files = sorted(pathlib.Path(directory).glob("*.jinja"))
    if not files:
        raise FileNotFoundError(f"no *.jinja templates in {directory}")
    return files[:limit] if limit else files


def peak_rss_mb() -> float:
    """Peak resident set of this process in MB: ``VmHWM`` of /proc/self/status (per address space, so a
    process started by fork+exec does not inherit its parent's peak, as ``ru_maxrss`` does on Linux), else
    ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _analyze_one(name: str, source: str) -> str | None:
    from core.analysis import analyze
    from core.jinja.template import ChatTemplate

    try:
        analyze(ChatTemplate(source, name))
        return None
    except Exception as e:  # a template that fails to load is reported, not timed
        return f"{type(e).__name__}: {e}"


def p1_cold(files: list[pathlib.Path], trace: bool = False) -> dict[str, Any]:
    """The ``p1-cold`` measurement over ``files``; with ``trace`` the ``p1-mem`` one (see the module doc).

    Returns ``{"times_ms": {name: ms}, "cpu_ms": {name: ms}, "errors": {name: "Type: message"}, "rss_mb", "baseline_rss_mb",
    "import_s"}`` plus ``"peak_mb"`` with ``trace`` (MB = 2**20 bytes; ``import_s`` in seconds). A template
    that fails to analyse is reported in ``errors``, not raised; unreadable files raise ``OSError``.
    """
    sources = [(f.name, f.read_text(encoding="utf-8")) for f in files]
    t_import = time.perf_counter()
    import core.analysis  # noqa: F401
    import core.jinja.template  # noqa: F401
    import_s = time.perf_counter() - t_import
    _analyze_one("<warm-up>", WARMUP_TEMPLATE)
    baseline = peak_rss_mb()
    if trace:
        import tracemalloc

        tracemalloc.start()
    times: dict[str, float] = {}
    cpu: dict[str, float] = {}
    errors: dict[str, str] = {}
    for name, src in sources:
        t0 = time.perf_counter()
        c0 = time.process_time()
        err = _analyze_one(name, src)
        dt = (time.perf_counter() - t0) * 1000
        if err is None:
            times[name] = dt
            cpu[name] = (time.process_time() - c0) * 1000
        else:
            errors[name] = err
    out: dict[str, Any] = {"times_ms": times, "cpu_ms": cpu, "errors": errors, "rss_mb": peak_rss_mb(),
                           "baseline_rss_mb": baseline, "import_s": import_s}
    if trace:
        import tracemalloc

        out["peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return out


def batch_task(item: tuple[str, str]) -> tuple[str, float, str | None, float]:
    """One P5 task (runs in a worker process): analyse the template ``(name, path)``; returns
    ``(name, ms, error or None, peak RSS of the worker in MB)``."""
    name, path = item
    src = pathlib.Path(path).read_text(encoding="utf-8")
    t0 = time.perf_counter()
    err = _analyze_one(name, src)
    return name, (time.perf_counter() - t0) * 1000, err, peak_rss_mb()


def batch_init() -> None:
    """Worker initialiser: import the engine before the clock of the first task starts."""
    import core.analysis  # noqa: F401
    import core.jinja.template  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.child MODE --templates DIR [--limit N]``: prints the result as JSON
    on stdout and returns 0. Raises ``FileNotFoundError`` when ``DIR`` has no templates.
    """
    ap = argparse.ArgumentParser(prog="python -m bench.child")
    ap.add_argument("mode", choices=["p1-cold", "p1-mem"])
    ap.add_argument("--templates", required=True)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args(argv)
    files = template_files(args.templates, args.limit)
    result = p1_cold(files, trace=args.mode == "p1-mem")
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

