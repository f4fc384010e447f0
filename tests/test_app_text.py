"""explorer.components.text: the invisible-character classes come from a precomputed table of Unicode ranges (a
fresh server's first view no longer scans 135k code points); the table must be what a scan finds."""

from __future__ import annotations

import re
import unicodedata

from explorer.components import text


def test_precomputed_ranges_are_what_a_scan_finds():
    scanned = text.scan_invisible_ranges()
    if unicodedata.unidata_version == text._UNIDATA_VERSION:
        assert text._RANGES_14 == scanned
    assert text.invisible_ranges() == scanned
    assert (0x202E, 0x202E) not in scanned and any(a <= 0x202E <= b for a, b in scanned)


def test_tab_and_newline_are_cut_out_of_the_whitespace_keeping_class():
    assert text.visible_text("a\tb\nc\x1bd\u202ee\u200bf") == "a\tb\nc\\x1bd\\u202ee\\u200bf"
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
        assert not re.search(r"(?<!\\)[>\[\]()*`#_]", shown), shown   # no Markdown-active character left bare
        assert unmd(shown) == raw
