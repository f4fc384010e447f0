"""Issue 10: repairs as data (core.chat.repairs), the streaming contract, and the drift suite.

* the streaming contract at both fidelities — for any output and any split into deltas, the accumulated deltas
  after ``finish()`` equal the one-shot parse (a call cut off at the end and already streamed aside:
  :func:`core.chat.repairs.settled`), and a final parse never returns arguments that are not a JSON object —
  over every reference case (cut at a seeded random point) and over corpus templates (hypothesis: rendered
  outputs with random drift, truncation and splits);
* the drift suite (``tests/data/drift/*.jsonl``: real outputs from public bug reports) at both fidelities;
* no repair makes a previously correct parse worse (reference cases, round trip, drift suite at improved
  fidelity, with and without the tolerance repairs).
"""

from __future__ import annotations

import json
import random
import re
from functools import lru_cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.chat.drift import load_cases, run_case
from core.chat.message import AssistantMessage
from core.chat.pipeline import build_chat_parser
from core.chat.repairs import (REPAIRS, REPAIRS_BY_NAME, TRUNCATED_CALL, FiredRepair, RepairStage,
                               UnknownRepairError, enabled_repairs, is_json_object, settled)
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.jinja.template import ChatTemplate

from .conftest import REFERENCE, ROOT, TEMPLATES

DRIFT = ROOT / "tests" / "data" / "drift"
FIDELITIES = ("llama.cpp", "improved")

# Measured on the suite (41 cases); docs/fidelity.md "Repairs" shows the same figures.
SUITE_PASS = {"llama.cpp": 17, "improved": 41}


def _tmpl(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)


def stream(parser: Any, text: str, cuts: list[int], is_partial: bool = False) -> StreamingParser:
    """Feed ``text`` split at ``cuts``, then finish."""
    sp = StreamingParser(parser)
    last = 0
    for c in sorted(set(cuts)) + [len(text)]:
        if last < c <= len(text):
            sp.feed(text[last:c])
            last = c
    sp.finish(is_partial)
    return sp


def check_contract(parser: Any, text: str, cuts: list[int], where: str) -> AssistantMessage:
    """The two properties for one output: stream (settled) = one-shot, and JSON-object arguments only."""
    one = parser.parse(text, False)
    bad = [c.arguments for c in one.tool_calls if not is_json_object(c.arguments)]
    assert not bad, f"{where}: non-JSON arguments {bad} for {text!r}"
    sp = stream(parser, text, cuts)
    assert settled(sp.message, one).to_openai() == one.to_openai(), \
        f"{where}: stream != one-shot for {text!r} split at {cuts}:\n{sp.message.to_openai()}\n{one.to_openai()}"
    assert [r.name for r in sp.repairs] == [r.name for r in one.repairs], where
    return one


# ------------------------------------------------------------------------------------------------ rules as data


def test_repairs_are_documented_data():
    names = [r.name for r in REPAIRS]
    assert len(names) == len(set(names)) == len(REPAIRS_BY_NAME)
    for r in REPAIRS:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", r.name) and r.title and r.accepts and r.example and r.source, r
        assert set(r.to_json()) == {"name", "title", "stage", "accepts", "example", "source"}
    contract = {r.name for r in REPAIRS if r.stage is RepairStage.CONTRACT}
    assert contract == {"stream-consistent-final", "truncated-call", "unparsed-text"}
    assert enabled_repairs("llama.cpp") == contract
    assert enabled_repairs("improved") == set(names)
    assert enabled_repairs("improved", ["fenced-calls"]) == set(names) - {"fenced-calls"}
    assert enabled_repairs("improved", ["truncated-call"]) == set(names)   # the contract cannot be switched off
    with pytest.raises(UnknownRepairError, match="unknown repair 'nope'"):
        enabled_repairs("improved", ["nope"])


