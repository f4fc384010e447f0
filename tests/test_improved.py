"""The ``improved`` fidelity (core.analysis.fidelity): switchable improvements over llama.cpp.

The default (``llama.cpp``) must stay exactly the reference behaviour (test_analysis_reference,
test_cases_conformance); here: the switch itself, each improvement on the template it was made for, and what the
improved fidelity does to the reference figures — every reference case still passes, and the analysis differs
from llama.cpp's only on the templates listed in :data:`IMPROVED_ANALYSIS_DIFFERS`, each for a stated reason.
"""

from __future__ import annotations

import json

import pytest

from core.analysis import analyze, reapply
from core.analysis.fidelity import (TRANSFORMERS_DIALECT, IMPROVEMENTS, JSON_CALL_SEPARATORS, MARKER_WHITESPACE_ALIGNMENT, NULL_CONTENT_CALLS, CALL_TURN_CAPS,
                                    PYTHON_LITERAL_VALUES, STRING_ARGUMENT_PROBES, Fidelity, enabled_improvements,
                                    resolve_fidelity, stringify_call_arguments)
from core.analysis.result import ToolFormat
from core.analysis.tools import align_padded_markers
from core.analysis.workarounds import WORKAROUNDS, Workaround, apply_workarounds
from core.chat import roundtrip as RT
from core.chat.pipeline import build_chat_parser, cached_analysis
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.errors import AnalysisError
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source
from .test_analysis_reference import FIELDS, _get

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

_R1_ARGS = "string-argument probes: llama.cpp probes with object arguments, which this template prints as a dict"
_PADDING = "marker-whitespace-alignment: '</think>' (or a header) padded differently is not a section start"
IMPROVED_ANALYSIS_DIFFERS = {
    # the template does not read object arguments: probes now carry JSON text, as requests do, and the format
    # is read as JSON arguments (TAG_WITH_JSON) instead of markers containing "{'AA_ARG_FST_AA': '"
    "gguf-ollama-deepseek-v3.1-latest.jinja": _R1_ARGS,
    "hfjs-deepseek-ai-DeepSeek-R1.jinja": _R1_ARGS,
    "hfjs-meetkai-functionary-medium-v2.2.jinja": _R1_ARGS,
    "meetkai-functionary-medium-v3.1.jinja": _R1_ARGS,
    "xinference-deepseek-prover-v2.jinja": _R1_ARGS,
    "xinference-deepseek-r1-0528-qwen3.jinja": _R1_ARGS,
    "xinference-deepseek-r1-distill-qwen.jinja": _R1_ARGS,
    "xinference-DeepSeek-V3.2-Exp.jinja": _R1_ARGS + "; and " + _PADDING,
    "vllm-tool_chat_template_deepseekv31.jinja": _PADDING,
    "xinference-DeepSeek-V3.2.jinja": _PADDING,
    "xinference-Deepseek-V3.1.jinja": _PADDING,
    "vllm-tool_chat_template_llama4_json.jinja": _PADDING,
    # name(arg="v") calls: PYTHONIC instead of tagged markers made of the probe call's text
    "hfjs-LiquidAI-LFM2.5-VL-450M.jinja": "pythonic-calls",
    "hfjs-openbmb-MiniCPM3-4B.jinja": "pythonic-calls",
    # name(arg=%s) calls: the value formatted by Jinja's format filter, which the engine leaves as "%s"
    "vllm-tool_chat_template_llama3.2_pythonic.jinja": "pythonic-calls",
    "vllm-tool_chat_template_llama4_pythonic.jinja": "pythonic-calls",
    "vllm-tool_chat_template_toolace.jinja": "pythonic-calls",
    # no call is ever rendered: the JSON call format is read from the tool instructions (comparison I1)
    **{name: "instruction-call-format" for name in (
        "gguf-ollama-granite3.1-moe-1b.jinja", "gguf-ollama-granite3.2-8b.jinja", "gguf-ollama-granite3.3-2b.jinja",
        "ibm-granite-granite-3.3-2B-Instruct.jinja", "gguf-ollama-llama3.2-vision-90b.jinja",
        "hfjs-meta-llama-Llama-3.2-11B-Vision-Instruct.jinja", "vllm-tool_chat_template_llama3.2_json.jinja",
        "hfjs-HuggingFaceTB-SmolLM3-3B.jinja", "xinference-qwen1.5-chat.jinja", "hfjs-MadeAgents-Hammer2.1.jinja")},
    # the tool list in the system prompt names the function before the call id: T7 searches the call turn only;
    # and its reasoning, read from message.reasoning, is a turn of its own ('<|think|>…<|end|><|begin|>assistant')
    "upstage-Solar-Open-100B.jinja": "call-id-before-name; reasoning-field; reasoning-turn-header",
    # reasoning read from message.thinking / message.reasoning, which the template renders and reasoning_content not
    "hfjs-CohereLabs-command-a-reasoning-08-2025.jinja": "reasoning-field; call-turn-caps",
    "vllm-fallback-template_minicpmv45.jinja": "reasoning-field",
    # reasoning rendered only from content blocks of type 'thoughts' between <|inner_prefix|> and <|inner_suffix|>:
    # the explorer workaround apertus-inner-thoughts sets the markers (kept7; docs/fidelity-reasoning.md)
    **{name: "workaround apertus-inner-thoughts" for name in (
        "Apertus-8B-Instruct.jinja", "vllm-tool_chat_template_apertus.jinja")},
    # calls rendered only under `message['content'] is none`: probed with null content, DeepSeek's
    # <｜tool▁calls▁begin｜> format is read (llama.cpp finds no tool calls)
    **{name: "null-content-calls" for name in (
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.llamacpp-edit.jinja",
        "gguf-ollama-deepseek-v2.5-236b.jinja", "gguf-ollama-deepseek-v3-671b.jinja", "xinference-deepseek-v2.5.jinja",
        "xinference-skywork-or1.jinja", "llama-cpp-deepseek-r1.jinja")},
    # llama.cpp's Jinja dialect cannot render the template ('in' on an undefined value, for this request only):
    # analysed in the transformers dialect, its <tool_calls> JSON format is found (llama.cpp has no analysis)
    "hfjs-ai21labs-AI21-Jamba-Large-1.6.jinja": "transformers-dialect",
    # selectattr("tool_calls", "undefined"), which llama.cpp's engine lacks, in every render: Mistral's [TOOL_CALLS]
    # JSON list and Gemma 3's pythonic call list are found in the transformers dialect
    **{name: "transformers-dialect" for name in (
        "vllm-tool_chat_template_mistral.jinja", "vllm-tool_chat_template_mistral_parallel.jinja",
        "hfjs-mistralai-Mistral-Nemo-Instruct-2407.jinja", "vllm-tool_chat_template_gemma3_pythonic.jinja")},
    # the capability probe fails on its tool-result turn (a string result the template iterates, a result without
    # 'name'), the call turn itself renders: tool calls are supported
    "hfjs-NousResearch-Hermes-2-Pro-Llama-3-8B-JSON-Schema.jinja": "call-turn-caps",
    # Command R7B writes a tool-call turn's plan from message.tool_plan between <|START_THINKING|> and
    # <|END_THINKING|>: reasoning on tool-call turns, and the section start is <|START_ACTION|> alone
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "reasoning-field (tool_plan)",
    "hfjs-CohereLabs-c4ai-command-a-03-2025.jinja": "reasoning-field (tool_plan)",
}
"""Templates whose improved analysis differs from llama.cpp's (reference/analysis.jsonl), with the reason."""


