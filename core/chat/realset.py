"""The evaluation set of real model outputs (``tests/data/real_outputs/*.jsonl``, one file per model family):
outputs published by peers (vLLM's tool-parser tests, bug reports), each with the message a user would call
right, run at both fidelities one-shot and streamed.

Each case (one JSON object per line): ``id``, ``source`` (URL, at a commit), ``model``, ``template`` (a file of
``../shared/templates`` matching the model), ``request`` (``messages``, ``tools``, options), ``output`` (the raw
output, exact), ``expect`` (OpenAI assistant message), ``fidelity`` (``"both"``: right at ``llama.cpp`` fidelity
too; ``"improved"``: needs the improved fidelity), ``note``.

The set is split deterministically into ``dev`` (repairs are written from it) and ``holdout`` (its failures are
not looked at while writing repairs): :func:`split_of` hashes the case's source URL and id. A case may name its
split itself (``"split": "dev"`` on batch 1, ``tests/data/real_outputs_fresh``: kept aside as ``"fresh"`` until the
repairs were measured on it, dev since; a kept-aside batch names its own split).

:func:`run_case` parses a case one-shot and streamed at chunk sizes 1, 3, 17, the whole output in one delta and
"several calls in one delta" (the text before the first call opener, then the rest at once), and checks the
message, stream = one-shot (at ``improved`` the accumulated deltas exactly; at ``llama.cpp`` what a client keeps,
:func:`core.chat.repairs.settled`) and that no word is lost (:mod:`core.chat.lossless`) — at ``improved`` no
character either (:mod:`core.chat.char_audit`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from .casefiles import CASE_FIELDS, OutputCase, parse_case, read_jsonl_cases, streamed
from .char_audit import audit_parse
from .lossless import lost_word_spans, parser_marks, trigger_words
from .repairs import settled
from .roundtrip import compare_messages

HOLDOUT_SHARE = 3   # one case in three is held out

CHUNKS: tuple[Any, ...] = (1, 3, 17, "whole", "calls-at-once")


@dataclass
class RealCase(OutputCase):
    """One case of the set (see the module doc); ``family`` is its file's name."""

    family: str = ""
    model: str = ""
    fidelity: str = "improved"
    note: str = ""
    fixed_split: str = ""

    @property
    def split(self) -> str:
        """The case's own ``"split"`` field when it has one (a kept-aside batch's name; ``"dev"`` on batch 1,
        ``tests/data/real_outputs_fresh``), else ``"dev"`` or ``"holdout"``
        (:func:`split_of`)."""
        return self.fixed_split or split_of(self.source, self.id)


def split_of(source: str, case_id: str) -> str:
    """``"holdout"`` for one case in :data:`HOLDOUT_SHARE` (by a hash of ``source`` and ``case_id``), else
    ``"dev"``; stable across runs and machines."""
    h = hashlib.sha256(f"{source}#{case_id}".encode("utf-8")).digest()
    return "holdout" if h[0] % HOLDOUT_SHARE == 0 else "dev"


def load_cases(directory: str) -> list[RealCase]:
    """Every case of the ``*.jsonl`` files of ``directory``, by file then line. Raises ``ValueError`` naming the
    file and line of a malformed case or a duplicate id."""
    files = [os.path.join(directory, n) for n in sorted(os.listdir(directory)) if n.endswith(".jsonl")]
    return [RealCase(*(d[k] for k in CASE_FIELDS), family=os.path.basename(path)[:-len(".jsonl")], model=d["model"],
                     fidelity=d.get("fidelity", "improved"), note=d.get("note", ""),
                     fixed_split=str(d.get("split") or ""))
            for path, d in read_jsonl_cases(files, (*CASE_FIELDS, "model"), os.path.basename)]


@dataclass
class RealResult:
    """How one case went at one fidelity: ``ok`` (one-shot message right, every stream the same, no word
    lost — at ``improved`` no character), ``reason`` (the first problem), ``lost`` (words, and at ``improved``
    the text of lost characters, of the one-shot parse), ``message``."""

    case: RealCase
    fidelity: str
    ok: bool
    reason: str
    lost: list[str] = field(default_factory=list)
    message: dict[str, Any] = field(default_factory=dict)


def _chunks(output: str, how: Any, openers: Iterable[str]) -> list[str]:
    if how == "whole":
        return [output]
    if how == "calls-at-once":
        at = min((k for k in (output.find(w) for w in openers if w) if k >= 0), default=-1)
        return [output[:at], output[at:]] if at > 0 else [output]
    return [output[i:i + how] for i in range(0, len(output), how)]


def run_case(case: RealCase, templates_dir: str, fidelity: str) -> RealResult:
    """Parse ``case`` at ``fidelity`` one-shot and streamed (:data:`CHUNKS`); never raises for a bad parse (a
    missing template file raises ``OSError``)."""
    parser, one = parse_case(templates_dir, case.template, case.request, case.output, fidelity)
    got = one.to_openai()
    lost = [w for w, _ in lost_word_spans(case.output, one, parser_marks(parser))]
    if fidelity == "improved":   # to the character (repair unparsed-characters keeps what no word shows); the
        # audit that repair made of this very message is reused (audit_parse keeps the last): one walk per case
        lost += [s.text(case.output) for s in audit_parse(parser, case.output, one).lost()]
    reason = compare_messages(case.expect, got) or ""
    if not reason and lost:
        reason = f"lost text {lost[:5]}"
    openers = trigger_words(parser)
    for how in CHUNKS:
        if reason:
            break
        message = streamed(parser, _chunks(case.output, how, openers))
        message = message if fidelity == "improved" else settled(message, one)
        if message.to_openai() != got:
            reason = f"stream (chunk {how}) != one-shot: {compare_messages(got, message.to_openai())}"
    return RealResult(case, fidelity, not reason, reason, lost, got)


def rate_table(results: list[RealResult]) -> str:
    """Markdown: per family, the share of cases right at each fidelity (each split apart: dev and holdout, or the
    splits the cases name, e.g. fresh), then totals."""
    fams = sorted({r.case.family for r in results})
    fids = sorted({r.fidelity for r in results}, key=lambda f: f != "llama.cpp")
    named = sorted({r.case.split for r in results} - {"dev", "holdout"})
    splits = [s for s in ("dev", "holdout") if any(r.case.split == s for r in results)] + named \
        if named else ["dev", "holdout"]
    head = "| family | cases | " + " | ".join(f"`{f}` {s}" for f in fids for s in splits) + " |"
    lines = [head, "|" + "---|" * (2 + len(splits) * len(fids))]

    def cell(rows: list[RealResult]) -> str:
        return f"{sum(r.ok for r in rows)}/{len(rows)}" if rows else "—"

    for fam in fams + ["**all**"]:
        rows = [r for r in results if fam == "**all**" or r.case.family == fam]
        n = len({r.case.id for r in rows})
        cells = []
        for fid in fids:
            for split in splits:
                cells.append(cell([r for r in rows if r.fidelity == fid and r.case.split == split]))
        lines.append(f"| {fam} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


__all__ = ["CHUNKS", "HOLDOUT_SHARE", "RealCase", "RealResult", "load_cases", "rate_table", "run_case", "split_of"]
