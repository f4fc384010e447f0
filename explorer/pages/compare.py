"""Compare: the current template (A) against another (B) — the loaded source before editing, a bundled
example, a file, a Hub revision or pasted text: analysis fields that differ, comparisons whose renders differ,
lint findings added and removed, and the same outputs parsed by both (core.compare)."""

import streamlit as st

from explorer import state
from explorer.components.lint_view import show_comparison
from explorer.components.text import md


@st.cache_resource(max_entries=16, show_spinner="Comparing…")
def _compare(src_a: str, name_a: str, src_b: str, name_b: str, fidelity: str, with_lint: bool):
    from core.isolated_ops import compare  # in a limited worker: no template code in the server

    return compare(src_a, name_a, src_b, name_b, fidelity, with_lint)


st.title("Compare")
tpl = state.current()
st.caption(md(f"A: {tpl.name} ({tpl.origin})"))
base = st.session_state.get("edit_base")
kinds = (["Loaded source (before editing)"] if tpl.origin == "edited" and base is not None else []) + \
    ["Bundled example", "File or Hub id", "Pasted text"]
if st.session_state.get("in_compare_kind") not in kinds:
    st.session_state["in_compare_kind"] = kinds[0]
kind = st.radio("B", kinds, key="in_compare_kind", horizontal=True)
other = None
if kind.startswith("Loaded"):
    other = base
elif kind == "Bundled example":
    name = st.selectbox("Bundled example", state.bundled_names(), key="in_compare_bundled")
    other = state.attempt(state.load_bundled, name) if name else None
elif kind == "File or Hub id":
    from core.serving import policy_or_closed

    server_paths = policy_or_closed()[0].server_paths  # a server path only where the operator allows folders
    c1, c2 = st.columns([3, 1])
    spec = c1.text_input("Server path (allowed folders) or Hub repo id" if server_paths else "Hub repo id",
                         key="in_compare_spec")
    rev = c2.text_input("Revision (Hub)", key="in_compare_rev")
    spec = spec.strip()
    if spec:
        if state.is_repo_id(spec) or not server_paths:
            other = state.attempt(state.load_visitor_hub, spec, revision=rev.strip() or None)
        else:
            other = state.attempt(state.load_visitor_path, spec)
else:
    text = st.text_area("Template source B", key="in_compare_text", height=200)
    if text.strip():
        other = state.from_edit(None, text, "pasted.jinja")
with_lint = st.toggle("Include lint findings", value=True, key="in_compare_lint")
if other is not None:
    st.caption(md(f"B: {other.name} ({other.origin})"))
    result = state.attempt(_compare, tpl.source, tpl.name, other.source, other.name, state.fidelity(), with_lint)
    if result is not None:
        show_comparison(result)
