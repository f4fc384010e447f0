"""Edit: change the current template's source in place. "Analyse" re-runs everything on the edited source
(it becomes the current template, source kind ``edited``, on every page); a syntax or render error is shown at
its line and column and the previous good analysis stays. The edit is never lost: it lives in the session, can
be downloaded, and survives a reload (its text is kept by digest and named in the URL, see explorer.urlstate).
Also: the diff of the edited source against the loaded one, and the source with line numbers."""

import difflib

import streamlit as st

from explorer import state, urlstate
from explorer.components.lint_view import shown_text as shown
from explorer.components.marker_table import markers_frame
from explorer.components.text import md

KEY = "in_edit_source"


def _save_draft() -> None:
    text = st.session_state.get(KEY, "")
    st.query_params["draft"] = urlstate.save_text(text)


def _analyse() -> None:
    from core.isolated_ops import check_source  # the check renders: in a limited worker

    base = st.session_state.get("edit_base") or state.current()
    text = st.session_state.get(KEY, "")
    try:
        loc = check_source(text, base.name)
    except Exception as e:  # noqa: BLE001 - a worker stopped at its limit: shown where the error goes
        from core.lint.locate import locate_error

        st.session_state["edit_error"] = locate_error(e, text)
        return
    st.session_state["edit_error"] = loc
    if loc is not None:
        return
    new = state.from_edit(base, text)
    try:
        state.automatic_report(new)
    except Exception as e:  # noqa: BLE001 - the previous good analysis stays; the message is shown
        from core.lint.locate import locate_error

        st.session_state["edit_error"] = locate_error(e, text)
        return
    urlstate.save_text(text)
    state.set_current(new)
    st.query_params.pop("draft", None)


def _revert() -> None:
    base = st.session_state.get("edit_base")
    if base is not None:
        st.session_state[KEY] = base.source
        st.session_state["edit_error"] = None
        state.set_current(base)
        st.query_params.pop("draft", None)


st.title("Edit")
tpl = state.current()
base = st.session_state.get("edit_base")
if tpl.origin != "edited" and (base is None or base.digest != tpl.digest):
    base = st.session_state["edit_base"] = tpl  # a newly loaded template: edits start from it
    draft = urlstate.load_text(st.query_params.get("draft", ""))
    st.session_state[KEY] = draft if draft is not None else tpl.source
elif base is None:  # an edited template restored from a link: it is its own base
    base = st.session_state["edit_base"] = tpl
if KEY not in st.session_state:
    draft = urlstate.load_text(st.query_params.get("draft", ""))
    st.session_state[KEY] = draft if draft is not None else tpl.source

st.caption(md(f"Editing {base.name} ({base.origin}). The current analysis is of "
              f"{'the edited source' if tpl.origin == 'edited' else 'the loaded source'} · digest {tpl.digest}"))
st.text_area("Template source", key=KEY, height=420, on_change=_save_draft)
text = st.session_state.get(KEY, "")
b1, b2, b3 = st.columns([1, 1, 2])
b1.button("Analyse", type="primary", on_click=_analyse)
b2.button("Revert to loaded", on_click=_revert)
b3.download_button("Download edited template", text, file_name=f"{base.file_stem}.edited.jinja",
                   mime="text/plain")

loc = st.session_state.get("edit_error")
if loc is not None:
    st.error(md(loc.headline()))
    if loc.excerpt:
        st.code(shown(loc.excerpt), language=None)
    st.warning("The analysis below (and on every page) is still that of the last good source.")

rep = state.attempt(state.report, tpl)
if rep is not None:
    a = rep.analysis
    st.subheader("Analysis of the current source")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("Reasoning", a.reasoning.mode.value)
    m2.metric("Content", a.content.mode.value)
    m3.metric("Tools", a.tools.format.mode.value)
    m4.metric("Generation prompt", repr(rep.generation_prompt)[:40])
    st.dataframe(markers_frame(a), hide_index=True, width="stretch", key="edit_markers")
    bundle = state.attempt(state.parser_bundle, tpl)
    if bundle is not None:
        st.caption("Parser: lazy-grammar triggers and preserved tokens")
        st.dataframe({"trigger": [str(getattr(t, "value", t)) for t in bundle.parser.grammar_triggers or []]},
                     hide_index=True, width="stretch", key="edit_triggers")
        st.code(" ".join(bundle.parser.preserved_tokens or []) or "(none)", language=None)

with st.expander("Diff against the loaded source", expanded=text != base.source):
    diff = "".join(difflib.unified_diff(base.source.splitlines(True), text.splitlines(True),
                                        fromfile=f"loaded/{base.name}", tofile=f"edited/{base.name}"))
    st.code(shown(diff) or "(no changes)", language="diff")
with st.expander("Source with line numbers"):
    st.code(shown(text), language=None, line_numbers=True)
