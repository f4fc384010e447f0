"""Streaming wrapper (core.chat.stream): deltas accumulate to the parse of the prefix, nothing emitted is taken
back, retracting parses are held back, finish() gives the final parse."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from core.chat.message import AssistantMessage, ToolCall, apply_deltas
from core.chat.stream import StreamingParser, lenient_deltas, stream_deltas

MARK = "<call>"


class MarkerParser:
    """content until ``<call>``; after it a tool call ``f`` whose arguments are the rest. A partial marker at
    the end of partial input is withheld (llama.cpp until semantics)."""

    generation_prompt = ""
    grammar = None
    grammar_lazy = False
    grammar_triggers: list = []
    preserved_tokens: list = []
    additional_stops: list = []

    def __init__(self):
        self.calls = 0

    def parse(self, text: str, is_partial: bool = False) -> AssistantMessage:
        self.calls += 1
        i = text.find(MARK)
        if i < 0:
            content = text
            for k in range(min(len(MARK) - 1, len(text)), 0, -1):
                if MARK.startswith(text[-k:]):
                    content = text[:-k]
                    break
            return AssistantMessage(content=content)
        return AssistantMessage(content=text[:i], tool_calls=[ToolCall("f", text[i + len(MARK):])])

    def describe(self) -> str:
        return "marker parser"


class RetractingParser(MarkerParser):
    """Shows trailing ``?`` as content while partial but drops it from the final parse: a retraction."""

    def parse(self, text: str, is_partial: bool = False) -> AssistantMessage:
        msg = super().parse(text, is_partial)
        if not is_partial and msg.content.endswith("?"):
            msg.content = msg.content.rstrip("?")
        if is_partial and text.endswith("!!"):
            msg.content = msg.content[:-2]  # takes back the first "!"
        return msg


class RaisingParser(MarkerParser):
    def parse(self, text: str, is_partial: bool = False) -> AssistantMessage:
        if "boom" in text and is_partial:
            raise ValueError("parser bug")
        return super().parse(text, is_partial)


def _acc(deltas):
    return apply_deltas(AssistantMessage(), deltas)


def test_feed_char_by_char_accumulates_to_parse():
    p = MarkerParser()
    sp = StreamingParser(p)
    text = 'Hello <ca <call>{"a": 1}'
    deltas = []
    for i, ch in enumerate(text):
        deltas.extend(sp.feed(ch))
        assert _acc(deltas) == p.parse(text[:i + 1], True)
    deltas.extend(sp.finish())
    assert _acc(deltas) == p.parse(text) == sp.message
    assert sp.held_back == 0


def test_partial_marker_withheld_then_released():
    sp = StreamingParser(MarkerParser())
    assert [d.content for d in sp.feed("Hi <ca")] == ["Hi "]
    assert [d.content for d in sp.feed("t>")] == ["<cat>"]


def test_tool_call_deltas_shape():
    deltas, msg = stream_deltas(MarkerParser(), 'x<call>{"a":1}', chunk=3)
    objs = [d.to_openai() for d in deltas]
    first_tool = next(o for o in objs if "tool_calls" in o)
    assert first_tool["tool_calls"][0]["index"] == 0
    assert first_tool["tool_calls"][0]["function"]["name"] == "f"
    assert json.loads(msg.tool_calls[0].arguments) == {"a": 1}


def test_retraction_is_held_back():
    sp = StreamingParser(RetractingParser())
    out = sp.feed("ab!")
    assert _acc(out).content == "ab!"
    assert sp.feed("!") == []          # would take back "!": held
    assert sp.held_back == 1
    out2 = sp.feed("c")                # "ab!!c" extends "ab!" again
    assert _acc(out + out2).content == "ab!!c"


def test_final_retraction_never_takes_back():
    sp = StreamingParser(RetractingParser())
    d = sp.feed("what?")
    d += sp.finish()
    assert _acc(d).content == "what?"  # emitted text is not withdrawn
    assert sp.final_mismatch


def test_parser_exception_is_held_back():
    sp = StreamingParser(RaisingParser())
    d = sp.feed("a boom")
    assert d == [] and sp.held_back == 1
    d = sp.finish()
    assert _acc(d).content == "a boom"


def test_empty_feed_and_double_finish():
    p = MarkerParser()
    sp = StreamingParser(p)
    assert sp.feed("") == [] and p.calls == 0
    assert _acc(sp.feed("a")).content == "a"
    assert sp.finish() == []           # nothing new at the end
    assert sp.finish() == []


def test_session_hook_is_used():
    class Session:
        def __init__(self, parser):
            self.parser, self.seen = parser, []

        def parse(self, text, is_partial=False):
            self.seen.append(text)
            return self.parser.parse(text, is_partial)

    class WithSession(MarkerParser):
        def session(self):
            self.s = Session(self)
            return self.s

    p = WithSession()
    sp = StreamingParser(p)
    sp.feed("ab")
    sp.feed("c")
    assert p.s.seen == ["ab", "abc"]


def test_lenient_deltas_skip_rewritten_fields():
    prev = AssistantMessage(content="abc", tool_calls=[ToolCall("f", "{")])
    new = AssistantMessage(content="xbc", reasoning_content="r", tool_calls=[ToolCall("f", "{}"), ToolCall("g", "")])
    got = apply_deltas(prev, lenient_deltas(prev, new))
    assert got.reasoning_content == "r" and got.content == "abc"
    assert [t.name for t in got.tool_calls] == ["f", "g"] and got.tool_calls[0].arguments == "{}"


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet="ab<cl>{}", max_size=30), cuts=st.lists(st.integers(1, 5), max_size=12))
def test_any_split_gives_the_one_shot_parse(text, cuts):
    p = MarkerParser()
    sp = StreamingParser(p)
    deltas, pos = [], 0
    for c in cuts:
        deltas += sp.feed(text[pos:pos + c])
        pos += c
    deltas += sp.feed(text[pos:])
    deltas += sp.finish()
    assert _acc(deltas) == p.parse(text)
