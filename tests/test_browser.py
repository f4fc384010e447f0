"""Real-browser test of the explorer: Playwright drives Debian's chromium against ``streamlit run app.py``.

Loads the app, checks the overview of the default (bundled) template, picks another bundled template in the
sidebar, opens the Playground, parses the template's sample output and a typed output, checks the parsed
message on the page, and checks that template text with HTML is displayed as text. Screenshots go to
``tests/artifacts/`` (git-ignored). Skipped only when /usr/bin/chromium is missing (``.ci/run`` installs it).
"""

from __future__ import annotations

import pytest

from bench.browser import wait_idle

from .conftest import ARTIFACTS, ROOT, streamlit_server  # noqa: F401 - streamlit_server: for the other browser files

pytestmark = pytest.mark.browser

ARTIFACTS.mkdir(parents=True, exist_ok=True)  # a fresh clone has none (git-ignored); every browser test writes here


_wait_idle = wait_idle  # Streamlit's run state, read twice 250 ms apart (bench/browser.py)


def _shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def wait_for_metrics(page, *values: str, timeout: int = 60_000) -> str:
    """Wait until an ``st.metric`` shows each of ``values``; return all the metrics' text. Streamlit sends the
    metrics one by one as the page script runs, so waiting for the first one and reading them all is a race."""
    metrics = page.locator('[data-testid="stMetric"]')
    metrics.first.wait_for(timeout=timeout)
    for value in values:
        metrics.filter(has_text=value).first.wait_for(timeout=timeout)
    return " ".join(metrics.all_inner_texts())


def _pick(page, label: str, option: str) -> None:
    """Choose ``option`` in the Streamlit selectbox labelled ``label``."""
    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first
    box.locator("input").first.click()
    page.get_by_role("option", name=option, exact=True).click()
    _wait_idle(page)


def _start(browser, app_url, title: str = "Overview", height: int = 1000, **page_options):
    """A 1400-wide page (``height`` high; ``page_options`` for ``browser.new_page``) on the app's page ``title``
    (its run finished), and the list its page errors are collected in."""
    page = browser.new_page(viewport={"width": 1400, "height": height}, **page_options)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{app_url}/{title.lower()}", wait_until="networkidle")  # (the root is the front page)
    page.get_by_role("heading", name=title).wait_for(timeout=60_000)
    _wait_idle(page)
    return page, errors


def paste_template(page, name: str, source: str) -> None:
    """On the Sources page: choose "Paste text", type ``name`` and ``source``, press "Use this text"."""
    page.get_by_text("Paste text").click()
    _wait_idle(page)
    box = page.locator('[data-testid="stTextInput"]').filter(has_text="Name").locator("input")
    box.fill(name)
    box.press("Enter")
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Jinja template").locator("textarea")
    area.fill(source)
    area.press("Control+Enter")
    _wait_idle(page)
    page.get_by_role("button", name="Use this text").click()


def test_load_pick_template_parse(app_url, browser):
    page, errors = _start(browser, app_url)
    text = wait_for_metrics(page, "TAG_BASED", "JSON_NATIVE")
    assert "TAG_BASED" in text and "JSON_NATIVE" in text, text
    _shot(page, "01-overview-default")
    # every Markers column is visible at 1400 px: the grid does not scroll sideways (review finding: "trimmed"
    # and "found by" were cut off beside Capabilities) and spans the main block
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.locator('[role="columnheader"]').first.wait_for(state="attached", timeout=60_000)  # mounts after metrics
    heads = grid.locator('[role="columnheader"]').all_inner_texts()
    assert heads == ["field", "value", "trimmed", "found by"], heads
    scroll = grid.evaluate("e => { const s = e.querySelector('.dvn-scroller');"
                           " return s ? [s.scrollWidth, s.clientWidth] : null }")
    assert scroll is not None and scroll[0] <= scroll[1], scroll
    main = page.locator('[data-testid="stMainBlockContainer"]').first.bounding_box()
    assert grid.bounding_box()["width"] >= 0.75 * main["width"], (grid.bounding_box(), main)

    # pick another bundled template in the sidebar
    _pick(page, "Bundled examples", "xml-function-tags.jinja")
    page.get_by_text("TAG_WITH_TAGGED").first.wait_for(timeout=60_000)
    _shot(page, "02-overview-xml")

    # the playground parses the template's sample output
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Playground").click()
    page.get_by_role("heading", name="Playground").wait_for(timeout=60_000)
    _wait_idle(page)
    result = page.locator('[data-testid="stCode"]').first
    result.wait_for(timeout=60_000)
    shown = result.inner_text()
    assert "get_weather" in shown and "Paris" in shown, shown
    _shot(page, "03-playground-sample")

    # type an output of our own and parse it
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Text the model generated").locator("textarea")
    area.fill("Checking.\n<tool_use>\n<function=get_weather>\n<parameter=city>\nLyon <b>&amp;</b>\n"
              "</parameter>\n</function>\n</tool_use>")
    area.press("Control+Enter")
    _wait_idle(page)
    page.get_by_text("Lyon <b>&amp;</b>", exact=False).first.wait_for(timeout=60_000)
    shown = page.locator('[data-testid="stCode"]').first.inner_text()
    assert "Lyon <b>&amp;</b>" in shown and "Checking." in shown, shown
    assert page.locator('[data-testid="stCode"] b').count() == 0  # the HTML in the output stayed text
    _shot(page, "04-playground-typed")

    # streaming replay tab
    page.get_by_role("tab", name="Streaming replay").click()
    page.get_by_text("Partial message").wait_for(timeout=30_000)
    _shot(page, "05-playground-stream")

    # comparisons page draws the coloured diff split
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Comparisons").click()
    page.get_by_role("heading", name="Comparisons").wait_for(timeout=60_000)
    _wait_idle(page)
    _pick(page, "Show", "T1")
    diff = page.locator(".cte-diff").first
    diff.wait_for(timeout=30_000)
    diff.scroll_into_view_if_needed()
    _shot(page, "06-comparisons")
    diff.screenshot(path=str(ARTIFACTS / "07-diff-split.png"))
    right = diff.locator('[data-part="right"]').first.inner_text()
    assert "<tool_use>" in right and "FFF_FIRST_FUN_F" in right, right  # markers shown as text
    assert diff.locator("tool_use").count() == 0
    assert not errors, errors
    page.close()


