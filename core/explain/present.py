"""How an explanation is shown: the text view of ``python -m core explain`` and the words the Explain page shares
with it, so the two and ``explain --json`` speak with one voice (issue 26).

The triage's mistake leads. The older causes (:mod:`core.explain.causes`, the stop point's reading) follow it:
each one that agrees with the mistake as supporting it, each other one as what the stop point alone suggests
(:class:`core.explain.model.FindingRole`); only when the triage names no mistake are they the answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..chat.repairs import REPAIRS_BY_NAME
from ..escapes import escape_invisible
from .call_relation import relation_lines
from .model import Explanation, FindingRole, part_of, show_invisible, visible_text
from .nearest import MAX_PARSES, TRIAGE_CHARS, Limit

ROLE_HEADS = {FindingRole.ANSWER: "cause: {cause}",
              FindingRole.AGREES: "also found (agrees with the mistake): {cause}",
              FindingRole.STOP_POINT_ALONE: "what the {reading} alone suggests (the mistake above is the answer): "
                                            "{cause}"}


def finding_head(cause: str, role: str, stopped: bool = True) -> str:
    """The heading of a finding of ``cause`` (its words) with ``role`` (a :class:`FindingRole` value): the same on
    the page and in the text view. ``stopped``: the parse has a stop point (else the older reading is the parse's,
    and the heading says so rather than name a stop point there is none of)."""
    return ROLE_HEADS[FindingRole(role)].format(cause=cause, reading="stop point" if stopped else "parse")


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


def shown_evidence(evidence: list[str], stop: dict[str, Any] | None, said: str = "") -> list[str]:
    """``evidence`` without the lines that restate the stop point or ``said`` (the mistake's sentence, shown above
    it); a list that held only the stop point says where to look."""
    kept = [e for e in evidence if not restates_stop(e, stop) and e != said]
    return kept if kept or not evidence or all(e == said for e in evidence) else [STOP_SEEN_ABOVE]


def plain_paths(line: str, points: list[dict[str, Any] | None]) -> str:
    """``line`` with the parser's rule path of a stop point or a cut (``points``: their JSON) that a sentence quotes
    (``the output ends inside tool-call > tool-0 > …``) said as the part of the output it is: a tool call, the
    reasoning or the format. The rule names stay on the stop point's own line (the page: its tooltip)."""
    for st in points:
        if not st:
            continue
        rules = [r for r in st.get("path") or () if r]
        path = " > ".join(rules)
        if path and f"inside {path}" in line:
            line = line.replace(f"inside {path}", f"inside {part_of(rules)}")
    return line


def budget_words(searched: int, limit: str = "", calls: bool = False) -> str:
    """What the text view and the page say when the triage's search stopped at its budget (``searched``: the
    re-parses it made; ``limit``: the bound that stopped it, :class:`~core.explain.nearest.Limit`; ``calls``: the
    parse read a call): the mistake and the fixes are what it found by then, not all there is — and only what the
    user can do with this output: an excerpt of a long one (up to its first call when the parse read one), the CPU
    time setting of the command line; nothing for the re-parses, which no setting or shorter output raises."""
    said = f"the triage's search stopped at its budget after {searched} re-parse(s)"
    found = ": the mistake and the fixes are what it found by then"
    excerpt = (" — explain an excerpt of the output" + (" (up to its first call)" if calls else "")
               + " to search it further")
    if limit == Limit.PARSES:
        return f"{said} (the most it makes){found}"
    if limit == Limit.CHARACTERS:
        return f"{said} (each re-parse reads the whole output, and it reads at most {TRIAGE_CHARS:,} characters in " \
               f"all){found}{excerpt}"
    if limit == Limit.CPU:
        return f"{said} (explain's CPU time limit; CTE_EXPLAIN_BUDGET_S sets it for the command line){found}{excerpt}"
    return f"{said} (at most {MAX_PARSES}, {TRIAGE_CHARS:,} characters read in all, and explain's CPU time " \
           f"limit){found}"