def _tmpl(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


# ---------------------------------------------------------------------------------------------- the switch


def test_default_is_llama_cpp_and_records_nothing():
    rep = analyze(_tmpl("hfjs-deepseek-ai-DeepSeek-R1.jinja"))
    assert rep.fidelity == "llama.cpp" and not rep.improved
    assert rep.improvements == [] and rep.improvements_applied == []
    assert rep.analysis.tools.format.mode == ToolFormat.TAG_WITH_TAGGED  # llama.cpp's reading
    assert rep.to_json()["fidelity"] == "llama.cpp"


def test_improved_records_what_it_applied():
    rep = analyze(_tmpl("hfjs-deepseek-ai-DeepSeek-R1.jinja"), fidelity="improved")
    assert rep.fidelity == "improved" and rep.improved
    assert rep.improvements == [i.name for i in IMPROVEMENTS]
    assert rep.improvements_applied == [STRING_ARGUMENT_PROBES]
    assert "JSON text" in rep.improvement_notes[STRING_ARGUMENT_PROBES][0]
    j = rep.to_json(comparisons=False)
    assert j["fidelity"] == "improved" and j["improvements_applied"] == [STRING_ARGUMENT_PROBES]
    # reapply keeps the fidelity (no renders)
    assert reapply(rep, overrides={"tools.function.close": "```"}).fidelity == "improved"


def test_fidelity_values_and_errors():
    assert resolve_fidelity(None) is Fidelity.LLAMA_CPP
    assert resolve_fidelity("improved") is Fidelity.IMPROVED
    assert resolve_fidelity(Fidelity.LLAMA_CPP) is Fidelity.LLAMA_CPP
    assert enabled_improvements("llama.cpp") == frozenset()
    assert enabled_improvements("improved", [PYTHON_LITERAL_VALUES]) == \
        frozenset(i.name for i in IMPROVEMENTS) - {PYTHON_LITERAL_VALUES}
    with pytest.raises(AnalysisError, match="unknown fidelity 'better'"):
        analyze(_tmpl("Qwen-Qwen3-0.6B.jinja"), fidelity="better")
    with pytest.raises(AnalysisError, match="unknown improvement name"):
        analyze(_tmpl("Qwen-Qwen3-0.6B.jinja"), fidelity="improved", disabled_improvements=["nope"])
    with pytest.raises(AnalysisError, match="unknown fidelity"):
        cached_analysis(_tmpl("Qwen-Qwen3-0.6B.jinja"), "exact")


def test_disabled_improvement_restores_llama_cpp_reading():
    t = _tmpl("hfjs-deepseek-ai-DeepSeek-R1.jinja")
    rep = analyze(t, fidelity="improved", disabled_improvements=[STRING_ARGUMENT_PROBES])
    assert STRING_ARGUMENT_PROBES not in rep.improvements and rep.improvements_applied == []
    assert rep.analysis.to_json() == analyze(t).analysis.to_json()


def test_explorer_workarounds_apply_only_when_improved():
    assert {w.origin for w in WORKAROUNDS} <= {"llama.cpp", "explorer"}
    assert all(w.to_json()["origin"] == w.origin for w in WORKAROUNDS)
    rule = Workaround(name="x-test", title="test", description="test rule", requires=("<x>",),
                      sets=(("tools.function.close", "</x>"),), origin="explorer")
    from core.analysis.result import TemplateAnalysis

    a = TemplateAnalysis()
    assert apply_workarounds("<x>", a, rules=[rule]) == [] and a.tools.function.close == ""
    assert apply_workarounds("<x>", a, rules=[rule], fidelity="improved") == [("x-test",
                                                                                {"tools.function.close": "</x>"})]
    assert a.tools.function.close == "</x>"


def test_cached_analysis_is_per_fidelity():
    t = _tmpl("xinference-Deepseek-V3.1.jinja")
    a, b = cached_analysis(t), cached_analysis(t, "improved")
    assert a.fidelity == "llama.cpp" and b.fidelity == "improved"
    assert a.analysis.tools.format.section_start.startswith("</think>")
    assert b.analysis.tools.format.section_start == "<｜tool▁calls▁begin｜>"
    assert cached_analysis(t, Fidelity.IMPROVED) is b


# ---------------------------------------------------------------------------------------------- improvements


def test_stringify_call_arguments():
    msgs = [{"role": "user", "content": "x"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "f", "arguments": {"a": "é", "n": 1}}},
                {"function": {"name": "g", "arguments": '{"b": 2}'}}]}]
    out, changed = stringify_call_arguments(msgs)
    assert changed and out[0] is msgs[0]
    assert out[1]["tool_calls"][0]["function"]["arguments"] == '{"a":"é","n":1}'
    assert out[1]["tool_calls"][1]["function"]["arguments"] == '{"b": 2}'
    assert msgs[1]["tool_calls"][0]["function"]["arguments"] == {"a": "é", "n": 1}  # input untouched
    assert stringify_call_arguments(msgs[:1]) == (msgs[:1], False)


