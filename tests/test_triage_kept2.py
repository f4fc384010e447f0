"""Triage scored on the second kept-aside batch of real failing outputs (tests/data/triage/kept2.jsonl, "split":
"kept2"): outputs from public reports (collected by the independent collector while the triage rules were being
written from the earlier sets), each with the true cause and a working fix written by hand, checked with apply_fix
and committed before explain ran on them. Nobody writes triage rules from these cases; the scores are pinned
exactly so that a change that moves one is seen (then re-measure and update docs/explain.md, "Second kept-aside
triage batch")."""

from __future__ import annotations

import json

import pytest

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.triage import Mistake, apply_fix

from .conftest import ROOT
from .test_triage import CASES as DEV_CASES
from .test_triage import _same, _score, _template
from .test_triage_fresh import FRESH
from .test_triage_kept import KEPT

KEPT2 = [json.loads(line) for line in open(ROOT / "tests" / "data" / "triage" / "kept2.jsonl", encoding="utf-8")]


def test_the_second_kept_batch_is_real_kept_aside_and_new():
    assert len(KEPT2) == len({c["id"] for c in KEPT2}) == 12
    assert all(c["split"] == "kept2" and c["source"].startswith("https://github.com/") and c["input"]
               and c["report_says"] and c["cause_note"] for c in KEPT2)
    assert {c["cause"] for c in KEPT2} <= {m.name for m in Mistake}
    earlier = DEV_CASES + FRESH + KEPT
    assert not {c["source"] for c in KEPT2} & {c["source"] for c in earlier}
    assert not {c["input"] for c in KEPT2} & {c["input"] for c in earlier}
    assert len({c["source"] for c in KEPT2}) == len(KEPT2)


@pytest.mark.parametrize("case", [c for c in KEPT2 if c["fix"]["kind"] != "none"], ids=lambda c: c["id"])
def test_the_hand_fix_works(case):
    t = _template(case["template"])
    req = ChatRequest.from_dict(case)
    broken = explain(t, req, case["input"], fixes=False).message
    msg, clean = apply_fix(t, req, case["input"], case["fix"]["change"])
    assert clean and msg != broken, msg
    assert _same(msg, case["expect"]), msg


@pytest.mark.parametrize("case", [c for c in KEPT2 if c["cause"] == "NONE" and "expect" in c], ids=lambda c: c["id"])
def test_a_none_case_with_a_call_parses_clean_to_it(case):
    msg, clean = apply_fix(_template(case["template"]), ChatRequest.from_dict(case), case["input"], {})
    assert clean and _same(msg, case["expect"]), msg


def test_scores_on_the_second_kept_batch():
    assert _score(KEPT2) == (4, 11, 3, 5)   # cause, fix verified, nearest found / within 3 edits
