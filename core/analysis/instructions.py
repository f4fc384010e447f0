"""Tool-call format read from the instructions a prompt gives the model (improvement ``instruction-call-format``).

Some templates never render a tool call in the conversation history — there is nothing for T1 to diff — but
the instructions they write when tools are given spell the call format out: Granite 3.x "respond with
<|tool_call|> followed by a JSON list of tools used", Llama 3.2 Vision 'Respond in the format {"name":
function name, "parameters": dictionary of argument name and its value}', SmolLM3 "<tool_call>\\n{"name":
<function-name>, "arguments": <args-json-object>}\\n</tool_call>". llama.cpp reports no tool format for them
and every call stays in ``content``.

At ``improved`` fidelity, when the analysis found no format, comparison **I1** renders the probe user message
without and with the probe tools; the text the tools add is read by :func:`read_call_format`, and the result
fills the ordinary ``tools.format`` fields (mode JSON_NATIVE, section or per-call markers, name / arguments
keys, list wrapping), marked ``tools.inferred_from = "instructions"``. The normal PEG parser and GBNF are built
from those fields. A request whose own system message spells a format (an agent's prompt) is read the same
way at request time (:func:`format_for_request`).

Only JSON call shapes are read (a ``{"name": …, "arguments"|"parameters": …}`` example, or a marker "followed
by a JSON list/object"); tagged formats described in prose (GLM's ``<arg_key>``) are left alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..diff import RenderParams, SegmentKind, segmentize_markers
from . import probes as P
from .result import TemplateAnalysis, ToolFormat, ToolsAnalysis
from .fidelity import INSTRUCTION_CALL_FORMAT

INFERRED_FROM_INSTRUCTIONS = "instructions"
"""Value of ``ToolsAnalysis.inferred_from`` when the format was read from the tool instructions."""

INFERRED_WELL_KNOWN = "well-known"
"""Value of ``ToolsAnalysis.inferred_from`` when the template shows no tool-call format at all and the parser
reads the well-known ``<tool_call>{"name": …, "arguments": …}</tool_call>`` blocks (repair
``well-known-call-blocks``, :func:`well_known_format`)."""

FOUND_BY_LABEL = "inferred from instructions (I1)"
"""What the explorer's "found by" column says for a field set by comparison I1."""


@dataclass(frozen=True)
class InstructionFormat:
    """A JSON tool-call format read from instruction text.

    ``opener``: marker written before the call (``"<|tool_call|>"``, ``"<tool_call>"``; "" for bare JSON);
    ``closer``: marker after it ("" when none is spelled; for an XML-style opener ``<x>`` the parser then also
    accepts an optional ``</x>``); ``name_key`` / ``args_key``: the JSON keys (``"arguments"`` or
    ``"parameters"``); ``array``: the calls are a JSON list; ``evidence``: the instruction excerpt it was read
    from.
    """

    opener: str
    closer: str
    name_key: str
    args_key: str
    array: bool
    evidence: str


WELL_KNOWN_CALL = InstructionFormat("<tool_call>", "</tool_call>", "name", "arguments", False,
                                    '<tool_call> {"name": …, "arguments": {…}} </tool_call>')
"""The call block most open models write (Hermes / Qwen2.5 / ERNIE 4.5 / SmolLM3 templates render it)."""


_SHAPE_START = re.compile(r'\{\s*"name"\s*:\s*')
_ARGS_KEY = re.compile(r'\s*,\s*"(arguments|parameters)"\s*:\s*')
_LIST_PHRASE = re.compile(r"(<[^<>\s]{1,40}>)\s+followed\s+by\s+(?:an?\s+)?JSON\s+(list|array|object)", re.I)
_PROBE_NAMES = (P.FUN_FIRST, P.FUN_SECOND)


_MAX_CANDIDATES = 64
_MAX_EXAMPLE = 4000
# bounds for request-time text (a system message of any size): candidates tried, characters of one example


