"""Repairs written from the misses of the development sets real_outputs_kept20 … real_outputs_kept25: each on the
sets' own cases (every case cites its public source), where it fires, that it is switchable and that the llama.cpp
fidelity reads the output as before."""

from __future__ import annotations

import pytest

from .repair_checks import calls, cases_of, check_streams, parse_in

CASES = cases_of("real_outputs_kept20", "real_outputs_kept21", "real_outputs_kept22", "real_outputs_kept23",
                 "real_outputs_kept24", "real_outputs_kept25")


def _parse(case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None):
    return parse_in(CASES, case_id, fidelity, disabled, output)


def _without(case_id: str, repair: str) -> list:
    """The case's messages with ``repair`` switched off at ``improved`` and at ``llama.cpp`` fidelity."""
    return [_parse(case_id, fidelity, disabled)[1]
            for disabled, fidelity in (((repair,), "improved"), ((), "llama.cpp"))]


# -- section-opener-whitespace (Kimi K2: a line break after <|tool_calls_section_begin|>) ----------------------------

KIMI_SECTION = "<|tool_calls_section_begin|>"
KIMI_SECTIONS = {
    "kept22-sglrouter-kimik2-multiple-tools": [("search", {"query": "rust tutorials"}),
                                               ("translate", {"text": "Hello", "to": "ja"})],
    "kept22-sglrouter-kimik2-sequential-indices": [("first", {"param": "a"}), ("second", {"param": "b"}),
                                                   ("third", {"param": "c"})],
    "kept24-smg-kimik2-multiline-arguments": [("get_weather", {"location": "Tokyo", "note": "line one\nline two"})],
    "kept24-smg-kimik2-function-index-extraction": [("search", {"query": "rust"}), ("calc", {"x": 10})],
}


