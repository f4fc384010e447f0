"""Noise-free cost of the parsing feeds of a stream: Python lines and bytecode instructions per feed, per function.

Timing a 1-character feed on a shared machine is noisy (±20 % between runs); the work a feed does is not. This
streams one hostile sample (:mod:`bench.hostile`) one character per feed and, on the feeds the fast path did not
take (``StreamingParser.fast_steps`` did not grow: the feed parsed), counts the lines and the bytecode
instructions executed in each function (``sys.settrace`` with opcode events). Compare two trees by running
it in each::

    PYTHONPATH=. python -m bench.feed_ops --chars 4000 --kind calls --top 20

Output per route: parsing feeds / all feeds, mean and p99 instructions and lines per parsing feed, the p99 of the
instructions over every feed (fast ones included: the noise-free counterpart of the timed P6 p99), the share of
each source file and class, and the ``--top`` functions by instructions per parsing feed (``--after FIELD``: only the
feeds that left an open region of that field, e.g. ``after``). The counts are exact and repeatable; they are a
proxy for time (an instruction costs 10–60 ns), so confirm a change by CPU time (``bench.hostile.feed_costs``).

``--ceilings`` prints, per route, how far three kinds of change could take the p99 over every feed at best
(:func:`ceilings`): every parsing feed that emitted no delta taken by the fast path instead, the mapper's walk down
the spine free, the engine free, and both — exact upper bounds on the gain, to weigh an idea before building it.
"""

from __future__ import annotations

import argparse
import collections
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT_TEMPLATES = Path("/work/shared/templates")


@dataclass
class FeedOps:
    """Counts for one stream: ``feeds`` (all), ``parsing`` (feeds that parsed), ``ops`` and ``lines`` (one entry
    per parsing feed, in feed order), ``by_function`` (``(file, function)`` → instructions over all parsing
    feeds), ``equal`` (the streamed message equals the one-shot parse of the whole output), ``every`` (the
    instructions of every feed, fast ones included, in feed order: their p99 is the noise-free counterpart of
    :func:`bench.hostile.feed_costs`'s timed p99)."""

    feeds: int
    parsing: int
    ops: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    by_function: collections.Counter = field(default_factory=collections.Counter)
    equal: bool = True
    every: list[int] = field(default_factory=list)
    # per feed, in feed order (fast ones included): whether it parsed, whether it emitted a delta, the instructions
    # of the parser engine (core/peg/engine.py) and of the mapper's walk (IncrementalMapper.map's own)
    parsed: list[bool] = field(default_factory=list)
    emitted: list[bool] = field(default_factory=list)
    engine: list[int] = field(default_factory=list)
    walk: list[int] = field(default_factory=list)
    # with ``open_points``: per feed, the instructions a parser that kept its open nodes between parses would not
    # spend (see :func:`count_feed_ops`), 0 on fast feeds
    above: list[int] = field(default_factory=list)


@dataclass
class Ceilings:
    """The p99 of the instructions over every feed of one stream (``now``), and what it would be at best if:
    ``quiet_fast`` every parsing feed that emitted no delta cost what the fast feeds' p99 costs (a fast path wide
    enough to take every feed that leaves the message as it is); ``walk_free`` the mapper's walk down the spine
    cost nothing; ``engine_free`` the parser engine cost nothing; ``both_free`` neither; ``open_kept`` (counted with
    ``open_points``) the engine and the walk spent nothing above the deepest level the parse shares with the last
    one (open nodes kept between parses). Lower bounds on the p99 each kind of change can reach (upper bounds on
    its gain), not predictions."""

    now: int
    quiet_fast: int
    walk_free: int
    engine_free: int
    both_free: int
    open_kept: int | None = None


def ceilings(r: FeedOps) -> Ceilings:
    """The :class:`Ceilings` of a counted stream (``r`` from :func:`count_feed_ops`). Raises nothing; a stream
    with no fast feed counts a quiet parsing feed as 0 instructions."""
    fast = [k for k, p in zip(r.every, r.parsed) if not p]
    fast_p99 = _pct(fast, 0.99)
    quiet = [fast_p99 if p and not e else k for k, p, e in zip(r.every, r.parsed, r.emitted)]
    return Ceilings(_pct(r.every, 0.99), _pct(quiet, 0.99),
                    _pct([k - w for k, w in zip(r.every, r.walk)], 0.99),
                    _pct([k - g for k, g in zip(r.every, r.engine)], 0.99),
                    _pct([k - g - w for k, g, w in zip(r.every, r.engine, r.walk)], 0.99),
                    _pct([k - a for k, a in zip(r.every, r.above)], 0.99) if r.above else None)