def test_cli_lists_repairs_and_rejects_unknown_names(capsys, tmp_path, monkeypatch):
    from core.cli import main

    assert main(["repairs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed] == [r.name for r in REPAIRS]
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [_WEATHER]}))
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO('<tool_call>\n{"name": "get_weather", "argu'))
    assert main(["parse", str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja"), "--request", str(req), "--compact"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "tool_calls" not in out and out["repairs"][0]["name"] == TRUNCATED_CALL
    assert out["repairs"][0]["start"] == 0 and out["repairs"][0]["detail"] == "get_weather"
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("hi"))
    assert main(["parse", str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja"), "--request", str(req), "--improved",
                 "--disable-repair", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown repair 'nope'" in err


# ------------------------------------------------------------------------------------------------ truncation

_WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _qwen3_parser(fidelity: str = "llama.cpp") -> Any:
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": [_WEATHER],
                                 "parallel_tool_calls": True})
    return build_chat_parser(_tmpl("Qwen-Qwen3-0.6B.jinja"), req, fidelity=fidelity).parser


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_cut_call_is_reported_not_returned(fidelity):
    parser = _qwen3_parser(fidelity)
    first = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    cut = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
    text = "<think>\nok\n</think>\n\n" + first + cut
    one = parser.parse(text)
    assert [json.loads(c.arguments) for c in one.tool_calls] == [{"city": "Paris"}]
    assert one.content.strip() == cut.strip()                   # lossless: the cut call's text is content
    (r,) = one.repairs
    assert (r.name, r.detail, r.text, r.end, r.why) == (TRUNCATED_CALL, "get_weather", cut, len(text), "cut")
    assert text[r.start:r.end] == cut
    sp = stream(parser, text, list(range(1, len(text))))
    assert [x.name for x in sp.repairs] == [TRUNCATED_CALL]
    if fidelity == "llama.cpp":
        # the stream already showed the cut call's fragments: finish() reports the same truncation, keeps them
        assert len(sp.message.tool_calls) == 2 and sp.message.tool_calls[1].arguments == '{"city": "Par'
    else:
        # improved: a call is released whole once accepted, so the cut one was never shown (stream = one-shot)
        assert sp.message.to_openai() == one.to_openai()
    assert settled(sp.message, one).to_openai() == one.to_openai()
    # is_partial: llama.cpp's partial call stays, the note is there all the same
    part = parser.parse(text, True)
    assert part.tool_calls[-1].arguments == '{"city": "Par' and part.repairs[0].name == TRUNCATED_CALL
    # a clean parse has no repairs
    assert parser.parse("<think>\nok\n</think>\n\n" + first).repairs == []


def _days_parser(template: str, fidelity: str, disabled: tuple[str, ...] = ()) -> Any:
    props = {"city": {"type": "string"}, "days": {"type": "integer"}}
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Weather?"}],
                                 "chat_template_kwargs": {"enable_thinking": False},
                                 "tools": [{"type": "function", "function": {
                                     "name": "get_weather", "parameters": {"type": "object", "properties": props,
                                                                           "required": ["city", "days"]}}}]})
    return build_chat_parser(_tmpl(template), req, fidelity=fidelity, disabled_repairs=disabled).parser


# the value of mlx-lm PR 1330 / 1310 (an integer parameter given a date), in each template's own layout
MISTYPED = {
    "Qwen3-Coder.jinja": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                         "<parameter=days>\n{}\n</parameter>\n</function>\n</tool_call>",
    "GLM-4.7-Flash.jinja": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
                           "<arg_key>days</arg_key><arg_value>{}</arg_value></tool_call>",
}


