"""How an explanation is shown: the text view of ``python -m core explain`` and the words the Explain page shares
with it, so the two and ``explain --json`` speak with one voice (issue 26).

The triage's mistake leads. The older causes (:mod:`core.explain.causes`, the stop point's reading) follow it:
each one that agrees with the mistake as supporting it, each other one as what the stop point alone suggests
(:class:`core.explain.model.FindingRole`); only when the triage names no mistake are they the answer.
"""

from __future__ import annotations

import json
from typing import Any

from ..escapes import escape_invisible
from .call_relation import CallRelation, relation_lines
from .model import Explanation, FindingRole, show_invisible, visible_text

ROLE_HEADS = {FindingRole.ANSWER: "cause: {cause}",
              FindingRole.AGREES: "also found (agrees with the mistake): {cause}",
              FindingRole.STOP_POINT_ALONE: "what the stop point alone suggests (the mistake above is the answer): "
                                            "{cause}"}


def finding_head(cause: str, role: str) -> str:
    """The heading of a finding of ``cause`` (its words) with ``role`` (a :class:`FindingRole` value): the same on
    the page and in the text view."""
    return ROLE_HEADS[FindingRole(role)].format(cause=cause)


STOP_SEEN_ABOVE = "where the parse stopped, said once above"


def restates_stop(line: str, stop: dict[str, Any] | None) -> bool:
    """Whether an evidence ``line`` (the triage's or a cause's) only restates the stop point ``stop`` (its JSON):
    the views say the stop point once, in its own section, and leave such lines out."""
    if not stop:
        return False
    path = " > ".join(p for p in stop.get("path") or () if p)
    pos, words = stop["output_pos"], stop["words"]
    return line in (f"the parse stopped at output position {pos}: {words}",
                    f"at output position {pos} (in {path or 'the top level'}): {words}")


def shown_evidence(evidence: list[str], stop: dict[str, Any] | None) -> list[str]:
    """``evidence`` without the lines that restate the stop point; a list that held only those says where to look."""
    kept = [e for e in evidence if not restates_stop(e, stop)]
    return kept if kept or not evidence else [STOP_SEEN_ABOVE]


def text_lines(ex: Explanation) -> list[str]:
    """The text view of ``ex`` (what ``python -m core explain`` prints without ``--json``), as lines."""
    out: list[str] = []
    tg = ex.triage
    stop = ex.stop.to_json() if ex.stop else None
    alone = f" (only the repair(s) {', '.join(ex.only_repairs)})" if ex.only_repairs is not None else ""
    out.append(f"template {escape_invisible(ex.template, keep='')} · route {ex.route} · fidelity {ex.fidelity}{alone}"
               f" · parse {ex.verdict}")
    for note in ex.notes if ex.entry == "no-parser" else ():
        out += ["", show_invisible(note)]
    if ex.mistake:
        out += ["", f"mistake: {tg.mistake.value} — {show_invisible(tg.sentence)}"]
        if tg.nearest:
            out += ["", f"nearest accepted output ({len(tg.nearest.edits)} edit(s)"
                    + (f"; repair {tg.nearest.repair} accepts it" if tg.nearest.repair else "") + "):"]
            out += ["  " + show_invisible(line) for line in tg.nearest.diff.splitlines()]
        if tg.fixes:
            out += ["", "fixes, ranked (each re-parsed before it is offered):"]
            for i, f in enumerate(tg.fixes, 1):
                out.append(f"  {i}. [{f.kind.value}] {show_invisible(f.description)}"
                           + (f"  (apply: {f.cli})" if f.cli else ""))
                out.append("     gives: " + show_invisible(json.dumps(f.message, ensure_ascii=False))[:300])
        elif tg.no_fix:
            out += ["", f"no change of ours helps: {tg.no_fix}"]
        evidence = [e for e in shown_evidence(tg.evidence, stop) if e != STOP_SEEN_ABOVE]
        out += (["evidence:"] if evidence else []) + [f"  - {show_invisible(e)}" for e in evidence]
        if tg.relation is not None:
            rel: CallRelation = tg.relation
            lines = relation_lines(rel, tg.relation_decided)
            out += [""] + [("  " if i else "") + line for i, line in enumerate(lines)]
    out += ["", "spans (text of generation prompt + output; [label field] «text»):"]
    for s in ex.spans:
        tag = s.display_label + (f" {s.field}" if s.field and not s.field.startswith("{") else "") \
            + (f" #{s.call}" if s.call >= 0 else "") + (" (prompt)" if s.in_prompt else "")
        out.append(f"  {s.start:>5}-{s.end:<5} [{tag}] «{visible_text(s.text)}»")
    if ex.stop:
        out += ["", f"stopped at output position {ex.stop.output_pos} ({' > '.join(ex.stop.path) or 'top level'}): "
                f"{ex.stop.words()}"]
    if ex.truncated:
        out += ["", f"truncated: {ex.truncated.words()} ({' > '.join(ex.truncated.path) or 'top level'})"]
    out += ["", "message: " + show_invisible(json.dumps(ex.message, ensure_ascii=False))]
    for f, role in zip(ex.findings, ex.finding_roles):
        out += ["", finding_head(f.cause.value, role.value)]
        out += [f"  - {show_invisible(e)}" for e in shown_evidence(f.evidence, stop)]
    if ex.other is not None:
        out += ["", "other fidelity message: " + show_invisible(json.dumps(ex.other, ensure_ascii=False))]
    if ex.fixes and ex.mistake:
        out += ["", "other changes that re-parse clean (the stop point's reading; the ranked fixes above come first):"]
    for fx in ex.fixes:
        out += ["", f"fix ({fx.kind.value}, re-parsed clean): {fx.description}",
                "  gives: " + show_invisible(json.dumps(fx.message, ensure_ascii=False))]
    if not ex.fixes and not ex.clean:
        out += ["", "no candidate change parses this output clean"]
    if ex.consistency:
        out += ["", f"WARNING (a bug of this tool): {ex.consistency}"]
    return out


def relation_of(data: dict[str, Any]) -> list[str]:
    """The relation lines of a triage's JSON (``triage.relation``), ``[]`` when it has none."""
    rel = data.get("relation")
    return relation_lines(CallRelation.from_json(rel), bool(data.get("relation_decided"))) if rel else []
