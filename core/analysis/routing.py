"""Which parser llama.cpp uses for a template: a hand-written handler or the auto-parser (notes §14).

Follows ``common_chat_try_specialized_template`` of the llama.cpp that produced the reference data
(llama-cpp-python 0.3.36): handlers are tried in order, the first whose substring test matches the
normalised source wins; anything else goes to the differential auto-parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..templating import normalize_source


@dataclass(frozen=True)
class Route:
    """``kind`` is ``"autoparser"`` or ``"specialized"``; ``handler`` names the special family (or None)."""

    kind: str
    handler: str | None = None

    def to_json(self) -> dict[str, str | None]:
        """``{"kind": str, "handler": str | None}``."""
        return {"kind": self.kind, "handler": self.handler}


def _all(*subs: str) -> Callable[[str], bool]:
    return lambda s: all(x in s for x in subs)


HANDLERS: list[tuple[str, str, Callable[[str], bool]]] = [
    ("ministral-3", "[SYSTEM_PROMPT] and [TOOL_CALLS] and [ARGS], without [CALL_ID]",
     lambda s: "[SYSTEM_PROMPT]" in s and "[TOOL_CALLS]" in s and "[ARGS]" in s and "[CALL_ID]" not in s),
    ("llm-jp-harmony", "chat_format=llm-jp-harmony-v1", _all("chat_format=llm-jp-harmony-v1")),
    ("gpt-oss", "<|channel|>", _all("<|channel|>")),
    ("muse-glimmer", "<atem:function_calls> and <|eom|>", _all("<atem:function_calls>", "<|eom|>")),
    ("functionary-v3.2", ">>>all and >>>${recipient}", _all(">>>all", ">>>${recipient}")),
    ("kimi-k2", "<|tool_calls_section_begin|> and <|tool_call_begin|>",
     _all("<|tool_calls_section_begin|>", "<|tool_call_begin|>")),
    ("kimi-k3", "<|open|> and <|close|> and <|end_of_msg|>", _all("<|open|>", "<|close|>", "<|end_of_msg|>")),
    ("k2-horizon", "<|ifm|im_start|> and <ifm|tool_calls>", _all("<|ifm|im_start|>", "<ifm|tool_calls>")),
    ("ling3", "<role>ASSISTANT</role> and <arg_key>", _all("<role>ASSISTANT</role>", "<arg_key>")),
    ("cohere2moe", "<|START_TEXT|> and <|START_ACTION|>", _all("<|START_TEXT|>", "<|START_ACTION|>")),
    ("lfm2", "<|tool_list_start|> and <|tool_list_end|>", _all("<|tool_list_start|>", "<|tool_list_end|>")),
    ("lfm2.5", "List of tools: [ without <|tool_list_start|>",
     lambda s: "List of tools: [" in s and "<|tool_list_start|>" not in s),
    ("gigachat-v3", "<|role_sep|> and <|message_sep|>, without <|function_call|>",
     lambda s: "<|role_sep|>" in s and "<|message_sep|>" in s and "<|function_call|>" not in s),
    ("minimax-m3", "]<]minimax[>[ and <tool_call> and <invoke name=",
     _all("]<]minimax[>[", "<tool_call>", "<invoke name=")),
    ("deepseek-v3.2", "dsml_token and DSML and (function_calls or tool_calls)",
     lambda s: "dsml_token" in s and "DSML" in s and ("function_calls" in s or "tool_calls" in s)),
    ("gemma4", "'<|tool_call>call:'", _all("'<|tool_call>call:'")),
    ("minicpm5", 'Tool usage guidelines: and <function name=" and <param name="',
     _all("Tool usage guidelines:", '<function name="', '<param name="')),
    ("translate-gemma", "[source_lang_code] and [target_lang_code]", _all("[source_lang_code]", "[target_lang_code]")),
    ("qwen3-coder", "<tool_call> and <function= and <parameter=, without "
     "'<tool_call><function=' ~ tool_call.name ~ '>'",
     lambda s: "<tool_call>" in s and "<function=" in s and "<parameter=" in s
     and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in s),
]
"""``(handler name, readable trigger, test on the normalised source)`` in llama.cpp's order."""


def detect_route(source: str) -> Route:
    """Route of a template source (normalised here). Never raises."""
    s = normalize_source(source)
    for name, _, test in HANDLERS:
        if test(s):
            return Route("specialized", name)
    return Route("autoparser", None)
