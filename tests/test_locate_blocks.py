"""Syntax errors name the block left open and the line it opened on (core.lint.locate), found by lexing only."""

from __future__ import annotations

from core.lint.locate import check_source, open_blocks

# an {% endif %} deleted at line 5 of a template whose {% if %} opened at line 3
MISSING_ENDIF = ("{%- for message in messages %}\n"
                 "{{- '<|im_start|>' + message.role }}\n"
                 "{%- if message.role == 'user' %}\n"
                 "{{- message.content }}\n"
                 "\n"
                 "{%- endfor %}\n")


def test_missing_endif_names_the_if_and_its_line():
    _, loc = check_source(MISSING_ENDIF, "t.jinja")
    assert loc.kind == "syntax" and loc.line == 6
    assert loc.message.startswith("`if` opened at line 3 is not closed before line 6 (close it with {% endif %}")


def test_end_of_template_names_the_open_block():
    _, loc = check_source("{% for m in messages %}\n{{ m.content }}\n", "t.jinja")
    assert loc.message.startswith("`for` opened at line 1 is never closed (add {% endfor %}")


def test_open_blocks_skips_assignments_and_closed_blocks():
    src = "{% set a = 1 %}\n{% set b %}x{% endset %}\n{% macro m() %}{% endmacro %}\n{% if x %}\n{% for y in z %}"
    assert open_blocks(src) == [("if", 4), ("for", 5)]
    assert open_blocks(src, 5) == [("if", 4)]
