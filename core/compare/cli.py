"""``python -m core compare A B``: the CI gate for template changes."""

from __future__ import annotations

from typing import Any

from ..escapes import json_visible
from ..inputs import guard as _guard, load_chat_template as load
from . import compare_templates, format_comparison


def _cmd_compare(args: Any) -> int:
    a, b = load(args.a, args.variant), load(args.b, args.variant)
    c = compare_templates(a, b, fidelity="improved" if args.improved else "llama.cpp", with_lint=not args.no_lint)
    if args.json:
        print(json_visible(c.to_json(), indent=2))
    else:
        print(format_comparison(c))
    return 1 if c.parser_changes else 0


def register(subparsers: Any) -> None:
    """Add ``compare A B [--json] [--no-lint] [--improved] [--variant V]`` to an ``argparse`` sub-parsers object.
    Exit status: 0 when the parser would not change, 1 when it would, 2 on bad input."""
    p = subparsers.add_parser("compare", help="compare two templates: analysis, renders, lint findings, parses "
                                              "(exit 1 when the parser would change)")
    p.add_argument("a", help="template A (.jinja, tokenizer_config.json, chat_template.json, .gguf or Hub id)")
    p.add_argument("b", help="template B")
    p.add_argument("--variant", help="named template variant of both (e.g. tool_use)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--no-lint", action="store_true", help="leave out the lint findings (faster)")
    p.add_argument("--improved", action="store_true", help="improved fidelity for the analysis and parser")
    p.set_defaults(func=_guard(_cmd_compare))
