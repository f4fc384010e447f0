"""Hostile model outputs for the streaming cost benchmark (P6; issue 16 point 8).

Each output is an assistant turn rendered through the template (as :mod:`bench.outputs` does), so it is what a
model following the template would produce — only the payload is adversarial:

* ``escapes``: one tool call whose string argument is dense with JSON escapes (``\\n``, ``\\"``, ``\\\\``);
* ``brackets``: one tool call whose arguments hold a run of ``[`` in a string and arrays nested 64 deep;
* ``calls``: many short tool calls in a row;
* ``lt``: content that is a flood of ``<``;
* ``plain``: plain prose content.

A kind the template cannot render (one call at most, no tools) is skipped with a note, never faked.
:func:`feed_costs` feeds an output one character at a time and measures each feed in CPU time of the calling
thread (``time.thread_time``), so other processes on a shared machine do not inflate the tail.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .outputs import _assistant, _request, _turn_text

KINDS = ("escapes", "brackets", "calls", "lt", "plain")

# (route label, template file): the formats issue 16 names, plus the P2/P3 formats
ROUTES = [
    ("Qwen3 (Hermes-style JSON in tags)", "Qwen-Qwen3-0.6B.jinja"),
    ("Hermes 2 Pro", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"),
    ("Llama 3.1 (bare JSON)", "meta-llama-Llama-3.1-8B-Instruct.jinja"),
    ("Mistral Small 3.2 ([TOOL_CALLS])", "Mistral-Small-3.2-24B-Instruct-2506.jinja"),
    ("GPT-OSS (harmony)", "openai-gpt-oss-120b.jinja"),
    ("Kimi-K2", "Kimi-K2-Instruct.jinja"),
    ("DeepSeek V3.1", "deepseek-ai-DeepSeek-V3.1.jinja"),
    ("GLM-4.6 (tagged arguments)", "GLM-4.6.jinja"),
    ("Reka Edge (JSON native)", "Reka-Edge.jinja"),
]

# the special families of core.chat.formats whose value syntax or call shape the routes above do not exercise
# (Kimi-K2 is above); P6 streams them too, tests parametrized over ROUTES do not
FAMILY_ROUTES = [
    ("Gemma 4 (value hook)", "google-gemma-4-31B-it.jinja"),
    ("MiniMax-M3 (typed elements, value hook)", "MiniMax-M3.jinja"),
    ("Kimi-K3", "Kimi-K3.jinja"),
    ("Muse Glimmer", "muse-glimmer.jinja"),
    ("Ling 3", "inclusionai-ling-3.0-flash.jinja"),
]


def _nested(depth: int) -> Any:
    v: Any = ["x"]
    for _ in range(depth - 1):
        v = [v]
    return v


def _turn(kind: str, n: int) -> dict[str, Any]:
    turn = _payload(kind, n)
    for i, call in enumerate(turn["tool_calls"]):
        call["id"] = f"c{i:08d}"  # 9 alphanumerics: Mistral's templates refuse other call ids
    return turn


def _payload(kind: str, n: int) -> dict[str, Any]:
    if kind == "escapes":
        return _assistant("", "", [("search_notes", {"query": ('a\n"\\' * (n // 3 + 1))[:n]})])
    if kind == "brackets":
        return _assistant("", "", [("search_notes", {"query": "[" * n, "limit": _nested(64)})])
    if kind == "calls":
        return _assistant("", "", [("get_weather", {"city": "paris"}) for _ in range(max(2, n // 40))])
    if kind == "lt":
        return _assistant("", "<" * n, [])
    return _assistant("", ("plain words about the weather in paris " * (n // 38 + 1))[:n], [])


@dataclass
class HostileSample:
    """One hostile output: ``route`` label, ``template`` file, ``kind`` (see :data:`KINDS`), ``output`` text."""

    route: str
    template: str
    kind: str
    output: str
    parser: Any


def hostile_samples(template: ChatTemplate, route: str, n_chars: int,
                    kinds: tuple[str, ...] = KINDS) -> tuple[list[HostileSample], list[str]]:
    """The hostile outputs of ``template`` with a payload of about ``n_chars`` characters each (the output is
    a little longer: markers, JSON quoting). Returns (samples, notes on the kinds skipped and why)."""
    messages = [{"role": "user", "content": "Plan my trip to Paris."}]
    bundle = build_chat_parser(template, ChatRequest.from_dict(_request(messages)))
    samples, notes = [], []
    for kind in kinds:
        try:
            out = _turn_text(template, messages, _turn(kind, n_chars))
        except Exception as e:  # the template refuses this shape (e.g. "only single tool-calls")
            notes.append(f"{template.name} {kind}: not renderable ({str(e)[:80]})")
            continue
        samples.append(HostileSample(route, template.name, kind, out, bundle.parser))
    return samples, notes


@dataclass
class FeedCosts:
    """Per-feed CPU cost of streaming one output 1 character per feed, over ``passes`` passes of the same output
    through a new parser each: ``p50_us``, ``p99_us`` and ``max_us`` of the per-feed median over the passes (the
    parser's cost of each feed with a one-off interruption of the host removed: a feed counts as slow when it
    was slow in most passes; with one pass, that pass's own figures), ``pass_p99_us`` (each pass's own p99),
    ``total_s`` (CPU of the first pass), ``feeds``, ``stream_equals_parse`` (accumulated deltas, settled, equal the
    one-shot parse, checked after every pass: :func:`stream_equals_parse`)."""

    p50_us: float
    p99_us: float
    max_us: float
    total_s: float
    feeds: int
    stream_equals_parse: bool
    pass_p99_us: list[float]
    passes: int = 1


def _p99(costs: list[float]) -> float:
    k = len(costs)
    return sorted(costs)[min(k - 1, int(k * 0.99))]


def _one_pass(parser: Any, output: str, budget_s: float | None) -> tuple[list[float], bool]:
    from core.chat.stream import StreamingParser

    gc.collect()  # every pass starts from the same collector state, so a collection falls on the same feeds
    sp = StreamingParser(parser)
    clock = time.thread_time
    costs = []
    spent = 0.0
    for ch in output:
        t0 = clock()
        sp.feed(ch)
        dt = clock() - t0
        costs.append(dt)
        spent += dt
        if budget_s is not None and spent > budget_s:
            break
    sp.finish()
    return costs, stream_equals_parse(sp, parser, output[:len(costs)])


def stream_equals_parse(sp: Any, parser: Any, output: str) -> bool:
    """Whether the finished stream ``sp`` of ``output`` gives the one-shot ``parser.parse(output)``, as a client
    keeps it: the accumulated deltas settled by the final parse (:func:`core.chat.repairs.settled` drops a call
    whose fragments were streamed but that the final parse reports as ``truncated-call``, e.g. a MiniMax-M3 call
    whose typed value breaks its schema)."""
    from core.chat.repairs import settled

    final = sp.final if sp.final is not None else parser.parse(output)
    return settled(sp.message, final).to_openai() == parser.parse(output).to_openai()


def feed_costs(parser: Any, output: str, budget_s: float | None = None, passes: int = 1) -> FeedCosts:
    """Stream ``output`` through :class:`core.chat.stream.StreamingParser` one character per feed, ``passes`` times
    (≥ 1; a new parser each pass); thread CPU time per feed (``finish`` not counted). ``budget_s``: stop feeding
    once the first pass's feeds have cost this much CPU (``feeds`` then says how many were made, and no further
    pass runs). Checks the streamed message of the text fed against ``parser.parse`` of that text. Raises
    ``ValueError`` when ``passes`` < 1.

    Why the per-feed median: on a shared or virtual machine a pass's p99 moves by ±20 µs from run to run (the
    host takes the CPU mid-feed and the guest charges it to the feeding thread), while the work of each feed is
    the same in every pass; the median over passes keeps whatever is slow in most passes, garbage collections
    included (each pass starts after ``gc.collect()``, so they fall on the same feeds)."""
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    first, same = _one_pass(parser, output, budget_s)
    runs = [first]
    if len(first) == len(output):
        for _ in range(passes - 1):
            costs, ok = _one_pass(parser, output, None)
            runs.append(costs)
            same &= ok
    per_feed = first if len(runs) == 1 else [sorted(x)[len(x) // 2] for x in zip(*runs)]
    ordered = sorted(per_feed)
    k = len(ordered)
    return FeedCosts(ordered[k // 2] * 1e6, ordered[min(k - 1, int(k * 0.99))] * 1e6, ordered[-1] * 1e6,
                     sum(first), k, same, [_p99(r) * 1e6 for r in runs], len(runs))
