"""No code from data (issue 24): the generated conformance suite (``python -m core suite``), the explain pytest
reproducer and the ``peg_tester`` C++ snippet are generated from hostile names and texts — triple quotes,
quotes, backslashes, newlines, ``\\N{…}``, line/paragraph separators, ``*/``, ``#include``, ``");system("…``, NUL,
bidi controls — and then RUN: each payload carries code that would create a canary file if it ever executed. The
canary must stay absent and the generated tests must still pass (the names reach the code as the same text)."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from core.chat.request import ChatRequest
from core.codegen import cpp_str, py_identifier, py_str
from core.explain.explain import explain
from core.explain.reproducer import peg_tester_snippet, pytest_test, template_path
from core.export.suite import generate_suite, write_suite
from core.jinja.template import ChatTemplate

from .conftest import ROOT

CHATML = ROOT / "assets" / "templates" / "chatml-think-tools.jinja"


def payloads(canary: pathlib.Path) -> list[str]:
    """Names that break out of a docstring, a string literal, a comment or a line in Python or C++, each followed
    by code that creates ``canary``."""
    py = f"__import__('pathlib').Path({str(canary)!r}).touch()"
    sh = f'system("touch {canary}");'
    return [
        f'a"""\n{py}\n"""',
        f"b'''\n{py}\n'''",
        f'c"\n{py}\n#"',
        f"d'\n{py}\n#'",
        f"e\\\n{py}",
        f"f\\N{{LATIN SMALL LETTER A}}\\\\N{{x}}\u2028{py}\u2029{py}",
        f"g\x00\u202e\u2066{py}\u2069\u202c",
        f'h*/ #include <cstdlib>\n");{sh}//',
        f'i\\");{sh}/*',
        f"j??/\n{sh}",  # a trigraph backslash (pre-C++17) continuing a line
        f"k\r{py}\r\n{py}\x0c\x0b\x1c{py}\x85{py}",
        # no character JSON must escape: the parser reads it as a real tool name, so the call's name is written
        f"l*/ #include <cstdlib> ??/ ');{py} # {sh.replace(chr(34), chr(39))} \u2028",
    ]


def test_literal_helpers_round_trip():
    for s in payloads(pathlib.Path("/nonexistent/canary")) + ["", "é東京🌧", "\ud800"]:
        assert eval(py_str(s)) == s and py_str(s).isascii()  # noqa: S307 - the literal we generated
        assert cpp_str(s).isascii() and "\n" not in cpp_str(s)
    assert py_identifier("test_a\"\"\"\nimport os ²_x") == "test_a____import_os___x"
    assert py_identifier("1st") == "x_1st" and py_identifier("class") == "x_class"
    with pytest.raises(TypeError):
        py_str(3)  # type: ignore[arg-type]


def _run(cmd: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_generated_suite_from_hostile_names_runs_no_injected_code(tmp_path):
    canary = tmp_path / "CANARY"
    source = CHATML.read_text(encoding="utf-8")
    suite = generate_suite(ChatTemplate(source, "hostile.jinja"))
    assert suite.cases, suite.skipped
    dirs = []
    for i, name in enumerate(payloads(canary)):
        d = tmp_path / f"suite{i}"
        paths = write_suite(suite, ChatTemplate(source, name), str(d))
        text = pathlib.Path(paths["test"]).read_text(encoding="utf-8")
        assert text.isascii() and py_str(name) in text and name not in text
        compile(text, paths["test"], "exec")  # the file is valid Python whatever the name
        dirs.append(str(d / "test_suite.py"))
    p = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib", *dirs],
             tmp_path)
    assert not canary.exists(), "injected code ran"
    assert p.returncode == 0, p.stdout[-1500:]
    assert f"{len(suite.cases) * len(dirs)} passed" in p.stdout
    # the generated module carries the name as the same text
    ns: dict = {}
    exec(compile(f"TEMPLATE_NAME = {py_str(payloads(canary)[0])}", "x", "exec"), ns)
    assert ns["TEMPLATE_NAME"] == payloads(canary)[0]


def _hostile_explanation(name: str) -> object:
    tool = {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": {name: {"type": "string", "description": name}}, "required": [name]}}}
    template = ChatTemplate(CHATML.read_text(encoding="utf-8"), name)
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": name}], "tools": [tool]})
    import json

    call = json.dumps({"name": name, "arguments": {name: name}}, ensure_ascii=False)
    output = f"{name}</think>{name}\n<tool_call>\n{call}\n</tool_call>"
    return explain(template, req, output, fixes=False)


def test_pytest_reproducer_from_hostile_names_runs_no_injected_code(tmp_path):
    canary = tmp_path / "CANARY"
    files = []
    for i, name in enumerate(payloads(canary)):
        ex = _hostile_explanation(name)
        code = pytest_test(ex, source=CHATML.read_text(encoding="utf-8"))
        assert code.isascii() and name not in code
        f = tmp_path / f"test_repro_{i}.py"
        f.write_text(code, encoding="utf-8")
        files.append(str(f))
    p = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib", *files],
             tmp_path)
    assert not canary.exists(), "injected code ran"
    assert p.returncode == 0, p.stdout[-1500:]
    assert f"{len(files)} passed" in p.stdout


_CPP_STUBS = r"""
#include <cstdio>
#include <initializer_list>
#include <string>
static void dump(const char* what, const std::string& s) {
    std::printf("%s ", what);
    for (unsigned char c : s) std::printf("%02x", c);
    std::printf("\n");
}
#include <vector>
struct common_chat_tool { std::string name, description, parameters; };
struct common_chat_msg_content_part { std::string type, text; };
struct common_chat_tool_call { std::string name, arguments, id; };
struct common_chat_msg {
    std::string role, content;
    std::vector<common_chat_msg_content_part> content_parts;
    std::vector<common_chat_tool_call> tool_calls;
    std::string reasoning_content, tool_name, tool_call_id;
};
struct call_t {
    std::string name, args, id;
    call_t(std::string n, std::string a, std::string i) : name(n), args(a), id(i) {}
};
enum common_reasoning_format { COMMON_REASONING_FORMAT_NONE, COMMON_REASONING_FORMAT_AUTO,
    COMMON_REASONING_FORMAT_DEEPSEEK, COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY };
