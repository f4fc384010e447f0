"""TranslateGemma (llama.cpp b11549 ``common/parsers/translate-gemma.cpp``).

The template only takes user content in its own schema: a list holding one text part that carries
``source_lang_code`` and ``target_lang_code`` (a plain string raises). The handler rewrites every user message
to that shape — string content as is, a list of parts as their texts joined by newlines — with the language
codes from ``chat_template_kwargs`` (``en-GB`` when a code is not given). No tools, no reasoning: the whole
output is content. Detected by ``[source_lang_code]`` and ``[target_lang_code]`` in the source.
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ..prompt import generation_prompt as compute_generation_prompt, render_prompt
from ._peg_handler import make_parser, prepared_for

NAME = "translate-gemma"
MODEL_TURN = "<start_of_turn>model\n"
DEFAULT_LANG = "en-GB"


def detect(src: str) -> bool:
    """``[source_lang_code]`` and ``[target_lang_code]`` in the source."""
    return "[source_lang_code]" in src and "[target_lang_code]" in src


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    text = ""
    if isinstance(content, list):
        for part in content:
            if text:
                text += "\n"
            piece = part.get("text", "") if isinstance(part, dict) else ""
            text += piece if isinstance(piece, str) else ""
    return text


def translation_messages(messages: list[dict[str, Any]], source_lang: str, target_lang: str) -> list[dict]:
    """``messages`` with every user message's content as the template's one text part carrying the codes."""
    out = []
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user":
            m = dict(m, content=[{"type": "text", "text": _text_of(m.get("content")),
                                  "source_lang_code": source_lang, "target_lang_code": target_lang}])
        out.append(m)
    return out


def _lang(extra: dict[str, Any], key: str) -> str:
    value = extra.get(key, DEFAULT_LANG)
    return value if isinstance(value, str) else DEFAULT_LANG


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser and prompt for a TranslateGemma template (see module doc)."""
    prep = prepared_for(template, request, prepared)
    extra = prep.extra_context
    notes = [f"TranslateGemma: {key} not set in chat_template_kwargs, defaulting to {DEFAULT_LANG}"
             for key in ("source_lang_code", "target_lang_code") if key not in extra]
    msgs = translation_messages(prep.messages, _lang(extra, "source_lang_code"), _lang(extra, "target_lang_code"))
    prompt = render_prompt(prep, messages_override=msgs)
    gp = compute_generation_prompt(prep, messages_override=msgs)
    parser_gp = gp
    if prep.has_continuation:
        gp = MODEL_TURN + prep.continue_content
        prompt += gp

    arena = build_chat_peg_parser(lambda p: p.literal(gp) << p.content(p.rest()))
    return make_parser(NAME, arena, generation_prompt=gp, parser_generation_prompt=parser_gp, prompt=prompt,
                       notes=notes)


__all__ = ["NAME", "detect", "build", "translation_messages"]
