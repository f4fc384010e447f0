"""The diff engine reproduces llama.cpp's helper semantics (upstream unit-test vectors, analysis notes §4)."""

from __future__ import annotations

import pytest

from core.diff import (
    DiffSplit,
    SegmentKind,
    calculate_diff_split,
    prune_whitespace_segments,
    segmentize_markers,
    until_common_prefix,
)

T, M = SegmentKind.TEXT, SegmentKind.MARKER


@pytest.mark.parametrize(
    "text, expected",
    [
        ("pre_marker[marker]post_marker", [(T, "pre_marker"), (M, "[marker]"), (T, "post_marker")]),
        ("pre_marker<marker>post_marker", [(T, "pre_marker"), (M, "<marker>"), (T, "post_marker")]),
        ("<hello>world</hello>", [(M, "<hello>"), (T, "world"), (M, "</hello>")]),
        ("<hello>[hello]<world>[world]", [(M, "<hello>"), (M, "[hello]"), (M, "<world>"), (M, "[world]")]),
        ("im<blue>daba<dee>da[hey]",
         [(T, "im"), (M, "<blue>"), (T, "daba"), (M, "<dee>"), (T, "da"), (M, "[hey]")]),
        ("test<tag", [(T, "test"), (T, "<tag")]),
        ("<a<b>", [(M, "<a<b>")]),
        ("[x>y]", [(M, "[x>y]")]),
        ("", []),
    ],
)
def test_segmentize_markers(text, expected):
    assert [(s.kind, s.value) for s in segmentize_markers(text)] == expected


def test_prune_whitespace_segments():
    segs = prune_whitespace_segments(segmentize_markers("<a>\n \t<b>x"))
    assert [s.value for s in segs] == ["<a>", "<b>", "x"]


_LONG_R = ("<|START_THINKING|><|END_THINKING|><|START_ACTION|>[\n"
           '    {"tool_call_id": "0", "tool_name": "test_function_name", '
           '"parameters": {"param1": "value1", "param2": "value2"}}\n'
           "]<|END_ACTION")
_SUF = "|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
_CHATML = "<|im_start|>user\nHello<|im_end|>\n"
_COMMON = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
           "<|im_start|>user\nSearch for files<|im_end|>\n"
           "<|im_start|>assistant\n<think>\nLet me search.\n</think>\n\n"
           "<tool_call>\n<function=search>\n</function>\n</tool_call><|im_end|>\n"
           "<|im_start|>user\n<tool_response>\nNo files found\n</tool_response><|im_end|>\n")

# (left, right, prefix, left_diff, right_diff, suffix)
VECTORS = [
    ("hello world", "hello test", "hello ", "world", "test", ""),
    ("abc", "xyz", "", "abc", "xyz", ""),
    ("prefixA suffix", "prefixB suffix", "prefix", "A", "B", " suffix"),
    ("hello", "hello", "hello", "", "", ""),
    ("", "", "", "", "", ""),
    ("a", "a", "a", "", "", ""),
    ("<row><row><row><your><boat><gently>", "<row><row><row><your><boat><gently>",
     "<row><row><row><your><boat><gently>", "", "", ""),
    ("abcdef", "abcxyz", "abc", "def", "xyz", ""),
    ("same", "sameagain", "same", "", "again", ""),
    ("test", "testing", "test", "", "ing", ""),
    ("123end", "456end", "", "123", "456", "end"),
    ("start", "end", "", "start", "end", ""),
    ("abcsuffix", "xyzsuffix", "", "abc", "xyz", "suffix"),
    ("helloXworld", "helloYworld", "hello", "X", "Y", "world"),
    ("ABCmiddleXYZ", "ABCdifferentXYZ", "ABC", "middle", "different", "XYZ"),
    ("startAend", "startBend", "start", "A", "B", "end"),
    ("aa", "ab", "a", "a", "b", ""),
    ("", "hello", "", "", "hello", ""),
    ("hello", "", "", "hello", "", ""),
    ("a", "", "", "a", "", ""),
    ("", "a", "", "", "a", ""),
    ("left", "right", "", "lef", "righ", "t"),
    ("123", "456", "", "123", "456", ""),
    ("a", "b", "", "a", "b", ""),
    ("a", "ab", "a", "", "b", ""),
    ("ab", "a", "a", "b", "", ""),
    ("testing", "test", "test", "ing", "", ""),
    ("Xtest", "Ytest", "", "X", "Y", "test"),
    ("testX", "testY", "test", "X", "Y", ""),
    ("abc", "cba", "", "abc", "cba", ""),
    ("prefix<tag>", "prefix</tag>suffix", "prefix", "<tag>", "</tag>suffix", ""),
    ("prefix<div>content</div>", "prefix<div>different</div>", "prefix<div>", "cont", "differ", "ent</div>"),
    ("<tag>left</tag>", "<tag>righ</tag>", "<tag>", "left", "righ", "</tag>"),
    ("PREFIX</think>Sure", "PREFIX<think>Lemme think</think>Sure", "PREFIX", "", "<think>Lemme think",
     "</think>Sure"),
    (_CHATML, _CHATML + "<|im_start|>assistant\n<think>\n", _CHATML, "", "<|im_start|>assistant\n<think>\n", ""),
    (_COMMON, _COMMON + "<|im_start|>assistant\n<think>\n", _COMMON, "", "<|im_start|>assistant\n<think>\n", ""),
]


