"""Which edits of an analysis change nothing.

A report made with :func:`core.analysis.reapply` carries the user's ``overrides`` (dotted field path → value)
and ``disabled_workarounds``. :func:`ineffective_edits` finds, without rendering, overrides that set the value
the field already had and workarounds switched off that do not apply to this template, so the command line and
the explorer can say the edit changed nothing (``--override reasoning.start='<think>'`` on a template whose
reasoning already starts with ``<think>``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from .analyzer import AnalysisReport, reapply


class EditKind(enum.Enum):
    """What the user changed: a field ``override`` or a switched-off ``workaround``."""

    OVERRIDE = "override"
    WORKAROUND = "workaround"


@dataclass(frozen=True)
class IneffectiveEdit:
    """An edit that leaves the analysis as it was: ``kind``, ``name`` (field path or workaround name) and a
    one-line ``reason``."""

    kind: EditKind
    name: str
    reason: str

    def message(self) -> str:
        """``override reasoning.start changes nothing: …`` — one line for the CLI and the explorer."""
        what = "override" if self.kind is EditKind.OVERRIDE else "--disable-workaround"
        return f"{what} {self.name} changes nothing: {self.reason}"


def _json_path(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        node = node[part]
    return node


def ineffective_edits(report: AnalysisReport) -> list[IneffectiveEdit]:
    """The overrides and disabled workarounds of ``report`` that do not change its analysis.

    An override is ineffective when the analysis without any override (the same workarounds switched off)
    already has that value; a disabled workaround is ineffective when it does not fire on this template with
    all workarounds on. Renders nothing (two :func:`reapply` calls). Returns them in the order given.
    """
    out: list[IneffectiveEdit] = []
    if report.overrides:
        before = reapply(report, disabled_workarounds=report.disabled_workarounds).analysis.to_json()
        for path, value in report.overrides.items():
            old = _json_path(before, path)
            if old == value:
                out.append(IneffectiveEdit(EditKind.OVERRIDE, path, f"the analysis already has {value!r}"))
    if report.disabled_workarounds:
        fired = set(reapply(report).workarounds_applied)
        for name in report.disabled_workarounds:
            if name not in fired:
                out.append(IneffectiveEdit(EditKind.WORKAROUND, name,
                                           f"it does not apply to {report.template_name}"))
    return out
