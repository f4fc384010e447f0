"""Needles and fixtures of the differential analysis (analysis notes §6).

The exact strings llama.cpp's ``chat-diff-analyzer.cpp`` renders: distinctive needles (so a diff can find
them), tool definitions, tool calls (arguments are JSON *objects*), and message builders. Every builder
returns fresh objects (renders never share mutable inputs). Dict key order is significant: templates that
print JSON show keys in insertion order.
"""

from __future__ import annotations

from typing import Any

FUN_FIRST = "FFF_FIRST_FUN_F"
FUN_SECOND = "SSS_SECOND_FUN_S"
ARG_FIRST = "AA_ARG_FST_AA"
ARG_SECOND = "BB_ARG_SND_BB"
USER_MSG = "U_USER_MSG Hello END_U"
USER_MSG_TWO = "V_USER_MSG Hello END_V"
ASSISTANT_MSG = "A_ASST_MSG I can help END_A"
THINKING_CONTENT = "REASON_PART I am thinking END_R"
CALL_ID_001 = "call00001"
CALL_ID_002 = "call00002"
CALL_ID_999 = "call99999"


def params_schema() -> dict[str, Any]:
    """JSON schema of both probe functions: two optional string arguments."""
    return {
        "type": "object",
        "properties": {
            ARG_FIRST: {"type": "string", "description": "First argument"},
            ARG_SECOND: {"type": "string", "description": "Second argument"},
        },
        "required": [],
    }


def tools() -> list[dict[str, Any]]:
    """The two probe tools, ``FUN_FIRST`` and ``FUN_SECOND``."""
    return [
        {"type": "function",
         "function": {"name": FUN_FIRST, "description": "Test function foo", "parameters": params_schema()}},
        {"type": "function",
         "function": {"name": FUN_SECOND, "description": "Test function bar", "parameters": params_schema()}},
    ]


def call(name: str, args: dict[str, Any], id_: str = CALL_ID_001) -> dict[str, Any]:
    """One OpenAI-shaped tool call with object arguments."""
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": dict(args)}}


def one_arg() -> dict[str, Any]:
    """Call of ``FUN_FIRST`` with ``{ARG_FIRST: "XXXX"}``, id ``CALL_ID_001`` (llama.cpp
    ``first_tool_call_one_arg``).
    """
    return call(FUN_FIRST, {ARG_FIRST: "XXXX"}, CALL_ID_001)


def one_arg_other_val() -> dict[str, Any]:
    """Call of ``FUN_FIRST`` with ``{ARG_FIRST: "YYYY"}``, id ``CALL_ID_001`` (llama.cpp
    ``first_tool_call_one_arg_other_val``).
    """
    return call(FUN_FIRST, {ARG_FIRST: "YYYY"}, CALL_ID_001)


def other_arg() -> dict[str, Any]:
    """Call of ``FUN_FIRST`` with ``{ARG_SECOND: "YYYY"}``, id ``CALL_ID_001`` (llama.cpp
    ``first_tool_call_other_arg``).
    """
    return call(FUN_FIRST, {ARG_SECOND: "YYYY"}, CALL_ID_001)


def first_call() -> dict[str, Any]:
    """Call of ``FUN_FIRST`` with both arguments (``XXXX``, ``YYYY``), id ``CALL_ID_001`` (llama.cpp
    ``first_tool_call``).
    """
    return call(FUN_FIRST, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"}, CALL_ID_001)


def second_call() -> dict[str, Any]:
    """Call of ``FUN_SECOND`` with both arguments (``XXXX``, ``YYYY``), id ``CALL_ID_002`` (llama.cpp
    ``second_tool_call``).
    """
    return call(FUN_SECOND, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"}, CALL_ID_002)


def first_call_alt_id() -> dict[str, Any]:
    """Call of ``FUN_FIRST`` with both arguments, id ``CALL_ID_999`` (llama.cpp
    ``first_tool_call_alt_id``).
    """
    return call(FUN_FIRST, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"}, CALL_ID_999)


def user(content: str = USER_MSG) -> dict[str, Any]:
    """A user message ``{"role": "user", "content": content}`` (default ``USER_MSG``)."""
    return {"role": "user", "content": content}


def assistant(content: Any = ASSISTANT_MSG, reasoning: str | None = None,
              tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``{"role": "assistant", "content": …[, "reasoning_content": …][, "tool_calls": […]]}``."""
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if tool_calls is not None:
        m["tool_calls"] = tool_calls
    return m


def assistant_calls(*calls: dict[str, Any]) -> dict[str, Any]:
    """A tool-call turn: ``content: ""`` plus the calls."""
    return assistant("", tool_calls=list(calls))