_ENGINE = "core/peg/engine.py"
_WALK = ("core/chat/stream.py", "IncrementalMapper.map")


def _short(path: str) -> str:
    for mark in ("/core/", "/bench/", "/lib/python"):
        i = path.rfind(mark)
        if i != -1:
            return path[i + 1:]
    return path


def count_feed_ops(parser, output: str, before: str | None = None, open_points: bool = False) -> FeedOps:
    """Stream ``output`` through a :class:`core.chat.stream.StreamingParser` of ``parser`` one character per feed,
    counting instructions and lines on the parsing feeds (``before``: only those whose previous open region had
    that field; None: all). Raises nothing of its own (a parser error propagates as in ``feed``).

    ``open_points``: also follow the engine's combinator frames and fill ``FeedOps.above``. A parse's open point is
    the path of frames (combinator, position) from the root to where it first looked at the end of the text; the
    deepest frame it shares with the last parse's open point is where the two trees part. Above it every frame's
    child needed more input both times, so a parser that kept its open nodes between parses would not run those
    frames again: ``above`` is the engine's instructions outside that frame's subtree, plus the mapper's walk
    prorated by the node levels above it (an estimate: the walk is counted as a whole). Only the first root parse
    of a feed is followed; the other parses of a feed count as kept."""
    from core.chat.stream import StreamingParser

    sp = StreamingParser(parser)
    res = FeedOps(feeds=len(output), parsing=0)
    names: dict = {}
    prev_path: list | None = None
    for ch in output:
        ops = collections.Counter()
        nlines = [0]
        # open points: tracked combinator frames by id -> [key, own ops, ops of tracked children, ctx, node?]
        tracked: dict = {}
        stack: list = []
        first: list = [None, None]   # [path to the first look at the end, the root's entry]

        def local(frame, event, arg, ops=ops, nlines=nlines, tracked=tracked, stack=stack, first=first):
            if event == "opcode":
                ops[frame.f_code] += 1
                if stack:
                    e = tracked.get(id(frame))
                    (e if e is not None else stack[-1])[1] += 1
            elif event == "line":
                nlines[0] += 1
            elif event == "return" and tracked:
                e = tracked.pop(id(frame), None)
                if e is not None:
                    stack.pop()
                    e[2] += e[1]    # (now the frame's inclusive count)
                    if stack:
                        stack[-1][2] += e[2]
                    if first[0] is None and e[3].ends > 0:
                        first[0] = [x[0] for x in stack] + [e[0]]
                        first.append(stack + [e])
            return local

        def call(frame, event, arg, tracked=tracked, stack=stack, first=first):
            frame.f_trace_opcodes = True
            code = frame.f_code
            if open_points and code.co_varnames[:2] == ("ctx", "pos") and code.co_filename.endswith(_ENGINE):
                if stack or first[1] is None:
                    e = [(code, frame.f_locals["pos"]), 0, 0, frame.f_locals["ctx"],
                         code.co_name == "f" and "_make_node" in getattr(code, "co_qualname", "")]
                    if not stack:
                        first[1] = e
                    tracked[id(frame)] = e
                    stack.append(e)
            return local

        region = sp._region
        field_before = region.field if region is not None else None
        steps = sp.fast_steps
        sys.settrace(call)
        try:
            deltas = sp.feed(ch)
        finally:
            sys.settrace(None)
        res.every.append(sum(ops.values()))
        res.parsed.append(sp.fast_steps == steps)
        res.emitted.append(bool(deltas))
        engine = walk = 0
        for code, k in ops.items():
            key = names.get(code)
            if key is None:
                key = names[code] = (_short(code.co_filename), getattr(code, "co_qualname", code.co_name))
            if key[0] == _ENGINE:
                engine += k
            elif key == _WALK:
                walk += k
        res.engine.append(engine)
        res.walk.append(walk)
        if open_points:
            res.above.append(0)
            path = first[0]
            if sp.fast_steps == steps and path is not None:
                if prev_path is not None:
                    entries = first[2]
                    k = 0
                    while k < len(path) and k < len(prev_path) and path[k] == prev_path[k]:
                        k += 1
                    if k:
                        lca = entries[k - 1]
                        nodes = [x[4] for x in entries]
                        share = sum(nodes[:k - 1]) / max(1, sum(nodes))
                        res.above[-1] = first[1][2] - lca[2] + int(walk * share)
                prev_path = path
        if sp.fast_steps != steps or (before is not None and field_before != before):
            continue
        res.parsing += 1
        res.ops.append(sum(ops.values()))
        res.lines.append(nlines[0])
        for code, k in ops.items():
            res.by_function[names[code]] += k
    sp.finish()
    from .hostile import stream_equals_parse

    res.equal = stream_equals_parse(sp, parser, output)
    return res