@pytest.mark.parametrize("left, right, prefix, ldiff, rdiff, suffix", VECTORS)
def test_calculate_diff_split_vectors(left, right, prefix, ldiff, rdiff, suffix):
    assert calculate_diff_split(left, right) == DiffSplit(prefix=prefix, suffix=suffix, left=ldiff, right=rdiff)


def test_diff_split_loose_vectors():
    r = calculate_diff_split("test<tag", "test>content")
    assert r.prefix.startswith("test") and (r.left or r.right or r.suffix)
    r = calculate_diff_split("test[", "test]value")
    assert r.left or r.right or r.suffix
    r = calculate_diff_split("Hello <world>", "Hello test")
    assert (r.prefix, r.right, r.suffix) == ("Hello ", "test", "") and "<world>" in r.left
    r = calculate_diff_split("test [array]", "test other")
    assert (r.prefix, r.right, r.suffix) == ("test ", "other", "") and "[array]" in r.left


def test_diff_split_completes_special_tokens():
    left = "SOME_PREFIX" + "<|START_RESPONSE|>Let me help you.<|END_RESPONSE" + _SUF
    right = "SOME_PREFIX" + _LONG_R + _SUF
    r = calculate_diff_split(left, right)
    assert r.prefix == "SOME_PREFIX"
    assert r.left == "<|START_RESPONSE|>Let me help you.<|END_RESPONSE|>"
    assert "<|END_ACTION|>" in r.right
    assert r.suffix == "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"


@pytest.mark.parametrize(
    "full, left, right, expected",
    [
        ("<function name=foo><arg name=bar>", "<arg name=bar>", "<arg name=baz>", "<function name=foo>"),
        ("prefix<test>suffix", "<test>different", "<test>other", "prefix"),
        ("<common>rest", "<common>left", "<common>right", ""),
        ("something", "left", "right", ""),
        ("test", "", "right", ""),
        ("abcXYZ<shared_prefix>rest", "<shared_prefix>left", "<shared_prefix>right", "abcXYZ"),
        ("xyz", "AA_ARG_FST_AA", "BB_ARG_SND_BB", ""),
    ],
)
def test_until_common_prefix(full, left, right, expected):
    assert until_common_prefix(full, left, right) == expected


from hypothesis import given, settings, strategies as st  # noqa: E402

_TEXT = st.text(alphabet="ab <>[]/\n|", max_size=24)


@settings(max_examples=300, deadline=None)
@given(_TEXT, _TEXT)
def test_diff_split_reassembles_both_inputs(a, b):
    d = calculate_diff_split(a, b)
    assert d.prefix + d.left + d.suffix == a
    assert d.prefix + d.right + d.suffix == b


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_segments_concatenate_to_the_text(text):
    segs = segmentize_markers(text)
    assert "".join(s.value for s in segs) == text
    for s in segs:
        if s.kind == SegmentKind.MARKER:
            assert s.value[0] in "<[" and s.value[-1] == {"<": ">", "[": "]"}[s.value[0]]


def _segments_by_hand(text: str) -> list[tuple[str, str]]:
    """The segmentation rule walked character by character (the reference the regex scanner must equal)."""
    out, border, i = [], 0, 0
    while i < len(text):
        if text[i] in "<[":
            end = text.find({"<": ">", "[": "]"}[text[i]], i + 1)
            if i > border:
                out.append(("TEXT", text[border:i]))
            border = i
            if end < 0:
                break
            out.append(("MARKER", text[i:end + 1]))
            border = i = end + 1
        else:
            i += 1
    if border < len(text):
        out.append(("TEXT", text[border:]))
    return out


@settings(max_examples=400, deadline=None)
@given(_TEXT)
def test_segmentize_markers_equals_the_rule_walked_by_hand(text):
    assert [(s.kind.value, s.value) for s in segmentize_markers(text)] == _segments_by_hand(text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab", max_size=40), st.text(alphabet="ab", max_size=40))
def test_common_prefix_and_suffix_lengths_equal_a_character_walk(a, b):
    from core.diff import common_prefix_len, common_suffix_len

    n = min(len(a), len(b))
    pre = next((i for i in range(n) if a[i] != b[i]), n)
    suf = next((i for i in range(n) if a[len(a) - 1 - i] != b[len(b) - 1 - i]), n)
    assert (common_prefix_len(a, b), common_suffix_len(a, b)) == (pre, suf)