def repair_lines(change: dict[str, Any]) -> list[str]:
    """For a fix that switches repairs on (``change["repairs"]``), what each accepts, in its record's one-line title
    (``core.chat.repairs``): the name alone does not tell a maintainer what the model did that it tolerates, nor
    what their own parser would have to accept (``python -m core repairs`` gives each one's sources)."""
    out = []
    for name in change.get("repairs") or ():
        rec = REPAIRS_BY_NAME.get(name)
        if rec is not None:
            out.append(f"repair {name} accepts: {rec.title}")
    return out


def no_fix_words(no_fix: str, budget_hit: bool) -> str:
    """The line that says no fix was found: ``no change of ours helps: WHY`` when the search ran to its end; when it
    stopped at its budget it says only that none was found (a fix may exist that it did not reach)."""
    if budget_hit:
        return "no change found within the search's budget (one may exist that it did not reach)"
    return f"no change of ours helps: {no_fix}"


def fix_expected_words(gives: bool) -> str:
    """Whether a fix gives the expected message, in the words the triage's ranked fixes use."""
    return "gives the expected message" if gives else "does not give the expected message"


def expected_words(gives: bool, difference: str | None) -> str:
    """Whether the parse gives the expected message (``--expect``, the page's Reproducer box), in words, with the
    first difference when it does not: what a maintainer with an expected message asks first."""
    if gives:
        return "this parse gives the expected message"
    return f"this parse does not give the expected message — first difference: {difference}"


SHOWN_WHOLE = 6000
"""A text (generation prompt + output) up to this many characters is shown whole; a longer one as windows."""
WINDOW = 800
"""Characters shown either side of each point of interest (the stop, the cut, an edit, a repair) of a long text."""


@dataclass(frozen=True)
class Gap:
    """``[start, end)`` of the text a view leaves out (positions in generation prompt + output, as the spans')."""

    start: int
    end: int

    def words(self, gp: int = 0, where: str = "output positions") -> str:
        """``… 12,345 characters left out (output positions 800–13,145) …`` (``gp``: the generation prompt's length,
        taken off to give output positions)."""
        return (f"… {self.end - self.start:,} characters left out ({where} {max(0, self.start - gp):,}"
                f"–{max(0, self.end - gp):,}) …")


def focus_points(data: dict[str, Any]) -> list[int]:
    """The positions of ``data`` (an explanation's JSON) a view of a long text keeps in sight: the output's start
    (so the generation prompt is never left out), the stop point, where a cut output ends, the nearest output's
    edits and the spans a repair changed."""
    gp = len(data.get("generation_prompt") or "")
    points = [gp] + [st["pos"] for st in (data.get("stop"), data.get("truncated")) if st]
    near = (data.get("triage") or {}).get("nearest") or {}
    points += [gp + e["pos"] for e in near.get("edits") or ()]
    points += [sp["start"] for sp in data.get("spans") or () if sp.get("repair")][:8]
    return sorted(set(points))


SNAP = 120
"""A window's edge moves up to this many characters to the nearest line break, so a line is not cut mid-word."""


def windows(length: int, points: list[int], *, whole: int = SHOWN_WHOLE, width: int = WINDOW, text: str = ""
            ) -> list[tuple[int, int]]:
    """The ``[start, end)`` ranges of a text of ``length`` characters a view shows: all of it up to ``whole``;
    else ``width`` characters either side of each point, merged (the head and the tail when there is none); with
    the ``text``, each edge widened to a line break within :data:`SNAP` characters."""
    if length <= whole:
        return [(0, length)]
    wanted = [(max(0, p - width), min(length, p + width)) for p in points] or [(0, width), (length - width, length)]
    if text:
        wanted = [(_line_start(text, a), _line_end(text, b)) for a, b in wanted]
    out: list[tuple[int, int]] = []
    for a, b in sorted(wanted):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _line_start(text: str, at: int) -> int:
    """``at`` moved back to just after a line break within :data:`SNAP` characters (else ``at``)."""
    i = text.rfind("\n", max(0, at - SNAP), at)
    return i + 1 if i >= 0 else at


