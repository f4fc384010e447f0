"""Explain a parse: spans, where it stopped, why (causes with evidence) and fixes that were re-parsed.

:func:`explain` is the entry point (CLI ``python -m core explain``, the Explain page). The causes are named
after what maintainers write when they close such bug reports (see ``tests/data/explain_cases.jsonl``).
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..chat.message import AssistantMessage
from ..chat.repairs import UNPARSED_TEXT
from ..chat.request import ChatRequest
from .spans import Span, SpanLabel, check_cover, rebuild_message, same_message
from .trace_routes import MAIN, ParseTrace, trace_parse

_WS = " \t\n\v\f\r"
# marker-like tokens: <tag>, </tag>, <|x|>, [UPPER_CASE], <｜x｜>
_TOKEN = re.compile(r"<\|[^|<>\n]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>|</?[A-Za-z_][\w:.\-]{0,40}(?:=|>)|\[[A-Z_]{3,30}\]")


class Cause(str, enum.Enum):
    """Why a parse is not what the user expected (the classification of :func:`explain`)."""

    TRUNCATED = "output truncated"
    MISSING_OPENER = "drift: missing opener"
    OTHER_MARKER = "drift: other marker"
    OTHER_JSON_SHAPE = "drift: other JSON shape"
    WRONG_CALL_ID = "drift: call id shape"
    UNKNOWN_TOOL = "tool not in the request"
    SCHEMA_MISMATCH = "argument does not fit the schema"
    REASONING_PREFILL = "reasoning prefill mismatch"
    SPECIAL_TOKENS_STRIPPED = "special tokens stripped"
    NO_TOOL_FORMAT = "no tool format found"
    TOOLS_NOT_REQUESTED = "tool call without tools in the request"
    PARALLEL_NOT_REQUESTED = "second tool call without parallel_tool_calls"
    FIDELITY_DIFFERS = "llama.cpp and improved fidelity differ"
    DRIFT = "drift from the template format"


@dataclass
class Finding:
    """One cause with its evidence (sentences a maintainer can check); ``overrides``: analysis overrides the
    classification already re-parsed with (the fixes try them, together with their own)."""

    cause: Cause
    evidence: list[str] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``{"cause": value, "name": enum name, "evidence": [...]}``."""
        return {"cause": self.cause.value, "name": self.cause.name, "evidence": list(self.evidence)}


class FixKind(str, enum.Enum):
    """What a fix changes."""

    FIDELITY = "fidelity"
    OVERRIDE = "override"
    REQUEST = "request"


@dataclass
class Fix:
    """A change that was re-parsed and gives a clean parse: ``change`` is ``{"fidelity": …}``,
    ``{"overrides": {path: value}}`` (analysis field paths, for the Overrides page / ``--override``) or
    ``{"request": {key: value}}``; ``message`` the OpenAI message it gives."""

    kind: FixKind
    description: str
    change: dict[str, Any]
    message: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"kind": self.kind.value, "description": self.description, "change": self.change,
                "message": self.message}


@dataclass
class StopPoint:
    """Where the main parse could go no further: ``pos`` in ``generation_prompt + output``, ``output_pos`` in
    the output, ``expected`` (readable alternatives), ``found`` (the text there), ``path`` (rules open there)."""

    pos: int
    output_pos: int
    expected: list[str]
    found: str
    path: tuple[str, ...]

    def words(self) -> str:
        """``expected `a` or `b`; found `c``` (``found the end of the output`` at the end)."""
        exp = " or ".join(self.expected) if self.expected else "something else"
        found = "the end of the output" if not self.found else "`" + _visible(self.found) + "`"
        return f"expected {exp}; found {found}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (with ``words``)."""
        return {"pos": self.pos, "output_pos": self.output_pos, "expected": self.expected, "found": self.found,
                "path": list(self.path), "words": self.words()}


