"""Triage scored on kept-aside fresh failing outputs (tests/data/triage/fresh.jsonl, "split": "fresh"): 16 real
outputs from public reports that no triage rule was written from, each with the true cause and a working fix
written by hand (and checked with apply_fix) before explain ran on them. The scores are pinned exactly;
docs/explain.md ("Fresh kept-aside set") lists each miss and why."""

from __future__ import annotations

import json

import pytest

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.triage import Mistake, apply_fix

from .conftest import ROOT
from .test_triage import CASES as DEV_CASES
from .test_triage import _same, _score, _template

FRESH = [json.loads(line) for line in open(ROOT / "tests" / "data" / "triage" / "fresh.jsonl", encoding="utf-8")]


def test_the_fresh_set_is_real_kept_aside_and_new():
    assert len(FRESH) == len({c["id"] for c in FRESH}) == 16
    assert all(c["split"] == "fresh" and c["source"].startswith("https://github.com/") and c["input"]
               and c["report_says"] for c in FRESH)
    assert {c["cause"] for c in FRESH} <= {m.name for m in Mistake}
    assert not {c["source"] for c in FRESH} & {c["source"] for c in DEV_CASES}
    assert not {c["input"] for c in FRESH} & {c["input"] for c in DEV_CASES}


@pytest.mark.parametrize("case", [c for c in FRESH if c["fix"]["kind"] != "none"], ids=lambda c: c["id"])
def test_the_hand_fix_works(case):
    t = _template(case["template"])
    req = ChatRequest.from_dict(case)
    broken = explain(t, req, case["input"], fixes=False).message
    msg, clean = apply_fix(t, req, case["input"], case["fix"]["change"])
    assert clean and msg != broken, msg
    if "expect" in case:
        assert _same(msg, case["expect"]), msg


def test_scores_on_the_fresh_set():
    assert _score(FRESH) == (10, 11, 2, 2)      # cause, fix verified, nearest found / within 3 edits
