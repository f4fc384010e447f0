"""Chat Template Explorer — Streamlit entry point (navigation only).

Run: ``streamlit run app.py``. Pages live in ``explorer/pages/``; state and cached engine calls in
``explorer/state.py``. Works offline: the bundled examples in ``assets/templates/`` are the default.
"""

import logging

import streamlit as st

from explorer import state, visitor
from explorer.components import sidebar

# the icon is our own file, served by this server: a :material/…: page icon is fetched from fonts.gstatic.com
st.set_page_config(page_title="Chat Template Explorer", page_icon=str(state.ASSETS / "icon.png"), layout="wide")
state.keep_inputs()
visitor.name_this_run()  # demo mode: one analysis slot per browser session at a time (core.serving.work_slot)

PAGES = [
    st.Page("explorer/pages/overview.py", title="Overview", icon=":material/search:", default=True),
    st.Page("explorer/pages/sources.py", title="Sources", icon=":material/folder_open:"),
    st.Page("explorer/pages/comparisons.py", title="Comparisons", icon=":material/compare_arrows:"),
    st.Page("explorer/pages/overrides.py", title="Overrides", icon=":material/tune:"),
    st.Page("explorer/pages/playground.py", title="Playground", icon=":material/play_arrow:"),
    st.Page("explorer/pages/explain.py", title="Explain", icon=":material/troubleshoot:"),
    st.Page("explorer/pages/grammar.py", title="Grammar", icon=":material/account_tree:"),
    st.Page("explorer/pages/corpus.py", title="Corpus", icon=":material/table_view:"),
    st.Page("explorer/pages/edit.py", title="Edit", icon=":material/edit:"),
    st.Page("explorer/pages/lint.py", title="Lint", icon=":material/rule:"),
    st.Page("explorer/pages/compare.py", title="Compare", icon=":material/difference:"),
    st.Page("explorer/pages/export.py", title="Export", icon=":material/ios_share:"),
]

nav = st.navigation(PAGES)
sidebar.render()
try:
    nav.run()
except Exception as e:  # noqa: BLE001 - a failing page shows a message, never a traceback (logged for us)
    logging.getLogger("explorer").exception("page failed")
    state.show_error(e, "This page failed: ")
