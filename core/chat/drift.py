"""The drift suite: real model outputs from public bug reports, parsed at a fidelity and compared with the message
a user would call right (``tests/data/drift/*.jsonl``).

Each case (one JSON object per line): ``id``, ``source`` (the report's URL), ``template`` (a file of
``../shared/templates``), ``request`` (OpenAI request: ``messages``, ``tools``, …), ``output`` (the raw model
output, exactly as reported), ``expect`` (OpenAI assistant message), optional ``expect_repairs`` (repair names
the parse must report, e.g. ``truncated-call``) and ``note``.

:func:`run_case` parses one case one-shot and streamed (one character at a time) and checks: the one-shot
message equals ``expect`` (as ``reference/README.md`` compares messages), the expected repairs were reported,
the accumulated deltas equal the one-shot parse (:func:`core.chat.repairs.settled`), and no call has
arguments that are not a JSON object.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from .casefiles import CASE_FIELDS, OutputCase, parse_case, read_jsonl_cases, streamed
from .repairs import is_json_object, settled
from .roundtrip import compare_messages


@dataclass
class DriftCase(OutputCase):
    """One drift case (see the module doc)."""

    expect_repairs: list[str] = field(default_factory=list)
    note: str = ""

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str = "drift case") -> "DriftCase":
        """From one JSON line; raises ``ValueError`` naming ``where`` and the missing field."""
        for k in CASE_FIELDS:
            if k not in d:
                raise ValueError(f"{where}: missing field {k!r}")
        return cls(d["id"], d["source"], d["template"], d["request"], d["output"], d["expect"],
                   list(d.get("expect_repairs") or []), d.get("note", ""))


@dataclass
class DriftResult:
    """How one case went at one fidelity: ``ok`` (message and expected repairs right), ``reason`` (first
    difference, "" when ok), ``repairs`` (names of the repairs that fired), ``stream_equal`` (accumulated
    deltas = one-shot parse), ``json_arguments`` (every call's arguments a JSON object), ``message`` (OpenAI)."""

    case: DriftCase
    fidelity: str
    ok: bool
    reason: str
    repairs: list[str]
    stream_equal: bool
    json_arguments: bool
    message: dict[str, Any]


def load_cases(paths: Iterable[str]) -> list[DriftCase]:
    """Every case of the given ``.jsonl`` files (directories: their ``*.jsonl``), in order. Raises
    ``ValueError`` naming the file and line of a malformed case or a duplicate id."""
    files: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".jsonl"))
        else:
            files.append(p)
    return [DriftCase.from_json(d) for _, d in read_jsonl_cases(files, CASE_FIELDS)]


def run_case(case: DriftCase, templates_dir: str, fidelity: str = "llama.cpp",
             disabled_repairs: Iterable[str] = ()) -> DriftResult:
    """Parse ``case.output`` for its template and request at ``fidelity`` (see the module doc), with the
    tolerance repairs ``disabled_repairs`` switched off. Raises ``OSError`` for a missing template and the
    project's errors for a bad request."""
    parser, one = parse_case(templates_dir, case.template, case.request, case.output, fidelity,
                             disabled_repairs=tuple(disabled_repairs))
    got = one.to_openai()
    fired = [r.name for r in one.repairs]
    reason = compare_messages(case.expect, got) or ""
    missing = [r for r in case.expect_repairs if r not in fired]
    if not reason and missing:
        reason = f"repairs: expected {missing} to fire, got {fired}"
    stream_equal = settled(streamed(parser, case.output), one).to_openai() == got
    return DriftResult(case, fidelity, not reason, reason, fired, stream_equal,
                       all(is_json_object(c.arguments) for c in one.tool_calls), got)


__all__ = ["DriftCase", "DriftResult", "load_cases", "run_case"]
