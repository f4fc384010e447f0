"""Corpus: analyse every template of a folder (../shared/templates when present, else the bundled
examples) with a progress bar; a table filterable by format, modes and caps; click through to a template;
CSV export. Rows are cached per file (path, size, mtime), so a second run is instant. "Lint" adds the lint
columns (core.lint on two worker processes, with its own progress bar)."""

import pathlib

import pandas as pd
import streamlit as st

import core.corpus as core_corpus
from core.corpus import CAPS, COLUMNS, SUFFIXES
from core.serving import BusyError, WorkKind, work_slot
from explorer import state
from explorer.components import serving
from explorer.components.glossary import column_help
from explorer.components.lint_view import corpus_lint
from explorer.components.text import md, visible_text


@st.cache_data(max_entries=4096, show_spinner=False)
def corpus_row(path: str, size: int, mtime: float, fidelity: str = "llama.cpp") -> dict:
    """:func:`core.corpus.corpus_row` cached per file (``size``/``mtime`` key the cache) and fidelity, computed in
    a limited worker (:func:`core.isolated_ops.corpus_row`)."""
    from core.isolated_ops import corpus_row as isolated_row

    return isolated_row(path, fidelity)


def uncached_if_stopped(path: str, size: int, mtime: float, fidelity: str) -> dict:
    """:func:`corpus_row`, or for a worker stopped at its limit an error row that is not cached."""
    from core.isolated_ops import stopped_row
    from core.isolation import WorkerLimitError

    try:
        return corpus_row(path, size, mtime, fidelity)
    except WorkerLimitError as e:
        return stopped_row(path, e)


st.title("Corpus")
if state.fidelity() != "llama.cpp":
    st.info(md(f"Fidelity “{state.fidelity()}”: rows are analysed with this tool's improvements beyond llama.cpp "
               "(the figures in docs/fidelity.md are at llama.cpp fidelity)."))
policy = serving.policy()
if policy.server_paths:  # a folder the visitor types, confined to the operator's roots (core.serving)
    picked = serving.folder_input("Folder of templates", "in_corpus_folder", SUFFIXES)
    if picked is None:
        st.stop()
    folder, files = picked[0], [p for p in picked[1] if p.suffix.lower() in SUFFIXES]
else:  # server folders are off: the bundled examples only
    folder = state.BUNDLED_DIR
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    st.caption("The bundled examples (reading server folders is off; see docs/deploying.md).")
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
                rows.append(uncached_if_stopped(str(p), stat.st_size, stat.st_mtime, state.fidelity()))
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
# core.corpus rows (keys COLUMNS) plus, once linted, the lint columns; the table shows them after the markers
lint_columns: list[str] = []
if linted and linted["folder"] == result["folder"]:
    lint_columns = ["lint_errors", "lint_warnings", "lint_info", "lint_kinds", "lint_ids"]
    result = {**result, "rows": [{**r, **linted["rows"].get(r["template"], {})} for r in result["rows"]]}
df = pd.DataFrame(result["rows"], columns=[*COLUMNS, *lint_columns])
counts = core_corpus.corpus_counts(result["rows"])  # docs/fidelity.md's figures come from the same function
c1, c2, c3, c4, c5, c6 = st.columns(6)
c1.metric("Templates", counts.templates)
c2.metric("Analysed", counts.analysed)
c3.metric("Errors", counts.errors)
c4.metric("Auto-parser", counts.autoparser)
c5.metric("Special handler", counts.specialized)
c6.metric("Fail every probe", counts.all_probes_failed)
if counts.handlers:
    st.caption(md("Special handlers: " + ", ".join(f"{h} {n}" for h, n in counts.handlers.items())))
if counts.all_probes_failed:
    st.warning(f"{counts.all_probes_failed} template(s) fail every probe render: their rows show the default "
               "analysis (the reason is in the problem column; 'Errors only' lists them too).")

# ---- at a glance: formats, routes and problems as charts (the table below has the rows)


def family(name: str) -> str:
    """A template's family for the charts: its file name up to the first "-" or "_" (the Hub organisation for
    corpus files: "Qwen-Qwen3-8B.jinja" -> "Qwen", "meta-llama-…" -> "meta")."""
    stem = name.rsplit(".", 1)[0]
    for sep in ("-", "_"):
        stem = stem.split(sep, 1)[0]
    return stem or name


