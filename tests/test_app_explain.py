"""Explain page (AppTest): the span view, the stop point, a one-click fix that lands on the Overrides page, and
the reproducer downloads — on a corpus template with a real drift (``"parameters"`` instead of
``"arguments"``, tests/data/explain_cases.jsonl) and on a clean parse."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from .conftest import ROOT, TEMPLATES
from .test_app_helpers import html_bodies, json_views, page, start, unmd, use_corpus

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
DRIFT = 'Sure.\n<tool_call>\n{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>'


def _explain(output: str):
    at = use_corpus(start(), "Qwen-Qwen2.5-7B-Instruct.jinja")
    at.session_state["in_tools"] = json.dumps([TOOL])
    at.session_state["in_output"] = output
    _open_expanders(at)
    return page(at, "explain")


def _open_expanders(at) -> None:
    # the replay and the reproducers' code are drawn only once their expander is opened (what a click does)
    at.session_state["explain_open_replay"] = True
    at.session_state["explain_open_repro"] = True


class _Spans(HTMLParser):
    """(label, displayed text) of each span of the span view (whitespace glyphs kept as shown)."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[list[str]] = []
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "span" and a.get("class") == "cte-span":
            self.out.append([a["data-label"], ""])
            self.depth = 1
        elif tag == "span" and self.depth:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag == "span" and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth and self.out:
            self.out[-1][1] += data


def _labels(at) -> list[tuple[str, str]]:
    body = next(b for b in html_bodies(at) if "cte-spans" in b)
    p = _Spans()
    p.feed(body)
    return [(lab, text) for lab, text in p.out]


def test_span_view_stop_point_and_cause():
    at = _explain(DRIFT)
    body = next(b for b in html_bodies(at) if "cte-spans" in b)
    labels = [lab for lab, _ in _labels(at)]
    assert labels[0] == "generation prompt" and "content" in labels and "unparsed" in labels
    assert 'class="cte-stop"' in body and "found &quot;parameters&quot; · grammar rules: tool-calls" in body
    errs = [unmd(e.value) for e in at.error]
    assert any('expected `"arguments"`; found `"parameters"`' in e for e in errs), errs
    texts = [unmd(m.value) for m in at.markdown]
    # the triage's mistake (a field-name alias) leads; the stop point's reading agrees with it, in the CLI's words
    assert "**also found (agrees with the mistake): drift: other JSON shape**" in texts
    assert not any(t.startswith("**drift:") for t in texts)
    # the parse that made the message in the field's words (it said "parse recovered (recover-content)")
    assert "Route auto-parser · fidelity llama.cpp · parse recovered: everything after the reasoning kept as " \
           "content" in texts
    # the stop point is said once, in its own section: not again in the evidence under a cause
    stop_words = 'expected `"arguments"`; found `"parameters"`'
    assert [t for t in texts + errs if stop_words in t] == [e for e in errs if stop_words in e] and len(
        [e for e in errs if stop_words in e]) == 1


def test_one_click_fix_applies_the_override_on_the_overrides_page():
    at = _explain(DRIFT)
    fix = [unmd(m.value) for m in at.markdown if "tools.format.args_field" in unmd(m.value)]
    assert fix == ["**Analysis override**: tools.format.args_field = 'parameters'"]   # not "override: override …"
    at.button(key="explain_fix_0").click().run()
    assert not at.exception, at.exception
    assert "Overrides" in [t.value for t in at.title]
    ov = [v for v in at.session_state["overrides"].values() if v]
    assert ov == [{"tools.format.args_field": "parameters"}]
    # back on the Explain page the same output now parses clean into the call
    at = page(at, "explain")
    assert "Route auto-parser · fidelity llama.cpp · parse clean" in [unmd(m.value) for m in at.markdown]
    assert [lab for lab, _ in _labels(at)].count("tool name") == 1


def _repro_codes(at) -> list[str]:
    """The reproducers' code blocks: the case line (one line of JSON), the pytest test, the peg_tester snippet —
    not the page's JSON views (indented JSON, explorer.components.text.show_json)."""
    return [c.value for c in at.code if c.language in ("python", "cpp")
            or c.language == "json" and c.value.startswith('{"') and "\n" not in c.value.strip()]


def test_reproducer_downloads():
    at = _explain(DRIFT)
    buttons = {b.label: b for b in at.get("download_button")}
    assert set(buttons) == {"cases.jsonl line", "pytest test", "peg_tester snippet",
                            "Download the patched template"}     # the triage's template fix (see below)
    codes = _repro_codes(at)
    case = json.loads(codes[0])
    assert case["template"] == "Qwen-Qwen2.5-7B-Instruct.jinja" and case["input"] == DRIFT
    assert "def test_" in codes[1] and "run_case(case" in codes[1]
    assert 'peg_tester("models/templates/Qwen-Qwen2.5-7B-Instruct.jinja", detailed_debug)' in codes[2]
    assert 'static common_chat_tool repro_tool_0{ "get_weather", ' in codes[2]      # the tool, declared
    assert ".tools({ repro_tool_0 })" in codes[2] and codes[2].rstrip().endswith(".run();\n}")
    assert "Characterisation test" in codes[1] and "xfail" not in codes[1]


