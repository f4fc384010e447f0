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


def test_the_front_page_draws_its_text_in_few_markdown_blocks():
    # a new visitor's browser runs Streamlit's Markdown renderer once per block (~5 ms of its main thread each);
    # the page's title, headings, paragraphs and small print were 17 blocks, now one per box of text
    main = start().main
    blocks = [*main.title, *main.header, *main.subheader, *main.markdown, *main.caption]
    assert len(blocks) == 7, [b.value[:40] for b in blocks]
    assert len(main.get("page_link")) == 7    # the three stories' links and "Load a template" are all kept
