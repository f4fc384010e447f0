"""Issue 26, "the evidence never states something false": each statement a new maintainer's check found false on a
development row (kept25 … kept27), now true or gone."""

from __future__ import annotations

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.fixes import offered_names
from core.explain.model import Setup, build_bundle, called_names
from core.explain.triage import Mistake

from .test_triage import _row, _run, _template


def _explained(set_name: str, case_id: str):
    case = _row(set_name, case_id)
    t = _template(case["template"])
    req = ChatRequest.from_dict(case)
    s = Setup(t, req, "llama.cpp", {})
    return explain(t, req, case["input"]), req, build_bundle(s)


def test_a_request_fix_offers_no_tool_named_like_the_formats_own_markup():
    """gpt-oss's answer `<|channel|>final<|message|>…`: `final` is Harmony's channel word, not a called tool."""
    ex, req, bundle = _explained("kept26.jsonl", "kept23-ovms-harmony-final-call-closer")
    assert "final" in called_names(ex, req)
    assert "final" not in offered_names(bundle, ex, req)


def _triaged(set_name: str, case_id: str):
    return _run(_row(set_name, case_id))


def test_an_output_whose_reasoning_was_split_off_is_not_said_to_omit_the_reasoning_closer():
    """MiniMax-M2's calls with the reasoning split off by the engine: the mistake's sentence is the evidence's (the
    model omitted nothing), and the second call section is not called more than a parallel-calls request reads."""
    _ex, tg = _triaged("kept25.jsonl", "kept22-smg-minimax-m2-multiple-tools")
    assert tg.sentence.startswith("the output starts with the call opener `<minimax:tool_call>` and holds no "
                                  "reasoning text")
    assert "the reasoning was split off before it reached us" in tg.sentence
    assert "omitted" not in tg.sentence
    assert not any("as requested" in e for e in tg.evidence)
    assert tg.nearest.sentence.endswith("a whole call or turn where the format has no place for one")


def test_no_fix_says_the_other_fidelity_reads_the_call_but_leaves_text():
    """DeepSeek V3's fenced call after a think block: improved fidelity (shown below the triage) reads the call and
    leaves "\\n\\n" in the content; the empty comparisons named for the missing call markers are the tool ones."""
    ex, tg = _triaged("kept26.jsonl", "kept23-fastdeploy-dsv3-0324-fenced-call-after-think")
    assert ex.other["tool_calls"] and ex.other["content"] == "\n\n"
    assert not tg.fixes
    assert tg.no_fix == ("no change of ours re-parses this output clean to a message with calls: at improved "
                         "fidelity the call is read but text is left ('\\n\\n' in the content), so that parse is "
                         "not clean")
    assert tg.sentence == ("the analysis found no tool-call markers; comparisons that came back empty: C1-tools: Is "
                           "the answer wrapped? An answer vs a tool-call turn.")


def test_an_empty_output_is_not_called_cut_short_inside_a_call():
    """A request with tools and an empty output: the parser stops expecting more, but nothing was cut — the model
    wrote nothing. (A row's request with Qwen3's template, the output emptied.)"""
    case = {**_row("kept26.jsonl", "kept23-ovms-qwen3coder-old-parser-call-between-prose"), "input": "",
            "template": "Qwen-Qwen3-0.6B.jinja"}
    _ex, tg = _run(case)
    assert tg.mistake == Mistake.NONE
    assert tg.sentence == "the output is empty: the model wrote nothing (no text, no call)"
    assert not tg.fixes


def test_an_empty_output_reads_as_empty_on_every_line_of_the_text_view():
    """The same empty output: the parse's own line, the cut line and the answer say the output is empty — none says
    it ends inside a tool call or was truncated (the text view is what `explain` prints)."""
    from core.explain.present import text_lines

    case = {**_row("kept26.jsonl", "kept23-ovms-qwen3coder-old-parser-call-between-prose"), "input": "",
            "template": "Qwen-Qwen3-0.6B.jinja"}
    ex, _tg = _run(case)
    assert ex.verdict_text == "incomplete: the output is empty"
    assert ex.answer()["from"] == "triage" and ex.answer()["name"] == "NONE"
    assert ex.findings == []
    text = "\n".join(text_lines(ex))
    assert "no mistake found — the output is empty: the model wrote nothing (no text, no call)" in text
    assert "ends inside" not in text and "truncated" not in text


