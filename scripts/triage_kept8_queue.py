"""The queue the tenth triage batch (``tests/data/triage/kept8.jsonl``) is taken from, by its selection rule
(docs/explain.md, "Tenth batch: kept8.jsonl (kept aside)"), written and committed before explain ran on any row.

    python scripts/triage_kept8_queue.py [--templates ../shared/templates] [--json]

Every row of ``tests/data/real_outputs_kept6/`` (outputs from vLLM's own tool- and reasoning-parser tests, never
triaged) that our parser at ``llama.cpp`` fidelity gets wrong
(:func:`core.chat.realset.run_case`, ``.ok`` false), minus the rows whose output (whitespace at the ends aside) is
the input of a ``tests/data/triage/*.jsonl`` row or whose source URL (fragment and query aside) is one such a row
cites. Families (the real-output file's name) are ordered by sha256("kept8:" + family), the rows of a family by
sha256("kept8:" + id). Round r takes each family's r-th row in family order. The batch takes the queue in order
until it holds 40 rows (all of it if shorter); a row labelled ``NONE`` by hand once a third of the batch's size
(rounded down) is ``NONE`` is skipped. Nothing here is imported by the library; it runs no explain and no triage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIR = "real_outputs_kept6"
BATCH = "kept8.jsonl"


def _key(text: str) -> str:
    return hashlib.sha256(f"kept8:{text}".encode("utf-8")).hexdigest()


def _bare(url: str) -> str:
    return url.split("#")[0].split("?")[0].rstrip("/")


def queue(templates: str) -> list[dict]:
    """The failing rows in queue order: ``{"round", "family", "id", "dir", "reason"}``."""
    sys.path.insert(0, str(ROOT))
    from core.chat.realset import load_cases, run_case

    # the batch taken from this queue (kept8.jsonl) is left out, so the queue prints the same once it exists
    triage = [json.loads(line) for f in sorted((ROOT / "tests" / "data" / "triage").glob("*.jsonl"))
              if f.name != BATCH for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    used_sources = {_bare(t["source"]) for t in triage}
    used_inputs = {t["input"].strip() for t in triage}
    by_family: dict[str, list[dict]] = {}
    for case in load_cases(str(ROOT / "tests" / "data" / SOURCE_DIR)):
        if _bare(case.source) in used_sources or case.output.strip() in used_inputs:
            continue
        result = run_case(case, templates, "llama.cpp")
        if not result.ok:
            by_family.setdefault(case.family, []).append(
                {"family": case.family, "id": case.id, "dir": SOURCE_DIR, "reason": result.reason})
    families = sorted(by_family, key=_key)
    for rows in by_family.values():
        rows.sort(key=lambda r: _key(r["id"]))
    out = []
    for rnd in range(max((len(v) for v in by_family.values()), default=0)):
        for fam in families:
            if rnd < len(by_family[fam]):
                out.append({"round": rnd + 1, **by_family[fam][rnd]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", default=os.path.join(ROOT.parent, "shared", "templates"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = queue(args.templates)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
    else:
        for i, r in enumerate(rows, 1):
            print(f"{i:3d} r{r['round']} {r['family']:20s} {r['id']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
