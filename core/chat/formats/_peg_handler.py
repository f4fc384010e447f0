"""Shared pieces of the special families' formats, each declared once as a PEG (docs/engine.md).

Those llama.cpp handlers (``common/parsers/*.cpp``) are parser *builders*: they compose the same chat PEG
vocabulary the auto-parser uses. So they are rebuilt here on :class:`core.peg.chat.ChatBuilder`, and the result
is a :class:`HandlerParser` — the generator's :class:`~core.chat.generator.GeneratedParser` (same mapper,
same lenient parse of ``generation_prompt + output``, same incremental streaming state, same GBNF emission)
plus the handler's name and its rendered prompt.

Helpers: :func:`prepared_for` (the request path's prepared request), :func:`foreach_function` /
:func:`foreach_parameter` (llama.cpp ``parsers.cpp``), :func:`value_types` (llama.cpp
``common_chat_schema::value_types``), :func:`make_grammar`, :func:`grammar_for`, :func:`has_response_format`,
:func:`peg_parser` (arena + grammar + parser in one call);
``word`` / ``pattern`` (grammar triggers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...grammar import json_schema as S
from ...grammar.converter import GrammarBuilder
from ...peg import Arena
from ...peg.chat import build_chat_peg_parser, function_tools, indexed_function_tools
from ..base import GrammarTrigger, TriggerType
from ..generator import GeneratedParser
from ..prompt import PreparedRequest, prepare_request


def word(value: str) -> GrammarTrigger:
    """A ``word`` grammar trigger on ``value`` (the literal text)."""
    return GrammarTrigger(TriggerType.WORD, value)


def pattern(value: str) -> GrammarTrigger:
    """A ``pattern`` grammar trigger on ``value`` (a regex)."""
    return GrammarTrigger(TriggerType.PATTERN, value)


def prepared_for(template: Any, request: Any, prepared: PreparedRequest | None) -> PreparedRequest:
    """``prepared`` if given (the pipeline passes it), else the request prepared for ``template``."""
    return prepared if prepared is not None else prepare_request(template, request)


def foreach_function(tools: Any) -> list[dict]:
    """The function objects of the request's tools (non-function tools skipped, as llama.cpp
    ``foreach_function``)."""
    return function_tools(tools)


def foreach_function_indexed(tools: Any) -> list[tuple[int, dict]]:
    """``(index, function)`` of the request's function tools, ``index`` the position in ``tools`` (llama.cpp
    b11549 ``foreach_function`` passes it; rules are named ``tool-<index>``)."""
    return indexed_function_tools(tools)


def function_parameters_schema(function: dict) -> dict:
    """``function.parameters``, or ``{"type": "object", "properties": {}}`` when absent/null/empty (llama.cpp
    ``common_chat_tool_parameters``)."""
    return S.tool_parameters(function)


def foreach_parameter(function: dict) -> list[tuple[str, S.SchemaNode, bool]]:
    """``(name, schema node, required)`` of the function's top-level parameters in schema order; none when the
    parameters schema is not an object (llama.cpp ``foreach_parameter``)."""
    root = S.schema_from_json_lenient(function_parameters_schema(function))
    if not isinstance(root, S.ObjectSchema):
        return []
    return [(p.name, p.schema, p.required) for p in root.properties]


def has_response_format(request: Any, *, allow_empty: bool = False) -> bool:
    """The request carries a JSON-schema response format (an object; empty objects count only with
    ``allow_empty``, as GPT-OSS and DeepSeek test ``is_object()`` alone)."""
    s = getattr(request, "json_schema", None)
    return isinstance(s, dict) and (allow_empty or bool(s))


def make_grammar(arena: Arena, lazy: bool, notes: list[str] | None = None) -> str:
    """GBNF of ``arena`` (lazy: only the trigger rules); schema conversion problems are appended to
    ``notes``."""
    gb = GrammarBuilder()
    text = arena.to_gbnf(lazy=lazy, builder=gb)
    if notes is not None:
        notes.extend("grammar: " + e for e in gb.errors)
        notes.extend("grammar: " + w for w in gb.warnings)
    return text


def grammar_for(arena: Arena, notes: list[str], *, include: bool, lazy: bool,
                triggers: list[GrammarTrigger]) -> tuple[str | None, bool, list[GrammarTrigger]]:
    """``(grammar, grammar_lazy, grammar_triggers)`` for :func:`make_parser`: when ``include`` (the handler's
    llama.cpp builder emits a grammar: tools active, a response format…), the GBNF of ``arena`` (lazy or not,
    :func:`make_grammar`, problems appended to ``notes``) with ``triggers``; otherwise ``(None, False, [])``."""
    if not include:
        return None, False, []
    return make_grammar(arena, lazy, notes), lazy, triggers


@dataclass
class HandlerParser(GeneratedParser):
    """A special handler's parser: a :class:`GeneratedParser` plus ``name`` (the handler), ``prompt`` (the
    prompt the handler renders, continuation prefill included) and ``message_delimiters`` (role -> marker
    list, for the app). ``describe()`` names the handler before the readable PEG."""

    name: str = ""
    prompt: str | None = None
    message_delimiters: list[tuple[str, str]] = field(default_factory=list)
    # streaming: "content" when the root ends with a call's JSON arguments and nothing may follow them, so text
    # after their close is the content the recovery appends (``main+rest``); a stream then takes it as content
    # without a parse (:class:`core.chat.stream.OpenRegion` ``after``). None: a parse decides.
    after_arguments: str | None = None

    def describe(self) -> str:
        """A ``# special handler: <name>`` header line, then the arena's readable PEG (:meth:`Arena.describe`)."""
        return f"# special handler: {self.name} (llama.cpp common/parsers)\n" + self.arena.describe()


