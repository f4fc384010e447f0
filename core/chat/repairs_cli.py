"""``python -m core repairs``: the repair rules as data, and the drift suite's figures.

* ``repairs [--json]`` — every rule of :data:`core.chat.repairs.REPAIRS` (name, stage, what it accepts, an
  example, where it comes from);
* ``repairs --suite DIR_OR_JSONL … --templates DIR [--json]`` — run the drift suite
  (:mod:`core.chat.drift`) at both fidelities: pass rate, stream = one-shot, and for each repair how many
  cases it fired on (and how many of those need it: the case fails at improved fidelity with that repair
  switched off); ``--markdown`` prints those figures as docs/fidelity.md's tables (without ``--suite`` it is an
  error: one line on stderr, exit status 2).

Bad input (a missing file, a malformed case) is one line on stderr naming it, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import ChatTemplateExplorerError, os_error_text


def register(subparsers: Any) -> None:
    """Add the ``repairs`` sub-command to ``subparsers`` (of ``python -m core``)."""
    r = subparsers.add_parser("repairs", help="list the repair rules; with --suite, run the drift suite")
    r.add_argument("--json", action="store_true", help="JSON output")
    r.add_argument("--suite", action="append", metavar="PATH",
                   help="drift cases (.jsonl file or directory of them); repeatable")
    r.add_argument("--templates", default="../shared/templates", help="directory of the cases' templates")
    r.add_argument("--markdown", action="store_true",
                   help="(with --suite) the tables of docs/fidelity.md: rate per fidelity, then each repair with its counts")
    r.set_defaults(func=_cmd_repairs)


def suite_figures(paths: list[str], templates: str) -> dict[str, Any]:
    """The drift suite's figures: ``{"cases": n, "fidelity": {fid: {"passed", "stream_equal",
    "json_arguments", "failed": [ids]}}, "repairs": {name: {"fired": n, "needed": n}}}``. ``needed``: cases
    that pass at improved fidelity and fail with that repair switched off (contract rules cannot be)."""
    from .drift import load_cases, run_case
    from .repairs import REPAIRS, RepairStage

    cases = load_cases(paths)
    out: dict[str, Any] = {"cases": len(cases), "fidelity": {}, "repairs": {}}
    improved: list[Any] = []
    for fid in ("llama.cpp", "improved"):
        results = [run_case(c, templates, fid) for c in cases]
        if fid == "improved":
            improved = results
        out["fidelity"][fid] = {"passed": sum(r.ok for r in results),
                                "stream_equal": sum(r.stream_equal for r in results),
                                "json_arguments": sum(r.json_arguments for r in results),
                                "failed": [r.case.id for r in results if not r.ok]}
    for rule in REPAIRS:
        fired = [r for r in improved if rule.name in r.repairs]
        needed = 0
        if rule.stage is RepairStage.TOLERANCE:
            needed = sum(1 for r in fired if r.ok and not run_case(r.case, templates, "improved",
                                                                   disabled_repairs=(rule.name,)).ok)
        out["repairs"][rule.name] = {"fired": len(fired), "needed": needed}
    return out


def suite_markdown(figures: dict[str, Any]) -> str:
    """docs/fidelity.md's two Markdown tables from :func:`suite_figures`: the suite at each fidelity (right
    message, stream = one-shot, JSON-object arguments), then every repair of :data:`REPAIRS` (stage, title,
    drift cases it fired on / needs it; "—" for contract rules, which cannot be switched off)."""
    from .repairs import REPAIRS, RepairStage

    n = figures["cases"]
    lines = ["| fidelity | right message | stream = one-shot | JSON-object arguments |", "|---|---|---|---|"]
    for fid, f in figures["fidelity"].items():
        rate = f"{f['passed']}/{n} ({100 * f['passed'] / n:.1f} %)" if n else "0/0"
        if fid == "improved":
            rate = f"**{rate}**"
        lines.append(f"| `{fid}` | {rate} | {f['stream_equal']}/{n} | {f['json_arguments']}/{n} |")
    lines += ["", "| repair | stage | what it accepts | drift cases it fired on / needs it |", "|---|---|---|---|"]
    for r in REPAIRS:
        f = figures["repairs"].get(r.name, {"fired": 0, "needed": 0})
        needed = "—" if r.stage is RepairStage.CONTRACT else str(f["needed"])
        lines.append(f"| `{r.name}` | {r.stage.value} | {r.title.replace('|', '&#124;').replace('<', '&lt;')} | {f['fired']} / {needed} |")
    return "\n".join(lines) + "\n"


def _cmd_repairs(args: argparse.Namespace) -> int:
    from .repairs import REPAIRS, list_text

    if not args.suite:
        if args.markdown:
            print("error: --markdown needs --suite (the tables are the drift suite's figures)", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps([r.to_json() for r in REPAIRS], ensure_ascii=False, indent=2))
        else:
            print(list_text(), end="")
        return 0
    try:
        figures = suite_figures(args.suite, args.templates)
    except OSError as e:
        print(f"error: {os_error_text(e)}", file=sys.stderr)
        return 2
    except (ValueError, ChatTemplateExplorerError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(figures, ensure_ascii=False, indent=2))
        return 0
    if args.markdown:
        print(suite_markdown(figures), end="")
        return 0
    n = figures["cases"]
    for fid, f in figures["fidelity"].items():
        print(f"{fid}: {f['passed']}/{n} pass; stream = one-shot {f['stream_equal']}/{n}; "
              f"JSON-object arguments {f['json_arguments']}/{n}")
        if f["failed"]:
            print("  failing: " + ", ".join(f["failed"]))
    for name, f in figures["repairs"].items():
        print(f"{name}: fired on {f['fired']}, needed by {f['needed']}")
    return 0
