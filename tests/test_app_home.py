"""The front page (AppTest): the app opens on it; it names the current template and fidelity, links the three
stories, and explains every mode name the analysis can print (the same words are the Overview's tooltips)."""

from __future__ import annotations

from core.analysis.result import ContentMode, ReasoningMode, ToolFormat
from explorer.components.glossary import MODES, mode_help

from .test_app_helpers import page, start, unmd


def test_app_opens_on_the_front_page():
    at = start()
    assert at.title[0].value == "Chat Template Explorer"
    text = " ".join(unmd(m.value) for m in at.markdown)
    assert "chatml-think-tools.jinja" in text and "fidelity **llama.cpp**" in text.replace("\\", "")
    for mode in (*ReasoningMode, *ContentMode, *ToolFormat):
        assert f"`{mode.value}`" in text, mode


def test_every_mode_has_a_meaning_and_the_overview_metrics_carry_it():
    groups = {"Reasoning": ReasoningMode, "Content": ContentMode, "Tool calls": ToolFormat}
    assert set(MODES) == {(g, m.value) for g, e in groups.items() for m in e}
    at = page(start(), "overview")
    helps = {m.label: m.help for m in at.metric}
    assert helps["Reasoning"].startswith("**TAG_BASED**: Reasoning sits between")
    assert helps["Tool calls"] == mode_help("Tool calls", "JSON_NATIVE")