def make_parser(name: str, arena: Arena, *, generation_prompt: str, parser_generation_prompt: str | None = None,
                prompt: str | None = None, grammar: str | None = None, grammar_lazy: bool = False,
                grammar_triggers: list[GrammarTrigger] | None = None, preserved_tokens: list[str] | None = None,
                additional_stops: list[str] | None = None, supports_thinking: bool = False,
                thinking_start_tag: str = "", thinking_end_tags: list[str] | None = None,
                message_delimiters: list[tuple[str, str]] | None = None,
                notes: list[str] | None = None, after_arguments: str | None = None,
                format: str = "peg-native") -> HandlerParser:
    """Assemble a :class:`HandlerParser` (``format``: the format name llama.cpp reports)."""
    return HandlerParser(
        arena=arena,
        generation_prompt=generation_prompt,
        parser_generation_prompt=generation_prompt if parser_generation_prompt is None else parser_generation_prompt,
        grammar=grammar,
        grammar_lazy=grammar_lazy,
        grammar_triggers=list(grammar_triggers or []),
        preserved_tokens=list(preserved_tokens or []),
        additional_stops=list(additional_stops or []),
        format=format,
        supports_thinking=supports_thinking,
        thinking_start_tag=thinking_start_tag,
        thinking_end_tags=list(thinking_end_tags or []),
        notes=list(notes or []),
        name=name,
        prompt=prompt,
        message_delimiters=list(message_delimiters or []),
        after_arguments=after_arguments,
    )



def peg_parser(name: str, root: Any, *, generation_prompt: str, parser_generation_prompt: str, include: bool,
               lazy: bool, trigger: GrammarTrigger, **fields: Any) -> HandlerParser:
    """The :class:`HandlerParser` of a family whose format is the PEG ``root(builder)`` returns: the arena, its
    grammar when ``include`` (lazy or not, one ``trigger``; see :func:`grammar_for`) and ``fields`` (preserved
    tokens, thinking tags, …) as :func:`make_parser` takes them."""
    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    grammar, lazy, triggers = grammar_for(arena, notes, include=include, lazy=lazy, triggers=[trigger])
    fields.setdefault("supports_thinking", True)
    return make_parser(name, arena, generation_prompt=generation_prompt,
                       parser_generation_prompt=parser_generation_prompt, grammar=grammar, grammar_lazy=lazy,
                       grammar_triggers=triggers, notes=notes, **fields)