@pytest.mark.parametrize("template", sorted(MISTYPED))
def test_mistyped_value_is_kept_as_a_string(template):
    text = MISTYPED[template].format("2026-01-15")
    one = check_contract(_days_parser(template, "improved"), text, list(range(1, len(text))), template)
    assert [json.loads(c.arguments) for c in one.tool_calls] == [{"city": "Paris", "days": "2026-01-15"}]
    (r,) = [x for x in one.repairs if x.name == "mistyped-value-as-string"]
    assert "2026-01-15" in r.text
    # a value of the declared type is unchanged, and nothing is reported
    good = _days_parser(template, "improved").parse(MISTYPED[template].format("3"))
    assert [json.loads(c.arguments) for c in good.tool_calls] == [{"city": "Paris", "days": 3}] and not good.repairs
    # llama.cpp, or the repair switched off: no call
    for parser in (_days_parser(template, "llama.cpp"),
                   _days_parser(template, "improved", ("mistyped-value-as-string",))):
        assert parser.parse(text).tool_calls == []


# get_weather(city: string required, days: integer, metric: boolean) — the shape of llama.cpp #24351 (an
# optional parameter before a required one), in each template's own layout; constructed outputs
_ORDER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                     "metric": {"type": "boolean"}}, "required": ["city"]}}}
ORDER_LAYOUT = {
    "Qwen3-Coder.jinja": ("<tool_call>\n<function=get_weather>\n{}</function>\n</tool_call>",
                          "<parameter={}>\n{}\n</parameter>\n"),
    "GLM-4.6.jinja": ("<tool_call>get_weather\n{}</tool_call>", "<arg_key>{}</arg_key>\n<arg_value>{}</arg_value>\n"),
}


def _order_parser(template: str, fidelity: str, disabled: tuple[str, ...] = (), tools: Any = None) -> Any:
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Weather?"}],
                                 "tools": tools or [_ORDER_TOOL]})
    return build_chat_parser(_tmpl(template), req, fidelity=fidelity, disabled_repairs=disabled).parser


def _order_call(template: str, *args: tuple[str, str]) -> tuple[str, str]:
    """The call with ``args`` (name, raw value) in the given order, and the text of its arguments."""
    call, arg = ORDER_LAYOUT[template]
    body = "".join(arg.format(k, v) for k, v in args)
    return call.format(body), body


@pytest.mark.parametrize("template", sorted(ORDER_LAYOUT))
def test_argument_order_accepts_any_order_of_the_declared_parameters(template):
    text, body = _order_call(template, ("days", "3"), ("metric", "true"), ("city", "Paris"))
    one = check_contract(_order_parser(template, "improved"), text, list(range(1, len(text))), template)
    assert [(c.name, json.loads(c.arguments)) for c in one.tool_calls] == [
        ("get_weather", {"days": 3, "metric": True, "city": "Paris"})]
    (r,) = one.repairs
    assert (r.name, text[r.start:r.end]) == ("argument-order", body)
    # the template's order is no repair
    good, _ = _order_call(template, ("city", "Paris"), ("days", "3"))
    assert _order_parser(template, "improved").parse(good).repairs == []
    # llama.cpp, or the repair switched off: the complete call is rejected, and reported as such
    for parser in (_order_parser(template, "llama.cpp"),
                   _order_parser(template, "improved", ("argument-order", "missing-required-argument"))):
        out = parser.parse(text)
        assert out.tool_calls == [] and [(x.name, x.why) for x in out.repairs] == [(TRUNCATED_CALL, "rejected")]


@pytest.mark.parametrize("template", sorted(ORDER_LAYOUT))
def test_argument_order_still_needs_every_required_parameter_once(template):
    parser = _order_parser(template, "improved", ("missing-required-argument",))
    for args in ((("days", "3"),),                                        # city missing
                 (("days", "3"), ("city", "Paris"), ("days", "4"))):      # days twice
        text, _ = _order_call(template, *args)
        out = check_contract(parser, text, list(range(1, len(text), 7)), template)
        assert out.tool_calls == [] and [(x.name, x.why) for x in out.repairs if x.name == TRUNCATED_CALL] == [
            (TRUNCATED_CALL, "rejected")]
    # with missing-required-argument (the generic tagged layout: GLM; the Qwen3-Coder handler too since batch 1,
    # as SGLang's detector) the call without city is passed on, a parameter written twice is still rejected
    parser = _order_parser(template, "improved")
    text, _ = _order_call(template, ("days", "3"))
    out = parser.parse(text)
    assert [json.loads(c.arguments) for c in out.tool_calls] == [{"days": 3}]
    text, _ = _order_call(template, ("days", "3"), ("city", "Paris"), ("days", "4"))
    assert parser.parse(text).tool_calls == []