def braced_end(text: str, i: int, stop: int | None = None) -> int:
    """Index just past the ``{...}`` group that starts at ``text[i]`` (brace depth; double-quoted strings with
    backslash escapes skipped), or -1 when it does not close before ``stop`` (default: the end of ``text``).
    Shared by the instruction reader and the explain traces."""
    depth = 0
    in_str = False
    k = i
    stop = len(text) if stop is None else min(len(text), stop)
    while k < stop:
        c = text[k]
        if in_str:
            if c == "\\":
                k += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return k + 1
        k += 1
    return -1


def _balanced_end(text: str, i: int) -> int:
    """Index just past the ``{...}`` that starts at ``text[i]``, or -1 (also when it is longer than an example
    call can be)."""
    return braced_end(text, i, i + _MAX_EXAMPLE)


def _find_shape(text: str) -> tuple[int, int, str] | None:
    """``(start, end, args_key)`` of the first example call ``{"name": X, "arguments"|"parameters": Y}`` in
    ``text`` whose name is a placeholder (not a probe tool's name: tool definitions are not examples)."""
    for n, m in enumerate(_SHAPE_START.finditer(text)):
        if n >= _MAX_CANDIDATES:
            break
        pos = m.end()
        name_end = text.find(",", pos, pos + 200)
        if name_end < 0 or "\n" in text[pos:name_end] or "{" in text[pos:name_end]:
            continue
        if any(n in text[pos:name_end] for n in _PROBE_NAMES):
            continue
        a = _ARGS_KEY.match(text, name_end)
        if a is None:
            continue
        k = a.end()
        if k < len(text) and text[k] == "{":
            end = _balanced_end(text, k)
            if end < 0:
                continue
            k = end
        close = text.find("}", k, k + _MAX_EXAMPLE)
        if close < 0 or "\n" in text[k:close] and text[k:close].strip():
            continue
        return m.start(), close + 1, a.group(1)
    return None


def _marker_before(text: str) -> str:
    """The marker that ends ``text`` (trailing whitespace ignored), or ""."""
    segs = segmentize_markers(text.rstrip())
    return segs[-1].value if segs and segs[-1].kind == SegmentKind.MARKER else ""


def _marker_after(text: str) -> str:
    """The marker that starts ``text`` (leading whitespace ignored), or ""."""
    segs = segmentize_markers(text.lstrip())
    return segs[0].value if segs and segs[0].kind == SegmentKind.MARKER else ""


def _closing_tag(opener: str) -> str:
    m = re.fullmatch(r"<([A-Za-z_][\w.-]*)>", opener)
    return f"</{m.group(1)}>" if m else ""


def read_call_format(text: str) -> InstructionFormat | None:
    """Read a JSON tool-call format from instruction ``text``; None when the text spells none.

    Looks for an example call ``{"name": <placeholder>, "arguments"|"parameters": <placeholder>}`` (the marker
    right before it is the opener, a ``[`` right before it makes a list, a marker right after it the closer),
    else for "<MARKER> followed by a JSON list|object". E.g. ``'Respond in the format: <function_call>
    {"name": function name, "arguments": dictionary of argument name and its value}.'`` →
    opener ``<function_call>``, args key ``arguments``, one object. Never raises.
    """
    if not isinstance(text, str) or not text:
        return None
    shape = _find_shape(text)
    if shape is not None:
        start, end, args_key = shape
        before = text[:start].rstrip()
        array = before.endswith("[")
        if array:
            before = before[:-1]
        opener = _marker_before(before)
        closer = _marker_after(text[end:])
        if closer and not closer.startswith("</") and closer != _closing_tag(opener):
            closer = ""
        spelled = (opener + " " if opener else "") + ("[" if array else "") + text[start:end]
        evidence = " ".join((spelled + (" " + closer if closer else "")).split())
        return InstructionFormat(opener, closer, "name", args_key, array, evidence)
    m = _LIST_PHRASE.search(text)
    if m is not None:
        return InstructionFormat(m.group(1), "", "name", "arguments", m.group(2).lower() != "object",
                                 " ".join(m.group(0).split()))
    return None


