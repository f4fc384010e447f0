"""Run the resource-bomb corpus (tests/data/bombs) in this process and print one JSON line per bomb, then a
summary line. Meant to run in a subprocess with RLIMIT_AS set (tests/test_limits.py does), so a regression
cannot take the machine down:

    python -m tests.bomb_runner tests/data/bombs [MEMORY_MB]

Each bomb is analysed with ``analyze(..., strict=True)`` under short limits (0.3 s per render, 0.6 s for the
analysis) and rendered once with the plain renderer (``ChatTemplate.render``), so every one must end in
errors; the line records the seconds each took and the error messages. The summary gives the resident memory after a warm-up analysis, after all
bombs (garbage collected), and the peak.
"""

from __future__ import annotations

import gc
import json
import pathlib
import resource
import sys
import time


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main(argv: list[str]) -> int:
    directory = pathlib.Path(argv[0])
    if len(argv) > 1:
        limit = int(argv[1]) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from core.analysis import analyze
    from core.templating import ChatTemplate, RenderLimits

    limits = RenderLimits(timeout_s=0.3)
    normal = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}" \
             "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    analyze(ChatTemplate(normal, "warm-up"))
    gc.collect()
    start = _rss_mb()
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
        print(json.dumps({"bomb": path.name, "seconds": round(t1 - t0, 3), "error": error,
                          "render_seconds": round(time.perf_counter() - t1, 3), "render_error": render_error,
                          "rss_mb": round(_rss_mb(), 1)}), flush=True)
    gc.collect()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"summary": True, "rss_start_mb": round(start, 1), "rss_end_mb": round(_rss_mb(), 1),
                      "rss_peak_mb": round(peak, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
