"""explorer.components.text: the invisible-character classes come from a precomputed table of Unicode ranges (a
fresh server's first view no longer scans 135k code points); the table must be what a scan finds."""

from __future__ import annotations

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
