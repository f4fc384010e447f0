"""Overview: the template source, caps, the three modes, every marker, the generation prompt, preserved
tokens and the route llama.cpp would take (auto-parser, workaround, special handler)."""

import streamlit as st

from explorer import state
from explorer.components.text import md, show_md_table

st.title("Overview")
tpl = state.attempt(state.current)
if tpl is None:
    st.stop()
st.markdown(f"**{md(tpl.name)}** · {md(tpl.origin)}" + (f" · variant {md(tpl.variant)}" if tpl.variant else ""))
if state.analysis_pending(tpl):  # a deep link's first view: paint now, the analysis follows (explorer.state)
    state.wait_for_analysis(tpl)
    st.stop()

# below the first paint: a fresh server's first view imports these (pandas alone ~0.4 s of CPU)
import pandas as pd  # noqa: E402

from core.analysis.instructions import inferred_summary  # noqa: E402
from explorer.components import marker_table as mt  # noqa: E402
from explorer.components.code_view import show_code  # noqa: E402
from explorer.components.diff_view import show_text  # noqa: E402
from explorer.components.glossary import mode_help  # noqa: E402
from explorer.components.provenance import banner  # noqa: E402

rep = state.attempt(state.report, tpl)
route = state.attempt(state.route, tpl) if rep is not None else None  # no route shown above a failed analysis
banner(tpl, rep)

if route is not None:
    if getattr(route, "kind", "") == "specialized":
        st.info(md(f"Route: special handler “{route.handler}”. llama.cpp parses this family with a hand-written "
                   "handler; the differential analysis below is still computed and shown."))
    else:
        st.success(md("Route: auto-parser (the analysis below builds the parser)."))
if rep is not None and getattr(rep, "all_probes_failed", False):
    first = (getattr(rep, "probe_failures", None) or ["?"])[0]
    st.error(md("The template failed to render every probe, so the analysis below is only the default one (as "
                f"llama.cpp's): it tells nothing about this template. First failure: {first}"))

# only the open tab is drawn (a rerun on a tab click): the highlighted source in the hidden tab was a few
# thousand elements of the browser's work on every switch to this page
tab_analysis, tab_source = st.tabs(["Analysis", "Template source"], key="ov_tab", on_change="rerun")

if tab_source.open:
    with tab_source:
        if len(tpl.variants) > 1:
            st.caption(md(f"Variants: {', '.join(tpl.variants)}; showing {tpl.variant}"))
        show_code(tpl.source, "jinja")

with tab_analysis:
    if rep is None or not tab_analysis.open:
        st.stop()
    a = rep.analysis
    if rep.workarounds_applied:
        st.warning(md("Workarounds applied: " + ", ".join(rep.workarounds_applied)))
    inferred = inferred_summary(rep)
    if inferred:
        st.info(md(inferred), icon=":material/info:")
    c1, c2, c3 = st.columns(3)
    c1.metric("Reasoning", a.reasoning.mode.value, help=mode_help("Reasoning", a.reasoning.mode))
    c2.metric("Content", a.content.mode.value, help=mode_help("Content", a.content.mode))
    c3.metric("Tool calls", a.tools.format.mode.value, help=mode_help("Tool calls", a.tools.format.mode))

    found_by = mt.found_by_map(rep)
    markers_shown = mt.known_markers(a)

    # the markers table gets the full width (beside Capabilities its "trimmed" / "found by" columns were cut
    # off at 1400 px); the other fields and the capabilities share the row below
    st.subheader("Markers")
    markers = mt.markers_frame(a, found_by=found_by)
    if markers.empty:
        st.caption("No markers: the analysis found no special text around reasoning, content or tool calls.")
    else:
        st.dataframe(markers, hide_index=True, width="stretch", height="content", column_config=mt.marker_column_config(markers))
    left, right = st.columns([3, 2])
    # small tables as one Markdown block each (every cell escaped): not grids, whose setup cost the browser more
    # than the rest of the page, nor st.table, which draws each cell as a Markdown block of its own (96 → 44)
    with left:
        st.subheader("Other fields")
        show_md_table(mt.flags_frame(a))   # wraps: a list value is read whole
    with right:
        st.subheader("Capabilities")
        show_md_table(mt.caps_frame(a.caps))

    st.subheader("Generation prompt")
    st.caption("Text the template appends for the assistant turn (user “Hello”, one tool, thinking on); "
               "the parser reads it before the model output.")
    show_text(rep.generation_prompt, max_height="8rem", markers=markers_shown)

    st.subheader("Preserved tokens")
    show_md_table(pd.DataFrame({"token": list(a.preserved_tokens)}))
    if a.additional_stops:
        st.caption(md("Additional stops: " + ", ".join(a.additional_stops)))

    failures = getattr(rep, "probe_failures", None) or []
    if failures:
        with st.expander(f"{len(failures)} probe render(s) failed"):
            for f in failures:
                st.warning(md(f))
