"""Grammar: the GBNF grammar of the parser built for the current template and the playground's request
settings, highlighted, with its lazy triggers, preserved tokens and a download button."""

import pandas as pd
import streamlit as st

from explorer import state
from explorer.components.code_view import show_code
from explorer.components.provenance import banner
from explorer.components.text import literal, md, show_table, visible_text

st.title("Grammar")
tpl = state.attempt(state.current)
if tpl is None:
    st.stop()
banner(tpl)
st.markdown(f"**{md(tpl.name)}**")
st.caption("Built for the request settings of the Playground (tools, tool_choice, parallel calls, reasoning).")

request = state.attempt(state.request_dict)
bundle = state.attempt(state.parser_bundle, tpl, request) if request is not None else None
if bundle is None:
    st.stop()
parser = bundle.parser

c1, c2, c3 = st.columns(3)
c1.metric("Grammar", "present" if parser.grammar else "none",
          help="A GBNF grammar that holds the model's sampling to the format's tool calls (built when the request "
               "has tools).")
c2.metric("Lazy", "yes" if parser.grammar_lazy else "no",
          help="yes: the grammar applies only from a trigger on, so the text before a call is not constrained.")
c3.metric("Triggers", len(parser.grammar_triggers or []),
          help="Words or patterns in the output that switch a lazy grammar on (listed below).")

if parser.grammar:
    show_code(parser.grammar, "gbnf", max_height="36rem")
    st.download_button("Download grammar (.gbnf)", parser.grammar, file_name=f"{tpl.file_stem}.gbnf",
                       mime="text/plain")
else:
    st.info("No grammar for this request: llama.cpp builds one when tools are given with a tool format and "
            "tool_choice is auto (with a trigger) or required, or when a JSON schema is set.")

st.subheader("Triggers")
st.caption("Values as JSON strings, so whitespace shows (\\n is a newline).")
trig = pd.DataFrame([{"type": getattr(t.type, "value", str(t.type)), "value": literal(t.value)}
                     for t in parser.grammar_triggers or []], columns=["type", "value"])
# small static tables, not grids: a grid's setup was most of the browser's work of a switch to this page
show_table(trig, hide_index=True)

left, right = st.columns(2)
with left:
    st.subheader("Preserved tokens")
    show_table(pd.DataFrame({"token": [visible_text(t) for t in parser.preserved_tokens or []]}), hide_index=True)
with right:
    st.subheader("Additional stops")
    show_table(pd.DataFrame({"stop": [literal(t) for t in parser.additional_stops or []]}), hide_index=True)

with st.expander("Parser structure (PEG)"):
    try:
        st.code(visible_text(parser.describe()), language=None, wrap_lines=True)
    except Exception as e:  # noqa: BLE001
        state.show_error(e)
