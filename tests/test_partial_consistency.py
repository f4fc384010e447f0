"""Prefix-consistent partial parses and text-preserving final parses (core.chat.generator.consistent_view and
friends, the engine's switch bookkeeping and cut-delimiter rule, the hand-written handlers' equivalents).

Each test asserts the behaviour on a small, named example; the fuzz tests (test_fuzz_parsers.py) check the
properties at large."""

from __future__ import annotations

import pytest

from core.chat.generator import (AssistantMessage, Probe, ViewMemo, consistent_view, longest_good_prefix,
                                 message_extends)
from core.chat.message import ToolCall
from core.chat.stream import StreamingParser
from core.peg.builder import build_peg_parser
from core.peg.chat import build_chat_peg_parser
from core.peg.scanners import NMI, OK, scan_json_value

from .test_fuzz_parsers import subject_for


def _msg(content: str = "", reasoning: str = "", calls: list[tuple[str, str]] | None = None) -> AssistantMessage:
    return AssistantMessage(content, reasoning, [ToolCall(n, a, "") for n, a in calls or []])


# ---------------------------------------------------------------------------------------------------------------
# helpers

def test_message_extends_follows_the_stream_rules():
    base = _msg("Hi", "r", [("f", '{"a"')])
    assert message_extends(base, _msg("Hi there", "r", [("f", '{"a": 1}'), ("g", "{")]))
    assert not message_extends(base, _msg("H", "r", [("f", '{"a"')]))             # content rewritten
    assert not message_extends(base, _msg("Hi", "r", []))                          # call lost
    assert not message_extends(base, _msg("Hi", "r", [("g", '{"a"')]))             # call renamed
    assert not message_extends(base, _msg("Hi", "r", [("f", '{"b"')]))             # arguments rewritten
    assert message_extends(_msg(calls=[("", "")]), _msg(calls=[("f", "{")]))        # a name may arrive


@pytest.mark.parametrize("boundary", [0, 1, 7, 50, 99])
def test_longest_good_prefix_finds_a_monotone_boundary(boundary):
    probes: list[int] = []

    def good(k: int) -> bool:
        probes.append(k)
        return k <= boundary
    assert longest_good_prefix(good, 0, 100) == boundary
    assert len(probes) <= 16          # O(log n), not a scan
    assert longest_good_prefix(lambda k: False, 0, 100) == -1
    assert longest_good_prefix(good, 5, 5) == -1


def test_consistent_view_keeps_what_a_shorter_prefix_showed():
    """A failing text whose recovered message takes back a call: the view of the longest parsing prefix wins;
    a recovered message that extends that view is returned as is."""
    call = _msg(calls=[("f", "{")])
    top_bad = Probe(None, frozenset(), lambda: _msg("<call>f oops"))
    probe = lambda k: Probe(call if k <= 7 else None, frozenset(), lambda: _msg("x"))  # noqa: E731
    assert consistent_view("x" * 10, 0, probe, top_bad) is call
    grows = _msg("more", calls=[("f", "{}")])
    top_ok = Probe(None, frozenset(), lambda: grows)
    assert consistent_view("x" * 10, 0, probe, top_ok) is grows


def test_consistent_view_checks_a_switch_against_the_prefix_before_it():
    """A covering parse that abandoned an alternative: compared with the view of the longest prefix on which
    that alternative was still alive (its switch absent)."""
    s = frozenset({(3, 0, 0)})
    shown = _msg(calls=[("f", "{")])
    probe = lambda k: Probe(shown if k <= 6 else _msg(reasoning="all"), s if k > 6 else frozenset(),  # noqa: E731
                            lambda: _msg())
    top = Probe(_msg(reasoning="all"), s, lambda: _msg())
    memo = ViewMemo()
    assert consistent_view("y" * 9, 0, probe, top, memo) is shown
    assert memo.deaths[("switch", s)] == 6
    benign = Probe(_msg(calls=[("f", "{}")]), s, lambda: _msg())   # extends the earlier view: returned as is
    assert consistent_view("y" * 9, 0, probe, benign) is benign.message


# ---------------------------------------------------------------------------------------------------------------
# engine

def test_until_waits_at_a_cut_delimiter_in_lenient_mode():
    arena = build_chat_peg_parser(lambda p: p.reasoning(p.until_one_of(["</think>", "<tool_call>"]))
                                  + p.optional(p.literal("</think>")) + p.content(p.rest()))
    r = arena.parse("abc<t")
    assert r.need_more_input and r.end == 3           # "<t" pending: neither reasoning nor content yet
    assert [n.text(r.text) for n in r.visit() if n.tag == "content"] == []
    strict = arena.parse("abc<t", lenient=False)
    assert strict.success and strict.end == 5          # non-lenient parses are unchanged


def test_switches_name_alternatives_that_showed_something():
    def root(p):
        a = p.content(p.literal("ab")) + p.literal("X")          # shows "ab", then fails on "ab?"
        b = p.reasoning(p.rest())
        return p.choice(a, b)
    arena = build_chat_peg_parser(root)
    assert arena.parse("ab").switches == frozenset()
    r = arena.parse("abY")
    assert not r.fail and len(r.switches) == 1 and next(iter(r.switches))[1:] == (0, 0)

    quiet = build_chat_peg_parser(lambda p: p.choice(p.tool_open(p.literal("ab")) + "X", p.content(p.rest())))
    assert quiet.parse("abY").switches == frozenset()                    # tool-open shows nothing
    atomic = build_chat_peg_parser(lambda p: p.choice(p.atomic(p.content(p.literal("ab")) + "X"),
                                                      p.content(p.rest())))
    assert atomic.parse("abY").switches == frozenset()                   # an unfinished atomic showed nothing


