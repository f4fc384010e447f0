"""``python -m bench``: run the benchmarks and print the table (see :mod:`bench` for what is measured).

Options: ``--quick`` (one run per figure, the first 40 templates, a 200-analysis batch, 3 routes in P6: ≤ 60 s),
``--repeats N``, ``--only P1,P2,P3,P4,P5,P6`` (``P7``, the corpus lint, only when named), ``--templates DIR`` (default ``../shared/templates``),
``--limit N`` (first N templates for P1/P4/P5), ``--batch N`` (P5 analyses, default 1000), ``--workers N``
(default 2), ``--sizes 8,128`` (P3, KB), ``--stream-chars 20000,160000`` (P6), ``--parse-kb 45`` (P2 output
size), ``--oracle PATH`` (llama.cpp's oracle binary, default ``$CTE_LLAMA_ORACLE``: P1 side by side with
llama.cpp's analysis timed in the same run, each template's time the median of ``--repeats`` oracle calls,
and P2 with the oracle's ``parse`` of the same sample; without it our figures are printed alone), ``--json FILE`` (raw
results). Progress goes to stderr (a bar on a terminal, a line per 10 % otherwise), the table to stdout; the
notes end with the total bench time. Exit status 0 when every figure was measured (targets missed are shown, not failures), 2 on bad
options or missing inputs.

The disk cache of compiled templates lives in a temporary ``CTE_CACHE_DIR`` per run (removed at the end),
so the user's own cache is neither used nor touched.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .stats import Spread, Summary, median

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_TEMPLATES = ROOT.parent / "shared" / "templates"

P2_TEMPLATES = [  # (tool format, template file)
    ("JSON_NATIVE", "Reka-Edge.jinja"),
    ("TAG_WITH_JSON", "deepseek-ai-DeepSeek-V3.1.jinja"),
    ("TAG_WITH_TAGGED", "GLM-4.6.jinja"),
    ("MISTRAL_TOOL_CALLS", "Mistral-Small-3.2-24B-Instruct-2506.jinja"),  # issue 14's [TOOL_CALLS] case
]
P3_FORMATS = ("JSON_NATIVE", "TAG_WITH_JSON", "TAG_WITH_TAGGED")
ORACLE_ENV = "CTE_LLAMA_ORACLE"  # path of llama.cpp's oracle binary (../shared/tools/oracle/README.md)
P3_CALLS = {2: 2, 8: 4, 32: 6}  # tool calls in the streamed output, by size in KB


@dataclass
class Row:
    """One line of the table: ``id``, ``figure`` (what), ``value`` (formatted median [spread]), ``detail``,
    ``mem`` (peak memory), ``target`` (text), ``ok`` (True/False, None = no target)."""

    id: str
    figure: str
    value: str
    detail: str = ""
    mem: str = ""
    target: str = ""
    ok: bool | None = None


@dataclass
class Bench:
    """Options and collected results of one benchmark run."""

    templates: pathlib.Path
    repeats: int
    quick: bool
    limit: int | None
    batch: int
    workers: int
    sizes: list[int]
    parse_kb: int
    stream_chars: list[int] = field(default_factory=lambda: [20_000, 160_000])
    routes: list[str] = field(default_factory=list)   # P6: only templates whose file name holds one of these
    oracle: "Oracle | None" = None
    rows: list[Row] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tmp: pathlib.Path = field(default_factory=lambda: pathlib.Path(tempfile.mkdtemp(prefix="cte-bench-")))

    def log(self, msg: str) -> None:
        """Print ``msg`` to stderr (progress lines; stdout keeps the table)."""
        print(msg, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------------- helpers


def _ms(x: float) -> str:
    return f"{x:.2f} ms" if x < 100 else f"{x:.0f} ms"


def _mb(x: float) -> str:
    return f"{x:.1f} MB"


def _spread(values: list[float], unit: str = " ms", digits: int = 2) -> str:
    return Spread.of(values).fmt(digits, unit)


_BARS: dict[tuple[str, float], Any] = {}


def progress(done: int, total: int, label: str, t0: float) -> None:
    """Progress on stderr (:class:`core.progress.ProgressBar`: a redrawn bar on a terminal, a line every 10 %
    otherwise, so logs get no carriage returns). ``t0`` identifies the run of ``label``."""
    from core.progress import ProgressBar

    bar = _BARS.get((label, t0))
    if bar is None:
        bar = _BARS[(label, t0)] = ProgressBar(total, label)
        bar.t0 = t0
    bar.update(done)
    if done >= total:
        _BARS.pop((label, t0), None)


class Oracle:
    """llama.cpp's own analysis and parse, through the oracle binary of ``../shared/tools/oracle`` (built
    outside the repository; never committed). One process serves every request (JSON lines on stdin/stdout:
    ``analyze_us`` per analysis, ``parse_us`` for ``reps`` parses of each input). Every method returns None
    when the oracle did not answer or answered ``error``; the bench then shows our figure alone."""

    def __init__(self, binary: str):
        self.binary = binary
        self.tools = json.loads((ROOT.parent / "shared" / "tools" / "oracle" / "tools.json").read_text())
        self.proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def _ask(self, req: dict[str, Any]) -> dict[str, Any] | None:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
            ans = json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]
        except (OSError, ValueError, AttributeError):
            return None
        return ans if isinstance(ans, dict) and "error" not in ans else None

    def analyze_ms(self, path: pathlib.Path) -> float | None:
        """llama.cpp's analysis time of the template at ``path`` (ms; its ``analyze_us``), or None."""
        ans = self._ask({"op": "analyze", "id": path.name, "path": str(path), "tools": self.tools})
        us = ans.get("analyze_us") if ans else None
        return us / 1000 if isinstance(us, (int, float)) else None

    def parse(self, path: pathlib.Path, request: dict[str, Any], output: str,
              reps: int) -> tuple[float, dict[str, Any]] | None:
        """llama.cpp's full parse of ``output`` (model text after the prompt of ``request``, a chat request
        dict as in bench/outputs.py): (ms per parse over ``reps`` parses, its OpenAI message), or None.
        The oracle's timer covers the parses only, not the template's apply."""
        req = dict(request, op="parse", id=path.name, path=str(path), inputs=[output], reps=reps,
                   is_partial=False, json_schema=None)
        ans = self._ask(req)
        if not ans or not isinstance(ans.get("parse_us"), (int, float)) or not ans.get("msgs"):
            return None
        msg = ans["msgs"][0]
        return (None if "error" in msg else (ans["parse_us"] / 1000 / reps, msg))  # type: ignore[return-value]

    def close(self) -> None:
        """End the oracle process."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(5)
        except Exception:
            self.proc.kill()


def _oracle_median(b: Bench, files: list[pathlib.Path]) -> float | None:
    """Median llama.cpp analysis time (ms) over ``files``, measured now through the oracle (None without it):
    each template timed at least 3 times (``b.repeats`` if more), its median kept, so one hiccup of the shared
    machine does not decide a template's figure. (A repeated call is often faster than the first one for the
    same template, so this errs in llama.cpp's favour.)"""
    if b.oracle is None:
        return None
    cached = b.raw.get("oracle_analyze_ms")
    if cached is None:
        cached = {}
        t0 = time.perf_counter()
        for i, f in enumerate(files):
            runs = [ms for ms in (b.oracle.analyze_ms(f) for _ in range(max(3, b.repeats))) if ms is not None]
            if runs:
                cached[f.name] = median(runs)
            progress(i + 1, len(files), "llama.cpp oracle: analyses", t0)
        b.raw["oracle_analyze_ms"] = cached
        b.raw["oracle_load"] = os.getloadavg()[0]
    vals = [cached[f.name] for f in files if f.name in cached]
    return median(vals) if vals else None


