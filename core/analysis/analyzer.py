"""The differential analysis of a chat template: ``analyze`` → :class:`AnalysisReport`; ``reapply``.

Order (llama.cpp ``autoparser::analyze_template``, analysis notes §7): capabilities, reasoning (R1–R3),
content (C1), tools (T1–T7, when the template supports tool calls), assistant and user start markers,
preserved tokens, then the workarounds in list order; finally the caller's field overrides. The report
keeps every comparison (inputs, both renders, diff split, the fields it set) so the app and the CLI can
show how each marker was found, plus the result before workarounds (``raw``) so :func:`reapply` can
re-run workarounds and overrides without rendering anything.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

from ..errors import AnalysisError, AnalysisSettingError
from ..memo import MISSING, BoundedMemo
from ..digest import source_digest
from ..jinja.limits import analysis_budget, default_budget_s
from ..jinja.template import ChatTemplate
from .content import analyze_content
from .dialect import llama_dialect_failure, written_caps
from .fidelity import (CALL_TURN_CAPS, DEFAULT_FIDELITY, IMPROVEMENTS, INSTRUCTION_CALL_FORMAT, NULL_CONTENT_CALLS,
                       TRANSFORMERS_DIALECT, Fidelity, enabled_improvements, resolve_fidelity)
from .instructions import analyze_instructions
from ..diff import RenderParams, common_prefix_len, trim
from .generation_prompt import request_extra_context
from .preserved import MARKER_FIELDS, collect_preserved_tokens
from .reasoning import analyze_reasoning
from .result import (
    CallIdPosition,
    Caps,
    ContentMode,
    ReasoningMode,
    TemplateAnalysis,
    ToolFormat,
    ToolsAnalysis,
)
from .roles import detect_assistant_start, detect_user_start
from .caps import normalize_messages, probe_caps, probe_caps_report
from .routing import Route, detect_route
from .session import Comparison, ProbeSession
from .tools import analyze_tools
from .workarounds import WORKAROUNDS_BY_NAME, apply_workarounds
from . import probes as P

REFERENCE_TOOLS: list[dict[str, Any]] = [{
    "type": "function",
    "function": {
        "name": "special_function",
        "description": "I need an arg",
        "parameters": {"type": "object",
                       "properties": {"arg1": {"type": "integer", "description": "The arg."}},
                       "required": ["arg1"]},
    },
}]
"""The one tool of the reference's request (``tools/oracle/tools.json``), used for the report's generation
prompt."""

REFERENCE_MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Hello"}]


@dataclass
class AnalysisReport:
    """Everything one analysis found and how.

    ``analysis`` (final: after workarounds and overrides), ``raw`` (before workarounds and overrides, with
    the preserved tokens collected), ``comparisons`` (every :class:`Comparison`, in run order),
    ``workarounds_applied`` (names that fired), ``workaround_effects`` (name → fields set),
    ``overrides`` (the field overrides applied), ``disabled_workarounds``, ``probe_failures`` ("id: error"
    strings; a failed probe degrades only its part), ``generation_prompt`` (reference input: user "Hello"
    + one tool, add_generation_prompt and enable_thinking on; "" with ``generation_prompt_error`` set when
    that render fails), ``all_probes_failed`` (no probe rendered: the analysis is the default one),
    ``route``, ``template_name``,
    ``source`` (normalised source, for workaround triggers), ``render_count`` (renders actually executed),
    ``elapsed_ms``; ``fidelity`` (``"llama.cpp"``, the default, or ``"improved"`` — see
    :mod:`core.analysis.fidelity`), ``improvements`` (the improvements in force: none at llama.cpp fidelity),
    ``improvements_applied`` (those that changed something) with ``improvement_notes`` (name → remarks), ``reasoning_field``
    (improvement ``reasoning-field``: the message field the template reads reasoning from; "" when none is
    needed).
    """

    analysis: TemplateAnalysis
    raw: TemplateAnalysis
    comparisons: list[Comparison]
    workarounds_applied: list[str]
    probe_failures: list[str]
    generation_prompt: str
    route: Route
    template_name: str
    workaround_effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    disabled_workarounds: list[str] = field(default_factory=list)
    source: str = ""
    generation_prompt_error: str | None = None
    all_probes_failed: bool = False
    render_count: int = 0
    elapsed_ms: float = 0.0
    fidelity: str = DEFAULT_FIDELITY.value
    improvements: list[str] = field(default_factory=list)
    improvements_applied: list[str] = field(default_factory=list)
    improvement_notes: dict[str, list[str]] = field(default_factory=dict)
    reasoning_field: str = ""

    @property
    def improved(self) -> bool:
        """True when the report was made at ``improved`` fidelity."""
        return self.fidelity == Fidelity.IMPROVED.value

    def comparison(self, id_: str) -> Comparison | None:
        """The comparison with this id, or None."""
        return next((c for c in self.comparisons if c.id == id_), None)

    def to_json(self, *, comparisons: bool = True) -> dict[str, Any]:
        """``{"template", "route", "analysis", "generation_prompt", "workarounds_applied", …}``; the
        ``analysis`` object has the reference's field names."""
        d: dict[str, Any] = {
            "template": self.template_name,
            "route": self.route.kind,
            "handler": self.route.handler,
            "analysis": self.analysis.to_json(),
            "generation_prompt": self.generation_prompt,
            "generation_prompt_error": self.generation_prompt_error,
            "all_probes_failed": self.all_probes_failed,
            "workarounds_applied": list(self.workarounds_applied),
            "workaround_effects": self.workaround_effects,
            "overrides": self.overrides,
            "probe_failures": list(self.probe_failures),
            "fidelity": self.fidelity,
            "improvements": list(self.improvements),
            "improvements_applied": list(self.improvements_applied),
            "improvement_notes": {k: list(v) for k, v in self.improvement_notes.items()},
        }
        if self.reasoning_field:
            d["reasoning_field"] = self.reasoning_field
        if comparisons:
            d["comparisons"] = [c.to_json() for c in self.comparisons]
        return d


