"""Lint: every finding of core.lint for the current template (render matrix, round trip, prefix stability,
renderer divergence, probes, markers, dates), with evidence and hints; suppress ids; JSON download."""

import json

import streamlit as st

from explorer import state
from explorer.components import serving
from explorer.components.lint_view import show_findings
from explorer.components.text import md


@st.cache_resource(max_entries=32, show_spinner="Linting the template…")
def _lint(source: str, name: str, fidelity: str, suppressed: tuple[str, ...], overrides_key: str, _report):
    from core.isolated_ops import lint  # in a limited worker: no template code in the server

    return lint(source, name, fidelity, suppressed, _report)


st.title("Lint")
tpl = state.current()
st.caption(md(f"{tpl.name} · {tpl.origin} · fidelity {state.fidelity()}"))
suppress = serving.capped_text_input("Suppress ids (space-separated shell patterns, e.g. render/typed-* prefix/history)",
                                     "in_lint_suppress", "suppress patterns")
patterns = tuple(suppress.split())
analysis = state.attempt(state.report, tpl)  # with the session's overrides and workaround switches
overrides_key = json.dumps([state.overrides_for(tpl), sorted(state.disabled_for(tpl))], sort_keys=True)
report = state.attempt(_lint, tpl.source, tpl.name, state.fidelity(), patterns, overrides_key, analysis) \
    if analysis is not None else None
if report is not None:
    if report.suppressed:
        st.caption(md(f"{len(report.suppressed)} suppressed: " + ", ".join(report.suppressed)))
    show_findings(report)
    st.download_button("Download findings (JSON)", json.dumps(report.to_json(), ensure_ascii=False, indent=2),
                       file_name=f"{tpl.file_stem}.lint.json", mime="application/json")
