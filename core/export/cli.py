"""``python -m core export`` and ``python -m core suite`` (registered by :func:`register`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, TypeVar

from ..escapes import escape_invisible, json_visible
from ..inputs import JsonLineError, file_text, read_input_file, read_json_lines
from .consumers import TRANSFORMERS_MIN

FORMATS = ("response-template", "tokenizer-config", "gbnf")
_T = TypeVar("_T")


def _note(text: str) -> None:
    """One line on stderr. Template names and reasons are the template author's text: every invisible character
    in them is written as its escape, so none can reorder or break the line a terminal shows."""
    print(escape_invisible(text, keep=""), file=sys.stderr)


def _load(spec: str) -> Any:
    from ..inputs import load_chat_template
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import round_trip_request

    return load_chat_template(spec, None, ChatRequest.from_dict(round_trip_request()))


def _cases_for(cases: list[dict[str, Any]] | None, path: str | None, template_name: str) -> list[dict[str, Any]]:
    """The rows of ``cases`` (read from ``path``) for ``template_name``. Rows name their template by file name,
    so an edited copy saved under another name has none: that is said on stderr, not left to a count that only
    came out lower."""
    from .verify import reference_cases

    if not cases:
        return []
    rows = reference_cases(cases, template_name)
    if not rows:
        _note(f"note: no case of {path} is for {template_name} (cases are matched by the template's file name, "
              "as each row's \"template\" gives it); only the round trip is checked")
    return rows


def _check_cases(path: str) -> list[dict[str, Any]]:
    """The rows of ``path``, a readable ``cases.jsonl``, read once (a pipe, ``--cases <(…)``, is empty a second
    time) and to at most the input limit; else :class:`~core.errors.ChatTemplateExplorerError` (one line): a
    missing file or a line that is not a JSON object would otherwise be skipped silently (no reference case
    checked) or end in an internal error."""
    from ..errors import ChatTemplateExplorerError

    rows = []
    try:
        for n, row in read_json_lines(path, "cases file"):
            if not isinstance(row, dict):
                raise ChatTemplateExplorerError(f"{path}: line {n} is not a JSON object; --cases takes a "
                                                "cases.jsonl file, one JSON object a line")
            missing = [k for k in ("template", "messages", "input") if k not in row]
            if missing:
                # a row without its output or messages compared two empty parses and counted as agreeing
                raise ChatTemplateExplorerError(f"{path}: line {n} has no {', '.join(missing)}; a cases.jsonl "
                                                "row needs template, messages and input")
            rows.append(row)
    except JsonLineError as e:
        if e.problem == "not UTF-8 text":
            raise ChatTemplateExplorerError(f"{path}: not UTF-8 text (line {e.line})") from None
        raise ChatTemplateExplorerError(f"{path}: line {e.line} is not JSON ({e.msg}); --cases takes a "
                                        "cases.jsonl file, one JSON object a line") from None
    except OSError as e:
        raise ChatTemplateExplorerError(f"{path}: {e.strerror or e}") from None
    return rows


def _cmd_export(args: argparse.Namespace) -> int:
    from ..errors import ChatTemplateExplorerError
    from .corpus import corpus_export
    from .response_template import export_response_template
    from .tokenizer_config import merge_tokenizer_config

    fidelity = "improved" if args.improved else "llama.cpp"
    cases = _check_cases(args.cases) if args.cases else None
    # read here, once and within the input limit (a pipe passes the file check): the refusal comes before the
    # export's notes, on one line
    tok_raw = read_input_file(args.tokenizer_config, "--tokenizer-config file") \
        if args.tokenizer_config and os.path.exists(args.tokenizer_config) else None
    if args.tokenizer_config and args.format != "tokenizer-config" and not args.for_hub:
        # it was ignored: the plain response_template came out, not the merged file the author asked for
        raise ChatTemplateExplorerError(f"--tokenizer-config is merged into only with --format tokenizer-config "
                                        f"(got --format {args.format})")
    if args.batch and args.file:
        raise ChatTemplateExplorerError("export takes TEMPLATE or --batch DIR, not both")
    if args.format == "gbnf" and (args.verify or args.flavour != "transformers"):
        raise ChatTemplateExplorerError("--format gbnf takes neither --verify nor --for (they concern the "
                                        "response_template)")
    if args.batch:
        if not os.path.isdir(args.batch):
            raise ChatTemplateExplorerError(f"{args.batch}: not a directory")
        result = corpus_export(args.batch, fidelity=fidelity, flavour=args.flavour, cases=cases,
                               progress=sys.stderr if args.progress else None)
        for row in result.rows:
            print(json_visible(row))
        _note(result.summary())
        return 0
    if not args.file:
        raise ChatTemplateExplorerError("export needs TEMPLATE or --batch DIR")
    template = _load(args.file)
    if args.format == "gbnf":
        from .gbnf import export_gbnf

        print(escape_invisible(export_gbnf(template, fidelity=fidelity), keep="\n"))  # GBNF reads \u202e back
        return 0
    res = export_response_template(template, fidelity=fidelity, flavour=args.flavour)
    if not res.exportable:
        _note(f"error: {template.name}: cannot be exported as a response_template: {'; '.join(res.reasons)}")
        return 1
    if args.for_hub:
        return _write_hub_kit(args, res, template, fidelity, cases, tok_raw)
    if args.verify:
        from .verify import verify

        v = verify(res.response_template, template, fidelity=fidelity,
                   cases=_cases_for(cases, args.cases, template.name))
        _note(f"verification: {v.count_summary() or 'nothing checked'}")
        if not v.agrees:
            d = v.first_disagreement
            if d is None:
                _note(f"error: {template.name}: no check could be run (no usable reference case for this template, and "
                      "no round-trip message the template renders and parses back); not exported")
            else:
                _note(f"error: {template.name}: transformers disagrees with our parser on {d.source}: {d.why}; "
                      "not exported")
            return 1
    else:
        # the engine lines below say who reads the format, not that this export reads the template's outputs
        # right: without --verify nothing was run through transformers
        _note("verification: not run (--verify checks this response_template with transformers' own parser, "
              f"transformers >= {TRANSFORMERS_MIN}, before printing it)")
    for verdict in res.consumers:
        _note(f"engine {verdict.line()}")
    if args.format == "tokenizer-config":
        if args.tokenizer_config:
            if tok_raw is None:
                raise ChatTemplateExplorerError(f"{args.tokenizer_config}: No such file or directory")
            merged = _with_config(args.tokenizer_config, lambda: tok_raw,
                                  lambda base: merge_tokenizer_config(base, res.response_template))
        else:
            merged = merge_tokenizer_config(None, res.response_template)
        print(json_visible(merged, indent=2))
    else:
        print(json_visible(res.response_template, indent=2))
    return 0


def _with_config(path: str, read: Callable[[], bytes], use: Callable[[Any], _T]) -> _T:
    """``use`` of the tokenizer config ``path`` (its bytes from ``read``, a byte order mark allowed); a file that
    cannot be read, is not UTF-8 or not JSON, JSON nested too deeply, or a config ``use`` refuses (``ValueError``)
    is one line naming ``path``."""
    from ..errors import ChatTemplateExplorerError

    try:
        return use(json.loads(file_text(read())))
    except RecursionError:
        raise ChatTemplateExplorerError(f"{path}: JSON nested too deeply") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        msg = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
        raise ChatTemplateExplorerError(f"{path}: {msg}") from None


def _source_tokenizer_config(spec: str) -> str | None:
    """The tokenizer_config.json the template was read from (``spec`` is that file, or a directory holding one),
    else None: the kit then merges into it, keeping every other key."""
    if os.path.isdir(spec):
        path = os.path.join(spec, "tokenizer_config.json")
        return path if os.path.isfile(path) else None
    if os.path.isfile(spec) and os.path.basename(spec) == "tokenizer_config.json":
        return spec
    return None


def _write_hub_kit(args: argparse.Namespace, res: Any, template: Any, fidelity: str,
                   cases: list[dict[str, Any]] | None, tok_raw: bytes | None) -> int:
    """``--for-hub DIR``: verify (reference cases too with --cases), then write tokenizer_config.json (merged
    into --tokenizer-config when given, else into the template's own tokenizer_config.json when it was read from
    one) and PR.md into DIR, each through a temporary file renamed into place. Nothing is written when
    transformers disagrees."""
    import tempfile

    from ..errors import ChatTemplateExplorerError
    from .hub import hub_files
    from .verify import verify

    out = args.for_hub
    if os.path.exists(out) and not os.path.isdir(out):
        raise ChatTemplateExplorerError(f"--for-hub {out}: exists and is not a directory")
    base_path = args.tokenizer_config or _source_tokenizer_config(args.file)
    if args.tokenizer_config and not os.path.isfile(args.tokenizer_config):
        raise ChatTemplateExplorerError(f"--tokenizer-config {args.tokenizer_config}: no such file")
    v = verify(res.response_template, template, fidelity=fidelity,
               cases=_cases_for(cases, args.cases, template.name))
    _note(f"verification: {v.count_summary() or 'nothing checked'}")
    if not v.agrees:
        d = v.first_disagreement
        why = f"transformers disagrees with our parser on {d.source}: {d.why}" if d else "no check could be run"
        _note(f"error: {template.name}: {why}; nothing written")
        return 1
    base = None
    if base_path:
        base, files = _with_config(base_path, lambda: tok_raw if base_path == args.tokenizer_config and tok_raw
                                   is not None else read_input_file(base_path, "tokenizer_config.json"),
                                   lambda config: (config, hub_files(res, v, config)))
    else:
        files = hub_files(res, v, None)
    temps: list[str] = []
    try:
        os.makedirs(out, exist_ok=True)
        for name, text in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=out)
            temps.append(tmp)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        for tmp, name in zip(temps, files):
            os.replace(tmp, os.path.join(out, name))
    except OSError as e:
        for tmp in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        where = f" ({e.filename})" if getattr(e, "filename", None) and e.filename != out else ""
        raise ChatTemplateExplorerError(f"--for-hub {out}: {e.strerror or e}{where}") from None
    if base is None:
        _note(f"note: no tokenizer_config.json to merge into (pass --tokenizer-config, or give the model's "
              f"tokenizer_config.json as the template): {os.path.join(out, 'tokenizer_config.json')} holds only the "
              "response_template key to add")
    else:
        _note(f"merged into {base_path} (every other key kept)")
    _note(f"wrote {', '.join(os.path.join(out, n) for n in files)}")
    return 0


def _cmd_suite(args: argparse.Namespace) -> int:
    from ..errors import ChatTemplateExplorerError, os_error_text
    from .suite import generate_suite, suite_batch, write_suite

    fidelity = "improved" if args.improved else "llama.cpp"
    if args.batch:
        if not os.path.isdir(args.batch):
            raise ChatTemplateExplorerError(f"{args.batch}: not a directory")
        rows = suite_batch(args.batch, fidelity=fidelity)
        for row in rows:
            print(json_visible(row))
        green = sum(not r["failed"] for r in rows)
        cases = sum(r["cases"] for r in rows)
        failed = sum(len(r["failed"]) for r in rows)
        _note(f"suite ({fidelity}): {green}/{len(rows)} tool-capable templates pass their whole suite with our "
              f"parser; {cases - failed}/{cases} cases pass")
        return 0
    if not args.file or not args.output:
        raise ChatTemplateExplorerError("suite needs TEMPLATE -o DIR, or --batch DIR")
    if os.path.exists(args.output) and not os.path.isdir(args.output):  # checked before the suite is built
        raise ChatTemplateExplorerError(f"-o {args.output}: exists and is not a directory (the suite is a folder "
                                        "of files: cases.jsonl, test_suite.py, …)")
    template = _load(args.file)
    suite = generate_suite(template, fidelity=fidelity)
    try:
        paths = write_suite(suite, template, args.output, flavour=args.flavour)
    except OSError as e:
        raise ChatTemplateExplorerError(f"-o {args.output}: cannot write the suite ({os_error_text(e)})") from None
    for name, why in suite.skipped.items():
        _note(f"skipped {name}: {why}")
    _note(f"{len(suite.cases)} cases written to {paths['cases']}; run: python3 -m pytest -q {paths['test']}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``export`` and ``suite`` to an ``argparse`` sub-parsers object."""
    from ..inputs import guard as _guard

    e = subparsers.add_parser("export", help="export the analysis as a response_template, tokenizer_config.json "
                                             "or GBNF (verified by transformers with --verify)")
    e.add_argument("file", nargs="?", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or Hub id")
    e.add_argument("--format", choices=FORMATS, default="response-template",
                   help="what to print: the response_template (default), a tokenizer_config.json holding it, or "
                        "the GBNF grammar")
    e.add_argument("--for", dest="flavour", choices=("transformers", "vllm"), default="transformers",
                   help="field names for transformers (reasoning_content) or vLLM (thinking)")
    e.add_argument("--tokenizer-config", help="with --format tokenizer-config: the file to merge into")
    e.add_argument("--verify", action="store_true",
                   help="refuse to print unless transformers' parse_response agrees with our parser")
    e.add_argument("--cases", default=None, help="reference cases (cases.jsonl) also fed to the verification")
    e.add_argument("--for-hub", metavar="DIR", default=None,
                   help="verify, then write DIR/tokenizer_config.json (merged into --tokenizer-config, or into "
                        "the template's own tokenizer_config.json when read from one; else only the key to add) "
                        "and DIR/PR.md (a pull-request description with the verification table)")
    e.add_argument("--batch", metavar="DIR", help="export and verify every template of DIR; one JSON line each, "
                                                  "figures on stderr")
    e.add_argument("--progress", action="store_true", help="with --batch: one line per template on stderr")
    e.add_argument("--improved", action="store_true", help="improved fidelity (default: llama.cpp's)")
    e.set_defaults(func=_guard(_cmd_export))

    s = subparsers.add_parser("suite", help="write a conformance suite (cases.jsonl + pytest file) for a template")
    s.add_argument("file", nargs="?", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or "
                                           "Hub id")
    s.add_argument("-o", "--output", help="directory to write into (created)")
    s.add_argument("--batch", metavar="DIR", help="generate and run the suite of every tool-capable template of DIR "
                                                  "with our parser; one JSON line each, figures on stderr")
    s.add_argument("--for", dest="flavour", choices=("transformers", "vllm"), default="transformers",
                   help="field names for transformers (reasoning_content) or vLLM (thinking)")
    s.add_argument("--improved", action="store_true", help="improved fidelity (default: llama.cpp's)")
    s.set_defaults(func=_guard(_cmd_suite))
