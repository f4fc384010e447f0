"""Workarounds: named, data-driven patches applied after the analysis (analysis notes §13).

llama.cpp keeps a list of lambdas in ``chat-diff-analyzer.cpp`` that patch the analysis of known
families whose renders the differential analysis cannot read correctly. Here each one is a
:class:`Workaround` record — a name, a human description, its trigger (substrings the normalised template
source must / must not contain, plus an optional predicate on the analysis) and its effect (field values
to set, values to trim, tokens to append to or replace ``preserved_tokens``). A caller can list them,
switch any off by name, and override fields afterwards (see :func:`core.analysis.analyzer.reapply`).

They run in list order, after the preserved tokens were collected (the order matters: Nemotron v2
replaces the list after earlier rules may have appended to it).

Each rule has an ``origin``: ``"llama.cpp"`` (llama.cpp has the same patch; applied at every fidelity) or
``"explorer"`` (a per-template fix of this project, applied only at ``"improved"`` fidelity — see
:mod:`core.analysis.fidelity`; the generic improvements there are preferred over such rules).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..diff import trim
from .result import ContentMode, ReasoningMode, TemplateAnalysis, ToolFormat


ORIGIN_LLAMA_CPP = "llama.cpp"
ORIGIN_EXPLORER = "explorer"


def _fidelity_value(fidelity: Any) -> str:
    return getattr(fidelity, "value", fidelity) or "llama.cpp"


def _set_path(a: TemplateAnalysis, path: str, value: Any) -> None:
    obj: Any = a
    parts = path.split(".")
    for p in parts[:-1]:
        obj = getattr(obj, p)
    setattr(obj, parts[-1], value)


def _get_path(a: TemplateAnalysis, path: str) -> Any:
    obj: Any = a
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


@dataclass(frozen=True)
class Workaround:
    """One patch rule.

    ``name`` (stable id, used to switch it off), ``title`` (short label), ``description`` (why it exists),
    ``requires`` (substrings the normalised source must all contain), ``excludes`` (substrings it must not
    contain), ``condition`` (optional predicate on the analysis, with ``condition_text`` describing it),
    ``sets`` (field path → value), ``trims`` (field paths whose values are whitespace-trimmed),
    ``append_tokens`` (added to ``preserved_tokens``), ``replace_tokens`` (replaces ``preserved_tokens``
    when not None; applied before ``append_tokens``), ``append_stops`` (added to ``additional_stops``),
    ``origin`` (:data:`ORIGIN_LLAMA_CPP` — llama.cpp has it, always applied — or :data:`ORIGIN_EXPLORER` —
    this project's, applied only at ``"improved"`` fidelity).
    """

    name: str
    title: str
    description: str
    requires: tuple[str, ...]
    excludes: tuple[str, ...] = ()
    condition: Callable[[TemplateAnalysis], bool] | None = None
    condition_text: str = ""
    sets: tuple[tuple[str, Any], ...] = ()
    trims: tuple[str, ...] = ()
    append_tokens: tuple[str, ...] = ()
    replace_tokens: tuple[str, ...] | None = None
    append_stops: tuple[str, ...] = ()
    origin: str = "llama.cpp"

    def active_at(self, fidelity: Any) -> bool:
        """Whether the rule may apply at ``fidelity`` (llama.cpp rules always; explorer rules at improved)."""
        return self.origin == ORIGIN_LLAMA_CPP or _fidelity_value(fidelity) == "improved"

    @property
    def trigger_text(self) -> str:
        """Readable trigger: ``contains 'a' AND lacks 'b' AND <condition>``."""
        parts = [f"contains {r!r}" for r in self.requires] + [f"lacks {e!r}" for e in self.excludes]
        if self.condition_text:
            parts.append(self.condition_text)
        return " AND ".join(parts)

    def applies(self, source: str, analysis: TemplateAnalysis) -> bool:
        """True when the (normalised) ``source`` triggers this rule for ``analysis``."""
        if not all(r in source for r in self.requires):
            return False
        if any(e in source for e in self.excludes):
            return False
        return self.condition is None or bool(self.condition(analysis))

    def apply(self, analysis: TemplateAnalysis) -> dict[str, Any]:
        """Patch ``analysis`` in place; return the fields it set (path → new value)."""
        changed: dict[str, Any] = {}
        for path, value in self.sets:
            _set_path(analysis, path, value)
            changed[path] = value.value if hasattr(value, "value") else value
        for path in self.trims:
            v = trim(_get_path(analysis, path))
            _set_path(analysis, path, v)
            changed[path] = v
        if self.replace_tokens is not None:
            analysis.preserved_tokens = list(self.replace_tokens)
        if self.append_tokens:
            analysis.preserved_tokens.extend(self.append_tokens)
        if self.replace_tokens is not None or self.append_tokens:
            changed["preserved_tokens"] = list(analysis.preserved_tokens)
        if self.append_stops:
            analysis.additional_stops.extend(self.append_stops)
            changed["additional_stops"] = list(analysis.additional_stops)
        return changed

    def to_json(self) -> dict[str, Any]:
        """JSON dict of the rule: ``name``, ``title``, ``description``, ``trigger``, ``sets`` (path -> value,
        enums as their value), ``trims``, ``append_tokens``, ``replace_tokens`` (list or None), ``append_stops``,
        ``origin``.
        """
        return {
            "name": self.name, "title": self.title, "description": self.description,
            "trigger": self.trigger_text,
            "sets": {p: (v.value if hasattr(v, "value") else v) for p, v in self.sets},
            "trims": list(self.trims), "append_tokens": list(self.append_tokens),
            "replace_tokens": None if self.replace_tokens is None else list(self.replace_tokens),
            "append_stops": list(self.append_stops),
            "origin": self.origin,
        }


WORKAROUNDS: list[Workaround] = [
    Workaround(
        name="old-qwen-deepseek-thinking",
        title="Old Qwen/DeepSeek thinking",
        description="Older Qwen/DeepSeek templates strip reasoning with content.split('</think>') and never "
                    "render it, so the diff cannot see it; the model still emits <think>…</think>.",
        requires=("content.split('</think>')",),
        excludes=("reasoning_content", "<SPECIAL_12>"),
        condition=lambda a: a.reasoning.mode == ReasoningMode.NONE,
        condition_text="reasoning.mode == NONE",
        sets=(("reasoning.mode", ReasoningMode.TAG_BASED), ("reasoning.start", "<think>"),
              ("reasoning.end", "</think>")),
        append_tokens=("<think>", "</think>"),
    ),
    Workaround(
        name="granite-3.3",
        title="Granite 3.3",
        description="Granite 3.3 asks for <think></think> then <response></response> in its system prompt; "
                    "content is wrapped only when reasoning is present.",
        requires=("Write your thoughts between <think></think> and write your response between "
                  "<response></response>",),
        sets=(("reasoning.mode", ReasoningMode.TAG_BASED), ("reasoning.start", "<think>"),
              ("reasoning.end", "</think>"), ("content.mode", ContentMode.WRAPPED_WITH_REASONING),
              ("content.start", "<response>"), ("content.end", "</response>")),
        append_tokens=("<think>", "</think>", "<response>", "</response>"),
    ),
    Workaround(
        name="cohere-command-r-plus",
        title="Cohere Command R+",
        description="Command R+ wraps answers in <|CHATBOT_TOKEN|> … <|END_OF_TURN_TOKEN|>.",
        requires=("<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
        condition=lambda a: a.content.start == "",
        condition_text="content.start is empty",
        sets=(("content.mode", ContentMode.ALWAYS_WRAPPED), ("content.start", "<|CHATBOT_TOKEN|>"),
              ("content.end", "<|END_OF_TURN_TOKEN|>"), ("user_start", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>")),
        append_tokens=("<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
    ),
    Workaround(
        name="functionary-3.1",
        title="Functionary 3.1",
        description="Functionary v3.1 writes <function=name>{…}</function> with no section delimiter.",
        requires=('set has_code_interpreter = tools | selectattr("type", "equalto", "code_interpreter") | list '
                  '| length > 0',),
        sets=(("content.mode", ContentMode.PLAIN), ("content.end", ""), ("tools.function.name_prefix", ""),
              ("tools.format.section_start", ""), ("tools.format.section_end", ""),
              ("tools.format.per_call_start", "<function="), ("tools.format.per_call_end", "</function>"),
              ("tools.function.close", "")),
        replace_tokens=("<|eot_id|>", "<|eom_id|>", "<function=", ">", "</function>"),
    ),
    Workaround(
        name="deepseek-r1-distill-qwen",
        title="DeepSeek-R1-Distill-Qwen",
        description="The R1-Distill template renders tool calls with tokens the diff splits badly; the "
                    "markers are set by hand.",
        requires=("{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'",),
        sets=(("tools.format.section_start", "<｜tool▁calls▁begin｜>"),
              ("tools.format.section_end", "<｜tool▁calls▁end｜>"),
              ("tools.format.per_call_start", "<｜tool▁call▁begin｜>function"),
              ("tools.function.name_prefix", "<｜tool▁sep｜>"),
              ("tools.format.per_call_end", "<｜tool▁call▁end｜>"),
              ("tools.function.close", "```")),
    ),
    Workaround(
        name="nemotron-nano-v2",
        title="Nemotron Nano v2",
        description="Nemotron Nano v2 writes <TOOLCALL>[…]</TOOLCALL> JSON and <SPECIAL_11> role tokens.",
        requires=("<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>", "<TOOL_RESPONSE>"),
        sets=(("tools.format.mode", ToolFormat.JSON_NATIVE), ("tools.format.section_start", ""),
              ("tools.format.section_end", ""), ("tools.format.per_call_start", "<TOOLCALL>"),
              ("tools.format.per_call_end", "</TOOLCALL>"), ("tools.format.tools_array_wrapped", True),
              ("content.mode", ContentMode.PLAIN), ("content.start", ""), ("content.end", ""),
              ("reasoning.mode", ReasoningMode.TAG_BASED), ("reasoning.start", "<think>\n"),
              ("reasoning.end", "</think>"), ("assistant_start", "<SPECIAL_11>Assistant"),
              ("user_start", "<SPECIAL_11>User")),
        replace_tokens=("<SPECIAL_11>", "</think>", "<TOOLCALL>", "</TOOLCALL>"),
    ),
    Workaround(
        name="firefunction-v2",
        title="Fireworks firefunction v2",
        description="firefunction v2's role headers are not found by the diff.",
        requires=("{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n' + "
                  "message['content'] | trim + '\\n' + system_prompt_suffix + '<|eot_id|>' -%}",),
        sets=(("assistant_start", "<|start_header_id|>assistant<|end_header_id|>"),
              ("user_start", "<|start_header_id|>user<|end_header_id|>")),
    ),
    Workaround(
        name="solar-open",
        title="Solar Open",
        description="Solar Open's assistant header carries a thinking token that is not part of the role.",
        requires=("<|begin|>assistant<|think|><|end|>",),
        sets=(("assistant_start", "<|begin|>assistant"),),
    ),
    Workaround(
        name="apriel-1.6",
        title="Apriel 1.6",
        description="Apriel 1.6's role markers are not found by the diff.",
        requires=("if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text",),
        sets=(("user_start", "<|begin_user|>"), ("assistant_start", "<|begin_assistant|>")),
    ),
    Workaround(
        name="json-name-parameters-instruction",
        title="JSON name/parameters instruction",
        description="Templates that instruct the {\"name\", \"parameters\"} JSON format; models often emit the "
                    "OpenAI function wrapper, so it becomes a grammar trigger too.",
        requires=('Respond in the format {"name": function name', "Do not use variables."),
        sets=(("tools.format.openai_wrapper_trigger", True),),
    ),
    Workaround(
        name="laguna",
        title="Laguna (poolside)",
        description="Laguna renders reasoning and argument delimiters with formatting whitespace the model "
                    "does not emit; trim them, tolerate whitespace between tags, and stop on </assistant>.",
        requires=("laguna_glm_thinking",),
        trims=("reasoning.start", "reasoning.end", "tools.arguments.value_prefix", "tools.arguments.value_suffix",
               "tools.arguments.separator"),
        sets=(("tools.arguments.tolerate_intertag_whitespace", True),),
        append_stops=("</assistant>",),
    ),
    Workaround(
        name="apertus-inner-thoughts",
        title="Apertus thoughts blocks",
        description="Apertus renders reasoning only from content blocks of type 'thoughts' (message.content."
                    "blocks), between <|inner_prefix|> and <|inner_suffix|>, never from reasoning_content, so the "
                    "diff cannot see it (llama.cpp finds no reasoning either); the model writes the markers "
                    "itself. SGLang's apertus reasoning parser reads them (docs/fidelity-reasoning.md).",
        requires=("'<|inner_prefix|>'", "'<|inner_suffix|>'", "block.type == 'thoughts'"),
        condition=lambda a: a.reasoning.mode == ReasoningMode.NONE,
        condition_text="reasoning.mode == NONE",
        sets=(("reasoning.mode", ReasoningMode.TAG_BASED), ("reasoning.start", "<|inner_prefix|>"),
              ("reasoning.end", "<|inner_suffix|>")),
        append_tokens=("<|inner_prefix|>", "<|inner_suffix|>"),
        origin=ORIGIN_EXPLORER,
    ),
    Workaround(
        name="bailing-v3",
        title="Bailing V3",
        description="Bailing V3 renders argument values with trailing whitespace the model does not emit.",
        requires=("Bailing V3 chat template",),
        trims=("tools.arguments.value_suffix",),
        sets=(("tools.arguments.tolerate_intertag_whitespace", True),),
    ),
]
"""All workarounds, in application order (llama.cpp's order)."""

WORKAROUNDS_BY_NAME: dict[str, Workaround] = {w.name: w for w in WORKAROUNDS}

MODEL_WRITTEN_REASONING: frozenset[str] = frozenset({"apertus-inner-thoughts"})
"""Workarounds whose reasoning markers the model writes itself, as blocks anywhere in its turn (between calls and
answers), never opened by the generation prompt: the model does not reason from its first token, so repair
``reasoning-end-without-start`` does not apply (:func:`core.chat.pipeline._reasoning_first`)."""


def apply_workarounds(source: str, analysis: TemplateAnalysis, disabled: Any = (),
                      rules: list[Workaround] | None = None,
                      fidelity: Any = "llama.cpp") -> list[tuple[str, dict[str, Any]]]:
    """Apply every enabled rule that triggers, in order, to ``analysis`` (in place).

    ``source`` is the normalised template source; ``fidelity`` (``"llama.cpp"`` default, or
    ``"improved"``) decides whether rules of origin ``"explorer"`` may apply. Returns
    ``[(name, fields set), …]`` for the rules that fired. An unknown name in ``disabled`` raises
    ``ValueError`` naming it (and listing the known ones).
    """
    disabled = set(disabled or ())
    unknown = disabled - set(WORKAROUNDS_BY_NAME)
    if unknown:
        raise ValueError(f"unknown workaround name(s): {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(WORKAROUNDS_BY_NAME)}")
    fired: list[tuple[str, dict[str, Any]]] = []
    for w in rules if rules is not None else WORKAROUNDS:
        if w.name in disabled or not w.active_at(fidelity):
            continue
        if w.applies(source, analysis):
            fired.append((w.name, w.apply(analysis)))
    return fired