def _vs_llama(b: Bench, ours: float, files: list[pathlib.Path], factor: float) -> tuple[str, bool | None]:
    """Target text and verdict of "ours ≤ factor × llama.cpp's median" (no verdict without the oracle)."""
    ref = _oracle_median(b, files)
    if ref is None:
        return f"≤ {factor:g}× llama.cpp (oracle absent: ours alone)", None
    return f"≤ {factor:g}× llama.cpp {ref:.2f} ms (ratio {ours / ref:.2f}×)", ours <= factor * ref


def _child(b: Bench, mode: str, cache_dir: pathlib.Path) -> dict[str, Any]:
    env = dict(os.environ, CTE_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT))
    env.pop("CTE_NO_DISK_CACHE", None)
    cmd = [sys.executable, "-m", "bench.child", mode, "--templates", str(b.templates)]
    if b.limit:
        cmd += ["--limit", str(b.limit)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.child {mode} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout)


# ---------------------------------------------------------------------------------------------------------- P1


def bench_p1(b: Bench) -> None:
    """P1: analysis time per template, cold (fresh processes) and warm (in this process)."""
    empty_runs, warm_disk_runs = [], []
    warm_dir = b.tmp / "p1-disk-cache"
    for r in range(b.repeats):
        d = warm_dir if r == 0 else b.tmp / f"p1-empty-{r}"
        b.log(f"P1 cold, empty disk cache: run {r + 1}/{b.repeats} (fresh process)")
        empty_runs.append(_child(b, "p1-cold", d))
        if d != warm_dir:
            shutil.rmtree(d, ignore_errors=True)
    for r in range(b.repeats):
        b.log(f"P1 cold process, warm disk cache: run {r + 1}/{b.repeats} (fresh process)")
        warm_disk_runs.append(_child(b, "p1-cold", warm_dir))
    b.log("P1 memory: tracemalloc over the corpus (fresh process, warm disk cache)")
    mem = _child(b, "p1-mem", warm_dir)
    b.raw["p1_cold_empty"] = empty_runs
    b.raw["p1_cold_warm_disk"] = warm_disk_runs
    b.raw["p1_mem"] = {k: v for k, v in mem.items() if k != "times_ms"}
    errors = empty_runs[0]["errors"]
    if errors:
        b.notes.append(f"P1: {len(errors)} template(s) fail to load and are not timed: "
                       + ", ".join(sorted(errors)[:5]) + (" …" if len(errors) > 5 else ""))
    n = len(empty_runs[0]["times_ms"])
    from .child import template_files

    files = [f for f in template_files(str(b.templates), b.limit) if f.name in empty_runs[0]["times_ms"]]

    def cold_row(id_: str, what: str, runs: list[dict[str, Any]], factor: float) -> Row:
        sums = [Summary.of(list(run["times_ms"].values())) for run in runs]
        med = [s.median for s in sums]
        cpu = Spread.of([median(list(run["cpu_ms"].values())) for run in runs])
        detail = (f"p90 {_spread([s.p90 for s in sums])}, max {_spread([s.max for s in sums], digits=0)}; "
                  f"CPU median {cpu.fmt(2, ' ms')}; {n} templates")
        rss = max(run["rss_mb"] for run in runs)
        target, ok = _vs_llama(b, Spread.of(med).value, files, factor)
        return Row(id_, what, _spread(med), detail, f"RSS {_mb(rss)}", target, ok)

    b.rows.append(cold_row("P1-cold-empty", "analysis per template, cold: fresh process, empty disk cache "
                           "(compile included)", empty_runs, 4.0))
    b.rows.append(cold_row("P1-cold-disk", "analysis per template, cold process, warm disk cache (source "
                           "new to the process)", warm_disk_runs, 1.0))
    b.rows.append(Row("P1-mem", "analysis memory: tracemalloc peak over the whole corpus in one process",
                      _mb(mem["peak_mb"]), f"RSS {_mb(mem['baseline_rss_mb'])} idle → {_mb(mem['rss_mb'])} "
                      f"after (traced run)", _mb(mem["peak_mb"]), "≤ 50 MB", mem["peak_mb"] <= 50))
    ref = ROOT.parent / "shared" / "reference" / "analysis.jsonl"
    if ref.is_file():
        us = [json.loads(line).get("analyze_us") for line in ref.read_text(encoding="utf-8").splitlines() if line]
        us = [u / 1000 for u in us if isinstance(u, (int, float))]
        if us:
            s = Summary.of(us)
            b.notes.append(f"P1 for scale: llama.cpp's C++ analysis (reference/analysis.jsonl analyze_us, one run "
                           f"each): median {s.median:.2f} ms, p90 {s.p90:.2f} ms, max {s.max:.0f} ms")
    _p1_warm(b)


