"""The lossless contract to the character (core.chat.char_audit, docs/fidelity-lossless.md "To the character"):
every character of an output is a field's text, markup, whitespace a named rule trims, or lost; the word check
(core.chat.lossless) misses what loses no word. At improved nothing is lost on the real-output sets, the drift
suite, the reference cases (the two pinned GPT-OSS drops aside) and the bench's hostile outputs (repair
unparsed-characters); at llama.cpp fidelity the parse is llama.cpp's and the audit reports what it drops."""

from __future__ import annotations

import json
from functools import lru_cache

import pytest

from bench.char_audit import measure, real_sets
from core.chat.casefiles import parse_case
from core.chat.char_audit import Account, LostKind, TrimRule, audit_chars, audit_parse
from core.chat.lossless import lost_word_spans, parser_marks
from core.chat.message import AssistantMessage, ToolCall
from core.chat.realset import load_cases
from core.chat.stream import stream_deltas

from .conftest import ROOT, TEMPLATES

DATA = ROOT / "tests" / "data"
PINNED_DROPS = {"ref-0428", "ref-0429"}   # GPT-OSS built-in tool calls: llama.cpp's message, pinned (test_lossless)


@lru_cache(maxsize=None)
def _case(case_id: str):
    for d in real_sets():
        for c in load_cases(str(DATA / d)):
            if c.id == case_id:
                return c
    raise KeyError(case_id)


def _parse(case_id: str, fidelity: str, **options):
    c = _case(case_id)
    parser, msg = parse_case(str(TEMPLATES), c.template, c.request, c.output, fidelity, **options)
    return c.output, parser, msg


def _lost(audit) -> list[tuple[int, int, str, str]]:
    return [(s.start, s.end, s.where, s.text(audit.output)) for s in audit.lost()]


# -- the audit ---------------------------------------------------------------------------------------------------

def test_spans_cover_every_character_once():
    for c in load_cases(str(DATA / "real_outputs")):
        parser, msg = parse_case(str(TEMPLATES), c.template, c.request, c.output, "improved")
        spans = audit_parse(parser, c.output, msg).spans
        assert [s.start for s in spans] == [0] + [s.end for s in spans[:-1]] and spans[-1].end == len(c.output), c.id
        assert all(s.end > s.start for s in spans), c.id


def test_a_dropped_call_whose_words_the_message_holds():
    """MiniMax-M1's second search_web call (a kept batch): the stream view keeps the first call and the second is
    in no field, yet every word of it is somewhere in the message (the reasoning names Gemini, the first call has
    the same keys) — the word check finds nothing, the character audit finds the call's name and values."""
    out, parser, msg = _parse("kept-doc-m1-two-searches", "llama.cpp")
    assert lost_word_spans(out, msg, parser_marks(parser)) == []
    lost = [t for *_, t in _lost(audit_parse(parser, out, msg))]
    assert lost == ["search_web", "technology", "events", "Gemini\\", "latest\\", "release\\"]


def test_a_marker_cut_by_the_end_of_the_output():
    """vLLM's MiniMax-M3 fixture ends inside its call marker: llama.cpp's parse keeps "plain " and drops the
    marker's start (markup read there joins the lost tail); improved returns the output whole as content, as the
    fixture expects, one-shot and streamed; with the repair switched off it is llama.cpp's message again."""
    out, parser, msg = _parse("kept6-vllm-minimax-m3-partial-start", "llama.cpp")
    assert msg.content == "plain " and _lost(audit_parse(parser, out, msg)) == [
        (6, 27, LostKind.MARKER_PREFIX.value, "]<]minimax[>[<tool_ca")]
    # cut-marker-text (a call opener cut by the end is text) takes it first; unparsed-characters, the general
    # catch, takes it when that repair is off; with both off it is llama.cpp's message again
    for off_repairs, name, why in ((), "cut-marker-text", ""), (("cut-marker-text",), "unparsed-characters", "content"):
        out, parser, msg = _parse("kept6-vllm-minimax-m3-partial-start", "improved", disabled_repairs=off_repairs)
        assert msg.content == out and [(r.name, r.start, r.why) for r in msg.repairs] == [(name, 6, why)]
        assert audit_parse(parser, out, msg).lost() == []
        for chunk in (1, 3, len(out)):
            assert stream_deltas(parser, out, chunk=chunk)[1].to_openai() == msg.to_openai()
    _, _, off = _parse("kept6-vllm-minimax-m3-partial-start", "improved",
                       disabled_repairs=("unparsed-characters", "cut-marker-text"))
    assert off.content == "plain " and off.repairs == []


