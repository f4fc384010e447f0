"""Kimi K3 special handler against llama.cpp's reference cases (final message + char-by-char streaming)."""

from __future__ import annotations

from core.chat.handlers import _common as C
from core.chat.handlers import kimi_k3
from core.templating import ChatTemplate

from .conftest import template_source

TEMPLATES = ['Kimi-K3.jinja']


def test_detect():
    for name in TEMPLATES:
        assert kimi_k3.detect(ChatTemplate(template_source(name)).normalized_source), name
    assert not kimi_k3.detect(ChatTemplate(template_source('Qwen3-Coder.jinja')).normalized_source)


def test_reference_cases(reference_cases):
    cases = [c for c in reference_cases if c["template"] in TEMPLATES]
    fails = []
    for case in cases:
        tmpl = ChatTemplate(template_source(case["template"]), case["template"])
        why = C.check_reference_case(kimi_k3, tmpl, case)
        if why:
            fails.append(f"{case['id']}: {why}")
    assert len(cases) == 9
    assert not fails, "\n".join(fails)


def test_garbage_never_raises(reference_cases):
    """Mutated outputs (deleted characters, stray markers and punctuation, any cut) never make parsing raise,
    and the streaming session agrees with one-shot parses."""
    problems = []
    for case in reference_cases:
        if case["template"] in TEMPLATES:
            tmpl = ChatTemplate(template_source(case["template"]), case["template"])
            problems += C.fuzz_problems(kimi_k3, tmpl, case, trials=4)
    assert not problems, "\n".join(problems[:10])
