"""Explain a parse: spans, where it stopped, why (causes with evidence) and fixes that were re-parsed.

:func:`explain` is the entry point (CLI ``python -m core explain``, the Explain page). The causes are named
after what maintainers write when they close such bug reports (see ``tests/data/explain_cases.jsonl``).
"""

from __future__ import annotations

import gc
import json
import os
from dataclasses import replace
from typing import Any, Callable, TypeVar

from ..jinja.limits import command_budget
from ..chat.repairs import UNPARSED_TEXT
from ..chat.request import ChatRequest
from ..chat.roundtrip import compare_messages, expected_message
from ..jinja.limits import analysis_budget
from .causes import classify
from .fixes import candidate_fixes
from .model import (REPARSE_CHARS, Cause, Explanation, Finding, Fix, FixKind, Meter, ReparseLimit, Setup, Span,
                    StopPoint, dialect_failure, message_of, repairs_off, show_invisible, stop_point, trace)
from .spans import SpanLabel, attach_repairs, check_cover, rebuild_message, same_message
from .nearest import cpu_seconds
from .triage import TIME_BUDGET, triage

T = TypeVar("T")

# the model's classes are also read from here (the Explain page, the CLI, the tests)
__all__ = ["REPARSE_CHARS", "Cause", "Explanation", "Finding", "Fix", "FixKind", "ReparseLimit", "StopPoint", "dumps",
           "explain", "message_of", "show_invisible"]


def explain(template: Any, request: ChatRequest, output: str, *, fidelity: str = "llama.cpp",
            overrides: dict[str, Any] | None = None, disabled_workarounds: tuple[str, ...] = (),
            fixes: bool = True, only_repairs: tuple[str, ...] | None = None,
            expect: dict[str, Any] | None = None) -> Explanation:
    """Explain how ``template``'s parser (for ``request``, at ``fidelity``, with analysis ``overrides`` and
    ``disabled_workarounds`` as on the Overrides page; ``only_repairs``: improved fidelity with only these
    tolerance repairs of :mod:`core.chat.repairs` on — a repair switched on alone, as a triage fix offers it) parses
    ``output``: labelled spans, the stop point, the causes with evidence and (``fixes``) the candidate changes
    that re-parse clean. Raises what :func:`core.chat.pipeline.build_chat_parser` raises for a bad request or
    template (``RequestError``, ``TemplateRenderError``, ``AnalysisError``, each one line); never raises on
    the output. ``expect``: the message the user expected (an OpenAI message, checked by
    :func:`core.explain.reproducer.check_expected`), which decides the triage's readings the output alone leaves
    open and ranks first the fixes that give it.

    Runs under the analysis budget (:mod:`core.jinja.limits`: the prompt render and any analysis; raises
    :class:`~core.errors.AnalysisError` naming the limit when it runs out). Its work is linear in the output:
    one traced parse, then re-parses for the causes and fixes up to :data:`REPARSE_CHARS` characters in all
    (those left out are named in ``notes``)."""
    # a large output's trace allocates millions of small acyclic objects (parse nodes, spans); the cyclic
    # collector's generation scans over them cost as much again as the parse (13 -> 7 CPU s for 100,000 calls)
    pause_gc = len(output) > GC_PAUSE_CHARS and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        return _explain_budgeted(template, request, output, fidelity, overrides, disabled_workarounds, fixes,
                                 only_repairs, expect)
    finally:
        if pause_gc:
            gc.enable()


GC_PAUSE_CHARS = 64 * 1024
"""Outputs longer than this are explained with the cyclic garbage collector paused (see :func:`explain`)."""


