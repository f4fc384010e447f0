"""LFM2 / LFM2.5 special handler: which template is which generation. The reference cases and the fuzz check
run in test_handlers_families.py."""

from __future__ import annotations

from core.chat.handlers import lfm2
from core.templating import ChatTemplate

from .conftest import template_source

TEMPLATES = ["LFM2-8B-A1B.jinja", "LFM2.5-Instruct.jinja", "LFM2.5-8B-A1B.jinja"]


def test_detect():
    assert lfm2.is_lfm2(ChatTemplate(template_source("LFM2-8B-A1B.jinja")).normalized_source)
    for name in TEMPLATES[1:]:
        src = ChatTemplate(template_source(name)).normalized_source
        assert lfm2.is_lfm25(src) and not lfm2.is_lfm2(src)
    assert not lfm2.detect(ChatTemplate(template_source("Qwen3-Coder.jinja")).normalized_source)
