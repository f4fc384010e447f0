"""Chat Template Explorer — Streamlit entry point (navigation only).

Run: ``streamlit run app.py``. Pages live in ``explorer/pages/``; state and cached engine calls in
``explorer/state.py``. Works offline: the bundled examples in ``assets/templates/`` are the default.
"""

import streamlit as st

from explorer import state
from explorer.components import sidebar

st.set_page_config(page_title="Chat Template Explorer", page_icon="🧭", layout="wide")
state.keep_inputs()

PAGES = [
    st.Page("explorer/pages/overview.py", title="Overview", icon="🔎", default=True),
    st.Page("explorer/pages/sources.py", title="Sources", icon="📂"),
    st.Page("explorer/pages/comparisons.py", title="Comparisons", icon="↔️"),
    st.Page("explorer/pages/overrides.py", title="Overrides", icon="🛠️"),
    st.Page("explorer/pages/playground.py", title="Playground", icon="▶️"),
    st.Page("explorer/pages/grammar.py", title="Grammar", icon="📜"),
    st.Page("explorer/pages/corpus.py", title="Corpus", icon="📚"),
]

nav = st.navigation(PAGES)
sidebar.render()
nav.run()