def test_argument_order_two_required_parameters_out_of_order_glm():
    """GLM (auto-parser): required parameters are taken in their declared order only; the repair takes any."""
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"]}}}
    text, _ = _order_call("GLM-4.6.jinja", ("days", "3"), ("city", "Paris"))
    one = check_contract(_order_parser("GLM-4.6.jinja", "improved", tools=[tool]), text,
                         list(range(1, len(text))), "glm")
    assert [json.loads(c.arguments) for c in one.tool_calls] == [{"days": 3, "city": "Paris"}]
    assert [r.name for r in one.repairs] == ["argument-order"]
    assert _order_parser("GLM-4.6.jinja", "llama.cpp", tools=[tool]).parse(text).tool_calls == []


@pytest.mark.parametrize("template", sorted(ORDER_LAYOUT))
def test_argument_order_is_left_out_of_the_grammar(template):
    """The grammar asks for the template's order: the same rules (at most a pair of parentheses more around
    the arguments, where the repair's choice keeps only the template's alternative) and no any-order rule."""
    improved = _order_parser(template, "improved").grammar
    without = _order_parser(template, "improved", ("argument-order",)).grammar
    assert "any-order" not in improved and improved.count("\n") == without.count("\n")
    assert improved.replace("(", "").replace(")", "") == without.replace("(", "").replace(")", "")


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_truncated_call_says_whether_the_call_was_cut_or_rejected(fidelity):
    parser = _order_parser("Qwen3-Coder.jinja", fidelity)
    full, _ = _order_call("Qwen3-Coder.jinja", ("city", "Paris"), ("days", "3"))
    cut = full[:full.index("Paris") + 3]
    (r,) = parser.parse(cut).repairs
    assert (r.name, r.why, r.detail) == (TRUNCATED_CALL, "cut", "get_weather")
    mistyped, _ = _order_call("Qwen3-Coder.jinja", ("city", "Paris"), ("days", "soon"))
    if fidelity == "llama.cpp":     # at improved mistyped-value-as-string keeps the call
        (r,) = parser.parse(mistyped).repairs
        assert (r.name, r.why) == (TRUNCATED_CALL, "rejected") and r.to_json()["why"] == "rejected"
    # the stream's finish tells the same
    sp = stream(parser, cut, list(range(1, len(cut))))
    assert [(x.name, x.why) for x in sp.repairs] == [(TRUNCATED_CALL, "cut")]


def test_cli_markdown_needs_suite(capsys):
    from core.cli import main

    assert main(["repairs", "--markdown"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "--suite" in captured.err


def test_repeated_turn_header_on_a_hand_written_handler():
    """The header is read off the generation prompt, so the rule also holds on a hand-written handler (Kimi K2):
    skipped, reported, stream = one-shot; a constructed output (the report is GPT-OSS's, above)."""
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hi"}],
                                 "tools": [{"type": "function", "function": {
                                     "name": "f", "parameters": {"type": "object",
                                                                 "properties": {"a": {"type": "integer"}}}}}]})
    parser = build_chat_parser(_tmpl("Kimi-K2-Instruct.jinja"), req, fidelity="improved").parser
    head = parser.generation_prompt
    assert head == "<|im_assistant|>assistant<|im_middle|>" and parser.turn_header == head
    text = head + ("Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
                   '{"a": 1}<|tool_call_end|><|tool_calls_section_end|>')
    one = check_contract(parser, text, list(range(1, len(text))), "kimi-k2")
    assert one.content == "Sure." and [json.loads(c.arguments) for c in one.tool_calls] == [{"a": 1}]
    assert [(r.name, r.start, r.end) for r in one.repairs] == [("repeated-turn-header", 0, len(head))]
    assert build_chat_parser(_tmpl("Kimi-K2-Instruct.jinja"), req).parser.parse(text).content.startswith(head)