def analyze(template: ChatTemplate, *, disabled_workarounds: Iterable[str] = (),
            overrides: dict[str, Any] | None = None, caps: Caps | None = None, strict: bool = False,
            fidelity: Fidelity | str = DEFAULT_FIDELITY,
            disabled_improvements: Iterable[str] = (),
            budget_s: float | None = None) -> AnalysisReport:
    """Analyse ``template`` by differential rendering.

    ``budget_s``: wall-clock seconds for the whole analysis (every render of it; default
    :func:`~core.jinja.limits.default_budget_s`, i.e. ``$CTE_ANALYSIS_BUDGET_S`` or 5 s; ``0`` or
    a negative value: no budget). When it runs out the analysis stops and raises
    :class:`~core.errors.AnalysisError` naming the limit (nothing of the cut analysis is cached).

    ``fidelity``: ``"llama.cpp"`` (default) reproduces llama.cpp's analysis; ``"improved"`` applies the
    generic improvements of :data:`core.analysis.fidelity.IMPROVEMENTS` (minus ``disabled_improvements``)
    and the workarounds of origin ``"explorer"`` as well (:mod:`core.analysis.fidelity`).

    ``disabled_workarounds``: workaround names not to apply; ``overrides``: dotted field paths of
    ``TemplateAnalysis.to_json()`` → value (e.g. ``{"reasoning.start": "<think>"}``); ``caps``: use these
    capabilities instead of probing (for experiments). When every probe render fails the result is the
    default analysis (as llama.cpp's) with ``all_probes_failed`` set — or, with ``strict``, an
    :class:`~core.errors.AnalysisError`. Raises ``AnalysisError`` for an unknown override path / workaround
    name / bad enum value.
    """
    budget = default_budget_s() if budget_s is None else budget_s
    with analysis_budget(budget if budget > 0 else None) as b:
        report = _analyze(template, disabled_workarounds, overrides, caps, strict, fidelity, disabled_improvements)
    if b is not None and b.exceeded:
        _CAPS_CACHE.discard(source_digest(template.source))  # caps probed under a cut budget may be wrong
        raise AnalysisError(template.name, b.message())
    return report


