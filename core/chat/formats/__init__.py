"""The special-format families: the registry of the templates llama.cpp does not send to the auto-parser.

:data:`FAMILIES` is the one list of them — name, detection, module — in llama.cpp's detection order
(``common_chat_try_specialized_template``, analysis notes §14): the first family whose detection matches the
normalised template source wins. :mod:`core.analysis.routing` and the chat pipeline both read it.

Each family's module here declares its output format once, as a PEG built with :class:`core.peg.chat.ChatBuilder`
(a port of the matching llama.cpp ``common/parsers/*.cpp`` builder), and exposes
``build(template, request, generation_prompt, report=None, *, prepared=None)`` returning the parser (a
:class:`core.chat.formats._peg_handler.HandlerParser`). How to add one: ``docs/engine.md``.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable


def _all(*needles: str) -> Callable[[str], bool]:
    return lambda src: all(n in src for n in needles)


@dataclass(frozen=True)
class Family:
    """One special family: ``name`` (the route name, e.g. ``"gpt-oss"``), ``module`` (its file in this package),
    ``title`` (human name), ``trigger`` (llama.cpp's detection, in words) and ``detect`` (that detection, on the
    normalised template source)."""

    name: str
    module: str
    title: str
    trigger: str
    detect: Callable[[str], bool]

    @classmethod
    def all_of(cls, name: str, module: str, title: str, *needles: str) -> "Family":
        """A family detected by all of ``needles`` in the source."""
        return cls(name, module, title, " and ".join(needles), _all(*needles))


FAMILIES: tuple[Family, ...] = (
    Family("ministral-3", "ministral3", "Ministral / Magistral Large 3 (also Devstral)",
           "[SYSTEM_PROMPT] and [TOOL_CALLS] and [ARGS], without [CALL_ID]",
           lambda s: _all("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]")(s) and "[CALL_ID]" not in s),
    Family.all_of("llm-jp-harmony", "llm_jp_harmony", "LLM-jp-4.1 (Harmony dialect, b11549)",
                  "chat_format=llm-jp-harmony-v1"),
    Family.all_of("gpt-oss", "gpt_oss", "GPT-OSS (harmony channels)", "<|channel|>"),
    Family.all_of("muse-glimmer", "muse_glimmer", "Muse Glimmer", "<atem:function_calls>", "<|eom|>"),
    Family.all_of("functionary-v3.2", "functionary_v3_2", "Functionary v3.2 (>>>recipient)", ">>>all",
                  ">>>${recipient}"),
    Family.all_of("kimi-k2", "kimi_k2", "Kimi K2 (Thinking)", "<|tool_calls_section_begin|>", "<|tool_call_begin|>"),
    Family.all_of("kimi-k3", "kimi_k3", "Kimi K3", "<|open|>", "<|close|>", "<|end_of_msg|>"),
    Family.all_of("k2-horizon", "k2_horizon", "K2 Horizon (b11549)", "<|ifm|im_start|>", "<ifm|tool_calls>"),
    Family.all_of("ling3", "ling3", "Ling 3.0 / Bailing V3", "<role>ASSISTANT</role>", "<arg_key>"),
    Family.all_of("cohere2moe", "cohere2moe", "Cohere2 MoE / North Code", "<|START_TEXT|>", "<|START_ACTION|>"),
    Family.all_of("lfm2", "lfm2", "LFM2", "<|tool_list_start|>", "<|tool_list_end|>"),
    Family("lfm2.5", "lfm2", "LFM2.5", "List of tools: [ without <|tool_list_start|>",
           lambda s: "List of tools: [" in s and "<|tool_list_start|>" not in s),
    Family("gigachat-v3", "gigachat_v3", "GigaChat V3", "<|role_sep|> and <|message_sep|>, without <|function_call|>",
           lambda s: _all("<|role_sep|>", "<|message_sep|>")(s) and "<|function_call|>" not in s),
    Family.all_of("minimax-m3", "minimax_m3", "MiniMax-M3", "]<]minimax[>[", "<tool_call>", "<invoke name="),
    Family("deepseek-v3.2", "deepseek", "DeepSeek V3.2 / V4 (DSML)",
           "dsml_token and DSML and (function_calls or tool_calls)",
           lambda s: _all("dsml_token", "DSML")(s) and ("function_calls" in s or "tool_calls" in s)),
    Family.all_of("gemma4", "gemma4", "Gemma 4", "'<|tool_call>call:'"),
    Family.all_of("minicpm5", "minicpm5", "MiniCPM5", "Tool usage guidelines:", '<function name="', '<param name="'),
    Family.all_of("translate-gemma", "translate_gemma", "TranslateGemma (b11549)", "[source_lang_code]",
                  "[target_lang_code]"),
    Family("qwen3-coder", "qwen3_coder", "Qwen3-Coder (also Qwen3.5, Nemotron 3 Nano, StepFun 3.5 Flash)",
           "<tool_call> and <function= and <parameter=, without '<tool_call><function=' ~ tool_call.name ~ '>'",
           lambda s: _all("<tool_call>", "<function=", "<parameter=")(s)
           and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in s),
)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_ALIASES: dict[str, Family] = {}
for _f in FAMILIES:
    for _alias in (_f.name, _f.module, _f.title.split(" (")[0]):
        _ALIASES.setdefault(_key(_alias), _f)
for _alias, _target in (("ministral3", "ministral-3"), ("magistral", "ministral-3"), ("deepseek", "deepseek-v3.2"),
                        ("deepseekv4", "deepseek-v3.2"), ("deepseekv32", "deepseek-v3.2"), ("lfm25", "lfm2.5"),
                        ("gigachat3", "gigachat-v3"), ("functionaryv32", "functionary-v3.2"),
                        ("bailingv3", "ling3"), ("qwen3coder", "qwen3-coder"), ("cohere2", "cohere2moe")):
    _ALIASES[_key(_alias)] = next(f for f in FAMILIES if f.name == _target)


def family_by_name(name: str | None) -> Family | None:
    """The family for a route name, tolerant of spelling (``"functionary-v3-2"``, ``"Gemma 4"``, ``"ling-3"``)."""
    if not name:
        return None
    return _ALIASES.get(_key(name))


def detect_family(normalized_source: str) -> Family | None:
    """The first family (llama.cpp's order) whose detection matches ``normalized_source``; ``None``: the template
    goes to the auto-parser."""
    for fam in FAMILIES:
        if fam.detect(normalized_source):
            return fam
    return None


def load_module(fam: Family) -> ModuleType:
    """The family's format module (imported on first use: most runs need one family at most)."""
    return importlib.import_module(f"{__name__}.{fam.module}")


def build_parser(fam: Family, template: Any, request: Any, generation_prompt: str, report: Any = None,
                 prepared: Any = None) -> Any:
    """The family's parser for ``request`` (the module's ``build``)."""
    return load_module(fam).build(template, request, generation_prompt, report, prepared=prepared)


__all__ = ["FAMILIES", "Family", "build_parser", "detect_family", "family_by_name", "load_module"]
