"""Comparisons: every A-versus-B render of the analysis (R1…T7, A1/A2, role markers, generation prompt)
side by side — the inputs of both variants, both renders, the diff split coloured prefix / left / right /
suffix with whitespace and special tokens visible — and the fields each comparison set."""

import pandas as pd
import streamlit as st

from explorer import state
from explorer.components.diff_view import parts_html, show_diff, show_text
from explorer.components.marker_table import known_markers
from explorer.components.provenance import banner
from explorer.components.text import literal, md, show_json, show_table

st.title("Comparisons")
tpl = state.attempt(state.current)
rep = state.attempt(state.report, tpl) if tpl is not None else None
if rep is None:
    st.stop()
banner(tpl, rep)
st.markdown(f"**{md(tpl.name)}** · {len(rep.comparisons)} comparisons")
markers = known_markers(rep.analysis)

comparisons = list(rep.comparisons)
ids = [c.id for c in comparisons]
c1, c2, c3 = st.columns([2, 2, 1])
state.default("in_cmp_focus", "All")
if st.session_state["in_cmp_focus"] not in ["All", *ids]:
    st.session_state["in_cmp_focus"] = "All"
focus = c1.selectbox("Show", ["All", *ids], key="in_cmp_focus")
only_found = c2.toggle("Only comparisons that set a field", key="in_cmp_only_found")
full = c3.toggle("Whole renders", key="in_cmp_full",
                 help="Show the shared prefix and suffix in full instead of their nearest 400 characters.")

overview = pd.DataFrame([{
    "id": c.id, "title": c.title, "status": "error" if c.error else ("ok" if c.diff is not None else "skipped"),
    "fields set": ", ".join(c.found or {}),
} for c in comparisons], columns=["id", "status", "fields set", "title"])
with st.expander("Summary table", expanded=focus == "All"):
    # a static table: its cells wrap (the fields a comparison sets were cut off in a grid), what it found first
    show_table(overview, hide_index=True)

for c in comparisons:
    if focus != "All" and c.id != focus:
        continue
    if only_found and not c.found:
        continue
    status = " — render failed" if c.error else ""
    label = md(f"{c.id}: {c.title}{status}")
    if focus == "All":
        # the list view draws a comparison only once its expander is opened (a rerun): ~10 diffs drawn inside
        # closed expanders made this the slowest page to switch to (most of it the browser laying them out)
        box = st.expander(label, key=f"cmp_open_{c.id}", on_change="rerun")
        if not box.open:
            continue
    else:
        box = st.expander(label, expanded=True)
    with box:
        if c.error:
            st.warning(md(state.for_visitor(c.error)))
        if c.found:
            st.markdown("**Fields this comparison set**")
            # a static table, not a grid (a grid per comparison was most of the browser's work on this page)
            show_table(pd.DataFrame([{"field": k, "value": literal(v) if isinstance(v, str) else str(v)}
                                   for k, v in c.found.items()]), hide_index=True)
        else:
            st.caption("This comparison set no field.")
        for note in getattr(c, "notes", None) or []:
            st.caption(md(note))
        if focus == "All":
            # the list view draws only the diff split; one comparison at a time (Show) draws both renders and
            # inputs too
            if c.diff is not None:
                show_diff(c.diff, context=None if full else 400, markers=markers)
            st.caption(md(f"Pick {c.id} under Show for both renders, both inputs and the four parts."))
            continue
        tab_diff, tab_renders, tab_inputs = st.tabs(["Diff split", "Renders A | B", "Inputs A | B"])
        with tab_diff:
            if c.diff is None:
                st.caption("No diff: a render failed.")
            else:
                show_diff(c.diff, context=None if full else 400, markers=markers)
                with st.popover("The four parts"):
                    st.html(parts_html(c.diff, markers))
        with tab_renders:
            a, b = st.columns(2)
            with a:
                st.markdown("**A**")
                show_text(c.output_a, markers=markers)
            with b:
                st.markdown("**B**")
                show_text(c.output_b, markers=markers)
        with tab_inputs:
            a, b = st.columns(2)
            with a:
                st.markdown("**A**")
                show_json(c.inputs_a, height=200)
            with b:
                st.markdown("**B**")
                show_json(c.inputs_b, height=200)
