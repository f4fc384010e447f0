"""Chat Template Explorer: learn a chat template's output format by differential analysis, and parse model output
with the parser built from it.

The library's public entry points are the functions of this module::

    import core

    tmpl = core.load_template("assets/templates/chatml-think-tools.jinja")
    report = core.analyze(tmpl)                     # what the template's renders tell about its format
    message = core.parse(tmpl, output, request)     # an OpenAI assistant message (AssistantMessage)
    for delta in core.stream(tmpl, chunks, request):   # the same message as deltas, fed chunk by chunk
        ...

Each takes a template as a :class:`~core.jinja.template.ChatTemplate` or as what :func:`load_template` loads (a path
or a Hub repo id), and a request as a :class:`~core.chat.request.ChatRequest`, an OpenAI-shaped dict or None (one
user message, no tools). ``fidelity`` is ``"llama.cpp"`` (the default: exactly what llama.cpp does) or
``"improved"`` (this project's named improvements and repairs). Bad input raises a subclass of
:class:`core.errors.ChatTemplateExplorerError` whose message is one line naming the input.

Data flow (one package per stage): templating -> diff -> analysis -> peg -> chat (parser, mapper, stream) ->
grammar; explain, lint, compare and export read their results. Nothing in ``core`` imports Streamlit or a
command-line module.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Union

if TYPE_CHECKING:
    from .analysis.analyzer import AnalysisReport
    from .chat.message import AssistantMessage, MessageDelta
    from .chat.pipeline import ChatParserBundle
    from .chat.request import ChatRequest
    from .compare import TemplateComparison
    from .explain.explain import Explanation
    from .export.response_template import ExportResult
    from .lint.model import LintReport
    from .jinja.template import ChatTemplate

__version__ = "0.1.0"

__all__ = ["load_template", "analyze", "build_parser", "parse", "stream", "explain_output", "lint_template",
           "compare_templates", "export_template"]

# The entry points import their stage when called: ``import core`` (which every ``import core.x`` runs first)
# stays free, so a command that needs one stage does not load the others. Explain, lint, compare and export carry
# a noun in their names because ``core.explain``, ``core.lint``, ``core.compare`` and ``core.export`` are the
# subpackages: importing one rebinds that attribute of ``core`` to the module.

TemplateLike = Union["ChatTemplate", str, "os.PathLike[str]"]
RequestLike = Union["ChatRequest", Mapping[str, Any], None]

_DEFAULT_REQUEST = {"messages": [{"role": "user", "content": "Hello"}]}


def load_template(spec: str | os.PathLike[str], variant: str | None = None, *,
                  revision: str | None = None) -> ChatTemplate:
    """The compiled template at ``spec``: a ``.jinja`` file, a ``tokenizer_config.json`` or
    ``chat_template.json`` (``variant`` picks a named template, e.g. ``"tool_use"``), a ``.gguf`` file or model
    folder, or a Hub repo id (``org/name``, ``org/name@revision``; ``revision`` overrides the ``@`` part).

    Raises :class:`~core.errors.TemplateLoadError` (missing, unreadable, too large, not a template) or
    :class:`~core.errors.TemplateSyntaxError`, naming ``spec``."""
    from .sources import load_template as _load

    return _load(spec, variant, revision=revision).template()


def _template(template: TemplateLike) -> ChatTemplate:
    from .jinja.template import ChatTemplate

    return template if isinstance(template, ChatTemplate) else load_template(template)


def _request(request: RequestLike) -> ChatRequest:
    from .chat.request import ChatRequest

    if isinstance(request, ChatRequest):
        return request
    return ChatRequest.from_dict(dict(_DEFAULT_REQUEST if request is None else request))


def analyze(template: TemplateLike, *, fidelity: str = "llama.cpp", overrides: Mapping[str, Any] | None = None,
            disabled_workarounds: Iterable[str] = ()) -> AnalysisReport:
    """Analyse ``template`` by rendering it with one thing changed at a time and diffing the renders.

    The report's ``analysis`` holds the reasoning, content and tool-call modes and markers (``to_json()`` uses
    the field names of llama.cpp's analysis), ``comparisons`` every render pair and what it set, ``route`` the
    parser llama.cpp would use. ``overrides`` sets analysis fields by dotted path (``{"reasoning.start":
    "<think>"}``); ``disabled_workarounds`` switches named workarounds off. Raises
    :class:`~core.errors.AnalysisError` (bad override, analysis budget exceeded)."""
    from .analysis import analyze as _analyze

    return _analyze(_template(template), fidelity=fidelity, overrides=dict(overrides or {}),
                    disabled_workarounds=tuple(disabled_workarounds))


def build_parser(template: TemplateLike, request: RequestLike = None, *, fidelity: str = "llama.cpp",
                 report: AnalysisReport | None = None) -> ChatParserBundle:
    """The parser for ``template`` answering ``request``, as llama.cpp would build it.

    The bundle's ``parser`` parses (``parse(output, is_partial=False)``) and carries the GBNF ``grammar``,
    ``grammar_lazy``, ``grammar_triggers``, ``preserved_tokens`` and ``additional_stops``; ``prompt`` is the
    rendered prompt the model continues, ``generation_prompt`` the text the parser reads before the output.
    ``report``: an analysis to build from (e.g. :func:`analyze` with overrides). Raises
    :class:`~core.errors.RequestError`, :class:`~core.errors.TemplateRenderError` or
    :class:`~core.errors.AnalysisError`."""
    from .chat.pipeline import build_chat_parser

    return build_chat_parser(_template(template), _request(request), fidelity=fidelity, report=report)


def _output(output: Any) -> str:
    """``output`` when it is text; else a ``TypeError`` naming its type (bytes, None…) at the call, rather than
    one from deep inside the parser."""
    if not isinstance(output, str):
        raise TypeError(f"output must be the model's text (str), not {type(output).__name__}: {output!r:.60}")
    return output


def _bundle(target: Any, request: RequestLike, fidelity: str) -> ChatParserBundle:
    from .chat.pipeline import ChatParserBundle

    return target if isinstance(target, ChatParserBundle) else build_parser(target, request, fidelity=fidelity)


def parse(template: TemplateLike | ChatParserBundle, output: str, request: RequestLike = None, *,
          fidelity: str = "llama.cpp", is_partial: bool = False) -> AssistantMessage:
    """Parse a model's raw ``output`` into an assistant message (``to_openai()``: ``content``,
    ``reasoning_content``, ``tool_calls``; ``repairs``: what the parse had to settle). ``template`` may also be a
    :func:`build_parser` bundle, built once for many outputs. Never raises on the output's text: text the format
    does not account for becomes content (an ``output`` that is not a ``str`` is a ``TypeError``)."""
    return _bundle(template, request, fidelity).parser.parse(_output(output), is_partial)


def stream(template: TemplateLike | ChatParserBundle, chunks: Iterable[str], request: RequestLike = None, *,
           fidelity: str = "llama.cpp") -> Iterator[MessageDelta]:
    """Feed ``chunks`` of a model's output as they arrive and yield OpenAI ``delta`` chunks (``to_openai()``),
    the last ones when the output ends. Deltas are never taken back; accumulated, they equal :func:`parse` of the
    whole output, except a tool call cut off by the end of the output, which ``parse`` leaves out and reports as
    the ``truncated-call`` repair."""
    from .chat.stream import StreamingParser

    sp = StreamingParser(_bundle(template, request, fidelity).parser)
    for chunk in chunks:
        yield from sp.feed(chunk)
    yield from sp.finish()


def explain_output(template: TemplateLike, output: str, request: RequestLike = None, *, fidelity: str = "llama.cpp",
            overrides: Mapping[str, Any] | None = None) -> Explanation:
    """Explain how ``template``'s parser reads ``output``: labelled spans over the text, where the parse
    stopped, the causes with evidence, fixes checked by re-parsing, and reproducers. Raises what
    :func:`build_parser` raises; never raises on the output's text (one that is not a ``str``: ``TypeError``)."""
    from .explain.explain import explain as _explain

    return _explain(_template(template), _request(request), _output(output), fidelity=fidelity,
                    overrides=dict(overrides or {}))


