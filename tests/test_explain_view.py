"""What explain shows (``core.explain.present``): the text view, ``explain --json`` and the Explain page speak with
one voice (issue 26) — the triage's mistake leads and an older cause that disagrees is shown as what the stop point
alone suggests; the stop point is said once; a huge output is shown as a bounded window; no internal names.

The rows are dev rows of the triage (``tests/data/triage/kept23.jsonl``, each with its public source)."""

from __future__ import annotations

import json

import pytest

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.present import Gap, text_lines, window_spans
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

REQUEST_KEYS = ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format", "enable_thinking",
                "add_generation_prompt", "chat_template_kwargs")


def _row(case_id: str, set_name: str = "kept23.jsonl") -> dict:
    rows = (ROOT / "tests" / "data" / "triage" / set_name).read_text(encoding="utf-8").splitlines()
    return next(r for r in map(json.loads, rows) if r["id"] == case_id)


def _explain(row: dict, output: str | None = None):
    tpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    req = ChatRequest.from_dict({k: row[k] for k in REQUEST_KEYS if k in row})
    return explain(tpl, req, row["input"] if output is None else output)


# LMDeploy's streamed reasoning split across tags (Qwen3): the triage reads a reasoning setting, the stop point's
# reading a marker without its line break
SPLIT_TAGS = "kept20-lmdeploy-required-stream-reasoning-split-tags"


def test_the_triages_mistake_leads_and_a_disagreeing_cause_is_what_the_stop_point_alone_suggests():
    ex = _explain(_row(SPLIT_TAGS))
    lines = text_lines(ex)
    mistake = [ln for ln in lines if ln.startswith("mistake: ")]
    assert len(mistake) == 1 and mistake[0].startswith("mistake: reasoning setting does not match the output — ")
    # no bare "cause:" beside the mistake: the one that agrees supports it, the other is the stop point's reading
    assert not [ln for ln in lines if ln.startswith("cause: ")]
    assert "also found (agrees with the mistake): reasoning prefill mismatch" in lines
    # (the parse placed every character: there is no stop point, so the older reading is named the parse's)
    assert ex.stop is None
    assert "what the parse alone suggests (the mistake above is the answer): drift: other marker" in lines
    data = ex.to_json()
    assert data["answer"]["from"] == "triage" and data["answer"]["name"] == "REASONING_SETTING"
    # --json reads in the text view's order: the verdict, the answer, the triage (diff, ranked fixes), then the rest
    keys = list(data)
    assert keys.index("answer") < keys.index("triage") < keys.index("spans") < keys.index("findings")
    assert [(f["name"], f["role"]) for f in data["findings"]] == [("REASONING_PREFILL", "agrees"),
                                                                  ("OTHER_MARKER", "stop point alone")]


# vLLM's Gemma 4 test: a string value written without Gemma 4's <|"|> delimiters; the parse stops at `London`
GEMMA_UNQUOTED = "kept20-vllm-gemma4-required-stream-unquoted-value"


def test_the_stop_point_is_said_once():
    ex = _explain(_row(GEMMA_UNQUOTED))
    lines = text_lines(ex)
    said = [ln for ln in lines if "output position 38" in ln and "@@" not in ln]     # not the diff's headers
    assert len(said) == 1 and said[0].startswith("stopped at output position 38"), said
    # the cause whose only evidence was the stop point says where to look instead
    assert "  - where the parse stopped, said once above" in lines


def test_a_huge_output_is_shown_as_a_window_around_the_stop_with_what_is_left_out():
    """The Gemma 4 row's output written 4,000 times over (228,000 characters, as a model that keeps repeating its
    call): the text view printed every character (a 228 KB span line and a 228 KB message line); it shows the
    window around the stop point and the repair, says how much is left out and where, and keeps exact positions."""
    row = _row(GEMMA_UNQUOTED)
    ex = _explain(row, row["input"] * 4000)
    lines = text_lines(ex)
    assert sum(len(ln) for ln in lines) < 20_000
    gp = len(ex.generation_prompt)
    assert f"  … {228_000 + gp - 879:,} characters left out (positions 879–{228_000 + gp:,}) …" in lines
    part = next(ln for ln in lines if "[repaired: truncated-call" in ln)
    assert part.startswith(f"  {gp:>5}-879   [repaired: truncated-call, part of {gp}-{228_000 + gp}] «<|tool_call>")
    assert any(ln.startswith("stopped at output position 38: ") for ln in lines)
    message = next(ln for ln in lines if ln.startswith("message: "))
    assert f"… {228_000 - 400:,} characters left out …" in message and len(message) < 600


