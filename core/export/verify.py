"""Proof by transformers itself: feed an exported response_template the outputs our parser gets and compare.

For each input — the reference cases of the template (``../shared/reference/cases.jsonl`` form) and the
template's generated suite (:mod:`core.export.suite`: messages rendered by the template) — the prompt our
pipeline renders for the case's request is the ``prefix``, the case's ``input`` the response, the case's tools
``tools=``. transformers' ``parse_response`` (one shot) and its ``ResponseParser`` fed three characters at a
time then ``finalize``d must both give the same message, compared as ``reference/README.md`` compares
messages (:func:`core.chat.roundtrip.compare_messages`): our parser's message for reference cases (which equals
llama.cpp's); for suite cases the rendered message itself or, failing that, our parser's message (noted: the
rendered output is then not what the template's own parsers read, e.g. a header the generation prompt lacks). At
``llama.cpp`` fidelity our parser inherits llama.cpp's misses (a second Seed-OSS call read as content), so the
rendered message comes first.

A response_template always separates reasoning, so cases asking ``reasoning_format: none`` are compared with our
parse at ``auto`` (recorded in the check). transformers parses structured regions (JSON, tagged arguments) only
when they close: on a truncated call it raises; such checks are ``truncated_unsupported``, reported apart from
agreements and disagreements.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..errors import DependencyError
from .consumers import TRANSFORMERS_MIN

STREAM_CHUNK = 3
"""Characters per ``ResponseParser.feed`` in the streaming check."""


class CheckStatus(str, enum.Enum):
    """Outcome of one input: ``agree``; ``disagree`` (a different message, or transformers raised on a complete
    output); ``truncated_unsupported`` (a truncated output on which transformers raises); ``marker_in_string``
    (the template's own close marker inside an argument string ends transformers' region early: regions are
    found by their delimiters alone, whatever the content parser — a limit of the format, shared by every
    marker-delimited response_template, reported apart); ``not_run`` (our pipeline could not build the prompt
    for this request, or the request constrains content by ``json_schema``, which is not the response
    format)."""

    AGREE = "agree"
    DISAGREE = "disagree"
    TRUNCATED_UNSUPPORTED = "truncated_unsupported"
    MARKER_IN_STRING = "marker_in_string"
    NOT_RUN = "not_run"


@dataclass
class Check:
    """One input: ``source`` (``reference:<id>`` or ``suite:<name>``), ``status``, ``why`` (first difference
    or error), ``ours`` / ``theirs`` / ``streamed`` (messages), ``partial``, ``notes``."""

    source: str
    status: CheckStatus
    why: str | None = None
    ours: dict[str, Any] | None = None
    theirs: dict[str, Any] | None = None
    streamed: dict[str, Any] | None = None
    partial: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"source": self.source, "status": self.status.value, "why": self.why, "partial": self.partial,
                "ours": self.ours, "theirs": self.theirs, "streamed": self.streamed, "notes": list(self.notes)}


@dataclass
class Verification:
    """All checks of one exported template. ``agrees``: no check disagrees and at least one agrees."""

    template: str
    fidelity: str
    checks: list[Check] = field(default_factory=list)

    def count(self, status: CheckStatus) -> int:
        """Number of checks with ``status``."""
        return sum(c.status == status for c in self.checks)

    @property
    def agrees(self) -> bool:
        """True when every check that ran agrees (truncated outputs transformers cannot parse excepted)."""
        return self.count(CheckStatus.DISAGREE) == 0 and self.count(CheckStatus.AGREE) > 0

    @property
    def first_disagreement(self) -> Check | None:
        """The first disagreeing check, or None."""
        return next((c for c in self.checks if c.status == CheckStatus.DISAGREE), None)

    def count_summary(self) -> str:
        """``agree 9, disagree 0, …`` (statuses with a count)."""
        return ", ".join(f"{s.value} {self.count(s)}" for s in CheckStatus if self.count(s))

    def to_json(self) -> dict[str, Any]:
        """Plain JSON with counts."""
        return {"template": self.template, "fidelity": self.fidelity, "agrees": self.agrees,
                **{s.value: self.count(s) for s in CheckStatus}, "checks": [c.to_json() for c in self.checks]}


class _NoTorchNotice(logging.Filter):
    """Drops transformers' import-time "PyTorch was not found" notice: the verification uses only
    ``utils.chat_parsing``, which needs no torch, so the notice is noise on the export's stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "PyTorch was not found" not in record.getMessage()


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """While active, the ``transformers`` logger drops the no-torch notice (only that record; the filter is
    removed on exit, so nothing else of the caller's logging changes)."""
    log = logging.getLogger("transformers")
    f = _NoTorchNotice()
    log.addFilter(f)
    try:
        yield
    finally:
        log.removeFilter(f)


