"""Sidebar shown on every page: the current template, a quick switch between bundled examples, and how the
app is served (demo mode's caps; a wrong serving setting of the operator)."""

from __future__ import annotations

import streamlit as st

from core.serving import Mode, policy_or_closed

from .. import state
from .text import CODE_INPUTS_CSS, md


def _serving_note() -> None:
    """Demo mode's caps in one caption; the operator's wrong setting (the app then runs closed: no server
    folders, demo caps) as an error."""
    pol, err = policy_or_closed()
    if err is not None:
        st.error(md(state.for_visitor(f"Serving settings ignored, running as a closed demo: {err}")))
    if pol.mode is Mode.DEMO:
        lim = pol.limits
        st.caption(f"Demo mode: pastes up to {lim.max_paste_bytes // 1024} KB; uploads up to "
                   f"{lim.max_template_upload // 1024} KB (.jinja), {lim.max_json_upload // 2**20} MB (.json), "
                   f"{lim.max_gguf_upload // 2**20} MB (.gguf); {lim.max_analyses} analyses at a time on this server.")


def _pick_bundled() -> None:
    name = st.session_state.get("in_quick_bundled")
    if name and name in state.bundled_names():  # a file name of assets/templates, never a path
        try:
            state.set_current(state.load_bundled(name))
        except Exception as e:  # noqa: BLE001 - shown on the next run
            st.session_state["sidebar_error"] = e


def render() -> None:
    """Draw the sidebar: current template (name, origin, variant) and the bundled-example picker."""
    with st.sidebar:
        st.html(CODE_INPUTS_CSS)
        try:
            tpl = state.current()
        except Exception as e:  # noqa: BLE001
            state.show_error(e)
            return
        st.markdown("**Current template**")
        st.markdown(md(tpl.name))
        st.caption(md(f"{tpl.origin} · variant {tpl.variant} · {len(tpl.source)} chars"))
        names = state.bundled_names()
        want = tpl.name if tpl.origin == "bundled" and tpl.name in names else None
        if st.session_state.get("in_quick_bundled") != want:
            st.session_state["in_quick_bundled"] = want  # follow template changes made on other pages
        st.selectbox("Bundled examples", names, key="in_quick_bundled", on_change=_pick_bundled,
                     placeholder="Pick an example…")
        st.radio("Analysis fidelity", state.FIDELITIES, key="fidelity", horizontal=True,
                 help="llama.cpp: exactly what llama.cpp's auto-parser finds (the reference). improved: this "
                      "tool's named improvements beyond llama.cpp (e.g. templates that print arguments as text, "
                      "pythonic calls); parser and grammar follow.")
        _serving_note()
        err = st.session_state.pop("sidebar_error", None)
        if err is not None:
            state.show_error(err)
