"""The third kept-aside batch of real outputs (tests/data/real_outputs_kept3, split "kept3"): recorded runs printed
by Unsloth's executed notebooks (transformers generate), a recorded format study and raw outputs quoted in public bug
reports, a recorded tool-calling benchmark and Google's and Meta's cookbook notebooks (20 families), collected while the other engineers wrote repairs from the earlier sets, from sources no
earlier set used. Nobody writes repairs from these cases: they measure
the product on output none of them was fitted to (docs/realset-baseline.md, "Third kept-aside batch"). Each case runs
as the main set does (core.chat.realset.run_case: one-shot and streamed at chunk sizes 1, 3, 17, whole and
calls-at-once). No word is lost at either fidelity; the rates are pinned exactly, so a change that moves a case is
seen (then re-measure and update the figures in the doc)."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from core.chat.realset import load_cases, run_case

from .conftest import ROOT, TEMPLATES

DATA = ROOT / "tests" / "data"
KEPT3 = DATA / "real_outputs_kept3"
CASES = load_cases(str(KEPT3))
# right / total per fidelity, measured on branch s10-collect2 (see docs/realset-baseline.md)
PASS = {"llama.cpp": 65, "improved": 87}


@lru_cache(maxsize=None)
def _results(fidelity: str) -> tuple:
    return tuple(run_case(c, str(TEMPLATES), fidelity) for c in CASES)


def _earlier_sources_and_outputs() -> tuple[set, set]:
    sources, outputs = set(), set()
    for d in ("real_outputs", "real_outputs_fresh", "real_outputs_kept"):
        for c in load_cases(str(DATA / d)):
            sources.add(c.source)
            outputs.add(c.output)
    for path in sorted((DATA / "triage").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            sources.add(row["source"])
            outputs.add(row["input"])
    return sources, outputs


def _page(url: str) -> str:
    """The page a source URL names, whatever commit it is pinned at."""
    head, _, tail = url.partition("/blob/")
    return head + "/" + tail.partition("/")[2] if tail else url


def test_the_third_batch_is_kept_aside_cited_and_new():
    assert len(CASES) == 90 and len({c.family for c in CASES}) == 20
    assert {c.split for c in CASES} == {"kept3"}
    assert all(c.source.startswith("https://") for c in CASES)
    assert all((TEMPLATES / c.template).is_file() for c in CASES)
    sources, outputs = _earlier_sources_and_outputs()
    assert [c.id for c in CASES if c.output in outputs] == []
    assert [c.id for c in CASES if _page(c.source) in {_page(s) for s in sources}] == []
    assert len({c.output for c in CASES}) == len(CASES)
    assert all(c.fidelity in ("both", "improved") for c in CASES)


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_no_word_lost_on_a_kept3_output(fidelity):
    assert {r.case.id: r.lost for r in _results(fidelity) if r.lost} == {}


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_kept3_rates(fidelity):
    rows = _results(fidelity)
    assert sum(r.ok for r in rows) == PASS[fidelity], [(r.case.id, r.reason) for r in rows if not r.ok]


def test_cases_marked_both_are_the_ones_right_at_llama_cpp_fidelity():
    assert {r.case.id for r in _results("llama.cpp") if r.ok} == {c.id for c in CASES if c.fidelity == "both"}


def test_improved_is_never_worse_on_the_third_batch():
    one = {r.case.id: r.ok for r in _results("llama.cpp")}
    better = {r.case.id: r.ok for r in _results("improved")}
    assert [cid for cid, ok in one.items() if ok and not better[cid]] == []


def test_every_kept3_line_names_its_split():
    for path in sorted(KEPT3.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert json.loads(line)["split"] == "kept3", path.name
