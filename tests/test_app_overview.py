"""Overview page on real corpus templates: modes, markers, caps, generation prompt, preserved tokens and route
shown match the reference analysis (../shared/reference/analysis.jsonl)."""

from __future__ import annotations

import json

import pytest

from .test_app_helpers import (errors, frame_with, html_bodies, html_texts, metrics, page, start, unmd, use_corpus,
                               use_file)
from .conftest import TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")


def test_default_is_a_bundled_example_offline():
    at = page(start(), "overview")
    assert not errors(at)
    assert metrics(at) == {"Reasoning": "TAG_BASED", "Content": "PLAIN", "Tool calls": "JSON_NATIVE"}
    assert "chatml-think-tools.jinja" in unmd(at.markdown[0].value)


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B.jinja", "deepseek-ai-DeepSeek-V3.1.jinja",
                                  "ByteDance-Seed-OSS.jinja"])
def test_modes_and_markers_match_reference(name, reference_analysis):
    ref = reference_analysis[name]["analysis"]
    at = page(use_corpus(start(), name), "overview")
    assert not errors(at)
    assert metrics(at) == {"Reasoning": ref["reasoning"]["mode"], "Content": ref["content"]["mode"],
                           "Tool calls": ref["tools"]["format"]["mode"]}
    markers = frame_with(at, "found by")
    shown = {row["field"]: json.loads(row["value"]) for _, row in markers.iterrows()}
    assert shown["reasoning.start"] == ref["reasoning"]["start"]
    assert shown["reasoning.end"] == ref["reasoning"]["end"]
    assert shown["user_start"] == ref["user_start"]
    assert shown["assistant_start"] == ref["assistant_start"]
    fmt = ref["tools"]["format"]
    for key in ("section_start", "per_call_start"):
        if fmt[key]:
            assert shown[f"tools.format.{key}"] == fmt[key]
    # marker rows say which comparison found them (a reasoning comparison for the reasoning markers)
    by = markers.set_index("field")["found by"]
    assert set(by["reasoning.start"].split(", ")) & {"R1", "R2", "R3"}
    assert by["assistant_start"] == "assistant_start"
    tokens = list(frame_with(at, "token")["token"])
    assert tokens == ref["preserved_tokens"]
    caps = frame_with(at, "capability").set_index("capability")["supported"].to_dict()
    assert caps["tool_calls"] == str(ref["caps"]["supports_tool_calls"]).lower()   # as st.table wrote bools
    assert caps["parallel_tool_calls"] == str(ref["caps"]["supports_parallel_tool_calls"]).lower()
    gp = reference_analysis[name]["apply"]["generation_prompt"]
    assert gp and any(gp in text for text in html_texts(at))
    assert any("Route: auto-parser" in unmd(s.value) for s in at.success)


def test_special_handler_route_is_named():
    at = page(use_corpus(start(), "Qwen3-Coder.jinja"), "overview")
    info = " ".join(unmd(i.value) for i in at.info)
    assert "special handler" in info and "qwen3-coder" in info.lower()
    assert metrics(at)["Tool calls"] == "TAG_WITH_TAGGED"


def test_source_is_highlighted_and_escaped():
    at = page(use_corpus(start(), "Qwen-Qwen3-0.6B.jinja"), "overview")
    assert not [b for b in html_bodies(at) if 'class="cte-code"' in b]   # drawn only when its tab is open
    at.session_state["ov_tab"] = "Template source"                     # what a click on the tab does
    at.run()
    code = [b for b in html_bodies(at) if 'class="cte-code"' in b]
    assert code, "the template source is shown"
    # the source contains <tools></tools> and <tool_call>: shown escaped, never as tags
    assert "&lt;tool_call&gt;" in code[0] and "<tool_call>" not in code[0]


