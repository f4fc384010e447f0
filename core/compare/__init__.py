"""Compare two chat templates (two revisions, a file and its edited copy, two models of one family).

:func:`compare_templates` returns a :class:`TemplateComparison`: the analysis fields that differ (field names
of ``reference/analysis.jsonl``, plus route and generation prompt), the analysis comparisons whose renders
differ (both diff splits), the lint findings added and removed, and the parse of the same model outputs under
both parsers. ``parser_changes`` is the CI gate: True when the parser built for B would differ from A's — an
analysis field other than the order of the preserved tokens, the route or the generation prompt differs, or a
sample output parses differently.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from ..escapes import escape_invisible
from ..jinja.template import ChatTemplate
from ..jinja.limits import command_budget


class Side(str, enum.Enum):
    """Which template a comparison or an output comes from."""

    A = "a"
    B = "b"


@dataclass
class FieldDiff:
    """An analysis field that differs: ``path`` (dotted, as ``reference/analysis.jsonl``), values ``a`` and
    ``b``; ``parser`` is False for differences that cannot change the parser (preserved-token order)."""

    path: str
    a: Any
    b: Any
    parser: bool = True


@dataclass
class RenderDiff:
    """An analysis comparison (``id``, ``title``) whose renders differ between the templates: ``a`` / ``b`` are
    its diff splits (``{"prefix", "left", "right", "suffix"}``, None when it failed or is missing) and
    ``error_a`` / ``error_b`` its render errors."""

    id: str
    title: str
    a: dict[str, str] | None
    b: dict[str, str] | None
    error_a: str | None = None
    error_b: str | None = None

    @property
    def same_diff(self) -> bool:
        """True when both diffs split alike (the same left and right): the renders differ only in the text
        around the diff, which :meth:`around` shows."""
        return self.a is not None and self.b is not None and \
            (self.a["left"], self.a["right"]) == (self.b["left"], self.b["right"])

    def around(self, before: int = 20) -> list[tuple[str, str, str]]:
        """``(part, A's text, B's text)`` for the prefix and the suffix where they differ, each from ``before``
        characters ahead of the first difference (``…`` marks a cut)."""
        out = []
        for part in ("prefix", "suffix"):
            x, y = (self.a or {}).get(part, ""), (self.b or {}).get(part, "")
            if x == y:
                continue
            i = next((k for k, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            start = max(0, i - before)
            out.append((part, ("…" if start else "") + x[start:], ("…" if start else "") + y[start:]))
        return out


@dataclass
class ParseDiff:
    """One model output (``output``, cut from template ``source``'s round trip for message ``message``) parsed
    by both parsers built for the round-trip request with ``enable_thinking`` on or off: ``parsed_a`` /
    ``parsed_b`` (OpenAI shape, or an ``{"error": …}``), ``same``."""

    source: Side
    message: str
    output: str
    parsed_a: dict[str, Any]
    parsed_b: dict[str, Any]
    enable_thinking: bool = True

    @property
    def same(self) -> bool:
        """True when both parsers give the same message."""
        return self.parsed_a == self.parsed_b


@dataclass
class TemplateComparison:
    """Result of :func:`compare_templates` (see the module docstring); ``identical``: the sources are equal."""

    name_a: str
    name_b: str
    identical: bool
    fields: list[FieldDiff] = field(default_factory=list)
    renders: list[RenderDiff] = field(default_factory=list)
    lint_added: list[str] = field(default_factory=list)
    lint_removed: list[str] = field(default_factory=list)
    parses: list[ParseDiff] = field(default_factory=list)
    fidelity: str = "llama.cpp"

    @property
    def parser_changes(self) -> bool:
        """True when the parser would change (a parser-relevant field differs or an output parses differently)."""
        return any(f.parser for f in self.fields) or any(not p.same for p in self.parses)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"a": self.name_a, "b": self.name_b, "identical": self.identical, "fidelity": self.fidelity,
                "parser_changes": self.parser_changes,
                "fields": [vars(f) for f in self.fields],
                "renders": [vars(r) for r in self.renders],
                "lint_added": self.lint_added, "lint_removed": self.lint_removed,
                "parses": [{"source": p.source.value, "message": p.message, "enable_thinking": p.enable_thinking,
                            "output": p.output,
                            "parsed_a": p.parsed_a, "parsed_b": p.parsed_b, "same": p.same} for p in self.parses]}


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = d
    return out


def analysis_fields(report: Any) -> dict[str, Any]:
    """The flat analysis of a report: ``analysis.<path>`` (``TemplateAnalysis.to_json``, reference field names)
    plus ``route`` and ``generation_prompt``."""
    flat = {f"analysis.{k}": v for k, v in _flatten(report.analysis.to_json()).items()}
    flat["route"] = report.route.kind + (f":{report.route.handler}" if report.route.handler else "")
    flat["generation_prompt"] = report.generation_prompt
    return flat


def field_diffs(report_a: Any, report_b: Any) -> list[FieldDiff]:
    """The fields of :func:`analysis_fields` that differ, in path order."""
    fa, fb = analysis_fields(report_a), analysis_fields(report_b)
    out = []
    for path in sorted(set(fa) | set(fb)):
        a, b = fa.get(path), fb.get(path)
        if a == b:
            continue
        order_only = path.endswith("preserved_tokens") and isinstance(a, list) and isinstance(b, list) \
            and sorted(a) == sorted(b)
        out.append(FieldDiff(path, a, b, parser=not order_only))
    return out


def render_diffs(report_a: Any, report_b: Any) -> list[RenderDiff]:
    """The analysis comparisons (matched by id, first occurrence) whose two renders differ between the reports,
    or that exist or fail on one side only."""
    ca = {c.id: c for c in reversed(report_a.comparisons)}
    cb = {c.id: c for c in reversed(report_b.comparisons)}
    out = []
    for cid in list(dict.fromkeys([*ca, *cb])):
        a, b = ca.get(cid), cb.get(cid)
        if a is not None and b is not None and (a.output_a, a.output_b, a.error) == (b.output_a, b.output_b, b.error):
            continue
        out.append(RenderDiff(cid, (a or b).title, a.diff.to_json() if a and a.diff else None,
                              b.diff.to_json() if b and b.diff else None,
                              a.error if a else "no such comparison", b.error if b else "no such comparison"))
    return out


def _parse(template: ChatTemplate, report: Any, output: str, fidelity: str,
           enable_thinking: bool = True) -> dict[str, Any]:
    from ..chat.pipeline import build_chat_parser
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import round_trip_request

    req = round_trip_request()
    req["enable_thinking"] = enable_thinking
    try:
        bundle = build_chat_parser(template, ChatRequest.from_dict(req), report=report, fidelity=fidelity)
        return bundle.parser.parse(output, False).to_openai()
    except Exception as e:  # noqa: BLE001 - a parser that cannot be built or raises is part of the comparison
        return {"error": f"{type(e).__name__}: {e}"}


def parse_diffs(a: ChatTemplate, b: ChatTemplate, report_a: Any, report_b: Any,
                fidelity: str = "llama.cpp") -> list[ParseDiff]:
    """The round-trip outputs of both templates (the standard message and the content-only message of
    :func:`core.lint.checks.roundtrip_messages`), each parsed by both parsers; the content-only output also
    by both parsers built with ``enable_thinking`` off (the generation prompt, and so the parser's start, may
    differ there)."""
    from ..chat.roundtrip import round_trip
    from ..lint.checks import roundtrip_messages

    out = []
    seen: set[str] = set()
    for side, tmpl, rep in ((Side.A, a, report_a), (Side.B, b, report_b)):
        for mid in ("standard", "content"):
            msg, needs_tools = roundtrip_messages()[mid]
            res = round_trip(tmpl, msg, None if needs_tools else [], report=rep, reduce=False, fidelity=fidelity)
            if not res.rendered_output or res.rendered_output in seen:
                continue
            seen.add(res.rendered_output)
            out.append(ParseDiff(side, mid, res.rendered_output, _parse(a, report_a, res.rendered_output, fidelity),
                                 _parse(b, report_b, res.rendered_output, fidelity)))
            if mid == "content":
                out.append(ParseDiff(side, mid, res.rendered_output,
                                     _parse(a, report_a, res.rendered_output, fidelity, False),
                                     _parse(b, report_b, res.rendered_output, fidelity, False), False))
    return out


def compare_templates(a: ChatTemplate, b: ChatTemplate, *, fidelity: str = "llama.cpp", with_lint: bool = True,
                      budget_s: float | None = None) -> TemplateComparison:
    """Compare templates ``a`` and ``b`` (see :class:`TemplateComparison`), analysed (cached) at ``fidelity``.
    ``with_lint``: also lint both.
    ``budget_s``: the analysis budget per template (default ``$CTE_ANALYSIS_BUDGET_S`` or 5 s, so 10 s for the
    whole comparison; ``0``: none; :mod:`core.jinja.limits`).
    Raises :class:`~core.errors.AnalysisError` when an analysis fails or the budget runs out."""
    with command_budget("the comparison", f"{a.name} vs {b.name}", budget_s, templates=2):
        return _compare(a, b, fidelity, with_lint)


def _compare(a: ChatTemplate, b: ChatTemplate, fidelity: str, with_lint: bool) -> TemplateComparison:
    from ..chat.pipeline import cached_analysis

    ra, rb = cached_analysis(a, fidelity), cached_analysis(b, fidelity)
    out = TemplateComparison(a.name, b.name, a.source == b.source, fidelity=fidelity)
    if out.identical:
        return out
    out.fields = field_diffs(ra, rb)
    out.renders = render_diffs(ra, rb)
    out.parses = parse_diffs(a, b, ra, rb, fidelity)
    if with_lint:
        from ..lint import lint

        ia, ib = lint(a, fidelity=fidelity, report=ra).ids(), lint(b, fidelity=fidelity, report=rb).ids()
        out.lint_added, out.lint_removed = sorted(ib - ia), sorted(ia - ib)
    return out


def format_comparison(c: TemplateComparison) -> str:
    """Readable text of a :class:`TemplateComparison` (whitespace and invisible characters visible)."""
    from ..lint.model import visible

    L = [f"A: {c.name_a}", f"B: {c.name_b}", f"Fidelity: {c.fidelity}"]
    if c.identical:
        L.append("The templates are identical.")
    L.append(f"Parser changes: {'yes' if c.parser_changes else 'no'}")
    L.append(f"Analysis fields that differ: {len(c.fields)}")
    for f in c.fields:
        note = "" if f.parser else "  (order only: the parser does not change)"
        L.append(f"  {f.path}: {visible(json.dumps(f.a, ensure_ascii=False), 200, spaces=False)} → "
                 f"{visible(json.dumps(f.b, ensure_ascii=False), 200, spaces=False)}{note}")
    L.append(f"Comparisons whose renders differ: {len(c.renders)}")
    for r in c.renders:
        L.append(f"  {r.id}: {r.title}")
        if r.same_diff:   # two equal diff lines said nothing: show where the renders do differ
            L.append(f"    A and B: left «{visible(r.a['left'], 120)}» right «{visible(r.a['right'], 120)}» "
                     "(the same diff; the text around it differs)")
            for part, x, y in r.around():
                L.append(f"    {part}: A «{visible(x, 120)}» B «{visible(y, 120)}»")
            continue
        for side, split, err in (("A", r.a, r.error_a), ("B", r.b, r.error_b)):
            if split is None:
                L.append(f"    {side}: {err}")
            else:
                L.append(f"    {side}: left «{visible(split['left'], 120)}» right «{visible(split['right'], 120)}»")
    if c.lint_added or c.lint_removed:
        L.append("Lint findings added: " + (", ".join(c.lint_added) or "(none)"))
        L.append("Lint findings removed: " + (", ".join(c.lint_removed) or "(none)"))
    for p in c.parses:
        L.append(f"Output of {p.source.value.upper()} ({p.message} message, thinking "
                 f"{'on' if p.enable_thinking else 'off'}): "
                 + ("parsed the same by both" if p.same else "parsed differently"))
        L.append(f"    output: {visible(p.output, 200)}")
        if not p.same:
            L.append(f"    A: {visible(json.dumps(p.parsed_a, ensure_ascii=False), 300, spaces=False)}")
            L.append(f"    B: {visible(json.dumps(p.parsed_b, ensure_ascii=False), 300, spaces=False)}")
    return escape_invisible("\n".join(L))  # file names, renders and notes are the template authors' text
