"""``python -m core explain TEMPLATE --request REQ.json < OUTPUT``: the span view, the stop point, the causes
and the checked fixes of one parse, as text or ``--json``; ``--reproducer`` prints the three reproducers."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..escapes import escape_invisible, json_visible
from ..errors import ChatTemplateExplorerError
from ..inputs import guard as _guard, read_json_file, load_chat_template, load_request, read_model_output

_COLOURS = {"reasoning": "35", "content": "0", "tool name": "1;36", "call id": "36", "arguments": "33",
            "argument name": "1;33", "argument value": "33", "marker": "7", "whitespace": "2",
            "generation prompt": "2;37", "unparsed": "1;31", "ignored": "2;31"}


def _cmd_explain(args: argparse.Namespace) -> int:
    from .model import visible_text as visible
    from .explain import explain, show_invisible
    from .reproducer import case_line, check_expected, peg_tester_snippet, pytest_test
    from .call_relation import relation_lines

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
    if args.json:
        data = ex.to_json()
        data["reproducer"] = {"case": json.loads(case_line(ex, expect=expect)),
                              "pytest": pytest_test(ex, source=template.source, expect=expect),
                              "peg_tester": peg_tester_snippet(ex, expect=expect)}
        print(json_visible(data, indent=2))
        return 0
    tg = ex.triage
    alone = f" (only the repair(s) {', '.join(ex.only_repairs)})" if ex.only_repairs is not None else ""
    print(f"template {escape_invisible(ex.template, keep='')} · route {ex.route} · fidelity {ex.fidelity}{alone} · parse {ex.verdict}")
    for note in ex.notes if ex.entry == "no-parser" else ():
        print(f"\n{show_invisible(note)}")
    if tg is not None and tg.mistake.name != "NONE":
        print(f"\nmistake: {tg.mistake.value} — {show_invisible(tg.sentence)}")
        if tg.nearest:
            print(f"\nnearest accepted output ({len(tg.nearest.edits)} edit(s)"
                  + (f"; repair {tg.nearest.repair} accepts it" if tg.nearest.repair else "") + "):")
            for line in tg.nearest.diff.splitlines():
                print("  " + show_invisible(line))
        if tg.fixes:
            print("\nfixes, ranked (each re-parsed before it is offered):")
            for i, f in enumerate(tg.fixes, 1):
                print(f"  {i}. [{f.kind.value}] {show_invisible(f.description)}"
                      + (f"  (apply: {f.cli})" if f.cli else ""))
                if f.gives_expected is not None:
                    print("     " + f.expected_words())
                print("     gives: " + show_invisible(json.dumps(f.message, ensure_ascii=False))[:300])
        elif tg.no_fix:
            print(f"\nno change of ours helps: {tg.no_fix}")
        for e in tg.evidence:
            print(f"  - {show_invisible(e)}")
        if tg.relation is not None:
            print()
            for i, line in enumerate(relation_lines(tg.relation, tg.relation_decided)):
                print(("  " if i else "") + line)
    print("\nspans (text of generation prompt + output; [label field] «text»):")
    for s in ex.spans:
        tag = s.display_label + (f" {s.field}" if s.field and not s.field.startswith("{") else "") \
            + (f" #{s.call}" if s.call >= 0 else "") + (" (prompt)" if s.in_prompt else "")
        print(f"  {s.start:>5}-{s.end:<5} [{tag}] «{visible(s.text)}»")
    if ex.stop:
        print(f"\nstopped at output position {ex.stop.output_pos} ({' > '.join(ex.stop.path) or 'top level'}): "
              f"{ex.stop.words()}")
    if ex.truncated:
        print(f"\ntruncated: {ex.truncated.words()} ({' > '.join(ex.truncated.path) or 'top level'})")
    print("\nmessage: " + show_invisible(json.dumps(ex.message, ensure_ascii=False)))
    for f in ex.findings:
        print(f"\ncause: {f.cause.value}")
        for e in f.evidence:
            print(f"  - {show_invisible(e)}")
    if ex.other is not None:
        print("\nother fidelity message: " + show_invisible(json.dumps(ex.other, ensure_ascii=False)))
    for fx in ex.fixes:
        print(f"\nfix ({fx.kind.value}, re-parsed clean): {fx.description}")
        print("  gives: " + show_invisible(json.dumps(fx.message, ensure_ascii=False)))
    if not ex.fixes and not ex.clean:
        print("\nno candidate change parses this output clean")
    if ex.consistency:
        print(f"\nWARNING (a bug of this tool): {ex.consistency}")
    if args.reproducer:
        print("\n# cases.jsonl line\n" + case_line(ex, expect=expect))
        print("\n# pytest\n" + pytest_test(ex, source=template.source, expect=expect))
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
