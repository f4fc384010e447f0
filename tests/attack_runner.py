"""Run one class of the attack corpus (tests/data/attacks.json) in this process and print one JSON line per
(case, path). Meant to run in a subprocess with RLIMIT_AS set (tests/test_attacks.py does), so a regression
cannot take the machine down:

    python -m tests.attack_runner tests/data/attacks.json CLASS [MEMORY_MB [CASE_ID ...]]

With case ids, only those cases of the class run (tests/test_attacks.py runs the corpus as shards, several
processes at once, each with the same limits).

Paths per class:

* ``template bomb`` / ``hostile name`` (a template's name): ``analyze`` (strict), ``lint``, ``explain``, ``parse``
  (build the parser, parse a short output) and ``compare`` (against the bundled ChatML example); a case marked
  ``isolated`` (work inside CPython's C code, which only a worker kill stops) goes through
  :func:`core.analysis.isolated.analyze_isolated` instead, the path the app's analyses take;
* ``hostile name`` with a ``tool``: the tool offered in the request and called in the output, through
  ``explain`` and ``parse``;
* ``hostile URL``: the app's readers of a link's ``x`` (:func:`explorer.urlstate.read_explain`) and ``ov``
  (:func:`explorer.urlstate.load_link_json`);
* ``hostile output``: ``parse`` and ``explain`` of the output.

Each line: ``case``, ``path``, ``outcome`` (``ok``, ``error``: one of our errors, ``unexpected``: any other
exception, a MemoryError included), ``message``, ``cpu_s`` (CPU seconds of this process, so a loaded machine does
not inflate it), ``wall_s`` and ``peak_mb`` (peak resident memory during that path: the kernel's high-water mark
is reset before each path).
"""

from __future__ import annotations

import base64
import json
import pathlib
import resource
import sys
import time
import zlib
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUNDLED = ROOT / "assets" / "templates"
TOOLS = json.loads((ROOT / "assets" / "samples" / "tools.json").read_text(encoding="utf-8"))
ISOLATED_TIMEOUT_S = 8
ISOLATED_MEMORY_MB = 500


def payload(spec: Any) -> str:
    """A corpus payload: a string as is, or ``{"repeat": s, "times": n, "before": a, "after": b}``."""
    if isinstance(spec, str):
        return spec
    return spec.get("before", "") + spec["repeat"] * spec["times"] + spec.get("after", "")


def x_value(spec: dict[str, Any]) -> str:
    """The ``x`` link value of a corpus case: ``raw`` text, or base64url of zlib-compressed ``zlib`` (a payload)
    or ``zlib_bytes_hex``, cut by ``cut`` characters."""
    if "raw" in spec:
        return spec["raw"]
    data = bytes.fromhex(spec["zlib_bytes_hex"]) if "zlib_bytes_hex" in spec else payload(spec["zlib"]).encode()
    value = base64.urlsafe_b64encode(zlib.compress(data, 9)).decode("ascii").rstrip("=")
    return value[:-spec["cut"]] if spec.get("cut") else value


def _peak_reset() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _run(case: str, path: str, fn: Callable[[], Any]) -> None:
    from core.errors import ChatTemplateExplorerError

    _peak_reset()
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        fn()
        outcome, message = "ok", ""
    except ChatTemplateExplorerError as e:
        outcome, message = "error", str(e)
    except MemoryError:
        outcome, message = "unexpected", "MemoryError"
    except Exception as e:  # noqa: BLE001 - what the corpus must never see: recorded, not raised
        outcome, message = "unexpected", f"{type(e).__name__}: {e}"[:500]
    print(json.dumps({"case": case, "path": path, "outcome": outcome, "message": message[:2000],
                      "cpu_s": round(time.process_time() - c0, 3), "wall_s": round(time.perf_counter() - w0, 3),
                      "peak_mb": round(_peak_mb(), 1)}), flush=True)


def _request(tools: list[dict[str, Any]] | None = None) -> Any:
    from core.chat.request import ChatRequest

    return ChatRequest.from_dict({"messages": [{"role": "user", "content": "go"}], "tools": tools or TOOLS,
                                  "parallel_tool_calls": True})


