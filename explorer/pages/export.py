"""Export: the current template's response_template (transformers or vLLM field names), the verification by
transformers' own parser beside it, tokenizer_config.json with it merged in, and the GBNF + triggers; copy
(the code block's copy button) and download. Only calls core.export."""

import json

import pandas as pd
import streamlit as st

from explorer import state
from explorer.components.text import literal, md, show_table, visible_json_text, visible_text


@st.cache_data(max_entries=32, show_spinner="Exporting…")
def _export(source: str, name: str, fidelity: str, flavour: str) -> dict:
    from core.isolated_ops import export_response_template  # in a limited worker

    return export_response_template(source, name, fidelity, flavour)


def _verify(source: str, name: str, fidelity: str, rt_json: str) -> dict:
    from core.isolated_ops import verify_export  # in a limited worker

    return verify_export(source, name, fidelity, rt_json)


STATUS_WORDS = {
    "agree": "agrees", "disagree": "disagrees",
    "truncated_unsupported": "cut-off output transformers cannot parse (not a disagreement)",
    "marker_in_string": "marker inside an argument string ends transformers' region (a limit of the format)",
    "not_run": "not run (our pipeline could not build this request, or it constrains content by a schema)",
}


def _verification(v: dict) -> None:
    """The headline counts what the table shows: how many checks agree, disagree, and the rest by kind."""
    checks = v["checks"]
    if not checks:   # an empty table said nothing: give the reason `export --verify` gives, and what it means
        st.warning("No check could be run: this template has no usable reference case, and no round-trip message "
                   "that it renders and our parser reads back. Nothing was compared, so this response_template "
                   "is unverified (`python -m core export --verify` refuses it).")
        return
    n_agree = sum(c["status"] == "agree" for c in checks)
    n_dis = sum(c["status"] == "disagree" for c in checks)
    others = len(checks) - n_agree - n_dis
    if n_dis:
        st.error(f"transformers' parser disagrees with ours on {n_dis} of {len(checks)} checks.")
    elif n_agree:
        st.success(f"transformers' parser agrees with ours on {n_agree} of {len(checks)} checks"
                   + (f"; the other {others} did not compare (see the table)." if others else "."))
    else:
        st.warning("No check compared the two parsers (see the table).")
    rows = [{"result": STATUS_WORDS.get(c["status"], c["status"]), "why": literal(c["why"]) if c["why"] else "",
             "case": c["source"]} for c in checks]
    # disagreements first: the rows that need reading
    rows.sort(key=lambda r: (r["result"] != "disagrees", r["result"] == "agrees"))
    # a static table: its cells wrap, so a long "why" is read whole (it was five characters wide in a grid)
    show_table(pd.DataFrame(rows, columns=["result", "case", "why"]), hide_index=True)


st.title("Export")
tpl = state.attempt(state.current)
if tpl is None:
    st.stop()
st.markdown(f"**{md(tpl.name)}**")
flavour = st.radio("For", ["transformers", "vllm"], horizontal=True, key="in_export_flavour",
                   help="transformers names the reasoning field reasoning_content; vLLM's response_template "
                        "parser accepts only thinking, content and tool_calls")
fid = state.fidelity()
res = state.attempt(_export, tpl.source, tpl.name, fid, flavour)
if res is None:
    st.stop()
if not res["exportable"]:
    st.error(md("This template cannot be exported as a response_template: " + "; ".join(res["reasons"])))
else:
    rt = res["response_template"]
    text = json.dumps(rt, ensure_ascii=False, indent=2)
    left, right = st.columns(2)
    with left:
        st.subheader("response_template")
        st.code(visible_json_text(text), language="json", wrap_lines=True)
        st.download_button("Download response_template.json", text, file_name="response_template.json",
                           mime="application/json")
        cfg = json.dumps({"response_template": rt}, ensure_ascii=False, indent=2)
        st.download_button("Download tokenizer_config.json (merge)", cfg, file_name="tokenizer_config.json",
                           mime="application/json",
                           help="python -m core export T --format tokenizer-config --tokenizer-config FILE "
                                "merges into an existing file")
        for n in res["notes"]:
            st.caption(md(n))
    with right:
        st.subheader("Verification by transformers")
        from core.export.verify import transformers_installed, transformers_missing  # not imported: a second of CPU

        if not transformers_installed():
            why = transformers_missing() or "needs transformers.utils.chat_parsing, which this transformers lacks"
            st.info(f"Verification {why}.")
        else:
            # ~2 s in a worker on a template's first view: drawn after the rest of the page (explorer.state.later)
            args = (tpl.source, tpl.name, fid, json.dumps(rt))
            got = state.attempt(state.later, ("verify", *args), lambda: _verify(*args))
            if got is not None and got[0]:
                _verification(got[1])
            elif got is not None:
                state.rerun_when_done(("verify", *args), "Verifying with transformers… the result appears here "
                                                        "in a moment.")

st.subheader("GBNF grammar and triggers")
from core.isolated_ops import export_gbnf  # noqa: E402  (in a limited worker)

gbnf = state.attempt(export_gbnf, tpl.source, tpl.name, fid)
if gbnf is not None:
    # long rules wrap, not clipped; an invisible character in a literal shows as its GBNF escape (\u202e)
    st.code(visible_text(gbnf), language=None, wrap_lines=True)
    st.download_button("Download grammar (.gbnf)", gbnf, file_name="grammar.gbnf", mime="text/plain")
