"""Capability probing as llama.cpp b11549 does it: a probe render that raises is retried once with an empty
``reasoning_content`` on every assistant turn that lacks one (common/jinja/caps.cpp at b11549)."""

from __future__ import annotations

from pathlib import Path

from core.analysis.caps import _with_empty_reasoning, probe_caps
from core.jinja.template import ChatTemplate

DATA = Path(__file__).parent / "data" / "b11549"


def test_k2_horizon_needs_the_retry_to_show_tool_calls():
    """K2 Horizon raises "Assistant message is missing a thinking field" on the tool-call probes' assistant turns;
    with the retry they render and the tool flags are the template's (all False without it)."""
    caps = probe_caps(ChatTemplate((DATA / "IFM-K2-Horizon.jinja").read_text(encoding="utf-8"), "IFM-K2-Horizon"))
    assert caps.supports_tools and caps.supports_tool_calls
    assert caps.supports_parallel_tool_calls and caps.supports_object_arguments


def test_retry_adds_the_field_only_where_missing():
    ctx = {"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
                        {"role": "assistant", "content": "b", "reasoning_content": "r"}], "tools": []}
    retry = _with_empty_reasoning(ctx)
    assert retry is not None and [m.get("reasoning_content") for m in retry["messages"]] == [None, "", "r"]
    assert "reasoning_content" not in ctx["messages"][1]          # the probe's own context is left as it was
    assert _with_empty_reasoning({"messages": [{"role": "user", "content": "u"}]}) is None
