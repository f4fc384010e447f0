"""A name written with an invisible character is shown whole, the character escaped: a zero-width space inside
`get_\\u200bweather` cut the name at `get_` in the stop point and the cause, so the maintainer saw a different
name than the model wrote and no trace of the character (a newcomer's finding, session 13)."""

from __future__ import annotations

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.jinja.template import ChatTemplate

from .conftest import template_source

NAME = "Qwen-Qwen3-0.6B.jinja"


def test_a_zero_width_space_in_a_called_name_is_shown_escaped_not_cut():
    t = ChatTemplate(template_source(NAME), NAME)
    req = ChatRequest.from_dict({
        "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}}]})
    out = '<tool_call>\n{"name": "get_\u200bweather", "arguments": {"city": "Paris"}}\n</tool_call>'
    ex = explain(t, req, out)
    assert ex.stop.words() == "expected `get_weather`; found `get_\\u200bweather`"
    assert ex.triage.sentence == ("the model called `get_\\u200bweather`; the request offers `get_weather`, which the "
                                  "output writes with the invisible character U+200B in it: with the name written "
                                  "`get_weather` the same output parses clean to a call of `get_weather`, so the name "
                                  "is the only fault")
    assert [(e.kind, e.old) for e in ex.triage.nearest.edits] == [("delete", "\u200b")]
    assert "\u200b" not in ex.triage.sentence
