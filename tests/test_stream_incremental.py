"""Incremental streaming (PegStreamSession, IncrementalMapper, the open-region fast path) gives exactly what a
full re-parse of every prefix gives: on every reference case fed one character at a time, and on random
splits of synthetic outputs for several formats."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from core.chat.conformance import TemplateDir
from core.chat.message import AssistantMessage, apply_deltas
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.chat.stream import IncrementalMapper, PegStreamSession, StreamingParser

from .conftest import TEMPLATES
from .test_handlers_golden import SPECIAL, bundle

RUN = {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
    "command": {"type": "string"}, "n": {"type": "integer"}}, "required": ["command"]}}}


def _check_stream(parser, pieces: list[str], is_partial: bool = False) -> StreamingParser:
    sp = StreamingParser(parser)
    acc = AssistantMessage()
    text = ""
    for piece in pieces:
        text += piece
        acc = apply_deltas(acc, sp.feed(piece))
        if sp.held_back == 0:
            assert acc == parser.parse(text, True), f"after {text!r}"
    acc = apply_deltas(acc, sp.finish(is_partial))
    if not sp.final_mismatch:
        assert acc == parser.parse(text, is_partial)
    return sp


def test_reference_cases_match_full_reparse_at_every_step(reference_cases):
    templates = TemplateDir(str(TEMPLATES))
    incremental = peg_built = fast = 0
    for case in reference_cases:
        b = build_chat_parser(templates.get(case["template"]), ChatRequest.from_dict(case))
        sp = _check_stream(b.parser, list(case["input"]), bool(case["is_partial"]))
        assert sp.held_back == 0 and not sp.final_mismatch, case["id"]
        peg_built += PegStreamSession.supports(b.parser)
        incremental += isinstance(getattr(sp._parse, "__self__", None), PegStreamSession)
        fast += sp.fast_steps
    assert incremental == peg_built >= 190   # every PEG-built parser streams incrementally
    assert fast > 1000                       # and many characters take the fast path


def test_incremental_mapper_availability():
    assert IncrementalMapper.usable()
    p = bundle("Qwen3.5-4B.jinja", tools=[SPECIAL]).parser
    assert PegStreamSession.supports(p)


def test_fast_path_covers_long_content_and_json_strings():
    p = bundle("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", tools=[RUN]).parser
    body = "word " * 400
    text = body + '<tool_call>\n{"name": "run", "arguments": {"command": "' + "x y " * 200 + '"}}</tool_call>'
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
    sp = _check_stream(p, pieces)
    assert sp.fast_steps > 0.8 * len(pieces)
    assert json.loads(sp.message.tool_calls[0].arguments)["command"] == "x y " * 200


FRAGMENTS = {
    "Qwen3.5-4B.jinja": ["I think", " more", "\n</think>\n\n", "Answer ", "text. ", "<tool_call>\n",
                         "<function=run>\n", "<parameter=command>\n", "ls -la", "\n</parameter>\n", "<parameter=n>\n",
                         "3", "</function>\n", "</tool_call>", "\n", "<", "</"],
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": [
        "Hello ", "world. ", "<tool_call>\n", '{"name": "run", ', '"arguments": ', '{"command": "', "ls -la ",
        '\\"q\\"', '", "n": 2}', "}", "</tool_call>", "  ", "<", "{"],
    "GLM-4.6.jinja": ["Hi. ", "<tool_call>", "run", "\n", "<arg_key>", "command", "</arg_key>", "\n", "<arg_value>",
                      "ls", " -la", "</arg_value>", "\n", "</tool_call>", "<", "</"],
    "openai-gpt-oss-120b.jinja": ["<|channel|>analysis<|message|>", "plan", " it", "<|end|>", "<|start|>assistant",
                                  "<|channel|>final<|message|>", "Done ", "now", "<|channel|>commentary to=functions.run",
                                  " <|constrain|>json", "<|message|>", '{"command": "ls"}', "<|"],
    "deepseek-ai-DeepSeek-V4.jinja": ["plan", "</think>", "Text ", "\n\n", "<｜DSML｜tool_calls>\n",
                                      '<｜DSML｜invoke name="run">\n',
                                      '<｜DSML｜parameter name="command" string="true">', "ls -la",
                                      "</｜DSML｜parameter>\n", "</｜DSML｜invoke>\n", "</｜DSML｜tool_calls>", "<"],
}
_BUNDLES: dict = {}


def _parser(name: str):
    if name not in _BUNDLES:
        _BUNDLES[name] = bundle(name, tools=[RUN], parallel_tool_calls=True, reasoning_format="deepseek").parser
    return _BUNDLES[name]


@settings(max_examples=25, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(FRAGMENTS)))
def test_random_splits_match_full_reparse(data, name):
    frags = data.draw(st.lists(st.sampled_from(FRAGMENTS[name]), max_size=14))
    text = "".join(frags)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    pieces, last = [], 0
    for c in cuts + [len(text)]:
        pieces.append(text[last:c])
        last = c
    _check_stream(_parser(name), [p for p in pieces if p])


def test_sessions_reset_on_a_text_that_does_not_extend_the_previous_one():
    # parse_appended trusts the stream; parse() checks, and a rewritten text starts over (one session kind)
    from bench.hostile import hostile_samples
    from core.jinja.template import ChatTemplate

    for name in ("Qwen-Qwen3-0.6B.jinja", "Kimi-K2-Instruct.jinja"):
        src = (TEMPLATES / name).read_text(encoding="utf-8")
        s = {x.kind: x for x in hostile_samples(ChatTemplate(src, name), name, 300)[0]}["calls"]
        session = PegStreamSession(s.parser)
        out = s.output
        half = len(out) // 2
        session.parse(out[:half], True)
        session.parse_appended(out[half:half + 40], True)
        assert session.parse_appended("", True) == s.parser.parse(out[:half + 40], True)
        other = out[:half - 60] + "x" * 10     # not an extension: caches and view memo start over
        assert session.parse(other, True) == s.parser.parse(other, True)
        assert session.parse_appended(out[half - 50:half], True) == s.parser.parse(other + out[half - 50:half], True)


def test_streamed_repeated_turn_header_with_whitespace_matches_full_reparse():
    # repair repeated-turn-header: the cut grows with the whitespace after the header, then the parsed text
    # only grows — the appended-text sessions (PEG and handler) give what a full re-parse per feed gives
    req = {"messages": [{"role": "user", "content": "Hi"}], "tools": [RUN]}
    for name, body in (("openai-gpt-oss-120b.jinja",
                        '<|channel|>commentary to=functions.run <|constrain|>json<|message|>{"command": "ls"}'),
                       ("Kimi-K2-Instruct.jinja", "Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.run:0"
                                                  '<|tool_call_argument_begin|>{"command": "ls"}<|tool_call_end|>')):
        parser = build_chat_parser(TemplateDir(str(TEMPLATES)).get(name), ChatRequest.from_dict(req),
                                   fidelity="improved").parser
        head = parser.turn_header
        assert head
        text = head + " \n\n" + body
        runs = []
        for incremental in (True, False):
            sp = StreamingParser(parser, incremental=incremental)
            deltas = [repr(d) for ch in text for d in sp.feed(ch)] + [repr(d) for d in sp.finish()]
            runs.append((deltas, sp.message.to_openai()))
        assert runs[0] == runs[1], name
        assert runs[0][1] == parser.parse(text).to_openai() and runs[0][1].get("tool_calls"), name


def test_mapper_messages_share_settled_calls():
    # shared_calls on the incremental mapper's messages: two messages with the same token have their first
    # min(n) calls as the very same objects, so stream_deltas_between does not compare them
    parser = bundle("Qwen-Qwen3-0.6B.jinja", tools=[RUN]).parser
    text = "".join('<tool_call>\n{"name": "run", "arguments": {"command": "ls %d"}}\n</tool_call>\n' % i
                   for i in range(4))
    session = PegStreamSession(parser)
    prev = None
    most = 0
    for i, ch in enumerate(text):
        msg = session.parse_appended(ch)
        assert msg == parser.parse(text[:i + 1], True)
        shared = getattr(msg, "shared_calls", None)
        if shared is not None:
            assert 0 < shared[1] < len(msg.tool_calls)
            most = max(most, shared[1])
            old = getattr(prev, "shared_calls", None)
            if old is not None and old[0] is shared[0]:
                k = min(old[1], shared[1])
                assert all(a is b for a, b in zip(prev.tool_calls[:k], msg.tool_calls[:k]))
        prev = msg
    assert most == 3


# JSON arguments streamed through the whole-value fast path (advance_json_value): every token kind, whitespace
# between tokens, escapes cut anywhere, and continuations the scanner rejects (a parse must decide those)
JSON_ARGS = [
    '{"city": "paris", "n": 12, "x": -1.5e+3, "ok": true, "no": false, "none": null}',
    '{ "city" :\t"a\\nb \\u00e9 \\"q\\" \\\\" ,\n "list": [1, [ ], {}, {"a": [true, null]}, "s"] , "e": 0.25E-2 }',
    ' \n\t{"n": [1, {"b": null}], "s": "x"}',
    '{"n": 01}', '["x", 1]', '"str"', 'null', ' x', '{"a": "b" "c"}', '{"n": 1.}', '{"n": 1.e5}', '{"n": tru}', '{"n": [1,]}', '{"a": 1,}',
    '{"s": "\\x"}', '{"a": -}', '{"a": [}', '{"a": 1 2}', '{"a":--1}', '{"a": 1.5.2}', '{"a": nulll}',
    '{"a": "\\u12g4"}', '{"a": {"b": [1, 2}]}', '{,}',
    '{"a":\x0b1, "b":\x0c"c"}', '{"a": "\\ud83d\\ude00", "b": 1e5}', '{"a":\r\n[ ] }',
]
JSON_ROUTES = ("Qwen-Qwen3-0.6B.jinja", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
               "Mistral-Small-3.2-24B-Instruct-2506.jinja", "deepseek-ai-DeepSeek-V3.1.jinja", "Reka-Edge.jinja",
               "Kimi-K2-Instruct.jinja")


def test_json_value_fast_path_matches_full_reparse_on_every_route():
    from bench.hostile import hostile_samples
    from core.jinja.template import ChatTemplate

    fast = 0
    for name in JSON_ROUTES:
        src = (TEMPLATES / name).read_text(encoding="utf-8")
        s = {x.kind: x for x in hostile_samples(ChatTemplate(src, name), name, 80)[0]}["calls"]
        one = '{"city": "paris"}'
        assert one in s.output, name
        for args in (JSON_ARGS if name in JSON_ROUTES[::3] + JSON_ROUTES[-1:] else JSON_ARGS[:3]):   # invalid ones too
            text = s.output.replace(one, args, 1)
            runs = []
            for incremental in (True, False):
                # the deltas of every feed, compared with a full re-parse per feed's (incremental=False)
                sp = StreamingParser(s.parser, incremental=incremental)
                deltas = [[repr(x) for x in sp.feed(ch)] for ch in text] + [[repr(x) for x in sp.finish()]]
                runs.append((deltas, sp.message.to_openai()))
                if incremental:
                    fast += sp.fast_steps
            assert runs[0] == runs[1], (name, args)
            if args in JSON_ARGS[:2]:   # valid on every route: the stream adds up to the one-shot parse
                assert runs[0][1] == s.parser.parse(text).to_openai(), (name, args)
    assert fast > 1000


# the other fast paths on repeated calls: a literal's fixed continuation (pending_chain), whitespace before a
# pending literal, a tagged string value held before a cut delimiter, an until inside an atomic (a call id);
# each variant diverges from the fixed text somewhere, where only a parse can tell what follows
VARIANTS = {
    "Qwen-Qwen3-0.6B.jinja": ('{"name": "get_weather", "arguments": ', [
        '{"name":"get_weather","arguments":', '{ "name" :\n "get_weather" ,  "arguments"  :  ',
        '{"nam": "get_weather", "arguments": ', '{"name": "get_weathe", "arguments": ',
        '{"name": "get_weather", "argument": ', '{"name" "get_weather", "arguments": ',
        '{"name": "get_weather",, "arguments": ']),
    "GLM-4.6.jinja": ("<arg_value>paris</arg_value>", [
        "<arg_value>pa<ris</arg_value>", "<arg_value>pa</arg_valu x</arg_value>", "<arg_value><</arg_value>",
        "<arg_value>p\\n\"</arg_value>", "<arg_value></arg_value>", "<arg_value>a</arg_value </arg_value>"]),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": ("c00000000[ARGS]", [
        "c0[AR000[ARGS]", "[A[ARG[ARGS]", "x[ARGS]", "[ARGS]", "c00[CALL_ID]1[ARGS]", "c0 0\n[ARGS]"]),
    # a pending literal of a special family's PEG (a cut call marker)
    "Kimi-K2-Instruct.jinja": ("<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>", [
        "<|tool_call_begin|>functions.get_weathe:0<|tool_call_argument_begin|>",
        "<|tool_call_begin|>functions.search_notes:0<|tool_call_argument_begin|>",
        "<|tool_call_beg<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>",
        "<|tool_call_begin|>functions.get_weather:<|tool_call_argument_begin|>",
        "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begi <|tool_call_argument_begin|>",
        "<|tool_call_begin|>functions.get_weather:0 <|tool_call_argument_begin|>",
        "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|><|tool_call_end|>"]),
}


def test_literal_chains_held_values_and_hidden_untils_match_full_reparse():
    from bench.hostile import hostile_samples
    from core.jinja.template import ChatTemplate

    for name, (one, variants) in VARIANTS.items():
        src = (TEMPLATES / name).read_text(encoding="utf-8")
        s = {x.kind: x for x in hostile_samples(ChatTemplate(src, name), name, 80)[0]}["calls"]
        assert one in s.output, name
        fast = 0
        for variant in [one] + variants:
            text = s.output.replace(one, variant, 1)
            runs = []
            for incremental in (True, False):
                sp = StreamingParser(s.parser, incremental=incremental)
                deltas = [[repr(x) for x in sp.feed(ch)] for ch in text] + [[repr(x) for x in sp.finish()]]
                runs.append((deltas, sp.message.to_openai()))
                if incremental and variant == one:
                    fast = sp.fast_steps
            assert runs[0] == runs[1], (name, variant)
        assert fast > 0.6 * len(s.output), name    # most characters take a fast path


def test_stream_setup_compiles_the_arena_before_the_first_feed():
    # llama.cpp builds its parser when the request is applied: the first feed of a stream costs a parse
    from core.chat.generator import GeneratedParser
    from core.peg.chat import build_chat_peg_parser

    arena = build_chat_peg_parser(lambda p: p.literal("<a>") + p.content(p.until("</a>")) + p.literal("</a>"))
    parser = GeneratedParser(arena=arena, generation_prompt="", parser_generation_prompt="")
    assert arena._compiled is None
    sp = StreamingParser(parser)
    assert arena._compiled is not None
    assert _check_stream(parser, list("<a>hi</a>")).message.content == "hi"


def test_stream_setup_parses_the_generation_prompt_and_skips_an_absent_header_cut():
    # the generation prompt starts every text of the stream: parsed and mapped when the stream is set up, the
    # first feed resumes from it; a parser without a turn header to cut decides the cut (none) at once
    from core.chat.stream import TurnHeaderCut

    req = {"messages": [{"role": "user", "content": "Hi"}], "tools": [RUN]}
    name = "openai-gpt-oss-120b.jinja"
    for fidelity in ("llama.cpp", "improved"):
        parser = build_chat_parser(TemplateDir(str(TEMPLATES)).get(name), ChatRequest.from_dict(req),
                                   fidelity=fidelity).parser
        session = PegStreamSession(parser)
        assert session.caches[None].text == parser.generation_prompt == "<|start|>assistant"
        assert session.mappers[None].m is not None and session.mappers[None].m.source == ""   # mapped, released
        assert TurnHeaderCut(parser).cut == (0 if not parser.turn_header else None), fidelity
        text = '<|channel|>commentary to=functions.run <|constrain|>json<|message|>{"command": "ls"}<|call|>'
        # the per-step check compares each step with the partial parse: progressive release (improved holds
        # a call until it is accepted, core.chat.stream.CallRelease)
        parser.release_calls_whole = False
        assert _check_stream(parser, list(text)).message == parser.parse(text)


def test_mapper_spine_snapshots_equal_a_fresh_mapping_at_every_step():
    # IncrementalMapper.map keeps the right spine of the tree with a snapshot before each child of each spine
    # node, goes down it while the nodes were re-created alike, restores the snapshot before the first change
    # and maps on from the live state when the tree only grew: after every feed, the spine (the very nodes),
    # each snapshot and the live state equal what mapping the same tree from scratch records
    parser = bundle("Qwen-Qwen3-0.6B.jinja", tools=[RUN], reasoning_format="deepseek").parser
    text = "<think>plan</think>" + "".join(
        '<tool_call>\n{"name": "run", "arguments": {"command": "ls %d", "n": %d}}\n</tool_call>\n' % (i, i)
        for i in range(3)) + "done"
    session = PegStreamSession(parser)
    checked = 0
    for i, ch in enumerate(text):
        session.parse_appended(ch)
        mapper = session.mappers[session.entries[0]]
        if mapper.m is None or not mapper.frames:
            continue
        fresh = IncrementalMapper()   # the tree the session mapped last (fast-path feeds map nothing)
        fresh.map(mapper.prev_nodes, parser.generation_prompt + text[:i + 1])
        assert len(mapper.frames) == len(fresh.frames), text[:i + 1]
        for f, g in zip(mapper.frames, fresh.frames):
            assert f[0] is g[0] and f[1] is g[1] and f[2] == g[2], text[:i + 1]
        assert mapper._snap() == fresh._snap(), text[:i + 1]
        checked += len(mapper.frames) > 2
    assert checked > len(text) // 2


# GPT-OSS (harmony): the root stops after its tool call, so text after it (the `<|call|>` a logged output keeps,
# anything else) is "the message + the rest as content" and streams on the content fast path; headers cut at
# every character, calls with and without <|constrain|>, the recipient in the role or after the channel,
# reasoning then a preamble then a call
GPT_OSS_CALL = '{"city": "paris"}'
GPT_OSS_OUTPUTS = [
    ' to=functions.get_weather<|channel|>commentary json<|message|>' + GPT_OSS_CALL + '<|call|>',
    ' to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>' + GPT_OSS_CALL + '<|call|>',
    '<|channel|>commentary to=functions.get_weather<|message|>' + GPT_OSS_CALL + '<|call|>tail <|end|>',
    '<|channel|>analysis<|message|>plan it<|end|><|start|>assistant<|channel|>commentary<|message|>On it.<|end|>'
    '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>' + GPT_OSS_CALL + '<|call|>',
    '<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>Done <|call|>',
    ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "pa',
    ' to=functions.get_weather<|channel|>commentary json<|message|>' + GPT_OSS_CALL + ' <|start|>assistant x',
    ' to=functions.get_weathe<|channel|>commentary<|message|>{}<|call|>',
    '<|channel|>final<|message|>Done now<|end|>x<|start|>assistant',
    '<|channel|>commentary<|message|>pre<|end|><|start|>assistant<|channel|>analysis to=functions.get_weather'
    '<|message|>' + GPT_OSS_CALL + '<|end|>',
]


def test_gpt_oss_text_after_the_call_streams_as_a_full_reparse_per_feed():
    from bench.hostile import hostile_samples
    from bench.outputs import _request
    from core.jinja.template import ChatTemplate

    name = "openai-gpt-oss-120b.jinja"
    src = (TEMPLATES / name).read_text(encoding="utf-8")
    s = {x.kind: x for x in hostile_samples(ChatTemplate(src, name), name, 80)[0]}["calls"]
    assert s.output == GPT_OSS_OUTPUTS[0]
    request = ChatRequest.from_dict(_request([{"role": "user", "content": "Plan my trip to Paris."}]))
    for fidelity in ("llama.cpp", "improved"):
        parser = build_chat_parser(TemplateDir(str(TEMPLATES)).get(name), request, fidelity=fidelity).parser
        # at improved, repair trailing-stop-token takes <|call|>: the text after the arguments is not all content
        assert parser.after_arguments == ("content" if fidelity == "llama.cpp" else None)
        for text in GPT_OSS_OUTPUTS:
            runs = []
            for incremental in (True, False):
                sp = StreamingParser(parser, incremental=incremental)
                deltas = [[repr(x) for x in sp.feed(ch)] for ch in text] + [[repr(x) for x in sp.finish()]]
                runs.append((deltas, sp.message.to_openai()))
                if incremental and text == s.output:
                    # every character of <|call|> after the arguments: a fast path
                    assert sp.fast_steps >= len(text) - text.index("}<|call|>") - 2, fidelity
            assert runs[0] == runs[1], (fidelity, text)
            if not text.endswith('"pa'):   # a cut call stays streamed (repair truncated-call), the one-shot drops it
                assert runs[0][1] == parser.parse(text).to_openai(), (fidelity, text)
        assert parser.parse(GPT_OSS_OUTPUTS[0]).content == ("<|call|>" if fidelity == "llama.cpp" else "")


# Kimi K2: the text after a call's JSON arguments (call end, the next call's begin and id, section end) streams
# without a parse while the message cannot change (HandlerParser.after_arguments); every way it can leave that
# shape must give what a full re-parse per feed gives
KIMI_ARGS = '{"command": "ls"}'
KIMI_AFTER = [
    "<|tool_call_end|><|tool_call_begin|>functions.run:1<|tool_call_argument_begin|>",
    "<|tool_call_begin|>functions.run:12<|tool_call_argument_begin|>",
    "<|tool_call_end|><|tool_calls_section_end|>",
    "<|tool_call_end|><|tool_calls_section_end|>after",
    "<|tool_call_end|>x",
    "<|tool_call_en<|tool_call_begin|>functions.run:1<|tool_call_argument_begin|>",
    "<|tool_call_end|> <|tool_call_begin|>functions.run:1<|tool_call_argument_begin|>",
    "<|tool_call_end|><|tool_call_begin|>functions.ru:1<|tool_call_argument_begin|>",
    "<|tool_call_end|><|tool_call_begin|>functions.run_it:1<|tool_call_argument_begin|>",
    "<|tool_call_end|><|tool_call_begin|>functions.run:<|tool_call_argument_begin|>",
    "<|tool_call_end|><|tool_call_begin|>functions.run:1x<|tool_call_argument_begin|>",
    "<|tool_call_end|><|tool_call_begin|>functions.run1<|tool_call_argument_begin|>",
    "<|tool_call_end|><|tool_call_begin|>functions.run:1<|tool_call_argument_begi<|tool_call_end|>",
    "<|tool_call_end|><|tool_call_begin|>functions.run:1<|tool_call_argument_begin|>oops",
    "}<|tool_call_end|>",
    " <|tool_call_end|>",
]


def test_kimi_text_after_the_arguments_streams_as_a_full_reparse_per_feed():
    fast = {}
    for parallel in (True, False):
        parser = bundle("Kimi-K2-Instruct.jinja", tools=[RUN], parallel_tool_calls=parallel).parser
        for after in KIMI_AFTER:
            text = ("Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.run:0<|tool_call_argument_begin|>"
                    + KIMI_ARGS + after + (KIMI_ARGS + "<|tool_call_end|>" if after.endswith("begin|>") else ""))
            runs = []
            for incremental in (True, False):
                sp = StreamingParser(parser, incremental=incremental)
                deltas = [[repr(x) for x in sp.feed(ch)] for ch in text] + [[repr(x) for x in sp.finish()]]
                runs.append((deltas, sp.message.to_openai()))
                if incremental:
                    fast[parallel, after] = sp.fast_steps
            assert runs[0] == runs[1], (parallel, after)
            if not after.endswith("oops"):   # (a call opened, then no arguments: streamed, dropped at the end)
                assert runs[0][1] == parser.parse(text).to_openai(), (parallel, after)
    # the marker run between two calls is followed, not parsed: one parse after the first call's arguments
    # (at the second call's argument marker)
    assert fast[True, KIMI_AFTER[0]] >= 2 * len(KIMI_ARGS) + len(KIMI_AFTER[0]) - 4


def test_mapper_on_trees_in_any_order_equals_map_parse():
    # the spine walk must hold on any sequence of trees, not only a growing text: seeded random prefixes of
    # several formats' outputs (growing, shrinking, jumping back), each tree from a cached stream parse so that
    # nodes are shared between trees as in a stream; every message equals a fresh map_parse of that tree
    import random

    from core.chat.mapper import map_parse
    from core.peg import ParseCache

    rng = random.Random(16)
    for name, frags in sorted(FRAGMENTS.items()):
        parser = _parser(name)
        text = parser.generation_prompt + "".join(frags) + "".join(frags[:6])
        cache = ParseCache()
        mapper = IncrementalMapper()
        trees = {}
        for k in sorted(rng.sample(range(1, len(text) + 1), min(len(text), 40))):
            trees[k] = parser.arena.parse(text[:k], lenient=True, cache=cache)
        order = list(trees) + rng.sample(list(trees), len(trees)) + sorted(trees, reverse=True)[:10]
        for k in order:
            r = trees[k]
            assert mapper.map(r.nodes, text[:k]) == map_parse(r), (name, k)


def test_unchanged_tree_gives_the_last_message_only_while_nobody_changed_it():
    # a parse whose tree maps to nothing new returns the message made last time (the deltas are then []), but
    # not once its receiver folded fast-path text into it or gave it back
    parser = _parser("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")
    gp = parser.generation_prompt
    text = gp + 'Hi <tool_call>\n{"name": "run", "arguments": {"command": "ls"}}\n</tool_call>'
    r = parser.arena.parse(text, lenient=True)
    mapper = IncrementalMapper()
    first = mapper.map(r.nodes, text)
    assert mapper.map(r.nodes, text) is first
    mapper.touched(first)
    second = mapper.map(r.nodes, text)
    assert second is not first and second == first
    mapper.recycle(second)
    third = mapper.map(r.nodes, text)
    assert third is not second and third == first
    sp = StreamingParser(parser)
    for ch in text[len(gp):]:
        sp.feed(ch)
    assert sp.message == parser.parse(text[len(gp):], True)


def test_mapper_goes_down_only_where_everything_before_is_shared():
    # hand-made trees: the last child keeps its rule, tag and start while an earlier sibling changed (a
    # re-created content node with another end, or another node altogether): the state before the last child
    # is not the logged one, so the mapping restarts at the first change
    from core.chat.mapper import map_nodes
    from core.peg.engine import AstNode

    src = "abcdef<x>ghij"

    def tree(content_end: int, name_end: int, shared: AstNode | None = None) -> tuple:
        content = shared or AstNode("", "content", 0, content_end, (), False)
        call = AstNode("call", "", 6, 13, (AstNode("", "tool-open", 6, 9, (), False),
                                           AstNode("", "tool-name", 9, name_end, (), name_end == 13)), True)
        return (AstNode("root", "", 0, 13, (content, call), True),)

    mapper = IncrementalMapper()
    for nodes in (tree(6, 12), tree(4, 12), tree(5, 13), tree(6, 13)):
        assert mapper.map(nodes, src) == map_nodes(nodes, src)
    first = tree(6, 12)
    mapper = IncrementalMapper()
    mapper.map(first, src)
    grown = tree(6, 13, shared=first[0].children[0])   # the content node shared: only the call is mapped again
    assert mapper.map(grown, src) == map_nodes(grown, src)
    assert mapper.frames[1][0] is grown[0]


def test_repeated_calls_streamed_per_character_match_full_reparse_with_node_runs():
    # the engine hands a resumed repetition's calls to the mapper as a NodeRun (no copy per parse): on every
    # PEG route of the streaming benchmark, 1-character feeds over ten calls in a row give at every step the
    # message of a full re-parse, and the mapper did read NodeRun children
    from pathlib import Path

    from bench.hostile import ROUTES, hostile_samples
    from core.peg.engine import NodeRun
    from core.jinja.template import ChatTemplate

    seen = 0
    for route, name in ROUTES:
        if name not in ("Qwen-Qwen3-0.6B.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja",
                        "deepseek-ai-DeepSeek-V3.1.jinja", "GLM-4.6.jinja"):
            continue
        t = ChatTemplate(Path(TEMPLATES, name).read_text(), name)
        sample = hostile_samples(t, route, 400, kinds=("calls",))[0][0]
        sp = _check_stream(sample.parser, list(sample.output), is_partial=True)
        session = sp._session
        mapper = session.mappers.get(session.entries[0]) if session is not None else None
        if mapper is not None and any(isinstance(f[1], NodeRun) for f in mapper.frames):
            seen += 1
    assert seen == 4


def test_seeded_chunkings_of_repeated_calls_match_full_reparse_on_every_peg_route():
    # the spine mapper's paths (a call appended, a marker with no action, the arguments re-mapped after the
    # fast path, the last message given again) on the P6 routes, in seeded random chunk sizes, with content cut
    # into the middle of the calls (it may cut a call: a streamed call is then kept, core.chat.repairs
    # truncated-call): every feed's deltas and the message equal those of a full re-parse per feed
    import random

    from bench.hostile import ROUTES, hostile_samples
    from core.jinja.template import ChatTemplate

    rng = random.Random(1614)
    checked = 0
    for _, name in ROUTES:
        src = (TEMPLATES / name).read_text(encoding="utf-8")
        samples = {x.kind: x for x in hostile_samples(ChatTemplate(src, name), name, 200)[0]}
        if "calls" not in samples or not PegStreamSession.supports(samples["calls"].parser):
            continue
        s = samples["calls"]
        text = s.output[:len(s.output) // 2] + "Done <" + s.output[len(s.output) // 2:]   # content between calls
        cuts = sorted(rng.sample(range(1, len(text)), len(text) // 3))
        pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        runs = []
        for incremental in (True, False):
            sp = StreamingParser(s.parser, incremental=incremental)
            deltas = [[repr(x) for x in sp.feed(p)] for p in pieces] + [[repr(x) for x in sp.finish()]]
            runs.append((deltas, sp.message.to_openai()))
        assert runs[0] == runs[1], name
        checked += 1
    assert checked >= 6


def test_text_after_the_json_arguments_streams_as_a_full_reparse_per_feed():
    # GrammarAfter (core.chat.grammar_after): the call's closing literals, whitespace and the next call's opening
    # literals stream without a parse; every variant — a near-miss closing tag, text between the calls, a
    # second call with another name, whitespace runs, content after the last call, the output cut right after
    # a call's close — gives at every feed the deltas of a full re-parse, at both fidelities
    import random

    from bench.hostile import _request
    from core.chat.grammar_after import GrammarAfter, grammar_after

    rng = random.Random(1616)
    one = '{"city": "paris"}'
    routes = ("Qwen-Qwen3-0.6B.jinja", "Reka-Edge.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja")
    request = ChatRequest.from_dict(_request([{"role": "user", "content": "Plan my trip to Paris."}]))
    for name in routes:
        template = TemplateDir(str(TEMPLATES)).get(name)
        from bench.hostile import hostile_samples

        text = hostile_samples(template, name, 80, kinds=("calls",))[0][0].output
        a = text.index(one) + len(one)
        b = text.index("get_weather", a)
        seg = text[a:b]
        k = rng.randrange(1, len(seg) - 1)
        variants = [
            text,
            text[:a] + seg[:k] + ("x" if seg[k] != "x" else "y") + seg[k + 1:] + text[b:],      # near miss
            text[:a] + seg[:k] + "Done <" + seg[k:] + text[b:],                                  # text between
            text[:b] + "search_notes" + text[b + len("get_weather"):].replace(one, '{"query": "x"}', 1),
            text[:a] + seg.replace("\n", " \n\t\n") + text[b:],                                  # whitespace runs
            text + "\nThanks.",                                                                  # content after
            text[:a + max(1, k // 2)],                                                           # cut after close
        ] + [text[:a + j] + "x" + text[a + j:] for j in range(rng.randrange(3), len(seg) + 1, 3)]  # near misses
        for fidelity in ("llama.cpp", "improved"):
            parser = build_chat_parser(template, request, fidelity=fidelity).parser
            for variant in variants:
                runs = []
                for incremental in (True, False):
                    sp = StreamingParser(parser, incremental=incremental)
                    deltas, parsed = [], []
                    for i, ch in enumerate(variant):
                        fast = sp.fast_steps
                        deltas.append([repr(x) for x in sp.feed(ch)])
                        if sp.fast_steps == fast:
                            parsed.append(i)
                    deltas.append([repr(x) for x in sp.finish()])
                    runs.append((deltas, sp.message.to_openai()))
                    if incremental and variant is text:
                        # from the arguments' close to the next name's last character, at most four parses
                        # (13 on Qwen3 without GrammarAfter): after the call closed and after its wrapper
                        # closed (GrammarAfter splits where a node open before it closes for good, so that no
                        # parse both closes a call and opens the next), one for the pending literal between,
                        # and where the name completes (the message gains the call)
                        seen = [i for i in parsed if a <= i < b + len("get_weather") + 1]
                        assert (len(seen) <= 4 and seen[-1] == b + len("get_weather")) \
                            or name.startswith("Mistral"), (name, fidelity, parsed)
                assert runs[0] == runs[1], (name, fidelity, variant)
        assert isinstance(grammar_after(parser.arena), GrammarAfter), name


def test_grammar_after_answers_on_qwen3():
    # what GrammarAfter proves on Qwen3's grammar (llama.cpp fidelity). After the arguments: whitespace and the
    # call's close keep the message; text after the close (the call's node closes for good: a parse does
    # that), a near miss or a second close do not. After the call's node: the wrapper's close up to the end
    # of the text, or a second call in the same wrapper; not text after the wrapper's close. After the
    # wrapper: the next call's opening up to its name, which completes in a parse; not content.
    from bench.hostile import _request
    from core.chat.grammar_after import grammar_after

    request = ChatRequest.from_dict(_request([{"role": "user", "content": "x"}]))
    parser = build_chat_parser(TemplateDir(str(TEMPLATES)).get("Qwen-Qwen3-0.6B.jinja"), request).parser
    spine = (("tool-calls", ""), ("tool-call", ""), ("tool-0", ""), ("", "tool"))
    after = grammar_after(parser.arena).select(spine)
    assert [after(t) for t in ("}", " \n}", " ", "}\n", "}x", "}}", ", ")] == [
        True, True, True, False, False, False, False]
    call = grammar_after(parser.arena, "tool-0").select(spine[:2])
    assert [call(t) for t in ("\n</tool_", "\n</tool_call>", "\n</tool_call>\n", "x", "\n, ", "\n</tool_cal>")] == [
        True, True, False, False, True, False]
    wrapper = grammar_after(parser.arena, "tool-call").select(spine[:1])
    assert [wrapper(t) for t in ("", "\n<tool_call>\n", '\n<tool_call>\n{"name": "get_wea', '<tool_call>\n{"name": ',
                                 '\n<tool_call>\n{"name": "get_weather"', "\nDone", "<tool_call>x")] == [
        True, True, True, True, False, False, False]
    assert grammar_after(parser.arena).select((("other", ""),)) is None


def test_text_after_a_closed_call_leaves_the_pending_literal_without_a_parse():
    # Qwen3: after `}\n` the parse waits for the `,` of another call in the same wrapper (a pending literal); the
    # `<` of `</tool_call>` is not that, and the region "after" takes it (PegStreamSession: a pending region
    # whose parse reached a finished rule node falls back to it): 4 parses per call, not 5, and every feed
    # gives what a full re-parse gives
    from pathlib import Path

    from bench.hostile import hostile_samples
    from core.jinja.template import ChatTemplate

    name = "Qwen-Qwen3-0.6B.jinja"
    s = hostile_samples(ChatTemplate(Path(TEMPLATES, name).read_text(), name), name, 400, kinds=("calls",))[0][0]
    out = s.output
    _check_stream(s.parser, list(out), is_partial=True)
    sp = StreamingParser(s.parser)
    parsed = []
    for ch in out:
        before = sp.fast_steps
        sp.feed(ch)
        parsed.append(sp.fast_steps == before)
    starts = [i for i in range(len(out)) if out.startswith("<tool_call>", i)]
    assert len(starts) >= 4
    for a, b in zip(starts[1:], starts[2:]):    # one whole call, the next one's opening included
        assert sum(parsed[a:b]) == 4, (a, b, out[a:b])
    i = out.index("}}\n</tool_call>") + 3
    assert out[i] == "<" and not parsed[i]      # the `<` of `</tool_call>` after `}}\n`: no parse


def test_fast_built_messages_and_results_equal_their_dataclasses():
    # the stream builds its messages, calls and deltas, and the engine its parse results, field by field (no
    # __init__ call per parsing feed): each equals the object its class makes, with the very same fields, so a
    # field added to one of those classes fails here rather than going missing on the streaming path
    from dataclasses import fields

    from core.chat.message import MessageDelta, ToolCall, ToolCallDelta
    from core.chat.stream import _call, _call_delta, _message
    from core.peg.engine import ParseResult

    call = _call("run", '{"a":1}', "c1")
    assert call == ToolCall("run", '{"a":1}', "c1") and vars(call) == vars(ToolCall("run", '{"a":1}', "c1"))
    msg = _message("hi", "think", [call], "assistant")
    ref = AssistantMessage("hi", "think", [ToolCall("run", '{"a":1}', "c1")], "assistant")
    assert msg == ref and vars(msg) == vars(ref)
    delta = _call_delta(2, "c1", "run", "{")
    ref_delta = MessageDelta(tool_call=ToolCallDelta(2, "c1", "run", "{"))
    assert delta == ref_delta and vars(delta) == vars(ref_delta) and vars(delta.tool_call) == vars(ref_delta.tool_call)
    parser = bundle("Qwen-Qwen3-0.6B.jinja", tools=[RUN]).parser
    r = parser.arena.parse(parser.generation_prompt + '<tool_call>\n{"name": "run", "argu', lenient=True)
    assert r.need_more_input and set(vars(r)) == {f.name for f in fields(ParseResult)}


def test_tagged_arguments_spine_equals_a_fresh_mapping_at_every_step():
    # the mapper goes down into a tool-args node of tagged arguments (its action reads nothing of a text that
    # does not start with "{"), as into a grouping node: after every feed of a stream of tagged calls (Ling 3,
    # Muse Glimmer: bench.hostile's many-calls output), the spine and its snapshots equal a fresh mapping's
    from pathlib import Path

    from bench.hostile import FAMILY_ROUTES, hostile_samples
    from core.jinja.template import ChatTemplate

    for route, name in FAMILY_ROUTES:
        if name not in ("inclusionai-ling-3.0-flash.jinja", "muse-glimmer.jinja"):
            continue
        sample = hostile_samples(ChatTemplate(Path(TEMPLATES, name).read_text(), name), route, 200,
                                 kinds=("calls",))[0][0]
        session = PegStreamSession(sample.parser)
        gp = sample.parser.generation_prompt
        went_down = 0
        for i, ch in enumerate(sample.output):
            session.parse_appended(ch)
            mapper = session.mappers[session.entries[0]]
            if mapper.m is None or not mapper.frames:
                continue
            fresh = IncrementalMapper()
            fresh.map(mapper.prev_nodes, gp + sample.output[:i + 1])
            assert len(mapper.frames) == len(fresh.frames), (name, i)
            for f, g in zip(mapper.frames, fresh.frames):
                assert f[0] is g[0] and f[1] is g[1] and f[2] == g[2], (name, i)
            assert mapper._snap() == fresh._snap(), (name, i)
            went_down += any(f[0] is not None and f[0].tag == "tool-args" for f in mapper.frames)
        assert went_down > 10, name


def test_region_of_a_parse_is_found_on_the_next_feed():
    # a parsing feed leaves its open region to the next feed (PegStreamSession.resolve_region): right after
    # each parse the stream holds a "lazy" region or none, the feeds after a parse are still taken by the fast
    # path (the content and the arguments' string here), and the streamed message is the one-shot parse's
    parser = bundle("Qwen-Qwen3-0.6B.jinja", tools=[RUN]).parser
    text = 'Hello there <tool_call>\n{"name": "run", "arguments": {"command": "ls -la"}}\n</tool_call>'
    sp = StreamingParser(parser)
    acc = AssistantMessage()
    parsed_then_fast = 0
    last_parsed = False
    for ch in text:
        steps = sp.fast_steps
        acc = apply_deltas(acc, sp.feed(ch))
        parsed = sp.fast_steps == steps
        if parsed:
            assert sp._region is None or sp._region.field == "lazy", ch
        parsed_then_fast += last_parsed and not parsed
        last_parsed = parsed
    acc = apply_deltas(acc, sp.finish())
    assert acc == parser.parse(text)
    assert parsed_then_fast >= 4


def test_a_node_made_again_that_maps_the_same_is_not_mapped_again(monkeypatch):
    # a re-created node whose action reads no text (a call's opening, which takes the whitespace after the name),
    # or one that ends where it did (a complete argument name or value), over the very same children maps as it
    # did: the parse after a call's name does not map the opening again. bench.hostile's many-calls output of
    # each special family: the opening's action runs once per call (Ling 3 and Muse Glimmer ran it three times
    # per call before), and the stream still gives the one-shot parse
    from pathlib import Path

    from bench.hostile import FAMILY_ROUTES, hostile_samples
    from core.chat import mapper as mapper_module
    from core.jinja.template import ChatTemplate

    opened = [0]
    action = mapper_module.ACTIONS["tool-open"]

    def counted(m, node):
        opened[0] += 1
        action(m, node)

    for route, name in FAMILY_ROUTES:
        sample = hostile_samples(ChatTemplate(Path(TEMPLATES, name).read_text(), name), route, 400,
                                 kinds=("calls",))[0][0]
        sp = StreamingParser(sample.parser)
        opened[0] = 0
        monkeypatch.setitem(mapper_module.ACTIONS, "tool-open", counted)
        acc = AssistantMessage()
        for ch in sample.output:
            acc = apply_deltas(acc, sp.feed(ch))
        monkeypatch.setitem(mapper_module.ACTIONS, "tool-open", action)
        acc = apply_deltas(acc, sp.finish())
        assert acc == sample.parser.parse(sample.output), name
        assert len(acc.tool_calls) == 10 and opened[0] == 10, (name, opened[0])


def test_arguments_grown_in_place_give_the_deltas_of_a_built_message():
    # a parse whose message differs from the stream's only in that its last call's arguments grew (a value or key
    # closing or opening) or a call was added (a name completing) makes the stream's message so in place and hands
    # the one delta over (IncrementalMapper.grow_current): no message built, no diff of two messages. On the many-calls output
    # of every P6 route, one character per feed and in seeded chunks: the same deltas feed by feed as with the
    # growth switched off (a message built and diffed), the message kept, the stream equal to the one-shot parse
    import random
    from pathlib import Path

    from bench.hostile import FAMILY_ROUTES, ROUTES, hostile_samples
    from core.jinja.template import ChatTemplate

    rng = random.Random(2712)
    grown_routes = []
    for route, name in ROUTES + FAMILY_ROUTES:
        if not (TEMPLATES / name).is_file():
            continue
        samples = hostile_samples(ChatTemplate(Path(TEMPLATES, name).read_text(), name), route, 300,
                                  kinds=("calls",))[0]
        if not samples or not PegStreamSession.supports(samples[0].parser):
            continue
        s = samples[0]
        cuts = sorted(rng.sample(range(1, len(s.output)), len(s.output) // 3))
        for pieces in (list(s.output), [s.output[a:b] for a, b in zip([0] + cuts, cuts + [len(s.output)])]):
            runs = []
            for grow in (True, False):
                sp = StreamingParser(s.parser)
                sp._session.mappers[None].grow_current = grow
                deltas = [[repr(x) for x in sp.feed(p)] for p in pieces]
                deltas.append([repr(x) for x in sp.finish()])
                runs.append((deltas, sp.message.to_openai()))
                assert "grown" not in sp._emitted.__dict__, name      # every growth was taken as a delta
            assert runs[0] == runs[1], name
            assert runs[0][1] == s.parser.parse(s.output).to_openai(), name
        # the path is taken: a parse that grew the arguments or added a call kept the stream's message object
        sp = StreamingParser(s.parser)
        grew = added = 0
        for ch in s.output:
            before, steps = sp._emitted, sp.fast_steps
            got = sp.feed(ch)
            if sp.fast_steps == steps and sp._emitted is before and len(got) == 1 and got[0].tool_call is not None:
                added += bool(got[0].tool_call.name)
                grew += not got[0].tool_call.name and bool(got[0].tool_call.arguments)
        assert added == len(s.parser.parse(s.output).tool_calls) > 0, name   # every call, the first one too
        if grew:
            grown_routes.append(name.split("-")[0])
    # arguments grown by a parse: the routes whose arguments the mapper writes from markup (JSON arguments grow on
    # the fast path)
    assert grown_routes == ["GLM", "google", "MiniMax", "Kimi", "muse", "inclusionai"]
