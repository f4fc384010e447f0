"""Repairs written from the misses of the development sets real_outputs_kept16 … real_outputs_kept19 (and the
leftover of kept14): each on the sets' own cases (every case cites its public source), where it fires, that it is
switchable and that the llama.cpp fidelity reads the output as before."""

from __future__ import annotations

import pytest

from .repair_checks import calls, cases_of, check_streams, parse_in

CASES = cases_of("real_outputs_kept14", "real_outputs_kept16", "real_outputs_kept17",
                  "real_outputs_kept18", "real_outputs_kept19")
_calls, _check_streams = calls, check_streams


def _parse(case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None):
    return parse_in(CASES, case_id, fidelity, disabled, output)


# -- section-per-call (MiniMax-M2: one <minimax:tool_call> section per call) ----------------------------------------

SECTIONS = {
    "kept19-vllmmlx-minimax-multiple-tool-calls": [("search", {"query": "MiniMax M2.5"}),
                                                    ("read_file", {"path": "/tmp/test.txt"})],
    "kept19-rapidmlx-minimax-multiple-blocks": [("func1", {"a": 1}), ("func2", {"b": 2})],
}


@pytest.mark.parametrize("case_id", sorted(SECTIONS))
def test_one_section_per_call_is_read(case_id):
    parser, msg = _parse(case_id)
    output = CASES[case_id].output
    assert _calls(msg) == SECTIONS[case_id]
    assert not msg.content and not msg.reasoning_content
    second = output.index("<minimax:tool_call>", 1)
    fired = [(r.start, r.end) for r in msg.repairs if r.name == "section-per-call"]
    # the record spans the further section, from the line break before it to the output's end
    assert fired == [(second - 1, len(output))]
    _check_streams(parser, output, msg)


@pytest.mark.parametrize("case_id", sorted(SECTIONS))
def test_section_per_call_is_switchable_and_not_at_llama_cpp(case_id):
    output = CASES[case_id].output
    second = output.index("<minimax:tool_call>", 1)
    for disabled, fidelity in ((("section-per-call",), "improved"), ((), "llama.cpp")):
        _, msg = _parse(case_id, fidelity, disabled)
        assert len(msg.tool_calls) <= 1
        assert output[second:] in (msg.content or "") + (msg.reasoning_content or "")
        assert "section-per-call" not in [r.name for r in msg.repairs]


# -- calls-in-one-block (Gemma 4: several call:NAME{…} in one <|tool_call> block) ------------------------------------

ONE_BLOCK = "kept19-vllmmlx-gemma4-multiple-calls-one-block"


def test_calls_in_one_block_are_read():
    parser, msg = _parse(ONE_BLOCK)
    output = CASES[ONE_BLOCK].output
    assert _calls(msg) == [("glob", {"pattern": "README*.md"}), ("glob", {"pattern": "CONTRIBUTING.md"})]
    assert not msg.content
    fired = [(r.start, r.end) for r in msg.repairs if r.name == "calls-in-one-block"]
    # where the first call's closer is left out (zero width), and the second call, written without its opener
    second = output.index("}call:") + 1
    assert fired == [(second, second), (second, len(output))]
    _check_streams(parser, output, msg)


def test_calls_in_one_block_is_switchable_and_not_at_llama_cpp():
    output = CASES[ONE_BLOCK].output
    for disabled, fidelity in ((("calls-in-one-block",), "improved"), ((), "llama.cpp")):
        _, msg = _parse(ONE_BLOCK, fidelity, disabled)
        assert [c.name for c in msg.tool_calls] == ["glob"]
        assert 'call:glob{pattern:<|"|>CONTRIBUTING.md<|"|>}' in msg.content
        assert "calls-in-one-block" not in [r.name for r in msg.repairs]
    # one call in its own block is read as before, with no record
    single = output[:output.index("}call:") + 1] + "<tool_call|>"
    _, msg = _parse(ONE_BLOCK, output=single)
    assert _calls(msg) == [("glob", {"pattern": "README*.md"})] and not msg.repairs


# -- call-ends-reasoning's look-ahead never waits on text after the call (GLM-5, kept14's leftover) -----------------

AFTER_CALL = "kept14-xinference-glm5-streaming-text-after-processed-call"


def test_call_ending_reasoning_with_text_after_it_is_read():
    parser, msg = _parse(AFTER_CALL)
    output = CASES[AFTER_CALL].output
    assert _calls(msg) == [("get_weather", {"location": "Beijing"})]
    assert msg.content == " done" and not msg.reasoning_content
    assert "call-ends-reasoning" in [r.name for r in msg.repairs]
    _check_streams(parser, output, msg)
    # without the repair the prompt-opened reasoning never closes: the output is not read as a call
    _, off = _parse(AFTER_CALL, disabled=("call-ends-reasoning",))
    assert not off.tool_calls


# -- python-dict-call (Hermes 2 Pro's call object written as a Python dict literal) ---------------------------------

DICT_CALL = "kept17-hermes-fc-readme-inference-example-call"


def test_python_dict_call_is_read():
    parser, msg = _parse(DICT_CALL)
    output = CASES[DICT_CALL].output
    assert _calls(msg) == [("get_stock_fundamentals", {"symbol": "TSLA"})]
    assert not msg.content
    fired = [(r.start, r.end) for r in msg.repairs if r.name == "python-dict-call"]
    start = output.index("{'arguments'")
    assert fired == [(start, output.index("}\n</tool_call>") + 1)]
    _check_streams(parser, output, msg)


def test_python_dict_call_is_switchable_and_not_at_llama_cpp():
    output = CASES[DICT_CALL].output
    for disabled, fidelity in ((("python-dict-call",), "improved"), ((), "llama.cpp")):
        _, msg = _parse(DICT_CALL, fidelity, disabled)
        assert not msg.tool_calls
        assert "{'arguments': {'symbol': 'TSLA'}, 'name': 'get_stock_fundamentals'}" in msg.content
    # Python's own spellings are decoded: True / None, escapes, the name first
    text = ("<tool_call>\n{'name': 'get_stock_fundamentals', 'arguments': {'symbol': 'it\\'s', 'x': [True, None]}}"
            "\n</tool_call>")
    _, msg = _parse(DICT_CALL, output=text)
    assert _calls(msg) == [("get_stock_fundamentals", {"symbol": "it's", "x": [True, None]})]
    # a name the request does not declare stays text
    _, msg = _parse(DICT_CALL, output="<tool_call>\n{'name': 'other', 'arguments': {}}\n</tool_call>")
    assert not msg.tool_calls and "'other'" in msg.content
