"""The operations of an interactive front end that run template code, each in a limited worker
(:func:`core.isolation.call`): prompt renders and parser building, parsing and streaming replays with the parser
so built, explanations, lint, comparisons, exports and their verification, sample renders, the edit check.

Each public function takes plain data and returns picklable results (dataclasses of :mod:`core`, dicts, text),
built in the worker; the caller's process runs no template code. Parsers stay in the worker (some special
handlers' parsers are closures): :func:`parser_bundle` returns a :class:`ParserBundleView` whose ``parser``
answers ``parse`` through the worker, which keeps the bundles it built (an LRU) and rebuilds one from its
:class:`ParserRecipe` when a fresh worker gets the call.

Errors are those of the underlying core function (same class and message), or
:class:`core.isolation.WorkerLimitError` (killed at the time limit, out of memory: not a verdict on the inputs).
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from . import isolation


def _template(source: str, name: str) -> Any:
    """``ChatTemplate(source, name)``, imported on first use: the app imports this module, its workers run the ops."""
    from .jinja.template import ChatTemplate

    return ChatTemplate(source, name)


def _request(request_json: str) -> Any:
    """The :class:`core.chat.request.ChatRequest` of ``request_json``, imported on first use."""
    from .chat.request import ChatRequest

    return ChatRequest.from_dict(json.loads(request_json))


# ------------------------------------------------------------------------------------------------ analysis


def _reapply(base: Any, disabled: tuple[str, ...], overrides: dict[str, Any] | None) -> Any:
    from .analysis import reapply

    return reapply(base, disabled_workarounds=disabled, overrides=overrides or None)


def reapply(base: Any, disabled: tuple[str, ...] = (), overrides: dict[str, Any] | None = None, *,
            name: str = "<template>") -> Any:
    """:func:`core.analysis.reapply` of the report ``base`` in a worker."""
    return isolation.call(_reapply, base, tuple(disabled), overrides, name=name, what="analysis")


# ------------------------------------------------------------------------------------------------ parsers


@dataclass(frozen=True)
class ParserRecipe:
    """What a worker needs to build (or find again) a parser bundle: the template, the request (JSON of a
    ``reference/cases.jsonl``-shaped dict), the analysis ``report`` to build on (None: analysed as needed),
    ``fidelity`` (None: the report's) and ``key``, which with the other text fields identifies the report
    (e.g. the disabled workarounds and overrides it was made with)."""

    source: str
    name: str
    request_json: str
    report: Any = None
    fidelity: str | None = None
    key: tuple[Any, ...] = ()

    def cache_key(self) -> tuple[Any, ...]:
        return (self.source, self.name, self.request_json, self.fidelity, self.key)


_BUNDLES: "OrderedDict[tuple[Any, ...], Any]" = OrderedDict()  # in the worker: recipe key -> ChatParserBundle
_BUNDLES_MAX = 16


def _bundle(recipe: ParserRecipe) -> Any:
    key = recipe.cache_key()
    bundle = _BUNDLES.get(key)
    if bundle is not None:
        _BUNDLES.move_to_end(key)
        return bundle
    from .chat.pipeline import build_chat_parser

    req = _request(recipe.request_json)
    bundle = build_chat_parser(_template(recipe.source, recipe.name), req, report=recipe.report,
                               fidelity=recipe.fidelity)
    _BUNDLES[key] = bundle
    while len(_BUNDLES) > _BUNDLES_MAX:
        _BUNDLES.popitem(last=False)
    return bundle


@dataclass
class ParserView:
    """A parser built in a worker: the fields of :class:`core.chat.base.ChatOutputParser` as data; ``parse`` and
    ``describe`` answered by a worker."""

    recipe: ParserRecipe
    grammar: str | None
    grammar_lazy: bool
    grammar_triggers: list[Any]
    preserved_tokens: list[str]
    additional_stops: list[str]
    generation_prompt: str

    def parse(self, output: str, is_partial: bool = False) -> Any:
        """The :class:`~core.chat.message.AssistantMessage` the parser makes of ``output`` (in a worker)."""
        return isolation.call(_parse_message, self.recipe, output, is_partial, name=self.recipe.name, what="parse")

    def describe(self) -> str:
        """The parser's readable structure (in a worker)."""
        return isolation.call(_describe, self.recipe, name=self.recipe.name, what="render")


@dataclass
class ParserBundleView:
    """:class:`core.chat.pipeline.ChatParserBundle` as plain data (``parser`` a :class:`ParserView`)."""

    parser: ParserView
    prompt: str
    generation_prompt: str
    route: Any
    format: str
    report: Any = None
    notes: list[str] = field(default_factory=list)


def _parser_bundle(recipe: ParserRecipe) -> ParserBundleView:
    b = _bundle(recipe)
    p = b.parser
    view = ParserView(recipe, p.grammar, bool(p.grammar_lazy), list(p.grammar_triggers or []),
                      list(p.preserved_tokens or []), list(p.additional_stops or []), p.generation_prompt)
    return ParserBundleView(view, b.prompt, b.generation_prompt, b.route, b.format, b.report, list(b.notes or []))


def parser_bundle(recipe: ParserRecipe) -> ParserBundleView:
    """:func:`core.chat.pipeline.build_chat_parser` for ``recipe`` in a worker (the prompt render included)."""
    return isolation.call(_parser_bundle, recipe, name=recipe.name, what="render")


def _describe(recipe: ParserRecipe) -> str:
    return _bundle(recipe).parser.describe()


def _parse_message(recipe: ParserRecipe, output: str, partial: bool) -> Any:
    return _bundle(recipe).parser.parse(output, partial)


def _parse_openai(recipe: ParserRecipe, output: str, partial: bool) -> tuple[dict[str, Any], tuple[Any, ...]]:
    bundle = _bundle(recipe)
    msg = bundle.parser.parse(output, partial)
    repairs = tuple(getattr(msg, "repairs", None) or ())
    return bundle.call_ids().message(msg).to_openai(), repairs   # call ids at improved (docs/fidelity.md)


def parse_openai(recipe: ParserRecipe, output: str, partial: bool) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The OpenAI message dict the recipe's parser makes of ``output`` and the repairs that fired (a worker)."""
    return isolation.call(_parse_openai, recipe, output, partial, name=recipe.name, what="parse")


REPLAY_STEPS = 1500  # at most this many replay steps (pieces are merged beyond it)


@dataclass
class Replay:
    """A streaming replay: ``pieces`` (text fed per step; the last step is the finish, piece ""),
    ``deltas`` (OpenAI delta dicts emitted per step), ``held_back`` (steps whose parse would have taken
    text back) and ``truncated`` (after the finish: the ``truncated-call`` repairs of the one-shot parse, as
    ``(tool name, calls kept, why)``, why "cut" or "rejected"; a client drops the streamed calls beyond ``calls
    kept``, :func:`core.chat.repairs.settled`)."""

    pieces: list[str]
    deltas: list[list[dict[str, Any]]]
    held_back: int = 0
    truncated: list[tuple[str, int, str]] = field(default_factory=list)


def replay_pieces(output: str, limit: int = REPLAY_STEPS) -> list[str]:
    """Pseudo-tokens for the replay: special tokens (``<…>``, ``[…]``) whole, then words, spaces, symbols;
    merged into at most ``limit`` pieces."""
    pieces = re.findall(r"<[^<>\s]{1,64}>|\[[A-Z_/]{1,32}\]|\s+|\w+|.", output, flags=re.S)
    if len(pieces) > limit:
        k = -(-len(pieces) // limit)
        pieces = ["".join(pieces[i:i + k]) for i in range(0, len(pieces), k)]
    return pieces


def _replay(recipe: ParserRecipe, output: str, partial: bool, limit: int) -> Replay:
    from .chat.stream import StreamingParser

    bundle = _bundle(recipe)
    sp = StreamingParser(bundle.parser)
    ids = bundle.call_ids()     # call ids at improved, one per call, on its first delta (docs/fidelity.md)
    pieces = replay_pieces(output, limit)
    deltas = [[d.to_openai() for d in ids.deltas(sp.feed(p))] for p in pieces]
    deltas.append([d.to_openai() for d in ids.deltas(sp.finish(partial), final=True)])
    final = getattr(sp, "final", None)
    truncated = [(r.detail, len(final.tool_calls), r.why) for r in getattr(sp, "repairs", [])
                 if r.name == "truncated-call"] if final is not None else []
    return Replay(pieces + [""], deltas, getattr(sp, "held_back", 0), truncated)


def stream_replay(recipe: ParserRecipe, output: str, partial: bool, limit: int = REPLAY_STEPS) -> Replay:
    """The streaming replay of ``output`` through the recipe's parser (see :class:`Replay`), in a worker."""
    return isolation.call(_replay, recipe, output, partial, limit, name=recipe.name, what="parse")


# ------------------------------------------------------------------------------------------------ explain


def _explain(source: str, name: str, request_json: str, output: str, fidelity: str, overrides_json: str,
             disabled: tuple[str, ...], expect_json: str = "", only_repairs: tuple[str, ...] | None = None
             ) -> dict[str, Any]:
    from .explain.explain import explain
    from .explain.reproducer import case_id, case_line, check_expected, peg_tester_snippet, pytest_test

    expect = check_expected(json.loads(expect_json)) if expect_json else None
    ex = explain(_template(source, name), _request(request_json), output,
                 fidelity=fidelity, overrides=json.loads(overrides_json), disabled_workarounds=disabled,
                 only_repairs=tuple(only_repairs) if only_repairs is not None else None, expect=expect)
    data = ex.to_json()
    cid = case_id(ex, expect, source)     # one id for the case line and the test written from it
    data["reproducer"] = {"case": case_line(ex, cid, expect=expect),
                          "pytest": pytest_test(ex, cid, source=source, expect=expect),
                          "peg_tester": peg_tester_snippet(ex, expect=expect)}
    return data


def explain_view(source: str, name: str, request_json: str, output: str, fidelity: str, overrides_json: str,
                 disabled: tuple[str, ...], expect_json: str = "", only_repairs: tuple[str, ...] | None = None
                 ) -> dict[str, Any]:
    """:func:`core.explain.explain.explain` of ``output`` as JSON data (with its ``triage``: mistake, nearest
    output, ranked fixes), with its reproducers under ``"reproducer"`` (``case``, ``pytest``, ``peg_tester``;
    ``expect_json``: the expected message, which makes the pytest test an xfail-strict reproducer; ``only_repairs``:
    improved fidelity with only these repairs on, a triage fix switched on alone), in a worker."""
    return isolation.call(_explain, source, name, request_json, output, fidelity, overrides_json, tuple(disabled),
                          expect_json, tuple(only_repairs) if only_repairs is not None else None, name=name,
                          what="explanation")


def _explain_steps(source: str, name: str, request_json: str, output: str, fidelity: str, overrides_json: str,
                   disabled: tuple[str, ...], chunk: int) -> list[dict[str, Any]]:
    from .analysis import reapply as _re
    from .chat.pipeline import build_chat_parser, cached_analysis
    from .explain.trace_routes import REPLAY_WINDOW, stream_steps

    tpl = _template(source, name)
    overrides = json.loads(overrides_json)
    report = None
    if overrides or disabled:
        report = _re(cached_analysis(tpl, fidelity), overrides=overrides or None, disabled_workarounds=disabled)
    bundle = build_chat_parser(tpl, _request(request_json), report=report, fidelity=fidelity)
    gp = len(bundle.parser.generation_prompt)
    return [{"end": s.end, "new": [gp + s.new_start, gp + s.end], "spans": [x.to_json() for x in s.spans]}
            for s in stream_steps(bundle.parser, output, chunk, bundle.report, window=REPLAY_WINDOW)]


def explain_steps(source: str, name: str, request_json: str, output: str, fidelity: str, overrides_json: str,
                  disabled: tuple[str, ...], chunk: int) -> list[dict[str, Any]]:
    """The explanation's streaming steps (:func:`core.explain.trace_routes.stream_steps`, ``chunk`` characters
    per step or wider for a long output, each with the spans of its last
    :data:`~core.explain.trace_routes.REPLAY_WINDOW` characters) as JSON data, in a worker."""
    return isolation.call(_explain_steps, source, name, request_json, output, fidelity, overrides_json,
                          tuple(disabled), chunk, name=name, what="explanation")


# ------------------------------------------------------------------------------------------------ lint, compare


def _lint(source: str, name: str, fidelity: str, suppressed: tuple[str, ...], report: Any) -> Any:
    from .lint import lint as _run

    return _run(_template(source, name), fidelity=fidelity, suppressed=suppressed, report=report)


def lint(source: str, name: str, fidelity: str, suppressed: tuple[str, ...] = (), report: Any = None) -> Any:
    """:func:`core.lint.lint` of the template (on ``report`` when given), in a worker."""
    return isolation.call(_lint, source, name, fidelity, tuple(suppressed), report, name=name, what="lint")


def _compare(src_a: str, name_a: str, src_b: str, name_b: str, fidelity: str, with_lint: bool) -> Any:
    from .compare import compare_templates

    return compare_templates(_template(src_a, name_a), _template(src_b, name_b), fidelity=fidelity,
                             with_lint=with_lint)


def compare(src_a: str, name_a: str, src_b: str, name_b: str, fidelity: str, with_lint: bool) -> Any:
    """:func:`core.compare.compare_templates` of two templates, in a worker."""
    return isolation.call(_compare, src_a, name_a, src_b, name_b, fidelity, with_lint, name=name_a,
                          what="comparison")


# ------------------------------------------------------------------------------------------------ export


def _export(source: str, name: str, fidelity: str, flavour: str) -> dict[str, Any]:
    from .export.response_template import export_response_template

    return export_response_template(_template(source, name), fidelity=fidelity, flavour=flavour).to_json()


def export_response_template(source: str, name: str, fidelity: str, flavour: str) -> dict[str, Any]:
    """:func:`core.export.response_template.export_response_template` as JSON data, in a worker."""
    return isolation.call(_export, source, name, fidelity, flavour, name=name, what="export")


def _verify(source: str, name: str, fidelity: str, rt_json: str) -> dict[str, Any]:
    from .export.verify import verify

    return verify(json.loads(rt_json), _template(source, name), fidelity=fidelity).to_json()


def verify_export(source: str, name: str, fidelity: str, rt_json: str) -> dict[str, Any]:
    """:func:`core.export.verify.verify` of an exported response_template (JSON text), as JSON data, in a
    worker."""
    return isolation.call(_verify, source, name, fidelity, rt_json, name=name, what="export verification")


def _gbnf(source: str, name: str, fidelity: str) -> str:
    from .export.gbnf import export_gbnf as _run

    return _run(_template(source, name), fidelity=fidelity)


def export_gbnf(source: str, name: str, fidelity: str) -> str:
    """:func:`core.export.gbnf.export_gbnf`, in a worker."""
    return isolation.call(_gbnf, source, name, fidelity, name=name, what="export")


# ------------------------------------------------------------------------------------------------ samples, edit


def _sample(source: str, name: str, request: dict[str, Any], message: dict[str, Any]) -> str:
    from .chat.roundtrip import sample_output as _run

    return _run(_template(source, name), request, message)


def sample_output(source: str, name: str, request: dict[str, Any], message: dict[str, Any]) -> str:
    """:func:`core.chat.roundtrip.sample_output` (what a model following the template writes for ``message``),
    in a worker."""
    return isolation.call(_sample, source, name, request, message, name=name, what="render")


def _check(source: str, name: str) -> Any:
    from .lint.locate import check_source as _run

    return _run(source, name)[1]


def check_source(source: str, name: str = "<edited>") -> Any:
    """The :class:`~core.lint.locate.ErrorLocation` of the first compile or render error of an edited source
    (:func:`core.lint.locate.check_source`), or None; in a worker."""
    return isolation.call(_check, source, name, name=name, what="render")


# ------------------------------------------------------------------------------------------------ corpus


def corpus_row(path: str, fidelity: str = "llama.cpp") -> dict[str, Any]:
    """:func:`core.corpus.corpus_row` of one template file, in a worker (its analysis and export render).
    Raises :class:`~core.isolation.WorkerLimitError` when the worker was stopped (the row would say nothing
    about the file)."""
    from .corpus import corpus_row as _run

    return isolation.call(_run, path, fidelity, name=path.rsplit("/", 1)[-1], what="analysis")


def stopped_row(path: str, error: BaseException) -> dict[str, Any]:
    """The row :func:`core.corpus.corpus_row` would give a file that failed with ``error`` (for a worker stopped
    at its limit, which must not be cached as the file's row)."""
    from .corpus import COLUMNS

    row: dict[str, Any] = {c: None for c in COLUMNS}
    row.update(template=path.rsplit("/", 1)[-1], warning="", error=str(error))
    return row


def lint_file(path: str, fidelity: str = "llama.cpp") -> Any:
    """:func:`core.lint.corpus.lint_file` of one template file (a :class:`~core.lint.model.LintReport`), in a
    worker; a worker stopped at its limit gives a report with ``error`` set to the one-line limit message."""
    from .lint.corpus import lint_file as _run
    from .lint.model import LintReport

    name = path.rsplit("/", 1)[-1]
    try:
        return isolation.call(_run, path, fidelity, name=name, what="lint")
    except isolation.WorkerLimitError as e:
        return LintReport(name, error=str(e))
