"""Repair ``trailing-end-of-turn`` on repeated and hostile end-of-turn runs: the one-shot parse and every streaming
chunking keep the same content, a long run neither recurses nor rescans (the scan reads at most
``core.chat.turn_end.RUN_MAX`` characters back), and whitespace after a token does not make the stream quadratic."""

from __future__ import annotations

import pytest

from core.chat.conformance import accumulate_deltas
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser
from core.chat.turn_end import RUN_MAX, turn_end_cut, turn_end_hold
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES

TOKENS = ("<|endoftext|>", "<|im_end|>")


@pytest.fixture(scope="module")
def parser():
    name = "Qwen-Qwen2.5-7B-Instruct.jinja"
    t = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}]})
    return build_chat_parser(t, req, fidelity="improved").parser


def _streamed(parser, text: str, chunk: int) -> str:
    sp = StreamingParser(parser)
    deltas = []
    for i in range(0, len(text), chunk):
        deltas += sp.feed(text[i:i + chunk])
    deltas += sp.finish(False)
    return accumulate_deltas([d.to_openai() for d in deltas])["content"]


def test_the_cut_takes_the_whole_trailing_run():
    assert turn_end_cut(TOKENS, "hello<|im_end|>") == 5
    assert turn_end_cut(TOKENS, "hello<|im_end|><|im_end|>") == 5
    assert turn_end_cut(TOKENS, "hello \n<|im_end|>\n<|endoftext|>\n") == 7   # whitespace before the run is text
    assert turn_end_cut(TOKENS, "hello<|im_end|>x") == len("hello<|im_end|>x")
    assert turn_end_hold(TOKENS, "hello<|im_end|>\n<|im") == len("<|im_end|>\n<|im")
    assert turn_end_hold(TOKENS, "hello <|im_e") == len("<|im_e")
    run = "h" + "<|im_end|>" * 2000
    assert len(run) - turn_end_cut(TOKENS, run) <= RUN_MAX      # bounded: the rest of a hostile run is text


@pytest.mark.parametrize("text", ["hello<|im_end|>", "hello<|im_end|><|im_end|>", "hello<|im_end|>\n<|im_end|>\n",
                                  "hello <|im_e", "hello<|im_end|>x", "hi <|im_end|>  ", "a<|im_end|>" + " " * 300,
                                  "hello" + "<|im_end|>" * 2000])
def test_stream_equals_one_shot(parser, text):
    one = parser.parse(text).to_openai()["content"]
    for chunk in (1, 2, 3, 7, len(text)):
        assert _streamed(parser, text, chunk) == one, chunk


def test_a_run_is_cut_whole_with_one_repair_record(parser):
    for text in ("hello<|im_end|><|im_end|>", "hello<|im_end|>\n<|im_end|>\n", "hello" + "<|im_end|>" * 20):
        msg = parser.parse(text)
        assert msg.content == "hello"
        assert [r.name for r in msg.repairs] == ["trailing-end-of-turn"]
