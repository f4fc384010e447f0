"""Sources: pick the template to explore — bundled examples (offline default), a Hugging Face Hub repo
(+ revision, named variants), an uploaded .jinja / .json / .gguf, a file in a local folder, or pasted text.
Loading goes through ``core.sources.load_template``; its errors (offline, not found, gated, timeout, no
template in the file…) are shown as messages."""

import pathlib

import streamlit as st

from core.sources import DEFAULT_MAX_BYTES, DEFAULT_MAX_JSON_BYTES
from explorer import state
from explorer.components.text import md

MAX_GGUF_UPLOAD = 200 * 1024 * 1024     # .gguf: Streamlit's own default upload cap
TEMPLATE_SUFFIXES = (".jinja", ".j2", ".json", ".gguf")
MODEL_FOLDER_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")

st.title("Sources")


def _use(tpl: state.CurrentTemplate) -> None:
    state.set_current(tpl)
    st.session_state["sources_loaded"] = tpl.name
    st.rerun()


loaded = st.session_state.pop("sources_loaded", None)
if loaded:
    st.success(md(f"Loaded {loaded}."))
    st.page_link("explorer/pages/overview.py", label="Open the overview", icon=":material/search:")

kind = st.radio("Where is the template?", ["Bundled examples", "Hugging Face Hub", "Upload a file", "Local folder",
                                           "Paste text"], key="in_source_kind", horizontal=True)

if kind == "Bundled examples":
    names = state.bundled_names()
    state.default("in_bundled_name", state.DEFAULT_BUNDLED if state.DEFAULT_BUNDLED in names else names[0])
    st.selectbox("Example", names, key="in_bundled_name")
    st.caption("Small templates written for this project; see assets/templates/README.md. They work offline.")
    if st.button("Use this example", type="primary"):
        tpl = state.attempt(state.load_bundled, st.session_state["in_bundled_name"])
        if tpl:
            _use(tpl)

elif kind == "Hugging Face Hub":
    st.text_input("Repository id", key="in_hub_repo", placeholder="org/model")
    st.text_input("Revision (branch, tag or commit; empty = main)", key="in_hub_revision")
    st.caption("Reads chat_template.jinja, chat_template.json or tokenizer_config.json. The token comes from "
               "HF_TOKEN or your `huggingface-cli login` and is never shown. Downloads go to the usual HF cache; "
               "with HF_HUB_OFFLINE=1 only cached files are used.")
    if st.button("Fetch", type="primary"):
        repo = (st.session_state.get("in_hub_repo") or "").strip()
        if not repo:
            st.error("Enter a repository id such as org/model.")
        elif not state.is_repo_id(repo):  # not a path either: local files are the Upload / Local folder options
            st.error(md(f"{repo!r} is not a Hub repository id: expected org/name (letters, digits, '-', '_', '.'), "
                        "org/name@revision or a huggingface.co URL."))
        else:
            rev = (st.session_state.get("in_hub_revision") or "").strip() or None
            with st.spinner("Fetching from the Hub…"):
                tpl = state.attempt(state.load_spec, repo, revision=rev, origin="hub")
            if tpl:
                _use(tpl)

elif kind == "Upload a file":
    up = st.file_uploader("Template file (.jinja, tokenizer_config.json / chat_template.json, .gguf)",
                          type=["jinja", "j2", "json", "gguf"], key="upload_file")
    if up is not None:
        suffix = pathlib.Path(up.name).suffix.lower()
        # the engine's own limits, so the page never accepts a file the engine then refuses
        limit = {".gguf": MAX_GGUF_UPLOAD, ".json": DEFAULT_MAX_JSON_BYTES}.get(suffix, DEFAULT_MAX_BYTES)
        if up.size > limit:
            st.error(md(f"{up.name} is {up.size / 1e6:.1f} MB; the limit for {suffix} files is "
                        f"{limit / 1e6:.0f} MB."))
        elif st.button("Load this file", type="primary"):
            tpl = state.attempt(state.load_upload, up.getvalue(), up.name, max_gguf_bytes=MAX_GGUF_UPLOAD)
            if tpl:
                _use(tpl)

elif kind == "Local folder":
    state.default("in_folder", str(state.SHARED_TEMPLATES if state.SHARED_TEMPLATES.is_dir() else state.BUNDLED_DIR))
    st.text_input("Folder", key="in_folder")
    folder = pathlib.Path(st.session_state["in_folder"]).expanduser()
    if not folder.is_dir():
        st.error(md(f"{folder} is not a folder."))
    else:
        files = sorted(p.name for p in folder.iterdir()
                       if (p.is_file() and p.suffix.lower() in TEMPLATE_SUFFIXES)
                       or (p.is_dir() and any((p / f).is_file() for f in MODEL_FOLDER_FILES)))
        if not files:
            st.warning(md(f"No .jinja / .json / .gguf files or model folders in {folder}."))
        else:
            if st.session_state.get("in_folder_file") not in files:
                st.session_state["in_folder_file"] = files[0]
            st.selectbox(f"Template ({len(files)} files)", files, key="in_folder_file")
            if st.button("Load", type="primary"):
                tpl = state.attempt(state.load_spec, str(folder / st.session_state["in_folder_file"]), origin="file")
                if tpl:
                    _use(tpl)

else:  # Paste text
    st.text_input("Name", key="in_paste_name", placeholder="my-template.jinja")
    st.text_area("Jinja template", key="in_paste_text", height=260)
    if st.button("Use this text", type="primary"):
        text = st.session_state.get("in_paste_text") or ""
        name = (st.session_state.get("in_paste_name") or "").strip() or "pasted.jinja"
        if not text.strip():
            st.error("The template text is empty.")
        else:
            def _compile() -> state.CurrentTemplate:
                tpl = state.CurrentTemplate(name, text, {"default": text}, "default", "string", None)
                tpl.template()  # syntax errors show here, with the line
                return tpl

            tpl = state.attempt(_compile)
            if tpl:
                _use(tpl)

st.divider()
cur = state.attempt(state.current)
if cur is not None:
    st.markdown(f"Current: **{md(cur.name)}** ({md(cur.origin)})")
    if len(cur.variants) > 1:
        names = list(cur.variants)
        owner = f"{cur.origin}|{cur.path}|{'|'.join(names)}"
        if st.session_state.get("variant_owner") != owner or st.session_state.get("in_variant") not in names:
            st.session_state["variant_owner"] = owner
            st.session_state["in_variant"] = cur.variant
        choice = st.selectbox("Variant", names, key="in_variant",
                              help="Named templates in this source (e.g. default and tool_use).")
        if choice != cur.variant:
            _use(cur.with_variant(choice))