_OVERRIDES: list[Callable[[int], dict[str, Any]]] = [
    lambda i: {"reasoning.start": f"<think{i}>"},
    lambda i: {"content.start": f"<answer{i}>", "content.end": f"</answer{i}>"},
    lambda i: {"tools.format.per_call_start": f"<call{i}>"},
    lambda i: {"reasoning.mode": "TAG_BASED", "reasoning.end": f"</think{i}>"},
]


def _p1_warm(b: Bench) -> None:
    """Warm: each template analysed once (not timed), then re-analysed with new overrides ``k`` times:
    ``reapply`` (no renders) and a full ``analyze()`` (renders memoized)."""
    import tracemalloc

    from core.analysis import analyze, reapply
    from core.jinja.template import ChatTemplate

    from .child import template_files

    files = template_files(str(b.templates), b.limit)
    loaded = []
    t0 = time.perf_counter()
    for i, f in enumerate(files):
        try:
            t = ChatTemplate(f.read_text(encoding="utf-8"), f.name)
            loaded.append((t, analyze(t)))
        except Exception:
            pass
        progress(i + 1, len(files), "P1 warm: first analyses", t0)
    k = 3 if b.quick else 8
    re_runs: list[Summary] = []
    an_runs: list[Summary] = []
    for r in range(b.repeats):
        re_t, an_t = [], []
        t0 = time.perf_counter()
        for j, (t, rep) in enumerate(loaded):
            one_re, one_an = [], []
            for i in range(k):
                ov = _OVERRIDES[i % len(_OVERRIDES)](r * 100 + i)
                s = time.perf_counter()
                reapply(rep, overrides=ov)
                one_re.append((time.perf_counter() - s) * 1000)
                s = time.perf_counter()
                analyze(t, overrides=ov)
                one_an.append((time.perf_counter() - s) * 1000)
            re_t.append(median(one_re))
            an_t.append(median(one_an))
            progress(j + 1, len(loaded), f"P1 warm: run {r + 1}/{b.repeats}", t0)
        re_runs.append(Summary.of(re_t))
        an_runs.append(Summary.of(an_t))
    # memory: peak of one warm call (max over templates), traced separately
    peak_re = peak_an = 0.0
    tracemalloc.start()
    for t, rep in loaded:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        reapply(rep, overrides=_OVERRIDES[0](7))
        peak_re = max(peak_re, (tracemalloc.get_traced_memory()[1] - base) / 2**20)
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        analyze(t, overrides=_OVERRIDES[0](7))
        peak_an = max(peak_an, (tracemalloc.get_traced_memory()[1] - base) / 2**20)
    tracemalloc.stop()
    b.raw["p1_warm_reapply"] = [asdict(s) for s in re_runs]
    b.raw["p1_warm_analyze"] = [asdict(s) for s in an_runs]
    cleared_runs, cycle_runs = _p1_warm_memos(b, [t for t, _ in loaded])

    def warm_row(id_: str, what: str, runs: list[Summary], peak: float) -> Row:
        med = Spread.of([s.median for s in runs])
        p90 = Spread.of([s.p90 for s in runs])
        detail = (f"p90 {p90.fmt(2, ' ms')}, max {_spread([s.max for s in runs], digits=1)}; "
                  f"{len(loaded)} templates × {k} edits")
        return Row(id_, what, med.fmt(3, " ms"), detail, f"{_mb(peak)} per call", "median ≤ 3 ms, p90 ≤ 15 ms",
                   med.value <= 3 and p90.value <= 15)

    b.rows.append(warm_row("P1-warm-reapply", "warm: new overrides on an analysed template "
                           "(core.analysis.reapply, the explorer's edit path)", re_runs, peak_re))
    b.rows.append(warm_row("P1-warm-analyze", "warm: full analyze() re-run with new overrides "
                           "(renders memoized)", an_runs, peak_an))
    from .child import template_files

    names = {t.name for t, _ in loaded}
    files = [f for f in template_files(str(b.templates), b.limit) if f.name in names]
    for id_, what, runs in (
            ("P1-warm-cleared", "warm, memos cleared: analyze() of a compiled template, every render, probe and "
                                "diff redone (core.memo.clear_memos before each)", cleared_runs),
            ("P1-warm-cycle", "warm, cycling through the whole corpus: analyze() of each template in turn "
                              "(memos as a long-running server has them)", cycle_runs)):
        med = Spread.of([s.median for s in runs])
        target, ok = _vs_llama(b, med.value, files, 1.0)
        cpu = (f"; CPU median {b.raw['p1_warm_cleared_cpu_ms_median']:.2f} ms" if id_ == "P1-warm-cleared" else "")
        b.rows.append(Row(id_, what, med.fmt(2, " ms"), f"p90 {_spread([s.p90 for s in runs])}, max "
                          f"{_spread([s.max for s in runs], digits=1)}{cpu}; {len(loaded)} templates", "", target,
                          ok))
    if b.raw.get("p1_warm_cleared_paired"):
        _paired_row(b, b.raw["p1_warm_cleared_paired"])


