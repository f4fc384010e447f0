"""Template capability detection by instrumented rendering, and capability-driven message normalisation.

Follows llama.cpp ``common/jinja/caps.cpp`` (``caps_get``): every probe renders the template with fixture inputs
whose values *record how the template uses them* (:func:`core.jinja.llama.render_tracked`, usage tracking of
:mod:`core.jinja.usage`, rendered in llama.cpp's dialect), then reads those records.

Public API: :func:`probe_caps`, :func:`probe_caps_report` (with every probe run) and
:func:`normalize_messages`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..jinja.llama import ProbeResult, render_tracked
from ..jinja.template import ChatTemplate
from ..jinja.usage import UsageRecorder
from .result import Caps

__all__ = [
    "Caps",
    "CapsProbe",
    "CapsReport",
    "ProbeResult",
    "normalize_messages",
    "probe_caps",
    "probe_caps_report",
]

STRING_MARKER = "STRING_MARKER"
REASONING_PLACEHOLDER = "<REASONING_CONTENT_PLACEHOLDER>"


def _probe_tools() -> list[dict[str, Any]]:
    return [{
        "name": "tool",
        "type": "function",
        "function": {
            "name": "tool1",
            "description": "Tool description",
            "parameters": {
                "type": "object",
                "properties": {"arg": {"type": "string", "description": "Arg description"}},
                "required": ["arg"],
            },
        },
    }]


def _tool_call(call_id: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "tool1", "arguments": arguments}}


def _tool_conversation(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"},
    ]


def _base_context(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {
        "messages": messages,
        "tools": tools if tools is not None else [],
        "bos_token": "",
        "eos_token": "",
        "add_generation_prompt": True,
    }


@dataclass
class CapsProbe:
    """One capability probe: ``id`` (e.g. ``"system_role"``), ``title`` (what it asks), ``success`` and
    ``error`` of its render."""

    id: str
    title: str
    success: bool
    error: str | None


@dataclass
class CapsReport:
    """:func:`probe_caps_report` result: the final ``caps`` and every ``probes`` entry in run order."""

    caps: Caps
    probes: list[CapsProbe]


class _Runner:
    """Runs the probes of one template; after a probe hits a render *time* limit the remaining probes are
    not rendered (they count as failed), so a pathological template costs one time budget, not seven."""

    def __init__(self, template: ChatTemplate) -> None:
        self.template = template
        self.timed_out: str | None = None
        self.probes: list[CapsProbe] = []

    def run(self, pid: str, title: str, context: dict[str, Any], **kw: Any) -> ProbeResult:
        if self.timed_out:
            rec = UsageRecorder()
            res = ProbeResult(False, "", f"skipped: an earlier probe hit the time limit ({self.timed_out})",
                              rec, _wrapped_copy(rec, context, kw))
        else:
            res = render_tracked(self.template, context, **kw)
            if not res.success and res.error and "longer than" in res.error:
                self.timed_out = res.error
            elif not res.success:
                retry = _with_empty_reasoning(context)
                if retry is not None:   # b11549 caps.cpp: one retry, for templates that need the field
                    res = render_tracked(self.template, retry, **kw)
        self.probes.append(CapsProbe(pid, title, res.success, res.error))
        return res


def _with_empty_reasoning(context: dict[str, Any]) -> dict[str, Any] | None:
    """``context`` with ``reasoning_content: ""`` added to every assistant message that has none (llama.cpp
    b11549 retries a failed probe render once so, for templates such as K2 Horizon's that require a thinking
    field on every assistant turn); None when no message lacked it (no retry)."""
    messages = context.get("messages")
    if not isinstance(messages, list):
        return None
    added = False
    out = []
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant" and "reasoning_content" not in m:
            m = dict(m, reasoning_content="")
            added = True
        out.append(m)
    return dict(context, messages=out) if added else None


def _wrapped_copy(rec: UsageRecorder, context: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    ctx = dict(context)
    for k in kw.get("tracked_keys", ("messages", "tools")):
        if k in ctx:
            ctx[k] = rec.wrap(ctx[k])
    for alias, key in (kw.get("aliases") or {}).items():
        ctx[alias] = ctx[key]
    return ctx


def probe_caps_report(template: ChatTemplate) -> CapsReport:
    """Probe a template's capabilities by instrumented renders, as llama.cpp's ``caps_get`` does
    (``common/jinja/caps.cpp``; analysis notes §3), and list every probe run.

    Probes in upstream order: typed content (plus a second typed-content probe with ``content: []`` when
    the template tested ``content is string``), system role, one tool call with object arguments, one
    with string arguments (only if object arguments were not seen), two parallel calls, preserved
    reasoning, reasoning effort. Each renders with globals ``messages``, ``tools`` (``[]`` when the probe
    has none), ``bos_token=""``, ``eos_token=""``, ``add_generation_prompt=True`` and probe-specific
    variables. Template errors are swallowed (a failed probe clears flags or infers nothing, as upstream),
    so this never raises for a template that compiled.
    """
    caps = Caps()
    run = _Runner(template)
    rec_has = UsageRecorder.has_op

    # 1. typed content
    r = run.run("typed_content", "Is string content rendered, or is content read as a list of parts?",
                _base_context([{"role": "user", "content": STRING_MARKER}], None))
    content = r.context["messages"][0]["content"]
    checks_for_string = rec_has(r.recorder, content, "test_is_string")
    used_as_array = rec_has(r.recorder, content, "selectattr") or rec_has(r.recorder, content, "array_access")
    if used_as_array:
        caps.supports_typed_content = True
    if not r.success:
        caps.supports_string_content = False
    elif used_as_array and STRING_MARKER not in r.output:
        caps.supports_string_content = False

    if checks_for_string:
        r = run.run("typed_content_list", "The template tests `content is string`: is list content read?",
                    _base_context([{"role": "user", "content": []}], None))
        content = r.context["messages"][0]["content"]
        used_as_array = rec_has(r.recorder, content, "selectattr") or rec_has(r.recorder, content, "array_access")
        if used_as_array and r.success:
            caps.supports_typed_content = True

    # 2. system role
    r = run.run("system_role", "Is the system message's content read?", _base_context([
        {"role": "system", "content": "System message"},
        {"role": "user", "content": "User message"},
    ], None))
    if not r.recorder.used(r.context["messages"][0]["content"]):
        caps.supports_system_role = False

    # 3. one tool call, object arguments
    r = run.run("tool_call_object_args", "One tool call with object arguments: are tools, calls and "
                "argument values read?",
                _base_context(_tool_conversation([_tool_call("call00001", {"arg": "value"})]), _probe_tools()))
    if r.success:
        msgs, tools = r.context["messages"], r.context["tools"]
        tool_calls = msgs[1]["tool_calls"]
        if not r.recorder.used(tools[0]["function"]["name"]):
            caps.supports_tools = False
        if not r.recorder.used(tool_calls):
            caps.supports_tool_calls = False
        elif r.recorder.used(tool_calls[0]["function"]["arguments"]["arg"]):
            caps.supports_object_arguments = True

    # 4. one tool call, string arguments
    if not caps.supports_object_arguments:
        r = run.run("tool_call_string_args", "One tool call with arguments as a JSON string: does it render, "
                    "are tools and calls read?",
                    _base_context(_tool_conversation([_tool_call("call00001", '{"arg": "value"}')]),
                                  _probe_tools()))
        if not r.success:
            caps.supports_tool_calls = False
            caps.supports_tools = False
        else:
            msgs, tools = r.context["messages"], r.context["tools"]
            if not r.recorder.used(tools[0]["function"]["name"]):
                caps.supports_tools = False
            if not r.recorder.used(msgs[1]["tool_calls"]):
                caps.supports_tool_calls = False

    # 5. parallel tool calls
    args: Any = {"arg": "value"} if caps.supports_object_arguments else '{"arg": "value"}'
    r = run.run("parallel_tool_calls", "Two tool calls in one message: is the second call read?",
                _base_context(_tool_conversation([_tool_call("call00001", args),
                                                  _tool_call("call00002", copy.deepcopy(args))]),
                              _probe_tools()))
    if not r.success or not r.recorder.used(r.context["messages"][1]["tool_calls"][1]["function"]):
        caps.supports_parallel_tool_calls = False

    # 6. preserve reasoning (judged on the output only: a test on reasoning_content is not enough)
    ctx = _base_context([
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": REASONING_PLACEHOLDER},
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
        {"role": "user", "content": "User message"},
    ], None)
    ctx.update(enable_thinking=True, preserve_thinking=True, clear_thinking=False,
               truncate_history_thinking=False, drop_thinking=False)
    r = run.run("preserve_reasoning", "Is reasoning of an earlier assistant turn rendered?", ctx)
    if REASONING_PLACEHOLDER in r.output:
        caps.supports_preserve_reasoning = True

    # 7. reasoning effort: reasoning_effort and reasoning_strength are bound to one shared value
    ctx = _base_context([{"role": "user", "content": "User message"}], None)
    ctx.update(enable_thinking=True, reasoning_effort="low")
    r = run.run("reasoning_effort", "Is `reasoning_effort` (or `reasoning_strength`) read?", ctx,
                tracked_keys=("messages", "tools", "reasoning_effort"),
                aliases={"reasoning_strength": "reasoning_effort"})
    caps.supports_reasoning_effort = r.recorder.used(r.context["reasoning_effort"])
    return CapsReport(caps, run.probes)


def probe_caps(template: ChatTemplate) -> Caps:
    """The capabilities of ``template`` (a :class:`core.analysis.result.Caps`), probed as llama.cpp's
    ``caps_get`` does; see :func:`probe_caps_report` for the probes. Never raises for a compiled template."""
    return probe_caps_report(template).caps


# ---------------------------------------------------------------------------------------------------------
# message normalisation (analysis notes §2; llama.cpp chat.cpp messages_inp_normalizer)
# ---------------------------------------------------------------------------------------------------------


def _concat_content_parts(parts: list[Any]) -> str:
    """Join text parts with ``\\n``; no newline next to a ``media_marker`` part; other part types dropped."""
    text = ""
    last_was_media = False
    for part in parts:
        ptype = part.get("type", "") if isinstance(part, dict) else ""
        if ptype == "text":
            add_newline = not last_was_media and text != ""
            last_was_media = False
        elif ptype == "media_marker":
            add_newline = False
            last_was_media = True
        else:
            continue
        if add_newline:
            text += "\n"
        value = part.get("text", "")
        text += value if isinstance(value, str) else str(value)
    return text


def normalize_messages(messages: list[dict[str, Any]], caps: Caps) -> list[dict[str, Any]]:
    """Messages as llama.cpp passes them to a template with capabilities ``caps`` (analysis notes §2).

    * string content only (``supports_string_content and not supports_typed_content``): list content
      becomes one string (text parts joined with ``\\n``, see :func:`_concat_content_parts`);
    * typed content only: string content becomes ``[{"type": "text", "text": s}]`` (``""`` included,
      ``None`` stays ``None``);
    * otherwise (both or neither) the messages are returned unchanged.

    Returns a new list of shallow-copied message dicts; the input is never modified. Non-dict entries
    are passed through as they are.
    """
    only_string = caps.supports_string_content and not caps.supports_typed_content
    only_typed = caps.supports_typed_content and not caps.supports_string_content
    if not (only_string or only_typed) or not isinstance(messages, list):
        return messages
    out: list[dict[str, Any]] = []
    for msg in messages:
        if not isinstance(msg, dict) or "content" not in msg:
            out.append(msg)
            continue
        m = dict(msg)
        c = m["content"]
        if only_typed and isinstance(c, str):
            m["content"] = [{"type": "text", "text": c}]
        elif only_string and isinstance(c, list):
            m["content"] = _concat_content_parts(c)
        out.append(m)
    return out