def _line_end(text: str, at: int) -> int:
    """``at`` moved on to just after a line break within :data:`SNAP` characters (else ``at``)."""
    i = text.find("\n", at, at + SNAP)
    return i + 1 if i >= 0 else at


def window_spans(spans: list[dict[str, Any]], length: int, points: list[int]) -> list[dict[str, Any] | Gap]:
    """``spans`` (JSON dicts) cut to :func:`windows`, in order, with a :class:`Gap` for each stretch left out: a
    span partly shown keeps its label and field, its ``start``/``end`` the part shown and ``whole`` its own."""
    if length <= SHOWN_WHOLE:
        return list(spans)
    shown = windows(length, points, text="".join(sp["text"] for sp in spans))
    out: list[dict[str, Any] | Gap] = []
    at = 0
    i = 0
    for a, b in shown:
        if a > at:
            out.append(Gap(at, a))
        while i < len(spans) and spans[i]["end"] <= a:
            i += 1
        j = i
        while j < len(spans) and spans[j]["start"] < b:
            sp = spans[j]
            lo, hi = max(a, sp["start"]), min(b, sp["end"])
            out.append(sp if (lo, hi) == (sp["start"], sp["end"]) else
                       {**sp, "start": lo, "end": hi, "text": sp["text"][lo - sp["start"]:hi - sp["start"]],
                        "whole": [sp["start"], sp["end"]]})
            j += 1
        at = b
    if at < length:
        out.append(Gap(at, length))
    return out


LONG_STRING = 400
"""A string of a message longer than this is shown cut in the text view (its head and tail, the count between)."""


def cut_strings(value: Any, limit: int = LONG_STRING) -> Any:
    """``value`` (a message's JSON) with each string longer than ``limit`` cut to its head and tail and the number
    of characters left out between them (the text view of a huge output; ``--json`` carries the message whole)."""
    if isinstance(value, str) and len(value) > limit:
        half = limit // 2
        return f"{value[:half]}… {len(value) - 2 * half:,} characters left out …{value[-half:]}"
    if isinstance(value, dict):
        return {k: cut_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cut_strings(v, limit) for v in value]
    return value


def _rules(path: tuple[str, ...]) -> str:
    return f" (grammar rules: {' > '.join(path)})" if any(path) else ""


def _message(value: Any) -> str:
    return show_invisible(json.dumps(cut_strings(value), ensure_ascii=False))


