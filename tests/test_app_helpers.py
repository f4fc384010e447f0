"""Helpers for the explorer's AppTest tests (streamlit.testing.v1); no tests here."""

from __future__ import annotations

import pathlib
import re

from streamlit.testing.v1 import AppTest

from explorer.components.text import MD_CUT

from .conftest import ROOT, TEMPLATES

APP = str(ROOT / "app.py")
TIMEOUT = 120


def unmd(s: str) -> str:
    """Undo the explorer's Markdown escaping (backslash before punctuation, hard line breaks, the empty colour
    directives that keep Streamlit's text patterns from matching)."""
    return re.sub(r"\\(.)", r"\1", s.replace("  \n", "\n").replace(MD_CUT, ""))


def start() -> AppTest:
    """A fresh app, first run done (the default bundled template loaded)."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def use_file(at: AppTest, path: pathlib.Path | str) -> AppTest:
    """Make a template file the current one, as the Sources page does for a local file."""
    from explorer import state

    at.session_state["template"] = state.load_spec(str(path), origin="file")
    return at


def use_corpus(at: AppTest, name: str) -> AppTest:
    return use_file(at, TEMPLATES / name)


def page(at: AppTest, name: str) -> AppTest:
    """Switch to ``explorer/pages/<name>.py`` and run."""
    at.switch_page(f"explorer/pages/{name}.py").run()
    assert not at.exception, at.exception
    return at


LATER = "appears here in a moment"   # the placeholder of work drawn after the first paint (explorer.state.later)


def settle(at: AppTest, timeout: float = TIMEOUT) -> AppTest:
    """Rerun ``at`` until no placeholder of background work is shown (what the placeholder's fragment does in a
    browser: rerun the page once the work is over)."""
    import time

    deadline = time.monotonic() + timeout
    while any(LATER in i.value for i in at.info):
        assert time.monotonic() < deadline, "background work did not finish"
        time.sleep(0.2)
        at.run()
        assert not at.exception, at.exception
    return at


def errors(at: AppTest) -> list[str]:
    return [unmd(e.value) for e in at.error]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def frame_with(at: AppTest, column: str):
    """The first dataframe or static table shown that has ``column``."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    for df in at.table:   # a static table's cells are Markdown, escaped by the page: read them as shown
        if column in df.value.columns:
            return df.value.map(lambda v: unmd(v) if isinstance(v, str) else v)
    for rows in md_tables(at):   # a table drawn as one Markdown block (explorer.components.text.md_table)
        if column in rows[0]:
            import pandas as pd

            return pd.DataFrame(rows[1:], columns=rows[0])
    raise AssertionError(f"no dataframe with column {column!r}")


def md_cells(line: str) -> list[str]:
    """The cells of one Markdown table row, split at its unescaped ``|`` and read as shown (:func:`unmd`)."""
    body = line.strip()
    body = body[1:-1] if body.startswith("|") and body.endswith("|") and not body.endswith("\\|") else body
    cells, cur, i = [], "", 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            cur += body[i:i + 2]
            i += 2
            continue
        if body[i] == "|":
            cells.append(cur)
            cur = ""
        else:
            cur += body[i]
        i += 1
    cells.append(cur)
    return [unmd(c.strip()) for c in cells]


def md_tables(at: AppTest) -> list[list[list[str]]]:
    """Every Markdown table the page drew (header row first, the ``|---|`` row left out), cells as shown."""
    out = []
    for m in at.markdown:
        lines = m.value.split("\n")
        if len(lines) >= 2 and lines[0].startswith("| ") and set(lines[1]) <= set("|-"):
            out.append([md_cells(line) for line in lines[:1] + lines[2:]])
    return out


def html_bodies(at: AppTest) -> list[str]:
    return [h.value for h in at.html]


_GLYPHS = {"·": " ", "→": "\t", "↵": ""}


def html_texts(at: AppTest) -> list[str]:
    """The text each ``st.html`` element displays: whitespace glyphs turned back into whitespace, tags
    removed, entities decoded (so a test can look for a render or marker as the user reads it)."""
    import html as _html

    out = []
    for body in html_bodies(at):
        body = re.sub(r'<span style="opacity:0.45">(.)</span>', lambda m: _GLYPHS.get(m.group(1), m.group(1)), body)
        out.append(_html.unescape(re.sub(r"<[^>]+>", "", body)))
    return out


REF_TOOLS = [{"type": "function", "function": {
    "name": "special_function", "description": "I need an arg",
    "parameters": {"type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}},
                   "required": ["arg1"]}}}]
"""The one tool of reference/analysis.jsonl's ``apply`` request."""


def json_views(at: AppTest) -> list:
    """The page's JSON views (:func:`explorer.components.text.show_json`: code blocks in JSON), in page order;
    each ``.value`` is the JSON text shown, invisible characters as JSON escapes."""
    return [c for c in at.code if c.language == "json"]
