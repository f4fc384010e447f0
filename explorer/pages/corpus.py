"""Corpus: analyse every template of a folder (../shared/templates when present, else the bundled
examples) with a progress bar; a table filterable by format, modes and caps; click through to a template;
CSV export. Rows are cached per file (path, size, mtime), so a second run is instant. "Lint" adds the lint
columns (core.lint on two worker processes, with its own progress bar)."""

import pathlib
import time

import pandas as pd
import streamlit as st

from core.serving import BusyError, WorkKind, confined_template_path, work_slot
from explorer import state
from explorer.components import serving
from explorer.components.lint_view import corpus_lint
from explorer.components.text import md

SUFFIXES = (".jinja", ".j2", ".json", ".gguf")
CAPS = [f"supports_{c}" for c in ("tools", "tool_calls", "parallel_tool_calls", "system_role", "object_arguments",
                                  "typed_content", "string_content", "preserve_reasoning", "reasoning_effort")]
COLUMNS = ["template", "route", "handler", "reasoning", "content", "tools", "reasoning_start", "reasoning_end",
           "tool_start", "workarounds", "response_template", *CAPS, "analysis_ms", "warning", "error"]


@st.cache_data(max_entries=4096, show_spinner=False)
def corpus_row(path: str, size: int, mtime: float) -> dict:
    """One table row for a template file (``size``/``mtime`` key the cache). Never raises: errors go in
    the ``error`` column."""
    name = pathlib.Path(path).name
    row = {c: None for c in COLUMNS}
    row["template"] = name
    t0 = time.perf_counter()
    try:
        tpl = state.load_spec(path, origin="file")
        rep = state.automatic_report(tpl)
        a = rep.analysis
        row.update(route=rep.route.kind, handler=rep.route.handler or "", reasoning=a.reasoning.mode.value,
                   content=a.content.mode.value, tools=a.tools.format.mode.value,
                   reasoning_start=a.reasoning.start, reasoning_end=a.reasoning.end,
                   tool_start=a.tools.format.section_start or a.tools.format.per_call_start,
                   workarounds=", ".join(rep.workarounds_applied), error="",
                   warning="" if not rep.all_probes_failed else  # the analysis above is the default one
                   "fails every probe render: default analysis (first: "
                   f"{rep.probe_failures[0] if rep.probe_failures else '?'})")
        for c in CAPS:
            row[c] = bool(getattr(a.caps, c))
        from core.export.response_template import export_response_template  # whether/why it exports (issue 13)

        ex = export_response_template(tpl.template(), fidelity=state.fidelity())
        row["response_template"] = "exportable" if ex.exportable else "no: " + "; ".join(ex.reasons)
    except BusyError:  # the server is busy, not the template: never cached as the row's error
        raise
    except Exception as e:  # noqa: BLE001 - one bad template must not stop the corpus
        row["error"] = str(e) if hasattr(e, "args") else repr(e)
    row["analysis_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return row


st.title("Corpus")
policy = serving.policy()
if policy.server_paths:  # a folder the visitor types, confined to the operator's roots (core.serving)
    picked = serving.folder_input("Folder of templates", "in_corpus_folder", SUFFIXES)
    if picked is None:
        st.stop()
    folder, files = picked[0], [p for p in picked[1] if p.suffix.lower() in SUFFIXES]
else:  # server folders are off: the bundled examples only
    folder = state.BUNDLED_DIR
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    st.caption("The bundled examples (reading server folders is off; see the README's \"Deploying the demo\").")
if not files:
    st.warning(md(f"No .jinja / .json / .gguf files in {folder}."))
    st.stop()

result = st.session_state.get("corpus_result")
if st.button(f"Analyse {len(files)} templates", type="primary"):
    try:
        with work_slot(WorkKind.CORPUS, policy.limits):  # demo mode: one corpus run per server at a time
            bar = st.progress(0.0, text="Starting…")
            rows = []
            for i, p in enumerate(files):
                bar.progress(i / len(files), text=md(f"{i}/{len(files)} · {p.name}"))
                stat = p.stat()
                rows.append(corpus_row(str(p), stat.st_size, stat.st_mtime))
            bar.progress(1.0, text=f"Done: {len(files)} templates")
        result = {"folder": str(folder), "rows": rows}
        st.session_state["corpus_result"] = result
    except BusyError as e:
        st.error(md(str(e)))

if not result:
    st.caption("Press the button to analyse the folder.")
    st.stop()
if result["folder"] != str(folder):
    st.caption(md(f"Showing the last run, on {result['folder']}."))

if st.button(f"Lint {len(files)} templates"):
    lint_bar = st.progress(0.0, text="Lint: starting…")
    lint_rows = corpus_lint([str(p) for p in files], state.fidelity(),
                            lambda frac, text: lint_bar.progress(frac, text=md(text)))
    st.session_state["corpus_lint"] = {"folder": result["folder"], "rows": lint_rows}
linted = st.session_state.get("corpus_lint")
if linted and linted["folder"] == result["folder"]:
    LINT_COLUMNS = ["lint_errors", "lint_warnings", "lint_info", "lint_kinds", "lint_ids"]
    result = {**result, "rows": [{**r, **linted["rows"].get(r["template"], {})} for r in result["rows"]]}
    COLUMNS = [*COLUMNS[:-2], *LINT_COLUMNS, *COLUMNS[-2:]]
df = pd.DataFrame(result["rows"], columns=COLUMNS)
ok = df[df["error"] == ""]
c1, c2, c3, c4 = st.columns(4)
c1.metric("Templates", len(df))
c2.metric("Analysed", len(ok))
c3.metric("Errors", int((df["error"] != "").sum()))
c4.metric("Special handler", int((df["route"] == "specialized").sum()))
failing = int((df["warning"].fillna("") != "").sum())
if failing:
    st.warning(f"{failing} template(s) fail every probe render: their rows show the default analysis (see the "
               "warning column; 'Errors only' lists them too).")

# ---- filters
f1, f2, f3, f4 = st.columns(4)
tool_modes = sorted(x for x in df["tools"].dropna().unique())
reason_modes = sorted(x for x in df["reasoning"].dropna().unique())
content_modes = sorted(x for x in df["content"].dropna().unique())
routes = sorted(x for x in df["route"].dropna().unique())
sel_tools = f1.multiselect("Tool format", tool_modes, key="in_corpus_tools")
sel_reason = f2.multiselect("Reasoning", reason_modes, key="in_corpus_reasoning")
sel_content = f3.multiselect("Content", content_modes, key="in_corpus_content")
sel_route = f4.multiselect("Route", routes, key="in_corpus_route")
g1, g2, g3 = st.columns([2, 2, 1])
sel_caps = g1.multiselect("Must support", CAPS, key="in_corpus_caps")
search = g2.text_input("Name contains", key="in_corpus_search")
only_errors = g3.toggle("Errors only", key="in_corpus_errors")

view = df
if sel_tools:
    view = view[view["tools"].isin(sel_tools)]
if sel_reason:
    view = view[view["reasoning"].isin(sel_reason)]
if sel_content:
    view = view[view["content"].isin(sel_content)]
if sel_route:
    view = view[view["route"].isin(sel_route)]
for c in sel_caps:
    view = view[view[c] == True]  # noqa: E712 - pandas elementwise comparison (None stays out)
if search:
    view = view[view["template"].str.contains(search, case=False, regex=False)]
if only_errors:
    view = view[(view["error"] != "") | (view["warning"].fillna("") != "")]

st.caption(f"{len(view)} of {len(df)} templates shown. Select a row to open it.")
event = st.dataframe(view, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                     key="corpus_table")
st.download_button("Download CSV", view.to_csv(index=False), file_name="corpus-analysis.csv", mime="text/csv")

# ---- click through
picked = None
try:
    rows_sel = event.selection.rows
    if rows_sel:
        picked = view.iloc[rows_sel[0]]["template"]
except AttributeError:
    pass
names = list(view["template"])
if picked and picked in names:
    st.session_state["in_corpus_open"] = picked
if st.session_state.get("in_corpus_open") not in names:
    st.session_state["in_corpus_open"] = names[0] if names else None
if names:
    o1, o2 = st.columns([3, 1])
    o1.selectbox("Template", names, key="in_corpus_open")
    if o2.button("Open in Overview", type="primary"):
        chosen = str(pathlib.Path(result["folder"]) / st.session_state["in_corpus_open"])
        tpl = state.attempt(lambda: state.load_spec(chosen if not policy.server_paths
                                                    else str(confined_template_path(chosen, policy.roots)),
                                                    origin="file"))
        if tpl:
            state.set_current(tpl)
            st.switch_page("explorer/pages/overview.py")
