"""Result types of the template linter: :class:`Severity`, :class:`Kind`, :class:`Finding`, :class:`LintReport`."""

from __future__ import annotations

import enum
import fnmatch
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..escapes import visible as _visible


class Severity(str, enum.Enum):
    """How much a finding matters to a template author.

    ``ERROR``: a conversation the template should take breaks, or our parser cannot read the template's own
    output. ``WARNING``: a property servers or trainers rely on does not hold (prefix stability, a message
    part lost). ``INFO``: worth knowing, often by design (reasoning dropped from history, a renderer
    difference on an unusual shape)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


class Kind(str, enum.Enum):
    """The finding kinds; the first part of every finding id."""

    RENDER = "render"            # render matrix: a conversation shape raises
    ROUNDTRIP = "roundtrip"      # an assistant message rendered and parsed back loses something
    PREFIX = "prefix"            # a conversation extended by one turn does not keep the previous render
    DIVERGENCE = "divergence"    # transformers-style and llama.cpp-compatible renders differ
    PROBE = "probe"              # an analysis probe raised
    MARKER = "marker"            # marker hygiene (prefix of another, ordinary text, instructions, generation)
    TIME = "time"                # output depends on the date


@dataclass
class Finding:
    """One lint finding.

    ``id``: stable, ``KIND/detail[/detail]`` (e.g. ``render/developer-role``,
    ``roundtrip/standard/drops-content``); suppress it with ``--suppress ID`` (shell-style patterns).
    ``kind``, ``severity``; ``title``: one line; ``hint``: one line, what to do; ``evidence``: name → text
    (renders, the lost field, positions), whitespace and invisible characters made visible by
    :func:`visible`; ``data``: machine-readable details (positions, shape ids)."""

    id: str
    kind: Kind
    severity: Severity
    title: str
    hint: str
    evidence: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (enums as values)."""
        return {"id": self.id, "kind": self.kind.value, "severity": self.severity.value, "title": self.title,
                "hint": self.hint, "evidence": dict(self.evidence), "data": dict(self.data)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Finding":
        """Inverse of :meth:`to_json`."""
        return cls(d["id"], Kind(d["kind"]), Severity(d["severity"]), d["title"], d["hint"],
                   dict(d.get("evidence") or {}), dict(d.get("data") or {}))


@dataclass
class LintReport:
    """All findings for one template: ``template`` (name), ``findings`` (sorted by severity, then id),
    ``suppressed`` (ids left out by the caller's patterns), ``shapes`` (number of conversation shapes
    rendered), ``shapes_raising`` (ids of those that raised), ``error`` (set when the template could not be
    linted at all, e.g. a syntax error), ``elapsed_ms``."""

    template: str
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[str] = field(default_factory=list)
    shapes: int = 0
    shapes_raising: list[str] = field(default_factory=list)
    error: str | None = None
    elapsed_ms: float = 0.0

    def by_kind(self) -> dict[str, int]:
        """Kind value → number of findings (every kind present, 0 when none)."""
        out = {k.value: 0 for k in Kind}
        for f in self.findings:
            out[f.kind.value] += 1
        return out

    def worst(self) -> Severity | None:
        """The most severe finding's severity, None without findings."""
        if not self.findings:
            return None
        return min((f.severity for f in self.findings), key=SEVERITY_ORDER.__getitem__)

    def ids(self) -> set[str]:
        """The finding ids."""
        return {f.id for f in self.findings}

    def get(self, finding_id: str) -> Finding | None:
        """The finding with that id, or None."""
        return next((f for f in self.findings if f.id == finding_id), None)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"template": self.template, "error": self.error, "shapes": self.shapes,
                "shapes_raising": list(self.shapes_raising), "by_kind": self.by_kind(),
                "findings": [f.to_json() for f in self.findings], "suppressed": list(self.suppressed),
                "elapsed_ms": round(self.elapsed_ms, 1)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "LintReport":
        """Inverse of :meth:`to_json`."""
        return cls(d["template"], [Finding.from_json(f) for f in d.get("findings") or []],
                   list(d.get("suppressed") or []), d.get("shapes", 0), list(d.get("shapes_raising") or []),
                   d.get("error"), d.get("elapsed_ms", 0.0))


def suppress(findings: Iterable[Finding], patterns: Iterable[str]) -> tuple[list[Finding], list[str]]:
    """Split ``findings`` into (kept, suppressed ids) by shell-style ``patterns`` on the id
    (``roundtrip/*`` or an exact id)."""
    pats = [p for p in patterns if p]
    kept: list[Finding] = []
    dropped: list[str] = []
    for f in findings:
        if any(fnmatch.fnmatchcase(f.id, p) for p in pats):
            dropped.append(f.id)
        else:
            kept.append(f)
    return kept, dropped


def visible(s: str, limit: int | None = 400, *, spaces: bool = True) -> str:
    """``s`` with whitespace made visible (``␣`` ``↵`` ``→``) and every control, bidirectional-control or
    invisible character (zero-width spaces, BOM, LRE/RLO/isolates, separators) escaped as ``\\u202e``
    (:mod:`core.escapes`), so template text never reorders or hides what is shown. Clipped to ``limit``
    characters with ``…`` (None: no clip). ``spaces=False`` leaves plain spaces as they are (for messages and
    reasons)."""
    text = _visible(s, spaces=spaces)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return text