def _explain_budgeted(template: Any, request: ChatRequest, output: str, fidelity: str,
                      overrides: dict[str, Any] | None, disabled_workarounds: tuple[str, ...], fixes: bool,
                      only_repairs: tuple[str, ...] | None = None, expect: dict[str, Any] | None = None
                      ) -> Explanation:
    started = cpu_seconds()
    if only_repairs is not None:
        repairs_off(tuple(only_repairs))      # an unknown name: one line, before any work
        fidelity = "improved"
    setup = Setup(template, request, fidelity, dict(overrides or {}), tuple(disabled_workarounds or ()),
                  only_repairs=tuple(only_repairs) if only_repairs is not None else None)
    with command_budget("explain", getattr(template, "name", "template")) as budget:
        bundle, tr = trace(setup, output)
    parse_cost = cpu_seconds() - started
    setup.meter = Meter(REPARSE_CHARS)
    # the causes and fixes run in what is left of the budget: a render it cuts there (a candidate's prompt) is a
    # candidate left out, not a failed explanation. What is left is counted as CPU time, so the candidates a loaded
    # machine stretches in wall time are still tried: the answer stays a function of the input
    left = None if budget is None else max(0.0, budget.seconds - parse_cost)
    with analysis_budget(left, cpu=True):
        ex = _explain(setup, bundle, tr, output, fixes)
        if bundle.format == "content-only" and dialect_failure(setup) is not None:
            ex.in_transformers_dialect = explain(template, request, output, fidelity="improved",
                                                 overrides=overrides, disabled_workarounds=disabled_workarounds,
                                                 fixes=False)
        if expect is not None:
            ex.expect_given = True
            want = expected_message(expect, output)
            ex.expected_difference = compare_messages(want, ex.message)
            for fx in ex.fixes:     # the older candidates say it too, as the triage's ranked fixes do
                fx.gives_expected = compare_messages(want, fx.message) is None
            ex.fixes.sort(key=lambda fx: not fx.gives_expected)     # (stable: their own order within each part)
        if fixes:
            # the triage (issue 26: the mistake, the nearest accepted output, ranked fixes) gets what is left of
            # EXPLAIN_BUDGET CPU seconds, so explain as a whole stays within it on hostile outputs
            overall, search = triage_budgets(TIME_BUDGET)
            spare = overall - (cpu_seconds() - started)
            ex.triage = _within_nesting(ex, "triage", lambda: triage(
                ex, setup, bundle, seconds=max(0.0, min(search, spare)), parse_cost=parse_cost, reexplain=explain,
                expect=expect),
                None)
        return ex


EXPLAIN_BUDGET = 3.0
"""CPU seconds (:func:`~core.explain.nearest.cpu_seconds`) explain aims to stay within: the triage's search shrinks
to fit, a backstop that only hostile outputs reach (a real output's search ends at its re-parses or characters,
work, whatever the machine's load); hostile outputs of 256 KB stay under 2 s (``python -m bench.triage``)."""


def triage_budgets(search: float) -> tuple[float, float]:
    """(explain's overall CPU seconds, the triage search's CPU seconds). ``CTE_EXPLAIN_BUDGET_S`` sets both: a
    hostile output's answer depends on how many candidates fit in that CPU time (a slower machine fits fewer), so
    tests and scripted runs that need the same answer on any machine raise it; an invalid value is ignored."""
    raw = os.environ.get("CTE_EXPLAIN_BUDGET_S", "")
    try:
        seconds = float(raw)
    except ValueError:
        return EXPLAIN_BUDGET, search
    return (seconds, seconds) if seconds > 0 else (EXPLAIN_BUDGET, search)