def test_string_argument_probes_read_deepseek_r1_as_json_arguments():
    rep = analyze(_tmpl("hfjs-deepseek-ai-DeepSeek-R1.jinja"), fidelity="improved")
    t = rep.analysis.tools
    assert t.format.mode == ToolFormat.TAG_WITH_JSON
    assert (t.format.section_start, t.format.per_call_start) == ("<｜tool▁calls▁begin｜>",
                                                                 "<｜tool▁call▁begin｜>function")
    assert (t.function.name_prefix, t.function.name_suffix, t.function.close) == ("<｜tool▁sep｜>", "\n```json\n",
                                                                                  "```")
    assert t.arguments.name_prefix == "" and not any("AA_ARG" in tok for tok in rep.analysis.preserved_tokens)


def test_string_argument_probes_do_nothing_for_object_argument_templates():
    rep = analyze(_tmpl("Qwen-Qwen3-0.6B.jinja"), fidelity="improved")
    assert rep.analysis.caps.supports_object_arguments
    assert STRING_ARGUMENT_PROBES not in rep.improvements_applied
    assert rep.analysis.to_json() == analyze(_tmpl("Qwen-Qwen3-0.6B.jinja")).analysis.to_json()


@pytest.mark.parametrize("left, right, expected", [
    ("   </think>  A", "</think>    <tc>{x}", ("</think>    ", "<tc>{x}")),
    ("<h>assistant<e>\n\nA", "\n<h>assistant<e>\n\n{x}", ("\n<h>assistant<e>\n\n", "{x}")),
    ("A text", "<tc>{x}", None),          # nothing in common
    ("ab c", "a b<tc>", None),            # common text, but no whole marker
    (" <a", "<a>b", None),                # an unterminated marker is not a marker
])
def test_align_padded_markers(left, right, expected):
    assert align_padded_markers(left, right) == expected


def test_marker_alignment_on_deepseek_v31():
    rep = analyze(_tmpl("xinference-Deepseek-V3.1.jinja"), fidelity="improved")
    f = rep.analysis.tools.format
    assert rep.improvements_applied == [MARKER_WHITESPACE_ALIGNMENT]
    assert (f.section_start, f.per_call_start, f.per_call_end, f.section_end) == (
        "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>")
    t1 = rep.comparison("T1")
    assert any("different padding" in n for n in t1.notes)


def _seed_parse(fidelity: str, text: str):
    t = _tmpl("ByteDance-Seed-OSS.jinja")
    req = ChatRequest.from_dict(RT.round_trip_request())
    return build_chat_parser(t, req, fidelity=fidelity).parser, text


_SEED_OUT = ("<seed:think>ok</seed:think>Sure.\n\n<seed:tool_call>\n<function=book_table>\n"
             "<parameter=restaurant>Chez Nous</parameter>\n<parameter=guests>4</parameter>\n"
             "<parameter=options>{'time': '19:30', 'ok': True, 'alt': None, 'tags': ['a', \"b'c\"]}</parameter>\n"
             "</function>\n</seed:tool_call>")


def test_python_literal_values_parse_and_stream():
    parser, text = _seed_parse("improved", _SEED_OUT)
    msg = parser.parse(text).to_openai()
    assert msg["content"].strip() == "Sure." and msg["reasoning_content"] == "ok"
    args = json.loads(msg["tool_calls"][0]["function"]["arguments"])
    assert args == {"restaurant": "Chez Nous", "guests": 4,
                    "options": {"time": "19:30", "ok": True, "alt": None, "tags": ["a", "b'c"]}}
    sp = StreamingParser(parser)
    for ch in text:
        sp.feed(ch)
    sp.finish()
    assert sp.message.to_openai() == msg
    # llama.cpp fidelity: the call is not recognised (the JSON value parser stops at the quote)
    plain = _seed_parse("llama.cpp", _SEED_OUT)[0].parse(_SEED_OUT).to_openai()
    assert not plain.get("tool_calls")