def test_a_cut_closer_after_a_call_is_markup():
    """ollama's GLM-4.6 fixture ends in "</tool_" after a complete call: the closer of the call the parse
    returns (unclosed-final-call), not text."""
    out, parser, msg = _parse("kept7-oll-glm46-partial-closer-at-end", "improved")
    spans = audit_parse(parser, out, msg).spans
    assert (spans[-1].account, spans[-1].where, spans[-1].text(out)) == (Account.MARKUP, "cut-closer", "</tool_")
    assert msg.content == "" and [c.name for c in msg.tool_calls] == ["grep"]


def test_repeated_calls_the_stream_view_drops():
    """Hermes 2 Pro (BFCL) writes 48 calls, the later ones without their closer: improved keeps the stream's view
    (27 calls) and lost the rest without losing a word — every word of it is a kept call's. The repair appends
    the text from the first dropped call's opener to the content."""
    cid = "kept4-bfcl-hermes-2-pro-llama-3-70b-parallel-function-71"
    out, parser, off = _parse(cid, "improved", disabled_repairs=("unparsed-characters",))
    assert lost_word_spans(out, off, parser_marks(parser)) == []
    assert audit_parse(parser, out, off).lost_chars() == 352
    out, parser, msg = _parse(cid, "improved")
    assert len(msg.tool_calls) == len(off.tool_calls) == 27
    (rec,) = [r for r in msg.repairs if r.name == "unparsed-characters"]
    assert out[rec.start:].startswith("<tool_call>") and msg.content == off.content + out[rec.start:]
    assert audit_parse(parser, out, msg).lost() == []


# classes on hand-made messages (the audit itself: which characters a message misses)
_MARKUP = ["<tool_call>", "</tool_call>", '{"name": "', '", "arguments": ']


def test_whitespace_a_field_collapsed_is_lost():
    out = "Line one.\n\n\nLine two."
    a = audit_chars(out, AssistantMessage(content="Line one.\nLine two."), [])
    assert _lost(a) == [(10, 12, LostKind.WHITESPACE.value, "\n\n")]


def test_whitespace_beside_markup_and_at_the_edges_is_trimmed():
    out = '  Hi.\n<tool_call>{"name": "f", "arguments": {}}</tool_call>\n'
    msg = AssistantMessage(content="Hi.", tool_calls=[ToolCall("f", "{}")])
    a = audit_chars(out, msg, _MARKUP)
    trimmed = [(s.text(out), s.where) for s in a.spans if s.account is Account.TRIMMED]
    assert trimmed == [("  ", TrimRule.OUTPUT_EDGE.value), ("\n", TrimRule.BESIDE_MARKUP.value),
                       ("\n", TrimRule.OUTPUT_EDGE.value)]
    assert a.lost() == []


def test_stray_punctuation_after_a_call_is_lost():
    out = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>}'
    msg = AssistantMessage(tool_calls=[ToolCall("f", '{"a": 1}')])
    assert _lost(audit_chars(out, msg, _MARKUP)) == [(59, 60, LostKind.STRAY_PUNCTUATION.value, "}")]


