"""Real-browser test of the Explain page (Playwright + Debian's chromium, the launch helpers of
tests/test_browser.py): the span view with labelled, boxed markers and a hover title naming the analysis field
and the comparison that found it; the stop point; the one-click fix landing on the Overrides page; the
reproducer download. Screenshots go to ``tests/artifacts/explain-*.png``."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from explorer.urlstate import encode_explain

from .conftest import ROOT, TEMPLATES
from .test_browser import ARTIFACTS, _shot, _start, _wait_idle, paste_template
from .test_call_relation import MUSE

pytestmark = pytest.mark.browser

DRIFT = ('The user wants the weather.\n</think>\nLet me check.\n<tool_call>\n'
         '{"name": "get_weather", "parameters": {"city": "Paris"}}\n</tool_call>')


def _explain_triage_row(browser, app_url: str, set_name: str, case_id: str, height: int):
    """The Explain page on a triage row: its template pasted on Sources, its request and output in the permalink;
    ``(page, errors, row)``."""
    rows = (ROOT / "tests" / "data" / "triage" / set_name).read_text(encoding="utf-8").splitlines()
    row = next(r for r in map(json.loads, rows) if r["id"] == case_id)
    page, errors = _start(browser, app_url, "Sources", height=height)
    paste_template(page, row["template"], (TEMPLATES / row["template"]).read_text(encoding="utf-8"))
    page.wait_for_url("**src=text*", timeout=60_000)
    params = dict(parse_qsl(urlsplit(page.url).query))
    req = {k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format",
                               "enable_thinking")}
    params["x"] = encode_explain(req, row["input"])
    page.goto(f"{app_url}/explain?{urlencode(params)}", wait_until="networkidle")
    page.get_by_role("heading", name="Explain").wait_for(timeout=60_000)
    _wait_idle(page)
    return page, errors, row


def _open_explain(page) -> None:
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Explain").click()
    page.get_by_role("heading", name="Explain").wait_for(timeout=60_000)
    _wait_idle(page)


def test_explain_span_view_stop_fix_and_reproducer(app_url, browser):  # noqa: F811 - fixtures
    page, errors = _start(browser, app_url, height=1100, accept_downloads=True)
    _open_explain(page)

    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Model output").locator("textarea")
    area.fill(DRIFT)
    area.press("Control+Enter")
    _wait_idle(page)

    # span view: every label drawn, markers boxed, the hover title names the field and its comparison
    view = page.locator("pre.cte-spans")
    view.wait_for(timeout=60_000)
    labels = view.locator(".cte-span").evaluate_all("els => els.map(e => e.dataset.label)")
    assert labels[0] == "generation prompt" and {"reasoning", "marker", "content", "unparsed"} <= set(labels), labels
    end = view.locator('.cte-span[data-label="marker"]').filter(has_text="</think>").first
    assert "reasoning.end" in end.get_attribute("title") and "found by" in end.get_attribute("title")
    assert "border" in end.get_attribute("style")
    end.hover()
    # the stop point sits in the text and is spelled out below it
    stop = view.locator(".cte-stop")
    assert stop.count() == 1 and 'found "parameters"' in stop.get_attribute("title")
    assert "grammar rules: tool-calls > tool-call" in stop.get_attribute("title")   # rule names: tooltip only
    page.get_by_text('expected "arguments"; found "parameters"').first.wait_for(timeout=30_000)
    main_text = page.locator('[data-testid="stMain"]').inner_text()
    assert "`" not in main_text.split("Reproducer")[0] and "tool-calls > tool-call" not in main_text
    view.scroll_into_view_if_needed()
    _shot(page, "explain-01-spans-and-stop")
    view.screenshot(path=str(ARTIFACTS / "explain-02-span-view.png"))

    # reproducer download: the case line as cases.jsonl has it
    with page.expect_download(timeout=30_000) as dl:
        page.get_by_role("button", name="cases.jsonl line").click()
    case = json.loads(open(dl.value.path(), encoding="utf-8").read())
    assert case["input"] == DRIFT and case["template"] == "chatml-think-tools.jinja", case
    # the current parser's answer, to edit: its one-shot parse of the output, settled as core.chat.repairs
    # settles it (the stream showed a call whose arguments never became JSON: reported, not kept as content)
    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest
    from core.jinja.template import ChatTemplate

    tpl = ChatTemplate((ROOT / "assets" / "templates" / case["template"]).read_text(encoding="utf-8"), case["template"])
    parsed = build_chat_parser(tpl, ChatRequest.from_dict(case)).parser.parse(DRIFT)
    assert case["expect"] == parsed.to_openai() and [r.name for r in parsed.repairs] == ["truncated-call"], case

    # one click applies the checked fix on the Overrides page
    page.get_by_text("Analysis override: tools.format.args_field = 'parameters'").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Apply").first.click()
    page.get_by_role("heading", name="Overrides").wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_text("1 override(s)").first.wait_for(timeout=30_000)
    _shot(page, "explain-03-fix-applied-on-overrides")

    # back on Explain, the same output now parses clean into the call
    _open_explain(page)
    page.get_by_text("parse clean").first.wait_for(timeout=60_000)
    names = page.locator('pre.cte-spans .cte-span[data-label="tool name"]').all_inner_texts()
    assert names == ["get_weather"], names
    _shot(page, "explain-04-clean-after-fix")
    assert not errors, errors
    page.close()


def test_a_malformed_expected_message_is_named_and_the_explanation_stays(app_url, browser):  # noqa: F811
    """An expected message whose tool_calls is not a list of calls: the page names the field under the box and
    keeps the explanation (it was replaced by "cannot analyse template …: TypeError")."""
    page, errors = _start(browser, app_url, "Explain", height=1100)
    box = page.locator('[data-testid="stTextArea"]').filter(has_text="Expected message").locator("textarea")
    box.fill('{"role": "assistant", "tool_calls": "get_weather"}')
    box.press("Control+Enter")
    _wait_idle(page)
    alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
    assert any("The expected message cannot be used (field tool_calls: expected a list of calls, got a string)"
               in a for a in alerts), alerts
    assert not any("cannot analyse template" in a for a in alerts), alerts
    page.locator("pre.cte-spans").wait_for(timeout=30_000)
    assert not errors, errors
    page.close()


def test_the_call_relation_shows_each_piece_as_code(app_url, browser):  # noqa: F811 - fixtures
    """Muse Glimmer's tool channel (kept13, SGLang's parser test): the triage's relation is open (it decided the
    mistake), each of the template's call pieces one code element in render order, marked matched."""
    page, errors, _row = _explain_triage_row(browser, app_url, "kept13.jsonl", MUSE, height=1100)
    box = page.locator('[data-testid="stExpander"]').filter(has_text="The template's call pieces against")
    box.locator("li").first.wait_for(timeout=60_000)       # open without a click: the relation decided the mistake
    assert "call relation: consistent (it decided the mistake)" in box.inner_text()
    items = box.locator("li").all_inner_texts()
    codes = [li.locator("code").all_inner_texts() for li in box.locator("li").all()]
    assert items[1].startswith("matched") and codes[1:4] == [["to="], ["<|message|>"], ["<atem:function_calls>"]]
    assert codes[0][0].startswith("to=get_weather<|message|><atem:function_calls>↵<atem:invoke␣name=")
    assert box.locator("script, a, img").count() == 0
    box.scroll_into_view_if_needed()
    box.screenshot(path=str(ARTIFACTS / "explain-05-call-relation.png"))
    assert not errors, errors
    page.close()