def test_grammar_asks_for_the_template_format_not_the_repairs():
    """Tolerance repairs widen what the parser reads, not what a grammar lets the model write: the improved
    grammar of a Qwen3-Coder request keeps the integer parameter typed and its closing tags required, and has
    no Hermes JSON call; the parser still takes those drifts."""
    g = _days_parser("Qwen3-Coder.jinja", "improved").grammar
    days = next(line for line in g.splitlines() if line.startswith("tool-0-arg-1 ::="))
    assert "xml-arg-string" not in days and '"\\n</parameter>\\n"' in days, days
    assert "json-tool-0" not in g and '"</function>\\n")' in g
    text = MISTYPED["Qwen3-Coder.jinja"].format("2026-01-15")
    assert _days_parser("Qwen3-Coder.jinja", "improved").parse(text).tool_calls


def test_repeated_turn_header_is_skipped_and_streams_nothing_until_known():
    """GPT-OSS: the output repeats the generation prompt's <|start|>assistant (lmstudio-bug-tracker 942)."""
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hi"}],
                                 "tools": [{"type": "function", "function": {
                                     "name": "f", "parameters": {"type": "object",
                                                                 "properties": {"a": {"type": "integer"}}}}}]})
    parser = build_chat_parser(_tmpl("openai-gpt-oss-120b.jinja"), req, fidelity="improved").parser
    head = "<|start|>assistant"
    text = head + '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": 1}'
    one = check_contract(parser, text, list(range(1, len(text))), "gpt-oss")
    assert [(c.name, json.loads(c.arguments)) for c in one.tool_calls] == [("f", {"a": 1})]
    assert [(r.name, r.start, r.end) for r in one.repairs] == [("repeated-turn-header", 0, len(head))]
    for k in range(1, len(head)):          # a prefix of the header shows nothing while streaming
        assert parser.parse(head[:k], True).to_openai() == {"role": "assistant", "content": ""}
    off = build_chat_parser(_tmpl("openai-gpt-oss-120b.jinja"), req, fidelity="improved",
                            disabled_repairs=("repeated-turn-header",)).parser
    assert off.parse(text).tool_calls == [] and off.parse(text).content.startswith(head)


def test_fired_repair_is_a_plain_mergeable_record():
    r = FiredRepair("fenced-calls", 0, 3, text="```")
    assert r.to_json() == {"name": "fenced-calls", "start": 0, "end": 3, "detail": "", "text": "```", "why": ""}
    # repairs are not part of message equality (a message is the same however it was reached)
    assert AssistantMessage("x", repairs=[r]) == AssistantMessage("x")
    assert AssistantMessage("x", repairs=[r]).copy().repairs == [r]


# ------------------------------------------------------------------------------------------------ reference cases


def test_contract_on_every_reference_case_cut_and_split(reference_cases):
    """Every reference case, at both fidelities, cut at a seeded random point and split at random points."""
    parsers: dict[tuple, Any] = {}
    for case in reference_cases:
        rnd = random.Random(case["id"])
        text = case["input"]
        cut = text[:rnd.randint(0, len(text))]
        cuts = sorted(rnd.sample(range(1, len(cut)), min(len(cut) - 1, rnd.randint(0, 12)))) if len(cut) > 1 else []
        request = {k: v for k, v in case.items() if k not in ("id", "input", "is_partial", "expect")}
        for fid in FIDELITIES:
            key = (json.dumps(request, sort_keys=True), fid)   # cases share requests: build each parser once
            if key not in parsers:
                parsers[key] = build_chat_parser(_tmpl(case["template"]), ChatRequest.from_dict(case),
                                                 fidelity=fid).parser
            check_contract(parsers[key], cut, cuts, f"{case['id']} [{fid}]")


# ------------------------------------------------------------------------------------------------ corpus templates

