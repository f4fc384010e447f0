"""Export + verification over a directory of templates: the figures of issue 13."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..sources import read_template_file


@dataclass
class CorpusExport:
    """One row per tool-capable template (``rows``: template, route, exportable, reasons, verification counts,
    agrees, first disagreement), ``skipped`` (not tool-capable, with the reason), ``fidelity``, ``flavour``."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    """Every verified template; ``tool_capable`` False marks a template outside the tool-capable population
    that has reference cases (verified too, not counted in the figures)."""
    skipped: dict[str, str] = field(default_factory=dict)
    fidelity: str = "llama.cpp"
    flavour: str = "transformers"

    @property
    def population(self) -> list[dict[str, Any]]:
        """Rows of the tool-capable templates (:func:`core.chat.roundtrip.eligibility`)."""
        return [r for r in self.rows if r.get("tool_capable", True)]

    @property
    def exported(self) -> list[dict[str, Any]]:
        """Rows of tool-capable templates that export."""
        return [r for r in self.population if r["exportable"]]

    @property
    def unverified(self) -> list[dict[str, Any]]:
        """Rows that export but where no check could run (the template represents none of the suite's messages
        and has no reference case) — neither proven nor disproven."""
        return [r for r in self.exported if not r.get("agree") and not r.get("disagree")
                and not r.get("marker_in_string")]

    @property
    def agreeing(self) -> list[dict[str, Any]]:
        """Rows of templates that export and whose verification agrees on every check."""
        return [r for r in self.exported if r.get("agrees")]

    def summary(self) -> str:
        """One line of figures."""
        n, e, a, u = len(self.population), len(self.exported), len(self.agreeing), len(self.unverified)
        checks = sum(r.get("agree", 0) for r in self.exported)
        trunc = sum(r.get("truncated_unsupported", 0) for r in self.exported)
        marker = sum(r.get("marker_in_string", 0) for r in self.exported)
        return (f"export ({self.fidelity}, {self.flavour}): {n} tool-capable templates; {e} export; {a}/{e} "
                f"({(a / e if e else 0):.1%}) agree with transformers on every case ({a}/{e - u} = "
                f"{(a / (e - u) if e - u else 0):.1%} of those with a case to check; {u} unverifiable); "
                f"{n - e} cannot be exported; "
                f"{checks} checks agree; {trunc} truncated outputs transformers cannot parse; {marker} marker-in-"
                f"string limits")


def corpus_export(directory: str, *, fidelity: str = "llama.cpp", flavour: str = "transformers",
                  cases: str | list[dict[str, Any]] | None = None, names: list[str] | None = None,
                  progress: TextIO | None = None) -> CorpusExport:
    """Export every tool-capable template (:func:`core.chat.roundtrip.eligibility`) of ``directory``
    (``*.jinja``, or only ``names``) and verify each export with transformers on its reference ``cases`` (a
    ``cases.jsonl`` path, or its rows already read) and its generated suite; templates outside that population
    that have reference cases are verified too (``tool_capable`` False). Never raises for a template; needs transformers."""
    from ..chat.roundtrip import eligibility
    from ..jinja.template import ChatTemplate
    from .response_template import export_response_template
    from .verify import reference_cases, verify

    out = CorpusExport(fidelity=fidelity, flavour=flavour)
    d = pathlib.Path(directory)
    paths = [d / n for n in names] if names is not None else sorted(d.glob("*.jinja"))
    for path in paths:
        try:
            template = ChatTemplate(read_template_file(path), path.name)
        except Exception as e:  # noqa: BLE001 - one bad file never stops the batch
            out.skipped[path.name] = f"cannot load: {e}"
            continue
        el = eligibility(template, fidelity)
        extra = not el.eligible and bool(cases) and bool(reference_cases(cases, path.name))
        if not el.eligible and not extra:
            out.skipped[path.name] = el.reason
            continue
        res = export_response_template(template, fidelity=fidelity, flavour=flavour)
        row: dict[str, Any] = {"template": path.name, "route": res.route, "exportable": res.exportable,
                               "reasons": res.reasons, "tool_capable": not extra,
                               "served_by": [c.consumer.value for c in res.consumers if c.serves]}
        if res.exportable:
            try:
                v = verify(res.response_template, template, fidelity=fidelity,
                           cases=reference_cases(cases, path.name) if cases else ())
                row.update({k: v for k, v in v.to_json().items() if k not in ("checks", "template", "fidelity")})
                d0 = v.first_disagreement
                row["first_disagreement"] = f"{d0.source}: {d0.why}" if d0 else None
            except Exception as e:  # noqa: BLE001
                row.update({"agrees": False, "first_disagreement": f"verification failed: {type(e).__name__}: {e}"})
        out.rows.append(row)
        if progress is not None:
            status = ("agrees" if row.get("agrees") else f"DISAGREES ({row.get('first_disagreement')})") \
                if res.exportable else f"not exported ({'; '.join(res.reasons)})"
            print(f"{path.name}: {status}", file=progress, flush=True)
    return out
