"""OpenAI-shaped assistant messages and streaming deltas.

``AssistantMessage`` is what every parser returns; ``to_openai()`` gives the JSON object of
``reference/cases.jsonl``'s ``expect`` (keys ``content`` / ``reasoning_content`` / ``tool_calls`` only when
non-empty, ``arguments`` as a JSON string). ``compute_deltas(prev, new)`` turns two successive parses into
OpenAI delta chunks, as llama.cpp's ``common_chat_msg_diff`` does (parser notes §5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """One tool call. ``arguments`` is a JSON text (possibly partial while streaming); ``id`` may be ""."""

    name: str = ""
    arguments: str = ""
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        """OpenAI ``tool_calls`` entry: ``{"type": "function", "function": {"name", "arguments"}, "id"}``."""
        return {"type": "function", "function": {"name": self.name, "arguments": self.arguments}, "id": self.id}


@dataclass
class AssistantMessage:
    """A parsed assistant turn: ``content`` and ``reasoning_content`` (str, "" when absent) and tool calls;
    ``repairs`` lists the :class:`core.chat.repairs.FiredRepair` that settled it (empty for a clean parse)."""

    content: str = ""
    reasoning_content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    role: str = "assistant"
    # core.chat.repairs.FiredRepair entries: which repairs settled this parse, and where; not an OpenAI field
    # and not part of equality (a message is the same message however it was reached)
    repairs: list[Any] = field(default_factory=list, compare=False)

    def to_openai(self) -> dict[str, Any]:
        """OpenAI message dict; empty fields are omitted (``content`` is kept, possibly "", when there is
        nothing else)."""
        out: dict[str, Any] = {"role": self.role}
        if self.content or not (self.reasoning_content or self.tool_calls):
            out["content"] = self.content
        if self.reasoning_content:
            out["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            out["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
        return out

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> "AssistantMessage":
        """Inverse of :meth:`to_openai`; ``arguments`` given as an object are dumped to JSON text."""
        calls = []
        for tc in data.get("tool_calls") or []:
            fn = tc.get("function") or {}
            args = fn.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            calls.append(ToolCall(name=fn.get("name", ""), arguments=args, id=tc.get("id") or ""))
        return cls(content=data.get("content") or "", reasoning_content=data.get("reasoning_content") or "",
                   tool_calls=calls, role=data.get("role", "assistant"))

    def copy(self) -> "AssistantMessage":
        """A deep copy (the tool calls are copied too)."""
        return AssistantMessage(self.content, self.reasoning_content,
                                [ToolCall(t.name, t.arguments, t.id) for t in self.tool_calls], self.role,
                                list(self.repairs))


@dataclass
class ToolCallDelta:
    """Streaming fragment of one tool call; ``index`` is its position in ``tool_calls``."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""

    def to_openai(self) -> dict[str, Any]:
        """OpenAI streaming ``tool_calls`` entry: ``{"index", "id"?, "type"?, "function": {"name"?, "arguments"}}``.

        ``id`` / ``type`` only when the id is set, ``name`` only when set; ``arguments`` always (maybe "").
        """
        out: dict[str, Any] = {"index": self.index}
        if self.id:
            out["id"] = self.id
            out["type"] = "function"
        fn: dict[str, Any] = {}
        if self.name:
            fn["name"] = self.name
        fn["arguments"] = self.arguments
        out["function"] = fn
        return out


@dataclass
class MessageDelta:
    """One OpenAI ``delta`` chunk: at most one of the three parts is set."""

    content: str = ""
    reasoning_content: str = ""
    tool_call: ToolCallDelta | None = None

    def to_openai(self) -> dict[str, Any]:
        """OpenAI ``delta`` dict with only the non-empty parts: ``reasoning_content``, ``content``,
        ``tool_calls`` (a one-element list); the OpenAI streaming chunk shape.
        """
        out: dict[str, Any] = {}
        if self.reasoning_content:
            out["reasoning_content"] = self.reasoning_content
        if self.content:
            out["content"] = self.content
        if self.tool_call is not None:
            out["tool_calls"] = [self.tool_call.to_openai()]
        return out


