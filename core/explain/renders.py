"""The template's own render of an assistant turn that calls a tool, in both Jinja dialects.

The nearest-output search and the triage compare the model's output with what the template writes for the same
call; a template may refuse one dialect (``list.append`` works only in llama.cpp's) or one call-id shape (Mistral's
want nine digits), so each render is tried in order and the first that renders wins.
"""

from __future__ import annotations

from typing import Any, Callable

from ..jinja.llama import render as _llama_render
from ..jinja.template import apply_template, chat_globals
from .model import Setup as _Setup
from .model import WS as _WS


def _renderers(setup: _Setup) -> tuple[Callable[[list[dict[str, Any]], bool], str], ...]:
    """The template's render of ``(messages, add_generation_prompt)`` with the request's tools, in the transformers
    dialect, then in llama.cpp's (``list.append`` works there): a turn one refuses may render in the other."""
    tools = list(setup.request.tools or [])
    return (lambda messages, gen: apply_template(setup.template, messages, tools, add_generation_prompt=gen),
            lambda messages, gen: _llama_render(setup.template, chat_globals(messages, tools, gen),
                                                template_tracebacks=False))


def _rendered_call(setup: _Setup, name: str, args: dict[str, str], copies: int = 1) -> str:
    """The text the template renders for an assistant turn holding one call of ``name`` with ``args`` (after
    what a user turn with the generation prompt renders), or ``""`` when it does not render. Tried in the
    transformers dialect, then in llama.cpp's (``list.append`` works there); with the call id ``call_1``, then a
    nine-digit one (Mistral's templates refuse any other). ``copies``: that many calls in the turn."""
    return _rendered_turns(setup, name, args, copies, plain=False)[0]


def _rendered_turns(setup: _Setup, name: str, args: dict[str, Any], copies: int = 1, plain: bool = True
                    ) -> tuple[str, str | None, str]:
    """:func:`_rendered_call`'s turn and, with ``plain``, rendered the same way, the assistant turn with empty
    content and no call (None when it does not render or without ``plain``; ``""`` when it writes nothing after
    the generation prompt), and the call turn with reasoning (``""`` when it does not render or without
    ``plain``)."""
    user = [{"role": "user", "content": "hi"}]

    def after(a: str, b: str) -> str:
        k = 0
        while k < min(len(a), len(b)) and a[k] == b[k]:
            k += 1
        while k > 0 and b[k - 1] not in _WS + ">]":     # not inside a marker the two renders begin alike
            k -= 1
        return b[k:]

    for render in _renderers(setup):
        for call_id in ("call_1", "123456789"):
            turn = user + [{"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "id": call_id if not i else f"{call_id}{i}",
                 "function": {"name": name, "arguments": args}} for i in range(copies)]}]
            try:
                a, b = render(user, True), render(turn, False)
            except Exception:  # noqa: BLE001 - this dialect or id does not render the turn: the next one
                continue
            c: str | None = None
            d = ""
            if plain:
                try:
                    c = render(user + [{"role": "assistant", "content": ""}], False)
                except Exception:  # noqa: BLE001 - a template that wants a call or text in every turn: no plain turn
                    c = None
                try:
                    d = render(user + [dict(turn[-1], reasoning_content="r")], False)
                except Exception:  # noqa: BLE001 - a template that refuses reasoning on a call turn: none
                    d = ""
            return after(a, b), after(a, c) if c is not None else None, after(a, d) if d else ""
    return "", None, ""
