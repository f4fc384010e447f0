"""Invisible characters and hostile table cells as a visitor's browser shows them (Playwright + Debian's chromium).

A text box shows a pasted U+202E as the browser applies it (the rest of the line reversed) and a U+200B not at
all; the box cannot style a character, so a notice under it names each one and where it is, above the escaped
view the pages use. Overview's small tables are single Markdown tables built by the app's own escaping: a
preserved token holding a pipe, a backtick, HTML, a line break and a U+202E stays in its one cell. Text the
app escapes never becomes a link, an image or an icon — Streamlit's renderer finds URLs, e-mail addresses,
``:streamlit:`` and the like in the text after the escapes are resolved — while a link the app writes still is one.
"""

from __future__ import annotations

import json
import urllib.parse

import pytest

from .conftest import streamlit_server
from .escape_app import BAIT, CODE_NAME, DOCS
from .test_browser import _shot, _start, _wait_idle

pytestmark = pytest.mark.browser

HOSTILE = "a|b\\|c`d`<script>alert(1)</script>\n\u202eZ"


def test_a_text_box_names_its_invisible_characters_and_the_parse_uses_them(app_url, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(app_url + "/playground", wait_until="networkidle")
    page.get_by_role("heading", name="Playground").wait_for(timeout=60_000)
    _wait_idle(page)
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Text the model generated").locator("textarea")
    typed = "<think>\nok</think>\nHi \u202eevil\u200b there"
    area.fill(typed)
    area.press("Control+Enter")
    notice = page.locator('[data-testid="stAlert"]').filter(has_text="Invisible characters")
    notice.first.wait_for(timeout=60_000)
    _wait_idle(page)
    assert notice.count() == 1
    assert notice.first.inner_text().strip().endswith(
        "U+202E RIGHT-TO-LEFT OVERRIDE at line 3, col 4 · U+200B ZERO WIDTH SPACE at line 3, col 9")
    view = page.locator(".cte-text").filter(has_text="\\u202e")
    assert "Hi·\\u202eevil\\u200b·there" in view.first.inner_text().replace("\u200b", "")   # escaped, in order
    assert "\u202e" not in view.first.inner_text()
    assert area.input_value() == typed                               # the box keeps the text as typed…
    parsed = page.locator('[data-testid="stCode"]').filter(has_text="evil").first.inner_text()
    # …and the parse read both characters: its JSON view writes them as JSON escapes, one backslash each
    assert '"content": "Hi \\u202eevil\\u200b there"' in parsed and "\u202e" not in parsed, parsed
    _shot(page, "escapes-notice-playground")


def test_overview_tables_keep_a_hostile_token_in_its_cell(app_url, browser):  # noqa: F811 - fixtures
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    ov = json.dumps({"preserved_tokens": [HOSTILE, "<think>"]})
    page.goto(f"{app_url}/overview?src=bundled:chatml-think-tools.jinja&ov={urllib.parse.quote(ov)}",
              wait_until="networkidle")
    page.locator('[data-testid="stMetric"]').first.wait_for(timeout=120_000)
    _wait_idle(page)
    main = page.locator('[data-testid="stMain"]')
    tokens = main.locator("table").filter(has=page.locator("th", has_text="token")).first
    rows = [[c.inner_text() for c in r.locator("th, td").all()] for r in tokens.locator("tr").all()]
    assert rows == [["token"], ["a|b\\|c`d`<script>alert(1)</script>\\n\\u202eZ"], ["<think>"]]
    assert main.locator("script").count() == 0 and not tokens.locator("code, br").count()
    fields = main.locator("table").filter(has=page.locator("th", has_text="field")).last
    cells = dict(tuple(c.inner_text() for c in r.locator("td").all()) for r in fields.locator("tbody tr").all())
    assert cells["preserved_tokens"] == '["a|b\\\\|c`d`<script>alert(1)</script>\\n\\u202eZ", "<think>"]'
    caps = main.locator("table").filter(has=page.locator("th", has_text="capability")).first
    assert caps.locator("tbody tr").count() == 9 and "true" in caps.inner_text()
    assert main.locator('[data-testid="stTable"]').count() == 0     # no st.table left: one block per table
    assert not errors, errors
    fields.scroll_into_view_if_needed()
    _shot(page, "escapes-overview-tables")


# where Streamlit's renderer drew an active element or rewrote the text: links, images (``:streamlit:``), icons
# (``:material_star:``)
ACTIVE = "a, img, [role=img]"


def test_the_escape_leaves_no_link_image_or_icon_and_the_apps_own_link_stays(browser):  # noqa: F811 - fixtures
    """tests/escape_app.py: hostile text through md() / md_cell() in a paragraph, a caption, an error, a table
    cell, a widget label and as pieces joined side by side; each shows the text as it is, with no active
    element; a tool name holding backticks, dollars, an icon and a link stays whole in its code span (md_code).
    The Markdown link the app writes beside them is a link."""
    with streamlit_server(log_name="streamlit-escape-app.log", script="tests/escape_app.py") as url:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url, wait_until="networkidle")
        page.locator(".st-key-esc_app_link a").wait_for(timeout=60_000)
        _wait_idle(page)
        for key in ("markdown", "caption", "error", "table", "label"):
            box = page.locator(f".st-key-esc_{key}")
            assert box.locator(ACTIVE).count() == 0, (key, box.inner_html())
            shown = box.locator("td" if key == "table" else "p").first.inner_text()
            assert shown == BAIT, (key, shown)                   # read as it is: no arrow, emoji or logo
        # md_code: the name as written in code (cut after its ":" of ":material/", which the renderer rewrites even
        # in code), the sentence after it
        code = page.locator(".st-key-esc_code")
        assert code.locator(ACTIVE).count() == 0, code.inner_html()
        assert code.locator("code").all_inner_texts() == [CODE_NAME[:CODE_NAME.index("material/")],
                                                          CODE_NAME[CODE_NAME.index("material/"):], "city"]
        assert code.locator("p").first.inner_text() == f"{CODE_NAME} is called without city"
        joined = page.locator(".st-key-esc_joined")
        assert joined.locator(ACTIVE).count() == 0, joined.inner_html()
        assert joined.inner_text().strip() == "see www.evil.example and a@b.cd"
        link = page.locator(".st-key-esc_app_link a")
        assert link.count() == 1 and link.get_attribute("href") == DOCS
        # copying the text gives it back as it is: the empty spans between its pieces add nothing
        page.locator(".st-key-esc_markdown p").first.select_text()
        assert page.evaluate("() => window.getSelection().toString()") == BAIT
        assert not errors, errors
        _shot(page, "escapes-no-autolink")
        page.close()


