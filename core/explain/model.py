"""The model explain's modules share: the result classes (:class:`Explanation` and what it holds), the setup of
one explanation (:class:`Setup`: template, request, fidelity, overrides) with the parse it traces, and the text
helpers the causes and fixes both read. :mod:`core.explain.explain` assembles an explanation from them;
:mod:`core.explain.causes` and :mod:`core.explain.fixes` import only this module, not each other."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..analysis import reapply
from ..jinja.limits import over_budget
from ..chat.generator import (MAIN_REST, PARTIAL_PREFIX, PENDING_HEADER, PREFIX_REST, RECOVER_CONTENT,
                              RECOVER_TRAILING)
from ..chat.message import AssistantMessage
from ..chat.pipeline import build_chat_parser, build_chat_parser_or_content, cached_analysis
from ..chat.request import ChatRequest
from ..errors import TemplateRenderError
from ..escapes import code_span, escape_invisible
from ..inputs import visible
from .spans import Span
from .trace_routes import MAIN, ParseTrace, peg_message, trace_parse
from ..analysis.dialect import llama_dialect_failure
from ..chat.conformance import repairs_off as conformance_repairs_off
from ..chat.repairs import REPAIRS_BY_NAME, UnknownRepairError

WS = " \t\n\v\f\r"
_CALLED_IDENT = re.compile(r"[A-Za-z_][\w.\-]{0,63}")
# marker-like tokens: <tag>, </tag>, <|x|>, [UPPER_CASE], <｜x｜>
MARKER_TOKEN = re.compile(r"<\|[^|<>\n]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>|</?[A-Za-z_][\w:.\-]{0,40}(?:=|>)"
                          r"|\[[A-Z_]{3,30}\]")


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


class FindingRole(str, enum.Enum):
    """How an older cause (the stop point's reading, :mod:`core.explain.causes`) stands to the triage's mistake:
    the mistake leads; the causes are the answer only when the triage names none (issue 26: one voice)."""

    ANSWER = "answer"                   # the triage names no mistake: the causes are the explanation
    AGREES = "agrees"                   # it names the triage's mistake or a part of it
    STOP_POINT_ALONE = "stop point alone"   # it names another cause: what the stop point alone suggests


# the triage's mistakes (``Mistake`` names) each cause agrees with; the two modules name the same fault from two
# readings (the stop point, the whole output), so a cause outside its set contradicts the mistake on screen
_CALL_MARKUP = frozenset({"OMITTED_OPENER", "OMITTED_MARKER", "OMITTED_CLOSER", "FOREIGN_WRAPPER",
                          "CALL_OUTSIDE_SECTION", "TEMPLATE_MODEL_MISMATCH", "SPECIAL_TOKENS_STRIPPED",
                          "FORMAT_NOT_FOUND", "ANALYSIS_MISREAD", "TRAILING_TEXT", "LEADING_TEXT", "FIELD_ALIAS"})
_AGREES: dict[str, frozenset[str]] = {
    "TRUNCATED": frozenset({"CUT_SHORT", "STOP_STRING_STRIPPED"}),
    "MISSING_OPENER": frozenset({"OMITTED_OPENER", "CALL_OUTSIDE_SECTION", "SPECIAL_TOKENS_STRIPPED"}),
    "OTHER_MARKER": _CALL_MARKUP - {"FORMAT_NOT_FOUND", "ANALYSIS_MISREAD", "TRAILING_TEXT", "LEADING_TEXT",
                                    "FIELD_ALIAS"},
    "OTHER_JSON_SHAPE": frozenset({"FIELD_ALIAS", "FOREIGN_WRAPPER", "DOUBLE_ENCODED_ARGUMENTS",
                                   "TEMPLATE_MODEL_MISMATCH"}),
    "WRONG_CALL_ID": frozenset({"CALL_ID_SHAPE"}),
    "UNKNOWN_TOOL": frozenset({"UNKNOWN_TOOL"}),
    "SCHEMA_MISMATCH": frozenset({"MISSING_REQUIRED", "UNKNOWN_PARAMETER", "TYPE_MISMATCH",
                                  "DOUBLE_ENCODED_ARGUMENTS"}),
    "REASONING_PREFILL": frozenset({"REOPENED_REASONING", "REASONING_NOT_CLOSED", "REASONING_SETTING"}),
    "SPECIAL_TOKENS_STRIPPED": frozenset({"SPECIAL_TOKENS_STRIPPED"}),
    "NO_TOOL_FORMAT": frozenset({"FORMAT_NOT_FOUND", "ANALYSIS_MISREAD", "TEMPLATE_MODEL_MISMATCH"}),
    "TOOLS_NOT_REQUESTED": frozenset({"TOOLS_NOT_SENT"}),
    "PARALLEL_NOT_REQUESTED": frozenset({"PARALLEL_NOT_REQUESTED"}),
    "DRIFT": _CALL_MARKUP,
}


def finding_role(cause: "Cause", mistake: str) -> FindingRole:
    """The role of a finding of ``cause`` beside the triage's mistake named ``mistake`` (``"NONE"`` or ``""``: the
    triage names none). The fidelity difference is a fact of the two parsers, never a rival reading."""
    if mistake in ("", "NONE"):
        return FindingRole.ANSWER
    if cause.name == "FIDELITY_DIFFERS" or mistake in _AGREES.get(cause.name, frozenset()):
        return FindingRole.AGREES
    return FindingRole.STOP_POINT_ALONE


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
    gives_expected: bool | None = None      # None: no expected message was given

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"kind": self.kind.value, "description": self.description, "change": self.change,
                "message": self.message, "gives_expected": self.gives_expected}


@dataclass
class StopPoint:
    """Where the main parse could go no further: ``pos`` in ``generation_prompt + output``, ``output_pos`` in
    the output, ``expected`` (readable alternatives), ``found`` (the text there), ``path`` (rules open there),
    ``literals`` (the expected literals as the parser holds them: ``expected`` is their Markdown)."""

    pos: int
    output_pos: int
    expected: list[str]
    found: str
    path: tuple[str, ...]
    literals: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()     # ``expected`` as the words show it: a literal in the found text's one escape

    def words(self) -> str:
        """``expected `a` or `b`; found `c``` (``found the end of the output`` at the end). A literal is shown as the
        found text is (a line break ``↵``, a space ``␣``), so a line break the parser wanted and the two characters
        ``\\n`` the output wrote in its place do not read the same."""
        alts = self.shown or tuple(self.expected)
        exp = " or ".join(alts) if alts else "something else"
        found = "the end of the output" if not self.found else code_span(visible_text(self.found))
        return f"expected {exp}; found {found}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (with ``words``)."""
        return {"pos": self.pos, "output_pos": self.output_pos, "expected": self.expected, "found": self.found,
                "path": list(self.path), "words": self.words()}