def _pct(xs: list[int], q: float) -> int:
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))] if s else 0


def main(argv: list[str] | None = None) -> int:
    """CLI: see the module docstring. Returns the exit status (2 on a bad argument)."""
    from core.jinja.template import ChatTemplate

    from .hostile import FAMILY_ROUTES, KINDS, ROUTES, hostile_samples

    ap = argparse.ArgumentParser(prog="python -m bench.feed_ops", description=__doc__.split("\n")[0])
    ap.add_argument("--chars", type=int, default=4000, help="payload size of the sample (default 4000)")
    ap.add_argument("--kind", default="calls", choices=KINDS)
    ap.add_argument("--route", action="append", default=[], help="substring of a template file name (repeatable)")
    ap.add_argument("--top", type=int, default=15, help="functions listed per route")
    ap.add_argument("--after", default=None, help="only feeds whose previous open region had this field")
    ap.add_argument("--templates", type=Path, default=ROOT_TEMPLATES)
    ap.add_argument("--ceilings", action="store_true",
                    help="also print how low the p99 over every feed could go at best (see ceilings())")
    a = ap.parse_args(argv)
    if a.chars < 1:
        print("error: --chars must be >= 1", file=sys.stderr)
        return 2
    for route, name in ROUTES + FAMILY_ROUTES:
        if a.route and not any(r in name for r in a.route):
            continue
        path = a.templates / name
        if not path.is_file():
            print(f"{name}: template not found under {a.templates}", file=sys.stderr)
            continue
        t = ChatTemplate(path.read_text(), name)
        samples, notes = hostile_samples(t, route, a.chars, kinds=(a.kind,))
        if not samples:
            print(f"{name}: {'; '.join(notes) or 'no sample'}")
            continue
        r = count_feed_ops(samples[0].parser, samples[0].output, a.after, open_points=a.ceilings)
        if not r.parsing:
            print(f"{name}: no parsing feed of {r.feeds}")
            continue
        k = r.parsing
        print(f"{name}: {k}/{r.feeds} feeds parse; per parsing feed: instructions mean {sum(r.ops) / k:.0f} "
              f"p99 {_pct(r.ops, 0.99)}, lines mean {sum(r.lines) / k:.0f} p99 {_pct(r.lines, 0.99)}; "
              f"every feed: instructions p99 {_pct(r.every, 0.99)}; stream = one-shot: {r.equal}")
        parts = collections.Counter()
        for (f, fn), v in r.by_function.items():
            parts[f + (":" + fn.split(".")[0] if "." in fn else "")] += v
        print("  by file and class: " + ", ".join(f"{f} {v / k:.0f}" for f, v in parts.most_common(8)))
        if a.ceilings:
            c = ceilings(r)
            print(f"  p99 over every feed {c.now}; at best: quiet parsing feeds fast {c.quiet_fast}, mapper walk free "
                  f"{c.walk_free}, engine free {c.engine_free}, both free {c.both_free}, open nodes kept "
                  f"{c.open_kept}")
        for (f, fn), v in r.by_function.most_common(a.top):
            print(f"  {v / k:8.1f}  {f}:{fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
