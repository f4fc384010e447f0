"""``python -m core parse | grammar | conform``: the parser half of the command line.

``core/cli.py`` calls :func:`register` with its ``argparse`` sub-parsers.

* ``parse FILE --request REQ.json [--stream] [--chunk N] [--partial]``: model output on stdin → the OpenAI
  assistant message as JSON; with ``--stream`` one delta chunk per line (feeding ``--chunk`` characters at a
  time, default 1) and the final message last.
* ``grammar FILE --request REQ.json [--json]``: the GBNF grammar, then the lazy flag, the triggers, preserved
  tokens and additional stops (as comments, or one JSON object with ``--json``).
* ``conform CASES.jsonl --templates DIR [--min RATE] [--summary-only] [--quiet]``: one JSON line per case of
  ``reference/cases.jsonl`` on stdout: ``{"id", "message": {...}, "deltas": [...]}`` (deltas from feeding the
  input one character at a time, the last step parsed with the case's ``is_partial``), or
  ``{"id", "error": "..."}``; then the score against each case's ``expect`` on stderr
  (:mod:`core.chat.conformance`); exit status 1 when the pass rate is below ``--min``, 2 (an error) when the
  file holds no case, or with ``--min`` when no case holds an ``expect`` to compare.

Every failure prints a one-line error naming the input (exit status 2) instead of a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..escapes import escape_invisible, json_visible
from ..errors import ChatTemplateExplorerError, RequestFileError, TemplateLoadError
from ..inputs import guard as _guard
from ..inputs import load_chat_template, load_request, read_model_output
from .conformance import ConformSummary, TemplateDir, iter_cases, parse_rate, run_case, score_case


# ------------------------------------------------------------------------------------------------ commands


def _fidelity(args: argparse.Namespace) -> str:
    return "improved" if getattr(args, "improved", False) else "llama.cpp"


def _report_without_improvements(template: Any, args: argparse.Namespace) -> Any:
    """The improved analysis with ``--disable-improvement`` names switched off (analysis- and parser-stage
    improvements alike), or None when none is given. Raises :class:`ChatTemplateExplorerError` without
    ``--improved``; an unknown name raises :class:`~core.errors.AnalysisError` from :func:`analyze` (the same
    message as ``analyze --disable-improvement``, listing the known names)."""
    names = getattr(args, "disable_improvement", None) or ()
    if not names:
        return None
    if not getattr(args, "improved", False):
        raise ChatTemplateExplorerError("--disable-improvement needs --improved")
    from ..analysis import analyze

    return analyze(template, fidelity="improved", disabled_improvements=tuple(names))


def _cmd_parse(args: argparse.Namespace) -> int:
    from .pipeline import build_chat_parser_or_content
    from .repairs import settled
    from .stream import StreamingParser

    request = load_request(args.request)
    template = load_chat_template(args.file, args.variant, request)
    report = _report_without_improvements(template, args)
    bundle = build_chat_parser_or_content(template, request, fidelity=_fidelity(args), report=report,
                                          disabled_repairs=tuple(getattr(args, "disable_repair", None) or ()))
    for note in bundle.notes:
        if bundle.format == "content-only":
            print(f"note: {escape_invisible(note, keep='')}", file=sys.stderr)
    for note in _disable_repair_notes(getattr(args, "disable_repair", None) or (), _fidelity(args)):
        print(f"note: {escape_invisible(note, keep='')}", file=sys.stderr)
    output = read_model_output()
    if args.stream:
        if args.chunk < 1:
            raise ChatTemplateExplorerError(f"--chunk must be >= 1 (got {args.chunk})")
        sp = StreamingParser(bundle.parser)
        ids = bundle.call_ids()
        for i in range(0, len(output), args.chunk):
            for d in ids.deltas(sp.feed(output[i:i + args.chunk])):
                print(json_visible(d.to_openai()))
        for d in ids.deltas(sp.finish(args.partial), final=True):
            print(json_visible(d.to_openai()))
        # the message a client keeps: a cut call whose fragments were streamed is dropped (truncated-call)
        msg = sp.message if sp.final is None else settled(sp.message, sp.final)
        print(json_visible(_with_repairs(ids.message(msg))))
    else:
        parsed = bundle.parser.parse(output, args.partial)
        msg = bundle.call_ids().message(parsed)
        print(json_visible(_with_repairs(msg), indent=None if args.compact else 2))
        if getattr(args, "chars", False):
            for line in _char_lines(bundle.parser, output, parsed, args.partial):
                print(line, file=sys.stderr)
    return 0


def _char_lines(parser: Any, output: str, msg: Any, partial: bool) -> list[str]:
    """``parse --chars``: where the output's characters went (core.chat.char_audit), counts then each lost span."""
    from .char_audit import audit_parse

    audit = audit_parse(parser, output, msg, partial=partial)
    counts = ", ".join(f"{k} {v}" for k, v in audit.counts().items() if v)
    lost = audit.lost()
    return [f"chars: {counts or 'none'}"] + [f"lost {line}" for line in audit.explain(limit=len(lost))]


