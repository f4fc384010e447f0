"""Playground page on real templates: reference cases (../shared/reference/cases.jsonl) typed into the page
give the expected parsed message; the streaming replay shows deltas and the partial message; a sample can
be generated from the template; bad tools JSON is a message and the text is kept."""

from __future__ import annotations

import json

import pytest

from .test_app_helpers import errors, html_texts, json_views, page, start, unmd, use_corpus
from .conftest import TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

TEMPLATES_UNDER_TEST = [
    "Qwen-Qwen2.5-7B-Instruct.jinja",               # auto-parser, JSON in <tool_call>
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",  # auto-parser, Hermes tool_use variant
    "mistralai-Mistral-Nemo-Instruct-2407.jinja",    # auto-parser, [TOOL_CALLS] JSON array
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.llamacpp-edit.jinja",  # reasoning + unicode markers
    "LFM2-8B-A1B.jinja",                             # special handler
]


def _case(reference_cases, template):
    for c in reference_cases:
        if (c["template"] == template and c["expect"].get("tool_calls") and not c["is_partial"]
                and not c["continue_final_message"] and not c["json_schema"]):
            return c
    pytest.skip(f"no tool-call case for {template}")


def _same(got: dict, want: dict) -> None:
    """The reference's comparison: text fields equal after stripping, same calls (name, JSON arguments)."""
    for k in ("content", "reasoning_content"):
        assert (got.get(k) or "").strip() == (want.get(k) or "").strip(), k
    gc, wc = got.get("tool_calls") or [], want.get("tool_calls") or []
    assert len(gc) == len(wc)
    for g, w in zip(gc, wc):
        assert g["function"]["name"] == w["function"]["name"]
        assert json.loads(g["function"]["arguments"]) == json.loads(w["function"]["arguments"])


def _set_request(at, case):
    s = at.session_state
    s["in_tools"] = json.dumps(case["tools"] or [], indent=2)
    s["in_messages"] = json.dumps(case["messages"], indent=2)
    s["in_tool_choice"] = case["tool_choice"]
    s["in_parallel"] = bool(case["parallel_tool_calls"])
    s["in_reasoning_format"] = case["reasoning_format"]
    s["in_enable_thinking"] = bool(case["enable_thinking"])
    s["in_output"] = case["input"]


@pytest.mark.parametrize("template", TEMPLATES_UNDER_TEST)
def test_reference_case_parses_as_expected(template, reference_cases):
    case = _case(reference_cases, template)
    at = use_corpus(start(), template)
    _set_request(at, case)
    at = page(at, "playground")
    assert not errors(at)
    parsed = json.loads(json_views(at)[0].value)
    _same(parsed, case["expect"])
    assert at.text_area(key="in_output").value == case["input"]

    # streaming replay: the last step's partial message is the parse; an early step is a prefix of it
    slider = at.slider(key="in_stream_step")
    n = slider.max
    assert n >= 2 and slider.value == n
    final_partial = json.loads(json_views(at)[2].value)
    _same(final_partial, case["expect"])
    slider.set_value(1).run()
    deltas, partial = json.loads(json_views(at)[1].value), json.loads(json_views(at)[2].value)
    assert len(deltas) <= 2
    assert (parsed.get("content") or "").startswith(partial.get("content") or "")
    assert len(partial.get("tool_calls") or []) <= len(parsed.get("tool_calls") or [])


def test_bundled_default_sample_and_generated_sample():
    at = page(start(), "playground")
    parsed = json.loads(json_views(at)[0].value)
    assert parsed["reasoning_content"].startswith("The user wants the weather in Paris")
    call = parsed["tool_calls"][0]["function"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Paris", "days": 2}
    # generate a sample from the template itself: 2 calls, reasoning and content
    at.number_input(key="in_gen_calls").set_value(2).run()
    [b for b in at.button if b.label == "Render a sample output"][0].click().run()
    assert not errors(at)
    out = at.text_area(key="in_output").value
    assert out.startswith("The user asked a question; I will answer it.\n</think>\n\nHere is what I found.\n<tool_call>")
    assert out.endswith("</tool_call>") and "<|im_end|>" not in out  # the end of turn is not part of it
    parsed = json.loads(json_views(at)[0].value)
    assert parsed["content"].strip() == "Here is what I found."
    assert [json.loads(c["function"]["arguments"]) for c in parsed["tool_calls"]] == [{"city": "Paris", "days": 2}] * 2


def test_bad_tools_json_is_reported_and_kept():
    at = page(start(), "playground")
    at.text_area(key="in_tools").input('[{"type": "function", "function": {"name": "x"').run()
    errs = errors(at)
    assert errs and "tools" in errs[0] and "not valid JSON" in errs[0]
    assert at.text_area(key="in_tools").value.startswith('[{"type": "function"')
    at.text_area(key="in_tools").input('[{"type": "function", "function": {"name": "x"}}]').run()
    assert any("parameters" in e for e in errors(at))  # validation names the missing field


def test_output_with_html_shown_as_text():
    at = page(start(), "playground")
    at.text_area(key="in_output").input("Hi</think>\n\n<script>alert(1)</script><img src=x onerror=alert(2)>").run()
    parsed = json.loads(json_views(at)[0].value)
    assert parsed["content"] == "<script>alert(1)</script><img src=x onerror=alert(2)>"
    for h in at.html:
        assert "<script" not in h.value and "<img" not in h.value
    assert any("<script>alert(1)</script>" in t for t in html_texts(at))
    assert all("<script" not in m.value for m in at.markdown)
    assert "Parser: auto-parser" in unmd(at.caption[0].value)


def test_typed_output_survives_template_and_page_switches():
    at = page(start(), "playground")
    assert at.text_area(key="in_output").value.startswith("The user wants the weather")  # bundled sample
    # an untouched sample follows the template
    at.selectbox(key="in_quick_bundled").select("xml-function-tags.jinja").run()
    assert at.text_area(key="in_output").value.startswith("Let me check.\n<tool_use>")
    # text the user typed stays, across templates and pages
    at.text_area(key="in_output").input("my own output").run()
    at.selectbox(key="in_quick_bundled").select("plain-chat.jinja").run()
    assert at.text_area(key="in_output").value == "my own output"
    at = page(page(at, "grammar"), "playground")
    assert at.text_area(key="in_output").value == "my own output"
    assert json.loads(json_views(at)[0].value)["content"] == "my own output"


def test_replay_starts_at_the_end_for_a_new_output():
    """The slider's step belongs to one output: a changed output (or template) shows its final step, not the old
    step number (which showed a stale half-way message)."""
    at = page(start(), "playground")
    slider = at.slider(key="in_stream_step")
    slider.set_value(2).run()
    assert at.slider(key="in_stream_step").value == 2
    at.session_state["in_output"] = at.session_state["in_output"] + "\nAnd some more words at the end of it."
    at.run()
    slider = at.slider(key="in_stream_step")
    assert slider.value == slider.max > 2
    final = json.loads(json_views(at)[2].value)
    assert final["content"].endswith("at the end of it.")
    slider.set_value(3).run()  # moving the slider on the same output keeps the chosen step
    assert at.slider(key="in_stream_step").value == 3