_TOOLS = [
    {"type": "function", "function": {"name": "special_function", "description": "I'm special", "parameters": {
        "type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}},
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}},
]
_MESSAGE = {"role": "assistant", "reasoning_content": "Let me think.", "content": "Sure.",
            "tool_calls": [{"type": "function", "id": "call00001",
                            "function": {"name": "special_function", "arguments": '{"arg1": 1}'}},
                           {"type": "function", "id": "call00002",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}}]}


def _corpus_candidates() -> list[str]:
    """Tool-format templates of the reference analysis (every auto-parser format), plus one per handler."""
    out = []
    for line in (REFERENCE / "analysis.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        mode = (((row.get("analysis") or {}).get("tools") or {}).get("format") or {}).get("mode")
        if mode in ("JSON_NATIVE", "TAG_WITH_JSON", "TAG_WITH_TAGGED"):
            out.append(row["template"])
    handlers = ["Qwen3-Coder.jinja", "openai-gpt-oss-120b.jinja", "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
                "Kimi-K2-Instruct.jinja", "deepseek-ai-DeepSeek-V3.2.jinja"]
    return sorted(set(out))[::3] + handlers


@lru_cache(maxsize=None)
def _subject(name: str, fidelity: str) -> tuple[Any, str] | None:
    """(parser, rendered output with reasoning, content and two calls) or None when the template cannot."""
    from core.chat.roundtrip import sample_output
    from core.errors import ChatTemplateExplorerError

    req = {"messages": [{"role": "user", "content": "Hello"}], "tools": _TOOLS, "parallel_tool_calls": True}
    try:
        parser = build_chat_parser(_tmpl(name), ChatRequest.from_dict(req), fidelity=fidelity).parser
        output = sample_output(_tmpl(name), req, _MESSAGE)
    except ChatTemplateExplorerError:
        return None
    return (parser, output) if output.strip() else None


CORPUS = _corpus_candidates()

# drift of the kinds the issue lists, applied to a rendered output
DRIFTS = {
    "none": lambda s: s,
    "no-line-breaks": lambda s: s.replace(">\n", ">"),
    "spaces-for-line-breaks": lambda s: s.replace("\n", " "),
    "indented": lambda s: s.replace("\n<", "\n  <"),
    "parameters-key": lambda s: s.replace('"arguments"', '"parameters"'),
    "fenced": lambda s: "```json\n" + s + "\n```",
    "python-literals": lambda s: s.replace("true", "True").replace(": 1", ": True"),
    "reopened-think": lambda s: "<think>" + s,
    "semicolon-separator": lambda s: s.replace("}, {", "}; {").replace("}\n{", "}; {"),
    "arguments-first": lambda s: re.sub(r'\{"name": ("[^"]*"), "arguments": (\{[^{}]*\})\}',
                                        r'{"arguments": \2, "name": \1}', s),
}


def test_enough_corpus_templates():
    usable = [n for n in CORPUS if _subject(n, "llama.cpp") is not None]
    assert len(usable) >= 50, (len(usable), len(CORPUS))


@pytest.mark.parametrize("fidelity", FIDELITIES)
@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_contract_on_corpus_outputs_with_drift(fidelity, data):
    name = data.draw(st.sampled_from(CORPUS), label="template")
    subject = _subject(name, fidelity)
    if subject is None:
        return
    parser, output = subject
    text = DRIFTS[data.draw(st.sampled_from(sorted(DRIFTS)), label="drift")](output)
    if data.draw(st.booleans(), label="truncate"):
        text = text[:data.draw(st.integers(0, len(text)), label="cut")]
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=24), label="splits")
    check_contract(parser, text, cuts, f"{name} [{fidelity}]")


# ------------------------------------------------------------------------------------------------ drift suite

SUITE = load_cases([str(DRIFT)])