def test_template_failing_every_probe_says_so(tmp_path):
    """A template that raises on every probe gets the default analysis (as llama.cpp's); the page must say so at
    the top instead of showing NONE / PLAIN / NONE as if it were this template's analysis."""
    bad = tmp_path / "strict.jinja"
    bad.write_text("{{ raise_exception('Only user/assistant roles supported!') }}", encoding="utf-8")
    at = page(use_file(start(), bad), "overview")
    shown = " ".join(errors(at))
    assert "every probe" in shown and "Only user/assistant roles supported!" in shown
    at = page(use_corpus(start(), "Qwen-Qwen3-0.6B.jinja"), "overview")
    assert not errors(at)



def test_improved_fidelity_switch_changes_the_analysis():
    """DeepSeek R1 prints call arguments as text: llama.cpp's probes (objects) find markers holding argument
    text; the improved fidelity probes with text, says which improvement changed the analysis, and the markers
    change with it."""
    at = page(use_corpus(start(), "hfjs-deepseek-ai-DeepSeek-R1.jinja"), "overview")
    assert not any("Fidelity" in unmd(i.value) for i in at.info)
    before = frame_with(at, "field").copy()
    at.sidebar.radio(key="fidelity").set_value("improved").run()
    assert not at.exception, at.exception
    infos = [unmd(i.value) for i in at.info]
    assert any("string-argument-probes" in i for i in infos), infos
    assert not before.equals(frame_with(at, "field"))


def test_format_inferred_from_instructions_is_marked():
    """Granite 3.2 never renders a call; at improved fidelity its tool format is read from the tool instructions
    (improvement instruction-call-format): an info line says so and the markers say "inferred from instructions
    (I1)"; at llama.cpp fidelity there is no tool format."""
    at = page(use_corpus(start(), "gguf-ollama-granite3.2-8b.jinja"), "overview")
    assert metrics(at)["Tool calls"] == "NONE"
    assert not any("inferred from instructions" in unmd(i.value) for i in at.info)
    at.sidebar.radio(key="fidelity").set_value("improved").run()
    assert not errors(at) and not at.exception
    assert metrics(at)["Tool calls"] == "JSON_NATIVE"
    infos = " ".join(unmd(i.value) for i in at.info)
    assert "inferred from instructions" in infos and '<|tool_call|>[{"name": "get_weather"' in infos
    by = frame_with(at, "found by").set_index("field")["found by"]
    assert by["tools.format.section_start"] == "inferred from instructions (I1)"


def test_markers_table_has_fixed_column_widths_that_fit():
    """Review finding: at a 1400 px browser the Markers table (beside Capabilities, auto-sized columns) cut off
    "trimmed" and "found by". It is now full width with fixed widths summing to at most 900 px (the main block is
    ~940 px wide there; tests/test_browser.py checks the real layout)."""
    at = page(start(), "overview")
    df = [d for d in at.dataframe if "found by" in d.value.columns][0]
    config = json.loads(df.proto.columns)
    cols = ["field", "value", "trimmed", "found by"]
    assert list(df.value.columns) == cols
    widths = [config[c]["width"] for c in cols]
    assert all(isinstance(w, int) and w >= 150 for w in widths), widths
    assert sum(widths) <= 900, widths


def test_other_fields_spell_booleans_as_the_capabilities_beside_them():
    """"Other fields" printed Python's `False` beside Capabilities' `false` (a newcomer's finding): both tables
    read `true` / `false`, the spelling an override takes."""
    from core.analysis import analyze
    from core.jinja.template import ChatTemplate
    from explorer.components.marker_table import flags_frame

    name = "Qwen-Qwen3-0.6B.jinja"
    with open(TEMPLATES / name, encoding="utf-8") as f:
        values = dict(flags_frame(analyze(ChatTemplate(f.read(), name)).analysis).itertuples(index=False))
    assert values["tools.format.fun_name_is_key"] == "false"
    assert values["analysis_complete"] == "true"
    assert not {v for v in values.values() if v in ("True", "False")}