def _p1_warm_memos(b: Bench, templates: list[Any]) -> tuple[list[Summary], list[Summary]]:
    """Warm analyses timed two ways per run: memos cleared before each template, and one more pass over the
    corpus with the memos left as they are (a server cycling through templates)."""
    from core.analysis import analyze
    from core.memo import clear_memos

    cleared: list[Summary] = []
    cycle: list[Summary] = []
    paired: dict[str, list[tuple[float, float]]] = {}
    cpu: list[float] = []
    for r in range(b.repeats):
        times = []
        t0 = time.perf_counter()
        for j, t in enumerate(templates):
            clear_memos()
            s = time.perf_counter()
            c = time.thread_time()
            analyze(t)
            times.append((time.perf_counter() - s) * 1000)
            cpu.append((time.thread_time() - c) * 1000)
            progress(j + 1, len(templates), f"P1 warm, memos cleared: run {r + 1}/{b.repeats}", t0)
        cleared.append(Summary.of(times))
        if b.oracle is not None:
            # a pass of its own: running llama.cpp's process between two of our analyses evicts this process's
            # working set from the CPU caches (our analysis measured 1.6x slower interleaved, 2026-12-02), so the
            # row above times ours alone, as llama.cpp's median is timed alone, and this pass times each of ours
            # right before llama.cpp's analysis of the same template: both see the same moment's load and caches
            t0 = time.perf_counter()
            for j, t in enumerate(templates):
                clear_memos()
                s = time.perf_counter()
                analyze(t)
                ours = (time.perf_counter() - s) * 1000
                theirs = b.oracle.analyze_ms(b.templates / t.name)
                if theirs is not None:
                    paired.setdefault(t.name, []).append((ours, theirs))
                progress(j + 1, len(templates), f"P1 warm, memos cleared, paired with llama.cpp: run "
                         f"{r + 1}/{b.repeats}", t0)
        for t in templates:  # fill the memos again (not timed)
            analyze(t)
        times = []
        t0 = time.perf_counter()
        for j, t in enumerate(templates):
            s = time.perf_counter()
            analyze(t)
            times.append((time.perf_counter() - s) * 1000)
            progress(j + 1, len(templates), f"P1 warm, corpus cycling: run {r + 1}/{b.repeats}", t0)
        cycle.append(Summary.of(times))
    b.raw["p1_warm_cleared"] = [asdict(s) for s in cleared]
    b.raw["p1_warm_cleared_cpu_ms_median"] = median(cpu)
    b.raw["p1_warm_cycle"] = [asdict(s) for s in cycle]
    if paired:
        b.raw["p1_warm_cleared_paired"] = paired
    return cleared, cycle


def _paired_row(b: Bench, paired: dict[str, list[tuple[float, float]]]) -> None:
    """Row of the warm, memos-cleared analyses each followed at once by llama.cpp's analysis of the same
    template (oracle): both sides see the same moment's load, which the separately timed rows cannot promise
    on a shared machine. Ratio of the two medians, and the median of the per-template ratios."""
    ours = [median([o for o, _ in v]) for v in paired.values()]
    theirs = [median([t for _, t in v]) for v in paired.values()]
    per = [median([o / max(t, 1e-3) for o, t in v]) for v in paired.values()]
    mo, mt = median(ours), median(theirs)
    b.rows.append(Row("P1-warm-cleared-paired", "warm, memos cleared, each analysis timed back to back with "
                      "llama.cpp's analysis of the same template (oracle)", _ms(mo),
                      f"llama.cpp median {_ms(mt)}; median per-template ratio {median(per):.2f}×, "
                      f"p90 {sorted(per)[int(len(per) * 0.9)]:.2f}×; {len(paired)} templates", "",
                      f"≤ 1× llama.cpp {mt:.2f} ms (ratio {mo / mt:.2f}×)", mo <= mt))


# ---------------------------------------------------------------------------------------------------------- P2


def _time_call(fn: Callable[[], Any], min_time: float) -> float:
    """Seconds per call of ``fn``: repeated until ``min_time`` seconds have passed (at least 3 calls)."""
    n = 0
    t0 = time.perf_counter()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if n >= 3 and dt >= min_time:
            return dt / n


def _p2_samples(b: Bench, target_bytes: int, calls_for: Callable[[int], int]) -> list[tuple[str, Any]]:
    from core.jinja.template import ChatTemplate

    from .outputs import SampleError, fit_output

    out = []
    for fmt, name in P2_TEMPLATES:
        path = b.templates / name
        if not path.is_file():
            b.notes.append(f"P2/P3: {name} ({fmt}) not found in {b.templates}; skipped")
            continue
        try:
            t = ChatTemplate(path.read_text(encoding="utf-8"), name)
            out.append((fmt, fit_output(t, target_bytes, calls_for(target_bytes))))
        except SampleError as e:
            b.notes.append(f"P2/P3: no usable sample for {name}: {e}")
    return out