def apply_format(tools: ToolsAnalysis, fmt: InstructionFormat) -> dict[str, Any]:
    """Fill ``tools`` (a ToolsAnalysis whose format is NONE) from ``fmt``; returns ``{field path: value}`` set.

    JSON_NATIVE; a list's markers are the section's (``section_start`` / ``section_end``), a single object's
    are per call (``per_call_start`` / ``per_call_end``); for an XML-style opener without a closer the closer
    is its closing tag and the parser treats it as optional (``tools.inferred_from`` tells it)."""
    f = tools.format
    closer = fmt.closer or _closing_tag(fmt.opener)
    f.mode = ToolFormat.JSON_NATIVE
    f.name_field, f.args_field = fmt.name_key, fmt.args_key
    f.tools_array_wrapped = fmt.array
    f.fun_name_is_key = False
    f.parameter_order = [fmt.name_key, fmt.args_key]
    if fmt.array:
        f.section_start, f.section_end, f.per_call_start, f.per_call_end = fmt.opener, closer, "", ""
    else:
        f.section_start, f.section_end, f.per_call_start, f.per_call_end = "", "", fmt.opener, closer
    tools.inferred_from = INFERRED_FROM_INSTRUCTIONS
    out: dict[str, Any] = {"tools.format.mode": f.mode.value}
    for k in ("section_start", "section_end", "per_call_start", "per_call_end", "name_field", "args_field",
              "tools_array_wrapped", "parameter_order"):
        out[f"tools.format.{k}"] = getattr(f, k)
    out["tools.inferred_from"] = INFERRED_FROM_INSTRUCTIONS
    return out


def analyze_instructions(s: Any, tools: ToolsAnalysis) -> InstructionFormat | None:
    """Comparison I1 (improvement ``instruction-call-format``): the probe user message without vs with the probe
    tools; the added text is read by :func:`read_call_format` and, when it spells a format, ``tools`` is filled
    (:func:`apply_format`). ``s``: the :class:`~core.analysis.session.ProbeSession`. Returns the format read."""
    cmp = s.compare("I1", "No call is ever rendered: what do the tool instructions say? A user message without vs "
                          "with tools.", RenderParams([P.user()]), RenderParams([P.user()], tools=P.tools()))
    if not cmp.ok:
        return None
    fmt = read_call_format(cmp.diff.right)
    if fmt is None:
        cmp.notes.append("the tool instructions spell no JSON call format")
        return None
    cmp.found.update(apply_format(tools, fmt))
    remark = (f"I1: the tool instructions spell the call format ({fmt.evidence!r}): "
              f"{example_call(tools.format, 'NAME', {'ARG': 'VALUE'})}")
    cmp.notes.append(remark)
    s.note_improvement(INSTRUCTION_CALL_FORMAT, remark)
    return fmt


def system_text(messages: Any) -> str:
    """The text of the first message when it is a system (or developer) message, else ""."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[0], dict):
        return ""
    m = messages[0]
    if m.get("role") not in ("system", "developer"):
        return ""
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def format_for_request(analysis: TemplateAnalysis, messages: Any) -> TemplateAnalysis | None:
    """Request-time half of ``instruction-call-format``: when the template renders no tool call (its format is
    NONE or was itself inferred from instructions) and the request's system message spells a JSON call format,
    a copy of ``analysis`` with that format (:func:`apply_format`); else None. The request's own instructions
    win over the template's: they are what the model was told for this conversation."""
    if analysis.tools.format.mode != ToolFormat.NONE and analysis.tools.inferred_from != INFERRED_FROM_INSTRUCTIONS:
        return None
    fmt = read_call_format(system_text(messages))
    if fmt is None:
        return None
    out = analysis.copy()
    out.tools = ToolsAnalysis()
    apply_format(out.tools, fmt)
    out.tools.inferred_from = INFERRED_FROM_INSTRUCTIONS
    for tok in (out.tools.format.section_start, out.tools.format.per_call_start):
        if tok.strip() and tok.strip() not in out.preserved_tokens:
            out.preserved_tokens.append(tok.strip())
    return out


