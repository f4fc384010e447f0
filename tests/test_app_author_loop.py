"""The author's loop (AppTest): an edit survives a reload together with the source it started from (Revert works,
Compare finds it), Compare takes any source on either side and shows the source diff, an empty template gets a
message, a syntax error names the open block, and the Edit page renders a conversation as the text is edited."""

from __future__ import annotations

import pytest

from .test_app_edit import _button, _qp, cache_dir, start_with  # noqa: F401 - fixture
from .test_app_helpers import errors, metrics, page, start, unmd


def _edit(at, text):
    at.text_area(key="in_edit_source").input(text).run()
    _button(at, "Analyse").click().run()
    return at


def test_reload_keeps_the_original_and_the_edit(cache_dir):  # noqa: F811 - fixture
    at = page(start(), "edit")
    src = at.text_area(key="in_edit_source").value
    edited = src.replace("<tool_call>", "<function_call>").replace("</tool_call>", "</function_call>")
    _edit(at, edited)
    assert at.session_state["template"].origin == "edited"
    assert _qp(at, "base") == "bundled:chatml-think-tools.jinja"

    # a reload: a new session from the same URL has the edit and the loaded source
    again = page(start_with({k: _qp(at, k) for k in at.query_params}), "edit")
    assert again.session_state["template"].source == edited
    assert again.session_state["edit_base"].source == src
    # Compare: A is the loaded source, never a bundled example chosen behind the visitor's back, B the edit (the
    # order of `compare OLD NEW`)
    page(again, "compare")
    assert again.radio(key="in_compare_kind_A").value == "Loaded source (before editing)"
    assert again.radio(key="in_compare_kind_B").value == "Current template"
    assert metrics(again)["Parser changes"] == "yes"
    diff = [c.value for c in again.code if c.language == "diff"][0]
    assert "-" in diff and "+{%- macro" not in diff and "<function_call>" in diff and "<tool_call>" in diff
    assert "-            {{- '<tool_call>" in diff and "+            {{- '<function_call>" in diff, diff   # A → B
    # Revert to loaded works after the reload
    page(again, "edit")
    _button(again, "Revert to loaded").click().run()
    assert again.session_state["template"].source == src and again.session_state["template"].origin == "bundled"


def test_compare_either_side_from_any_source(cache_dir):  # noqa: F811 - fixture
    at = page(start(), "compare")
    at.radio(key="in_compare_kind_A").set_value("Bundled example").run()
    at.selectbox(key="in_compare_bundled_A").select("mistral-tool-calls.jinja").run()
    at.radio(key="in_compare_kind_B").set_value("Pasted text").run()
    at.text_area(key="in_compare_text_B").input("   \n").run()
    assert any("only whitespace" in unmd(w.value) for w in at.warning)
    at.radio(key="in_compare_kind_B").set_value("Current template").run()
    assert any("A: mistral-tool-calls.jinja (bundled)" in unmd(m.value) for m in at.markdown)
    assert metrics(at)["Parser changes"] == "yes"


def test_a_side_whose_choice_is_gone_is_said_not_switched(cache_dir):  # noqa: F811 - fixture
    at = page(start(), "edit")
    src = at.text_area(key="in_edit_source").value
    _edit(at, src.replace("<tool_call>", "<call>"))
    page(at, "compare")
    assert at.radio(key="in_compare_kind_A").value == "Loaded source (before editing)"
    page(at, "edit")
    _button(at, "Revert to loaded").click().run()
    page(at, "compare")      # the loaded source is the current template again: A's choice is gone
    assert any("not available now" in unmd(w.value) for w in at.warning), [w.value for w in at.warning]
    assert at.radio(key="in_compare_kind_A").value is None and not at.metric


def test_empty_template_is_refused_with_a_message(cache_dir):  # noqa: F811 - fixture
    at = page(start(), "edit")
    _edit(at, "  \n\t\n")
    assert any("the template is empty" in e for e in errors(at)), errors(at)
    assert at.session_state["template"].origin == "bundled"


def test_syntax_error_names_the_block_left_open(cache_dir):  # noqa: F811 - fixture
    at = page(start(), "edit")
    src = at.text_area(key="in_edit_source").value
    lines = src.splitlines(True)
    k = next(i for i, line in enumerate(lines) if line.strip().startswith("{%- endif"))
    _edit(at, "".join(lines[:k] + lines[k + 1:]))
    assert any("`if` opened at line" in e and ("is never closed" in e or "is not closed before" in e)
               for e in errors(at)), errors(at)


@pytest.mark.parametrize("agp", [True, False])
def test_live_render_follows_the_text_and_the_conversation(cache_dir, agp):  # noqa: F811 - fixture
    at = page(start(), "edit")
    at.toggle(key="in_live_agp").set_value(agp).run()
    body = "".join(h.proto.body for h in at.get("html") if not h.proto.body.startswith("<style>"))  # views only
    # the conversation's last turn, then the generation prompt (<|im_start|>assistant + <think>) only when asked
    assert "tomorrow?" in body and body.rstrip().endswith("</div>")
    tail = body[body.rindex("tomorrow?"):]
    assert ("assistant" in tail and "&lt;think&gt;" in tail) == agp
    at.text_area(key="in_edit_source").input("{% for m in messages %}({{ m.role }}){% endfor %}").run()
    body = "".join(h.proto.body for h in at.get("html") if not h.proto.body.startswith("<style>"))  # views only
    assert "(system)(user)(assistant)(tool)(assistant)(user)" in body
    at.text_area(key="in_edit_source").input("{% for m in messages %}{{ m.role }}").run()
    assert any("`for` opened at line 1 is never closed" in e for e in errors(at)), errors(at)


def test_compare_shows_where_renders_differ_when_both_diffs_split_alike(cache_dir):  # noqa: F811 - fixture
    # Functionary v3.1 and llama.cpp's `| tojson` edit of it: T7 splits alike on both sides (left «» right «»), so
    # its two diffs showed nothing of the change; the prefix where the renders differ is shown first
    from .conftest import TEMPLATES

    at = page(start(), "compare")
    for side, name in (("A", "meetkai-functionary-medium-v3.1.jinja"),
                       ("B", "meetkai-functionary-medium-v3.1.llamacpp-edit.jinja")):
        at.radio(key=f"in_compare_kind_{side}").set_value("Pasted text").run()
        at.text_area(key=f"in_compare_text_{side}").input((TEMPLATES / name).read_text(encoding="utf-8")).run()
    assert not errors(at)
    assert any(c.value == "The same diff on both sides: the renders differ in the text around it." for c in at.caption)
    shown = [c.value for c in at.code]
    assert any("{'AA_ARG_FST_AA': 'XXXX'" in v for v in shown) and any('{"AA_ARG_FST_AA": "XXXX"' in v for v in shown)
