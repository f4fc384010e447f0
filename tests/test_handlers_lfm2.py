"""LFM2 / LFM2.5 special handler: which template is which generation. The reference cases and the fuzz check
run in test_handlers_families.py."""

from __future__ import annotations

from core.chat.formats import detect_family, lfm2
from core.jinja.template import ChatTemplate

from .conftest import template_source

TEMPLATES = ["LFM2-8B-A1B.jinja", "LFM2.5-Instruct.jinja", "LFM2.5-8B-A1B.jinja"]


def test_detect():
    assert detect_family(ChatTemplate(template_source("LFM2-8B-A1B.jinja")).normalized_source).name == "lfm2"
    for name in TEMPLATES[1:]:
        assert detect_family(ChatTemplate(template_source(name)).normalized_source).name == "lfm2.5"
    assert detect_family(ChatTemplate(template_source("Qwen3-Coder.jinja")).normalized_source).module != "lfm2"
