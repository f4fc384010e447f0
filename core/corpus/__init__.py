"""Corpus figures: one table row per template file and the counts over a folder of templates.

The explorer's Corpus page, ``python -m core corpus DIR`` and docs/fidelity.md's figures all come from
:func:`corpus_row` and :func:`corpus_counts`, so they cannot disagree (``tests/test_corpus_counts.py`` checks
docs/fidelity.md against them on ``../shared/templates``).
"""

from __future__ import annotations

import collections
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from ..errors import TemplateLoadError

CAPS = [f"supports_{c}" for c in ("tools", "tool_calls", "parallel_tool_calls", "system_role", "object_arguments",
                                  "typed_content", "string_content", "preserve_reasoning", "reasoning_effort")]
COLUMNS = ["template", "route", "handler", "tools", "reasoning", "content", "warning", "error", "reasoning_start",
           "reasoning_end", "tool_start", "workarounds", "response_template", *CAPS, "analysis_ms"]
SUFFIXES = (".jinja", ".j2", ".json", ".gguf")


def template_files(folder: str | os.PathLike[str]) -> list[str]:
    """Paths of the template files (``.jinja``, ``.j2``, ``.json``, ``.gguf``) directly in ``folder``, sorted
    by name. Raises :class:`core.errors.TemplateLoadError` when ``folder`` is not a directory."""
    if not os.path.isdir(folder):
        raise TemplateLoadError(str(folder), "not a directory")
    return sorted(os.path.join(folder, n) for n in os.listdir(folder)
                  if n.lower().endswith(SUFFIXES) and os.path.isfile(os.path.join(folder, n)))


def corpus_row(path: str, fidelity: str = "llama.cpp") -> dict[str, Any]:
    """One row (keys :data:`COLUMNS`) for a template file, analysed automatically at ``fidelity``. Never
    raises: a template that cannot be loaded or analysed has ``error`` set; one whose every probe render
    fails gets the default analysis and a ``warning`` naming the first failure (llama.cpp's behaviour)."""
    from ..analysis import analyze
    from ..sources import load_template

    row: dict[str, Any] = {c: None for c in COLUMNS}
    row.update(template=os.path.basename(path), warning="", error="")
    t0 = time.perf_counter()
    try:
        tpl = load_template(path).template()
        rep = analyze(tpl, fidelity=fidelity)
        a = rep.analysis
        row.update(route=rep.route.kind, handler=rep.route.handler or "", reasoning=a.reasoning.mode.value,
                   content=a.content.mode.value, tools=a.tools.format.mode.value,
                   reasoning_start=a.reasoning.start, reasoning_end=a.reasoning.end,
                   tool_start=a.tools.format.section_start or a.tools.format.per_call_start,
                   workarounds=", ".join(rep.workarounds_applied))
        if rep.all_probes_failed:
            first = rep.probe_failures[0] if rep.probe_failures else "?"
            row["warning"] = f"fails every probe render: default analysis (first: {first})"
        for c in CAPS:
            row[c] = bool(getattr(a.caps, c))
        from ..export.response_template import export_response_template  # whether/why it exports (issue 13)

        ex = export_response_template(tpl, fidelity=fidelity)
        row["response_template"] = "exportable" if ex.exportable else "no: " + "; ".join(ex.reasons)
    except Exception as e:  # noqa: BLE001 - one bad template must not stop the corpus
        row["error"] = str(e) or type(e).__name__
    row["analysis_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    return row


@dataclass
class CorpusCounts:
    """Counts over corpus rows: ``templates``; ``analysed`` (no error) and ``errors``; ``autoparser`` and
    ``specialized`` routes among the analysed; ``handlers`` (special handler name → templates, most first);
    ``all_probes_failed`` (analysed, but every probe render failed: the default analysis)."""

    templates: int = 0
    analysed: int = 0
    errors: int = 0
    autoparser: int = 0
    specialized: int = 0
    all_probes_failed: int = 0
    handlers: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The counts as a JSON object (field names as above)."""
        return asdict(self)

    def lines(self) -> list[str]:
        """The counts as docs/fidelity.md and ``python -m core corpus`` word them."""
        hs = ", ".join(f"{h} {n}" for h, n in self.handlers.items())
        return [f"{self.templates} templates: {self.analysed} analysed, {self.errors} failed to load or analyse",
                f"routes: {self.autoparser} auto-parser, {self.specialized} special handler "
                f"({len(self.handlers)} handlers: {hs})",
                f"{self.all_probes_failed} fail every probe render (default analysis, failing probe named)"]


def corpus_counts(rows: Iterable[dict[str, Any]]) -> CorpusCounts:
    """:class:`CorpusCounts` of :func:`corpus_row` rows (or any dicts with ``route``, ``handler``, ``error``,
    ``warning``)."""
    c = CorpusCounts()
    handlers: collections.Counter[str] = collections.Counter()
    for r in rows:
        c.templates += 1
        if r.get("error"):
            c.errors += 1
            continue
        c.analysed += 1
        if r.get("route") == "specialized":
            c.specialized += 1
            handlers[r.get("handler") or "?"] += 1
        else:
            c.autoparser += 1
        c.all_probes_failed += bool(r.get("warning"))
    c.handlers = dict(sorted(handlers.items(), key=lambda kv: (-kv[1], kv[0])))
    return c