def _analyze(template: ChatTemplate, disabled_workarounds: Iterable[str], overrides: dict[str, Any] | None,
             caps: Caps | None, strict: bool, fidelity: Fidelity | str,
             disabled_improvements: Iterable[str]) -> AnalysisReport:
    t0 = time.perf_counter()
    disabled = list(disabled_workarounds or ())
    _check_workaround_names(template.name, disabled)
    fid = resolve_fidelity(fidelity, template.name)
    improvements = enabled_improvements(fid, disabled_improvements, template.name)
    route = detect_route(template.source)
    failures: list[str] = []
    dialect_error = llama_dialect_failure(template) if TRANSFORMERS_DIALECT in improvements else None
    if dialect_error is not None:   # improvement transformers-dialect (core/analysis/dialect.py)
        # objects as objects while the caps are read: normalize_messages would turn them into text
        s = ProbeSession(template, caps or Caps(supports_object_arguments=True), normalize_messages,
                         engine="transformers", improvements=improvements)
        if caps is None:
            caps = s.caps = written_caps(s.render)
        s.note_improvement(TRANSFORMERS_DIALECT, f"llama.cpp's Jinja dialect cannot render the template "
                                                 f"({dialect_error}); rendered in the transformers dialect")
    else:
        if caps is None:
            try:
                caps = _probe_caps_cached(template)
            except Exception as e:  # probes swallow render errors; anything else must not abort the analysis
                failures.append(f"caps: capability probes failed ({e}); defaults used")
                caps = Caps()
        s = ProbeSession(template, caps, normalize_messages, improvements=improvements)
    probed_caps = caps
    if not caps.supports_tool_calls and (NULL_CONTENT_CALLS in improvements or CALL_TURN_CAPS in improvements):
        # improvements call-turn-caps (the caps probe failed to render, the call turn alone renders its call) and
        # null-content-calls (the call turn renders its call only with null content); found: parallel calls too
        found = _call_turn_renders(s, "") if CALL_TURN_CAPS in improvements and _tool_probes_failed(template) \
            else None
        if found is not None:
            s.note_improvement(CALL_TURN_CAPS, "the capability probe failed, but a call turn renders its call")
        elif NULL_CONTENT_CALLS in improvements:
            found = _call_turn_renders(s, None)
            if found is not None:
                s.null_call_content = True
                s.note_improvement(NULL_CONTENT_CALLS, "the template writes a call turn's calls only when its "
                                                       "content is null; the tool probes send null content")
        if found is not None:
            caps = replace(caps, supports_tool_calls=True, supports_parallel_tool_calls=found)
            s.caps = caps

    reasoning = analyze_reasoning(s, caps.supports_tool_calls)
    content = analyze_content(s, reasoning)
    tools = analyze_tools(s, caps, reasoning) if caps.supports_tool_calls else ToolsAnalysis()
    if probed_caps is not caps and _holds_probe_text(tools):
        # call-turn-caps / null-content-calls read markers made of the probe call's own text: not a format
        caps, tools = probed_caps, ToolsAnalysis()
        s.caps = caps
        s.null_call_content = False
        for name in (CALL_TURN_CAPS, NULL_CONTENT_CALLS):
            s.improvement_notes.pop(name, None)
    if INSTRUCTION_CALL_FORMAT in improvements and tools.format.mode == ToolFormat.NONE:
        analyze_instructions(s, tools)
    assistant_start = detect_assistant_start(s, reasoning)
    user_start = detect_user_start(s)

    raw = TemplateAnalysis(caps=replace(caps), user_start=user_start, assistant_start=assistant_start,
                           reasoning=reasoning, content=content, tools=tools)
    raw.preserved_tokens = collect_preserved_tokens(raw)

    all_failed = not any(c.ok for c in s.comparisons)
    if all_failed and strict:
        first = s.failures[0] if s.failures else "no probe ran"
        raise AnalysisError(template.name, f"the template fails to render every probe (first: {first})")

    gp, gp_error = _generation_prompt(s)
    report = AnalysisReport(
        analysis=raw, raw=raw, comparisons=s.comparisons, workarounds_applied=[],
        probe_failures=failures + s.failures, generation_prompt=gp, route=route, template_name=template.name,
        source=template.normalized_source, render_count=s.render_count, generation_prompt_error=gp_error,
        all_probes_failed=all_failed, fidelity=fid.value,
        improvements=[i.name for i in IMPROVEMENTS if i.name in improvements],
        improvements_applied=[i.name for i in IMPROVEMENTS if i.name in s.improvement_notes],
        improvement_notes={k: list(v) for k, v in s.improvement_notes.items()},
        reasoning_field=s.reasoning_field,
    )
    report = reapply(report, disabled_workarounds=disabled, overrides=overrides)
    report.elapsed_ms = (time.perf_counter() - t0) * 1000
    return report