def test_python_literal_values_keep_json_and_the_grammar_valid():
    from .test_gbnf_validator import gbnf_accepts, gbnf_problems

    parser, _ = _seed_parse("improved", "")
    text = _SEED_OUT.replace("{'time': '19:30', 'ok': True, 'alt': None, 'tags': ['a', \"b'c\"]}",
                             '{"time": "19:30"}')
    msg = parser.parse(text).to_openai()
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"])["options"] == {"time": "19:30"}
    assert parser.grammar and parser.grammar_lazy
    assert gbnf_problems(parser.grammar) == []
    section = _SEED_OUT[_SEED_OUT.index("<seed:tool_call>"):]
    assert gbnf_accepts(parser.grammar, section)[0], gbnf_accepts(parser.grammar, section)[1]


def test_python_literal_values_reach_special_handlers():
    # Qwen3-Coder's handler (a special route) builds its own PEG: the option reaches it through the pipeline
    t = _tmpl("gguf-ollama-qwen3-coder-30b.jinja")
    req = ChatRequest.from_dict(RT.round_trip_request())
    out = ("<tool_call>\n<function=book_table>\n<parameter=restaurant>\nChez Nous\n</parameter>\n"
           "<parameter=guests>\n4\n</parameter>\n<parameter=options>\n{'time': '19:30'}\n</parameter>\n"
           "</function>\n</tool_call>")
    improved = build_chat_parser(t, req, fidelity="improved").parser.parse(out).to_openai()
    assert json.loads(improved["tool_calls"][0]["function"]["arguments"])["options"] == {"time": "19:30"}
    default = build_chat_parser(t, req).parser.parse(out).to_openai()
    assert not default.get("tool_calls")


def test_json_calls_separated_by_whitespace():
    t = _tmpl("vllm-tool_chat_template_llama4_json.jinja")
    req = ChatRequest.from_dict(RT.round_trip_request())
    out = ('Checking.{"name": "get_weather", "parameters": {"city": "Paris"}}\n'
           '{"name": "book_table", "parameters": {"restaurant": "X", "guests": 2}}')
    msg = build_chat_parser(t, req, fidelity="improved").parser.parse(out).to_openai()
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather", "book_table"]
    assert msg["content"].strip() == "Checking."
    rep = build_chat_parser(t, req, fidelity="improved").report
    assert JSON_CALL_SEPARATORS in rep.improvements


def _parse(name: str, output: str, fidelity: str, **request) -> dict:
    req = ChatRequest.from_dict({**RT.round_trip_request(), **request})
    return build_chat_parser(_tmpl(name), req, fidelity=fidelity).parser.parse(output).to_openai()


def test_json_array_start_without_section_marker():
    out = 'Sure [see below].[{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call00001"}]'
    msg = _parse("gguf-ollama-cogito-3b.jinja", out.replace(" [see below]", ""), "improved")
    assert msg["content"].strip() == "Sure." and msg["tool_calls"][0]["function"]["name"] == "get_weather"
    assert not _parse("gguf-ollama-cogito-3b.jinja", out.replace(" [see below]", ""), "llama.cpp").get("tool_calls")
    # a '[' in the content: the call is not found there, the text stays content (never dropped)
    msg = _parse("gguf-ollama-cogito-3b.jinja", out, "improved")
    assert msg["content"].startswith("Sure [see below]")


def test_open_content_before_calls_command_r():
    name = "CohereForAI-c4ai-command-r-plus-tool_use.jinja"
    out = ('I will look it up.\nAction:\n```json\n[\n    {\n        "tool_name": "get_weather",\n'
           '        "parameters": {"city": "Paris"}\n    }\n]```')
    msg = _parse(name, out, "improved")
    assert msg["content"].strip() == "I will look it up."
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"]
    assert not _parse(name, out, "llama.cpp").get("tool_calls")
    # content only, closed by the end-of-turn marker
    assert _parse(name, "Hello.<|END_OF_TURN_TOKEN|>", "improved")["content"].strip() == "Hello."
    t = _tmpl(name)
    parser = build_chat_parser(t, ChatRequest.from_dict(RT.round_trip_request()), fidelity="improved").parser
    assert any("open-content-before-calls" in n for n in parser.notes)


def test_generation_prompt_preamble_is_not_reasoning():
    from core.chat.generator import reasoning_preamble

    name = "Apriel-1.6-15b-Thinker-fixed.jinja"
    out = "I think.\n[BEGIN FINAL RESPONSE]\nHello."
    msg = _parse(name, out, "improved")
    assert (msg["reasoning_content"].strip(), msg["content"].strip()) == ("I think.", "Hello.")
    assert _parse(name, out, "llama.cpp")["reasoning_content"].startswith("Here are my reasoning steps:")
    rep = analyze(_tmpl(name))
    assert reasoning_preamble(rep.analysis, rep.generation_prompt) == "Here are my reasoning steps:"
    # a generation prompt that closes reasoning (or writes nothing after the start) has no preamble
    qwen = analyze(_tmpl("Qwen-Qwen3-0.6B.jinja")).analysis
    assert reasoning_preamble(qwen, "<|im_start|>assistant\n<think>\n\n</think>\n\n") == ""
    assert reasoning_preamble(qwen, "<|im_start|>assistant\n<think>\n") == ""