@dataclass
class Explanation:
    """Everything :func:`explain` found for one (template, request, output).

    ``text`` = ``generation_prompt + output``; spans index it. ``entry``: the parse that made the message
    (``main`` = the format accounted for everything). ``clean``: main entry, not truncated. ``consistency``:
    ``""`` when the spans cover the text once and rebuild the message, else what is wrong (a bug of ours).
    ``other``: the message at the other fidelity when it differs. ``found_by``: for each analysis field a
    marker span matched, the comparison of the analysis that found it (``"T1: title"``).
    """

    template: str
    route: str
    fidelity: str
    request: dict[str, Any]
    output: str
    generation_prompt: str
    text: str
    entry: str
    message: dict[str, Any]
    spans: list[Span]
    stop: StopPoint | None = None
    truncated: StopPoint | None = None
    findings: list[Finding] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    other: dict[str, Any] | None = None
    consistency: str = ""
    notes: list[str] = field(default_factory=list)
    found_by: dict[str, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        """The main parse accounted for the whole text and nothing was cut off."""
        return self.entry == MAIN and self.stop is None and self.truncated is None

    @property
    def causes(self) -> list[str]:
        """Names (``Cause`` enum names) of the findings, in order."""
        return [f.cause.name for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``--json``)."""
        return {"template": self.template, "route": self.route, "fidelity": self.fidelity, "entry": self.entry,
                "clean": self.clean, "generation_prompt": self.generation_prompt, "message": self.message,
                "spans": [s.to_json() for s in self.spans],
                "stop": self.stop.to_json() if self.stop else None,
                "truncated": self.truncated.to_json() if self.truncated else None,
                "findings": [f.to_json() for f in self.findings], "fixes": [f.to_json() for f in self.fixes],
                "other_fidelity_message": self.other, "consistency": self.consistency, "notes": self.notes,
                "found_by": self.found_by}


def _visible(s: str) -> str:
    """Whitespace and control characters visible (``core.cli.visible``), and invisible format characters
    (bidi overrides, zero-width, BOM, soft hyphen: Unicode category Cf) shown as ``⟨U+XXXX⟩``."""
    from ..cli import visible

    return visible(show_invisible(s))


def show_invisible(s: str) -> str:
    """``s`` with every Unicode format character (category Cf: bidi controls, zero-width characters, BOM, soft
    hyphen) replaced by ``⟨U+XXXX⟩``, so text from templates and models cannot hide or reorder what is shown."""
    import unicodedata

    if s.isascii():
        return s
    return "".join(f"⟨U+{ord(ch):04X}⟩" if unicodedata.category(ch) == "Cf" else ch for ch in s)


def _stop_point(text: str, gp: int, pos: int, expected: list, path: tuple) -> StopPoint:
    words: list[str] = []
    for e in expected:
        w = e.words() if hasattr(e, "words") else str(e)
        if w not in words:
            words.append(w)
    found = text[pos:pos + 40]
    m = _TOKEN.match(found) or re.match(r'"[^"\n]{0,38}"', found) or re.match(r"[\w.:\-]{2,40}", found)
    if m:
        found = m.group(0)
    elif "\n" in found[1:]:
        found = found[:found.index("\n", 1)]
    return StopPoint(pos, pos - gp, words, found, path)


# ------------------------------------------------------------------------------------------------- parsing


@dataclass
class _Setup:
    template: Any
    request: ChatRequest
    fidelity: str
    overrides: dict[str, Any]
    disabled: tuple[str, ...] = ()
    meter: "_Meter | None" = None    # shared by every setup derived with dataclasses.replace


REPARSE_CHARS = 1024 * 1024
"""Characters explain may re-parse beyond its main parse (the other fidelity, candidate fixes, inserted openers:
each re-parses the whole output): a 256 KB hostile output (a flood of tool calls) took 8-13 s when every
candidate re-parsed it. Past this the remaining re-parses are left out and the explanation says so."""


class ReparseLimit(Exception):
    """A re-parse left out (:data:`REPARSE_CHARS` spent, or the analysis budget): callers of :func:`_trace` treat
    it as a candidate that could not be checked."""


@dataclass
class _Meter:
    """Characters re-parsed so far (``spent``) against ``cap``; ``skipped``: re-parses left out."""

    cap: int
    spent: int = 0
    skipped: int = 0

    def charge(self, n: int) -> None:
        from ..budgets import over_budget

        if self.spent + n > self.cap or over_budget(mark=False):
            self.skipped += 1
            raise ReparseLimit(f"re-parse of {n:,} characters left out")
        self.spent += n


def _build(setup: _Setup) -> Any:
    from ..chat.pipeline import build_chat_parser, cached_analysis

    report = None
    if setup.overrides or setup.disabled:
        from ..analysis import reapply

        report = reapply(cached_analysis(setup.template, setup.fidelity), overrides=setup.overrides or None,
                         disabled_workarounds=setup.disabled)
    return build_chat_parser(setup.template, setup.request, report=report, fidelity=setup.fidelity)


def _trace(setup: _Setup, output: str) -> tuple[Any, ParseTrace]:
    """The parser bundle and full trace (spans, stop point) of ``output`` under ``setup``; charged to the setup's
    meter (raises :class:`ReparseLimit` past it)."""
    if setup.meter is not None:
        setup.meter.charge(len(output))
    bundle = _build(setup)
    return bundle, trace_parse(bundle.parser, output, bundle.report)


def _clean(tr: ParseTrace) -> bool:
    return tr.entry == MAIN and tr.stop < 0 and tr.truncated_at < 0


def explain(template: Any, request: ChatRequest, output: str, *, fidelity: str = "llama.cpp",
            overrides: dict[str, Any] | None = None, disabled_workarounds: tuple[str, ...] = (),
            fixes: bool = True) -> Explanation:
    """Explain how ``template``'s parser (for ``request``, at ``fidelity``, with analysis ``overrides`` and
    ``disabled_workarounds`` as on the Overrides page) parses
    ``output``: labelled spans, the stop point, the causes with evidence and (``fixes``) the candidate changes
    that re-parse clean. Raises what :func:`core.chat.pipeline.build_chat_parser` raises for a bad request or
    template (``RequestError``, ``TemplateRenderError``, ``AnalysisError``, each one line); never raises on
    the output.

    Runs under the analysis budget (:mod:`core.budgets`: the prompt render and any analysis; raises
    :class:`~core.errors.AnalysisError` naming the limit when it runs out). Its work is linear in the output:
    one traced parse, then re-parses for the causes and fixes up to :data:`REPARSE_CHARS` characters in all
    (those left out are named in ``notes``)."""
    import gc

    # a large output's trace allocates millions of small acyclic objects (parse nodes, spans); the cyclic
    # collector's generation scans over them cost as much again as the parse (13 -> 7 CPU s for 100,000 calls)
    pause_gc = len(output) > GC_PAUSE_CHARS and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        return _explain_budgeted(template, request, output, fidelity, overrides, disabled_workarounds, fixes)
    finally:
        if pause_gc:
            gc.enable()


GC_PAUSE_CHARS = 64 * 1024
"""Outputs longer than this are explained with the cyclic garbage collector paused (see :func:`explain`)."""


def _explain_budgeted(template: Any, request: ChatRequest, output: str, fidelity: str,
                      overrides: dict[str, Any] | None, disabled_workarounds: tuple[str, ...], fixes: bool
                      ) -> Explanation:
    import time

    from ..budgets import command_budget
    from ..templating import analysis_budget

    setup = _Setup(template, request, fidelity, dict(overrides or {}), tuple(disabled_workarounds or ()))
    with command_budget("explain", getattr(template, "name", "template")) as budget:
        bundle, tr = _trace(setup, output)
    setup.meter = _Meter(REPARSE_CHARS)
    # the causes and fixes run in what is left of the budget: a render it cuts there (a candidate's prompt) is a
    # candidate left out, not a failed explanation
    left = None if budget is None else max(0.0, budget.until - time.monotonic())
    with analysis_budget(left):
        return _explain(setup, bundle, tr, output, fixes)


def _explain(setup: _Setup, bundle: Any, tr: ParseTrace, output: str, fixes: bool) -> Explanation:
    template, request, fidelity = setup.template, setup.request, setup.fidelity
    route = bundle.format if bundle.format != "peg-native" else "auto-parser"
    ex = Explanation(template=getattr(template, "name", "template"), route=route, fidelity=fidelity,
                     request=_request_json(request), output=output, generation_prompt=tr.text[:tr.gp_len],
                     text=tr.text, entry=tr.entry, message=tr.message.to_openai(), spans=tr.spans,
                     notes=list(getattr(bundle.parser, "notes", []) or []) + list(bundle.notes))
    # repairs of improved fidelity (issue 10) expose (name, [start, end) of the output) on the parsed message
    fired = getattr(tr.message, "repairs", None) or []
    if fired:
        from .spans import attach_repairs

        ex.spans = attach_repairs(ex.spans, [_repair_range(r) for r in fired], tr.gp_len)
        ex.spans = _unparsed_as_content(ex.spans, fired, tr.gp_len)
    ex.found_by = _found_by(bundle.report, tr.spans)
    cover = check_cover(ex.spans, tr.text)
    rebuilt = rebuild_message(ex.spans, getattr(bundle.parser, "drop_blank_reasoning", True))
    if cover or not same_message(rebuilt, tr.message):
        ex.consistency = cover or "the labelled spans do not rebuild the message"
    if tr.stop >= 0:
        ex.stop = _stop_point(tr.text, tr.gp_len, tr.stop, tr.furthest.expected, tr.furthest.path)
    if tr.truncated_at >= 0:
        ex.truncated = _stop_point(tr.text, tr.gp_len, tr.truncated_at, tr.truncated_expect.expected,
                                   tr.truncated_expect.path)
    from .causes import classify

    ex.findings = classify(setup, bundle, tr, ex)
    if fixes:
        from .fixes import candidate_fixes

        ex.fixes = candidate_fixes(setup, bundle, tr, ex)
    if setup.meter.skipped:
        ex.notes.append(f"{setup.meter.skipped} re-parse(s) for causes and fixes left out: the output is "
                        f"{len(output):,} characters and explain re-parses at most {REPARSE_CHARS:,} in all, within "
                        "the analysis budget (limit: explain re-parses)")
    return ex


def _found_by(report: Any, spans: list[Span]) -> dict[str, str]:
    """Field path -> ``"<comparison id>: <title>"`` of the comparison that set it, for the marker spans."""
    comps = getattr(report, "comparisons", None) or []
    out: dict[str, str] = {}
    for s in spans:
        if s.label != SpanLabel.MARKER or not s.field:
            continue
        for path in s.field.split(" / "):
            if path in out:
                continue
            for c in comps:
                if path in (getattr(c, "found", None) or {}):
                    out[path] = f"{c.id}: {c.title}"
                    break
    return out


def _request_json(request: ChatRequest) -> dict[str, Any]:
    """The request as a ``reference/cases.jsonl`` row's request keys."""
    def val(v: Any) -> Any:
        return v.value if isinstance(v, enum.Enum) else v
    cont = val(request.continue_final_message)
    return {"messages": request.messages, "tools": request.tools or None, "tool_choice": val(request.tool_choice),
            "parallel_tool_calls": request.parallel_tool_calls, "reasoning_format": val(request.reasoning_format),
            "enable_thinking": request.enable_thinking, "add_generation_prompt": request.add_generation_prompt,
            "continue_final_message": cont if cont not in ("", "none") else None,
            "json_schema": request.json_schema}


