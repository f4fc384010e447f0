"""Export page: the response_template beside transformers' verification table; the reason when it cannot."""

from __future__ import annotations

import json
import pathlib

import pytest

from core.export.consumers import TRANSFORMERS_MIN
from core.export.verify import transformers_available

from .conftest import TEMPLATES
from .test_app_helpers import LATER, errors, frame_with, page, settle, start, use_corpus, use_file

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")


@pytest.mark.skipif(not transformers_available(), reason=f"transformers >= {TRANSFORMERS_MIN} not installed")
def test_export_page_shows_template_and_verification():
    at = page(use_corpus(start(), "Qwen-Qwen3-0.6B.jinja"), "export")
    assert not errors(at)
    # the verification (~2 s in a worker) is drawn after the rest of the page: a placeholder first, unless an
    # earlier test of this process verified the same template already
    verified = any("result" in t.value.columns for t in at.table)
    assert at.code and (verified or any(LATER in i.value for i in at.info))
    settle(at)
    rt = json.loads(at.code[0].value)
    assert rt["fields"]["reasoning_content"]["open"] == "<think>"
    table = frame_with(at, "result")
    assert "suite:parallel_calls" in list(table["case"]) and "agrees" in set(table["result"])
    # the headline counts what the table shows (it once said "every check" beside a row that did not agree)
    n_agree, n = int((table["result"] == "agrees").sum()), len(table)
    assert "disagrees" not in set(table["result"])
    assert any(s.value.startswith(f"transformers' parser agrees with ours on {n_agree} of {n} checks")
               for s in at.success), [s.value for s in at.success]


def test_export_page_says_why_not():
    at = page(use_corpus(start(), "Apertus-8B-Instruct.jinja"), "export")
    assert any("cannot be exported" in e and "keyed by the function name" in e for e in errors(at))


def test_app_uses_no_removed_streamlit_width_argument():
    # use_container_width was deprecated for removal after 2025-12-31 (Streamlit logs a warning on every run of
    # the Export page); width="stretch" is its replacement, as the other pages use
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    users = [p.name for p in [root / "app.py", *(root / "explorer").rglob("*.py")]
             if "use_container_width" in p.read_text(encoding="utf-8")]
    assert users == []


def test_the_page_asks_whether_transformers_is_installed_without_importing_it(monkeypatch):
    # the page only decides whether to offer the verification; importing transformers in the server cost a
    # second of CPU on the page's first view (the verification itself imports it in a worker)
    import importlib.util
    import sys

    from core.export import verify

    assert verify.transformers_installed() == transformers_available()
    if "transformers" in sys.modules:  # this process imported it already: the check must not depend on that
        monkeypatch.delitem(sys.modules, "transformers")
    verify.transformers_installed()
    assert "transformers" not in sys.modules
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert verify.transformers_installed() is False


def _bidi_markers_template(tmp_path) -> str:
    # the bundled ChatML template with a zero-width space and a right-to-left override inside its call markers
    src = (pathlib.Path(__file__).parents[1] / "assets/templates/chatml-think-tools.jinja").read_text()
    path = tmp_path / "bidi-markers.jinja"
    path.write_text(src.replace("tool_call>", "tool\u200b_call\u202e>"))
    return str(path)


def test_export_shows_invisible_marker_characters_as_escapes(tmp_path):
    at = page(use_file(start(), _bidi_markers_template(tmp_path)), "export")
    assert not errors(at)
    shown_json, gbnf = at.code[0].value, at.code[-1].value
    rt = json.loads(shown_json)     # still the same JSON: the escapes are JSON's own
    assert rt["fields"]["tool_calls"]["open_pattern"].startswith("<tool\u200b_call\u202e>")
    assert "<tool\\u200b_call\\u202e>" in shown_json and "<tool\\u200b_call\\u202e>" in gbnf
    assert not any(ch in shown_json + gbnf for ch in "\u200b\u202e")


@pytest.mark.skipif(not transformers_available(), reason=f"transformers >= {TRANSFORMERS_MIN} not installed")
def test_a_template_with_nothing_to_check_says_why_and_that_it_is_unverified(tmp_path):
    """DeepSeek R1 distill's template with the `<think>\\n` dropped from its generation prompt (an author's edit):
    its round trip does not parse back and it has no reference case, so no check runs. The page said "No check
    compared the two parsers (see the table)" above an empty table; it now gives the reason and says the
    response_template is unverified, as `export --verify` refuses it."""
    src = (TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.llamacpp-edit.jinja").read_text(encoding="utf-8")
    edited = src.replace("{{'<｜Assistant｜><think>\\n'}}", "{{'<｜Assistant｜>'}}")
    assert edited != src
    path = tmp_path / "r1-no-think-opener.jinja"
    path.write_text(edited, encoding="utf-8")
    at = settle(page(use_file(start(), path), "export"))
    assert not errors(at)
    warned = [w.value for w in at.warning]
    assert any(w.startswith("No check could be run") and "unverified" in w for w in warned), warned
    assert not any("see the table" in w for w in warned)
    assert not any("result" in t.value.columns for t in at.table)
    # and the note beside the response_template says the anchor consumes the opener (it said the prefix opens it)
    captions = [c.value for c in at.caption]
    assert any("also the start\\_anchor" in c or "also the start_anchor" in c for c in captions), captions
