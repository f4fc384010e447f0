"""bench.feed_ops: exact instruction counts on the parsing feeds of a stream (the noise-free P6 figure)."""

from __future__ import annotations

import collections

from bench.feed_ops import count_feed_ops, main
from bench.hostile import hostile_samples
from core.jinja.template import ChatTemplate

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
    # every feed counted, the parsing ones as in ops; the p99 over all feeds is a parsing feed's count
    from bench.feed_ops import _pct

    assert len(a.every) == a.feeds and not collections.Counter(a.ops) - collections.Counter(a.every)
    assert _pct(a.every, 0.99) in a.ops
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


def test_feed_costs_takes_each_feeds_median_over_passes():
    import pytest

    from bench.hostile import feed_costs

    s = _sample()
    c = feed_costs(s.parser, s.output, passes=3)
    assert c.passes == 3 and len(c.pass_p99_us) == 3 and c.feeds == len(s.output)
    assert c.stream_equals_parse and 0 < c.p50_us <= c.p99_us <= c.max_us
    one = feed_costs(s.parser, s.output)
    assert one.passes == 1 and one.pass_p99_us == [one.p99_us]
    cut = feed_costs(s.parser, s.output, budget_s=0.0, passes=3)  # cut in the first pass: no further pass
    assert cut.passes == 1 and cut.feeds == 1
    with pytest.raises(ValueError, match="passes must be at least 1, got 0"):
        feed_costs(s.parser, s.output, passes=0)


def test_p6_routes_option_runs_only_the_matching_routes(tmp_path):
    import json

    from bench.run import main as bench_main

    from .conftest import TEMPLATES as T

    out = tmp_path / "p6.json"
    assert bench_main(["--only", "P6", "--routes", "MiniMax", "--stream-chars", "200", "--repeats", "1",
                       "--templates", str(T), "--json", str(out)]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert [r["id"] for r in data["rows"]] == ["P6-200-MiniMax-M3"]
    p6 = data["raw"]["p6"]
    assert [r["kind"] for r in p6] == ["escapes", "brackets", "calls", "lt", "plain"]
    # the brackets call is rejected by its typed value (`limit` is an integer): settled, the stream is the parse
    assert all(r["stream_equals_parse"] for r in p6) and "STREAM ≠ PARSE" not in data["rows"][0]["detail"]


def test_ceilings_bound_the_p99_from_below_and_are_computed_from_the_counts():
    from bench.feed_ops import _pct, ceilings

    s = _sample()
    count_feed_ops(s.parser, s.output)
    r = count_feed_ops(s.parser, s.output)
    n = r.feeds
    assert len(r.parsed) == len(r.emitted) == len(r.engine) == len(r.walk) == n
    assert sum(r.parsed) == r.parsing                 # every feed counted, as FeedOps.parsing counts them
    # the walk runs only on parsing feeds (a fast feed may call into the engine: a region's scan); on every feed
    # the engine and the walk are a part of its instructions
    assert all(w == 0 for w, p in zip(r.walk, r.parsed) if not p)
    assert all(0 <= g + w < k for k, g, w in zip(r.every, r.engine, r.walk))
    assert all(g > 0 for g, p in zip(r.engine, r.parsed) if p)
    c = ceilings(r)
    assert c.now == _pct(r.every, 0.99)
    assert c.walk_free == _pct([k - w for k, w in zip(r.every, r.walk)], 0.99)
    assert c.both_free <= min(c.walk_free, c.engine_free) and max(c.walk_free, c.engine_free, c.quiet_fast) <= c.now
    # the parsing feeds that emitted no delta priced as the fast feeds' p99
    fast = sorted(k for k, p in zip(r.every, r.parsed) if not p)
    priced = [fast[int(len(fast) * 0.99)] if p and not e else k for k, p, e in zip(r.every, r.parsed, r.emitted)]
    assert 0 < sum(p and not e for p, e in zip(r.parsed, r.emitted)) < r.parsing
    assert c.quiet_fast == sorted(priced)[int(n * 0.99)] < c.now
    # the engine is the larger half of a parsing feed at the p99
    assert c.engine_free < c.now // 2 + c.now // 10


def test_open_points_estimate_what_kept_open_nodes_would_not_spend():
    from bench.feed_ops import ceilings

    s = _sample()
    count_feed_ops(s.parser, s.output)
    plain = count_feed_ops(s.parser, s.output)
    r = count_feed_ops(s.parser, s.output, open_points=True)
    assert r.every == plain.every and plain.above == []   # following the frames changes no count
    assert len(r.above) == r.feeds
    assert all(a == 0 for a, p in zip(r.above, r.parsed) if not p)
    # never more than the engine and the walk spent, and something on most parsing feeds after the first
    assert all(0 <= a <= g + w for a, g, w in zip(r.above, r.engine, r.walk))
    assert sum(a > 0 for a in r.above) > r.parsing // 2
    c = ceilings(r)
    assert c.both_free <= c.open_kept < c.now and ceilings(plain).open_kept is None
