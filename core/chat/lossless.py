"""The lossless contract, as a check: no word of a model output is missing from the message parsed from it.

Every character of an output ends up in ``content``, ``reasoning_content`` or a tool call's id, name or
arguments, or is markup the parser knows (a marker of the analysis, a special token, a literal of the parser's
grammar such as a JSON call's ``"name"`` key). The check works on *words*: every run of at least
:data:`MIN_WORD` letters or digits of the output must occur in the message's fields (arguments both as written
and JSON-decoded, so an escaped string still counts) or inside one of the markup strings. A grammar literal
that is just a tool or parameter name of the request is not markup, so a dropped call's name is a lost word.

:func:`markup_of` collects the markup strings of a parser, :func:`lost_word_spans` lists the words a message lost.
Used by the property test (``tests/test_lossless.py``) and the measurement script
(``bench/lossless.py``). Words miss what loses no word (punctuation, a marker cut at the end, a dropped call whose
words the message holds elsewhere): :mod:`core.chat.char_audit` checks the same contract to the character.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from .message import AssistantMessage
from .turn_end import turn_end_tokens

MIN_WORD = 3
SUBSTRING_LOOKUPS = 64
_WORD = re.compile(r"[^\W_]{%d,}" % MIN_WORD)
DRIFTED_CLOSER = "drifted-closing-tag"
"""The name of the repair that reads a misspelled closer (``</parameter1>``) as markup, defined here because
core.chat.repairs imports this module (repairs' ``DRIFTED_CLOSING_TAG`` is this): the text of its spans is markup the
parse identified."""
_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _grammar_literals(parser: Any) -> list[str]:
    """The quoted literals of the parser's description (its PEG rules) and grammar (GBNF)."""
    out: list[str] = []
    for text in (_safe(lambda: parser.describe()), getattr(parser, "grammar", None) or ""):
        for m in _LITERAL.finditer(text or ""):
            raw = m.group(1)
            try:
                out.append(json.loads('"' + raw + '"'))
            except ValueError:
                out.append(raw)
    return out


def _safe(fn: Any) -> str:
    try:
        return str(fn() or "")
    except Exception:   # a description is optional; the check must not fail on it
        return ""


def _strings_of(obj: Any, depth: int = 0) -> Iterable[str]:
    """Every string field of a (nested) dataclass / mapping / sequence, e.g. an analysis's markers."""
    if depth > 6 or obj is None:
        return
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings_of(v, depth + 1)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            yield from _strings_of(v, depth + 1)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            yield from _strings_of(getattr(obj, name, None), depth + 1)


SKIPPED_MARKUP: dict[str, tuple[str, ...]] = {
    # Kimi K3 writes attributes the template renders into its call and argument openers (index="1",
    # type="number"); the handler's grammar reads past them with until("<|sep|>")
    "kimi-k3": ("index", "type", "number", "integer", "string", "boolean", "object", "array", "null"),
    # K2 Horizon's xml_typed calls carry <ifm|arg_type>TYPE</ifm|arg_type>, read past with until(...) (b11549)
    "k2-horizon": ("number", "integer", "string", "boolean", "object", "array", "null"),
    # GPT-OSS's constraint (<|constrain|>json, or "code" with the token left out) is read as a character class; its
    # channel names are the format's own words even when a tool shares one (a tool "analysis" or "final")
    "gpt-oss": ("json", "code", "analysis", "commentary", "final"),
    "llm-jp-harmony": ("json", "code", "analysis", "commentary", "final"),   # b11549's GPT-OSS dialect
}
"""Words a hand-written parser's grammar skips as template markup without naming them as literals, or names as
literals a tool of the request may share (Harmony's channel names), by the parser's format name
(:attr:`core.chat.pipeline.ChatParserBundle.format`)."""


def trigger_words(parser: Any) -> list[str]:
    """The words of ``parser``'s lazy-grammar triggers (a call opener such as ``<tool_call>``), in trigger order;
    pattern triggers are left out."""
    return [getattr(t, "value", "") for t in getattr(parser, "grammar_triggers", None) or []
            if getattr(getattr(t, "type", None), "value", "") == "word"]


def markup_of(parser: Any, request: Any = None, analysis: Any = None) -> list[str]:
    """The strings of ``parser`` that are markup, not model text: its preserved tokens, grammar triggers,
    thinking tags, stops, generation prompt, the literals of its grammar and the string fields of ``analysis``
    (the analysed markers). A literal that is just the name of a tool or a parameter of ``request`` is left out
    (that name must reach a tool call or the content)."""
    strs: list[str] = []
    strs += list(getattr(parser, "preserved_tokens", None) or [])
    strs += [getattr(t, "value", "") for t in getattr(parser, "grammar_triggers", None) or []]
    strs.append(getattr(parser, "thinking_start_tag", "") or "")
    strs += list(getattr(parser, "thinking_end_tags", None) or [])
    strs += list(getattr(parser, "additional_stops", None) or [])
    strs += list(turn_end_tokens(parser))   # repair trailing-end-of-turn's tokens (none when it is off)
    strs.append(getattr(parser, "generation_prompt", "") or "")
    strs.append(getattr(parser, "content_header", "") or "")   # an answer's own turn header (Hunyuan's 助手：)
    strs += _grammar_literals(parser)
    if analysis is not None:
        strs += list(_strings_of(analysis))
    names = _request_names(request)
    # a literal that is only a tool or parameter name (the grammar's "get_weather") is not markup; one that
    # holds a name inside a marker (MiniMax's '<invoke name="') is
    tools = tool_names(request)
    return [s for s in strs if isinstance(s, str) and s
            and not (names and (s.strip() in names or _bare(s) in tools))]


def tool_names(request: Any) -> set[str]:
    """The function names of ``request``'s tools (a JSON call's grammar quotes them: ``"book_table"``; a quoted
    parameter name, by contrast, may be a key of the call itself such as ``"name"``)."""
    out: set[str] = set()
    for t in getattr(request, "tools", None) or []:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.add(fn["name"])
    return out


def _bare(literal: str) -> str:
    """``literal`` without outer whitespace and one pair of JSON quotes around it: a JSON call's grammar holds
    the name as the literal ``"book_table"`` (quotes included), which is the name, not markup."""
    s = literal.strip()
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] == '"' else s


