"""What a newcomer sees: provenance of edited analyses on every page, overrides made for another template,
invisible characters in model output, which text is boxed as a marker, an empty Playground, a failed
analysis, an upload that does not compile (issue 9)."""

from __future__ import annotations

import json

import pytest

from .test_app_helpers import errors, frame_with, html_bodies, json_views, page, start, unmd, use_corpus
from .conftest import TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

QWEN3 = "Qwen-Qwen3-0.6B.jinja"


def _click(at, label):
    [b for b in at.button if b.label == label][0].click().run()
    assert not at.exception, at.exception


def _import(at, payload):
    at.text_area(key="in_ov_import").input(json.dumps(payload)).run()
    _click(at, "Apply imported JSON")


def _banner(at) -> str:
    return "\n".join(unmd(w.value) for w in [*at.warning, *at.info] if "Overrides active" in unmd(w.value))


def test_imported_override_is_marked_override_on_every_page():
    at = page(use_corpus(start(), QWEN3), "overrides")
    _import(at, {"overrides": {"reasoning.start": "<thought>"}})
    assert 'reasoning.start = "<thought>"' in _banner(at)
    at = page(at, "overview")
    by = frame_with(at, "found by").set_index("field")["found by"]
    assert by["reasoning.start"] == "override"              # was "R1…" as if a comparison had found it
    assert by["reasoning.end"] != "override"
    assert "Overrides active (1)" in _banner(at)
    for name in ("comparisons", "playground", "grammar", "sources"):
        assert 'reasoning.start = "<thought>"' in _banner(page(at, name)), name


def test_override_that_changes_nothing_is_named_in_the_banner():
    at = page(use_corpus(start(), QWEN3), "overrides")
    start_marker = frame_with(page(at, "overview"), "found by").set_index("field").loc["reasoning.end", "value"]
    at = page(at, "overrides")
    _import(at, {"overrides": {"reasoning.end": json.loads(start_marker)}})
    at = page(at, "overview")
    assert "override reasoning.end changes nothing" in "\n".join(unmd(w.value) for w in at.warning)


def test_overrides_for_another_template_ask_first():
    at = page(use_corpus(start(), QWEN3), "overrides")
    _import(at, {"template": "other.jinja", "template_digest": "0123456789abcdef",
                 "overrides": {"reasoning.start": "<thought>"}, "disabled_workarounds": []})
    asked = [unmd(w.value) for w in at.warning if "exported for another template" in unmd(w.value)]
    assert asked and "other.jinja" in asked[0] and "0123456789abcdef" in asked[0]
    assert not _banner(at)                                   # nothing applied yet
    _click(at, "Cancel import")
    assert not [w for w in at.warning if "exported for another template" in unmd(w.value)] and not _banner(at)
    _import(at, {"template": "other.jinja", "template_digest": "0123456789abcdef",
                 "overrides": {"reasoning.start": "<thought>"}})
    _click(at, "Import anyway")
    assert 'reasoning.start = "<thought>"' in _banner(at)
    # a file exported for this very template imports without asking
    digest = at.session_state["template"].digest
    _import(at, {"template": QWEN3, "template_digest": digest, "overrides": {"reasoning.end": "</thought>"}})
    assert not [w for w in at.warning if "exported for another template" in unmd(w.value)]
    assert any("Imported 1 override(s)" in s.value for s in at.success)


def test_bidi_controls_in_model_output_are_escaped_everywhere():
    at = page(use_corpus(start(), QWEN3), "playground")
    at.session_state["in_tools"] = "[]"
    at.text_area(key="in_output").input("<think>plan\u202eevil</think>Hello \u202Dnow\u2066 [] {\"required\": []}").run()
    assert not errors(at)
    shown = html_bodies(at) + [j.value for j in json_views(at)] + [m.value for m in at.markdown] + \
        [c.value for c in at.caption]
    for raw in ("\u202e", "\u202d", "\u2066"):
        assert not any(raw in s for s in shown), raw
    assert '"Hello \\u202dnow\\u2066' in json_views(at)[0].value            # shown as JSON escapes…
    assert json.loads(json_views(at)[0].value)["content"].startswith("Hello \u202dnow\u2066")   # …of the text
    assert any("\\u202e" in h for h in html_bodies(at))


def test_only_real_markers_are_boxed():
    at = page(use_corpus(start(), QWEN3), "playground")
    at.session_state["in_tools"] = "[]"
    at.text_area(key="in_output").input('<think>x</think>Schema: {"required": []} and <b>bold</b> [INST]').run()
    boxed = [h for h in html_bodies(at) if 'data-marker="1"' in h]
    assert boxed                                           # the generation prompt's <think> is a real marker
    import re

    texts = {m for h in html_bodies(at) for m in re.findall(r'data-marker="1"[^>]*>([^<]*)<', h)}
    assert texts <= {"&lt;think&gt;", "&lt;/think&gt;", "&lt;tool_call&gt;", "&lt;/tool_call&gt;",
                     "&lt;|im_start|&gt;user", "&lt;|im_start|&gt;assistant"}, texts
    # other token shapes are not boxed, but never break inside a token
    body = "".join(html_bodies(at))
    assert '<span style="white-space:nowrap">[INST]</span>' in body
    assert '<span style="white-space:nowrap">[]</span>' in body


def test_empty_playground_says_there_is_nothing_to_parse():
    at = page(use_corpus(start(), QWEN3), "playground")
    at.text_area(key="in_output").input("").run()
    assert any("Nothing to parse" in i.value for i in at.info)
    assert not json_views(at)                                     # no {"content": ""} posing as a parse result


def test_failed_analysis_shows_no_route_above_nothing():
    at = start()
    digest = at.session_state["template"].digest
    at.session_state["overrides"] = {digest: {"reasoning.bogus": "x"}}
    at = page(at, "overview")
    assert any("reasoning.bogus" in e for e in errors(at))
    assert not any("Route" in unmd(s.value) for s in at.success)


def test_upload_with_a_syntax_error_is_refused():
    from core.errors import TemplateSyntaxError
    from explorer import state

    with pytest.raises(TemplateSyntaxError, match="line 1"):
        state.load_upload(b"{% if messages %}never closed", "broken.jinja")
    assert state.load_upload(b"{{ messages[0].content }}", "ok.jinja").name == "ok.jinja"


def test_app_analysis_budget_is_short_unless_the_operator_sets_one(monkeypatch):
    """A template that hits the render time limit costs a visitor ≤ 3 s once (issue 9): the app's analyses get a
    2.5 s budget; an operator's CTE_ANALYSIS_BUDGET_S wins (None: the analyzer reads the variable)."""
    from explorer import state

    monkeypatch.delenv("CTE_ANALYSIS_BUDGET_S", raising=False)
    assert state.app_analysis_budget() == 2.5
    monkeypatch.setenv("CTE_ANALYSIS_BUDGET_S", "10")
    assert state.app_analysis_budget() is None


def test_the_banner_cuts_a_long_override_value_and_names_its_length():
    """A link's ``ov`` may carry a marker of thousands of characters; the banner on every page drew all of them."""
    from explorer.components.provenance import provenance_lines

    [line] = provenance_lines({"reasoning.start": "x" * 10_000, "reasoning.end": "</think>\u202e"}, [], "llama.cpp")
    assert line.startswith('Overrides active (2): reasoning.start = "' + "x" * 60 + '…" (10,000 characters), '
                           'reasoning.end = "</think>\\u202e".'), line
    assert len(line) < 250
