"""Streams sharing one parser (the app serves several requests with one cached parser) do not see each other:
fed alternately, in a seeded random order, each stream's deltas after every feed accumulate to what they
accumulate to when that stream is fed alone. The PEG sessions keep pooled mappers and recycled messages
(``IncrementalMapper.recycle`` / ``release``); a state left in them by one stream would show up here."""

from __future__ import annotations

import random

import pytest

from bench.hostile import ROUTES
from bench.outputs import _assistant, _request, _turn_text
from core.chat.conformance import TemplateDir
from core.chat.message import AssistantMessage, apply_deltas
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser

from .conftest import TEMPLATES

USER = [{"role": "user", "content": "Plan my trip to Paris."}]
TURNS = [
    _assistant("", "", [("get_weather", {"city": "paris"}), ("get_weather", {"city": "lyon \"é\""})]),
    _assistant("thinking a bit", "Sure, checking.", [("get_weather", {"city": "paris"})]),
    _assistant("", "Plain words about the weather in Paris, nothing else.", []),
]


def _pieces(text: str, rng: random.Random) -> list[str]:
    out, i = [], 0
    while i < len(text):
        k = rng.choice([1, 1, 2, 3, 5, 8])
        out.append(text[i:i + k])
        i += k
    return out


def _run(parser, streams: list[list[str]], order: list[int]) -> list[list[AssistantMessage]]:
    sps = [StreamingParser(parser) for _ in streams]
    accs = [AssistantMessage() for _ in streams]
    seen: list[list[AssistantMessage]] = [[] for _ in streams]
    at = [0] * len(streams)
    for k in order:
        accs[k] = apply_deltas(accs[k], sps[k].feed(streams[k][at[k]]))
        at[k] += 1
        seen[k].append(accs[k])
    for k, sp in enumerate(sps):
        seen[k].append(apply_deltas(accs[k], sp.finish()))
    return seen


@pytest.mark.parametrize("template", [t for _, t in ROUTES])
def test_streams_fed_alternately_on_one_parser_equal_each_fed_alone(template):
    t = TemplateDir(str(TEMPLATES)).get(template)
    parser = build_chat_parser(t, ChatRequest.from_dict(_request(USER))).parser
    rng = random.Random(template)
    texts = []
    for turn in TURNS:
        try:
            texts.append(_turn_text(t, USER, turn))
        except Exception:  # the template refuses this shape (e.g. a single call only)
            continue
    texts.append(texts[0][:len(texts[0]) // 2] + texts[0])  # a second call after a broken one
    streams = [_pieces(x, rng) for x in texts]
    alone = [_run(parser, [s], [0] * len(s))[0] for s in streams]
    order = [k for k, s in enumerate(streams) for _ in s]
    rng.shuffle(order)
    together = _run(parser, streams, order)
    for k, (a, b) in enumerate(zip(alone, together)):
        assert a == b, f"stream {k} of {template}: {texts[k][:80]!r}"
    assert any(m.tool_calls for m in (a[-1] for a in alone))  # the calls did parse
