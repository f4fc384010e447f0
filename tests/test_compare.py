"""core.compare (issue 12): the two Command R7B and the two QwQ revisions in ../shared show the exact analysis
difference llama.cpp's reference shows; identical templates exit 0; the parser change gates the exit status."""

from __future__ import annotations

import json

import pytest

from core.compare import compare_templates
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

R7B = "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"
R7B_EDIT = "CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja"
QWQ = "Qwen-QwQ-32B.jinja"
QWQ_EDIT = "Qwen-QwQ-32B.llamacpp-edit.jinja"


def _tmpl(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


def _reference_diff(reference_analysis, a: str, b: str) -> dict[str, tuple]:
    def flat(d, p=""):
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{p}{k}.") if isinstance(v, dict) else {p + k: v})
        return out

    fa, fb = flat(reference_analysis[a]["analysis"]), flat(reference_analysis[b]["analysis"])
    return {f"analysis.{k}": (fa.get(k), fb.get(k)) for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)}


@pytest.mark.parametrize("a,b", [(R7B, R7B_EDIT), (QWQ, QWQ_EDIT)])
def test_revisions_show_the_exact_reference_analysis_difference(reference_analysis, a, b):
    c = compare_templates(_tmpl(a), _tmpl(b), with_lint=False)
    assert not c.identical
    assert {f.path: (f.a, f.b) for f in c.fields} == _reference_diff(reference_analysis, a, b)


def test_command_r7b_edit_changes_the_parser():
    c = compare_templates(_tmpl(R7B), _tmpl(R7B_EDIT), with_lint=False)
    by = {f.path: f for f in c.fields}
    assert by["analysis.reasoning.mode"].a == "NONE" and by["analysis.reasoning.mode"].b == "TOOLS_ONLY"
    assert by["analysis.tools.format.section_start"].b == "<|START_ACTION|>"
    assert c.parser_changes
    assert {"R2", "R3"} <= {r.id for r in c.renders}
    # B's own output (reasoning before the action) is content for A's parser, reasoning + calls for B's
    changed = [p for p in c.parses if not p.same]
    assert changed and changed[0].parsed_b["reasoning_content"].startswith("The user wants the weather")
    assert "reasoning_content" not in changed[0].parsed_a


def test_qwq_edit_only_reorders_preserved_tokens_but_changes_thinking_off():
    c = compare_templates(_tmpl(QWQ), _tmpl(QWQ_EDIT), with_lint=False)
    assert [(f.path, f.parser) for f in c.fields] == [("analysis.preserved_tokens", False)]
    assert [r.id for r in c.renders] == ["R2"] and c.renders[0].b["left"] == "</think>"
    off = [p for p in c.parses if not p.enable_thinking]
    assert off and not off[0].same
    assert "reasoning_content" in off[0].parsed_a and off[0].parsed_b.get("content", "").startswith("Let me check")


def test_identical_templates_exit_0_and_changes_exit_1(capsys):
    from core.cli import main

    assert main(["compare", str(TEMPLATES / QWQ), str(TEMPLATES / QWQ)]) == 0
    assert "identical" in capsys.readouterr().out
    assert main(["compare", str(TEMPLATES / R7B), str(TEMPLATES / R7B_EDIT), "--json", "--no-lint"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["parser_changes"] is True and out["fields"]
    assert main(["compare", str(TEMPLATES / QWQ), "missing.jinja"]) == 2
    assert "missing.jinja" in capsys.readouterr().err


def test_lint_findings_added_and_removed(tmp_path):
    # fixing Qwen2.5's typed-content failure removes the render findings on typed parts
    src = template_source("Qwen-Qwen2.5-7B-Instruct.jinja")
    fixed = src.replace("message.content", "(message.content if message.content is string else "
                                           "message.content | map(attribute='text') | join(''))")
    c = compare_templates(_tmpl("Qwen-Qwen2.5-7B-Instruct.jinja"), ChatTemplate(fixed, "fixed.jinja"))
    assert "render/typed-user" in c.lint_removed
    assert not c.parser_changes


def test_a_comparison_whose_diffs_split_alike_shows_where_the_renders_differ():
    """Functionary v3.1's llama.cpp edit writes the arguments with `| tojson` (Python dict → JSON). T3 and T7
    split alike in both templates, so `compare` printed two equal lines ("left «» right «»" twice for T7) under
    "renders differ" and nothing of the difference; it now prints the prefix or suffix where they differ."""
    from core.compare import format_comparison

    a, b = "meetkai-functionary-medium-v3.1.jinja", "meetkai-functionary-medium-v3.1.llamacpp-edit.jinja"
    c = compare_templates(_tmpl(a), _tmpl(b), with_lint=False)
    alike = {r.id: r for r in c.renders if r.same_diff}
    assert sorted(alike) == ["T3", "T7"]
    assert [(p, x.endswith("</function><|eom_id|>")) for p, x, _ in alike["T3"].around()] == [("suffix", True)]
    part, x, y = alike["T7"].around()[0]
    assert part == "prefix" and "{'AA_ARG_FST_AA': 'XXXX'" in x and '{"AA_ARG_FST_AA": "XXXX"' in y
    text = format_comparison(c)
    t7 = text[text.index("  T7:"):].splitlines()
    assert t7[1] == "    A and B: left «» right «» (the same diff; the text around it differs)"
    assert t7[2].startswith("    prefix: A «…") and "{'AA_ARG_FST_AA':␣'XXXX'" in t7[2] and \
        '{"AA_ARG_FST_AA":␣"XXXX"' in t7[2]
