"""The Playground's request carries ``chat_template_kwargs`` (found trying the product as a new user: the app had
no place for them, so a report whose request sets e.g. Kimi K3's ``thinking: false`` parsed as if thinking were on,
and Explain's request fixes and permalinks dropped them). The case is a real kept-aside output
(tests/data/real_outputs_kept7/kimi-k3.jsonl, kept7-sgl-kimik3-multiple, from SGLang's KimiK3Detector tests:
https://github.com/sgl-project/sglang/blob/0396a0526bdc9deb22e3aa0c50157b62a75ff7a3/test/registered/function_call/test_kimik3_detector.py)."""

from __future__ import annotations

import json

import pytest

from .conftest import ROOT, TEMPLATES
from .test_app_helpers import errors, json_views, page, start, use_corpus

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

CASE = next(c for c in map(json.loads, open(ROOT / "tests" / "data" / "real_outputs_kept7" / "kimi-k3.jsonl",
                                            encoding="utf-8")) if c["id"] == "kept7-sgl-kimik3-multiple")


def _playground(kwargs: str):
    at = use_corpus(start(), CASE["template"])
    s = at.session_state
    req = CASE["request"]
    s["in_tools"] = json.dumps(req["tools"], indent=2)
    s["in_messages"] = json.dumps(req["messages"], indent=2)
    s["in_parallel"] = bool(req["parallel_tool_calls"])
    s["in_kwargs"] = kwargs
    s["in_output"] = CASE["output"]
    return page(at, "playground")


def test_template_kwargs_reach_the_parser():
    assert CASE["request"]["chat_template_kwargs"] == {"thinking": False}
    at = _playground(json.dumps(CASE["request"]["chat_template_kwargs"]))
    assert not errors(at)
    parsed = json.loads(json_views(at)[0].value)
    assert not parsed.get("reasoning_content")
    assert [json.loads(c["function"]["arguments"]) for c in parsed["tool_calls"]] == [{"code": "a"}, {"code": "b"}]
    # without them the template's default (thinking on) reads the calls as reasoning: the box is what differs
    parsed = json.loads(json_views(_playground(""))[0].value)
    assert parsed["reasoning_content"].startswith("<|open|>tools<|sep|>") and not parsed.get("tool_calls")


def test_template_kwargs_that_are_not_an_object_are_a_message_and_kept():
    at = _playground('["thinking", false]')
    errs = errors(at)
    assert errs and "chat_template_kwargs" in errs[0] and "JSON object" in errs[0]
    assert at.text_area(key="in_kwargs").value == '["thinking", false]'


def test_explain_permalink_reopens_with_the_template_kwargs(tmp_path, monkeypatch):
    from urllib.parse import parse_qsl, urlsplit

    from .test_app_edit import start_with

    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(TEMPLATES))  # a file: link reopens only inside an allowed folder
    at = page(_playground(json.dumps({"thinking": False})), "explain")
    assert "Permalink" in [h.value for h in at.subheader]
    link = at.code[-1].value
    params = dict(parse_qsl(urlsplit(link).query))
    again = page(start_with(params), "explain")      # a new session opened from the link
    assert json.loads(again.session_state["in_kwargs"]) == {"thinking": False} and not errors(again)
    assert again.code[-1].value == link      # the reopened explanation writes the same link: same request