# ollama/ollama#16686 (https://github.com/ollama/ollama/issues/16686): Qwen3-Coder's call as the issue quotes it,
# without `<tool_call>` (the template's parser reads it so), and a request offering the tool `Read`
_QCODER_16686 = ("<function=Read>\n<parameter=file_path>\n/path/to/the/file.md\n</parameter>\n</function>\n"
                 "</tool_call>")
_READ_TOOL = {"type": "function", "function": {"name": "Read", "description": "", "parameters": {
    "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}}
_READ_MESSAGES = [{"role": "user", "content": "read <path to a real 4 KB .md file>"}]


def _qcoder(output: str, *, tools: bool = True, fidelity: str = "llama.cpp"):
    req = ChatRequest.from_dict({"messages": _READ_MESSAGES, **({"tools": [_READ_TOOL], "tool_choice": "auto",
                                                                  "parallel_tool_calls": True} if tools else {})})
    ex = explain(_template("Qwen3-Coder.jinja"), req, output, fidelity=fidelity)
    return ex, ex.triage


def test_the_real_call_parses_clean_without_its_opener():
    """The premise of the next tests: the issue's output, as quoted, is a clean call of `Read`."""
    ex, tg = _qcoder(_QCODER_16686)
    assert ex.clean and [c["function"]["name"] for c in ex.message["tool_calls"]] == ["Read"]
    assert tg.mistake == Mistake.NONE


def test_a_tool_name_in_other_letter_case_is_named_not_an_omitted_opener():
    """ollama#16686's output with one change, the tool name written `read` for `Read`: the name is the fault (the
    same markup with `Read` parses clean), not the `<tool_call>` the format reads without; the nearest output is
    that one replace, at both fidelities (at improved an empty `Read` call inserted before `</tool_call>`, which
    leaves the real call in the content, is not it)."""
    out = _QCODER_16686.replace("<function=Read>", "<function=read>")
    for fidelity in ("llama.cpp", "improved"):
        _ex, tg = _qcoder(out, fidelity=fidelity)
        assert tg.mistake == Mistake.UNKNOWN_TOOL
        assert tg.sentence == ("the model called `read`; the request offers `Read`, which the output writes in "
                               "other letter case: with the name written `Read` the same output parses clean to a "
                               "call of `Read`, so the name is the only fault")
        assert "<tool_call>" not in tg.sentence
        assert [(e.kind, e.pos, e.old, e.new) for e in tg.nearest.edits] == [("replace", 10, "read", "Read")]
        assert [c["function"]["name"] for c in tg.nearest.message["tool_calls"]] == ["Read"]
        assert "content" not in tg.nearest.message
        assert tg.relation is None


def test_a_zero_width_space_in_the_tool_name_is_a_one_edit_nearest_output():
    """ollama#16686's output with one change, U+200B written inside `Read`: deleting that one character is the
    nearest output, and the name is the fault named."""
    out = _QCODER_16686.replace("<function=Read>", "<function=Re\u200bad>")
    _ex, tg = _qcoder(out)
    assert tg.mistake == Mistake.UNKNOWN_TOOL
    assert "the invisible character U+200B in it" in tg.sentence and "opener" not in tg.sentence
    assert [(e.kind, e.pos, e.old, e.new) for e in tg.nearest.edits] == [("delete", 12, "\u200b", "")]
    assert tg.nearest.output == _QCODER_16686


def test_a_request_without_tools_is_not_said_to_need_a_rerun():
    """ollama#16686's output with the request's tools left out: nothing says the call is "not complete enough to
    parse" or that the model must run again — with the tools sent the same output parses clean."""
    _ex, tg = _qcoder(_QCODER_16686, tools=False)
    assert tg.mistake == Mistake.TOOLS_NOT_SENT and not tg.fixes
    assert tg.no_fix == ("the request carries no tools, so the parser reads no call, and no change of ours adds "
                         "the tools the model was given (their names and parameters are not in the request): send "
                         "them and parse this output again")
    assert "re-run" not in tg.no_fix and "not complete" not in tg.no_fix
    ex, _tg = _qcoder(_QCODER_16686)
    assert ex.clean and ex.message["tool_calls"]


def test_the_count_of_call_blocks_is_the_outputs_not_a_scanned_windows():
    """ollama#16686's output with one change, repeated with a line of text before each copy (3,000 and 5,000
    copies, more than the 256 KB the triage scans for the shape): the count said is the output's."""
    copy = "I'll read it.\n\n" + _QCODER_16686 + "\n"
    for n in (3000, 5000):
        _ex, tg = _qcoder(copy * n)
        assert tg.mistake == Mistake.TRAILING_TEXT
        assert tg.sentence.endswith(f"the output writes {n} call blocks and the parse reads 1")