def _open(page, title: str) -> None:
    """Click ``title`` in the page navigation and wait for that page's finished run."""
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text=title).click()
    page.get_by_role("heading", name=title).wait_for(timeout=60_000)
    _wait_idle(page)


def _analyse_bundled(page) -> None:
    """On the Corpus page: server folders are off by default (core.serving), so there is no folder input and the
    page analyses the bundled examples (assets/templates); wait for the table."""
    assert page.locator('[data-testid="stTextInput"]').filter(has_text="Folder of templates").count() == 0
    page.get_by_role("button", name="Analyse 6 templates").click()
    page.get_by_text("Select a row to open it.", exact=False).wait_for(timeout=120_000)
    _wait_idle(page, timeout=120_000)


def test_other_pages_render(app_url, browser):
    """Overview source tab, Overrides, Grammar and Corpus pages draw in a real browser (screenshots)."""
    page, errors = _start(browser, app_url)
    page.get_by_role("tab", name="Template source").click()
    code = page.locator(".cte-code").first
    code.wait_for(timeout=30_000)
    assert "<|im_start|>" in code.inner_text()
    _shot(page, "10-overview-source")

    _open(page, "Overrides")
    page.get_by_text("Difference from the automatic analysis").wait_for(timeout=30_000)
    _shot(page, "11-overrides")

    _open(page, "Grammar")
    gbnf = page.locator(".cte-code").first
    gbnf.wait_for(timeout=30_000)
    assert "root ::=" in gbnf.inner_text() and "<tool_call>" in gbnf.inner_text()
    _shot(page, "12-grammar")

    _open(page, "Corpus")
    _analyse_bundled(page)
    _shot(page, "13-corpus")
    table = page.locator('[data-testid="stDataFrame"]').first
    assert table.is_visible()
    assert not errors, errors
    page.close()


