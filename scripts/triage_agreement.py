"""How often two people name the same cause for a failing output, and how often the triage names theirs.

Three groups of kept-aside triage batches were labelled twice, by their collector before the triage ran and by a
second labeller who never saw those labels nor ran the triage (a cause, a second choice, a confidence, why):

- ``kept15-kept18`` (87 rows), labelled from the taxonomy alone. The first labeller's cause is the one the second
  labeller was compared with: a row the labelling guide relabelled since keeps it in ``cause_before_guide``, so the
  labellers' figures do not move;
- ``kept19-kept22`` (63 rows), ``kept23-kept24`` (40 rows), ``kept25-kept27`` (59 rows), ``kept28-kept29``
  (36 rows), ``kept30-kept32`` (18 rows) and ``kept33-kept34`` (19 rows), both labellers following the labelling guide's decision order (with the step that decided each
  second label); each later group measures the rounds of rules written from the groups before it.

Each group's second labels are ``tests/data/triage/second_labels/<group>.jsonl``.

This prints how often the two labellers agree, how often the triage's cause equals each, and the triage's rate on the
rows both labellers agree on (docs/explain.md, "Two labellers"):

    python scripts/triage_agreement.py [--group kept15-kept18|kept19-kept22|kept23-kept24|kept25-kept27|
                                                kept28-kept29|kept30-kept32|kept33-kept34] [--templates ../shared/templates] [--rows]

Nothing here is imported by the library; ``tests/test_triage.py`` pins the same figures (``AGREEMENT``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# group: the batches labelled twice (the second labeller's file is tests/data/triage/second_labels/<group>.jsonl)
GROUPS = {
    "kept15-kept18": ("kept15.jsonl", "kept16.jsonl", "kept17.jsonl", "kept18.jsonl"),
    "kept19-kept22": ("kept19.jsonl", "kept20.jsonl", "kept21.jsonl", "kept22.jsonl"),
    "kept23-kept24": ("kept23.jsonl", "kept24.jsonl"),
    "kept25-kept27": ("kept25.jsonl", "kept26.jsonl", "kept27.jsonl"),
    "kept28-kept29": ("kept28.jsonl", "kept29.jsonl"),
    "kept30-kept32": ("kept30.jsonl", "kept31.jsonl", "kept32.jsonl"),
    "kept33-kept34": ("kept33.jsonl", "kept34.jsonl"),
}


def first_label(row: dict) -> str:
    """The first labeller's cause as the second labeller was compared with it."""
    return row.get("cause_before_guide", row["cause"])


def second_labels(group: str) -> dict[str, dict]:
    """The second labeller's rows of a group by id (``cause``, ``second_choice``, ``confidence``, ``why``)."""
    path = ROOT / "tests" / "data" / "triage" / "second_labels" / f"{group}.jsonl"
    return {r["id"]: r for r in (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                                 if line.strip())}


def agreement(first: dict[str, str], second: dict[str, dict], said: dict[str, str], fixed: dict[str, bool]
              ) -> dict[str, tuple[int, int]]:
    """The figures, each ``(count, rows)``: ``labellers`` (the two first choices equal), ``within_second`` (the first
    label is the second labeller's first or second choice), ``triage_first`` / ``triage_second`` (the triage's cause
    equals that labeller's), ``triage_either``, ``consensus_cause`` / ``consensus_both`` (on the rows both labellers
    agree on: the triage's cause right; its cause right and its fix verified)."""
    ids = [i for i in first if i in second]
    cons = [i for i in ids if first[i] == second[i]["cause"]]
    return {
        "labellers": (len(cons), len(ids)),
        "within_second": (sum(first[i] in (second[i]["cause"], second[i].get("second_choice")) for i in ids), len(ids)),
        "triage_first": (sum(said[i] == first[i] for i in ids), len(ids)),
        "triage_second": (sum(said[i] == second[i]["cause"] for i in ids), len(ids)),
        "triage_either": (sum(said[i] in (first[i], second[i]["cause"]) for i in ids), len(ids)),
        "consensus_cause": (sum(said[i] == first[i] for i in cons), len(cons)),
        "consensus_both": (sum(said[i] == first[i] and fixed[i] for i in cons), len(cons)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", choices=list(GROUPS), default=list(GROUPS)[-1])
    ap.add_argument("--templates", default=os.path.join(ROOT.parent, "shared", "templates"))
    ap.add_argument("--rows", action="store_true", help="print each row: first label, second label, the triage's")
    ap.add_argument("--no-expect", action="store_true", help="the output alone: no expected message passed")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "scripts"))
    from triage_kept7_score import score

    first, said, fixed = {}, {}, {}
    for name in GROUPS[args.group]:
        rows, _ = score(args.templates, name, use_expect=not args.no_expect)
        for r in rows:
            first[r["id"]], said[r["id"]], fixed[r["id"]] = first_label(r), r["said"], r["fix_ok"]
    second = second_labels(args.group)
    if args.rows:
        for i in first:
            if i in second:
                print(f"{i[:60]:60s} first {first[i]:24s} second {second[i]['cause']:24s} triage {said[i]}")
    for k, (n, d) in agreement(first, second, said, fixed).items():
        print(f"{k:16s} {n}/{d} ({n / max(d, 1):.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