_CAPS_CACHE = BoundedMemo("caps", max_entries=8192, max_bytes=16 * 2**20)


def _holds_probe_text(tools: ToolsAnalysis) -> bool:
    """Whether a marker of ``tools`` holds text of the probe call (its function or argument names)."""
    probe_words = (P.FUN_FIRST, P.FUN_SECOND, P.ARG_FIRST, P.ARG_SECOND)

    def strings(obj: Any) -> Iterable[str]:
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, dict):
            for v in obj.values():
                yield from strings(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                yield from strings(v)

    return any(w in text for text in strings(asdict(tools)) for w in probe_words)


def _tool_probes_failed(template: ChatTemplate) -> bool:
    """Improvement ``call-turn-caps``: whether every tool-call capability probe failed to render (rather than
    rendered without reading the calls)."""
    probes = [p for p in probe_caps_report(template).probes if p.id.startswith("tool_call_")]
    return bool(probes) and not any(p.success for p in probes)


def _call_turn_renders(s: ProbeSession, content: Any) -> bool | None:
    """Improvements ``call-turn-caps`` / ``null-content-calls``: None unless a user turn followed by a turn with
    one probe call and ``content`` ("" or None) renders the call's name (a render error: None); else whether two
    calls both render (parallel calls)."""
    def turn(*calls: dict[str, Any]) -> RenderParams:
        return RenderParams([P.user(), P.assistant(content, tool_calls=list(calls))], tools=P.tools())

    try:
        # the names may also be in the tool list the template writes: the call turn must add them
        base = s.render(RenderParams([P.user(), P.assistant()], tools=P.tools()))
        one = s.render(turn(P.first_call()))
        if one.count(P.FUN_FIRST) <= base.count(P.FUN_FIRST):
            return None
        two = s.render(turn(P.first_call(), P.second_call()))
    except Exception:   # a probe that does not render decides nothing
        return None
    return two.count(P.FUN_FIRST) > base.count(P.FUN_FIRST) and two.count(P.FUN_SECOND) > base.count(P.FUN_SECOND)


def probed_caps(template: ChatTemplate) -> Caps:
    """The capability probe's caps of ``template`` (llama.cpp's ``caps_get``, the same at every fidelity; the
    analysis at improved may widen them), memoized by source."""
    return _probe_caps_cached(template)


def _probe_caps_cached(template: ChatTemplate) -> Caps:
    """``probe_caps`` memoized by template source (bounded): capabilities depend on the source only."""
    key = source_digest(template.source)
    hit = _CAPS_CACHE.get(key)
    if hit is MISSING:
        hit = probe_caps(template)
        _CAPS_CACHE.put(key, hit, 512)
    return replace(hit)  # a copy (every field is a bool)


def _json_copy(value: Any) -> Any:
    """Fresh copy of JSON-like data (dicts and lists copied all the way down, scalars shared): what
    ``copy.deepcopy`` gives for data without shared containers, at a fraction of its cost (a render may append
    to the lists it is given, so the constants are never handed over as they are)."""
    if type(value) is dict:
        return {k: _json_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_json_copy(v) for v in value]
    if type(value) in _ATOMIC:
        return value
    return copy.deepcopy(value)


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _generation_prompt(s: ProbeSession) -> tuple[str, str | None]:
    """Generation prompt for the reference request, rendered through the session (recorded as the
    ``generation_prompt`` comparison)."""
    msgs = _json_copy(REFERENCE_MESSAGES)
    extra = request_extra_context()
    a = RenderParams(msgs, tools=_json_copy(REFERENCE_TOOLS), add_generation_prompt=False,
                     extra_context=extra)
    b = RenderParams(_json_copy(msgs), tools=_json_copy(REFERENCE_TOOLS), add_generation_prompt=True,
                     extra_context=dict(extra))
    cmp = s.compare("generation_prompt", "What does add_generation_prompt append? The reference request "
                    "(user 'Hello' + one tool) without vs with it.", a, b)
    if not cmp.ok:
        return "", cmp.error
    gp = cmp.output_b[common_prefix_len(cmp.output_a, cmp.output_b):]
    cmp.found["generation_prompt"] = gp
    return gp, None


def _check_workaround_names(name: str, disabled: Iterable[str]) -> None:
    unknown = sorted(set(disabled) - set(WORKAROUNDS_BY_NAME))
    if unknown:
        raise AnalysisSettingError(name, f"unknown workaround name(s) {', '.join(unknown)}; known: "
                                  f"{', '.join(WORKAROUNDS_BY_NAME)}")


def reapply(report: AnalysisReport, *, disabled_workarounds: Iterable[str] = (),
            overrides: dict[str, Any] | None = None) -> AnalysisReport:
    """A new report with the workarounds (minus ``disabled_workarounds``) and ``overrides`` re-applied to
    ``report.raw``. Renders nothing (cheap; the explorer calls it on every edit). The report's fidelity
    decides which workarounds may apply (those of origin ``"explorer"`` only at ``"improved"``).

    Overrides are dotted paths of ``TemplateAnalysis.to_json()``; when an override changes a marker and
    ``preserved_tokens`` is not overridden itself, the trimmed new marker is added to the preserved tokens.
    Raises :class:`~core.errors.AnalysisError` naming an unknown path, a value of the wrong type, a bad enum
    value or an unknown workaround name.
    """
    disabled = list(disabled_workarounds or ())
    _check_workaround_names(report.template_name, disabled)
    final = report.raw.copy()
    fired = apply_workarounds(report.source, final, disabled, fidelity=report.fidelity)
    final.analysis_complete = True
    overrides = dict(overrides or {})
    if overrides:
        final = apply_overrides(report.template_name, final, overrides)
    return replace(report, analysis=final, workarounds_applied=[n for n, _ in fired],
                   workaround_effects={n: eff for n, eff in fired}, overrides=overrides,
                   disabled_workarounds=disabled)


_ENUM_PATHS = {"reasoning.mode": ReasoningMode, "content.mode": ContentMode, "tools.format.mode": ToolFormat,
               "tools.call_id.pos": CallIdPosition}


def apply_overrides(name: str, analysis: TemplateAnalysis, overrides: dict[str, Any]) -> TemplateAnalysis:
    """Return a copy of ``analysis`` with ``overrides`` (dotted path → value) applied; see :func:`reapply`."""
    data = analysis.to_json()
    for path, value in overrides.items():
        parts = path.split(".")
        node: Any = data
        for p in parts[:-1]:
            if not isinstance(node, dict) or p not in node or not isinstance(node[p], dict):
                raise AnalysisSettingError(name, f"unknown override path {path!r}")
            node = node[p]
        leaf = parts[-1]
        if not isinstance(node, dict) or leaf not in node or isinstance(node[leaf], dict):
            raise AnalysisSettingError(name, f"unknown override path {path!r}")
        old = node[leaf]
        if isinstance(old, bool):
            if not isinstance(value, bool):
                raise AnalysisSettingError(name, f"override {path!r} needs true/false, got {value!r}")
        elif isinstance(old, str):
            if not isinstance(value, str):
                raise AnalysisSettingError(name, f"override {path!r} needs a string, got {value!r}")
        elif isinstance(old, list):
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise AnalysisSettingError(name, f"override {path!r} needs a list of strings, got {value!r}")
            value = list(value)
        enum_cls = _ENUM_PATHS.get(path)
        if enum_cls is not None and value not in {m.value for m in enum_cls}:
            raise AnalysisSettingError(name, f"override {path!r}: {value!r} is not one of "
                                      f"{', '.join(m.value for m in enum_cls)}")
        node[leaf] = value
    out = TemplateAnalysis.from_json(data)
    if "preserved_tokens" not in overrides:
        for path in overrides:
            if path in MARKER_FIELDS:
                tok = trim(overrides[path])
                if tok and tok not in out.preserved_tokens:
                    out.preserved_tokens.append(tok)
    return out
