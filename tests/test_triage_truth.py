"""Issue 26, "the evidence never states something false": each statement a new maintainer's check found false on a
development row (kept25 … kept27), now true or gone."""

from __future__ import annotations

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.fixes import offered_names
from core.explain.model import Setup, build_bundle, called_names

from .test_triage import _row, _template


def _explained(set_name: str, case_id: str):
    case = _row(set_name, case_id)
    t = _template(case["template"])
    req = ChatRequest.from_dict(case)
    s = Setup(t, req, "llama.cpp", {})
    return explain(t, req, case["input"]), req, build_bundle(s)


def test_a_request_fix_offers_no_tool_named_like_the_formats_own_markup():
    """gpt-oss's answer `<|channel|>final<|message|>…`: `final` is Harmony's channel word, not a called tool."""
    ex, req, bundle = _explained("kept26.jsonl", "kept23-ovms-harmony-final-call-closer")
    assert "final" in called_names(ex, req)
    assert "final" not in offered_names(bundle, ex, req)
