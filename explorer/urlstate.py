"""URL state: the current source, fidelity and overrides in the query string, so a link (or a reload)
reopens the same view. The page is already in the URL path (Streamlit's multipage routing).

Query parameters: ``src`` — ``bundled:NAME``, ``hub:REPO[@REVISION][#VARIANT]``, ``file:PATH``, or
``text:DIGEST`` for edited or pasted text (the text itself is kept server-side under its digest, see
:func:`save_text`, never in the URL); ``name`` (display name of ``text:`` sources); ``fidelity`` (only when not
the default); ``ov`` (the overrides as JSON, only when set); ``draft`` (digest of an edit not yet analysed);
``base`` (an edited template's loaded source, as a ``src`` value: a reload keeps the original beside the edit).
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
    base = st.session_state.get("edit_base")
    if tpl.origin == "edited" and base is not None and base.digest != tpl.digest:
        want["base"] = source_param(base)
    qp = st.query_params
    for key in ("src", "name", "fidelity", "ov", "base"):
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
    try:
        tpl = _load(src, qp.get("name"))
    except Exception as e:  # noqa: BLE001 - a stale link shows a message and the default template
        st.session_state["sidebar_error"] = e
        return None
    if tpl.origin == "edited" and qp.get("base"):
        try:    # the loaded source the edit started from: Revert and Compare find it again
            st.session_state["edit_base"] = _load(qp["base"], tpl.name)
        except Exception as e:  # noqa: BLE001 - the edit itself is restored; the message says what is missing
            st.session_state["sidebar_error"] = e
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


def _load(src: str, name: str | None) -> Any:
    """The template a ``src`` value names (``name``: display name of ``text:`` sources). Raises the load
    errors."""
    from core.errors import TemplateLoadError

    from . import state

    kind, _, rest = src.partition(":")
    if kind == "bundled":
        tpl = state.load_bundled(rest)
    elif kind == "hub":  # Hub only: never read as a server path
        rest, _, variant = rest.partition("#")
        repo, _, rev = rest.partition("@")
        tpl = state.load_visitor_hub(repo, variant or None, revision=rev or None)
    elif kind == "file":  # the serving policy's rule: off by default, else inside the allowed folders
        path, _, variant = rest.partition("#")
        tpl = state.load_visitor_path(path, variant or None)
    elif kind == "text":
        text = load_text(rest)
        if text is None:
            raise TemplateLoadError(f"text:{rest}", "this link names edited text that this server does not keep")
        tpl = state.from_edit(None, text, name or f"edited-{rest[:8]}.jinja")
    else:
        raise TemplateLoadError(src, "a link's src must start with bundled:, hub:, file: or text:")
    return tpl


# ------------------------------------------------------------------------------------ Explain permalink

#: the Explain page's request and model output, inline: ``x`` = base64url (no padding) of zlib-compressed
#: JSON ``{"r": request, "o": output}``; longer than this many characters and no link is made (the page offers
#: the reproducer download instead) — browsers and proxies cut URLs of a few kilobytes
EXPLAIN_PARAM = "x"
EXPLAIN_MAX_CHARS = 4000


def encode_explain(request: dict[str, Any], output: str) -> str:
    """The ``x`` value for ``request`` (a :func:`explorer.state.request_dict`) and ``output``."""
    import base64
    import zlib

    raw = json.dumps({"r": request, "o": output}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(zlib.compress(raw.encode("utf-8"), 9)).decode("ascii").rstrip("=")


def decode_explain(value: str) -> tuple[dict[str, Any], str] | None:
    """``(request, output)`` of an ``x`` value, or None when it is not one (a damaged or foreign link)."""
    import base64
    import binascii
    import zlib

    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)), bufsize=1 << 16)
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, zlib.error, ValueError, UnicodeDecodeError):
        return None
    if not (isinstance(data, dict) and isinstance(data.get("r"), dict) and isinstance(data.get("o"), str)):
        return None
    return data["r"], data["o"]


def restore_explain() -> bool:
    """Put the request and output an ``x`` parameter names into the Playground's settings (once per value, so
    later edits stay); True when it did."""
    value = st.query_params.get(EXPLAIN_PARAM)
    if not value or st.session_state.get("_explain_restored") == value:
        return False
    st.session_state["_explain_restored"] = value
    got = decode_explain(value)
    if got is None:
        st.session_state["sidebar_error"] = ValueError("the link's explain state (x=…) cannot be read")
        return False
    req, output = got
    ss = st.session_state
    ss["in_output"] = output
    ss["in_messages"] = json.dumps(req.get("messages") or [], indent=2, ensure_ascii=False)
    ss["in_tools"] = json.dumps(req["tools"], indent=2, ensure_ascii=False) if req.get("tools") else ""
    ss["in_tool_choice"] = req.get("tool_choice") or "auto"
    ss["in_parallel"] = bool(req.get("parallel_tool_calls"))
    ss["in_reasoning_format"] = req.get("reasoning_format") or "auto"
    ss["in_enable_thinking"] = bool(req.get("enable_thinking", True))
    return True


def explain_permalink(request: dict[str, Any], output: str) -> tuple[str, int]:
    """Write ``x`` for this request and output into the URL and return ``(full URL, encoded length)``; when the
    encoded state is longer than :data:`EXPLAIN_MAX_CHARS`, ``x`` is removed and the URL is ``""``."""
    from urllib.parse import urlencode

    value = encode_explain(request, output)
    qp = st.query_params
    if len(value) > EXPLAIN_MAX_CHARS:
        if EXPLAIN_PARAM in qp:
            del qp[EXPLAIN_PARAM]
        return "", len(value)
    if qp.get(EXPLAIN_PARAM) != value:
        qp[EXPLAIN_PARAM] = value
    st.session_state["_explain_restored"] = value     # this session's own link: nothing to restore
    base = (getattr(st.context, "url", None) or "").split("?")[0] or "http://localhost:8501/explain"
    return base + "?" + urlencode(qp.to_dict()), len(value)
