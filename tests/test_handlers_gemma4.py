"""Gemma 4 special handler against llama.cpp's reference cases (final message + char-by-char streaming)."""

from __future__ import annotations

from core.chat.handlers import _common as C
from core.chat.handlers import gemma4
from core.templating import ChatTemplate

from .conftest import template_source

TEMPLATES = ["google-gemma-4-31B-it.jinja"]


def _failures(reference_cases, handler, templates):
    fails, n = [], 0
    for case in reference_cases:
        if case["template"] not in templates:
            continue
        n += 1
        tmpl = ChatTemplate(template_source(case["template"]), case["template"])
        why = C.check_reference_case(handler, tmpl, case)
        if why:
            fails.append(f"{case['id']}: {why}")
    return n, fails


def test_detect():
    src = ChatTemplate(template_source(TEMPLATES[0])).normalized_source
    assert gemma4.detect(src)
    assert not gemma4.detect(ChatTemplate(template_source("Qwen3-Coder.jinja")).normalized_source)


def test_reference_cases(reference_cases):
    n, fails = _failures(reference_cases, gemma4, TEMPLATES)
    assert n == 28
    assert not fails, "\n".join(fails)


def test_garbage_never_raises(reference_cases):
    """Mutated outputs (deleted characters, stray markers and punctuation, any cut) never make parsing raise,
    and the streaming session agrees with one-shot parses."""
    problems = []
    for case in reference_cases:
        if case["template"] in TEMPLATES:
            tmpl = ChatTemplate(template_source(case["template"]), case["template"])
            problems += C.fuzz_problems(gemma4, tmpl, case, trials=4)
    assert not problems, "\n".join(problems[:10])
