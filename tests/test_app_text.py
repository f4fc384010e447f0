"""explorer.components.text: the invisible-character classes come from a precomputed table of Unicode ranges (a
fresh server's first view no longer scans 135k code points); the table must be what a scan finds."""

from __future__ import annotations

import html
import json
import re
import unicodedata

import pytest

from core.escapes import code_span
from explorer.components import text


def test_precomputed_ranges_are_what_a_scan_finds():
    scanned = text.scan_invisible_ranges()
    if unicodedata.unidata_version == text._UNIDATA_VERSION:
        assert text._RANGES_14 == scanned
    assert text.invisible_ranges() == scanned
    assert (0x202E, 0x202E) not in scanned and any(a <= 0x202E <= b for a, b in scanned)


def test_tab_and_newline_are_cut_out_of_the_whitespace_keeping_class():
    assert text.visible_text("a\tb\nc\x1bd\u202ee\u200bf") == "a\tb\nc\\u001bd\\u202ee\\u200bf"
    assert text.literal("\t\u2028") == '"\\t\\u2028"'
    assert text.INVISIBLE.fullmatch("\t") and text.INVISIBLE.fullmatch("\U000e0041")
    assert not text.INVISIBLE.search("plain_text <|im_start|> ｜")


def test_static_table_cells_are_shown_as_text():
    """Streamlit draws st.table's cells as Markdown: every text cell is escaped (a preserved token ``>\\n`` was an
    empty quote, a template's ``[x](…)`` a live link) and reads back as the text it was; other cells are kept."""
    import pandas as pd

    from explorer.components.text import table_md

    from .test_app_helpers import unmd

    cells = [">\n", "[x](http://example.com)", "**not bold**", "`tick`", "<|im_start|>", "a_b_c", "# head"]
    out = table_md(pd.DataFrame({"cell": cells, "n": range(len(cells))}))
    assert list(out["n"]) == list(range(len(cells)))
    for raw, shown in zip(cells, out["cell"]):
        # no Markdown-active character left bare (but the empty colour directives md() writes on purpose)
        assert not re.search(r"(?<!\\)[>\[\]()*`#_]", shown.replace(text.MD_CUT, "")), shown
        assert unmd(shown) == raw


# a cell that tries every way out of a Markdown table: a pipe (a new cell), a backslash before a pipe, a backtick
# (code), HTML, a line break (a new row) and a bidi override (the rest of the row reversed)
HOSTILE = "a|b\\|c`d`<script>alert(1)</script>\n\u202eZ"
HOSTILE_SHOWN = "a|b\\|c`d`<script>alert(1)</script>\\n\\u202eZ"


def test_markdown_table_cells_cannot_leave_their_cell():
    import pandas as pd

    from .test_app_helpers import md_cells

    table = text.md_table(pd.DataFrame({"token": [HOSTILE, "<think>"], "ok": [True, False]}))
    lines = table.split("\n")
    assert len(lines) == 4 and lines[1] == "|---|---|"           # header, rule, one line per row
    assert md_cells(lines[2]) == [HOSTILE_SHOWN, "true"] and md_cells(lines[3]) == ["<think>", "false"]
    assert "\u202e" not in table and not re.search(r"(?<!\\)[`<>]", table)   # no bare backtick or tag bracket


def test_overview_tables_are_one_markdown_block_each_with_a_hostile_token():
    """Overview's Other fields, Capabilities and Preserved tokens: one Markdown table each (st.table drew every
    cell as a Markdown block of its own), the same rows, a hostile preserved token kept in its cell."""
    from .test_app_helpers import errors, frame_with, md_tables, page, start

    at = start()
    at.session_state["overrides"] = {at.session_state["template"].digest: {"preserved_tokens": [HOSTILE, "<think>"]}}
    page(at, "overview")
    assert not errors(at) and not at.table                     # no st.table left on the page
    tables = {t[0][0]: t for t in md_tables(at)}
    assert set(tables) == {"field", "capability", "token"}
    assert tables["token"] == [["token"], [HOSTILE_SHOWN], ["<think>"]]
    fields = dict(tables["field"][1:])
    assert fields["preserved_tokens"] == '["a|b\\\\|c`d`<script>alert(1)</script>\\n\\u202eZ", "<think>"]'
    assert fields["analysis_complete"] == "true"          # spelled as the Capabilities beside it
    caps = frame_with(at, "supported").set_index("capability")["supported"]
    assert caps["tool_calls"] == "true" and caps["reasoning_effort"] == "false"


