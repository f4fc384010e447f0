"""Figures for docs/fidelity-reasoning.md: what repair ``reasoning-end-without-start`` costs a streaming client.

For every request of the reference cases, the drift suite and the real-output set where the repair applies at
``improved`` (the request switches the template's thinking on and the generation prompt does not open reasoning),
the output is streamed one character at a time with the repair on and off, and the characters of output fed
before the first byte reaches the client (any field) and before the first content byte are counted. The
alternative that was parked (keep plain answers as content, so hold everything back until the end marker or the
end of the output) is counted from the text: the first byte waits for the end marker, or for the whole output.
Deterministic (counts characters, not time).

    python -m bench.reasoning_first [--templates ../shared/templates]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from bench.lossless import _rows


def _first_bytes(parser, output: str) -> tuple[int | None, int | None]:
    """(characters fed before the first delta of any field, before the first content delta); None: never."""
    from core.chat.stream import StreamingParser

    sp = StreamingParser(parser)
    first = first_content = None
    for i, ch in enumerate(output, 1):
        for d in sp.feed(ch):
            if first is None and (d.content or d.reasoning_content or d.tool_call is not None):
                first = i
            if first_content is None and d.content:
                first_content = i
        if first is not None and first_content is not None:
            return first, first_content
    for d in sp.finish():
        if first is None and (d.content or d.reasoning_content or d.tool_call is not None):
            first = len(output)
        if first_content is None and d.content:
            first_content = len(output)
    return first, first_content


def _held_back(parser, output: str) -> int:
    """First byte under the parked alternative: the end of the end marker when the output has one, else the
    whole output (a plain answer can only be told from reasoning once the output ends)."""
    for tag in getattr(parser, "thinking_end_tags", None) or []:
        k = output.find(tag.strip()) if tag.strip() else -1
        if k >= 0:
            return k + len(tag.strip())
    return len(output)


def _fmt(xs: list[int]) -> str:
    return f"median {statistics.median(xs):g}, max {max(xs)}" if xs else "—"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reasoning_first")
    ap.add_argument("--templates", default=os.path.join("..", "shared", "templates"))
    args = ap.parse_args(argv)
    from core.chat.conformance import TemplateDir
    from core.chat.pipeline import build_chat_parser_or_content
    from core.chat.repairs import REASONING_END_WITHOUT_START
    from core.chat.request import ChatRequest

    tdir = TemplateDir(args.templates)
    rows: dict[str, list[tuple]] = {}
    templates: dict[str, set[str]] = {}
    for suite, tname, req, output, partial in _rows(args.templates):
        if partial:
            continue
        try:
            template = tdir.get(tname)
            request = ChatRequest.from_dict(req)
            on = build_chat_parser_or_content(template, request, fidelity="improved").parser
        except Exception:   # a case whose template or request cannot be built is not this bench's concern
            continue
        if not any(REASONING_END_WITHOUT_START in n for n in getattr(on, "notes", None) or []):
            continue
        off = build_chat_parser_or_content(template, request, fidelity="improved",
                                           disabled_repairs=[REASONING_END_WITHOUT_START]).parser
        f_on, c_on = _first_bytes(on, output)
        f_off, c_off = _first_bytes(off, output)
        rows.setdefault(suite, []).append((len(output), f_on, c_on, f_off, c_off, _held_back(on, output),
                                           output.find(on.thinking_start_tag) >= 0 if on.thinking_start_tag else False))
        templates.setdefault(suite, set()).add(tname)
    print("| suite | outputs where it applies (templates) | of them with no start marker | first byte, repair on "
          "| first byte, off | first byte, held back | first content byte, on | first content byte, off |")
    print("|---|---|---|---|---|---|---|---|")
    for suite in ("reference", "drift", "real"):
        rs = rows.get(suite, [])
        nostart = [r for r in rs if not r[6]]
        print(f"| {suite} | {len(rs)} ({len(templates.get(suite, ()))}) | {len(nostart)} "
              f"| {_fmt([r[1] for r in nostart if r[1] is not None])} "
              f"| {_fmt([r[3] for r in nostart if r[3] is not None])} "
              f"| {_fmt([r[5] for r in nostart])} "
              f"| {_fmt([r[2] for r in nostart if r[2] is not None])} ({sum(r[2] is None for r in nostart)} none) "
              f"| {_fmt([r[4] for r in nostart if r[4] is not None])} ({sum(r[4] is None for r in nostart)} none) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
