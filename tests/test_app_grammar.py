"""Grammar page on real templates: GBNF shown (highlighted, escaped), lazy flag, triggers and preserved tokens
as the reference request gives them (../shared/reference/analysis.jsonl ``apply``)."""

from __future__ import annotations

import json

import pytest

from .test_app_helpers import REF_TOOLS, errors, frame_with, html_bodies, html_texts, metrics, page, start, use_corpus
from .conftest import TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")


def _reference_request(at):
    at.session_state["in_tools"] = json.dumps(REF_TOOLS)
    at.session_state["in_messages"] = json.dumps([{"role": "user", "content": "Hello"}])
    return at


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B.jinja", "ByteDance-Seed-OSS.jinja",
                                  "mistralai-Mistral-Nemo-Instruct-2407.jinja"])
def test_grammar_triggers_and_tokens_match_reference(name, reference_analysis):
    apply = reference_analysis[name]["apply"]
    at = page(_reference_request(use_corpus(start(), name)), "grammar")
    assert not errors(at)
    m = metrics(at)
    assert m["Grammar"] == ("present" if apply["grammar"] else "none")
    assert m["Lazy"] == ("yes" if apply["grammar_lazy"] else "no")
    triggers = frame_with(at, "type")
    assert [json.loads(v) for v in triggers["value"]] == [t["value"] for t in apply["grammar_triggers"]]
    assert list(frame_with(at, "token")["token"]) == apply["preserved_tokens"]
    code = [t for t, b in zip(html_texts(at), html_bodies(at)) if 'class="cte-code"' in b]
    assert code and "root ::=" in code[0]
    assert "special_function" in code[0]  # the tool's rule is in the grammar


def test_no_tools_no_grammar():
    at = start()
    at.session_state["in_tools"] = ""
    at = page(at, "grammar")
    assert metrics(at)["Grammar"] == "none"
    assert any("No grammar" in i.value for i in at.info)
