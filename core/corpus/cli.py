"""``python -m core corpus DIR [--json] [--improved]``: the corpus counts of :mod:`core.corpus` (the figures
docs/fidelity.md and the explorer's Corpus page show)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import ChatTemplateExplorerError
from . import corpus_counts, corpus_row, template_files


def _cmd_corpus(args: argparse.Namespace) -> int:
    try:
        paths = template_files(args.folder)
    except ChatTemplateExplorerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    fidelity = "improved" if args.improved else "llama.cpp"
    counts = corpus_counts(corpus_row(p, fidelity) for p in paths)
    if args.json:
        print(json.dumps(counts.to_json(), indent=2))
    else:
        print("\n".join(counts.lines()))
    return 0


def register(subparsers: Any) -> None:
    """Add ``corpus`` to an ``argparse`` sub-parsers object (sets ``func``)."""
    c = subparsers.add_parser("corpus", help="counts over a folder of templates (routes, handlers, failures)")
    c.add_argument("folder", help="folder of .jinja / .json / .gguf files")
    c.add_argument("--json", action="store_true", help="print the counts as JSON")
    c.add_argument("--improved", action="store_true", help="analyse at improved fidelity")
    c.set_defaults(func=_cmd_corpus)