def bench_p2(b: Bench) -> None:
    """P2: full-parse throughput on a long output per tool format."""
    import tracemalloc

    size = b.parse_kb * 1024
    b.log(f"P2: building ~{b.parse_kb} KB outputs")
    min_time = 0.2 if b.quick else 0.5
    for fmt, s in _p2_samples(b, size, lambda _: 6):
        parser = s.bundle.parser
        oracle_run = _oracle_parse(b, s, min_time)
        runs, theirs_runs = [], []
        for _ in range(max(3, b.repeats) if oracle_run else b.repeats):
            # with the oracle, each of our runs is followed at once by one of llama.cpp's (same load)
            runs.append(s.size_bytes / _time_call(lambda: parser.parse(s.output), min_time) / 1e6)
            ms = oracle_run() if oracle_run else None
            if ms is not None:
                theirs_runs.append(ms)
        if theirs_runs:
            b.raw.setdefault("oracle_parse_ms", {})[s.template] = theirs_runs
        tracemalloc.start()
        parser.parse(s.output)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        b.raw.setdefault("p2", []).append({"format": fmt, "template": s.template, "bytes": s.size_bytes,
                                           "mb_per_s": runs, "peak_mb": peak, "sample": s.note})
        sp = Spread.of(runs)
        ours_ms = s.size_bytes / sp.value / 1e3
        target, ok = "≥ 20 MB/s", sp.value >= 20
        theirs = median(theirs_runs) if theirs_runs else None
        if theirs is not None:
            target = (f"≤ 1× llama.cpp {_ms(theirs)} = {s.size_bytes / theirs / 1e3:.1f} MB/s "
                      f"(ratio {ours_ms / theirs:.2f}×)")
            ok = ours_ms <= theirs
        b.rows.append(Row(f"P2-{fmt}", f"full parse, {fmt} ({s.template}): reasoning + content + "
                          f"{len(s.expected.tool_calls)} tool calls", sp.fmt(1, " MB/s"),
                          f"{s.size_bytes / 1024:.1f} KB in {_ms(ours_ms)}", _mb(peak), target, ok))


def _oracle_parse(b: Bench, s: Any, min_time: float) -> Callable[[], float | None] | None:
    """A function timing llama.cpp's full parse of sample ``s`` (same request, same output) once: ms per
    parse over enough repetitions to last ~``min_time``, or None if the oracle did not answer. None without
    the oracle or when it cannot parse the sample. A note is added when llama.cpp reads the output
    differently from us (then the times are not comparable)."""
    if b.oracle is None:
        return None
    from .outputs import _request

    path = b.templates / s.template
    req = _request([{"role": "user", "content": "Plan my trip to Paris."}])
    first = b.oracle.parse(path, req, s.output, 1)
    if first is None:
        b.notes.append(f"P2: the llama.cpp oracle did not parse the {s.template} sample")
        return None
    ms, msg = first
    calls = msg.get("tool_calls") or []
    if len(calls) != len(s.expected.tool_calls) or (msg.get("content") or "").strip() != s.expected.content.strip():
        b.notes.append(f"P2: llama.cpp reads the {s.template} sample differently ({len(calls)} tool calls, "
                       f"content {len(msg.get('content') or '')} chars); its time is shown but not comparable")
    reps = max(3, int(min_time * 1000 / max(ms, 0.01)))
    oracle = b.oracle

    def one_run() -> float | None:
        r = oracle.parse(path, req, s.output, reps)
        return r[0] if r else None

    return one_run


# ---------------------------------------------------------------------------------------------------------- P3


