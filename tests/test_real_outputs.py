"""The evaluation set of real outputs (tests/data/real_outputs, core.chat.realset): every case at both
fidelities, one-shot and streamed at chunk sizes 1, 3, 17, whole and "several calls in one delta". No word is
lost on any case at either fidelity; the rates per fidelity and split (dev / holdout) are pinned, so a change
that makes a case worse (or better: then raise the figure) is seen. Holdout cases were not looked at while the
repairs were written (docs/fidelity-lossless.md)."""

from __future__ import annotations

from functools import lru_cache

import pytest

from core.chat.realset import load_cases, rate_table, run_case, split_of

from .conftest import ROOT, TEMPLATES

CASES = load_cases(str(ROOT / "tests" / "data" / "real_outputs"))
# right / total per (fidelity, split); measured on this commit (263 cases: the 57 vLLM ones, 20/10/27/16 of these,
# and the 204 added by branch realset, see docs/realset-baseline.md)
# improved holdout 81 -> 85: the 4 Jamba calls, read once improvement transformers-dialect renders its template
PASS = {("llama.cpp", "dev"): 95, ("llama.cpp", "holdout"): 45, ("improved", "dev"): 167, ("improved", "holdout"): 85}
# cases right at llama.cpp fidelity that improved answers otherwise on purpose, each with the rule and why
DELIBERATELY_OTHER = {
    "seed-no-tools": "reasoning-end-without-start: Seed-OSS with thinking on reasons from its first token, so an "
                     "answer with no end marker is reasoning (vLLM's seed_oss reasoning parser, q3-without-think); "
                     "the expected message comes from vLLM's tool-parser test, which runs without a reasoning parser "
                     "(docs/fidelity-reasoning.md)",
}


@lru_cache(maxsize=None)
def _results(fidelity: str) -> tuple:
    return tuple(run_case(c, str(TEMPLATES), fidelity) for c in CASES)


def test_the_set_covers_families_and_both_splits():
    assert len(CASES) >= 50 and len({c.family for c in CASES}) >= 8
    splits = {c.split for c in CASES}
    assert splits == {"dev", "holdout"}
    assert split_of("https://example.org/a", "x") == split_of("https://example.org/a", "x")
    assert all(c.output and c.source.startswith("https://") for c in CASES)


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_no_word_lost_on_any_real_output(fidelity):
    assert {r.case.id: r.lost for r in _results(fidelity) if r.lost} == {}


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
@pytest.mark.parametrize("split", ["dev", "holdout"])
def test_rates(fidelity, split):
    rows = [r for r in _results(fidelity) if r.case.split == split]
    assert sum(r.ok for r in rows) == PASS[(fidelity, split)], [(r.case.id, r.reason) for r in rows if not r.ok]


def test_cases_marked_both_pass_at_llama_cpp_fidelity_where_llama_cpp_agrees():
    """A case right at llama.cpp fidelity is right at improved too (improved is never worse on the set), except
    the listed cases where a repair follows another peer's policy on purpose."""
    one = {r.case.id: r.ok for r in _results("llama.cpp")}
    better = {r.case.id: r.ok for r in _results("improved")}
    assert sorted(cid for cid, ok in one.items() if ok and not better[cid]) == sorted(DELIBERATELY_OTHER)


def test_rate_table_lists_every_family():
    table = rate_table(list(_results("llama.cpp")) + list(_results("improved")))
    assert all(f"| {fam} |" in table for fam in {c.family for c in CASES}) and "| **all** |" in table
