"""The render matrix: OpenAI-shaped conversations a chat template is expected to take.

Each :class:`Shape` is one conversation (messages in the OpenAI chat-completions shape, optional tools) with the
feature it exercises (:class:`Needs`), so a template that raises on a shape it does not claim to support (tool
calls on a template without tools) is reported as information, not as an error. The tools are the round trip's
(:data:`core.chat.roundtrip.ROUND_TRIP_TOOLS`). Shapes are built fresh on every call (templates may not mutate
them, but renderers do normalise messages in place).
"""

from __future__ import annotations

import copy
import enum
import json
from dataclasses import dataclass
from typing import Any

from ..chat.roundtrip import ROUND_TRIP_TOOLS


class Needs(str, enum.Enum):
    """What a shape relies on beyond a user turn: ``BASIC`` nothing; ``SYSTEM`` a system role; ``TOOLS`` tool
    definitions / calls / results; ``REASONING`` reasoning_content; ``TYPED`` typed content parts; ``EDGE``
    inputs the OpenAI API accepts but few templates are written for (developer role, empty turns …)."""

    BASIC = "basic"
    SYSTEM = "system"
    TOOLS = "tools"
    REASONING = "reasoning"
    TYPED = "typed"
    EDGE = "edge"


@dataclass
class Shape:
    """One conversation of the matrix: ``id`` (stable, used in finding ids), ``title``, ``messages``,
    ``tools`` (OpenAI tool list or None), ``needs``, ``enable_thinking``."""

    id: str
    title: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    needs: Needs = Needs.BASIC
    enable_thinking: bool = True

    @property
    def add_generation_prompt(self) -> bool:
        """True when the conversation ends with a user or tool turn (the model answers next)."""
        return bool(self.messages) and self.messages[-1].get("role") in ("user", "tool", "system", "developer")


