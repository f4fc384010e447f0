"""Long model outputs for the parse and streaming benchmarks (P2, P3).

:func:`long_output` writes what a model following a template would generate for an assistant turn with
reasoning, content and several tool calls: the conversation is rendered with and without that turn through
the template (the request path's renderer, :mod:`core.chat.prompt`), the turn's text is what follows their
common prefix, minus the template's end-of-turn text. Templates often drop the reasoning of the last turn;
then the reasoning block is written by hand from the analysed markers (``reasoning.start``/``end``) — the
parser is checked to read the output back (same reasoning, content and number of calls), so a bad sample
fails loudly instead of being timed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core.chat.message import AssistantMessage
from core.chat.pipeline import ChatParserBundle, build_chat_parser
from core.chat.prompt import prepare_request, render_prompt
from core.diff import common_prefix_len
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather forecast for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search_notes", "description": "Full-text search in the user's notes",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                       "required": ["query"]}}},
]

_WORDS = {
    "reasoning": ("first I weigh each option carefully and check the units twice because a forecast for "
                  "several days needs both the city name and the number of days").split(),
    "content": ("here is your plan for the trip with museums in the morning and long walks along the "
                "river in the afternoon when the weather allows").split(),
    "args": ("paris france old town near the river seine with cafes bridges and gardens").split(),
}


class SampleError(Exception):
    """The template cannot produce a usable sample (names the template and the reason)."""


def filler(n_chars: int, kind: str = "content", seed: int = 0) -> str:
    """Plain prose of about ``n_chars`` characters from the ``kind`` vocabulary ("reasoning", "content",
    "args"): words, spaces, a newline every ~12 words, a full stop at the end; no markup characters, so it
    is safe inside JSON strings and XML-like tags."""
    words = _WORDS[kind]
    out: list[str] = []
    size = 0
    i = seed
    while size < n_chars:
        w = words[i % len(words)]
        sep = "\n" if i % 12 == 11 else " "
        out.append(w + sep)
        size += len(w) + 1
        i += 1
    return ("".join(out).rstrip() + ".")[: max(1, n_chars)]


@dataclass
class Sample:
    """A long output for one template: ``output`` (model text after the prompt), ``bundle`` (the parser
    bundle of the request), ``expected`` (the message it encodes), ``format`` (tool format of the analysis),
    ``note`` (how the sample was made)."""

    template: str
    output: str
    bundle: ChatParserBundle
    expected: AssistantMessage
    format: str
    note: str

    @property
    def size_bytes(self) -> int:
        """Size of ``output`` in bytes (UTF-8)."""
        return len(self.output.encode("utf-8"))


def _request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messages": messages, "tools": TOOLS, "tool_choice": "auto", "parallel_tool_calls": True,
            "reasoning_format": "auto", "enable_thinking": True, "add_generation_prompt": True}


def _assistant(reasoning: str, content: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "reasoning_content": reasoning,
            "tool_calls": [{"id": f"c{i:08d}", "type": "function",  # 9 alphanumerics, as Mistral's templates demand
                            "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)]}


def _turn_text(template: ChatTemplate, messages: list[dict[str, Any]], turn: dict[str, Any]) -> str:
    base = ChatRequest.from_dict(_request(messages))
    prep = prepare_request(template, base)
    with_gp = render_prompt(prep, add_generation_prompt=True)

    def render_with(msg: dict[str, Any]) -> str:
        req = ChatRequest.from_dict(_request([*messages, msg]))
        return render_prompt(prepare_request(template, req, caps=prep.caps), add_generation_prompt=False)

    full = render_with(turn)
    out = full[common_prefix_len(full, with_gp):]
    sentinel = "Z_BENCH_END_Z"
    probe = render_with({"role": "assistant", "content": sentinel})
    i = probe.rfind(sentinel)
    if i >= 0:
        end = probe[i + len(sentinel):]
        if end and out.endswith(end):
            out = out[: len(out) - len(end)]
    return out


def long_output(template: ChatTemplate, size: int, calls: int = 5) -> Sample:
    """A sample of about ``size`` characters for ``template``: half reasoning, a quarter content, a quarter
    spread over ``calls`` tool calls (string arguments). Raises :class:`SampleError` when the parser does
    not read the sample back as written."""
    messages = [{"role": "user", "content": "Plan my trip to Paris."}]
    bundle = build_chat_parser(template, ChatRequest.from_dict(_request(messages)))
    analysis = bundle.report.analysis if bundle.report is not None else None
    reasoning = filler(size // 2, "reasoning")
    content = filler(size // 4, "content")
    per_call = max(8, (size // 4) // max(1, calls) - 40)
    call_list = [("get_weather" if i % 2 == 0 else "search_notes",
                  {"city": filler(per_call, "args", i)} if i % 2 == 0 else {"query": filler(per_call, "args", i + 3)})
                 for i in range(calls)]
    out = _turn_text(template, messages, _assistant(reasoning, content, call_list))
    note = "rendered through the template"
    if reasoning[:40] not in out and analysis is not None and analysis.reasoning.end:
        # the template drops the last turn's reasoning: write the block from the analysed markers
        start, end = analysis.reasoning.start, analysis.reasoning.end
        opened = bool(start.strip()) and bundle.generation_prompt.rstrip().endswith(start.strip())
        if out.lstrip().startswith(end.strip()):  # an empty block was rendered: fill it
            out = reasoning + out
        else:
            out = ("" if opened else start) + reasoning + end + ("" if out[:1].isspace() else "\n") + out
        note = "rendered; reasoning block written from the analysed markers"
    elif reasoning[:40] not in out and analysis is not None and not analysis.reasoning.end:
        reasoning = ""  # no reasoning in this format (Mistral Small 3.2): the sample has none
    if content[:40] not in out:
        # the template drops the content of a turn with tool calls; models write it before them
        out = content + out
        note += "; content written before the calls"
    expected = AssistantMessage(content=content, reasoning_content=reasoning)
    got = bundle.parser.parse(out)
    problems = []
    if got.reasoning_content.strip() != reasoning.strip():
        problems.append("reasoning not read back")
    if got.content.strip() != content.strip():
        problems.append("content not read back")
    if len(got.tool_calls) != calls:
        problems.append(f"{len(got.tool_calls)} tool calls read back, {calls} written")
    else:
        for (name, args), tc in zip(call_list, got.tool_calls):
            try:
                same = tc.name == name and json.loads(tc.arguments) == args
            except json.JSONDecodeError:
                same = False
            if not same:
                problems.append(f"tool call {tc.name} not read back")
                break
    if problems:
        raise SampleError(f"{template.name}: {'; '.join(problems)} (output starts {out[:120]!r})")
    fmt = analysis.tools.format.mode.value if analysis is not None else bundle.format
    return Sample(template.name, out, bundle, got, fmt, note)


def fit_output(template: ChatTemplate, target_bytes: int, calls: int) -> Sample:
    """:func:`long_output` scaled so the output is within ~5% of ``target_bytes`` (UTF-8)."""
    size = target_bytes
    sample = long_output(template, size, calls)
    for _ in range(4):
        if abs(sample.size_bytes - target_bytes) <= target_bytes * 0.05:
            break
        size = max(64, int(size * target_bytes / max(1, sample.size_bytes)))
        sample = long_output(template, size, calls)
    return sample
