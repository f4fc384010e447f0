"""Streaming on damaged outputs: the reference cases' and the drift suite's outputs, mutated the way real model
output goes wrong (a near-miss marker, broken JSON arguments, a cut, an escape or unicode inserted, a second
call after a broken one), fed in random chunk sizes at both fidelities. Every feed's deltas must be those of a
full re-parse of the prefix (``StreamingParser(incremental=False)``), and what a client keeps
(:func:`core.chat.repairs.settled`) must equal the one-shot parse. Seeded: the same texts on every run. A bounded
sample of the differential fuzz run against the pre-speed-work code (2ff88b2) (see docs/security.md)."""

from __future__ import annotations

import json
import random
import re

import pytest

from core.chat.conformance import TemplateDir
from core.chat.pipeline import build_chat_parser
from core.chat.repairs import settled
from core.chat.request import ChatRequest
from core.chat.stream import StreamingParser

from .conftest import REFERENCE, TEMPLATES

DRIFT = __import__("pathlib").Path(__file__).parent / "data" / "drift"
_MARKER = re.compile(r"<[^<>\s]{2,40}>|\[[A-Z_]{3,}\]|<\|[^|]+\|>|<｜[^｜]+｜>")
_JSON_EDITS = [('"}', '"'), ("}", "}}"), ("{", "{{"), ("true", "tru"), ("null", "nul"), (", ", ",,"),
               (": ", ': [[1, [2, {"a": [true]}]], '), ('"', '"\\'), ("1", "1.e"), (":", ": -"), ("}", "] }")]
KINDS = ("nearmiss", "json", "cut", "esc", "uni", "twice", "ws")