def test_triage_first_nearest_diff_ranked_fixes_and_expected_message():
    """The mistake, the nearest accepted output as a diff and the ranked fixes come first; a fix applies in one
    click; an expected message makes the pytest reproducer an xfail(strict) test carrying the cause (a regression
    test once the applied fix gives that message)."""
    at = _explain(DRIFT)
    heads = [h.value for h in at.subheader]
    assert heads.index("What the model did") < heads.index("Where every character went")
    texts = [unmd(m.value) for m in at.markdown]
    assert any(t.startswith("**field-name alias** — the model wrote `\"parameters\"` where the template writes "
                            "`\"arguments\"`") for t in texts), texts
    diff = [c.value for c in at.code if c.language == "diff"]
    # the original and the edited window on their own lines, the changed columns marked under each (issue 26)
    assert diff and ['- call>↵{"name":␣"get_weather",␣"parameters":␣{"city":␣"Paris"}}↵</tool_ca',
                     '?                               ------------',
                     '+ call>↵{"name":␣"get_weather",␣"arguments":␣{"city":␣"Paris"}}↵</tool_ca',
                     '?                               +++++++++++'] == diff[0].splitlines()[1:]
    fixes = [t for t in texts if t[:3] in ("1. ", "2. ", "3. ")]
    assert fixes[0] == ("1. repair: switch on the repair `arguments-key-alias` alone (improved fidelity with only "
                        "this repair)")
    # the template edit that makes the template render what the model wrote, re-analysed and re-parsed
    assert any(f.endswith("template: patch the template: write `\"parameters\"` where it writes `\"arguments\"` "
                          "(1 place(s))") for f in fixes), fixes
    fidelity_before = at.session_state["fidelity"]
    at.button(key="triage_fix_0").click().run()
    assert not at.exception, at.exception
    # the repair is switched on alone: this page parses at improved fidelity with only it; the session's
    # fidelity (the Playground's) is left as it was
    assert at.session_state["fidelity"] == fidelity_before != "improved"
    assert [unmd(i.value) for i in at.info if i.value.startswith("Switched on alone")] == [
        "Switched on alone: the repair(s) arguments-key-alias — this page parses at improved fidelity with only "
        "these repairs on (the Playground keeps its own fidelity)."]
    assert any("parse clean" in unmd(m.value) and "fidelity improved" in unmd(m.value) for m in at.markdown)
    at.button(key="explain_only_off").click().run()
    assert not any(i.value.startswith("Switched on alone") for i in at.info)
    assert any("fidelity llama.cpp" in unmd(m.value) for m in at.markdown)
    at.button(key="triage_fix_0").click().run()
    at.text_area(key="explain_expect").input(json.dumps(
        {"role": "assistant", "content": "Sure.", "tool_calls": [{"type": "function", "id": "", "function": {
            "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})).run()
    # the fix is on, so the parse gives the expected message: a regression test that passes, not a strict xfail
    # that would fail at once as XPASS; with the repair off again, the reproducer fails until fixed
    code = next(c.value for c in at.code if c.language == "python")
    assert "Regression test" in code and "xfail" not in code
    at.button(key="explain_only_off").click().run()
    code = next(c.value for c in at.code if c.language == "python")
    assert "@pytest.mark.xfail(strict=True, reason='field-name alias: " in code
    # the expected message reaches the triage too: each ranked fix says whether it gives it, those that do first
    fixes = [unmd(m.value) for m in at.markdown if unmd(m.value)[:3] in ("1. ", "2. ", "3. ")]
    assert fixes[0] == ("1. repair: switch on the repair `arguments-key-alias` alone (improved fidelity with only "
                        "this repair) — gives the expected message"), fixes


def test_clean_parse_has_nothing_to_explain():
    at = _explain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    labels = _labels(at)
    assert ("tool name", "get_weather") in labels
    assert not [e for e in at.error]
    assert "Nothing to explain: the format accounts for every character." in [unmd(c.value) for c in at.caption]
    # a clean parse has nothing to fix: no "No candidate change parses this output clean" beside it
    assert not [c for c in at.caption if "No candidate change" in c.value]
    assert "Fixes that re-parse clean" not in [h.value for h in at.subheader]


def test_explain_words_are_plain():
    from explorer.components.text import md_code, split_rule_path

    words, path = split_rule_path("at output position 87 (in tool-calls > tool-call > tool): expected `\"a\"`")
    assert words == 'at output position 87: expected `"a"`' and path == "tool-calls > tool-call > tool"
    assert md_code('expected `"a"`; found `x`') == 'expected `"a"`\\; found `x`'  # code spans, the rest escaped


def test_streaming_replay_marks_new_and_held_back_text():
    at = use_corpus(start(), "Qwen-Qwen2.5-7B-Instruct.jinja")
    at.session_state["in_tools"] = json.dumps([TOOL])
    at.session_state["in_output"] = DRIFT
    at.session_state["in_explain_chunk"] = 10
    at.session_state["in_explain_step"] = 1
    _open_expanders(at)
    at = page(at, "explain")
    body = next(b for b in html_bodies(at) if "cte-stream" in b)
    assert 'data-label="held back"' in body and 'class="cte-new"' in body   # "<too" of "<tool_call>" waits
    p = _Spans()
    p.feed(body)
    assert p.out[-1][0] == "held back" and p.out[-1][1].startswith("<too")
    assert any("step 1 of" in unmd(c.value) and "held back" in unmd(c.value) for c in at.caption)


def test_invisible_and_bidi_characters_are_shown_not_applied():
    at = _explain("Hi \u202eevil <b>x</b>")
    body = next(b for b in html_bodies(at) if "cte-spans" in b)
    assert "\u202e" not in body and "\\u202e" in body   # the app's one escape (core.escapes)
    assert "<b>x</b>" not in body and "&lt;b&gt;x&lt;/b&gt;" in body


def test_json_views_mark_invisible_characters_of_tools_and_output():
    # the request's tool schema and every message shown as JSON: a U+202E there reversed what followed
    tool = json.loads(json.dumps(TOOL))
    tool["function"]["description"] = "x\u202ey"
    at = use_corpus(start(), "Qwen-Qwen2.5-7B-Instruct.jinja")
    at.session_state["in_tools"] = json.dumps([tool])
    at.session_state["in_output"] = "Hi \u202eevil\u200b\n" + DRIFT
    at = page(at, "explain")
    views = [j.value for j in json_views(at)]   # JSON text, the characters as JSON escapes (the same JSON)
    assert len(views) >= 2 and any("x\\u202ey" in v for v in views), views
    assert any(json.loads(v).get("tools", [{}])[0].get("function", {}).get("description") == "x\u202ey"
               for v in views if v.lstrip().startswith("{"))
    assert not any(ch in v for v in views for ch in "\u202e\u200b"), views


def test_replay_step_follows_a_shorter_output():
    at = _explain(DRIFT)
    at.session_state["in_explain_chunk"] = 4
    at = page(at, "explain")
    at.session_state["in_explain_step"] = 20
    at.session_state["in_output"] = "Hi"
    at = page(at, "explain")
    assert not at.exception and at.session_state["in_explain_step"] == 1


def _permalink(at) -> str:
    """The URL the Permalink section shows (the last code block of the page)."""
    assert "Permalink" in [h.value for h in at.subheader]
    return at.code[-1].value


def test_permalink_reopens_the_same_explanation(tmp_path, monkeypatch):
    from urllib.parse import parse_qsl, urlsplit

    from .test_app_edit import start_with

    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(TEMPLATES))  # a file: link reopens only inside an allowed folder
    at = use_corpus(start(), "Qwen-Qwen2.5-7B-Instruct.jinja")
    at.session_state["in_tools"] = json.dumps([TOOL])
    at.session_state["in_messages"] = json.dumps([{"role": "user", "content": "Weather in Paris?"}])
    at.session_state["in_output"] = DRIFT
    at = page(at, "explain")
    link = _permalink(at)
    parts = urlsplit(link)
    assert parts.path.endswith("/explain")
    params = dict(parse_qsl(parts.query))
    assert params["src"].startswith("file:") and params["src"].endswith("Qwen-Qwen2.5-7B-Instruct.jinja")
    assert set(params) == {"src", "x"}
    before = (_labels(at), [unmd(e.value) for e in at.error], [unmd(m.value) for m in at.markdown])

    again = page(start_with(params), "explain")      # a new session opened from the link
    assert again.session_state["in_output"] == DRIFT
    assert json.loads(again.session_state["in_tools"]) == [TOOL]
    assert json.loads(again.session_state["in_messages"]) == [{"role": "user", "content": "Weather in Paris?"}]
    assert (_labels(again), [unmd(e.value) for e in again.error], [unmd(m.value) for m in again.markdown]) == before
    assert 'expected `"arguments"`; found `"parameters"`' in " ".join(before[1])
    assert _permalink(again) == link
    # an edit after opening the link is kept (the link is restored once, not on every rerun)
    again.session_state["in_output"] = "Hi"
    again = page(again, "explain")
    assert again.session_state["in_output"] == "Hi" and _permalink(again) != link


def test_damaged_permalink_says_so_on_the_page_it_opens():
    # the sidebar is drawn before the page reads x=…: the message once waited for the next click, shown
    # then beside whatever the visitor did
    from .test_app_edit import start_with

    at = page(start_with({"src": "bundled:plain-chat.jinja", "x": "A" * 300}), "explain")
    errs = [unmd(e.value) for e in at.error]
    assert any(e.startswith("the link's x=… cannot be read:") for e in errs), errs
    at = page(at, "explain")
    assert not any("the link's x=" in unmd(e.value) for e in at.error)


def test_no_second_fixes_section_contradicts_a_ranked_fix():
    # a call whose closer a stop string took: the ranked fix is the server's; the candidate changes below once
    # said "No candidate change … parses this output clean" under it
    at = _explain('Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}')
    assert any(b.label == "Use this fix" for b in at.button)
    assert "Fixes that re-parse clean" not in [h.value for h in at.subheader]
    assert not any("No candidate change" in c.value for c in at.caption)


def test_permalink_too_large_offers_the_reproducer():
    # 4000 CJK characters in a scrambled order: they do not compress below the link limit
    big = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(4000))
    at = _explain(big)
    assert "Permalink" in [h.value for h in at.subheader]
    warn = [unmd(w.value) for w in at.warning]
    assert any("too large for a link" in w and "download the reproducer" in w for w in warn), warn
    assert "x" not in at.query_params
    assert not any(c.value.startswith("http") for c in at.code)


def test_permalink_state_round_trips_and_rejects_damage():
    from explorer.urlstate import decode_explain, encode_explain

    req = {"messages": [{"role": "user", "content": "é ✓"}], "tools": [TOOL], "tool_choice": "auto"}
    value = encode_explain(req, DRIFT)
    assert set(value) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_explain(value) == (req, DRIFT)
    assert decode_explain(value[:-5]) is None and decode_explain("not-a-link") is None


def test_a_template_llama_cpp_cannot_render_is_explained_in_one_line():
    # vLLM's Gemma 3 pythonic template: llama.cpp's Jinja dialect lacks selectattr(attr, "undefined")
    at = use_corpus(start(), "vllm-tool_chat_template_gemma3_pythonic.jinja")
    at.session_state["in_tools"] = json.dumps([TOOL])
    at.session_state["in_output"] = "[get_weather(city='Paris')]"
    at = page(at, "explain")
    assert not at.exception
    warned = [unmd(w.value) for w in at.warning]
    assert any(w.startswith("the template does not render in llama.cpp's Jinja dialect") and "--improved" in w
               for w in warned), warned


def test_closed_replay_and_reproducers_are_not_drawn():
    # drawn only once opened: the replay (computed in a worker) and three highlighted code blocks were paid on
    # every visit of the page while their expanders stayed closed
    at = use_corpus(start(), "Qwen-Qwen2.5-7B-Instruct.jinja")
    at.session_state["in_tools"] = json.dumps([TOOL])
    at.session_state["in_output"] = DRIFT
    at = page(at, "explain")
    assert not [b for b in html_bodies(at) if "cte-stream" in b]
    assert not _repro_codes(at)
    assert {"cases.jsonl line", "pytest test", "peg_tester snippet"} <= {b.label for b in at.get("download_button")}
    _open_expanders(at)
    at.run()
    assert [b for b in html_bodies(at) if "cte-stream" in b]
    assert len(_repro_codes(at)) == 3


def test_a_fix_re_parsed_at_improved_says_so_and_its_click_applies_it_there():
    """mistral-inference-162 (tests/data/triage/cases.jsonl, its source URL there): the decoder dropped
    `[TOOL_CALLS]`; keeping special tokens re-parses only at improved fidelity (the v0.3 format then also wants the
    call id the model never wrote). The fix's line says so, and its one click puts the restored output in the box
    and switches to improved, where it parses clean into the call."""
    c = next(json.loads(x) for x in open(ROOT / "tests" / "data" / "triage" / "cases.jsonl", encoding="utf-8")
             if '"mistral-inference-162"' in x)
    at = use_corpus(start(), c["template"])
    at.session_state["in_tools"] = json.dumps(c["tools"])
    at.session_state["in_output"] = c["input"]
    at = page(at, "explain")
    texts = [unmd(m.value) for m in at.markdown]
    server = [t for t in texts if t.startswith("2. server: ")]
    assert server and server[0].endswith("— re-parsed at improved fidelity: its one click switches to improved"), texts
    assert not [t for t in texts if t.startswith("1. repair: ") and "re-parsed at" in t]   # says improved itself
    assert at.session_state["fidelity"] != "improved"
    at.button(key="triage_fix_1").click().run()
    assert not at.exception, at.exception
    assert at.session_state["fidelity"] == "improved"
    assert at.session_state["in_output"] == "[TOOL_CALLS] " + c["input"]
    assert any(unmd(s.value).endswith("at improved fidelity (switched)") for s in at.success), [s.value for s in at.success]
    assert any("fidelity improved · parse clean" in unmd(m.value) for m in at.markdown)


def test_an_expected_message_nested_too_deeply_is_named_not_a_page_failure():
    """`[` typed 100,000 times in the Reproducer box stopped the page with "This page failed: RecursionError"
    (seen in chromium); it is named like any other unusable expected message and the reproducers stay."""
    at = _explain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    at.text_area(key="explain_expect").input("[" * 100_000).run()
    assert not at.exception, at.exception
    shown = [unmd(w.value) for w in at.warning] + [unmd(e.value) for e in at.error]
    assert any(t.startswith("The expected message cannot be used (it nests too deeply to read as JSON)")
               for t in shown), shown
    assert not any("page failed" in t for t in shown), shown
    assert any(c.language == "python" and "def test_" in c.value for c in at.code)


def test_a_link_whose_request_leaves_thinking_unset_keeps_it_unset():
    """A request that leaves enable_thinking null (as explain's cases.jsonl line writes an unset flag; here vLLM's
    Gemma 4 test output of kept11) opens with the Playground's choice "template default" and sends null again, as
    the command line does; opened from a link, `bool(None)` first turned thinking off, then it was read as true —
    and true let no template-default-thinking repair apply, so the page offered other fixes than the CLI."""
    from streamlit.testing.v1 import AppTest

    from explorer.urlstate import encode_explain

    from .test_app_helpers import APP, TIMEOUT

    rows = (ROOT / "tests" / "data" / "triage" / "kept11.jsonl").read_text(encoding="utf-8").splitlines()
    row = next(r for r in map(json.loads, rows) if r["id"] == "kept10-vllm-gemma4-multiple-sequential-canonical-calls")
    req = {k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format",
                               "enable_thinking")}
    assert req["enable_thinking"] is None
    for flag in (None, False, True):
        at = AppTest.from_file(APP, default_timeout=TIMEOUT)
        at.query_params["x"] = encode_explain(dict(req, enable_thinking=flag), row["input"])
        at.switch_page("explorer/pages/explain.py").run()
        assert not at.exception, at.exception
        assert at.session_state["in_enable_thinking"] is flag
        assert at.session_state["in_output"] == row["input"]
        assert json.loads(at.code[0].value)["enable_thinking"] is flag      # the request the page explains


LAGUNA_ID = "kept10-ollama-laguna-tool-call"


def _cli_fixes(tmp_path, row: dict, flag) -> list[str]:
    """``python -m core explain --json``'s fixes for the row's request with enable_thinking ``flag``, as the page
    writes them: the ranked fixes ("1. repair: …") and the fixes that re-parse clean ("**Fidelity**: …")."""
    req = {k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format",
                               "add_generation_prompt")}
    req_file = tmp_path / "request.json"
    req_file.write_text(json.dumps(dict(req, enable_thinking=flag)), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "core", "explain", str(TEMPLATES / row["template"]), "--request",
                          str(req_file), "--json"], input=row["input"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    ex = json.loads(out)
    kinds = {"override": "Analysis override", "fidelity": "Fidelity", "request": "Request setting"}
    return ([f"{i + 1}. {f['kind']}: {f['description']}" for i, f in enumerate(ex["triage"]["fixes"])]
            + [f"**{kinds[f['kind']]}**: {f['description']}" for f in ex["fixes"]])


def _page_fixes(at) -> list[str]:
    lines = [unmd(m.value) for m in at.markdown]
    return [t for t in lines if t[:3] in ("1. ", "2. ", "3. ") or t.startswith(("**Fidelity**", "**Analysis",
                                                                               "**Request"))]


def test_the_playgrounds_template_default_thinking_gives_the_clis_fixes(tmp_path):
    """kept11's Laguna row leaves enable_thinking unset: the CLI offers call-marker-whitespace with the template's own
    thinking default (thinking on, the page's only choice before, adds call-ends-reasoning). The Playground's
    three-way choice sends each of template default / on / off, and the Explain page then offers exactly the CLI's
    fixes for that flag."""
    rows = (ROOT / "tests" / "data" / "triage" / "kept11.jsonl").read_text(encoding="utf-8").splitlines()
    row = next(r for r in map(json.loads, rows) if r["id"] == LAGUNA_ID)
    assert row["enable_thinking"] is None
    at = use_corpus(start(), row["template"])
    at.session_state["in_tools"] = json.dumps(row["tools"])
    at.session_state["in_messages"] = json.dumps(row["messages"])
    at.session_state["in_parallel"] = row["parallel_tool_calls"]
    at.session_state["in_output"] = row["input"]
    page(at, "playground")
    choice = at.radio(key="in_thinking_choice")
    assert choice.options == ["template default", "on", "off"] and choice.value == "template default"
    seen = {}
    for shown, flag in (("on", True), ("off", False), ("template default", None)):
        page(at, "playground")
        at.radio(key="in_thinking_choice").set_value(shown).run()
        assert at.session_state["in_enable_thinking"] is flag
        page(at, "explain")
        assert json.loads(at.code[0].value)["enable_thinking"] is flag
        seen[shown] = _page_fixes(at)
        assert seen[shown] == _cli_fixes(tmp_path, row, flag), shown
    # the prompt the template's own default renders is part of the fix (the repair alone reads the call as reasoning)
    assert seen["template default"] == ["1. repair: switch on the repairs `call-marker-whitespace`, "
                                        "`template-default-thinking`",
                                        "**Fidelity**: parse at improved fidelity (repaired: call-marker-whitespace)"]
    assert "call-ends-reasoning" in seen["on"][0] and "call-ends-reasoning" not in seen["template default"][0]


def test_a_tool_name_holding_backticks_is_shown_as_code_on_the_page():
    """A tool name built to attack the page's Markdown (backtick runs, dollars, an icon, a link: no model wrote it)
    named by the triage sentence: the page's Markdown shows it whole in one code span and makes no link of it."""
    import html

    markdown_it = pytest.importorskip("markdown_it")   # CommonMark's reading of the page's Markdown (rich ships it)
    from .test_explain_hostile import HOSTILE_NAME

    tool = json.loads(json.dumps(TOOL))
    tool["function"]["name"] = HOSTILE_NAME
    at = use_corpus(start(), "Qwen-Qwen2.5-7B-Instruct.jinja")
    at.session_state["in_tools"] = json.dumps([tool])
    at.session_state["in_output"] = ('<tool_call>\n{"name": ' + json.dumps(HOSTILE_NAME)
                                     + ', "arguments": {}}\n</tool_call>')
    at = page(at, "explain")
    said = [m.value for m in at.markdown if "is called without" in m.value]
    assert said, [m.value for m in at.markdown]
    # (the code is cut after the ":" of ":material/" by an empty :color[], which Streamlit shows as nothing)
    shown = markdown_it.MarkdownIt("commonmark").renderInline(said[0]).replace("</code>:color[]<code>", "")
    assert f"<code>{html.escape(HOSTILE_NAME, quote=False)}</code> is called without <code>city</code>" in shown, \
        shown
    assert "<a " not in shown


def _triage_row(name: str, case_id: str) -> dict:
    rows = (ROOT / "tests" / "data" / "triage" / name).read_text(encoding="utf-8").splitlines()
    return next(r for r in map(json.loads, rows) if r["id"] == case_id)


def _explain_row(row: dict, kwargs: bool = False):
    at = use_corpus(start(), row["template"])
    if kwargs and row.get("chat_template_kwargs"):
        at.session_state["in_kwargs"] = json.dumps(row["chat_template_kwargs"])
    at.session_state["in_tools"] = json.dumps(row["tools"])
    at.session_state["in_messages"] = json.dumps(row["messages"])
    at.session_state["in_parallel"] = row["parallel_tool_calls"]
    at.session_state["in_output"] = row["input"]
    return page(at, "explain")


RELATION = "The template's call pieces against the output's markup"


def test_the_call_relation_shows_the_templates_pieces_against_the_outputs_markup():
    """The triage's relation on the page: the CLI's lines, each piece one code span, open when the relation decided
    the mistake (Muse Glimmer's tool channel, kept13: every piece written) and closed when it only names the rules'
    class (Qwen2.5-Coder's bare JSON call, kept14: the opener absent)."""
    from core.explain.call_relation import CallRelation, relation_lines

    from .test_call_relation import MUSE, QWEN_BARE

    at = _explain_row(_triage_row("kept13.jsonl", MUSE))
    box = next(e for e in at.expander if e.label == RELATION)
    assert box.proto.expanded
    shown = [unmd(m.value) for m in box.markdown]
    assert shown[0] == "call relation: consistent (it decided the mistake) — the template's call pieces against " \
                       "the output's markup"
    items = shown[1].split("\n")
    assert items[1:4] == ["- matched  `to=`", "- matched  `<|message|>`", "- matched  `<atem:function_calls>`"]
    assert items[-1] == "- the parse stopped in the call's name" and len(items) == 13

    at = _explain_row(_triage_row("kept14.jsonl", QWEN_BARE))
    box = next(e for e in at.expander if e.label == RELATION)
    assert not box.proto.expanded
    items = [unmd(m.value) for m in box.markdown][1].split("\n")
    assert items[1:] == ["- absent   `<tool_call>`", '- matched  `"name":`', '- matched  `"arguments":`',
                         "- absent   `</tool_call>`", "- foreign: none (no markup of the output's own around the call)"]
    # the lines the CLI prints, from the library's triage
    from core.chat.request import ChatRequest
    from core.explain.explain import explain
    from core.jinja.template import ChatTemplate

    row = _triage_row("kept14.jsonl", QWEN_BARE)
    t = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    tg = explain(t, ChatRequest.from_dict(row), row["input"]).triage.to_json()
    lines = relation_lines(CallRelation.from_json(tg["relation"]), tg["relation_decided"])
    assert ["- " + line for line in lines[1:]] == items


def test_no_relation_no_expander():
    # the drifted key of Qwen2.5: an alias, no call-format class — nothing of the relation is drawn
    at = _explain(DRIFT)
    assert RELATION not in [e.label for e in at.expander]


def test_a_cause_the_labelling_guide_added_is_named_on_the_page_with_its_ranked_fix():
    """The labelling guide's causes reach the page as the CLI names them: Command 4's prose before its action block
    (kept16), text before the call the format does not allow, with the repair that reads it (action-after-text, SGLang's
    Command 4 detector) ranked first and one click to use it."""
    at = _explain_row(_triage_row("kept16.jsonl", "kept14-sglang-cohere4-streaming-text-then-block"), kwargs=True)
    assert not at.exception, at.exception
    texts = [unmd(m.value) for m in at.markdown]
    assert any(t.startswith("**text before the call the format does not allow** — ") for t in texts), texts
    assert "1. repair: switch on the repairs `bare-answer-after-reasoning`, `action-after-text`" in texts, texts
    assert [b.label for b in at.button if b.label == "Use this fix"] == ["Use this fix"]


def test_a_huge_output_is_shown_as_a_window_around_the_stop_point():
    """The drift output after 40,000 lines of "Sure." (240,000 characters, under the demo's 256 KB cap): the span
    view drew every character; it draws the window around the stop point and says what it left out, where."""
    big = "Sure.\n" * 40_000 + DRIFT[len("Sure.\n"):]
    at = _explain(big)
    body = next(b for b in html_bodies(at) if "cte-spans" in b)
    assert len(body) < 60_000 and 'class="cte-stop"' in body
    call = big.index("<tool_call>")     # where the repair truncated-call starts; the stop is 36 characters on
    # 800 characters on from the output's start and back from the call, each edge moved to a line's end or start
    a, b = 804, (call - 800) // 6 * 6
    assert f"{b - a:,} characters left out (output positions {a}–{b:,})" in body
    assert any("Sure." in text for lab, text in _labels(at) if lab == "content")


def test_every_ranked_fix_applies_in_one_click_and_the_page_shows_the_message_it_gives():
    """Each ranked fix has one "Use this fix" button, the template patch too (it was a download only), and after a
    click the page shows the re-parsed message right under "Applied" (it was only in a closed expander further
    down)."""
    at = _explain(DRIFT)
    texts = [unmd(m.value) for m in at.markdown]
    fixes = [t for t in texts if t[:3] in ("1. ", "2. ", "3. ", "4. ", "5. ")]
    uses = [b for b in at.button if b.label == "Use this fix"]
    assert len(uses) == len(fixes) >= 2, (fixes, [b.label for b in at.button])
    patch = next(i for i, f in enumerate(fixes) if "template: patch the template" in f)
    at.button(key=f"triage_fix_{patch}").click().run()
    assert not at.exception, at.exception
    assert at.session_state["template"].origin == "edited"
    assert '"parameters"' in at.session_state["template"].source
    assert any(unmd(s.value).startswith("Applied: patch the template") for s in at.success), \
        [s.value for s in at.success]
    assert "The message now (the output re-parsed with the fix):" in [c.value for c in at.caption]
    now = json.loads(next(c.value for c in at.code if c.language == "json" and '"tool_calls"' in c.value))
    assert [c["function"]["name"] for c in now["tool_calls"]] == ["get_weather"]
    assert any("parse clean" in unmd(m.value) for m in at.markdown)


def test_a_cut_output_is_said_in_words_the_rule_names_kept_for_the_tooltip():
    """DRIFT cut inside the tool's name: the mistake's sentence and the causes said "ends inside tool-calls >
    tool-call > …" (the parser's rule names); they say "inside a tool call", the rule names stay in the tooltip."""
    at = _explain(DRIFT[:DRIFT.index("get_wea") + len("get_wea")])
    texts = [unmd(m.value) for m in at.markdown] + [unmd(w.value) for w in at.warning]
    assert any("ends inside a tool call" in t for t in texts), texts
    assert not [t for t in texts if " > " in t], [t for t in texts if " > " in t]
    assert any(t.startswith("Route auto-parser · fidelity llama.cpp · parse incomplete: the output ends inside a tool call") for t in texts), texts


def test_an_output_ending_inside_the_reasoning_is_not_said_to_end_inside_a_tool_call():
    """kept23's SGLang MiniMax-M2 row: the prompt opens the reasoning and the output never closes it; the page's
    warning said "The output ends inside a tool call"."""
    at = _explain_row(_triage_row("kept23.jsonl", "kept20-sglang-minimax-m2-single-param"))
    warnings = [unmd(w.value) for w in at.warning]
    assert any(w.startswith("The output ends inside the reasoning: expected `</think>`") for w in warnings), warnings
    assert not any("inside a tool call" in w for w in warnings)


def test_a_ranked_override_applies_in_one_click_and_the_page_stays_to_show_its_message():
    """kept15's Qwen2.5-Coder row (vLLM's parser test: the call wrapped in `<tools>`): its ranked fix is an analysis
    override; its click puts it on the Overrides page (with the provenance) and this page shows the message it gives."""
    row = _triage_row("kept15.jsonl", "kept13-vllm-qwen25-coder-single-tool-call")
    at = _explain_row(row)
    fixes = [unmd(m.value) for m in at.markdown if unmd(m.value).startswith("1. override")]
    assert fixes, [unmd(m.value) for m in at.markdown][:12]
    at.button(key="triage_fix_0").click().run()
    assert not at.exception, at.exception
    assert "Explain" in [t.value for t in at.title]
    assert [v for v in at.session_state["overrides"].values() if v]
    assert any(unmd(s.value).endswith("— it is on the Overrides page") for s in at.success), \
        [s.value for s in at.success]
    now = json.loads(next(c.value for c in at.code if c.language == "json" and '"tool_calls"' in c.value))
    assert [c["function"]["name"] for c in now["tool_calls"]] == ["get_current_weather"]


def test_a_long_output_is_replayed_in_wider_steps_with_a_window():
    # 30,000 characters in steps of 8 were 3,750 traced parses, each step sending the spans of its whole prefix (a
    # replay quadratic in memory): at most REPLAY_STEPS steps, each with its last REPLAY_WINDOW characters, said so
    from core.explain.trace_routes import REPLAY_STEPS, REPLAY_WINDOW

    long_output = ("Thinking about it. " * 1580)[:30_000]
    at = use_corpus(start(), "Qwen-Qwen2.5-7B-Instruct.jinja")
    at.session_state["in_tools"] = json.dumps([TOOL])
    at.session_state["in_output"] = long_output
    at.session_state["in_explain_chunk"] = 8
    _open_expanders(at)
    at = page(at, "explain")
    assert not at.exception
    caption = next(unmd(c.value) for c in at.caption if "step " in unmd(c.value) and " of " in unmd(c.value))
    assert f"step {REPLAY_STEPS} of {REPLAY_STEPS}:" in caption
    assert f"steps of 75 characters, not 8: a replay has at most {REPLAY_STEPS} steps" in caption
    assert f"the {REPLAY_WINDOW:,} characters before the step's end are shown (from 26,000)" in caption
    body = next(b for b in html_bodies(at) if "cte-stream" in b)
    assert len(body) < 60_000 and body.count("Thinking") >= 200


def test_each_ranked_fix_shows_the_message_it_gives_before_a_click():
    """The CLI prints under each ranked fix the message it gives; the page showed only the change and its button,
    so a maintainer had to click a fix to see whether it gives the message they want. Each fix now has the message
    in an expander of its own, as the CLI's ``gives:`` line has it."""
    at = _explain(DRIFT)
    labels = [e.label for e in at.expander]
    fixes = [unmd(m.value) for m in at.markdown if unmd(m.value)[:3] in ("1. ", "2. ", "3. ")]
    assert [f"The message fix {i} gives" for i in range(1, len(fixes) + 1)] == \
        [lab for lab in labels if lab.startswith("The message fix")]
    captions = [unmd(c.value) for c in at.caption]
    assert "repair arguments-key-alias accepts: 'parameters' for 'arguments' (and back) in a JSON call" in captions
    views = [json.loads(v.value) for v in json_views(at)]
    calls = [v for v in views if v.get("role") == "assistant" and v.get("tool_calls")]
    assert len(calls) >= len(fixes) and all(
        [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in v["tool_calls"]]
        == [("get_weather", {"city": "Paris"})] for v in calls), calls


def test_an_empty_output_is_said_to_be_empty_not_cut_inside_a_tool_call():
    """Qwen2.5 with a tool and nothing written: the page says the model wrote nothing, once, with no fix section
    that says no candidate parses it and no line that it ends inside a tool call."""
    at = _explain("")
    texts = [unmd(m.value) for m in at.markdown] + [unmd(w.value) for w in at.warning] \
        + [unmd(c.value) for c in at.caption]
    assert "the output is empty: the model wrote nothing (no text, no call)" in texts, texts
    assert any(t.startswith("Route auto-parser · fidelity llama.cpp · parse incomplete: the output is empty")
               for t in texts), texts
    assert any(t.startswith("The output is empty: ") for t in texts), texts
    assert not [t for t in texts if "inside a tool call" in t or "No candidate change" in t]
    assert [s.value for s in at.subheader].count("What the model did") == 1


def test_a_permalink_keeps_the_requests_key_order_and_the_page_explains_what_the_cli_explains(tmp_path):
    """The permalink wrote the request with its keys sorted (and the page sent it to explain sorted too), so a link
    reopened the tools' schemas in another order than the request had — `properties` before `type` — and the page
    explained another request than ``python -m core explain`` does for the same file (a template renders a tool's
    parameters in the order given). vLLM's Gemma 4 test output (kept11), whose request writes `type` first: the link
    round-trips the request byte for byte, and the page's reproducers (case line and pytest test: request, message,
    mistake, case id) are the CLI's ``--json`` ones."""
    from explorer.urlstate import decode_explain, encode_explain

    row = _triage_row("kept11.jsonl", "kept10-vllm-gemma4-multiple-sequential-canonical-calls")
    req = {k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format",
                               "enable_thinking")}
    assert list(req["tools"][0]["function"]["parameters"]) == ["type", "properties"]
    value = encode_explain(req, row["input"])
    back = decode_explain(value)
    assert back is not None and json.dumps(back[0], ensure_ascii=False) == json.dumps(req, ensure_ascii=False)
    at = use_corpus(start(), row["template"])
    at.query_params["x"] = value
    at.session_state["explain_open_repro"] = True
    at = page(at, "explain")
    shown = json.loads(at.code[0].value)      # the request the page explains, in its order
    assert json.dumps(shown["tools"], ensure_ascii=False) == json.dumps(req["tools"], ensure_ascii=False)
    req_file = tmp_path / "request.json"
    req_file.write_text(json.dumps(shown, ensure_ascii=False), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "core", "explain", str(TEMPLATES / row["template"]), "--request",
                          str(req_file), "--json"], input=row["input"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    cli = json.loads(out)["reproducer"]
    codes = _repro_codes(at)
    assert json.dumps(json.loads(codes[0]), ensure_ascii=False) == json.dumps(cli["case"], ensure_ascii=False)
    assert codes[1] == cli["pytest"].rstrip("\n")       # (a code block drops the last line break)


def test_the_page_says_which_bound_stopped_the_search_as_the_cli_does():
    """SGLang's Qwen3-Coder test (kept7): no call read, the search spends its 40 re-parses. The page's caption under
    the mistake is the CLI's line: the bound, and no advice to explain an excerpt up to a call there is not."""
    row = _triage_row("kept7.jsonl", "kept7-sgl-qwen3coder-double")
    at = _explain_row(row)
    said = [unmd(c.value) for c in at.caption if "stopped at its budget" in unmd(c.value)]
    assert said == ["the triage's search stopped at its budget after 40 re-parse(s) (the most it makes): the mistake "
                    "and the fixes are what it found by then"], said
