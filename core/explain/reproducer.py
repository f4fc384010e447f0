"""A reproducer to paste into a bug report: the case as a ``reference/cases.jsonl`` line, a pytest test for this
project, and a ``peg_tester`` snippet in the shape of llama.cpp's ``tests/test-chat.cpp``."""

from __future__ import annotations

import json
import pprint
from typing import Any


def case_line(ex: Any, case_id: str = "explain-0000") -> str:
    """The explanation's case as one JSON line of ``reference/cases.jsonl`` (``expect`` = the message the
    current parser gives; edit it to the message you expected)."""
    row = {"id": case_id, "template": ex.template, **ex.request, "input": ex.output, "is_partial": False,
           "expect": ex.message}
    return json.dumps(row, ensure_ascii=False)


def pytest_test(ex: Any, case_id: str = "explain-0000", source: str | None = None) -> str:
    """A pytest test for this project that parses the output and compares the message (reference rules).
    With ``source`` (the template text) the test carries the template itself and runs from any directory;
    without it the template is read from ``../shared/templates`` by name."""
    name = "".join(c if c.isalnum() else "_" for c in f"test_{ex.template}_{case_id}").lower()
    case = pprint.pformat(json.loads(case_line(ex, case_id)), width=100, sort_dicts=False)
    if source is None:
        head = "from core.chat.conformance import TemplateDir, run_case\n"
        templates = 'TemplateDir("../shared/templates")'
    else:
        head = ("from core.chat.conformance import run_case\nfrom core.templating import ChatTemplate\n\n"
                f"SOURCE = {source!r}\n\n\nclass _Template:\n    def get(self, name):\n"
                "        return ChatTemplate(SOURCE, name)\n")
        templates = "_Template()"
    return f'''{head}
CASE = {case}


def {name}():
    templates = {templates}
    out = run_case(CASE, templates, fidelity={ex.fidelity!r})
    assert "error" not in out, out.get("error")
    assert out["message"] == CASE["expect"]
'''


def _cpp_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def peg_tester_snippet(ex: Any) -> str:
    """A block in the shape of the ``peg_tester`` cases of llama.cpp ``tests/test-chat.cpp``:
    ``auto tst = peg_tester("models/templates/<file>", detailed_debug); tst.test(input).tools({…})
    .enable_thinking(…).reasoning_format(…).expect_reasoning(…).expect_content(…).expect_tool_calls({…}).run();``.
    The expectations are the message the current parser gives — edit them to the message you expected. Tools
    are referenced as ``<name>_tool`` variables, as that file names its tools."""
    req = ex.request
    msg = ex.message
    out = ["{", f'    auto tst = peg_tester("models/templates/{ex.template}", detailed_debug);',
           f"    tst.test({_cpp_str(ex.output)})"]
    if req.get("tools"):
        names = [t["function"]["name"] for t in req["tools"] if isinstance(t, dict) and "function" in t]
        out.append(f"        .tools({{ {', '.join(n + '_tool' for n in names)} }})")
    if req.get("parallel_tool_calls"):
        out.append("        .parallel_tool_calls(true)")
    out.append(f"        .enable_thinking({str(bool(req.get('enable_thinking', True))).lower()})")
    fmt = (req.get("reasoning_format") or "auto").upper().replace("-", "_")
    out.append(f"        .reasoning_format(COMMON_REASONING_FORMAT_{fmt})")
    if msg.get("reasoning_content"):
        out.append(f"        .expect_reasoning({_cpp_str(msg['reasoning_content'])})")
    out.append(f"        .expect_content({_cpp_str(msg.get('content') or '')})")
    if msg.get("tool_calls"):
        calls = ", ".join(f"{{ {_cpp_str(tc['function']['name'])}, {_cpp_str(tc['function']['arguments'])}, "
                          f"{_cpp_str(tc.get('id') or '') if tc.get('id') else '{}'} }}" for tc in msg["tool_calls"])
        out.append(f"        .expect_tool_calls({{ {calls} }})")
    out.append("        .run();")
    out.append("}")
    return "\n".join(out) + "\n"
