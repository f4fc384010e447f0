"""Explain on hostile model outputs (issue 24): CPU seconds of ``core.explain.explain`` against the parser's own
``parse`` of the same output, per route and kind, at the sizes given.

    python -m bench.explain_hostile [--sizes 262144,1048576] [--kinds brackets,calls,...] [--routes N]

Kinds (the output is the model's text after the prompt):

* ``brackets``: a flood of ``[``;
* ``calls``: the template's own rendering of one tool call, repeated (many calls in a row);
* ``brokencall``: those calls, then one more whose argument value lost its quotes (``paris`` for ``"paris"``:
  a call that does not parse after thousands that do, so the final parse settles against the partial view);
* ``near``: the template's tool-call opener without its last character, repeated (near-miss markers);
* ``longmarker``: one marker-shaped token ``<|aaaa…|>`` as long as the output;
* ``lt``: a flood of ``<``.

Times are CPU seconds of this thread (``time.thread_time``), so other processes on a shared machine do not
inflate them; the parse is timed after a warm-up explain of a short prefix (the analysis and parser cached).
Prints one line per (route, kind, size) and the worst explain time per size.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
from typing import Any

from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .hostile import ROUTES
from .outputs import TOOLS, _turn_text

KINDS = ("brackets", "calls", "brokencall", "near", "longmarker", "lt")
SHARED = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "templates"


def _request() -> ChatRequest:
    return ChatRequest.from_dict({"messages": [{"role": "user", "content": "Plan my trip to Paris."}],
                                  "tools": TOOLS, "parallel_tool_calls": True})


def _opener(bundle: Any) -> str:
    a = bundle.report.analysis if bundle.report is not None else None
    f = a.tools.format if a is not None else None
    return ((f.section_start or f.per_call_start) if f is not None else "") or "<tool_call>"


def hostile_output(template: ChatTemplate, kind: str, n: int) -> str:
    """The ``kind`` output of about ``n`` characters for ``template`` (see the module doc)."""
    if kind == "brackets":
        return "[" * n
    if kind == "lt":
        return "<" * n
    if kind == "longmarker":
        return "<|" + "a" * max(0, n - 4) + "|>"
    req = _request()
    if kind == "near":
        o = _opener(build_chat_parser(template, req)).strip() or "<tool_call>"
        unit = o[:-1] + " "
        return unit * max(1, n // len(unit))
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c00000001", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "paris"}}}]}
    unit = _turn_text(template, req.messages, call)
    calls = unit * max(1, n // max(1, len(unit)))
    return calls + unit.replace('"paris"', "paris") if kind == "brokencall" else calls


def measure(template: ChatTemplate, kind: str, n: int) -> tuple[float, float, int, list[str]]:
    """``(parse CPU s, explain CPU s, output length, explain notes)`` for one hostile output."""
    from core.explain.explain import explain

    req = _request()
    out = hostile_output(template, kind, n)
    explain(template, req, out[:2000])      # warm: analyses of both fidelities, parsers built
    parser = build_chat_parser(template, req).parser
    t0 = time.thread_time()
    parser.parse(out)
    t1 = time.thread_time()
    ex = explain(template, req, out)
    t2 = time.thread_time()
    return t1 - t0, t2 - t1, len(out), ex.notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.explain_hostile", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="262144", help="output sizes in characters (comma-separated)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="kinds (comma-separated)")
    ap.add_argument("--routes", type=int, default=len(ROUTES), help="the first N routes of bench.hostile")
    ap.add_argument("--templates", default=str(SHARED), help="folder of the route templates")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    routes = [("ChatML think+tools (bundled)", "chatml-think-tools.jinja")] + ROUTES[:args.routes]
    worst: dict[int, tuple[float, str]] = {}
    for label, name in routes:
        path = pathlib.Path(args.templates) / name
        if not path.is_file():
            path = pathlib.Path(__file__).resolve().parent.parent / "assets" / "templates" / name
        if not path.is_file():
            print(f"{name}: not found, skipped", flush=True)
            continue
        template = ChatTemplate(path.read_text(encoding="utf-8"), name)
        for kind in kinds:
            for n in sizes:
                try:
                    tp, te, length, notes = measure(template, kind, n)
                except Exception as e:  # noqa: BLE001 - a kind the template cannot render is reported, not timed
                    print(f"{label[:34]:34} {kind:10} {n:>9}: not measured ({type(e).__name__}: {str(e)[:80]})")
                    continue
                cut = " (re-parses left out)" if any("limit: explain re-parses" in x for x in notes) else ""
                print(f"{label[:34]:34} {kind:10} {length:>9} chars  parse {tp:6.2f} s  explain {te:6.2f} s{cut}",
                      flush=True)
                if te > worst.get(n, (-1.0, ""))[0]:
                    worst[n] = (te, f"{label} / {kind}")
    for n, (te, where) in sorted(worst.items()):
        print(f"worst explain at {n} chars: {te:.2f} s CPU ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
