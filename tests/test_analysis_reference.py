"""The analysis agrees with llama.cpp's (reference/analysis.jsonl) on the corpus templates.

Runs the analysis in-process on every template the reference routes to the auto-parser and scores it
the way ``tools/compare_analysis.py`` does: every mode and marker field plus the generation prompt must
agree for a template to count. On failure the assertion message lists the mismatching templates and fields.
"""

from __future__ import annotations

import pytest

from core.analysis import analyze
from core.jinja.template import ChatTemplate

from .conftest import template_source

FIELDS = [
    "reasoning.mode", "reasoning.start", "reasoning.end",
    "content.mode", "content.start", "content.end",
    "tools.format.mode", "tools.format.section_start", "tools.format.section_end",
    "tools.format.per_call_start", "tools.format.per_call_end",
    "tools.format.fun_name_is_key", "tools.format.tools_array_wrapped",
    "tools.format.name_field", "tools.format.args_field", "tools.format.id_field",
    "tools.function.name_prefix", "tools.function.name_suffix", "tools.function.close",
    "tools.arguments.start", "tools.arguments.end",
    "tools.arguments.name_prefix", "tools.arguments.name_suffix",
    "tools.arguments.value_prefix", "tools.arguments.value_suffix",
    "tools.call_id.pos", "tools.call_id.prefix", "tools.call_id.suffix",
]
CAPS = ["supports_tools", "supports_tool_calls", "supports_system_role", "supports_parallel_tool_calls",
        "supports_string_content", "supports_typed_content", "supports_object_arguments"]
MISSING = "<missing>"
# Keys our analysis emits that the reference does not print.
EXTRA_KEYS = {"openai_wrapper_trigger", "tolerate_intertag_whitespace", "additional_stops"}


def _get(d, path):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return MISSING
        d = d[k]
    return d


def _strip(d):
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k not in EXTRA_KEYS}
    return d


@pytest.fixture(scope="module")
def results(reference_analysis):
    """template name -> (reference row, our analysis JSON or None, our generation prompt or MISSING, error)."""
    out = {}
    for name, row in sorted(reference_analysis.items()):
        if row.get("route") != "autoparser" or "analysis" not in row:
            continue
        try:
            rep = analyze(ChatTemplate(template_source(name), name))
            gp = rep.generation_prompt if rep.generation_prompt_error is None else MISSING
            out[name] = (row, rep.analysis.to_json(), gp, None)
        except Exception as e:  # counted as a mismatch, listed in the failure message
            out[name] = (row, None, MISSING, f"{type(e).__name__}: {e}")
    return out


def _mismatches(results):
    bad = {}
    for name, (row, ours, gp, err) in results.items():
        if ours is None:
            bad[name] = [f"error: {err}"]
            continue
        why = [f"{f}: ref={_get(row['analysis'], f)!r} ours={_get(ours, f)!r}"
               for f in FIELDS if _get(row["analysis"], f) != _get(ours, f)]
        ref_gp = _get(row, "apply.generation_prompt")
        if ref_gp != gp:
            why.append(f"generation_prompt: ref={ref_gp!r} ours={gp!r}")
        if why:
            bad[name] = why
    return bad


def test_autoparser_templates_agree_with_reference(results):
    assert len(results) == 297
    bad = _mismatches(results)
    listing = "\n".join(f"  {n}: " + "; ".join(w[:4]) for n, w in sorted(bad.items()))
    # the headline figure, held exactly: 297/297
    assert len(results) - len(bad) == 297, f"{len(results) - len(bad)}/{len(results)} agree; mismatches:\n{listing}"


def test_whole_analysis_objects_agree(results):
    # stricter than the scored fields: preserved tokens, role markers, JSON field mapping, parameter order…
    bad = [n for n, (row, ours, _, _) in results.items() if ours is None or _strip(ours) != _strip(row["analysis"])]
    assert bad == [], f"{len(bad)} templates differ: {bad[:20]}"


def test_caps_agree_per_flag(results):
    n = len(results)
    rates = {}
    for c in CAPS:
        ok = sum(1 for row, ours, _, _ in results.values()
                 if ours is not None and row["analysis"]["caps"][c] == ours["caps"][c])
        rates[c] = ok / n
    low = {c: f"{r:.1%}" for c, r in rates.items() if r < 1}
    assert not low, f"caps flags not in full agreement: {low}"


def test_generation_prompts_agree(results):
    bad = {n: (_get(row, "apply.generation_prompt"), gp) for n, (row, _, gp, _) in results.items()
           if _get(row, "apply.generation_prompt") != gp}
    assert bad == {}, f"{len(bad)} generation prompts differ: {list(bad.items())[:10]}"