@pytest.mark.parametrize("case_id", sorted(KIMI_SECTIONS))
def test_line_break_after_the_section_opener_is_read(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert calls(msg) == KIMI_SECTIONS[case_id]
    assert (msg.content or "") == output[:output.index(KIMI_SECTION)]
    after = output.index(KIMI_SECTION) + len(KIMI_SECTION)
    # the record spans the opener and the line break after it
    fired = [(r.start, r.end) for r in msg.repairs if r.name == "section-opener-whitespace"]
    assert fired == [(after - len(KIMI_SECTION), after + 1)]
    check_streams(parser, output, msg)


@pytest.mark.parametrize("case_id", sorted(KIMI_SECTIONS))
def test_section_opener_whitespace_is_switchable_and_not_at_llama_cpp(case_id):
    for msg in _without(case_id, "section-opener-whitespace"):
        assert not msg.tool_calls
        assert "<|tool_call_begin|>" in msg.content
        assert "section-opener-whitespace" not in [r.name for r in msg.repairs]


def test_section_opener_whitespace_waits_on_nothing_and_leaves_other_text():
    case_id = "kept24-smg-kimik2-function-index-extraction"
    output = CASES[case_id].output
    cut = output.index(KIMI_SECTION) + len(KIMI_SECTION) + 1   # the opener and its line break end the output
    for tail in ("", "done"):   # text after the opener that is no call marker: read as without the repair
        _, msg = _parse(case_id, output=output[:cut] + tail)
        _, before = _parse(case_id, disabled=("section-opener-whitespace",), output=output[:cut] + tail)
        assert msg.to_openai() == before.to_openai() and not msg.tool_calls
        assert msg.content.startswith("Text before tool calls.\n") and msg.content.endswith("\n" + tail)
        assert "section-opener-whitespace" not in [r.name for r in msg.repairs]


# -- repeated-turn-header, fixed: Harmony's role header <|start|>assistant to=functions.f -----------------------------

ROLE_HEADER = ["kept20-harmony-py-constrain-after-space-call", "kept20-harmony-py-constrain-adjacent-call"]


@pytest.mark.parametrize("case_id", ROLE_HEADER)
def test_repeated_role_header_keeps_the_space_before_the_recipient(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert calls(msg) == [("get_weather", {"location": "Tokyo"})]
    assert not msg.content
    # the header alone is cut: the space before to= is the role header's own, read as after the prompt
    assert [(r.name, r.start, r.end) for r in msg.repairs if r.name == "repeated-turn-header"] == [
        ("repeated-turn-header", 0, len("<|start|>assistant"))]
    check_streams(parser, output, msg)
    _, plain = _parse(case_id, "llama.cpp")
    assert not plain.tool_calls and output in plain.content


def test_whitespace_after_a_repeated_header_is_still_cut_before_a_marker_or_a_line_break():
    case_id = ROLE_HEADER[0]
    call = CASES[case_id].output[len("<|start|>assistant to=functions.get_weather"):]
    for gap in (" \n", "\n", "  "):   # a line break, or spaces before the channel's marker: whitespace, cut
        output = "<|start|>assistant" + gap + call
        _, msg = _parse(case_id, output=output)
        assert [(r.name, r.end) for r in msg.repairs if r.name == "repeated-turn-header"] == [
            ("repeated-turn-header", len("<|start|>assistant" + gap))]


# -- message-closer-at-end (Harmony: a final message or a call closed by <|end|> at the end of the output) -----------

CLOSED = {
    "kept23-ovms-harmony-final-end": ("Hello, world!", []),
    "kept20-harmony-rs-recipient-in-role-constrain-adjacent-end": ("", [("get_weather", {"location": "Tokyo"})]),
}


@pytest.mark.parametrize("case_id", sorted(CLOSED))
def test_message_closer_at_the_end_is_markup(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    content, want = CLOSED[case_id]
    assert (msg.content or "") == content and calls(msg) == want
    assert [(r.start, r.end) for r in msg.repairs if r.name == "message-closer-at-end"] == [
        (len(output) - len("<|end|>"), len(output))]
    check_streams(parser, output, msg)
    for other in _without(case_id, "message-closer-at-end"):
        assert (other.content or "").endswith("<|end|>")
        assert "message-closer-at-end" not in [r.name for r in other.repairs]


def test_message_closer_followed_by_text_reads_as_before():
    case_id = "kept23-ovms-harmony-final-end"
    output = CASES[case_id].output + " more"
    _, msg = _parse(case_id, output=output)
    _, before = _parse(case_id, disabled=("message-closer-at-end",), output=output)
    assert msg.to_openai() == before.to_openai() and msg.content.endswith("<|end|> more")
    _, plain = _parse(case_id, output=CASES[case_id].output[:-len("<|end|>")])
    assert plain.content == "Hello, world!" and not plain.repairs


# -- trailing-eos-token, in the Ministral 3 / Devstral handler: </s> after the calls -----------------------------------

DEVSTRAL_EOS = ["kept23-ovms-devstral-call-after-prose", "kept23-ovms-devstral-array-argument"]


@pytest.mark.parametrize("case_id", DEVSTRAL_EOS)
def test_devstral_eos_after_the_calls_is_not_content(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert [c.name for c in msg.tool_calls] == ["example_tool"]
    assert (msg.content or "") == output[:output.index("[TOOL_CALLS]")]
    assert [(r.start, r.end) for r in msg.repairs if r.name == "trailing-eos-token"] == [
        (len(output) - len("</s>"), len(output))]
    check_streams(parser, output, msg)
    for other in _without(case_id, "trailing-eos-token"):
        assert (other.content or "").endswith("</s>")


# -- marker-space-omitted (Mistral v0.3: "[TOOL_CALLS][" where the template writes "[TOOL_CALLS] [") -----------------

MISTRAL = {
    "kept23-ovms-mistral-single-call": ["example_tool"],
    "kept23-ovms-mistral-three-calls": ["example_tool", "another_tool", "third_tool"],
}


@pytest.mark.parametrize("case_id", sorted(MISTRAL))
def test_section_opener_without_its_space_is_read(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert [c.name for c in msg.tool_calls] == MISTRAL[case_id] and not msg.content
    assert [(r.start, r.end) for r in msg.repairs if r.name == "marker-space-omitted"] == [(0, len("[TOOL_CALLS]"))]
    check_streams(parser, output, msg)
    for other in _without(case_id, "marker-space-omitted"):
        assert not other.tool_calls and other.content.startswith("[TOOL_CALLS][")
        assert "marker-space-omitted" not in [r.name for r in other.repairs]
    # the template's own spelling reads as before, with no record
    _, spaced = _parse(case_id, output="[TOOL_CALLS] " + output[len("[TOOL_CALLS]"):])
    assert [c.name for c in spaced.tool_calls] == MISTRAL[case_id]
    assert "marker-space-omitted" not in [r.name for r in spaced.repairs]
