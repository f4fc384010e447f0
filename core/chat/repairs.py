"""Repairs: how a final parse of real model output is settled, as data (like :mod:`core.analysis.workarounds`).

Two kinds of rule live here:

* **contract** rules (:attr:`RepairStage.CONTRACT`) hold at *every* fidelity, because they are what the streaming
  contract and the OpenAI message shape promise, not a tolerance beyond llama.cpp:

  - ``stream-consistent-final`` — the final parse extends what a stream of the same output showed. llama.cpp's
    partial parse accepts a call whose final parse it then rejects (a required parameter missing, a value that
    does not fit its declared type, a JSON call without a rendered field); its stream then holds a call *and*
    the call's raw markup in ``content``. Here the final parse of an output is compared with the partial view of
    the same output (what :class:`~core.chat.stream.StreamingParser` had emitted); when the final parse does
    not extend that view, the view is the answer.
  - ``truncated-call`` — a final parse never returns tool-call ``arguments`` that are not a JSON object. A call
    cut off by the end of the output (a length-limited generation) is removed from ``tool_calls``, its raw text
    appended to ``content`` (the lossless contract, docs/fidelity-lossless.md) and reported here with its name. With ``is_partial`` (the caller
    says the output was cut) the call stays as llama.cpp returns it, and the note is added all the same. A
    complete call the final parse rejects (a required parameter missing, a mistyped value) ends the same way;
    the record's ``why`` (``"cut"`` / ``"rejected"``) tells the two apart.

  - ``unparsed-text`` — a final parse holds every word of the output: text it could not place (a tail held
    back for a marker that never came, text a rule read and dropped) is appended to ``content`` and reported;
    where the reference pins llama.cpp's drop (GPT-OSS built-in tool calls) the record alone carries it.

* **tolerance** rules (:attr:`RepairStage.TOLERANCE`) accept output a user would call valid that llama.cpp
  rejects; on at ``improved`` fidelity only, each switchable.

A repaired message carries :class:`FiredRepair` entries (``AssistantMessage.repairs``): the rule's name and the
character span ``[start, end)`` of the raw model output (without the generation prompt) it acted on. The CLI
prints them beside the OpenAI fields (``"repairs"``), the Playground shows a badge. The stream and the one-shot
parse tell the same story: :meth:`core.chat.stream.StreamingParser.finish` returns the one-shot parse's repairs
too, and a truncated call whose fragments were already streamed stays in the accumulated deltas (deltas are
never taken back, as with OpenAI's ``finish_reason: "length"``) — :func:`settled` drops it again.
"""

from __future__ import annotations

import contextvars
import enum
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

from ..errors import ChatTemplateExplorerError
from ..peg.chat import repair_nodes
from .char_audit import Account, audit_parse
from .lossless import (DRIFTED_CLOSER, lost_word_spans, markup_of, parser_marks, tool_names, trigger_words,
                       without_tool_names)
from .message import AssistantMessage, message_extends


class UnknownRepairError(ChatTemplateExplorerError, ValueError):
    """A repair name (``--disable-repair``, ``disabled_repairs``) that :data:`REPAIRS` does not define."""


class RepairStage(str, enum.Enum):
    """``CONTRACT``: holds at every fidelity (a guarantee of the API); ``TOLERANCE``: ``improved`` only."""

    CONTRACT = "contract"
    TOLERANCE = "tolerance"


@dataclass(frozen=True)
class Repair:
    """One named repair rule: ``name`` (stable id, used to switch it off), ``title``, ``stage``, ``accepts``
    (what output it accepts that would otherwise be rejected or mangled), ``example`` (a raw output it
    repairs), ``source`` (where the behaviour comes from: the bug reports or API that motivate it)."""

    name: str
    title: str
    stage: RepairStage
    accepts: str
    example: str
    source: str

    def to_json(self) -> dict[str, Any]:
        """``{"name", "title", "stage", "accepts", "example", "source"}``."""
        return {"name": self.name, "title": self.title, "stage": self.stage.value, "accepts": self.accepts,
                "example": self.example, "source": self.source}


@dataclass(frozen=True)
class FiredRepair:
    """A repair that acted on one parse: ``name`` (a :data:`REPAIRS` name), ``start`` / ``end`` (character span
    ``[start, end)`` of the raw model output, generation prompt excluded, it acted on), ``detail`` (for
    ``truncated-call`` the tool name), ``text`` (the raw text of the span, kept for the report), ``why`` (for
    ``truncated-call``: :data:`WHY_CUT` or :data:`WHY_REJECTED`; "" for the other rules).

    Meant to be merged with other span labels (the explain view): a plain record, ordered by ``start``."""

    name: str
    start: int
    end: int
    detail: str = ""
    text: str = ""
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        """``{"name", "start", "end", "detail", "text", "why"}``."""
        return {"name": self.name, "start": self.start, "end": self.end, "detail": self.detail, "text": self.text,
                "why": self.why}


WHY_CUT = "cut"
"""``truncated-call``'s ``why`` when the output ends inside the call (the parser waits for more: max_tokens)."""
WHY_REJECTED = "rejected"
"""``truncated-call``'s ``why`` when the call's text already does not fit the tools (a required parameter
missing, a value not of its declared type, parameters out of the template's order at llama.cpp fidelity), however
the output goes on — a complete call the parser rejected, not a cut."""


STREAM_CONSISTENT_FINAL = "stream-consistent-final"
TRUNCATED_CALL = "truncated-call"
ARGUMENTS_KEY_ALIAS = "arguments-key-alias"
JSON_FIELD_ORDER = "json-field-order"
DOUBLE_ENCODED_ARGUMENTS = "double-encoded-arguments"
FENCED_CALLS = "fenced-calls"
UNMARKED_CALLS = "unmarked-calls"
TAG_WHITESPACE = "tag-whitespace"
TRAILING_STOP_TOKEN = "trailing-stop-token"
REPEATED_TURN_HEADER = "repeated-turn-header"
MISSING_CLOSING_TAGS = "missing-closing-tags"
MISTYPED_VALUE_AS_STRING = "mistyped-value-as-string"
UNMARKED_ARGUMENT_VALUES = "unmarked-argument-values"
JSON_CALL_IN_TAGS = "json-call-in-tags"
CALLS_INSIDE_SECTION_MARKERS = "calls-inside-section-markers"
ARGUMENT_ORDER = "argument-order"
CALL_ID_OPTIONAL = "call-id-optional"
MISSING_REQUIRED_ARGUMENT = "missing-required-argument"
UNPARSED_TEXT = "unparsed-text"
UNPARSED_CHARACTERS = "unparsed-characters"
REASONING_START_REPEATED = "reasoning-start-repeated"
REASONING_END_WITHOUT_START = "reasoning-end-without-start"
# leniency of vLLM's / SGLang's parsers for Kimi K2, GLM, Qwen3-Coder
CALL_MARKER_WHITESPACE = "call-marker-whitespace"
CALL_ID_NAMESPACE_OPTIONAL = "call-id-namespace-optional"
CONTENT_BETWEEN_CALLS = "content-between-calls"
# JSON and pythonic call families
PYTHONIC_VALUES = "pythonic-values"
CALL_LIST_SPACING = "call-list-spacing"
PYTHON_CODE_MARKERS = "python-code-markers"
BUILTIN_CALL_SYNTAX = "builtin-call-syntax"
JSON_CALL_WRAPPERS = "json-call-wrappers"
REASONING_END_UNMATCHED = "reasoning-end-unmatched"
REASONING_START_WHITESPACE = "reasoning-start-whitespace"
TRAILING_EOS_TOKEN = "trailing-eos-token"
MESSAGES_AFTER_CALL = "messages-after-call"
# classes of the real-output batch tests/data/real_outputs_fresh
UNDECLARED_ARGUMENTS = "undeclared-arguments"
CALLS_AFTER_TEXT = "calls-after-text"
# MiniCPM5 and Qwen3-Coder drift, and end-of-turn tokens left at the end of an output
XML_ARGUMENTS_WRAPPER = "xml-arguments-wrapper"
TRAILING_END_OF_TURN = "trailing-end-of-turn"
INSTRUCTED_REASONING_MARKERS = "instructed-reasoning-markers"
# tool-call class of kept7 (serving engines' own parser tests: how calls are delimited and read)
CONSECUTIVE_CALL_BLOCKS = "consecutive-call-blocks"
REPEATED_PROMPT_TAIL = "repeated-prompt-tail"
UNCLOSED_FINAL_CALL = "unclosed-final-call"
ATTRIBUTE_ENTITIES = "attribute-entities"
# tool-call class of kept6 (vLLM's parser tests)
WELL_KNOWN_CALL_BLOCKS = "well-known-call-blocks"
CUT_MARKER_TEXT = "cut-marker-text"
CUT_CALL_OWN_TEXT = "cut-call-own-text"
GLUED_ARGUMENTS = "glued-arguments"
THINK_BLOCK_CALLS = "think-block-calls"
NON_OBJECT_ARGUMENTS = "non-object-arguments"   # read in core.peg.chat (ChatBuilder.value_arguments)
FREE_OBJECT_ELEMENTS = "free-object-elements"
LEADING_ZERO_INTEGER = "leading-zero-integer"
SETTLE_REPAIRS = frozenset({CUT_MARKER_TEXT, CUT_CALL_OWN_TEXT})
# from the misses of the eighth batch (tests/data/real_outputs_kept8; docs/fidelity.md)
JSON_CALLS_IN_CALL_MARKERS = "json-calls-in-call-markers"
QUOTED_NUMBER = "quoted-number"
# from the misses of the tenth batch (tests/data/real_outputs_kept10; docs/fidelity.md)
SPACED_TYPED_VALUE = "spaced-typed-value"
CALL_OBJECT_ID = "call-object-id"   # read in core.peg.chat (ChatBuilder._json_tools_flat)
"""Tolerance repairs :func:`settle` applies (the pipeline hands the enabled ones to the parser as
``settle_repairs``)."""
# where reasoning starts and ends, from the seventh batch (tests/data/real_outputs_kept7; docs/fidelity-reasoning.md)
TEMPLATE_DEFAULT_THINKING = "template-default-thinking"
CALL_ENDS_REASONING = "call-ends-reasoning"
BARE_ANSWER_AFTER_REASONING = "bare-answer-after-reasoning"
ANSWER_MARKER_WHITESPACE = "answer-marker-whitespace"
REASONING_BLOCKS_INTERLEAVED = "reasoning-blocks-interleaved"
HARMONY_BARE_HEADER = "harmony-bare-header"
# where reasoning starts and ends, from the sixth batch (tests/data/real_outputs_kept6; docs/fidelity-reasoning.md)
FORCE_NONEMPTY_CONTENT = "force-nonempty-content"
LEADING_THINK_BLOCK = "leading-think-block"
THINK_BLOCK = ("<think>", "</think>")
"""The reasoning markers ``leading-think-block`` reads at the start of an output whose template has none (the
DeepSeek-R1 / Qwen3 / MiniMax / Hunyuan / ERNIE convention, and the pair llama.cpp's content-only format read)."""
FORCE_NONEMPTY_KWARG = "force_nonempty_content"
"""The request's ``chat_template_kwargs`` key (vLLM's spelling) that asks for :data:`FORCE_NONEMPTY_CONTENT`."""
INSTRUCTED_MARKERS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("Here is my thought process:", "Here's my thought process:"), ("Here is my response:", "Here's my response:")),
)
"""(start phrases, end phrases) of reasoning written as plain text on the prompt's instruction (Granite 3.2:
"Write your thoughts after 'Here is my thought process:' and write your response after 'Here is my
response:'"); the first phrase of each must appear in the prompt, the others are accepted in the output."""
EOS_TOKENS: tuple[str, ...] = ("</s>", "<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<eos>")
"""End-of-sequence tokens of the common tokenizers (SentencePiece, GPT-2/Qwen, Llama 3, Gemma) that
``trailing-eos-token`` drops after the last call: servers stop at them and usually strip them."""

# tool-call classes of the ninth batch (serving engines' parser tests: TensorRT-LLM, mlx-lm)
JSON_ARGUMENTS_BODY = "json-arguments-body"
SECTION_OPENER_REPEATED = "section-opener-repeated"
SCHEMA_TYPE_ALIAS = "schema-type-alias"
NULLABLE_NULL = "nullable-null"
STRING_TYPE_ALIASES = ("str", "text")
"""The names of the string type that ``schema-type-alias`` reads in a parameter's ``"type"`` (vLLM's and mlx-lm's
MiniMax-M2 parsers read them as "string"; JSON Schema knows only "string")."""

# fallback-tier call shapes read by the engines' parsers (from real_outputs_kept10, real_outputs_reports2)
CALL_OPENER_DROPPED = "call-opener-dropped"
STANDALONE_JSON_CALL = "standalone-json-call"
CALL_LIST_UNBRACKETED = "call-list-unbracketed"   # read in core.peg.chat (ChatBuilder.standard_json_tools)
# from the misses of real_outputs_kept11 and real_outputs_reports3 (development data)
THOUGHT_LABEL_OMITTED = "thought-label-omitted"
# from the parse-class misses of real_outputs_kept11, real_outputs_kept12 and real_outputs_reports3 (development data)
DRIFTED_CLOSING_TAG = DRIFTED_CLOSER   # (named in core.chat.lossless, which reads its spans as markup)
CALL_SECTION_OMITTED = "call-section-omitted"
# from the misses of real_outputs_kept13, real_outputs_kept14 and real_outputs_kept15 (development data)
ARGS_SEPARATOR_OMITTED = "args-separator-omitted"
ACTION_AFTER_TEXT = "action-after-text"   # read in core.chat.formats.cohere2moe
TAG_ATTRIBUTE_SPACE = "tag-attribute-space"   # read in core.chat.formats._request_view (attribute_tag)
UNION_TYPED_VALUE = "union-typed-value"   # read in core.chat.generator (tagged_calls)
STRING_OPENER_OMITTED = "string-opener-omitted"   # read in core.chat.formats.gemma4
# from the misses of real_outputs_kept16 … real_outputs_kept19 and the leftovers of kept13–kept15 (development data)
SECTION_PER_CALL = "section-per-call"   # read in core.chat.generator (tagged_calls, build)
CALLS_IN_ONE_BLOCK = "calls-in-one-block"   # read in core.chat.formats.gemma4
PYTHON_DICT_CALL = "python-dict-call"   # read in core.peg.chat (ChatBuilder._json_tools_flat)
# from the misses of real_outputs_kept20 … real_outputs_kept25 (development data)
SECTION_OPENER_WHITESPACE = "section-opener-whitespace"   # read in core.chat.formats.kimi_k2
MESSAGE_CLOSER_AT_END = "message-closer-at-end"   # read in core.chat.formats.gpt_oss
MARKER_SPACE_OMITTED = "marker-space-omitted"   # read in core.peg.chat (ChatBuilder.standard_json_tools)
TAG_ATTRIBUTE_SPACES = ("", "\u0120")
"""The spellings ``tag-attribute-space`` reads for the space before a tag's attribute: none, and ``Ġ`` (U+0120,
the byte-level BPE tokenizers' mark for a space byte, left in the text when the model's tokens are decoded without
mapping it back)."""

