"""Repairs written from the misses of real_outputs_kept10 (development data since its first measure): each on the
batch's own cases (every case cites its public source), where it fires, that it is switchable and that the
llama.cpp fidelity reads the output as before."""

from __future__ import annotations

from core.chat.pipeline import build_chat_parser
from core.chat.casefiles import parse_case
from core.chat.realset import load_cases
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES
from .test_reasoning_repairs import _names, _streamed

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept10"))}
BARE = "kept10-vllm-gemma4-bare-call-after-thought-channel"
COLON = "kept10-vllm-gemma4-colon-prefixed-tool-call"
STANDALONE = "kept10-ollama-laguna-standalone-json-tool-call"
AFTER_TEXT = "kept10-ollama-laguna-standalone-json-tool-call-after-leading-content"
SINGLE = "kept10-vllm-nemotron-nano-v2-extract-tool-calls-wraps-single-object"
ARRAY = "kept10-vllm-nemotron-nano-v2-extract-tool-calls-from-nemotron-array"
# vLLM's test_bare_call_with_leading_whitespace (tests/tool_parsers/test_gemma4_regex_and_bare_calls.py at
# 33a7f0986ab85b31a5af305eb7e7b0b6ec03f406): a bare call after a line of prose, which vLLM's fallback tier reads
PROSE_THEN_BARE = 'some prose\ncall:bash{command:<|"|>make -j8<|"|>}'


def _parse(case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None):
    case = CASES[case_id]
    return parse_case(str(TEMPLATES), case.template, case.request, case.output if output is None else output,
                      fidelity, disabled_repairs=disabled)


# -- call-opener-dropped (Gemma 4) --------------------------------------------------------------------------------

def test_gemma4_bare_call_after_the_thought_channel_is_a_call():
    parser, msg = _parse(BARE)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("bash", '{"command":"cat /work/src/entry.c"}')]
    assert msg.reasoning_content.strip() == "I need to read the entry source file to inspect the crash point."
    assert not msg.content and _names(msg) == ["call-opener-dropped"]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[BARE].output, size).to_openai() == msg.to_openai()


def test_gemma4_opener_with_a_stray_colon_is_a_call():
    parser, msg = _parse(COLON)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("bash", '{"command":"pytest"}')]
    assert not msg.content and _names(msg) == ["call-opener-dropped"]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[COLON].output, size).to_openai() == msg.to_openai()


def test_gemma4_dropped_opener_without_the_repair_stays_content():
    for kw in ({"disabled": ("call-opener-dropped",)}, {"fidelity": "llama.cpp"}):
        for case_id, tail in ((BARE, 'call:bash{command:<|"|>cat /work/src/entry.c<|"|>}'),
                              (COLON, CASES[COLON].output)):
            _, msg = _parse(case_id, **kw)
            assert msg.tool_calls == [] and msg.content == tail


def test_gemma4_bare_call_after_prose_stays_content():
    _, msg = _parse(BARE, output=PROSE_THEN_BARE)
    assert msg.tool_calls == [] and msg.content == PROSE_THEN_BARE and not _names(msg)



def test_gemma4_bare_call_cut_by_the_end_of_the_output_comes_back_whole():
    """vLLM's bare-call and stray-colon cases cut anywhere inside their call (the model stopped at its token limit):
    no call, and the content is the call's text from its ``call:`` (from the ``<|tool_call>:`` before it), as at
    the llama.cpp fidelity (vLLM's fallback tier reads only a whole ``call:NAME{…}``). The repair used to give
    ``bash{command:…`` or ``ba``: ``call:`` was in no field; and the lead-in alone (``call:``,
    ``<|tool_call>:call:``) gave an empty message: the text is given back as a marked call's cut opener is
    (``cut-marker-text`` before the name is read, ``truncated-call`` after)."""
    # (the stray-colon case from its colon on: "<|tool_call>" alone is the marked opener, markup as before)
    for case_id, lead, first in ((BARE, "call:bash", 1), (COLON, "<|tool_call>:", len("<|tool_call>:"))):
        out = CASES[case_id].output
        start = out.index(lead)
        parser, _ = _parse(case_id)
        for cut in range(start + first, len(out)):
            msg = parser.parse(out[:cut], False)
            assert msg.tool_calls == [] and msg.content == out[start:cut], (case_id, cut)
            assert "cut-marker-text" in _names(msg) or "truncated-call" in _names(msg), (case_id, cut)
            for size in (1, 3, 17):
                assert _streamed(parser, out[:cut], size).to_openai() == msg.to_openai()


# -- standalone-json-call (Poolside Laguna) ------------------------------------------------------------------------

def test_laguna_answer_that_is_a_json_call_is_a_call():
    parser, msg = _parse(STANDALONE)
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("get_weather", '{"location":"Paris","days":3}')]
    assert not msg.content and _names(msg) == ["standalone-json-call"]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[STANDALONE].output, size).to_openai() == msg.to_openai()


