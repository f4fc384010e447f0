"""Fast paths of the stream inside value-hooked arguments (Gemma 4, MiniMax-M3), after a rejected call, over
tagged arguments' markup and inside raw or JSON argument values (Kimi-K3, Muse Glimmer, Ling 3): the number of
feeds that parse does not grow with the output, and the stream still gives the one-shot parse.

The outputs are :mod:`bench.hostile`'s (an assistant turn rendered through the real template, adversarial payload).
"""

from __future__ import annotations

import pytest

from bench.hostile import hostile_samples, stream_equals_parse
from core.chat.repairs import TRUNCATED_CALL, WHY_REJECTED
from core.chat.stream import StreamingParser
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES

GEMMA4 = "google-gemma-4-31B-it.jinja"
MINIMAX = "MiniMax-M3.jinja"


def _stream(name: str, kind: str, n: int) -> tuple[list[int], StreamingParser, object]:
    """Stream the hostile sample one character per feed: (indexes of the feeds that parsed, the finished stream,
    the sample)."""
    t = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
    samples, notes = hostile_samples(t, name, n, kinds=(kind,))
    assert samples, notes
    s = samples[0]
    sp = StreamingParser(s.parser)
    parsed = []
    for i, ch in enumerate(s.output):
        before = sp.fast_steps
        sp.feed(ch)
        if sp.fast_steps == before:
            parsed.append(i)
    sp.finish()
    return parsed, sp, s


@pytest.mark.parametrize("name", [GEMMA4, MINIMAX])
def test_hooked_string_value_streams_without_parsing(name):
    # a string argument dense with JSON escapes: its characters append to the arguments (escaped) on the fast path
    short, sp_short, s_short = _stream(name, "escapes", 300)
    long, sp_long, s_long = _stream(name, "escapes", 1200)
    assert len(s_long.output) - len(s_short.output) == 900
    assert len(long) == len(short) < 100     # the markers parse; the 900 more characters of the value do not
    for sp, s in ((sp_short, s_short), (sp_long, s_long)):
        assert not sp.final_mismatch and stream_equals_parse(sp, s.parser, s.output)
        args = s.parser.parse(s.output).tool_calls[0].arguments
        assert args.startswith('{"query":"a\\n\\"\\\\a\\n') and sp.message.tool_calls[0].arguments == args


def test_gemma4_bracket_flood_in_a_string_streams_without_parsing():
    short, sp, s = _stream(GEMMA4, "brackets", 300)
    long, sp_long, s_long = _stream(GEMMA4, "brackets", 1200)
    assert len(long) == len(short)   # only the 64-deep array (and the markers) parse, not the "[" of the string
    assert stream_equals_parse(sp_long, s_long.parser, s_long.output)
    args = sp_long.message.tool_calls[0].arguments   # (the template writes the keys sorted)
    assert args.startswith('{"limit":' + "[" * 64 + '"x"' + "]" * 64) and args.endswith('"query":"' + "[" * 1200 + '"}')


def test_minimax_rejected_call_settles_to_the_one_shot_parse():
    # `limit` is declared integer; the hostile output writes a nested array there (<item> elements): the typed
    # parse rejects the call. The stream had shown its start; the final parse reports it (truncated-call,
    # rejected), and what a client keeps (repairs.settled) is the one-shot parse: the whole output as content.
    parsed, sp, s = _stream(MINIMAX, "brackets", 300)
    one = s.parser.parse(s.output)
    assert one.tool_calls == [] and one.content == s.output
    assert [(r.name, r.why) for r in sp.final.repairs] == [(TRUNCATED_CALL, WHY_REJECTED)]
    assert sp.message.tool_calls[0].arguments == '{"query":"' + "[" * 300 + '","limit":'
    assert stream_equals_parse(sp, s.parser, s.output)
    # once the call is rejected the view is fixed: the ~2,600 characters of <item> elements after it do not parse
    limit = s.output.index("<limit>")
    assert len(s.output) - limit > 2500
    assert sum(1 for i in parsed if i > limit) <= 8


# parsing feeds per call, measured: 12.7 / 16 / 12.6 (before this fast path: 57 / 40 / 43)
@pytest.mark.parametrize("name, at_most", [("Kimi-K3.jinja", 13), ("muse-glimmer.jinja", 16),
                                           ("inclusionai-ling-3.0-flash.jinja", 13)])
def test_tagged_argument_markup_streams_without_parsing(name, at_most):
    # the markup of a tagged argument inside tool-args that is not JSON (`<|open|>argument key="city"` …) is
    # textless for the mapper: a pending literal or a hidden until there no longer parses every character
    parsed, sp, s = _stream(name, "calls", 1200)
    calls = len(s.parser.parse(s.output).tool_calls)
    assert calls >= 20 and stream_equals_parse(sp, s.parser, s.output) and not sp.final_mismatch
    assert len(parsed) <= at_most * calls     # was one parse per character of each argument's markup


@pytest.mark.parametrize("name", ["Kimi-K3.jinja", "muse-glimmer.jinja"])
def test_nested_array_value_streams_without_parsing(name):
    # `limit`: 64 nested arrays, a raw value (Kimi-K3: until the close tag) or a JSON value read by the native
    # scanner (Muse Glimmer): its characters append to the arguments as they are
    parsed, sp, s = _stream(name, "brackets", 300)
    assert stream_equals_parse(sp, s.parser, s.output) and not sp.final_mismatch
    at = s.output.index('[[["x"]]]') - 64
    assert sum(1 for i in parsed if at <= i < at + 64 * 2 + 3) <= 3   # (was every one of the 131)
    assert '"limit":' + "[" * 64 + '"x"' + "]" * 64 in sp.message.tool_calls[0].arguments


@pytest.mark.parametrize("name", ["muse-glimmer.jinja", "inclusionai-ling-3.0-flash.jinja"])
def test_consecutive_messages_keep_sharing_earlier_calls(name, monkeypatch):
    # the incremental mapper restores a snapshot before the live call about twice per call on these formats; the
    # calls before that cut stay shared, so the delta check does not compare (nor _result copy) every call
    import core.chat.stream as S

    unshared = []
    real = S.stream_deltas_between

    def spy(prev, new):
        ps, ns = getattr(prev, "shared_calls", None), getattr(new, "shared_calls", None)
        if ps is not None and ns is not None and len(prev.tool_calls) > 3:
            if S._shared_count(ps, ns[0], ns[1]) < len(prev.tool_calls) - 3:
                unshared.append(len(prev.tool_calls))
        return real(prev, new)

    monkeypatch.setattr(S, "stream_deltas_between", spy)
    parsed, sp, s = _stream(name, "calls", 1200)
    assert len(s.parser.parse(s.output).tool_calls) == 30 and stream_equals_parse(sp, s.parser, s.output)
    assert unshared == []     # (a new token per restore: about 2 per call, 50 here)
