"""The operator's serving policy in the app (:mod:`core.serving`): :func:`policy` for the demo mode's caps, and
:func:`folder_input`, the one way a page takes a server path from the browser (Sources → Local folder, Corpus),
confined to the allowed roots, so the rule is the same everywhere."""

from __future__ import annotations

import pathlib
from typing import Sequence

import streamlit as st

from core.serving import PathNotAllowedError, ServingPolicy, confine, confined_entries, policy_or_closed

from .text import md, show_invisible_notice


def policy() -> ServingPolicy:
    """The operator's serving policy (``CTE_ALLOW_ROOTS`` / ``CTE_DEMO``); wrong settings give the closed policy
    (the sidebar shows why). Pages cap text boxes with ``policy().limits.max_text_chars`` (None = no cap)."""
    return policy_or_closed()[0]


OVERSHOOT = 4
"""A capped box takes up to this many times its cap, so a paste that is too long arrives and is refused with a
message instead of being cut or dropped by the browser without a word (Streamlit's ``max_chars``)."""


def text_over_cap(text: str, cap: int | None, what: str, unit: str = "characters") -> str | None:
    """The one-line refusal for ``text`` longer than ``cap`` (``unit`` "characters" or "bytes", UTF-8), naming
    the box and the limit; None when it fits or there is no cap."""
    if cap is None:
        return None
    size = len(text.encode("utf-8", "surrogatepass")) if unit == "bytes" else len(text)
    if size <= cap:
        return None
    return (f"The {what} is {size:,} {unit}, over this server's {cap:,}-{unit[:-1]} cap (limit: paste size). "
            "It is kept in the box but not used; shorten it to go on.")


def capped_text_area(label: str, key: str, cap: int | None, what: str, unit: str = "characters",
                     **kwargs) -> bool:
    """A ``st.text_area`` capped at ``cap`` that never loses a paste: the browser accepts up to
    :data:`OVERSHOOT` × ``cap`` and an over-long text shows :func:`text_over_cap`'s error under the box; a text
    that fits and holds bidi or invisible characters gets their notice and escaped view there
    (:func:`explorer.components.text.show_invisible_notice`).

    Returns True when the text fits (the caller may use it), False when it is over the cap."""
    limit = None if cap is None else cap * OVERSHOOT
    st.text_area(label, key=key, max_chars=limit, **kwargs)
    problem = text_over_cap(st.session_state.get(key) or "", cap, what, unit)
    with st.container():  # one slot, error or not: the boxes below keep their places (and what is typed in them)
        if problem:
            st.error(md(problem))
        else:   # bidi and invisible characters the box shows as the browser applies them: named, and escaped
            show_invisible_notice(st.session_state.get(key) or "")
    return not problem


def capped_text_input(label: str, key: str, what: str, **kwargs) -> str:
    """A ``st.text_input`` under the demo's one-line cap (``max_line_chars``: repo ids, revisions, names,
    patterns; none locally). Returns the text, or ``""`` after showing the refusal when it is over the cap."""
    cap = policy().limits.max_line_chars
    st.text_input(label, key=key, max_chars=None if cap is None else cap * OVERSHOOT, **kwargs)
    text = st.session_state.get(key) or ""
    problem = text_over_cap(text, cap, what)
    with st.container():  # one slot, error or not (see capped_text_area)
        if problem:
            st.error(md(problem))
    return "" if problem else text


def folder_input(label: str, key: str, suffixes: Sequence[str]) -> tuple[pathlib.Path, list[pathlib.Path]] | None:
    """A text input for a server folder (default: the first allowed root) and the template entries in it.

    Returns ``(resolved folder, entries)`` with the entries of :func:`core.serving.confined_entries`, or None after
    showing one message when server paths are off, the path is outside the allowed roots (symlinks and ``..``
    resolved first), not a folder, or cannot be listed. Never call it without ``policy().server_paths``.
    """
    pol = policy()
    if key not in st.session_state:
        st.session_state[key] = str(pol.roots[0]) if pol.roots else ""
    st.text_input(label, key=key, help="Allowed folders: " + ", ".join(str(r) for r in pol.roots))
    typed = st.session_state[key]
    try:
        resolved = confine(typed, pol.roots)
    except PathNotAllowedError as e:
        st.error(md(str(e)))
        return None
    if not resolved.is_dir():
        st.error(md(f"{typed} is not a folder."))
        return None
    try:
        return resolved, confined_entries(resolved, pol.roots, suffixes)
    except OSError as e:
        st.error(md(f"{typed} cannot be listed: {e.strerror or e}."))
        return None