def test_laguna_json_call_without_the_repair_is_no_call():
    _, msg = _parse(STANDALONE, disabled=("standalone-json-call",))
    assert msg.tool_calls == [] and msg.content == CASES[STANDALONE].output
    _, msg = _parse(STANDALONE, fidelity="llama.cpp")   # llama.cpp reads the answer as reasoning
    assert msg.tool_calls == [] and msg.reasoning_content == CASES[STANDALONE].output


def test_laguna_json_call_after_a_line_of_text_stays_content():
    _, msg = _parse(AFTER_TEXT)
    assert msg.tool_calls == [] and msg.content == CASES[AFTER_TEXT].output and not _names(msg)


def test_laguna_json_of_an_undeclared_tool_stays_content():
    case = CASES[STANDALONE]
    request = ChatRequest.from_dict({**case.request, "tools": [
        {**t, "function": {**t["function"], "name": "get_forecast"}} for t in case.request["tools"]]})
    template = ChatTemplate((TEMPLATES / case.template).read_text(encoding="utf-8"), case.template)
    msg = build_chat_parser(template, request, fidelity="improved").parser.parse(case.output, False)
    assert msg.tool_calls == [] and msg.content == case.output



def test_laguna_json_call_cut_before_its_name_is_whole_comes_back_whole():
    """ollama's standalone call cut by the end of the output before the tool's name is whole (the model stopped at
    its token limit): no call, and the content is the text from its ``{``, as from the name on (truncated-call)
    it already was. The repair used to give ``"na`` or ``get_wea``: the ``{"name":"`` it read was in no field; and
    the grammar's words alone (``{``, ``{"``, ``{"name":"``) gave an empty message: the lead-in is given back as a
    marked call's cut opener is (``cut-marker-text``)."""
    out = CASES[STANDALONE].output
    parser, _ = _parse(STANDALONE)
    for cut in range(1, out.index("}") + 1):   # up to the arguments' end (a call with whole arguments is read)
        msg = parser.parse(out[:cut], False)
        assert msg.tool_calls == [] and msg.content == out[:cut], cut
        for size in (1, 3, 17):
            assert _streamed(parser, out[:cut], size).to_openai() == msg.to_openai()


# -- both: a repair is reported only where it read something ------------------------------------------------------

def _name_read_at(case_id: str) -> tuple[int, int, str]:
    """(where the call's lead-in starts, the first cut that reads the tool's name, the repair that reads it) in
    the case's output: Gemma's name is read with the ``{`` after it, the JSON call's with its closing quote."""
    out = CASES[case_id].output
    if case_id == STANDALONE:
        return 0, out.index('"get_weather"') + len('"get_weather"'), "standalone-json-call"
    lead = out.index("<|tool_call>:call:") if case_id == COLON else out.index("call:bash")
    return lead, out.index("bash{") + len("bash{"), "call-opener-dropped"


def test_a_call_lead_in_cut_before_the_name_reports_no_repair():
    """The three cases cut inside the lead-in of their call, before the tool's name is read (the model stopped at
    its token limit, or a stream has not got further): neither the final nor the partial parse reports the repair
    that would read the call (it used to list ``call-opener-dropped`` for an output ``c`` or ``call:``,
    ``standalone-json-call`` for ``{``); from the cut that reads the name on, both do."""
    for case_id in (BARE, COLON, STANDALONE):
        out = CASES[case_id].output
        lead, named, repair = _name_read_at(case_id)
        parser, _ = _parse(case_id)
        for cut in range(lead + 1, named + 2):
            for partial in (False, True):
                msg = parser.parse(out[:cut], partial)
                assert (repair in _names(msg)) == (cut >= named), (case_id, cut, partial)
            if cut < named:
                for size in (1, 3):
                    assert repair not in _names(_streamed(parser, out[:cut], size)), (case_id, cut, size)


# -- call-list-unbracketed (Nemotron Nano v2) ---------------------------------------------------------------------

def test_nemotron_single_call_object_between_the_markers_is_a_call():
    parser, msg = _parse(SINGLE)   # <TOOLCALL>{"name": "lookup", …}</TOOLCALL>, the template writes [ … ]
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [("lookup", '{"query": "vllm"}')]
    assert not msg.content and _names(msg) == ["call-list-unbracketed"]
    for size in (1, 3, 17):
        assert _streamed(parser, CASES[SINGLE].output, size).to_openai() == msg.to_openai()


def test_nemotron_single_call_object_without_the_repair_stays_content():
    for kw in ({"disabled": ("call-list-unbracketed",)}, {"fidelity": "llama.cpp"}):
        _, msg = _parse(SINGLE, **kw)
        assert msg.tool_calls == [] and msg.content == CASES[SINGLE].output


def test_nemotron_bracketed_list_fires_nothing():
    _, msg = _parse(ARRAY)
    assert [c.name for c in msg.tool_calls] == ["get_weather"] and not _names(msg)


def test_nemotron_single_object_without_the_markers_stays_content():
    # the call object of the single-object case, without its <TOOLCALL> markers: JSON in the text, not a call
    bare = CASES[SINGLE].output.removeprefix("<TOOLCALL>").removesuffix("</TOOLCALL>")
    _, msg = _parse(SINGLE, output=bare)
    assert msg.tool_calls == [] and msg.content == bare