def test_suite_cases_are_real_and_cited():
    assert len(SUITE) >= 40   # issue 10: at least 40 real reports
    for c in SUITE:
        assert c.source.startswith("https://github.com/"), c.id
        assert (TEMPLATES / c.template).is_file(), c.id
        assert c.expect.get("role") == "assistant", c.id
    reports = [(c.source, c.output) for c in SUITE]
    assert len(set(reports)) == len(reports)   # no report's output counted twice


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_drift_suite(fidelity):
    results = [run_case(c, str(TEMPLATES), fidelity) for c in SUITE]
    for r in results:   # the contract holds on every case, passed or not
        assert r.stream_equal and r.json_arguments, (r.case.id, r.message)
    passed = sum(r.ok for r in results)
    print(f"drift suite at {fidelity}: {passed}/{len(results)}")
    assert passed == SUITE_PASS[fidelity], [(r.case.id, r.reason) for r in results if not r.ok]
    if fidelity == "improved":  # more right than llama.cpp's parser on real drift, and issue 10's 90 %
        assert passed >= 2 * SUITE_PASS["llama.cpp"] and passed >= 0.9 * len(results)


def test_fidelity_doc_shows_the_cli_suite_tables():
    """docs/fidelity.md's drift tables (rate per fidelity, each repair with the cases it fired on / needs it) are
    what ``python -m core repairs --suite tests/data/drift --markdown`` prints, and every rule is listed."""
    from core.chat.repairs_cli import suite_figures, suite_markdown

    figures = suite_figures([str(DRIFT)], str(TEMPLATES))
    docs = "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
    for table in suite_markdown(figures).strip().split("\n\n"):
        assert table in docs, f"docs/ are stale; regenerate with --markdown:\n{table}"
    assert all(f"| `{r.name}` |" in docs for r in REPAIRS)


def test_no_repair_makes_a_correct_parse_worse(reference_cases, monkeypatch):
    """At improved fidelity: every reference case passes with the tolerance repairs on, and every round-trip
    template and drift case that fails with them passes without them neither (so none passed before and
    fails now). Only the failures are re-run without the repairs: a pass cannot have got worse."""
    from core.chat import repairs as R
    from core.chat.conformance import TemplateDir
    from core.chat.conformance import run_case as run_reference
    from core.chat.roundtrip import corpus_round_trip

    from .test_cases_conformance import accumulate, message_mismatch

    templates = TemplateDir(str(TEMPLATES))
    for case in reference_cases:
        r = run_reference(case, templates, "improved")
        assert not (r.get("error") or message_mismatch(case["expect"], r.get("message"))
                    or message_mismatch(case["expect"], accumulate(r.get("deltas") or []))), case["id"]
    rt = corpus_round_trip(TEMPLATES, fidelity="improved")
    rt_failed = sorted(r.template for r in rt.results if r not in rt.passed)
    suite_failed = [c for c in SUITE if not run_case(c, str(TEMPLATES), "improved").ok]

    contract_only = frozenset(r.name for r in R.REPAIRS if r.stage is RepairStage.CONTRACT)
    monkeypatch.setattr(R, "enabled_repairs", lambda fidelity="llama.cpp", disabled=(): contract_only)
    worse = [r.template for r in corpus_round_trip(TEMPLATES, names=rt_failed, fidelity="improved").passed]
    worse += [c.id for c in suite_failed if run_case(c, str(TEMPLATES), "improved").ok]
    assert not worse, f"correct without the tolerance repairs, wrong with them: {worse}"
    assert len(rt.passed) >= 112   # the round-trip figure before the repairs (docs/fidelity.md "Round trip")


# vLLM's DeepSeek-R1 reasoning-parser fixture (real-output case r1-new-line): the model writes <think> again after
# the generation prompt opened it
# https://github.com/vllm-project/vllm/blob/04dbd8f32c4dc8ef1254eeaabd154a225948cf57/tests/reasoning/test_deepseekr1_reasoning_parser.py
R1_REEMITTED = "\n<think>This is a reasoning section</think>\nThis is the rest"


