"""The partial view's prefix probes parse on copies of a shorter prefix's stream cache
(core.chat.generator._PrefixRuns, issue 24): every probe must equal an uncached parse of the same prefix,
whatever order the search asks for them in."""

from __future__ import annotations

import pathlib

from core.chat.generator import _PrefixRuns
from core.chat.mapper import map_parse
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

TEMPLATE = pathlib.Path(__file__).resolve().parent.parent / "assets" / "templates" / "chatml-think-tools.jinja"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_prefix_probes_equal_uncached_parses_in_any_order():
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS})
    parser = build_chat_parser(ChatTemplate(TEMPLATE.read_text(encoding="utf-8"), "chatml"), req).parser
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "paris"}}\n</tool_call>\n'
    output = call * 40 + call.replace('"paris"', "paris")      # the last call does not parse
    text = parser.generation_prompt + output
    gp = len(parser.generation_prompt)
    n = len(text)
    runs = _PrefixRuns(parser.arena, text, gp)
    # the galloping search's order (down from the end), then jumps up and down, then the floor
    ks = [n - 1, n - 2, n - 4, n - 8, n - 16, n - 32, n - 64, n - 48, n - 56, n - 60, n - 3, n - 700, n - 650,
          n - 20, gp + 5, gp]
    for k in ks:
        got = runs.run(k)
        want = parser.arena.parse(text[:k], lenient=True)
        assert (got.type, got.end, got.switches) == (want.type, want.end, want.switches), k
        assert map_parse(got) == map_parse(want), k
    assert len(runs.bases) < len(ks)        # probes shared bases, not one parse from scratch each
