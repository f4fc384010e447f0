"""Front page: what the explorer is, for whom, where to start (three stories), the current template and
fidelity, and a glossary of the analysis' mode names. Runs no analysis (the first view stays fast)."""

import streamlit as st

from explorer import state
from explorer.components.glossary import MODES, TERMS
from explorer.components.text import md

st.title("Chat Template Explorer")
st.markdown(
    "A model's **chat template** (the Jinja text shipped with it) decides how its replies are written: where "
    "the reasoning goes, where the answer starts, how a tool call looks. This app learns that format the way "
    "llama.cpp does — it renders the template with one thing changed at a time and compares the renders — then "
    "parses real model output into an OpenAI message (content, reasoning_content, tool_calls), whole or "
    "streamed, and shows where every character went.")
st.caption("For people who serve or fine-tune models, write chat templates, or debug tool calls that come "
           "back as plain text. Everything runs on this server; nothing is sent to a model.")

st.subheader("Where to start")
c1, c2, c3 = st.columns(3)
with c1:
    with st.container(border=True):
        st.markdown("**A model's output parses wrong**")
        st.caption("Paste the output: see which part became reasoning, content or a call, where the parser "
                   "stopped, why, and a fix that was re-parsed before it is offered.")
        st.page_link("explorer/pages/explain.py", label="Explain an output", icon=":material/troubleshoot:")
        st.page_link("explorer/pages/playground.py", label="Playground (stream it)", icon=":material/play_arrow:")
with c2:
    with st.container(border=True):
        st.markdown("**I am writing a template**")
        st.caption("Edit it with a live render of a conversation beside it, see the analysis update, and lint "
                   "it for shapes that break parsers.")
        st.page_link("explorer/pages/edit.py", label="Edit a template", icon=":material/edit:")
        st.page_link("explorer/pages/lint.py", label="Lint it", icon=":material/rule:")
with c3:
    with st.container(border=True):
        st.markdown("**How was a model's format found?**")
        st.caption("See the markers the analysis learned and the pairs of renders each one came from; compare "
                   "two templates or two revisions.")
        st.page_link("explorer/pages/overview.py", label="Overview of the analysis", icon=":material/search:")
        st.page_link("explorer/pages/comparisons.py", label="Comparisons (the renders)",
                     icon=":material/compare_arrows:")

st.subheader("Now loaded")
tpl = state.attempt(state.current)
if tpl is not None:
    st.markdown(f"**{md(tpl.name)}** · {md(tpl.origin)} · {len(tpl.source):,} characters · fidelity "
                f"**{md(state.fidelity())}**")
    st.caption("Pick another bundled example in the sidebar, or load one from a file, a folder or the Hugging "
               "Face Hub on Sources. The fidelity switch is in the sidebar too.")
    st.page_link("explorer/pages/sources.py", label="Load a template", icon=":material/folder_open:")

st.subheader("Glossary")
rows = "\n".join(f"| {g} | `{n}` | {md(m)} |" for (g, n), m in MODES.items())
st.markdown("| part | mode | meaning |\n|---|---|---|\n" + rows)
st.markdown("\n".join(f"- **{k}**: {md(v)}" for k, v in TERMS.items()))
