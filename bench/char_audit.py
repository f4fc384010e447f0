"""Characters lost per suite and fidelity (:mod:`core.chat.char_audit`): every character of every output of the
reference cases, the drift suite, the real-output sets and the hostile outputs, given an account, the lost ones
counted by class. Deterministic (counts characters, not time).

    python -m bench.char_audit [--templates ../shared/templates] [--show N] [--sets real_outputs,drift,...]
                               [--disable-repair unparsed-characters]

The kept-aside real-output batches that are being collected (``real_outputs_kept8`` and every later
``real_outputs_keptN``, a batch added later too) are never read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Iterator

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_KEPT_ASIDE = 8   # real_outputs_kept8 and every later batch (listed by hand, a new batch was once left out)
HOSTILE_CHARS = 300


def real_sets() -> list[str]:
    """The real-output set directories of ``tests/data`` that may be measured (not the kept-aside batches)."""
    root = os.path.join(HERE, "tests", "data")
    return sorted(d for d in os.listdir(root) if d.startswith("real_outputs") and not _kept_aside(d))


def _kept_aside(name: str) -> bool:
    number = name[len("real_outputs_kept"):] if name.startswith("real_outputs_kept") else ""
    return number.isdigit() and int(number) >= FIRST_KEPT_ASIDE


def rows(templates: str, sets: list[str] | None = None) -> Iterator[tuple[str, str, str, Any, str, bool]]:
    """``(suite, case id, template file, request dict, output, partial)`` for every case of the suites."""
    from core.chat.drift import load_cases as drift_cases
    from core.chat.realset import load_cases as real_cases

    want = set(sets or [])
    ref = os.path.join(os.path.dirname(templates.rstrip("/")), "reference", "cases.jsonl")
    if not want or "reference" in want:
        with open(ref, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    yield "reference", r["id"], r["template"], r, r["input"], bool(r.get("is_partial"))
    if not want or "drift" in want:
        for c in drift_cases([os.path.join(HERE, "tests", "data", "drift")]):
            yield "drift", c.id, c.template, c.request, c.output, False
    for d in real_sets():
        if not want or d in want:
            for c in real_cases(os.path.join(HERE, "tests", "data", d)):
                yield d, c.id, c.template, c.request, c.output, False


def hostile_rows(templates: str) -> Iterator[tuple[str, str, str, Any, str, bool]]:
    """The bench's hostile outputs (:mod:`bench.hostile`), one per route and kind."""
    from core.jinja.template import ChatTemplate

    from .hostile import FAMILY_ROUTES, ROUTES, hostile_samples
    from .outputs import _request

    req = _request([{"role": "user", "content": "Plan my trip to Paris."}])
    for _, name in ROUTES + FAMILY_ROUTES:
        with open(os.path.join(templates, name), encoding="utf-8") as f:
            template = ChatTemplate(f.read(), name)
        for s in hostile_samples(template, name, HOSTILE_CHARS)[0]:
            yield "hostile", f"{name}:{s.kind}", name, req, s.output, False