# a tool name that tries to close the stop line's code span and write a link, with two autolink literals
LINK_TOOL = "x\\` [click](https://evil.example/a) www.evil.example a@b.cd"
LINK_OUTPUT = ('ok</think>\n<tool_call>\n{"name": "' + LINK_TOOL.replace("\\", "\\\\")
               + '", "arguments": {}}\n</tool_call>')


def test_the_explain_page_shows_a_hostile_tool_name_as_text(app_url, browser):  # noqa: F811 - fixtures
    """An output calling a tool whose name holds a Markdown link and autolink literals: the stop point, the causes
    and the fixes name it as it is, and no element of the page's main area is a link, image or icon. The app's own
    links (the page navigation) still lead to their pages."""
    page, errors = _start(browser, app_url, height=1100)
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Explain").click()     # an app link: it works
    page.get_by_role("heading", name="Explain").wait_for(timeout=60_000)
    _wait_idle(page)
    area = page.locator('[data-testid="stTextArea"]').filter(has_text="Model output").locator("textarea")
    area.fill(LINK_OUTPUT)
    area.press("Control+Enter")
    _wait_idle(page)
    page.locator("pre.cte-spans").wait_for(timeout=60_000)
    stop = page.locator('[data-testid="stAlert"]').filter(has_text="At output position")
    stop.first.wait_for(timeout=60_000)
    assert "␣[click](https://evil.example/a)␣www" in stop.first.inner_text(), stop.first.inner_text()
    main = page.locator('[data-testid="stMain"]')
    shown = main.inner_text()
    assert shown.count("(https://evil.example/a) www.evil.example a@b.cd") >= 2, shown  # causes, fixes: as text
    hrefs = [a.get_attribute("href") for a in main.locator("a").all()]
    assert hrefs and all(h.startswith("#") for h in hrefs), hrefs         # the headings' own anchors only
    assert "#where-it-stopped" in hrefs
    icons = main.locator("img, [role=img]").all_inner_texts()
    assert set(icons) <= {"keyboard_arrow_right", "keyboard_arrow_down"}, icons  # the expanders' own icons
    assert page.locator('[data-testid="stSidebarNav"] a').count() >= 10      # the navigation's links are there
    assert not errors, errors
    stop.first.scroll_into_view_if_needed()
    _shot(page, "escapes-explain-hostile-tool")
    page.close()
