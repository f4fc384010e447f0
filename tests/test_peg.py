"""PEG library: combinator semantics, partial (lenient) parsing, JSON scanners, incremental cache.

Expectations P1-P17, C6-C7 and D1 are llama.cpp's own tests as transcribed in parser-notes §6.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from core.peg import Builder, ParseCache, ResultType, build_peg_parser
from core.peg import nodes as N
from core.peg.builder import PegError
from core.peg.chat import ChatBuilder, build_chat_peg_parser

S, F, NMI = ResultType.SUCCESS, ResultType.FAIL, ResultType.NEED_MORE_INPUT


def run(fn, text, lenient=True):
    r = build_peg_parser(fn).parse(text, lenient=lenient)
    return r.type, r.end


@pytest.mark.parametrize("text, lenient, expect", [
    ("hello world", False, (S, 11)),
    ("hello", False, (S, 5)),
    ("hello ", True, (NMI, 6)),
])
def test_p1_optional_suffix(text, lenient, expect):
    assert run(lambda p: p.literal("hello") + p.optional(" world"), text, lenient) == expect


@pytest.mark.parametrize("fn, text, lenient, expect", [
    (lambda p: p.literal("<think>") + "</think>", "<thi", True, NMI),
    (lambda p: p.literal("<think>") + "</think>", "<think></", True, NMI),
    (lambda p: p.literal("<think>") + "</think>", "<think>I am common_chat_combinator_parser", True, F),
    (lambda p: p.literal("begin") + "end", "begin", True, NMI),
    (lambda p: p.literal("option1") | "option2", "opt", True, NMI),
    (lambda p: p.literal("choice_a") | "choice_b", "choice", True, NMI),
    (lambda p: p.literal("good") | "better", "best", False, F),
    (lambda p: p.zero_or_more("ab"), "a", True, NMI),
    (lambda p: p.zero_or_more("xy"), "xyx", True, NMI),
    (lambda p: p.one_or_more("repeat"), "rep", True, NMI),
    (lambda p: p.one_or_more("ab"), "aba", True, NMI),
    (lambda p: p.one_or_more("()"), "success", False, F),
    (lambda p: p.literal("ab") + p.end(), "ab", True, S),
    (lambda p: p.literal("ab") + p.end(), "abc", True, F),
    (lambda p: p.literal("a") + p.space() + p.end(), "a \n\t\v\f\r", True, S),
    (lambda p: p.peek(p.literal("abc")) + "a", "ab", True, NMI),
    (lambda p: p.negate(p.literal("abc")) + p.any(), "x", True, S),
    (lambda p: p.negate(p.literal("abc")) + p.any(), "abc", True, F),
    (lambda p: p.negate(p.literal("abc")) + p.any(), "ab", True, NMI),
    (lambda p: p.any(), "", True, NMI),
    (lambda p: p.any(), "", False, F),
    (lambda p: p.start() + "a", "a", False, S),
    (lambda p: p.repeat("ab", 2, 3) + p.end(), "ababab", False, S),
    (lambda p: p.repeat("ab", 2, 3) + p.end(), "abababab", False, F),
    (lambda p: p.repeat("ab", 2) + p.end(), "ab", True, NMI),
])
def test_combinator_results(fn, text, lenient, expect):
    assert run(fn, text, lenient)[0] == expect


def test_p12_recursive_rules():
    def grammar(p):
        p.rule("number", p.chars("0-9"))
        p.rule("list", "[" + p.ref("value") + "]")
        return p.rule("value", p.ref("number") | p.ref("list"))
    assert run(grammar, "[[[3]]]", False) == (S, 7)
    assert run(grammar, "[[", True)[0] == NMI
    assert run(grammar, "[a]", False)[0] == F


def test_unknown_rule_reference_is_an_error():
    b = Builder()
    with pytest.raises(PegError, match="rule not found: 'nope'"):
        b.build(b.ref("nope") + "x")


@pytest.mark.parametrize("pattern, text, expect", [
    ("[a\\-z]", "-", (S, 1)), ("[a\\-z]", "z", (S, 1)), ("[a\\-z]", "b", (F, 0)),
    ("[^0-9]", "x1", (S, 1)), ("0-9", "123a", (S, 3)), ("[\\u4E00-\\u9FFF]", "中文x", (S, 2)),
    ("[\\x41-\\x43]", "ABCD", (S, 3)),
])
def test_p13_char_classes(pattern, text, expect):
    assert run(lambda p: p.chars(pattern), text, False) == expect


def test_chars_bounds_and_partial():
    assert run(lambda p: p.chars("[0-9]", 2, 3), "12345", False) == (S, 3)
    assert run(lambda p: p.chars("[0-9]", 2, 3), "1", True) == (NMI, 1)
    assert run(lambda p: p.chars("[0-9]", 2, 3), "1x", True)[0] == F


@pytest.mark.parametrize("text, lenient, expect", [
    ('{"name": "test", "value": 42, "flag": true}', False, S),
    ('[1, "hello", true, null, 3.14]', False, S),
    ('{"name": "test", "value": ', True, NMI),
    ("[1, 2, 3, ", True, NMI),
    ('{"data": {"nested": ', True, NMI),
    ('{"a": 1,}', True, F),
    ("01", False, F),
    ("-", True, NMI),
    ("1.", True, NMI),
    ("1.x", True, F),
    ("12", True, NMI),
    ("12", False, S),
    ("tr", True, NMI),
    ("nul", True, NMI),
    ('"ab\\', True, NMI),
    ('"ab\\u00', True, NMI),
    ('"ab\\q"', True, F),
    ('{"a": NaN}', False, F),
])
def test_p14_json(text, lenient, expect):
    typ, end = run(lambda p: p.json(), text, lenient)
    assert typ == expect
    if expect == S and text[0] in "[{":
        assert end == len(text)


def test_string_content_partial_escape_is_left_out():
    r = build_peg_parser(lambda p: p.tag("s", p.string_content('"'))).parse('abc\\u00')
    assert r.type == NMI and r.tags() == {"s": "abc"}


def test_p16_until_and_partial_marker_withheld():
    assert run(lambda p: p.until("</tag>"), "你好</tag>", False) == (S, 2)
    arena = build_peg_parser(lambda p: p.tag("c", p.until("<tool_call>")) + p.optional("<tool_call>") + p.end())
    # D1: a marker cut at the end of input is not content; a mismatch makes it content again
    r = arena.parse("Hello <tool_ca")
    assert r.type == NMI and r.tags() == {"c": "Hello "}
    r = arena.parse("Hello <tool_cab")
    assert r.tags() == {"c": "Hello <tool_cab"}
    r = arena.parse("Hello <tool_call>")
    assert r.type == S and r.tags() == {"c": "Hello "}


def test_until_one_of_earliest_delimiter_and_partial_prefix():
    arena = build_peg_parser(lambda p: p.tag("c", p.until_one_of(["abcd", "c"])))
    assert arena.parse("xxcab").tags() == {"c": "xx"}
    assert arena.parse("xabc").tags() == {"c": "x"}  # "abc" may still become "abcd"
    assert arena.parse("xab", lenient=False).tags() == {"c": "x"}
    assert build_peg_parser(lambda p: p.rest()).parse("", lenient=True).type == NMI


def test_c6_c7_tags_last_one_wins():
    a = build_peg_parser(lambda p: p.tag("prefix", p.until(":")) + ":" + p.tag("value", p.rest()) + p.end())
    r = a.parse("key:val", lenient=True)
    assert not r.fail and r.tags() == {"prefix": "key", "value": "val"}
    a = build_peg_parser(lambda p: p.tag("item", p.until(",")) + "," + p.tag("item", p.rest()) + p.end())
    assert a.parse("first,second").tags() == {"item": "second"}


def test_rule_and_tag_nodes_partial_flag_and_atomic():
    a = build_peg_parser(lambda p: p.rule("r", p.tag("t", p.literal("abc"))) + p.atomic(p.tag("u", p.literal("xyz"))))
    r = a.parse("abcxy")
    nodes = list(r.visit())
    assert [(n.rule, n.tag, n.partial) for n in nodes] == [("r", "", False), ("", "t", False)]
    r = a.parse("ab")
    assert [(n.rule, n.tag, n.partial) for n in r.visit()] == [("r", "", True), ("", "t", True)]


def test_rule_name_sanitized_and_redefinition_wins():
    b = Builder()
    b.rule("tool-special_function", b.literal("a"))
    b.rule("tool-special.function", b.literal("b"))
    arena = b.build(b.ref("tool-special-function"))
    assert list(arena.rules) == ["tool-special-function"]
    assert arena.parse("b", lenient=False).type == S


def test_describe_is_readable():
    text = build_chat_peg_parser(lambda p: p.optional("<think>" + p.reasoning(p.until("</think>")) + "</think>")
                                 + p.content(p.rest()) + p.end()).describe()
    assert text == 'root <- ("<think>" @reasoning(until("</think>")) "</think>")? @content(rest) $'


def test_optspace_and_prefix():
    p = ChatBuilder()
    arena = p.build(p.optspace("\n<think>\n") + p.end())
    assert [arena.parse(t, lenient=False).type for t in ("<think>", "\n<think>\n", "\n\n<think>")] == [S, S, F]
    p = ChatBuilder()
    arena = p.build(p.prefix("<|im_start|>assistant\n<think>\n", "<think>") + p.tag("rest", p.rest()))
    assert arena.parse("<|im_start|>assistant\n<think>\nhi").tags() == {"rest": "<think>\nhi"}


# ---------------------------------------------------------------------------------------------------------------
# the native JSON scanners accept exactly what the combinator JSON grammar accepts

def _pure_combinator_copy(fn):
    arena = build_peg_parser(fn)
    for node in arena.nodes:
        if isinstance(node, N.Rule):
            node.native = None
    arena._compiled = None
    return arena


_JSON_ARENA = build_peg_parser(lambda p: p.json())
_JSON_PURE = _pure_combinator_copy(lambda p: p.json())

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(_json_values, st.sampled_from([None, 0, 1, 2, 3]), st.data())
def test_native_json_matches_combinator_grammar(value, indent, data):
    text = json.dumps(value, indent=indent, ensure_ascii=bool(data.draw(st.booleans())))
    mutation = data.draw(st.sampled_from(["none", "cut", "junk", "swap"]))
    if mutation == "cut":
        text = text[:data.draw(st.integers(0, len(text)))]
    elif mutation == "junk":
        i = data.draw(st.integers(0, len(text)))
        text = text[:i] + data.draw(st.sampled_from(["x", ",", "}", "]", "\\", '"', " ", "\v", "e", "."])) + text[i:]
    elif mutation == "swap" and text:
        text = text.replace("true", "True").replace(": ", ":\f")
    for lenient in (True, False):
        a = _JSON_ARENA.parse(text, lenient=lenient)
        b = _JSON_PURE.parse(text, lenient=lenient)
        assert a.type == b.type, (text, lenient)
        if a.type != F:
            assert a.end == b.end, (text, lenient)


# ---------------------------------------------------------------------------------------------------------------
# the incremental cache never changes a result

def _tool_grammar(p):
    call = p.rule("call", p.tool_open("<call>") + p.tool_name(p.literal("fn")) + p.space()
                  + p.tool_args(p.json()) + p.tool_close("</call>"))
    return (p.optional("<think>" + p.reasoning(p.until("</think>")) + "</think>")
            + p.optional(p.content(p.until("<call>"))) + p.zero_or_more(call + p.space()) + p.end())


_PIECES = ["<think>", "</think>", "<call>", "</call>", "fn", ' {"a": [1, 2.5, "x\\"y"]}', "hello ", "<", "\n",
           "{", "}", '"', "é", "</", "<cal"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14))
def test_cached_parses_equal_fresh_parses(pieces):
    arena = build_chat_peg_parser(_tool_grammar)
    text = "".join(pieces)
    cache = ParseCache()
    for i in range(len(text) + 1):
        prefix = text[:i]
        a = arena.parse(prefix, cache=cache)
        b = arena.parse(prefix)
        assert (a.type, a.end) == (b.type, b.end)
        assert [(n.tag, n.rule, n.start, n.end, n.partial) for n in a.visit()] == \
            [(n.tag, n.rule, n.start, n.end, n.partial) for n in b.visit()]
    # a text that is not an extension resets the cache
    other = arena.parse("<call>fn {}</call>", cache=cache)
    assert other.type == S and [n.tag for n in other.visit() if n.tag == "tool-name"] == ["tool-name"]


def test_streamed_repetition_names_its_replayed_items():
    # AstNode.base: the node over a repetition resumed from the cache says which of its children are the
    # very objects of the replayed prefix, so a stream's mapper need not compare them one by one
    def grammar(p):
        call = p.rule("call", p.tool_open("<call>") + p.tool_name(p.literal("fn")) + p.space()
                      + p.tool_args(p.json()) + p.tool_close("</call>"))
        return p.optional(p.content(p.until("<call>"))) + p.rule("calls", p.zero_or_more(call + p.space())) + p.end()

    arena = build_chat_peg_parser(grammar)
    text = "hi " + '<call>fn {"a": [1, "x"]}</call>\n' * 5
    cache = ParseCache()
    marked = 0
    for i in range(1, len(text) + 1):
        r = arena.parse(text[:i], cache=cache)
        fresh = arena.parse(text[:i])
        assert [(n.tag, n.rule, n.start, n.end, n.partial) for n in r.visit()] == \
            [(n.tag, n.rule, n.start, n.end, n.partial) for n in fresh.visit()]
        node = next((n for n in r.nodes if n.rule == "calls"), None)
        if node is not None and node.base is not None:
            prefix, parent, off = node.base
            assert len(node.children) >= off + len(prefix) and prefix
            assert all(a is b for a, b in zip(node.children[off:off + len(prefix)], prefix))
            assert parent is None or prefix[:len(parent)] == parent
            marked += 1
    assert fresh.nodes[-1].base is None        # no cache, no mark
    assert marked > len(text) // 2             # every parse after the first call resumes


def test_node_run_reads_as_a_tuple():
    # NodeRun (a resumed repetition's children): head + run[:k] + tail, read like the tuple it stands for
    from core.peg.engine import NodeRun

    run = ["a", "b", "c", "d"]
    v = NodeRun(("h",), run, 3, ("t1", "t2"))
    as_tuple = ("h", "a", "b", "c", "t1", "t2")
    assert len(v) == 6 and bool(v) and tuple(v) == as_tuple
    assert [v[i] for i in range(-6, 6)] == list(as_tuple) * 2
    with pytest.raises(IndexError):
        v[6]
    with pytest.raises(IndexError):
        v[-7]
    for lo in range(-7, 8):
        for hi in range(-7, 8):
            assert v[lo:hi] == as_tuple[lo:hi]
    assert v[::2] == as_tuple[::2] and v[::-1] == as_tuple[::-1]
    assert list(reversed(v)) == list(reversed(as_tuple))
    assert v == as_tuple and v == NodeRun((), list(as_tuple), 6, ()) and v != as_tuple[:-1]
    assert hash(v) == hash(as_tuple)
    assert v.index("c") == 3 and v.count("t1") == 1
    with pytest.raises(ValueError):
        v.index("d")          # in the shared list, past this view's k
    assert tuple(v + ("x",)) == as_tuple + ("x",) and tuple(("x",) + v) == ("x",) + as_tuple
    assert isinstance(("x",) + v, NodeRun)      # no copy of the run
    # growing: the shared list is appended to only by its last view; earlier views keep what they showed
    p = NodeRun((), ["a", "b"], 2, ())
    q = p.grown(["c"])
    assert q.run is p.run and tuple(p) == ("a", "b") and tuple(q) == ("a", "b", "c")
    r = p.grown(["x"])                          # p is no longer the list's last view: a list of its own
    assert r.run is not p.run and tuple(r) == ("a", "b", "x") and tuple(q) == ("a", "b", "c")


def _streaming_grammar(p):
    # optional, repetitions (zero or more / one or more / bounded), choices whose first alternative fails
    # late, atomics and tags: what the engine's stream bookkeeping (hints, NodeRun, optional) touches
    arg = p.rule("arg", p.tag("tool-arg-name", p.chars("[a-z]")) + "=" + p.tag("tool-arg-value", p.chars("[0-9]")))
    call = p.rule("call", p.tool_open("<c ") + p.tool_name(p.choice(p.literal("fnx"), p.literal("fn")))
                  + p.space() + p.optional(arg + p.zero_or_more(p.space() + "," + p.space() + arg))
                  + p.tool_close(p.atomic(p.literal("/>"))))
    pair = p.rule("pair", p.literal("ab") + p.optional("c"))
    return (p.optional(p.content(p.until_one_of(["<c ", "[["])))
            + p.optional(p.rule("pairs", "[[" + p.repeat(pair + p.space(), 1, 3) + "]]"))
            + p.rule("calls", p.zero_or_more(p.optional(call) + p.space())) + p.end())


def _mistral_like_grammar(p):
    # the repetition of further calls is the last item of a long sequence that starts with the first call
    # (Mistral's [TOOL_CALLS], DeepSeek's and GLM's call lists): a NodeRun meets the nodes before it
    def call():
        return p.rule("call", p.tool_open("<c ") + p.tool_name(p.choice(p.literal("fnx"), p.literal("fn")))
                      + p.space() + p.tool_args(p.json()) + p.tool_close(p.atomic(p.literal("/>"))))
    calls = p.rule("calls", p.literal("[T]") + call() + p.literal("") + p.zero_or_more(p.space() + "[T]" + call()))
    return p.optional(p.content(p.until("[T]"))) + p.optional(calls) + p.end()


@pytest.mark.parametrize("seed", range(12))
def test_seeded_streams_equal_fresh_parses_long_sequence(seed):
    import random

    rnd = random.Random(seed)
    pieces = ["[T]<c fn {}/>", '[T]<c fnx {"a": [1, "x"]}/>', " ", "\n", "[T]", "<c fn", ' {"b": 2}', "/>", "[T]<c f",
              "hello", "[", "{}", "/x"]
    text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(4, 16)))
    _check_stream_equals_fresh(build_chat_peg_parser(_mistral_like_grammar), text)


def _check_stream_equals_fresh(arena, text):
    cache = ParseCache()
    for i in range(len(text) + 1):
        prefix = text[:i]
        a = arena.parse(prefix, cache=cache)
        b = arena.parse(prefix)
        assert (a.type, a.end, a.switches, a.pending, a.pending_ws, a.pending_chain, a.pending_until) == \
            (b.type, b.end, b.switches, b.pending, b.pending_ws, b.pending_chain, b.pending_until), prefix
        assert [(n.tag, n.rule, n.start, n.end, n.partial, len(n.children)) for n in a.visit()] == \
            [(n.tag, n.rule, n.start, n.end, n.partial, len(n.children)) for n in b.visit()], prefix
        for n in a.visit():
            if n.base is not None:      # the replayed prefix is where base says, the very objects
                pre, parent, off = n.base
                assert all(x is y for x, y in zip(n.children[off:off + len(pre)], pre))
                assert parent is None or tuple(pre[:len(parent)]) == tuple(parent)


@pytest.mark.parametrize("seed", range(12))
def test_seeded_streams_equal_fresh_parses(seed):
    # streams that end inside every kind of node, alternatives that fail after a resume (``fnx`` / ``fn``),
    # repetition items whose last part fails later (``ab`` then ``abx``), bounded repetitions that stop:
    # every prefix parsed with the stream's cache gives the tree, result and bookkeeping of a fresh parse
    import random

    rnd = random.Random(seed)
    pieces = ["<c fn />", "<c fnx a=1 , b=22/>", "<c fn a=1,b=2 />", "[[ab abc ", "ab ", "]]", "abx", "<c fn a=",
              "hello ", "<c", " ", "\n", "/>", "<c fnx/>", "<c fn a=1 ,", "[[", "x"]
    text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(4, 14)))
    _check_stream_equals_fresh(build_chat_peg_parser(_streaming_grammar), text)


def test_partial_delimiter_scan_finds_what_the_nested_regex_finds():
    """Delimiters over engine._NESTED_MAX characters are scanned by hand (the nested regex overflows the re
    module's parser); on every text of up to 7 characters over a small alphabet, with delimiters of one to ten
    characters sharing prefixes, the scan names the position the regex does."""
    from itertools import product

    from core.peg import engine

    delim_sets = [["<a", "<ab"], ["aab<"], ["<", "ab<ab<a"], ["a<b<a<b<a<"], ["ba", "<<a", "aaaa"]]
    for delims in delim_sets:
        rx, scan = engine._partial_regex(delims), engine._PartialScan(delims).search
        for size in range(8):
            for chars in product("ab<", repeat=size):
                text = "".join(chars)
                for pos in range(size + 1):
                    a, b = rx(text, pos), scan(text, pos)
                    assert (a.start() if a else None) == (b.start() if b else None), (delims, text, pos)
    long = ["<function=" + "x" * 3000 + ">"]
    scan = engine._partial_regex(long)
    assert scan("hello <function=" + "x" * 2000, 0).start() == 6
    assert scan("hello <function=" + "x" * 2000 + "y", 0) is None
