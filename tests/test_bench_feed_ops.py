"""bench.feed_ops: exact instruction counts on the parsing feeds of a stream (the noise-free P6 figure)."""

from __future__ import annotations

from bench.feed_ops import count_feed_ops, main
from bench.hostile import hostile_samples
from core.templating import ChatTemplate

from .conftest import TEMPLATES


def _sample():
    name = "Qwen-Qwen3-0.6B.jinja"
    t = ChatTemplate((TEMPLATES / name).read_text(), name)
    samples, _ = hostile_samples(t, "Qwen3", 200, kinds=("calls",))
    return samples[0]


def test_counts_only_parsing_feeds_and_are_repeatable():
    s = _sample()
    count_feed_ops(s.parser, s.output)   # the first stream of a parser also builds its per-arena tables
    a = count_feed_ops(s.parser, s.output)
    b = count_feed_ops(s.parser, s.output)
    assert a.equal and a.feeds == len(s.output)
    assert 0 < a.parsing < a.feeds // 4          # most marker characters take the fast path
    # exact, not timed (the median: a process-wide cache, e.g. re's, may be refilled on any one feed)
    assert a.parsing == b.parsing and sorted(a.ops)[a.parsing // 2] == sorted(b.ops)[b.parsing // 2]
    assert len(a.ops) == a.parsing and min(a.ops) > max(a.lines) // 2
    fns = {fn for _, fn in a.by_function}
    assert "StreamingParser._step" in fns and "PegStreamSession._parse_text" in fns


def test_filter_by_previous_region_keeps_a_subset():
    s = _sample()
    every = count_feed_ops(s.parser, s.output)
    after = count_feed_ops(s.parser, s.output, before="after")
    assert 0 < after.parsing < every.parsing


def test_bad_size_is_a_one_line_error(capsys):
    assert main(["--chars", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --chars must be >= 1"
