"""A request edit the triage offers keeps what the request said beyond the edit: its template kwargs (a fix that
dropped Kimi K3's ``thinking: false`` re-parsed a different prompt), and an ``enable_thinking`` edit reaches the kwarg
that decides the flag."""

from __future__ import annotations

from core.chat.request import ChatRequest
from core.explain.triage import apply_request_change

MSGS = [{"role": "user", "content": "Hi"}]


def test_a_request_edit_keeps_the_template_kwargs():
    req = ChatRequest.from_dict({"messages": MSGS, "chat_template_kwargs": {"thinking": False, "x": 1}})
    out = apply_request_change(req, {"parallel_tool_calls": True})
    assert out.parallel_tool_calls is True
    assert out.chat_template_kwargs == {"thinking": False, "x": 1}


def test_an_enable_thinking_edit_reaches_the_kwarg_that_decides_it():
    req = ChatRequest.from_dict({"messages": MSGS, "chat_template_kwargs": {"enable_thinking": False}})
    assert req.enable_thinking is False
    out = apply_request_change(req, {"enable_thinking": True})
    assert out.enable_thinking is True and out.chat_template_kwargs == {"enable_thinking": True}