def _u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _a(text: str | None, **kw: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": text, **kw}


def _call(name: str, args: Any, cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _tool(content: str, cid: str, name: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "name": name, "content": content}


SYS = {"role": "system", "content": "You are a helpful assistant."}
Q1, Q2, Q3 = "What is the weather in Paris?", "And in Rome?", "Thanks! Book a table for 4 at Chez Nous."
ANS1, ANS2 = "It is sunny in Paris, 21 °C.", "Rome is cloudy, 18 °C."
THINK = "The user asks about the weather; I should call get_weather."
W_ARGS = {"city": "Paris", "days": 3}
B_ARGS = {"restaurant": "Chez Nous", "guests": 4, "options": {"time": "19:30", "table": 12}}
W_CALL = _call("get_weather", W_ARGS, "call00001")
B_CALL = _call("book_table", B_ARGS, "call00002")
W_RESULT = _tool('{"temperature": 21, "sky": "sunny"}', "call00001", "get_weather")
B_RESULT = _tool('{"booked": true}', "call00002", "book_table")


def _tools() -> list[dict[str, Any]]:
    return copy.deepcopy(ROUND_TRIP_TOOLS)


def shapes() -> list[Shape]:
    """The conversation shapes of the render matrix (48), in a fixed order."""
    T = _tools()
    text = lambda s: [{"type": "text", "text": s}]  # noqa: E731 - a typed content part list
    s: list[Shape] = [
        Shape("user", "one user turn", [_u(Q1)]),
        Shape("system-user", "system + user", [SYS, _u(Q1)], needs=Needs.SYSTEM),
        Shape("multi-turn", "user, assistant, user", [_u(Q1), _a(ANS1), _u(Q2)]),
        Shape("system-multi-turn", "system + three exchanges", [SYS, _u(Q1), _a(ANS1), _u(Q2), _a(ANS2), _u(Q3)],
              needs=Needs.SYSTEM),
        Shape("assistant-final", "conversation ending with an assistant turn", [_u(Q1), _a(ANS1)]),
        Shape("system-assistant-final", "system, user, assistant", [SYS, _u(Q1), _a(ANS1)], needs=Needs.SYSTEM),
        Shape("consecutive-users", "two user turns in a row", [_u(Q1), _u(Q2)], needs=Needs.EDGE),
        Shape("system-only", "only a system message", [SYS], needs=Needs.EDGE),
        Shape("system-mid", "a system message after the first turn", [_u(Q1), _a(ANS1), SYS, _u(Q2)],
              needs=Needs.EDGE),
        Shape("developer-role", "developer role (OpenAI's newer system role)",
              [{"role": "developer", "content": "Answer briefly."}, _u(Q1)], needs=Needs.EDGE),
        Shape("empty-user", "empty user content", [_u("")], needs=Needs.EDGE),
        Shape("assistant-first", "conversation starting with an assistant turn", [_a(ANS1), _u(Q2)],
              needs=Needs.EDGE),
        Shape("unicode", "unicode: emoji, CJK, RTL, combining",
              [_u("Météo à 東京? 🌦️ مرحبا שלום e\u0301")]),
        Shape("multiline", "multi-line content with indentation and Jinja-like text",
              [_u("line 1\n\n  line 2\t{{ not jinja }} {% raw %}"), _a("ok\n- a\n- b"), _u(Q2)]),
        Shape("markup-in-content", "content that looks like markup", [_u("<b>bold</b> & <tool_call> [INST]")]),
        Shape("typed-user", "user content as typed parts", [{"role": "user", "content": text(Q1)}],
              needs=Needs.TYPED),
        Shape("typed-system", "system content as typed parts",
              [{"role": "system", "content": text(SYS["content"])}, _u(Q1)], needs=Needs.TYPED),
        Shape("typed-assistant", "assistant content as typed parts",
              [_u(Q1), {"role": "assistant", "content": text(ANS1)}, _u(Q2)], needs=Needs.TYPED),
        Shape("typed-multi-part", "user content as two text parts",
              [{"role": "user", "content": text("Part one.") + text("Part two.")}], needs=Needs.TYPED),
        Shape("tools-user", "tools offered, one user turn", [_u(Q1)], T, Needs.TOOLS),
        Shape("tools-system-user", "tools offered, system + user", [SYS, _u(Q1)], T, Needs.TOOLS),
        Shape("call-object-args", "assistant calls a tool (object arguments)",
              [_u(Q1), _a(None, tool_calls=[W_CALL])], T, Needs.TOOLS),
        Shape("call-string-args", "assistant calls a tool (arguments as a JSON string)",
              [_u(Q1), _a(None, tool_calls=[_call("get_weather", json.dumps(W_ARGS), "call00001")])], T,
              Needs.TOOLS),
        Shape("call-empty-args", "a call without arguments", [_u(Q1), _a(None, tool_calls=[
            _call("get_weather", {}, "call00001")])], T, Needs.TOOLS),
        Shape("call-nested-args", "a call with a nested object argument",
              [_u(Q3), _a(None, tool_calls=[B_CALL])], T, Needs.TOOLS),
        Shape("call-content-null", "calls with content null", [_u(Q1), _a(None, tool_calls=[W_CALL])], T,
              Needs.TOOLS),
        Shape("call-content-empty", "calls with content \"\"", [_u(Q1), _a("", tool_calls=[W_CALL])], T,
              Needs.TOOLS),
        Shape("call-with-content", "content beside a call", [_u(Q1), _a("Let me check.", tool_calls=[W_CALL])],
              T, Needs.TOOLS),
        Shape("parallel-calls", "two calls in one turn", [_u(Q3), _a(None, tool_calls=[W_CALL, B_CALL])], T,
              Needs.TOOLS),
        Shape("call-result", "call, then its tool result", [_u(Q1), _a(None, tool_calls=[W_CALL]), W_RESULT], T,
              Needs.TOOLS),
        Shape("call-result-answer", "call, result, final answer, next user turn",
              [_u(Q1), _a(None, tool_calls=[W_CALL]), W_RESULT, _a(ANS1), _u(Q2)], T, Needs.TOOLS),
        Shape("parallel-results", "two calls, two results",
              [_u(Q3), _a(None, tool_calls=[W_CALL, B_CALL]), W_RESULT, B_RESULT], T, Needs.TOOLS),
        Shape("two-call-rounds", "two rounds of calls and results",
              [_u(Q1), _a(None, tool_calls=[W_CALL]), W_RESULT, _a(ANS1), _u(Q3), _a(None, tool_calls=[B_CALL]),
               B_RESULT], T, Needs.TOOLS),
        Shape("tool-result-no-name", "a tool result without name",
              [_u(Q1), _a(None, tool_calls=[W_CALL]), {"role": "tool", "tool_call_id": "call00001",
                                                       "content": "sunny"}], T, Needs.TOOLS),
        Shape("tools-not-resent", "history with calls and results, tools not sent again",
              [_u(Q1), _a(None, tool_calls=[W_CALL]), W_RESULT, _a(ANS1), _u(Q2)], None, Needs.TOOLS),
        Shape("system-tools-calls", "system, tools, call, result",
              [SYS, _u(Q1), _a(None, tool_calls=[W_CALL]), W_RESULT], T, Needs.TOOLS),
        Shape("reasoning-final", "assistant turn with reasoning and content",
              [_u(Q1), _a(ANS1, reasoning_content=THINK)], needs=Needs.REASONING),
        Shape("reasoning-only", "assistant turn with reasoning only (content \"\")",
              [_u(Q1), _a("", reasoning_content=THINK)], needs=Needs.REASONING),
        Shape("reasoning-in-history", "reasoning in an earlier assistant turn",
              [_u(Q1), _a(ANS1, reasoning_content=THINK), _u(Q2)], needs=Needs.REASONING),
        Shape("reasoning-two-turns", "reasoning in two earlier turns",
              [_u(Q1), _a(ANS1, reasoning_content=THINK), _u(Q2), _a(ANS2, reasoning_content=THINK), _u(Q3)],
              needs=Needs.REASONING),
        Shape("reasoning-call", "reasoning beside a call", [_u(Q1), _a(None, reasoning_content=THINK,
                                                                       tool_calls=[W_CALL])], T, Needs.TOOLS),
        Shape("reasoning-call-result", "reasoning, call, result (interleaved thinking)",
              [_u(Q1), _a(None, reasoning_content=THINK, tool_calls=[W_CALL]), W_RESULT], T, Needs.TOOLS),
        Shape("reasoning-content-calls", "reasoning, content and two calls (the round-trip message)",
              [_u(Q3), _a("Let me check.", reasoning_content=THINK, tool_calls=[W_CALL, B_CALL])], T,
              Needs.TOOLS),
        Shape("thinking-off", "enable_thinking false", [_u(Q1)], needs=Needs.REASONING, enable_thinking=False),
        Shape("thinking-off-history", "enable_thinking false with reasoning in history",
              [_u(Q1), _a(ANS1, reasoning_content=THINK), _u(Q2)], needs=Needs.REASONING, enable_thinking=False),
        Shape("content-null-final", "assistant content null without calls", [_u(Q1), _a(None), _u(Q2)],
              needs=Needs.EDGE),
        Shape("long-history", "ten exchanges",
              [m for i in range(10) for m in (_u(f"Question {i}?"), _a(f"Answer {i}."))] + [_u(Q2)]),
        Shape("tool-result-json-typed", "a tool result as typed parts",
              [_u(Q1), _a(None, tool_calls=[W_CALL]), {"role": "tool", "tool_call_id": "call00001",
                                                       "name": "get_weather", "content": text("sunny")}], T,
              Needs.TOOLS),
    ]
    return copy.deepcopy(s)