def message_of(setup: _Setup, output: str) -> tuple[AssistantMessage, bool]:
    """The message of ``output`` under ``setup`` and whether the parse is clean (for fixes and causes). For a
    PEG parser without the spans (what :func:`_trace` gives: the parse is clean when the main root accounts
    for the whole text and leaves no call or reasoning block open); charged to the meter like a trace."""
    from .trace_routes import peg_message

    if setup.meter is not None:
        setup.meter.charge(len(output))
    bundle = _build(setup)
    got = peg_message(bundle.parser, output)
    if got is None:
        tr = trace_parse(bundle.parser, output, bundle.report)
        return tr.message, _clean(tr)
    return got


def dumps(ex: Explanation) -> str:
    """``ex`` as indented JSON."""
    return json.dumps(ex.to_json(), ensure_ascii=False, indent=2)


def _unparsed_as_content(spans: list[Span], fired: list[Any], offset: int) -> list[Span]:
    """The lossless contract appends the text a final parse could not place to ``content`` (an ``unparsed-text``
    record with why ``content``, from its start to the end of the output): every span it covers is
    ``kept_as_content`` (:func:`core.explain.spans.rebuild_message` appends them as the contract does), and
    those the format had ignored are labelled unparsed, so the spans still rebuild the message."""
    ranges = [(r.start + offset, r.end + offset) for r in fired
              if getattr(r, "name", "") == UNPARSED_TEXT and getattr(r, "why", "") == "content"]
    if not ranges:
        return spans
    out = []
    for s in spans:
        if not s.in_prompt and any(a <= s.start and s.end <= b for a, b in ranges):
            s = replace(s, kept_as_content=True,
                        label=SpanLabel.UNPARSED if s.label == SpanLabel.IGNORED else s.label)
        out.append(s)
    return out


def _repair_range(fired: Any) -> tuple[str, tuple[int, int]]:
    """``(name, (start, end))`` of a fired repair: a :class:`core.chat.repairs.FiredRepair` (``name``, ``start``,
    ``end`` of the raw output) or already such a pair."""
    if hasattr(fired, "name") and hasattr(fired, "start"):
        return fired.name, (fired.start, fired.end)
    name, rng = fired
    return name, tuple(rng)