def _mutate(rng: random.Random, text: str, kind: str) -> tuple[str, bool] | None:
    """``text`` damaged as ``kind`` says, and whether it is cut (parsed as partial); None if ``kind`` does not
    apply (no marker, no JSON-like character)."""
    if not text:
        return None
    if kind == "nearmiss":   # one character of a marker dropped: <tool_cal>
        spans = [m.span() for m in _MARKER.finditer(text)]
        if not spans:
            return None
        s, e = rng.choice(spans)
        i = rng.randrange(s + 1, e - 1) if e - s > 2 else s
        return text[:i] + text[i + 1:], False
    if kind == "json":
        edits = [(a, b) for a, b in _JSON_EDITS if a in text]
        if not edits:
            return None
        a, b = rng.choice(edits)
        i = rng.choice([m.start() for m in re.finditer(re.escape(a), text)])
        return text[:i] + b + text[i + len(a):], False
    if kind == "cut":
        return text[:rng.randrange(len(text) + 1)], True
    if kind == "twice":      # a broken attempt, then the good one
        bad = _mutate(rng, text, "json") or (text[:len(text) // 2], False)
        return bad[0] + rng.choice(["", "\n", " "]) + text, False
    i = rng.randrange(len(text) + 1)
    add = {"esc": ['\\"', "\\\\", "\\n", "\\u12", "\\"], "uni": ["é", "🙂", "中文", "\u200b"],
           "ws": ["   ", "\n\n\n", " \t\n "]}[kind]
    return text[:i] + rng.choice(add) + text[i:], False


def _chunks(rng: random.Random, text: str) -> list[str]:
    size = rng.choice([1, 2, 3, 0])
    if size:
        return [text[i:i + size] for i in range(0, len(text), size)]
    out, i = [], 0
    while i < len(text):
        n = rng.choice([1, 1, 2, 3, 5, 8, 13])
        out.append(text[i:i + n])
        i += n
    return out


def _bases() -> list[tuple[str, str, dict, str, bool]]:
    rows = []
    for line in (REFERENCE / "cases.jsonl").read_text(encoding="utf-8").splitlines():
        c = json.loads(line)
        req = {k: v for k, v in c.items() if k not in ("id", "template", "input", "is_partial", "expect")}
        rows.append((c["id"], c["template"], req, c["input"], bool(c["is_partial"])))
    for path in sorted(DRIFT.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            c = json.loads(line)
            rows.append((c["id"], c["template"], c["request"], c["output"], bool(c.get("is_partial", False))))
    return rows


def _run(parser, pieces: list[str], partial: bool, incremental: bool):
    sp = StreamingParser(parser, incremental=incremental)
    feeds = [[repr(d) for d in sp.feed(p)] for p in pieces]
    feeds.append([repr(d) for d in sp.finish(partial)])
    return sp, feeds


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_mutated_outputs_stream_as_full_reparses(fidelity):
    rng = random.Random(20261202)
    templates = TemplateDir(str(TEMPLATES))
    bases = [b for b in _bases() if len(b[3]) <= 1200]
    checked = 0
    routes = set()
    for bid, name, req, text, partial in rng.sample(bases, 70):
        parser = build_chat_parser(templates.get(name), ChatRequest.from_dict(req), fidelity=fidelity).parser
        for kind in rng.sample(KINDS, 2):
            m = _mutate(rng, text, kind)
            if m is None:
                continue
            t, cut = m
            pieces = _chunks(rng, t)
            sp, feeds = _run(parser, pieces, partial or cut, True)
            _, full = _run(parser, pieces, partial or cut, False)
            assert feeds == full, (bid, kind, t)
            one = parser.parse(t, partial or cut)
            if not sp.final_mismatch:
                assert settled(sp.message, sp.final).to_openai() == one.to_openai(), (bid, kind, t)
            checked += 1
            routes.add(name)
    assert checked >= 120 and len(routes) >= 25


def test_whitespace_before_an_empty_tagged_value_is_left_to_a_parse():
    # Qwen3-Coder at improved skips the whitespace before a parameter's value: "<parameter=n>  a" gives "a". The
    # fast path of an empty tagged string value (open since 04de30c) held the second space as a cut " </parameter>"
    # and then emitted " a", after which every later feed disagreed with the parse (found by the mutation fuzz)
    templates = TemplateDir(str(TEMPLATES))
    tool = {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}}}
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hi"}], "tools": [tool]})
    parser = build_chat_parser(templates.get("Qwen3-Coder.jinja"), req, fidelity="improved").parser
    head = "<tool_call>\n<function=run>\n<parameter=a>\nx\n</parameter>\n<parameter=b>"
    tail = "\n</parameter>\n</function>\n</tool_call>"
    for middle in (["\n", " ", "v"], [" \t\n", " ", "\nv"], [" ", " ", "v"]):
        pieces = [head, *middle, tail]
        sp, feeds = _run(parser, pieces, False, True)
        assert feeds == _run(parser, pieces, False, False)[1], middle
        assert sp.message == parser.parse("".join(pieces)), middle
    assert json.loads(sp.message.tool_calls[0].arguments) == {"a": "x", "b": "v"}


def test_lfm25_whitespace_before_a_pythonic_calls_close():
    # ref-0261's output with spaces inserted before ")" (found by the mutation fuzz, 1 of 9540 runs): a dict value
    # swallows the whitespace after it, so its end found when the text ended right after "}" is not kept for the
    # longer texts of the stream (scan_python_or_json's memo)
    templates = TemplateDir(str(TEMPLATES))
    case = next(c for c in map(json.loads, (REFERENCE / "cases.jsonl").read_text(encoding="utf-8").splitlines())
                if c["id"] == "ref-0261")
    req = {k: v for k, v in case.items() if k not in ("id", "template", "input", "is_partial", "expect")}
    parser = build_chat_parser(templates.get(case["template"]), ChatRequest.from_dict(req)).parser
    text = '<|tool_call_start|>[set_config(config={"enabled": true, "note": null}   )]<|tool_call_end|>'
    pieces = [text[i:i + 3] for i in range(0, len(text), 3)]
    sp, feeds = _run(parser, pieces, False, True)
    assert feeds == _run(parser, pieces, False, False)[1]
    assert not sp.final_mismatch


def test_content_taken_by_a_rest_until_does_not_hold_a_cut_delimiter():
    # granite 3.2: the content after a call is read to the end (an until without delimiters), so a '<' there is
    # content at once; the fast path held it back as a cut '</function_call>' (the tag's other until stops there)
    templates = TemplateDir(str(TEMPLATES))
    case = next(json.loads(line) for path in sorted(DRIFT.glob("*.jsonl"))
                for line in path.read_text(encoding="utf-8").splitlines()
                if json.loads(line)["id"] == "granite32-function-call-tag")
    parser = build_chat_parser(templates.get(case["template"]), ChatRequest.from_dict(case["request"]),
                               fidelity="improved").parser
    text = ('<function_call>{"name": "web_search", "arguments": {"search_instruction": "news"}}}</function_call>'
            "##ANSWER##")
    sp, feeds = _run(parser, list(text), False, True)
    assert feeds == _run(parser, list(text), False, False)[1]
    assert sp.message == parser.parse(text)


def test_mutated_repeated_calls_of_the_handler_routes_stream_as_full_reparses():
    # the hostile 'calls' outputs of GPT-OSS (one call, then <|call|>) and Kimi-K2 (calls in a row between section
    # markers), whose text after a call's arguments streams without a parse (HandlerParser.after_arguments), damaged
    # as above, at both fidelities: every feed's deltas are those of a full re-parse
    from bench.hostile import hostile_samples
    from bench.outputs import _request
    from core.jinja.template import ChatTemplate

    rng = random.Random(20261203)
    templates = TemplateDir(str(TEMPLATES))
    request = ChatRequest.from_dict(_request([{"role": "user", "content": "Plan my trip to Paris."}]))
    checked = 0
    for name in ("openai-gpt-oss-120b.jinja", "Kimi-K2-Instruct.jinja"):
        src = (TEMPLATES / name).read_text(encoding="utf-8")
        text = {s.kind: s for s in hostile_samples(ChatTemplate(src, name), name, 80)[0]}["calls"].output
        for fidelity in ("llama.cpp", "improved"):
            parser = build_chat_parser(templates.get(name), request, fidelity=fidelity).parser
            for _ in range(10):
                t, cut = text, False
                for kind in rng.sample(KINDS, rng.choice([1, 2])):
                    m = _mutate(rng, t, kind)
                    if m is not None:
                        t, cut = m[0], cut or m[1]
                pieces = _chunks(rng, t)
                sp, feeds = _run(parser, pieces, cut, True)
                assert feeds == _run(parser, pieces, cut, False)[1], (name, fidelity, t)
                if not sp.final_mismatch:
                    assert settled(sp.message, sp.final).to_openai() == parser.parse(t, cut).to_openai(), (name, t)
                checked += 1
    assert checked == 40
