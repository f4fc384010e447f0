"""From a template and a request to a ready parser: llama.cpp ``common_chat_templates_apply_jinja``.

:func:`build_chat_parser` prepares the request (:mod:`core.chat.prompt`), routes the template — a special
handler (:mod:`core.chat.formats`, llama.cpp's detection order) or the auto-parser (``core.analysis.analyze``
+ ``core.chat.generator.generate_parser``) — and returns a :class:`ChatParserBundle` with the parser, the
prompt and the generation prompt. Analyses are cached per template source and fidelity.

``fidelity`` (:mod:`core.analysis.fidelity`): ``"llama.cpp"`` (default) builds what llama.cpp builds;
``"improved"`` analyses with the explorer's improvements and builds parsers with its parser-stage
improvements (e.g. Python-literal argument values), for the auto-parser and the special handlers alike.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from .. import memo as _memo
from ..analysis import analyze
from ..analysis.fidelity import (CONTENT_TURN_HEADER, GEMMA_CALL_SYNTAX, INSTRUCTION_CALL_FORMAT, JSON_CALL_SEPARATORS,
                                 METADATA_CALL_TURNS,
                                 PYTHON_LITERAL_VALUES, REASONING_FIELD, TRANSFORMERS_DIALECT, enabled_improvements,
                                 resolve_fidelity,
                                 with_reasoning_field)
from ..analysis.dialect import llama_dialect_failure
from ..analysis.instructions import format_for_request, well_known_format
from ..analysis.routing import Route, detect_route
from ..analysis.workarounds import MODEL_WRITTEN_REASONING
from ..errors import AnalysisError, ChatTemplateExplorerError, TemplateRenderError
from ..jinja.template import ChatTemplate
from ..peg.chat import builder_options, current_repairs
from . import formats as _formats
from .base import ChatOutputParser
from .call_ids import CallIds
from .generator import generate_parser
from .message import AssistantMessage
from .repairs import (INSTRUCTED_MARKERS, INSTRUCTED_REASONING_MARKERS, REASONING_END_WITHOUT_START,
                      REPEATED_TURN_HEADER, TEMPLATE_DEFAULT_THINKING, TRAILING_END_OF_TURN, UNPARSED_TEXT,
                      FiredRepair, enabled_repairs, header_space, turn_header)
from .repairs import FORCE_NONEMPTY_CONTENT, FORCE_NONEMPTY_KWARG, REPEATED_PROMPT_TAIL, SETTLE_REPAIRS, UNCLOSED_FINAL_CALL
from .repairs import UNPARSED_CHARACTERS, WELL_KNOWN_CALL_BLOCKS, prompt_tails
from .samples import content_turn_header
from .prompt import (PreparedRequest, continuation_generation_prompt, generation_prompt, prepare_request, render_prompt,
                     thinking_switched_on)
from .request import ChatRequest, ReasoningFormat, ToolChoice
from ..analysis.result import ReasoningAnalysis, ReasoningMode


def route_for(source: str) -> Route:
    """The route llama.cpp takes for a template source (analysis notes §14; :mod:`core.analysis.routing`)."""
    return detect_route(source)


@dataclass
class ChatParserBundle:
    """What :func:`build_chat_parser` returns.

    ``parser``: the :class:`~core.chat.base.ChatOutputParser` (``parse(output, is_partial)``);
    ``prompt``: the rendered prompt the model continues (with a continuation's prefill appended);
    ``generation_prompt``: the text prepended to the model output at parse time;
    ``route``: the route taken (``kind``, ``handler``); ``format``: readable format name
    (``"peg-native"`` for the auto-parser, ``"<family>"`` for a handler);
    ``report``: the analysis report when the auto-parser ran (else ``None``); ``prepared``: the prepared
    request; ``notes``: remarks such as a missing handler module that made the pipeline fall back.
    """

    parser: ChatOutputParser
    prompt: str
    generation_prompt: str
    route: Any
    format: str
    report: Any = None
    prepared: PreparedRequest | None = None
    notes: list[str] = field(default_factory=list)
    fidelity: str = "llama.cpp"

    def call_ids(self, rng: Any = None) -> Any:
        """A fresh :class:`core.chat.call_ids.CallIds` for one message: generates the ids a call lacks at
        ``improved`` fidelity, passes everything through at ``llama.cpp`` (``rng``: a seeded generator)."""
        return CallIds(enabled=self.fidelity == "improved", rng=rng, defer=self.writes_call_ids())

    def writes_call_ids(self) -> bool:
        """Whether the learned format has a call id of its own (a JSON id field, an id marker position)."""
        analysis = getattr(self.report, "analysis", None)
        tools = getattr(analysis, "tools", None)
        if tools is None:
            return False
        f, cid = getattr(tools, "format", None), getattr(tools, "call_id", None)
        return bool(getattr(f, "id_field", "") or getattr(f, "gen_id_field", "")
                    or getattr(getattr(cid, "pos", None), "value", "NONE") != "NONE")


_CACHE_SIZE = 64
_analysis_cache: "OrderedDict[tuple[str, str], Any]" = OrderedDict()


def _fidelity(fidelity: Any, where: str) -> str:
    return resolve_fidelity(fidelity, where).value


def _parser_improvements(fidelity: str, report: Any) -> frozenset[str]:
    """The improvements in force for the parser: the report's own list when it was made at improved
    fidelity (the explorer may have switched some off), else every improvement of ``fidelity``."""
    if fidelity != "improved":
        return frozenset()
    if report is not None and getattr(report, "fidelity", None) == "improved":
        return frozenset(getattr(report, "improvements", ()) or ())
    return enabled_improvements(fidelity)


def _transformers_dialect(template: ChatTemplate, report: Any, improvements: frozenset[str]) -> bool:
    """Improvement ``transformers-dialect``: whether the prompt renders in the transformers dialect — the given
    report rendered so, or (no report) the template does not render in llama.cpp's dialect."""
    if TRANSFORMERS_DIALECT not in improvements:
        return False
    if report is not None:
        return TRANSFORMERS_DIALECT in (getattr(report, "improvements_applied", ()) or ())
    return llama_dialect_failure(template) is not None


_cache_lock = threading.Lock()


def cached_analysis(template: ChatTemplate, fidelity: Any = "llama.cpp") -> Any:
    """``core.analysis.analyze(template, fidelity=fidelity)``, memoised per template source and fidelity (LRU
    of 64). Raises :class:`AnalysisError` when the analysis fails, or for an unknown fidelity."""
    fid = _fidelity(fidelity, template.name)
    key = (template.source, fid)
    with _cache_lock:
        if key in _analysis_cache:
            _analysis_cache.move_to_end(key)
            return _analysis_cache[key]

    report = analyze(template, fidelity=fid)
    with _cache_lock:
        _analysis_cache[key] = report
        while len(_analysis_cache) > _CACHE_SIZE:
            _analysis_cache.popitem(last=False)
    return report


def clear_cache() -> None:
    """Forget cached analyses."""
    with _cache_lock:
        _analysis_cache.clear()


_memo.register_cache("chat analyses", clear_cache)  # see core.memo.clear_caches


def _report_caps(report: Any) -> Any:
    analysis = getattr(report, "analysis", None)
    return getattr(analysis, "caps", None)


def build_chat_parser(template: ChatTemplate, request: ChatRequest, *, report: Any = None,
                      force_autoparser: bool = False, fidelity: Any = None,
                      disabled_repairs: Any = ()) -> ChatParserBundle:
    """Prepare ``request`` for ``template`` and build the parser llama.cpp would use.

    ``report``: an existing :class:`AnalysisReport` (e.g. with the explorer's overrides) — used for the
    auto-parser and for caps; when omitted the analysis runs (cached per source and fidelity) only if the
    auto-parser is needed. ``force_autoparser``: skip special handlers (to compare the generic path with a
    handler). ``fidelity``: ``"llama.cpp"`` or ``"improved"`` (:mod:`core.analysis.fidelity`); ``None`` (the
    default) takes the given report's fidelity, else ``"llama.cpp"``. With ``"improved"`` the parser-stage
    improvements apply to the auto-parser and to the special handlers, and so do the tolerance repairs of
    :mod:`core.chat.repairs` (``disabled_repairs``: names switched off; an unknown name raises ``ValueError``).

    Raises :class:`~core.errors.RequestError` (bad request), :class:`~core.errors.TemplateRenderError`
    (the template fails on these messages) or :class:`AnalysisError` ("Unable to generate parser for this
    template", as llama.cpp) when the auto-parser cannot be built.
    """
    if fidelity is None:
        fidelity = getattr(report, "fidelity", None) or "llama.cpp"
    fid = _fidelity(fidelity, template.name)

    active = _parser_improvements(fid, report)
    repairs = enabled_repairs(fid, disabled_repairs)
    with builder_options(python_literal_values=PYTHON_LITERAL_VALUES in active,
                         whitespace_call_separators=JSON_CALL_SEPARATORS in active,
                         repairs=repairs):
        bundle = _build(template, request, report, force_autoparser, fid, active)
    bundle.fidelity = fid
    if REPEATED_TURN_HEADER in repairs and not bundle.prepared.has_continuation \
            and hasattr(bundle.parser, "turn_header"):
        parser = bundle.parser
        gp = getattr(parser, "parser_generation_prompt", None) or parser.generation_prompt
        parser.turn_header = turn_header(gp, getattr(parser, "thinking_start_tag", ""))
        parser.turn_header_space = header_space(gp, parser.turn_header)
    if REPEATED_PROMPT_TAIL in repairs and not bundle.prepared.has_continuation \
            and hasattr(bundle.parser, "prompt_tails"):
        parser = bundle.parser
        gp = getattr(parser, "parser_generation_prompt", None) or parser.generation_prompt
        parser.prompt_tails = prompt_tails(turn_header(gp, getattr(parser, "thinking_start_tag", "")))
    if repairs & SETTLE_REPAIRS:
        try:   # repairs cut-marker-text, cut-call-own-text: read by core.chat.repairs.settle
            bundle.parser.settle_repairs = repairs & SETTLE_REPAIRS
        except AttributeError:
            pass
    if UNCLOSED_FINAL_CALL in repairs:
        try:   # repair unclosed-final-call: read by core.chat.repairs.settle
            bundle.parser.close_final_call = True
        except AttributeError:
            pass
    if FORCE_NONEMPTY_CONTENT in repairs and request.chat_template_kwargs.get(FORCE_NONEMPTY_KWARG) is True:
        try:   # repair force-nonempty-content, asked for by the request: read by core.chat.repairs.settle
            bundle.parser.force_nonempty_content = True
        except AttributeError:
            pass
    if UNPARSED_CHARACTERS in repairs:
        try:   # repair unparsed-characters: read by core.chat.repairs.settle
            bundle.parser.keep_lost_characters = True
        except AttributeError:
            pass
    if TRAILING_END_OF_TURN in repairs and hasattr(bundle.parser, "turn_header"):
        # repair trailing-end-of-turn: the tokens are derived from renders on first use (core.chat.repairs)
        bundle.parser.turn_end_source = (template, request, getattr(bundle.prepared, "caps", None),
                                         getattr(bundle.prepared, "llama_engine", True))
    try:   # what the lossless contract (core.chat.repairs.settle, unparsed-text) reads off the parser
        bundle.parser.lossless_context = (request, getattr(bundle.report, "analysis", None), bundle.format)
        # improved: a stream releases a call whole once accepted, so it ends as the one-shot parse does
        bundle.parser.release_calls_whole = fid == "improved"
    except AttributeError:
        pass
    return bundle


@dataclass
class ContentOnlyParser:
    """The parser of a request the template cannot render (:func:`build_chat_parser_or_content`): every output
    is content, reported by an ``unparsed-text`` record (why ``"no-parser"``) — a message, never an empty
    answer. ``reason``: the render error."""

    reason: str
    grammar: str | None = None
    grammar_lazy: bool = False
    grammar_triggers: list = field(default_factory=list)
    preserved_tokens: list = field(default_factory=list)
    additional_stops: list = field(default_factory=list)
    generation_prompt: str = ""

    def parse(self, output: str, is_partial: bool = False) -> Any:
        """``output`` as the content (a partial one too: content only grows)."""
        msg = AssistantMessage(content=output)
        if output and not is_partial:
            msg.repairs = [FiredRepair(UNPARSED_TEXT, 0, len(output), text=output, why="no-parser")]
        return msg

    def describe(self) -> str:
        """One line: why there is no parser."""
        return f"no parser (the output is content): {self.reason}"


def build_chat_parser_or_content(template: ChatTemplate, request: ChatRequest, **options: Any) -> ChatParserBundle:
    """:func:`build_chat_parser`, except that a template which cannot render for ``request`` (a
    :class:`~core.errors.TemplateRenderError`, e.g. an operator on an undefined value that plain jinja2 refuses
    and llama.cpp's engine accepts) gives a bundle whose parser returns the output as content
    (:class:`ContentOnlyParser`) with a note saying why, instead of no message. Other errors propagate."""
    try:
        return build_chat_parser(template, request, **options)
    except TemplateRenderError as e:
        note = (f"{e}; the model output is returned as content (no parser can be built for this request)")
        return ChatParserBundle(parser=ContentOnlyParser(str(e)), prompt="", generation_prompt="",
                                route=Route("none", None), format="content-only", notes=[note])


def _build(template: ChatTemplate, request: ChatRequest, report: Any, force_autoparser: bool,
           fid: str, improvements: frozenset[str] = frozenset()) -> ChatParserBundle:
    route = route_for(template.source)
    notes: list[str] = []
    caps = _report_caps(report)
    llama_engine = not _transformers_dialect(template, report, improvements)
    if not llama_engine:
        notes.append(f"improvement {TRANSFORMERS_DIALECT}: the template does not render in llama.cpp's Jinja "
                     "dialect; the prompt is rendered in the transformers dialect")
    prep = replace(prepare_request(template, request, caps=caps), llama_engine=llama_engine)
    if route.kind == "autoparser" or force_autoparser:
        prep, default_note = _template_default_thinking(prep, request)
        if default_note:
            notes.append(default_note)
    try:
        gp = generation_prompt(prep)
    except TemplateRenderError:
        # a handler that rewrites the messages first (TranslateGemma) renders its own; others raise again there
        if route.kind != "specialized" or force_autoparser:
            raise
        gp = ""

    if route.kind == "autoparser" and not force_autoparser and GEMMA_CALL_SYNTAX in improvements:
        from .formats import gemma4

        syntax = gemma4.call_syntax_of(template)
        if syntax is not None:
            parser = gemma4.build_syntax(template, request, gp, syntax, prepared=prep)
            notes.append(f"improvement {GEMMA_CALL_SYNTAX}: the template renders Gemma-style calls "
                                f"{syntax.call_open}NAME{{key:{syntax.string}value{syntax.string}}}{syntax.call_end}"
                                f"{'; string values typed by the tool schema' if syntax.quoted_values else ''}")
            return _handler_bundle(parser, prep, route, "gemma4", report, notes)

    if route.kind == "autoparser" and not force_autoparser and METADATA_CALL_TURNS in improvements:
        bundle = _metadata_call_turns(template, request, report, fid, gp, prep, route, notes)
        if bundle is not None:
            return bundle

    if route.kind == "specialized" and not force_autoparser:
        fam = _formats.family_by_name(route.handler)
        parser = _formats.build_parser(fam, template, request, gp, report, prepared=prep)
        return _handler_bundle(parser, prep, route, fam.name, report, notes)

    # ---- auto-parser
    if report is None:
        report = cached_analysis(template, fid)
        if caps is None and _report_caps(report) is not None and _report_caps(report) != prep.caps:
            prep = replace(prepare_request(template, request, caps=_report_caps(report)), llama_engine=llama_engine)
            gp = generation_prompt(prep)

    report, from_request = _request_instructions(report, request, improvements)
    if from_request:
        notes.append(from_request)
    report, known = _well_known_calls(report, request)
    if known:
        notes.append(known)
    analysis = report.analysis
    model_written = bool(MODEL_WRITTEN_REASONING & set(getattr(report, "workarounds_applied", ()) or ()))
    if model_written and prep.has_continuation:
        # the template never renders reasoning_content, so a continued message's prefill holds no reasoning block:
        # the continuation is read as llama.cpp reads it, without the workaround's markers
        analysis = replace(analysis, reasoning=ReasoningAnalysis())
        model_written = False
    try:
        parser = generate_parser(analysis, request, gp, improvements=improvements, template_source=template.source,
                                 reasoning_first=_reasoning_first(analysis, request, prep, gp, report),
                                 instructed=_instructed_markers(analysis, request, prep),
                                 interleaved_reasoning=model_written)
    except ChatTemplateExplorerError:
        raise
    except Exception as e:
        raise AnalysisError(template.name, "Unable to generate parser for this template. Automatic parser "
                                           f"generation failed: {type(e).__name__}: {e}") from None
    if REASONING_FIELD in improvements and getattr(report, "reasoning_field", ""):
        # the conversation's reasoning also under the name the template reads it from, as the analysis probed it

        prep = replace(prep, messages=with_reasoning_field(prep.messages, report.reasoning_field))
        notes.append(f"improvement {REASONING_FIELD}: reasoning_content is also passed as "
                     f"message.{report.reasoning_field}, the field the template renders")
    prompt = render_prompt(prep)
    if CONTENT_TURN_HEADER in improvements and not prep.has_continuation and hasattr(parser, "content_header"):
        parser.content_header = content_turn_header(template, request, analysis, prompt)
        if parser.content_header:
            parser.notes.append(f"improvement {CONTENT_TURN_HEADER}: {parser.content_header!r} before a plain "
                                "answer is the template's turn header; skipped when the output starts with it")
    if prep.has_continuation:
        cont_gp = continuation_generation_prompt(gp, prep, analysis.reasoning.start, analysis.reasoning.end)
        if getattr(parser, "generation_prompt", gp) == gp and cont_gp != gp:
            parser.generation_prompt = cont_gp
        prompt += parser.generation_prompt
    return ChatParserBundle(parser=parser, prompt=prompt, generation_prompt=parser.generation_prompt,
                            route=route if route.kind == "autoparser" else _autoroute(route), format="peg-native",
                            report=report, prepared=prep, notes=notes)


def _metadata_call_turns(template: ChatTemplate, request: ChatRequest, report: Any, fid: str, gp: str, prep: Any,
                         route: Any, notes: list[str]) -> ChatParserBundle | None:
    """Improvement ``metadata-call-turns``: the glm4-chat format's bundle when the request has tools, the template
    renders a call turn as metadata + line break + content after its generation prompt and the analysis finds no
    tool-call format (:mod:`core.chat.formats.glm4_chat`); else None (the auto-parser serves the request)."""
    from ..analysis.result import ToolFormat
    from .formats import glm4_chat

    if not request.tools or request.tool_choice == ToolChoice.NONE or prep.has_continuation:
        return None
    layout = glm4_chat.call_layout_of(template)
    if layout is None:
        return None
    if report is None:
        report = cached_analysis(template, fid)
    if report.analysis.tools.format.mode != ToolFormat.NONE:
        return None
    parser = glm4_chat.build(template, request, gp, layout, prepared=prep)
    notes.append(f"improvement {METADATA_CALL_TURNS}: the template renders a call turn as NAME{layout.separator!r}"
                 f"{{arguments}}{f' and two calls with {layout.between!r} between them' if layout.between else ''}; "
                 "the parser reads calls so")
    return _handler_bundle(parser, prep, route, glm4_chat.NAME, report, notes)


OWN_THINKING_DEFAULT = re.compile(r"enable_thinking\s+is\s+(?:not\s+)?defined|enable_thinking\s*\|\s*default\s*\(")
"""A template that says what happens when ``enable_thinking`` is not passed (``is defined`` tests, a ``default``
filter): it has a default of its own. One that only tests the flag's truth (``if not enable_thinking``, llama.cpp's
edited templates) counts on the caller passing it, and keeps llama.cpp's render."""


def _template_default_thinking(prep: PreparedRequest, request: ChatRequest) -> tuple[PreparedRequest, str]:
    """Repair ``template-default-thinking``: ``(prep rendering without the enable_thinking global, a note)`` when
    the repair is on, the request leaves the flag unset and the template renders differently so; else
    ``(prep, "")``. Only for a template with a default of its own (:data:`OWN_THINKING_DEFAULT`); one that fails
    without the flag keeps llama.cpp's render."""
    kwargs = request.chat_template_kwargs or {}
    if (TEMPLATE_DEFAULT_THINKING not in current_repairs() or request.enable_thinking_given
            or not request.enable_thinking or "enable_thinking" in kwargs
            or not OWN_THINKING_DEFAULT.search(prep.template.source)):
        return prep, ""
    own = replace(prep, template_default_thinking=True)
    try:
        if render_prompt(own) == render_prompt(prep):
            return prep, ""
    except TemplateRenderError:
        return prep, ""
    return own, (f"repair {TEMPLATE_DEFAULT_THINKING}: the request does not set enable_thinking; the prompt is "
                 "rendered with the template's own default (llama.cpp renders with enable_thinking=true)")


def _reasoning_first(analysis: Any, request: ChatRequest, prep: Any, gp: str, report: Any = None) -> bool:
    """Repair ``reasoning-end-without-start`` applies: it is on, the analysis found a reasoning start and end
    marker, the generation prompt does not write the start, the request extracts reasoning and switches the
    template's thinking on (:func:`core.chat.prompt.thinking_switched_on`); not for a continuation, nor for
    markers a workaround says the model writes itself anywhere in its turn
    (:data:`core.analysis.workarounds.MODEL_WRITTEN_REASONING`)."""
    r = analysis.reasoning
    start = r.start.strip() if r.start else ""
    if MODEL_WRITTEN_REASONING & set(getattr(report, "workarounds_applied", None) or ()):
        return False
    if (REASONING_END_WITHOUT_START not in current_repairs() or r.mode != ReasoningMode.TAG_BASED
            or not start or not (r.end or "").strip() or start in gp or prep.has_continuation
            or request.reasoning_format == ReasoningFormat.NONE):
        return False
    return thinking_switched_on(prep)


def _instructed_markers(analysis: Any, request: ChatRequest, prep: Any) -> tuple:
    """The (start, end) phrases of :data:`core.chat.repairs.INSTRUCTED_MARKERS` whose first phrases the prompt
    of this request writes (repair ``instructed-reasoning-markers``), or () — only for templates without
    reasoning tags, when the repair is on and the request extracts reasoning."""
    if (INSTRUCTED_REASONING_MARKERS not in current_repairs() or analysis.reasoning.mode != ReasoningMode.NONE
            or request.reasoning_format == ReasoningFormat.NONE):
        return ()
    src = prep.template.source
    cands = [m for m in INSTRUCTED_MARKERS if m[0][0] in src and m[1][0] in src]
    if not cands:
        return ()
    try:
        prompt = render_prompt(prep)
    except TemplateRenderError:
        return ()
    return next((m for m in cands if m[0][0] in prompt and m[1][0] in prompt), ())


def _handler_bundle(parser: Any, prep: Any, route: Any, fmt: str, report: Any, notes: list[str]) -> ChatParserBundle:
    """The bundle of a hand-written handler's ``parser``: its own ``prompt`` when it renders one (a message
    rewrite), else the prepared request's render, with the handler's generation prompt after a continued
    message."""
    prompt = getattr(parser, "prompt", None)
    if not isinstance(prompt, str):
        prompt = render_prompt(prep)
        if prep.has_continuation:
            prompt += parser.generation_prompt
    return ChatParserBundle(parser=parser, prompt=prompt, generation_prompt=parser.generation_prompt,
                            route=route, format=fmt, report=report, prepared=prep, notes=notes)


def _request_instructions(report: Any, request: ChatRequest, improvements: frozenset[str]) -> tuple[Any, str]:
    """Improvement ``instruction-call-format``, request-time half: when the template renders no tool call and the
    request's system message spells a JSON call format (an agent's own prompt), ``(a copy of report with that
    format, a note)``; else ``(report, "")`` (:func:`core.analysis.instructions.format_for_request`)."""
    if INSTRUCTION_CALL_FORMAT not in improvements or not request.tools:
        return report, ""
    analysis = format_for_request(report.analysis, request.messages)
    if analysis is None:
        return report, ""
    f = analysis.tools.format
    note = (f"improvement {INSTRUCTION_CALL_FORMAT}: the request's system message spells the tool-call format "
            f"(opener {f.section_start or f.per_call_start or '(none)'!r}, arguments key {f.args_field!r}"
            f"{', a JSON list' if f.tools_array_wrapped else ''}); the parser reads calls in it")
    return replace(report, analysis=analysis), note


def _well_known_calls(report: Any, request: ChatRequest) -> tuple[Any, str]:
    """Repair ``well-known-call-blocks``: the request declares tools (and does not forbid calls) but the template
    shows no tool-call format at all (it renders no call and no instructions spell one): ``(a copy of report
    whose format is the well-known <tool_call> JSON block, a note)``; else ``(report, "")``
    (:func:`core.analysis.instructions.well_known_format`)."""
    if WELL_KNOWN_CALL_BLOCKS not in current_repairs() or not request.tools \
            or request.tool_choice == ToolChoice.NONE:
        return report, ""
    analysis = well_known_format(report.analysis)
    if analysis is None:
        return report, ""
    return replace(report, analysis=analysis), (
        f"repair {WELL_KNOWN_CALL_BLOCKS}: the template shows no tool-call format; calls to the declared tools "
        "are read in the well-known <tool_call>{\"name\": …, \"arguments\": {…}}</tool_call> blocks")


def _autoroute(route: Route) -> Route:
    # a specialised template forced to the auto-parser
    return Route(kind="autoparser", handler=None)