def _request_names(request: Any) -> set[str]:
    names: set[str] = set()
    for t in getattr(request, "tools", None) or []:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        if not isinstance(fn, dict):
            continue
        if isinstance(fn.get("name"), str):
            names.add(fn["name"])
        props = (fn.get("parameters") or {}).get("properties") if isinstance(fn.get("parameters"), dict) else None
        if isinstance(props, dict):
            names.update(str(k) for k in props)
    return names


def message_text(msg: AssistantMessage) -> str:
    """The text of the message's standard fields, one string: content, reasoning, and for each call its id,
    name, arguments as written and their JSON-decoded strings."""
    parts = [msg.content, msg.reasoning_content]
    decoded: set[str] = set()
    for c in msg.tool_calls:
        parts += [c.id, c.name, c.arguments]
        # decoding adds words only where an escape changes the text: arguments without a backslash hold their
        # strings and keys verbatim (100,000 calls: this was a quarter of the parse), and each text once
        if "\\" not in c.arguments or c.arguments in decoded:
            continue
        decoded.add(c.arguments)
        try:
            value = json.loads(c.arguments)
        except (ValueError, RecursionError):
            continue
        parts += list(_strings_of(value))
        parts += [str(k) for k in _keys(value)]
    return "\n".join(parts)


def _keys(obj: Any, depth: int = 0) -> Iterable[Any]:
    if depth > 20:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _keys(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v, depth + 1)


def markup_words(markup: Iterable[str]) -> frozenset[str]:
    """The words of the ``markup`` strings."""
    return frozenset(_WORD.findall("\n".join(markup)))


