"""Front page: what the explorer is, for whom, where to start (three stories), the current template and
fidelity, and a glossary of the analysis' mode names. Runs no analysis (the first view stays fast).

Each block of text is one Markdown element (headings, paragraphs and small print together): the browser runs
Streamlit's whole Markdown pipeline once per element, ~5 ms of a new visitor's main thread each, and this page
had seventeen of them (docs/app.md, "Speed: the first view")."""

import streamlit as st

from explorer import state
from explorer.components.glossary import MODES, TERMS
from explorer.components.text import md


def small(text: str) -> str:
    """``text`` (our own wording, never input) as small faded print, st.caption's look inside one Markdown
    element."""
    return f":small[:gray[{text}]]"


st.title("Chat Template Explorer")
st.markdown(
    "A model's **chat template** (the Jinja text shipped with it) decides how its replies are written: where "
    "the reasoning goes, where the answer starts, how a tool call looks. This app learns that format the way "
    "llama.cpp does — it renders the template with one thing changed at a time and compares the renders — then "
    "parses real model output into an OpenAI message (content, reasoning_content, tool_calls), whole or "
    "streamed, and shows where every character went.\n\n"
    + small("For people who serve or fine-tune models, write chat templates, or debug tool calls that come "
            "back as plain text. Everything runs on this server; nothing is sent to a model.")
    + "\n\n### Where to start")
# the three stories: (who, what they get, (page, label, icon) links)
STORIES = (
    ("A model's output parses wrong",
     "Paste the output: see which part became reasoning, content or a call, where the parser stopped, why, and a "
     "fix that was re-parsed before it is offered.",
     (("explorer/pages/explain.py", "Explain an output", ":material/troubleshoot:"),
      ("explorer/pages/playground.py", "Playground (stream it)", ":material/play_arrow:"))),
    ("I am writing a template",
     "Edit it with a live render of a conversation beside it, see the analysis update, and lint it for shapes "
     "that break parsers.",
     (("explorer/pages/edit.py", "Edit a template", ":material/edit:"),
      ("explorer/pages/lint.py", "Lint it", ":material/rule:"))),
    ("How was a model's format found?",
     "See the markers the analysis learned and the pairs of renders each one came from; compare two templates "
     "or two revisions.",
     (("explorer/pages/overview.py", "Overview of the analysis", ":material/search:"),
      ("explorer/pages/comparisons.py", "Comparisons (the renders)", ":material/compare_arrows:"))),
)
for column, (who, what, links) in zip(st.columns(len(STORIES)), STORIES):
    with column, st.container(border=True):
        st.markdown(f"**{who}**\n\n" + small(what))
        for page, label, icon in links:
            st.page_link(page, label=label, icon=icon)

try:
    tpl = state.current()
except Exception as e:  # noqa: BLE001 - shown under its heading, never a traceback
    st.markdown("### Now loaded")
    state.show_error(e)
else:
    st.markdown(f"### Now loaded\n\n**{md(tpl.name)}** · {md(tpl.origin)} · {len(tpl.source):,} characters · "
                f"fidelity **{md(state.fidelity())}**\n\n"
                + small("Pick another bundled example in the sidebar, or load one from a file, a folder or the "
                        "Hugging Face Hub on Sources. The fidelity switch is in the sidebar too."))
    st.page_link("explorer/pages/sources.py", label="Load a template", icon=":material/folder_open:")

rows = "\n".join(f"| {g} | `{n}` | {md(m)} |" for (g, n), m in MODES.items())
st.markdown("### Glossary\n\n| part | mode | meaning |\n|---|---|---|\n" + rows + "\n\n"
            + "\n".join(f"- **{k}**: {md(v)}" for k, v in TERMS.items()))
