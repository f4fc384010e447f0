"""The retrospective of the causes decided from the template's renders (docs/explain.md "Causes from the
template's renders"): for every row a kept-aside batch's first measure named the wrong cause (the per-row tables of
docs/explain.md, kept6 to kept14), what the relation of the template's call pieces to the output names **alone**,
without any rule — the rules later written from those rows included:

    python scripts/triage_relation_retro.py [--templates ../shared/templates] [--rows]

Alone, the relation names a class when it decides (the omissions, a wrapper, another format, the format not found),
a value not of its type when every piece is in place and the parse stopped inside a typed value, and the format not
found when every piece is in place and no call was read; else nothing. ``READ`` lists the rows of kept6 to kept12
whose text was read while the relation was written (to keep the dev scores), counted apart from the rest. Nothing
here is imported by the library.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCHES = [("Eighth batch", "kept6"), ("Ninth batch", "kept7"), ("Tenth batch", "kept8"), ("Eleventh batch", "kept9"),
           ("Twelfth batch", "kept10"), ("Thirteenth batch", "kept11"), ("Fourteenth batch", "kept12"),
           ("Fifteenth batch", "kept13"), ("Sixteenth batch", "kept14")]
CALL_FORMAT = {"FORMAT_NOT_FOUND", "TEMPLATE_MODEL_MISMATCH", "FOREIGN_WRAPPER", "OMITTED_MARKER", "OMITTED_OPENER",
               "OMITTED_CLOSER"}
READ = {"kept6-kept-vllm-5649-hermes2pro-call", "kept6-xlam-tool-call-tags",
        "kept6-kept-gemma-docs-fg-base-one-call-stock", "kept6-vllm-minimax-thinking-tags",
        "kept6-vllm-minimax-m3-nested", "kept8-sgl-llama32-python-tag", "kept8-sgl-lfm2-json", "kept9-mlx-glm47-json",
        "kept9-trt-dsv4-multiple"}


def first_measure_misses(doc: list[str], head: str, rows: list[dict]) -> list[dict]:
    """The rows the first per-row table of the batch's section marks with a wrong cause."""
    i = next(k for k, line in enumerate(doc) if line.startswith("### " + head))
    j = next(k for k in range(i + 1, len(doc)) if doc[k].startswith("### "))
    sec = doc[i:j]
    h = next(k for k, line in enumerate(sec) if line.startswith("| case"))
    cols = [x.strip() for x in re.split(r"(?<!\\)\|", sec[h].strip().strip("|"))]
    out: list[dict] = []
    for line in sec[h + 2:]:
        if not line.startswith("|"):
            break
        cells = [x.strip() for x in re.split(r"(?<!\\)\|", line.strip().strip("|"))]   # (`\|` inside a cell)
        true = re.findall(r"`([A-Z_]+)`", cells[1])
        if not true:
            continue
        said = re.findall(r"`([A-Z_]+)`", cells[2])
        ok = cells[cols.index("cause")].startswith("✓") if "cause" in cols else \
            cells[2].startswith("same") or (bool(said) and said[0] == true[0])
        if ok:
            continue
        case = cells[0]
        num = re.search(r"#(\d+)", case)
        if num:
            repo = case.split("#")[0].lower().split("/")[-1][:5]
            out += [r for r in rows if f"/{num.group(1)}" in r["source"] and repo in r["source"].lower()][:1]
            continue
        text = re.sub(r"\s*\(\d+\)$", "", case.strip("`"))
        group = re.match(r"(.*)\{(.*)\}(.*)", text)
        keys = [group.group(1) + x.strip() + group.group(3) for x in group.group(2).split(",")] if group \
            else [k.strip().strip("`") for k in text.split(",")]
        for key in keys:
            key = key.split(" ")[0]
            parts = [x for x in key.split("…") if x]
            hits = [r for r in rows if r["id"].endswith(key)] \
                or [r for r in rows if parts and all(x in r["id"] for x in parts)]
            if len(hits) > 1:
                hits = [r for r in hits if r["id"].endswith(parts[-1])] or hits
            out += hits[:1] if len(hits) == 1 else []
    return out


def alone(case: dict, templates: str) -> str:
    """What the relation names by itself for ``case`` (``""``: nothing)."""
    from core.chat.request import ChatRequest
    from core.explain.call_relation import DECISIVE, Relation
    from core.explain.explain import explain
    from core.explain.model import Setup, build_bundle
    from core.explain.triage import _call_relation, _context, _declared_type
    from core.jinja.template import ChatTemplate

    t = ChatTemplate((Path(templates) / case["template"]).read_text(encoding="utf-8"), case["template"])
    req = ChatRequest.from_dict(case)
    ex = explain(t, req, case["input"])
    s = Setup(t, req, "llama.cpp", {})
    b = build_bundle(s)
    rel = _call_relation(s, b, ex, _context(s, b))
    if rel is None:
        return ""
    if rel.relation in DECISIVE:
        return rel.relation.value
    if rel.relation == Relation.CONSISTENT and rel.stop_in == "value" \
            and _declared_type(req, rel.stop_key) not in ("", "string"):
        return "TYPE_MISMATCH"
    if rel.relation == Relation.CONSISTENT and not ex.message.get("tool_calls"):
        return "FORMAT_NOT_FOUND"
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", default=os.path.join(ROOT.parent, "shared", "templates"))
    ap.add_argument("--rows", action="store_true", help="print every row")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    doc = (ROOT / "docs" / "explain.md").read_text(encoding="utf-8").splitlines()
    seen: list[tuple[str, dict, str]] = []
    for head, name in BATCHES:
        rows = [json.loads(line) for line in (ROOT / "tests" / "data" / "triage" / f"{name}.jsonl")
                .read_text(encoding="utf-8").splitlines() if line.strip()]
        misses = first_measure_misses(doc, head, rows)
        said = [(name, c, alone(c, args.templates)) for c in misses]
        seen += said
        right = sum(a == c["cause"] for _, c, a in said)
        wrong = sum(bool(a) and a != c["cause"] for _, c, a in said)
        print(f"{name}: {len(misses)} first-measure cause misses, the relation alone names {right} right, "
              f"{wrong} wrong")
    def tally(label: str, part: list[tuple[str, dict, str]]) -> None:
        print(f"{label}: {len(part)} misses, right {sum(a == c['cause'] for _, c, a in part)}, wrong "
              f"{sum(bool(a) and a != c['cause'] for _, c, a in part)}, silent {sum(not a for _, c, a in part)}")

    tally("all", seen)
    tally("  true cause a call-format class", [x for x in seen if x[1]["cause"] in CALL_FORMAT])
    unread = [x for x in seen if x[0] not in ("kept13", "kept14") and x[1]["id"] not in READ]
    tally("kept6-kept12, rows not read while the relation was written", unread)
    tally("  true cause a call-format class", [x for x in unread if x[1]["cause"] in CALL_FORMAT])
    if args.rows:
        for name, c, a in seen:
            mark = "✓" if a == c["cause"] else ("✗" if a else "·")
            print(f"{mark} {name:7} {c['id'][:60]:60} {c['cause']:24} {a}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
