"""Running and scoring ``reference/cases.jsonl`` cases (``python -m core conform``, the tests, generated suites):
:func:`run_case` runs one through the parser, one-shot and streamed; :func:`score_case` compares it with the
expected message.

A case passes when the final message and the message the streamed deltas accumulate to both equal the case's
``expect``, compared as ``../shared/reference/README.md`` says (:func:`core.chat.roundtrip.compare_messages`:
content and reasoning_content after stripping outer whitespace, the same tool calls by name, JSON-equal
arguments, the same id where the expected one is non-empty). This is the score
``../shared/tools/check_cases.py`` prints, computed in-process so ``conform`` can report it itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..errors import ChatTemplateExplorerError, RequestError, RequestFileError, TemplateLoadError
from ..inputs import MAX_INPUT_BYTES, JsonLineError, read_json_lines
from ..jinja.template import ChatTemplate
from .repairs import TOLERANCE_REPAIRS
from .request import ChatRequest
from .roundtrip import compare_messages


@dataclass
class CaseScore:
    """One case: ``final`` / ``stream`` are ``None`` when that side matched ``expect``, else the reason;
    ``error`` when the case could not be run; ``compared`` is False when the row has no ``expect``."""

    id: Any
    template: str
    compared: bool
    final: str | None = None
    stream: str | None = None
    error: str | None = None

    @property
    def passed(self) -> bool:
        """Run, compared, and both the final message and the accumulated deltas equal ``expect``."""
        return self.compared and self.error is None and self.final is None and self.stream is None

    @property
    def reason(self) -> str:
        """Why the case failed ("" when it passed or was not compared)."""
        if self.error is not None:
            return f"error: {self.error}"
        if self.final is not None:
            return f"final {self.final}"
        if self.stream is not None:
            return f"stream {self.stream}"
        return ""


@dataclass
class ConformSummary:
    """Totals over a run: ``total`` rows, ``compared`` (rows with ``expect``), ``final_ok`` / ``stream_ok`` /
    ``passed`` counts among the compared, and the failing :class:`CaseScore` rows in input order."""

    total: int = 0
    compared: int = 0
    final_ok: int = 0
    stream_ok: int = 0
    passed: int = 0
    failures: list[CaseScore] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """``passed / compared`` in 0…1 (1.0 when nothing was compared)."""
        return self.passed / self.compared if self.compared else 1.0

    def add(self, score: CaseScore) -> None:
        """Count one case."""
        self.total += 1
        if not score.compared:
            return
        self.compared += 1
        if score.error is None:
            self.final_ok += score.final is None
            self.stream_ok += score.stream is None
        if score.passed:
            self.passed += 1
        else:
            self.failures.append(score)

    def lines(self, show: int = 8) -> list[str]:
        """The human summary: counts, up to ``show`` failing cases with their reason, the pass rate."""
        n = self.compared
        out = [f"final parse ok: {self.final_ok}/{n}; streamed deltas ok: {self.stream_ok}/{n}"]
        out += [f"  FAIL {f.id} [{f.template}]: {f.reason[:160]}" for f in self.failures[:show]]
        if len(self.failures) > show:
            out.append(f"  … and {len(self.failures) - show} more failing case(s)")
        if self.total > n:
            out.append(f"{self.total - n} case(s) without 'expect' were run but not compared")
        out.append(f"cases passed: {self.passed}/{n} = {100.0 * self.rate:.1f}%" if n
                   else "cases passed: 0/0 (none compared)")
        return out


def accumulate_deltas(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """The OpenAI assistant message a client builds from streamed delta objects: text fields concatenated,
    tool calls gathered by ``index`` (``id`` / ``name`` set when given, ``arguments`` concatenated)."""
    msg: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_content": "", "tool_calls": []}
    calls: list[dict[str, Any]] = msg["tool_calls"]
    for d in deltas or []:
        for k in ("content", "reasoning_content"):
            if isinstance(d.get(k), str):
                msg[k] += d[k]
        for tc in d.get("tool_calls") or []:
            i = tc.get("index", 0)
            while len(calls) <= i:
                calls.append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            if tc.get("id"):
                calls[i]["id"] = tc["id"]
            fn = tc.get("function") or {}
            if fn.get("name"):
                calls[i]["function"]["name"] = fn["name"]
            if isinstance(fn.get("arguments"), str):
                calls[i]["function"]["arguments"] += fn["arguments"]
    return msg


def score_case(case: dict[str, Any], result: dict[str, Any]) -> CaseScore:
    """Compare one ``conform`` result row (``{"id", "message", "deltas"}`` or ``{"id", "error"}``) with its
    case row; a case without a dict ``expect`` is counted as not compared."""
    expect = case.get("expect")
    score = CaseScore(case.get("id"), str(case.get("template", "")), isinstance(expect, dict))
    if result.get("error") is not None:
        score.error = str(result["error"])
    elif score.compared:
        message = result.get("message")
        score.final = compare_messages(expect, message) if isinstance(message, dict) else "no message"
        score.stream = compare_messages(expect, accumulate_deltas(result.get("deltas") or []))
    return score


def parse_rate(text: str) -> float:
    """A ``--min`` rate: ``0.95``, ``95%`` or ``95`` (a number above 1 is a percentage) → 0…1.

    Raises ``ValueError`` with a one-line message for anything else."""
    s = text.strip()
    pct = s.endswith("%")
    try:
        value = float(s[:-1] if pct else s)
    except ValueError:
        raise ValueError(f"--min {text!r}: expected a rate such as 0.95 or 95%") from None
    if pct or value > 1:
        value /= 100
    if not 0 <= value <= 1:
        raise ValueError(f"--min {text!r}: the rate must be between 0 and 100%")
    return value


class TemplateDir:
    """Templates of a directory by file name, compiled once."""

    def __init__(self, directory: str):
        self.directory = directory
        self._cache: dict[str, ChatTemplate] = {}

    def get(self, name: str) -> ChatTemplate:
        """The compiled template in file ``name`` of the directory (compiled once, then cached).

        Raises :class:`TemplateLoadError` (naming the path) when there is no such file or ``name`` would
        leave the directory (an absolute path, ``..``, a symlink pointing out), and
        :class:`TemplateSyntaxError` when its Jinja does not compile.
        """
        if name not in self._cache:
            path = os.path.join(self.directory, name)
            root = os.path.realpath(self.directory)
            if os.path.isabs(name) or os.path.commonpath([root, os.path.realpath(path)]) != root:
                raise TemplateLoadError(name, f"the case's template is outside --templates {self.directory!r}; "
                                              "a case may only name a file of that directory")
            if not os.path.isfile(path):
                raise TemplateLoadError(path, "no such template file")
            with open(path, encoding="utf-8") as f:
                self._cache[name] = ChatTemplate(f.read(), name)
        return self._cache[name]


def repairs_off(only: Iterable[str] | None) -> tuple[str, ...]:
    """The tolerance repairs to switch off so that only ``only`` stay on (``None``: none off; contract rules
    always stay on). Unknown names are not checked here (see :func:`core.explain.model.repairs_off`)."""
    if only is None:
        return ()
    keep = set(only)
    return tuple(n for n in TOLERANCE_REPAIRS if n not in keep)


def run_case(case: dict[str, Any], templates: TemplateDir, fidelity: str = "llama.cpp", *,
             overrides: dict[str, Any] | None = None, disabled_workarounds: Iterable[str] = (),
             only_repairs: Iterable[str] | None = None) -> dict[str, Any]:
    """Run one ``cases.jsonl`` row: build the parser, parse the input once (``message``) and stream it one
    character at a time (``deltas``, OpenAI delta objects). Never raises: failures become ``error``.
    ``fidelity``: ``"llama.cpp"`` (default) or ``"improved"`` (:mod:`core.analysis.fidelity`). The rest are an
    explanation's settings, so its reproducer parses as it did: analysis ``overrides`` and
    ``disabled_workarounds`` (as on the Overrides page), ``only_repairs`` (improved fidelity with only these
    tolerance repairs on)."""
    from ..analysis import reapply
    from .pipeline import build_chat_parser, cached_analysis
    from .stream import StreamingParser

    out: dict[str, Any] = {"id": case.get("id")}
    try:
        if not isinstance(case.get("template"), str):
            raise RequestError("template", "missing: each case names its template file")
        template = templates.get(case["template"])
        request = ChatRequest.from_dict(case)
        report = None
        if overrides or disabled_workarounds:
            report = reapply(cached_analysis(template, fidelity), overrides=dict(overrides or {}) or None,
                             disabled_workarounds=tuple(disabled_workarounds))
        bundle = build_chat_parser(template, request, report=report, fidelity=fidelity,
                                   disabled_repairs=repairs_off(only_repairs) if fidelity == "improved" else ())
        text = case.get("input", "")
        partial = bool(case.get("is_partial"))
        out["message"] = bundle.call_ids().message(bundle.parser.parse(text, partial)).to_openai()
        sp = StreamingParser(bundle.parser)
        ids = bundle.call_ids()
        deltas = []
        for ch in text:
            deltas.extend(ids.deltas(sp.feed(ch)))
        deltas.extend(ids.deltas(sp.finish(partial), final=True))
        out["deltas"] = [d.to_openai() for d in deltas]
    except ChatTemplateExplorerError as e:
        out["error"] = str(e)
    except Exception as e:  # keep the run going; report the cause
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def iter_cases(path: str, limit: int = MAX_INPUT_BYTES) -> Iterable[dict[str, Any]]:
    """Rows of a JSONL file; raises :class:`RequestError` naming the file and line on bad JSON, text that is
    not UTF-8, or JSON nested too deeply, or naming the file when it cannot be read or holds more than ``limit``
    bytes (a pipe of one endless line included: :func:`core.inputs.read_input_lines`)."""
    try:
        for n, row in read_json_lines(path, "cases file", limit):
            if not isinstance(row, dict):
                raise RequestFileError(f"{path}:{n}", f"expected a JSON object, got {type(row).__name__}",
                                       kind="cases file")
            yield row
    except JsonLineError as e:
        raise RequestFileError(f"{path}:{e.line}", e.problem, kind="cases file") from None
    except OSError as e:
        raise RequestFileError(path, f"cannot read: {e.strerror or e}", kind="cases file") from None
