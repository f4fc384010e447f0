"""Explain never raises on the model output: a call whose arguments open 2,000 JSON arrays (parse reads it as
content without trouble) made explain end in a RecursionError from the causes' JSON reader, so the CLI printed
"input too large or nested too deeply" naming no input and the page showed no explanation at all. The parts that
cannot read such an output are left out and a note says so; the spans and the message stay."""

from __future__ import annotations

import json

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.jinja.template import ChatTemplate

from .conftest import template_source

NAME = "Qwen-Qwen2.5-7B-Instruct.jinja"
REQUEST = {"messages": [{"role": "user", "content": "hi"}],
           "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
               "type": "object", "properties": {"city": {"type": "string"}}}}}]}


def test_an_output_nested_deeper_than_the_recursion_limit_is_explained_with_a_note():
    t = ChatTemplate(template_source(NAME), NAME)
    for depth in (2_000, 50_000):
        out = '<tool_call>\n{"name": "get_weather", "arguments": ' + "[" * depth
        ex = explain(t, ChatRequest.from_dict(REQUEST), out)
        assert ex.message == {"role": "assistant", "content": out}
        assert "".join(s.text for s in ex.spans) == ex.text
        assert any("nested too deeply" in n for n in ex.notes), ex.notes
        json.dumps(ex.to_json())
