"""Triage scored on the second kept-aside batch of real failing outputs (tests/data/triage/kept.jsonl, "split":
"kept"): outputs from public reports that no triage rule was written from, each with the true cause and a working
fix written by hand and committed (and checked with apply_fix) before explain ran on them. Nobody writes triage
rules from these cases; the scores are pinned exactly so that a change that moves one is seen (then re-measure and
update docs/explain.md, "Second kept-aside set"). A case whose template does not render makes explain raise: it
counts as a miss on cause and fix here (docs/explain.md says which)."""

from __future__ import annotations

import json

import pytest

from core.chat.request import ChatRequest
from core.errors import TemplateRenderError
from core.explain.explain import explain
from core.explain.triage import Mistake, apply_fix

from .conftest import ROOT
from .test_triage import CASES as DEV_CASES
from .test_triage import _run, _same, _score, _template
from .test_triage_fresh import FRESH

KEPT = [json.loads(line) for line in open(ROOT / "tests" / "data" / "triage" / "kept.jsonl", encoding="utf-8")]
RENDER_FAILS = {"kept-vllm-14734-gemma3-tool-code-fence"}     # explain raises TemplateRenderError (docs/explain.md)


def test_the_kept_set_is_real_kept_aside_and_new():
    assert len(KEPT) == len({c["id"] for c in KEPT}) == 6
    assert all(c["split"] == "kept" and c["source"].startswith("https://github.com/") and c["input"]
               and c["report_says"] for c in KEPT)
    assert {c["cause"] for c in KEPT} <= {m.name for m in Mistake}
    earlier = DEV_CASES + FRESH
    assert not {c["source"] for c in KEPT} & {c["source"] for c in earlier}
    assert not {c["input"] for c in KEPT} & {c["input"] for c in earlier}


@pytest.mark.parametrize("case", [c for c in KEPT if c["fix"]["kind"] != "none"], ids=lambda c: c["id"])
def test_the_hand_fix_works(case):
    t = _template(case["template"])
    req = ChatRequest.from_dict(case)
    broken = explain(t, req, case["input"], fixes=False).message
    msg, clean = apply_fix(t, req, case["input"], case["fix"]["change"])
    assert clean and msg != broken, msg
    if "expect" in case:
        assert _same(msg, case["expect"]), msg


@pytest.mark.parametrize("case", [c for c in KEPT if c["id"] in RENDER_FAILS], ids=lambda c: c["id"])
def test_explain_raises_where_the_template_does_not_render(case):
    with pytest.raises(TemplateRenderError):
        _run(case)


def test_scores_on_the_kept_set():
    scored = [c for c in KEPT if c["id"] not in RENDER_FAILS]
    cause, fix, near, near_total = _score(scored)
    near_total += sum(c["nearest_within_3"] for c in KEPT if c["id"] in RENDER_FAILS)
    assert (cause, fix, near, near_total) == (3, 4, 1, 2)   # cause, fix verified, nearest found / within 3 edits