st.subheader("At a glance")
ch1, ch2 = st.columns(2)
with ch1:
    st.caption("Tool-call format, by route (stacked): how many templates write their calls each way.")
    fmt = (df.assign(tools=df["tools"].fillna("(failed)"), route=df["route"].fillna("(failed)"))
           .groupby(["tools", "route"]).size().reset_index(name="templates"))
    st.bar_chart(fmt, x="tools", y="templates", color="route", horizontal=True, height=260)
with ch2:
    st.caption("Reasoning and content modes: how many templates mark each.")
    mode_counts = pd.concat([
        df["reasoning"].fillna("(failed)").value_counts().rename_axis("mode").reset_index(name="templates")
        .assign(of="reasoning"),
        df["content"].fillna("(failed)").value_counts().rename_axis("mode").reset_index(name="templates")
        .assign(of="content")])
    st.bar_chart(mode_counts, x="mode", y="templates", color="of", horizontal=True, height=260)
problems = df.assign(family=df["template"].map(family),
                     error=(df["error"].fillna("") != "").astype(int),
                     warning=(df["warning"].fillna("") != "").astype(int))
kinds = ["error", "warning"]
if lint_columns:
    problems = problems.assign(**{"lint errors": problems["lint_errors"].fillna(0).astype(int),
                                  "lint warnings": problems["lint_warnings"].fillna(0).astype(int)})
    kinds += ["lint errors", "lint warnings"]
per_family = problems.groupby("family")[kinds].sum()
per_family = per_family[per_family.sum(axis=1) > 0]
if per_family.empty:
    st.caption("No problems in any family" + ("." if lint_columns else " (press Lint to add lint findings)."))
else:
    top = per_family.loc[per_family.sum(axis=1).sort_values(ascending=False).index[:20]]
    st.caption(f"Problems per family (the {len(top)} with most; a family is the file name's first word)"
               + ("" if lint_columns else "; press Lint to add lint findings") + ".")
    long = top.reset_index().melt("family", var_name="kind", value_name="count")
    st.bar_chart(long[long["count"] > 0], x="family", y="count", color="kind", horizontal=True,
                 height=max(180, 40 * len(top) + 90))

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
with g2:
    search = serving.capped_text_input("Name contains", "in_corpus_search", "search text")
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
# the reason a row failed comes right after its name (at 1400 px the last columns were cut off), then what
# identifies the format; caps and the marker texts follow. Text from templates is shown with invisible
# characters escaped.
shown = view.assign(problem=(view["error"].fillna("") + view["warning"].fillna("")).map(visible_text))
for c in ("reasoning_start", "reasoning_end", "tool_start"):
    shown[c] = shown[c].map(lambda v: None if v is None else visible_text(v))
order = ["template", "problem", "route", "handler", "tools", "reasoning", "content", "workarounds",
         "reasoning_start", "reasoning_end", "tool_start", "response_template", *lint_columns, *CAPS, "analysis_ms"]
HELP = {"tools": column_help("Tool calls"), "reasoning": column_help("Reasoning"), "content": column_help("Content"),
        "route": "auto-parser: llama.cpp builds the parser from the analysis; specialized: a hand-written handler"}
widths = {"template": 280, "problem": 320 if only_errors else 160, "route": 90, "handler": 110, "tools": 130,
          "reasoning": 100, "content": 170, "workarounds": 120}
# a problem or handler column empty in every row shown only pushed the modes off the right edge at 1400 px
order = [c for c in order if c not in ("problem", "handler") or shown[c].fillna("").astype(bool).any()]
widths = {c: w for c, w in widths.items() if c in order}
event = st.dataframe(shown[order], hide_index=True, width="stretch", height=min(38 + 35 * len(shown), 740),
                     on_select="rerun", selection_mode="single-row", key="corpus_table",
                     column_config={c: st.column_config.TextColumn(c, width=w, help=HELP.get(c))
                                    for c, w in widths.items()})
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
        if not policy.server_paths:  # the bundled examples: loaded by name, so a link says bundled:NAME, not a path
            tpl = state.attempt(state.load_bundled, st.session_state["in_corpus_open"])
        else:
            tpl = state.attempt(state.load_visitor_path, chosen)
        if tpl:
            state.set_current(tpl)
            st.switch_page("explorer/pages/overview.py")
