"""Timed fuzz of the exported response_templates (issue 24): every corpus template that exports, at both
fidelities, parsed by transformers' own ``parse_response`` on the hostile outputs of
:func:`core.export.redos.fuzz_outputs` (10k spaces, near-miss markers, long runs of each marker's characters…).
Each distinct response_template is fuzzed once. Prints the worst parse time, the outputs over the 50 ms budget
and the static check's count; ``--one FILE.json`` times one response_template (a JSON file) in a child process
with a wall-clock limit, to measure an old export that may run for minutes. ``--stream K`` feeds each output to
transformers' streaming ``ResponseParser`` K characters at a time instead (one ``feed`` per token of about K
characters; the verification streams 3 at a time).

    python -m bench.redos [--templates DIR] [--n 10000] [--limit-ms 50] [--growth 4] [--stream 3]
    python -m bench.redos --one rt.json [--n 10000] [--timeout 60] [--stream 3]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time
from typing import Any


def time_parse(rt: dict[str, Any], text: str, repeat: int = 2) -> float:
    """CPU seconds of this thread (``time.thread_time``: other processes on a shared machine do not count)
    transformers' ``parse_response`` takes on ``text`` (no prefix), best of ``repeat``; errors count (they end
    fast)."""
    from transformers.utils.chat_parsing import parse_response

    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        try:
            parse_response(text, rt, prefix="")
        except Exception:  # noqa: BLE001 - a refused output is still a finished parse
            pass
        best = min(best, time.thread_time() - t)
    return best


def time_stream(rt: dict[str, Any], text: str, chunk: int, repeat: int = 2) -> float:
    """CPU seconds of this thread transformers' ``ResponseParser`` takes to be fed ``text`` ``chunk`` characters
    at a time and finalized (no prefix), best of ``repeat``; errors count (they end fast)."""
    from transformers.utils.chat_parsing import ResponseParser

    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        try:
            parser = ResponseParser(rt, prefix="")
            for i in range(0, len(text), chunk):
                parser.feed(text[i:i + chunk])
            parser.finalize()
        except Exception:  # noqa: BLE001 - a refused output is still a finished parse
            pass
        best = min(best, time.thread_time() - t)
    return best


def _timer(args: argparse.Namespace):
    if args.stream:
        return lambda rt, text: time_stream(rt, text, args.stream)
    return time_parse


def corpus_templates(directory: str) -> dict[str, dict[str, Any]]:
    """Distinct exported response_templates (JSON text → first template name and the dict) at both fidelities."""
    from core.export.response_template import export_response_template
    from core.jinja.template import ChatTemplate

    out: dict[str, dict[str, Any]] = {}
    for path in sorted(pathlib.Path(directory).glob("*.jinja")):
        try:
            t = ChatTemplate(path.read_text(encoding="utf-8"), path.name)
        except Exception:  # noqa: BLE001 - unreadable files are not part of the population
            continue
        for fidelity in ("llama.cpp", "improved"):
            res = export_response_template(t, fidelity=fidelity)
            if res.exportable:
                key = json.dumps(res.response_template, sort_keys=True, ensure_ascii=False)
                out.setdefault(key, {"template": f"{path.name} ({fidelity})", "rt": res.response_template,
                                     "count": 0})["count"] += 1
    return out


def _one(args: argparse.Namespace) -> int:
    from core.export.redos import fuzz_outputs

    rt = json.loads(pathlib.Path(args.one).read_text(encoding="utf-8"))
    worst = (0.0, "")
    timer = _timer(args)
    for name, text in fuzz_outputs(rt, args.n).items():
        dt = timer(rt, text)
        print(f"{dt * 1000:10.1f} ms  {name}", flush=True)
        worst = max(worst, (dt, name))
    print(f"worst {worst[0] * 1000:.1f} ms ({worst[1]})")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.redos", description=__doc__.splitlines()[0])
    p.add_argument("--templates", default="../shared/templates")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--limit-ms", type=float, default=50.0)
    p.add_argument("--one", help="time one response_template JSON file (in a child process with --timeout)")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--growth", type=int, default=0, metavar="K",
                   help="also parse each output's K×-longer version and report the growth of the time: a quadratic "
                        "parse grows about K², a linear one about K (catches a quadratic one under the budget at --n)")
    p.add_argument("--stream", type=int, default=0, metavar="K",
                   help="feed each output to transformers' streaming ResponseParser K characters at a time")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one and args.child:
        return _one(args)
    if args.one:
        try:
            r = subprocess.run([sys.executable, "-m", "bench.redos", "--one", args.one, "--n", str(args.n), "--child",
                                "--stream", str(args.stream)],
                               timeout=args.timeout, capture_output=True, text=True)
            print(r.stdout, end="")
        except subprocess.TimeoutExpired as e:
            print((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), end="")
            print(f"timeout: not finished after {args.timeout:.0f} s")
        return 0

    from core.export.redos import check_response_template, fuzz_outputs

    rts = corpus_templates(args.templates)
    flagged = sum(1 for v in rts.values() if check_response_template(v["rt"]))
    total = sum(v["count"] for v in rts.values())
    print(f"{total} exports ({len(rts)} distinct response_templates); static check flags {flagged} distinct")
    print(f"streamed {args.stream} characters a feed" if args.stream else "one-shot parse_response")
    timer = _timer(args)
    worst: list[tuple[float, str, str]] = []
    over = 0
    runs = 0
    for v in rts.values():
        for name, text in fuzz_outputs(v["rt"], args.n).items():
            dt = timer(v["rt"], text)
            runs += 1
            worst.append((dt, v["template"], name))
            if dt * 1000 > args.limit_ms:
                over += 1
                print(f"over budget: {dt * 1000:.1f} ms  {v['template']}  {name}", flush=True)
    worst.sort(reverse=True)
    print(f"{runs} parses of about {args.n} characters; {over} over {args.limit_ms:.0f} ms")
    for dt, t, name in worst[:5]:
        print(f"  {dt * 1000:8.1f} ms  {t}  {name}")
    if args.growth > 1:
        _growth(rts, worst, args)
    return 0


def _growth(rts: dict[str, dict[str, Any]], timed: list[tuple[float, str, str]], args: argparse.Namespace) -> None:
    """Time the outputs that took over 1 ms at ``--n`` again at ``--growth`` times the length; print the largest
    growths (time at K·n over time at n). Faster outputs are noise-bound: a quadratic parse of 1 ms at 10k is
    16 ms at 40k, still under the budget."""
    from core.export.redos import fuzz_outputs

    by_template = {v["template"]: v["rt"] for v in rts.values()}
    k = args.growth
    timer = _timer(args)
    rows = []
    for dt, template, name in timed:
        if dt < 0.001:
            continue
        rt = by_template[template]
        big = fuzz_outputs(rt, args.n * k)[name]
        rows.append((timer(rt, big) / dt, dt, template, name))
    rows.sort(reverse=True)
    print(f"growth at {k}x the length ({len(rows)} outputs over 1 ms; linear ≈ {k}, quadratic ≈ {k * k}):")
    for g, dt, template, name in rows[:8]:
        print(f"  x{g:5.1f}  {dt * 1000:7.1f} ms -> {dt * g * 1000:8.1f} ms  {template}  {name}")


if __name__ == "__main__":
    raise SystemExit(main())
