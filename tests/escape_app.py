"""A tiny Streamlit app for tests/test_browser_escapes.py: hostile text through the explorer's one Markdown escape
(:func:`explorer.components.text.md` and :func:`~explorer.components.text.md_cell`) in the elements the pages
use, beside a Markdown link the app itself writes. Run by the test as ``streamlit run tests/escape_app.py``."""

import streamlit as st

from explorer.components.text import md, md_cell

# GFM autolink literals, a Markdown link, Streamlit's :streamlit: logo, a Material icon, an emoji shortcode and the
# typographic arrows: every pattern Streamlit's renderer finds in text after escapes are resolved
BAIT = ("x\\` [click](https://evil.example/a) www.evil.example a@b.cd http://e.example/y mailto:c@d.example "
        ":streamlit: :material_star: :smile: a -> b -- c >= d <= e ~= f <- g <-> h")
DOCS = "https://github.com/ggml-org/llama.cpp/blob/master/docs/function-calling.md"
APP_LINK = f"[llama.cpp's function-calling docs]({DOCS})"


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
    with st.container(key="esc_app_link"):
        st.markdown("The app's own link: " + APP_LINK)


if __name__ == "__main__":   # streamlit run; the test imports the texts only
    main()
