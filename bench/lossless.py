"""Figures for docs/fidelity-lossless.md: words lost per suite and fidelity, the real-output rate table, and the
cost of releasing a call whole at the improved fidelity (characters of output fed before the first argument byte
reaches the client, against progressive release). Deterministic (counts characters, not time).

    python -m bench.lossless [--templates ../shared/templates] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys


def _rows(templates: str) -> list[tuple[str, str, dict, str, bool]]:
    from core.chat.drift import load_cases as drift_cases
    from core.chat.realset import load_cases as real_cases

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ref = os.path.join(os.path.dirname(templates.rstrip("/")), "reference", "cases.jsonl")
    out = []
    with open(ref, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                out.append(("reference", r["template"], r, r["input"], bool(r.get("is_partial"))))
    for c in drift_cases([os.path.join(here, "tests", "data", "drift")]):
        out.append(("drift", c.template, c.request, c.output, False))
    for c in real_cases(os.path.join(here, "tests", "data", "real_outputs")):
        out.append(("real", c.template, c.request, c.output, False))
    return out


def _first_argument_at(parser, output: str) -> int | None:
    from core.chat.stream import StreamingParser

    sp = StreamingParser(parser)
    for i, ch in enumerate(output, 1):
        if any(d.tool_call is not None and d.tool_call.arguments for d in sp.feed(ch)):
            return i
    return None if not any(d.tool_call is not None for d in sp.finish()) else len(output)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lossless")
    ap.add_argument("--templates", default=os.path.join("..", "shared", "templates"))
    args = ap.parse_args(argv)
    from core.chat.conformance import TemplateDir
    from core.chat.lossless import lost_word_spans, parser_marks
    from core.chat.pipeline import build_chat_parser_or_content
    from core.chat.request import ChatRequest

    tdir = TemplateDir(args.templates)
    lost: dict[tuple[str, str], int] = {}
    total: dict[str, int] = {}
    delays: list[int] = []
    shares: list[float] = []
    for suite, tname, req, output, partial in _rows(args.templates):
        total[suite] = total.get(suite, 0) + 1
        for fid in ("llama.cpp", "improved"):
            b = build_chat_parser_or_content(tdir.get(tname), ChatRequest.from_dict(req), fidelity=fid)
            msg = b.parser.parse(output, partial)
            if lost_word_spans(output, msg, parser_marks(b.parser)):
                lost[(suite, fid)] = lost.get((suite, fid), 0) + 1
            if fid == "improved" and msg.tool_calls and not partial:
                whole = _first_argument_at(b.parser, output)
                b.parser.release_calls_whole = False
                progressive = _first_argument_at(b.parser, output)
                b.parser.release_calls_whole = True
                if whole is not None and progressive is not None:
                    delays.append(whole - progressive)
                    shares.append((whole - progressive) / max(len(output), 1))
    print("| suite | cases | lost words at `llama.cpp` | lost words at `improved` |")
    print("|---|---|---|---|")
    for suite in total:
        print(f"| {suite} | {total[suite]} | {lost.get((suite, 'llama.cpp'), 0)} | {lost.get((suite, 'improved'), 0)} |")
    print()
    if delays:
        q = statistics.quantiles(delays, n=10) if len(delays) >= 10 else [max(delays)] * 9
        print(f"whole-call release at improved, {len(delays)} outputs with calls: first argument byte later by "
              f"median {statistics.median(delays):.0f} characters (p90 {q[8]:.0f}, max {max(delays)}); "
              f"median {100 * statistics.median(shares):.0f} % of the output")
    return 0


if __name__ == "__main__":
    sys.exit(main())
