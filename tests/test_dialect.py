"""Improvement transformers-dialect (core/analysis/dialect.py) and ChatRequest.to_row: a template llama.cpp's
Jinja dialect cannot render is analysed and rendered in the transformers dialect at improved fidelity only."""

from __future__ import annotations

import pytest

from core.analysis import analyze
from core.analysis.dialect import llama_dialect_failure
from core.analysis.fidelity import TRANSFORMERS_DIALECT
from core.analysis.result import ToolFormat
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.errors import TemplateRenderError
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

GEMMA3 = "vllm-tool_chat_template_gemma3_pythonic.jinja"
REQ = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}


def _t(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


def test_only_a_template_llama_cpp_cannot_render_is_detected():
    assert "selectattr: unknown test 'tool_calls'" in llama_dialect_failure(_t(GEMMA3))
    assert llama_dialect_failure(_t("Qwen-Qwen3-0.6B.jinja")) is None
    # fails in both dialects: the template's own fault, no dialect helps
    assert llama_dialect_failure(ChatTemplate("{{ raise_exception('no') }}", "raises")) is None


def test_improved_renders_in_the_transformers_dialect_and_llama_cpp_does_not():
    rep = analyze(_t(GEMMA3), fidelity="improved")
    assert TRANSFORMERS_DIALECT in rep.improvements_applied
    assert rep.analysis.tools.format.mode == ToolFormat.PYTHONIC
    caps = rep.analysis.caps
    assert caps.supports_tool_calls and caps.supports_object_arguments and caps.supports_system_role
    assert rep.generation_prompt == "<start_of_turn>model\n"
    assert TRANSFORMERS_DIALECT not in analyze(_t(GEMMA3)).improvements_applied
    req = ChatRequest.from_dict(REQ)
    with pytest.raises(TemplateRenderError):
        build_chat_parser(_t(GEMMA3), req)
    b = build_chat_parser(_t(GEMMA3), req, fidelity="improved")
    assert any(TRANSFORMERS_DIALECT in n for n in b.notes)
    msg = b.parser.parse("[get_weather(city='Paris')]")
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"city":"Paris"}')]


def test_switched_off_it_changes_nothing():
    rep = analyze(_t(GEMMA3), fidelity="improved", disabled_improvements=[TRANSFORMERS_DIALECT])
    assert TRANSFORMERS_DIALECT not in rep.improvements_applied and rep.all_probes_failed


@pytest.mark.parametrize("row", [
    REQ,
    {**REQ, "tool_choice": "required", "parallel_tool_calls": True, "reasoning_format": "none",
     "enable_thinking": False, "add_generation_prompt": False, "continue_final_message": "auto",
     "json_schema": {"type": "object"}},
    {"messages": [{"role": "user", "content": "hi"}], "tools": None},
    {**REQ, "chat_template_kwargs": {"thinking": False, "enable_thinking": False}}])
def test_to_row_is_the_inverse_of_from_dict(row):
    req = ChatRequest.from_dict(row)
    back = req.to_row()
    assert ChatRequest.from_dict(back) == req
    assert back["messages"] == row["messages"] and back["tools"] == (row.get("tools") or None)
    assert back["tool_choice"] == row.get("tool_choice", "auto")
    assert back.get("chat_template_kwargs") == row.get("chat_template_kwargs")


def test_the_round_trip_renders_as_the_parser_does():
    # AI21 Jamba 1.6 ('in' on an undefined value for a request with tools): no parser at llama.cpp fidelity; at
    # improved the sample is rendered in the transformers dialect, as the parser's prompt is, and reads back whole
    from core.chat.roundtrip import RoundTripStatus, round_trip

    jamba = _t("hfjs-ai21labs-AI21-Jamba-Large-1.6.jinja")
    assert round_trip(jamba).status == RoundTripStatus.PARSER_ERROR
    assert round_trip(jamba, fidelity="improved").status == RoundTripStatus.PASS
