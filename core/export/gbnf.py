"""The GBNF grammar, lazy flag, triggers and preserved tokens we already build, as one export."""

from __future__ import annotations

from typing import Any


def export_gbnf(template: Any, *, fidelity: str = "llama.cpp") -> str:
    """The grammar for the round-trip request (tools, tool_choice auto) as GBNF text, followed by ``#`` lines for
    the lazy flag, triggers, preserved tokens and additional stops (the form of ``python -m core grammar``) and one
    naming the sample request's tools the grammar is for. Raises the
    pipeline's errors (:class:`~core.errors.ChatTemplateExplorerError`)."""
    import json

    from ..chat.pipeline import build_chat_parser
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import round_trip_request

    req = round_trip_request()
    p = build_chat_parser(template, ChatRequest.from_dict(req), fidelity=fidelity).parser
    lines = [p.grammar or "# no grammar for this request", f"# lazy: {str(bool(p.grammar_lazy)).lower()}"]
    for t in p.grammar_triggers or []:
        t = t.to_json() if hasattr(t, "to_json") else t
        lines.append(f"# trigger {t.get('type')}: {json.dumps(t.get('value'), ensure_ascii=False)}")
    if p.preserved_tokens:
        lines.append("# preserved tokens: " + json.dumps(p.preserved_tokens, ensure_ascii=False))
    if p.additional_stops:
        lines.append("# additional stops: " + json.dumps(p.additional_stops, ensure_ascii=False))
    # a grammar is per request: say whose tools it constrains to, and how to get one for the author's own
    names = ", ".join(t["function"]["name"] for t in req.get("tools") or [])
    lines.append(f"# request: the explorer's sample tools ({names}), tool_choice "
                 f"{req.get('tool_choice', 'auto')}; for your tools: python -m core grammar TEMPLATE --request R.json")
    return "\n".join(lines)
