"""A tiny Streamlit app for tests/test_browser_escapes.py: hostile text through the explorer's one Markdown escape
(:func:`explorer.components.text.md` and :func:`~explorer.components.text.md_cell`) in the elements the pages
use, a hostile tool name in an engine sentence's code span (:func:`~explorer.components.text.md_code`), beside a
Markdown link the app itself writes. Run by the test as ``streamlit run tests/escape_app.py``."""

import streamlit as st

from core.escapes import code_span
from explorer.components.text import md, md_cell, md_code

# GFM autolink literals, a Markdown link, Streamlit's :streamlit: logo, a Material icon, an emoji shortcode and the
# typographic arrows: every pattern Streamlit's renderer finds in text after escapes are resolved
BAIT = ("x\\` [click](https://evil.example/a) www.evil.example a@b.cd http://e.example/y mailto:c@d.example "
        ":streamlit: :material_star: :smile: a -> b -- c >= d <= e ~= f <- g <-> h")
DOCS = "https://github.com/ggml-org/llama.cpp/blob/master/docs/function-calling.md"
APP_LINK = f"[llama.cpp's function-calling docs]({DOCS})"
# a tool name built to attack the code span the engine quotes it in (tests/test_explain_hostile.py), as triage names it
CODE_NAME = "a`b`` $x$ :material/home: [x](http://evil.example/a)"
CODE_SENTENCE = f"{code_span(CODE_NAME)} is called without `city`"


def main() -> None:
    with st.container(key="esc_markdown"):
        st.markdown(md(BAIT))
    with st.container(key="esc_caption"):
        st.caption(md(BAIT))
    with st.container(key="esc_error"):
        st.error(md(BAIT))
    with st.container(key="esc_table"):
        st.markdown("| text |\n|---|\n| " + md_cell(BAIT) + " |")
    with st.container(key="esc_label"):
        st.toggle(md(BAIT), key="esc_toggle")
    with st.container(key="esc_joined"):   # two escaped pieces side by side: "www" + ".evil.example"
        st.markdown(md("see www") + md(".evil.example and a") + md("@b.cd"))
    with st.container(key="esc_code"):
        st.markdown(md_code(CODE_SENTENCE))
    with st.container(key="esc_app_link"):
        st.markdown("The app's own link: " + APP_LINK)


if __name__ == "__main__":   # streamlit run; the test imports the texts only
    main()