def _disable_repair_notes(names: Any, fidelity: str) -> list[str]:
    """One line per ``--disable-repair NAME`` that switches nothing off (as an override that changes nothing
    says so): a contract repair (it holds at every fidelity), or any repair at llama.cpp fidelity (tolerance
    repairs are off there). Unknown names are left to :func:`core.chat.repairs.enabled_repairs` (an error)."""
    from .repairs import REPAIRS_BY_NAME, RepairStage

    notes = []
    for name in dict.fromkeys(names):
        rule = REPAIRS_BY_NAME.get(name)
        if rule is None:
            continue
        if rule.stage is RepairStage.CONTRACT:
            notes.append(f"--disable-repair {name} changes nothing: a contract repair holds at every fidelity")
        elif fidelity != "improved":
            notes.append(f"--disable-repair {name} changes nothing: tolerance repairs are off at llama.cpp "
                         "fidelity (add --improved)")
    return notes


def _with_repairs(msg: Any) -> dict[str, Any]:
    """The OpenAI message, plus ``"repairs"`` (core.chat.repairs.FiredRepair as JSON) when any acted."""
    out = msg.to_openai()
    if msg.repairs:
        out["repairs"] = [r.to_json() for r in msg.repairs]
    return out


def _cmd_grammar(args: argparse.Namespace) -> int:
    from .pipeline import build_chat_parser

    request = load_request(args.request)
    template = load_chat_template(args.file, args.variant, request)
    bundle = build_chat_parser(template, request, fidelity=_fidelity(args))
    p = bundle.parser
    triggers = [t.to_json() if hasattr(t, "to_json") else t for t in (p.grammar_triggers or [])]
    if args.json:
        print(json_visible({"grammar": p.grammar, "grammar_lazy": p.grammar_lazy, "grammar_triggers": triggers,
                            "preserved_tokens": p.preserved_tokens, "additional_stops": p.additional_stops,
                            "generation_prompt": bundle.generation_prompt, "format": bundle.format}, indent=2))
        return 0
    # GBNF reads \u202e in a literal or a class as that character: a tool name cannot reorder the line shown
    print(escape_invisible(p.grammar, keep="\n") if p.grammar else "# no grammar for this request")
    print(f"# lazy: {str(bool(p.grammar_lazy)).lower()}")
    for t in triggers:
        print(f"# trigger {t.get('type')}: {json_visible(t.get('value'))}")
    if p.preserved_tokens:
        print("# preserved tokens: " + json_visible(p.preserved_tokens))
    if p.additional_stops:
        print("# additional stops: " + json_visible(p.additional_stops))
    return 0


