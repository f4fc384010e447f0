"""A plain Streamlit app, the baseline of ``python -m bench.app --server-cpu``: what Streamlit itself costs per
step, with the explorer's shape and none of its work — a sidebar (a select box, a radio), navigation between
three pages, and on each a title, some Markdown, a text area, a code block and a 20-row table."""

import pandas as pd
import streamlit as st

st.set_page_config(page_title="Plain baseline", layout="wide")

ROWS = pd.DataFrame({"name": [f"row {i}" for i in range(20)], "value": list(range(20)),
                     "note": ["a plain cell of text"] * 20})


def _page(title: str) -> None:
    st.title(title)
    st.markdown(f"**{title}** · a plain page · no analysis")
    st.text_area("Some text", value="Hello", key=f"text_{title}")
    st.code("{% for m in messages %}{{ m.content }}{% endfor %}", language="jinja")
    st.dataframe(ROWS, hide_index=True)


def one() -> None:
    _page("One")


def two() -> None:
    _page("Two")


def three() -> None:
    _page("Three")


with st.sidebar:
    st.selectbox("Example", ["a", "b", "c"], key="pick")
    st.radio("Mode", ["x", "y"], key="mode", horizontal=True)

st.navigation([st.Page(one, title="One", default=True), st.Page(two, title="Two"),
               st.Page(three, title="Three")]).run()
