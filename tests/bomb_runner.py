"""Run the resource-bomb corpus (tests/data/bombs) in this process and print one JSON line per bomb, then a
summary line. Meant to run in a subprocess with RLIMIT_AS set (tests/test_limits.py does), so a regression
cannot take the machine down:

    python -m tests.bomb_runner tests/data/bombs [MEMORY_MB [ROUNDS]]

Each bomb is analysed with ``analyze(..., strict=True)`` under short limits (0.3 s per render, 0.6 s for the
analysis) and rendered once with the plain renderer (``ChatTemplate.render``), so every one must end in
errors; the line records the seconds each took and the error messages (first round). ROUNDS (default 1) runs
the corpus again: with warm bounded caches a second round must not grow what is held. The summary gives, after a
warm-up analysis and after each round (garbage collected): the resident memory, the same once glibc has returned
its free heap pages (``malloc_trim``), and the Python blocks still allocated; then the same with the memos
cleared (``core.memo.clear_memos``), then with every cache cleared (``core.memo.clear_caches``), and the peak.
"""

from __future__ import annotations

import ctypes
import gc
import json
import pathlib
import resource
import sys
import time

from bench.child import peak_rss_mb


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def _trimmed_rss_mb() -> float:
    """RSS after handing the C allocator's free heap pages back to the system (glibc ``malloc_trim``; without
    glibc, plain RSS): what the process still holds rather than what its allocator kept for reuse."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return _rss_mb()


def _round(directory: pathlib.Path, limits: object, report: bool) -> None:
    from core.analysis import analyze
    from core.jinja.template import ChatTemplate

    for path in sorted(directory.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        t0 = time.perf_counter()
        try:
            analyze(ChatTemplate(source, path.name, limits=limits), budget_s=0.6, strict=True)
            error = None
        except MemoryError:
            error = "MemoryError"
        except Exception as e:  # every bomb must end here, with one line naming the limit
            error = str(e)
        t1 = time.perf_counter()
        try:  # the plain (transformers-like) renderer, which the llama.cpp-compatible one refuses less
            ChatTemplate(source, path.name, limits=limits).render({"messages": [{"role": "user", "content": "hi"}]})
            render_error = None
        except MemoryError:
            render_error = "MemoryError"
        except Exception as e:
            render_error = str(e)
        if report:
            print(json.dumps({"bomb": path.name, "seconds": round(t1 - t0, 3), "error": error,
                              "render_seconds": round(time.perf_counter() - t1, 3), "render_error": render_error,
                              "rss_mb": round(_rss_mb(), 1)}), flush=True)


def main(argv: list[str]) -> int:
    directory = pathlib.Path(argv[0])
    if len(argv) > 1:
        limit = int(argv[1]) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    rounds = int(argv[2]) if len(argv) > 2 else 1
    from core.analysis import analyze
    from core.memo import clear_caches, clear_memos
    from core.jinja.limits import RenderLimits
    from core.jinja.template import ChatTemplate

    limits = RenderLimits(timeout_s=0.3)
    normal = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}" \
             "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    analyze(ChatTemplate(normal, "warm-up"))
    # and compiled from source once (the analysis above may have loaded its code from the disk cache): the
    # lexer's, parser's and code generator's tables, built on first use, belong to the start, not to a round
    from core.jinja.llama import probe_environment
    probe_environment().compile(normal)
    gc.collect()
    start = _rss_mb()
    summary: dict = {"summary": True, "rss_start_mb": round(start, 1), "rss_start_trimmed_mb": round(_trimmed_rss_mb(), 1),
                     "blocks_start": sys.getallocatedblocks()}
    for k in range(1, rounds + 1):
        _round(directory, limits, report=k == 1)
        gc.collect()
        # RSS as the allocators left it, RSS with free C-heap pages returned, and the Python objects still
        # allocated (pymalloc blocks: what is retained, whatever the allocators keep for reuse)
        summary[f"rss_round{k}_mb"] = round(_rss_mb(), 1)
        summary[f"rss_round{k}_trimmed_mb"] = round(_trimmed_rss_mb(), 1)
        summary[f"blocks_round{k}"] = sys.getallocatedblocks()
    summary["rss_end_mb"] = summary[f"rss_round{rounds}_mb"]
    clear_memos()   # the bounded memos (core.memo) emptied: what is left is code, compiled templates, caches
    gc.collect()
    summary["rss_memos_cleared_trimmed_mb"] = round(_trimmed_rss_mb(), 1)
    summary["blocks_memos_cleared"] = sys.getallocatedblocks()
    clear_caches()  # and every other cache (compiled templates, the type cache): what a server would call
    summary["rss_cleared_trimmed_mb"] = round(_trimmed_rss_mb(), 1)
    summary["blocks_cleared"] = sys.getallocatedblocks()
    # VmHWM, not ru_maxrss: on Linux a process started by fork+exec keeps its parent's peak in ru_maxrss, so a
    # test runner already above the cap when it starts this runner would read as a bomb over the cap
    summary["rss_peak_mb"] = round(peak_rss_mb(), 1)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
