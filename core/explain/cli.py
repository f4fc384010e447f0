"""``python -m core explain TEMPLATE --request REQ.json < OUTPUT``: the span view, the stop point, the causes
and the checked fixes of one parse, as text or ``--json``; ``--reproducer`` prints the three reproducers."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..escapes import json_visible
from ..errors import ChatTemplateExplorerError
from ..inputs import guard as _guard, read_json_file, load_chat_template, load_request, read_model_output

_COLOURS = {"reasoning": "35", "content": "0", "tool name": "1;36", "call id": "36", "arguments": "33",
            "argument name": "1;33", "argument value": "33", "marker": "7", "whitespace": "2",
            "generation prompt": "2;37", "unparsed": "1;31", "ignored": "2;31"}


def _cmd_explain(args: argparse.Namespace) -> int:
    from .explain import explain
    from .present import text_lines
    from .reproducer import case_id, case_line, check_expected, peg_tester_snippet, pytest_test

    overrides: dict[str, Any] = {}
    for item in args.override or []:
        if "=" not in item:
            raise ChatTemplateExplorerError(f"--override {item!r}: expected PATH=VALUE")
        k, v = item.split("=", 1)
        overrides[k] = v
    expect = None
    if args.expect:
        expect = read_json_file(args.expect, "--expect file")
        check_expected(expect, f"--expect {args.expect}")
    request = load_request(args.request)
    template = load_chat_template(args.file, args.variant, request)
    output = read_model_output()
    only = tuple(args.repair) if args.repair else None
    ex = explain(template, request, output, fidelity="improved" if args.improved else "llama.cpp",
                 overrides=overrides, only_repairs=only, expect=expect)
    cid = case_id(ex, expect, template.source)    # one id for the case line and the test written from it
    if args.json:
        data = ex.to_json()
        data["reproducer"] = {"case": json.loads(case_line(ex, cid, expect=expect)),
                              "pytest": pytest_test(ex, cid, source=template.source, expect=expect),
                              "peg_tester": peg_tester_snippet(ex, expect=expect)}
        print(json_visible(data, indent=2))
        return 0
    for line in text_lines(ex):
        print(line)
    if args.reproducer:
        print("\n# cases.jsonl line\n" + case_line(ex, cid, expect=expect))
        print("\n# pytest\n" + pytest_test(ex, cid, source=template.source, expect=expect))
        print("# llama.cpp tests/test-chat.cpp\n" + peg_tester_snippet(ex, expect=expect))
    return 0


def register(subparsers: Any) -> None:
    """Add the ``explain`` verb to an ``argparse`` sub-parsers object (sets ``func``)."""
    p = subparsers.add_parser("explain", help="explain a parse of model output (stdin): spans, stop point, "
                                              "cause, checked fixes, reproducer")
    p.add_argument("file", help="template: .jinja, tokenizer_config.json, chat_template.json, .gguf or Hub id")
    p.add_argument("--request", help="request JSON (messages, tools, tool_choice, enable_thinking, …)")
    p.add_argument("--variant", help="named template variant (e.g. tool_use)")
    p.add_argument("--override", action="append", metavar="PATH=VALUE", help="analysis override (repeatable)")
    p.add_argument("--improved", action="store_true", help="improved fidelity (default: llama.cpp's behaviour)")
    p.add_argument("--repair", action="append", metavar="NAME", help="improved fidelity with only this repair on "
                                                                   "(repeatable): a triage fix switched on alone")
    p.add_argument("--json", action="store_true", help="one JSON object (with the triage and the reproducers)")
    p.add_argument("--expect", metavar="FILE", help="the message you expected (OpenAI JSON): the triage reads the "
                                                   "output by it where the output alone leaves two readings and ranks "
                                                   "first the fixes that give it; the pytest reproducer asserts it "
                                                   "and is marked xfail(strict) until fixed")
    p.add_argument("--reproducer", action="store_true", help="also print the cases.jsonl line, pytest test and "
                                                             "peg_tester snippet")
    p.set_defaults(func=_guard(_cmd_explain))