@pytest.mark.parametrize("fidelity, disabled, reasoning", [
    ("improved", (), "This is a reasoning section"),
    ("improved", ("reasoning-start-repeated",), "<think>This is a reasoning section"),
    ("llama.cpp", (), "<think>This is a reasoning section"),
])
def test_reasoning_start_repeated_is_markup(fidelity, disabled, reasoning):
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Help me."}]})
    parser = build_chat_parser(_tmpl("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.llamacpp-edit.jinja"), req,
                               fidelity=fidelity, disabled_repairs=disabled).parser
    one = check_contract(parser, R1_REEMITTED, list(range(1, len(R1_REEMITTED))), "r1")
    assert one.reasoning_content.strip() == reasoning
    assert one.content.strip() == "This is the rest"
    fired = [(r.name, R1_REEMITTED[r.start:r.end]) for r in one.repairs]
    assert fired == ([("reasoning-start-repeated", "\n<think>")] if reasoning == "This is a reasoning section" else [])


# kept4 case kept4-bfcl-hermes-2-theta-llama-3-70b-parallel-multiple-function-83 (tests/data/real_outputs_kept4,
# source in its line): Hermes 2 Theta writes <|im_start|> where </tool_call> belongs. The stream shows the first
# call, the final parse rejects the text, stream-consistent-final keeps the call: its text must then not be in
# content too (every character in one field). The smallest input is the output cut before its second <|im_start|>.
def _kept4_theta_83() -> tuple[dict, str]:
    path = ROOT / "tests" / "data" / "real_outputs_kept4" / "hermes2-theta.jsonl"
    case = next(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if json.loads(line)["id"].endswith("theta-llama-3-70b-parallel-multiple-function-83"))
    return case, case["output"]


@pytest.mark.parametrize("fidelity", FIDELITIES)
@pytest.mark.parametrize("whole", [False, True])
def test_a_kept_call_is_not_in_content_too(fidelity, whole):
    case, output = _kept4_theta_83()
    first = output.index("<|im_start|>")
    text = output if whole else output[:output.index("<|im_start|>", first + 1)]
    parser = build_chat_parser(_tmpl(case["template"]), ChatRequest.from_dict(case["request"]),
                               fidelity=fidelity).parser
    one = check_contract(parser, text, list(range(7, len(text), 7)), "theta-83")
    if one.tool_calls:   # the stream showed the first call: the content is the text after it, once
        assert [(c.name, json.loads(c.arguments)) for c in one.tool_calls] == [
            ("calculate_integral", {"func": "3*x**2 - 2*x + 1", "a": 1, "b": 4})]
        assert one.content == text[first:]
        assert "stream-consistent-final" in [r.name for r in one.repairs]
    else:
        assert one.content == text


# Mutations of two cases of the evaluation set (tests/data/real_outputs, sources in their lines): cut inside the second
# call, words appended. The stream's view keeps the first call and holds the second back (its name or "name" key is
# not complete): the tail in content starts at that second call's "{", not at the first call's opener.
@pytest.mark.parametrize("case_id, template", [
    ("granite-arguments-before-name", "gguf-ollama-granite3.1-moe-1b.jinja"),
    ("jamba-parallel", "hfjs-ai21labs-AI21-Jamba-Large-1.6.jinja"),
])
def test_a_call_the_view_holds_back_starts_the_tail(case_id, template):
    from core.chat.realset import load_cases as load_real

    case = next(c for c in load_real(str(ROOT / "tests" / "data" / "real_outputs")) if c.id == case_id)
    assert case.template == template
    text = case.output[:int(len(case.output) * 0.6)] + "\nExtra words here"
    second = text.rindex("{", 0, text.index("\nExtra"))
    parser = build_chat_parser(_tmpl(template), ChatRequest.from_dict(case.request), fidelity="improved").parser
    one = check_contract(parser, text, list(range(5, len(text), 5)), case_id)
    assert len(one.tool_calls) == 1 and one.content == text[second:]
    assert "stream-consistent-final" in [r.name for r in one.repairs]