def test_windows_keep_every_point_and_merge_overlaps():
    spans = [{"start": 0, "end": 10, "label": "generation prompt", "text": "p" * 10},
             {"start": 10, "end": 20_010, "label": "content", "text": "c" * 20_000}]
    shown = window_spans(spans, 20_010, [1_000, 1_500, 15_000])
    assert [(x.start, x.end) for x in shown if isinstance(x, Gap)] == [(0, 200), (2_300, 14_200), (15_800, 20_010)]
    assert [(x["start"], x["end"], x["whole"]) for x in shown if not isinstance(x, Gap)] == [
        (200, 2_300, [10, 20_010]), (14_200, 15_800, [10, 20_010])]
    assert Gap(2_300, 14_200).words(10) == "… 11,900 characters left out (output positions 2,290–14,190) …"
    # with line breaks near an edge, the edge moves to the line's start or end (no line cut mid-word)
    lines = [{"start": 0, "end": 12_000, "label": "content", "text": "Let me check.\n" * 857 + "Le"}]
    lines[0]["end"] = len(lines[0]["text"])
    shown = window_spans(lines, lines[0]["end"], [5_003])
    part = next(x for x in shown if not isinstance(x, Gap))
    assert part["text"].startswith("Let me check.\n") and part["text"].endswith("check.\n")
    assert (part["start"], part["end"]) == (4_200, 5_810)      # 4,203 moved back to 4,200, 5,803 on to 5,810
    # a short text is shown whole
    assert window_spans(spans[:1], 10, []) == spans[:1]


# MLX Omni Server's Llama 3 parser test: the call in an XML document's <json> element
LLAMA_XML = "kept19-mlxomni-llama3-invalid-responses-1"


def test_no_internal_names_in_the_text_view_or_the_page_data():
    # the parser's entry names (`prefix+rest`, `main` for a cut output) are said in the field's words
    ex = _explain(_row(GEMMA_UNQUOTED))
    assert text_lines(ex)[0].endswith("· parse recovered: the longest start that parses, the rest kept as content")
    assert ex.to_json()["verdict"] == "prefix+rest"      # --json keeps the entry's name beside the words
    cut = _explain(_row(GEMMA_UNQUOTED), _row(GEMMA_UNQUOTED)["input"][:30])
    assert text_lines(cut)[0].endswith("· parse incomplete: the output ends inside a tool call")
    assert cut.to_json()["verdict_text"] == "incomplete: the output ends inside a tool call"
    # the parser's rule names only on the line of the cut, named as such; the sentences say where in words
    lines = text_lines(cut)
    assert [ln for ln in lines if "tool-call > tool-0" in ln] == [
        "the output ends inside a tool call: expected `:`; found the end of the output (grammar rules: tool-call > "
        "tool-0 > tool > tool-args-as:gemma4 > gemma4-dict > gemma4-dict-kv > gemma4-dict-key)"]
    assert "mistake: output cut short (max_tokens or a stop string) — the output ends inside a tool call: nothing "\
           "after that point was generated" in lines
    assert lines.count("evidence:") == 0      # its one evidence line was the sentence, said once
    # the value the triage renders a call with (a probe no template writes) and the relation's class name
    lines = text_lines(_explain(_row(LLAMA_XML, "kept22.jsonl")))
    shown = "\n".join(lines)
    assert "zqv" not in shown and "FOREIGN_WRAPPER" not in shown, shown
    assert ('  render: `{"name":␣"get_current_weather",␣"parameters":␣{"location":␣"‹value›",␣"unit":␣"‹value›"}}` '
            "(‹value›: an argument's value)") in lines
    assert any(ln.startswith("call relation: every piece written, inside markup the template does not render (")
               for ln in lines)


def test_the_probe_values_shown_as_value_are_the_triages():
    from core.explain import nearest, triage
    from core.explain.call_relation import PROBE_VALUE

    fills = [triage._FILL.format(i) for i in range(12)] + [triage._NUMBER_FILL.format(i) for i in range(12)]
    assert all(PROBE_VALUE.fullmatch(f) for f in fills + [nearest._TAIL_FILL])
    assert not PROBE_VALUE.search("975312345 zqvx 1975310")