def measure(templates: str, sets: list[str] | None = None, hostile: bool = True,
            disabled: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One row per case and fidelity: suite, id, fidelity, characters, lost characters by class, lost spans
    (``disabled``: repairs switched off at ``improved``, e.g. ``unparsed-characters`` for the figures before it)."""
    from core.chat.char_audit import audit_parse
    from core.chat.conformance import TemplateDir
    from core.chat.pipeline import build_chat_parser_or_content
    from core.chat.request import ChatRequest

    tdir = TemplateDir(templates)
    out = []
    every = list(rows(templates, sets))
    if hostile and (not sets or "hostile" in sets):
        every += list(hostile_rows(templates))
    for suite, cid, tname, req, output, partial in every:
        for fid in ("llama.cpp", "improved"):
            b = build_chat_parser_or_content(tdir.get(tname), ChatRequest.from_dict(req), fidelity=fid,
                                             disabled_repairs=disabled if fid == "improved" else ())
            msg = b.parser.parse(output, partial)
            a = audit_parse(b.parser, output, msg, partial=partial)
            out.append({"suite": suite, "id": cid, "fidelity": fid, "chars": len(output),
                        "lost": a.lost_by_kind(), "spans": a.explain(3)})
    return out


def repair_cost(templates: str, template: str = "Qwen-Qwen2.5-7B-Instruct.jinja", calls: int = 60,
                repeats: int = 5) -> dict[str, float]:
    """``python -m bench.char_audit --cost [--calls N] [--template FILE]``: CPU milliseconds of one final parse at
    ``improved`` of ``calls`` calls in a row (the template's own rendering of one, repeated), with repair
    ``unparsed-characters`` on (``"on"``) and off (``"off"``): the median of ``repeats`` parses, each of a text
    not parsed before (a trailing space more), the parser built and warmed."""
    from core.chat.pipeline import build_chat_parser
    from core.jinja.template import ChatTemplate

    from .explain_hostile import _request, hostile_output

    with open(os.path.join(templates, template), encoding="utf-8") as f:
        tpl = ChatTemplate(f.read(), template)
    unit = hostile_output(tpl, "calls", 1)
    out = unit * calls
    times: dict[str, float] = {}
    for key, disabled in (("on", ()), ("off", ("unparsed-characters",))):
        parser = build_chat_parser(tpl, _request(), fidelity="improved", disabled_repairs=disabled).parser
        parser.parse(unit)
        runs = []
        for k in range(repeats):
            t0 = time.thread_time()
            parser.parse(out + " " * (k + 1))
            runs.append((time.thread_time() - t0) * 1000)
        times[key] = sorted(runs)[len(runs) // 2]
    return times


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: per suite and fidelity, cases, cases with a lost character, lost characters by class."""
    agg: dict[tuple[str, str], dict[str, int]] = {}
    for r in results:
        a = agg.setdefault((r["suite"], r["fidelity"]), {"cases": 0, "with-loss": 0})
        a["cases"] += 1
        if r["lost"]:
            a["with-loss"] += 1
        for k, v in r["lost"].items():
            a[k] = a.get(k, 0) + v
    lines = ["| suite | fidelity | cases | cases losing characters | lost characters by class |", "|---|---|---|---|---|"]
    for (suite, fid), a in agg.items():
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(a.items()) if k not in ("cases", "with-loss")) or "—"
        lines.append(f"| {suite} | {fid} | {a['cases']} | {a['with-loss']} | {kinds} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.char_audit")
    ap.add_argument("--templates", default=os.path.join("..", "shared", "templates"))
    ap.add_argument("--show", type=int, default=0, help="list the lost spans of up to N cases")
    ap.add_argument("--sets", default="", help="comma-separated suites (reference, drift, hostile, real_outputs…)")
    ap.add_argument("--disable-repair", action="append", default=[], metavar="NAME",
                    help="switch a repair off at improved (the figures without it)")
    ap.add_argument("--cost", action="store_true", help="time the final parse of many calls, the repair on and off")
    ap.add_argument("--calls", type=int, default=60, help="--cost: calls in the output")
    ap.add_argument("--template", default="Qwen-Qwen2.5-7B-Instruct.jinja", help="--cost: the template file")
    args = ap.parse_args(argv)
    if args.cost:
        t = repair_cost(args.templates, args.template, args.calls)
        print(f"{args.template}, {args.calls} calls, final parse at improved: unparsed-characters on "
              f"{t['on']:.1f} ms, off {t['off']:.1f} ms (CPU, median)")
        return 0
    sets = [s for s in args.sets.split(",") if s] or None
    results = measure(args.templates, sets, disabled=tuple(args.disable_repair))
    print(table(results))
    shown = 0
    for r in results:
        if r["lost"] and shown < args.show:
            shown += 1
            print(f"\n{r['suite']} {r['id']} {r['fidelity']}:")
            for line in r["spans"]:
                print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
