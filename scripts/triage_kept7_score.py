"""Score the triage on the ninth batch (``tests/data/triage/kept7.jsonl``) the way ``tests/test_triage.py`` scores a
set (cause right, fix verified or a correct "none helps", nearest output found on the rows within 3 edits), and print
each row's outcome:

    python scripts/triage_kept7_score.py [--templates ../shared/templates] [--set kept7.jsonl] [--json]
    python scripts/triage_kept7_score.py --set kept8.jsonl      # the tenth batch (SCORES["kept8.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept9.jsonl      # the eleventh batch (SCORES["kept9.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept10.jsonl     # the twelfth batch (SCORES["kept10.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept11.jsonl     # the thirteenth batch (SCORES["kept11.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept12.jsonl     # the fourteenth batch, public reports (SCORES["kept12.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept13.jsonl     # the fifteenth batch (SCORES["kept13.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept14.jsonl     # the sixteenth batch, public reports (SCORES["kept14.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept15.jsonl     # the seventeenth batch (SCORES["kept15.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept16.jsonl     # the eighteenth batch (SCORES["kept16.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept17.jsonl     # the nineteenth batch, public reports (SCORES["kept17.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept18.jsonl     # the twentieth batch (SCORES["kept18.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept19.jsonl     # the twenty-first batch (SCORES["kept19.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept20.jsonl     # the twenty-second batch (SCORES["kept20.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept21.jsonl     # the twenty-third batch (SCORES["kept21.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept22.jsonl     # the twenty-fourth batch (SCORES["kept22.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept23.jsonl     # the twenty-fifth batch (SCORES["kept23.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept24.jsonl     # the twenty-sixth batch (SCORES["kept24.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept25.jsonl     # the twenty-seventh batch (SCORES["kept25.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept26.jsonl     # the twenty-eighth batch (SCORES["kept26.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept27.jsonl     # the twenty-ninth batch, public reports (SCORES["kept27.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept28.jsonl     # the thirtieth batch (SCORES["kept28.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept29.jsonl     # the thirty-first batch (SCORES["kept29.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept30.jsonl     # the thirty-second batch (SCORES["kept30.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept31.jsonl     # the thirty-third batch (SCORES["kept31.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept32.jsonl     # the thirty-fourth batch (SCORES["kept32.jsonl"]["dev"])
    python scripts/triage_kept7_score.py --set kept33.jsonl     # the thirty-fifth batch (SCORES["kept33.jsonl"]["kept33"])
    python scripts/triage_kept7_score.py --set kept34.jsonl     # the thirty-sixth batch (SCORES["kept34.jsonl"]["kept34"])

The last line is the tuple pinned in ``SCORES[set][split]`` when every row of the set is in one split (kept6 to
kept32 are dev now: kept15 to kept18 since the labelling guide, kept19 to kept22 since the sixteenth round of rules,
kept23 and kept24 since the seventeenth, kept25 to kept27 since the eighteenth, kept28 and kept29 since the
nineteenth, kept30 to kept32 since the twentieth). A row's ``expect`` (the engine's
message) is passed to the triage as a user passes ``explain --expect``; ``--no-expect`` scores the output alone, as a
user without one.
The triage gets 30 s per row, as in the tests, so the figures do not depend on the machine. Nothing here is
imported by the library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def score(templates: str, name: str, use_expect: bool = True) -> tuple[list[dict], tuple[int, int, int, int]]:
    sys.path.insert(0, str(ROOT))
    from core.chat.message import AssistantMessage
    from core.chat.request import ChatRequest
    from core.explain.explain import explain
    from core.explain.model import Setup, build_bundle
    from core.explain.spans import same_message
    from core.explain.triage import MAX_EDITS, apply_fix, triage
    from core.jinja.template import ChatTemplate

    def same(a: dict, b: dict) -> bool:
        return same_message(AssistantMessage.from_openai(a), AssistantMessage.from_openai(b))

    rows, totals = [], [0, 0, 0, 0]
    for line in (ROOT / "tests" / "data" / "triage" / name).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        c = json.loads(line)
        t = ChatTemplate((Path(templates) / c["template"]).read_text(encoding="utf-8"), c["template"])
        req = ChatRequest.from_dict(c)
        ex = explain(t, req, c["input"])
        s = Setup(t, req, "llama.cpp", {})
        # the expected message where the row gives it, as a user passes `explain --expect`
        tg = triage(ex, s, build_bundle(s), seconds=30.0, reexplain=explain,
                    expect=c.get("expect") if use_expect else None)
        cause = tg.mistake.name == c["cause"]
        if c["fix"]["kind"] != "none":   # a labelled change, also under NONE (the labelling guide's parser fault)
            want, _ = apply_fix(t, req, c["input"], c["fix"]["change"])
            fix = any(same(f.message, want) for f in tg.fixes)
        elif c["cause"] == "NONE":
            fix = not tg.fixes
        else:
            fix = not tg.fixes and bool(tg.no_fix)
        near = None
        if c["nearest_within_3"]:
            near = tg.nearest is not None and len(tg.nearest.edits) <= MAX_EDITS
            totals[2] += near
            totals[3] += 1
        totals[0] += cause
        totals[1] += fix
        rows.append({"id": c["id"], "cause": c["cause"], "cause_before_guide": c.get("cause_before_guide", c["cause"]),
                     "said": tg.mistake.name, "cause_ok": cause,
                     "fix_kind": c["fix"]["kind"], "fix_ok": fix,
                     "fixes": [f"{f.kind.value}: {json.dumps(f.change, ensure_ascii=False)[:160]}" for f in tg.fixes],
                     "no_fix": bool(tg.no_fix), "no_fix_text": tg.no_fix, "sentence": tg.sentence, "nearest": near,
                     "nearest_edits": len(tg.nearest.edits) if tg.nearest is not None else None})
    return rows, tuple(totals)  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", default=os.path.join(ROOT.parent, "shared", "templates"))
    ap.add_argument("--set", default="kept7.jsonl")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-expect", action="store_true",
                    help="the output alone: do not pass the rows' expected message (a user without one)")
    args = ap.parse_args(argv)
    rows, totals = score(args.templates, args.set, use_expect=not args.no_expect)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=1))
    else:
        for r in rows:
            print(f"{r['id']:48s} {r['cause']:24s} said {r['said']:24s} cause {'✓' if r['cause_ok'] else '✗'} "
                  f"fix {'✓' if r['fix_ok'] else '✗'} ({r['fix_kind']}) nearest {r['nearest']}")
            for f in r["fixes"]:
                print(f"    offered {f}")
    print(f"{args.set}: cause {totals[0]}/{len(rows)}, fix {totals[1]}/{len(rows)}, nearest {totals[2]}/{totals[3]} "
          f"-> {totals}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