def test_no_invisible_or_bidi_character_reaches_the_text_view():
    # a key written with a U+202E inside (built to attack a view; no model wrote it): every line shows it escaped
    row = _row(GEMMA_UNQUOTED)
    ex = _explain(row, row["input"].replace("location", "loca\u202etion\u200b"))
    shown = "\n".join(text_lines(ex))
    assert "\u202e" not in shown and "\u200b" not in shown and "loca\\u202etion\\u200b" in shown


def test_an_output_that_ends_inside_the_reasoning_is_not_said_to_end_inside_a_tool_call():
    # SGLang's MiniMax-M2 test: a complete call after a prompt that opened the reasoning, never closed: the parse
    # accepts it as a prefix ending inside the reasoning (it said "the output ends inside a tool call")
    ex = _explain(_row("kept20-sglang-minimax-m2-single-param"))
    lines = text_lines(ex)
    assert lines[0].endswith("· parse incomplete: the output ends inside the reasoning")
    assert "the output ends inside the reasoning: expected `</think>`; found the end of the output (grammar rules: " \
           "reasoning)" in lines
    assert not any("inside a tool call" in ln for ln in lines)


def test_a_search_cut_by_its_budget_is_not_said_to_find_no_fix():
    """The Gemma 4 row written 4,000 times over: the triage's search stops at its budget and finds no fix, where the
    row alone gets one (keep special tokens). The text view said "no change of ours helps: … only the model's
    output (or a new repair) can fix it" — false; it says the search stopped at its budget and what to do."""
    row = _row(GEMMA_UNQUOTED)
    assert _explain(row).triage.fixes    # the row alone: a fix exists
    ex = _explain(row, row["input"] * 4000)
    assert ex.triage.budget_hit and not ex.triage.fixes
    lines = text_lines(ex)
    assert not [ln for ln in lines if ln.startswith("no change of ours helps")]
    assert "no change found within the search's budget (one may exist that it did not reach)" in lines
    said = next(ln for ln in lines if "stopped at its budget" in ln)
    assert said.startswith(f"  (the triage's search stopped at its budget after {ex.triage.searched} re-parse(s)")
    # the characters it reads stopped it: an excerpt relieves that (no "up to its first call": the parse read none)
    assert ex.triage.budget_limit == "characters" and not ex.message.get("tool_calls")
    assert said.endswith("— explain an excerpt of the output to search it further)")


def test_a_search_that_spent_its_re_parses_on_a_short_output_gives_no_advice_it_cannot_follow():
    """SGLang's Qwen3-Coder test (kept7): two calls without `<tool_call>`, 234 characters, no call read. The search
    spends its 40 re-parses — the most it makes, whatever the output's length or the machine — and the view said
    "explain an excerpt of the output (up to its first call) to search it fully": there is no call to cut at, and
    a shorter output would not raise the re-parses. It says which bound stopped the search and nothing else to do;
    the excerpt is advised only for the bounds a shorter output does relieve (characters read, CPU time)."""
    from core.explain.nearest import MAX_PARSES, Limit
    from core.explain.present import budget_words

    ex = _explain(_row("kept7-sgl-qwen3coder-double", "kept7.jsonl"))
    tg = ex.triage
    assert not ex.message.get("tool_calls") and tg.budget_hit and tg.budget_limit == Limit.PARSES.value
    assert tg.searched == MAX_PARSES and tg.to_json()["budget_limit"] == "re-parses"
    said = next(ln for ln in text_lines(ex) if "stopped at its budget" in ln)
    assert said == ("  (the triage's search stopped at its budget after 40 re-parse(s) (the most it makes): the "
                    "mistake and the fixes are what it found by then)")
    assert budget_words(3, Limit.CHARACTERS.value).endswith(" — explain an excerpt of the output to search it "
                                                            "further")
    assert budget_words(3, Limit.CPU.value, calls=True).endswith(
        "(explain's CPU time limit; CTE_EXPLAIN_BUDGET_S sets it for the command line): the mistake and the fixes "
        "are what it found by then — explain an excerpt of the output (up to its first call) to search it further")


# OpenVINO Model Server's Llama 3.1 test: three calls joined by `;` (kept26, with the engine's message as `expect`)
SEMICOLON_CALLS = "kept23-ovms-llama3-three-semicolon-calls"