def _explain(setup: Setup, bundle: Any, tr: Any, output: str, fixes: bool) -> Explanation:
    template, request, fidelity = setup.template, setup.request, setup.fidelity
    route = bundle.format if bundle.format != "peg-native" else "auto-parser"
    ex = Explanation(template=getattr(template, "name", "template"), route=route, fidelity=fidelity,
                     only_repairs=list(setup.only_repairs) if setup.only_repairs is not None else None,
                     overrides=dict(setup.overrides), disabled_workarounds=list(setup.disabled),
                     request=request.to_row(), output=output, generation_prompt=tr.text[:tr.gp_len],
                     text=tr.text, entry=tr.entry, message=tr.message.to_openai(), spans=tr.spans,
                     notes=list(getattr(bundle.parser, "notes", []) or []) + list(bundle.notes))
    # repairs of improved fidelity (issue 10) expose (name, [start, end) of the output) on the parsed message
    fired = getattr(tr.message, "repairs", None) or []
    if fired:
        ex.spans = attach_repairs(ex.spans, [_repair_range(r) for r in fired], tr.gp_len)
        ex.spans = _unparsed_as_content(ex.spans, fired, tr.gp_len)
    ex.found_by = _found_by(bundle.report, tr.spans)
    cover = check_cover(ex.spans, tr.text)
    rebuilt = rebuild_message(ex.spans, getattr(bundle.parser, "drop_blank_reasoning", True))
    if cover or not same_message(rebuilt, tr.message):
        ex.consistency = cover or "the labelled spans do not rebuild the message"
    if tr.stop >= 0:
        ex.stop = stop_point(tr.text, tr.gp_len, tr.stop, tr.furthest.expected, tr.furthest.path)
    if tr.truncated_at >= 0:
        ex.truncated = stop_point(tr.text, tr.gp_len, tr.truncated_at, tr.truncated_expect.expected,
                                  tr.truncated_expect.path)
    ex.findings = _within_nesting(ex, "causes", lambda: classify(setup, bundle, tr, ex), [])
    if fixes:
        ex.fixes = _within_nesting(ex, "fixes", lambda: candidate_fixes(setup, bundle, tr, ex), [])
    if setup.meter is not None and setup.meter.skipped:
        ex.notes.append(f"{setup.meter.skipped} re-parse(s) for causes and fixes left out: the output is "
                        f"{len(output):,} characters and explain re-parses at most {REPARSE_CHARS:,} in all, within "
                        "the analysis budget (limit: explain re-parses)")
    return ex


def _within_nesting(ex: Explanation, what: str, step: Callable[[], T], default: T) -> T:
    """``step()``, or ``default`` with a note when the output is nested deeper than Python's recursion limit lets
    a step read (JSON arrays opened 2,000 deep inside a call: the parse keeps them as text, a cause's JSON reader
    recursed): explain never raises on the output, it leaves that part out and says so."""
    try:
        return step()
    except RecursionError:
        ex.notes.append(f"{what} left out: the output is nested too deeply to read (limit: recursion depth)")
        return default


def _found_by(report: Any, spans: list[Span]) -> dict[str, str]:
    """Field path -> ``"<comparison id>: <title>"`` of the comparison that set it, for the marker spans."""
    comps = getattr(report, "comparisons", None) or []
    out: dict[str, str] = {}
    marker = SpanLabel.MARKER
    fields: set[str] = set()   # each marker field looked up once (100,000 calls repeat a few of them)
    for s in spans:
        if s.label != marker or not s.field or s.field in fields:
            continue
        fields.add(s.field)
        for path in s.field.split(" / "):
            if path in out:
                continue
            for c in comps:
                if path in (getattr(c, "found", None) or {}):
                    out[path] = f"{c.id}: {c.title}"
                    break
    return out



def dumps(ex: Explanation) -> str:
    """``ex`` as indented JSON."""
    return json.dumps(ex.to_json(), ensure_ascii=False, indent=2)


def _unparsed_as_content(spans: list[Span], fired: list[Any], offset: int) -> list[Span]:
    """The lossless contract moves text a final parse could not place into ``content`` (an ``unparsed-text``
    record with why ``content``): the spans it covers that the format had ignored are shown as unparsed text.
    Their ``field`` names the record: :func:`~core.explain.spans.rebuild_message` takes them into the content
    only as part of the record's tail (the raw text from its start), as the parser does."""
    ranges = [(r.start + offset, r.end + offset) for r in fired
              if getattr(r, "name", "") == UNPARSED_TEXT and getattr(r, "why", "") == "content"]
    if not ranges:
        return spans
    return [replace(s, label=SpanLabel.UNPARSED, field=UNPARSED_TEXT)
            if s.label == SpanLabel.IGNORED and any(a <= s.start and s.end <= b for a, b in ranges) else s
            for s in spans]


def _repair_range(fired: Any) -> tuple[str, tuple[int, int]]:
    """``(name, (start, end))`` of a fired repair: a :class:`core.chat.repairs.FiredRepair` (``name``, ``start``,
    ``end`` of the raw output) or already such a pair."""
    if hasattr(fired, "name") and hasattr(fired, "start"):
        return fired.name, (fired.start, fired.end)
    name, rng = fired
    return name, tuple(rng)
