"""Overrides: switch workarounds on/off and edit markers, modes and flags of the analysis. Every edit goes
through ``core.analysis.reapply`` (no renders) and the parser and grammar are rebuilt at once; the result is
shown as a diff from the automatic analysis and can be exported / imported as JSON."""

import json

import pandas as pd
import streamlit as st

from core.errors import ChatTemplateExplorerError
from core.sources import json_kind
from explorer import state
from explorer.components import marker_table as mt
from explorer.components import serving
from explorer.components.code_view import show_code
from explorer.components.glossary import field_help
from explorer.components.provenance import banner
from explorer.components.text import literal, md, show_json

st.title("Overrides")
tpl = state.attempt(state.current)
auto = state.attempt(state.automatic_report, tpl) if tpl is not None else None
if auto is None:
    st.stop()
try:
    from core.analysis.workarounds import WORKAROUNDS
except ImportError as e:  # pragma: no cover - engine part missing
    WORKAROUNDS = []
    state.show_error(e)

D = tpl.digest
PFX = f"in_ov_{D}_"
disabled = state.disabled_for(tpl)
overrides = state.overrides_for(tpl)


def _commit(new_disabled: list[str], new_overrides: dict) -> bool:
    """Validate through reapply, then store; an invalid edit is reported and not stored."""
    try:
        state.report(tpl, disabled=new_disabled, overrides=new_overrides)
    except Exception as e:  # noqa: BLE001 - reported on the next run
        st.session_state[f"ov_error_{D}"] = e
        return False
    disabled[:] = sorted(new_disabled)
    overrides.clear()
    overrides.update(new_overrides)
    return True


def _reset_widgets() -> None:
    # the kept copies go too, or state.keep_inputs would put the old values back into the dropped widgets
    prefixes = (PFX, state.KEPT_PREFIX + PFX)
    for k in [k for k in st.session_state.keys() if isinstance(k, str) and k.startswith(prefixes)]:
        del st.session_state[k]
    st.session_state[f"ov_editor_version_{D}"] = st.session_state.get(f"ov_editor_version_{D}", 0) + 1


def _baseline() -> dict:
    """Flattened analysis with the current workaround settings and no overrides (what an edit is compared
    with to decide whether it is an override)."""
    return mt.analysis_fields(state.report(tpl, disabled=disabled, overrides={}).analysis)


def _set_field(path: str, value) -> None:
    new = dict(overrides)
    base = _baseline()
    if base.get(path) == value:
        new.pop(path, None)
    else:
        new[path] = value
    if not _commit(list(disabled), new):
        _reset_widgets()


def _on_workaround(name: str) -> None:
    on = st.session_state[f"{PFX}wa_{name}"]
    new = [n for n in disabled if n != name] + ([] if on else [name])
    _commit(new, dict(overrides))


def _on_widget(path: str) -> None:
    _set_field(path, st.session_state[f"{PFX}{path}"])


def _on_editor(key: str, frame: pd.DataFrame) -> None:
    edits = (st.session_state.get(key) or {}).get("edited_rows", {})
    new = dict(overrides)
    base = _baseline()
    for idx, change in edits.items():
        if "value" not in change:
            continue
        path = frame.iloc[int(idx)]["field"]
        text = change["value"] if change["value"] is not None else ""
        try:
            value = json.loads(text) if text.strip().startswith('"') else text
        except json.JSONDecodeError:
            value = text
        if not isinstance(value, str):
            value = text
        if base.get(path) == value:
            new.pop(path, None)
        else:
            new[path] = value
    _commit(list(disabled), new)
    _reset_widgets()


def _reset_all() -> None:
    _commit([], {})
    _reset_widgets()


