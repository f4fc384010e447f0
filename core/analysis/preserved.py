"""Preserved tokens: the trimmed, non-empty markers the tokenizer must keep whole (analysis notes §12)."""

from __future__ import annotations

from ..diff import trim
from .result import TemplateAnalysis

MARKER_FIELDS = (
    "reasoning.start", "reasoning.end", "content.start", "content.end",
    "tools.format.section_start", "tools.format.section_end",
    "tools.format.per_call_start", "tools.format.per_call_end",
    "tools.function.name_prefix", "tools.function.name_suffix", "tools.function.args_separator",
    "tools.function.close",
    "tools.arguments.start", "tools.arguments.end", "tools.arguments.name_prefix", "tools.arguments.name_suffix",
    "tools.arguments.separator", "tools.arguments.value_prefix", "tools.arguments.value_suffix",
    "tools.call_id.prefix", "tools.call_id.suffix",
)
"""Marker fields in the order llama.cpp's ``collect_preserved_tokens`` visits them."""


def get_path(obj: object, path: str) -> object:
    """The value at dotted attribute ``path`` (``"tools.format.section_start"``); ``AttributeError`` if absent."""
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def collect_preserved_tokens(a: TemplateAnalysis) -> list[str]:
    """``trim(marker)`` for each marker field, in order, skipping empty values and duplicates."""
    out: list[str] = []
    for path in MARKER_FIELDS:
        tok = trim(str(get_path(a, path)))
        if tok and tok not in out:
            out.append(tok)
    return out