def text_lines(ex: Explanation) -> list[str]:
    """The text view of ``ex`` (what ``python -m core explain`` prints without ``--json``), as lines."""
    out: list[str] = []
    tg = ex.triage
    stop = ex.stop.to_json() if ex.stop else None
    points = [stop, ex.truncated.to_json() if ex.truncated else None]
    alone = f" (only the repair(s) {', '.join(ex.only_repairs)})" if ex.only_repairs is not None else ""
    out.append(f"template {escape_invisible(ex.template, keep='')} · route {ex.route} · fidelity {ex.fidelity}{alone}"
               f" · parse {ex.verdict_text}")
    for note in ex.notes if ex.entry == "no-parser" else ():
        out += ["", show_invisible(note)]
    if ex.blank and tg is not None and not ex.mistake:
        out += ["", f"{tg.mistake.value} — {show_invisible(tg.sentence)}"] \
            + (["", no_fix_words(tg.no_fix, tg.budget_hit)] if tg.no_fix else [])
    if ex.mistake:
        out += ["", f"mistake: {tg.mistake.value} — {show_invisible(plain_paths(tg.sentence, points))}"]
        if tg.budget_hit:
            out.append("  (" + budget_words(tg.searched, tg.budget_limit, bool(ex.message.get("tool_calls"))) + ")")
        if tg.nearest:
            out += ["", f"nearest accepted output ({len(tg.nearest.edits)} edit(s)"
                    + (f"; repair {tg.nearest.repair} accepts it" if tg.nearest.repair else "") + "):"]
            out += ["  " + show_invisible(line) for line in tg.nearest.diff.splitlines()]
        if tg.fixes:
            out += ["", "fixes, ranked (each re-parsed before it is offered):"]
            for i, f in enumerate(tg.fixes, 1):
                out.append(f"  {i}. [{f.kind.value}] {show_invisible(f.description)}"
                           + (f"  (apply: {f.cli})" if f.cli else ""))
                out += ["     " + line for line in repair_lines(f.change)]
                if f.gives_expected is not None:
                    out.append("     " + f.expected_words())
                out.append("     gives: " + _message(f.message))
        elif tg.no_fix:
            out += ["", no_fix_words(tg.no_fix, tg.budget_hit)]
        evidence = [plain_paths(e, points) for e in shown_evidence(tg.evidence, stop, tg.sentence)
                    if e != STOP_SEEN_ABOVE]
        out += (["evidence:"] if evidence else []) + [f"  - {show_invisible(e)}" for e in evidence]
        if tg.relation is not None:
            lines = relation_lines(tg.relation, tg.relation_decided)
            out += [""] + [("  " if i else "") + line for i, line in enumerate(lines)]
    out += ["", "spans (text of generation prompt + output; [label field] «text»):"]
    data = {"generation_prompt": ex.generation_prompt, "stop": stop, "truncated": ex.truncated.to_json()
            if ex.truncated else None, "triage": {"nearest": tg.nearest.to_json()} if ex.mistake and tg.nearest else {},
            "spans": [s.to_json() for s in ex.spans]}
    for s in window_spans(data["spans"], len(ex.text), focus_points(data)):
        if isinstance(s, Gap):
            out.append(f"  {s.words(0, 'positions')}")
            continue
        label = f"repaired: {s['repair']}" if s.get("repair") else s["label"]
        field = s.get("field", "")
        tag = label + (f" {field}" if field and not field.startswith("{") else "") \
            + (f" #{s['call']}" if "call" in s else "") + (" (prompt)" if s.get("in_prompt") else "")
        if "whole" in s:
            tag += f", part of {s['whole'][0]}-{s['whole'][1]}"
        out.append(f"  {s['start']:>5}-{s['end']:<5} [{tag}] «{visible_text(s['text'])}»")
    # the parser's rule names come last, named as what they are (the page keeps them in a tooltip)
    if ex.stop:
        out += ["", f"stopped at output position {ex.stop.output_pos}: {ex.stop.words()}{_rules(ex.stop.path)}"]
    if ex.truncated:
        where = "the output is empty" if ex.blank else f"the output ends inside {part_of(ex.truncated.path)}"
        out += ["", f"{where}: {ex.truncated.words()}{_rules(ex.truncated.path)}"]
    out += ["", "message: " + _message(ex.message)]
    if ex.expect_given:
        out.append(expected_words(ex.expected_difference is None, ex.expected_difference))
    for f, role in zip(ex.findings, ex.finding_roles):
        out += ["", finding_head(f.cause.value, role.value, ex.stop is not None)]
        out += [f"  - {show_invisible(plain_paths(e, points))}" for e in shown_evidence(f.evidence, stop)]
    if ex.other is not None:
        out += ["", "other fidelity message: " + _message(ex.other)]
    if ex.fixes and ex.mistake:
        out += ["", "other changes that re-parse clean (from the causes below the mistake; the ranked fixes above come "
                "first):"]
    for fx in ex.fixes:
        out += ["", f"fix ({fx.kind.value}, re-parsed clean): {fx.description}"]
        if fx.gives_expected is not None:
            out.append("  " + fix_expected_words(fx.gives_expected))
        out.append("  gives: " + _message(fx.message))
    if not ex.fixes and not ex.clean and not ex.mistake and not ex.blank:
        # (with a mistake, or nothing written, the triage says what helps, or none)
        out += ["", "no candidate change parses this output clean"]
    if ex.consistency:
        out += ["", f"WARNING (a bug of this tool): {ex.consistency}"]
    # every line once more through the one escape: a rule path, a field or a sentence that quotes the output or the
    # request cannot reorder or hide what the terminal shows (already escaped text is left as it is)
    return [show_invisible(line) for line in out]
