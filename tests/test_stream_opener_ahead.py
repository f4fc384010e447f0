"""Repair call-section-omitted's look-ahead as one engine node (``opener_ahead``): it finds an invoke opener
ahead — whole, or cut by the end past the part it shares with the section marker — resumes where it stopped in a
stream, and a stream whose text holds no opener keeps the fast path (``ParseResult.pending_ahead``). Before, a
scan over every ``<`` looked at the end of the text on each parse, so a DeepSeek V4 stream at improved fidelity
parsed on every feed of text dense with ``<`` (p99 120 µs against 15 µs with the repair off)."""

from __future__ import annotations

import pytest

from bench.hostile import hostile_samples
from bench.outputs import _request
from core.chat.pipeline import build_chat_parser
from core.chat.realset import load_cases
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser, stream_deltas
from core.jinja.template import ChatTemplate
from core.peg import ParseCache, ResultType, build_peg_parser

from .conftest import ROOT, TEMPLATES

OPENER = "<｜DSML｜invoke"
V4 = "deepseek-ai-DeepSeek-V4.jinja"


def _ahead(text: str, cache: ParseCache | None = None):
    arena = build_peg_parser(lambda p: p.opener_ahead(OPENER, 8) + p.rest())
    return arena.parse(text, cache=cache)


@pytest.mark.parametrize("text, found", [
    ('Checking.\n<｜DSML｜invoke name="x">', True),        # whole
    ("Checking.\n<｜DSML｜inv", True),                      # cut by the end past the shared part
    ("Checking.\n<｜DSML｜i", True),                        # min_cut characters exactly
    ("Checking.\n<｜DSML｜", False),                        # still the section marker's prefix
    ("a <｜DSML｜ix then <<<", False),                       # an occurrence followed by something else
    ("a <｜DSML｜ix <｜DSML｜invoke", True),                 # passed over, then a whole one
    ("<<<<", False),
    ("", False),
])
def test_what_lies_ahead(text, found):
    r = _ahead(text)
    assert (r.type is not ResultType.FAIL) is found


def test_a_stream_resumes_the_search_and_keeps_pending_ahead():
    """Growing one character at a time, cached and fresh parses agree, and while nothing is found the result says
    only the look-ahead and the until looked at the end (what the stream's fast path needs)."""
    arena = build_peg_parser(lambda p: p.choice(p.opener_ahead(OPENER, 8) + p.literal("!"),
                                                p.until("<｜DSML｜tool_calls>")))
    text = "x <<" + "<" * 40 + " <｜DSML｜ix <｜DSML｜invoke"
    cache = ParseCache()
    for i in range(1, len(text) + 1):
        a, b = arena.parse(text[:i], cache=cache), arena.parse(text[:i])
        assert (a.type, a.end, a.pending_ahead) == (b.type, b.end, b.pending_ahead), i
        found = OPENER in text[:i] or any(text[:i].endswith(OPENER[:k]) for k in range(8, len(OPENER)))
        assert (a.pending_ahead is not None) is (not found and a.type is ResultType.NEED_MORE_INPUT), i
        if a.pending_ahead is not None:
            assert a.pending_ahead[1] == ("<｜DSML｜i",) and a.pending_until is None


def _v4_parser(disabled=()):
    t = ChatTemplate((TEMPLATES / V4).read_text(encoding="utf-8"), V4)
    messages = [{"role": "user", "content": "Plan my trip to Paris."}]
    return t, build_chat_parser(t, ChatRequest.from_dict(_request(messages)), fidelity="improved",
                                disabled_repairs=disabled).parser


def test_a_flood_of_lt_streams_on_the_fast_path_with_the_repair_on():
    """The bench's `lt` output for DeepSeek V4 (bench.hostile, 2,000 characters of `<`): with the repair on, the
    stream took a full parse on every feed (1 fast feed of 1,000); now it takes as many as with the repair off,
    and the message equals the one-shot parse."""
    t, parser = _v4_parser()
    out = hostile_samples(t, "DeepSeek V4", 2000, kinds=("lt",))[0][0].output
    fast = {}
    for name, p in (("on", parser), ("off", _v4_parser(("call-section-omitted",))[1])):
        sp = StreamingParser(p)
        for ch in out:
            sp.feed(ch)
        fast[name] = sp.fast_steps
        sp.finish()
        assert sp.message.to_openai() == p.parse(out).to_openai(), name
    assert fast["on"] == fast["off"] and fast["on"] > 0.95 * len(out), fast


def _v4_outputs() -> list[str]:
    cases = [c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept11")) if c.template == V4]
    assert len(cases) >= 5
    return [c.output for c in cases]


@pytest.mark.parametrize("chunk", [1, 3, 17, 0])
def test_deepseek_v4_outputs_stream_as_one_shot_behind_a_flood(chunk):
    """SGLang's DeepSeek V4 detector cases (tests/data/real_outputs_kept11, sources cited there) — invokes with and
    without their section — as they are and after the bench's flood of `<` (so the look-ahead has passed many
    `<` when the opener comes, across feeds): the stream equals the one-shot parse at chunk sizes 1, 3, 17 and
    whole."""
    t, parser = _v4_parser()
    flood = hostile_samples(t, "DeepSeek V4", 300, kinds=("lt",))[0][0].output
    for out in _v4_outputs():
        for text in (out, flood + out):
            size = chunk or len(text)
            _, msg = stream_deltas(parser, text, chunk=size)
            assert msg.to_openai() == parser.parse(text).to_openai(), (size, text[-80:])
