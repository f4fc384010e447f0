"""Gemma 4 handler (llama.cpp ``common/parsers/gemma4.cpp`` + ``common_chat_peg_gemma4_mapper``).

Output shape (after the generation prompt ``<|turn>model\\n``)::

    [<|channel>thought\\n REASONING <channel|>] CONTENT [<|tool_call>call:NAME{k:v,…}<tool_call|>]…

Tool arguments use Gemma's own literal syntax — bare keys, strings delimited by ``<|"|>``, JSON numbers,
``true``/``false``/``null``, nested ``{…}`` and ``[…]`` — and are converted to compact JSON. Stray
``<|channel>`` tokens before a thought block and a trailing empty ``<|channel>thought\\n<channel|>`` or lone
``<channel|>`` are tolerated as llama.cpp does. Text after the tool calls (the templates render a turn's final
answer there) is kept as content up to ``<|tool_response>`` / ``<turn|>``, where llama.cpp drops it.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from ...memo import MISSING, BoundedMemo
from ...jinja.template import ChatTemplate
from ..mapper import escape_json_inner, register_args_converter, register_args_hook
from ..repairs import (CALL_OPENER_DROPPED, CALLS_AFTER_TEXT, CALLS_IN_ONE_BLOCK, GLUED_ARGUMENTS,
                       STRING_OPENER_OMITTED, THOUGHT_LABEL_OMITTED, UNMARKED_ARGUMENT_VALUES)
from ..request import ChatRequest
from ._peg_handler import HandlerParser, peg_parser, word
from ._request_view import PromptContext, RequestView, request_view

NAME = "gemma4"

TURN = "<|turn>model\n"
CHANNEL = "<|channel>"
THOUGHT = "<|channel>thought"
CHANNEL_END = "<channel|>"
CALL = "<|tool_call>"
CALL_OPEN = "<|tool_call>call:"
CALL_END = "<tool_call|>"
STR = '<|"|>'
TOOL_RESPONSE = "<|tool_response>"
TURN_END = "<turn|>"
PRESERVED = ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|turn>"]
DELIMITERS = {"user": "<|turn>user", "assistant": "<|turn>model"}


@dataclass(frozen=True)
class CallSyntax:
    """The markers of a Gemma-style call ``CALL_START call:NAME{key:STRING value STRING,…} CALL_END``.

    ``call_start`` (``<|tool_call>``), ``call_end`` (``<tool_call|>``), ``string`` (the string delimiter,
    ``<|"|>``); ``quoted_values``: the template writes every argument value as a string (FunctionGemma's
    ``{{ value }}`` between ``<escape>``), so a string value is converted to the type the tool's schema declares
    for that key (improvement ``gemma-call-syntax``). :data:`GEMMA4_SYNTAX` is llama.cpp's."""

    call_start: str
    call_end: str
    string: str
    quoted_values: bool = False

    @property
    def call_open(self) -> str:
        """``call_start + "call:"``."""
        return self.call_start + "call:"


GEMMA4_SYNTAX = CallSyntax(CALL, CALL_END, STR)


def is_outdated_template(normalized_source: str) -> bool:
    """Older Gemma 4 templates (without ``{#- OpenAI Chat Completions:``) need tool responses folded into the
    assistant turn before rendering; see :func:`prepare_messages`."""
    return "{#- OpenAI Chat Completions:" not in normalized_source


def prepare_messages(messages: list[dict[str, Any]], normalized_source: str) -> list[dict[str, Any]]:
    """Request-side message rewrite llama.cpp applies for outdated Gemma 4 templates
    (``workaround::convert_tool_responses_gemma4``): each ``assistant(tool_calls) → tool… → [assistant(content)]``
    run becomes one assistant message with ``tool_calls``, ``tool_responses`` ([{name, response}], the response
    JSON-decoded when possible) and the following content / the first message's reasoning. Other templates:
    messages returned unchanged."""
    if not is_outdated_template(normalized_source):
        return messages

    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        calls = msg.get("tool_calls") if isinstance(msg, dict) else None
        if not (isinstance(msg, dict) and msg.get("role") == "assistant" and isinstance(calls, list) and calls):
            out.append(msg)
            i += 1
            continue
        reasoning = msg.get("reasoning_content") if isinstance(msg.get("reasoning_content"), str) else None
        tool_calls = list(calls)
        responses: list[dict[str, Any]] = []
        i += 1
        while i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") == "tool":
            cur = messages[i]
            response: Any = None
            if "content" in cur:
                content = cur["content"]
                if isinstance(content, str):
                    try:
                        response = json.loads(content)
                    except ValueError:
                        response = content
                else:
                    response = content
            name = ""
            idx = len(responses)
            if idx < len(tool_calls) and isinstance(tool_calls[idx], dict):
                name = (tool_calls[idx].get("function") or {}).get("name", "") or ""
            if not name:
                name = cur.get("tool_call_id", "") or ""
            responses.append({"name": name, "response": response})
            i += 1
        content: Any = None
        if i < len(messages) and isinstance(messages[i], dict) and messages[i].get("role") == "assistant":
            nxt = messages[i]
            has_calls = isinstance(nxt.get("tool_calls"), list) and bool(nxt.get("tool_calls"))
            c = nxt.get("content")
            if not has_calls and ((isinstance(c, str) and c) or (isinstance(c, list) and c)):
                content = c
                i += 1
        merged: dict[str, Any] = {"role": "assistant", "tool_calls": tool_calls}
        if responses:
            merged["tool_responses"] = responses
        if content is not None:
            merged["content"] = content
        if reasoning is not None:
            merged["reasoning_content"] = reasoning
        out.append(merged)
    return out


