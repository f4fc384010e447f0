"""Streaming: feed model output piece by piece, get OpenAI delta chunks.

:class:`StreamingParser` wraps any :class:`~core.chat.base.ChatOutputParser`. After each ``feed`` it parses the
text so far as partial (llama.cpp ``task_result_state::update_chat_msg``: re-parse, diff against the previous
message, emit the diffs — parser notes §5.5) and returns the deltas. Guarantees:

* it never takes back text it emitted: a partial parse that does not extend what was already emitted (content
  or reasoning rewritten, a tool call lost or renamed, arguments rewritten) is *held back* — nothing is emitted
  for it and the next parse is diffed against the last emitted message instead;
* the deltas accumulated so far equal the last emitted parse, which is the parse of the current prefix unless a
  step was held back;
* ``finish()`` parses the whole text as final and emits what is left.

Resuming: if the parser offers ``session()`` (an object with ``parse(text, is_partial) -> AssistantMessage``
that may reuse work from earlier calls on a prefix of ``text``), or incremental state (``new_state()``, or a
``state`` keyword on ``parse`` as :class:`core.chat.generator.GeneratedParser` has: the PEG engine then memoizes
every rule result that did not look at the end of the input and remembers how far each ``until`` searched),
every step goes through it, so only the unstable tail is re-parsed. Otherwise each step re-parses the whole
prefix. A feed that adds no text does not parse at all.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from .message import AssistantMessage, MessageDelta, StreamRetractionError, ToolCallDelta, compute_deltas


def _new_state(parser: Any) -> Any:
    """A fresh incremental-parse state for ``parser``, or None. Parsers announce support either with
    ``new_state()`` or with a ``state`` keyword on ``parse`` (the generator's :class:`ParserState`)."""
    factory = getattr(parser, "new_state", None)
    if callable(factory):
        return factory()
    try:
        params = inspect.signature(parser.parse).parameters
    except (TypeError, ValueError):
        return None
    if "state" not in params:
        return None
    try:
        from .generator import ParserState  # type: ignore[attr-defined]
    except ImportError:
        return None
    return ParserState()


def _parse_fn(parser: Any) -> Callable[[str, bool], AssistantMessage]:
    session_factory = getattr(parser, "session", None)
    if callable(session_factory):
        try:
            session = session_factory()
        except Exception:  # a parser whose session cannot start still parses one-shot
            session = None
        if session is not None and callable(getattr(session, "parse", None)):
            return session.parse
    try:
        state = _new_state(parser)
    except Exception:
        state = None
    if state is not None:
        parse = parser.parse

        def parse_with_state(text: str, is_partial: bool) -> AssistantMessage:
            return parse(text, is_partial, state=state)
        return parse_with_state
    return parser.parse


def _safe_parse(parse: Callable[[str, bool], AssistantMessage], text: str, is_partial: bool) -> AssistantMessage | None:
    try:
        return parse(text, is_partial)
    except Exception:  # parsers must not raise; if one does, the step is held back
        return None


def lenient_deltas(prev: AssistantMessage, new: AssistantMessage) -> list[MessageDelta]:
    """Deltas from ``prev`` towards ``new`` that never retract: every field that extends the previous value
    gets its extension, fields that were rewritten get nothing. Used only for the final step, where holding
    back is not an option."""
    out: list[MessageDelta] = []
    if new.reasoning_content.startswith(prev.reasoning_content) and new.reasoning_content != prev.reasoning_content:
        out.append(MessageDelta(reasoning_content=new.reasoning_content[len(prev.reasoning_content):]))
    if new.content.startswith(prev.content) and new.content != prev.content:
        out.append(MessageDelta(content=new.content[len(prev.content):]))
    for i, call in enumerate(new.tool_calls):
        if i < len(prev.tool_calls):
            old = prev.tool_calls[i]
            name = call.name if not old.name else ""
            cid = call.id if not old.id else ""
            args = call.arguments[len(old.arguments):] if call.arguments.startswith(old.arguments) else ""
            if name or cid or args:
                out.append(MessageDelta(tool_call=ToolCallDelta(i, cid, name, args)))
        else:
            out.append(MessageDelta(tool_call=ToolCallDelta(i, call.id, call.name, call.arguments)))
    return out


class StreamingParser:
    """Stateful streaming wrapper around a chat output parser.

    ``feed(text) -> list[MessageDelta]`` appends ``text`` (any length, may be "") and returns the new deltas;
    ``finish(is_partial=False) -> list[MessageDelta]`` parses everything as the final output (pass
    ``is_partial=True`` when the output was cut off) and returns the remaining deltas. ``message`` is the
    message the emitted deltas add up to; ``text`` the output fed so far; ``held_back`` counts steps whose
    parse would have retracted emitted text. Never raises on any input text.
    """

    def __init__(self, parser: Any):
        self.parser = parser
        self._parse = _parse_fn(parser)
        self._chunks: list[str] = []
        self._text = ""
        self._dirty = False
        self._emitted = AssistantMessage()
        self._finished = False
        self.held_back = 0
        self.final_mismatch = False

    @property
    def text(self) -> str:
        """All text fed so far."""
        if self._dirty:
            self._text = "".join(self._chunks)
            self._chunks = [self._text]
            self._dirty = False
        return self._text

    @property
    def message(self) -> AssistantMessage:
        """The message the emitted deltas accumulate to (a copy)."""
        return self._emitted.copy()

    def _step(self, is_partial: bool) -> list[MessageDelta]:
        new = _safe_parse(self._parse, self.text, is_partial)
        if new is None:
            self.held_back += 1
            return []
        try:
            deltas = compute_deltas(self._emitted, new)
        except StreamRetractionError:
            if is_partial:
                self.held_back += 1
                return []
            deltas = lenient_deltas(self._emitted, new)
            self.final_mismatch = True
            self._emitted = _accumulate(self._emitted, deltas)
            return deltas
        self._emitted = new
        return deltas

    def feed(self, text: str) -> list[MessageDelta]:
        """Append ``text`` and return the deltas it produces (possibly none)."""
        if self._finished:
            raise RuntimeError("StreamingParser.feed() after finish()")
        if not text:
            return []
        self._chunks.append(text)
        self._dirty = True
        return self._step(True)

    def finish(self, is_partial: bool = False) -> list[MessageDelta]:
        """Parse the whole output as final (``is_partial``: the output was cut off) and return the last deltas.
        Idempotent: a second call returns []."""
        if self._finished:
            return []
        self._finished = True
        return self._step(is_partial)


def _accumulate(msg: AssistantMessage, deltas: list[MessageDelta]) -> AssistantMessage:
    from .message import apply_deltas

    return apply_deltas(msg, deltas)


def stream_deltas(parser: Any, output: str, *, chunk: int = 1, is_partial: bool = False) -> tuple[list[MessageDelta], AssistantMessage]:
    """Feed ``output`` in pieces of ``chunk`` characters, then finish. Returns (all deltas, the accumulated
    message). ``chunk`` must be >= 1."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    sp = StreamingParser(parser)
    out: list[MessageDelta] = []
    for i in range(0, len(output), chunk):
        out.extend(sp.feed(output[i:i + chunk]))
    out.extend(sp.finish(is_partial))
    return out, sp.message
