"""``python -m core roundtrip``: render an assistant message with the template and parse it back
(:mod:`core.chat.roundtrip`), for one template or every tool-capable template of a folder."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

from ..errors import ChatTemplateExplorerError, TemplateLoadError
from ..escapes import escape_invisible, json_visible
from ..inputs import guard as _guard
from ..inputs import load_chat_template
from .request import ChatRequest
from .roundtrip import RoundTripStatus, corpus_round_trip, round_trip, round_trip_request


def _cmd_roundtrip(args: Any) -> int:
    fidelity = "improved" if getattr(args, "improved", False) else "llama.cpp"
    if args.batch:
        d = pathlib.Path(args.batch)
        if not d.is_dir():
            raise TemplateLoadError(str(d), "not a directory")
        corpus = corpus_round_trip(d, fidelity=fidelity)
        for r in corpus.results:
            print(json_visible(r.to_json()))
        print(corpus.summary(), file=sys.stderr)
        return 0
    if not args.file:
        raise ChatTemplateExplorerError("roundtrip needs FILE or --batch DIR")
    template = load_chat_template(args.file, args.variant, ChatRequest.from_dict(round_trip_request()))
    result = round_trip(template, fidelity=fidelity)
    if args.json:
        print(json_visible(result.to_json(), indent=2))
    else:
        L = [f"{result.template}: {result.status.value} ({result.route}, variant {result.variant})"]
        if result.why:
            L.append(f"  why: {result.why}")
        L.extend(f"  note: {n}" for n in result.notes)
        L.append("  output:")
        L.extend(f"    {line}" for line in result.rendered_output.splitlines() or [""])
        if result.reduced is not None:
            L.append(f"  reduced message: {result.reduced.status.value}"
                     + (f" ({result.reduced.why})" if result.reduced.why else ""))
        print(escape_invisible("\n".join(L)))  # the file name and the render are the template author's text
    return 0 if result.status in (RoundTripStatus.PASS, RoundTripStatus.TEMPLATE_LIMITED) else 1


def register(subparsers: Any) -> None:
    """Add ``roundtrip FILE [--json] [--variant V]`` / ``roundtrip --batch DIR`` (JSON lines, summary on stderr)
    to an ``argparse`` sub-parsers object (called by ``core/cli.py``). Exit status: 0 pass or template-limited,
    1 parser failure, 2 bad input."""
    r = subparsers.add_parser("roundtrip", help="render an assistant message with the template and parse it back")
    r.add_argument("file", nargs="?", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or "
                                           "Hub id")
    r.add_argument("--variant", help="named template variant (e.g. tool_use)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--batch", metavar="DIR", help="every tool-capable template of DIR (*.jinja), one JSON line each")
    r.add_argument("--improved", action="store_true",
                   help="improved fidelity: the explorer's improvements over llama.cpp (default: llama.cpp's)")
    r.set_defaults(func=_guard(_cmd_roundtrip))