def _import(text: str, confirmed: bool = False) -> None:
    """Apply exported overrides; a file made for another template (its ``template_digest`` differs) is held
    until the user confirms (``confirmed``)."""
    st.session_state.pop(f"ov_pending_{D}", None)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        st.session_state[f"ov_error_{D}"] = ChatTemplateExplorerError(
            f"the imported text is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")
        return
    except RecursionError:  # e.g. 5,000 nested brackets: Python's decoder gives up, the page must not
        st.session_state[f"ov_error_{D}"] = ChatTemplateExplorerError(
            "the imported text nests too deeply to read as JSON")
        return
    problem = None
    if not isinstance(data, dict):
        problem = ("must be a JSON object with \"overrides\" and/or \"disabled_workarounds\", got "
                   f"{json_kind(data)}")
        ov, dis = {}, []
    else:
        ov = data.get("overrides", {}) if ("overrides" in data or "disabled_workarounds" in data) else data
        dis = data.get("disabled_workarounds", [])
        if not isinstance(ov, dict):
            problem = f"\"overrides\" must be an object, got {json_kind(ov)}"
        elif not isinstance(dis, list):
            problem = f"\"disabled_workarounds\" must be a list, got {json_kind(dis)}"
    if problem is not None:
        st.session_state[f"ov_error_{D}"] = ChatTemplateExplorerError(f"the imported JSON {problem}")
        return
    made_for = data.get("template_digest")
    if not confirmed and isinstance(made_for, str) and made_for != D:
        st.session_state[f"ov_pending_{D}"] = (text, str(data.get("template", "?")), made_for)
        return
    if _commit([str(x) for x in dis], ov):
        st.session_state[f"ov_imported_{D}"] = len(ov)
    _reset_widgets()


err = st.session_state.pop(f"ov_error_{D}", None)
if err is not None:
    state.show_error(err, "Edit not applied: ")
n_imp = st.session_state.pop(f"ov_imported_{D}", None)
if n_imp is not None:
    st.success(f"Imported {n_imp} override(s).")
pending = st.session_state.get(f"ov_pending_{D}")
if pending is not None:
    p_text, p_name, p_digest = pending
    st.warning(md(f"These overrides were exported for another template ({p_name}, digest {p_digest}); the "
                  f"current one is {tpl.name} (digest {D}). Markers of one template rarely fit another. "
                  "Import them anyway?"))
    b1, b2 = st.columns(2)
    b1.button("Import anyway", key="ov_import_anyway", on_click=_import, args=(p_text, True))
    b2.button("Cancel import", key="ov_import_cancel",
              on_click=lambda: st.session_state.pop(f"ov_pending_{D}", None))

banner(tpl)
st.markdown(f"**{md(tpl.name)}** · {len(overrides)} override(s) · {len(disabled)} workaround(s) off")
rt = state.attempt(state.route, tpl)
if rt is not None and getattr(rt, "kind", "") == "specialized":
    st.info(md(f"This template is routed to the special handler “{rt.handler}”; overrides change the analysis "
               "and the auto-parser, not the handler."))

# ---------------------------------------------------------------- workarounds
st.subheader("Workarounds")
fired_auto = set(auto.workarounds_applied)
relevant = [w for w in WORKAROUNDS if w.name in fired_auto or w.name in disabled]
others = [w for w in WORKAROUNDS if w not in relevant]
if not relevant:
    st.caption("No workaround fires for this template.")


def _workaround_toggle(w) -> None:
    key = f"{PFX}wa_{w.name}"
    state.default(key, w.name not in disabled)
    st.toggle(md(f"{w.title} ({w.name})"), key=key, on_change=_on_workaround, args=(w.name,),
              help=w.description)
    st.caption(md(("Fires for this template. " if w.name in fired_auto else "Not triggered here. ")
                  + "Trigger: " + w.trigger_text))


for w in relevant:
    _workaround_toggle(w)
# drawn only when opened (a rerun): two dozen switches inside closed expanders were a third of the browser's
# work of a switch to this page; the switches' truth is the session's lists, so nothing is lost while closed
box = st.expander(f"Other workarounds ({len(others)})", key=f"ov_open_others_{D}", on_change="rerun")
if box.open:
    with box:
        for w in others:
            _workaround_toggle(w)