def test_content_turn_header_is_skipped_hunyuan():
    # Hunyuan A13B renders answers as '助手：' + content after a generation prompt ending '<|extra_0|>' (its tool
    # instructions tell the model to start so); the call turn has no header.
    name = "vllm-tool_chat_template_hunyuan_a13b.jinja"
    req = ChatRequest.from_dict(RT.round_trip_request())
    t = _tmpl(name)
    assert RT.content_turn_header(t, req, cached_analysis(t, "improved").analysis) == "助手："
    assert _parse(name, "助手：Paris is sunny.", "improved")["content"] == "Paris is sunny."
    assert _parse(name, "助手：Paris is sunny.", "llama.cpp")["content"] == "助手：Paris is sunny."
    # never required, and a call turn is untouched
    assert _parse(name, "Paris is sunny.", "improved")["content"] == "Paris is sunny."
    call = '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>'
    assert _parse(name, call, "improved")["tool_calls"][0]["function"]["name"] == "get_weather"
    parser = build_chat_parser(t, req, fidelity="improved").parser
    assert any("content-turn-header" in n for n in parser.notes)
    # streamed one character at a time: the header's first character is never shown as content
    sp = StreamingParser(parser)
    shown = ""
    for ch in "助手：Paris is sunny.":
        for d in sp.feed(ch):
            shown += d.content or ""
        assert "助" not in shown
    assert shown == "Paris is sunny."
    sp.finish()
    assert sp.message.to_openai()["content"] == "Paris is sunny."
    # switched off by name: the header is content again
    rep = analyze(t, fidelity="improved", disabled_improvements=["content-turn-header"])
    off = build_chat_parser(t, req, report=rep).parser
    assert off.content_header == "" and off.parse("助手：Hi.").to_openai()["content"] == "助手：Hi."


def test_content_turn_header_not_learned_where_the_turn_has_none():
    req = ChatRequest.from_dict(RT.round_trip_request())
    for name in ("Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja"):
        t = _tmpl(name)
        assert RT.content_turn_header(t, req, cached_analysis(t, "improved").analysis) == ""


@pytest.mark.parametrize("text, call", [
    ('x[FFF_FIRST_FUN_F(AA_ARG_FST_AA="XXXX", BB_ARG_SND_BB="Y)Y")]y',
     'FFF_FIRST_FUN_F(AA_ARG_FST_AA="XXXX", BB_ARG_SND_BB="Y)Y")'),
    ("FFF_FIRST_FUN_F( AA_ARG_FST_AA = 'XXXX', n={'a': (1)}) tail",
     "FFF_FIRST_FUN_F( AA_ARG_FST_AA = 'XXXX', n={'a': (1)})"),
    ("[FFF_FIRST_FUN_F(AA_ARG_FST_AA=%s, BB_ARG_SND_BB=%s)]", "FFF_FIRST_FUN_F(AA_ARG_FST_AA=%s, BB_ARG_SND_BB=%s)"),
    ('FFF_FIRST_FUN_F(AA_ARG_FST_AA="%s")', 'FFF_FIRST_FUN_F(AA_ARG_FST_AA="%s")'),  # unapplied format filter
    ("FFF_FIRST_FUN_F(AA_ARG_FST_AA=%d)", None),
    ('FFF_FIRST_FUN_F(AA_ARG_FST_AA="XXXX"', None),          # not closed
    ('{"name": "FFF_FIRST_FUN_F", "AA_ARG_FST_AA": "XXXX"}', None),
])
def test_find_pythonic_call(text, call):
    from core.analysis.tools import find_pythonic_call

    span = find_pythonic_call(text)
    assert (text[span[0]:span[1]] if span else None) == call


@pytest.mark.parametrize("name, section", [
    ("hfjs-LiquidAI-LFM2.5-VL-450M.jinja", ("<|tool_call_start|>", "<|tool_call_end|>", True)),
    ("hfjs-openbmb-MiniCPM3-4B.jinja", ("<|tool_call_start|>\n```python", "```\n<|tool_call_end|>", False)),
    ("vllm-tool_chat_template_llama3.2_pythonic.jinja", ("", "", True)),
])
def test_pythonic_calls(name, section):
    rep = analyze(_tmpl(name), fidelity="improved")
    f = rep.analysis.tools.format
    # (LFM2.5 also reads its reasoning from message.thinking: improvement reasoning-field, same markers)
    assert f.mode == ToolFormat.PYTHONIC and \
        [n for n in rep.improvements_applied if n != "reasoning-field"] == ["pythonic-calls"]
    assert (f.section_start, f.section_end, f.tools_array_wrapped) == section
    assert analyze(_tmpl(name)).analysis.tools.format.mode == ToolFormat.TAG_WITH_TAGGED  # llama.cpp
    start, end, wrapped = section
    calls = ("get_weather(city='Paris', days=3), book_table(restaurant=\"Chez \\\"N\\\"\", guests=4, "
             "options={'time': '19:30', 'vip': True})")
    out = f"{start}\n{'[' if wrapped else ''}{calls}{']' if wrapped else ''}\n{end}\nDone."
    req = ChatRequest.from_dict(RT.round_trip_request())
    parser = build_chat_parser(_tmpl(name), req, fidelity="improved").parser
    msg = parser.parse(out).to_openai()
    assert msg["content"].strip() == "Done."
    assert [json.loads(c["function"]["arguments"]) for c in msg["tool_calls"]] == [
        {"city": "Paris", "days": 3},
        {"restaurant": 'Chez "N"', "guests": 4, "options": {"time": "19:30", "vip": True}}]
    sp = StreamingParser(parser)
    for ch in out:
        sp.feed(ch)
    sp.finish()
    assert sp.message.to_openai() == msg
    from .test_gbnf_validator import gbnf_problems

    if start:  # a bare call list has no trigger marker: no lazy grammar is built for it
        assert parser.grammar and gbnf_problems(parser.grammar) == []


