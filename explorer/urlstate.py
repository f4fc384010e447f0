"""URL state: the current source, fidelity and overrides in the query string, so a link (or a reload)
reopens the same view. The page is already in the URL path (Streamlit's multipage routing).

Query parameters: ``src`` — ``bundled:NAME``, ``hub:REPO[@REVISION][#VARIANT]``, ``file:PATH``, or
``text:DIGEST`` for edited or pasted text (the text itself is kept server-side under its digest, see
:func:`save_text`, never in the URL); ``name`` (display name of ``text:`` sources); ``fidelity`` (only when not
the default); ``ov`` (the overrides as JSON, only when set); ``draft`` (digest of an edit not yet analysed).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from typing import Any

import streamlit as st

from core.templating import source_digest

_DIGEST = re.compile(r"^[0-9a-f]{16}$")


def store_dir() -> pathlib.Path:
    """Where edited and pasted texts are kept by digest: ``$CTE_CACHE_DIR/edits`` or
    ``~/.cache/chat-template-explorer/edits``."""
    base = os.environ.get("CTE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chat-template-explorer")
    return pathlib.Path(base) / "edits"


def save_text(text: str) -> str:
    """Keep ``text`` under its digest (:func:`core.templating.source_digest`); returns the digest. A failure to
    write is ignored (the session still has the text; only a reload loses it)."""
    digest = source_digest(text)
    try:
        d = store_dir()
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{digest}.jinja"
        if not p.exists():
            p.write_text(text, encoding="utf-8")
    except OSError:
        pass
    return digest


def load_text(digest: str) -> str | None:
    """The text kept under ``digest``, or None (unknown digest or not a digest)."""
    if not _DIGEST.match(digest or ""):
        return None
    p = store_dir() / f"{digest}.jinja"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError:
        return None
    return text if source_digest(text) == digest else None


def source_param(tpl: Any) -> str:
    """The ``src`` value of a :class:`explorer.state.CurrentTemplate`."""
    if tpl.origin == "bundled":
        return f"bundled:{tpl.name}"
    if tpl.origin == "hub" and tpl.path:
        return f"hub:{tpl.path}" + (f"@{tpl.revision}" if tpl.revision else "") + \
            (f"#{tpl.variant}" if tpl.variant and tpl.variant != "default" else "")
    if tpl.origin in ("file", "json", "gguf") and tpl.path and os.path.isfile(tpl.path):
        return f"file:{tpl.path}" + (f"#{tpl.variant}" if tpl.variant and tpl.variant != "default" else "")
    return f"text:{save_text(tpl.source)}"


def params_for(tpl: Any, fidelity: str, overrides: dict[str, Any]) -> dict[str, str]:
    """The query parameters describing this view."""
    out = {"src": source_param(tpl)}
    if out["src"].startswith("text:"):
        out["name"] = tpl.name
    if fidelity != "llama.cpp":
        out["fidelity"] = fidelity
    if overrides:
        out["ov"] = json.dumps(overrides, sort_keys=True, ensure_ascii=False)
    return out


def sync(tpl: Any) -> None:
    """Write the current view's parameters into the URL (only the keys this module owns; ``draft`` is kept)."""
    from . import state

    want = params_for(tpl, state.fidelity(), state.overrides_for(tpl))
    qp = st.query_params
    for key in ("src", "name", "fidelity", "ov"):
        if key in want:
            if qp.get(key) != want[key]:
                qp[key] = want[key]
        elif key in qp:
            del qp[key]


def restore() -> Any:
    """The :class:`~explorer.state.CurrentTemplate` the URL names (fidelity and overrides put back into the
    session), or None when the URL names none or it cannot be loaded (a clear error is kept for the sidebar)."""
    from . import state

    qp = st.query_params
    src = qp.get("src")
    if not src:
        return None
    kind, _, rest = src.partition(":")
    try:
        if kind == "bundled":
            tpl = state.load_bundled(rest)
        elif kind == "hub":
            rest, _, variant = rest.partition("#")
            repo, _, rev = rest.partition("@")
            tpl = state.load_spec(repo, variant or None, revision=rev or None, origin="hub")
        elif kind == "file":
            path, _, variant = rest.partition("#")
            tpl = state.load_spec(path, variant or None, origin="file")
        elif kind == "text":
            text = load_text(rest)
            if text is None:
                raise ValueError(f"the URL names edited text {rest!r} that this server does not keep")
            tpl = state.from_edit(None, text, qp.get("name") or f"edited-{rest[:8]}.jinja")
        else:
            raise ValueError(f"the URL's src {src!r} is not bundled:, hub:, file: or text:")
    except Exception as e:  # noqa: BLE001 - a stale link shows a message and the default template
        st.session_state["sidebar_error"] = e
        return None
    fid = qp.get("fidelity")
    if fid in state.FIDELITIES:
        st.session_state["fidelity"] = fid
    if qp.get("ov"):
        try:
            ov = json.loads(qp["ov"])
            if isinstance(ov, dict):
                st.session_state.setdefault("overrides", {})[tpl.digest] = ov
        except json.JSONDecodeError:
            pass
    return tpl
