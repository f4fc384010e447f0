"""Comparisons page on real templates: every comparison listed, the fields each one set, both renders and the
coloured diff split with whitespace visible."""

from __future__ import annotations

import re

import pytest

from .test_app_helpers import errors, frame_with, html_bodies, html_texts, page, start, unmd, use_corpus
from .conftest import TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")


def test_every_comparison_listed_with_fields_set(reference_analysis):
    name = "Qwen-Qwen3-0.6B.jinja"
    at = page(use_corpus(start(), name), "comparisons")
    assert not errors(at)
    summary = frame_with(at, "fields set").set_index("id")
    for cid in ("R1", "R2", "C1-tools", "T1", "assistant_start", "user_start", "generation_prompt"):
        assert cid in summary.index
    assert "reasoning.start" in summary.loc["R1", "fields set"]
    assert "tools.format.mode" in summary.loc["T1", "fields set"]
    labels = [unmd(e.label) for e in at.expander]
    assert any(label.startswith("R1:") for label in labels)


def test_focus_on_r1_shows_renders_and_diff():
    at = page(use_corpus(start(), "Qwen-Qwen3-0.6B.jinja"), "comparisons")
    at.selectbox(key="in_cmp_focus").select("R1").run()
    assert not errors(at)
    found = frame_with(at, "field").set_index("field")["value"].to_dict()
    assert found["reasoning.start"] == '"<think>\\n"'
    assert found["reasoning.mode"] == '"TAG_BASED"'
    diffs = [b for b in html_bodies(at) if 'class="cte-diff"' in b]
    assert len(diffs) == 1
    # B's differing part holds the reasoning needle, coloured as "right"; whitespace is made visible
    assert re.search(r'data-part="right"[^>]*>.*REASON_PART', diffs[0], re.S)
    assert "↵" in diffs[0] and "&lt;think&gt;" in diffs[0]
    texts = html_texts(at)
    assert any("<|im_start|>assistant\n<think>\nREASON_PART I am thinking END_R\n</think>" in t for t in texts)


def test_tagged_template_argument_comparisons():
    at = page(use_corpus(start(), "ByteDance-Seed-OSS.jinja"), "comparisons")
    summary = frame_with(at, "fields set").set_index("id")
    assert "tools.arguments.name_prefix" in summary.loc["A1", "fields set"]
    assert "tools.arguments.value_suffix" in summary.loc["A2", "fields set"]
    at.toggle(key="in_cmp_only_found").set_value(True).run()
    labels = [unmd(e.label).split(":")[0] for e in at.expander if ":" in e.label]
    assert "A1" in labels and "R2" not in labels  # R2 sets nothing for this template