# ---------------------------------------------------------------------------------------------- reference figures


@pytest.fixture(scope="module")
def improved_results(reference_analysis):
    out = {}
    for name, row in sorted(reference_analysis.items()):
        if row.get("route") != "autoparser" or "analysis" not in row:
            continue
        rep = analyze(_tmpl(name), fidelity="improved")
        out[name] = (row, rep)
    return out


def test_reference_agreement_under_improved(improved_results):
    """250/297 (252 before the Apertus workaround, 258 before transformers-dialect, 267 before null-content-calls,
    call-turn-caps and tool_plan, 269 before reasoning-field): the 47 templates of IMPROVED_ANALYSIS_DIFFERS differ
    on purpose."""
    differ = {}
    for name, (row, rep) in improved_results.items():
        ours = rep.analysis.to_json()
        why = [f for f in FIELDS if _get(row["analysis"], f) != _get(ours, f)]
        gp = rep.generation_prompt if rep.generation_prompt_error is None else "<missing>"
        if TRANSFORMERS_DIALECT in rep.improvements_applied:
            # llama.cpp cannot render the template (no generation prompt, no probe): every field is our own
            assert _get(row, "apply.generation_prompt") == "<missing>" and rep.generation_prompt_error is None, name
            differ[name] = ["rendered in the transformers dialect"]
            continue
        assert _get(row, "apply.generation_prompt") == gp, name
        caps = {k: v for k, v in ours["caps"].items() if k in row["analysis"]["caps"]}
        if NULL_CONTENT_CALLS in rep.improvements_applied or CALL_TURN_CAPS in rep.improvements_applied:
            # calls found by a call-turn probe (null content / a failing tool-result turn): tool calls (and
            # parallel ones) are supported
            assert caps["supports_tool_calls"] and not row["analysis"]["caps"]["supports_tool_calls"], name
            caps = {k: v for k, v in caps.items() if k not in ("supports_tool_calls", "supports_parallel_tool_calls")}
            want = {k: v for k, v in row["analysis"]["caps"].items() if k in caps}
            assert want == caps, name
        else:
            assert row["analysis"]["caps"] == caps, name
        if why:
            differ[name] = why
    print(f"improved fidelity: reference agreement {len(improved_results) - len(differ)}/{len(improved_results)}")
    assert set(differ) == set(IMPROVED_ANALYSIS_DIFFERS), sorted(set(differ) ^ set(IMPROVED_ANALYSIS_DIFFERS))
    # each difference comes from an improvement, or a workaround of the explorer's, that the report says it applied
    explorer = {w.name for w in WORKAROUNDS if w.origin == "explorer"}
    for name in differ:
        rep = improved_results[name][1]
        assert rep.improvements_applied or explorer & set(rep.workarounds_applied), name


def test_reference_cases_under_improved(reference_cases):
    """Every reference case (llama.cpp's own tests) still passes at improved fidelity: 354/354."""
    from core.chat.conformance import TemplateDir, run_case

    from .test_cases_conformance import accumulate, message_mismatch

    templates = TemplateDir(str(TEMPLATES))
    fails = []
    for case in reference_cases:
        r = run_case(case, templates, "improved")
        why = r.get("error") or message_mismatch(case["expect"], r.get("message")) \
            or message_mismatch(case["expect"], accumulate(r.get("deltas") or []))
        if why:
            fails.append(f"{case['id']} [{case['template']}]: {why}")
    print(f"improved fidelity: reference cases {len(reference_cases) - len(fails)}/{len(reference_cases)}")
    assert not fails, "\n".join(fails)


# ---------------------------------------------------------------------------------------------- command line