def test_json_scanner_has_no_depth_limit():
    deep = "[" * 10_000 + "1" + "]" * 10_000
    assert scan_json_value(deep, 0, len(deep), True) == (OK, len(deep), False)
    assert scan_json_value(deep, 0, 15_000, True)[0] == NMI
    obj = '{"a":' * 3000 + "1" + "}" * 3000
    assert scan_json_value(obj, 0, len(obj), False) == (OK, len(obj), False)
    assert build_peg_parser(lambda p: p.json()).parse(deep).success


# ---------------------------------------------------------------------------------------------------------------
# parsers

@pytest.mark.parametrize("template, text, expect", [
    # a call the stream already showed, whose arguments never became JSON: not a call; its raw text is content
    # (lossless contract) and reported (core.chat.repairs truncated-call)
    ("Qwen3-Coder.jinja", "Hi <tool_call>\n<function=special_function>\noops",
     {"content": "Hi <tool_call>\n<function=special_function>\noops",
      "reported": "<tool_call>\n<function=special_function>\noops"}),
    # the longest prefix that parses (not inside a call), then the rest as content; GPT-OSS's grammar still
    # expects a final message after <|end|>, so the rest starts where the reasoning was complete
    ("openai-gpt-oss-120b.jinja", "<|channel|>analysis<|message|>u<|end|>i",
     {"reasoning_content": "u", "content": "<|end|>i"}),
    # a half call is not returned: complete calls stay, the half one is content and reported (truncated-call)
    ("Cohere2MoE.jinja", '<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "special_function", '
     '"parameters": {"arg1": 1}}, {"tool_call_id": "1", "tool_name": "get_weather", "parameters": {"city" x}}]',
     {"calls": [("special_function", '{"arg1": 1}')], "reported": "get_weather",
      "content": '}, {"tool_call_id": "1", "tool_name": "get_weather", "parameters": {"city" x}}]'}),
    ("meetkai-functionary-medium-v3.2.jinja", 'special_function\n{"arg1": 1}<|eot_id|>',
     {"content": "<|eot_id|>", "calls": [("special_function", '{"arg1": 1}')]}),
])
def test_final_parse_keeps_every_character(template, text, expect):
    msg = subject_for(template, True).parser.parse(text, False)
    assert msg.content == expect.get("content", "")
    assert msg.reasoning_content == expect.get("reasoning_content", "")
    assert [(c.name, c.arguments) for c in msg.tool_calls] == expect.get("calls", [])
    if "reported" in expect:   # every character is in the message or in the repair that reports it
        assert [r.name for r in msg.repairs] == ["truncated-call"]
        assert expect["reported"] in msg.repairs[0].text


@pytest.mark.parametrize("template, text, shown", [
    ("GLM-4.6.jinja", "<tool_call>special_function\nv", "special_function"),
    ("deepseek-ai-DeepSeek-V3.2.jinja",
     '<｜DSML｜function_calls><｜DSML｜invoke name="special_function">\ng', "special_function"),
    ("inclusionai-ling-3.0-flash.jinja", "<tool_call>special_function]", "special_function"),
    ("google-gemma-4-31B-it.jinja", "<|channel>thought\nok<channel|><|tool_call>call:special_function{ar}",
     "special_function"),
])
def test_partial_parse_keeps_a_streamed_call_and_the_final_parse_reports_it(template, text, shown):
    parser = subject_for(template, True).parser
    partial = parser.parse(text, True)
    assert [c.name for c in partial.tool_calls] == [shown]
    final = parser.parse(text, False)
    assert not final.tool_calls
    if template.startswith("google-gemma-4"):
        # Gemma 4 ignores text after its last parsed construct, as llama.cpp does (a trailing <channel|> /
        # <|eot|> dropped); the unfinished call's text is content all the same (lossless contract)
        assert final.reasoning_content == "ok" and final.content == "<|tool_call>call:special_function{ar}"
    else:
        # the unfinished call is reported (core.chat.repairs truncated-call) and its raw text is content
        assert [(r.name, r.detail) for r in final.repairs] == [("truncated-call", shown)]
        assert text.endswith(final.repairs[0].text) and final.content.endswith(final.repairs[0].text)


def test_forced_open_reasoning_does_not_flip_on_a_cut_marker():
    parser = subject_for("inclusionai-ling-3.0-flash.jinja", False).parser
    assert parser.parse("<t", True) == AssistantMessage()          # a prefix of <tool_call>: pending
    assert parser.parse("<th", True).reasoning_content == "<th"
    cohere = subject_for("Cohere2MoE.jinja", False).parser
    assert cohere.parse("<|START_A", True) == AssistantMessage()   # a prefix of <|START_ACTION|>
    assert cohere.parse("<|START_AU", True).reasoning_content == "<|START_AU"


def test_stream_and_one_shot_agree_after_a_switch():
    """DeepSeek V3.2: the reasoning-then-calls alternative is abandoned at </think> (a benign switch); text
    after the calls must not turn the streamed calls into reasoning."""
    parser = subject_for("deepseek-ai-DeepSeek-V3.2.jinja", True).parser
    text = ('I think.</think>Hi\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="special_function">\n'
            '<｜DSML｜parameter name="arg1" string="false">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
            "</｜DSML｜function_calls><｜end▁of▁sentence｜>")
    sp = StreamingParser(parser)
    for ch in text:
        sp.feed(ch)
    sp.finish(True)
    assert sp.held_back == 0
    assert sp.message.to_openai() == parser.parse(text, True).to_openai()
    assert [c.name for c in sp.message.tool_calls] == ["special_function"]
