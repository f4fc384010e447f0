"""Which engines serve an exported response_template (core/export/consumers.py, docs/export.md)."""

from __future__ import annotations

from core.export.consumers import Consumer, consumer_verdicts, vllm_template_problems
from core.export.response_template import export_response_template
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES


def _qwen3(flavour: str):
    src = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    return export_response_template(ChatTemplate(src, "Qwen-Qwen3-0.6B.jinja"), flavour=flavour)


def test_vllm_flavour_is_served_by_every_engine_with_vllm_hf_request_limits():
    res = _qwen3("vllm")
    by = {v.consumer: v for v in res.consumers}
    assert all(v.serves for v in by.values())
    assert by[Consumer.VLLM_HF].request_limits == ["strict tools", "tool_choice: required", "a named tool_choice",
                                                   "parallel_tool_calls: false"]
    assert "--tool-call-parser hf --reasoning-parser hf" in by[Consumer.VLLM_HF].flags
    assert by[Consumer.VLLM_BEAM].request_limits == []
    assert [c["consumer"] for c in res.to_json()["consumers"]] == ["transformers", "vllm-hf", "vllm-beam",
                                                                   "sglang-response_template"]


def test_transformers_field_names_are_refused_by_vllm():
    by = {v.consumer: v for v in _qwen3("transformers").consumers}
    assert by[Consumer.TRANSFORMERS].serves and by[Consumer.SGLANG].serves
    assert not by[Consumer.VLLM_HF].serves and "reasoning_content" in by[Consumer.VLLM_HF].refuses[0]
    assert by[Consumer.VLLM_HF].line().startswith("vllm-hf: refuses: fields ['reasoning_content']")


def test_vllm_rejects_what_it_cannot_stream():
    template = {"version": 1, "defaults": {"role": "assistant", "name": "x"},
                "fields": {"thinking": {"open": "<t>", "close": "</t>", "content": "json"},
                           "content": {"content": "text", "transform": {"x": "{content}"}}}}
    problems = vllm_template_problems(template)
    assert problems == ["defaults ['name'] (vLLM takes only role)",
                        "field 'thinking' is not plain text (a content parser, transform or join vLLM cannot stream)",
                        "field 'content' is not plain text (a content parser, transform or join vLLM cannot stream)"]


def test_nothing_exported_nothing_served():
    verdicts = consumer_verdicts(None, ["JSON calls keyed by the function name"])
    assert not any(v.serves for v in verdicts)
    assert all(v.refuses == ["JSON calls keyed by the function name"] for v in verdicts)


def test_vllm_flags_name_only_the_parsers_the_template_has_fields_for():
    # vLLM's hf parser refuses to start when `--reasoning-parser hf` meets a template without a `thinking` field,
    # or `--tool-call-parser hf` one without `tool_calls` (vllm/parser/response_template.py,
    # validate_tokenizer_response_template): Llama 3.1's export has no thinking field.
    calls_only = {"version": 1, "fields": {"content": {}, "tool_calls": {"open": "<c>", "content": "json"}}}
    by = {v.consumer: v for v in consumer_verdicts(calls_only)}
    assert by[Consumer.VLLM_HF].serves
    assert "--tool-call-parser hf" in by[Consumer.VLLM_HF].flags
    assert "--reasoning-parser" not in by[Consumer.VLLM_HF].flags
    assert "--reasoning-parser" not in by[Consumer.VLLM_BEAM].flags
    thinking_only = {"version": 1, "fields": {"thinking": {"open": "<t>", "close": "</t>"}, "content": {}}}
    by = {v.consumer: v for v in consumer_verdicts(thinking_only)}
    assert "--reasoning-parser hf" in by[Consumer.VLLM_HF].flags
    assert "--tool-call-parser" not in by[Consumer.VLLM_HF].flags
