"""Fixes that are checked: candidate changes (fidelity, analysis overrides, request settings), each re-parsed;
:func:`candidate_fixes` keeps those that parse the same output clean into a different message."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ..chat.lossless import parser_marks
from ..chat.request import ToolChoice
from .model import (MARKER_TOKEN, WS, Cause, Fix, FixKind, Setup, called_names, message_of, reasoning_markers,
                   stop_point, tool_stub, trace)
from .trace_routes import ParseTrace

MAX_CANDIDATES = 24


def candidate_fixes(setup: Setup, bundle: Any, tr: ParseTrace, ex: Any) -> list[Fix]:  # noqa: C901
    """Candidate changes for this explanation, each re-parsed; only those giving a clean parse whose message
    differs from the current one (more tool calls, or reasoning/content split differently) are returned,
    at most one per message; changes whose re-parse needed a repair (:mod:`core.chat.repairs`, named in the
    description) come after those that fit the format."""
    if ex.clean and not ex.findings:
        return []
    cur = tr.message.to_openai()
    causes = {f.cause for f in ex.findings}
    cands: list[tuple[FixKind, str, dict[str, Any], Setup]] = []
    other = "improved" if setup.fidelity == "llama.cpp" else "llama.cpp"
    if Cause.FIDELITY_DIFFERS in causes or not ex.clean:
        cands.append((FixKind.FIDELITY, f"parse at {other} fidelity", {"fidelity": other},
                      replace(setup, fidelity=other)))
    req = setup.request
    if Cause.REASONING_PREFILL in causes or Cause.TRUNCATED in causes:
        flip = not req.enable_thinking
        cands.append((FixKind.REQUEST, f"set enable_thinking to {str(flip).lower()}", {"request": {"enable_thinking": flip}},
                      replace(setup, request=replace(req, enable_thinking=flip))))
    if Cause.REASONING_PREFILL in causes and req.reasoning_format.value == "none":
        fmt = type(req.reasoning_format)("auto")
        cands.append((FixKind.REQUEST, "set reasoning_format to auto (extract the reasoning)",
                      {"request": {"reasoning_format": "auto"}},
                      replace(setup, request=replace(req, reasoning_format=fmt))))
    if Cause.PARALLEL_NOT_REQUESTED in causes:
        cands.append((FixKind.REQUEST, "set parallel_tool_calls to true", {"request": {"parallel_tool_calls": True}},
                      replace(setup, request=replace(req, parallel_tool_calls=True))))
    if Cause.TOOLS_NOT_REQUESTED in causes or Cause.UNKNOWN_TOOL in causes:
        names = offered_names(bundle, ex, req)
        for n in names[:6]:
            tools = list(req.tools or []) + [tool_stub(n)]
            choice = ToolChoice.AUTO if req.tool_choice == ToolChoice.NONE else req.tool_choice
            cands.append((FixKind.REQUEST, f"offer the tool {n!r} in the request (tools)",
                          {"request": {"tools": tools, "tool_choice": choice.value}},
                          replace(setup, request=replace(req, tools=tools, tool_choice=choice))))
    if bundle.format == "peg-native" and bundle.report is not None:
        base = {}
        for f in ex.findings:
            base.update(f.overrides)
        changes = _override_candidates(bundle.report.analysis, ex.stop, ex.text, tr.message, causes)
        if base:
            # the classification re-parsed with these already: add what that parse then met
            changes.insert(0, dict(base))
            try:
                b2, tr2 = trace(replace(setup, overrides={**setup.overrides, **base}), ex.output)
                if tr2.stop >= 0:
                    sp = stop_point(tr2.text, tr2.gp_len, tr2.stop, tr2.furthest.expected, tr2.furthest.path)
                    for c in _override_candidates(b2.report.analysis, sp, tr2.text, tr2.message, causes):
                        changes.insert(1, {**base, **c})
            except Exception:  # noqa: BLE001 - a candidate that does not build is simply not offered
                pass
        for change in changes:
            desc = "override " + ", ".join(f"{k} = {v!r}" for k, v in change.items())
            cands.append((FixKind.OVERRIDE, desc, {"overrides": change},
                          replace(setup, overrides={**setup.overrides, **change})))
    parsed: list[tuple[bool, Fix]] = []
    for kind, desc, change, s in cands[:MAX_CANDIDATES]:
        try:
            m, clean = message_of(s, ex.output)
        except Exception:  # noqa: BLE001 - a candidate that does not build is simply not offered
            continue
        new = m.to_openai()
        if not clean or new == cur or len(m.tool_calls) < len(tr.message.tool_calls):
            continue
        if (kind == FixKind.FIDELITY or (kind == FixKind.REQUEST and "tools" not in change["request"])) \
                and _leaks(bundle, m):
            # a reasoning setting or the other fidelity that leaves reasoning markers in the message fixes nothing
            # (explain calls such a parse suspicious; at llama.cpp fidelity it undoes a repair switched on)
            continue
        fired = list(dict.fromkeys(getattr(r, "name", "") for r in m.repairs))
        if fired:
            desc += " (repaired: " + ", ".join(fired) + ")"
        parsed.append((bool(fired), Fix(kind, desc, change, new)))
    # a change whose re-parse fits the format comes before one that parses only because a repair of improved
    # fidelity (core.chat.repairs) tolerated the drift; of changes giving the same message the first is kept
    parsed.sort(key=lambda p: p[0])
    out: list[Fix] = []
    seen: set[str] = set()
    for _repaired, fix in parsed:
        key = repr(fix.message)
        if key in seen:
            continue
        seen.add(key)
        out.append(fix)
    return out


def offered_names(bundle: Any, ex: Any, req: Any) -> list[str]:
    """The called names a request fix may offer as a tool: :func:`called_names` without the words of the format's
    own markup (Harmony's channel name ``final`` after ``<|channel|>`` is no tool the model called)."""
    own = parser_marks(bundle.parser)
    return [n for n in called_names(ex, req) if n not in own]


def _leaks(bundle: Any, m: Any) -> bool:
    """Whether the message keeps a reasoning marker in its content or its reasoning (a marker read as text)."""
    start, ends = reasoning_markers(bundle)
    text = (m.content or "") + (m.reasoning_content or "")
    return any(x and x.strip(WS) and x.strip(WS) in text for x in [start] + ends)


def _override_candidates(a: Any, st: Any, text: str, message: Any, causes: set) -> list[dict[str, str]]:
    """Overrides ({analysis field path: new value}) to try: the field whose marker was expected at the stop point set to the
    marker the model wrote there; the JSON key fields set to the key it wrote; the tool-call opener (and its
    closer) set to a marker-like token the content holds before a tool name."""
    from .spans import marker_labels

    labels = marker_labels(a.to_json())
    out: list[dict[str, str]] = []
    if st is not None:
        found = text[st.pos:]
        tok = MARKER_TOKEN.match(found)
        key = re.match(r'"([^"]{1,40})"', found)
        for e in st.expected:
            if not e.startswith("`"):
                continue
            lit = e[1:-1].replace("\\n", "\n").replace("\\t", "\t")
            for path in (labels.get(lit) or labels.get(lit.strip(WS)) or "").split(" / "):
                if not path:
                    continue
                if path.endswith("_field") and key:
                    out.append({path: key.group(1)})
                elif tok:
                    cur = _field_value(a, path)
                    lead = cur[:len(cur) - len(cur.lstrip(WS))]
                    trail = cur[len(cur.rstrip(WS)):]
                    out.append({path: lead + tok.group(0) + trail})
    if Cause.OTHER_MARKER in causes and not message.tool_calls:
        f = a.tools.format
        opener_path = ("tools.format.per_call_start" if f.per_call_start else
                       "tools.format.section_start" if f.section_start else
                       "tools.function.name_prefix" if a.tools.function.name_prefix else "")
        closer_path = ("tools.format.per_call_end" if f.per_call_start else
                       "tools.format.section_end" if f.section_start else "")
        if opener_path:
            cur_open = _field_value(a, opener_path)
            trail = cur_open[len(cur_open.rstrip(WS)):]
            for t in list(dict.fromkeys(m.group(0) for m in MARKER_TOKEN.finditer(message.content)))[:6]:
                if t.startswith("</"):
                    continue
                close = "</" + t[1:] if t.startswith("<") and not t.startswith("<|") else ""
                if closer_path and close and close in message.content:
                    out.append({opener_path: t + trail, closer_path: close})
                out.append({opener_path: t + trail})
    uniq: list[dict[str, str]] = []
    for o in out:
        if o not in uniq:
            uniq.append(o)
    return uniq


def _field_value(analysis: Any, path: str) -> str:
    node: Any = analysis.to_json()
    for part in path.split("."):
        node = node.get(part, "") if isinstance(node, dict) else ""
    return node if isinstance(node, str) else ""
