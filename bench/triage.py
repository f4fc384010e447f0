"""Time ``explain`` (with its triage) on 256 KB hostile outputs shaped like real failing reports (issue 26: "hostile
outputs of 256 KB must stay ≤ 2 s for explain as a whole"). ``python -m bench.triage`` prints one line per output:
the case it grows from, its size, wall seconds, CPU seconds (the clock of explain's time bound), the mistake named,
the parses the triage spent and whether its budget stopped it (and which bound). Timing is a measurement, never a test assertion (it depends on the machine)."""

from __future__ import annotations

import json
import pathlib
import time

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.jinja.template import ChatTemplate

ROOT = pathlib.Path(__file__).resolve().parent.parent
N = 256 * 1024

GROW = [
    ("vllm-49248", lambda: "<tool_call>search<arg_key>query</arg_key>" + "x" * N + "</arg_value></tool_call>"),
    ("hermes-agent-5867", lambda: '{"name": "search", "arguments": {"query": "' + "y" * N + '"}}'),
    ("llamacpp-24807", lambda: "<tool_call>\n<function=write>\n<parameter=path>\n" + "z" * N
     + "\n</parameter>\n</function>\n</tool_call>"),
    ("vllm-49248", lambda: "<tool_call>" * (N // 11)),
    ("localharness-104", lambda: "<tool_call>" + '{"name": "write_file", "parameters": {' * (N // 40)),
    ("hermes-agent-5867", lambda: "a." * (N // 2)),           # identifier runs for the call-syntax pattern
    ("hermes-agent-5867", lambda: '"type" :' * (N // 8)),     # wrapper-key prefixes
    ("hermes-agent-5867", lambda: "```" * (N // 3)),          # fence openers
]


def main() -> None:
    cases = {json.loads(line)["id"]: json.loads(line)
             for line in open(ROOT / "tests" / "data" / "triage" / "cases.jsonl", encoding="utf-8")}
    templates = ROOT.parent / "shared" / "templates"
    for cid, grow in GROW:
        c = cases[cid]
        t = ChatTemplate((templates / c["template"]).read_text(encoding="utf-8"), c["template"])
        req = ChatRequest.from_dict(c)
        explain(t, req, c["input"])      # warm the analysis cache: the first build is not what is measured
        out = grow()
        t0, c0 = time.perf_counter(), time.thread_time()
        ex = explain(t, req, out)
        dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
        tg = ex.triage
        print(f"{cid:20} {len(out):>7} B {dt:5.2f} s  {cpu:5.2f} CPU s  {tg.mistake.name:24} parses={tg.searched} "
              f"budget_hit={tg.budget_hit}" + (f" ({tg.budget_limit})" if tg.budget_limit else ""))


if __name__ == "__main__":
    main()
