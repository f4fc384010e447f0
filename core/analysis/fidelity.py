"""Fidelity: reproduce llama.cpp exactly, or apply the explorer's improvements on top of it.

The analysis, the parser generator and the request pipeline take ``fidelity``:

* ``"llama.cpp"`` (:attr:`Fidelity.LLAMA_CPP`, the default everywhere): the behaviour of the reference
  implementation, measured by ``reference/analysis.jsonl`` and ``reference/cases.jsonl``. Nothing in this
  module changes anything at this fidelity.
* ``"improved"`` (:attr:`Fidelity.IMPROVED`): the generic improvements listed in :data:`IMPROVEMENTS` apply
  (each can still be switched off by name), and so do the workarounds whose ``origin`` is ``"explorer"``
  (:mod:`core.analysis.workarounds`).

Improvements are general mechanisms — they name no template — and each says where it acts (``stage``):
``"probes"`` (what the analysis renders), ``"analysis"`` (how a comparison is read) or ``"parser"`` (what
the generated parser accepts). An :class:`~core.analysis.AnalysisReport` records the fidelity it was made
with, the improvements enabled and the ones that changed something (``improvements_applied``).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import AnalysisError


class Fidelity(str, enum.Enum):
    """Which behaviour to follow: ``LLAMA_CPP`` (reference, default) or ``IMPROVED`` (explorer improvements)."""

    LLAMA_CPP = "llama.cpp"
    IMPROVED = "improved"


DEFAULT_FIDELITY = Fidelity.LLAMA_CPP


@dataclass(frozen=True)
class Improvement:
    """One generic improvement over llama.cpp, applied only at :attr:`Fidelity.IMPROVED`.

    ``name`` (stable id, used to switch it off), ``title``, ``stage`` (``"probes"`` | ``"analysis"`` |
    ``"parser"``), ``description`` (what it does and why it is right), ``example`` (a corpus template it
    helps, for the reader; never a trigger).
    """

    name: str
    title: str
    stage: str
    description: str
    example: str = ""


STRING_ARGUMENT_PROBES = "string-argument-probes"
MARKER_WHITESPACE_ALIGNMENT = "marker-whitespace-alignment"
PYTHONIC_CALLS = "pythonic-calls"
PYTHON_LITERAL_VALUES = "python-literal-values"
JSON_CALL_SEPARATORS = "json-call-separators"
JSON_ARRAY_START = "json-array-start"
OPEN_CONTENT_BEFORE_CALLS = "open-content-before-calls"
GENERATION_PROMPT_PREAMBLE = "generation-prompt-preamble"
INSTRUCTION_CALL_FORMAT = "instruction-call-format"
CONTENT_TURN_HEADER = "content-turn-header"
CONTENT_INSIDE_SECTION_START = "content-inside-section-start"
GEMMA_CALL_SYNTAX = "gemma-call-syntax"
CALL_ID_BEFORE_NAME = "call-id-before-name"
WRAPPED_CONTENT_TAGGED_CALLS = "wrapped-content-tagged-calls"
CALL_TURN_HEADER = "call-turn-header"
REASONING_FIELD = "reasoning-field"
REASONING_TURN_HEADER = "reasoning-turn-header"
NULL_CONTENT_CALLS = "null-content-calls"
CALL_TURN_CAPS = "call-turn-caps"
TRANSFORMERS_DIALECT = "transformers-dialect"
METADATA_CALL_TURNS = "metadata-call-turns"

IMPROVEMENTS: list[Improvement] = [
    Improvement(
        name=TRANSFORMERS_DIALECT,
        title="A template llama.cpp's Jinja engine cannot render is rendered as transformers renders it",
        stage="probes",
        description="When a probe request (a user message and the two probe tools, with the generation prompt) "
                    "fails to render in llama.cpp's Jinja dialect and renders in the transformers dialect — the "
                    "template uses a construct llama.cpp's engine lacks, e.g. selectattr(attr, 'undefined') — "
                    "the analysis, the prompt and the parser's generation prompt render in the transformers dialect "
                    "(the jinja2 sandbox transformers' apply_chat_template uses). The capabilities are then read "
                    "from what the renders write (a system text, a tool's name, a call's name and its argument "
                    "values), since only llama.cpp's dialect records what a render reads. llama.cpp fails on "
                    "every request to such a template and serves no parser.",
        example="vllm-tool_chat_template_gemma3_pythonic.jinja"),
    Improvement(
        name=CALL_TURN_CAPS,
        title="Tool calls are supported when a call turn renders its call",
        stage="probes",
        description="llama.cpp's tool-call capability probe renders a whole exchange (a call turn, a tool result "
                    "given as a string, an answer); a template that cannot render part of it fails the probe and "
                    "is reported without tool calls, although it renders the call turn itself — Command A "
                    "Reasoning iterates a tool result's content as a list of documents, which llama.cpp's engine "
                    "refuses for a string. When the probe reports no tool calls but a user turn followed by a "
                    "call turn renders the probe call's name, tool calls are taken as supported (parallel ones "
                    "when two calls both render) and the tool format is read as usual.",
        example="hfjs-CohereLabs-command-a-reasoning-08-2025.jinja"),
    Improvement(
        name=NULL_CONTENT_CALLS,
        title="Tool-call probes with null content, for templates that render calls only then",
        stage="probes",
        description="When the capability probe finds that the template does not read a tool-call turn's calls "
                    "(supports_tool_calls false) but a call turn whose content is null (None) writes the call "
                    "— DeepSeek's templates render calls under `message['content'] is none` — the tool-call "
                    "capability is taken as present and every tool probe sends the call turn's content as null, "
                    "so the tool format is read as for any other template. llama.cpp's probes send an empty "
                    "string, find no calls, and the model's calls stay in the content.",
        example="gguf-ollama-deepseek-v3-671b.jinja"),
    Improvement(
        name=REASONING_FIELD,
        title="Reasoning probes use the message field the template reads",
        stage="probes",
        description="When the template does not render an assistant message's reasoning_content (comparison R1 "
                    "finds no reasoning) but renders the same text given under 'reasoning' or 'thinking' — the "
                    "other names templates read (Solar Open: message.reasoning; gpt-oss: message.thinking) — R1 "
                    "is rendered again with the reasoning under that name too, and so is every later probe that "
                    "carries reasoning (R3, the content and tool comparisons). The reasoning markers are then "
                    "read as usual, and the request path passes the conversation's reasoning_content under that "
                    "name too (the report's reasoning_field), so past reasoning the template keeps reaches the "
                    "prompt. llama.cpp's analysis sends reasoning_content only and reports no reasoning, "
                    "so a model's reasoning stays in the content.",
        example="upstage-Solar-Open-100B.jinja"),
    Improvement(
        name=REASONING_TURN_HEADER,
        title="Reasoning written as its own turn: the turn header after it belongs to the reasoning end",
        stage="analysis",
        description="When the template writes reasoning as a turn of its own — after the reasoning end marker it "
                    "writes the turn header that opened the reasoning again, then the answer as it renders it "
                    "without reasoning (Solar Open: '<|begin|>assistant<|think|>…<|end|><|begin|>assistant"
                    "<|content|>…') — that header is part of the reasoning end ('<|end|><|begin|>assistant'): "
                    "measured from R1, whose render with reasoning is the render without it plus one block — "
                    "reasoning start (from its first marker), text, end and the repeated header — placed right "
                    "after the header. The start is that whole block head (gpt-oss: "
                    "'<|channel|>analysis<|message|>', end '<|end|><|start|>assistant'). A model writes that "
                    "header after its reasoning; with the end marker alone it would be left at the start of the "
                    "content.",
        example="upstage-Solar-Open-100B.jinja"),
    Improvement(
        name=STRING_ARGUMENT_PROBES,
        title="Tool-call probes send arguments the way requests do",
        stage="probes",
        description="When the capability probes find that the template does not read object arguments "
                    "(caps.supports_object_arguments is false), the request path sends call arguments as JSON "
                    "text, so the tool-call probes do too (compact JSON, as the request path dumps them). "
                    "llama.cpp's analysis sends objects, which such templates print as Python dict text "
                    "({'a': 'x'}); the markers it then finds contain argument text and never match a real "
                    "request's output.",
        example="hfjs-deepseek-ai-DeepSeek-R1.jinja"),
    Improvement(
        name=MARKER_WHITESPACE_ALIGNMENT,
        title="Markers padded with different whitespace are common text",
        stage="analysis",
        description="When the answer turn and the tool-call turn both start with the same marker but pad it "
                    "with different whitespace, the character diff stops inside the padding and the marker "
                    "lands in the tool-call side (a section start such as '</think>' plus spaces). The diff of "
                    "the tool-call comparison (T1) is moved past markers both sides start with, whitespace "
                    "ignored, and the whitespace left at the start of the tool-call side is dropped.",
        example="xinference-Deepseek-V3.1.jinja"),
    Improvement(
        name=PYTHONIC_CALLS,
        title="Python-style calls: name(arg=value, ...)",
        stage="analysis",
        description="When the tool-call turn writes the probe call as a Python call — the function name, '(', "
                    "then the first argument as name=quoted value (or name=%s: a template that formats values "
                    "with Jinja's format filter, which the engine, like llama.cpp's, leaves as '%s') — the format "
                    "is PYTHONIC: the section markers are the text around the call ('[' and ']' around it mean "
                    "a call list), and the parser reads calls as name(arg=value, ...) with Python-literal "
                    "values, separated by ',' or whitespace, optionally followed by content. llama.cpp reads "
                    "these templates as tagged arguments, with markers that contain the probe's argument text, "
                    "so no real call parses.",
        example="hfjs-LiquidAI-LFM2.5-VL-450M.jinja"),
    Improvement(
        name=CALL_TURN_HEADER,
        title="Each call written as its own turn: the turn header is the per-call start",
        stage="analysis",
        description="When the tool-call turn (T1) writes text before the section start it found (a turn header "
                    "such as '<|from|>assistant' before '<|recipient|>') and the two-call turn (T2) writes that "
                    "header and the section start again between the first and the second call, the calls are "
                    "separate turns: header + section start is the per-call start and there is no section "
                    "start. The content before the calls then ends at the header, and the second call is read "
                    "as a call. llama.cpp keeps only the last marker as a section start, so the header stays "
                    "in the content and a second call is not recognised.",
        example="hfjs-meetkai-functionary-medium-v2.2.jinja"),
    Improvement(
        name=INSTRUCTION_CALL_FORMAT,
        title="Tool format read from the tool instructions when no call is ever rendered",
        stage="analysis",
        description="When the analysis finds no tool-call format (the template never renders a call in "
                    "history, so there is nothing to diff) but the instructions it writes when tools are given "
                    "spell a JSON call format — an opener marker and a {\"name\": …, \"arguments\"|"
                    "\"parameters\": …} example, or '<MARKER> followed by a JSON list' — comparison I1 (a user "
                    "message without vs with tools) reads them and fills tools.format (JSON_NATIVE, markers, "
                    "keys, list wrapping), marked tools.inferred_from = \"instructions\". A request whose own "
                    "system message spells a format (an agent's prompt) is read the same way. The parser accepts "
                    "an XML-style opener's closing tag when the instructions name none, and content after the "
                    "calls. llama.cpp reports no format for these templates and every call stays in content.",
        example="gguf-ollama-granite3.2-8b.jinja"),
    Improvement(
        name=PYTHON_LITERAL_VALUES,
        title="Tagged argument values in Python literal syntax",
        stage="parser",
        description="A non-string argument value of a tagged format (and of the special handlers' tagged "
                    "formats) is also accepted as a Python literal ({'a': 'x', 'n': True}, ['x'], None), "
                    "which templates that print a nested object with Jinja's default conversion show the model. "
                    "The value is converted to JSON text by the existing quote/literal normalisation (never "
                    "evaluated); JSON is tried first, so JSON values parse as before. For a value that may also "
                    "be a string, only a literal of a type its schema allows besides string (a dict, a list, "
                    "True / False, None): a number written for a string-or-null parameter is that string.",
        example="ByteDance-Seed-OSS.jinja"),
    Improvement(
        name=JSON_CALL_SEPARATORS,
        title="Parallel JSON calls separated by whitespace",
        stage="parser",
        description="Parallel JSON tool calls may follow each other with only whitespace between them as well "
                    "as with ',' (llama.cpp requires the comma). Templates that write each call as its own "
                    "object print them back to back ({...}{...} or one per line); the second call must still "
                    "be a complete call of a known tool, so no content is taken for a call by accident.",
        example="vllm-tool_chat_template_llama4_json.jinja"),
    Improvement(
        name=JSON_ARRAY_START,
        title="A JSON call array without section marker starts at '['",
        stage="parser",
        description="When JSON tool calls are wrapped in an array and no section or per-call marker precedes them, "
                    "the content before the calls ends at '[' — llama.cpp ends it at '{', so the array's '[' "
                    "stays in the content and the calls no longer parse.",
        example="gguf-ollama-cogito-3b.jinja"),
    Improvement(
        name=OPEN_CONTENT_BEFORE_CALLS,
        title="Content opened by the generation prompt ends at the tool calls",
        stage="parser",
        description="For always-wrapped content whose start marker the generation prompt already writes "
                    "(Command R's <|CHATBOT_TOKEN|>), the model's content has no start marker and, in a turn "
                    "with tool calls, no end marker either: it runs until the tool-call section. The content "
                    "before JSON tool calls is read up to the content end marker or the section start, "
                    "whichever comes first. llama.cpp expects start marker, content and end marker before the "
                    "calls, so the calls are not recognised.",
        example="CohereForAI-c4ai-command-r-plus-tool_use.jinja"),
    Improvement(
        name=GENERATION_PROMPT_PREAMBLE,
        title="Generation-prompt text after the reasoning start is not reasoning",
        stage="parser",
        description="When the generation prompt opens reasoning and then writes text of its own (Apriel 1.6: "
                    "'Here are my reasoning steps:'), that text is the template's, not the model's: it is "
                    "skipped instead of being returned as the start of reasoning_content (the template does not "
                    "write it back when it renders reasoning_content in history).",
        example="Apriel-1.6-15b-Thinker-fixed.jinja"),
    Improvement(
        name=CONTENT_TURN_HEADER,
        title="A header the rendered answer turn writes after the generation prompt is not content",
        stage="parser",
        description="When the template renders two different plain answers (no reasoning, no calls) after the "
                    "request's conversation and both renders continue the prompt with the same text H before "
                    "the answer (Hunyuan A13B: '助手：', which its tool instructions also tell the model to "
                    "start with), H is the template's turn header the generation prompt lacks: a model trained "
                    "on those renders writes it. The parser skips H (and the whitespace after it) at the start "
                    "of the output when it is there; H is never required. Learned per request from renders, "
                    "for the auto-parser, when the analysis has no content start marker and H holds no "
                    "reasoning or tool-call marker. llama.cpp returns H as the start of the content.",
        example="vllm-tool_chat_template_hunyuan_a13b.jinja"),
    Improvement(
        name=CONTENT_INSIDE_SECTION_START,
        title="Content the template writes between the two markers of its tool-call section start",
        stage="parser",
        description="For JSON tool calls whose analysed section start is two adjacent markers with no section "
                    "end (Llama 4: <|python_start|><|python_end|>, learned from a call turn with empty "
                    "content), the template writes a call turn's content between the two markers and the calls "
                    "after them: <|python_start|>Let me check.<|python_end|>{\"name\": …}. That text is read as "
                    "content (after any content before the first marker) and the calls after the second marker "
                    "as calls. Derived from the analysed markers, not per family. llama.cpp finds no section "
                    "start there and returns the whole output as content.",
        example="gguf-ollama-llama4-latest.jinja"),
    Improvement(
        name=GEMMA_CALL_SYNTAX,
        title="Gemma-style calls with the template's own markers",
        stage="parser",
        description="When a template the auto-parser would serve renders a tool call as "
                    "<A>call:NAME{key:<S>value<S>,…}<B> — Gemma 4's call syntax, with single-token markers A "
                    "(call start), S (string delimiter) and B (call end) of its own — the request is parsed by "
                    "the Gemma 4 handler with those markers (learned from one render of a probe call, not from "
                    "the file name). When the render writes a number between S too (FunctionGemma writes every "
                    "value as {{ value }} between <escape>), a string value is converted to the type the tool's "
                    "schema declares for its key ('3' → 3 for an integer), and a value streams once complete. "
                    "Example: <start_function_call>call:get_weather{city:<escape>Paris<escape>,days:<escape>3"
                    "<escape>}<end_function_call> → get_weather {\"city\": \"Paris\", \"days\": 3}. llama.cpp's "
                    "analysis finds markers made of probe text and returns every call as content.",
        example="vllm-tool_chat_template_functiongemma.jinja"),
    Improvement(
        name=METADATA_CALL_TURNS,
        title="Calls written as the template's metadata turn: the function name, a line break, the JSON arguments",
        stage="parser",
        description="When the analysis finds no tool-call format and the template renders an assistant turn's "
                    "'metadata' and 'content' right after its generation prompt as METADATA, whitespace holding a "
                    "line break, CONTENT — GLM-4 chat's call turn, whose metadata is the function name and whose "
                    "content is the JSON arguments (its own server converts tool_calls to such turns) — a request "
                    "with tools is parsed by the glm4-chat format (core/chat/formats/glm4_chat.py): an output "
                    "whose first line is a tool's name and whose next text is a JSON object is that call "
                    "(get_weather\\n{\"city\": \"Paris\"}); text after the arguments is content; with parallel "
                    "calls a further call follows the text the template writes between two call turns "
                    "(<|assistant|>). A template that reads tools from a message only (message.tools) gets the request's tools in a first "
                    "system turn, as GLM-4's server passes them, when no message carries them. Learned "
                    "from renders, not from the file name; the lazy grammar starts at a tool's name at the "
                    "start of the output. As GLM-4's own OpenAI server reads the output (THUDM/GLM-4 "
                    "basic_demo/openai_api_server.py, process_response). llama.cpp's analysis finds no format "
                    "(the template never reads tool_calls) and returns every call as content.",
        example="xinference-glm4-chat.jinja"),
    Improvement(
        name=CALL_ID_BEFORE_NAME,
        title="A call id written before the function name, in a template that lists its tools",
        stage="analysis",
        description="Comparison T7 (the same call with two ids) places the id by looking for the function name "
                    "before and after it. A template that prints its tool list in the system prompt has the "
                    "name before the id too, so llama.cpp reports no id position, and the id stays inside the "
                    "learned name prefix (Solar Open: 'call00001<|tool_call:name|>'), which matches only the "
                    "probe's own id: no real call parses. When the name is found on both sides, only the call "
                    "turn (from the last per-call or section start marker) is searched before the id; if the "
                    "name is not there, the id is PRE_FUNC_NAME, its text is removed from the name prefix "
                    "(which becomes the id's suffix marker), and the parser reads the id up to that marker: "
                    "<|tool_call:begin|>a1b2c3<|tool_call:name|>get_weather<|tool_call:args|>{…}.",
        example="upstage-Solar-Open-100B.jinja"),
    Improvement(
        name=WRAPPED_CONTENT_TAGGED_CALLS,
        title="Always-wrapped content before tagged tool calls, its end marker optional",
        stage="parser",
        description="For tag-based tool formats (TAG_WITH_JSON / TAG_WITH_TAGGED) with always-wrapped content, "
                    "llama.cpp's parser reads the content as plain text up to the tool-call section, so the "
                    "content's start marker stays in the content ('<|content|>Paris is sunny…'). When the "
                    "output starts with the content start marker, the content is read after it, up to the "
                    "content end marker or the tool-call section, and the end marker is optional: a template "
                    "whose content end is also its end of turn (Solar Open: '<|end|>') never has it in a "
                    "model's answer, since generation stops there. Output without the start marker parses as "
                    "before.",
        example="upstage-Solar-Open-100B.jinja"),
]
"""Every generic improvement, in the order they act."""

IMPROVEMENTS_BY_NAME: dict[str, Improvement] = {i.name: i for i in IMPROVEMENTS}


def resolve_fidelity(value: "Fidelity | str | None", where: str = "fidelity") -> Fidelity:
    """``value`` as a :class:`Fidelity` (``None`` → the default, ``"llama.cpp"``). Raises
    :class:`~core.errors.AnalysisError` naming ``where`` for an unknown value."""
    if value is None:
        return DEFAULT_FIDELITY
    if isinstance(value, Fidelity):
        return value
    for f in Fidelity:
        if value == f.value or (isinstance(value, str) and value.lower() in (f.value, f.name.lower())):
            return f
    raise AnalysisError(where, f"unknown fidelity {value!r}; known: {', '.join(f.value for f in Fidelity)}")


def enabled_improvements(fidelity: "Fidelity | str | None", disabled: Iterable[str] = (),
                         where: str = "fidelity") -> frozenset[str]:
    """Names of the improvements that apply: none at ``llama.cpp`` fidelity, every one not in ``disabled``
    at ``improved``. Raises :class:`~core.errors.AnalysisError` for an unknown fidelity or improvement name."""
    f = resolve_fidelity(fidelity, where)
    disabled = set(disabled or ())
    unknown = sorted(disabled - set(IMPROVEMENTS_BY_NAME))
    if unknown:
        raise AnalysisError(where, f"unknown improvement name(s) {', '.join(unknown)}; known: "
                                   f"{', '.join(IMPROVEMENTS_BY_NAME)}")
    if f is Fidelity.LLAMA_CPP:
        return frozenset()
    return frozenset(i.name for i in IMPROVEMENTS if i.name not in disabled)




# ------------------------------------------------------------------------------------------------ mechanisms

def stringify_call_arguments(messages: list[Any]) -> tuple[list[Any], bool]:
    """``messages`` with every tool call's object ``arguments`` replaced by compact JSON text (the request
    path's ``json.dumps(..., separators=(",", ":"))``, non-ASCII kept); returns ``(messages, changed)``.
    New dicts where something changes; the input is never modified (improvement
    :data:`STRING_ARGUMENT_PROBES`)."""
    out: list[Any] = []
    changed = False
    for m in messages:
        calls = m.get("tool_calls") if isinstance(m, dict) else None
        if not calls:
            out.append(m)
            continue
        new_calls = []
        for tc in calls:
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict) and "arguments" in fn and not isinstance(fn["arguments"], str):
                fn = dict(fn)
                fn["arguments"] = json.dumps(fn["arguments"], ensure_ascii=False, separators=(",", ":"))
                tc = dict(tc)
                tc["function"] = fn
                changed = True
            new_calls.append(tc)
        m = dict(m)
        m["tool_calls"] = new_calls
        out.append(m)
    return out, changed


def with_reasoning_field(messages: list[Any], field: str) -> list[Any]:
    """``messages`` with each ``reasoning_content`` also under ``field`` (``"reasoning"``, ``"thinking"``): the
    name the template reads reasoning from (improvement :data:`REASONING_FIELD`). New dicts where something is
    added; the input is never modified; ``field`` "" returns ``messages`` as they are."""
    if not field:
        return messages
    return [{**m, field: m["reasoning_content"]} if isinstance(m, dict) and "reasoning_content" in m else m
            for m in messages]


__all__ = ["CALL_TURN_CAPS", "NULL_CONTENT_CALLS", "REASONING_FIELD", "REASONING_TURN_HEADER", "CALL_ID_BEFORE_NAME", "CALL_TURN_HEADER", "CONTENT_INSIDE_SECTION_START", "CONTENT_TURN_HEADER",
           "DEFAULT_FIDELITY", "Fidelity", "GEMMA_CALL_SYNTAX", "GENERATION_PROMPT_PREAMBLE", "IMPROVEMENTS",
           "IMPROVEMENTS_BY_NAME", "Improvement", "INSTRUCTION_CALL_FORMAT", "JSON_ARRAY_START", "JSON_CALL_SEPARATORS",
           "MARKER_WHITESPACE_ALIGNMENT",
           "OPEN_CONTENT_BEFORE_CALLS", "PYTHONIC_CALLS", "PYTHON_LITERAL_VALUES",
           "STRING_ARGUMENT_PROBES", "WRAPPED_CONTENT_TAGGED_CALLS", "enabled_improvements", "resolve_fidelity",
           "stringify_call_arguments", "with_reasoning_field", "TRANSFORMERS_DIALECT"]
