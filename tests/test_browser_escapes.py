"""Invisible characters and hostile table cells as a visitor's browser shows them (Playwright + Debian's chromium).

A text box shows a pasted U+202E as the browser applies it (the rest of the line reversed) and a U+200B not at
all; the box cannot style a character, so a notice under it names each one and where it is, above the escaped
view the pages use. Overview's small tables are single Markdown tables built by the app's own escaping: a
preserved token holding a pipe, a backtick, HTML, a line break and a U+202E stays in its one cell.
"""

from __future__ import annotations

import json
import urllib.parse

import pytest

from .test_browser import _shot, _wait_idle

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