struct test_t {
    test_t& tools(std::initializer_list<common_chat_tool> ts) {
        for (const auto& t : ts) { dump("tool", t.name); dump("params", t.parameters); }
        return *this;
    }
    test_t& messages(std::vector<common_chat_msg> ms) {
        for (const auto& m : ms) { dump("role", m.role); dump("message", m.content); }
        return *this;
    }
    test_t& parallel_tool_calls(bool) { return *this; }
    test_t& enable_thinking(bool) { return *this; }
    test_t& reasoning_format(common_reasoning_format) { return *this; }
    test_t& expect_reasoning(std::string s) { dump("reasoning", s); return *this; }
    test_t& expect_content(std::string s) { dump("content", s); return *this; }
    test_t& expect_tool_calls(std::initializer_list<call_t> calls) {
        for (const auto& c : calls) { dump("name", c.name); dump("args", c.args); dump("id", c.id); }
        return *this;
    }
    void run() {}
};
struct peg_tester {
    peg_tester(std::string file, bool) { dump("file", file); }
    test_t test(std::string input) { dump("input", input); return test_t(); }
};
static bool detailed_debug = false;
"""


def _hex(s: str) -> str:
    return s.encode("utf-8", "surrogatepass").hex()


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")
def test_peg_tester_snippet_from_hostile_names_compiles_and_round_trips(tmp_path):
    canary = tmp_path / "CANARY"
    names_written = 0
    for i, name in enumerate(payloads(canary)):
        ex = _hostile_explanation(name)
        snippet = peg_tester_snippet(ex)
        assert snippet.isascii() and name not in snippet
        tools = sorted(set(re.findall(r"\b(\w+_tool(?:_\d+)?)\b", snippet)))
        assert tools == ["common_chat_tool", "repro_tool_0"], tools  # declared; the hostile name only in a literal
        src = tmp_path / f"snippet{i}.cpp"
        src.write_text(_CPP_STUBS + "int main()\n" + snippet, encoding="utf-8")
        exe = tmp_path / f"snippet{i}"
        c = subprocess.run(["g++", "-std=c++17", "-Werror=trigraphs", "-o", str(exe), str(src)],
                           capture_output=True, text=True, timeout=120)
        assert c.returncode == 0, c.stderr[-1500:]
        r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert r.returncode == 0 and not canary.exists(), "injected code ran"
        got = dict(line.split(" ", 1) if " " in line else (line, "") for line in r.stdout.splitlines())
        msg = ex.message
        # (not llama.cpp's template: the path the comment says to save it at, the name reduced to safe characters)
        assert got["file"] == _hex(template_path(name)) and got["input"] == _hex(ex.output)
        assert re.fullmatch(r"models/templates/repro-[\w.-]+\.jinja", template_path(name), re.A)
        assert f"save it as {template_path(name)} first" in snippet
        assert got["tool"] == _hex(name) and got["role"] == _hex("user") and got["message"] == _hex(name)
        assert got["content"] == _hex(msg.get("content") or "")
        if msg.get("reasoning_content"):
            assert got["reasoning"] == _hex(msg["reasoning_content"])
        if msg.get("tool_calls"):
            assert got["name"] == _hex(msg["tool_calls"][0]["function"]["name"]) == _hex(name)
            assert got["args"] == _hex(msg["tool_calls"][0]["function"]["arguments"])
            names_written += 1
    assert not canary.exists() and names_written >= 1