def transformers_version() -> str | None:
    """The installed transformers' version string (its distribution's metadata, read without importing it), or
    None when it is not installed."""
    import importlib.metadata

    try:
        return importlib.metadata.version("transformers")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _release(version: str) -> tuple[int, ...]:
    """The leading numbers of a version string (``5.25.0.dev0`` → (5, 25, 0)); () when it starts with none."""
    out = []
    for part in version.split("."):
        digits = len(part) - len(part.lstrip("0123456789"))
        if not digits:
            break
        out.append(int(part[:digits]))
        if digits < len(part):
            break
    return tuple(out)


def transformers_missing() -> str:
    """Why the proof cannot run here, one line naming the minimum (:data:`TRANSFORMERS_MIN`) and what is
    installed; ``""`` when transformers ≥ the minimum is installed (whether its ``utils/chat_parsing`` imports is
    :func:`transformers_available`'s question)."""
    need = f"transformers >= {TRANSFORMERS_MIN} (pip install 'transformers>={TRANSFORMERS_MIN}'; no torch needed)"
    found = transformers_version()
    if found is None:
        return f"needs {need}; transformers is not installed"
    if _release(found) < _release(TRANSFORMERS_MIN):
        return f"needs {need}; transformers {found} is installed, older than the release the export is proven on"
    return ""


def transformers_installed() -> bool:
    """True when transformers ≥ :data:`TRANSFORMERS_MIN` with its ``utils/chat_parsing`` module is installed —
    found without importing transformers (a second of CPU), for a front end that only decides whether to offer the
    check; :func:`verify` still imports it and raises when it cannot."""
    import importlib.util
    import pathlib

    if transformers_missing():
        return False
    try:
        spec = importlib.util.find_spec("transformers")
    except (ImportError, ValueError):
        return False
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    return any((pathlib.Path(r) / "utils" / "chat_parsing.py").is_file()
               or (pathlib.Path(r) / "utils" / "chat_parsing" / "__init__.py").is_file() for r in roots)


def transformers_available() -> bool:
    """True when transformers ≥ :data:`TRANSFORMERS_MIN` is installed and its ``utils.chat_parsing`` imports."""
    if transformers_missing():
        return False
    try:
        with _quiet_transformers():
            from transformers.utils.chat_parsing import ResponseParser, parse_response  # noqa: F401
    except Exception:  # noqa: BLE001 - missing or too old: the verification is simply unavailable
        return False
    return True


def _from_flavour(msg: dict[str, Any]) -> dict[str, Any]:
    """transformers' dict in OpenAI shape: vLLM's ``thinking`` read as ``reasoning_content``."""
    out = dict(msg)
    if "thinking" in out:
        out["reasoning_content"] = out.pop("thinking")
    return out


def _parse_theirs(rt: dict[str, Any], prefix: str, text: str, tools: list[dict[str, Any]]) -> tuple[Any, Any]:
    from transformers.utils.chat_parsing import ResponseParser, parse_response

    one = parse_response(text, rt, prefix=prefix, tools=tools or None)
    stream = ResponseParser(rt, prefix=prefix, tools=tools or None)
    for i in range(0, len(text), STREAM_CHUNK):
        stream.feed(text[i:i + STREAM_CHUNK])
    streamed, _ = stream.finalize()
    return _from_flavour(one), _from_flavour(streamed)


