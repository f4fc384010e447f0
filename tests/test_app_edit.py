"""Edit, Lint, Compare pages and the Corpus lint columns (issue 12), with Streamlit's AppTest."""

from __future__ import annotations

import shutil

import pytest

from .conftest import TEMPLATES
from .test_app_helpers import errors, frame_with, metrics, page, start, unmd, use_corpus

BROKEN = "{%- for message in messages %}\n{{ message.content }\n{%- endfor %}"


def _qp(at, key):
    v = at.query_params[key]
    return v if isinstance(v, str) else v[0]


def _button(at, label):
    return [b for b in at.button if b.label == label][0]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_edit_syntax_error_keeps_analysis_then_marker_change_changes_parser(cache_dir):
    at = page(start(), "edit")
    src = at.text_area(key="in_edit_source").value
    assert "<tool_call>" in src
    markers = frame_with(at, "field").set_index("field")
    assert markers.loc["tools.format.per_call_start", "trimmed"] == "<tool_call>"

    # a syntax error: shown at its line, the previous analysis kept, the edit kept
    broken = src.replace("{%- endmacro -%}", "{%- endmacro -%", 1)
    at.text_area(key="in_edit_source").input(broken).run()
    _button(at, "Analyse").click().run()
    errs = errors(at)
    assert errs and errs[0].startswith("Syntax error at line 7, column 14"), errs
    assert any("7 | {%- endmacro -%" in c.value for c in at.code)
    assert at.session_state["template"].origin == "bundled"
    assert frame_with(at, "field").set_index("field").loc["tools.format.per_call_start", "trimmed"] == "<tool_call>"
    assert at.text_area(key="in_edit_source").value == broken
    assert "draft" in at.query_params

    # fixed, and a marker changed: the analysis and the parser follow
    edited = src.replace("<tool_call>", "<function_call>").replace("</tool_call>", "</function_call>")
    at.text_area(key="in_edit_source").input(edited).run()
    _button(at, "Analyse").click().run()
    assert not errors(at)
    cur = at.session_state["template"]
    assert cur.origin == "edited" and cur.source == edited
    markers = frame_with(at, "field").set_index("field")
    assert markers.loc["tools.format.per_call_start", "trimmed"] == "<function_call>"
    triggers = list(frame_with(at, "trigger")["trigger"])
    assert any("<function_call>" in t for t in triggers) and not any("<tool_call>" in t for t in triggers)
    assert any("+{{- '<function_call>" in c.value.replace("\n", "") or "<function_call>" in c.value
               for c in at.code if c.language == "diff")
    assert _qp(at, "src").startswith("text:")

    # other pages see the edited template; a reload (new session, same URL) finds the edit
    page(at, "overview")
    assert not at.exception
    url = {k: _qp(at, k) for k in at.query_params}
    again = start_with(url)
    assert again.session_state["template"].source == edited
    assert again.session_state["template"].origin == "edited"


def start_with(params: dict[str, str]):
    from streamlit.testing.v1 import AppTest

    from .test_app_helpers import APP, TIMEOUT

    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, at.exception
    return at


def test_edit_parser_tokens_show_invisible_characters_as_escapes(cache_dir):
    at = page(start(), "edit")
    src = at.text_area(key="in_edit_source").value
    at.text_area(key="in_edit_source").input(src.replace("tool_call>", "tool\u200b_call\u202e>")).run()
    _button(at, "Analyse").click().run()
    assert not errors(at)
    triggers = list(frame_with(at, "trigger")["trigger"])
    tokens = [c.value for c in at.code if "<think>" in c.value and "</think>" in c.value and "\n" not in c.value]
    assert any("<tool\\u200b_call\\u202e>" in t for t in triggers), triggers
    assert tokens and "</tool\\u200b_call\\u202e>" in tokens[0], tokens
    assert not any(ch in t for t in triggers + tokens for ch in "\u200b\u202e")


def test_url_state_bundled_fidelity_overrides(cache_dir):
    at = start_with({"src": "bundled:mistral-tool-calls.jinja", "fidelity": "improved",
                     "ov": '{"reasoning.start": "<x>"}'})
    cur = at.session_state["template"]
    assert cur.name == "mistral-tool-calls.jinja" and at.session_state["fidelity"] == "improved"
    assert at.session_state["overrides"][cur.digest] == {"reasoning.start": "<x>"}
    bad = start_with({"src": "text:0123456789abcdef"})
    assert bad.session_state["template"].origin == "bundled"  # unknown digest: the default, and a message
    assert any("does not keep" in e for e in errors(bad))


def test_edit_render_error_shows_line(cache_dir):
    at = page(start(), "edit")
    at.text_area(key="in_edit_source").input("{% for m in messages %}\n{{ m.content.nope() }}\n{% endfor %}").run()
    _button(at, "Analyse").click().run()
    errs = errors(at)
    # the analysis says where, once: the live render beside the editor points to it instead of repeating it
    assert len(errs) == 1 and errs[0].startswith("Render error at line 2"), errs
    assert any("the error Analyse found" in c.value for c in at.caption)
    assert at.session_state["template"].origin == "bundled"