def test_a_partial_parse_holds_back_a_tail_it_may_still_read():
    out = "Hi <tool_ca"
    a = audit_chars(out, AssistantMessage(content="Hi "), _MARKUP, partial=True, openers=["<tool_call>"])
    assert a.lost() == [] and (a.spans[-1].account, a.spans[-1].text(out)) == (Account.PENDING, "<tool_ca")
    final = audit_chars(out, AssistantMessage(content="Hi "), _MARKUP, openers=["<tool_call>"])
    assert _lost(final) == [(3, 11, LostKind.MARKER_PREFIX.value, "<tool_ca")]


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_a_partial_kimi_k2_parse_holds_back_the_call_it_has_not_read_yet(fidelity):
    """Every prefix of TensorRT-LLM's Kimi K2 fixture, parsed as a partial output: the cut section opener
    (`Normal text<|tool_calls_sectio`) and the call name between its markers (`functions.get_weather:`, followed by
    markup) are held back, pending, never lost; the whole output, parsed final, loses nothing."""
    c = next(c for c in load_cases(str(DATA / "real_outputs_kept9")) if c.id == "kept9-trt-kimi-single")
    parser, _ = parse_case(str(TEMPLATES), c.template, c.request, c.output, fidelity)
    accounts = {}
    for k in range(1, len(c.output) + 1):
        out = c.output[:k]
        msg = parser.parse(out, True)
        a = audit_parse(parser, out, msg, partial=True)
        assert a.lost() == [], (k, out)
        accounts[out] = [(s.account, s.text(out)) for s in a.spans if s.account is Account.PENDING]
    assert accounts["Normal text<|tool_calls_sectio"] == [(Account.PENDING, "<|tool_calls_sectio")]
    cut = c.output[:c.output.index("get_weather:") + len("get_weather:")]
    assert (Account.PENDING, "get_weather") in accounts[cut]
    # the partial message audited as a final one: the held-back name is lost there (pending is for partial parses)
    held = parser.parse(cut, True)
    assert "get_weather" in [s.text(cut) for s in audit_parse(parser, cut, held).lost()]
    # parsed final, the output cut inside the section opener: unparsed-text keeps the word tail "sectio" (the audit
    # reads its "s" inside the cut marker); at improved unparsed-characters replaces it with the whole cut marker
    out = "Normal text<|tool_calls_sectio"
    msg = parser.parse(out, False)
    if fidelity == "improved":
        assert msg.content == out and [(r.name, r.start) for r in msg.repairs] == [("unparsed-characters", 11)]
        assert not audit_parse(parser, out, msg).lost()
    else:
        assert msg.content == "Normal textsectio" and [r.name for r in msg.repairs] == ["unparsed-text"]


def test_a_field_read_from_its_end_when_its_start_repeats_earlier_text():
    """Llama 3's semicolon-separated calls at llama.cpp fidelity: the first call is read, the rest is content, and
    the content starts with text the first call also has (`"name": "`): read backwards, nothing is lost."""
    out, parser, msg = _parse("llama3-semicolons", "llama.cpp")
    assert msg.content.startswith("; {") and audit_parse(parser, out, msg).lost() == []


def test_values_as_formats_write_them():
    """A pythonic call's 07 and an escaped quote, a JSON number in exponent form: the arguments' own spellings."""
    for cid in ("lfm2-leading-zero", "lfm2-escaped-string"):
        out, parser, msg = _parse(cid, "improved")
        assert audit_parse(parser, out, msg).lost() == [], cid
    msg = AssistantMessage(tool_calls=[ToolCall("amount", '{"orig":1.5e10}')])
    assert audit_chars("<tool_call>amount{orig:1.5e10}", msg, ["<tool_call>", "{", ":", "}"]).lost() == []


def test_a_key_written_again_between_markup_is_call_syntax():
    """MiniMax-M3's nested elements write a key again in its closing element (`</source>`) and a list as its key
    repeated (`<tag>a</tag><tag>b</tag>`): call syntax once the key is read, so no value is matched inside it."""
    out, parser, msg = _parse("kept6-vllm-minimax-m3-nested", "improved")
    audit = audit_parse(parser, out, msg)
    assert audit.lost() == []
    again = [s.text(out) for s in audit.spans if s.where == "call-key"]
    assert again == ["source", "campaign", "tag", "tag", "tag"]
    reads = [s.text(out) for s in audit.spans if s.where == "tool_calls[0].arguments"]
    assert reads[-4:] == ["duplicate_demo", "a", "b", "tag"]   # read from its end: the last closer is the key


def test_a_key_written_again_does_not_hide_a_value_the_message_drops():
    """The same output against a message without the list's second item: the dropped value is lost, and so are the
    keys written again on either side of it up to text that is read (`</tag>` of `a`, `<tag>` of `b`; the last
    `</tag>` is read from the end as the key): a key written again is call syntax only between text that is read."""
    out, parser, msg = _parse("kept6-vllm-minimax-m3-nested", "improved")
    args = json.loads(msg.tool_calls[0].arguments)
    args["duplicate_demo"]["tag"] = ["a"]
    dropped = AssistantMessage(content=msg.content, tool_calls=[ToolCall("create_order", json.dumps(args))])
    assert [text for _, _, _, text in _lost(audit_parse(parser, out, dropped))] == ["tag", "tag", "b"]
    # a second call the parse dropped writes the kept call's key: lost with it, as its name and value are
    out = '<invoke name="f"><city>Paris</city></invoke><invoke name="f"><city>London</city></invoke>'
    kept = AssistantMessage(tool_calls=[ToolCall("f", '{"city": "Paris"}')])
    markup = ['<invoke name="', '">', "<", "</", ">", "</invoke>"]
    # (read from its end: the dropped call's name, value and one key; the kept call's opening key and name)
    assert [text for _, _, _, text in _lost(audit_chars(out, kept, markup))] == ["f", "city", "city", "London"]


