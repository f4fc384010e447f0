"""Sources page: bundled examples (offline default), a local folder of real templates, pasted text; and
untrusted template text (``<script>``, HTML) shown as text on every page, never interpreted."""

from __future__ import annotations

import re

import pytest

from .test_app_helpers import errors, html_bodies, html_texts, metrics, page, start, unmd
from .conftest import TEMPLATES


def _click(at, label):
    [b for b in at.button if b.label == label][0].click().run()
    assert not at.exception, at.exception
    return at


def test_bundled_examples_listed_and_loaded():
    at = page(start(), "sources")
    names = at.selectbox(key="in_bundled_name").options
    assert {"chatml-think-tools.jinja", "llama3-json-tools.jinja", "mistral-tool-calls.jinja",
            "xml-function-tags.jinja", "unicode-block-markers.jinja", "plain-chat.jinja"} <= set(names)
    at.selectbox(key="in_bundled_name").select("xml-function-tags.jinja").run()
    _click(at, "Use this example")
    assert any("Loaded xml-function-tags.jinja" in unmd(s.value) for s in at.success)
    at = page(at, "overview")
    assert metrics(at) == {"Reasoning": "NONE", "Content": "PLAIN", "Tool calls": "TAG_WITH_TAGGED"}


def test_sidebar_quick_switch_between_bundled():
    at = start()
    at.selectbox(key="in_quick_bundled").select("mistral-tool-calls.jinja").run()
    at = page(at, "overview")
    assert "mistral-tool-calls.jinja" in unmd(at.markdown[0].value)
    assert metrics(at)["Tool calls"] == "TAG_WITH_JSON"


@pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")
def test_local_folder_lists_and_loads_real_templates(monkeypatch):
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(TEMPLATES))  # server folders are off unless the operator allows some
    at = page(start(), "sources")
    at.radio(key="in_source_kind").set_value("Local folder").run()
    assert at.text_input(key="in_folder").value == str(TEMPLATES)
    files = at.selectbox(key="in_folder_file").options
    assert "Qwen-Qwen3-0.6B.jinja" in files and len(files) >= 300
    at.selectbox(key="in_folder_file").select("meta-llama-Llama-3.2-3B-Instruct.jinja").run()
    _click(at, "Load")
    at = page(at, "overview")
    assert metrics(at) == {"Reasoning": "NONE", "Content": "PLAIN", "Tool calls": "JSON_NATIVE"}


def test_missing_folder_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(tmp_path))
    at = page(start(), "sources")
    at.radio(key="in_source_kind").set_value("Local folder").run()
    at.text_input(key="in_folder").input(str(tmp_path / "nope")).run()
    assert not at.exception
    assert any("is not a folder" in e for e in errors(at))


def test_pasted_syntax_error_is_reported_and_text_kept():
    at = page(start(), "sources")
    at.radio(key="in_source_kind").set_value("Paste text").run()
    at.text_area(key="in_paste_text").input("{% if x %}unclosed").run()
    _click(at, "Use this text")
    errs = errors(at)
    assert errs and "syntax error" in errs[0]
    assert at.text_area(key="in_paste_text").value == "{% if x %}unclosed"  # nothing typed is lost
    # the input survives a trip to another page and back
    at = page(page(at, "overview"), "sources")
    assert at.text_area(key="in_paste_text").value == "{% if x %}unclosed"


HOSTILE = """{#- <script>alert('template')</script> <img src=x onerror=alert(1)> -#}
{%- for m in messages -%}
<script>{{ m.role }}</script><b>{{ m.content }}</b>{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}
{%- endfor -%}
{%- if add_generation_prompt -%}<iframe src="javascript:alert(2)">{%- endif -%}
"""
RAW_TAG = re.compile(r"<(script|img|iframe|b)[\s>]", re.I)


def _assert_no_raw_html(at):
    for body in html_bodies(at):
        # our own markup uses only div/span/table/td/tr/b-with-style/i/pre; template text must be escaped
        assert not re.search(r"<(script|img|iframe)\b", body, re.I), body[:500]
        assert "<b>" not in body
    for m in at.markdown:
        assert not RAW_TAG.search(m.value), m.value


def test_template_with_script_and_html_is_shown_as_text():
    at = page(start(), "sources")
    at.radio(key="in_source_kind").set_value("Paste text").run()
    at.text_input(key="in_paste_name").input("<b>evil</b>.jinja").run()
    at.text_area(key="in_paste_text").input(HOSTILE).run()
    _click(at, "Use this text")
    assert not errors(at)

    at = page(at, "overview")
    _assert_no_raw_html(at)
    assert "<b>evil</b>.jinja" in unmd(at.markdown[0].value)            # the name reads as typed…
    assert "\\<b:color[]\\>" in at.markdown[0].value                     # …because it was escaped
    assert metrics(at)["Reasoning"] == "TAG_BASED"                       # <think> around reasoning found
    assert any('<iframe src="javascript:alert(2)">' in t for t in html_texts(at))  # generation prompt, as text
    at.session_state["ov_tab"] = "Template source"                     # the source tab is drawn when opened
    at.run()
    _assert_no_raw_html(at)
    source_views = [b for b in html_bodies(at) if 'class="cte-code"' in b]
    assert source_views and "&lt;script&gt;" in source_views[0] and "&lt;img src=x" in source_views[0]

    at = page(at, "comparisons")
    _assert_no_raw_html(at)
    for label in [e.label for e in at.expander if ":" in e.label]:      # a comparison is drawn when opened
        at.session_state[f"cmp_open_{unmd(label).split(':')[0]}"] = True
    at.run()
    _assert_no_raw_html(at)
    texts = "\n".join(html_texts(at))
    assert "<script>assistant</script>" in texts and "&lt;script&gt;" in "".join(html_bodies(at))
