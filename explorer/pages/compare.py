"""Compare: two templates side by side — each side the current template, the loaded source before editing, a
bundled example, an uploaded file, a Hub repository (a revision pair: the same repo at two revisions) or a
server file where the operator allows folders, or pasted text: analysis fields that differ, comparisons whose
renders differ, lint findings added and removed, the same outputs parsed by both (core.compare), and beside
them the text diff of the two sources.

A side's choice is never changed behind the visitor's back: when a choice is no longer available (the loaded
source of an edit that was reverted), the page says so and compares nothing until a side is picked again."""

import difflib

import streamlit as st

from explorer import state
from explorer.components import serving
from explorer.components.lint_view import show_comparison
from explorer.components.text import md

CURRENT = "Current template"
LOADED = "Loaded source (before editing)"
BUNDLED = "Bundled example"
UPLOAD = "Upload a file"
HUB = "Hub repo (or server file)"
PASTE = "Pasted text"


@st.cache_resource(max_entries=16, show_spinner="Comparing…")
def _compare(src_a: str, name_a: str, src_b: str, name_b: str, fidelity: str, with_lint: bool):
    from core.isolated_ops import compare  # in a limited worker: no template code in the server

    return compare(src_a, name_a, src_b, name_b, fidelity, with_lint)


def _upload(side: str):
    from core.sources import DEFAULT_MAX_BYTES, DEFAULT_MAX_JSON_BYTES
    from explorer.components import serving

    lim = serving.policy().limits
    cap = DEFAULT_MAX_BYTES if lim.max_template_upload is None else min(DEFAULT_MAX_BYTES, lim.max_template_upload)
    cap_json = DEFAULT_MAX_JSON_BYTES if lim.max_json_upload is None else min(DEFAULT_MAX_JSON_BYTES,
                                                                              lim.max_json_upload)
    up = st.file_uploader(f"Template file {side} (.jinja, tokenizer_config.json / chat_template.json)",
                          type=["jinja", "j2", "json"], key=f"compare_upload_{side}")
    if up is None:
        return None
    limit = cap_json if up.name.lower().endswith(".json") else cap
    if up.size > limit:
        st.error(md(f"{up.name} is {up.size:,} bytes, over this server's {limit:,}-byte limit for such files."))
        return None
    return state.attempt(state.load_upload, up.getvalue(), up.name, max_bytes=cap, max_json_bytes=cap_json)


def _hub(side: str):
    from core.serving import policy_or_closed

    server_paths = policy_or_closed()[0].server_paths  # a server path only where the operator allows folders
    c1, c2 = st.columns([3, 1])
    with c1:   # capped in demo mode (one line: a repo id or a path)
        spec = serving.capped_text_input("Server path (allowed folders) or Hub repo id" if server_paths
                                         else "Hub repo id", f"in_compare_spec_{side}", "path or repository id",
                                         placeholder="org/model")
    with c2:
        rev = serving.capped_text_input("Revision", f"in_compare_rev_{side}", "revision", placeholder="main",
                                        help="A branch, tag or commit: the same repo at two revisions compares a "
                                             "template's change")
    spec = spec.strip()
    if not spec:
        return None
    if state.is_repo_id(spec) or not server_paths:
        return state.attempt(state.load_visitor_hub, spec, revision=rev.strip() or None)
    return state.attempt(state.load_visitor_path, spec)


def pick(side: str, default: str):
    """The template chosen for ``side`` ("A" / "B"), or None (nothing chosen yet, or the choice failed: the
    message is on the page)."""
    cur = state.current()
    base = st.session_state.get("edit_base")
    has_loaded = cur.origin == "edited" and base is not None and base.digest != cur.digest
    kinds = [CURRENT] + ([LOADED] if has_loaded else []) + [BUNDLED, UPLOAD, HUB, PASTE]
    key = f"in_compare_kind_{side}"
    chosen = st.session_state.get(key)
    if chosen is None:
        st.session_state[key] = default if default in kinds else kinds[0]
    elif chosen not in kinds:
        # never switched silently: say what is gone and let the visitor pick
        st.warning(md(f"Side {side} was “{chosen}”, which is not available now (the loaded source is known "
                      "only while the current template is an edit of it). Pick what to compare."))
        st.session_state[key] = None
    kind = st.radio(f"Side {side}", kinds, key=key, horizontal=True, index=None)
    if kind == CURRENT:
        return cur
    if kind == LOADED:
        return base
    if kind == BUNDLED:
        state.default(f"in_compare_bundled_{side}", None)
        name = st.selectbox("Bundled example", state.bundled_names(), key=f"in_compare_bundled_{side}",
                            index=None, placeholder="Pick an example…")
        return state.attempt(state.load_bundled, name) if name else None
    if kind == UPLOAD:
        return _upload(side)
    if kind == HUB:
        return _hub(side)
    if kind == PASTE:
        fits = serving.capped_text_area(f"Template source {side}", f"in_compare_text_{side}",
                                        serving.policy().limits.max_paste_bytes, "template text", "bytes", height=200)
        text = st.session_state.get(f"in_compare_text_{side}") or ""
        if not fits:
            return None
        if not text.strip():
            if text:
                st.warning("The pasted template is only whitespace: there is nothing to compare.")
            return None
        return state.from_edit(None, text, f"pasted-{side}.jinja")
    return None


def source_diff(a, b) -> str:
    """Unified diff of the two sources (``(identical)`` when they are)."""
    diff = "".join(difflib.unified_diff(a.source.splitlines(True), b.source.splitlines(True),
                                        fromfile=f"A/{a.name}", tofile=f"B/{b.name}", n=2))
    return diff or "(identical)"


st.title("Compare")
st.caption("Two templates, or two revisions of one: what their analyses, renders, lint findings and parses "
           "differ in, beside the text diff of their sources.")
col_a, col_b = st.columns(2)
# an edit compares as `python -m core compare OLD NEW` does: A the loaded source, B the edit, so "added in B" is
# what the edit added (the edit was A, which read every change backwards)
base = st.session_state.get("edit_base")
editing = state.current().origin == "edited" and base is not None
with col_a:
    a = pick("A", LOADED if editing else CURRENT)
with col_b:
    b = pick("B", CURRENT if editing else BUNDLED)
state.default("in_compare_lint", True)  # not value=True: with a kept value Streamlit logs a warning per process
with_lint = st.toggle("Include lint findings", key="in_compare_lint")
if a is None or b is None:
    st.info("Choose both sides to compare them.")
    st.stop()
for side, t in (("A", a), ("B", b)):
    if not t.source.strip():
        st.error(md(f"Side {side} ({t.name}) is empty: there is nothing to compare."))
        st.stop()
st.markdown(md(f"A: {a.name} ({a.origin})") + "  \n" + md(f"B: {b.name} ({b.origin})"))
analysis, text = st.columns([3, 2])
with text:
    st.subheader("Source diff")
    diff = source_diff(a, b)
    added = sum(1 for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff.splitlines() if line.startswith("-") and not line.startswith("---"))
    st.caption(f"+{added} / −{removed} lines")
    from explorer.components.lint_view import shown_text

    st.code(shown_text(diff), language="diff", wrap_lines=True, height=640)
with analysis:
    result = state.attempt(_compare, a.source, a.name, b.source, b.name, state.fidelity(), with_lint)
    if result is not None:
        show_comparison(result)