def part_of(path: Any) -> str:
    """The part of the output a parser rule path (a stop point's, a cut's) is in, in words: ``a tool call``, ``the
    reasoning`` or ``the format`` (the rule names themselves are the parser's)."""
    rules = [r for r in path or () if r]
    if any(r.startswith("tool") for r in rules):
        return "a tool call"
    if any("reason" in r or "think" in r for r in rules):
        return "the reasoning"
    return "the format"


# the parse that made the message (the parser's entry names, ``core.chat.generator``) in the field's words
ENTRY_WORDS = {
    MAIN: "stopped early: the format does not account for every character",
    "main+ignored": "the text after the end of the format dropped, as llama.cpp drops it",
    RECOVER_TRAILING: "recovered: the text the format does not allow kept as content",
    MAIN_REST: "recovered: the text from where the parse stopped kept as content",
    RECOVER_CONTENT: "recovered: everything after the reasoning kept as content",
    PREFIX_REST: "recovered: the longest start that parses, the rest kept as content",
    PARTIAL_PREFIX: "recovered: the message of the longest start that parses",
    "raw": "not parsed: the whole output kept as content",
    "no-parser": "not parsed: llama.cpp serves no parser for this template",
    PENDING_HEADER: "incomplete: the output is still a turn header",
}


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
    triage: Any = None      # core.explain.triage.Triage (the mistake, nearest output, ranked fixes)
    only_repairs: list[str] | None = None   # improved fidelity with only these repairs on (a repair switched alone)
    overrides: dict[str, Any] = field(default_factory=dict)     # the analysis overrides it was parsed with
    disabled_workarounds: list[str] = field(default_factory=list)   # and the workarounds switched off
    # a template llama.cpp's Jinja dialect cannot render (no parser here): the explanation at improved fidelity,
    # where improvement transformers-dialect renders it; the triage reads the model's mistake there
    in_transformers_dialect: "Explanation | None" = None
    # with an expected message: None when the parse gives it, else the first difference (compare_messages' words)
    expected_difference: str | None = None
    expect_given: bool = False

    @property
    def clean(self) -> bool:
        """The main parse accounted for the whole text and nothing was cut off."""
        return self.entry == MAIN and self.stop is None and self.truncated is None

    @property
    def blank(self) -> bool:
        """The model wrote nothing (the output is empty or only white space): no structure was entered or cut, whatever
        the parser would accept next."""
        return not self.output.strip(" \t\r\n")

    @property
    def suspicious(self) -> bool:
        """A clean parse in which the triage still names a mistake (marker-like text left in the content, a call
        dropped): it is not called clean (issue 26)."""
        return self.clean and self.triage is not None and self.triage.mistake.name != "NONE"

    @property
    def verdict(self) -> str:
        """What the text view and the page say of the parse: ``"clean"``, ``"clean but suspicious"``, or the entry
        that made the message (``"recover-trailing"``, ``"no-parser"``, …)."""
        if not self.clean:
            return self.entry
        return "clean but suspicious" if self.suspicious else "clean"

    @property
    def mistake(self) -> str:
        """The triage's mistake (``Mistake`` name), ``""`` when there is no triage or it names none."""
        name = getattr(getattr(self.triage, "mistake", None), "name", "")
        return "" if name == "NONE" else name

    @property
    def finding_roles(self) -> list[FindingRole]:
        """Each finding's role beside the triage's mistake (:func:`finding_role`), in order."""
        return [finding_role(f.cause, self.mistake) for f in self.findings]

    def answer(self) -> dict[str, Any]:
        """What the explanation answers, and which reading decided it: ``from`` ``"triage"`` (its mistake leads;
        the findings agree with it or are what the stop point alone suggests), ``"causes"`` (the triage names no
        mistake: the findings are the answer) or ``"none"`` (nothing to explain); ``name`` and ``text`` of it."""
        if self.mistake or (self.blank and self.triage is not None):
            return {"from": "triage", "name": self.triage.mistake.name, "text": self.triage.mistake.value,
                    "sentence": self.triage.sentence}
        if self.findings:
            first = self.findings[0].cause
            return {"from": "causes", "name": first.name, "text": first.value, "sentence": ""}
        return {"from": "none", "name": "", "text": "", "sentence": ""}

    @property
    def verdict_text(self) -> str:
        """The verdict in the field's words, as the text view and the page say it (``verdict`` names the parser's
        entry: ``prefix+rest``, ``main`` for a cut output, … are internal names)."""
        if self.clean:
            return self.verdict
        if self.entry == MAIN and self.truncated is not None:
            return "incomplete: the output is empty" if self.blank else \
                f"incomplete: the output ends inside {part_of(self.truncated.path)}"
        return ENTRY_WORDS.get(self.entry, f"recovered ({self.entry})")

    @property
    def causes(self) -> list[str]:
        """Names (``Cause`` enum names) of the findings, in order."""
        return [f.cause.name for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``--json``). ``clean`` is the verdict the text view gives: false for a parse that
        accounted for everything but is ``suspicious``; ``parse_clean`` is the parse alone (main entry, nothing
        cut); ``verdict`` names the parser's entry, ``verdict_text`` says it in words. The answer and the triage
        (its mistake, nearest-output diff and ranked fixes) come first, as in the text view and on the page."""
        return {"template": self.template, "route": self.route, "fidelity": self.fidelity,
                "only_repairs": self.only_repairs, "entry": self.entry,
                "clean": self.clean and not self.suspicious, "suspicious": self.suspicious,
                "parse_clean": self.clean, "verdict": self.verdict, "verdict_text": self.verdict_text,
                "answer": self.answer(), "triage": self.triage.to_json() if self.triage is not None else None,
                "generation_prompt": self.generation_prompt, "message": self.message,
                "spans": [s.to_json() for s in self.spans],
                "stop": self.stop.to_json() if self.stop else None,
                "truncated": self.truncated.to_json() if self.truncated else None,
                "findings": [dict(f.to_json(), role=r.value) for f, r in zip(self.findings, self.finding_roles)],
                "fixes": [f.to_json() for f in self.fixes],
                "other_fidelity_message": self.other, "consistency": self.consistency, "notes": self.notes,
                "found_by": self.found_by,
                "gives_expected": (self.expected_difference is None) if self.expect_given else None,
                "expected_difference": self.expected_difference}


def visible_text(s: str) -> str:
    """Whitespace visible and every invisible character escaped (``core.inputs.visible``, :mod:`core.escapes`):
    bidi overrides, zero-width characters, BOM, soft hyphen, controls."""
    return visible(s)


def show_invisible(s: str) -> str:
    """``s`` with every invisible character but tab and newline written as its escape (``\\u202e``,
    :mod:`core.escapes`), so text from templates and models cannot hide or reorder what is shown."""
    return escape_invisible(s)


# a word at the stop as written, invisible format characters included (`get_\u200bweather` is shown whole, escaped,
# not cut at `get_`)
_FOUND_WORD = re.compile(r"(?:[\w.:\-]|[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]){2,40}")


def stop_point(text: str, gp: int, pos: int, expected: list, path: tuple) -> StopPoint:
    """The :class:`StopPoint` at ``pos`` of ``text`` (``gp``: the generation prompt's length), its expected
    alternatives in words and the token found there."""
    words: list[str] = []
    literals: list[str] = []
    shown: list[str] = []
    for e in expected:
        w = e.words() if hasattr(e, "words") else str(e)
        if w not in words:
            words.append(w)
            if getattr(e, "kind", None) == "literal":
                literals.append(e.text)
                shown.append(code_span(visible_text(e.text)))
            else:
                shown.append(w)
    found = text[pos:pos + 40]
    m = MARKER_TOKEN.match(found) or re.match(r'"[^"\n]{0,38}"', found) or re.match(_FOUND_WORD, found)
    if m:
        found = m.group(0)
    elif "\n" in found[1:]:
        found = found[:found.index("\n", 1)]
    return StopPoint(pos, pos - gp, words, found, path, tuple(literals), tuple(shown))


# ------------------------------------------------------------------------------------------------- parsing


@dataclass
class Setup:
    """One explanation's inputs: the template, the request, the fidelity, analysis overrides and workarounds
    switched off (as on the Overrides page); causes and fixes re-parse with changed copies of it."""

    template: Any
    request: ChatRequest
    fidelity: str
    overrides: dict[str, Any]
    disabled: tuple[str, ...] = ()
    meter: "Meter | None" = None    # shared by every setup derived with dataclasses.replace
    only_repairs: tuple[str, ...] | None = None   # improved fidelity with only these tolerance repairs on


REPARSE_CHARS = 1024 * 1024
"""Characters explain may re-parse beyond its main parse (the other fidelity, candidate fixes, inserted openers:
each re-parses the whole output): a 256 KB hostile output (a flood of tool calls) took 8-13 s when every
candidate re-parsed it. Past this the remaining re-parses are left out and the explanation says so."""


class ReparseLimit(Exception):
    """A re-parse left out (:data:`REPARSE_CHARS` spent, or the analysis budget): callers of :func:`trace` treat
    it as a candidate that could not be checked."""


@dataclass
class Meter:
    """Characters re-parsed so far (``spent``) against ``cap``; ``skipped``: re-parses left out."""

    cap: int
    spent: int = 0
    skipped: int = 0

    def charge(self, n: int) -> None:
        """Count ``n`` more characters, or raise :class:`ReparseLimit` past the cap or the analysis budget."""
        if self.spent + n > self.cap or over_budget(mark=False):
            self.skipped += 1
            raise ReparseLimit(f"re-parse of {n:,} characters left out")
        self.spent += n


def build_bundle(setup: Setup) -> Any:
    """The parser bundle of ``setup`` (:func:`core.chat.pipeline.build_chat_parser`, overrides applied)."""
    report = None
    if setup.overrides or setup.disabled:
        report = reapply(cached_analysis(setup.template, setup.fidelity), overrides=setup.overrides or None,
                         disabled_workarounds=setup.disabled)
    try:
        return build_chat_parser(setup.template, setup.request, report=report, fidelity=setup.fidelity,
                                 disabled_repairs=repairs_off(setup.only_repairs) if setup.fidelity == "improved"
                                 else ())
    except TemplateRenderError:
        why = dialect_failure(setup)
        if why is None:
            raise
        # as llama.cpp: no parser; the output is the content, and the note says what would render it
        bundle = build_chat_parser_or_content(setup.template, setup.request, fidelity=setup.fidelity)
        bundle.notes = [dialect_line(why)]
        return bundle


def dialect_failure(setup: Setup) -> str | None:
    """At llama.cpp fidelity, the llama.cpp dialect's render error of a template that renders only in the
    transformers dialect (:mod:`core.analysis.dialect`); None otherwise."""
    if setup.fidelity == "improved":
        return None
    return llama_dialect_failure(setup.template)


def dialect_line(why: str) -> str:
    """The one line explain gives for a template llama.cpp's Jinja dialect cannot render."""
    return (f"the template does not render in llama.cpp's Jinja dialect ({why}), so llama.cpp serves no parser "
            "for it; it renders in the transformers dialect — improved fidelity (--improved, improvement "
            "transformers-dialect) parses with it")


def repairs_off(only: tuple[str, ...] | None) -> tuple[str, ...]:
    """The tolerance repairs to switch off so that only ``only`` stay on (``None``: switch none off). Raises
    :class:`core.chat.repairs.UnknownRepairError` (one line, naming the known ones) for an unknown name."""
    if only is None:
        return ()
    unknown = sorted(set(only) - set(REPAIRS_BY_NAME))
    if unknown:
        raise UnknownRepairError(f"unknown repair {unknown[0]!r}; known: {', '.join(REPAIRS_BY_NAME)}")
    return conformance_repairs_off(only)


def trace(setup: Setup, output: str) -> tuple[Any, ParseTrace]:
    """The parser bundle and full trace (spans, stop point) of ``output`` under ``setup``; charged to the setup's
    meter (raises :class:`ReparseLimit` past it)."""
    if setup.meter is not None:
        setup.meter.charge(len(output))
    bundle = build_bundle(setup)
    return bundle, trace_parse(bundle.parser, output, bundle.report)


def is_clean(tr: ParseTrace) -> bool:
    """The main parse accounted for the whole text and nothing was cut off."""
    return tr.entry == MAIN and tr.stop < 0 and tr.truncated_at < 0


def message_of(setup: Setup, output: str) -> tuple[AssistantMessage, bool]:
    """The message of ``output`` under ``setup`` and whether the parse is clean (for fixes and causes). For a
    PEG parser without the spans (what :func:`trace` gives: the parse is clean when the main root accounts
    for the whole text and leaves no call or reasoning block open); charged to the meter like a trace."""
    if setup.meter is not None:
        setup.meter.charge(len(output))
    bundle = build_bundle(setup)
    got = peg_message(bundle.parser, output)
    if got is None:
        tr = trace_parse(bundle.parser, output, bundle.report)
        return tr.message, is_clean(tr)
    return got


def reasoning_markers(bundle: Any) -> tuple[str, list[str]]:
    """(reasoning start, [reasoning ends]) of the analysis or the handler, trimmed; each end once, in the handler's
    order (a handler lists `</think>` and `</think>\n`, one marker once trimmed)."""
    rep = getattr(bundle, "report", None)
    if rep is not None and bundle.format == "peg-native":
        r = rep.analysis.reasoning
        return r.start.strip(WS), [r.end.strip(WS)] if r.end.strip(WS) else []
    p = bundle.parser
    ends = (e.strip(WS) for e in getattr(p, "thinking_end_tags", []) or [])
    return (getattr(p, "thinking_start_tag", "") or "").strip(WS), list(dict.fromkeys(e for e in ends if e))


def tool_stub(name: str) -> dict[str, Any]:
    """A function tool named ``name`` with no parameters, as a fix adds it to the request."""
    return {"type": "function", "function": {"name": name, "description": "added by explain",
                                             "parameters": {"type": "object", "properties": {}}}}


def called_names(ex: Any, req: Any) -> list[str]:
    """Identifiers that may be the called tool's name: the one at the stop point, then the words right after
    each marker-like token of the output (and JSON ``"name": "…"`` values)."""
    names: list[str] = []
    if ex.stop is not None:
        m = _CALLED_IDENT.match(ex.text[ex.stop.pos:])
        if m:
            names.append(m.group(0))
    for m in re.finditer(r'"name"\s*:\s*"([^"]{1,64})"', ex.output):
        names.append(m.group(1))
    for t in MARKER_TOKEN.finditer(ex.output):
        m = _CALLED_IDENT.match(ex.output, t.end()) or _CALLED_IDENT.match(ex.output.lstrip(WS)[:0] + ex.output,
                                                                          t.end() + 1)
        if m:
            names.append(m.group(0))
    have = {t["function"]["name"] for t in req.tools or [] if isinstance(t, dict) and "function" in t}
    out: list[str] = []
    for n in names:
        if n not in out and n not in have:
            out.append(n)
    return out


def required_of(params: Any) -> list[str]:
    """The names a tool's ``parameters`` schema lists in ``required`` — the string entries of a list, nothing else
    (the request's schema is untrusted: a number, an object or a string there is no parameter name)."""
    req = params.get("required") if isinstance(params, dict) else None
    return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


ARGUMENTS_KEYS = ("arguments", "parameters")
"""The JSON keys a call object holds its arguments under (OpenAI's and the Llama / Cohere spelling)."""
_DECODER = json.JSONDecoder()
_NON_OBJECT = ((bool, "a boolean"), (list, "a JSON array"), ((int, float), "a number"), (type(None), "null"))


def written_arguments_kind(output: str, name: str, keys: tuple[str, ...] = ARGUMENTS_KEYS, looks: int = 16) -> str:
    """What the model wrote as the arguments of its call to ``name`` when that is JSON but not an object (``"a
    JSON array"``, ``"a number"``, ``"a boolean"``, ``"null"``), else ``""``. A parser reads only an object there
    and shows the call with ``{}``: the call is then "missing" every required parameter, while the model's mistake
    is the type of the whole value. Looks at the first ``looks`` ``"KEY":`` of ``output`` (bounded work on a hostile
    output) whose value decodes, with the call's quoted name within 300 characters of it."""
    quoted = json.dumps(name)
    seen = 0
    for key in keys:
        at = 0
        needle = json.dumps(key)
        while seen < looks:
            at = output.find(needle, at)
            if at < 0:
                break
            seen += 1
            start = at
            at += len(needle)
            i = at
            while i < len(output) and output[i] in " \t\r\n":
                i += 1
            if i >= len(output) or output[i] != ":":
                continue
            i += 1
            while i < len(output) and output[i] in " \t\r\n":
                i += 1
            try:
                value, end = _DECODER.raw_decode(output, i)
            except (ValueError, RecursionError):
                continue
            kind = next((k for t, k in _NON_OBJECT if isinstance(value, t)), "")
            if kind and quoted in output[max(0, start - 300):end + 300]:
                return kind
    return ""


def tool_schemas(req: Any) -> dict[Any, Any]:
    """Each request tool's ``parameters`` by its name (a name given twice keeps the last; the request's tools are
    untrusted: entries that are no function are skipped)."""
    return {t["function"].get("name"): t["function"].get("parameters") for t in req.tools or []
            if isinstance(t, dict) and isinstance(t.get("function"), dict)}


def tool_parameters(req: Any, name: str) -> Any:
    """The ``parameters`` of the request's tool named ``name`` (the last one so named, as a lookup by name keeps it),
    None when no tool has that name."""
    return tool_schemas(req).get(name)


def properties_of(params: Any) -> dict[str, Any]:
    """A tool's ``parameters.properties`` when it is an object, else ``{}`` (the request's schema is untrusted)."""
    props = params.get("properties") if isinstance(params, dict) else None
    return props if isinstance(props, dict) else {}
