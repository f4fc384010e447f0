"""Round trip: render an assistant message with a template, parse the rendered text back, compare.

The question it answers: *if a model writes exactly what its own chat template writes for an assistant turn,
does the parser built for that template give back the same message?* (issue 3, "Round trip").

* :func:`sample_output` — the text a model following the template would generate for an assistant message:
  the render of the conversation with the message appended, after the render that ends with the generation
  prompt, minus the template's end-of-turn text (see :func:`end_of_turn_candidates`).
* :func:`round_trip` — build the parser (:func:`core.chat.pipeline.build_chat_parser`, the request below), parse
  :func:`sample_output`, compare with the message as ``reference/README.md`` compares messages, and classify
  the outcome (:class:`RoundTripStatus`): a pass, a parser failure, or a template that cannot represent the
  message (it raises on it, or drops a part of it — reported apart, with the reason, never as a pass).
  Figures are always given both ways: passes over every eligible template, and over the representable ones.
* :func:`corpus_round_trip` — the same over a directory of templates, keeping only the tool-capable templates
  the analysis handles (:func:`eligibility`).

The request is fixed: the user message :data:`USER_MESSAGE`, tools :data:`ROUND_TRIP_TOOLS`, ``tool_choice``
auto, ``parallel_tool_calls`` true, ``reasoning_format`` auto, ``enable_thinking`` true. The message
(:func:`round_trip_message`) has reasoning, content and two calls of different functions whose arguments are a
string, an integer and a nested object; call ids are 9-character alphanumerics (``call00001``) because some
templates insist on that form (analysis notes §6).
"""

from __future__ import annotations

import copy
import enum
import json
import os
import pathlib
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import ChatTemplateExplorerError, TemplateRenderError
from ..jinja.template import ChatTemplate
from ..sources import read_template_file
from .request import ChatRequest
# sample_output and its helpers live in core.chat.samples (the pipeline reads them too), re-exported for the
# round trip's callers
from .samples import (Alignment, SampleOutput, content_turn_header, end_of_turn_candidates,  # noqa: F401
                      render_prompt_for, sample_output, sample_output_details, strip_end_of_turn, with_messages)

USER_MESSAGE = "What is the weather in Paris, and book a table for 4 at Chez Nous?"
"""The user turn that precedes the assistant message."""

ROUND_TRIP_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name"},
            "days": {"type": "integer", "description": "Number of days"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "book_table", "description": "Reserve a restaurant table",
        "parameters": {"type": "object", "properties": {
            "restaurant": {"type": "string", "description": "Restaurant name"},
            "guests": {"type": "integer", "description": "Number of guests"},
            "options": {"type": "object", "description": "Booking options", "properties": {
                "time": {"type": "string"}, "table": {"type": "integer"}}}},
            "required": ["restaurant", "guests"]}}},
]
"""Two tools with string, integer and nested-object parameters (OpenAI shape)."""

REASONING_TEXT = "The user wants the weather and a booking. I will call both tools."
CONTENT_TEXT = "Let me check the weather and book the table."


def round_trip_message(*, reasoning: bool = True) -> dict[str, Any]:
    """The assistant message of the round trip (OpenAI shape, ``arguments`` as objects): content
    :data:`CONTENT_TEXT`, reasoning :data:`REASONING_TEXT` (omitted with ``reasoning=False``, the variant for
    templates that have no place for reasoning), and two calls — ``get_weather`` {city: "Paris", days: 3}
    (id ``call00001``) and ``book_table`` {restaurant: "Chez Nous", guests: 4, options: {time: "19:30",
    table: 12}} (id ``call00002``). A fresh copy each call."""
    msg: dict[str, Any] = {"role": "assistant", "content": CONTENT_TEXT}
    if reasoning:
        msg["reasoning_content"] = REASONING_TEXT
    msg["tool_calls"] = [
        {"id": "call00001", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}},
        {"id": "call00002", "type": "function",
         "function": {"name": "book_table", "arguments": {
             "restaurant": "Chez Nous", "guests": 4, "options": {"time": "19:30", "table": 12}}}},
    ]
    return msg


