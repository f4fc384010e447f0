"""A reconnected session finds its view again. After a server restart an open page reconnects with a new, empty
session; its URL still names the template, but the next click switches page, and a page switch drops the query
string, so the session started on the default template and rewrote the URL.

So the view's URL parameters (explorer.urlstate's ``src``, ``name``, ``kind``, ``fidelity``, ``ov``, ``base``,
``base_kind``) are also kept on the server per browser, under a hash of the browser's Streamlit XSRF cookie (which
outlives the server process), and a session whose first run is a page switch without ``src`` takes them back. A fresh visit to the
front page (the root URL) or a link with ``src`` is never redirected; without the cookie (XSRF protection off)
nothing is kept. The files hold the same values a link holds (no template text: ``text:`` sources are digests of
the edit store), one small file per browser."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib

import streamlit as st

from .urlstate import VIEW_KEYS as KEYS

COOKIE = "_streamlit_xsrf"
_SAVED = "_resume_saved"


def _path() -> pathlib.Path | None:
    try:
        cookie = (st.context.cookies or {}).get(COOKIE)
    except Exception:  # noqa: BLE001 - no context (bare mode, tests): nothing to key by
        return None
    if not cookie:
        return None
    from .urlstate import store_dir

    return store_dir().parent / "views" / (hashlib.sha256(_token(cookie)).hexdigest()[:32] + ".json")


def _token(cookie: str) -> bytes:
    """The browser's XSRF token inside the cookie. A version-2 cookie (``2|mask|masked token|time``) is masked
    anew whenever the server sets it again (a restarted server does), the token under the mask is not; other
    shapes are taken whole."""
    parts = cookie.split("|")
    if len(parts) == 4 and parts[0] == "2":
        try:
            mask, masked = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
        except ValueError:
            return cookie.encode("utf-8")
        if mask:
            return bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked))
    return cookie.encode("utf-8")


def remember() -> None:
    """Keep the URL's view parameters for this browser (written only when they changed)."""
    params = {k: st.query_params[k] for k in KEYS if k in st.query_params}
    blob = json.dumps(params, sort_keys=True, ensure_ascii=False)
    if st.session_state.get(_SAVED) == blob:
        return
    path = _path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(blob, encoding="utf-8")
        os.replace(tmp, path)
        st.session_state[_SAVED] = blob
    except OSError:
        pass


def recall(page_is_default: bool) -> bool:
    """At a session's first run: when it opens a page other than the front page with no ``src`` in the URL (a
    reconnected page's next click), put this browser's last view parameters back into the URL; True if it
    did."""
    if "template" in st.session_state or "src" in st.query_params or page_is_default:
        return False
    path = _path()
    if path is None:
        return False
    try:
        params = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(params, dict) or not isinstance(params.get("src"), str):
        return False
    for k in KEYS:
        if isinstance(params.get(k), str):
            st.query_params[k] = params[k]
    st.session_state[_SAVED] = json.dumps({k: params[k] for k in KEYS if isinstance(params.get(k), str)},
                                          sort_keys=True, ensure_ascii=False)
    return True
