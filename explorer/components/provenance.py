"""The banner every per-template page shows when the analysis is not the automatic llama.cpp one: the user's
overrides, switched-off workarounds, the ``improved`` fidelity (and which improvements fired), and edits that
change nothing (:func:`core.analysis.provenance.ineffective_edits`)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .text import literal, md


#: characters of an override's value the banner shows; a marker is a few characters, a value from a link may be
#: thousands (the banner drew all of them on every page)
BANNER_VALUE_CHARS = 60


def _short(value: Any) -> str:
    """``value`` as a JSON literal, a long string cut to :data:`BANNER_VALUE_CHARS` with its length named."""
    if isinstance(value, str) and len(value) > BANNER_VALUE_CHARS:
        return f"{literal(value[:BANNER_VALUE_CHARS])[:-1]}…\" ({len(value):,} characters)"
    return literal(value)


def provenance_lines(overrides: Mapping[str, Any], disabled: Iterable[str], fidelity: str,
                     improvements: Iterable[str] = ()) -> list[str]:
    """Plain-text lines of the banner (empty when the analysis is the automatic ``llama.cpp`` one)."""
    lines = []
    if overrides:
        shown = ", ".join(f"{p} = {_short(v)}" for p, v in list(overrides.items())[:4])   # JSON, as the tables
        more = f" and {len(overrides) - 4} more" if len(overrides) > 4 else ""
        lines.append(f"Overrides active ({len(overrides)}): {shown}{more}. Fields marked “override” are yours, "
                     "not found by a comparison.")
    disabled = list(disabled)
    if disabled:
        lines.append(f"Workarounds switched off ({len(disabled)}): {', '.join(disabled)}.")
    if fidelity != "llama.cpp":
        imp = list(improvements)
        lines.append(f"Fidelity “{fidelity}”: " + (f"improvements applied: {', '.join(imp)}." if imp else
                                                   "no improvement changes this template's analysis."))
    return lines


def banner(tpl: Any, report: Any = None) -> None:
    """Draw the banner for the current template (``report``: its analysis report when the page has it).

    The banner is one container whether it shows anything or not: Streamlit matches a run's elements to the
    page's by position, so a banner that appeared (switching to ``improved``) shifted every element below it,
    and the browser re-created them — dropping what the visitor was typing into a text box meanwhile."""
    import streamlit as st

    with st.container():
        _banner(tpl, report)


def _banner(tpl: Any, report: Any) -> None:
    import streamlit as st

    from .. import state

    overrides, disabled = state.overrides_for(tpl), state.disabled_for(tpl)
    fid = state.fidelity()
    if not overrides and not disabled and fid == "llama.cpp":
        return
    if report is None:
        try:
            report = state.report(tpl)
        except Exception:  # noqa: BLE001 - the page itself shows the analysis error
            report = None
    lines = provenance_lines(overrides, disabled, fid, getattr(report, "improvements_applied", None) or ())
    notes = []
    if report is not None:
        from core.analysis.provenance import ineffective_edits

        notes = [e.message() for e in ineffective_edits(report)]
    body = "  \n".join(md(x) for x in lines + notes)
    st.warning(body, icon=":material/edit_note:") if overrides or disabled else st.info(body)