def lost_word_spans(output: str, msg: AssistantMessage, marks: frozenset[str]) -> list[tuple[str, int]]:
    """``(word, position)`` of the first occurrence of each word of ``output`` that is neither a word of
    ``msg``'s standard fields nor of ``marks`` (:func:`markup_words`), in output order. Linear in the text."""
    text = message_text(msg)
    have = set(_WORD.findall(text))
    # the words of a misspelled closer a drifted-closing-tag record read (</parameter1>) are markup it identified
    have |= {w for r in msg.repairs if getattr(r, "name", "") == DRIFTED_CLOSER
             for w in _WORD.findall(output[r.start:r.end])}
    # the usual answer, found in C: every distinct word of the output is a message word or markup (100,000 calls
    # hold a handful of distinct words, which the loop below would visit 500,000 times)
    if not set(_WORD.findall(output)) - have - marks:
        return []
    words = [(m.group(0), m.start()) for m in _WORD.finditer(output)]
    out_words = {w for w, _ in words}
    # the neighbours a word may have been joined to: the text words (not markup) around it in the output
    kept = [i for i, (w, _) in enumerate(words) if w not in marks]
    near: dict[int, tuple[str, str]] = {}
    for k, i in enumerate(kept):
        near[i] = (words[kept[k - 1]][0] if k else "", words[kept[k + 1]][0] if k + 1 < len(kept) else "")
    # how the message's fields start and end, to the length of a piece shorter than a word (a short piece glued to
    # markup starts or ends one)
    pieces = [t.strip() for t in [msg.content, msg.reasoning_content]
              + [x for c in msg.tool_calls for x in (c.name, c.arguments)]]
    edges = ({t[:k] for t in pieces for k in range(1, MIN_WORD)},
             {t[-k:] for t in pieces for k in range(1, MIN_WORD)})
    lost: list[tuple[str, int]] = []
    seen: set[str] = set()
    out_words = {w for w, _ in words}
    lookups = 0
    for i, (w, at) in enumerate(words):
        if w in seen:
            continue
        seen.add(w)
        if w in have or w in marks:
            continue
        # a word the message joined to its neighbour (GPT-OSS: "pre" and "Answer" of two channel messages are
        # content "preAnswer") is found joined to that neighbour; at most SUBSTRING_LOOKUPS searches keep this
        # linear. A word merely inside a longer one ("book" of a cut "book_" in "booking") is lost.
        if lookups < SUBSTRING_LOOKUPS:
            lookups += 1
            before, after = near.get(i, ("", ""))
            if (before and before + w in text) or (after and w + after in text) \
                    or _glued_to_markup(w, have, marks, edges) \
                    or _joined_to_a_word(w, have, out_words) or _joined_to_output_word(w, text, out_words) \
                    or _zero_padded(w, text):
                continue
        lost.append((w, at))
    return lost


def _zero_padded(word: str, text: str) -> bool:
    """True when ``word`` is a number written with leading zeros (``018956``, ``042``) and ``text`` holds that
    number without them, standing apart from other digits (a call's JSON argument ``18956``)."""
    if not (word.isdigit() and word[0] == "0"):
        return False
    bare = word.lstrip("0") or "0"
    return re.search(rf"(?<![0-9]){bare}(?![0-9])", text) is not None


GLUED_WORD_MAX = 64
"""Longest word :func:`_glued_to_markup` splits (keeps the check linear on hostile output)."""

_WORD_TAIL = re.compile(r"[^\W_]*\Z")
_WORD_HEAD = re.compile(r"[^\W_]*")


def _joined_to_output_word(word: str, text: str, out_words: set[str], tries: int = 4) -> bool:
    """True when ``text`` holds ``word`` joined to other words of the output, whatever stood between them in the
    output: reasoning "hello" of a prompt-opened block whose content "hi" follows a call the parse took out is
    content "hellohi" with reasoning_format none. The pieces beside it must be output words or shorter than a word
    (:data:`MIN_WORD`), so "book" inside "booking" is still lost, and the joined run must not be a word of the output
    itself ("date" inside the output's "updates" is lost). At most ``tries`` occurrences, each looked at within
    :data:`GLUED_WORD_MAX` characters (linear)."""
    at = 0
    for _ in range(tries):
        p = text.find(word, at)
        if p < 0:
            return False
        at = p + 1
        head = _WORD_TAIL.search(text, max(0, p - GLUED_WORD_MAX), p).group(0)
        tail = _WORD_HEAD.match(text, p + len(word), p + len(word) + GLUED_WORD_MAX).group(0)
        if head + word + tail in out_words:
            continue   # a word the output wrote ("updates"), not ``word`` ("date") joined to its neighbours
        if (head or tail) and all(not x or len(x) < MIN_WORD or _output_words(x, out_words) for x in (head, tail)):
            return True
    return False


