"""Command line: ``python -m core`` / ``chat-template-explorer``.

* ``analyze FILE [--json] [--variant V] [--full] [--disable-workaround NAME]… [--override PATH=VALUE]…``
  prints a readable report (route, caps, modes, markers, role markers, preserved tokens, generation
  prompt, workarounds, then every comparison's prefix / left / right / suffix with whitespace made visible:
  ``␣`` space, ``↵`` newline, ``→`` tab); ``--json`` prints the report as JSON.
* ``analyze --batch DIR --jsonl [--workers N] [--timeout S]`` prints one JSON line per template file of DIR
  (sorted by name): ``{"template", "route", "analysis", "generation_prompt", …}`` or
  ``{"template", "error"}``. Each template runs in a worker process with a time limit, so a bad or hanging
  template never stops the batch (``--workers 0`` runs in-process, without the time limit). On a terminal,
  stderr shows a progress bar (:mod:`core.progress`).
* ``workarounds`` lists the workaround rules (name, trigger, effect).
* ``parse`` / ``grammar`` / ``conform`` come from :mod:`core.chat.cli_commands`, the other commands from each
  package's ``cli`` module.

Errors print one line naming the input and the cause (exit status 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Iterable

from .escapes import escape_invisible, json_visible
from .errors import ChatTemplateExplorerError
from .inputs import guard as _guard
from .inputs import check_input_file, load_chat_template, visible
from .jinja.limits import setting_problems


# ------------------------------------------------------------------------------------------------ display

def _q(s: str) -> str:
    return "«" + visible(s) + "»"


def _clip_head(s: str, n: int) -> str:
    return s if len(s) <= n else "…" + s[-n:]


def _clip_tail(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + "…"


def format_report(report: Any, *, full: bool = False, comparisons: bool = True) -> str:
    """Readable text of an :class:`~core.analysis.AnalysisReport`."""
    a = report.analysis
    L: list[str] = []
    route = report.route.kind + (f" ({report.route.handler})" if report.route.handler else "")
    L.append(f"Template: {report.template_name}")
    L.append(f"Route: {route}")
    fidelity = getattr(report, "fidelity", "llama.cpp")
    L.append(f"Fidelity: {fidelity}" + ("" if fidelity != "improved" else
                                        "  improvements applied: " + (", ".join(report.improvements_applied)
                                                                      or "(none)")))
    caps = a.caps
    L.append("Caps: " + ", ".join(f"{k.removeprefix('supports_')}={'yes' if v else 'no'}"
                                  for k, v in vars(caps).items()))
    r, c, t = a.reasoning, a.content, a.tools
    L.append(f"Reasoning: {r.mode.value}  start {_q(r.start)}  end {_q(r.end)}")
    L.append(f"Content: {c.mode.value}  start {_q(c.start)}  end {_q(c.end)}")
    f = t.format
    L.append(f"Tools: {f.mode.value}" + ("  (inferred from instructions: comparison I1)"
                                         if a.tools.inferred_from else ""))
    if f.mode.value != "NONE":
        L.append(f"  section: {_q(f.section_start)} … {_q(f.section_end)}")
        L.append(f"  per call: {_q(f.per_call_start)} … {_q(f.per_call_end)}")
        if f.mode.value == "JSON_NATIVE":
            L.append(f"  JSON: fun_name_is_key={f.fun_name_is_key} tools_array_wrapped={f.tools_array_wrapped} "
                     f"function_field={f.function_field!r} name_field={f.name_field!r} args_field={f.args_field!r} "
                     f"id_field={f.id_field!r} gen_id_field={f.gen_id_field!r} order={f.parameter_order}")
        fn, ar, ci = t.function, t.arguments, t.call_id
        L.append(f"  function: name_prefix {_q(fn.name_prefix)} name_suffix {_q(fn.name_suffix)} "
                 f"args_separator {_q(fn.args_separator)} close {_q(fn.close)}")
        L.append(f"  arguments: name {_q(ar.name_prefix)} … {_q(ar.name_suffix)}  value {_q(ar.value_prefix)} … "
                 f"{_q(ar.value_suffix)}  separator {_q(ar.separator)}")
        L.append(f"  call id: {ci.pos.value}  prefix {_q(ci.prefix)}  suffix {_q(ci.suffix)}")
    L.append(f"Roles: user_start {_q(a.user_start)}  assistant_start {_q(a.assistant_start)}")
    L.append("Preserved tokens: " + (", ".join(_q(x) for x in a.preserved_tokens) or "(none)"))
    if a.additional_stops:
        L.append("Additional stops: " + ", ".join(_q(x) for x in a.additional_stops))
    L.append(f"Generation prompt: {_q(report.generation_prompt)}")
    if report.workarounds_applied:
        L.append("Workarounds applied:")
        for name in report.workarounds_applied:
            eff = report.workaround_effects.get(name, {})
            L.append(f"  {name}: " + ", ".join(f"{k}={v!r}" for k, v in eff.items()))
    for name, remarks in (getattr(report, "improvement_notes", None) or {}).items():
        L.append(f"Improvement {name}: " + "; ".join(remarks))
    if report.overrides:
        L.append("Overrides: " + ", ".join(f"{k}={v!r}" for k, v in report.overrides.items()))
    if report.probe_failures:
        L.append("Probe failures:")
        L.extend(f"  {x}" for x in report.probe_failures)
    if comparisons:
        L.append("")
        L.append("Comparisons (prefix / left = A only / right = B only / suffix):")
        n = 10**9 if full else 160
        for cmp in report.comparisons:
            L.append(f"[{cmp.id}] {cmp.title}")
            if cmp.error:
                L.append(f"    error:  {cmp.error}")
            else:
                d = cmp.diff
                L.append(f"    prefix: {visible(_clip_head(d.prefix, n))}")
                L.append(f"    left:   {visible(d.left)}")
                L.append(f"    right:  {visible(d.right)}")
                L.append(f"    suffix: {visible(_clip_tail(d.suffix, n))}")
            for k, v in cmp.found.items():
                L.append(f"    found:  {k} = {_q(v) if isinstance(v, str) else v}")
            for note in cmp.notes:
                L.append(f"    note:   {note}")
        if not full:
            L.append("(long prefixes/suffixes are clipped; --full shows them whole)")
    # the template's file name, its probe errors and notes are the template author's text too
    return escape_invisible("\n".join(L))


# ------------------------------------------------------------------------------------------------ analyze

def _parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for it in items or ():
        if "=" not in it:
            raise ChatTemplateExplorerError(f"--override {it!r}: expected PATH=VALUE")
        k, v = it.split("=", 1)
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def analyze_one(path: str, variant: str | None = None, caps_json: dict[str, Any] | None = None,
                disabled: Iterable[str] = (), overrides: dict[str, Any] | None = None,
                strict: bool = False, fidelity: str = "llama.cpp",
                disabled_improvements: Iterable[str] = ()) -> Any:
    """Load and analyse one template file; returns the :class:`~core.analysis.AnalysisReport`
    (``strict``: a template that fails every probe raises :class:`~core.errors.AnalysisError`;
    ``fidelity``: ``"llama.cpp"`` or ``"improved"``, see :mod:`core.analysis.fidelity`)."""
    from .analysis import analyze
    from .analysis.result import Caps

    tmpl = load_chat_template(path, variant)
    caps = Caps(**caps_json) if caps_json else None
    return analyze(tmpl, caps=caps, disabled_workarounds=disabled, overrides=overrides, strict=strict,
                   fidelity=fidelity, disabled_improvements=disabled_improvements)


def _batch_row(path: str, caps_json: dict[str, Any] | None, fidelity: str = "llama.cpp") -> dict[str, Any]:
    name = os.path.basename(path)
    try:
        rep = analyze_one(path, caps_json=caps_json, fidelity=fidelity)
        row: dict[str, Any] = {"template": name, "route": rep.route.kind, "analysis": rep.analysis.to_json()}
        if rep.generation_prompt_error is None:
            row["generation_prompt"] = rep.generation_prompt
        else:  # as llama.cpp, whose request path fails there: no generation prompt
            row["generation_prompt_error"] = rep.generation_prompt_error
        if rep.all_probes_failed:
            row["warning"] = (f"template {name!r} fails to render every probe; the analysis is the default one "
                              f"(first failure: {rep.probe_failures[0] if rep.probe_failures else '?'})")
        row["workarounds_applied"] = rep.workarounds_applied
        row["probe_failures"] = rep.probe_failures
        row["fidelity"] = rep.fidelity
        if rep.improvements_applied:
            row["improvements_applied"] = rep.improvements_applied
        return row
    except ChatTemplateExplorerError as e:
        return {"template": name, "error": str(e)}
    except RecursionError:
        return {"template": name, "error": f"cannot analyse template {name!r}: recursion too deep"}
    except Exception as e:  # never stop the batch; name the template and the cause
        return {"template": name, "error": f"cannot analyse template {name!r}: internal error "
                                           f"{type(e).__name__}: {e}"}


def _worker(conn: Any) -> None:
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        path, caps_json, fidelity = task
        conn.send(_batch_row(path, caps_json, fidelity))


class _Slot:
    def __init__(self, ctx: Any):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.task: tuple[int, str] | None = None
        self.deadline = 0.0

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.join(1)
        except Exception:
            pass
        self.conn.close()


def run_batch(paths: list[str], workers: int = 2, timeout: float = 120.0,
              caps_by_name: dict[str, dict[str, Any]] | None = None, out: Any = None,
              fidelity: str = "llama.cpp") -> int:
    """Analyse ``paths``; write one JSON line per template to ``out`` (stdout) in input order.
    ``fidelity``: ``"llama.cpp"`` (default) or ``"improved"`` (:mod:`core.analysis.fidelity`).

    ``workers`` processes (0: in-process, no time limit); a template taking longer than ``timeout``
    seconds gets an error row and its worker is replaced. Returns the number of error rows.
    """
    out = out or sys.stdout
    caps_by_name = caps_by_name or {}
    results: dict[int, dict[str, Any]] = {}
    next_out = 0
    errors = 0

    bar = None
    if sys.stderr.isatty():  # a terminal watches: show progress (never in logs or pipes)
        from .progress import ProgressBar

        bar = ProgressBar(len(paths), "analyze --batch")

    def flush() -> None:
        nonlocal next_out, errors
        before = next_out
        while next_out in results:
            row = results.pop(next_out)
            errors += "error" in row
            out.write(json_visible(row) + "\n")
            next_out += 1
        out.flush()
        if bar is not None and next_out != before:
            bar.update(next_out)

    if workers <= 0:
        for i, p in enumerate(paths):
            results[i] = _batch_row(p, caps_by_name.get(os.path.basename(p)), fidelity)
            flush()
        return errors

    import multiprocessing as mp  # only the batch needs it (~5 ms of every CLI start otherwise)
    from multiprocessing.connection import wait as mp_wait

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    slots = [_Slot(ctx) for _ in range(min(workers, max(1, len(paths))))]
    pending = list(enumerate(paths))
    pending.reverse()
    try:
        while pending or any(s.task for s in slots):
            for s in slots:
                if s.task is None and pending:
                    i, p = pending.pop()
                    s.task = (i, p)
                    s.deadline = time.monotonic() + timeout
                    s.conn.send((p, caps_by_name.get(os.path.basename(p)), fidelity))
            busy = [s for s in slots if s.task]
            wait_for = max(0.0, min(s.deadline for s in busy) - time.monotonic())
            ready = mp_wait([s.conn for s in busy], timeout=wait_for)
            now = time.monotonic()
            for k, s in enumerate(slots):
                if s.task is None:
                    continue
                i, p = s.task
                name = os.path.basename(p)
                if s.conn in ready:
                    try:
                        results[i] = s.conn.recv()
                    except (EOFError, OSError):
                        results[i] = {"template": name,
                                      "error": f"cannot analyse template {name!r}: the worker process died"}
                        s.kill()
                        slots[k] = _Slot(ctx)
                        continue
                    s.task = None
                elif now >= s.deadline:
                    results[i] = {"template": name, "error": f"cannot analyse template {name!r}: no result "
                                                             f"within {timeout:g} s (time limit)"}
                    s.kill()
                    slots[k] = _Slot(ctx)
            flush()
    finally:
        for s in slots:
            try:
                s.conn.send(None)
            except Exception:
                pass
            s.kill()
    flush()
    return errors


def _load_caps_reference(path: str) -> dict[str, dict[str, Any]]:
    out = {}
    check_input_file(path, "--caps-from file")
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if "analysis" in r:
                    out[r["template"]] = r["analysis"]["caps"]
    return out


def _cmd_analyze(args: argparse.Namespace) -> int:
    caps_ref = _load_caps_reference(args.caps_from) if args.caps_from else {}
    fidelity = "improved" if args.improved else "llama.cpp"
    if args.disable_improvement and not args.improved:
        raise ChatTemplateExplorerError("--disable-improvement needs --improved")
    if args.batch:
        from .corpus import template_files

        if not 0 < args.timeout < float("inf"):  # nan fails this too
            raise ChatTemplateExplorerError(f"--timeout {args.timeout:g}: expected a positive number of seconds")
        run_batch(template_files(args.batch), workers=args.workers, timeout=args.timeout, caps_by_name=caps_ref, fidelity=fidelity)
        return 0
    if not args.file:
        raise ChatTemplateExplorerError("analyze needs FILE or --batch DIR")
    rep = analyze_one(args.file, args.variant, caps_ref.get(os.path.basename(args.file)),
                      disabled=args.disable_workaround or (), overrides=_parse_overrides(args.override),
                      strict=True, fidelity=fidelity, disabled_improvements=args.disable_improvement or ())
    from .analysis.provenance import ineffective_edits

    for edit in ineffective_edits(rep):
        print(f"note: {escape_invisible(edit.message(), keep='')}", file=sys.stderr)
    if args.json:
        print(json_visible(rep.to_json(comparisons=not args.no_comparisons), indent=2))
    else:
        print(format_report(rep, full=args.full, comparisons=not args.no_comparisons))
    return 0


def _cmd_workarounds(args: argparse.Namespace) -> int:
    from .analysis.fidelity import IMPROVEMENTS
    from .analysis.workarounds import WORKAROUNDS

    if args.json:
        print(json_visible([w.to_json() for w in WORKAROUNDS], indent=2))
        return 0
    for w in WORKAROUNDS:
        origin = "" if w.origin == "llama.cpp" else f"  [origin {w.origin}: only with --improved]"
        print(f"{w.name}: {w.title}{origin}")
        print(f"    trigger: {w.trigger_text}")
        eff = [f"{p}={v.value if hasattr(v, 'value') else v!r}" for p, v in w.sets]
        eff += [f"trim {p}" for p in w.trims]
        if w.replace_tokens is not None:
            eff.append(f"preserved_tokens := {list(w.replace_tokens)}")
        if w.append_tokens:
            eff.append(f"preserved_tokens += {list(w.append_tokens)}")
        if w.append_stops:
            eff.append(f"additional_stops += {list(w.append_stops)}")
        print(f"    effect:  {'; '.join(eff)}")
    print("\ngeneric improvements (only with --improved; switch one off with --disable-improvement NAME):")
    for i in IMPROVEMENTS:
        print(f"{i.name}: {i.title} [{i.stage}]")
    return 0


# subcommands defined in this module: ``main`` registers only these when one of them is asked for, so
# ``python -m core analyze T`` does not import every other command's module (a fresh process's start-up)
_OWN_COMMANDS = frozenset({"analyze", "workarounds"})


def build_parser(own_only: bool = False) -> argparse.ArgumentParser:
    """The ``python -m core`` argument parser: ``analyze`` and ``workarounds``, plus the subcommands of
    :mod:`core.chat.cli_commands`, :mod:`core.chat.roundtrip_cli` and the other command modules when they import
    (not with ``own_only``: then only this module's two commands).
    """
    ap = argparse.ArgumentParser(prog="python -m core",
                                 description="Chat Template Explorer: analyse chat templates, parse model output.")
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="differential analysis of a template (or a directory with --batch)")
    a.add_argument("file", nargs="?", help=".jinja, tokenizer_config.json, chat_template.json, .gguf or Hub id")
    a.add_argument("--variant", help="named template variant (e.g. tool_use)")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a.add_argument("--full", action="store_true", help="do not clip long prefixes/suffixes")
    a.add_argument("--no-comparisons", action="store_true", help="leave out the comparisons")
    a.add_argument("--disable-workaround", action="append", metavar="NAME", help="switch a workaround off")
    a.add_argument("--override", action="append", metavar="PATH=VALUE",
                   help="set an analysis field, e.g. reasoning.start='<think>' (VALUE may be JSON)")
    a.add_argument("--batch", metavar="DIR", help="analyse every template file of DIR, one JSON line each")
    a.add_argument("--jsonl", action="store_true", help="(with --batch) JSON lines output (the default)")
    a.add_argument("--workers", type=int, default=2, help="(with --batch) worker processes (0: in-process)")
    a.add_argument("--timeout", type=float, default=120.0, help="(with --batch) seconds per template")
    a.add_argument("--caps-from", metavar="ANALYSIS.jsonl", help=argparse.SUPPRESS)  # debugging aid
    a.add_argument("--improved", action="store_true",
                   help="improved fidelity: apply the explorer's improvements over llama.cpp (default: llama.cpp's "
                        "analysis, as the reference data)")
    a.add_argument("--disable-improvement", action="append", metavar="NAME",
                   help="(with --improved) switch a generic improvement off")
    a.set_defaults(func=_guard(_cmd_analyze))
    w = sub.add_parser("workarounds", help="list the workaround rules and the generic improvements")
    w.add_argument("--json", action="store_true", help="print the rules as JSON")
    w.set_defaults(func=_guard(_cmd_workarounds))
    if own_only:
        return ap
    from .chat import cli_commands, repairs_cli, roundtrip_cli
    from .compare import cli as compare_cli
    from .corpus import cli as corpus_cli
    from .explain import cli as explain_cli
    from .export import cli as export_cli
    from .lint import cli as lint_cli
    from .serving import cli as serving_cli

    for module in (cli_commands, roundtrip_cli, serving_cli, repairs_cli, explain_cli, lint_cli, compare_cli,
                   export_cli, corpus_cli):
        module.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m core`` and the ``chat-template-explorer`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(own_only=bool(argv) and argv[0] in _OWN_COMMANDS).parse_args(argv)
    # huggingface_hub logs every connection retry as a multi-line warning; the CLI reports the outcome in one
    # line (HubOfflineError, HubTimeoutError …), so only its errors are shown.
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    problems = setting_problems()
    if problems:
        print(f"error: {escape_invisible(problems[0], keep='')}", file=sys.stderr)
        return 2
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # the reader went away (`python -m core … | head`): stop quietly, as other Unix tools do. Point stdout
        # at /dev/null so the interpreter's final flush does not report the broken pipe either.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0
    except KeyboardInterrupt:
        return 130
