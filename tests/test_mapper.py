"""The chat mapper's call bookkeeping against llama.cpp b11549 ``common_chat_peg_mapper::map``."""

from __future__ import annotations

from core.chat.mapper import ChatMapper
from core.peg.engine import AstNode


def _node(tag: str, start: int, end: int) -> AstNode:
    return AstNode("", tag, start, end, (), False)


def test_a_closed_call_takes_no_more_arguments():
    """b11549 resets the current call when a still-pending call closes: an argument after the close must not
    be collected for it (0c1e57098 kept pointing at the discarded call and buffered the argument)."""
    src = "<call></call>k=1"
    m = ChatMapper(src)
    m.map(_node("tool-open", 0, 6))
    m.map(_node("tool-close", 6, 13))
    assert m.current is None and m.pending is None
    m.map(_node("tool-arg-name", 13, 14))
    m.map(_node("tool-arg-value", 15, 16))
    assert m.args_buffer == "" and m.finish().tool_calls == []


def test_a_named_call_still_closes_into_the_message():
    src = '<call>f{"a": 1}</call>'
    m = ChatMapper(src)
    for tag, a, b in (("tool-open", 0, 6), ("tool-name", 6, 7), ("tool-args", 7, 15), ("tool-close", 15, 22)):
        m.map(_node(tag, a, b))
    msg = m.finish()
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("f", '{"a": 1}')]
