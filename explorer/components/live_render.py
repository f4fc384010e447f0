"""The Edit page's live render: an editable conversation (messages, tools, add_generation_prompt,
enable_thinking) rendered by the source being edited, beside the editor.

The render runs in a limited worker process when the isolation layer is present (``core.isolation.call``), so a
template's runaway cannot hold the server; without it, in this process through the jinja2 sandbox (its time and
size limits apply). Results are cached per input; a failure is never cached (the next rerun tries again)."""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from core.chat.conversation import render_located

from .text import show_invisible_notice

DEFAULT_CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "reasoning_content": "The user wants the weather; I will call the tool.",
     "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 18, \"sky\": \"cloudy\"}"},
    {"role": "assistant", "content": "It is 18 °C and cloudy in Paris."},
    {"role": "user", "content": "And tomorrow?"},
]


def _isolated_call() -> Any:
    try:
        from core.isolation import call  # the limited worker pool, where it has landed
    except ImportError:
        return None
    return call


@st.cache_data(max_entries=64, show_spinner=False)
def _render(source: str, name: str, messages_json: str, tools_json: str, agp: bool, thinking: bool) -> tuple:
    messages, tools = json.loads(messages_json), json.loads(tools_json)
    call = _isolated_call()
    if call is not None:
        return call(render_located, source, name, messages, tools, add_generation_prompt=agp,
                    enable_thinking=thinking, name=name, what="render")
    return render_located(source, name, messages, tools, add_generation_prompt=agp, enable_thinking=thinking)


def _json(key: str, what: str) -> Any:
    """The JSON value typed in widget ``key``; raises RequestError naming ``what`` when it is not JSON."""
    from core.errors import RequestError

    text = st.session_state.get(key, "")
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(what, f"is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise RequestError(what, "nests too deeply to read as JSON") from None


def conversation_inputs() -> None:
    """The conversation's widgets (keys ``in_live_*``, kept across pages like every ``in_`` widget)."""
    from explorer import state

    state.default("in_live_messages", json.dumps(DEFAULT_CONVERSATION, indent=2, ensure_ascii=False))
    state.default("in_live_tools", json.dumps(state.default_tools(), indent=2, ensure_ascii=False))
    state.default("in_live_agp", True)
    state.default("in_live_thinking", True)
    st.toggle("add_generation_prompt", key="in_live_agp")
    st.toggle("enable_thinking", key="in_live_thinking")
    with st.expander("Messages (JSON)", expanded=False):
        st.text_area("messages", key="in_live_messages", height=260, label_visibility="collapsed")
        with st.container():   # one slot, shown or not (explorer.components.serving.capped_text_area)
            show_invisible_notice(st.session_state.get("in_live_messages") or "")
    with st.expander("Tools (JSON)", expanded=False):
        st.text_area("tools", key="in_live_tools", height=200, label_visibility="collapsed",
                     help="Empty: no tools are passed.")
        with st.container():
            show_invisible_notice(st.session_state.get("in_live_tools") or "")


def rendered(source: str, name: str) -> tuple:
    """``(text, None)``: the render of the session's conversation by ``source``; ``(None, ErrorLocation)`` for
    a template error (located in the worker). Raises RequestError for a malformed conversation and the worker's
    limit errors."""
    messages = _json("in_live_messages", "messages") or []
    tools = _json("in_live_tools", "tools")
    return _render(source, name, json.dumps(messages, ensure_ascii=False), json.dumps(tools, ensure_ascii=False),
                   bool(st.session_state.get("in_live_agp", True)),
                   bool(st.session_state.get("in_live_thinking", True)))
