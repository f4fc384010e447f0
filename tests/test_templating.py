"""Rendering matches transformers' configuration and llama.cpp's prompts on real templates."""

from __future__ import annotations

import json

import pytest

from core.errors import RenderLimitError, TemplateRenderError, TemplateSyntaxError
from core.jinja.template import ChatTemplate, apply_template

from .conftest import ROOT, SHARED, template_source


def test_renders_reference_prompts_byte_for_byte(reference_analysis):
    tools = json.loads((SHARED / "tools" / "oracle" / "tools.json").read_text())
    same = total = 0
    for name, row in reference_analysis.items():
        if "apply" not in row:
            continue
        total += 1
        try:
            out = apply_template(ChatTemplate(template_source(name), name),
                                 [{"role": "user", "content": "Hello"}], tools, add_generation_prompt=True)
        except Exception:
            continue
        same += out == row["apply"]["prompt"]
    assert total > 300
    assert same / total >= 0.95, f"{same}/{total} prompts identical"


def test_tojson_is_transformers_style():
    t = ChatTemplate("{{ x | tojson }}|{{ x | tojson(indent=2) }}")
    assert t.render({"x": {"b": "é<", "a": 1}}) == '{"b": "é<", "a": 1}|{\n  "b": "é<",\n  "a": 1\n}'


def test_generation_block_renders_body():
    t = ChatTemplate("{% generation %}hi{% endgeneration %}!")
    assert t.render({}) == "hi!"


def test_add_generation_prompt_is_undefined_when_false():
    t = ChatTemplate("{{ 'set' if add_generation_prompt is defined else 'undef' }}")
    assert apply_template(t, [], add_generation_prompt=False) == "undef"
    assert apply_template(t, [], add_generation_prompt=True) == "set"


def test_raise_exception_becomes_render_error():
    t = ChatTemplate("{{ raise_exception('no system role') }}", name="strict.jinja")
    with pytest.raises(TemplateRenderError, match="strict.jinja.*no system role"):
        t.render({})


def test_syntax_error_names_template_and_line():
    with pytest.raises(TemplateSyntaxError, match=r"bad.jinja.*line 2"):
        ChatTemplate("ok\n{% if %}", name="bad.jinja")


def test_nested_range_loop_hits_time_limit():
    t = ChatTemplate("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    with pytest.raises(RenderLimitError, match="longer than"):
        t.render({})


def test_compiled_code_survives_restart(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path))
    prog = "from core.jinja.template import ChatTemplate; print(ChatTemplate('{{ 1 + 2 }}x').render({}))"
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True, cwd=ROOT)
        assert out.stdout.strip() == "3x"
    assert (tmp_path / "jinja" / "code.idx").stat().st_size == 44  # one entry: the second process read it


def test_date_printing_templates_match_reference_whatever_the_wall_clock(reference_analysis, monkeypatch):
    """The reference was rendered on 2026-11-30; with the wall clock moved to another day the pinned clock still
    reproduces it, and with the pin lifted the same template prints the moved day (so the pin is what matters)."""
    import datetime as dt

    from core.jinja import hf as jinja_hf
    from core.jinja.hf import pinned_clock

    from .conftest import REFERENCE_CLOCK

    class _MovedDatetime(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2031, 5, 17, 9, 30, 0)

    class _MovedModule:
        datetime = _MovedDatetime

    monkeypatch.setattr(jinja_hf, "_dt", _MovedModule)
    tools = json.loads((SHARED / "tools" / "oracle" / "tools.json").read_text())
    name = "meta-llama-Llama-3.2-3B-Instruct.jinja"
    tmpl = ChatTemplate(template_source(name), name)
    msgs = [{"role": "user", "content": "Hello"}]
    with pinned_clock(REFERENCE_CLOCK):
        pinned = apply_template(tmpl, msgs, tools, add_generation_prompt=True)
    with pinned_clock(None):
        live = apply_template(tmpl, msgs, tools, add_generation_prompt=True)
    assert "Today Date: 30 Nov 2026" in pinned
    assert pinned == reference_analysis[name]["apply"]["prompt"]
    assert "Today Date: 17 May 2031" in live
