"""Who the current script run works for, for the demo mode's per-visitor fairness (:func:`core.serving.work_slot`
holds at most :data:`core.serving.PER_VISITOR_SLOTS` analysis slots per visitor), and the visitor-facing text of
errors shown outside :func:`explorer.state.show_error`.

A visitor is a browser session (Streamlit's session id): each script run names it on its own thread before any
page asks for an analysis.
"""

from __future__ import annotations

from core.serving import set_visitor


def session_id() -> str | None:
    """The Streamlit session id of this script run, or None outside a run (bare mode, tests without a session)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover - older Streamlit layouts
        return None
    ctx = get_script_run_ctx(suppress_warning=True)
    return getattr(ctx, "session_id", None)


def name_this_run() -> None:
    """Name this run's visitor for :func:`core.serving.work_slot` (None outside a session: no per-visitor bound)."""
    set_visitor(session_id())


def shown(msg: str) -> str:
    """An error or note for the page, as a demo visitor may read it (:func:`explorer.state.for_visitor`)."""
    from .state import for_visitor

    return for_visitor(msg)
