"""Overrides page on real templates: workaround switches, mode edits, JSON import/export; every change goes
through reapply and shows as a diff from the automatic analysis."""

from __future__ import annotations

import json

import pytest

from .test_app_helpers import (errors, frame_with, html_bodies, html_texts, json_views, metrics, page, start, unmd,
                               use_corpus)
from .conftest import TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")


def _diff(at):
    for df in at.dataframe:
        if {"automatic", "now"} <= set(df.value.columns):
            return df.value.set_index("field")
    return None


def _click(at, label):
    [b for b in at.button if b.label == label][0].click().run()
    assert not at.exception, at.exception


def test_workaround_switch_changes_the_analysis():
    at = page(use_corpus(start(), "Qwen-QwQ-32B.jinja"), "overview")
    assert metrics(at)["Reasoning"] == "TAG_BASED"
    assert any("old-qwen-deepseek-thinking" in unmd(w.value) for w in at.warning)
    at = page(at, "overrides")
    key = [t.key for t in at.toggle if "old-qwen-deepseek-thinking" in unmd(t.label)][0]
    assert at.toggle(key=key).value is True
    at.toggle(key=key).set_value(False).run()
    assert not errors(at)
    diff = _diff(at)
    assert diff is not None and diff.loc["reasoning.mode", "automatic"] == '"TAG_BASED"'
    assert diff.loc["reasoning.mode", "now"] == '"NONE"'
    at = page(at, "overview")
    assert metrics(at)["Reasoning"] == "NONE"  # the whole explorer follows the switch


def test_import_mode_edit_and_invalid_path():
    at = page(use_corpus(start(), "Qwen-Qwen3-0.6B.jinja"), "overrides")
    assert _diff(at) is None
    at.text_area(key="in_ov_import").input(json.dumps(
        {"overrides": {"reasoning.start": "<reason>\n", "tools.format.mode": "TAG_WITH_JSON"}})).run()
    _click(at, "Apply imported JSON")
    assert any("Imported 2 override(s)" in s.value for s in at.success)
    diff = _diff(at)
    assert diff.loc["reasoning.start", "now"] == '"<reason>\\n"'
    assert diff.loc["tools.format.mode", "now"] == '"TAG_WITH_JSON"'
    assert "<reason>" in json.loads(diff.loc["preserved_tokens", "now"])
    mode_key = [s.key for s in at.selectbox if s.label == "tools.format.mode"][0]
    assert at.selectbox(key=mode_key).value == "TAG_WITH_JSON"
    # a mode edit back to the automatic value removes that override
    at.selectbox(key=mode_key).select("JSON_NATIVE").run()
    diff = _diff(at)
    assert "tools.format.mode" not in diff.index and "reasoning.start" in diff.index
    markers = frame_with(at, "overridden").set_index("field")
    assert bool(markers.loc["reasoning.start", "overridden"]) is True
    # an unknown path is refused with a message naming it; the earlier overrides stay
    at.text_area(key="in_ov_import").input('{"overrides": {"reasoning.bogus": "x"}}').run()
    _click(at, "Apply imported JSON")
    assert any("unknown override path 'reasoning.bogus'" in e for e in errors(at))
    assert at.text_area(key="in_ov_import").value == '{"overrides": {"reasoning.bogus": "x"}}'
    assert "reasoning.start" in _diff(at).index
    at = page(at, "overview")
    shown = frame_with(at, "found by").set_index("field")["value"]
    assert json.loads(shown["reasoning.start"]) == "<reason>\n"
    # reset
    at = page(at, "overrides")
    _click(at, "Reset all overrides")
    assert _diff(at) is None


def test_edit_rebuilds_parser_and_grammar_at_once():
    at = use_corpus(start(), "Qwen-Qwen3-0.6B.jinja")
    at.session_state["in_output"] = '<call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</call>'
    at = page(at, "overrides")
    before = json.loads(json_views(at)[0].value)
    assert "tool_calls" not in before and "<call>" in before["content"]  # automatic markers: not a call
    at.text_area(key="in_ov_import").input(json.dumps({"overrides": {
        "tools.format.per_call_start": "<call>\n", "tools.format.per_call_end": "</call>"}})).run()
    _click(at, "Apply imported JSON")
    assert not errors(at)
    after = json.loads(json_views(at)[0].value)
    assert after["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(after["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    grammar = [t for t, b in zip(html_texts(at), html_bodies(at)) if 'class="cte-code"' in b]
    assert grammar and '"<call>' in grammar[0] and "<tool_call>" not in grammar[0]
    # shown as a diff from the automatic analysis
    assert _diff(at).loc["tools.format.per_call_start", "now"] == '"<call>\\n"'


@pytest.mark.parametrize("text, message", [
    ("nope", "the imported text is not valid JSON: Expecting value at line 1 column 1"),
    ("[1, 2]", 'the imported JSON must be a JSON object with "overrides" and/or "disabled_workarounds", got a list'),
    ('{"overrides": 5}', 'the imported JSON "overrides" must be an object, got a number'),
    ('{"disabled_workarounds": "x"}', 'the imported JSON "disabled_workarounds" must be a list, got a string'),
])
def test_import_errors_are_plain_messages(text, message):
    """Review finding: import errors showed 'ValueError: import: Expecting value…' (a Python type name)."""
    at = page(use_corpus(start(), "Qwen-Qwen3-0.6B.jinja"), "overrides")
    at.text_area(key="in_ov_import").input(text).run()
    _click(at, "Apply imported JSON")
    shown = errors(at)
    assert any(message in e for e in shown), shown
    assert not any("Error:" in e or "import:" in e for e in shown), shown
    assert at.text_area(key="in_ov_import").value == text


def test_mode_fields_explain_every_choice():
    """Each mode selectbox's tooltip explains every value it offers (the names alone are jargon), the shown mode
    first; the Grammar page's metrics say what a lazy grammar and its triggers are."""
    from explorer.components.marker_table import MODE_FIELDS, mode_choices

    at = page(use_corpus(start(), "Qwen-QwQ-32B.jinja"), "overrides")
    assert not errors(at)
    boxes = {b.label: b for b in at.selectbox if b.label in MODE_FIELDS}
    assert set(boxes) == set(MODE_FIELDS), set(boxes)
    for path, box in boxes.items():
        tip = box.proto.help
        missing = [c for c in mode_choices(path) if c not in tip]
        assert not missing, (path, missing, tip)
    assert boxes["reasoning.mode"].proto.help.startswith("**TAG_BASED**: Reasoning sits between")
    at = page(at, "grammar")
    tips = {m.label: m.proto.help for m in at.metric}
    assert "trigger" in tips["Lazy"] and "switch a lazy grammar on" in tips["Triggers"], tips