def round_trip_request(tools: list[dict[str, Any]] | None = None,
                       messages: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The request dict of the round trip (``ChatRequest.from_dict`` shape): ``messages`` (default: one user
    turn, :data:`USER_MESSAGE`), ``tools`` (default :data:`ROUND_TRIP_TOOLS`), tool_choice auto, parallel
    tool calls, reasoning_format auto, enable_thinking, add_generation_prompt."""
    return {
        "messages": copy.deepcopy(messages) if messages is not None
        else [{"role": "user", "content": USER_MESSAGE}],
        "tools": copy.deepcopy(tools if tools is not None else ROUND_TRIP_TOOLS),
        "tool_choice": "auto", "parallel_tool_calls": True, "reasoning_format": "auto",
        "enable_thinking": True, "add_generation_prompt": True,
    }


# ------------------------------------------------------------------------------------------------ comparison


def _norm_args(a: Any) -> Any:
    if isinstance(a, str):
        try:
            return json.loads(a)
        except (json.JSONDecodeError, ValueError):
            return ("<unparsable>",)
    return a


def compare_messages(expected: dict[str, Any], got: dict[str, Any]) -> str | None:
    """None when ``got`` equals ``expected`` as ``reference/README.md`` compares messages — ``content`` and
    ``reasoning_content`` equal after stripping outer whitespace; the same number of tool calls, each with
    the same name, JSON-equal ``arguments`` and, where the expected id is non-empty, the same id — else a
    one-line reason naming the first difference."""
    for k in ("content", "reasoning_content"):
        e = (expected.get(k) or "").strip()
        g = (got.get(k) or "").strip()
        if e != g:
            return f"{k}: expected {e[:100]!r}, got {g[:100]!r}"
    et = expected.get("tool_calls") or []
    gt = got.get("tool_calls") or []
    if len(et) != len(gt):
        return f"tool_calls: expected {len(et)}, got {len(gt)} " \
               f"({[(t.get('function') or {}).get('name') for t in gt]})"
    for n, (e, g) in enumerate(zip(et, gt)):
        ef, gf = e.get("function") or {}, g.get("function") or {}
        if ef.get("name") != gf.get("name"):
            return f"tool_calls[{n}].name: expected {ef.get('name')!r}, got {gf.get('name')!r}"
        if _norm_args(ef.get("arguments", "")) != _norm_args(gf.get("arguments", "")):
            return f"tool_calls[{n}].arguments: expected {ef.get('arguments')}, got {gf.get('arguments')}"
        if e.get("id") and e.get("id") != g.get("id"):
            return f"tool_calls[{n}].id: expected {e.get('id')!r}, got {g.get('id')!r}"
    return None


def expected_message(message: dict[str, Any], output: str) -> dict[str, Any]:
    """The parse ``message`` should give (OpenAI shape, ``arguments`` as JSON text): the message itself, with
    call ids kept only where ``output`` contains them (a template that does not render ids cannot give them
    back; the parser may then generate its own)."""
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("reasoning_content"):
        out["reasoning_content"] = message["reasoning_content"]
    calls = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        cid = tc.get("id") or ""
        calls.append({"type": "function", "id": cid if cid and cid in output else "",
                      "function": {"name": fn.get("name", ""), "arguments": args}})
    if calls:
        out["tool_calls"] = calls
    return out


def _leaf_strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaf_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaf_strings(v)


def missing_parts(message: dict[str, Any], output: str) -> list[str]:
    """The parts of ``message`` that ``output`` does not contain verbatim: ``"reasoning"``, ``"content"``,
    ``"tool call NAME"`` (the function name is absent), ``"argument value V of NAME"`` (a string argument
    value is absent). Empty when every part can be found."""
    miss = []
    r = (message.get("reasoning_content") or "").strip()
    if r and r not in output:
        miss.append("reasoning")
    c = message.get("content")
    if isinstance(c, str) and c.strip() and c.strip() not in output:
        miss.append("content")
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        name = fn.get("name", "")
        if name not in output:
            cid = tc.get("id") or ""
            miss.append(f"tool call {name}" + (f" (the template writes the call id {cid!r} instead)"
                                                 if cid and cid in output else ""))
            continue
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {}
        for v in _leaf_strings(args):
            if v not in output:
                miss.append(f"argument value {v!r} of {name}")
    return miss


# ------------------------------------------------------------------------------------------------ round trip


class RoundTripStatus(str, enum.Enum):
    """Outcome of one round trip.

    ``PASS``: the parse equals the message. ``PARSER_MISMATCH``: the template rendered every part and the
    parse differs (a parser / analysis failure, or an output that could not be lined up with the prompt —
    see the result's ``alignment``). ``PARSER_ERROR``: the parser could not be built or raised.
    ``TEMPLATE_LIMITED``: the template cannot represent the message (it raises on it, drops a part of it, or
    renders the conversation so that no model output can be cut from it); not a parser failure, but not a
    pass either.
    """

    PASS = "pass"
    PARSER_MISMATCH = "parser_mismatch"
    PARSER_ERROR = "parser_error"
    TEMPLATE_LIMITED = "template_limited"


@dataclass
class RoundTripResult:
    """One round trip.

    ``template``: name; ``status``: :class:`RoundTripStatus`; ``ok``: status is PASS; ``rendered_output``: the
    model text parsed (:func:`sample_output`; "" when the render failed); ``parsed``: the parse (OpenAI shape)
    or None; ``expected``: the message expected back (OpenAI shape, :func:`expected_message`); ``why``: the
    first difference or the reason of the classification (None on a pass); ``variant``: ``"full"`` or
    ``"no-reasoning"`` (the template has no reasoning, or its generation prompt closes reasoning: the message
    without reasoning was used); ``route``: ``"autoparser"`` or ``"specialized:<handler>"``; ``alignment``:
    :class:`Alignment` value of the cut; ``notes``: remarks; ``reduced``: for ``TEMPLATE_LIMITED``, the round
    trip of the message reduced to what the template can render (no content, no reasoning, one call), or None
    — informative only, never counted as a pass.
    """

    template: str
    status: RoundTripStatus
    rendered_output: str
    parsed: dict[str, Any] | None
    expected: dict[str, Any]
    why: str | None = None
    variant: str = "full"
    route: str = ""
    alignment: str = ""
    notes: list[str] = field(default_factory=list)
    reduced: "RoundTripResult | None" = None

    @property
    def ok(self) -> bool:
        """True if the status is PASS."""
        return self.status == RoundTripStatus.PASS

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (status as its value; ``reduced`` nested)."""
        return {"template": self.template, "status": self.status.value, "ok": self.ok, "variant": self.variant,
                "route": self.route, "alignment": self.alignment, "why": self.why,
                "rendered_output": self.rendered_output, "parsed": self.parsed, "expected": self.expected,
                "notes": list(self.notes), "reduced": self.reduced.to_json() if self.reduced else None}


def _route_name(bundle: Any) -> str:
    route = getattr(bundle, "route", None)
    if route is None:
        return ""
    kind = getattr(route, "kind", "")
    handler = getattr(route, "handler", None)
    return f"{kind}:{handler}" if handler else str(kind)


def _has_reasoning(report: Any) -> bool | None:
    analysis = getattr(report, "analysis", None)
    mode = getattr(getattr(analysis, "reasoning", None), "mode", None)
    if mode is None:
        return None
    return getattr(mode, "value", mode) != "NONE"


def _opens_reasoning(report: Any, gp: str) -> bool:
    """The generation prompt ends with the analysis's reasoning start marker (the model must write reasoning
    and its end marker next)."""
    analysis = getattr(report, "analysis", None)
    start = (getattr(getattr(analysis, "reasoning", None), "start", "") or "").strip()
    return bool(start) and gp.rstrip().endswith(start)


def _reduce(msg: dict[str, Any], why: str) -> dict[str, Any] | None:
    """The message without the parts ``why`` says the template cannot render (content, reasoning, calls
    beyond the first); None when nothing can be dropped."""
    out = copy.deepcopy(msg)
    changed = False
    low = why.lower()
    if "content" in low and out.get("content"):
        out["content"] = ""
        changed = True
    if "reasoning" in low and out.get("reasoning_content"):
        out.pop("reasoning_content")
        changed = True
    if ("tool call" in low or "single tool" in low or "raises" in low) and len(out.get("tool_calls") or []) > 1:
        out["tool_calls"] = out["tool_calls"][:1]
        changed = True
    return out if changed else None


def _parse_and_compare(name: str, bundle: Any, sample: SampleOutput, msg: dict[str, Any], variant: str,
                       route: str, notes: list[str]) -> RoundTripResult:
    expected = expected_message(msg, sample.output)
    try:
        parsed = bundle.parser.parse(sample.output, False).to_openai()
    except Exception as e:  # noqa: BLE001 - a parser must never raise; report it as a parser error
        return RoundTripResult(name, RoundTripStatus.PARSER_ERROR, sample.output, None, expected,
                               f"parse raised {type(e).__name__}: {e}", variant, route, sample.alignment.value,
                               notes)
    why = compare_messages(expected, parsed)
    status = RoundTripStatus.PASS if why is None else RoundTripStatus.PARSER_MISMATCH
    return RoundTripResult(name, status, sample.output, parsed, expected, why, variant, route,
                           sample.alignment.value, notes)


def round_trip(template: ChatTemplate, message: dict[str, Any] | None = None,
               tools: list[dict[str, Any]] | None = None, *, messages: list[dict[str, Any]] | None = None,
               report: Any = None, reduce: bool = True, fidelity: Any = None) -> RoundTripResult:
    """Render ``message`` (default :func:`round_trip_message`) with ``template``, parse it back with the parser
    :func:`~core.chat.pipeline.build_chat_parser` builds for :func:`round_trip_request` (``tools``, default
    :data:`ROUND_TRIP_TOOLS`; ``messages`` before the assistant turn), and compare (:func:`compare_messages`).

    Which message: the message with reasoning when the template renders it. The message without reasoning
    (``variant="no-reasoning"``) when the template has no reasoning (the analysis finds none and the render
    drops it), when its generation prompt closes reasoning (only the message without reasoning extends the
    prompt), or when the rendered turn drops reasoning and the generation prompt leaves reasoning optional (the
    render without reasoning extends the prompt: a model may write that). A template whose generation prompt
    opens reasoning that its rendered turns drop (QwQ) cannot represent the message.

    Classification (:class:`RoundTripStatus`): ``TEMPLATE_LIMITED`` when the render raises, drops the
    content, the reasoning, a call or a string argument value, or cannot be lined up with the prompt
    (:attr:`Alignment.CONVERSATION_DIFFERS`); then, with ``reduce``, the message reduced to what the template
    renders is tried too (``result.reduced``, informative). Otherwise ``PASS`` / ``PARSER_MISMATCH`` /
    ``PARSER_ERROR``. ``report``: an analysis report (e.g. with overrides) for the parser. ``fidelity``:
    ``"llama.cpp"`` or ``"improved"`` (:mod:`core.analysis.fidelity`), passed to
    :func:`~core.chat.pipeline.build_chat_parser` (``None``: the report's, else llama.cpp).

    Never raises for template or parser failures (they become the status); raises
    :class:`~core.errors.RequestError` for a malformed ``message`` / ``tools``.
    """
    from .pipeline import build_chat_parser, cached_analysis

    msg = copy.deepcopy(message) if message is not None else round_trip_message()
    request = ChatRequest.from_dict(round_trip_request(tools, messages))
    name = template.name
    notes: list[str] = []
    if fidelity is None:
        fidelity = getattr(report, "fidelity", None) or "llama.cpp"

    try:
        bundle = build_chat_parser(template, request, report=report, fidelity=fidelity)
    except ChatTemplateExplorerError as e:
        return RoundTripResult(name, RoundTripStatus.PARSER_ERROR, "", None, expected_message(msg, ""),
                               f"parser not built: {e}", notes=notes)
    route = _route_name(bundle)
    # the sample renders as the parser's prompt does (improvement transformers-dialect)
    llama_engine = getattr(getattr(bundle, "prepared", None), "llama_engine", True)
    dialect = {} if llama_engine else {"llama_engine": False, "caps": bundle.prepared.caps}
    rep = report if report is not None else bundle.report
    if rep is None:
        try:
            rep = cached_analysis(template, fidelity)
        except ChatTemplateExplorerError:
            rep = None

    def limited(why: str, m: dict[str, Any], sample: SampleOutput | None, variant: str) -> RoundTripResult:
        out = sample.output if sample else ""
        res = RoundTripResult(name, RoundTripStatus.TEMPLATE_LIMITED, out, None, expected_message(m, out), why,
                              variant, route, sample.alignment.value if sample else "", notes)
        smaller = _reduce(m, why) if reduce else None
        if smaller is not None:
            res.reduced = round_trip(template, smaller, tools, messages=messages, report=report, reduce=False,
                                     fidelity=fidelity)
            if res.reduced.status == RoundTripStatus.TEMPLATE_LIMITED:
                again = _reduce(smaller, res.reduced.why or "")
                if again is not None:
                    res.reduced = round_trip(template, again, tools, messages=messages, report=report,
                                             reduce=False, fidelity=fidelity)
        return res

    variant = "full"
    try:
        sample = sample_output_details(template, request, msg, **dialect)
    except TemplateRenderError as e:
        return limited(f"template raises on the message: {e}", msg, None, variant)
    missing = missing_parts(msg, sample.output)
    if msg.get("reasoning_content") and ("reasoning" in missing or not sample.prompt_is_prefix):
        plain = {k: v for k, v in msg.items() if k != "reasoning_content"}
        try:
            alt = sample_output_details(template, request, plain, **dialect)
        except TemplateRenderError:
            alt = None
        if alt is not None and not sample.prompt_is_prefix and alt.prompt_is_prefix:
            notes.append("the generation prompt closes reasoning: message without reasoning used")
            msg, sample, variant = plain, alt, "no-reasoning"
        elif alt is not None and "reasoning" in missing and _has_reasoning(rep) is False:
            notes.append("the template has no reasoning: message without reasoning used")
            msg, sample, variant = plain, alt, "no-reasoning"
        elif alt is not None and "reasoning" in missing and alt.prompt_is_prefix \
                and not _opens_reasoning(rep, alt.generation_prompt):
            notes.append("the template drops reasoning from the rendered turn and its generation prompt does not "
                         "open reasoning: message without reasoning used")
            msg, sample, variant = plain, alt, "no-reasoning"
        missing = missing_parts(msg, sample.output)
    if missing:
        return limited("template drops " + ", ".join(missing), msg, sample, variant)
    if sample.alignment == Alignment.CONVERSATION_DIFFERS:
        return limited("the render with the message does not line up with the prompt: the conversation before "
                       "the assistant turn renders differently and the generation prompt "
                       f"{sample.generation_prompt[-60:]!r} does not occur in it", msg, sample, variant)
    if not sample.prompt_is_prefix:
        notes.append(f"alignment {sample.alignment.value}: the prompt ends {sample.prompt[-60:]!r}")
    if sample.end_of_turn and not sample.eot_removed:
        notes.append(f"no end-of-turn text found at the end of the output (candidates {sample.end_of_turn!r})")
    return _parse_and_compare(name, bundle, sample, msg, variant, route, notes)


# ------------------------------------------------------------------------------------------------ corpus


@dataclass
class Eligibility:
    """Whether a template is in the round-trip population: ``eligible`` (tool-capable and handled by the
    analysis), ``reason`` (why not, or the route), ``report`` (the analysis report when one was made)."""

    eligible: bool
    reason: str
    report: Any = None


def eligibility(template: ChatTemplate, fidelity: Any = "llama.cpp") -> Eligibility:
    """Is ``template`` tool-capable and handled by the analysis? Tool-capable: the caps probe says it renders
    tool calls (``caps.supports_tool_calls``) and either a special handler serves it or the analysis found a
    tool-call format (``tools.format.mode`` not NONE). Handled: the analysis (cached per source and
    ``fidelity``) does not raise. Never raises."""
    from ..analysis.analyzer import probed_caps
    from .pipeline import cached_analysis, route_for

    try:
        route = route_for(template.source)
        report = cached_analysis(template, fidelity)
    except Exception as e:  # noqa: BLE001 - classification, not failure
        return Eligibility(False, f"analysis fails: {type(e).__name__}: {e}")
    analysis = report.analysis
    # the population is the caps probe's (the same at every fidelity): improvements null-content-calls and
    # call-turn-caps widen the analysed caps at improved, not the set of templates compared
    if not analysis.caps.supports_tool_calls or not probed_caps(template).supports_tool_calls:
        return Eligibility(False, "does not render tool calls (caps)", report)
    if route.kind == "specialized":
        return Eligibility(True, f"specialized:{route.handler}", report)
    if analysis.tools.format.mode.value == "NONE":
        return Eligibility(False, "no tool-call format found by the analysis", report)
    return Eligibility(True, "autoparser", report)


@dataclass
class CorpusRoundTrip:
    """Round trips over a corpus: ``results`` (one per eligible template), ``skipped`` (name → reason for the
    templates outside the population). Figures: ``passed``, ``limited`` (template cannot represent the
    message), ``failed`` (parser mismatch or error), ``rate`` = passed / eligible, ``rate_representable`` =
    passed / (eligible - limited)."""

    results: list[RoundTripResult]
    skipped: dict[str, str]
    fidelity: str = "llama.cpp"

    @property
    def eligible(self) -> int:
        """Number of eligible templates (one result each)."""
        return len(self.results)

    @property
    def passed(self) -> list[RoundTripResult]:
        """Results with status PASS."""
        return [r for r in self.results if r.ok]

    @property
    def limited(self) -> list[RoundTripResult]:
        """Results with status TEMPLATE_LIMITED (the template cannot represent the message)."""
        return [r for r in self.results if r.status == RoundTripStatus.TEMPLATE_LIMITED]

    @property
    def failed(self) -> list[RoundTripResult]:
        """Results with status PARSER_MISMATCH or PARSER_ERROR."""
        return [r for r in self.results
                if r.status in (RoundTripStatus.PARSER_MISMATCH, RoundTripStatus.PARSER_ERROR)]

    @property
    def rate(self) -> float:
        """passed / eligible, as a fraction in [0, 1] (0.0 when nothing is eligible)."""
        return len(self.passed) / self.eligible if self.eligible else 0.0

    @property
    def rate_representable(self) -> float:
        """passed / (eligible - limited), as a fraction in [0, 1] (0.0 when that is 0)."""
        n = self.eligible - len(self.limited)
        return len(self.passed) / n if n else 0.0

    def summary(self) -> str:
        """Readable figures, one line."""
        return (f"round trip: {len(self.passed)}/{self.eligible} tool-capable templates pass "
                f"({self.rate:.1%}); {len(self.limited)} cannot represent the message; "
                f"{len(self.failed)} parser failures; {len(self.passed)}/{self.eligible - len(self.limited)} "
                f"of the representable ({self.rate_representable:.1%}); {len(self.skipped)} templates skipped; "
                f"{self.fidelity} fidelity")


def corpus_round_trip(directory: str | os.PathLike, *, pattern: str = "*.jinja",
                      names: Iterable[str] | None = None, fidelity: Any = "llama.cpp") -> CorpusRoundTrip:
    """:func:`round_trip` for every template file in ``directory`` (``pattern``; or only ``names``) that
    :func:`eligibility` admits, at ``fidelity`` (``"llama.cpp"`` default, or ``"improved"``). Files that
    cannot be read or compiled are skipped with the reason."""
    from ..analysis.fidelity import resolve_fidelity

    fid = resolve_fidelity(fidelity, str(directory)).value
    d = pathlib.Path(directory)
    files = [d / n for n in names] if names is not None else sorted(d.glob(pattern))
    results: list[RoundTripResult] = []
    skipped: dict[str, str] = {}
    for path in files:
        try:
            template = ChatTemplate(read_template_file(path), path.name)
        except (OSError, UnicodeDecodeError, ChatTemplateExplorerError) as e:
            skipped[path.name] = f"cannot load: {e}"
            continue
        el = eligibility(template, fid)
        if not el.eligible:
            skipped[path.name] = el.reason
            continue
        results.append(round_trip(template, report=el.report, fidelity=fid))
    return CorpusRoundTrip(results, skipped, fid)