# -- the figures: lost characters per suite and fidelity (python -m bench.char_audit) ----------------------------

def _by_suite(results: list[dict], fidelity: str) -> dict[str, tuple[int, dict[str, int]]]:
    out: dict[str, tuple[int, dict[str, int]]] = {}
    for r in results:
        if r["fidelity"] != fidelity:
            continue
        n, kinds = out.get(r["suite"], (0, {}))
        for k, v in r["lost"].items():
            kinds[k] = kinds.get(k, 0) + v
        out[r["suite"]] = (n + bool(r["lost"]), kinds)
    return {s: v for s, v in out.items() if v[0]}


@lru_cache(maxsize=None)
def _measured() -> list[dict]:
    return measure(str(TEMPLATES))


def test_no_kept_aside_batch_is_read():
    """The kept-aside batches being collected (real_outputs_kept8 on) are never measured: each was listed by hand
    and the twenty-first batch (real_outputs_kept21) was not, so the audit read it. Every such directory on disk
    is now left out, a batch added later too."""
    batches = sorted(d.name for d in DATA.glob("real_outputs_kept*") if d.name[len("real_outputs_kept"):].isdigit()
                     and int(d.name[len("real_outputs_kept"):]) >= 8)
    assert "real_outputs_kept21" in batches and len(batches) >= 14
    assert not set(batches) & set(real_sets()), real_sets()
    assert "real_outputs_kept7" in real_sets() and "real_outputs_reports3" in real_sets()


def test_nothing_lost_at_improved():
    """Every character of every real output (the kept-aside batches being collected are not read), drift case,
    reference case and hostile output is in a field or markup at improved — except the pinned GPT-OSS drops."""
    results = [r for r in _measured() if r["id"] not in PINNED_DROPS]
    assert _by_suite(results, "improved") == {}
    assert sorted(r["id"] for r in _measured() if r["fidelity"] == "improved" and r["lost"]) == sorted(PINNED_DROPS)


def test_what_llama_cpp_drops_is_reported():
    """At llama.cpp fidelity the parse is llama.cpp's; the audit counts what it drops: (cases, characters by
    class) per suite."""
    got = _by_suite(_measured(), "llama.cpp")
    assert json.loads(json.dumps(got)) == {
        "reference": [2, {"text": 62}],
        "real_outputs_kept": [1, {"text": 48}],
        "real_outputs_kept6": [1, {"marker-prefix": 21}],
        "hostile": [11, {"marker-prefix": 11}],
    }


@pytest.mark.parametrize("case_id", ["kept6-vllm-minimax-m3-partial-start",
                                     "kept4-bfcl-hermes-2-pro-llama-3-70b-parallel-function-71"])
def test_llama_cpp_fidelity_is_untouched(case_id):
    """The repair is improved's: at llama.cpp fidelity no unparsed-characters record, whatever is lost."""
    _, _, msg = _parse(case_id, "llama.cpp")
    assert not [r for r in msg.repairs if r.name == "unparsed-characters"]