# ---------------------------------------------------------------- editors
try:
    final = state.report(tpl)
except Exception as e:  # noqa: BLE001 - stored overrides became invalid: offer a reset
    state.show_error(e)
    st.button("Reset all overrides", on_click=_reset_all)
    st.stop()
fields = mt.analysis_fields(final.analysis)
base = _baseline()

st.subheader("Modes")
cols = st.columns(len(mt.MODE_FIELDS))
for col, path in zip(cols, mt.MODE_FIELDS):
    key = f"{PFX}{path}"
    state.default(key, fields[path])
    col.selectbox(path, mt.mode_choices(path), key=key, on_change=_on_widget, args=(path,),
                  help=field_help(path, st.session_state.get(key)))

st.subheader("Markers")
st.caption("Edit a value as a JSON string (\\n for a newline) or as plain text. Clear an edit by typing the "
           "automatic value back.")
rows = [{"field": p, "value": literal(fields[p]), "automatic": literal(base.get(p, "")),
         "overridden": p in overrides} for p in mt.marker_paths(final.analysis) + list(mt.JSON_KEY_FIELDS)]
frame = pd.DataFrame(rows, columns=["field", "value", "automatic", "overridden"])
ekey = f"ov_editor_{D}_{st.session_state.get(f'ov_editor_version_{D}', 0)}"
st.data_editor(frame, key=ekey, hide_index=True, width="stretch", height="content", disabled=["field", "automatic", "overridden"],
               column_config={"value": st.column_config.TextColumn("value (JSON string)"),
                              "overridden": st.column_config.CheckboxColumn("overridden")},
               on_change=_on_editor, args=(ekey, frame))

box = st.expander("Flags", key=f"ov_open_flags_{D}", on_change="rerun")
if box.open:
    with box:
        for path, v in fields.items():
            if isinstance(v, bool) and path != "analysis_complete":
                key = f"{PFX}{path}"
                state.default(key, v)
                st.toggle(path, key=key, on_change=_on_widget, args=(path,))

# ---------------------------------------------------------------- diff, export, import
st.subheader("Difference from the automatic analysis")
diff = mt.diff_frame(mt.analysis_fields(auto.analysis), fields)
if diff.empty:
    st.caption("None: the analysis is the automatic one.")
else:
    st.dataframe(diff, hide_index=True, width="stretch", height="content")

export = {"template": tpl.name, "template_digest": D, "disabled_workarounds": list(disabled),
          "overrides": dict(overrides)}
c1, c2 = st.columns(2)
with c1:
    st.download_button("Export overrides (JSON)", json.dumps(export, indent=2, ensure_ascii=False),
                       file_name=f"{tpl.file_stem}.overrides.json",
                       mime="application/json")
    st.button("Reset all overrides", on_click=_reset_all)
with c2:
    fits = serving.capped_text_area(
        "Import overrides (JSON)", "in_ov_import", serving.policy().limits.max_text_chars, "overrides JSON",
        height=120, placeholder='{"overrides": {"reasoning.start": "<think>"}, "disabled_workarounds": []}')
    st.button("Apply imported JSON", disabled=not fits,
              on_click=lambda: _import(st.session_state.get("in_ov_import", "")))

# ---------------------------------------------------------------- rebuilt parser and grammar
st.subheader("Parser and grammar with these settings")
request = state.attempt(state.request_dict)
bundle = state.attempt(state.parser_bundle, tpl, request) if request is not None else None
if bundle is not None:
    out = st.session_state.get("in_output", "") or state.sample_output(tpl)
    msg = state.attempt(bundle.parser.parse, out, False)  # parsed in a worker: it can be stopped
    c1, c2 = st.columns(2)
    with c1:
        st.markdown("**Playground output parsed**")
        if msg is not None:
            show_json(msg.to_openai(), clip=2000)
    with c2:
        st.markdown("**Grammar**")
        if bundle.parser.grammar:
            show_code(bundle.parser.grammar, "gbnf", max_height="20rem")
        else:
            st.caption("No grammar for this request.")