def _cmd_conform(args: argparse.Namespace) -> int:
    try:
        minimum = None if args.min is None else parse_rate(args.min)
    except ValueError as e:
        raise ChatTemplateExplorerError(str(e)) from None
    templates = TemplateDir(args.templates)
    if not os.path.isdir(args.templates):
        raise TemplateLoadError(args.templates, "not a directory")
    summary = ConformSummary()
    for case in iter_cases(args.cases):
        result = run_case(case, templates, _fidelity(args))
        summary.add(score_case(case, result))
        if not args.summary_only:
            print(json_visible(result), flush=True)
    if not summary.total:
        # (a score of 0/0 would read as 100 % passed: a wrong path or an emptied file must not pass a --min gate)
        raise RequestFileError(args.cases, "holds no case (no JSON object on any line)", kind="cases file")
    if minimum is not None and not summary.compared:
        # (rows without expect are run but not scored: 0/0 must not pass the gate either)
        raise RequestFileError(args.cases, f"no case holds 'expect' ({summary.total} run, none compared), so "
                               "none can be held to --min", kind="cases file")
    if not args.quiet:
        # case ids and expected values are the cases file's text
        print(escape_invisible("\n".join(summary.lines(args.show))), file=sys.stderr)
    if minimum is not None and summary.rate < minimum:
        print(f"conform: pass rate {100 * summary.rate:.1f}% is below --min {100 * minimum:g}%", file=sys.stderr)
        return 1
    return 0


def register(subparsers: Any) -> None:
    """Add ``parse``, ``grammar`` and ``conform`` to an ``argparse`` sub-parsers object. Each sets
    ``func`` (args -> exit status)."""
    p = subparsers.add_parser("parse", help="parse model output (stdin) into an OpenAI assistant message")
    p.add_argument("file", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or Hub id")
    p.add_argument("--request", help="request JSON (messages, tools, tool_choice, reasoning_format, …)")
    p.add_argument("--variant", help="named template variant (e.g. tool_use)")
    p.add_argument("--stream", action="store_true", help="print delta chunks, one JSON object per line")
    p.add_argument("--chunk", type=int, default=1, help="characters fed per streaming step (default 1)")
    p.add_argument("--partial", action="store_true", help="the output was cut off mid-generation")
    p.add_argument("--compact", action="store_true", help="print the message on one line")
    p.add_argument("--chars", action="store_true",
                   help="on stderr: where every character of the output went, each lost span (one-shot parse)")
    p.set_defaults(func=_guard(_cmd_parse))
    improved_help = "improved fidelity: the explorer's improvements over llama.cpp (default: llama.cpp's behaviour)"
    p.add_argument("--improved", action="store_true", help=improved_help)
    p.add_argument("--disable-repair", action="append", metavar="NAME",
                   help="(with --improved) switch a tolerance repair off (python -m core repairs lists them)")
    p.add_argument("--disable-improvement", action="append", metavar="NAME",
                   help="(with --improved) switch an improvement off (python -m core workarounds lists them)")

    g = subparsers.add_parser("grammar", help="print the GBNF grammar and triggers for a request")
    g.add_argument("file", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or Hub id")
    g.add_argument("--request", help="request JSON (messages, tools, tool_choice, json_schema, …); default: one "
                                     "user message, no tools")
    g.add_argument("--variant", help="named template variant (e.g. tool_use)")
    g.add_argument("--json", action="store_true", help="one JSON object instead of GBNF text")
    g.add_argument("--improved", action="store_true", help=improved_help)
    g.set_defaults(func=_guard(_cmd_grammar))

    c = subparsers.add_parser("conform", help="run reference cases (cases.jsonl format): one JSON line each on "
                                              "stdout, the score on stderr")
    c.add_argument("cases", help="reference cases, one JSON object a line (../shared/reference/cases.jsonl)")
    c.add_argument("--templates", required=True, help="directory holding the cases' template files")
    c.add_argument("--min", metavar="RATE", help="exit 1 when fewer cases pass (0.95, 95%%)")
    c.add_argument("--summary-only", action="store_true", help="print only the score, not the JSON lines")
    c.add_argument("--quiet", action="store_true", help="no score on stderr (only the JSON lines)")
    c.add_argument("--show", type=int, default=8, metavar="N", help="failing cases listed in the score (default 8)")
    c.add_argument("--improved", action="store_true", help=improved_help)
    c.set_defaults(func=_guard(_cmd_conform))


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m core.chat.cli_commands``) for when ``core/cli.py`` is not there."""
    ap = argparse.ArgumentParser(prog="python -m core")
    sub = ap.add_subparsers(dest="command", required=True)
    register(sub)
    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