def test_with_an_expected_message_the_parse_itself_is_said_to_give_it_or_not():
    """With ``--expect`` each ranked fix said whether it gives the expected message, but the parse itself did not:
    a maintainer had to compare the printed message with the file by eye. It is said beside the message, with the
    first difference, in the text view and in ``--json``; without an expected message nothing is said."""
    row = _row(SEMICOLON_CALLS, "kept26.jsonl")
    tpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    req = ChatRequest.from_dict({k: row[k] for k in REQUEST_KEYS if k in row})
    ex = explain(tpl, req, row["input"], expect=row["expect"])
    lines = text_lines(ex)
    said = lines[lines.index(next(ln for ln in lines if ln.startswith("message: "))) + 1]
    assert said.startswith("this parse does not give the expected message — first difference: content: expected "
                           "'', got ';{\"name\": \"another_tool\"")
    data = ex.to_json()
    assert data["gives_expected"] is False and data["expected_difference"].startswith("content: expected ''")
    better = explain(tpl, req, row["input"], fidelity="improved", expect=row["expect"])
    assert "this parse gives the expected message" in text_lines(better)
    assert better.to_json()["gives_expected"] is True and better.to_json()["expected_difference"] is None
    plain = explain(tpl, req, row["input"])
    assert plain.to_json()["gives_expected"] is None
    assert not [ln for ln in text_lines(plain) if "the expected message" in ln]


# SGLang router's GLM-4.5 test: Python literals in <arg_value>, a line break after each tag (kept25)
GLM_LITERALS = "kept22-sglrouter-glm4-python-literals"


def test_a_repair_fix_says_what_the_repair_accepts():
    """A ranked repair fix named only the repair (`call-marker-whitespace`): a maintainer of another engine could not
    tell what the model did that it tolerates, here a line break after each tag, not the Python literal the mistake
    names. Each repair of a fix is followed by its record's title."""
    ex = _explain(_row(GLM_LITERALS, "kept25.jsonl"))
    lines = text_lines(ex)
    fix = next(i for i, ln in enumerate(lines) if ln.startswith("  1. [repair] switch on the repair "
                                                                 "`call-marker-whitespace` alone"))
    assert lines[fix + 1] == ("     repair call-marker-whitespace accepts: Whitespace around a call's special-token "
                              "markers where the template writes none")
    assert lines[fix + 2].startswith("     gives: ")


def test_with_an_expected_message_the_older_fixes_say_whether_they_give_it():
    """The ranked fixes said whether they give the expected message; the older candidates printed below them ("other
    changes that re-parse clean") did not, on the same screen. Each now says it too, in the same words, and
    ``--json``'s ``fixes`` carry ``gives_expected`` (``null`` without an expected message)."""
    row = _row(SEMICOLON_CALLS, "kept26.jsonl")
    tpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    req = ChatRequest.from_dict({k: row[k] for k in REQUEST_KEYS if k in row})
    ex = explain(tpl, req, row["input"], expect=row["expect"])
    assert [(f.description, f.gives_expected) for f in ex.fixes] == [("parse at improved fidelity", True)]
    lines = text_lines(ex)
    at = lines.index("fix (fidelity, re-parsed clean): parse at improved fidelity")
    assert lines[at + 1] == "  gives the expected message" and lines[at + 2].startswith("  gives: ")
    assert ex.to_json()["fixes"][0]["gives_expected"] is True
    assert explain(tpl, req, row["input"]).to_json()["fixes"][0]["gives_expected"] is None


def test_each_reasoning_closer_is_listed_once():
    """vLLM's Nemotron 3 test output (kept8) opens no `</think>` after a prompt that opened the reasoning: the view
    said "never closes the reasoning (`</think>` or `</think>` or `<tool_call>`)" — the handler lists `</think>` and
    `</think>` with its line break, one marker once trimmed. Each closer is listed once, in the handler's order."""
    from core.explain.model import Setup, build_bundle, reasoning_markers

    row = _row("kept6-vllm-nemotron-v3-r-promote-unclosed", "kept8.jsonl")
    tpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    bundle = build_bundle(Setup(tpl, ChatRequest.from_dict({k: row[k] for k in REQUEST_KEYS if k in row}),
                                "llama.cpp", {}))
    tags = [t.strip() for t in bundle.parser.thinking_end_tags]
    assert tags.count("</think>") == 2                  # the handler's two spellings of one closer
    assert reasoning_markers(bundle)[1] == ["</think>", "<tool_call>"]
    lines = text_lines(_explain(row))
    assert "  - the output never closes the reasoning (`</think>` or `<tool_call>`): all of it is reasoning" in lines
