"""Sources: pick the template to explore — bundled examples (offline default), a Hugging Face Hub repo
(+ revision, named variants), an uploaded .jinja / .json / .gguf, pasted text, and — only when the operator
allows server folders (``python -m core serve --allow-root DIR``) — a file in one of those folders.
Loading goes through ``core.sources``; its errors (offline, not found, gated, timeout, no template in the
file…) are shown as messages. Server paths go through :mod:`explorer.components.serving` (confined to the
allowed roots); the demo mode's caps and Hub token rule come from :mod:`core.serving`."""

import pathlib

import streamlit as st

from core.serving import confined_template_path
from core.sources import DEFAULT_MAX_BYTES, DEFAULT_MAX_JSON_BYTES
from explorer import state
from explorer.components.provenance import banner
from explorer.components import serving
from explorer.components.text import md

MAX_GGUF_UPLOAD = 200 * 1024 * 1024     # .gguf: Streamlit's own default upload cap
TEMPLATE_SUFFIXES = (".jinja", ".j2", ".json", ".gguf")
LOCAL_FOLDER = "Local folder"

policy = serving.policy()
limits = policy.limits


def _cap(engine: int, demo: int | None) -> int:
    return engine if demo is None else min(engine, demo)


# the engine's own limits, lowered by the demo mode and by the server's upload cap (.streamlit/config.toml), so
# the page never accepts a file that is then refused
_server_cap = int(st.get_option("server.maxUploadSize")) * 1024 * 1024
UPLOAD_LIMITS = {".gguf": min(_cap(MAX_GGUF_UPLOAD, limits.max_gguf_upload), _server_cap),
                 ".json": min(_cap(DEFAULT_MAX_JSON_BYTES, limits.max_json_upload), _server_cap)}
TEXT_LIMIT = min(_cap(DEFAULT_MAX_BYTES, limits.max_template_upload), _server_cap)
PASTE_LIMIT = _cap(DEFAULT_MAX_BYTES, limits.max_paste_bytes)

st.title("Sources")


def _use(tpl: state.CurrentTemplate) -> None:
    state.set_current(tpl)
    st.session_state["sources_loaded"] = tpl.name
    st.rerun()


loaded = st.session_state.pop("sources_loaded", None)
with st.container():  # one slot, shown or not: the inputs below keep their places (and what is typed in them)
    if loaded:
        st.success(md(f"Loaded {loaded}."))
        st.page_link("explorer/pages/overview.py", label="Open the overview", icon=":material/search:")

kinds = ["Bundled examples", "Hugging Face Hub", "Upload a file", "Paste text"]
if policy.server_paths:  # off unless the operator names folders: visitors must not read the server's files
    kinds.insert(3, LOCAL_FOLDER)
if st.session_state.get("in_source_kind") not in kinds:
    st.session_state["in_source_kind"] = kinds[0]
kind = st.radio("Where is the template?", kinds, key="in_source_kind", horizontal=True)

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
    hub_repo = serving.capped_text_input("Repository id", "in_hub_repo", "repository id", placeholder="org/model")
    hub_rev = serving.capped_text_input("Revision (branch, tag or commit; empty = main)", "in_hub_revision",
                                        "revision")
    st.caption("Reads chat_template.jinja, chat_template.json or tokenizer_config.json. "
               + ("The token comes from HF_TOKEN or your `huggingface-cli login` and is never shown. "
                  if policy.send_hub_token else "Public repositories only (demo mode: no token is sent). ")
               + "Downloads go to the usual HF cache; with HF_HUB_OFFLINE=1 or no network only cached files are "
                 "used.")
    if st.button("Fetch", type="primary"):
        repo = hub_repo.strip()
        if not repo:
            st.error("Enter a repository id such as org/model.")
        else:
            from core.sources import load_hub_spec  # never reads a local path, whatever the text

            rev = hub_rev.strip() or None
            with st.spinner("Fetching from the Hub…"):
                loaded = state.attempt(load_hub_spec, repo, revision=rev, token=policy.hub_token, max_bytes=TEXT_LIMIT,
                                       max_json_bytes=UPLOAD_LIMITS[".json"])  # a Hub file is capped as an upload
            if loaded:
                _use(state.from_loaded(loaded, "hub"))

elif kind == "Upload a file":
    up = st.file_uploader("Template file (.jinja, tokenizer_config.json / chat_template.json, .gguf)",
                          type=["jinja", "j2", "json", "gguf"], key="upload_file")
    if up is not None:
        suffix = pathlib.Path(up.name).suffix.lower()
        limit = UPLOAD_LIMITS.get(suffix, TEXT_LIMIT)
        if up.size > limit:
            st.error(md(f"{up.name} is {up.size / 1e6:.1f} MB; the limit for {suffix} files is "
                        f"{limit / 1e6:.2g} MB{' in this demo' if limits.max_gguf_upload else ''}."))
        elif st.button("Load this file", type="primary"):
            tpl = state.attempt(state.load_upload, up.getvalue(), up.name, max_bytes=TEXT_LIMIT,
                                max_json_bytes=UPLOAD_LIMITS[".json"], max_gguf_bytes=UPLOAD_LIMITS[".gguf"])
            if tpl:
                _use(tpl)

elif kind == LOCAL_FOLDER:
    picked = serving.folder_input("Folder", "in_folder", TEMPLATE_SUFFIXES)
    if picked is not None:
        folder, entries = picked
        files = [p.name for p in entries]
        if not files:
            st.warning(md(f"No .jinja / .json / .gguf files or model folders in {folder}."))
        else:
            if st.session_state.get("in_folder_file") not in files:
                st.session_state["in_folder_file"] = files[0]
            st.selectbox(f"Template ({len(files)} files)", files, key="in_folder_file")
            if st.button("Load", type="primary"):
                from core.sources import load_file

                chosen = str(folder / st.session_state["in_folder_file"])
                loaded = state.attempt(lambda: load_file(confined_template_path(chosen, policy.roots)))
                if loaded:
                    _use(state.from_loaded(loaded, "file"))

else:  # Paste text
    paste_name = serving.capped_text_input("Name", "in_paste_name", "name", placeholder="my-template.jinja")
    fits = serving.capped_text_area("Jinja template", "in_paste_text", PASTE_LIMIT, "template text", "bytes",
                                    height=260)
    if st.button("Use this text", type="primary", disabled=not fits):
        text = st.session_state.get("in_paste_text") or ""
        name = paste_name.strip() or "pasted.jinja"
        if not text.strip():  # (a text over the cap never gets here: capped_text_area disabled the button)
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
    banner(cur)  # overrides, switched-off workarounds or improved fidelity in force for it
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