def test_one_voice_a_bounded_view_of_a_huge_output_and_a_fix_that_shows_its_message(app_url, browser):  # noqa: F811
    """The drift output with 17,000 lines of "Let me check." before its call (about 238,000 characters): the span view
    draws windows and says what it left out; the header says the parse in words; the older cause is headed by its
    relation to the triage's mistake; the stop point is said once; the first ranked fix, one click, shows the
    message the output now re-parses to."""
    page, errors = _start(browser, app_url, height=1100)
    _open_explain(page)
    head, tail = DRIFT.split("Let me check.\n")
    big = head + "Let me check.\n" * 17_000 + tail
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Model output").locator("textarea")
    # typed as one paste (fill() types 238,000 characters one input event at a time, past its timeout)
    area.fill("x")
    area.evaluate("""(el, text) => {
        Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set.call(el, text);
        el.dispatchEvent(new Event("input", {bubbles: true}));
    }""", big)
    area.press("Control+Enter")
    _wait_idle(page)
    view = page.locator("pre.cte-spans")
    view.wait_for(timeout=60_000)
    gaps = view.locator(".cte-gap").all_inner_texts()
    assert len(gaps) == 1 and "characters left out (output positions 807–" in gaps[0], gaps   # a line's end
    assert len(view.inner_text()) < 8_000 and view.locator(".cte-stop").count() == 1
    main_text = page.locator('[data-testid="stMain"]').inner_text()
    assert "parse recovered: " in main_text and "(recover" not in main_text and "prefix+rest" not in main_text
    assert "also found (agrees with the mistake): drift: other JSON shape" in main_text, main_text[:3000]
    assert main_text.count('expected "arguments"; found "parameters"') == 1     # the stop point, said once
    view.scroll_into_view_if_needed()
    _shot(page, "explain-06-huge-output-window")

    page.get_by_role("button", name="Use this fix").first.click()
    _wait_idle(page)
    page.get_by_text("The message now (the output re-parsed with the fix):").wait_for(timeout=60_000)
    applied = page.locator('[data-testid="stAlert"]').filter(has_text="Applied:").inner_text()
    assert "the repair arguments-key-alias alone" in applied and "`" not in applied, applied   # code, not backticks
    now = page.locator('[data-testid="stCode"]').filter(has_text='"tool_calls"').first.inner_text()
    assert '"name": "get_weather"' in now and "more characters)" in now and len(now) < 4_000, now[:300]
    _shot(page, "explain-07-fix-applied-message")
    assert not errors, errors
    page.close()