def _output_words(piece: str, out_words: set[str]) -> bool:
    """True when ``piece`` (at most :data:`GLUED_WORD_MAX` characters) is one or more whole words of the output
    joined: content "beforemiddleafter" of the three texts around two calls (Spark 2.5, SGLang's detector joins
    them) holds "before" glued to "middleafter". Quadratic in the piece, which is bounded."""
    n = len(piece)
    ends = [True] + [False] * n
    for i in range(n):
        if ends[i]:
            for j in range(i + MIN_WORD, n + 1):
                if not ends[j] and piece[i:j] in out_words:
                    ends[j] = True
    return ends[n]


def _joined_to_a_word(word: str, have: set[str], out_words: set[str]) -> bool:
    """True when a word of the message is ``word`` joined to another whole word of the output, whatever stood
    between them there: GPT-OSS's reasoning "weatherTool" of two analysis messages with calls between them
    ("weather" and "Tool" are not neighbours in the output); a message word the output itself wrote ("without")
    is no join. Words up to :data:`GLUED_WORD_MAX` characters."""
    if len(word) > GLUED_WORD_MAX:
        return False
    for h in have:
        if len(h) <= len(word) or len(h) > 2 * GLUED_WORD_MAX or h in out_words:
            continue   # (a word the output wrote, "without", is not "with" joined to "out")
        if (h.endswith(word) and h[:-len(word)] in out_words) or (h.startswith(word) and h[len(word):] in out_words):
            return True
    return False


def _glued_to_markup(word: str, have: set[str], marks: frozenset[str],
                     edges: tuple[set[str], set[str]]) -> bool:
    """True when ``word`` is a markup word glued to a word of the message (or to a piece shorter than
    :data:`MIN_WORD` that a field of the message starts or ends with: ``edges``, the starts and ends of the fields
    up to that length): Granite's "sectionHere is my response:" is reasoning "…section" + the marker "Here…".
    FunctionGemma's "send" of a dropped call is not "s" + the markup word "end": no field ends with "s"."""
    if len(word) > GLUED_WORD_MAX:
        return False
    for k in range(1, len(word)):
        head, tail = word[:k], word[k:]
        if head in marks and (tail in have or len(tail) < MIN_WORD and tail in edges[0]):
            return True
        if tail in marks and (head in have or len(head) < MIN_WORD and head in edges[1]):
            return True
    return False


def without_tool_names(s: str, names: list[str]) -> str:
    """``s`` with each occurrence of a tool name of :data:`MIN_WORD` or more characters that stands apart (not
    inside a longer word: a tool "a" leaves "name" alone) replaced by a space."""
    for n in names:
        if len(n) >= MIN_WORD and n in s:
            s = re.sub(r"(?<![^\W_])%s(?![^\W_])" % re.escape(n), " ", s)
    return s


def parser_marks(parser: Any) -> frozenset[str]:
    """The markup words of ``parser`` (:func:`markup_of` with the request, analysis and format that
    :func:`core.chat.pipeline.build_chat_parser` attached as ``lossless_context``), computed once per parser."""
    cached = getattr(parser, "_lossless_marks", None)
    if cached is not None:
        return cached
    request, analysis, fmt = getattr(parser, "lossless_context", None) or (None, None, "")
    strs = markup_of(parser, request, analysis)
    tools = sorted(tool_names(request), key=len, reverse=True)
    if tools:   # a marker that holds a tool name (Llama 4's pythonic "[get_weather(") does not make it markup
        strs = [without_tool_names(s, tools) for s in strs]
    marks = markup_words(strs + list(SKIPPED_MARKUP.get(fmt, ())))
    try:
        parser._lossless_marks = marks
    except AttributeError:   # a parser that takes no attributes: computed again next time
        pass
    return marks


__all__ = ["DRIFTED_CLOSER", "MIN_WORD", "SKIPPED_MARKUP", "lost_word_spans", "markup_of", "markup_words",
           "message_text", "parser_marks", "trigger_words"]