def test_upload_tokenizer_config_with_variants(app_url, browser, tmp_path):
    """Upload a tokenizer_config.json holding two named templates; pick the tool_use variant."""
    import json

    chatml = (ROOT / "assets" / "templates" / "chatml-think-tools.jinja").read_text(encoding="utf-8")
    plain = (ROOT / "assets" / "templates" / "plain-chat.jinja").read_text(encoding="utf-8")
    cfg = tmp_path / "tokenizer_config.json"
    cfg.write_text(json.dumps({"chat_template": [{"name": "default", "template": plain},
                                                 {"name": "tool_use", "template": chatml}]}), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(app_url, wait_until="networkidle")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Sources").click()
    page.get_by_role("heading", name="Sources").wait_for(timeout=60_000)
    page.get_by_text("Upload a file").click()
    _wait_idle(page)
    page.locator('input[type="file"]').set_input_files(str(cfg))
    page.get_by_role("button", name="Load this file").click()
    page.get_by_text("Loaded tokenizer_config.json", exact=False).wait_for(timeout=60_000)
    _wait_idle(page)
    _pick(page, "Variant", "tool_use")
    _shot(page, "20-upload-variants")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Overview").click()
    page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_text("tokenizer_config.json:tool_use", exact=False).first.wait_for(timeout=30_000)
    text = wait_for_metrics(page, "TAG_BASED", "JSON_NATIVE")  # the metrics arrive one by one, after the name
    assert "TAG_BASED" in text and "JSON_NATIVE" in text, text
    _shot(page, "21-upload-overview")
    assert not errors, errors
    page.close()


HOSTILE = """{#- <script>alert('template')</script> <img src=x onerror=alert(1)> -#}
{%- for m in messages -%}<script>{{ m.role }}</script><b>{{ m.content }}</b>{% endfor -%}
{%- if add_generation_prompt -%}<iframe src="javascript:alert(2)"></iframe>{%- endif -%}"""


def test_hostile_template_is_text_in_the_browser(app_url, browser):
    """A pasted template full of HTML/JS: shown as text everywhere, no element or dialog created from it."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(app_url, wait_until="networkidle")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Sources").click()
    page.get_by_role("heading", name="Sources").wait_for(timeout=60_000)
    paste_template(page, "<img src=x onerror=alert(3)>.jinja", HOSTILE)
    page.get_by_text("Loaded", exact=False).first.wait_for(timeout=60_000)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Overview").click()
    page.get_by_role("heading", name="Overview").wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_text("<img src=x onerror=alert(3)>.jinja").first.wait_for(timeout=30_000)
    page.get_by_role("tab", name="Template source").click()
    code = page.locator(".cte-code").first
    code.wait_for(timeout=30_000)
    assert "<script>alert('template')</script>" in code.inner_text()
    _shot(page, "30-hostile-source")
    main = page.locator('[data-testid="stMain"]')
    assert main.locator("script, iframe, img[src='x']").count() == 0
    assert main.locator("b").filter(has_text="U_USER_MSG").count() == 0
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Comparisons").click()
    page.get_by_role("heading", name="Comparisons").wait_for(timeout=60_000)
    _wait_idle(page)
    _pick(page, "Show", "generation_prompt")
    diff = page.locator(".cte-diff").first
    diff.wait_for(timeout=30_000)
    assert '<iframe src="javascript:alert(2)"></iframe>' in diff.inner_text().replace("·", " ")
    diff.scroll_into_view_if_needed()
    _shot(page, "31-hostile-diff")
    assert main.locator("script, iframe, img[src='x']").count() == 0
    assert not dialogs, dialogs
    page.close()


def test_overrides_provenance_bidi_and_corpus_columns(app_url, browser):
    """What the user sees on the Overrides and Corpus pages (issue 9): an imported override is announced on
    every page and marked "override" in the Overview's markers; a U+202E in model output is shown as an escape,
    not applied; the Corpus table shows the route, tools and modes columns without scrolling."""
    page, errors = _start(browser, app_url)

    _open(page, "Overrides")
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Import overrides").locator("textarea")
    area.fill('{"overrides": {"reasoning.start": "<thought>"}}')
    area.press("Control+Enter")
    _wait_idle(page)
    page.get_by_role("button", name="Apply imported JSON").click()
    _wait_idle(page)
    banner = page.locator('[data-testid="stAlert"]').filter(has_text="Overrides active")
    banner.first.wait_for(timeout=30_000)
    assert 'reasoning.start = "<thought>"' in banner.first.inner_text()
    page.get_by_text("Imported 1 override(s)").wait_for(timeout=30_000)
    _shot(page, "40-overrides-imported")

    _open(page, "Overview")
    page.locator('[data-testid="stAlert"]').filter(has_text="Overrides active").first.wait_for(timeout=30_000)
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.locator('[role="columnheader"]').first.wait_for(state="attached", timeout=60_000)
    cells = grid.locator('[role="gridcell"]').all_inner_texts()
    row = cells[cells.index("reasoning.start"):cells.index("reasoning.start") + 4]
    assert row[1] == '"<thought>"' and row[3] == "override", row
    _shot(page, "41-overview-override")

    _open(page, "Playground")
    out = page.locator('[data-testid="stTextArea"]').filter(has_text="Text the model generated").locator("textarea")
    out.fill("plan</think>Hello \u202eworld")
    out.press("Control+Enter")
    _wait_idle(page)
    page.get_by_text("\\u202eworld", exact=False).first.wait_for(timeout=30_000)
    shown = page.locator('[data-testid="stCode"]').first.inner_text()
    assert "\\u202eworld" in shown and "\u202e" not in shown, shown
    assert "\u202e" not in page.locator('[data-testid="stMain"]').inner_text()
    _shot(page, "42-playground-bidi")

    _open(page, "Corpus")
    _analyse_bundled(page)
    table = page.locator('[data-testid="stDataFrame"]').first
    table.locator('[role="columnheader"]').first.wait_for(state="attached", timeout=60_000)
    heads = table.locator('[role="columnheader"]').all_inner_texts()
    # the bundled examples analyse cleanly on the auto-parser: the problem and handler columns, empty in every
    # row, are left out (tests/test_app_corpus.py has them when a row has a problem)
    assert heads[:5] == ["template", "route", "tools", "reasoning", "content"], heads
    box, main = table.bounding_box(), page.locator('[data-testid="stMainBlockContainer"]').first.bounding_box()
    # the canvas grid draws columns left to right at their configured widths (explorer/pages/corpus.py): the
    # first five (template 280, route 90, tools 130, reasoning 100, content 170 px) fit in the visible width
    assert box["width"] >= 280 + 90 + 130 + 100 + 170, box
    assert box["height"] >= 6 * 35 and box["width"] >= 0.75 * main["width"], box
    cells = table.locator('[role="gridcell"]').all_inner_texts()
    assert "qwen3-coder" not in cells and "chatml-think-tools.jinja" in cells
    _shot(page, "43-corpus-columns")
    assert not errors, errors
    page.close()
