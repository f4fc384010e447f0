"""Parser robustness (issue 6 part 3): hypothesis property tests over the parsers that
``core.chat.pipeline.build_chat_parser`` builds for corpus templates of every route and format.

Subjects: ``FUZZ_TEMPLATES`` — auto-parser templates of each tool format (JSON_NATIVE, TAG_WITH_JSON,
TAG_WITH_TAGGED, none), reasoning mode (NONE, TAG_BASED, TOOLS_ONLY, forced-open) and content mode, and one
template per special-handler family — each with and without tools (two tools, parallel calls on).

Inputs:
* random text assembled from the template's own markers (analysis fields, preserved tokens, grammar-trigger
  words, marker-like segments of its renders) and their fragments, JSON fragments, tool names, unicode;
* valid outputs (an assistant message with reasoning, content and two tool calls rendered through the
  template, minus the prompt) cut at random points, and randomly mutated;
* ``reference/cases.jsonl`` inputs (their own requests) cut at random points.

Properties checked for each input:
1. ``parse(text, is_partial)`` never raises, for both values of ``is_partial``, and returns well-formed
   strings / tool calls; streaming (random split, and one character at a time) never raises either;
2. streaming never takes text back: every step's deltas only append, and add up to the streamed message;
3. any split gives the same final message as the one-shot parse, and the same as feeding one character at a
   time — whenever the stream could end on the final parse (see below).

Strict streaming (``strict=True``, or ``CTE_FUZZ_STRICT=1`` for every test): no partial parse of a longer
prefix may retract what a shorter one gave (``StreamingParser`` never has to hold a step back) and the final
parse extends the stream. Reference-case inputs and the explicit regressions are checked strictly; for random,
truncated and mutated text an incident is counted and recorded in ``tests/artifacts/fuzz_incidents.jsonl``
(minimised examples of fixed causes: ``REGRESSIONS`` below, checked strictly).

Budget: ``fuzz_examples(default)`` per test (``--fuzz-examples N`` or ``CTE_FUZZ_EXAMPLES=N``).
Counts of examples run are written to ``tests/artifacts/fuzz_counts.json`` at the end of the module.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.chat.message import AssistantMessage, apply_deltas
from core.chat.pipeline import build_chat_parser
from core.chat.repairs import settled
from core.chat.prompt import prepare_request, render_prompt
from core.diff import common_prefix_len
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.diff import SegmentKind, segmentize_markers
from core.errors import TemplateRenderError
from core.jinja.template import ChatTemplate

from .conftest import REFERENCE, ROOT, TEMPLATES, fuzz_examples

# ---------------------------------------------------------------------------------------------------------------
# subjects

#: (template file, what it stands for). Auto-parser formats first, then one template per handler family.
FUZZ_TEMPLATES: list[tuple[str, str]] = [
    ("Apertus-8B-Instruct.jinja", "JSON_NATIVE, wrapped array, fun-name-is-key"),
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", "JSON_NATIVE bare object"),
    ("Qwen-QwQ-32B.llamacpp-edit.jinja", "JSON_NATIVE + TAG_BASED reasoning, forced open"),
    ("Reka-Edge.jinja", "JSON_NATIVE + TAG_BASED reasoning"),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja", "JSON_NATIVE + TOOLS_ONLY + ALWAYS_WRAPPED"),
    ("chujiezheng-chatml.jinja", "no tools, no reasoning"),
    ("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.llamacpp-edit.jinja", "no tools, TAG_BASED reasoning"),
    ("ibm-granite-granite-3.3-2B-Instruct.jinja", "WRAPPED_WITH_REASONING content"),
    ("Mistral-Small-3.2-24B-Instruct-2506.jinja", "TAG_WITH_JSON, call id between name and args"),
    ("llama-cpp-deepseek-r1.llamacpp-edit.jinja", "TAG_WITH_JSON + TAG_BASED reasoning"),
    ("meetkai-functionary-medium-v3.1.llamacpp-edit.jinja", "TAG_WITH_JSON, function-name tags"),
    ("upstage-Solar-Open-100B.jinja", "TAG_WITH_JSON + ALWAYS_WRAPPED"),
    ("GLM-4.6.jinja", "TAG_WITH_TAGGED + TAG_BASED reasoning"),
    ("ByteDance-Seed-OSS.jinja", "TAG_WITH_TAGGED (Seed) + reasoning"),
    ("MiniMax-M2.jinja", "TAG_WITH_TAGGED (MiniMax) + reasoning"),
    ("hfjs-openbmb-MiniCPM3-4B.jinja", "tool format without reasoning (MiniCPM3)"),
    # special handlers, one per family
    ("Qwen3-Coder.jinja", "handler qwen3-coder"),
    ("openai-gpt-oss-120b.jinja", "handler gpt-oss"),
    ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", "handler ministral-3"),
    ("meetkai-functionary-medium-v3.2.jinja", "handler functionary-v3.2"),
    ("deepseek-ai-DeepSeek-V3.2.jinja", "handler deepseek-v3.2"),
    ("GigaChat3-10B-A1.8B.jinja", "handler gigachat-v3"),
    ("google-gemma-4-31B-it.jinja", "handler gemma4"),
    ("LFM2-8B-A1B.jinja", "handler lfm2"),
    ("LFM2.5-8B-A1B.jinja", "handler lfm2.5"),
    ("inclusionai-ling-3.0-flash.jinja", "handler ling3"),
    ("MiniMax-M3.jinja", "handler minimax-m3"),
    ("Kimi-K2-Instruct.jinja", "handler kimi-k2"),
    ("Kimi-K3.jinja", "handler kimi-k3"),
    ("openbmb-MiniCPM5-1B.jinja", "handler minicpm5"),
    ("muse-glimmer.jinja", "handler muse-glimmer"),
    ("Cohere2MoE.jinja", "handler cohere2moe"),
]

TOOLS = [
    {"type": "function", "function": {
        "name": "special_function", "description": "I'm special",
        "parameters": {"type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}},
]
USER = {"role": "user", "content": "Hello"}


def _assistant(with_tools: bool) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "reasoning_content": "Let me think: 2 < 3 & {x}.",
                           "content": 'Sure — here it is: {"a": [1, 2]} ✓'}
    if with_tools:
        msg["tool_calls"] = [
            {"type": "function", "id": "call00001",
             "function": {"name": "special_function", "arguments": '{"arg1": 1}'}},
            {"type": "function", "id": "call00002",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris \\"Île\\"", "days": 3}'}},
        ]
    return msg


@dataclass
class Subject:
    """One parser under test: the template, whether the request has tools, the parser, the pieces random text
    is made of, and valid outputs."""

    template: str
    tools: bool
    parser: Any
    format: str
    pieces: list[str]
    valid: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.template}:{'tools' if self.tools else 'no-tools'}"


_REFERENCE_ROWS: dict[str, dict] | None = None


def _reference_rows() -> dict[str, dict]:
    global _REFERENCE_ROWS
    if _REFERENCE_ROWS is None:
        with open(REFERENCE / "analysis.jsonl", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        _REFERENCE_ROWS = {r["template"]: r for r in rows}
    return _REFERENCE_ROWS


def _strings_in(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj] if obj.strip() else []
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings_in(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings_in(v)]
    return []


_ENUM_WORDS = {"NONE", "PLAIN", "TAG_BASED", "TOOLS_ONLY", "JSON_NATIVE", "TAG_WITH_JSON", "TAG_WITH_TAGGED",
               "ALWAYS_WRAPPED", "WRAPPED_WITH_REASONING", "PRE_FUNC_NAME", "BETWEEN_FUNC_AND_ARGS", "POST_ARGS"}


def _markers(template: str, parser: Any, report: Any, renders: list[str]) -> list[str]:
    """Marker strings of a template: analysis fields (ours and llama.cpp's), preserved tokens, trigger words,
    marker-like segments of the renders."""
    out: list[str] = []
    ref = _reference_rows().get(template, {})
    analysis = ref.get("analysis") or {}
    for key in ("user_start", "assistant_start", "reasoning", "content", "tools"):
        out += [s for s in _strings_in(analysis.get(key)) if s not in _ENUM_WORDS]
    out += list(analysis.get("preserved_tokens") or [])
    if report is not None:
        try:
            ours = report.analysis.to_json()
        except Exception:  # pragma: no cover - analysis shape
            ours = {}
        for key in ("reasoning", "content", "tools"):
            out += [s for s in _strings_in(ours.get(key)) if s not in _ENUM_WORDS]
    out += list(getattr(parser, "preserved_tokens", None) or [])
    out += list(getattr(parser, "additional_stops", None) or [])
    for trig in getattr(parser, "grammar_triggers", None) or []:
        if str(getattr(trig, "type", "")).lower().endswith("word"):
            out.append(trig.value)
    for text in renders:
        out += [s.value for s in segmentize_markers(text) if s.kind == SegmentKind.MARKER and len(s.value) <= 40]
    gp = getattr(parser, "generation_prompt", "") or ""
    if gp:
        out.append(gp[-12:])
    seen: dict[str, None] = {}
    for s in out:
        if s and s not in seen and s not in ("function", "name", "arguments", "id"):
            seen[s] = None
    return list(seen)


def _fragments(markers: list[str]) -> list[str]:
    frags: list[str] = []
    for m in markers:
        if len(m) > 2:
            k = len(m) // 2
            frags += [m[:k], m[k:], m[:-1], m[1:]]
    return frags


JSON_PIECES = ['{"name": "special_function", "arguments": {"arg1": 1}}', '{"name": "get_weather", ',
               '"arguments": {', '"city": "Paris"', '"arg1": ', "1", "-2.5e3", "}", "{", "[", "]", ":", ",", '"',
               "\\", '\\"', "\\u00e9", "\\ud83d", "true", "false", "null", "[{", "}]", '{"special_function": {}}',
               "special_function", "get_weather", "functions.special_function:0", "call_001", "```json\n",
               "```", "<|", "|>", "<", ">", "</", "[TOOL_CALLS]", "<tool_call>", "</tool_call>", "<think>",
               "</think>", "to=functions.get_weather"]
UNICODE_PIECES = ["é", "ß", "日本語", "😀", "👩‍💻", "\u200b", "\ufeff", "\u202e", "\x00", "\x1b[0m", "a\u0301",
                  "\r\n", "\t", "\n\n", " ", "｜", "▁", "<｜tool▁calls▁begin｜>", "\U0010ffff"]


def _render_valid(template: ChatTemplate, with_tools: bool, prompt: str) -> list[str]:
    """Valid outputs: the assistant message rendered in history after the prompt (with and without the
    end-of-turn marker(s) that follow it)."""
    tools = TOOLS if with_tools else None
    msg = _assistant(with_tools)
    try:
        full = render_prompt(prepare_request(template, ChatRequest.from_dict(
            {"messages": [USER, msg], "tools": tools, "add_generation_prompt": False})))
    except TemplateRenderError:
        if not with_tools:
            raise
        msg["tool_calls"] = msg["tool_calls"][:1]  # e.g. Llama 3.1: "only supports single tool-calls at once"
        full = render_prompt(prepare_request(template, ChatRequest.from_dict(
            {"messages": [USER, msg], "tools": tools, "add_generation_prompt": False})))
    out = full[common_prefix_len(prompt, full):]
    valid = [out]
    stripped = out.rstrip()
    for _ in range(2):  # drop trailing end-of-turn markers the model would stop at
        segs = segmentize_markers(stripped)
        if segs and segs[-1].kind == SegmentKind.MARKER and "tool" not in segs[-1].value.lower() \
                and "call" not in segs[-1].value.lower() and "function" not in segs[-1].value.lower():
            stripped = stripped[:len(stripped) - len(segs[-1].value)].rstrip()
    if stripped and stripped != out:
        valid.append(stripped)
    return [v for v in valid if v]


_SUBJECTS: dict[tuple[str, bool], Subject] = {}


def subject_for(template_name: str, with_tools: bool) -> Subject:
    """Build (once per session) the parser and inputs for one template and tools setting."""
    key = (template_name, with_tools)
    if key in _SUBJECTS:
        return _SUBJECTS[key]
    template = ChatTemplate((TEMPLATES / template_name).read_text(encoding="utf-8"), template_name)
    req = ChatRequest.from_dict({"messages": [USER], "tools": TOOLS if with_tools else None,
                                 "parallel_tool_calls": True})
    bundle = build_chat_parser(template, req)
    notes: list[str] = []
    try:
        valid = _render_valid(template, with_tools, bundle.prompt)
    except Exception as e:  # a template that cannot render the history turn still gets random text
        notes.append(f"no valid output: {type(e).__name__}: {e}")
        valid = []
    # a reasoning block in front, in case the template drops reasoning from history
    ref = (_reference_rows().get(template_name) or {}).get("analysis") or {}
    rs, re_ = (ref.get("reasoning") or {}).get("start", ""), (ref.get("reasoning") or {}).get("end", "")
    if re_ and valid and re_ not in valid[-1]:
        valid.append(f"{rs}I think.\n{re_}{valid[-1]}")
    markers = _markers(template_name, bundle.parser, bundle.report, [bundle.prompt] + valid)
    pieces = markers + _fragments(markers)
    subj = Subject(template_name, with_tools, bundle.parser, bundle.format, pieces, valid, notes)
    _SUBJECTS[key] = subj
    return subj


SUBJECT_PARAMS = [pytest.param(name, tools, id=f"{name.removesuffix('.jinja')}-{'tools' if tools else 'plain'}")
                  for name, _ in FUZZ_TEMPLATES for tools in (True, False)]

# ---------------------------------------------------------------------------------------------------------------
# the properties

COUNTS: Counter = Counter()


def _well_formed(msg: Any, where: str) -> None:
    assert isinstance(msg, AssistantMessage), f"{where}: parse returned {type(msg).__name__}"
    assert isinstance(msg.content, str) and isinstance(msg.reasoning_content, str), where
    for call in msg.tool_calls:
        assert isinstance(call.name, str) and isinstance(call.arguments, str) and isinstance(call.id, str), where


@dataclass
class StreamRun:
    """What streaming one text produced: the streaming parser, all deltas, whether a step was held back (a
    partial parse did not extend the message emitted so far) and whether the final parse had to be merged
    leniently (it did not extend the last emitted message)."""

    sp: StreamingParser
    deltas: list
    held_back_at: int | None
    final_held: bool = False

    @property
    def final_is_parse(self) -> bool:
        """The streamed message is the final parse (its last step was neither held back nor merged)."""
        return not self.final_held and not self.sp.final_mismatch


def _stream(parser: Any, text: str, cuts: list[int], is_partial: bool) -> StreamRun:
    sp = StreamingParser(parser)
    deltas: list = []
    last = 0
    held_at = None
    emitted = AssistantMessage()
    for cut in sorted(set(cuts)) + [len(text)]:
        if cut <= last:
            continue
        step = sp.feed(text[last:cut])
        last = cut
        deltas += step
        # the stream only appends: this step's deltas turn the previous message into the current one
        grown = apply_deltas(emitted, step)
        assert grown.to_openai() == sp.message.to_openai(), "the deltas of a step do not add up to the message"
        _extends(emitted, grown)
        emitted = grown
        if sp.held_back and held_at is None:
            held_at = last
    before = sp.held_back
    step = sp.finish(is_partial)
    deltas += step
    grown = apply_deltas(emitted, step)
    _extends(emitted, grown)
    assert grown.to_openai() == sp.message.to_openai(), "the final deltas do not add up to the message"
    return StreamRun(sp, deltas, held_at, sp.held_back > before)


def _extends(old: AssistantMessage, new: AssistantMessage) -> None:
    assert new.content.startswith(old.content) and new.reasoning_content.startswith(old.reasoning_content)
    assert len(new.tool_calls) >= len(old.tool_calls)
    for a, b in zip(old.tool_calls, new.tool_calls):
        assert b.name.startswith(a.name) and b.arguments.startswith(a.arguments) and b.id.startswith(a.id)


INCIDENTS: list[dict] = []
STRICT = os.environ.get("CTE_FUZZ_STRICT", "") not in ("", "0")


def check_output(parser: Any, text: str, cuts: list[int], is_partial: bool, *, strict: bool = False,
                 char_by_char: bool = True, where: str = "") -> None:
    """The properties for one text (see the module docstring).

    Always: no exception; every streaming step only appends; when the stream never had to merge a final
    parse leniently, the final message of a random split = the one-shot parse = the char-by-char stream's.
    ``strict`` (or ``CTE_FUZZ_STRICT=1``): also no partial parse may retract what an earlier one gave (no
    held-back step) and the final parse must extend the stream. Otherwise such incidents are counted and
    recorded in ``tests/artifacts/fuzz_incidents.jsonl``.
    """
    one = parser.parse(text, is_partial)
    _well_formed(one, "one-shot parse")
    _well_formed(parser.parse(text, not is_partial), "one-shot parse (other is_partial)")
    runs = [_stream(parser, text, cuts, is_partial)]
    if char_by_char and len(text) <= CHAR_BY_CHAR_MAX:
        runs.append(_stream(parser, text, list(range(1, len(text))), is_partial))
    COUNTS["inputs"] += 1
    for run, how in zip(runs, ("split", "char-by-char")):
        incident = None
        if run.final_held:
            incident = (f"{how}: the final parse (is_partial={is_partial}) {one.to_openai()} retracts the streamed "
                        f"message {run.sp.message.to_openai()}")
        elif run.held_back_at is not None:
            incident = (f"{how}: the partial parse of the first {run.held_back_at} chars "
                        f"{text[:run.held_back_at][-60:]!r} retracts text already emitted")
        elif run.sp.final_mismatch:
            incident = (f"{how}: the final parse (is_partial={is_partial}) {one.to_openai()} does not extend the "
                        f"streamed message {run.sp.message.to_openai()}")
        if incident:
            COUNTS["incidents"] += 1
            if len(INCIDENTS) < 2000:
                INCIDENTS.append({"where": where, "text": text, "is_partial": is_partial, "cuts": sorted(set(cuts)),
                                  "incident": incident})
            assert not (strict or STRICT), incident
        if run.final_is_parse:
            # a cut call whose fragments were streamed stays in the deltas; finish() reports it (core.chat.repairs)
            got = settled(run.sp.message, one).to_openai()
            assert got == one.to_openai(), f"{how} stream != one-shot parse"


CHAR_BY_CHAR_MAX = 400


def _cuts(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, max(n, 0)), max_size=12)


def _random_text(subj: Subject) -> st.SearchStrategy[str]:
    piece = st.one_of(st.sampled_from(subj.pieces or ["<"]), st.sampled_from(JSON_PIECES),
                      st.sampled_from(UNICODE_PIECES), st.text(max_size=6))
    return st.lists(piece, max_size=24).map("".join)


def _mutated(subj: Subject) -> st.SearchStrategy[str]:
    """A valid output with random slices deleted, duplicated or replaced by pieces."""
    pieces = (subj.pieces or ["<"]) + JSON_PIECES + UNICODE_PIECES

    @st.composite
    def build(draw: Any) -> str:
        text = draw(st.sampled_from(subj.valid))
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(text)))
            j = draw(st.integers(i, min(len(text), i + 20)))
            op = draw(st.sampled_from(["delete", "dup", "insert", "replace"]))
            ins = draw(st.sampled_from(pieces))
            if op == "delete":
                text = text[:i] + text[j:]
            elif op == "dup":
                text = text[:j] + text[i:j] + text[j:]
            elif op == "insert":
                text = text[:i] + ins + text[i:]
            else:
                text = text[:i] + ins + text[j:]
        return text
    return build()


FUZZ = settings(max_examples=fuzz_examples(6), deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


@pytest.mark.parametrize("template_name, with_tools", SUBJECT_PARAMS)
@FUZZ
@given(data=st.data())
def test_random_text(template_name: str, with_tools: bool, data: st.DataObject) -> None:
    """Random text made of the template's markers and fragments, JSON, unicode: the three properties."""
    subj = subject_for(template_name, with_tools)
    text = data.draw(_random_text(subj), label="text")
    cuts = data.draw(_cuts(len(text)), label="cuts")
    is_partial = data.draw(st.booleans(), label="is_partial")
    COUNTS["random_text"] += 1
    check_output(subj.parser, text, cuts, is_partial, where=subj.id + "|random")


@pytest.mark.parametrize("template_name, with_tools", SUBJECT_PARAMS)
@FUZZ
@given(data=st.data())
def test_truncated_valid_output(template_name: str, with_tools: bool, data: st.DataObject) -> None:
    """A rendered assistant turn cut at a random point, streamed in random pieces and finished as partial
    (the output was cut off) — and the whole output finished as final."""
    subj = subject_for(template_name, with_tools)
    if not subj.valid:
        pytest.skip(f"{subj.id}: {'; '.join(subj.notes)}")
    valid = data.draw(st.sampled_from(subj.valid), label="valid")
    cut = data.draw(st.integers(0, len(valid)), label="cut")
    text = valid[:cut]
    cuts = data.draw(_cuts(len(text)), label="cuts")
    COUNTS["truncations"] += 1
    check_output(subj.parser, text, cuts, True, where=subj.id + "|truncated")
    check_output(subj.parser, valid, data.draw(_cuts(len(valid)), label="cuts_full"), False, char_by_char=False,
                 where=subj.id + "|truncated")


@pytest.mark.parametrize("template_name, with_tools", SUBJECT_PARAMS)
@FUZZ
@given(data=st.data())
def test_mutated_valid_output(template_name: str, with_tools: bool, data: st.DataObject) -> None:
    """A rendered assistant turn with slices deleted / duplicated / replaced by markers: the properties."""
    subj = subject_for(template_name, with_tools)
    if not subj.valid:
        pytest.skip(f"{subj.id}: {'; '.join(subj.notes)}")
    text = data.draw(_mutated(subj), label="text")
    cuts = data.draw(_cuts(len(text)), label="cuts")
    is_partial = data.draw(st.booleans(), label="is_partial")
    COUNTS["mutations"] += 1
    check_output(subj.parser, text, cuts, is_partial, where=subj.id + "|mutated")


# ---------------------------------------------------------------------------------------------------------------
# reference cases: their own requests, inputs cut and split at random

def _cases() -> list[dict]:
    with open(REFERENCE / "cases.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


CASES = _cases()
_CASE_PARSERS: dict[str, Any] = {}


def _case_parser(case: dict) -> Any:
    if case["id"] not in _CASE_PARSERS:
        template = ChatTemplate((TEMPLATES / case["template"]).read_text(encoding="utf-8"), case["template"])
        _CASE_PARSERS[case["id"]] = build_chat_parser(template, ChatRequest.from_dict(case)).parser
    return _CASE_PARSERS[case["id"]]


@settings(max_examples=fuzz_examples(6) * 10, deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_reference_case_inputs_cut_and_split(data: st.DataObject) -> None:
    """A reference case's input (its own template and request), cut at a random point and split at random:
    the properties (finished as partial when cut, else with the case's ``is_partial``)."""
    case = data.draw(st.sampled_from(CASES), label="case")
    parser = _case_parser(case)
    text = case["input"]
    cut = data.draw(st.integers(0, len(text)), label="cut")
    cuts = data.draw(_cuts(cut), label="cuts")
    COUNTS["case_cuts"] += 1
    check_output(parser, text[:cut], cuts, True if cut < len(text) else bool(case["is_partial"]), strict=True,
                 where=case["id"])


# ---------------------------------------------------------------------------------------------------------------
# explicit regressions found by the fuzzer (minimised). Each input is checked strictly, fed one character at a
# time: no partial parse may take back what an earlier one gave, and the stream must end on the one-shot parse.

# Each was a real bug (core/chat/generator.py, stream.py, core/peg/engine.py now cover them):
# * a partial parse that could not continue a started tool call fell back to plain content, taking back the call
#   already streamed — now the partial view keeps the longest parsing prefix's message (generator.consistent_view);
# * DeepSeek-V3.2, functionary-v3.2, ling3: an alternative that had shown a call failed and a later alternative
#   turned everything into reasoning / content (ParseResult.switched);
# * Qwen3-Coder, Ministral 3: roots without an end anchor stopped early and a final parse dropped the rest;
# * forced-open reasoning: a cut marker prefix ('<t' of <tool_call>) taken as content by the next parser.

#: (template, request has tools, model output, why it fails today — None when it passes)
REGRESSIONS: list[tuple[str, bool, str, str | None]] = [
    ("GLM-4.6.jinja", True, "<tool_call>special_function\nv", None),
    ("Apertus-8B-Instruct.jinja", True, '<|tools_prefix|>[{"special_function<', None),
    ("Qwen-QwQ-32B.llamacpp-edit.jinja", True, '</think><tool_call>\n{"name":"special_function","x', None),
    ("Reka-Edge.jinja", True, '</think><tool_call>\n{"name":"special_function"s', None),
    ("meta-llama-Llama-3.1-8B-Instruct.jinja", True, '{"name":"special_function"<', None),
    ("Mistral-Small-3.2-24B-Instruct-2506.jinja", True, '[TOOL_CALLS]special_function[CALL_ID][ARGS]{""_', None),
    ("ByteDance-Seed-OSS.jinja", True,
     "<seed:tool_call>\n<function=special_function>\n<parameter=arg1>1</paramx", None),
    ("meetkai-functionary-medium-v3.1.llamacpp-edit.jinja", True, '<function=special_function>{"arg1": 1}<<',
     None),
    ("upstage-Solar-Open-100B.jinja", True, "<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>"
     'special_function<|tool_call:args|>{"arg1":1}2', None),
    ("CohereForAI-c4ai-command-r7b-12-2024-tool_use.llamacpp-edit.jinja", True,
     '<|START_THINKING|><|END_THINKING|><|START_ACTION|>[{"tool_call_id":"","tool_name":"special_function"<',
     None),
    ("MiniMax-M2.jinja", True, '</think><minimax:tool_call>\n<invoke name="special_function">\nh', None),
    ("Qwen3-Coder.jinja", True, "<function=special_function>\nd", None),
    ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", True, '[TOOL_CALLS]get_weather[ARGS]{""/', None),
    ("deepseek-ai-DeepSeek-V3.2.jinja", True,
     '<｜DSML｜function_calls><｜DSML｜invoke name="special_function">\ng', None),
    ("meetkai-functionary-medium-v3.2.jinja", True, "all\n>>>get_weather\n ", None),
    ("openai-gpt-oss-120b.jinja", True, "<|channel|>analysis<|message|>u<|end|>i", None),
    ("inclusionai-ling-3.0-flash.jinja", True, "<tool_call>special_function]", None),
    ("openbmb-MiniCPM5-1B.jinja", True, '</think><function name="special_function">e', None),
    ("Kimi-K3.jinja", True, '<|open|>response<|sep|><|open|>tools<|sep|><|open|>call tool="special_function"<|sep|>'
     '<|open|>argument key="arg1"<|sep|><|close|>argument<|sep|><|close|>call<|sep|><|open|>cc', None),
    ("MiniMax-M3.jinja", True, ']<]minimax[>[<tool_call>]<]minimax[>[<invoke name="special_function">]<]minimax[>['
     '<arg1>1]<]minimax[>[</arg1>]<]minimax[>[</invoke>]<]minimax[>[<invoke name="get_weathee', None),
    ("inclusionai-ling-3.0-flash.jinja", False, "<th", None),  # '<t' (a prefix of <tool_call>) was content
    ("Cohere2MoE.jinja", False, "<|START_AU", None),  # '<|START_A' (a prefix of <|START_ACTION|>) was content
    # streaming a rendered (valid) assistant turn: parallel calls as the template writes them
    ("MiniMax-M2.jinja", True, 'I think.\n</think>\n\nHi\n<minimax:tool_call>\n<invoke name="special_function">\n<parameter name="arg1">1'
     '</parameter>\n</invoke>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n</invoke>\n'
     "</minimax:tool_call>", None),  # parallel calls separated by a newline (fixed in the generator, 618c60e)
    ("upstage-Solar-Open-100B.jinja", True, '<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>'
     'special_function<|tool_call:args|>{"arg1": 1}<|tool_call:end|><|tool_call:begin|>call00002<|tool_call:name|>'
     'get_weather<|tool_call:args|>{"city": "Paris"}<|tool_call:end|><|calls|>', None),
    # ^ streams consistently (the first call stays); the second call itself is not parsed: llama.cpp's analysis
    #   puts the first call's id into function.name_prefix ("call00001<|tool_call:name|>"), so a final parse
    #   of this output is content
    # text after complete calls: the calls stay (the text was taken as reasoning / plain content before)
    ("deepseek-ai-DeepSeek-V3.2.jinja", True, 'I think.</think>Hi\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke '
     'name="special_function">\n<｜DSML｜parameter name="arg1" string="false">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
     "</｜DSML｜function_calls><", None),
    ("meetkai-functionary-medium-v3.2.jinja", True, 'all\nHi>>>special_function\n{"arg1": 1}<', None),
    ("meetkai-functionary-medium-v3.2.jinja", True,
     'special_function\n{"arg1": 1}>>>get_weather\n{"city": "Paris"}<|eot_id|>', None),
    # passing examples kept as guards
    ("Qwen3-Coder.jinja", True, "Hi <tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n"
     "</function>\n</tool_call>", None),
    ("GLM-4.6.jinja", True, "<think>a < b</think>x<tool_call>special_function\n<arg_key>arg1</arg_key>\n"
     "<arg_value>1</arg_value>\n</tool_call>", None),
]


@pytest.mark.parametrize("template_name, with_tools, text, is_partial", [
    pytest.param(t, w, x, True, marks=[pytest.mark.xfail(reason=why, strict=False)] if why else [],
                 id=f"{t.removesuffix('.jinja')}-{i}") for i, (t, w, x, why) in enumerate(REGRESSIONS)])
def test_fuzz_regressions(template_name: str, with_tools: bool, text: str, is_partial: bool) -> None:
    subj = subject_for(template_name, with_tools)
    check_output(subj.parser, text, [], is_partial, strict=True, where=f"{subj.id}|regression")


@pytest.mark.parametrize("template_name, text", [
    # roots without an end anchor (as llama.cpp's): the main parse stops early, the rest becomes content
    ("Qwen3-Coder.jinja", "Hello <tool_call>\n<function=special_function>\noops, not a parameter"),
    ("mistralai-Ministral-3-14B-Reasoning-2512.jinja", 'Hello [TOOL_CALLS]get_weather[ARGS]{"" oops'),
    ("GLM-4.6.jinja", "Hello <tool_call>special_function\noops, not a parameter"),
    ("openai-gpt-oss-120b.jinja", "<|channel|>final<|message|>Hello <|start|>oops"),
])
def test_final_parse_keeps_unparsed_text(template_name: str, text: str) -> None:
    """A final parse never silently drops model output: text that does not parse ends up as content, or — a
    call the stream already showed, whose arguments never became a JSON object — in the raw text of the
    ``truncated-call`` repair that reports it (core.chat.repairs: the one-shot parse equals the stream)."""
    msg = subject_for(template_name, True).parser.parse(text, False)
    reported = "".join(r.text for r in msg.repairs)
    assert "oops" in msg.content + msg.reasoning_content + reported, msg.to_openai()


def test_subjects_cover_every_route() -> None:
    """The subjects span every auto-parser tool format and reasoning mode and every handler family."""
    formats = {subject_for(name, True).format for name, _ in FUZZ_TEMPLATES}
    from core.chat.formats import FAMILIES  # type: ignore[attr-defined]

    # llama.cpp b11549's new families have no template in the shared corpus; their own templates and upstream
    # cases are in tests/data/b11549 (tests/test_handlers_b11549.py)
    b11549_only = {"k2-horizon", "translate-gemma", "llm-jp-harmony"}
    missing = {f.name for f in FAMILIES} - formats - b11549_only
    assert not missing, f"handler families without a fuzz subject: {sorted(missing)}"
    rows = _reference_rows()
    modes = {(rows[n]["analysis"]["tools"]["format"]["mode"], rows[n]["analysis"]["reasoning"]["mode"])
             for n, _ in FUZZ_TEMPLATES if rows[n]["route"] == "autoparser"}
    for mode in ("JSON_NATIVE", "TAG_WITH_JSON", "TAG_WITH_TAGGED", "NONE"):
        assert any(m == mode for m, _ in modes), mode
    for mode in ("NONE", "TAG_BASED", "TOOLS_ONLY"):
        assert any(r == mode for _, r in modes), mode
    assert all(subject_for(name, True).valid for name, _ in FUZZ_TEMPLATES)


@pytest.fixture(scope="module", autouse=True)
def _record_counts():
    start = time.time()
    yield
    out = ROOT / "tests" / "artifacts"
    try:
        out.mkdir(exist_ok=True)
        with open(out / "fuzz_incidents.jsonl", "w", encoding="utf-8") as f:
            for row in INCIDENTS:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        (out / "fuzz_counts.json").write_text(json.dumps({
            "examples_per_test": fuzz_examples(6), "templates": len(FUZZ_TEMPLATES),
            "subjects": len(SUBJECT_PARAMS), "seconds": round(time.time() - start, 1), **COUNTS}, indent=1))
    except OSError:
        pass