def well_known_format(analysis: TemplateAnalysis) -> TemplateAnalysis | None:
    """Request-time half of repair ``well-known-call-blocks``: when the template shows no tool-call format at
    all — it renders no call (format NONE, not read from instructions either) and reports no tool-call support —
    a copy of ``analysis`` whose format is :data:`WELL_KNOWN_CALL` (marked ``inferred_from`` =
    :data:`INFERRED_WELL_KNOWN`); else None. The caller decides whether the repair is on and the request
    declares tools."""
    if analysis.tools.format.mode != ToolFormat.NONE or analysis.tools.inferred_from \
            or analysis.caps.supports_tool_calls:
        return None
    out = analysis.copy()
    out.tools = ToolsAnalysis()
    apply_format(out.tools, WELL_KNOWN_CALL)
    out.tools.inferred_from = INFERRED_WELL_KNOWN
    if WELL_KNOWN_CALL.opener not in out.preserved_tokens:
        out.preserved_tokens.append(WELL_KNOWN_CALL.opener)
    return out


def example_call(fmt: Any, name: str, arguments: dict[str, Any]) -> str:
    """One call to ``name`` with ``arguments`` written in a JSON format described by ``fmt`` (a
    :class:`~core.analysis.result.ToolFormatAnalysis`): opener, ``[`` when list-wrapped, the JSON object,
    ``]``, closer. Used to show an inferred format and to check it parses back."""
    obj = json.dumps({fmt.name_field or "name": name, fmt.args_field or "arguments": arguments}, ensure_ascii=False)
    if fmt.tools_array_wrapped:
        obj = f"[{obj}]"
    start = fmt.section_start or fmt.per_call_start
    end = fmt.section_end or fmt.per_call_end
    return f"{start}{obj}{end}"


def comparison_label(cmp_id: str) -> str:
    """What a "found by" column says for a field set by comparison ``cmp_id``: :data:`FOUND_BY_LABEL` for I1,
    else the id itself."""
    return FOUND_BY_LABEL if cmp_id == "I1" else cmp_id


def inferred_summary(report: Any) -> str | None:
    """One line for the Overview when the report's tool format was read from the tool instructions (else None):
    where it comes from and a call written in it. ``report``: an :class:`~core.analysis.AnalysisReport`."""
    analysis = getattr(report, "analysis", None)
    tools = getattr(analysis, "tools", None)
    if tools is None or tools.inferred_from != INFERRED_FROM_INSTRUCTIONS:
        return None
    cmp = report.comparison("I1") if hasattr(report, "comparison") else None
    spelled = ""
    if cmp is not None:
        fmt = read_call_format(cmp.diff.right) if cmp.diff is not None else None
        spelled = f" ({fmt.evidence})" if fmt is not None else ""
    return ("Tool-call format inferred from instructions (comparison I1, improvement instruction-call-format): the "
            f"template never renders a call in history, but its tool instructions spell one{spelled}. The parser "
            f"reads calls written as {example_call(tools.format, 'get_weather', {'city': 'Paris'})}; the end "
            "marker is optional and text after the calls is content. llama.cpp finds no tool format here.")


__all__ = ["FOUND_BY_LABEL", "INFERRED_FROM_INSTRUCTIONS", "INFERRED_WELL_KNOWN", "InstructionFormat", "WELL_KNOWN_CALL",
           "analyze_instructions", "apply_format", "comparison_label", "example_call", "format_for_request",
           "inferred_summary", "read_call_format", "system_text", "well_known_format"]
