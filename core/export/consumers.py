"""Which engines serve an exported ``response_template``, and what each would refuse (docs/export.md).

Each :class:`Consumer` is one engine entry point that reads a checkpoint's ``response_template``, with the subset
of the format it takes. :func:`consumer_verdicts` checks an exported template against each: the template-level
problems (the engine would refuse the checkpoint at startup) and the request-level limits (what it refuses per
request, whatever the template). Sources, read not copied:

- transformers ≥ :data:`TRANSFORMERS_MIN` (``utils/chat_parsing``: ``parse_response``, ``ResponseParser``; ``value_parser_by``):
  the whole format; field names free.
- vLLM's ``response_template`` serving parser (``vllm/parser/response_template.py``, served as
  ``--tool-call-parser hf --reasoning-parser hf`` from vLLM 0.32): only the fields ``thinking``, ``content``,
  ``tool_calls``; only ``role`` in ``defaults``; ``thinking``/``content`` must be plain ``text`` without
  ``transform`` or ``join``. Per request it refuses strict tools, ``tool_choice: required``, a named tool choice
  and ``parallel_tool_calls: false`` (it cannot enforce them without a grammar).
- vLLM ``beam``: the same template subset; it also derives a decoding grammar from the template, so the
  request-level guarantees are its to enforce (not checked here: its module was not available to read).
- SGLang 0.5.23 ``--tool-call-parser response_template`` (also the fallback of its ``auto`` detection): its module
  was not available to read; the transformers subset is assumed and marked unverified.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

TRANSFORMERS_MIN = "5.25"
"""The oldest transformers release the export is proven on (its ``utils/chat_parsing``: ``parse_response``,
``ResponseParser``), the one every proof now in docs/export.md ran on. Response templates shipped earlier (5.13 is
the release Hugging Face's own response-template pull requests name) and were extended since
(huggingface/transformers#47648 added the transform paths, such as ``{content.name}``, that JSON-call exports
write); which release first reads every export was not established and no older one was run, so none is claimed."""


class Consumer(str, enum.Enum):
    """An engine entry point that serves a ``response_template``."""

    TRANSFORMERS = "transformers"
    VLLM_HF = "vllm-hf"
    VLLM_BEAM = "vllm-beam"
    SGLANG = "sglang-response_template"


FLAGS = {
    Consumer.TRANSFORMERS: f"tokenizer.parse_response(...) (transformers >= {TRANSFORMERS_MIN})",
    Consumer.VLLM_HF: "vllm serve MODEL --enable-auto-tool-choice --tool-call-parser hf --reasoning-parser hf "
                      "(vLLM >= 0.32)",
    Consumer.VLLM_BEAM: "vllm serve MODEL --enable-auto-tool-choice --tool-call-parser beam --reasoning-parser hf "
                        "(vLLM >= 0.32)",
    Consumer.SGLANG: "python -m sglang.launch_server --model-path MODEL --tool-call-parser response_template "
                     "(SGLang 0.5.23)",
}
VERIFIED_BY = {
    Consumer.TRANSFORMERS: "transformers' own parser (core.export.verify)",
    Consumer.VLLM_HF: "the rules of vllm/parser/response_template.py (read)",
    Consumer.VLLM_BEAM: "the rules of vllm/parser/response_template.py (read); beam's grammar not checked",
    Consumer.SGLANG: "not verified (its module was not available); transformers' subset assumed",
}
VLLM_FIELDS = frozenset({"thinking", "content", "tool_calls"})
VLLM_TEXT_FIELDS = ("thinking", "content")
VLLM_HF_REQUEST_LIMITS = ("strict tools", "tool_choice: required", "a named tool_choice",
                          "parallel_tool_calls: false")


@dataclass
class ConsumerVerdict:
    """One consumer's answer for one exported template: ``serves`` (no template-level problem), ``refuses``
    (template-level problems, one line each), ``request_limits`` (refused per request whatever the template),
    ``flags`` (how to serve it) and ``verified_by`` (what the verdict rests on)."""

    consumer: Consumer
    serves: bool
    refuses: list[str] = field(default_factory=list)
    request_limits: list[str] = field(default_factory=list)
    flags: str = ""
    verified_by: str = ""

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"consumer": self.consumer.value, "serves": self.serves, "refuses": list(self.refuses),
                "request_limits": list(self.request_limits), "flags": self.flags, "verified_by": self.verified_by}

    def line(self) -> str:
        """One readable line: ``vllm-hf: serves (refuses per request: …)`` or ``…: refuses: …``."""
        if not self.serves:
            return f"{self.consumer.value}: refuses: {'; '.join(self.refuses)}"
        limits = f" (refuses per request: {', '.join(self.request_limits)})" if self.request_limits else ""
        return f"{self.consumer.value}: serves{limits} — {self.flags}"


def vllm_template_problems(template: dict[str, Any]) -> list[str]:
    """What vLLM's serving parser rejects in ``template`` at startup (empty: it loads)."""
    fields = template.get("fields") if isinstance(template.get("fields"), dict) else {}
    defaults = template.get("defaults") if isinstance(template.get("defaults"), dict) else {}
    out = []
    extra = sorted(set(fields) - VLLM_FIELDS)
    if extra:
        out.append(f"fields {extra} (vLLM serves only thinking, content, tool_calls; export with --for vllm)")
    extra_defaults = sorted(set(defaults) - {"role"})
    if extra_defaults:
        out.append(f"defaults {extra_defaults} (vLLM takes only role)")
    for name in VLLM_TEXT_FIELDS:
        spec = fields.get(name)
        if not isinstance(spec, dict):
            continue
        if spec.get("content", "text") != "text" or "transform" in spec or "join" in spec:
            out.append(f"field {name!r} is not plain text (a content parser, transform or join vLLM cannot stream)")
    return out


def vllm_flags(consumer: Consumer, template: dict[str, Any]) -> str:
    """The ``vllm serve`` line for ``template``: vLLM refuses to start when ``--reasoning-parser hf`` meets a
    template without a ``thinking`` field, or the tool-call parser one without ``tool_calls``, so each flag is
    named only when its field is there."""
    fields = template.get("fields") if isinstance(template.get("fields"), dict) else {}
    parts = ["vllm serve MODEL"]
    if "tool_calls" in fields:
        tool_parser = "hf" if consumer == Consumer.VLLM_HF else "beam"
        parts.append(f"--enable-auto-tool-choice --tool-call-parser {tool_parser}")
    if "thinking" in fields:
        parts.append("--reasoning-parser hf")
    if len(parts) == 1:
        parts.append("(no parser flag: the template has neither thinking nor tool_calls)")
    return " ".join(parts) + " (vLLM >= 0.32)"


def consumer_verdicts(template: dict[str, Any] | None, reasons: list[str] | None = None) -> list[ConsumerVerdict]:
    """Every consumer's verdict on an exported ``template`` (None: not exported, every consumer refuses with
    the export's ``reasons``)."""
    out = []
    for consumer in Consumer:
        flags, verified = FLAGS[consumer], VERIFIED_BY[consumer]
        if template is None:
            out.append(ConsumerVerdict(consumer, False, list(reasons or ["not exported"]), [], flags, verified))
            continue
        problems = []
        if consumer in (Consumer.VLLM_HF, Consumer.VLLM_BEAM):
            problems = vllm_template_problems(template)
            flags = vllm_flags(consumer, template)
        limits = list(VLLM_HF_REQUEST_LIMITS) if consumer == Consumer.VLLM_HF else []
        out.append(ConsumerVerdict(consumer, not problems, problems, limits, flags, verified))
    return out


__all__ = ["Consumer", "ConsumerVerdict", "FLAGS", "consumer_verdicts", "vllm_flags", "vllm_template_problems"]
