"""``python -m core lint``: lint one template, or a directory with ``--batch``; ``python -m core render``: the text
a template renders for a request's conversation (the Edit page's live render, on the command line)."""

from __future__ import annotations

import sys
from typing import Any

from .model import SEVERITY_ORDER, Severity, visible
from ..escapes import escape_invisible, json_visible
from ..errors import ChatTemplateExplorerError
from ..inputs import guard as _guard, load_chat_template as load, load_request
from .run import lint


def _bar(done: int, total: int, name: str) -> None:
    width = 30
    fill = width * done // max(1, total)
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {name[:40]:<40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def format_lint(report: Any) -> str:
    """Readable text of a :class:`~core.lint.model.LintReport`: one block per finding (severity, id, title,
    evidence with whitespace visible, hint)."""
    L = [f"Template: {report.template}  ({report.shapes} conversation shapes, {len(report.shapes_raising)} raise; "
         f"{len(report.findings)} findings" + (f", {len(report.suppressed)} suppressed" if report.suppressed else "")
         + ")"]
    if report.error:
        L.append(f"note: {visible(report.error)}")
    for f in report.findings:
        L.append(f"{f.severity.value.upper():7} {f.id}: {f.title}")
        for k, v in f.evidence.items():
            L.append(f"    {k}: {v}")
        L.append(f"    hint: {f.hint}")
    return escape_invisible("\n".join(L))  # the file name and the evidence are the template author's text


def _cmd_lint(args: Any) -> int:
    fidelity = "improved" if args.improved else "llama.cpp"
    suppressed = tuple(args.suppress or ())
    fail_on = Severity(args.fail_on) if args.fail_on != "never" else None
    if args.batch:
        from .corpus import lint_corpus, summary_markdown, template_files

        paths = template_files(args.batch)
        show = args.progress or (args.progress is None and sys.stderr.isatty())
        reports = lint_corpus(paths, workers=args.workers, fidelity=fidelity, suppressed=suppressed,
                              progress=_bar if show else None)
        if args.markdown:
            print(summary_markdown(reports))
        else:
            for r in reports:
                print(json_visible(r.to_json()))
            print(summary_markdown(reports), file=sys.stderr)
        return 0
    if not args.file:
        raise ChatTemplateExplorerError("lint needs TEMPLATE or --batch DIR")

    report = lint(load(args.file, args.variant), fidelity=fidelity, suppressed=suppressed)
    if args.json:
        print(json_visible(report.to_json(), indent=2))
    else:
        print(format_lint(report))
    worst = report.worst()
    if fail_on is not None and worst is not None and SEVERITY_ORDER[worst] <= SEVERITY_ORDER[fail_on]:
        return 1
    return 0


def _cmd_render(args: Any) -> int:
    from ..chat.conversation import render_located

    request = load_request(args.request)
    template = load(args.file, args.variant, request)
    agp = request.add_generation_prompt and not args.no_generation_prompt

    def attempt(dialect: str) -> tuple[str | None, Any]:
        return render_located(template.source, template.name, request.messages, request.tools or None,
                              add_generation_prompt=agp, enable_thinking=request.enable_thinking,
                              chat_template_kwargs=request.chat_template_kwargs, dialect=dialect)

    text, where = attempt(args.dialect)
    if text is None:
        # a template written for llama.cpp's engine (list.append, …) fails in transformers' sandbox: say which works
        hint = ("; it renders in llama.cpp's dialect: add --dialect llama.cpp"
                if args.dialect == "transformers" and attempt("llama.cpp")[0] is not None else "")
        raise ChatTemplateExplorerError(f"{template.name}: {where.headline()}{hint}")
    sys.stdout.write(escape_invisible(text))   # exactly the render (no newline added), bidi characters escaped
    return 0


def register(subparsers: Any) -> None:
    """Add ``lint TEMPLATE [--json] [--suppress ID]… [--fail-on S]`` and ``lint --batch DIR [--markdown]`` to an
    ``argparse`` sub-parsers object. Exit status: 1 when a finding at or above ``--fail-on`` (default error)
    remains after suppression, 0 otherwise, 2 on bad input."""
    p = subparsers.add_parser("lint", help="lint a template: render matrix, round trip, prefix stability, "
                                           "renderer divergence, probes, markers, dates")
    p.add_argument("file", nargs="?", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or "
                                           "Hub id")
    p.add_argument("--variant", help="named template variant (e.g. tool_use)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--suppress", action="append", metavar="ID",
                   help="leave out findings with this id (shell pattern, e.g. 'render/typed-*'); repeatable")
    p.add_argument("--fail-on", choices=["error", "warning", "info", "never"], default="error",
                   help="exit 1 when a finding this severe or worse remains (default: error)")
    p.add_argument("--improved", action="store_true", help="improved fidelity for the analysis and parser")
    p.add_argument("--batch", metavar="DIR", help="lint every *.jinja of DIR: one JSON line each, table on stderr")
    p.add_argument("--markdown", action="store_true", help="(with --batch) print only the table by finding kind")
    p.add_argument("--workers", type=int, default=2, help="(with --batch) worker processes (default 2)")
    p.add_argument("--progress", action="store_true", default=None,
                   help="(with --batch) progress bar on stderr (default: when stderr is a terminal)")
    p.set_defaults(func=_guard(_cmd_lint))
    r = subparsers.add_parser("render", help="render a conversation with a template, as the template writes it "
                                             "(the request's messages, tools, add_generation_prompt, "
                                             "enable_thinking)")
    r.add_argument("file", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or Hub id")
    r.add_argument("--request", help="request JSON (messages, tools, add_generation_prompt, enable_thinking, …); "
                                     "default: one user message, no tools")
    r.add_argument("--variant", help="named template variant (e.g. tool_use; default: the one llama.cpp picks "
                                     "for the request)")
    r.add_argument("--no-generation-prompt", action="store_true",
                   help="render without the generation prompt (add_generation_prompt false)")
    r.add_argument("--dialect", choices=["transformers", "llama.cpp"], default="transformers",
                   help="whose Jinja rules: transformers' sandbox (default; lists are immutable) or llama.cpp's "
                        "engine (list.append works)")
    r.set_defaults(func=_guard(_cmd_render))