def test_invisible_notice_names_each_kind_and_its_places():
    out = text.invisible_notice("ab\nc d\u202eef\u200b\n\u202e" + "\u200b" * 5 + "\x1b\u2066\u2067")
    assert out == ("Invisible characters in this text, used as typed and shown escaped below: "
                   "U+202E RIGHT-TO-LEFT OVERRIDE at line 2, col 4; line 3, col 1 · "
                   "U+200B ZERO WIDTH SPACE at line 2, col 7; line 3, col 2; line 3, col 3 (+3 more) · "
                   "U+001B control character at line 3, col 7 · U+2066 LEFT-TO-RIGHT ISOLATE at line 3, col 8 · "
                   "+1 more kind")
    assert text.invisible_notice("tab\tand newline\n are laid out, ｜ and é are seen") is None
    assert text.invisible_places("x\u202e\n\n  \u202e") == {"\u202e": ([(1, 2), (3, 3)], 2)}


def test_text_boxes_with_invisible_characters_get_the_notice_and_the_parse_uses_the_text_as_typed():
    """Playground's output box, Edit's template box and Sources' paste box: a notice under the box names each
    kind and place, the escaped view shows ``\\u202e``; the box keeps the text as typed."""
    from .test_app_helpers import html_bodies, json_views, page, start, unmd

    output = "<think>\nok</think>\nHi \u202eevil\u200b"
    at = start()
    at.session_state["in_output"] = output
    page(at, "playground")
    notes = [unmd(w.value) for w in at.warning if "Invisible characters" in unmd(w.value)]
    assert notes == ["Invisible characters in this text, used as typed and shown escaped below: "
                     "U+202E RIGHT-TO-LEFT OVERRIDE at line 3, col 4 · U+200B ZERO WIDTH SPACE at line 3, col 9"]
    view = [b for b in html_bodies(at) if "\\u202e" in b and "\\u200b" in b]
    assert view and not any("\u202e" in b for b in html_bodies(at))
    assert at.session_state["in_output"] == output
    assert any(json.loads(j.value).get("content") == "Hi \u202eevil\u200b" and "\\u202eevil\\u200b" in j.value
               for j in json_views(at))   # the parse kept both characters; the JSON view shows their escapes

    page(at, "edit")
    at.text_area(key="in_edit_source").input("{{ messages[0].content }}\u2067").run()
    assert any("U+2067 RIGHT-TO-LEFT ISOLATE at line 1, col 26" in unmd(w.value) for w in at.warning)

    page(at, "sources")
    at.radio(key="in_source_kind").set_value("Paste text").run()
    at.text_area(key="in_paste_text").input("hello\n\u200b{{ x }}").run()
    assert any("U+200B ZERO WIDTH SPACE at line 2, col 1" in unmd(w.value) for w in at.warning)



# A tool name built to attack the page's Markdown (no model wrote it): backtick runs of one and two that pair with
# a single-backtick fence, LaTeX dollars, a Material icon, a link
HOSTILE_NAME = "a`b`` $x$ :material/home: [x](http://evil.example/a)"


def _inline_html(markdown: str) -> str:
    """The HTML CommonMark makes of one line of Markdown (markdown-it-py, which rich brings), with Streamlit's
    empty ``:color[]`` directive (text.MD_CUT, which shows nothing) taken out and the code it parts joined."""
    markdown_it = pytest.importorskip("markdown_it")
    shown = markdown_it.MarkdownIt("commonmark").renderInline(markdown)
    return shown.replace("</code>" + text.MD_CUT + "<code>", "").replace(text.MD_CUT, "")


def test_a_code_span_reads_back_as_its_text_whatever_backticks_it_holds():
    for s in (HOSTILE_NAME, "`x", "x`", "``", " x ", "a```b"):
        assert _inline_html(code_span(s)) == f"<code>{html.escape(s, quote=False)}</code>", s
    assert code_span(HOSTILE_NAME) == f"```{HOSTILE_NAME}```"
    assert code_span("get_weather") == "`get_weather`"   # a name without backticks: as before


def test_md_code_keeps_a_hostile_name_in_one_code_span():
    """The engine's sentence names the tool in a code span fenced longer than its backtick runs; md_code used to
    pair backticks one by one (``a`` a span, ``b`` text, then a span from the next backtick on), so the name left
    its span and its link became a live link."""
    sentence = f"{code_span(HOSTILE_NAME)} is called without `city`, which the request's schema lists in `required`"
    shown = _inline_html(text.md_code(sentence))
    assert shown.startswith(f"<code>{html.escape(HOSTILE_NAME, quote=False)}</code> is called without "
                            "<code>city</code>"), shown
    assert "<a " not in shown and shown.count("<code>") == 3
    # Streamlit's renderer rewrites ":material/" everywhere in its source, code spans included: it never sees one
    assert ":material/" not in text.md_code(sentence)
    # a run of backticks that no run of its length closes is text, escaped: it opens no span
    assert _inline_html(text.md_code("found `` and `x`")) == "found `` and <code>x</code>"