def test_invisible_and_bidi_characters_of_the_output_are_shown_escaped_everywhere(app_url, browser):  # noqa: F811
    """The drift output with a U+202E after "Let me check." and a U+200B in its reasoning (built to attack the views; no
    model wrote it): no view of the page (span view, diff, mistake, evidence, stop point, causes, messages, and the
    message after a fix) carries either character itself; each is shown as its escape."""
    page, errors = _start(browser, app_url, height=1100)
    _open_explain(page)
    hostile = DRIFT.replace("Let me check.", "Let me check.\u202e").replace("The user", "The\u200b user")
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Model output").locator("textarea")
    area.fill(hostile)
    area.press("Control+Enter")
    _wait_idle(page)
    page.locator("pre.cte-spans").wait_for(timeout=60_000)
    for box in page.locator('[data-testid="stExpander"]').all():     # open every closed view (evidence, message)
        summary = box.locator("summary")
        if summary.count() and box.get_attribute("open") is None and "Streaming replay" not in summary.inner_text():
            summary.click()
            _wait_idle(page)

    def shown() -> str:
        main = page.locator('[data-testid="stMain"]')
        return main.inner_text() + "".join(main.locator("[title]").evaluate_all("els => els.map(e => e.title)"))

    text = shown()
    assert "\u202e" not in text and "\u200b" not in text
    spans = page.locator("pre.cte-spans").inner_text()
    assert "\\u202e" in spans and "\\u200b" in spans
    page.get_by_role("button", name="Use this fix").first.click()
    _wait_idle(page)
    page.get_by_text("The message now (the output re-parsed with the fix):").wait_for(timeout=60_000)
    text = shown()
    assert "\u202e" not in text and "\u200b" not in text and "\\u202e" in text
    assert not errors, errors
    page.close()


def test_a_ranked_fix_shows_its_message_and_the_parse_says_whether_it_gives_the_expected_one(app_url, browser):  # noqa: F811
    """OpenVINO Model Server's Llama 3.1 row (kept26: three calls joined by `;`, the engine's message as expected):
    typed into the Reproducer box, the expected message is compared with the parse itself (under the verdict, with
    the first difference), and the ranked fix's message opens in its own expander before any click."""
    page, errors, row = _explain_triage_row(browser, app_url, "kept26.jsonl", "kept23-ovms-llama3-three-semicolon-calls",
                                            height=1400)
    box = page.locator('[data-testid="stTextArea"]').filter(has_text="Expected message").locator("textarea")
    box.fill(json.dumps(row["expect"]))
    box.press("Control+Enter")
    _wait_idle(page)
    page.get_by_text("this parse does not give the expected message — first difference: content: expected ''").first \
        .wait_for(timeout=60_000)
    page.get_by_text("The message fix 1 gives").first.click()
    _wait_idle(page)
    shown = page.locator('[data-testid="stExpander"]').filter(has_text="The message fix 1 gives").first.inner_text()
    assert '"third_tool"' in shown and '"another_tool"' in shown, shown
    _shot(page, "explain-05-fix-message-and-expected")
    assert not errors, errors
    page.close()
