"""Hand-written handlers against llama.cpp's reference cases, one table for every family that has them: the
family is detected on its templates (and not on a neighbour's), every reference case passes (final message +
char-by-char streaming, see ``handler_checks.check_reference_case``) with the expected number of cases, and
mutated outputs never make parsing raise. Family-specific tests stay in ``test_handlers_<family>.py``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import pytest

from core.chat.formats import detect_family
from core.jinja.template import ChatTemplate

from .conftest import template_source
from .handler_checks import check_reference_case, fuzz_problems


@dataclass(frozen=True)
class Family:
    module: str  # core.chat.formats.<module>
    templates: tuple[str, ...]  # the family's templates in shared/templates
    cases: int  # reference cases on those templates
    not_detected: str | None = "Qwen3-Coder.jinja"  # a template the family must not claim (None: own test)
    trials: int = 4  # fuzz mutations per reference case


FAMILIES = [
    Family("kimi_k2", ("Kimi-K2-Instruct.jinja", "moonshotai-Kimi-K2.llamacpp-edit.jinja"), 6),
    Family("kimi_k3", ("Kimi-K3.jinja",), 9),
    Family("ling3", ("inclusionai-ling-3.0-flash.jinja",), 21),
    Family("minicpm5", ("openbmb-MiniCPM5-1B.jinja",), 8),
    Family("minimax_m3", ("MiniMax-M3.jinja",), 21, not_detected="MiniMax-M2.jinja"),
    Family("muse_glimmer", ("muse-glimmer.jinja", "vllm-tool_chat_template_muse_glimmer.jinja"), 7),  # all on the first
    Family("lfm2", ("LFM2-8B-A1B.jinja", "LFM2.5-Instruct.jinja", "LFM2.5-8B-A1B.jinja"), 55, not_detected=None),
    Family("gemma4", ("google-gemma-4-31B-it.jinja",), 28),
]


def _handler(fam: Family):
    return importlib.import_module(f"core.chat.formats.{fam.module}")


def _family_cases(reference_cases, fam: Family):
    return [c for c in reference_cases if c["template"] in fam.templates]


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.not_detected], ids=lambda f: f.module)
def test_detect(fam):
    for name in fam.templates:
        assert detect_family(ChatTemplate(template_source(name)).normalized_source).module == fam.module, name
    other = detect_family(ChatTemplate(template_source(fam.not_detected)).normalized_source)
    assert other is None or other.module != fam.module


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.module)
def test_reference_cases(reference_cases, fam):
    handler = _handler(fam)
    cases = _family_cases(reference_cases, fam)
    fails = []
    for case in cases:
        tmpl = ChatTemplate(template_source(case["template"]), case["template"])
        why = check_reference_case(handler, tmpl, case)
        if why:
            fails.append(f"{case['id']}: {why}")
    assert len(cases) == fam.cases
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("fam", FAMILIES, ids=lambda f: f.module)
def test_garbage_never_raises(reference_cases, fam):
    """Mutated outputs (deleted characters, stray markers and punctuation, any cut) never make parsing raise,
    and the streaming session agrees with one-shot parses."""
    handler = _handler(fam)
    problems = []
    for case in _family_cases(reference_cases, fam):
        tmpl = ChatTemplate(template_source(case["template"]), case["template"])
        problems += fuzz_problems(handler, tmpl, case, trials=fam.trials)
    assert not problems, "\n".join(problems[:10])