def check_case(rt: dict[str, Any], case: dict[str, Any], template: Any, fidelity: str, source: str,
               *, against_expect: bool = False) -> Check:
    """One ``cases.jsonl``-shaped row through our parser and transformers' (see the module doc). With
    ``against_expect`` (suite cases, whose ``expect`` is the message the template rendered) transformers is
    compared with that message; whether our parser agrees is noted."""
    from ..chat.pipeline import build_chat_parser
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import compare_messages

    notes: list[str] = []
    row = copy.deepcopy(case)
    if row.get("reasoning_format") == "none":
        row["reasoning_format"] = "auto"
        notes.append("reasoning_format none compared at auto (a response_template always separates reasoning)")
    partial = bool(row.get("is_partial"))
    if row.get("json_schema"):
        return Check(source, CheckStatus.NOT_RUN, "json_schema request: content is grammar-constrained JSON, not "
                     "the model's response format", partial=partial)
    limit = CheckStatus.MARKER_IN_STRING if source.endswith(":marker_in_argument") else CheckStatus.DISAGREE
    try:
        bundle = build_chat_parser(template, ChatRequest.from_dict(row), fidelity=fidelity)
        ours = bundle.parser.parse(row.get("input", ""), partial).to_openai()
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        return Check(source, CheckStatus.NOT_RUN, f"our pipeline: {type(e).__name__}: {e}", partial=partial,
                     notes=notes)
    try:
        theirs, streamed = _parse_theirs(rt, bundle.prompt, row.get("input", ""), row.get("tools") or [])
    except Exception as e:  # noqa: BLE001 - transformers raising is a finding, not a crash
        status = CheckStatus.TRUNCATED_UNSUPPORTED if partial else limit
        return Check(source, status, f"transformers raised {type(e).__name__}: {str(e).splitlines()[0][:160]}",
                     ours, partial=partial, notes=notes)
    truth = case["expect"] if against_expect else ours
    if against_expect and (ours_why := compare_messages(truth, ours)):
        notes.append(f"our parser differs from the rendered message: {ours_why}")
    why = compare_messages(truth, theirs)
    if why is None:
        why = compare_messages(truth, streamed)
        why = f"streaming: {why}" if why else None
    if why and against_expect and compare_messages(ours, theirs) is None and compare_messages(ours, streamed) is None:
        notes.append(f"transformers equals our parser, both differ from the rendered message: {why}")
        why = None
    last = len(ours.get("tool_calls") or []) - 1
    if why and partial and f"tool_calls[{last}].arguments" in why:
        limit = CheckStatus.TRUNCATED_UNSUPPORTED  # transformers drops an unclosed tagged argument
    return Check(source, CheckStatus.AGREE if why is None else limit, why, ours, theirs, streamed,
                 partial, notes)


def case_from_real_output(row: dict[str, Any]) -> dict[str, Any]:
    """A real-output row (``tests/data/real_outputs*/*.jsonl``, :mod:`core.chat.realset`: ``request``, ``output``,
    ``expect``) as a ``cases.jsonl`` row for :func:`check_case` (complete output, the request's fields at the top)."""
    return {**copy.deepcopy(row.get("request") or {}), "id": row.get("id"), "template": row.get("template"),
            "input": row.get("output", ""), "is_partial": False, "expect": copy.deepcopy(row.get("expect"))}


def reference_cases(path: str | list[dict[str, Any]], template_name: str) -> list[dict[str, Any]]:
    """Rows of a ``cases.jsonl`` file for ``template_name`` ([] when the file is missing); ``path`` may be the
    file's rows already read (a pipe is read once)."""
    if isinstance(path, list):
        return [r for r in path if r.get("template") == template_name]
    try:
        with open(path, encoding="utf-8") as f:
            return [r for r in (json.loads(line) for line in f if line.strip()) if r.get("template") == template_name]
    except OSError:
        return []


def verify(rt: dict[str, Any], template: Any, *, fidelity: str = "llama.cpp",
           cases: Iterable[dict[str, Any]] = (), suite: Any = None) -> Verification:
    """Check ``rt`` (an exported response_template) on ``cases`` (reference rows for ``template``) and on the
    generated ``suite`` (:class:`core.export.suite.Suite`; generated when None). Raises
    :class:`~core.errors.DependencyError` (a ``RuntimeError``) when
    transformers ≥ :data:`TRANSFORMERS_MIN` is not installed (the message names the minimum and what is
    installed)."""
    if not transformers_available():
        why = transformers_missing() or (f"needs transformers >= {TRANSFORMERS_MIN}; its utils.chat_parsing does "
                                         "not import")
        raise DependencyError(f"verification {why}")
    from .suite import generate_suite

    v = Verification(template.name, fidelity)
    for case in cases:
        v.checks.append(check_case(rt, case, template, fidelity, f"reference:{case.get('id')}"))
    if suite is None:
        suite = generate_suite(template, fidelity=fidelity)
    for case in suite.cases:
        v.checks.append(check_case(rt, case, template, fidelity, f"suite:{case['id'].removeprefix('suite-')}",
                                   against_expect=True))
    return v