REPAIRS: list[Repair] = [
    Repair(
        name=STREAM_CONSISTENT_FINAL,
        title="The final parse extends what the stream showed",
        stage=RepairStage.CONTRACT,
        accepts="An output whose partial parse shows a tool call that the final parse rejects: a JSON call "
                "without a field the template renders (Mistral v0.3's call id), a call the final grammar does "
                "not close. The call stays a call (its arguments are what the stream showed) instead of turning "
                "into content after its fragments were streamed. When the arguments the stream showed are not a "
                "JSON object (a tagged value that does not fit its declared type, a required parameter missing: "
                "the stream stops inside the value), truncated-call settles the call instead.",
        example='[TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "2+3"}}]   '
                '(Mistral v0.3 template, whose calls carry an id)',
        source="llama.cpp server: 'Invalid diff' / a stream holding both a call and its markup; "
               "streaming contract of this project (accumulated deltas = one-shot parse); the example: "
               "https://github.com/ml-explore/mlx-lm/issues/1374"),
    Repair(
        name=TRUNCATED_CALL,
        title="A call cut off (or left unfinished) is content and reported, not returned as a call",
        stage=RepairStage.CONTRACT,
        accepts="An output that ends inside a tool call (max_tokens reached), or whose last call the stream "
                "showed but whose arguments never became a JSON object. The complete calls stay in "
                "tool_calls, that one is removed from them, its raw text appended to content (the lossless "
                "contract: text never lives only in this record) and reported with its name; with is_partial "
                "it stays a call (as llama.cpp returns it) and is reported too. "
                "The record's why says which: 'cut' (the output ends inside the call) or 'rejected' (a complete "
                "call that does not fit the tools: a required parameter missing, a mistyped value).",
        example='<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
        source="OpenAI finish_reason 'length'; llama.cpp returns '{\"city\": \"Par' as arguments"),
    Repair(
        name=UNPARSED_TEXT,
        title="Text the final parse could not place is content",
        stage=RepairStage.CONTRACT,
        accepts="A final parse that holds no trace of some words of the output: a tail the parser held back "
                "waiting for a marker that never came (an output cut inside a call's name), text a rule read "
                "and dropped, a call that could not be read. The raw text from the opener of the construct "
                "holding the first such word to the end of the output is appended to content, and reported; "
                "why 'content'. Where llama.cpp's own grammar drops the text and the reference pins the message "
                "(GPT-OSS calls to a built-in tool: the server's to run), the message stays llama.cpp's at both "
                "fidelities and the record carries the text (why 'kept-out').",
        example="<tool_call>\n<function=special_functi   (cut inside the name)",
        source="issue 25 (lost text: vLLM and SGLang return text they cannot parse as content); "
               "llama.cpp ref-0428 / ref-0429 (GPT-OSS built-in tool recipients dropped)"),
    Repair(
        name=UNPARSED_CHARACTERS,
        title="Characters the final parse dropped without dropping a word are content",
        stage=RepairStage.TOLERANCE,
        accepts="A final parse that loses characters but no word, so unparsed-text does not see it (the character "
                "audit, core.chat.char_audit): the start of a marker cut by the end of the output (a lone '<' "
                "after content, 'plain ]<]minimax[>[<tool_ca'), a call the parse dropped whose words a kept call "
                "of the same name already holds, stray punctuation. The raw text from the first lost character "
                "(from the opener of the construct holding it when no kept call's text lies between) to the end "
                "is appended to content, and reported, when no field reads from that tail (a character lost "
                "between two pieces of a field is only reported). A cut closer after an accepted call ('</tool_' "
                "of '</tool_call>') is that call's markup, not lost. The word tail unparsed-text appended (Kimi K2's "
                "'sectio' of 'Normal text<|tool_calls_sectio') is replaced by the whole cut marker, even where the "
                "audit read a letter of it inside the marker.",
        example="plain ]<]minimax[>[<tool_ca   (MiniMax-M3: content 'plain ' at llama.cpp fidelity)",
        source="vLLM returns a final output whose call marker never completes as content: "
               "https://github.com/vllm-project/vllm/blob/06726266c0e0000947fca394f70a1148fda0ac46/tests/"
               "tool_parsers/test_minimax_m3_tool_parser.py#L248 (case kept6-vllm-minimax-m3-partial-start); "
               "the lossless contract (docs/fidelity-lossless.md) to the character"),
    Repair(
        name=REASONING_START_REPEATED,
        title="The reasoning start marker written again is markup, not reasoning",
        stage=RepairStage.TOLERANCE,
        accepts="An output that writes the reasoning start marker (<think>) although the generation prompt "
                "already opened reasoning, or writes it twice (whitespace around it allowed): the repeated "
                "marker is skipped, the reasoning starts after it. Auto-parsed templates (the generic reasoning "
                "parser), the Qwen3-Coder / Qwen3.5 handler and the Kimi K2 format (there an empty block after it "
                "too: <think></think> is no reasoning), and Kimi K3, whose marker is the section opener "
                "<|open|>think<|sep|> its thinking prompt ends with; llama.cpp keeps the marker inside "
                "reasoning_content.",
        example="<think>This is a reasoning section</think>This is the rest   (generation prompt "
                "<｜Assistant｜><think>\\n: DeepSeek-R1)",
        source="https://github.com/vllm-project/vllm/blob/04dbd8f32c4dc8ef1254eeaabd154a225948cf57/tests/reasoning/test_deepseekr1_reasoning_parser.py (real-output cases r1-new-line, r1-think-no-end: vLLM drops the "
               "opener wherever it stands before the end); Kimi K2.5: https://github.com/vllm-project/vllm/blob/"
               "0847a95f7ff542cb8c7e8b517841c5a29d84ff1f/tests/reasoning/test_kimi_k2_reasoning_parser.py "
               "(real-output cases kept6-vllm-kimi-k2-r-think-tags, -r-empty-thinking); Kimi K3: vLLM's K3 reasoning "
               "parser starts the reasoning after <|open|>think<|sep|> wherever it opens, the prompt's own one "
               "consumed as the generation prefix: https://github.com/vllm-project/vllm/blob/"
               "0ad0a4635e6fe4ec751cd0bdd8f9ece7898a88ec/tests/reasoning/test_kimi_k3_reasoning_parser.py "
               "(test_extract_reasoning_with_xtml_tags, test_streaming_split_open_marker_is_held_back: cases "
               "kept8-vllm-kimik3-xtml, -split-open)"),
    # -- reasoning repairs (issue 25 class 4; docs/fidelity-reasoning.md) -----------------------------------
    Repair(
        name=REASONING_END_WITHOUT_START,
        title="With thinking on, the output is reasoning until the end marker, start marker or not",
        stage=RepairStage.TOLERANCE,
        accepts="An output with no reasoning start marker when the request switches thinking on (the template "
                "renders differently with its thinking switch off: Qwen3 enable_thinking, Seed-OSS "
                "thinking_budget, Granite thinking) and the generation prompt does not open reasoning: the "
                "model reasons from its first token, so the text up to the end marker (or up to a tool call "
                "opener) is reasoning, and an output with no end marker is all reasoning (one that opens with "
                "{ or [ is a call or a JSON answer, not reasoning: unmarked-calls, response formats) - as vLLM's "
                "DeepSeek-R1 / Seed-OSS / Qwen3 parsers and SGLang's forced reasoning read it. The stream shows "
                "the text as reasoning at once (nothing is held back), so stream = one-shot. A request that "
                "switches thinking off, or a template without a switch, parses as before.",
        example="Some reasoning</seed:think>This is the rest   (Seed-OSS, thinking budget unlimited)",
        source="https://github.com/vllm-project/vllm/blob/3060cdea8c74cb592c57fb0639fec3901c6aeac5/tests/reasoning/"
               "test_seedoss_reasoning_parser.py (real-output cases seedr-*), vllm/reasoning/"
               "deepseek_r1_reasoning_parser.py (no start token: reasoning until the end token), "
               "https://github.com/vllm-project/vllm/blob/049d8df27dda4fd0caffa289ea12bfe5a47ac794/tests/reasoning/"
               "test_qwen3_reasoning_parser.py (q3-without-think); SGLang docs separate_reasoning.md "
               "(Qwen3-Thinking: always generates thinking; force_reasoning)"),
    Repair(
        name=REASONING_END_UNMATCHED,
        title="A reasoning end marker that closes nothing is markup, not content",
        stage=RepairStage.TOLERANCE,
        accepts="The reasoning end marker (</think>, [/THINK]) written in the answer after the reasoning block "
                "closed, or in an answer that opened none: it is dropped, the text around it stays content in "
                "order. llama.cpp keeps it inside content.",
        example="reasoning</think>content A</think>content B   (MiniMax-M2, whose prompt opens <think>)",
        source="https://github.com/vllm-project/vllm/blob/3f9d440b5aa288be6c1f52bc038dbfe303b9cb58/tests/reasoning/"
               "test_minimax_m2_reasoning_parser.py (real-output case mm2-double-end: the repeated </think> "
               "stripped from content); https://github.com/vllm-project/vllm/pull/30391 (Mistral: [/THINK] "
               "without [THINK] is content, the marker removed)"),
    Repair(
        name=REASONING_START_WHITESPACE,
        title="Whitespace before the reasoning start marker at the start of the output",
        stage=RepairStage.TOLERANCE,
        accepts="An output that begins with whitespace (a newline) before the reasoning start marker, in the "
                "special-format parsers that match the marker at the very start (Magistral / Ministral 3 "
                "[THINK]): the whitespace is skipped and the block is reasoning, as the auto-parser and "
                "llama.cpp's generic reasoning parser already read <think>.",
        example="\n[THINK]This is a reasoning section[/THINK]\nThis is the rest   (Magistral)",
        source="https://github.com/vllm-project/vllm/blob/04dbd8f32c4dc8ef1254eeaabd154a225948cf57/tests/reasoning/"
               "test_mistral_reasoning_parser.py (real-output case mag-new-line)"),
    Repair(
        name=TRAILING_EOS_TOKEN,
        title="The tokenizer's end-of-sequence token after the last call",
        stage=RepairStage.TOLERANCE,
        accepts="An end-of-sequence token (</s>, <|endoftext|>, <|end_of_text|>, <|eot_id|>, <eos>) that ends "
                "the output right after its last tool call, left in by a server that did not strip it: it is "
                "not content. Auto-parsed templates, the GigaChat 3 format and the Ministral 3 / Devstral format "
                "(whose template writes eos_token after every assistant turn); text after it is content as before.",
        example='I\'ll check that for you.<|function_call|>{"name": "f", "arguments": {"a": 1}}</s>   (GigaChat 3.1)',
        source="https://github.com/vllm-project/vllm/blob/102ebe1158710d3d09835e7887904042ed770264/tests/tool_parsers/"
               "test_gigachat3_tool_parser.py (real-output cases g3-mixed-eos, g31-mixed-eos); OpenVINO Model "
               "Server's Devstral parser test (https://github.com/openvinotoolkit/model_server/blob/"
               "129480e937caf2a95488a48bbeed7e31a2c1a0a5/src/test/llm/output_parsers/devstral_output_parser_test.cpp, "
               "ParseToolCallOutputWithContentAndSingleToolCall, ParseToolCallOutputWithArrayArguments: cases "
               "kept23-ovms-devstral-call-after-prose, kept23-ovms-devstral-array-argument)"),
    Repair(
        name=MESSAGES_AFTER_CALL,
        title="Harmony messages written after a GPT-OSS call's <|call|>",
        stage=RepairStage.TOLERANCE,
        accepts="A GPT-OSS output that goes on after a call and its <|call|> (the stop token was not honoured): "
                "the following <|start|>assistant messages are read as messages — analysis as reasoning, a "
                "commentary preamble and the final channel as content — instead of their raw markup becoming "
                "content. SGLang drops the final text after a call; the lossless contract keeps it as content.",
        example='…<|message|>{"files": []}<|call|><|start|>assistant<|channel|>final<|message|>Done.',
        source="https://github.com/sgl-project/sglang/blob/4e285c7766ea604ac2100100d7d02962b0831a57/test/registered/"
               "function_call/test_gpt_oss_detector.py (real-output case gptoss-call-then-final)"),
    Repair(
        name=INSTRUCTED_REASONING_MARKERS,
        title="Reasoning between the plain-text markers the prompt tells the model to write",
        stage=RepairStage.TOLERANCE,
        accepts="A template with no reasoning tags whose prompt (for this request) tells the model to write its "
                "thoughts after 'Here is my thought process:' and its answer after 'Here is my response:' "
                "(Granite 3.2 with thinking on): an output that starts with the first phrase has the text up to "
                "the second as reasoning and the rest as content ('Here's' accepted for 'Here is'). An output "
                "that does not start with it is content as before; one cut before the second phrase is reasoning "
                "(vLLM returns it as content in a final parse and as reasoning while streaming).",
        example="Here is my thought process:This is a reasoning sectionHere is my response:This is the rest",
        source="https://github.com/vllm-project/vllm/blob/04dbd8f32c4dc8ef1254eeaabd154a225948cf57/tests/reasoning/"
               "test_granite_reasoning_parser.py (real-output cases granite-think-*); vLLM "
               "vllm/reasoning/granite_reasoning_parser.py (both phrasings)"),
    # -- reasoning repairs from kept7 (docs/fidelity-reasoning.md "Where reasoning starts and ends") --
    Repair(
        name=TEMPLATE_DEFAULT_THINKING,
        title="A request that does not set enable_thinking gets the template's own default",
        stage=RepairStage.TOLERANCE,
        accepts="A request that leaves enable_thinking unset (missing or null, and not in chat_template_kwargs), "
                "for a template whose own default differs from enable_thinking=true: the prompt and generation "
                "prompt are rendered without the enable_thinking variable, so the template decides (DeepSeek "
                "V3.1: thinking off, the generation prompt closes the block with </think>), and the output is "
                "parsed for that prompt. llama.cpp always passes enable_thinking=true, so it reads the answer "
                "or the calls as reasoning. Auto-parsed templates; reported in the bundle's notes.",
        example='<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Tokyo"}'
                '<｜tool▁call▁end｜><｜tool▁calls▁end｜>   (DeepSeek V3.1, enable_thinking unset)',
        source="transformers' apply_chat_template passes only the kwargs a caller gives, and vLLM and SGLang pass "
               "the request's chat_template_kwargs as they are; lmdeploy's DeepSeek-V3 reasoning parser test "
               "asserts content for enable_thinking unset (https://github.com/InternLM/lmdeploy/blob/"
               "1263d5cd889b7ad500e85b8eb20401327a4516ab/tests/test_lmdeploy/serve/parsers/"
               "test_deepseek_v3_parser.py, kept7 case kept7-lmd-dsv3-hello-no-thinking-flag)"),
    Repair(
        name=CALL_ENDS_REASONING,
        title="A call written inside open reasoning, never closed after it, ends the reasoning",
        stage=RepairStage.TOLERANCE,
        accepts="An output whose reasoning block (opened by the generation prompt or by the model) is not closed "
                "before complete tool calls that the template's format reads (its own call rule, opener to "
                "closer), with no reasoning end marker anywhere after them: the reasoning ends at the call opener, "
                "the calls are calls, text after them is content. The text before the calls stays reasoning (the "
                "prompt opened the block). A call quoted in reasoning that the model then closes with the end "
                "marker stays reasoning (llama.cpp's reference case ref-0303), and so do prose naming the opener "
                "and a call the format cannot read (another layout). A call cut by the end of the output ends the "
                "reasoning too (a final parse cannot tell a cut from a prefix): its text is content, reported by "
                "unparsed-text. A stream shows the reasoning up to "
                "the opener and holds the rest back until the end marker or the end of the output decides (deltas "
                "are never taken back). Auto-parsed templates; llama.cpp keeps the call inside reasoning_content.",
        example='Let me think<tool_call>{"name":"get_weather","arguments":{"location":"Paris"}}</tool_call>   '
                "(Qwen3 thinking, the generation prompt opens <think>)",
        source="ollama's Qwen3 parser ends the thinking at <tool_call> (https://github.com/ollama/ollama/blob/"
               "fb30760996871fa9460115c753afd2c60d4ab0f7/model/parsers/qwen3_test.go, kept7 case "
               "kept7-oll-qwen3-call-inside-thinking); vLLM's Kimi K2 reasoning parser ends the reasoning at "
               "<|tool_calls_section_begin|> and keeps the text before it as reasoning (https://github.com/"
               "vllm-project/vllm/blob/01a703487ceb168659d63f5a71c84a6f9fef937b/vllm/reasoning/"
               "kimi_k2_reasoning_parser.py, 'implicitly end reasoning by starting a tool call section')"),
    Repair(
        name=FORCE_NONEMPTY_CONTENT,
        title="On the request's force_nonempty_content, a turn of reasoning only also answers with it",
        stage=RepairStage.TOLERANCE,
        accepts="A request whose chat_template_kwargs set force_nonempty_content (vLLM's request option, sent by "
                "clients of Nemotron 3 that cannot use an answer without content) and an output whose message has "
                "reasoning but no content and no tool call (a reasoning never closed, or closed with nothing after "
                "it): the content is the reasoning text, repeated; reasoning_content keeps it, as vLLM's stream "
                "ends (a stream has shown the reasoning and never takes it back; vLLM's one-shot parse moves it and "
                "leaves no reasoning). A turn with any content or call is left as it is.",
        example="<think>4   (Nemotron 3 Nano, chat_template_kwargs {\"force_nonempty_content\": true}: reasoning "
                "'4', content '4')",
        source="https://github.com/vllm-project/vllm/blob/028e77a725cd7c49766aa61a66abdcfc033d5bac/tests/reasoning/"
               "test_nemotron_v3_reasoning_parser.py (test_nemotron_v3_streaming_promotes_reasoning_to_content: "
               "real-output case kept6-vllm-nemotron-v3-r-promote-unclosed; the one-shot test's reading, "
               "kept6-vllm-nemotron-v3-r-force-nonempty, is not ours); clients that send the flag: "
               "https://github.com/openclaw/openclaw/blob/3ec1beb0d6a9f9b1ad5c33a64da7c0bfe380b75f/docs/providers/vllm.md "
               "(its vLLM plugin sends it for vllm/nemotron-3-* with thinking off)"),
    Repair(
        name=LEADING_THINK_BLOCK,
        title="A <think> block that opens the output is reasoning, though the template shows none",
        stage=RepairStage.TOLERANCE,
        accepts="An output that starts (after whitespace) with <think> although the template renders no reasoning "
                "markup (a thinking model served with a template that does not show its reasoning: a vendor's "
                "tool-call template, a copy of the non-thinking template): the text up to </think> (or to the end "
                "of the output when it never closes) is reasoning, the rest is parsed as the template's answer or "
                "calls. Only at the very start, so a <think> quoted inside an answer stays content; a stream holds "
                "back at most the few characters that may begin <think>. Auto-parsed templates.",
        example="<think>\nOkay, I will search.\n</think>\n<tool_calls>\n{\"name\": \"search_web\", …}\n"
                "</tool_calls>   (MiniMax-M1's template, which renders no reasoning)",
        source="llama.cpp's content-only format before the auto-parser read a leading <think> block whatever the "
               "template (common/chat.cpp common_chat_parse_content_only: try_parse_reasoning(\"<think>\", "
               "\"</think>\")); MiniMax-M1's function-call guide https://github.com/MiniMax-AI/MiniMax-M1/blob/"
               "4410f3bd16c96570bd4af5dbdb1911f6ac29b9de/docs/function_call_guide.md (real-output case "
               "kept-doc-m1-two-searches)"),
    Repair(
        name=BARE_ANSWER_AFTER_REASONING,
        title="An answer right after the reasoning end marker, without the content marker",
        stage=RepairStage.TOLERANCE,
        accepts="In a format that wraps the answer in its own markers after the reasoning (Cohere2 MoE: "
                "<|END_THINKING|><|START_TEXT|>answer<|END_TEXT|>), an answer written straight after the "
                "reasoning end marker without the opening marker: it is content (up to <|END_TEXT|> or the end of "
                "the turn), not a reasoning end marker left in the content. An answer that opens with the text "
                "or action marker parses as before.",
        example="thought<|END_THINKING|>Just plain text output   (Cohere2 MoE, the prompt opens <|START_THINKING|>)",
        source="ollama's Cohere parser reads the text after <|END_THINKING|> as content with or without "
               "<|START_TEXT|> (https://github.com/ollama/ollama/blob/fb30760996871fa9460115c753afd2c60d4ab0f7/"
               "model/parsers/cohere_test.go, TestCohereParseBareContent: kept7 case kept7-oll-cohere-bare-content)"),
    Repair(
        name=ANSWER_MARKER_WHITESPACE,
        title="Whitespace between the reasoning and the marker that opens the answer",
        stage=RepairStage.TOLERANCE,
        accepts="In a format that always wraps the answer in its own markers (Command A reasoning "
                "<|START_RESPONSE|>…<|END_RESPONSE|>, Command R7B, Cohere2 MoE <|START_TEXT|>…<|END_TEXT|>), "
                "whitespace (a line break) between the reasoning block's end marker and the answer's start marker, "
                "or before that marker at the start of the output: the whitespace is layout, the wrapped text is "
                "content and both markers are markup. Without it the answer failed to parse and came out as "
                "content with its markers in it. An answer with nothing between the markers parses as before.",
        example="<|START_THINKING|>abc<|END_THINKING|>\n<|START_RESPONSE|>Hello<|END_RESPONSE|>   (Command A "
                "reasoning: reasoning 'abc', content 'Hello')",
        source="Cohere's own output parser reads the thinking and the response across that line break "
               "(https://github.com/cohere-ai/melody/blob/1e571356e073288e27941b97b01180c44892ed79/parsing/"
               "stream_filter_test.go, case 'thinking and response with citations': "
               "<|END_THINKING|>\n<|START_RESPONSE|>, plan and text extracted)"),
    Repair(
        name=REASONING_BLOCKS_INTERLEAVED,
        title="Reasoning blocks between pieces of the answer, in a format that writes several per turn",
        stage=RepairStage.TOLERANCE,
        accepts="In a format whose template renders reasoning as blocks anywhere in the assistant turn, the model "
                "writing the markers itself (Apertus <|inner_prefix|>…<|inner_suffix|>, found by the improved "
                "workaround apertus-inner-thoughts): a block after some answer text, or a second block, is "
                "reasoning; the text around the blocks is content, in order. An unclosed last block is reasoning "
                "to the end of the output (as a first one is). Other formats keep one leading block.",
        example="hello <|inner_prefix|>think<|inner_suffix|>world   (Apertus: reasoning 'think', content "
                "'hello world')",
        source="SGLang's Apertus reasoning parser test reads every block, wherever it stands "
               "(https://github.com/sgl-project/sglang/blob/40bdc21b517b2ab496232796f11e732b488a9044/test/registered/"
               "unit/parser/test_reasoning_parser_apertus_cohere.py, kept7 cases kept7-sgl-apertus-text-before-block, "
               "kept7-sgl-apertus-two-blocks); the Apertus template renders thoughts blocks between tool calls"),
    Repair(
        name=HARMONY_BARE_HEADER,
        title="A harmony message after a call's <|call|> without its <|start|>assistant header",
        stage=RepairStage.TOLERANCE,
        accepts="With messages-after-call, a GPT-OSS message that follows a call's <|call|> and starts at "
                "<|channel|> without the <|start|>assistant header, or with the stray word 'commentary' in its "
                "place (the header's channel name written before the real channel): the filler is markup, the "
                "message is read as usual (analysis as reasoning, a further call as a call with parallel tool "
                "calls, final as content).",
        example='…{"location":"SF"}<|call|>commentary<|channel|>commentary to=functions.get_temp<|message|>'
                '{"location":"NYC"}<|call|>',
        source="SGLang's HarmonyParser returns to its idle state after <|call|>, opens a message at any "
               "<|channel|> and drops a 'commentary' text between <|call|> and <|channel|> "
               "(python/sglang/srt/parser/harmony_parser.py, _is_commentary_filler_between_blocks; its tests "
               "https://github.com/sgl-project/sglang/blob/05f70dc503324fcbc7cb999e78ab990f27a9597e/test/registered/"
               "unit/parser/test_harmony_parser.py: kept7 cases kept7-sgl-harmony-two-calls-commentary-filler, "
               "kept7-sgl-harmony-repeated-calls-filler)"),
    # -- end of the reasoning repairs -------------------------------------------------------------------------
    Repair(
        name=ARGUMENTS_KEY_ALIAS,
        title="'parameters' for 'arguments' (and back) in a JSON call",
        stage=RepairStage.TOLERANCE,
        accepts="A flat JSON call whose arguments key is the other common spelling: 'parameters' where the "
                "template renders 'arguments' (Hermes/Qwen), 'arguments' where it renders 'parameters' (Llama "
                "3.x). The model's own tool instructions often name the other key.",
        example='<tool_call>{"name": "write_file", "parameters": {"path": "a.txt", "content": "hello"}}</tool_call>',
        source="https://github.com/ahwurm/localharness/issues/104, "
               "https://github.com/ollama/ollama/issues/13519"),
    Repair(
        name=JSON_FIELD_ORDER,
        title="'arguments' before 'name' in a JSON call",
        stage=RepairStage.TOLERANCE,
        accepts="A flat JSON call with its two fields in the other order ({\"arguments\": {...}, \"name\": ...}); "
                "the arguments stream once the name is known.",
        example='{"arguments": {"city": "Paris"}, "name": "get_weather"}',
        source="llama.cpp's flat JSON layout fixes the order rendered by the template"),
    Repair(
        name=CALL_ID_OPTIONAL,
        title="A JSON call without the id field the template renders",
        stage=RepairStage.TOLERANCE,
        accepts="A flat JSON call whose template renders a call id field (Mistral v0.3: {\"name\", "
                "\"arguments\", \"id\"}) written without it, and with 'arguments' before 'name' as well: "
                "every call of a [TOOL_CALLS] array is kept (llama.cpp requires the id's comma, so only the last "
                "call survived, through stream-consistent-final).",
        example='[TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": "get_current_weather", '
                '"arguments": {"city": "San Francisco", "state": "CA", "unit": "celsius"}}]',
        source="https://github.com/vllm-project/vllm/blob/002d5731d3ee99b92d80b103be81c212245f1acf/tests/"
               "tool_parsers/test_mistral_tool_parser.py (Mistral-7B-Instruct-v0.3 outputs without ids, "
               "arguments before name); https://github.com/ml-explore/mlx-lm/issues/1374"),
    Repair(
        name=DOUBLE_ENCODED_ARGUMENTS,
        title="Arguments written as a JSON string holding the object",
        stage=RepairStage.TOLERANCE,
        accepts="JSON arguments that are a string whose text is the arguments object "
                "(\"{\\\"todos\\\": [...]}\"); llama.cpp's mapper ignores the string and returns {} (silent "
                "data loss). The string is decoded once it is complete.",
        example='<|tool_call_argument_begin|>"{\\"todos\\": []}"<|tool_call_end|>',
        source="https://github.com/MoonshotAI/Kimi-K2/issues/26"),
    Repair(
        name=FENCED_CALLS,
        title="JSON calls inside a Markdown code fence at the start of the answer",
        stage=RepairStage.TOLERANCE,
        accepts="An answer that starts with ```json (or ```) and the template's JSON call(s) — without the "
                "template's call markers — then ```; text after the fence stays content.",
        example='```json\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n```',
        source="https://github.com/ardanlabs/kronk/pull/950, https://github.com/ollama/ollama/issues/13519"),
    Repair(
        name=UNMARKED_CALLS,
        title="JSON calls without the template's call markers at the start of the answer",
        stage=RepairStage.TOLERANCE,
        accepts="An answer that starts with the template's JSON call object(s) of a known tool but not with the "
                "section / per-call marker the template renders (<tool_call>); text after them stays content. "
                "Only at the start, so JSON quoted in an answer is never taken for a call.",
        example='{"name": "terminal", "arguments": {"command": "free -m"}}\nI will execute this command...',
        source="https://github.com/pyrate-llama/hermes-ui/issues/6"),
    Repair(
        name=TAG_WHITESPACE,
        title="Spaces or no line breaks around XML-style call tags",
        stage=RepairStage.TOLERANCE,
        accepts="Qwen3-Coder-style calls (<tool_call>/<function=…>/<parameter=…>) whose tags are separated by "
                "spaces or by nothing instead of the template's line breaks; a string value loses the "
                "whitespace next to its tags (Qwen3.5's compact layout value\\n</parameter><parameter=…>: the "
                "value ends before the newline). In the Qwen3-Coder handler, markup indented as a block (every "
                "tag after a line break and indentation) is read when the template's layout fails, its string "
                "values without the whitespace at their ends (as SGLang and vLLM strip them); a value under an "
                "unindented tag keeps its own indentation (code). With content-between-calls, text between two "
                "such calls is content without the layout around it. Auto-parsed tagged calls (MiniMax-M2's "
                "<minimax:tool_call>\\n<invoke name=\"f\">\\n…) are also read with the tags back to back or "
                "spaced: the template's markers without their layout whitespace, tried after the template's "
                "layout. DeepSeek V3.2 / V4 DSML: any whitespace (or none) after an invoke's "
                "<｜DSML｜invoke name=\"…\"> where the template writes one line break. A JSON call section whose "
                "start marker holds a line break (Command R+'s Action:\\n```json) written with a space or nothing "
                "there (Action: ```json, as ollama's Command R+ template renders it): the content before it ends "
                "there too, and the marker is markup.",
        example="<tool_call> <function=f> <parameter=q> text </parameter> </function> </tool_call>",
        source="https://github.com/openclaw/openclaw/issues/61838, https://github.com/waybarrios/vllm-mlx/issues/63; "
               "ollama's Qwen3.5 parser trims the value (https://github.com/ollama/ollama/blob/"
               "050b6db095db556a36fa1fb2a13611ebe1eb9349/model/parsers/qwen35_test.go, batch-1 case ollama-qwen35-compact-xml-call); "
               "indented markup: SGLang's qwen3coder detector test (batch-1 cases fresh-sgl-qwen3coder-indented, "
               "-indented-text-between; https://github.com/sgl-project/sglang/blob/03400a9e4d955eff2606cfe621c83a710c16cc97/test/srt/test_function_call_parser.py); "
               "MiniMax-M2 back to back: https://github.com/vllm-project/vllm/blob/0c927c3451653f28e60cd552cff13ddc3c9ff49e/tests/tool_parsers/"
               "test_minimax_m2_tool_parser.py (cases kept6-vllm-minimax-m2-single, -multiple-params, -two-invokes, "
               "-two-invokes-one-delta) and https://github.com/sgl-project/sglang/blob/9f0bd17f0febd56547da510fca9c75ec2539a556/test/registered/function_call/test_minimax_m2_detector.py (kept7-sgl-minimaxm2-anyof-string); "
               "DSML: SGLang's DeepSeek V3.2 detector matches <｜DSML｜invoke\\s+name=\"…\"\\s*> and any text "
               "between the tags (https://github.com/sgl-project/sglang/blob/0071fe9c407ad59f2803cc319e1bcaa3ac2021f1/"
               "python/sglang/srt/function_call/deepseekv32_detector.py; TensorRT-LLM's copy, its test: cases "
               "kept9-trt-dsv32-single, kept9-trt-dsv4-single); Command R+'s section start: ollama's command-r "
               "parser reads Action: then ```json whatever lies between (https://github.com/ollama/ollama/blob/"
               "87d8a555ee7c23a667ff465b6ec9b6cba3de30af/model/parsers/commandr.go, its test commandr_test.go: cases "
               "kept10-ollama-commandr-single-tool-call, -multiple-tool-calls, -content-before-action, "
               "-streaming-token-by-token) and ollama's command-r-plus template writes \"Action: ```json\" "
               "(https://ollama.com/library/command-r-plus/blobs/922095537bc1)"),
    Repair(
        name=TRAILING_STOP_TOKEN,
        title="The stop token after a GPT-OSS call kept in the output",
        stage=RepairStage.TOLERANCE,
        accepts="<|call|> right after a GPT-OSS tool call: the token a server stops generation at, present when "
                "the output was logged or relayed without stripping it; it is not content.",
        example='<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": 1}<|call|>',
        source="https://github.com/waybarrios/vllm-mlx/pull/562"),
    Repair(
        name=REPEATED_TURN_HEADER,
        title="The assistant turn header the generation prompt wrote, repeated by the model",
        stage=RepairStage.TOLERANCE,
        accepts="An output that starts with the assistant turn header the generation prompt already ends with "
                "(the generation prompt up to its reasoning start marker, trailing whitespace dropped), then "
                "optional whitespace: the header is skipped and the rest parsed as usual. Where the generation "
                "prompt writes no whitespace after the header, spaces on its line followed by a word continue the "
                "header and are kept (Harmony's role header <|start|>assistant to=functions.f<|channel|>…: the "
                "recipient is read as after the prompt). Only at the very start and only once; while the output "
                "is still a prefix of the header, a stream shows nothing. Acts on the text before the grammar "
                "(for every parser, auto-parser and special handlers).",
        example='<|start|>assistant<|channel|>commentary to=functions.f<|constrain|>json<|message|>{"a": 1}   '
                '(generation prompt <|start|>assistant)',
        source="https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/942 (GPT-OSS). The header is read "
               "off the generation prompt, so the rule covers every template whose generation prompt writes one "
               "(ChatML <|im_start|>assistant, Functionary v2.2 <|from|>assistant\\n<|recipient|>, Hunyuan, "
               "KAT-V1, Llama 4), not only GPT-OSS. The role-header form: openai/harmony's own tests "
               "(https://github.com/openai/harmony/blob/ec7606df9e87e3d0a1fec9f50928c1e407f0c438/tests/"
               "test_harmony.py, test_tool_call_with_constrain_tokenized_correctly and "
               "test_tool_call_with_constrain_marker_adjacent: cases kept20-harmony-py-constrain-after-space-call, "
               "kept20-harmony-py-constrain-adjacent-call)"),
    Repair(
        name=MISSING_CLOSING_TAGS,
        title="Closing tags left out in a Qwen3-Coder XML call",
        stage=RepairStage.TOLERANCE,
        accepts="A Qwen3-Coder-style call (<tool_call><function=…><parameter=…>) whose </parameter> after a "
                "JSON-typed value (number, boolean, object, …) and/or </function> is missing: the value ends "
                "where (after whitespace) </function>, </tool_call> or the next <parameter= starts, the "
                "function where </tool_call> starts. String values still end at their </parameter> only "
                "(their text may hold any tag).",
        example="<tool_call>\n<function=square_the_number>\n<parameter=input_num>\n1024\n\n\n</tool_call>",
        source="https://github.com/vllm-project/vllm/issues/21571"),
    Repair(
        name=MISTYPED_VALUE_AS_STRING,
        title="A tagged argument value that does not fit its declared type, kept as a string",
        stage=RepairStage.TOLERANCE,
        accepts="In the XML-tagged argument layouts (Qwen3-Coder <parameter=…>, GLM <arg_key>/<arg_value>), a "
                "value of a parameter declared number / integer / boolean / null whose text is not such a JSON "
                "value (\"2026-01-15\" for an integer, \"yes\" for a boolean): the call is returned with the "
                "value as a JSON string instead of being rejected. A scalar-typed value shows in a stream once "
                "its closing tag is there (the parse cannot know its type earlier). Also DeepSeek V3.2 / V4 DSML "
                "<parameter … string=\"false\"> and MiniMax-M3 typed <key> elements (any non-string type, "
                "object and array included): a value that is no JSON of its type from its first character (prose) "
                "is the string it is, the call kept (tried after the JSON reading; the grammar stays llama.cpp's). "
                "A value that starts as one of its type and then goes on (12abc) was already streamed as that "
                "value; a stream cannot take it back, so that call stays rejected (truncated-call, why rejected).",
        example="<tool_call>\n<function=get_weather>\n<parameter=days>\n2026-01-15\n</parameter>\n</function>\n"
                "</tool_call>   (days declared integer)",
        source="https://github.com/ml-explore/mlx-lm/pull/1330, https://github.com/ml-explore/mlx-lm/pull/1310 "
               "(Qwen3-Coder: the raw string rather than a dropped call); https://github.com/antirez/ds4/pull/571 "
               "(GLM: a value that does not match its declared type stays a string); SGLang's DeepSeek V3.2 / V4 "
               "detectors keep a string=\"false\" value that is not JSON as the raw string "
               "(https://github.com/sgl-project/sglang/blob/ce5e431ba686ac578d8b0191eaca7765817e4959/test/"
               "registered/function_call/test_deepseekv32_detector.py, TestNonJsonObjectParamStreaming: cases "
               "kept7-sgl-dsv32-nonjson-object-param, kept7-sgl-dsv4-nonjson-object-param); MiniMax-M3 by the "
               "same rule (no engine test of its element values seen)"),
    Repair(
        name=UNMARKED_ARGUMENT_VALUES,
        title="A Gemma-syntax argument value written without the template's string markers",
        stage=RepairStage.TOLERANCE,
        accepts="In a Gemma-style call (Gemma 4 <|tool_call>call:NAME{k:v}, FunctionGemma "
                "<start_function_call>call:NAME{k:v}), a string value the model quotes with plain double quotes "
                "instead of the template's string delimiter (<|\"|>, <escape>) is read as that JSON string. Where "
                "the template writes every value between its delimiters (FunctionGemma), a value written bare up "
                "to the next ',' / '}' / ']' is read too: None / True / False (Python's spelling, the model's "
                "source language) as null / true / false, a JSON number or literal as itself, any other text as "
                "the string it is (trimmed); such a value shows in a stream once its delimiter is there. Both are "
                "tried only where the template's own reading fails (the grammar stays llama.cpp's).",
        example='<|tool_call>call:calculator{expression:"2+2"}<tool_call|>   (the template writes <|"|>2+2<|"|>)',
        source="https://github.com/ml-explore/mlx/issues/3460 (Gemma 4 via mlx: the call with the string in "
               "plain quotes returned as content; the report expects {\"expression\": \"2+2\"}: case "
               "kept3-mlx-3460-gemma4-calculator-plain-quotes); Unsloth's FunctionGemma fine-tuning notebook "
               "(https://github.com/unslothai/notebooks, a recorded generation with body:None and "
               "datetime:2025-06-06 14:00:00 written bare: case kept3-unsloth-fg-mobile-calendar-none); llama.cpp's "
               "FunctionGemma format writes non-string values raw (common_chat_params_init_function_gemma: "
               "<escape> around strings only), so a raw value is FunctionGemma's own spelling"),
    Repair(
        name=JSON_CALL_IN_TAGS,
        title="A Hermes JSON call inside <tool_call> where the template renders XML tags",
        stage=RepairStage.TOLERANCE,
        accepts="Qwen3-Coder-family output (<tool_call><function=…><parameter=…>) whose call is written the "
                "Qwen2.5/Hermes way: <tool_call>{\"name\": …, \"arguments\": {…}}</tool_call> ('parameters' "
                "also taken for 'arguments'), for a known tool. The same in the auto-parsed tagged layouts whose "
                "call marker is <tool_call> (GLM-4.5 / 4.7 <tool_call>NAME<arg_key>…): the JSON call inside it, "
                "tried after the template's layout.",
        example='<tool_call>\n{"name": "square_the_number", "arguments": {"input_num": 1024}}\n</tool_call>',
        source="https://github.com/gpustack/gpustack/issues/2660; GLM: mlx-lm's GLM-4.7 parser reads a JSON call "
               "payload ('used by some GLM outputs') when the body has no <arg_key>: https://github.com/ml-explore/"
               "mlx-lm/blob/30fba516195cbc6abc159b7c0a23778bfb2f2177/mlx_lm/tool_parsers/glm47.py "
               "(_parse_json_tool_call), its test: https://github.com/ml-explore/mlx-lm/blob/"
               "d78bf58e217c904ec282ed8da9b947491f78c022/tests/test_tool_parsing.py#L24 (case kept9-mlx-glm47-json)"),
    Repair(
        name=MISSING_REQUIRED_ARGUMENT,
        title="A tagged call with a required parameter missing is passed on",
        stage=RepairStage.TOLERANCE,
        accepts="In the auto-parsed XML-tagged argument layouts (Qwen3-Coder <parameter=…>, GLM "
                "<arg_key>/<arg_value>), a complete call that leaves out a parameter the tool declares required: "
                "the call is returned with the arguments it has (checking the schema is the client's job, as "
                "vLLM's and SGLang's parsers do) instead of being rejected into content. Tried after the "
                "template's layout and argument-order.",
        example="<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
                "</function>\n</tool_call>   (city and state required)",
        source="issue 25 (a call the stream showed, then rejected by the final parse); vLLM's qwen3coder parser "
               "passes the parameters it finds: https://github.com/vllm-project/vllm/blob/"
               "049d8df27dda4fd0caffa289ea12bfe5a47ac794/tests/tool_parsers/test_qwen3coder_tool_parser.py "
               "(test_extract_tool_calls_fallback_no_tags: a call without the optional unit)"),
    Repair(
        name=CALLS_INSIDE_SECTION_MARKERS,
        title="JSON calls between the two markers the template writes before them",
        stage=RepairStage.TOLERANCE,
        accepts="A JSON tool-call format whose section start is two adjacent markers and that has no section "
                "end (Llama 4: <|python_start|><|python_end|>{…}): the calls written between the two markers "
                "(<|python_start|>{…}<|python_end|>). Derived from the analysed section markers, not per family.",
        example='<|python_start|>{"name": "brave_web_search", "parameters": {"query": "latest news"}}<|python_end|>',
        source="https://github.com/vllm-project/vllm/issues/16214"),
    Repair(
        name=ARGUMENT_ORDER,
        title="Tagged arguments written in another order than the template's",
        stage=RepairStage.TOLERANCE,
        accepts="In the XML-tagged argument layouts (Qwen3-Coder <parameter=…>, GLM <arg_key>/<arg_value>, any "
                "auto-parsed tagged layout, DeepSeek's DSML <parameter name=…>), a call whose declared parameters come in any order: an optional "
                "one before a required one, required ones out of their declared order. Each parameter at most "
                "once, every required one present; up to 6 parameters per tool (more: the template's order "
                "only). llama.cpp rejects such a complete call (required first, in order).",
        example="<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n<parameter=city>\n"
                "Paris\n</parameter>\n</function>\n</tool_call>   (city required, days optional)",
        source="https://github.com/ggml-org/llama.cpp/issues/24351 (closed wontfix: Qwen3.6, an optional "
               "parameter before a required one fails the parse), https://github.com/ggml-org/llama.cpp/issues/27363 "
               "(Qwen3-Coder calls silently dropped), "
               "https://github.com/ggml-org/llama.cpp/pull/24516 (Qwen3 grep with path before the required "
               "pattern), https://github.com/ggml-org/llama.cpp/pull/26472, "
               "https://github.com/ggml-org/llama.cpp/pull/20171"),
    # -- issue 25, calls1 block (Kimi K2, GLM, Qwen3-Coder leniency of the field's parsers) --------------------
    Repair(
        name=CALL_MARKER_WHITESPACE,
        title="Whitespace around a call's special-token markers where the template writes none",
        stage=RepairStage.TOLERANCE,
        accepts="Whitespace (spaces, line breaks) between the markers of a call where the template renders none "
                "or other whitespace: Kimi K2 around the call id and the JSON arguments "
                "(functions.f:0 <|tool_call_argument_begin|> {…} <|tool_call_end|>) and between the calls of one "
                "section (<|tool_call_end|>\\n<|tool_call_begin|>, before <|tool_calls_section_end|>); "
                "auto-parsed XML-tagged argument layouts (GLM <arg_key>/<arg_value>) after the function name, "
                "between the tags and before the call's closing marker (GLM-4.5/4.6 write a line break after "
                "each, a template edited for llama.cpp writes none).",
        example='I\'ll check. <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0 '
                '<|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_calls_section_end|>',
        source="vLLM's Kimi K2 parser allows whitespace around the id and the arguments: "
               "https://github.com/vllm-project/vllm/blob/0825a6c362795d1643ce5684bb3cfa26ff6ffed2/tests/"
               "tool_parsers/test_kimi_k2_tool_parser.py (real-output cases kimi-*); TensorRT-LLM's Kimi K2 "
               "parser finds every <|tool_call_begin|>…<|tool_call_end|> in the section, whatever lies between: "
               "https://github.com/NVIDIA/TensorRT-LLM/blob/65b31db1b401d3752b8ebe7c29093cbfb6af04b7/tensorrt_llm/"
               "serve/tool_parser/kimi_k2_tool_parser.py (case kept9-trt-kimi-multiple); vLLM's GLM-4.5 parser "
               "reads <arg_key>…</arg_key> and <arg_value> with any whitespace between them: "
               "https://github.com/vllm-project/vllm/blob/024364d6695352f41c029121af6b8ecf2ae60184/tests/"
               "tool_parsers/test_glm4_moe_tool_parser.py (real-output cases glm-*)"),
    Repair(
        name=CALL_ID_NAMESPACE_OPTIONAL,
        title="A Kimi K2 call id without its 'functions.' namespace",
        stage=RepairStage.TOLERANCE,
        accepts="A Kimi K2 call whose id is NAME:IDX instead of the template's functions.NAME:IDX (for a known "
                "tool): the call is read, its id kept as written.",
        example='<|tool_calls_section_begin|><|tool_call_begin|>get_weather:0<|tool_call_argument_begin|>'
                '{"city": "Tokyo"}<|tool_call_end|><|tool_calls_section_end|>',
        source="vLLM's Kimi K2 parser takes the name from the id with or without the prefix: "
               "https://github.com/vllm-project/vllm/blob/0825a6c362795d1643ce5684bb3cfa26ff6ffed2/tests/"
               "tool_parsers/test_kimi_k2_tool_parser.py (real-output case kimi-no-functions-prefix)"),
    Repair(
        name=CONTENT_BETWEEN_CALLS,
        title="Text between two tool calls is content, and the call after it is a call",
        stage=RepairStage.TOLERANCE,
        accepts="In the auto-parsed XML-tagged layouts with a per-call marker (GLM <tool_call>NAME<arg_key>…), "
                "text written between two calls: it goes to content (with its whitespace, after the text "
                "before the first call) and the call after it is parsed. llama.cpp ends the calls at the text and "
                "returns the later call as content. Also JSON calls each in its own marker block (Granite 4, "
                "Hermes: <tool_call> {…} </tool_call>), with parallel calls: text where a further block was "
                "expected is content up to that block, which is a call (the whitespace right after a call stays "
                "layout, as the stream's fast path after a call reads it). And MiniCPM5's <function name=…> "
                "calls, whose template renders text between and after the calls (a content's <tool_sep> marks "
                "where each call goes): text after a call, up to the next call or the end, is content with the "
                "whitespace around it; whitespace alone after a call stays layout. The same in the Qwen3-Coder / "
                "Qwen3.5 handler's <tool_call><function=…> calls (Step-3.5 writes them too): text after a call, "
                "with the whitespace before it, up to the next call (which is read) or the end. And JSON calls in "
                "a marked section (Apertus <|tools_prefix|>[…]<|tools_suffix|>), with parallel calls: text after "
                "the section and a further section, once or more, are content and calls (text after the last "
                "section is the trailing content it always was).",
        example="I will help you get the weather info.\n\n<tool_call>get_weather\n<arg_key>city</arg_key>\n"
                "<arg_value>Beijing</arg_value>\n</tool_call>\n\nmeaningwhile, I will also check the weather in "
                "Shanghai.\n\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Shanghai</arg_value>\n"
                "</tool_call>",
        source="vLLM's GLM-4.5 parser extracts every <tool_call> block wherever it stands (it keeps only the text "
               "before the first as content; here the text between is content too, the lossless contract): "
               "https://github.com/vllm-project/vllm/blob/024364d6695352f41c029121af6b8ecf2ae60184/tests/"
               "tool_parsers/test_glm4_moe_tool_parser.py (real-output case glm-mixed-content); vLLM's Granite 4 "
               "parser keeps the text between <tool_call> blocks as content: https://github.com/"
               "vllm-project/vllm/blob/34f830e95846db95409c0cd6d8a168066ebd8df9/tests/tool_parsers/"
               "test_granite4_tool_parser.py (case kept6-vllm-granite4-content-between); SGLang's MiniCPM5 detector "
               "keeps the text around every <function> block, whitespace included, as normal text: "
               "https://github.com/sgl-project/sglang/blob/032cfb6f206222145c6d0b377a90b89d05a3c170/test/"
               "registered/unit/function_call/test_minicpm5_detector.py (test_detect_and_parse_single_call_v3, "
               "test_multiple_calls_interleaved_text_v3: cases kept8-sgl-minicpm5-single, -interleaved); vLLM's "
               "Qwen3 XML parser keeps the text after the call, line breaks included: https://github.com/"
               "vllm-project/vllm/blob/1cbe721380ab9295854e4db1e819c40b14c54828/tests/tool_parsers/"
               "test_qwen3xml_tool_parser.py#L35 (case kept6-vllm-qwen3xml-surrounding-text); SGLang's Step-3.5 "
               "detector keeps text between calls: https://github.com/sgl-project/sglang/blob/"
               "df758f476f27b65811ec800db143a4a003fa493d/test/registered/unit/function_call/"
               "test_step3p5_detector.py (test_interleaved_text_is_preserved_in_both_modes); SGLang's Apertus "
               "detector reads every <|tools_prefix|> block and keeps the text around them as normal text: "
               "https://github.com/sgl-project/sglang/blob/8d240b18f5a62aec773facd0e02045ac39f00893/test/"
               "registered/unit/function_call/test_apertus2509_detector.py "
               "(test_chunk_invariance_for_multiple_blocks_and_trailing_text, "
               "test_second_incomplete_block_stays_buffered: cases kept11-sglang-apertus-multiple-blocks-trailing-"
               "text, -second-block-buffered)"),
    # ---- JSON and pythonic call families ---------------------------------------------------------------------------
    Repair(
        name=PYTHONIC_VALUES,
        title="Pythonic call values as Python writes them",
        stage=RepairStage.TOLERANCE,
        accepts="In pythonic calls (LFM2 <|tool_call_start|>[f(a=1)]<|tool_call_end|>, the PYTHONIC format of "
                "Llama 3.2 / 4 templates), a value that llama.cpp's quote swap turns into invalid JSON or "
                "rejects: a string with raw line breaks or other control characters, any Python escape (\\', "
                "\\\" inside single quotes, \\x41, an unknown \\d), an integer with leading zeros (07), a tuple, "
                "a trailing comma. The value is decoded by Python's rules and written as JSON.",
        example="<|tool_call_start|>[set_date(month=07, day=05)]<|tool_call_end|>",
        source="vLLM's LFM2 parser rewrites before ast.parse (control characters escaped, leading-zero integers, "
               "https://github.com/vllm-project/vllm/blob/011cde7c177a29bbcb0052d80e5ab7671a70f634/vllm/"
               "tool_parsers/lfm2_tool_parser.py); vLLM's and SGLang's pythonic parsers read values with Python's "
               "ast (https://github.com/sgl-project/sglang/blob/0813438c032112acef251f02fc8911044c68ba06/python/"
               "sglang/srt/function_call/pythonic_detector.py); real-output cases lfm2-multiline-string, "
               "lfm2-leading-zero"),
    Repair(
        name=CALL_LIST_SPACING,
        title="Whitespace between a call section marker and its pythonic call list",
        stage=RepairStage.TOLERANCE,
        accepts="LFM2 output with spaces or line breaks between <|tool_call_start|> and the [ of the call list, "
                "or between the ] and <|tool_call_end|>; llama.cpp's grammar wants them adjacent.",
        example="<|tool_call_start|> [get_candidate_status(candidate_id='12345')]<|tool_call_end|>",
        source="vLLM's LFM2 parser strips the text between the markers "
               "(https://github.com/vllm-project/vllm/blob/011cde7c177a29bbcb0052d80e5ab7671a70f634/vllm/"
               "tool_parsers/lfm2_tool_parser.py); real-output case lfm2-space-after-start"),
    Repair(
        name=PYTHON_CODE_MARKERS,
        title="Llama's code-block tokens around tool calls",
        stage=RepairStage.TOLERANCE,
        accepts="Tool calls after <|python_tag|> (Llama 3.x: before a JSON call, when the template names the "
                "token or is written in Llama 3's chat format) or inside <|python_start|> … <|python_end|> (Llama 4: around a pythonic call list, the "
                "end token optional), where the template renders the calls bare: the tokens are markup, not "
                "content. With parallel calls the tag may stand again before each further JSON call "
                "(<|python_tag|>{…}<|python_tag|>{…}: SGLang's Llama 3.2 detector splits on it, batch-1 case "
                "sgl-llama32-python-tag-twice).",
        example='<|python_tag|>{"type": "function", "name": "trending_songs", "parameters": {"n": "10"}}',
        source="vLLM llama3_json (bot token <|python_tag|>) and llama4_pythonic (strips <|python_start|> / "
               "<|python_end|>) parsers, https://github.com/vllm-project/vllm/blob/"
               "e2fc92ec91d754266a76b9369da48f6693300c2e/vllm/tool_parsers/llama4_pythonic_tool_parser.py; "
               "Meta's Llama 3.1 prompt format (https://github.com/meta-llama/llama-models/blob/"
               "ab8f592c14ff376f8de6dbc164f428c2845bd6b6/llama_models/llama3_1/prompt_format.md)"),
    Repair(
        name=BUILTIN_CALL_SYNTAX,
        title="A Llama 3.1 built-in tool call NAME.call(arg=\"v\")",
        stage=RepairStage.TOLERANCE,
        accepts="<|python_tag|>NAME.call(key=value, …) for a tool of the request, as the Llama 3.1 template "
                "itself renders a built-in tool's call (brave_search, wolfram_alpha): the arguments are "
                "Python keyword arguments; read when the template writes '.call(' after <|python_tag|>.",
        example='<|python_tag|>brave_search.call(query="latest price of 1oz gold")',
        source="Meta's Llama 3.1 / 3.3 prompt format docs (model responses recorded there); llama.cpp's Llama 3.x "
               "handler maps NAME.call(...) of a built-in tool to a call; real-output cases l31-brave-search, "
               "l33-brave-search"),
    Repair(
        name=JSON_CALL_WRAPPERS,
        title="A JSON call array in a wrapper the template does not render",
        stage=RepairStage.TOLERANCE,
        accepts="A JSON-array call format (xLAM: a bare [{\"name\": …, \"arguments\": …}]; Granite: "
                "<|tool_call|>[…]) whose calls come after content inside a ```json / ``` fence, inside "
                "<tool_call> … </tool_call>, after [TOOL_CALLS], or after the plain-text <tool_call> instead of "
                "the template's <|tool_call|> (whitespace allowed after it); or, where the template's tool "
                "instructions show the calls as WORD[{\"name\": …}] (Phi-4-mini's functools[…]), inside WORD[ … ]: "
                "the wrapper is markup.",
        example='I\'ll help you check the weather.<tool_call>[{"name": "get_current_weather", "arguments": '
                '{"city": "Dallas"}}]</tool_call>',
        source="vLLM's xLAM parser (code fences, <tool_call> tags, [TOOL_CALLS], content before: "
               "https://github.com/vllm-project/vllm/blob/10a67515200ceb7bd3f91f6e5aba0c4c13e6ef8f/tests/"
               "tool_parsers/test_xlam_tool_parser.py) and Granite parser (the <tool_call> string prefix of "
               "Granite 3.1: https://github.com/vllm-project/vllm/blob/2ab4733ef9fc3c039a5868e0141fee3b7fd95890/"
               "tests/tool_parsers/test_granite_tool_parser.py) and Phi-4-mini parser (functools[…]: "
               "https://github.com/vllm-project/vllm/blob/2471a1c1430e2a066029bc743562eee6db2feab0/tests/"
               "tool_parsers/test_phi4mini_tool_parser.py)"),
    # ---- classes of the real-output batch tests/data/real_outputs_fresh --------------------------------------------
    Repair(
        name=UNDECLARED_ARGUMENTS,
        title="A call's argument the tool does not declare (pythonic keyword, Kimi K3 typed argument)",
        stage=RepairStage.TOLERANCE,
        accepts="In pythonic calls (Llama 3.2 / 4 [f(a=1)], LFM2), a keyword argument whose name the tool's "
                "schema does not declare, its value any Python literal (a list, a nested dict): it is passed on "
                "in the arguments instead of the whole call being rejected into content. Checking the schema is "
                "the client's job. Also Kimi K3's <|open|>argument key=\"K\" type=\"T\"<|sep|>V"
                "<|close|>argument<|sep|> with an undeclared key: the value read by its own type attribute "
                "(string: the raw text; another type: a JSON value, and text that is no JSON the string it is).",
        example="[get_weather(location='New York', unit='celsius', data=[1, 2, 3])]   (data not declared)",
        source="SGLang's PythonicDetector and vLLM's pythonic parsers read every keyword with ast and pass it on: "
               "https://github.com/sgl-project/sglang/blob/03400a9e4d955eff2606cfe621c83a710c16cc97/test/srt/test_function_call_parser.py "
               "(batch-1 cases sgl-py-list-arg, sgl-py-dict-arg, sgl-py-two-calls-nested); SGLang's Kimi K3 "
               "detector reads an undeclared argument by its type attribute: "
               "https://github.com/sgl-project/sglang/blob/0396a0526bdc9deb22e3aa0c50157b62a75ff7a3/test/"
               "registered/function_call/test_kimik3_detector.py (test_detect_and_parse_single_call: case kept7-sgl-kimik3-single, opts declared nowhere)"),
    Repair(
        name=CALLS_AFTER_TEXT,
        title="A call after text: a pythonic list after text, text between two lists or two Gemma-syntax calls",
        stage=RepairStage.TOLERANCE,
        accepts="In the bare pythonic format (Llama 3.2 / 4: a [f(a=1), …] list the template renders with no "
                "marker), a call list that starts after some text, or a second list after text that follows "
                "the first: the lists are calls, the text around them content in order. A list starts only "
                "where '[' is followed at once by a tool's name and '(' (or at <|python_start|> / <|python_tag|> "
                "with python-code-markers), so brackets in prose stay content; a list that cannot be read stays "
                "content. Not with tool_choice required (the answer is the calls). In the Gemma call syntax (Gemma 4, "
                "FunctionGemma <start_function_call>call:NAME{…}<end_function_call>), with parallel calls, a "
                "further call after the text that follows the calls. A Markdown fence (```tool_code, ```python "
                "or ```) that holds only a pythonic call list is markup of the calls (Gemma 3 writes its calls so); "
                "a fence around anything else stays content, and a closing ``` (or a backtick) that ends the "
                "output is content, not held back for a fence that never comes.",
        example="Here's a tool call: [get_weather(location='New York', unit='celsius')]   |   "
                "The search term is \"tech experts\".\n```tool_code\n[filter(column_name='Division')]\n```",
        source="SGLang's PythonicDetector reads the lists anywhere in the text and returns the rest as normal "
               "text: https://github.com/sgl-project/sglang/blob/03400a9e4d955eff2606cfe621c83a710c16cc97/test/"
               "srt/test_function_call_parser.py (batch-1 cases sgl-py-text-then-call, sgl-py-text-before, "
               "sgl-py-two-lists, sgl-py-python-start*); ollama's FunctionGemma parser reads a call after text "
               "between calls: https://github.com/ollama/ollama/blob/04e80a45755e22d0d393a93747570fad135e9159/model/parsers/functiongemma_test.go "
               "(batch-1 case ollama-fg-content-between); a fenced list: https://github.com/vllm-project/vllm/issues/14734 "
               "(Gemma 3 27B, case kept-vllm-14734-tool-code-fence; the reporter expects the call)"),
    # ---- MiniCPM5 and Qwen3-Coder drift, end-of-turn tokens left at the end ---------------------------------------
    Repair(
        name=XML_ARGUMENTS_WRAPPER,
        title="A MiniCPM5 call's params inside an <arguments> element",
        stage=RepairStage.TOLERANCE,
        accepts="A MiniCPM5 call <function name=\"…\"> whose <param name=\"…\"> elements sit inside "
                "<arguments> … </arguments>, which the template never renders: the wrapper is markup, the "
                "params are read as usual. A parse-only alternative: the grammar keeps the template's layout.",
        example='<function name="get_weather"><arguments><param name="city">Paris</param></arguments></function>',
        source="ollama's MiniCPM5 parser accepts the wrapper: https://github.com/ollama/ollama/blob/"
               "a7f786f12b5f4a05de2d57528cf7a157935810b0/model/parsers/minicpm5_test.go (batch-1 case "
               "ollama-minicpm5-arguments-wrapper)"),
    Repair(
        name=TRAILING_END_OF_TURN,
        title="The end-of-turn token that ends the output is markup, not content",
        stage=RepairStage.TOLERANCE,
        accepts="An output that ends (trailing whitespace allowed) with a token the template writes right after "
                "an assistant turn (<|im_end|>, <end_of_turn>, <|eot_id|>, <|END_OF_TURN_TOKEN|>: the leading "
                "markers of the template's end-of-turn text, derived from renders, core.chat.samples."
                "end_of_turn_candidates), with one of the parser's stop strings, or with a stop token of the "
                "call format (FunctionGemma <start_function_response>): a raw transcript or an engine that did "
                "not strip the stop token. The token is cut before parsing, the rest parses as usual; a token "
                "the parser itself reads (a preserved token) is never cut, nor one followed by text. A stream "
                "holds back a content or reasoning tail that may still become such a token until the next text "
                "(or the end) decides, so stream = one-shot.",
        example="The current temperature in Paris is 22.0 degrees.<|im_end|>   (Qwen2.5)",
        source="vLLM's SamplingParams: skip_special_tokens=True and include_stop_str_in_output=False by default "
               "(https://docs.vllm.ai/en/v0.8.3/api/inference_params.html), so neither the end-of-turn token nor "
               "a stop string reaches its parsers; SGLang the same (skip_special_tokens); Google's FunctionGemma "
               "notebook (https://github.com/google-gemini/gemma-cookbook/blob/e119e3d24e2f618fafa7203662c8f7a2c"
               "791de35/docs/functiongemma/finetuning-with-functiongemma.ipynb: generation ends at "
               "<start_function_response> or <end_of_turn>)"),
    # ---- tool-call class of kept7 (serving engines' parser tests): how calls are delimited and read ----------------
    Repair(
        name=CONSECUTIVE_CALL_BLOCKS,
        title="A second marked call block right after the first",
        stage=RepairStage.TOLERANCE,
        accepts="With parallel calls, a further call block written right after the first (whitespace between "
                "allowed) where the format reads one: LFM2's marked call list <|tool_call_start|>[…]"
                "<|tool_call_end|> twice in a row; Qwen3-Coder's bare <function=…>…</function> blocks (the "
                "first call may come without <tool_call>, so may the next ones: a bare block closes where the "
                "next bare one opens). Their calls follow the first block's; the grammar keeps the template's "
                "layout. llama.cpp ends the calls at the first block and the second one's raw text becomes "
                "content.",
        example='Getting weather.<|tool_call_start|>[get_weather(location="Paris")]<|tool_call_end|>'
                '<|tool_call_start|>[get_weather(location="London")]<|tool_call_end|>',
        source="ollama's LFM2 parser goes on reading calls when <|tool_call_start|> follows <|tool_call_end|>: "
               "https://github.com/ollama/ollama/blob/20d29840046b355919953111e869827e35ab8134/model/parsers/"
               "lfm2.go (eat, LFM2CollectingToolCalls); case kept7-oll-lfm2-two-calls (ollama lfm2_test.go "
               "multiple_tool_calls); SGLang's Qwen3-Coder detector reads every <function=…> block "
               "(https://github.com/sgl-project/sglang/blob/2c5fa03198d0630444a1bfe74b4eaae310173eee/test/"
               "registered/function_call/test_qwen3_coder_detector/test_cases.py, test_double_tool_call: case "
               "kept7-sgl-qwen3coder-double)"),
    Repair(
        name=REPEATED_PROMPT_TAIL,
        title="The section the generation prompt opened last, opened again by the model",
        stage=RepairStage.TOLERANCE,
        accepts="An output that starts with the last section the generation prompt opens — the tail of the "
                "assistant turn header (repeated-turn-header's header) from the last place where the header's "
                "own opening token comes again (Kimi K3 with thinking off: the prompt ends "
                "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>, the output writes "
                "<|open|>response<|sep|> again) — then optional whitespace: that tail is skipped once, the rest "
                "parsed as usual. Read off the generation prompt, never per family; acts where "
                "repeated-turn-header acts (before the grammar, a stream shows nothing while the output may still "
                "be the tail). A tail holding the reasoning start marker is reasoning-start-repeated's.",
        example='<|open|>response<|sep|>hi there<|close|>response<|sep|><|close|>message<|sep|>   (Kimi K3, '
                'thinking off)',
        source="SGLang's Kimi K3 detector reads the response section wherever it opens: "
               "https://github.com/sgl-project/sglang/blob/0396a0526bdc9deb22e3aa0c50157b62a75ff7a3/test/"
               "registered/function_call/test_kimik3_detector.py (cases kept7-sgl-kimik3-single, "
               "kept7-sgl-kimik3-no-tools-channel); the same shape as the repeated <think> vLLM drops "
               "(reasoning-start-repeated)"),
    Repair(
        name=UNCLOSED_FINAL_CALL,
        title="A last call whose arguments are complete, at the end of the output without its closer",
        stage=RepairStage.TOLERANCE,
        accepts="A final parse (not is_partial) of an output that ends inside its last call after the call's "
                "arguments are complete: every value closed, every required parameter present, only the call's "
                "closing markup missing or cut (GLM <tool_call>…<arg_value>.</arg_value> then nothing, or a cut "
                "</tool_). The call is returned as the output would be with that one closer completed; the "
                "closer must not complete a value nor need another repair, so a cut value (<arg_value>nee) or a "
                "call missing a required parameter stays truncated-call's (content, why cut). An optional "
                "parameter the cut may have dropped cannot be told apart: a caller that knows the output was cut "
                "(finish_reason length) passes is_partial and gets llama.cpp's partial call. The stream shows "
                "the arguments as they grow and the call whole at its end (improved releases calls whole), as "
                "the one-shot parse.",
        example="<tool_call>grep\n<arg_key>pattern</arg_key>\n<arg_value>needle</arg_value>\n<arg_key>path"
                "</arg_key>\n<arg_value>.</arg_value></tool_   (GLM-4.6)",
        source="ollama's GLM-4.6 parser finalizes a call whose body is complete when the output ends: "
               "https://github.com/ollama/ollama/blob/fb30760996871fa9460115c753afd2c60d4ab0f7/model/parsers/"
               "glm46_test.go (TestGLM46ParserFinalizesCompleteToolCallOnDone: cases "
               "kept7-oll-glm46-unclosed-call-at-end, kept7-oll-glm46-partial-closer-at-end; its "
               "TestGLM46ParserRejectsIncompleteToolCallOnDone rejects a call whose value is cut, as here); the "
               "same reading as missing-closing-tags' </tool_call> left out at the end (vLLM, Qwen3-Coder)"),
    # ---- tool-call class of kept6 (vLLM's own parser tests) ------------------------------------------------------
    Repair(
        name=CUT_MARKER_TEXT,
        title="A call opener cut by the end of a final output is text",
        stage=RepairStage.TOLERANCE,
        accepts="A final parse (not is_partial) of an output that ends with a proper prefix of the format's "
                "call opener (a trigger word of its lazy grammar: ]<]minimax[>[<tool_ca, <tool_c): nothing "
                "follows, so it never became markup; it is appended to the content (to the reasoning when the "
                "message is reasoning only) instead of being held back and dropped. A stream holds it back while "
                "more may come and shows it at the finish. A whole opener, other markers and text the "
                "unparsed-text contract gives back are as before. Likewise the lead-in of a call only a repair reads, "
                "cut by the end before its name (call-opener-dropped's call:, <|tool_call>:call:b; "
                "standalone-json-call's {\", {\"name\":\"get_w; json-call-in-tags' <tool_call>{\"): from "
                "there (from the call opener right before it) the text is content, and the repair that would have "
                "read the call is not reported (it changed nothing).",
        example="plain ]<]minimax[>[<tool_ca   (MiniMax-M3: content 'plain ]<]minimax[>[<tool_ca')",
        source="vLLM's MiniMax-M3 parser returns a cut marker at the end as content: https://github.com/"
               "vllm-project/vllm/blob/06726266c0e0000947fca394f70a1148fda0ac46/tests/tool_parsers/"
               "test_minimax_m3_tool_parser.py (case kept6-vllm-minimax-m3-partial-start); llama.cpp's until "
               "parser succeeds on a cut delimiter in a final parse, so the text reaches its content too "
               "(core/peg/engine.py's divergence note)"),
    Repair(
        name=CUT_CALL_OWN_TEXT,
        title="A cut last call after complete ones gives back only its own text",
        stage=RepairStage.TOLERANCE,
        accepts="A final parse whose last call is cut (or rejected) after complete calls of the same section "
                "(MiniMax-M3's second <invoke> cut inside a value): truncated-call gives back the raw text from "
                "that call's own opener (the format's marker right before its name, with the whitespace "
                "between it and the call before), not from the section's opener, whose complete calls are in "
                "tool_calls already: no call's text is both a call and content.",
        example=']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="f">]<]minimax[>[<a>1]<]minimax[>[</a>'
                ']<]minimax[>[</invoke>\n]<]minimax[>[<invoke name="f">]<]minimax[>[<a>2',
        source="vLLM's MiniMax-M3 parser returns the complete invoke as a call and the cut one as content: "
               "https://github.com/vllm-project/vllm/blob/06726266c0e0000947fca394f70a1148fda0ac46/tests/"
               "tool_parsers/test_minimax_m3_tool_parser.py (case kept6-vllm-minimax-m3-cut-second-invoke); "
               "the lossless contract (docs/fidelity-lossless.md: every character once)"),
    Repair(
        name=WELL_KNOWN_CALL_BLOCKS,
        title="Calls in the well-known <tool_call> JSON block when the template shows no tool-call format",
        stage=RepairStage.TOLERANCE,
        accepts="A request that declares tools, for a template that shows no tool-call format at all (it renders "
                "no call in history and no tool instructions spell one: the analysis found no format and no "
                "tool-call support), and an output that writes <tool_call>{\"name\": …, \"arguments\": {…}}"
                "</tool_call> blocks, the call format most open models are trained on (Hermes, Qwen2.5, ERNIE "
                "4.5): each block whose JSON is complete and names a declared tool is a call, the text before "
                "and after them content. A block naming no declared tool, or cut, stays content. A template "
                "that shows a format of its own, or a request without tools, parses as before; llama.cpp keeps "
                "every such block in content.",
        example='<tool_call>\n{"name": "get_current_temperature", "arguments": {"location": "Beijing"}}\n'
                '</tool_call>   (xinference\'s ERNIE 4.5 template, which renders no tools)',
        source="vLLM's ERNIE 4.5 tool parser reads these blocks for a model whose chat template (xinference's "
               "copy) renders no tool markup: https://github.com/vllm-project/vllm/blob/"
               "0a26f84cc20c2dae0b6af221007a9a26d507a417/tests/tool_parsers/test_ernie45_moe_tool_parser.py "
               "(cases kept6-vllm-ernie45-single, -multiple, -content-before); the same block is the Hermes "
               "format of vLLM's hermes parser and llama.cpp's Hermes 2 Pro handler"),
    Repair(
        name=GLUED_ARGUMENTS,
        title="Gemma-syntax arguments without the comma after a string value",
        stage=RepairStage.TOLERANCE,
        accepts="In the Gemma call syntax (Gemma 4 call:NAME{k:<|\"|>v<|\"|>,…}, FunctionGemma "
                "call:NAME{k:<escape>v<escape>,…}), a string value whose closing delimiter is followed straight "
                "by the next key, with no comma: the delimiter ends the value, so the key that follows is the next "
                "argument. Only after a string (a number or a literal runs into the next key's letters); the "
                "grammar keeps the template's commas.",
        example="<start_function_call>call:get_weather{city:<escape>NYC<escape>unit:<escape>celsius<escape>}"
                "<end_function_call>",
        source="vLLM's FunctionGemma parser reads every key:<escape>value<escape> pair, comma or not: "
               "https://github.com/vllm-project/vllm/blob/26c3628ca8265f4f5007ed8e3e28ac66dd23c8ae/tests/"
               "tool_parsers/test_functiongemma_tool_parser.py (streaming tests: cases "
               "kept6-vllm-functiongemma-stream-two-keys, -stream-three-keys)"),
    Repair(
        name=THINK_BLOCK_CALLS,
        title="A call written inside a <think> block the template does not know is thought, not a call",
        stage=RepairStage.TOLERANCE,
        accepts="A JSON tool-call format of a template that knows no reasoning markup (no reasoning found, no "
                "<think> in its source; MiniMax-M1's), an output that opens with a <think> … </think> block "
                "holding the call opener: the block stays content as written (the template gives it no other "
                "field), the calls inside it are not returned, and the calls after it are read as usual; a block "
                "never closed is thought to the end (content, as a stream showed it, no call). llama.cpp "
                "ends the content at the first opener, inside the block, and when that call cannot be read (an "
                "undeclared tool) every later call becomes content too.",
        example='<think>I should use a tool. <tool_calls>\n{"name": "ignored_tool", "arguments": {}}\n</tool_calls>'
                '</think>\n\nLet me help. <tool_calls>\n{"name": "get_current_weather", "arguments": {"city": '
                '"Miami"}}\n</tool_calls>',
        source="vLLM's MiniMax tool parser skips the calls inside <think> and reads the ones after it: "
               "https://github.com/vllm-project/vllm/blob/41c5903d049b80b83a6e570f52f0f55e31316e49/tests/"
               "tool_parsers/test_minimax_tool_parser.py (test_extract_tool_calls_with_thinking_tags: case "
               "kept6-vllm-minimax-thinking-tags); a call in the model's thinking is a plan, not an action"),
    Repair(
        name=NON_OBJECT_ARGUMENTS,
        title="A JSON call whose arguments are not an object keeps them as written",
        stage=RepairStage.TOLERANCE,
        accepts="A JSON tool call (Hermes, Qwen 2.5 / 3: {\"name\": …, \"arguments\": …}) whose arguments are a "
                "JSON value other than an object (a bare number, a list, true, null, a string that does not hold an "
                "object): llama.cpp reads the value and drops it (its mapper takes only text that opens with '{'), "
                "so the call came back with {} and, after it, the rest of the call's text as content (half a call "
                "each side). The value's text is the call's arguments, as vLLM's Hermes parser returns it; as the "
                "last call, arguments that are no object are then settled by truncated-call like any such last "
                "call: the call's text is content whole, reported with why 'rejected'. The grammar is the "
                "template's.",
        example='<tool_call>\n{"name": "get_weather", "arguments": 5}\n</tool_call>   (Qwen 2.5 template)',
        source="llama.cpp common/chat-peg-parser.cpp (common_chat_peg_mapper: tool-args text is taken only when "
               "it starts with '{'); vLLM's Hermes parser "
               "https://github.com/vllm-project/vllm/blob/836d1f31211015f62485b0151fbbf85b6cc7a934/vllm/"
               "entrypoints/openai/tool_parsers/hermes_tool_parser.py (extract_tool_calls: "
               "json.dumps(function_call[\"arguments\"])); OpenAI's function arguments are a JSON object of "
               "the function's parameters"),
    Repair(
        name=FREE_OBJECT_ELEMENTS,
        title="A MiniMax-M3 object parameter without declared properties, written as elements",
        stage=RepairStage.TOLERANCE,
        accepts="MiniMax-M3 (whose template's to_xml macro writes every mapping as nested ]<]minimax[>[<key> "
                "elements, declared properties or not): a parameter whose schema is an object without properties "
                "(additionalProperties, or none said) written as elements is read as the object they spell, a "
                "text value a string, a key written more than once a list of its values (up to three levels of "
                "elements); llama.cpp reads such a value as one JSON text and rejects the call. The object shows "
                "in a stream once its closing element is there (a later repeat changes an earlier value).",
        example=']<]minimax[>[<metadata>]<]minimax[>[<source>mobile]<]minimax[>[</source>]<]minimax[>[</metadata>'
                '   (metadata: {"type": "object", "additionalProperties": {"type": "string"}})',
        source="the MiniMax-M3 template's to_xml macro (shared/templates/MiniMax-M3.jinja); vLLM's MiniMax-M3 "
               "parser reads the elements and gathers repeats in a list: https://github.com/vllm-project/vllm/"
               "blob/06726266c0e0000947fca394f70a1148fda0ac46/tests/tool_parsers/test_minimax_m3_tool_parser.py "
               "(case kept6-vllm-minimax-m3-nested)"),
    Repair(
        name=LEADING_ZERO_INTEGER,
        title="A MiniMax-M3 integer element written with leading zeros",
        stage=RepairStage.TOLERANCE,
        accepts="MiniMax-M3, a parameter or element the schema declares integer whose text is digits with leading "
                "zeros (018956): the integer they spell (18956), as Python's int() reads them; JSON forbids the "
                "zeros, so llama.cpp rejects the call. The value shows in a stream once it is complete.",
        example=']<]minimax[>[<zip>018956]<]minimax[>[</zip>   (zip: integer)',
        source="vLLM's MiniMax-M3 parser converts integer elements with int(): https://github.com/vllm-project/"
               "vllm/blob/06726266c0e0000947fca394f70a1148fda0ac46/tests/tool_parsers/"
               "test_minimax_m3_tool_parser.py (case kept6-vllm-minimax-m3-nested); pythonic-values reads 07 the "
               "same way"),
    Repair(
        name=ATTRIBUTE_ENTITIES,
        title="A declared tool's name written with the template's attribute escaping",
        stage=RepairStage.TOLERANCE,
        accepts="Kimi K3, whose template writes attribute values escaped (escape_attr: & as &amp;, \" as &quot;): "
                "a call tool=\"a&amp;b\" to the declared tool a&b is read as that tool (llama.cpp matches the raw "
                "name only). Argument values are raw in this format and stay as written; a name that is no "
                "declared tool, escaped or not, stays content (calls to undeclared tools are never returned). "
                "Argument keys written escaped are not read yet.",
        example='<|open|>tools<|sep|><|open|>call tool="a&amp;b" index="1"<|sep|>…<|close|>call<|sep|>'
                '<|close|>tools<|sep|>   (a&b declared)',
        source="the Kimi K3 template's escape_attr macro (shared/templates/Kimi-K3.jinja); SGLang's Kimi K3 "
               "detector unescapes attributes: https://github.com/sgl-project/sglang/blob/"
               "0396a0526bdc9deb22e3aa0c50157b62a75ff7a3/test/registered/function_call/test_kimik3_detector.py "
               "(test_attr_unescaping_and_raw_string_args: case kept7-sgl-kimik3-attr-unescape, whose tool is "
               "not declared: a miss by policy)"),
    # ---- tool-call classes of the ninth batch (TensorRT-LLM's and mlx-lm's parser tests) --------------------------
    Repair(
        name=JSON_ARGUMENTS_BODY,
        title="A DSML invoke whose arguments are one JSON object instead of parameter tags",
        stage=RepairStage.TOLERANCE,
        accepts="DeepSeek V3.2 / V4 DSML calls (<｜DSML｜invoke name=\"NAME\">…</｜DSML｜invoke>) whose body is a "
                "JSON object of the arguments ({ \"query\": \"AI\" }, whitespace around it) instead of "
                "<｜DSML｜parameter …> tags: the object is the call's arguments, the invoke markup stays markup. "
                "Tried after the template's parameter layout; a body that is no JSON object leaves the call to "
                "the other rules (content, as before). llama.cpp reads parameter tags only.",
        example='<｜DSML｜function_calls>\n<｜DSML｜invoke name="search_web">\n{ "query": "AI" }\n'
                '</｜DSML｜invoke>\n</｜DSML｜function_calls>',
        source="SGLang's DeepSeek V3.2 detector reads the invoke body as direct JSON first, then as parameter "
               "tags ('Format 2 - Direct JSON'): https://github.com/sgl-project/sglang/blob/"
               "0071fe9c407ad59f2803cc319e1bcaa3ac2021f1/python/sglang/srt/function_call/deepseekv32_detector.py; "
               "TensorRT-LLM's copy and its tests: https://github.com/NVIDIA/TensorRT-LLM/blob/"
               "0c8de69a1ca6213eebb20a51873890ff128666c2/tensorrt_llm/serve/tool_parser/deepseekv32_parser.py, "
               "https://github.com/NVIDIA/TensorRT-LLM/blob/0563b7c7f6ce0d11e0b35165141a34797e81ed9d/tests/"
               "unittest/llmapi/apps/test_tool_parsers.py (cases kept9-trt-dsv32-json-body, -multiple, "
               "kept9-trt-dsv4-json-body, -multiple)"),
    Repair(
        name=SECTION_OPENER_REPEATED,
        title="A call section's opener written again before a further call of the section",
        stage=RepairStage.TOLERANCE,
        accepts="With parallel calls, in a JSON call format whose calls each sit in their own markers inside one "
                "section with an opener and a closer (DeepSeek V3 / V3.1 <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
                "…<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>), the section's opener written again right before a "
                "further call (whitespace around it allowed): the repeated opener is markup and the call after it "
                "the next call of the same section. llama.cpp ends the calls at the repeated opener and returns "
                "the rest, that call included, as content.",
        example='<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"location": "Paris"}'
                '<｜tool▁call▁end｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search_web<｜tool▁sep｜>'
                '{"query": "AI"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        source="SGLang's DeepSeek V3.1 detector (and TensorRT-LLM's copy) reads every <｜tool▁call▁begin｜>…"
               "<｜tool▁call▁end｜> after the first section opener, whatever lies between two calls: "
               "https://github.com/sgl-project/sglang/blob/94e1251131ca27260cb0e8938aeb7b4a4e630b19/python/sglang/"
               "srt/function_call/deepseekv31_detector.py, https://github.com/NVIDIA/TensorRT-LLM/blob/"
               "1262edbc3809b30af94c3cf2ec2736a14642b821/tensorrt_llm/serve/tool_parser/deepseekv31_parser.py; "
               "TensorRT-LLM's tests feed both names of such an output and assert both calls: "
               "https://github.com/NVIDIA/TensorRT-LLM/blob/0563b7c7f6ce0d11e0b35165141a34797e81ed9d/tests/"
               "unittest/llmapi/apps/test_tool_parsers.py (cases kept9-trt-dsv3-multiple, kept9-trt-dsv31-multiple)"),
    Repair(
        name=SCHEMA_TYPE_ALIAS,
        title="A parameter declared with type \"str\" or \"text\" is a string",
        stage=RepairStage.TOLERANCE,
        accepts="In the auto-parsed XML-tagged argument layouts (MiniMax-M2 <parameter name=…>, GLM "
                "<arg_key>/<arg_value>), a parameter whose schema declares its type by a name JSON Schema does not "
                "know but tool authors write for a string (\"type\": \"str\" or \"text\"): its value is the raw "
                "text up to the value's closing tag, as for \"string\". llama.cpp reads an unknown type as any "
                "JSON value, so a plain word (London) fails the call. The grammar keeps llama.cpp's spot.",
        example='<minimax:tool_call><invoke name="get_current_temperature">\n<parameter name="location">London'
                '</parameter>\n</invoke></minimax:tool_call>   (location: {"type": "str"})',
        source="vLLM's MiniMax-M2 parser converts a value by its declared type, \"string\", \"str\" and "
               "\"text\" alike kept raw: https://github.com/vllm-project/vllm/blob/"
               "9412856add437f03009a0804f61f3bed6731ddeb/vllm/tool_parsers/minimax_m2_tool_parser.py "
               "(_convert_param_value_with_types); mlx-lm's the same: https://github.com/ml-explore/mlx-lm/blob/"
               "90933f57503bf350806645850ef689e9b7634a2d/mlx_lm/tool_parsers/minimax_m2.py, whose test declares "
               "\"str\": https://github.com/ml-explore/mlx-lm/blob/d78bf58e217c904ec282ed8da9b947491f78c022/tests/"
               "test_tool_parsing.py#L107 (case kept9-mlx-minimax-temperature)"),
    Repair(
        name=NULLABLE_NULL,
        title="A tagged value written null, for a parameter that may be a string or null, is null",
        stage=RepairStage.TOLERANCE,
        accepts="In the auto-parsed XML-tagged argument layouts (MiniMax-M2 <parameter name=…>, GLM "
                "<arg_key>/<arg_value>), a parameter whose schema allows both a string and null (anyOf [string, "
                "null], \"type\": [\"string\", \"null\"]) written as exactly null up to its closing tag: the "
                "value is JSON null, not the four-letter string llama.cpp reads for a string-typed value. Any other "
                "text (nullable, \"null\" with spaces) stays the string it is; a parameter that does not allow "
                "null is unchanged. The same in the MiniCPM5 and Muse Glimmer formats (<param name=…>, "
                "<atem:parameter name=…>), whose string-or-JSON values llama.cpp reads as raw text.",
        example='<minimax:tool_call><invoke name="the_tool"><parameter name="args">null</parameter></invoke>'
                '</minimax:tool_call>   (args: {"anyOf": [{"type": "string"}, {"type": "null"}]})',
        source="SGLang's MiniMax-M2 detector test asserts None for an explicit null of an anyOf [string, null] "
               "parameter: https://github.com/sgl-project/sglang/blob/9f0bd17f0febd56547da510fca9c75ec2539a556/"
               "test/registered/function_call/test_minimax_m2_detector.py "
               "(test_anyof_with_null_should_allow_explicit_null: case kept7-sgl-minimaxm2-anyof-null); vLLM's "
               "MiniMax-M2 parser reads a value null as None: https://github.com/vllm-project/vllm/blob/"
               "9412856add437f03009a0804f61f3bed6731ddeb/vllm/tool_parsers/minimax_m2_tool_parser.py "
               "(_convert_param_value_with_types); ollama's Muse Glimmer parser types a value by every anyOf "
               "branch's type, null included: https://github.com/ollama/ollama/blob/"
               "43f4eda80887877ad0106574d8f3f4b7d69c9cf9/model/parsers/glimmer.go (parseGlimmerATEM; its test "
               "glimmer_test.go TestGlimmerParserATEMValueTypesAndWhitespace: case "
               "kept10-ollama-glimmer-atem-value-types-and-whitespace)"),
    # ---- from the misses of the eighth batch (tests/data/real_outputs_kept8; docs/fidelity.md) ------------------
    Repair(
        name=JSON_CALLS_IN_CALL_MARKERS,
        title="JSON calls inside the call markers of a pythonic call list",
        stage=RepairStage.TOLERANCE,
        accepts="LFM2 / LFM2.5, whose template writes calls as a Python list between <|tool_call_start|> and "
                "<|tool_call_end|>: the list written in JSON instead, [{\"name\": …, \"arguments\": {…}}, …] "
                "('parameters' also taken for 'arguments'), for known tools — the form LFM2 writes when its "
                "system prompt asks for JSON function calls. Tried after the pythonic list; llama.cpp leaves the "
                "whole block in content.",
        example='<|tool_call_start|>[{"name": "search", "arguments": {"query": "sglang"}}]<|tool_call_end|>',
        source="SGLang's LFM2 detector reads both the pythonic and the JSON list between the markers: "
               "https://github.com/sgl-project/sglang/blob/38de5808e13ce232ccd88f1bc2f418e3d879e015/test/"
               "registered/unit/function_call/test_lfm2_detector.py (test_single_call_json: case "
               "kept8-sgl-lfm2-json); Liquid's tool-use guide: the models write Pythonic calls by default and "
               "JSON when the system prompt says \"Output function calls as JSON\" "
               "(https://docs.liquid.ai/docs/key-concepts/tool-use)"),
    Repair(
        name=QUOTED_NUMBER,
        title="A number written in JSON string quotes for a parameter that takes only numbers",
        stage=RepairStage.TOLERANCE,
        accepts="In the auto-parsed XML-tagged argument layouts (GLM <arg_key>/<arg_value>, <parameter=…>) "
                "and the Qwen3-Coder / Qwen3.5 handler, a value that is a JSON number in string quotes (\"42\", \"-1.5\") for a parameter "
                "whose schema allows only number / integer: the number, as the schema asks. Anything else in "
                "quotes stays the JSON string the value spells (llama.cpp's reading, which hands the client "
                "\"42\" where the schema says number). A stream shows the value once it is whole.",
        example='<tool_call>get_weather\n<arg_key>count</arg_key>\n<arg_value>"42"</arg_value>\n</tool_call>   '
                '(count: number)',
        source="SGLang's GLM-4.5 detector coerces the value to the schema's type: https://github.com/sgl-project/"
               "sglang/blob/33d0813d223177af28e4a7c668e8e9721e97b760/test/registered/unit/function_call/"
               "test_glm4_moe_detector.py (test_schema_type_coercion, \"Quoted digits in a number parameter are "
               "coerced to an int\": case kept8-sgl-glm45-type-coercion)"),
    # ---- fallback-tier call shapes of the engines' parsers (kept10 and reports2 as development data) -------------
    Repair(
        name=CALL_OPENER_DROPPED,
        title="A Gemma-style call whose opener token is dropped or written with a stray colon",
        stage=RepairStage.TOLERANCE,
        accepts="Gemma 4 (and the Gemma call syntax with a template's own markers): a call written call:NAME{…} "
                "without the <|tool_call> token, where a content segment starts (right after the thought "
                "channel's <channel|>, or at the start of the answer, past white space), and a call opened "
                "<|tool_call>:call:NAME{…} with a colon between the token and call:. Only a declared tool's name "
                "followed by arguments that read whole in the Gemma syntax; the closer may be missing. Never "
                "inside the thought channel; prose that mentions call:… after other text stays content. (vLLM "
                "tries its bare tier only when no marked call was found; here a marked call after a bare one is "
                "read as well.)",
        example='<|channel>thought\nI need to read the file.\n<channel|>call:bash{command:<|"|>cat '
                '/work/src/entry.c<|"|>}',
        source="vLLM's Gemma 4 call reader keeps a fallback tier for bare call:NAME{…} when no <|tool_call> "
               "call is found (vllm/tool_parsers/gemma4_utils.py, parse_tool_calls, \"Tier 2: Fallback for "
               "known Gemma4 output variations\"), and its test asserts both shapes: https://github.com/"
               "vllm-project/vllm/blob/33a7f0986ab85b31a5af305eb7e7b0b6ec03f406/tests/tool_parsers/"
               "test_gemma4_regex_and_bare_calls.py (test_bare_call_after_thought_channel, "
               "test_colon_prefixed_tool_call; the server's Gemma4EngineToolParser the same in "
               "test_engine_tool_parser_bare_call_extraction): cases kept10-vllm-gemma4-bare-call-after-"
               "thought-channel, kept10-vllm-gemma4-colon-prefixed-tool-call"),
    Repair(
        name=STANDALONE_JSON_CALL,
        title="An answer that starts with a Hermes JSON call with no markers, in a <tool_call> tagged format",
        stage=RepairStage.TOLERANCE,
        accepts="The auto-parsed tagged layouts whose call marker is <tool_call> (Poolside Laguna, GLM "
                "<tool_call>NAME<arg_key>…): an answer that starts (past white space) with a JSON call "
                "{\"name\": …, \"arguments\": {…}} of a declared tool written without any marker; text after it "
                "is content (as unmarked-calls reads the JSON formats). Any other JSON (not a declared tool's call, "
                "text before it) stays content; the thinking block is never read. Not read: a call after a line "
                "of text (ollama reads one there too), because telling it from text would hold every answer's "
                "lines back in a stream.",
        example='{"name":"get_weather","arguments":{"location":"Paris","days":3}}',
        source="ollama's Laguna parser reads a standalone JSON call when no <tool_call> block came "
               "(consumeStandaloneJSONTool, lagunaLooksLikeJSONToolCall): https://github.com/ollama/ollama/blob/"
               "fb30760996871fa9460115c753afd2c60d4ab0f7/model/parsers/laguna.go, its tests "
               "TestLagunaParserStandaloneJSONToolCall and "
               "TestLagunaParserStreamingStandaloneJSONToolCall in model/parsers/laguna_test.go at the same "
               "commit: cases kept10-ollama-laguna-standalone-json-tool-call, "
               "kept10-ollama-laguna-streaming-standalone-json-tool-call"),
    Repair(
        name=CALL_LIST_UNBRACKETED,
        title="A JSON call list written without its [ ] between the call section's markers",
        stage=RepairStage.TOLERANCE,
        accepts="JSON call formats whose template writes the calls as an array between section markers "
                "(Nemotron Nano v2 <TOOLCALL>[…]</TOOLCALL>, Mistral-style [TOOL_CALLS][…]): one call object, or "
                "calls separated as in the list, between the markers without the brackets, for declared tools. "
                "Tried after the bracketed list; a format without a section start marker is not widened, so JSON "
                "in the text never becomes a call.",
        example='<TOOLCALL>{"name": "lookup", "arguments": {"query": "vllm"}}</TOOLCALL>',
        source="vLLM's Nemotron Nano v2 parser adds the missing [ and ] around the payload and reads a single "
               "object as a one-call list (_normalize_tool_call_payload; the stream the same: \"if "
               "isinstance(parsed_tool_calls, dict)\"): https://github.com/vllm-project/vllm/blob/"
               "719d683d6bfae310145462f0b5be3bb8fa1301b7/vllm/tool_parsers/nemotron_nano_v2_tool_parser.py, its "
               "test test_extract_tool_calls_wraps_single_object in https://github.com/vllm-project/vllm/blob/"
               "644451fdcaa660e647fb44a8b6f412aff8dea408/tests/tool_parsers/test_nemotron_nano_v2_tool_parser.py: case "
               "kept10-vllm-nemotron-nano-v2-extract-tool-calls-wraps-single-object"),
    # ---- from the misses of the tenth batch (tests/data/real_outputs_kept10; docs/fidelity.md) ----------------------
    Repair(
        name=SPACED_TYPED_VALUE,
        title="Whitespace around a typed value between its tags",
        stage=RepairStage.TOLERANCE,
        accepts="In the auto-parsed XML-tagged argument layouts (GLM / Laguna <arg_key>/<arg_value>, MiniMax-M2 "
                "<parameter name=…>, <parameter=…>), a value of a parameter that may not be a string (number, "
                "integer, boolean, null, array, object) written with spaces or line breaks between its tags and "
                "the JSON value ( 420 ): the JSON value, as a JSON text reads it (whitespace around a value is "
                "JSON's own); a value without whitespace there reads as before, unreported. llama.cpp's typed "
                "value starts at the tag, so it rejects the call (mistyped-value-as-string then keeps \" 420 \" a string). String parameters "
                "keep their text as written. A stream shows the value once it is whole.",
        example="<tool_call>write_file\n<arg_key>mode</arg_key>\n<arg_value> 420 </arg_value>\n</tool_call>   "
                "(mode: integer)",
        source="vLLM's GLM-4 MoE and Poolside V1 parsers strip every value before json.loads for a parameter "
               "that is not a string: https://github.com/vllm-project/vllm/blob/"
               "5a314e9e8178996f4a9b12b801ef532fe3462f86/vllm/tool_parsers/glm4_moe_tool_parser.py, "
               "https://github.com/vllm-project/vllm/blob/2fdc8d0e2dbbcac38329d0f06d8229176de021c5/vllm/"
               "tool_parsers/poolside_v1_tool_parser.py (its test test_poolside_v1_tool_parser.py, "
               "test_non_string_arg_still_deserialized: case kept10-vllm-poolside-non-string-arg-still-deserialized)"),
    Repair(
        name=CALL_OBJECT_ID,
        title="An id member in a JSON call whose template writes none is the call's id",
        stage=RepairStage.TOLERANCE,
        accepts="A flat JSON call ({\"name\": …, \"arguments\": {…}}: Hermes / Qwen <tool_call>, Llama 3.x, "
                "xLAM …) of a template that renders no id field, written with an \"id\" member (a string or a "
                "number) before or after its fields, the way an OpenAI tool call carries its id: the member is "
                "the call's id, the call is read. llama.cpp's object ends at the arguments, so the call is "
                "rejected (the stream had shown it: stream-consistent-final keeps it and the member's text "
                "falls out of every field). A template that renders an id keeps its own layout (call-id-optional).",
        example='<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "x1"}\n</tool_call>',
        source="OpenAI's tool call object carries its id beside the function (https://platform.openai.com/docs/"
               "api-reference/chat/object: tool_calls[].id); vLLM's Hermes parser reads the object with "
               "json.loads and keeps the call whatever members follow its arguments (https://github.com/"
               "vllm-project/vllm/blob/5a314e9e8178996f4a9b12b801ef532fe3462f86/vllm/tool_parsers/"
               "hermes_tool_parser.py); no public raw output with the member was found: the example is the "
               "project review's variant of a Hermes call"),
    # ---- from the misses of kept11 and reports3 (development data) ---------------------------------------------
    Repair(
        name=THOUGHT_LABEL_OMITTED,
        title="Gemma 4's thought channel opened without its thought label",
        stage=RepairStage.TOLERANCE,
        accepts="Gemma 4 with reasoning extracted: a channel opened <|channel> and followed by text that is not "
                "the template's thought label (<|channel>REASONING<channel|>) is the reasoning, up to <channel|> "
                "(or a <|tool_call>, or the end of an output that never closes it); the label, when written, "
                "stays llama.cpp's path. llama.cpp reads only <|channel>thought and keeps the rest as content. "
                "An end marker with no <|channel> before it is not read here (the engine's own one-shot and "
                "streamed parses of that shape disagree).",
        example="<|channel>This is a reasoning section<channel|>This is the rest",
        source="vLLM's Gemma 4 reasoning parser reads the reasoning between <|channel> and <channel|> and strips "
               "the thought label only when it is there (_strip_thought_label): https://github.com/vllm-project/"
               "vllm/blob/109eefd646368f8aa282b251a815c04fd5922975/vllm/reasoning/gemma4_reasoning_parser.py; its "
               "test https://github.com/vllm-project/vllm/blob/0c4966200aec186cd256a14f02c2151571f0ad0e/tests/"
               "reasoning/test_gemma4_reasoning_parser.py (REASONING_WITH_CHANNEL, COMPLETE_REASONING_WITH_CHANNEL, "
               "NO_CONTENT: cases kept11-vllm-gemma4-reasoning-reasoning, -complete-reasoning, -no-content)"),
    # ---- from the parse-class misses of kept11, kept12 and reports3 (development data) ----------------------------
    Repair(
        name=DRIFTED_CLOSING_TAG,
        title="A Qwen3-Coder parameter closer the model misspelled, before the next tag",
        stage=RepairStage.TOLERANCE,
        accepts="A Qwen3-Coder-style value (<parameter=KEY>VALUE…) whose closer drifted from </parameter>: "
                "</parameter followed by a name's characters (</parameter1>, </parameter_function>) or by "
                "nothing, with or without the >, where the value's end is known otherwise — whitespace and then "
                "the next <parameter= of the same call, </function> or </tool_call> (missing-closing-tags' ends of "
                "an unclosed value). The drifted closer is markup, reported with its span (its characters are "
                "the record's text, not lost), and the value ends before it. A value closed by its real "
                "</parameter> keeps any such text it holds (XML a coder model writes), and a drifted closer "
                "anywhere else stays in the value as llama.cpp reads it.",
        example="<tool_call>\n<function=get_weather>\n<parameter=city>\nShanghai\n</parameter1>\n"
                "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        source="SGLang's Qwen3-Coder detector strips a close marker \"the grammar let drift\" from the end of a "
               "value that no </parameter> closed, and keeps one inside a value a real </parameter> closes: "
               "https://github.com/sgl-project/sglang/blob/0bbe61a61a1964be3758c1672c5522aa3aafdd6b/test/"
               "registered/unit/function_call/test_qwen3_coder_detector.py "
               "(TestQwen3CoderDetectorMalformedParameterEnd: test_non_streaming_strips_drifted_end_marker, "
               "test_closed_value_ending_like_a_marker_is_kept; "
               "cases kept12-sglang-qwen3coder-drifted-end-marker-parameter1, -parameter-function, -bare)"),
    Repair(
        name=CALL_SECTION_OMITTED,
        title="DSML invokes written without the tool-call section around them",
        stage=RepairStage.TOLERANCE,
        accepts="DeepSeek V3.2 / V4, whose template writes every call block (<｜DSML｜invoke name=…>…"
                "</｜DSML｜invoke>) inside one section (<｜DSML｜tool_calls>…</｜DSML｜tool_calls>, V3.2 "
                "function_calls): the invokes written without the section's opener and closer, after the content "
                "(or as the whole answer), each a declared tool's call that reads whole, up to the end of the "
                "output. The text before the first invoke is content (the line breaks right before it are layout, "
                "as before the section); an invoke followed by text, or one that does not read whole, stays "
                "content as llama.cpp reads it. Not call-opener-dropped: that one reads a call syntax whose only "
                "marker is the per-call token (Gemma's call:NAME{…}); here each invoke keeps its own markers and "
                "only the section around them is missing.",
        example='Checking.\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">SF'
                '</｜DSML｜parameter>\n</｜DSML｜invoke>',
        source="SGLang's DeepSeek V4 detector finds an invoke by <｜DSML｜invoke wherever it starts and keeps the "
               "text before it as the content (_find_invoke, _extract_preamble): https://github.com/sgl-project/"
               "sglang/blob/00a8f59126f406fccb0e30ec2159473b693bc51a/python/sglang/srt/function_call/"
               "deepseekv4_detector.py; its test https://github.com/sgl-project/sglang/blob/"
               "0461b9e3fcab1c01a556513de67d406005645f07/test/registered/unit/function_call/"
               "test_deepseekv4_detector.py (test_preamble_before_bare_invoke_without_wrapper: case "
               "kept11-sglang-dsv4-preamble-before-bare-invoke)"),
    # ---- from the misses of kept13, kept14 and kept15 (development data) -------------------------------------------
    Repair(
        name=ARGS_SEPARATOR_OMITTED,
        title="A tagged call whose name runs straight into its first argument, the separator left out",
        stage=RepairStage.TOLERANCE,
        accepts="A tag-based call with tagged arguments whose template writes a separator between the function "
                "name and the arguments (Hunyuan Hy3 / Hy v4: NAME<tool_sep…>, then <arg_key…>KEY</arg_key…>"
                "<arg_value…>VALUE</arg_value…>) written without it: the declared tool's name followed at once "
                "(whitespace allowed) by the first argument's marker, or by the call's closer for a call with no "
                "arguments. The separator is read as optional there and nowhere else: a name followed by any "
                "other text is not a call, and a declared name that is only the start of another never matches "
                "(the marker must come right after it). Formats without a separator parse as before.",
        example="<tool_calls:opensource><tool_call:opensource>get_weather<arg_key:opensource>city"
                "</arg_key:opensource><arg_value:opensource>Beijing</arg_value:opensource></tool_call:opensource>"
                "</tool_calls:opensource>",
        source="SGLang's Hunyuan detector reads the Hy v4 call without <tool_sep> after the name "
               "(test_hy4_format_without_tool_separator): https://github.com/sgl-project/sglang/blob/"
               "0ff9c986c7d25f30d8bf16c9e1b0ffeab3bcc0cf/test/registered/unit/function_call/"
               "test_hunyuan_detector.py (case kept14-sglang-hunyuan-hy4-format-without-tool-separator); vLLM's "
               "HYV4 tool parser reads the same layout, its value-typing table written without the separator: "
               "https://github.com/vllm-project/vllm/blob/212dfd8bfd6c0fe5c87898aeee89efe7df4ec509/tests/"
               "tool_parsers/test_hy_v4_tool_parser.py (TestArgumentValueTypes.test_value_coercion: cases "
               "kept13-vllm-hy-v4-value-coercion-s-beijing, -s-empty, -i-3, -i-minus-7, -b-true)"),
    Repair(
        name=ACTION_AFTER_TEXT,
        title="Cohere's action block after text, or text after it",
        stage=RepairStage.TOLERANCE,
        accepts="Cohere's action-block format (Cohere2 MoE / North Code / Command 4: calls as one JSON list "
                "between <|START_ACTION|> and <|END_ACTION|>, whose template writes either an answer or the "
                "block in a turn, never both): text before the block, bare or in the template's own "
                "<|START_TEXT|>…<|END_TEXT|> wrapper, and text after it up to the end of turn, are content in "
                "order, the block's calls are the calls. The block alone parses as before and fires nothing; "
                "an answer with no block is the template's answer as before; with tool_choice required the "
                "turn is the block, as before. The JSON list itself is read as llama.cpp reads it (a cut or "
                "malformed list stays content: truncated-call).",
        example='Let me check.<|START_ACTION|>[{"tool_call_id":"0","tool_name":"get_weather",'
                '"parameters":{"city":"SF"}}]<|END_ACTION|>All set.',
        source="SGLang's Cohere Command 4 detector returns the text before the action block as normal text and "
               "keeps the text after it for the next increment: https://github.com/sgl-project/sglang/blob/"
               "30a32393b32212785f05d620bd265452ef505054/test/registered/unit/function_call/"
               "test_cohere_command4_detector.py (test_parallel_tool_calls_with_leading_text, "
               "test_streaming_text_then_block) and https://github.com/sgl-project/sglang/blob/"
               "7644f7466a1cf98ef2713cda5af1ef09b05f02bb/test/registered/unit/function_call/"
               "test_cohere_command4_streaming_blocks.py (test_leading_text_and_complete_call_in_final_chunk, "
               "test_trailing_text_is_preserved_for_next_increment, test_multiple_calls_in_one_action_block: "
               "cases kept14-sglang-cohere4-parallel-calls-leading-text, -streaming-text-then-block, "
               "-stream-leading-text-complete-call, -stream-trailing-text-preserved, "
               "-stream-two-calls-one-action-block)"),
    Repair(
        name=TAG_ATTRIBUTE_SPACE,
        title="The space before a call tag's attribute left out or written as the tokenizer's space mark",
        stage=RepairStage.TOLERANCE,
        accepts="In the XML call formats whose tags carry the name as an attribute (MiniCPM5 <function name=\"…\"> "
                "and <param name=\"…\">, Muse Glimmer's <atem:parameter name=\"…\">), the space between the element and "
                "its attribute written as nothing (<functionname=\"get_weather\">, the space token dropped) or as "
                "Ġ (U+0120, a byte-level BPE tokenizer's mark for the space byte, left in by a decode that does "
                "not map it back). The tag is read as the template's: the name is the declared tool's or "
                "parameter's, the rest of the call as before. Tried after the template's spelling; any other "
                "text between element and attribute stays content.",
        example='<functionname="get_weather"><paramname="city">上海</param></function>   |   '
                '<function\u0120name="get_weather"><param\u0120name="city">上海</param></function>',
        source="vLLM's MiniCPM5 XML tool parser reads both collapsed tags and the tokenizer's space mark: "
               "https://github.com/vllm-project/vllm/blob/08eaf4cf001acb35879237aa5bf4d504a4a1925d/tests/"
               "tool_parsers/test_minicpm5xml_tool_parser.py (test_tokenizer_space_marker, "
               "test_collapsed_function_and_param_tags, test_collapsed_param_tags_with_tokenizer_space_function, "
               "test_collapsed_tags_current_weather: cases kept13-vllm-minicpm5-tokenizer-space-marker, "
               "-collapsed-function-and-param-tags, -collapsed-param-tags-tokenizer-space-function, "
               "-collapsed-tags-current-weather)"),
    Repair(
        name=UNION_TYPED_VALUE,
        title="A tagged value whose schema is a union with string, typed by the JSON it is",
        stage=RepairStage.TOLERANCE,
        accepts="In the generated parser's tagged-argument layouts (GLM's <arg_key>/<arg_value>, Hy3's), a "
                "parameter whose schema allows a string and other types ({\"type\": [\"string\", "
                "\"integer\"]}, an anyOf of string and object): a value that is, alone up to its closing tag, "
                "JSON of one of the other types (an object, an array, a number, true / false) is that value; any "
                "other text is the string it is, as before (llama.cpp reads every such value as a string). Null "
                "is nullable-null's. The value shows in a stream once its closing tag is there (its type is known "
                "at its end), a value that starts as no such JSON streams as text at once.",
        example='<tool_call>inspect<arg_key>value</arg_key><arg_value>{"ok": false}</arg_value></tool_call>   '
                '(value: {"type": ["string", "object"]})',
        source="SGLang's GLM-4.7 detector types a union-typed value by the JSON it reads, keeping text that is "
               "none of the union's other types a string: https://github.com/sgl-project/sglang/blob/"
               "33f014c70b399ec99d61c9995349d88b84a8b8ca/test/registered/unit/function_call/"
               "test_glm47_schema_types.py (TestGlm47SchemaTypes.test_field_types: cases "
               "kept15-sglang-glm47-field-types-string-or-integer-7, -string-or-object-object; "
               "-integer-or-string-auto stays a string); llama.cpp's and vLLM's Qwen3-Coder readers type such a "
               "value the same way (JSON of an allowed type first, else the text)"),
    Repair(
        name=STRING_OPENER_OMITTED,
        title="A Gemma-syntax string value written without its opening delimiter",
        stage=RepairStage.TOLERANCE,
        accepts="In Gemma 4's call syntax (<|tool_call>call:NAME{key:<|\"|>text<|\"|>,…}<tool_call|>), a string "
                "value whose opening <|\"|> is left out and whose closing one is written: the text from the "
                "value's start up to that closing delimiter is the string, at the top level, in a nested object "
                "or in a list. Tried only where no value of the template's reads (a number, true / false / null, "
                "an object or list, a delimited string parse as before; text that starts as a number or one of "
                "those words stays as llama.cpp reads it), and only for text that holds none of "
                "< { } [ ] (so a marker or a structure is never taken into a string). The value shows in a stream "
                "once its closing delimiter is there.",
        example='<|tool_call>call:web_search{query:Paris, France<|"|>,limit:5}<tool_call|>',
        source="SGLang's Gemma 4 detector reads such a value up to its closing delimiter: https://github.com/"
               "sgl-project/sglang/blob/206d16683c5812977e01f2e08b54a6210c00cfe2/test/registered/unit/"
               "function_call/test_gemma4_detector_string_delimiters.py "
               "(TestGemma4StringDelimiters.test_omitted_opening_delimiter, "
               "-with_comma, -in_nested_object, -in_array: cases kept15-sglang-gemma4-omitted-opening-delimiter, "
               "-with-comma, -in-nested-object, -in-array); a recorded gemma4:e4b output whose value opens with "
               "a plain ' where <|\"|> belongs (pattern:':\\s*\\w+'<|\"|>; ollama's parser fails on it): "
               "https://github.com/ollama/ollama/issues/15315 (triage row "
               "kept12-ollama-15315-gemma4-e4b-plain-quote-for-delimiter)"),
    # ---- from the misses of real_outputs_kept16 … real_outputs_kept19 and kept13–kept15's leftovers ------------
    Repair(
        name=SECTION_PER_CALL,
        title="One call section per call where the template writes every call in one section",
        stage=RepairStage.TOLERANCE,
        accepts="With parallel calls, in a tagged-call format whose calls have no markers of their own and sit "
                "together in one section (MiniMax-M2's <minimax:tool_call> … </minimax:tool_call> holding every "
                "<invoke>): further sections right after the first (whitespace between), each with its calls; "
                "their calls follow the first section's. Tried only where the end of the output was expected and "
                "is not there, so a single section parses as before. llama.cpp ends the calls at the first "
                "section and the next one's raw text becomes content.",
        example='<minimax:tool_call>\n<invoke name="func1">\n<parameter name="a">1</parameter>\n</invoke>\n'
                '</minimax:tool_call>\n<minimax:tool_call>\n<invoke name="func2">\n<parameter name="b">2'
                '</parameter>\n</invoke>\n</minimax:tool_call>',
        source="MiniMax-M2 parsers that read every <minimax:tool_call> block of an output: vllm-mlx "
               "(https://github.com/waybarrios/vllm-mlx/blob/4b654c09e61029afa1c061a3684bff0d4c385b3c/tests/"
               "test_minimax_tool_calling.py, TestMiniMaxToolCallParsing.test_multiple_tool_calls: case "
               "kept19-vllmmlx-minimax-multiple-tool-calls) and Rapid-MLX (https://github.com/raullenchai/"
               "Rapid-MLX/blob/7222ca776c029b045cba424e7b2e942c5073529f/tests/test_minimax_tool_parser.py, "
               "TestExtractToolCalls.test_multiple_blocks: case kept19-rapidmlx-minimax-multiple-blocks)"),
    Repair(
        name=CALLS_IN_ONE_BLOCK,
        title="Several Gemma-syntax calls in one call block",
        stage=RepairStage.TOLERANCE,
        accepts="With parallel calls, in Gemma 4's call syntax (the template writes one <|tool_call>call:NAME{…}"
                "<tool_call|> block per call): further call:NAME{…} of declared tools after the first, before the "
                "block's closer (whitespace between allowed); each is a call, in order. Read as a call whose "
                "closer is left out where a whole call:NAME{…} follows, and a call with no <|tool_call> of its "
                "own where the one before it is a call, so each call stays one item of the calls (a stream maps "
                "it once). Tried only where the template's markers are not there. llama.cpp reads the first call "
                "and the rest of the block becomes content.",
        example='<|tool_call>call:glob{pattern:<|"|>README*.md<|"|>}call:glob{pattern:<|"|>CONTRIBUTING.md<|"|>}'
                '<tool_call|>',
        source="vllm-mlx's Gemma 4 tool parser reads every call:NAME{…} of a block: https://github.com/"
               "waybarrios/vllm-mlx/blob/4b654c09e61029afa1c061a3684bff0d4c385b3c/tests/"
               "test_gemma4_tool_parser.py (TestGemma4ToolParserExtract.test_multiple_tool_calls_in_one_block: "
               "case kept19-vllmmlx-gemma4-multiple-calls-one-block)"),
    Repair(
        name=PYTHON_DICT_CALL,
        title="A JSON call object written as a Python dict literal",
        stage=RepairStage.TOLERANCE,
        accepts="In the formats whose call is a flat JSON object of a name and its arguments (Hermes' "
                "<tool_call>{\"name\": …, \"arguments\": {…}}</tool_call>, and every other flat layout without a "
                "call id): the same object written as Python prints a dict — single-quoted keys and strings, "
                "True / False / None, the two fields in either order ({'arguments': {'symbol': 'TSLA'}, 'name': "
                "'f'}); the arguments are decoded by Python's rules and show in a stream once the dict is complete. "
                "Tried only where the JSON object does not read. llama.cpp reads JSON only and leaves the block as "
                "content.",
        example="<tool_call>\n{'arguments': {'symbol': 'TSLA'}, 'name': 'get_stock_fundamentals'}\n</tool_call>",
        source="A recorded Hermes 2 Pro run in NousResearch's Hermes-Function-Calling README (https://github.com/"
               "NousResearch/Hermes-Function-Calling/blob/3e695ed081a0a5c3ae74a556077d29ff7045ef2c/README.md, "
               "'Inference Example Output': case kept17-hermes-fc-readme-inference-example-call), whose own "
               "parser falls back to ast.literal_eval for a <tool_call> that is no JSON (https://github.com/"
               "NousResearch/Hermes-Function-Calling/blob/02deb47efd3dc5af877e7da227768525cc63562b/utils.py, "
               "validate_and_extract_tool_calls)"),
    # ---- from the misses of real_outputs_kept20 … real_outputs_kept25 ------------------------------------------
    Repair(
        name=SECTION_OPENER_WHITESPACE,
        title="Whitespace between a call section's opener and its first call where the template writes none",
        stage=RepairStage.TOLERANCE,
        accepts="In a format whose calls sit in a section with a marker of its own before each call (Kimi K2's "
                "<|tool_calls_section_begin|><|tool_call_begin|>…, written back to back): whitespace (a line "
                "break) after the section's opener, before its first call's marker. Whitespace that ends the "
                "output is never waited on, and anything else after the opener stays content as before. llama.cpp "
                "drops the opener as markup and leaves the calls as content.",
        example='<|tool_calls_section_begin|>\n<|tool_call_begin|>functions.search:0<|tool_call_argument_begin|>'
                '{"query": "rust tutorials"}<|tool_call_end|>\n<|tool_calls_section_end|>',
        source="Kimi K2 parsers that find the calls anywhere in the section: SGLang's Rust router "
               "(https://github.com/sgl-project/sglang/blob/93d04878cfb9b08645fae7b11bd340ee33b34acf/sgl-router/"
               "tests/tool_parser_kimik2.rs, test_kimik2_complete_parsing, -multiple_tools, -with_whitespace, "
               "-streaming, -sequential_indices: cases kept22-sglrouter-kimik2-*) and the SMG gateway "
               "(https://github.com/smg-project/smg/blob/f8daa8835a8b4419b53125a837aaab2b3ce895c3/crates/"
               "tool_parser/tests/tool_parser_kimik2.rs, test_kimik2_multiline_arguments, "
               "test_kimik2_streaming_multiline_arguments, test_function_index_extraction, "
               "test_namespace_extraction: cases kept24-smg-kimik2-*)"),
    Repair(
        name=MESSAGE_CLOSER_AT_END,
        title="A Harmony message closed by its end token at the end of the output",
        stage=RepairStage.TOLERANCE,
        accepts="In the Harmony format (GPT-OSS), where the generation stops at <|return|> after the final "
                "message and at <|call|> after a call: the final message or a call closed by <|end|>, the "
                "message's own closer, at the very end of the output (a transcript of parsed messages writes "
                "each message's closer). The closer is markup; followed by any text it reads as before. "
                "llama.cpp keeps it in the content.",
        example="<|channel|>final<|message|>Hello, world!<|end|>",
        source="OpenVINO Model Server's gpt-oss output parser test (https://github.com/openvinotoolkit/"
               "model_server/blob/0521c641d5e6cad98ebd89344c0b6327f483b6db/src/test/llm/output_parsers/"
               "gptoss_output_parser_test.cpp: case kept23-ovms-harmony-final-end) and openai/harmony's own Rust test (https://github.com/"
               "openai/harmony/blob/ec7606df9e87e3d0a1fec9f50928c1e407f0c438/src/tests.rs, "
               "test_tool_call_with_constrain_marker_adjacent: case "
               "kept20-harmony-rs-recipient-in-role-constrain-adjacent-end)"),
    Repair(
        name=MARKER_SPACE_OMITTED,
        title="The space a JSON call section's opener ends with, left out",
        stage=RepairStage.TOLERANCE,
        accepts="In the generated parser's JSON call formats whose analysed section opener ends with spaces and "
                "no line break (Mistral v0.3's \"[TOOL_CALLS] \" before the call list): the opener written "
                "without them, the calls right after it. Tried after the template's spelling; the content before "
                "the calls already ends at the trimmed marker. llama.cpp leaves the calls as content.",
        example='[TOOL_CALLS][{"name": "example_tool", "arguments": {"arg1": "value1", "arg2": 42}}]',
        source="OpenVINO Model Server's Mistral output parser test (https://github.com/openvinotoolkit/"
               "model_server/blob/01fa44c432afd6ea2f138117bbbe0730ab73a7ec/src/test/llm/output_parsers/"
               "mistral_output_parser_test.cpp: cases kept23-ovms-mistral-single-call, "
               "kept23-ovms-mistral-three-calls)"),
]
"""Every repair rule, in the order they act."""

REPAIRS_BY_NAME: dict[str, Repair] = {r.name: r for r in REPAIRS}

TOLERANCE_REPAIRS: tuple[str, ...] = tuple(r.name for r in REPAIRS if r.stage is RepairStage.TOLERANCE)
"""The names of the ``improved``-only repairs, in the order they act (the contract's rules hold at every fidelity)."""


def string_type_alias(schema: Any) -> bool:
    """Repair ``schema-type-alias``: whether a parameter's JSON-schema dict declares its type by one of
    :data:`STRING_TYPE_ALIASES` (case and surrounding spaces aside)."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    return isinstance(kind, str) and kind.strip().lower() in STRING_TYPE_ALIASES


def trailing_eos(p: Any) -> Any:
    """``trailing-eos-token`` as a PEG part (``p`` a :class:`~core.peg.chat.ChatBuilder`): an optional
    :data:`EOS_TOKENS` token, or nothing when the repair is off."""
    if TRAILING_EOS_TOKEN not in p.repairs:
        return p.eps()
    return p.optional(p.repair(TRAILING_EOS_TOKEN, p.choice(*[p.literal(t) for t in EOS_TOKENS])))


def next_call_section(p: Any, final_end: Any, start: str, section: str, repair: str = CONSECUTIVE_CALL_BLOCKS) -> None:
    """Repair ``consecutive-call-blocks`` for a format whose calls sit in one section ``start`` … (the rule named
    ``section``) and nothing but the end of the output may follow it: once the tree is built, the root's
    ``final_end`` (a ``p.end()`` handle of builder ``p``) may instead be preceded by further such sections
    (whitespace between). Tried only where the end of the output was expected and is not there, and never waiting
    on trailing whitespace, so a single section parses, recovers and reports as before; the grammar stays the
    template's (``widen_late``). ``repair`` names the rule that reads them (``section-per-call`` where the template
    writes all calls in one section)."""
    if repair not in p.repairs or not start:
        return
    # only whitespace left is no next section (never "wait for more" there: the longest parsing prefix a recovery
    # looks for stays where it was without the repair)
    p.late.append(lambda: p.widen_late(final_end, repair, lambda orig: (
        p.one_or_more(p.negate(p.space() + p.end()) + p.space() + p.peek(p.literal(start)) + p.ref(section))
        + orig)))


def grammar_repairs(result: Any, offset: int, output: str) -> tuple[list[FiredRepair], int | None]:
    """The repairs a PEG parse ``result`` read (:func:`core.peg.chat.repair_nodes`, one walk of its tree), spans
    shifted by ``offset`` (the generation prompt's length) so they index ``output``: the :class:`FiredRepair`
    entries of the ``repair:NAME`` nodes that acted, and where the lead-in of a call written without markers
    starts when the end of the output cut it before anything was read into the message from there on (Gemma's
    ``call:`` without its opener token, the ``{"`` of a standalone JSON call; None when the output does not end
    inside one). Repair ``cut-marker-text`` gives the text from that lead-in back as it gives back a marked call's
    cut opener."""
    fired, lead_ins = repair_nodes(result.nodes, offset, result.text)
    return ([FiredRepair(name, s, e, text=output[s:e]) for name, s, e in fired],
            next((s for s, e in lead_ins if s < e), None))


def any_order_args(p: Any, rule_prefix: str, required: list[Any], optional: list[Any],
                   sep: Any = None) -> Any:
    """Repair ``argument-order``: the tagged arguments of one tool in any order — every parser of ``required``
    exactly once, of ``optional`` at most once, ``sep`` (a parser, e.g. whitespace; none when ``None``) between
    two of them — as a ``repair:argument-order`` node of builder ``p`` (a
    :class:`core.peg.chat.ChatPegBuilder`). One rule per set of parameters already written (``rule_prefix``
    + ``-`` + bit mask). ``None`` when the template's own layout already accepts every such order (no optional
    parameter and at most one required, or only optional ones) or there are more than ``MAX_PERMUTE``
    parameters (the rule count doubles per parameter)."""
    from ..peg.chat import MAX_PERMUTE

    hs = [p.lift(x) for x in list(required) + list(optional)]
    n_req = len(required)
    if not hs or len(hs) > MAX_PERMUTE or (n_req <= 1 and not optional) or n_req == 0:
        return None
    need = (1 << n_req) - 1
    cache: dict[int, Any] = {}

    def after(mask: int) -> Any:
        if mask in cache:
            return cache[mask]
        alts = []
        for i, h in enumerate(hs):
            if not mask & (1 << i):
                alts.append((h if mask == 0 or sep is None else sep + h) + after(mask | (1 << i)))
        if mask & need == need:
            alts.append(p.eps())
        r = p.rule(f"{rule_prefix}-{mask}", p.choice(*alts))
        cache[mask] = r
        return r

    return p.repair(ARGUMENT_ORDER, after(0))


def enabled_repairs(fidelity: Any = "llama.cpp", disabled: Iterable[str] = ()) -> frozenset[str]:
    """Names of the repairs in force: the contract rules at every fidelity, the tolerance rules at ``improved``,
    minus ``disabled`` (contract rules cannot be switched off). Raises :class:`UnknownRepairError` (a
    ``ValueError``) naming an unknown repair, :class:`~core.errors.AnalysisError` an unknown fidelity."""
    from ..analysis.fidelity import resolve_fidelity

    fid = resolve_fidelity(fidelity).value
    off = set(disabled)
    unknown = sorted(off - set(REPAIRS_BY_NAME))
    if unknown:
        raise UnknownRepairError(f"unknown repair {unknown[0]!r}; known: {', '.join(REPAIRS_BY_NAME)}")
    return frozenset(r.name for r in REPAIRS
                     if r.stage is RepairStage.CONTRACT or (fid == "improved" and r.name not in off))


def turn_header(generation_prompt: str, thinking_start_tag: str = "") -> str:
    """The assistant turn header a generation prompt writes, as repair ``repeated-turn-header`` looks for it at
    the start of the output: ``generation_prompt`` up to ``thinking_start_tag`` (when it holds it), trailing
    whitespace dropped; "" when nothing is left or it has no marker character (``<``, ``[``, ``|``), so plain
    words are never taken for a header. ``"<|start|>assistant"`` -> itself; ``"<|im_start|>assistant\n<think>\n"``
    with ``"<think>"`` -> ``"<|im_start|>assistant"``."""
    gp = generation_prompt or ""
    if thinking_start_tag and thinking_start_tag in gp:
        gp = gp[:gp.index(thinking_start_tag)]
    gp = gp.rstrip(" \t\r\n")
    return gp if gp.strip() and any(c in gp for c in "<[|") else ""


def header_space(generation_prompt: str, header: str) -> bool:
    """Whether the generation prompt writes whitespace right after the turn ``header`` (:func:`turn_header`):
    only then is whitespace after a repeated header cut with it (:func:`header_cut`)."""
    gp = generation_prompt or ""
    rest = gp[gp.find(header) + len(header):] if header and header in gp else ""
    return rest[:1] in (" ", "\t", "\n", "\r")


def prompt_tails(header: str) -> tuple[str, ...]:
    """Repair ``repeated-prompt-tail``: the proper tails of the turn ``header`` (:func:`turn_header`) that start
    where the header's own opening token (its text up to the first ``>`` or ``]``) comes again, longest first;
    () when it does not. ``'<|open|>message role="assistant"<|sep|><|open|>response<|sep|>'`` ->
    ``('<|open|>response<|sep|>',)``."""
    ends = [k for k in (header.find(">"), header.find("]")) if k > 0]
    if not ends:
        return ()
    token = header[:min(ends) + 1]
    out = []
    at = header.find(token, 1)
    while at > 0:
        out.append(header[at:])
        at = header.find(token, at + 1)
    return tuple(out)


def header_cut(header: str, output: str, is_partial: bool = False, space: bool = True) -> int | None:
    """Repair ``repeated-turn-header``: how many leading characters of ``output`` are the turn ``header``
    (:func:`turn_header`) repeated, with the whitespace after it — 0 when it does not start with it (or there
    is no header), ``None`` for a partial ``output`` that is still a proper prefix of the header (nothing to show
    yet). Where the generation prompt writes no whitespace after the header (not ``space``), spaces on the
    header's line followed by a word go on the header (Harmony's role header ``<|start|>assistant to=functions.f``)
    and are not cut."""
    if not header or not output:
        return 0
    if output.startswith(header):
        k = len(header)
        while k < len(output) and output[k] in " \t\n\v\f\r":
            k += 1
        if not space and k < len(output) and (output[k].isalnum() or output[k] == "_") \
                and not any(c in output[len(header):k] for c in "\n\v\f\r"):
            return len(header)
        return k
    if is_partial and header.startswith(output):
        return None
    return 0


def is_json_object(text: str) -> bool:
    """Whether ``text`` is a complete JSON object (a call's arguments may be returned as they are)."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
    except RecursionError:   # nested deeper than json.loads goes: the braces must balance and close it
        from .mapper import json_brace_depth

        t = text.strip()
        return t.startswith("{") and t.endswith("}") and json_brace_depth(t) == 0


def _tail_span(parser: Any, output: str, final: AssistantMessage, view: AssistantMessage, name: str) -> int:
    """Where the raw text of the last (cut or rejected) call starts in ``output``: the text the final parse
    put into content beyond the view when it is the end of the output; else the last call opener (a word of
    the parser's lazy-grammar triggers) before the last mention of the call's name, else the ``{`` of the JSON
    object holding that mention (an unmarked or fenced call), else that mention; else 0."""
    if final.content.startswith(view.content):
        extra = final.content[len(view.content):]
        if extra and output.endswith(extra):
            return len(output) - len(extra)
    at = output.rfind(name) if name else -1
    if at < 0:
        return 0
    opener = _opener_at(parser, output, at, final)
    if opener >= 0:
        return opener
    # a JSON call without the template's markers (unmarked-calls, fenced-calls): the object around the name
    brace = output.rfind("{", 0, at)
    return brace if brace >= 0 and "}" not in output[brace:at] else at


def _pattern_opener(parser: Any, output: str, at: int) -> int:
    """The start of the last match, at or before ``at``, of the parser's pattern triggers (anchors dropped:
    GPT-OSS's ``<|start|>assistant<|channel|>commentary to``), or -1. The patterns are the parser's own."""
    spans: list[tuple[int, int]] = []
    for t in getattr(parser, "grammar_triggers", None) or []:
        if getattr(getattr(t, "type", None), "value", "") not in ("pattern", "pattern_full"):
            continue
        pat = getattr(t, "value", "") or ""
        pat = pat[1:] if pat.startswith("^") else pat
        pat = pat[:-1] if pat.endswith("$") and not pat.endswith("\\$") else pat
        try:
            spans += [(m.start(), m.end()) for m in re.finditer(pat, output[:at + 1]) if m.end() > m.start()]
        except re.error:
            continue
    if not spans:
        return -1
    best = max(s for s, _ in spans)
    while True:   # a longer trigger match that holds the last one starts the call (" to" in "…assistant… to")
        earlier = min((s for s, e in spans if s < best < e), default=best)
        if earlier == best:
            return best
        best = earlier


_UNKNOWN: Any = object()   # settle()'s partial_entry when the caller does not have it


def settle(parser: Any, output: str, final: AssistantMessage, is_partial: bool,
           view: AssistantMessage | None = None, partial_entry: Any = _UNKNOWN,
           read_whole: bool = False, lead_in: int | None = None) -> AssistantMessage:
    """The message a final parse returns: ``final`` (the parser's own final parse of ``output``) settled
    against the partial view of the same output (``parser.parse(output, True)``, what a stream shows).

    * ``final`` extends the view (the usual case): ``final``;
    * else the view (``stream-consistent-final``), so the final message extends what was streamed;
    * then a last call whose arguments are not a JSON object is removed and reported (``truncated-call``),
      unless ``is_partial`` (then only reported).

    ``view``: the partial view when the caller already has it (a clean parse is its own view; with
    ``is_partial`` ``final`` is the view). ``partial_entry``: the entry point of ``parser.parse_detailed(output,
    is_partial=True)`` when the caller has it (``truncated-call``'s ``why`` is read from it; each partial parse of
    a text that does not parse probes O(log n) prefixes, so it is computed once). ``read_whole``: the parser's
    grammar read all of ``output`` to its end, holding nothing back and dropping nothing it read (the gate of
    ``unparsed-characters``: when no other step changed ``final`` either and no call has empty arguments — the
    mapper drops a JSON value that is not an object — no character can be lost, and the character audit, several
    times the parse's cost on an output of many calls, is not run). ``lead_in``: where the lead-in of a call
    without markers that the end of the output cut starts (:func:`grammar_repairs`), for ``cut-marker-text``. Never
    raises; the
    repairs that acted are in ``.repairs``. ``final`` is not modified.
    """
    view_end: int | None = None
    if view is None:
        detailed = getattr(parser, "parse_detailed", None)
        if detailed is not None:
            d = detailed(output, is_partial=True)
            view, partial_entry = parser.parse(output, True, detailed=d), d[2]
            view_end = _view_end(parser, output)
        else:
            view = parser.parse(output, True)
    out = final
    kept_end: int | None = None
    if not message_extends(view, final):
        out = view.copy()
        kept_end = view_end
        calls = out.tool_calls
        start = _tail_span(parser, output, final, view, calls[-1].name if calls else "")
        out.repairs = list(final.repairs) + [FiredRepair(STREAM_CONSISTENT_FINAL, start, len(output),
                                                         text=output[start:])]
    calls = out.tool_calls
    if calls and not is_partial and not is_json_object(calls[-1].arguments) \
            and getattr(parser, "close_final_call", False) and not _CLOSING.get():
        closed = _closed_final_call(parser, output, out)
        if closed is not None:
            return closed
    settle_repairs = getattr(parser, "settle_repairs", frozenset())
    if calls and not is_json_object(calls[-1].arguments):
        last = calls[-1]
        if out is final:
            out = final.copy()
        start = _tail_span(parser, output, final, view, last.name)
        own = _own_opener(parser, output, start, last.name) \
            if CUT_CALL_OWN_TEXT in settle_repairs and len(calls) > 1 and not is_partial else -1
        # only when the span from the section's opener holds the text of a call kept before it
        if own > start and any(c.name and c.name in output[start:own] for c in calls[:-1]):
            start = own
            out.repairs = list(out.repairs) + [FiredRepair(CUT_CALL_OWN_TEXT, own, len(output), last.name,
                                                           output[own:])]
        if not is_partial:
            out.tool_calls = out.tool_calls[:-1]
            out.content = content_with_tail(out.content, output[start:])
        out.repairs = [r for r in out.repairs if r.name != STREAM_CONSISTENT_FINAL] + [
            FiredRepair(TRUNCATED_CALL, start, len(output), last.name, output[start:],
                        WHY_REJECTED if _no_object_ever(last.arguments) else _why_unfinished(parser, output,
                                                                                            partial_entry))]
    if not is_partial:
        if CUT_MARKER_TEXT in settle_repairs:
            out = _cut_marker_text(parser, output, out, final, lead_in)
        out = _keep_unparsed(parser, output, out, final, kept_end)
        # (a call with no arguments may be one whose value the mapper read and dropped, one whose arguments repeat
        # a key loses the first value to any JSON reader: audited)
        if getattr(parser, "keep_lost_characters", False) and not (
                read_whole and out is final
                and not any(_no_arguments(c.arguments) or _repeated_key(c.arguments) for c in out.tool_calls)):
            out = _keep_lost_characters(parser, output, out, final, kept_end)   # repair unparsed-characters
        if getattr(parser, "force_nonempty_content", False):
            out = _nonempty_content(output, out, final)
    return out


def _no_object_ever(arguments: str) -> bool:
    """Whether ``arguments`` are a complete JSON value that is no object (repair ``non-object-arguments`` keeps such
    a value as written): no more text makes them an object, so the call is rejected, not cut."""
    try:
        return not isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False


def _repeated_key(arguments: str) -> bool:
    """Whether ``arguments`` (JSON) write a key twice in one object, at any depth (a JSON reader keeps the last)."""
    def pairs(items: list) -> dict:
        keys = [k for k, _ in items]
        if len(set(keys)) < len(keys):
            raise _RepeatedKey
        return dict(items)
    try:
        json.loads(arguments, object_pairs_hook=pairs)
    except _RepeatedKey:
        return True
    except (ValueError, RecursionError):
        pass
    return False


class _RepeatedKey(Exception):
    """Raised by :func:`_repeated_key`'s reader at the first key written twice."""


def _no_arguments(arguments: str) -> bool:
    """Whether a call's ``arguments`` are empty: ``""`` or an object without members (``{}``, ``{ }``)."""
    return "".join(arguments.split()) in ("", "{}")


def _nonempty_content(output: str, msg: AssistantMessage, final: AssistantMessage) -> AssistantMessage:
    """Repair ``force-nonempty-content`` (the request asked for it): a message of reasoning only, without
    content or calls, also answers with the reasoning text; any other message is returned as it is."""
    if msg.content.strip() or msg.tool_calls or not msg.reasoning_content.strip():
        return msg
    out = msg.copy() if msg is final else msg
    out.content = out.reasoning_content
    out.repairs = list(out.repairs) + [FiredRepair(FORCE_NONEMPTY_CONTENT, 0, len(output),
                                                   detail="content repeats the reasoning")]
    return out


def _own_opener(parser: Any, output: str, start: int, name: str) -> int:
    """Repair ``cut-call-own-text``: where the last call named ``name`` opens its own text after ``start`` (the
    section's opener): the start of the longest markup string of ``parser`` that ends right before the last
    mention of ``name`` (MiniMax-M3's ``]<]minimax[>[<invoke name="``), moved back over the whitespace after the
    call before it; -1 when there is none after ``start``."""
    at = output.rfind(name) if name else -1
    if at <= start:
        return -1
    marks = [m for m in _short_markup(parser)
             if m.strip() and at - len(m) > start and output.startswith(m, at - len(m))]
    if not marks:
        return -1
    own = at - max(len(m) for m in marks)
    while own - 1 > start and output[own - 1] in " \t\r\n":
        own -= 1
    return own


def _cut_marker_text(parser: Any, output: str, msg: AssistantMessage, final: AssistantMessage,
                     lead_in: int | None = None) -> AssistantMessage:
    """Repair ``cut-marker-text``: the proper prefix of a call opener of ``parser`` (a word of its lazy grammar's
    triggers) that ends ``output`` (held back for a marker that never came) appended to the content — to the
    reasoning when the message is reasoning only — minus what the message already ends with. Likewise, to the
    content, from ``lead_in`` when it is earlier: the cut lead-in of a call without markers (:func:`grammar_repairs`),
    from the call opener right before it if there is one."""
    words = [w for w in trigger_words(parser) if w.strip()]
    n = len(output)
    start = next((k for k in range(max(0, n - max((len(w) for w in words), default=0) + 1), n)
                  if any(len(w) > n - k and w.startswith(output[k:]) for w in words)), n)
    lead = lead_in is not None and lead_in <= start
    if lead:
        # a lead-in right after a call opener (<tool_call>{") comes back with it, as the whole cut call would
        before = output[:lead_in].rstrip()
        opener = max((len(w.strip()) for w in words if before.endswith(w.strip())), default=0)
        start = len(before) - opener if opener else lead_in
    if start >= n:
        return msg
    # (a lead-in is read where a content segment starts: it is content, after a closed thought too)
    to_reasoning = bool(msg.reasoning_content) and not msg.content and not msg.tool_calls and not lead
    field = (msg.reasoning_content if to_reasoning else msg.content) or ""
    # the part of the tail the field already ends with (the space before a marker is often content already)
    start += next((k for k in range(len(output) - start, 0, -1) if field.endswith(output[start:start + k])), 0)
    tail = output[start:]
    if not tail.strip():
        return msg
    out = msg.copy() if msg is final else msg
    if to_reasoning:
        out.reasoning_content = field + tail
    else:
        out.content = field + tail
    out.repairs = list(out.repairs) + [FiredRepair(CUT_MARKER_TEXT, start, len(output), text=tail)]
    return out


_CLOSING: contextvars.ContextVar[bool] = contextvars.ContextVar("unclosed_final_call", default=False)


def _closed_final_call(parser: Any, output: str, msg: AssistantMessage) -> AssistantMessage | None:
    """Repair ``unclosed-final-call``: the message of ``output`` with one closing markup string of ``parser``
    completed at its end (a cut one completed first, then a whole one; the template's line break before it
    allowed), when that parse keeps
    ``msg`` (the settled message so far): the same content and reasoning, the same calls (the earlier ones
    unchanged, the last one's arguments now a JSON object: a value the partial view still held open, such as
    ``.</arg_value></tool_`` before a cut closer, is read as the completed text reads it), and no repair that
    ``msg`` did not already need (the closer must close the call, not complete a value). None when no closer does
    that. At most two parses per closing markup string."""
    # closing markup only (a closer of the call or of its section: "</…", "<|close…", "…end…"), the rest of one
    # the output ends with cut first (longest cut first), then whole ones; each with or without the line break
    # the template writes before it
    marks = [m for m in _short_markup(parser) if type(m) is str and m.strip()
             and (m.lstrip().startswith(("</", "[/")) or "close" in m or "end" in m)]
    # the output must end on a closer, whole or followed by a cut one (else a value is open: nothing to try)
    cut = 0
    for m in marks:
        for k in range(min(len(m) - 1, len(output)), cut, -1):
            if output.endswith(m[:k]):
                cut = k
                break
    if not any(text.rstrip().endswith(m.strip()) for text in {output, output[:len(output) - cut]} for m in marks):
        return None
    tries: list[tuple[int, str]] = []
    for m in marks:
        for k in range(min(len(m) - 1, len(output)), 0, -1):
            if output.endswith(m[:k]):
                tries += [(k, output[:-k] + m), (k, output[:-k] + "\n" + m)]
                break
        tries += [(0, output + m), (0, output + "\n" + m)]
    had = Counter(r.name for r in msg.repairs if r.name != TRUNCATED_CALL)
    for _, text in sorted(tries, key=lambda t: -t[0]):
        token = _CLOSING.set(True)   # the completed output is parsed without this repair (no recursion)
        try:
            got = parser.parse(text)
        except Exception:   # a diagnosis: a completion that does not parse is not the answer
            continue
        finally:
            _CLOSING.reset(token)
        if (got.content != msg.content or got.reasoning_content != msg.reasoning_content
                or len(got.tool_calls) != len(msg.tool_calls)
                or Counter(r.name for r in got.repairs) - had
                or not all(is_json_object(c.arguments) for c in got.tool_calls)
                or any(a.name != b.name or (a is not msg.tool_calls[-1] and a.arguments != b.arguments)
                       for a, b in zip(msg.tool_calls, got.tool_calls))):
            continue
        out = got.copy()
        start = _tail_span(parser, output, msg, msg, msg.tool_calls[-1].name)
        out.repairs = [r for r in got.repairs if r.end <= len(output)] + [
            FiredRepair(UNCLOSED_FINAL_CALL, start, len(output), msg.tool_calls[-1].name, output[start:])]
        return out
    return None


def _view_end(parser: Any, output: str) -> int | None:
    """How much of ``output`` the partial view just computed covers, when it is the message of a shorter prefix
    (:meth:`core.chat.generator.GeneratedParser.partial_view_end`); None when unknown or the whole output."""
    end = getattr(parser, "partial_view_end", None)
    at = end(output) if end is not None else None
    return at if isinstance(at, int) and 0 <= at < len(output) else None


PINNED_DROP_FORMATS: dict[str, str] = {
    # a complete recipient (name then a space or a marker) that is neither a function nor the assistant (a
    # tool's reply header, ref-0430): a cut "to=functi" is not a built-in call, its text is the output's. The name
    # stops at "=" so the scans from successive "to=" never overlap (linear on "to=to=to=…")
    "gpt-oss": r"\bto=(?!functions\.|assistant\b)[^\s<=]+(?=[\s<])",
    # K2 Horizon with a response format and reasoning_format none reads the think block and drops it before the
    # JSON answer (b11549 tests/test-chat.cpp, case k2h-schema-format-none in tests/data/b11549)
    "k2-horizon": r"</ifm\|think(?:_fast|_faster)?>",
}
"""Parser formats (with a pattern of the dropped text) whose llama.cpp grammar reads and drops text the reference
pins as dropped (GPT-OSS calls to a built-in tool, ``<|start|>assistant to=container.exec…``: ref-0428, ref-0429;
a recipient cut by the end of the output is not one). ``unparsed-text`` there only reports the text (the message stays llama.cpp's, at both fidelities: a built-in tool is the server's to run,
and the improved fidelity keeps every reference case)."""


def _keep_unparsed(parser: Any, output: str, msg: AssistantMessage, final: AssistantMessage,
                   kept_end: int | None = None) -> AssistantMessage:
    """Contract ``unparsed-text``: when a final parse holds no trace of some words of ``output`` (a tail the
    parser held back, waiting for a marker that never came; text a rule read and dropped), the raw text from the
    start of the construct holding the first such word (the last call opener before it, else the word) to the
    end of the output is appended to the content and reported. Words of markup the parser knows are not text
    (:func:`core.chat.lossless.parser_marks`).

    ``kept_end``: when ``msg`` is the stream's view (``stream-consistent-final``), the end of the prefix of
    ``output`` that view is the message of. The tail then never starts inside the text the view shows
    (:func:`_after_kept_view`): the calls the view keeps are in ``tool_calls`` already, and their text must not be
    in ``content`` too (the opener before the lost word may be the kept call's own)."""
    if getattr(parser, "lossless_context", None) is None:
        return msg
    lost = lost_word_spans(output, msg, parser_marks(parser))
    if not lost:
        return msg
    at = lost[0][1]
    start = _opener_at(parser, output, at, msg)
    start = start if start >= 0 else at
    if kept_end is not None and start < kept_end:
        start = _after_kept_view(parser, output, msg, kept_end, at, start)
    tail = output[start:]
    out = msg.copy() if msg is final else msg
    fmt = (getattr(parser, "lossless_context", None) or (None, None, ""))[2]
    pinned = fmt in PINNED_DROP_FORMATS and re.search(PINNED_DROP_FORMATS[fmt], output) is not None
    if not pinned:
        out.content = content_with_tail(out.content, tail)
    out.repairs = list(out.repairs) + [FiredRepair(UNPARSED_TEXT, start, len(output), text=tail,
                                                   why="kept-out" if pinned else "content")]
    return out


def _keep_lost_characters(parser: Any, output: str, msg: AssistantMessage, final: AssistantMessage,
                          kept_end: int | None = None) -> AssistantMessage:
    """Repair ``unparsed-characters``: when the character audit (:func:`core.chat.char_audit.audit_parse`) finds
    characters of ``output`` in no field and no markup, the raw text from the first of them to the end is appended
    to the content and reported — from the opener of the construct that holds it (:func:`_opener_at`) when that
    opener comes after the last text of a call the message keeps, and never from inside what a kept stream view
    shows (:func:`_after_kept_view`). Only a tail that no field reads from: a character lost between two pieces of
    a field stays reported by the audit, not appended (the tail would repeat the field's text). Formats whose
    dropped text the reference pins are left as they are."""
    context = getattr(parser, "lossless_context", None)
    if context is None:
        return msg
    fmt = context[2]
    if fmt in PINNED_DROP_FORMATS and re.search(PINNED_DROP_FORMATS[fmt], output) is not None:
        return msg
    audit = audit_parse(parser, output, msg)
    lost = audit.lost()
    if not lost:
        return msg
    at = lost[0].start
    kept_call_end = max((s.end for s in audit.spans if s.start < at and s.account is Account.FIELD
                         and s.where.startswith("tool_calls[")), default=0)
    opener = _opener_at(parser, output, at, msg)
    start = opener if opener >= kept_call_end and opener >= 0 else at
    if kept_end is not None and start < kept_end:
        start = _after_kept_view(parser, output, msg, kept_end, at, start)
    word_tail = next((r for r in reversed(msg.repairs) if r.name == UNPARSED_TEXT and r.why == "content"), None)
    if word_tail is not None and not (word_tail.start >= start and msg.content.endswith(word_tail.text)):
        word_tail = None
    # a field that goes on after it (a character lost between two of its pieces): a tail would repeat it; the
    # content unparsed-text appended from a later start is replaced below, not repeated — and so is a piece of it
    # the audit read inside the cut marker before it (the "s" of <|tool_calls_sectio, content "…textsectio"): the
    # content read before the tail's start is all of the content but that appended word tail
    in_tail = word_tail is not None and sum(
        s.end - s.start for s in audit.spans if s.account is Account.FIELD and s.where == "content"
        and s.start < start) >= len(msg.content) - len(word_tail.text)
    # (white space the audit read as content after the tail's start goes on no field: the audit aligns the
    # content's last line break with either of two in the output, the one before a cut marker when a grammar
    # literal starts with a line break — DeepSeek V4's "\n<｜DSML｜invoke" of call-section-omitted)
    if any(s.account is Account.FIELD and s.end > start
           and not (word_tail is not None and s.where == "content"
                    and (s.start >= word_tail.start or (in_tail and s.start >= start)))
           and not (s.where == "content" and not output[s.start:s.end].strip() and s.start < at
                    and msg.content.endswith(output[s.start:s.end]))
           for s in audit.spans):
        return msg
    tail = output[start:]
    out = msg.copy() if msg is final else msg
    if word_tail is not None:
        # unparsed-text appended a later start of the same tail (its first lost word): this tail replaces it
        out.content = out.content[:len(out.content) - len(word_tail.text)]
        out.repairs = [r for r in out.repairs if r is not word_tail]
    out.content += tail   # the audit found these characters in no field: never "already there" (content_with_tail)
    out.repairs = list(out.repairs) + [FiredRepair(UNPARSED_CHARACTERS, start, len(output), text=tail,
                                                   why="content")]
    return out


def _after_kept_view(parser: Any, output: str, view: AssistantMessage, end: int, at: int, start: int) -> int:
    """Where the unparsed tail starts when the message is the stream's ``view`` of ``output[:end]`` and the first
    lost word is at ``at`` (``start``: the opener before it, which may be the kept call's own), so that no text the
    view shows is in the tail: the ``{`` of a JSON object the view holds back (a second call whose name is not
    complete yet: the partial parse of the text before that ``{`` is still the view; one parse), else a marker
    prefix the view holds back (:func:`_held_back_start`) when the word is after it, else ``start``."""
    held = _held_back_start(parser, output, end)
    brace = output.rfind("{", 0, min(at, held) + 1)
    if brace > start and _shows(parser, output[:brace], view):
        return brace
    return max(start, held) if at >= held else start


def _shows(parser: Any, text: str, view: AssistantMessage) -> bool:
    """Whether the partial parse of ``text`` is ``view`` (repairs aside)."""
    try:
        return parser.parse(text, True).to_openai() == view.to_openai()
    except Exception:   # a diagnosis of where the tail starts; a failure keeps the longer tail
        return False


def _held_back_start(parser: Any, output: str, end: int) -> int:
    """Where a marker prefix the partial view of ``output[:end]`` holds back starts: the longest tail of
    ``output[:end]`` that is a proper prefix of a markup string of ``parser`` (``"<"`` of a ``</tool_call>`` that
    may follow), else ``end``. At most :data:`CUT_MARKER_MAX` characters back."""
    marks = _short_markup(parser)
    for k in range(max(0, end - CUT_MARKER_MAX + 1), end):
        tail = output[k:end]
        if any(len(tail) < len(m) and m.startswith(tail) for m in marks):
            return k
    return end


def _opener_at(parser: Any, output: str, at: int, msg: AssistantMessage) -> int:
    """The start of the last call opener at or before ``at``, else -1: a trigger word of the parser, else a
    trigger word that holds ``at`` (Qwen3-Coder's ``<function=NAME>`` without ``<tool_call>``), else a pattern
    trigger, else an opener holding a tool name, whole or cut (Llama 4's pythonic ``[get_weather(``); or, when
    later, the start of a call ``msg``'s repairs read without markers (:func:`_bare_call_at`)."""
    words = trigger_words(parser)
    opener = max((output.rfind(w, 0, at + 1) for w in words if w), default=-1)
    if opener < 0:
        opener = max((output.rfind(w, 0, at + len(w)) for w in words if w), default=-1)
    if opener < 0:   # the word without the layout whitespace the template writes around it (tag-whitespace)
        opener = max((output.rfind(w.strip(), 0, at + 1) for w in words if w.strip() and w.strip() != w),
                     default=-1)
    if opener < 0:
        opener = _pattern_opener(parser, output, at)
    if opener < 0:
        opener = _cut_marker_start(parser, output, at)
    return max(opener, _bare_call_at(msg, output, at))


def _bare_call_at(msg: AssistantMessage, output: str, at: int) -> int:
    """The start of a call without markers whose text holds ``at``, else -1: the ``call:`` of a Gemma call that
    ``call-opener-dropped`` read without its opener token, the ``{`` of the JSON call ``standalone-json-call``
    read at the answer's start when the message kept no call. Such a call cut by the end of the output comes back
    from there, as a marked one comes back from its opener (not ``bash{command:…`` or ``get_wea`` with
    ``call:`` or ``{"name":"`` in no field)."""
    for r in msg.repairs:
        if r.start <= at < r.end and r.name == CALL_OPENER_DROPPED:
            return output.rfind("call:", r.start, at + 1)
        if r.start <= at < r.end and r.name == STANDALONE_JSON_CALL and not msg.tool_calls:
            return output.find("{", r.start, at + 1)
    return -1


CUT_MARKER_MAX = 64
"""Longest markup string :func:`_cut_marker_start` and :func:`_held_back_start` try (keeps them linear on a
hostile output)."""


def _short_markup(parser: Any) -> tuple[str, ...]:
    """The distinct markup strings of ``parser`` (:func:`core.chat.lossless.markup_of` with its
    ``lossless_context``) of 2 to :data:`CUT_MARKER_MAX` characters, computed once per parser (one unparsed tail
    asks for them up to twice: its opener, and what a kept view holds back)."""
    cached = getattr(parser, "_short_markup", None)
    if cached is not None:
        return cached
    request, analysis, _ = getattr(parser, "lossless_context", None) or (None, None, "")
    marks = tuple(sorted(m for m in set(markup_of(parser, request, analysis)) if 1 < len(m) <= CUT_MARKER_MAX))
    try:
        parser._short_markup = marks
    except AttributeError:   # a parser that takes no attributes: computed again next time
        pass
    return marks


def _cut_marker_start(parser: Any, output: str, at: int) -> int:
    """Where a call opener of ``parser`` that holds a tool name starts, when it covers ``at`` (starts at or
    before it) whole or cut by the end of the output, else -1: Llama 4's pythonic opener ``[get_weather(``, whole
    before a cut argument list or cut to ``[get_wea``, is one construct, and its text comes back whole (not
    ``get_weather(`` or ``wea`` alone)."""
    request = (getattr(parser, "lossless_context", None) or (None, None, ""))[0]
    names = sorted(tool_names(request))
    best = -1
    for m in _short_markup(parser):
        if without_tool_names(m, names) == m:
            continue
        whole = output.find(m, max(0, at - len(m) + 1), at + len(m))
        if whole >= 0:
            best = whole if best < 0 else min(best, whole)
        for k in range(max(0, len(output) - len(m) + 1), min(at, len(output) - 1) + 1):
            if m.startswith(output[k:]):
                best = k if best < 0 else min(best, k)
                break
    return best


def content_with_tail(content: str, tail: str) -> str:
    """``content`` followed by ``tail`` (the raw text of a call the final parse does not return), unless the
    content already ends with it: the lossless contract (text never lives only in a repair record)."""
    if not tail or content.endswith(tail) or (tail.strip() and content.rstrip().endswith(tail.strip())):
        return content
    return content + tail


def _why_unfinished(parser: Any, output: str, entry: Any = _UNKNOWN) -> str:
    """``truncated-call``'s ``why``: :data:`WHY_CUT` when the partial parse of ``output`` reaches its end (the
    main root covers the text: the parser waits for more), :data:`WHY_REJECTED` when it stopped before (the view
    is the longest prefix that parses, :meth:`core.chat.generator.GeneratedParser.parse_detailed`). A parser
    without ``parse_detailed`` (the hand-written non-PEG handlers): :data:`WHY_CUT`. ``entry``: that partial
    parse's entry point when the caller has it."""
    if entry is not _UNKNOWN:
        return WHY_CUT if entry is None else WHY_REJECTED
    detailed = getattr(parser, "parse_detailed", None)
    if detailed is None:
        return WHY_CUT
    try:
        entry = detailed(output, is_partial=True)[2]
    except Exception:   # the record is a diagnosis; a failure here must not break the parse
        return WHY_CUT
    return WHY_CUT if entry is None else WHY_REJECTED


def settled(streamed: AssistantMessage, final: AssistantMessage) -> AssistantMessage:
    """What a client that accumulated a stream's deltas keeps once ``final`` (the one-shot parse, or
    ``finish()``'s report) says the last call was cut: ``streamed`` without the tool calls beyond ``final``'s
    (a truncated call whose fragments were streamed). Without a ``truncated-call`` repair, ``streamed``."""
    if not any(r.name == TRUNCATED_CALL for r in final.repairs):
        return streamed
    out = streamed.copy()
    out.tool_calls = out.tool_calls[:len(final.tool_calls)]
    return out


def list_text() -> str:
    """The repairs as readable text (``python -m core repairs``)."""
    lines = []
    for r in REPAIRS:
        at = "every fidelity" if r.stage is RepairStage.CONTRACT else "improved fidelity"
        lines.append(f"{r.name}  [{r.stage.value}; {at}]")
        lines.append(f"  {r.title}")
        lines.append(f"  accepts: {r.accepts}")
        lines.append(f"  example: {json.dumps(r.example, ensure_ascii=False)}")
        lines.append(f"  source:  {r.source}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


__all__ = ["FiredRepair", "UnknownRepairError", "REPAIRS", "REPAIRS_BY_NAME", "TOLERANCE_REPAIRS", "Repair", "RepairStage", "STREAM_CONSISTENT_FINAL",
           "TRUNCATED_CALL", "UNPARSED_TEXT", "REPEATED_TURN_HEADER", "MISSING_CLOSING_TAGS", "MISTYPED_VALUE_AS_STRING", "JSON_CALL_IN_TAGS",
           "CALLS_INSIDE_SECTION_MARKERS", "ARGUMENT_ORDER", "CALL_ID_OPTIONAL", "MISSING_REQUIRED_ARGUMENT", "REASONING_START_REPEATED", "REASONING_END_WITHOUT_START", "REASONING_END_UNMATCHED", "REASONING_START_WHITESPACE", "TRAILING_EOS_TOKEN", "MESSAGES_AFTER_CALL", "UNDECLARED_ARGUMENTS", "CALLS_AFTER_TEXT", "XML_ARGUMENTS_WRAPPER", "TRAILING_END_OF_TURN", "INSTRUCTED_REASONING_MARKERS", "INSTRUCTED_MARKERS", "TEMPLATE_DEFAULT_THINKING", "CALL_ENDS_REASONING", "BARE_ANSWER_AFTER_REASONING", "ANSWER_MARKER_WHITESPACE", "REASONING_BLOCKS_INTERLEAVED", "HARMONY_BARE_HEADER", "FORCE_NONEMPTY_CONTENT", "FORCE_NONEMPTY_KWARG", "LEADING_THINK_BLOCK", "THINK_BLOCK", "EOS_TOKENS", "trailing_eos", "CONSECUTIVE_CALL_BLOCKS", "JSON_CALLS_IN_CALL_MARKERS", "QUOTED_NUMBER", "SPACED_TYPED_VALUE", "CALL_OBJECT_ID", "REPEATED_PROMPT_TAIL", "UNCLOSED_FINAL_CALL", "ATTRIBUTE_ENTITIES", "next_call_section", "prompt_tails",
           "CALL_MARKER_WHITESPACE", "CALL_ID_NAMESPACE_OPTIONAL", "CONTENT_BETWEEN_CALLS",
           "WELL_KNOWN_CALL_BLOCKS", "CUT_MARKER_TEXT", "CUT_CALL_OWN_TEXT", "SETTLE_REPAIRS", "GLUED_ARGUMENTS",
           "THINK_BLOCK_CALLS", "NON_OBJECT_ARGUMENTS", "FREE_OBJECT_ELEMENTS", "LEADING_ZERO_INTEGER",
           "PYTHONIC_VALUES", "CALL_LIST_SPACING", "PYTHON_CODE_MARKERS", "BUILTIN_CALL_SYNTAX", "JSON_CALL_WRAPPERS", "WHY_CUT", "WHY_REJECTED",
           "CALL_OPENER_DROPPED", "STANDALONE_JSON_CALL", "CALL_LIST_UNBRACKETED", "THOUGHT_LABEL_OMITTED", "DRIFTED_CLOSING_TAG", "CALL_SECTION_OMITTED", "ARGS_SEPARATOR_OMITTED", "ACTION_AFTER_TEXT", "TAG_ATTRIBUTE_SPACE", "TAG_ATTRIBUTE_SPACES", "UNION_TYPED_VALUE", "STRING_OPENER_OMITTED", "SECTION_PER_CALL", "CALLS_IN_ONE_BLOCK", "PYTHON_DICT_CALL", "SECTION_OPENER_WHITESPACE", "MESSAGE_CLOSER_AT_END", "MARKER_SPACE_OMITTED", "any_order_args", "turn_header", "header_space", "header_cut", "enabled_repairs", "is_json_object", "list_text", "settle", "settled"]