def test_cli_improved(capsys):
    from core.cli import main

    path = str(TEMPLATES / "hfjs-deepseek-ai-DeepSeek-R1.jinja")
    assert main(["analyze", path, "--json", "--no-comparisons", "--improved"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fidelity"] == "improved" and out["improvements_applied"] == [STRING_ARGUMENT_PROBES]
    assert main(["analyze", path, "--no-comparisons"]) == 0
    assert "Fidelity: llama.cpp" in capsys.readouterr().out
    assert main(["analyze", path, "--disable-improvement", STRING_ARGUMENT_PROBES]) == 2  # needs --improved
    capsys.readouterr()
    assert main(["roundtrip", path, "--json", "--improved"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "pass"
    assert main(["roundtrip", path, "--json"]) == 1  # llama.cpp's analysis: a parser failure
    capsys.readouterr()
    assert main(["workarounds"]) == 0
    assert "python-literal-values" in capsys.readouterr().out


def test_content_inside_section_start_llama4_ollama():
    # Ollama's Llama 4 template writes a call turn as '<|python_start|>' + content + '<|python_end|>' + calls;
    # the analysis learns '<|python_start|><|python_end|>' (empty content) as the section start.
    name = "gguf-ollama-llama4-latest.jinja"
    out = ('<|python_start|>Let me check.<|python_end|>'
           '{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}')
    got = _parse(name, out, "improved")
    assert got["content"] == "Let me check."
    assert [c["function"]["name"] for c in got["tool_calls"]] == ["get_weather"]
    assert json.loads(got["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris", "days": 3}
    # an empty content still parses as before
    empty = '<|python_start|><|python_end|>{"name": "get_weather", "parameters": {"city": "Rome"}}'
    assert _parse(name, empty, "improved")["tool_calls"][0]["function"]["name"] == "get_weather"
    assert not _parse(name, out, "llama.cpp").get("tool_calls")
    t = _tmpl(name)
    req = ChatRequest.from_dict(RT.round_trip_request())
    assert any("content-inside-section-start" in n for n in build_chat_parser(t, req, fidelity="improved").parser.notes)
    rep = analyze(t, fidelity="improved", disabled_improvements=["content-inside-section-start"])
    off = build_chat_parser(t, req, report=rep).parser.parse(out).to_openai()
    assert not off.get("tool_calls")


def test_solar_open_call_id_before_name_and_wrapped_content():
    # Solar Open: '<|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{…}<|tool_call:end|>'; its system
    # prompt lists the tools, so llama.cpp's T7 finds the name on both sides of the id and keeps 'call00001' in
    # the name prefix; its content end '<|end|>' is the end of turn, never in an answer.
    name = "upstage-Solar-Open-100B.jinja"
    rep = analyze(_tmpl(name), fidelity="improved")
    t = rep.analysis.tools
    assert (t.call_id.pos.value, t.call_id.suffix, t.function.name_prefix) == \
        ("PRE_FUNC_NAME", "<|tool_call:name|>", "<|tool_call:name|>")
    assert "call-id-before-name" in rep.improvements_applied
    ref = analyze(_tmpl(name)).analysis.tools
    assert (ref.call_id.pos.value, ref.function.name_prefix) == ("NONE", "call00001<|tool_call:name|>")

    def call(cid: str, fn: str, args: str) -> str:
        return f"<|tool_call:begin|>{cid}<|tool_call:name|>{fn}<|tool_call:args|>{args}<|tool_call:end|>"

    out = ("<|tool_calls|>" + call("a1b2c3d4e5", "get_weather", '{"city": "Paris"}')
           + call("f6g7h8i9j0", "get_weather", '{"city": "Rome"}') + "<|calls|>")
    msg = _parse(name, out, "improved")
    assert [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])["city"])
            for c in msg["tool_calls"]] == [("a1b2c3d4e5", "get_weather", "Paris"), ("f6g7h8i9j0", "get_weather", "Rome")]
    assert not _parse(name, out, "llama.cpp").get("tool_calls")
    # wrapped content: start marker read, end marker optional (the end of turn stops generation)
    assert _parse(name, "<|content|>Paris is sunny.", "improved")["content"] == "Paris is sunny."
    assert _parse(name, "<|content|>Paris is sunny.<|end|>", "improved")["content"] == "Paris is sunny."
    assert _parse(name, "<|content|>Paris is sunny.", "llama.cpp")["content"] == "<|content|>Paris is sunny."
    assert _parse(name, "Paris is sunny.", "improved")["content"] == "Paris is sunny."
    # streamed one character at a time: the start marker is never shown, the id arrives with the call
    req = ChatRequest.from_dict(RT.round_trip_request())
    parser = build_chat_parser(_tmpl(name), req, fidelity="improved").parser
    for text, content in (("<|content|>Paris is sunny.", "Paris is sunny."), (out, "")):
        sp, shown = StreamingParser(parser), ""
        for ch in text:
            for d in sp.feed(ch):
                shown += d.content or ""
        sp.finish()
        assert shown == content
        assert [c.get("id") for c in sp.message.to_openai().get("tool_calls") or []] == \
            (["a1b2c3d4e5", "f6g7h8i9j0"] if not content else [])
    # switched off by name: the wrapped content reads as llama.cpp's again
    off = analyze(_tmpl(name), fidelity="improved", disabled_improvements=["wrapped-content-tagged-calls"])
    assert build_chat_parser(_tmpl(name), req, report=off).parser.parse("<|content|>Hi.").to_openai()["content"] \
        == "<|content|>Hi."


def test_solar_open_reasoning_read_from_its_own_field_and_turn():
    # Solar Open renders message.reasoning (never reasoning_content) as a turn of its own before the answer:
    # '<|begin|>assistant<|think|>…<|end|><|begin|>assistant<|content|>…<|end|>'; the generation prompt is
    # '<|begin|>assistant', so a model writes '<|think|>…<|end|><|begin|>assistant<|content|>…'
    name = "upstage-Solar-Open-100B.jinja"
    rep = analyze(_tmpl(name), fidelity="improved")
    r = rep.analysis.reasoning
    assert (r.mode.value, r.start, r.end) == ("TAG_BASED", "<|think|>", "<|end|><|begin|>assistant")
    assert {"reasoning-field", "reasoning-turn-header"} <= set(rep.improvements_applied)
    assert "message.reasoning" in rep.improvement_notes["reasoning-field"][0]
    assert analyze(_tmpl(name)).analysis.reasoning.mode.value == "NONE"  # llama.cpp's reading stays
    out = "<|think|>The user asks about Paris.<|end|><|begin|>assistant<|content|>Paris is sunny."
    for tools in ({}, {"tools": None}):
        msg = _parse(name, out, "improved", **tools)
        assert (msg.get("reasoning_content"), msg["content"]) == ("The user asks about Paris.", "Paris is sunny.")
        assert _parse(name, out, "llama.cpp", **tools)["content"].startswith("<|think|>The user asks")
    calls = ('<|think|>Check the weather.<|end|><|begin|>assistant<|tool_calls|><|tool_call:begin|>a1b2c3d4e5'
             '<|tool_call:name|>get_weather<|tool_call:args|>{"city": "Paris"}<|tool_call:end|><|calls|>')
    msg = _parse(name, calls, "improved")
    assert msg["reasoning_content"] == "Check the weather." and not msg.get("content")
    assert [(c["id"], c["function"]["name"]) for c in msg["tool_calls"]] == [("a1b2c3d4e5", "get_weather")]
    # streamed one character at a time: the same message, the turn header never shown
    req = ChatRequest.from_dict(RT.round_trip_request())
    sp, shown = StreamingParser(build_chat_parser(_tmpl(name), req, fidelity="improved").parser), ""
    for ch in out:
        for d in sp.feed(ch):
            shown += d.content or ""
    sp.finish()
    assert shown == "Paris is sunny." and sp.message.to_openai()["reasoning_content"] == "The user asks about Paris."
    # the conversation's reasoning reaches the prompt under message.reasoning (the turn after the last user message)
    history = {"messages": [{"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "reasoning_content": "Need the weather tool.", "content": None,
                             "tool_calls": [{"id": "a1b2c3d4e5", "type": "function", "function": {
                                 "name": "get_weather", "arguments": {"city": "Paris"}}}]},
                            {"role": "tool", "tool_call_id": "a1b2c3d4e5", "content": "sunny"}]}
    hreq = ChatRequest.from_dict({**RT.round_trip_request(), **history})
    turn = "<|begin|>assistant<|think|>Need the weather tool.<|end|><|begin|>assistant<|tool_calls|>"
    assert turn in build_chat_parser(_tmpl(name), hreq, fidelity="improved").prompt
    assert turn not in build_chat_parser(_tmpl(name), hreq, fidelity="llama.cpp").prompt
    # each switched off by name
    off = analyze(_tmpl(name), fidelity="improved", disabled_improvements=["reasoning-turn-header"])
    assert (off.analysis.reasoning.start, off.analysis.reasoning.end) == ("<|think|>", "<|end|>")
    off = analyze(_tmpl(name), fidelity="improved", disabled_improvements=["reasoning-field"])
    assert off.analysis.reasoning.mode.value == "NONE" and "reasoning-field" not in off.improvements_applied


def test_reasoning_turn_gpt_oss():
    # gpt-oss writes message.thinking as its own turn: '<|start|>assistant<|channel|>analysis<|message|>…<|end|>'
    # then '<|start|>assistant<|channel|>final<|message|>…'; its analysis (shown beside its special handler)
    # now says so, where llama.cpp's reads no reasoning
    name = "openai-gpt-oss-120b.jinja"
    r = analyze(_tmpl(name), fidelity="improved").analysis.reasoning
    assert (r.start, r.end) == ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant")
    assert analyze(_tmpl(name)).analysis.reasoning.mode.value == "NONE"


def test_reasoning_field_command_a_reasoning():
    # Command A Reasoning prints msg.thinking between its own markers; reasoning_content it never reads
    name = "hfjs-CohereLabs-command-a-reasoning-08-2025.jinja"
    r = analyze(_tmpl(name), fidelity="improved").analysis.reasoning
    assert (r.start, r.end) == ("<|START_THINKING|>", "<|END_THINKING|>")
    assert analyze(_tmpl(name)).analysis.reasoning.mode.value == "NONE"


def test_call_turn_header_functionary_v2_2():
    # Functionary v2.2 writes every call as its own turn: '<|from|>assistant\n<|recipient|>NAME\n<|content|>ARGS',
    # after an (empty) 'all' answer; the generation prompt ends with that header.
    name = "hfjs-meetkai-functionary-medium-v2.2.jinja"
    f = analyze(_tmpl(name), fidelity="improved").analysis.tools.format
    assert (f.per_call_start, f.section_start) == ("<|from|>assistant\n<|recipient|>", "")
    off = analyze(_tmpl(name), fidelity="improved", disabled_improvements=["call-turn-header"]).analysis.tools.format
    assert (off.per_call_start, off.section_start) == ("", "<|recipient|>")
    two = ('all\n<|content|>Let me check.\n<|from|>assistant\n<|recipient|>get_weather\n<|content|>{"city":"Paris","days":3}'
           '\n<|from|>assistant\n<|recipient|>book_table\n<|content|>{"restaurant":"Chez Nous","guests":4}')
    got = _parse(name, two, "improved")
    assert got["content"].strip() == "Let me check."
    assert [c["function"]["name"] for c in got["tool_calls"]] == ["get_weather", "book_table"]
    assert json.loads(got["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris", "days": 3}
    # a call straight after the generation prompt: its header is the prompt's
    bare = 'get_weather\n<|content|>{"city":"Paris","days":3}\n<|from|>assistant\n<|recipient|>book_table\n<|content|>{"restaurant":"Chez Nous","guests":4}'
    got = _parse(name, bare, "improved")
    assert not got.get("content") and [c["function"]["name"] for c in got["tool_calls"]] == ["get_weather", "book_table"]
    assert _parse(name, "all\n<|content|>Paris is sunny.", "improved")["content"] == "Paris is sunny."
    assert "<|from|>assistant" in (_parse(name, two, "llama.cpp").get("content") or "")