def lint_template(template: TemplateLike, *, fidelity: str = "llama.cpp", suppressed: Iterable[str] = ()) -> LintReport:
    """Render ``template`` over 48 conversation shapes and check the round trip, prefix stability, marker
    hygiene and renderer divergences; ``suppressed``: shell patterns of finding ids to leave out. Never raises
    for a template that fails: its failures are findings."""
    from .lint import lint as _lint

    return _lint(_template(template), fidelity=fidelity, suppressed=tuple(suppressed))


def compare_templates(a: TemplateLike, b: TemplateLike, *, fidelity: str = "llama.cpp",
            with_lint: bool = True) -> TemplateComparison:
    """What changes from template ``a`` to ``b``: analysis fields, renders, lint findings (``with_lint``) and
    how the same outputs parse with both parsers. Raises :class:`~core.errors.AnalysisError` when an analysis
    fails."""
    from .compare import compare_templates as _compare

    return _compare(_template(a), _template(b), fidelity=fidelity, with_lint=with_lint)


def export_template(template: TemplateLike, *, fidelity: str = "llama.cpp",
                    flavour: str = "transformers") -> ExportResult:
    """The template's output format as a ``response_template`` for transformers (``flavour="transformers"``) or
    vLLM (``"vllm"``); ``response_template`` is None with ``reasons`` when the format cannot carry it. Raises
    ``ValueError`` for an unknown flavour or fidelity."""
    from .export.response_template import export_response_template

    return export_response_template(_template(template), fidelity=fidelity, flavour=flavour)