# ------------------------------------------------------------------------------------------------------------
# Gemma literal values → JSON (common_chat_peg_gemma4_mapper)
# ------------------------------------------------------------------------------------------------------------


class _NotGemma(ValueError):
    """The text is not a Gemma value where one is expected."""


_SPACE = re.compile(r"[ \t\n\v\f\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_PREFIX = re.compile(r"-?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?\Z")
_NUMBER_CHARS = frozenset("0123456789.eE+-")


def _skip_ws(text: str, pos: int) -> int:
    return _SPACE.match(text, pos).end()  # type: ignore[union-attr]


def _cut_delimiter(text: str, start: int, delim: str) -> int:
    """Where a string cut by the end of ``text`` stops: before a proper prefix of ``delim`` ending the text (it
    may become the closing delimiter), else at the end."""
    n = len(text)
    for k in range(min(len(delim) - 1, n - start), 0, -1):
        if text.endswith(delim[:k]):
            return n - k
    return n


def _g4_value(text: str, pos: int, string: str = STR, types: dict[str, str] | None = None,
              memo: dict[int, tuple[str, int]] | None = None, bare: bool = False) -> tuple[str, int, bool]:
    """Read one Gemma value at ``pos``: ``(json_text, end, done)``; ``done`` False means the text ended inside it
    and ``json_text`` is the growing partial conversion. Raises :class:`_NotGemma`. ``string`` is the string
    delimiter; ``types`` (key -> JSON-schema type, only for a :attr:`CallSyntax.quoted_values` syntax's
    top-level dict) converts string values to the declared type and shows a member only once it is complete.
    ``memo``: position -> (json_text, end) of the complete values read so far in this text or in a text it
    extends (a complete value is read from the text before its end, which a longer text keeps). ``bare``: values
    written without the string delimiter are read too (repair ``unmarked-argument-values``,
    :func:`_bare_value`)."""
    if memo is None:
        return _g4_read(text, pos, string, types, None, bare)
    hit = memo.get(pos)
    if hit is not None:
        return hit[0], hit[1], True
    out = _g4_read(text, pos, string, types, memo, bare)
    if out[2]:
        memo[pos] = (out[0], out[1])
    return out


def _g4_read(text: str, pos: int, string: str, types: dict[str, str] | None,
             memo: dict[int, tuple[str, int]] | None, bare: bool = False) -> tuple[str, int, bool]:
    n = len(text)
    if pos >= n:
        return "", n, False
    if text.startswith(string, pos):
        start = pos + len(string)
        close = text.find(string, start)
        if close != -1:
            return '"' + escape_json_inner(text[start:close]) + '"', close + len(string), True
        return '"' + escape_json_inner(text[start:_cut_delimiter(text, start, string)]), n, False
    if n - pos < len(string) and string.startswith(text[pos:]):
        return "", n, False
    c = text[pos]
    if c == "{":
        return _g4_container(text, pos, "{", "}", True, string, types, memo, bare)
    if c == "[":
        return _g4_container(text, pos, "[", "]", False, string, None, memo, bare)
    if c == '"':   # repair unmarked-argument-values: a JSON string in plain quotes (the grammar gates it)
        return _plain_string(text, pos)
    if bare:
        return _bare_value(text, pos)
    if c == "-" or c.isdigit():
        m = _NUMBER.match(text, pos)
        end = m.end() if m is not None else pos
        if pos < end < n and text[end] not in _NUMBER_CHARS:
            return text[pos:end], end, True
        if end >= n or _NUMBER_PREFIX.match(text, pos):
            return text[pos:], n, False   # the number may still grow ("1", "1e", "-")
        return _unopened_string(text, pos, string, "malformed number")
    for lit in ("true", "false", "null"):
        if lit[0] == c:
            if text.startswith(lit, pos):
                return lit, pos + len(lit), True
            if n - pos < len(lit) and lit.startswith(text[pos:]):
                return text[pos:], n, False
            return _unopened_string(text, pos, string, f"expected {lit}")
    return _unopened_string(text, pos, string, "expected a Gemma 4 value")


def _unopened_string(text: str, pos: int, string: str, why: str) -> tuple[str, int, bool]:
    """A string value written without its opening delimiter, up to its closing one (repair
    ``string-opener-omitted``; the grammar gates it, so at llama.cpp fidelity no parse reaches here): its text holds
    none of ``<{}[]``. Nothing of it shows before its closing delimiter. Raises :class:`_NotGemma` (``why``) for
    any other text."""
    n = len(text)
    close = text.find(string, pos)
    if close == -1:
        # still open: the grammar waits only while none of those characters came (an until that stops at them),
        # so the text is not searched again at every feed of a stream
        if pos >= _cut_delimiter(text, pos, string):
            raise _NotGemma(why)
        return "", n, False
    if close == pos or _NOT_IN_UNOPENED.search(text, pos, close):
        raise _NotGemma(why)
    return '"' + escape_json_inner(text[pos:close]) + '"', close + len(string), True


def _g4_container(text: str, pos: int, open_: str, close: str, is_dict: bool, string: str = STR,
                  types: dict[str, str] | None = None,
                  memo: dict[int, tuple[str, int]] | None = None, bare: bool = False) -> tuple[str, int, bool]:
    n = len(text)
    parts: list[str] = []

    def partial() -> tuple[str, int, bool]:
        return open_ + ",".join(parts), n, False

    p = _skip_ws(text, pos + 1)
    if p >= n:
        return partial()
    if text[p] == close:
        return open_ + close, p + 1, True
    while True:
        if is_dict:
            # key: [^:}]+ then ':' (the key streams as it grows)
            j = p
            while j < n and text[j] not in ":}":
                j += 1
            if j == p:
                if j >= n:
                    return partial()
                raise _NotGemma("expected a key")
            key = text[p:j]
            if j >= n:
                if types is None:
                    parts.append('"' + escape_json_inner(key))
                elif parts:  # the comma before this member was shown already: keep it shown
                    parts.append("")
                return partial()
            if text[j] != ":":
                raise _NotGemma("expected ':'")
            p = _skip_ws(text, j + 1)
            at_value = p
            val, p, done = _g4_value(text, p, string, None, memo, bare)
            if types is not None:
                if not done:  # the type conversion needs the whole value: nothing of it streams before
                    if parts:  # (the comma before this member does)
                        parts.append("")
                    return partial()
                val = typed_value(val, types.get(key, ""))
            parts.append('"' + escape_json_inner(key) + '":' + val)
        else:
            val, p, done = _g4_value(text, p, string, None, memo, bare)
            parts.append(val)
        if not done:
            return partial()
        if p >= n:
            return partial()
        if text[p] == ",":
            p = _skip_ws(text, p + 1)
            if p >= n:
                parts.append("")
                return partial()
            continue
        if is_dict and text[p] not in close and text.startswith(string, at_value):
            continue   # repair glued-arguments: the next key right after a string's closing delimiter
        p = _skip_ws(text, p)
        if p >= n:
            return partial()
        if text[p] == close:
            return open_ + ",".join(parts) + close, p + 1, True
        raise _NotGemma(f"expected ',' or {close!r}")


_ENDS_BARE = ",}]"
_NOT_IN_UNOPENED = re.compile(r"[<{}\[\]]")   # string-opener-omitted: a value that holds one is no such string
UNOPENED_STOPS = ["<", "{", "}", "[", "]"]   # (an until remembers how far it searched: linear in a stream)
_JSON_SCALAR = re.compile(r"(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)")
_PYTHON_WORDS = {"None": "null", "True": "true", "False": "false"}


def _plain_string(text: str, pos: int) -> tuple[str, int, bool]:
    """A JSON string in plain double quotes at ``pos`` (repair ``unmarked-argument-values``): ``(json_text, end,
    done)`` like :func:`_g4_value`, the string as written (its escapes kept); a cut string up to its last whole
    escape (a surrogate pair counts as one). Raises :class:`_NotGemma` for text that is no JSON string."""
    n = len(text)
    i = pos + 1
    while i < n:
        ch = text[i]
        if ch == '"':
            try:
                json.loads(text[pos:i + 1])
            except ValueError as e:
                raise _NotGemma("not a JSON string") from e
            return text[pos:i + 1], i + 1, True   # as written: valid JSON, every escape kept
        if ch != "\\":
            i += 1
            continue
        if i + 1 >= n:
            break
        if text[i + 1] != "u":
            i += 2
            continue
        if i + 6 > n:
            break
        high = 0xD800 <= _hex(text[i + 2:i + 6]) <= 0xDBFF
        if high and i + 12 > n:
            break
        i += 12 if high else 6
    try:
        json.loads(text[pos:i] + '"')
    except ValueError as e:
        raise _NotGemma("not a JSON string") from e
    return text[pos:i], n, False


def _hex(digits: str) -> int:
    try:
        return int(digits, 16)
    except ValueError as e:
        raise _NotGemma("bad \\u escape") from e


def _bare_value(text: str, pos: int) -> tuple[str, int, bool]:
    """A value written without the string delimiter, up to the next ``,`` / ``}`` / ``]`` (repair
    ``unmarked-argument-values``, for a template that writes every value between its delimiters): Python's
    ``None`` / ``True`` / ``False`` and JSON's own scalars as themselves, any other text as the string it is
    (trimmed). Nothing of it shows before its delimiter: until then it may still turn out a number or a string."""
    n = len(text)
    end = pos
    while end < n and text[end] not in _ENDS_BARE:
        end += 1
    if end >= n:
        return "", n, False
    word = text[pos:end].strip()
    if not word or word[0] in "<{[\"":
        raise _NotGemma("expected a value")
    if word in _PYTHON_WORDS:
        return _PYTHON_WORDS[word], end, True
    if _JSON_SCALAR.fullmatch(word):
        return word, end, True
    return '"' + escape_json_inner(word) + '"', end, True


def gemma_args_json(text: str, string: str = STR) -> str:
    """The JSON of a Gemma argument dict ``text`` (cut or not by the end of the input: then the growing partial
    conversion); "" when it does not read as one. The mapper's value hook for Gemma 4's arguments."""
    return _converted(text, string, None)


# the complete values of the last text converted (text, string delimiter, types, memo): a stream converts its
# growing arguments once per parse, and each conversion reads only what the last one left open. Replaced, never
# changed in place, so that concurrent conversions (each checks that its text extends the memo's) cannot mix.
_LAST: tuple[str, tuple[str, bool], Any, dict[int, tuple[str, int]]] = ("", (STR, False), None, {})


def _converted(text: str, string: str, types: dict[str, str] | None, bare: bool = False) -> str:
    global _LAST
    last_text, last_string, last_types, last_memo = _LAST
    if last_string == (string, bare) and last_types is types and text.startswith(last_text):
        memo = dict(last_memo)
    else:
        memo = {}
    try:
        out = _g4_value(text, 0, string, types, memo, bare)[0]
    except _NotGemma:
        return ""
    _LAST = (text, (string, bare), types, memo)
    return out


# an open string value is the end of the partial conversion: its text streams escaped (mapper.HOOK_STRINGS)
ARGS_TAG = register_args_converter("gemma4", gemma_args_json, strings=("gemma4-string-content",))


def typed_value(json_text: str, schema_type: Any) -> str:
    """A complete JSON value ``json_text``; when it is a string and ``schema_type`` (a JSON-schema ``type``)
    asks for another type that the string spells — ``"3"`` for ``integer``, ``"2.5"`` for ``number``,
    ``"True"``/``"false"`` for ``boolean``, ``"None"``/``"null"`` for ``null``, JSON text for ``object`` /
    ``array`` — that value as JSON text; otherwise ``json_text`` unchanged (improvement ``gemma-call-syntax``:
    a template that writes ``{{ value }}`` between string delimiters turns every value into text)."""

    if not json_text.startswith('"') or not schema_type:
        return json_text
    types = schema_type if isinstance(schema_type, list) else [schema_type]
    if "string" in types:
        return json_text
    try:
        s = json.loads(json_text)
    except ValueError:
        return json_text
    t = s.strip()
    for ty in types:
        if ty == "integer" and re.fullmatch(r"-?\d+", t):
            return str(int(t))
        if ty == "number" and re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", t):
            return t
        if ty == "boolean" and t.lower() in ("true", "false"):
            return t.lower()
        if ty == "null" and t in ("None", "null"):
            return "null"
        if ty in ("object", "array"):
            try:
                v = json.loads(t)
            except ValueError:
                continue
            if isinstance(v, dict if ty == "object" else list):
                return json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    return json_text


# ------------------------------------------------------------------------------------------------------------
# Parser
# ------------------------------------------------------------------------------------------------------------


def build(template: ChatTemplate, request: ChatRequest, generation_prompt: str, report: Any = None,
          prepared: Any = None) -> HandlerParser:
    """Gemma 4 parser, prompt and grammar for ``request`` (llama.cpp ``common_chat_params_init_gemma4``).

    ``generation_prompt`` is the request path's (LCP of the renders without / with ``add_generation_prompt``);
    ``prepared`` the request path's prepared request, if any. When the rendered prompt ends with ``<turn|>\n``
    (the template did not open the model turn) ``<|turn>model\n`` is appended and becomes the generation
    prompt; a continuation rebuilds the generation prompt from the continued message."""
    view = request_view(request)
    src = template.normalized_source
    ctx = PromptContext(template, request, prepared)
    msgs = prepare_messages(ctx.messages, src)
    gp = generation_prompt
    prompt: str | None = None
    if view.has_continuation:
        base = ctx.render(False, msgs)
        gp = TURN if base.endswith("<turn|>\n") else ""
        gp += view.prefill("<|channel>thought\n", CHANNEL_END)
        prompt = base + gp
    elif ctx.add_generation_prompt:
        prompt = ctx.render(True, msgs)
        if prompt.endswith("<turn|>\n"):
            # the template did not open the model turn (content + tool-call history): open it here
            gp = TURN
            prompt += TURN
    else:
        prompt = ctx.render(False, msgs)

    include_grammar = view.has_schema or view.tools_active
    return peg_parser(NAME, lambda p: _peg_root(p, view), generation_prompt=gp,
                      parser_generation_prompt=generation_prompt, include=include_grammar,
                      lazy=not (view.has_schema or view.required), trigger=word(CALL), preserved_tokens=PRESERVED,
                      format="peg-gemma4", prompt=prompt or None, thinking_start_tag="<|channel>thought",
                      thinking_end_tags=["<channel|>"], message_delimiters=list(DELIMITERS.items()))


def _peg_root(p: Any, view: RequestView, syntax: CallSyntax = GEMMA4_SYNTAX, turn: str | None = None) -> Any:
    """The format: llama.cpp's Gemma 4 parser on core.peg's ChatBuilder, for the parse and the grammar;
    ``syntax`` gives the call markers (llama.cpp's by default). ``turn``: the generation prompt the parse reads
    first instead of Gemma 4's ``<|turn>model\n`` (``gemma-call-syntax``; the grammar keeps llama.cpp's)."""
    CALL, CALL_OPEN, CALL_END, STR = syntax.call_start, syntax.call_open, syntax.call_end, syntax.string  # noqa: N806
    if turn is not None:   # made last, so that the grammar's helper rules keep their numbers
        root = _peg_root(p, view, syntax)
        return p.gbnf(p.literal(turn), "") + root
    start = p.rule("start", p.optional(p.literal(TURN)))
    if view.extract_reasoning:
        p.rule("thought", p.literal(THOUGHT) + p.space() + p.reasoning(p.until(CHANNEL_END)) + p.literal(CHANNEL_END))
    else:
        p.rule("thought", p.content(p.literal(THOUGHT) + p.space() + p.until(CHANNEL_END) + p.literal(CHANNEL_END)))
    empty_channels = p.gbnf(p.zero_or_more(p.literal(CHANNEL) + p.negate(p.literal("thought"))), "")
    thought = (p.peek(p.literal(CHANNEL)) + empty_channels + p.ref("thought")) | p.negate(p.literal(CHANNEL))
    if view.extract_reasoning and THOUGHT_LABEL_OMITTED in p.repairs:
        # repair thought-label-omitted: <|channel>REASONING<channel|> without the thought label (vLLM reads the
        # channel and strips the label only when written); tried after llama.cpp's channel
        p.late.append(lambda: p.widen_late(thought, THOUGHT_LABEL_OMITTED, lambda _: (
            p.literal(CHANNEL) + p.negate(p.literal("thought")) + p.reasoning(p.until_one_of([CHANNEL_END, CALL]))
            + p.optional(p.literal(CHANNEL_END)))))

    if view.has_schema:
        response = (p.literal("```json") << p.content(p.schema(p.json(), "response-format-schema", view.json_schema))
                    << p.literal("```"))
        return start + p.optional(thought) + response

    if view.tools_active:
        p.rule("gemma4-string-content", p.until(STR))
        delimited = p.literal(STR) + p.ref("gemma4-string-content") + p.literal(STR)
        p.rule("gemma4-string", delimited)
        p.rule("gemma4-bool", p.json_bool())
        p.rule("gemma4-null", p.json_null())
        p.rule("gemma4-number", p.json_number())
        p.rule("gemma4-dict-key", p.rule("gemma4-dict-key-name", p.chars("[^:}]", 1, -1)) + p.literal(":"))
        p.rule("gemma4-dict-kv", p.ref("gemma4-dict-key") + p.space() + p.ref("gemma4-value"))

        def dict_body() -> Any:
            member = p.ref("gemma4-dict-kv")
            members = p.seq(member, p.zero_or_more(p.seq(p.literal(","), p.space(), member)))
            if GLUED_ARGUMENTS in p.repairs:
                # repair glued-arguments: string members whose closing delimiter runs straight into the next
                # key, no comma between; made once the tree is built, so the grammar stays llama.cpp's
                p.late.append(lambda: p.widen_late(member, GLUED_ARGUMENTS, lambda orig: p.seq(p.one_or_more(p.seq(
                    p.ref("gemma4-dict-key"), p.space(), p.ref("gemma4-string"), p.negate(p.literal(",")),
                    p.peek(p.ref("gemma4-dict-key")))),
                    orig), first=True))
            return p.seq(p.literal("{"), p.space(),
                         p.choice(p.literal("}"), p.seq(members, p.space(), p.literal("}"))))

        def array_body() -> Any:
            value = p.ref("gemma4-value")
            elements = p.seq(value, p.zero_or_more(p.seq(p.literal(","), p.space(), value)))
            return p.seq(p.literal("["), p.space(),
                         p.choice(p.literal("]"), p.seq(elements, p.space(), p.literal("]"))))

        p.rule("gemma4-dict", dict_body)
        p.rule("gemma4-array", array_body)
        held: list[Any] = []   # the value choice, widened below

        def value_body() -> Any:
            held.append(p.choice(p.ref("gemma4-string"), p.ref("gemma4-dict"), p.ref("gemma4-array"),
                                 p.ref("gemma4-number"), p.ref("gemma4-bool"), p.ref("gemma4-null")))
            return held[0]

        p.rule("gemma4-value", value_body)
        values = held[0]
        bare = syntax.quoted_values and UNMARKED_ARGUMENT_VALUES in p.repairs
        if UNMARKED_ARGUMENT_VALUES in p.repairs:
            # repair unmarked-argument-values: a string in plain JSON quotes (tried after the template's values),
            # and where the template quotes every value, a bare one (tried first, where no value of the template's
            # ends before the next delimiter); made once the tree is built, so the grammar stays llama.cpp's
            p.late.append(lambda: p.widen_late(values, UNMARKED_ARGUMENT_VALUES, lambda _: p.json_string()))
            if bare:
                delimiter = p.space() + p.one("[,}\\]]")
                scalar = p.choice(p.ref("gemma4-number"), p.ref("gemma4-bool"), p.ref("gemma4-null"))
                p.late.append(lambda: p.widen_late(values, UNMARKED_ARGUMENT_VALUES, lambda _: p.negate(
                    scalar + delimiter) + p.choice(*[p.literal(w) + p.peek(delimiter) for w in _PYTHON_WORDS], (
                        p.negate(p.one('[<{\\["]')) + p.chars('[^,}\\]<{\\["]', 1, -1)
                        + p.peek(p.one("[,}\\]]")))), first=True))

        if STRING_OPENER_OMITTED in p.repairs and not bare:
            # repair string-opener-omitted: a string written without its opening delimiter, up to its closing one,
            # where the text does not start as a number or a literal (those read as before); made once the tree
            # is built, so the grammar stays llama.cpp's
            p.late.append(lambda: p.widen_late(delimited, STRING_OPENER_OMITTED, lambda _: p.negate(p.choice(
                p.ref("gemma4-number"), p.ref("gemma4-bool"), p.ref("gemma4-null"), p.literal(STR)))
                + p.until_one_of(UNOPENED_STOPS) + p.literal(STR)))

        def args(tool: Any) -> Any:
            if syntax == GEMMA4_SYNTAX:
                return p.tag(ARGS_TAG, p.ref("gemma4-dict"))
            # the syntax (and the tool's declared types) ride in the tree, read by the hook
            param = {"string": STR, "types": _declared_types(tool) if syntax.quoted_values else None, "bare": bare}
            return p.tag(SYNTAX_ARGS_TAG, p.tag(SYNTAX_PARAM + json.dumps(param), p.ref("gemma4-dict")))

        choices = [p.rule(f"tool-{t.index}", p.tool(p.seq(
            p.tool_open(p.tool_name(p.literal(t.name)) + p.peek(p.literal("{"))), args(t)))) for t in view.tools]
        named = p.choice(*choices)
        opener = p.literal(CALL_OPEN)
        head = opener + named
        closer = p.literal(CALL_END)
        block = head + closer
        tool_call = p.trigger_rule("tool-call", p.repeat(block, 1 if view.required else 0, -1 if view.parallel else 1))
        if CALLS_IN_ONE_BLOCK in p.repairs and view.parallel:
            # repair calls-in-one-block: a call whose closer is left out where call:NAME{…} follows, and that call
            # with no opener of its own; each call stays one item of the calls' repetition (a stream maps it
            # once). Made once the tree is built, so the grammar stays llama.cpp's (the opener is widened by
            # call-opener-dropped: the call is, not the opener a second time)
            p.late.append(lambda: p.widen_late(closer, CALLS_IN_ONE_BLOCK, lambda _: (
                p.space() + p.peek(p.literal("call:") + named))))
            p.late.append(lambda: p.widen_late(block, CALLS_IN_ONE_BLOCK, lambda _: p.literal("call:") + named
                                               + closer))
        if CALL_OPENER_DROPPED in p.repairs:
            # repair call-opener-dropped: the opener with a stray colon (<|tool_call>:call:); made once the tree
            # is built, so the grammar stays llama.cpp's
            p.late.append(lambda: p.widen_late(opener, CALL_OPENER_DROPPED, lambda _: p.literal(CALL + ":call:")))
        # extension (llama.cpp ignores text after the calls; not in the grammar): the templates render a final
        # answer after a turn's calls, kept as content up to Gemma's end-of-turn tokens (the rest is ignored)
        after = p.content(p.until_one_of([CHANNEL, CHANNEL_END, CALL, TOOL_RESPONSE, TURN_END]))
        if CALLS_AFTER_TEXT in p.repairs and view.parallel:
            # repair calls-after-text: a further call after the text that follows the calls (ollama reads calls
            # anywhere in the answer); the text stays content, in order
            later = p.repair(CALLS_AFTER_TEXT, p.one_or_more(CALL_OPEN + p.choice(*choices) + CALL_END))
            after = after + p.optional(later)
        answer = p.gbnf(p.zero_or_more(thought + after), "") + p.ignored(p.rest())
        if view.required:
            return start + thought + tool_call + answer
        scan = p.rule("scan-to-toolcall", p.until(CALL))
        text = p.content(p.until_one_of([CHANNEL, CHANNEL_END, CALL]))
        content = p.rule("content", text)
        if CALL_OPENER_DROPPED in p.repairs:
            # repair call-opener-dropped: calls written without their opener token (call:NAME{…}) where a
            # content segment starts (after the thought channel or at the start of the answer, past white
            # space) and only for a declared tool whose arguments read whole; prose that mentions a call
            # further in stays content
            p.late.append(lambda: p.widen_late(text, CALL_OPENER_DROPPED, lambda _: p.one_or_more(
                p.content(p.space()) + p.literal("call:") + named + p.optional(p.literal(CALL_END))), first=True))
        message = p.rule("message", thought + content)
        return start + p.zero_or_more(message) + scan + tool_call + answer

    content = p.rule("content", p.content(p.until_one_of([CHANNEL, CHANNEL_END])))
    message = p.rule("message", thought + content)
    return start + p.one_or_more(message) + p.ignored(p.rest())   # a stray <channel|> and what follows


# ------------------------------------------------------------------------------------------------------------
# Improvement gemma-call-syntax: the Gemma call syntax with the template's own markers
# ------------------------------------------------------------------------------------------------------------

_PROBE_NAME, _PROBE_KEY, _PROBE_VALUE, _PROBE_NUM_KEY = "probe_fn", "probe_key", "probe_value", "probe_num"
_TOKEN = r"<[^<>\s]+>"
# the probe call in a render; its arguments do not run across another probe call (linear on a render that
# repeats the call's opener without closing it: core/export/redos.py, SPAN)
_CALL_PROBE = re.compile(rf"({_TOKEN})call:{_PROBE_NAME}\{{((?:(?!call:{_PROBE_NAME}\{{).)*?)\}}({_TOKEN})", re.S)
# per normalised template source: bounded, since a server sees any number of pasted templates
_SYNTAX_CACHE = BoundedMemo("gemma call syntax", max_entries=1024, max_bytes=64 * 2**20)


def call_syntax_of(template: ChatTemplate) -> CallSyntax | None:
    """The Gemma-style call syntax the template renders, learned from one render, or None.

    Renders a user message and an assistant call of ``probe_fn`` with arguments ``{"probe_key": "probe_value",
    "probe_num": 7}`` (as an object, then as JSON text if that fails) and looks for
    ``<A>call:probe_fn{probe_key:<S>probe_value<S>…}<B>`` where ``<A>``, ``<S>``, ``<B>`` are single tokens
    written ``<…>``: ``call_start`` = A, ``string`` = S, ``call_end`` = B; ``quoted_values`` when the number is
    written ``<S>7<S>``. Source: the syntax of llama.cpp's Gemma 4 handler (``'<|tool_call>call:'``) and
    FunctionGemma's template (``<start_function_call>call:NAME{k:<escape>v<escape>}<end_function_call>``).
    Cached per normalised source; never raises (a template that fails to render has no syntax)."""
    key = template.normalized_source
    hit = _SYNTAX_CACHE.get(key)
    if hit is not MISSING:
        return hit

    tool = {"type": "function", "function": {"name": _PROBE_NAME, "description": "probe",
                                             "parameters": {"type": "object", "properties": {
                                                 _PROBE_KEY: {"type": "string"},
                                                 _PROBE_NUM_KEY: {"type": "integer"}}}}}
    args = {_PROBE_KEY: _PROBE_VALUE, _PROBE_NUM_KEY: 7}
    found: CallSyntax | None = None
    for a in (args, json.dumps(args)):
        msgs = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": _PROBE_NAME, "arguments": a}}]}]
        try:
            text = template.render({"messages": msgs, "tools": [tool], "add_generation_prompt": False,
                                    "bos_token": "", "eos_token": ""})
        except Exception:  # noqa: BLE001 - a template that cannot render this has no detectable syntax
            continue
        m = _CALL_PROBE.search(text)
        if not m:
            continue
        s = re.search(rf"{_PROBE_KEY}:({_TOKEN}){_PROBE_VALUE}\1", m.group(2))
        if not s:
            continue
        string = s.group(1)
        found = CallSyntax(m.group(1), m.group(3), string,
                           quoted_values=f"{_PROBE_NUM_KEY}:{string}7{string}" in m.group(2))
        break
    _SYNTAX_CACHE.put(key, found, len(key) + 200)
    return found


def build_syntax(template: ChatTemplate, request: ChatRequest, generation_prompt: str, syntax: CallSyntax,
                 prepared: Any = None) -> HandlerParser:
    """The Gemma 4 parser with ``syntax``'s markers (improvement ``gemma-call-syntax``), for a template the
    auto-parser would serve. Unlike :func:`build` the request path renders the prompt (no Gemma 4 message
    rewrite, no appended turn), the parse starts with the request path's generation prompt, and thinking is not
    supported; values are typed by the tool schema when ``syntax.quoted_values``."""
    view = request_view(request)
    return peg_parser(NAME, lambda p: _peg_root(p, view, syntax, turn=generation_prompt),
                      generation_prompt=generation_prompt, parser_generation_prompt=generation_prompt,
                      include=view.has_schema or view.tools_active, lazy=not (view.has_schema or view.required),
                      trigger=word(syntax.call_start),
                      preserved_tokens=[syntax.call_start, syntax.call_end, syntax.string], format="peg-gemma4",
                      supports_thinking=False)


def _declared_types(tool: Any) -> dict[str, Any]:
    """Key -> the JSON-schema ``type`` the tool declares for each top-level parameter."""
    props = tool.parameters.get("properties")
    return {k: v.get("type", "") for k, v in props.items() if isinstance(v, dict)} if isinstance(props, dict) else {}


SYNTAX_PARAM = "gemma-syntax:"
"""Prefix of the tag under a ``gemma-call-syntax`` call's arguments: the JSON after it holds the string delimiter
and the tool's declared types."""


def _syntax_args_json(source: str, node: Any) -> str:
    """The value hook of ``gemma-call-syntax`` arguments: :func:`gemma_args_json` with the syntax and types the
    child tag carries."""
    param = _syntax_param(node.children[0].tag) if node.children else None
    if param is None:
        return ""
    string, types, bare = param
    return _converted(source[node.start:node.end], string, types, bare)


@functools.lru_cache(maxsize=64)
def _syntax_param(tag: str) -> tuple[str, dict[str, Any] | None, bool] | None:
    if not tag.startswith(SYNTAX_PARAM):
        return None
    param = json.loads(tag[len(SYNTAX_PARAM):])
    return param["string"], param["types"], bool(param.get("bare"))


SYNTAX_ARGS_TAG = register_args_hook("gemma-syntax", _syntax_args_json)
