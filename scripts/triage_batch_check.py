"""Check a new kept-aside triage batch against everything the project already holds (rule (d) of the batches
collected from public reports, docs/explain.md): no row may share a thread or an output with any row of
``tests/data/triage/*.jsonl``, ``tests/data/real_outputs*/`` or ``tests/data/drift/``, nor a thread the docs name
(a report an earlier collection read and kept out is no longer unread).

    python scripts/triage_batch_check.py kept17.jsonl            # check a set's rows; exit 1 on an overlap
    python scripts/triage_batch_check.py --url URL               # is a thread held already? (before a row is taken)
    python scripts/triage_batch_check.py --output-file FILE      # is this exact output held already?

A thread is compared without its comment anchor, query or trailing slash; an output by its exact text and by its
text with whitespace collapsed. Nothing here is imported by the library.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
_URL = re.compile(r"https://(?:github\.com|huggingface\.co)/[^\s\"'<>)\]]+")


def thread(url: str) -> str:
    """The thread an address names: no anchor, query or trailing slash, lower case."""
    return url.split("#", 1)[0].split("?", 1)[0].rstrip("/.,;").lower()


def _squash(text: str) -> str:
    return " ".join(text.split())


def short_name(url: str) -> str | None:
    """``Repo#N``, the way the docs name a GitHub thread (``LiteLLM#7209``)."""
    m = re.match(r"https://github\.com/[^/]+/([^/]+)/(?:issues|pull|discussions)/(\d+)", url)
    return f"{m.group(1)}#{m.group(2)}".lower() if m else None


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8").lower() for p in sorted((ROOT / "docs").glob("*.md")))


def held_files(exclude: str | None = None) -> list[Path]:
    """Every file whose threads or outputs a new batch must not repeat: the triage sets (but ``exclude``), the
    real-output sets, the drift suite and the docs."""
    files = [p for p in sorted((DATA / "triage").glob("*.jsonl")) if p.name != exclude]
    for d in sorted(DATA.glob("real_outputs*")) + [DATA / "drift"]:
        files += sorted(p for p in d.rglob("*") if p.is_file())
    return files + sorted((ROOT / "docs").glob("*.md"))


def held(exclude: str | None = None) -> tuple[set[str], set[str]]:
    """The threads and the outputs (exact and squashed) every held file names."""
    threads: set[str] = set()
    outputs: set[str] = set()
    for p in held_files(exclude):
        text = p.read_text(encoding="utf-8", errors="replace")
        threads |= {thread(u) for u in _URL.findall(text)}
        if p.suffix != ".jsonl":
            continue
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                for key in ("input", "output", "text", "raw"):
                    if isinstance(row.get(key), str) and row[key].strip():
                        outputs |= {row[key], _squash(row[key])}
    return threads, outputs


def check_set(name: str) -> list[str]:
    """One line per row of the triage set ``name`` whose thread or output another held file has already."""
    threads, outputs = held(exclude=name)
    problems = []
    for line in (DATA / "triage" / name).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if thread(row["source"]) in threads:
            problems.append(f"{row['id']}: thread {row['source']} is held already")
        if row["input"] in outputs or _squash(row["input"]) in outputs:
            problems.append(f"{row['id']}: its output is held already")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("set", nargs="?")
    ap.add_argument("--url", action="append", default=[])
    ap.add_argument("--output-file")
    a = ap.parse_args(argv)
    bad = 0
    if a.url or a.output_file:
        threads, outputs = held()
        docs = _docs_text()
        for u in a.url:
            short = short_name(u)
            hit = thread(u) in threads or (short is not None and re.search(
                r"(?<![\w.-])" + re.escape(short) + r"(?!\d)", docs) is not None)
            bad += hit
            print(f"{'HELD' if hit else 'new '} {u}")
        if a.output_file:
            text = Path(a.output_file).read_text(encoding="utf-8")
            hit = text in outputs or _squash(text) in outputs
            bad += hit
            print(f"{'HELD' if hit else 'new '} output of {a.output_file}")
    if a.set:
        problems = check_set(a.set)
        print("\n".join(problems) or f"{a.set}: no thread and no output held by another file")
        bad += len(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
