"""The generation prompt: what ``add_generation_prompt`` appends (analysis notes §14).

Follows llama.cpp ``common_chat_template_generation_prompt``: render the same inputs without and with
``add_generation_prompt``; the generation prompt is the second render after their character-level longest
common prefix ("" when the template ignores the flag; everything from the first difference when the flag
changes something earlier).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from ..jinja import llama as _llama
from ..jinja.hf import now as _clock_now
from ..diff import common_prefix_len
from ..jinja.template import ChatTemplate, apply_template, chat_globals


def request_extra_context(now: _dt.datetime | None = None) -> dict[str, str]:
    """The extra context llama.cpp's request path adds: ``datetime`` ("%b %d %Y") and ``date_string``
    ("%d %b %Y"), from ``now`` or else the templating clock (:func:`core.jinja.hf.now`, pinnable)."""
    now = now or _clock_now()
    return {"datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}


def generation_prompt(template: ChatTemplate, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      enable_thinking: bool = True, extra_context: dict[str, Any] | None = None,
                      bos_token: str = "", eos_token: str = "", llama_engine: bool = True) -> str:
    """Tail that ``add_generation_prompt`` adds to the render of ``messages`` (already normalised for the
    template's caps) with ``tools``. Renders as llama.cpp's engine does (:mod:`core.jinja.llama`),
    or, with ``llama_engine=False``, with the project's transformers-like rendering.

    Raises :class:`~core.errors.TemplateRenderError` when either render fails.
    """
    def render(agp: bool) -> str:
        if not llama_engine:
            return apply_template(template, messages, tools, agp, enable_thinking, extra_context=extra_context,
                                  bos_token=bos_token, eos_token=eos_token)
        return _llama.render(template, chat_globals(messages, tools, agp, enable_thinking, extra_context,
                                                    bos_token, eos_token))

    without = render(False)
    with_gp = render(True)
    return with_gp[common_prefix_len(without, with_gp):]
