"""Tables of an analysis: markers, modes and flags as rows (field path, value), for ``st.dataframe`` /
``st.data_editor`` (both draw cells as text, so nothing in them is interpreted).

Field paths are the dotted paths of :meth:`core.analysis.result.TemplateAnalysis.to_json` — the same paths
overrides use (``reasoning.start``, ``tools.format.mode``, …).
"""

from __future__ import annotations

import enum
import json
from typing import Any, Iterable, Mapping

import pandas as pd

from .text import literal, visible_text

# Enum-valued fields and their enum types (for select boxes in the overrides editor).
MODE_FIELDS: dict[str, str] = {
    "reasoning.mode": "ReasoningMode",
    "content.mode": "ContentMode",
    "tools.format.mode": "ToolFormat",
    "tools.call_id.pos": "CallIdPosition",
}


# String fields that name JSON keys (JSON_NATIVE calls), not text markers.
JSON_KEY_FIELDS = ("tools.format.function_field", "tools.format.name_field", "tools.format.args_field",
                   "tools.format.id_field", "tools.format.gen_id_field")


def mode_choices(path: str) -> list[str]:
    """Allowed values of an enum field (names of the enum in :mod:`core.analysis.result`)."""
    from core.analysis import result

    cls = getattr(result, MODE_FIELDS[path])
    return [m.value for m in cls]  # type: ignore[union-attr]


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (lists and scalars are leaves)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        path = f"{prefix}.{k}" if prefix else k
        if isinstance(v, Mapping):
            out.update(flatten(v, path))
        else:
            out[path] = v.value if isinstance(v, enum.Enum) else v
    return out


def analysis_fields(analysis: Any) -> dict[str, Any]:
    """Flattened ``analysis.to_json()`` without ``caps`` (caps are shown on their own)."""
    data = analysis.to_json() if hasattr(analysis, "to_json") else dict(analysis)
    return {k: v for k, v in flatten(data).items() if not k.startswith("caps.")}


def marker_paths(analysis: Any) -> list[str]:
    """Paths of the string-valued (marker) fields, in ``to_json`` order, enum fields excluded."""
    return [p for p, v in analysis_fields(analysis).items() if isinstance(v, str) and p not in MODE_FIELDS
            and p not in JSON_KEY_FIELDS]


def known_markers(analysis: Any, extra: Iterable[str] = ()) -> list[str]:
    """The strings a display boxes as markers: every non-empty marker field of ``analysis`` without its
    surrounding whitespace, its ``preserved_tokens`` and ``extra`` (e.g. a parser's preserved tokens)."""
    fields = analysis_fields(analysis)
    found = [fields[p].strip(" \t\n\v\f\r") for p in marker_paths(analysis)]
    found += list(getattr(analysis, "preserved_tokens", None) or []) + list(extra)
    return sorted({m for m in found if m})


def found_by_map(report: Any) -> dict[str, list[str]]:
    """Field path → where its value comes from: ``override`` for the user's overrides, ``workaround NAME``
    for fields a workaround set, else the ids of the comparisons that found it (I1: "inferred from
    instructions (I1)"). One source for the Overview
    table and anything else that says "found by"."""
    from core.analysis.instructions import comparison_label

    out: dict[str, list[str]] = {}
    for cmp in getattr(report, "comparisons", None) or []:
        for path in (cmp.found or {}):
            out.setdefault(path, []).append(comparison_label(cmp.id))
    for name, effects in (getattr(report, "workaround_effects", None) or {}).items():
        for path in effects:
            out[path] = [f"workaround {name}"]
    for path in getattr(report, "overrides", None) or {}:
        out[path] = ["override"]
    return out


def markers_frame(analysis: Any, *, found_by: Mapping[str, Iterable[str]] | None = None,
                  include_empty: bool = False) -> pd.DataFrame:
    """One row per marker field: ``field`` (path), ``value`` (JSON literal, whitespace visible),
    ``trimmed`` (the value without surrounding whitespace, as preserved tokens use it) and, when
    ``found_by`` (path → comparison ids) is given, ``found by``. Empty markers are left out unless
    ``include_empty``."""
    rows = []
    for path in marker_paths(analysis):
        value = analysis_fields(analysis)[path]
        if not value and not include_empty:
            continue
        row = {"field": path, "value": literal(value), "trimmed": visible_text(value.strip(" \t\n\v\f\r"))}
        if found_by is not None:
            row["found by"] = ", ".join(found_by.get(path, ()))
        rows.append(row)
    cols = ["field", "value", "trimmed"] + (["found by"] if found_by is not None else [])
    return pd.DataFrame(rows, columns=cols)


def marker_column_config(frame: pd.DataFrame) -> dict[str, Any]:
    """``st.dataframe`` ``column_config`` for a :func:`markers_frame`: text columns with fixed widths in pixels
    (900 in all), so every column stays visible without horizontal scrolling in the full-width table of a
    1400 px browser (auto-sized columns followed the longest value and pushed ``trimmed`` / ``found by`` out).
    A longer value is cut with an ellipsis in its cell. Only columns present in ``frame`` are configured."""
    import streamlit as st

    widths = {"field": 210, "value": 300, "trimmed": 220, "found by": 170}
    return {c: st.column_config.TextColumn(c, width=w) for c, w in widths.items() if c in frame.columns}


def flags_frame(analysis: Any) -> pd.DataFrame:
    """JSON key names, boolean and list fields (``name_field``, ``fun_name_is_key``, ``parameter_order``,
    …) as ``field`` / ``value``; booleans read ``true`` / ``false``, as the capabilities beside them and an override
    does."""
    rows = [{"field": p, "value": literal(v) if isinstance(v, (list, str)) else json.dumps(v) if isinstance(v, bool)
             else str(v)}
            for p, v in analysis_fields(analysis).items()
            if (not isinstance(v, str) or p in JSON_KEY_FIELDS) and p not in MODE_FIELDS]
    return pd.DataFrame(rows, columns=["field", "value"])


def caps_frame(caps: Any) -> pd.DataFrame:
    """Capabilities as ``capability`` / ``supported`` rows (``caps`` is a dataclass or dict)."""
    data = caps if isinstance(caps, Mapping) else vars(caps)
    return pd.DataFrame([{"capability": k.removeprefix("supports_"), "supported": bool(v)}
                         for k, v in data.items()])


def diff_frame(auto: Mapping[str, Any], final: Mapping[str, Any]) -> pd.DataFrame:
    """Fields whose value differs between two flattened analyses: ``field``, ``automatic``, ``now``."""
    rows = []
    for path in list(dict.fromkeys([*auto, *final])):
        a, b = auto.get(path), final.get(path)
        if a != b:
            rows.append({"field": path, "automatic": literal(a) if isinstance(a, (str, list)) else str(a),
                         "now": literal(b) if isinstance(b, (str, list)) else str(b)})
    return pd.DataFrame(rows, columns=["field", "automatic", "now"])