def _template(case: dict[str, Any]) -> Any:
    from core.jinja.template import ChatTemplate

    base = case.get("base", "")
    if base.startswith("bundled:"):
        name = base.split(":", 1)[1]
        return ChatTemplate((BUNDLED / name).read_text(encoding="utf-8"), case.get("name") or name)
    return ChatTemplate(case["template"], case.get("name") or f"{case['id']}.jinja")


def _template_paths(case: dict[str, Any]) -> None:
    from core.analysis import analyze
    from core.chat.pipeline import build_chat_parser
    from core.compare import compare_templates
    from core.explain.explain import explain
    from core.lint import lint
    from core.jinja.template import ChatTemplate

    cid = case["id"]
    if case.get("isolated"):
        from core.analysis.isolated import analyze_isolated

        _run(cid, "analyze-isolated", lambda: analyze_isolated(
            case["template"], case.get("name") or f"{cid}.jinja", timeout_s=ISOLATED_TIMEOUT_S,
            memory_mb=ISOLATED_MEMORY_MB, strict=True))
        return
    other = (BUNDLED / "chatml-think-tools.jinja").read_text(encoding="utf-8")
    _run(cid, "analyze", lambda: analyze(_template(case), strict=True))
    _run(cid, "lint", lambda: lint(_template(case)))
    _run(cid, "explain", lambda: explain(_template(case), _request(), "hello"))
    _run(cid, "parse", lambda: build_chat_parser(_template(case), _request()).parser.parse("hello"))
    _run(cid, "compare", lambda: compare_templates(_template(case), ChatTemplate(other, "chatml.jinja")))


def _tool_paths(case: dict[str, Any]) -> None:
    from core.chat.pipeline import build_chat_parser
    from core.explain.explain import explain

    name = case["tool"]
    tools = [{"type": "function", "function": {"name": name, "description": "hostile name",
                                               "parameters": {"type": "object", "properties": {}}}}]
    output = "<tool_call>\n" + json.dumps({"name": name, "arguments": {}}) + "\n</tool_call>"
    _run(case["id"], "explain", lambda: explain(_template(case), _request(tools), output))
    _run(case["id"], "parse", lambda: build_chat_parser(_template(case), _request(tools)).parser.parse(output))


def _url_paths(case: dict[str, Any]) -> None:
    from explorer.urlstate import OV_MAX_CHARS, LinkStateError, load_link_json, read_explain

    if "x" in case:
        value = x_value(case["x"])
        _run(case["id"], "url-x", lambda: read_explain(value))
    if "ov" in case:
        text = payload(case["ov"])

        def ov() -> None:
            got = load_link_json(text, "ov", OV_MAX_CHARS)
            if not isinstance(got, dict):  # as explorer.urlstate.restore refuses it
                raise LinkStateError("ov", "it is not a JSON object of field paths and values")
        _run(case["id"], "url-ov", ov)


def _output_paths(case: dict[str, Any]) -> None:
    from core.chat.pipeline import build_chat_parser
    from core.explain.explain import explain

    output = payload(case["output"])
    template = _template(case)
    request = _request()
    build_chat_parser(template, request)  # the analysis and parser, built once before the timed paths
    _run(case["id"], "parse", lambda: build_chat_parser(template, request).parser.parse(output))
    _run(case["id"], "explain", lambda: explain(template, request, output))


def main(argv: list[str]) -> int:
    cases = json.loads(pathlib.Path(argv[0]).read_text(encoding="utf-8"))
    cls = argv[1]
    if len(argv) > 2:
        limit = int(argv[2]) * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    only = set(argv[3:])
    for case in cases:
        if case["class"] != cls or only and case["id"] not in only:
            continue
        if cls == "hostile URL":
            _url_paths(case)
        elif cls == "hostile output":
            _output_paths(case)
        elif "tool" in case:
            _tool_paths(case)
        else:
            _template_paths(case)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
