"""The conversation our analysis and export render to learn a template, as text no exported pattern may hold:
what the template was given, never what it or the model writes. A leaf of :mod:`core.export` (the suite and the
response_template exporter both read it)."""

from __future__ import annotations

from typing import Any

SUITE_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_time", "description": "Current time (optionally in a time zone)",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": []}}},
]
"""Added to :data:`core.chat.roundtrip.ROUND_TRIP_TOOLS`: a tool without required arguments (empty calls)."""

UNICODE_CITY = "São Paulo — 東京 🌧"


_PROBE_TEXTS: tuple[str, ...] = ()


def probe_texts() -> tuple[str, ...]:
    """The conversation text our analysis and export render to learn a template (the differential analysis's
    needles, :mod:`core.analysis.probes`; the round trip's messages and tools, :mod:`core.chat.roundtrip`; the
    suite's tool): text the template was given, never text it or the model writes, so no exported pattern may
    hold it. Distinctive strings only (no short key or type name a marker could contain)."""
    global _PROBE_TEXTS
    if not _PROBE_TEXTS:
        from ..analysis import probes
        from ..chat import roundtrip

        calls = roundtrip.round_trip_message()["tool_calls"]
        _PROBE_TEXTS = tuple(dict.fromkeys([
            probes.FUN_FIRST, probes.FUN_SECOND, probes.ARG_FIRST, probes.ARG_SECOND, probes.USER_MSG,
            probes.USER_MSG_TWO, probes.ASSISTANT_MSG, probes.THINKING_CONTENT, probes.CALL_ID_001,
            probes.CALL_ID_002, probes.CALL_ID_999, "XXXX", "YYYY",
            roundtrip.USER_MESSAGE, roundtrip.REASONING_TEXT, roundtrip.CONTENT_TEXT, UNICODE_CITY,
            *(c["id"] for c in calls), *(str(v) for c in calls for v in c["function"]["arguments"].values()
                                         if isinstance(v, str)),
            *(t["function"][k] for t in roundtrip.ROUND_TRIP_TOOLS + SUITE_TOOLS for k in ("name", "description"))]))
    return _PROBE_TEXTS