def test_parse_chars_says_where_the_text_went(tmp_path, monkeypatch, capsys):
    """``parse --chars`` prints, on stderr, the characters per account and each lost span: the cut marker that
    llama.cpp's parse drops, nothing lost at improved."""
    import io

    from core.cli import main

    c = _case("kept6-vllm-minimax-m3-partial-start")
    req = tmp_path / "req.json"
    req.write_text(json.dumps(c.request), encoding="utf-8")
    template = str(TEMPLATES / c.template)
    monkeypatch.setattr("sys.stdin", io.StringIO(c.output))
    assert main(["parse", template, "--request", str(req), "--compact", "--chars"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["chars: field 6, lost 21", 'lost 6-27 marker-prefix: "]<]minimax[>[<tool_ca"']
    monkeypatch.setattr("sys.stdin", io.StringIO(c.output))
    assert main(["parse", template, "--request", str(req), "--compact", "--chars", "--improved"]) == 0
    assert capsys.readouterr().err.splitlines() == ["chars: field 27"]


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_a_cut_reasoning_start_replaces_the_word_tail(fidelity):
    """MiniMax-M2's output (ref-0315) cut inside its reasoning start `<mm:think>`: unparsed-text keeps the word
    `thi`; at improved the whole cut marker `<mm:thi` replaces that tail (one record), at llama.cpp fidelity the
    word tail stays and the audit reports `<mm:` (found by the mutation test)."""
    from .test_lossless import _bundle

    parser = _bundle("ref-0315", fidelity).parser
    msg = parser.parse("<mm:thi")
    if fidelity == "improved":
        assert msg.content == "<mm:thi" and [(r.name, r.start) for r in msg.repairs] == [("unparsed-characters", 0)]
        assert audit_parse(parser, "<mm:thi", msg).lost() == []
    else:
        assert msg.content == "thi" and [(r.name, r.start) for r in msg.repairs] == [("unparsed-text", 4)]
        assert _lost(audit_parse(parser, "<mm:thi", msg)) == [(0, 4, LostKind.TEXT.value, "<mm:")]


def test_the_audit_runs_only_when_the_grammar_left_characters(monkeypatch):
    """Repair unparsed-characters audits a final parse only when a cheap check says a character may be lost: a
    parse whose grammar read every character to the end (Kimi K2's three calls) is not audited; an output cut
    inside a marker (MiniMax-M3's) is, and the repair still fires there."""
    import core.chat.repairs as repairs

    audited: list[str] = []

    def counting(parser, output, msg, **kw):
        audited.append(output)
        return audit_parse(parser, output, msg, **kw)

    monkeypatch.setattr(repairs, "audit_parse", counting)
    out, parser, msg = _parse("kimi-three", "improved")
    assert len(msg.tool_calls) == 3 and audited == [] and audit_parse(parser, out, msg).lost() == []
    out, parser, msg = _parse("kept6-vllm-minimax-m3-partial-start", "improved", disabled_repairs=("cut-marker-text",))
    assert audited == [out] and [r.name for r in msg.repairs] == ["unparsed-characters"]


def test_the_gate_keeps_every_message_of_the_sets():
    """The gate changes no message: every real-output case (one-shot, improved) parses to the same message and
    records with the audit forced on every parse."""
    import core.chat.repairs as repairs

    settle = repairs.settle
    for d in real_sets():
        for c in load_cases(str(DATA / d)):
            parser, gated = parse_case(str(TEMPLATES), c.template, c.request, c.output, "improved")
            repairs.settle = lambda *a, **kw: settle(*a, **{**kw, "read_whole": False})
            try:
                forced = parser.parse(c.output, False)
            finally:
                repairs.settle = settle
            assert (forced.to_openai(), [(r.name, r.start, r.end) for r in forced.repairs]) == \
                (gated.to_openai(), [(r.name, r.start, r.end) for r in gated.repairs]), c.id


def test_run_case_walks_the_output_once(monkeypatch):
    """Llama 4's pythonic three calls: the parse's repair audits the final message (not a parse its gate skips),
    and run_case's check of that message and the streams' finishing parses reuse that audit: one walk."""
    import core.chat.char_audit as char_audit
    from core.chat.realset import run_case

    walks: list[int] = []
    audit_chars_ = char_audit.audit_chars
    monkeypatch.setattr(char_audit, "audit_chars", lambda *a, **kw: walks.append(1) or audit_chars_(*a, **kw))
    result = run_case(_case("l4py-three-calls"), str(TEMPLATES), "improved")
    assert result.ok and result.lost == [] and walks == [1]


def test_a_cut_closer_whose_middle_is_markup_is_markup():
    """TensorRT-LLM's DeepSeek V3.2 call cut inside its invoke closer (``</｜DSML｜`` of ``</｜DSML｜invoke>``): repair
    unclosed-final-call closes the call, so the cut closer is markup. The audit read ``｜DSML｜`` as a marker of its
    own and reported the ``</`` before it lost; a cut one character earlier (``</｜``) was already markup."""
    c = next(c for c in load_cases(str(DATA / "real_outputs_kept9")) if c.id == "kept9-trt-dsv32-single")
    for end in ("</｜DSML｜", "</｜"):
        out = c.output[:c.output.index("</｜DSML｜invoke>") + len(end)]
        parser, msg = parse_case(str(TEMPLATES), c.template, c.request, out, "improved")
        assert [t.name for t in msg.tool_calls] == ["get_weather"] and msg.content == "Normal text"
        assert _lost(audit_parse(parser, out, msg)) == [], end


def test_the_gate_audits_a_call_whose_arguments_repeat_a_key():
    """GLM-4.5's two calls with one `<` of a closing `</arg_value>` missing: the grammar reads every character, the
    first call's date runs on to the second call's value, and the arguments write "date" twice — a JSON reader
    keeps the second, so the first value's text (the rest of the output) is lost. The gate skipped the audit (the
    message had that text nowhere else); a call whose arguments repeat a key is audited, as with the audit forced."""
    import core.chat.repairs as repairs

    c = _case("glm-mixed-content")
    out = c.output.replace("2025-08-01</arg_value>", "2025-08-01/arg_value>", 1)
    parser, gated = parse_case(str(TEMPLATES), c.template, c.request, out, "improved")
    settle = repairs.settle
    repairs.settle = lambda *a, **kw: settle(*a, **{**kw, "read_whole": False})
    try:
        forced = parser.parse(out, False)
    finally:
        repairs.settle = settle
    assert [(r.name, r.start, r.end) for r in gated.repairs] == [("call-marker-whitespace", 382, 383),
                                                                 ("unparsed-characters", 162, 395)]
    assert gated.to_openai() == forced.to_openai() and gated.content.endswith("2025-08-01</arg_value>\n</tool_call>")
    assert _lost(audit_parse(parser, out, gated)) == []


def test_a_cut_inside_a_dsml_section_closer_after_a_whole_call_loses_nothing():
    """SGLang's DeepSeek V4 call (its detector's test, case kept11-sglang-dsv4-preamble-in-same-delta) cut at every
    character inside its section closer ``</｜DSML｜tool_calls>``: the message is whole (the content, the call), yet
    the audit reported `name="` lost — it took call-section-omitted's ``\\n<｜DSML｜invoke`` at the line break, the
    longest piece there, and ``<｜DSML｜invoke name="``, which starts one character later, could no longer be read.
    The characters inside a markup piece whose others are markup are that piece's."""
    c = next(c for c in load_cases(str(DATA / "real_outputs_kept11"))
             if c.id == "kept11-sglang-dsv4-preamble-in-same-delta")
    closer = "</｜DSML｜tool_calls>"
    at = c.output.index(closer)
    whole = []
    for k in range(1, len(closer) + 1):
        out = c.output[:at + k]
        parser, msg = parse_case(str(TEMPLATES), c.template, c.request, out, "improved")
        audit = audit_parse(parser, out, msg)
        assert _lost(audit) == [], (k, _lost(audit))
        if msg.content == "Let me check.\n" and [t.name for t in msg.tool_calls] == ["get_weather"]:
            whole.append(k)
            assert any(s.account is Account.MARKUP and s.text(out).endswith('<｜DSML｜invoke name="')
                       for s in audit.spans), k
    # the cuts whose message is whole (the others give the section's text back as content too)
    assert whole == [2, 3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 15, 18, 19]


def test_text_a_markup_piece_only_brushes_is_still_lost():
    """The overlapping-piece reading takes only characters inside one occurrence of a piece: the same output with
    its call dropped from the message still loses the call's name and arguments between the pieces, and words
    after the section closer stay lost."""
    c = next(c for c in load_cases(str(DATA / "real_outputs_kept11"))
             if c.id == "kept11-sglang-dsv4-preamble-in-same-delta")
    markup = ["<｜DSML｜tool_calls>", '<｜DSML｜invoke name="', '">', '<｜DSML｜parameter name="', '" string="true">',
              "</｜DSML｜parameter>", "</｜DSML｜invoke>", "</｜DSML｜tool_calls>", "\n<｜DSML｜invoke"]
    whole = AssistantMessage(content="Let me check.", tool_calls=[ToolCall("get_weather", '{"city": "SF"}')])
    assert _lost(audit_chars(c.output, whole, markup)) == []
    assert [t for *_, t in _lost(audit_chars(c.output, AssistantMessage(content="Let me check."), markup))] == [
        "get_weather", "city", "SF"]
    assert [t for *_, t in _lost(audit_chars(c.output + " name missing", whole, markup))] == [" name missing"]
