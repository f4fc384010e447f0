"""Edit: change the current template's source in place. "Analyse" re-runs everything on the edited source
(it becomes the current template, source kind ``edited``, on every page); a syntax or render error is shown at
its line and column and the previous good analysis stays. The edit is never lost: it lives in the session, can
be downloaded, and survives a reload (its text is kept by digest and named in the URL, see explorer.urlstate).
Beside the editor, a live render of an editable conversation (messages, tools, add_generation_prompt,
enable_thinking) by the text being edited, redrawn whenever the text or the conversation changes. Also: the diff
of the edited source against the loaded one, and the source with line numbers."""

import difflib

import streamlit as st

from explorer import state, urlstate
from explorer.components import live_render
from explorer.components.diff_view import show_text
from explorer.components.glossary import mode_help
from explorer.components import serving
from explorer.components.lint_view import shown_text as shown
from explorer.components.marker_table import known_markers, markers_frame
from explorer.components.text import literal, md, md_code, visible_text

KEY = "in_edit_source"
EMPTY = ("the template is empty (or only whitespace): there is nothing to analyse. Type a template, or press "
         "Revert to loaded.")


def _over_cap(text: str) -> bool:
    """Over the demo's paste cap (the box shows why; nothing is stored or analysed)."""
    return serving.text_over_cap(text, serving.policy().limits.max_paste_bytes, "template text", "bytes") is not None


def _save_draft() -> None:
    text = st.session_state.get(KEY, "")
    if _over_cap(text):
        return
    st.query_params["draft"] = urlstate.save_text(text)


def _analyse() -> None:
    from core.isolated_ops import check_source  # the check renders: in a limited worker

    base = st.session_state.get("edit_base") or state.current()
    text = st.session_state.get(KEY, "")
    if not text.strip():
        from core.lint.locate import ErrorLocation

        st.session_state["edit_error"] = ErrorLocation(None, None, EMPTY, "template")
        return
    if _over_cap(text):
        return
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
loc = st.session_state.get("edit_error")
# what Analyse found, in the words shown below the editor: the live render does not repeat the same error
analyse_said = state.for_visitor(state.edited_words(loc.headline(), base.name)) if loc is not None else None
left, right = st.columns([3, 2])
with left:
    fits = serving.capped_text_area("Template source", KEY, serving.policy().limits.max_paste_bytes,
                                    "template text", "bytes", height=520, on_change=_save_draft)
    text = st.session_state.get(KEY, "")
    b1, b2, b3 = st.columns([1, 1, 2])
    b1.button("Analyse", type="primary", on_click=_analyse, disabled=not fits)
    b2.button("Revert to loaded", on_click=_revert, disabled=text == base.source and tpl.digest == base.digest,
              help=f"Back to {base.name} as loaded ({base.origin})")
    b3.download_button("Download edited template", text, file_name=f"{base.file_stem}.edited.jinja",
                       mime="text/plain")
    if not text.strip():
        st.warning(md("The template is empty (or only whitespace): nothing to render or analyse."))
with right:
    st.markdown("**Live render**")
    st.caption("This conversation as the text on the left renders it (redrawn when you leave the editor or "
               "press Ctrl+Enter).")
    live_render.conversation_inputs()
    if text.strip() and fits:
        # a bad conversation, a worker's limit (named as the edit's, not the loaded file's)
        got = state.attempt(live_render.rendered, text, base.name, edited_from=base.name)
        if got is not None:
            out, where = got
            said = state.for_visitor(state.edited_words(where.headline(), base.name)) if where else None
            if said is not None and said == analyse_said:
                st.caption("Not rendered: the text stops at the error Analyse found, shown below the editor.")
            elif where is not None:         # the template's own syntax or render error, at its line
                st.error(md_code(said))
                if where.excerpt:
                    st.code(shown(where.excerpt), language=None)
            else:   # the markers the current analysis learned, boxed as on the Overview
                try:
                    markers = known_markers(state.report(tpl).analysis)
                except Exception:  # noqa: BLE001 - no analysis (yet): the text without boxes
                    markers = None
                show_text(out, max_height="30rem", key="edit_live_part", markers=markers)

if loc is not None:
    st.error(md_code(analyse_said))
    if loc.excerpt:
        st.code(shown(loc.excerpt), language=None)
    st.warning("The analysis below (and on every page) is still that of the last good source.")

rep = state.attempt(state.report, tpl)
if rep is not None:
    a = rep.analysis
    st.subheader("Analysis of the current source")
    m1, m2, m3 = st.columns(3)
    m1.metric("Reasoning", a.reasoning.mode.value, help=mode_help("Reasoning", a.reasoning.mode))
    m2.metric("Content", a.content.mode.value, help=mode_help("Content", a.content.mode))
    m3.metric("Tools", a.tools.format.mode.value, help=mode_help("Tool calls", a.tools.format.mode))
    # whole, as a JSON literal (a metric cut it to "'<|im_start|>…" at 1400 px)
    st.markdown("**Generation prompt** " + md_code(f"`{literal(rep.generation_prompt)}`"))
    st.dataframe(markers_frame(a), hide_index=True, width="stretch", height="content", key="edit_markers")
    bundle = state.attempt(state.parser_bundle, tpl)
    if bundle is not None:
        st.caption("Parser: the words that switch its lazy grammar on (triggers)")
        st.dataframe({"trigger": [visible_text(getattr(t, "value", t)) for t in bundle.parser.grammar_triggers or []]},
                     hide_index=True, width="stretch", height="content", key="edit_triggers")
        st.caption("…and its preserved tokens (kept whole as special tokens)")
        st.code(visible_text(" ".join(bundle.parser.preserved_tokens or [])) or "(none)", language=None)

with st.expander("Diff against the loaded source", expanded=text != base.source):
    diff = "".join(difflib.unified_diff(base.source.splitlines(True), text.splitlines(True),
                                        fromfile=f"loaded/{base.name}", tofile=f"edited/{base.name}"))
    st.code(shown(diff) or "(no changes)", language="diff", wrap_lines=True)
with st.expander("Source with line numbers"):
    st.code(shown(text), language=None, line_numbers=True, wrap_lines=True)