class StreamRetractionError(ValueError):
    """A newer parse does not extend the previous one (text already emitted would be taken back)."""


def compute_deltas(prev: AssistantMessage, new: AssistantMessage) -> list[MessageDelta]:
    """Deltas that turn ``prev`` into ``new``: reasoning, then content, then tool-call fragments.

    Raises :class:`StreamRetractionError` if ``new`` does not extend ``prev`` (a field shrank or changed
    before its end, a tool call disappeared, a name or id changed). Follows llama.cpp
    ``common_chat_msg_diff::compute_diffs``.
    """
    out: list[MessageDelta] = []
    if new.reasoning_content != prev.reasoning_content:
        if not new.reasoning_content.startswith(prev.reasoning_content):
            raise StreamRetractionError("reasoning_content was rewritten")
        out.append(MessageDelta(reasoning_content=new.reasoning_content[len(prev.reasoning_content):]))
    if new.content != prev.content:
        if not new.content.startswith(prev.content):
            raise StreamRetractionError("content was rewritten")
        out.append(MessageDelta(content=new.content[len(prev.content):]))
    if len(new.tool_calls) < len(prev.tool_calls):
        raise StreamRetractionError("a tool call disappeared")
    for i, call in enumerate(new.tool_calls):
        if i < len(prev.tool_calls):
            delta = tool_call_delta(i, prev.tool_calls[i], call)
            if delta is not None:
                out.append(delta)
        else:
            out.append(MessageDelta(tool_call=ToolCallDelta(i, call.id, call.name, call.arguments)))
    return out


def tool_call_delta(i: int, old: ToolCall, call: ToolCall) -> MessageDelta | None:
    """The delta that extends tool call ``i`` from ``old`` (seen before) to ``call``: the name and the id only
    where ``old`` had none, the new argument text; None when nothing is new. Raises
    :class:`StreamRetractionError` if ``call`` does not extend ``old`` (name or id changed, arguments
    rewritten). Part of llama.cpp ``common_chat_msg_diff::compute_diffs``; used by :func:`compute_deltas` and
    :func:`core.chat.stream.stream_deltas_between`."""
    if old.name != call.name and old.name:
        raise StreamRetractionError(f"tool call {i} changed its name")
    if old.id and old.id != call.id:
        raise StreamRetractionError(f"tool call {i} changed its id")
    if not call.arguments.startswith(old.arguments):
        raise StreamRetractionError(f"tool call {i} arguments were rewritten")
    name = call.name if not old.name else ""
    call_id = call.id if not old.id else ""
    args = call.arguments[len(old.arguments):]
    if name or call_id or args:
        return MessageDelta(tool_call=ToolCallDelta(i, call_id, name, args))
    return None


def apply_deltas(msg: AssistantMessage, deltas: list[MessageDelta]) -> AssistantMessage:
    """Accumulate ``deltas`` onto a copy of ``msg`` (what a streaming client does)."""
    out = msg.copy()
    for d in deltas:
        out.reasoning_content += d.reasoning_content
        out.content += d.content
        if d.tool_call is not None:
            tc = d.tool_call
            while len(out.tool_calls) <= tc.index:
                out.tool_calls.append(ToolCall())
            call = out.tool_calls[tc.index]
            call.name += tc.name
            call.id += tc.id
            call.arguments += tc.arguments
    return out


def message_extends(old: AssistantMessage, new: AssistantMessage) -> bool:
    """Whether ``new`` continues ``old`` the way a stream may: reasoning and content only grow, no tool call
    disappears, a named call keeps its name and id, arguments only grow (the rules of
    :func:`core.chat.stream.stream_deltas_between`)."""
    if not new.reasoning_content.startswith(old.reasoning_content) or not new.content.startswith(old.content):
        return False
    if len(new.tool_calls) < len(old.tool_calls):
        return False
    for a, b in zip(old.tool_calls, new.tool_calls):
        if a is b:
            continue
        if (a.name and a.name != b.name) or (a.id and a.id != b.id) or not b.arguments.startswith(a.arguments):
            return False
    return True
