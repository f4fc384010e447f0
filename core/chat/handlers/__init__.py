"""Special handlers: hand-built parsers for the families llama.cpp does not send to the auto-parser.

The registry :data:`FAMILIES` lists every family in llama.cpp's detection order
(``common_chat_try_specialized_template``, analysis notes §14): the first family whose detection matches the
normalised template source wins. Each family has its own module here (``NAME``, ``detect(src)``,
``build(template, request, generation_prompt, report) -> ChatOutputParser``); modules are imported lazily, so
a family whose module is missing (or fails to import) still *detects* — and the pipeline then falls back to
the auto-parser for it instead of letting a later family claim the template.

Handlers may also accept a keyword ``prepared`` (a :class:`core.chat.prompt.PreparedRequest`); the pipeline
passes it when the signature has it, which saves re-probing the template's caps.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable


def _has_all(*needles: str) -> Callable[[str], bool]:
    return lambda src: all(n in src for n in needles)


def _ministral3(src: str) -> bool:
    return all(n in src for n in ("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]")) and "[CALL_ID]" not in src


def _lfm2(src: str) -> bool:
    return "<|tool_list_start|>" in src and "<|tool_list_end|>" in src


def _lfm25(src: str) -> bool:
    return "List of tools: [" in src and "<|tool_list_start|>" not in src


def _gigachat3(src: str) -> bool:
    return "<|role_sep|>" in src and "<|message_sep|>" in src and "<|function_call|>" not in src


def _deepseek(src: str) -> bool:
    return "dsml_token" in src and "DSML" in src and ("function_calls" in src or "tool_calls" in src)


def _qwen3_coder(src: str) -> bool:
    return (all(n in src for n in ("<tool_call>", "<function=", "<parameter="))
            and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in src)


@dataclass(frozen=True)
class Family:
    """One specialised family: ``name`` (route name, e.g. ``"gpt-oss"``), ``module`` (file in this package),
    ``title`` (human name), ``detect`` (llama.cpp's source test; the module's own ``detect`` is preferred
    when the module exists), ``owner`` (which helper implements the module)."""

    name: str
    module: str
    title: str
    detect: Callable[[str], bool]
    owner: str


FAMILIES: list[Family] = [
    Family("ministral-3", "ministral3", "Ministral / Magistral Large 3 (also Devstral)", _ministral3, "H-D"),
    Family("llm-jp-harmony", "llm_jp_harmony", "LLM-jp-4.1 (Harmony dialect, b11549)",
           _has_all("chat_format=llm-jp-harmony-v1"), "sync"),
    Family("gpt-oss", "gpt_oss", "GPT-OSS (harmony channels)", _has_all("<|channel|>"), "H-D"),
    Family("muse-glimmer", "muse_glimmer", "Muse Glimmer", _has_all("<atem:function_calls>", "<|eom|>"), "H-F"),
    Family("functionary-v3.2", "functionary_v3_2", "Functionary v3.2 (>>>recipient)",
           _has_all(">>>all", ">>>${recipient}"), "H-D"),
    Family("kimi-k2", "kimi_k2", "Kimi K2 (Thinking)",
           _has_all("<|tool_calls_section_begin|>", "<|tool_call_begin|>"), "H-F"),
    Family("kimi-k3", "kimi_k3", "Kimi K3", _has_all("<|open|>", "<|close|>", "<|end_of_msg|>"), "H-F"),
    Family("k2-horizon", "k2_horizon", "K2 Horizon (b11549)", _has_all("<|ifm|im_start|>", "<ifm|tool_calls>"),
           "sync"),
    Family("ling-3", "ling3", "Ling 3.0 / Bailing V3", _has_all("<role>ASSISTANT</role>", "<arg_key>"), "H-F"),
    Family("cohere2moe", "cohere2moe", "Cohere2 MoE / North Code", _has_all("<|START_TEXT|>", "<|START_ACTION|>"),
           "H-F"),
    Family("lfm2", "lfm2", "LFM2", _lfm2, "H-F"),
    Family("lfm2.5", "lfm2", "LFM2.5", _lfm25, "H-F"),
    Family("gigachat-v3", "gigachat_v3", "GigaChat V3", _gigachat3, "H-D"),
    Family("minimax-m3", "minimax_m3", "MiniMax-M3", _has_all("]<]minimax[>[", "<tool_call>", "<invoke name="), "H-F"),
    Family("deepseek-v3.2", "deepseek", "DeepSeek V3.2 / V4 (DSML)", _deepseek, "H-D"),
    Family("gemma4", "gemma4", "Gemma 4", _has_all("'<|tool_call>call:'"), "H-F"),
    Family("minicpm5", "minicpm5", "MiniCPM5", _has_all("Tool usage guidelines:", '<function name="', '<param name="'),
           "H-F"),
    Family("translate-gemma", "translate_gemma", "TranslateGemma (b11549)",
           _has_all("[source_lang_code]", "[target_lang_code]"), "sync"),
    Family("qwen3-coder", "qwen3_coder", "Qwen3-Coder (also Qwen3.5, Nemotron 3 Nano, StepFun 3.5 Flash)",
           _qwen3_coder, "H-D"),
]


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_ALIASES: dict[str, Family] = {}
for _f in FAMILIES:
    for _alias in (_f.name, _f.module, _f.title.split(" (")[0]):
        _ALIASES.setdefault(_key(_alias), _f)
for _alias, _target in (("ministral3", "ministral-3"), ("magistral", "ministral-3"), ("deepseek", "deepseek-v3.2"),
                        ("deepseekv4", "deepseek-v3.2"), ("deepseekv32", "deepseek-v3.2"), ("lfm25", "lfm2.5"),
                        ("gigachat3", "gigachat-v3"), ("functionaryv32", "functionary-v3.2"),
                        ("ling3", "ling-3"), ("bailingv3", "ling-3"), ("qwen3coder", "qwen3-coder"),
                        ("gemma-4", "gemma4"), ("cohere2", "cohere2moe")):
    _ALIASES[_key(_alias)] = next(f for f in FAMILIES if f.name == _target)


def family_by_name(name: str | None) -> Family | None:
    """The family for a route/handler name (tolerant of spelling: ``"functionary-v3-2"``, ``"Gemma 4"``…)."""
    if not name:
        return None
    return _ALIASES.get(_key(name))


def detect_family(normalized_source: str) -> Family | None:
    """First family (llama.cpp order) whose detection matches ``normalized_source``, or ``None`` (the
    template goes to the auto-parser)."""
    for fam in FAMILIES:
        if fam.detect(normalized_source):
            return fam
    return None


_MODULES: dict[str, ModuleType | None] = {}
IMPORT_ERRORS: dict[str, str] = {}
"""module name -> import error text, for modules that exist but failed to import."""


def load_module(fam: Family) -> ModuleType | None:
    """The family's handler module, or ``None`` when it is missing or broken (the error is kept in
    :data:`IMPORT_ERRORS`)."""
    if fam.module not in _MODULES:
        try:
            _MODULES[fam.module] = importlib.import_module(f"{__name__}.{fam.module}")
        except ModuleNotFoundError as e:
            if e.name and e.name.endswith(fam.module):
                _MODULES[fam.module] = None
            else:
                IMPORT_ERRORS[fam.module] = f"{type(e).__name__}: {e}"
                _MODULES[fam.module] = None
        except Exception as e:  # a broken module must not take the pipeline down
            IMPORT_ERRORS[fam.module] = f"{type(e).__name__}: {e}"
            _MODULES[fam.module] = None
    return _MODULES[fam.module]


def build_handler(fam: Family, template: Any, request: Any, generation_prompt: str, report: Any = None,
                  prepared: Any = None) -> Any | None:
    """Build the family's parser, or ``None`` when its module is unavailable (caller falls back to the
    auto-parser). Passes ``prepared`` only to ``build`` functions that accept it. Errors raised by the
    handler propagate."""
    mod = load_module(fam)
    build = getattr(mod, "build", None) if mod is not None else None
    if not callable(build):
        return None
    kwargs: dict[str, Any] = {}
    try:
        params = inspect.signature(build).parameters
    except (TypeError, ValueError):
        params = {}
    if prepared is not None and ("prepared" in params
                                 or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())):
        kwargs["prepared"] = prepared
    return build(template, request, generation_prompt, report, **kwargs)


def available() -> dict[str, bool]:
    """Family name -> whether its handler module is importable (for the app and the README)."""
    return {f.name: load_module(f) is not None for f in FAMILIES}
