"""What the limited workers cost (issue 24): ``python -m bench.isolation [ROUNDS]`` prints one JSON line.

* ``forkserver_start_ms``: the first call of a fresh process (the forkserver starts and imports ``core``; a
  server pays it once, at start-up, :func:`core.isolation.warm`);
* ``worker_start_ms``: a call that needs a new worker (forked from the running forkserver: after a kill);
* ``warm_call_ms``: a call of a trivial function on a warm worker (the pipe round trip and pickling);
* ``bundle_ms`` / ``bundle_isolated_ms``: the Playground's parser bundle for the bundled ChatML example, in
  process and through :func:`core.isolated_ops.parser_bundle` (warm: the worker's compiled template cached);
* ``parse_ms`` / ``parse_isolated_ms``: one parse of a 45 KB output, in process and through the worker.

Medians over ROUNDS (default 20) where repeated.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 3)


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 20
    from core import isolated_ops, isolation
    from core.analysis import analyze
    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest
    from core.jinja.template import ChatTemplate

    t0 = time.perf_counter()
    isolation.call(len, "x")
    out: dict[str, float] = {"forkserver_start_ms": round((time.perf_counter() - t0) * 1000, 1)}

    def fresh() -> None:
        isolation.shutdown()
        isolation.call(len, "x")

    out["worker_start_ms"] = _ms(fresh, max(3, rounds // 4))
    out["warm_call_ms"] = _ms(lambda: isolation.call(len, "x"), rounds)

    source = (ROOT / "assets" / "templates" / "chatml-think-tools.jinja").read_text(encoding="utf-8")
    tools = json.loads((ROOT / "assets" / "samples" / "tools.json").read_text(encoding="utf-8"))
    request = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": tools}
    report = analyze(ChatTemplate(source, "chatml.jinja"))
    req = ChatRequest.from_dict(request)
    out["bundle_ms"] = _ms(lambda: build_chat_parser(ChatTemplate(source, "chatml.jinja"), req, report=report),
                           rounds)
    counter = iter(range(10**9))

    def isolated_bundle() -> None:  # a new request each time: the worker's bundle cache does not answer
        r = dict(request, messages=[{"role": "user", "content": f"q{next(counter)}"}])
        isolated_ops.parser_bundle(isolated_ops.ParserRecipe(source, "chatml.jinja", json.dumps(r), report))

    out["bundle_isolated_ms"] = _ms(isolated_bundle, rounds)
    output = ("<think>" + "thinking " * 2000 + "</think>" + "Answer. " * 3000)[:45_000]
    local = build_chat_parser(ChatTemplate(source, "chatml.jinja"), req, report=report)
    recipe = isolated_ops.ParserRecipe(source, "chatml.jinja", json.dumps(request), report)
    isolated_ops.parser_bundle(recipe)
    out["parse_ms"] = _ms(lambda: local.parser.parse(output, False), rounds)
    out["parse_isolated_ms"] = _ms(lambda: isolated_ops.parse_openai(recipe, output, False), rounds)
    print(json.dumps(out))
    isolation.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
