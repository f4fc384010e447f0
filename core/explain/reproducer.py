"""A reproducer to paste into a bug report: the case as a ``reference/cases.jsonl`` line, a pytest test for this
project, and a ``peg_tester`` snippet in the shape of llama.cpp's ``tests/test-chat.cpp``."""

from __future__ import annotations

import json
from typing import Any

from ..codegen import cpp_identifier, cpp_string, py_identifier, py_str

REASONING_FORMATS = ("NONE", "AUTO", "DEEPSEEK", "DEEPSEEK_LEGACY")
"""llama.cpp's ``COMMON_REASONING_FORMAT_*`` names the snippet may write (anything else is written as AUTO)."""


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
    # untrusted text (template name, output, tools, source) enters the file only as ASCII string literals: the
    # case as JSON text that the test decodes, the source as a literal; the function name keeps ASCII alnum only
    name = py_identifier(f"test_{ex.template}_{case_id}", prefix="test_")
    case = py_str(case_line(ex, case_id))
    if source is None:
        head = "import json\n\nfrom core.chat.cli_commands import TemplateDir, run_case\n"
        templates = 'TemplateDir("../shared/templates")'
    else:
        head = ("import json\n\nfrom core.chat.cli_commands import run_case\n"
                "from core.templating import ChatTemplate\n\n"
                f"SOURCE = {py_str(source)}\n\n\nclass _Template:\n    def get(self, name):\n"
                "        return ChatTemplate(SOURCE, name)\n")
        templates = "_Template()"
    return f'''{head}
CASE = json.loads({case})


def {name}():
    templates = {templates}
    out = run_case(CASE, templates, fidelity={py_str(str(ex.fidelity))})
    assert "error" not in out, out.get("error")
    assert out["message"] == CASE["expect"]
'''


def _text(value: Any) -> str:
    """A message value as text for a literal (arguments given as an object are written as their JSON)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def peg_tester_snippet(ex: Any) -> str:
    """A block in the shape of the ``peg_tester`` cases of llama.cpp ``tests/test-chat.cpp``:
    ``auto tst = peg_tester("models/templates/<file>", detailed_debug); tst.test(input).tools({…})
    .enable_thinking(…).reasoning_format(…).expect_reasoning(…).expect_content(…).expect_tool_calls({…}).run();``.
    The expectations are the message the current parser gives — edit them to the message you expected. Tools
    are referenced as ``<name>_tool`` variables, as that file names its tools; a tool whose name is not a plain C++
    identifier is written as ``unnamed_tool_<i>`` (a line comment says which index). Every text is a
    :func:`core.codegen.cpp_string` literal."""
    req = ex.request
    msg = ex.message
    out = ["{", f"    auto tst = peg_tester({cpp_string('models/templates/' + str(ex.template))}, detailed_debug);"]
    variables = []
    if req.get("tools"):
        names = [t["function"].get("name") for t in req["tools"]
                 if isinstance(t, dict) and isinstance(t.get("function"), dict)]
        for i, n in enumerate(names):
            ident = cpp_identifier(n) if isinstance(n, str) else None
            if ident is None:
                out.append(f"    // tool {i}: its name is not a C++ identifier; define unnamed_tool_{i} for it")
            variables.append(f"{ident}_tool" if ident else f"unnamed_tool_{i}")
    out.append(f"    tst.test({cpp_string(ex.output)})")
    if variables:
        out.append(f"        .tools({{ {', '.join(variables)} }})")
    if req.get("parallel_tool_calls"):
        out.append("        .parallel_tool_calls(true)")
    out.append(f"        .enable_thinking({str(bool(req.get('enable_thinking', True))).lower()})")
    fmt = str(req.get("reasoning_format") or "auto").upper().replace("-", "_")
    fmt = fmt if fmt in REASONING_FORMATS else "AUTO"
    out.append(f"        .reasoning_format(COMMON_REASONING_FORMAT_{fmt})")
    if msg.get("reasoning_content"):
        out.append(f"        .expect_reasoning({cpp_string(_text(msg['reasoning_content']))})")
    out.append(f"        .expect_content({cpp_string(_text(msg.get('content') or ''))})")
    if msg.get("tool_calls"):
        calls = ", ".join(f"{{ {cpp_string(_text(tc['function']['name']))}, "
                          f"{cpp_string(_text(tc['function']['arguments']))}, "
                          f"{cpp_string(_text(tc['id'])) if tc.get('id') else '{}'} }}" for tc in msg["tool_calls"])
        out.append(f"        .expect_tool_calls({{ {calls} }})")
    out.append("        .run();")
    out.append("}")
    return "\n".join(out) + "\n"
