"""Templates that export since issue 29 (docs/export.md, coverage): each exported response_template agrees with
our parser through transformers' own parser on every reference case of the template."""

from __future__ import annotations

import pytest

from core.export.response_template import export_response_template
from core.export.verify import reference_cases, verify
from core.jinja.template import ChatTemplate

from .conftest import SHARED, TEMPLATES

NEWLY_EXPORTED = ["GigaChat3-10B-A1.8B.jinja", "GigaChat3.1-10B-A1.8B.jinja", "openbmb-MiniCPM5-1B.jinja",
                  "meetkai-functionary-medium-v3.2.jinja", "openai-gpt-oss-120b.jinja", "Kimi-K3.jinja",
                  "muse-glimmer.jinja"]


@pytest.mark.parametrize("name", NEWLY_EXPORTED)
def test_exports_and_agrees_on_every_reference_case(name):
    template = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
    res = export_response_template(template)
    assert res.exportable, res.reasons
    cases = reference_cases(str(SHARED / "reference" / "cases.jsonl"), name)
    assert cases
    v = verify(res.response_template, template, cases=cases)
    assert v.agrees, v.first_disagreement


def test_single_call_section_is_one_region_per_turn():
    """GigaChat 3.1 renders no parallel calls, so its call section (no per-call markers) holds one JSON object."""
    name = "GigaChat3.1-10B-A1.8B.jinja"
    res = export_response_template(ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name))
    field = res.response_template["fields"]["tool_calls"]
    assert field["open_pattern"] == r"<\|function_call\|>\s{0,1000}" and "close_pattern" not in field
    assert any("no parallel calls" in n for n in res.notes)


def test_gpt_oss_is_for_transformers_only():
    name = "openai-gpt-oss-120b.jinja"
    template = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
    res = export_response_template(template)
    assert "other_recipient" in res.response_template["fields"]        # to=python etc. swallowed, left empty
    vllm = export_response_template(template, flavour="vllm")
    assert not vllm.exportable and "vLLM serves no field but thinking" in vllm.reasons[0]
