"""The protocol every chat-output parser implements: the auto-parser's generated parser and each special handler.

A parser turns the text a model generated (after the prompt) into an :class:`AssistantMessage`, one-shot or on a
prefix while streaming (``is_partial=True``), and carries the grammar that constrains generation to the same format.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .message import AssistantMessage


class TriggerType(str, enum.Enum):
    """Kinds of lazy-grammar triggers (llama.cpp ``common_grammar_trigger_type``)."""

    TOKEN = "token"
    WORD = "word"
    PATTERN = "pattern"
    PATTERN_FULL = "pattern_full"


@dataclass(frozen=True)
class GrammarTrigger:
    """When a lazy grammar switches on: a word seen in the output, or a regex pattern matching it."""

    type: TriggerType
    value: str

    def to_json(self) -> dict[str, str]:
        """``{"type": "word" | "pattern" | "pattern_full", "value": str}`` (reference field names)."""
        return {"type": self.type.value, "value": self.value}


@runtime_checkable
class ChatOutputParser(Protocol):
    """What the generator and every special handler return.

    ``parse(output, is_partial)``: ``output`` is the model text only (the parser prepends the generation prompt
    itself where the format needs it). Never raises on arbitrary text: unparsable text becomes content.
    With ``is_partial`` the text may be cut anywhere; markers cut at the end are not emitted as content.
    """

    grammar: str | None
    grammar_lazy: bool
    grammar_triggers: list[GrammarTrigger]
    preserved_tokens: list[str]
    additional_stops: list[str]
    generation_prompt: str

    def parse(self, output: str, is_partial: bool = False) -> AssistantMessage:
        """Parse model ``output`` into an :class:`AssistantMessage`; never raises (see the class doc)."""
        ...

    def describe(self) -> str:
        """Readable description of the parser (PEG rules or the handler's name), for display."""
        ...