def bench_p3(b: Bench) -> None:
    """P3: streaming in ~4-character steps vs one full parse, per size."""
    from core.chat.stream import StreamingParser

    import tracemalloc

    step = 4
    for kb in b.sizes:
        b.log(f"P3: {kb} KB outputs")
        for fmt, s in _p2_samples(b, kb * 1024, lambda n: P3_CALLS.get(n // 1024, 4)):
            parser, text = s.bundle.parser, s.output
            full = parser.parse(text)
            ratios, streams, parses = [], [], []
            mismatch, held = False, 0
            for _ in range(b.repeats):
                t_parse = _time_call(lambda: parser.parse(text), 0.05 if b.quick else 0.2)
                t0 = time.perf_counter()
                sp = StreamingParser(parser)
                for i in range(0, len(text), step):
                    sp.feed(text[i:i + step])
                sp.finish()
                t_stream = time.perf_counter() - t0
                mismatch |= sp.message.to_openai() != full.to_openai()
                held = max(held, sp.held_back)
                ratios.append(t_stream / t_parse)
                streams.append(t_stream * 1000)
                parses.append(t_parse * 1000)
            tracemalloc.start()
            sp = StreamingParser(parser)
            for i in range(0, len(text), step):
                sp.feed(text[i:i + step])
            sp.finish()
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            steps = (len(text) + step - 1) // step
            b.raw.setdefault("p3", []).append({"format": fmt, "template": s.template, "kb": kb,
                                               "bytes": s.size_bytes, "steps": steps, "ratio": ratios,
                                               "stream_ms": streams, "parse_ms": parses,
                                               "stream_equals_parse": not mismatch, "held_back": held})
            if mismatch:
                b.notes.append(f"P3: {s.template} {kb} KB: the streamed message differs from the full parse "
                               f"({held} steps held back)")
            step_costs = []
            sp = StreamingParser(parser)
            for i in range(0, len(text), step):
                c0 = time.thread_time()
                sp.feed(text[i:i + step])
                step_costs.append((time.thread_time() - c0) * 1e6)
            step_costs.sort()
            p99 = step_costs[min(len(step_costs) - 1, int(len(step_costs) * 0.99))]
            b.raw["p3"][-1]["step_p99_us"] = p99
            b.raw["p3"][-1]["step_p50_us"] = step_costs[len(step_costs) // 2]
            sp_ratio = Spread.of(ratios)
            per_step_us = median(streams) * 1000 / steps
            if kb == max(b.sizes) and fmt == "JSON_NATIVE":
                b.notes.append(f"P3: a 3× ratio at {kb} KB would leave {3 * median(parses) * 1000 / steps:.2f} µs per "
                               f"{step}-char step (one full parse runs at C speed: str.find, regex, json); one "
                               "Python call with a slice already costs ~0.1-0.2 µs. The ratio's flatness across "
                               "sizes is what shows the streaming is linear")
            b.rows.append(Row(f"P3-{kb}KB-{fmt}", f"stream {kb} KB in {step}-char steps / one full parse, "
                              f"{fmt} ({s.template})", sp_ratio.fmt(1, "×"),
                              f"stream {_spread(streams, digits=1)} ({steps} steps, {per_step_us:.1f} µs/step, slowest "
                              f"1 % of steps {p99:.0f} µs CPU), parse {_spread(parses, digits=3)}"
                              + (", STREAM ≠ PARSE" if mismatch else ""),
                              _mb(peak), "≤ 3×", sp_ratio.value <= 3))


# ---------------------------------------------------------------------------------------------------------- P4


def bench_p4(b: Bench) -> None:
    """P4: ``python -m core analyze T`` as a fresh process per template (wall time of the whole process, disk
    cache of compiled templates warm), as a shell loop or a CI job runs it. Python's bytecode cache is on
    (``PYTHONPYCACHEPREFIX`` in the run's temporary directory), as in any installed copy; the interpreter
    alone (``python -c pass``) is timed too, for scale."""
    from .child import template_files

    files = template_files(str(b.templates), b.limit)
    k = min(len(files), 5 if b.quick else 20)
    picked = [files[i * len(files) // k] for i in range(k)]
    env = dict(os.environ, CTE_CACHE_DIR=str(b.tmp / "p1-disk-cache"), PYTHONPATH=str(ROOT),
               PYTHONPYCACHEPREFIX=str(b.tmp / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    import resource

    cpu: list[float] = []

    def wall(cmd: list[str]) -> float:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = (time.perf_counter() - t0) * 1000
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
        return dt

    for f in picked:  # fill the bytecode and compiled-template caches (not timed)
        wall([sys.executable, "-m", "core", "analyze", str(f)])
    runs, base, cpu_cli, cpu_base = [], [], [], []
    for r in range(b.repeats):
        t0 = time.perf_counter()
        times = []
        for j, f in enumerate(picked):
            times.append(wall([sys.executable, "-m", "core", "analyze", str(f)]))
            cpu_cli.append(cpu[-1])
            base.append(wall([sys.executable, "-c", "pass"]))
            cpu_base.append(cpu[-1])
            progress(j + 1, len(picked), f"P4 CLI fresh processes: run {r + 1}/{b.repeats}", t0)
        runs.append(median(times))
    b.raw["p4_cli_ms"] = runs
    b.raw["p4_python_ms"] = median(base)
    sp = Spread.of(runs)
    b.rows.append(Row("P4-cli", "`python -m core analyze T` as a fresh process (whole process wall time, warm "
                      "disk cache, bytecode cached)", sp.fmt(0, " ms"),
                      f"{k} templates; CPU (user+sys) {median(cpu_cli):.0f} ms; the interpreter alone (python -c "
                      f"pass) {median(base):.0f} ms wall, {median(cpu_base):.0f} ms CPU", "",
                      "≤ 200 ms", sp.value <= 200))


# ---------------------------------------------------------------------------------------------------------- P6


def bench_p6(b: Bench) -> None:
    """P6: streaming cost per 1-character feed on hostile outputs (issue 16 point 8): per route and size, the
    slowest 1 % of feeds (CPU time of the feeding thread) over the kinds of :mod:`bench.hostile`; a sample is
    cut after a CPU budget (its feeds so far are reported, the row fails). Each sample streams ``repeats`` times
    and a feed's cost is its median over those passes (:func:`bench.hostile.feed_costs` says why); the 'calls'
    kind, which sets the row on every route, also shows each pass's own p99."""
    from core.jinja.template import ChatTemplate

    from .hostile import FAMILY_ROUTES, ROUTES, feed_costs, hostile_samples

    routes = ROUTES[:3] if b.quick else ROUTES + FAMILY_ROUTES
    if b.routes:
        routes = [(r, name) for r, name in ROUTES + FAMILY_ROUTES if any(x in name for x in b.routes)]
        if not routes:
            b.notes.append(f"P6: no route's template matches --routes {','.join(b.routes)}")
    budget = 3.0 if b.quick else 20.0
    for n in b.stream_chars:
        for route, name in routes:
            path = b.templates / name
            if not path.is_file():
                b.notes.append(f"P6: {name} not found in {b.templates}; skipped")
                continue
            t = ChatTemplate(path.read_text(encoding="utf-8"), name)
            samples, notes = hostile_samples(t, route, n)
            b.notes.extend(f"P6: {x}" for x in notes)
            parts, worst, all_equal, cut = [], 0.0, True, []
            for s in samples:
                b.log(f"P6 {n} chars: {name} {s.kind}")
                c = feed_costs(s.parser, s.output, budget, passes=b.repeats)
                b.raw.setdefault("p6", []).append({"route": route, "template": name, "kind": s.kind, "chars": n,
                                                   **asdict(c)})
                worst = max(worst, c.p99_us)
                all_equal &= c.stream_equals_parse
                parts.append(f"{s.kind} {c.p99_us:.0f}" + (f" (passes {'/'.join(f'{x:.0f}' for x in c.pass_p99_us)})"
                                                           if c.passes > 1 and s.kind == "calls" else ""))
                if c.feeds < len(s.output):
                    cut.append(f"{s.kind} cut after {c.feeds} feeds")
            if not samples:
                continue
            detail = "p99 µs: " + ", ".join(parts) + ("; " + "; ".join(cut) if cut else "")
            detail += "" if all_equal else "; STREAM ≠ PARSE"
            size = f"{n // 1000}k" if n >= 1000 else str(n)
            b.rows.append(Row(f"P6-{size}-{name.split('.')[0][:24]}",
                              f"stream hostile outputs 1 char per feed, {route}, ~{n} chars", f"{worst:.0f} µs",
                              detail, "", "slowest 1 % ≤ 50 µs, stream = parse",
                              worst <= 50 and all_equal and not cut))


# ---------------------------------------------------------------------------------------------------------- P5


def bench_p5(b: Bench) -> None:
    """P5: wall time of ``batch`` analyses (templates cycled) on ``workers`` fresh worker processes."""
    import multiprocessing as mp

    from .child import batch_init, batch_task, template_files

    files = template_files(str(b.templates), b.limit)
    items = [(f.name, str(f)) for f in itertools.islice(itertools.cycle(files), b.batch)]
    ctx = mp.get_context("spawn")  # fresh interpreters: nothing inherited from this (warm) process
    warm_dir = b.tmp / "p1-disk-cache"
    modes = [("warm", warm_dir)] + ([] if b.quick else [("empty", None)])
    for mode, cache in modes:
        walls, rss = [], []
        for r in range(b.repeats):
            d = cache or b.tmp / f"p5-empty-{r}"
            old = os.environ.get("CTE_CACHE_DIR")
            os.environ["CTE_CACHE_DIR"] = str(d)
            try:
                t0 = time.perf_counter()
                times: list[float] = []
                errors = 0
                peak = 0.0
                with ctx.Pool(b.workers, initializer=batch_init) as pool:
                    for i, (_, ms, err, mb) in enumerate(pool.imap_unordered(batch_task, items, chunksize=4)):
                        times.append(ms)
                        errors += err is not None
                        peak = max(peak, mb)
                        if i % 10 == 9 or i + 1 == len(items):
                            progress(i + 1, len(items), f"P5 batch ({mode} disk cache) {r + 1}/{b.repeats}", t0)
                walls.append(time.perf_counter() - t0)
                rss.append(peak)
            finally:
                if old is None:
                    os.environ.pop("CTE_CACHE_DIR", None)
                else:
                    os.environ["CTE_CACHE_DIR"] = old
                if cache is None:
                    shutil.rmtree(d, ignore_errors=True)
            b.raw.setdefault(f"p5_{mode}", []).append({"wall_s": walls[-1], "task_ms_median": median(times),
                                                       "errors": errors, "worker_rss_mb": peak})
            if errors:
                b.notes.append(f"P5 ({mode}): {errors} of {len(items)} analyses failed (templates that do not load)")
        sp = Spread.of(walls)
        limit = (15 if mode == "warm" else 60) * len(items) / 1000  # issue 14: 1,000 in 15 s warm, 60 s empty
        what = ("warm disk cache (filled by P1)" if mode == "warm" else "empty disk cache per run")
        b.rows.append(Row(f"P5-{mode}", f"corpus batch: {len(items)} analyses ({len(files)} templates cycled) "
                          f"on {b.workers} fresh worker processes, {what}", sp.fmt(2, " s"),
                          f"{len(items) / sp.value:.0f} analyses/s incl. worker start-up; task median "
                          f"{_spread([r['task_ms_median'] for r in b.raw[f'p5_{mode}']])}",
                          f"RSS {_mb(max(rss))} per worker", f"≤ {limit:g} s", sp.value <= limit))


# ------------------------------------------------------------------------------------------------------- table


def _load(b: Bench) -> str:
    """1-minute load average at the start and the end of the run (other processes sharing the cores make the
    timings noisier and slower)."""
    try:
        end = os.getloadavg()[0]
    except OSError:
        return "n/a"
    start = b.raw.get("loadavg_start")
    return f"{start:.1f} → {end:.1f}" if isinstance(start, float) else f"{end:.1f}"


def render_table(b: Bench) -> str:
    """The results as a Markdown table plus notes (the form docs/performance.md records)."""
    head = ["ID", "Figure", "Median [min–max over runs]", "Detail", "Peak memory", "Target", "OK"]
    lines = [
        f"Chat Template Explorer benchmarks — {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')}, "
        f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{b.repeats} run(s) per figure{' (--quick)' if b.quick else ''}, load average {_load(b)}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for r in b.rows:
        ok = "" if r.ok is None else ("yes" if r.ok else "NO")
        lines.append("| " + " | ".join([r.id, r.figure, r.value, r.detail, r.mem, r.target, ok]) + " |")
    if b.notes:
        lines.append("")
        lines.extend(f"- {n}" for n in b.notes)
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The ``python -m bench`` options (see each option's help); ``SystemExit`` on bad syntax (argparse)."""
    ap = argparse.ArgumentParser(prog="python -m bench", description="Chat Template Explorer benchmarks "
                                 "(P1 analysis, P2 parse, P3 streaming, P4 CLI process, P5 corpus batch, "
                                 "P6 streaming hostile outputs).")
    ap.add_argument("--quick", action="store_true", help="one run per figure, fewer steps")
    ap.add_argument("--repeats", type=int, default=None, help="runs per figure (default 3; 1 with --quick)")
    ap.add_argument("--only", default="P1,P2,P3,P4,P5,P6", help="comma-separated parts to run (default all)")
    ap.add_argument("--templates", default=str(DEFAULT_TEMPLATES), help="directory of *.jinja templates")
    ap.add_argument("--limit", type=int, default=None, help="use only the first N templates (P1, P4, P5; "
                                                           "default all, 40 with --quick)")
    ap.add_argument("--batch", type=int, default=None, help="P5: analyses in the batch (default 1000; 200 with "
                                                           "--quick)")
    ap.add_argument("--workers", type=int, default=2, help="P5: worker processes (default 2)")
    ap.add_argument("--sizes", default=None, help="P3: output sizes in KB (default 8,128; 8 with --quick)")
    ap.add_argument("--stream-chars", default=None,
                    help="P6: hostile payload sizes in characters (default 20000,160000; 20000 with --quick)")
    ap.add_argument("--routes", default="",
                    help="P6: only the routes whose template file name contains one of these comma-separated "
                         "strings (e.g. gemma-4,MiniMax; default every route, the first three with --quick)")
    ap.add_argument("--oracle", default=os.environ.get(ORACLE_ENV),
                    help=f"llama.cpp's oracle binary (default ${ORACLE_ENV}); when given, P1 is compared with "
                         "llama.cpp's analysis and P2 with its parse, timed in the same run")
    ap.add_argument("--parse-kb", type=int, default=45, help="P2: output size in KB (default 45)")
    ap.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    ap.add_argument("--markdown", metavar="FILE",
                    help="also write the table and notes as Markdown (the form docs/performance.md records)")
    return ap.parse_args(argv)


FULL_RUN_NOTE = ("the full run (no --quick: 3 runs per figure, all 351 templates, P3 also at 128 KB, a 1,000-analysis "
                 "batch with an empty and a warm cache, P6 on every route at 20k and 160k characters) takes about "
                 "15-20 minutes on two free cores (an estimate from the parts' times, not a timed whole run)")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench``: runs the selected parts, prints the table (and writes ``--json``,
    ``--markdown``).

    Returns 0, or 2 after printing every bad option (unknown part, templates directory, sizes, values < 1).
    """
    args = parse_args(argv)
    parts = {p.strip().upper() for p in args.only.split(",") if p.strip()}
    unknown = parts - {"P1", "P2", "P3", "P4", "P5", "P6", "P7"}
    templates = pathlib.Path(args.templates)
    sizes_text = args.sizes or ("8" if args.quick else "8,128")
    chars_text = args.stream_chars or ("20000" if args.quick else "20000,160000")
    try:
        sizes = [int(x) for x in sizes_text.split(",") if x.strip()]
    except ValueError:
        sizes = []
    try:
        stream_chars = [int(x) for x in chars_text.split(",") if x.strip()]
    except ValueError:
        stream_chars = []
    problems = []
    if unknown:
        problems.append(f"--only: unknown part(s) {', '.join(sorted(unknown))} (known: P1, P2, P3, P4, P5, P6, P7)")
    if not stream_chars or any(c <= 0 for c in stream_chars):
        problems.append(f"--stream-chars: {chars_text!r} is not a list of positive sizes like 20000,160000")
    if args.oracle and not (os.path.isfile(args.oracle) and os.access(args.oracle, os.X_OK)):
        problems.append(f"--oracle: {args.oracle} is not an executable file (build: ../shared/tools/oracle/README.md)")
    if not templates.is_dir() or not any(templates.glob("*.jinja")):
        problems.append(f"--templates: {templates} is not a directory of *.jinja templates")
    if not sizes or any(s <= 0 for s in sizes):
        problems.append(f"--sizes: {sizes_text!r} is not a list of positive KB sizes like 8,128")
    for opt in ("repeats", "limit", "batch", "workers", "parse_kb"):
        v = getattr(args, opt)
        if v is not None and v < 1:
            problems.append(f"--{opt.replace('_', '-')}: must be >= 1, got {v}")
    if problems:
        for p in problems:
            print(f"python -m bench: {p}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    repeats = args.repeats or (1 if args.quick else 3)
    limit = args.limit or (40 if args.quick else None)  # --quick: the first 40 templates (≤ 60 s in all)
    batch = args.batch or (200 if args.quick else 1000)
    b = Bench(templates=templates, repeats=repeats, quick=args.quick, limit=limit, batch=batch,
              workers=args.workers, sizes=sizes, parse_kb=args.parse_kb, stream_chars=stream_chars,
              routes=[x.strip() for x in args.routes.split(",") if x.strip()])
    if args.oracle:
        b.oracle = Oracle(args.oracle)
    else:
        b.notes.append(f"llama.cpp oracle absent (--oracle PATH or ${ORACLE_ENV}): our figures alone, no ratios")
    os.environ["CTE_CACHE_DIR"] = str(b.tmp / "parent-disk-cache")
    if os.environ.pop("CTE_NO_DISK_CACHE", None) is not None:
        b.notes.append("CTE_NO_DISK_CACHE was set: ignored (the bench measures with and without a disk cache)")
    t0 = time.perf_counter()
    try:
        b.raw["loadavg_start"] = os.getloadavg()[0]
    except OSError:
        pass
    try:
        if "P1" in parts:
            bench_p1(b)
        if "P2" in parts:
            bench_p2(b)
        if "P3" in parts:
            bench_p3(b)
        if "P4" in parts:
            if not (b.tmp / "p1-disk-cache").is_dir():
                b.log("P4: filling the disk cache (one fresh process)")
                _child(b, "p1-cold", b.tmp / "p1-disk-cache")
            bench_p4(b)
        if "P5" in parts:
            if "P1" not in parts:  # fill the warm disk cache P5 starts from
                b.log("P5: filling the disk cache (one fresh process)")
                _child(b, "p1-cold", b.tmp / "p1-disk-cache")
            bench_p5(b)
        if "P6" in parts:
            bench_p6(b)
        if "P7" in parts:  # opt-in (issue 12): lint of the corpus
            from .lint import bench_lint

            bench_lint(b, ROOT, Row, progress)
    finally:
        if b.oracle is not None:
            b.oracle.close()
        shutil.rmtree(b.tmp, ignore_errors=True)
    b.notes.append(f"total bench time {time.perf_counter() - t0:.0f} s")
    if b.quick:
        b.notes.append(FULL_RUN_NOTE)
    table = render_table(b)
    print(table)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table + "\n", encoding="utf-8")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"rows": [asdict(r) for r in b.rows], "raw": b.raw,
                                                       "notes": b.notes}, indent=1), encoding="utf-8")
    return 0