def test_an_oversized_edit_shows_its_render_error_once(cache_dir):
    """A template over the compile size limit: the live render and Analyse both stop at it, and the page showed
    the same "Render error" twice."""
    from core.jinja.limits import MAX_SOURCE_CHARS

    at = page(start(), "edit")
    big = "{{ messages[0].content }}" + "x" * MAX_SOURCE_CHARS
    at.text_area(key="in_edit_source").input(big).run()
    errs = errors(at)
    assert len(errs) == 1 and f"above {MAX_SOURCE_CHARS}" in errs[0], errs   # before Analyse: the live render
    _button(at, "Analyse").click().run()
    errs = errors(at)
    assert len(errs) == 1 and errs[0].startswith(f"Render error: template source of {len(big)} characters"), errs
    assert at.session_state["template"].origin == "bundled"


@pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")
def test_lint_page_and_suppression():
    at = use_corpus(start(), "Qwen-QwQ-32B.jinja")
    page(at, "lint")
    ids = set(frame_with(at, "hint")["id"])
    assert "prefix/generation-prompt" in ids and "roundtrip/standard/drops-reasoning" in ids
    assert metrics(at)["roundtrip"] == "5"  # 3 messages drop reasoning; 2 carry call ids QwQ does not render
    # every kind's metric says in plain words what it checks
    from core.lint.model import Kind

    tips = {m.label: m.proto.help for m in at.metric}
    assert {k.value for k in Kind} <= set(tips) and all(tips[k.value] for k in Kind), tips
    at.text_input(key="in_lint_suppress").input("render/* prefix/*").run()
    ids = set(frame_with(at, "hint")["id"])
    assert not any(i.startswith(("render/", "prefix/")) for i in ids)


@pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")
def test_compare_page_r7b_revisions(monkeypatch):
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(TEMPLATES))  # a server path in Compare needs an allowed folder
    at = use_corpus(start(), "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja")
    page(at, "compare")
    at.radio(key="in_compare_kind_B").set_value("Hub repo (or server file)").run()
    at.toggle(key="in_compare_lint").set_value(False).run()
    at.text_input(key="in_compare_spec_B").input(
        str(TEMPLATES / "CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja")).run()
    assert metrics(at)["Parser changes"] == "yes"
    fields = frame_with(at, "changes the parser").set_index("field")
    assert fields.loc["analysis.reasoning.mode", "B"] == '"TOOLS_ONLY"'


@pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")
def test_corpus_lint_columns(tmp_path, monkeypatch):
    # the Corpus page reads a typed folder only inside the operator's roots (server folders are off by default)
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(tmp_path))
    for name in ["gguf-ollama-llama3-8b.jinja", "vllm-tool_chat_template_functiongemma.jinja", "Qwen-QwQ-32B.jinja",
                 "mistral-common-v3.jinja"]:
        shutil.copy(TEMPLATES / name, tmp_path / name)
    at = page(start(), "corpus")
    at.text_input(key="in_corpus_folder").input(str(tmp_path)).run()
    [b for b in at.button if b.label.startswith("Analyse")][0].click().run()
    [b for b in at.button if b.label.startswith("Lint")][0].click().run()
    assert not at.exception
    table = frame_with(at, "lint_errors").set_index("template")
    clean = table.loc["gguf-ollama-llama3-8b.jinja"]
    assert clean["lint_errors"] == 0 and clean["lint_kinds"] == ""
    assert table.loc["vllm-tool_chat_template_functiongemma.jinja", "lint_errors"] > 0
    assert "render/user" in table.loc["vllm-tool_chat_template_functiongemma.jinja", "lint_ids"]
    assert "roundtrip" in table.loc["Qwen-QwQ-32B.jinja", "lint_kinds"]


RUNAWAY = ("{% set ns = namespace(a=0) %}{% for i in range(99999) %}{% for j in range(99999) %}"
           "{% set ns.a = ns.a + 1 %}{% endfor %}{% endfor %}")


def test_an_edit_stopped_at_a_limit_is_named_as_the_edit_not_the_loaded_file(cache_dir, monkeypatch):
    """The engine names a template by its name, which an edit keeps from the loaded file: a worker's limit on the
    edited text read as if the loaded file were at fault."""
    from core import isolation

    monkeypatch.setattr(isolation, "DEFAULT_TIMEOUT_S", 1.0)   # the worker stops the runaway edit after 1 s
    at = page(start(), "edit")
    loaded = at.session_state["template"].name
    at.text_area(key="in_edit_source").input(RUNAWAY).run()     # the live render beside the editor
    _button(at, "Analyse").click().run()                        # the check before the analysis
    errs = errors(at)
    named = [e for e in errs if f"the edited template (from {loaded})" in e]
    assert len(named) == 2, errs
    assert not any(f"template {loaded!r}" in e for e in errs), errs
    assert at.session_state["template"].origin == "bundled"
