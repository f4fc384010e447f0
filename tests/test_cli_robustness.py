"""The command line as a first-time user drives it: output piped into ``head``, model output that is not UTF-8,
bad request and cases files. Each failure is one line on stderr naming the file (and field), never a traceback;
a closed pipe is not a failure at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from .conftest import REFERENCE, ROOT, TEMPLATES


def feed(path: Any, data: bytes) -> threading.Thread:
    """Write ``data`` to the named pipe ``path`` from a thread (the reader under test may stop early)."""
    def write() -> None:
        try:
            with open(path, "wb") as f:
                f.write(data)
        except BrokenPipeError:   # the reader stopped at the limit
            pass
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t

QWEN3 = str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja")


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _run(args: list[str], stdin: bytes = b"Hello") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", *args], input=stdin, capture_output=True, cwd=ROOT,
                          env=_env(), timeout=120)


def _one_line_error(proc: subprocess.CompletedProcess, *names: str) -> str:
    err = proc.stderr.decode("utf-8").strip()
    assert proc.returncode != 0 and "Traceback" not in err and len(err.splitlines()) == 1, err
    for name in names:
        assert name in err, f"{name!r} not in {err!r}"
    return err


@pytest.fixture(scope="module")
def many_templates(tmp_path_factory: Any) -> str:
    d = tmp_path_factory.mktemp("many")
    for i in range(60):  # ~3 KB of JSON each: more than a pipe holds
        (d / f"t{i:02d}.jinja").write_text((TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8"))
    return str(d)


@pytest.mark.parametrize("command", ["analyze-batch", "parse-stream"])
@pytest.mark.parametrize("unbuffered", ["1", ""], ids=["unbuffered", "buffered"])
def test_output_piped_into_head_is_quiet(command: str, unbuffered: str, many_templates: str) -> None:
    """`python -m core … | head -1`: the reader closes the pipe early (the output is larger than a pipe holds,
    so the writer does see it closed); no 'Broken pipe' error, exit 0."""
    args = {"analyze-batch": ["analyze", "--batch", many_templates, "--workers", "0"],
            "parse-stream": ["parse", QWEN3, "--stream"]}[command]
    env = dict(_env(), PYTHONUNBUFFERED=unbuffered)
    feed = command == "parse-stream"
    proc = subprocess.Popen([sys.executable, "-m", "core", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.PIPE if feed else subprocess.DEVNULL, cwd=ROOT, env=env)
    assert proc.stdout and proc.stderr
    if feed:
        assert proc.stdin
        proc.stdin.write(("<think>" + "thinking " * 20_000 + "</think>answer").encode())
        proc.stdin.close()
    assert proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == ""


def test_invalid_utf8_on_stdin_gives_valid_json() -> None:
    """Undecodable bytes become one U+FFFD per run (as llama.cpp sanitizes them), so what we print is UTF-8
    JSON; the streamed deltas add up to the final message."""
    raw = b"Hi \xff\xfe there \xe2\x82"
    proc = _run(["parse", QWEN3, "--compact"], raw)
    assert proc.returncode == 0, proc.stderr
    msg = json.loads(proc.stdout.decode("utf-8"))  # strict: raises on raw 0xff bytes
    assert msg["content"] == "Hi \ufffd there \ufffd"
    proc = _run(["parse", QWEN3, "--stream"], raw)
    lines = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert "".join(d.get("content", "") for d in lines[:-1]) == lines[-1]["content"] == msg["content"]


def _write(tmp_path: Any, name: str, body: Any) -> str:
    p = tmp_path / name
    p.write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")
    return str(p)


def test_request_and_expect_files_may_start_with_a_byte_order_mark(tmp_path: Any) -> None:
    """A JSON file saved with a UTF-8 byte order mark (Windows editors write one) is read as without it: cases files
    were, a request file (parse, grammar, explain) and an --expect file failed with "Unexpected UTF-8 BOM". On
    vLLM's Gemma 4 bare-call case (tests/data/real_outputs_kept10, its source cited there)."""
    from core.chat.realset import load_cases

    case = next(c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept10"))
                if c.id == "kept10-vllm-gemma4-bare-call-after-thought-channel")
    template, output = str(TEMPLATES / case.template), case.output.encode("utf-8")
    plain = _write(tmp_path, "request.json", case.request)
    marked = tmp_path / "request-bom.json"
    marked.write_text(json.dumps(case.request), encoding="utf-8-sig")
    assert marked.read_bytes()[:3] == b"\xef\xbb\xbf"
    for verb in (["parse", template, "--improved", "--compact"], ["grammar", template]):
        proc = _run(verb + ["--request", str(marked)], output)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
        again = _run(verb + ["--request", plain], output).stdout
        if verb[0] == "grammar":
            assert proc.stdout == again
            continue
        # (a call's id is drawn at random on each run)
        calls = [{**c, "id": ""} for c in json.loads(proc.stdout)["tool_calls"]]
        assert calls == [{**c, "id": ""} for c in json.loads(again)["tool_calls"]]
        assert [c["function"]["name"] for c in calls] == ["bash"]
    expect = tmp_path / "expect-bom.json"
    expect.write_text(json.dumps(case.expect), encoding="utf-8-sig")
    proc = _run(["explain", template, "--improved", "--request", str(marked), "--expect", str(expect)], output)
    assert proc.returncode == 0 and b"parse clean" in proc.stdout, proc.stderr
    # invalid JSON after the mark: one line naming the file, the position counted in the text after the mark
    bad = tmp_path / "bad-bom.json"
    bad.write_bytes(b"\xef\xbb\xbf" + b'{"messages": [')
    _one_line_error(_run(["parse", template, "--request", str(bad)], output), str(bad),
                    "not valid JSON: Expecting value at line 1 column 15")


def test_export_merges_into_a_tokenizer_config_with_a_byte_order_mark(tmp_path: Any) -> None:
    """`export --format tokenizer-config --tokenizer-config FILE` reads FILE as a request file is read: the
    tokenizer config it wrote itself, saved again with a byte order mark, merges into the same file (it used to
    fail "Unexpected UTF-8 BOM")."""
    args = ["export", ASSET_TEMPLATE, "--format", "tokenizer-config"]
    first = _run(args, b"")
    assert first.returncode == 0, first.stderr
    base = tmp_path / "tokenizer_config.json"
    base.write_text(first.stdout.decode("utf-8"), encoding="utf-8-sig")
    again = _run(args + ["--tokenizer-config", str(base)], b"")
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout), again.stderr


def test_request_file_errors_name_file_and_field(tmp_path: Any) -> None:
    bad_field = _write(tmp_path, "fields.json", {"messages": "hi"})
    err = _one_line_error(_run(["parse", QWEN3, "--request", bad_field]), bad_field, "'messages'")
    assert "request file" in err
    # a bad content part is only found when the request is prepared for the template: still names the file
    part = _write(tmp_path, "part.json", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})
    for cmd in ("parse", "grammar"):
        _one_line_error(_run([cmd, QWEN3, "--request", part]), part, "messages[0].content[0].type")
    not_object = _write(tmp_path, "list.json", [1, 2])
    _one_line_error(_run(["grammar", QWEN3, "--request", not_object]), not_object, "JSON object")
    not_json = _write(tmp_path, "bad.json", "{")
    err = _one_line_error(_run(["parse", QWEN3, "--request", not_json]), not_json, "not valid JSON")
    assert "request field" not in err  # a file is not a field


def test_chunk_error_names_the_option() -> None:
    err = _one_line_error(_run(["parse", QWEN3, "--stream", "--chunk", "-3"]), "--chunk", "-3")
    assert "request" not in err


def test_conform_rows_that_are_not_cases(tmp_path: Any) -> None:
    cases = _write(tmp_path, "cases.jsonl", json.dumps({"id": "no-template", "input": "x"}) + "\n[1, 2]\n")
    proc = _run(["conform", cases, "--templates", str(TEMPLATES)])
    row = json.loads(proc.stdout.decode().splitlines()[0])
    assert row["id"] == "no-template" and "template" in row["error"] and "KeyError" not in row["error"]
    err = _one_line_error(proc, f"{cases}:2", "JSON object")
    assert "internal error" not in err


def test_conform_cases_file_missing(tmp_path: Any) -> None:
    missing = str(tmp_path / "nope.jsonl")
    err = _one_line_error(_run(["conform", missing, "--templates", str(TEMPLATES)]), missing, "cases file")
    assert "Errno" not in err


@pytest.mark.parametrize("body", ["", "\n\n  \n"])
def test_conform_cases_file_without_a_case(tmp_path: Any, body: str) -> None:
    """A cases file with no case (empty, or blank lines only) scored "cases passed: 0/0 = 100.0%" and exited 0,
    so a wrong path or an emptied file passed a --min gate; it is a one-line error naming the file."""
    empty = _write(tmp_path, "empty.jsonl", body)
    for extra in ([], ["--min", "0.9"], ["--summary-only"]):
        proc = _run(["conform", empty, "--templates", str(TEMPLATES), *extra])
        err = _one_line_error(proc, empty, "cases file", "holds no case")
        assert "100" not in err and proc.stdout == b""


def test_conform_min_gate_with_no_case_to_compare(tmp_path: Any) -> None:
    """Rows without ``expect`` (a file of model outputs passed by mistake) were run, then scored "cases passed:
    0/0 = 100.0%", so ``--min 100%`` exited 0: nothing was held to the gate. With --min it is a one-line error
    naming the file; without it the score says nothing was compared instead of 100 %."""
    case = {"id": "qwen3-no-expect", "template": "Qwen-Qwen3-0.6B.jinja", "input": "Hello"}
    cases = _write(tmp_path, "cases.jsonl", json.dumps(case) + "\n")
    proc = _run(["conform", cases, "--templates", str(TEMPLATES), "--min", "100%"])
    err = _one_line_error(proc, cases, "cases file", "expect", "--min")
    assert proc.returncode == 2 and "100.0%" not in err
    proc = _run(["conform", cases, "--templates", str(TEMPLATES), "--summary-only"])
    assert proc.returncode == 0 and proc.stderr.decode().splitlines() == [
        "final parse ok: 0/0; streamed deltas ok: 0/0", "1 case(s) without 'expect' were run but not compared",
        "cases passed: 0/0 (none compared)"]


def test_json_on_stdout_writes_invisible_characters_as_escapes() -> None:
    """A bidi override or zero-width character in the output reached the terminal raw in the printed JSON (a
    U+202E in a tool name reversed the rest of the line as shown); it is JSON's own escape now, the same JSON."""
    from core.escapes import json_visible

    raw = "Hi\u202e there\u200b \U000e0041\x85\x7f ｜▁ é"
    for args in (["parse", QWEN3, "--compact"], ["parse", QWEN3, "--stream"]):
        proc = _run(args, raw.encode("utf-8"))
        out = proc.stdout.decode("utf-8")
        assert proc.returncode == 0, proc.stderr
        assert not any(ch in out for ch in "\u202e\u200b\U000e0041\x85\x7f"), out
        assert "\\u202e" in out and "\\udb40\\udc41" in out and "｜▁ é" in out
        assert json.loads(out.splitlines()[-1])["content"] == raw
    value = {"name": raw, "nested": [raw]}
    assert json.loads(json_visible(value, indent=2)) == value
    assert json_visible({"a": "plain ASCII"}) == json.dumps({"a": "plain ASCII"})


ASSET_TEMPLATE = "assets/templates/chatml-think-tools.jinja"
ASSET_REQUEST = "assets/requests/req.json"


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("args", [
    ["parse", ASSET_TEMPLATE, "--request", "/dev/zero"],
    ["conform", "/dev/zero", "--templates", str(TEMPLATES)],
    ["explain", ASSET_TEMPLATE, "--request", ASSET_REQUEST, "--expect", "/dev/zero"],
    ["export", ASSET_TEMPLATE, "--format", "tokenizer-config", "--tokenizer-config", "/dev/zero"],
    ["export", ASSET_TEMPLATE, "--verify", "--cases", "/dev/zero"],
], ids=["request", "cases", "expect", "tokenizer-config", "export-cases"])
def test_a_device_named_as_an_input_file_is_refused(args: list[str]) -> None:
    """A file option naming a device that never ends (/dev/zero) read it until memory ran out: every one of
    them hung; now each is one line naming the file and what it is, before any byte is read."""
    _one_line_error(_run(args, b"Hi"), "/dev/zero", "character device")


def test_model_output_above_the_input_limit_is_refused() -> None:
    """`parse < /dev/zero` read stdin without end; model output is read up to the input limit, then refused
    with one line naming stdin and the limit."""
    import io

    from core.errors import ChatTemplateExplorerError
    from core.inputs import read_model_output

    assert read_model_output(io.TextIOWrapper(io.BytesIO(b"a" * 10)), limit=10) == "a" * 10

    class Terminal(io.RawIOBase):  # a terminal hands over one line per read
        def __init__(self, data: bytes) -> None:
            self.lines = data.splitlines(keepends=True)

        def readable(self) -> bool:
            return True

        def isatty(self) -> bool:
            return True

        def readinto(self, b) -> int:
            if not self.lines:
                return 0
            line = self.lines.pop(0)
            b[:len(line)] = line
            return len(line)

    typed = b"<think>plan</think>\n<tool_call>\n{}\n</tool_call>\n"
    assert read_model_output(io.TextIOWrapper(io.BufferedReader(Terminal(typed))), limit=100) == typed.decode()
    with pytest.raises(ChatTemplateExplorerError, match=r"model output on stdin .*above the limit of 10 bytes"):
        read_model_output(io.TextIOWrapper(io.BytesIO(b"a" * 11)), limit=10)
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run([sys.executable, "-m", "core", "parse", ASSET_TEMPLATE], stdin=zero,
                              capture_output=True, cwd=ROOT, env=_env(), timeout=120)
    _one_line_error(proc, "stdin", "limit")


_INVISIBLE = "\u202e\u200b\x1b"


@pytest.fixture(scope="module")
def bidi_named_template(tmp_path_factory: Any) -> str:
    """The tour's template under a file name holding a bidi override, a zero-width space and an escape."""
    d = tmp_path_factory.mktemp("bidi")
    path = d / "evil\u202elmth\u200b\x1b[2J.jinja"
    path.write_text((ROOT / ASSET_TEMPLATE).read_text(encoding="utf-8"), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("args", [["analyze"], ["lint", "--fail-on", "never"], ["roundtrip"], ["roundtrip", "--json"],
                                  ["explain", "--request", ASSET_REQUEST], ["compare", "--no-lint"]],
                         ids=["analyze", "lint", "roundtrip", "roundtrip-json", "explain", "compare"])
def test_a_template_name_with_invisible_characters_is_shown_escaped(args: list[str], bidi_named_template: str
                                                                     ) -> None:
    """A template file named with U+202E showed raw in the text reports' header (`Template: evil‮lmth.jinja`
    printed reversed in a terminal) and an ESC could clear the screen; every text report writes them as escapes."""
    files = [bidi_named_template] * (2 if args[0] == "compare" else 1)
    proc = _run([args[0], *files, *args[1:]], (ROOT / "assets/outputs/output.txt").read_bytes())
    out = proc.stdout.decode("utf-8") + proc.stderr.decode("utf-8")
    assert "Traceback" not in out and proc.returncode in (0, 1), out[-2000:]
    assert not any(ch in out for ch in _INVISIBLE), [line for line in out.splitlines()
                                                     if any(ch in line for ch in _INVISIBLE)][:3]
    assert "evil\\u202elmth\\u200b\\u001b[2J.jinja" in out


def test_an_error_raised_by_a_template_is_shown_escaped(tmp_path: Any) -> None:
    """`raise_exception('…\\u202e…')` reached the one-line error raw, so the template could reorder what the terminal
    shows of our message; the error line (parse: its note) writes every invisible character as its escape."""
    t = tmp_path / "raises.jinja"
    t.write_text("{{ raise_exception('bad\u202e input\u200b\x1b[2J') }}", encoding="utf-8")
    for cmd in ("analyze", "grammar", "parse"):
        proc = _run([cmd, str(t)])
        # parse still answers (the output as content) and names the template's error in a note
        err = proc.stderr.decode("utf-8").strip() if cmd == "parse" else _one_line_error(proc, "raises.jinja")
        assert len(err.splitlines()) == 1 and "raises.jinja" in err, err
        assert not any(ch in err for ch in _INVISIBLE) and "bad\\u202e input\\u200b\\u001b[2J" in err, err
    proc = _run(["export", str(t)])  # its error lines on stderr, before the exit status 1
    err = proc.stderr.decode("utf-8")
    assert proc.returncode == 1 and not any(ch in err for ch in _INVISIBLE), err
    assert "bad\\u202e input\\u200b\\u001b[2J" in err, err


@pytest.mark.skipif(not (hasattr(os, "mkfifo") and os.path.exists("/dev/zero")), reason="needs mkfifo, /dev/zero")
@pytest.mark.parametrize("command", ["lint", "roundtrip", "export", "suite"])
def test_a_batch_folder_holding_a_pipe_or_a_device_skips_them(tmp_path: Any, command: str) -> None:
    """`lint`, `roundtrip`, `export` and `suite` with `--batch DIR` read every `*.jinja` whole: a named pipe with no
    writer blocked the batch for good and a link to /dev/zero read until memory ran out (`analyze --batch` and
    `corpus` skipped them already). They are skipped now, each named, and the batch goes on to the real template."""
    (tmp_path / "good.jinja").write_text((ROOT / ASSET_TEMPLATE).read_text(encoding="utf-8"), encoding="utf-8")
    os.mkfifo(tmp_path / "pipe.jinja")
    os.symlink("/dev/zero", tmp_path / "zero.jinja")
    proc = _run([command, "--batch", str(tmp_path)], b"")
    out = proc.stdout.decode("utf-8") + proc.stderr.decode("utf-8")
    assert proc.returncode == 0 and "Traceback" not in out, out[-2000:]
    assert "good.jinja" in out or command == "suite", out[-2000:]


def test_every_argument_of_every_command_has_a_help_line() -> None:
    """A newcomer reads `python -m core grammar --help`: its `file` and `--request`, `conform`'s `cases`, `suite`'s
    `file` and `--for` and `export`'s `--format` were listed with no word on what they take."""
    import argparse

    from core.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bare = [f"{name} {action.dest}" for name, parser in sub.choices.items() for action in parser._actions
            if not isinstance(action, argparse._HelpAction) and not action.help]
    assert bare == [], bare


def test_gbnf_text_writes_invisible_characters_as_gbnf_escapes(tmp_path: Any) -> None:
    """`grammar` printed a tool name holding U+202E raw inside its GBNF literal (the grammar line showed reversed);
    it writes GBNF's own escape (`\\u202e`, which llama.cpp's grammar parser reads back as the same character)."""
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
                   "function": {"name": "get\u202eweather\u200b", "parameters": {"type": "object", "properties": {
                       "ci\u202ety": {"type": "string"}}, "required": ["ci\u202ety"]}}}]}), encoding="utf-8")
    proc = _run(["grammar", ASSET_TEMPLATE, "--request", str(req)])
    out = proc.stdout.decode("utf-8")
    assert proc.returncode == 0, proc.stderr
    assert not any(ch in out for ch in "\u202e\u200b"), [line for line in out.splitlines() if "weather" in line]
    assert '"get\\u202eweather\\u200b' in out


def test_conform_score_writes_a_case_id_with_invisible_characters_escaped(tmp_path: Any) -> None:
    """The score's failing-case lines printed a case id holding U+202E raw (`FAIL c‮x …`, shown reversed)."""
    cases = _write(tmp_path, "cases.jsonl", json.dumps({
        "id": "c\u202ex", "template": "Qwen-Qwen3-0.6B.jinja", "messages": [{"role": "user", "content": "hi"}],
        "tools": None, "input": "Hi", "is_partial": False, "expect": {"role": "assistant", "content": "Other"}}))
    proc = _run(["conform", cases, "--templates", str(TEMPLATES)])
    err = proc.stderr.decode("utf-8")
    assert "FAIL c\\u202ex [Qwen-Qwen3-0.6B.jinja]" in err and "\u202e" not in err, err


def test_an_expect_file_nested_too_deeply_names_the_file(tmp_path: Any) -> None:
    """`explain --expect FILE` with JSON nested past Python's reader said only "input too large or nested too
    deeply (RecursionError)", naming neither the option nor the file."""
    deep = _write(tmp_path, "deep.json", "[" * 100_000)
    _one_line_error(_run(["explain", ASSET_TEMPLATE, "--request", ASSET_REQUEST, "--expect", deep], b"Hi"),
                    "--expect", deep, "nested too deeply")


@pytest.mark.parametrize("extra", [["--format", "tokenizer-config"], ["--for-hub", "hub"]])
def test_a_tokenizer_config_nested_too_deeply_names_the_file(tmp_path: Any, extra: list[str]) -> None:
    """`export --tokenizer-config FILE` (plain and --for-hub) with JSON nested past Python's reader said only
    "input too large or nested too deeply (RecursionError)", naming neither the option nor the file, where a
    request or --expect file says which file it is (the export's notes come first)."""
    deep = _write(tmp_path, "deep.json", "[" * 100_000)
    if extra[0] == "--for-hub":
        extra = ["--for-hub", str(tmp_path / "hub")]
    proc = _run(["export", ASSET_TEMPLATE, "--tokenizer-config", deep, *extra])
    err = proc.stderr.decode("utf-8").strip()
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert err.splitlines()[-1] == f"error: {deep}: JSON nested too deeply", err


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1"])
def test_analyze_batch_timeout_must_be_a_positive_number(tmp_path: Any, value: str) -> None:
    """`analyze --batch DIR --timeout inf` ended in "internal error … OverflowError"; 0 and -1 failed every
    template "within -1 s"; nan switched the limit off. Each is one line naming the option and the value."""
    (tmp_path / "t.jinja").write_text("{{ messages[0].content }}", encoding="utf-8")
    err = _one_line_error(_run(["analyze", "--batch", str(tmp_path), "--timeout", value]), "--timeout", value)
    assert "internal error" not in err


@pytest.mark.parametrize("name, value", [("CTE_MAX_SOURCE_CHARS", "abc"), ("CTE_MAX_SOURCE_CHARS", "-1"),
                                         ("CTE_COMPILE_TIMEOUT_S", "nan"), ("CTE_CACHE_MAX_BYTES", "1e9")])
def test_a_number_setting_that_is_no_number_is_one_line(name: str, value: str) -> None:
    """`CTE_CACHE_MAX_BYTES=abc` (or `CTE_COMPILE_TIMEOUT_S=abc`, `CTE_MAX_SOURCE_CHARS=nan`) ended every
    command in a traceback from the import of the limits (`ValueError: invalid literal for int()`), and
    `CTE_MAX_SOURCE_CHARS=-1` refused every template. Each is one line naming the variable and its value."""
    env = dict(_env(), **{name: value})
    proc = subprocess.run([sys.executable, "-m", "core", "analyze", ASSET_TEMPLATE], capture_output=True, cwd=ROOT,
                          env=env, timeout=120)
    _one_line_error(proc, f"{name}={value!r}")


@pytest.mark.parametrize("name, value", [("CTE_ISOLATED_WORKERS", "four"), ("CTE_ISOLATED_TIMEOUT_S", "-5"),
                                         ("CTE_ISOLATED_RUNAWAY_NICE", "x")])
def test_serve_names_a_bad_worker_setting_before_starting(name: str, value: str) -> None:
    """The app's worker settings were read with int()/float() when the app first rendered: `serve` started and every
    visitor's page then failed with a ValueError. `serve` names the bad setting in one line and starts nothing."""
    import socket

    env = dict(_env(), **{name: value})
    with socket.socket() as busy:  # were the setting let through, serve stops at the busy port, never starts
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        proc = subprocess.run([sys.executable, "-m", "core", "serve", "--port", str(busy.getsockname()[1])],
                              capture_output=True, cwd=ROOT, env=env, timeout=60)
    _one_line_error(proc, f"{name}={value!r}")


def test_a_very_long_source_is_cut_in_its_load_error() -> None:
    """A 20,000-character Hub id typed on the Compare page came back as a 40,000-character error (the id quoted
    twice); the load error quotes a source of more than 200 characters cut, and keeps it whole on ``.source``."""
    from core.errors import TemplateLoadError

    spec = "org/" + "m" * 20_000
    with pytest.raises(TemplateLoadError) as info:
        import core

        core.load_template(spec)
    assert info.value.source == spec and len(str(info.value)) < 700, len(str(info.value))
    assert "org/mmm" in str(info.value) and "…" in str(info.value)
    err = _one_line_error(_run(["analyze", spec]), "org/mmm")
    assert len(err) < 700


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_request_pipe_without_end_is_refused_at_the_limit(tmp_path: Any) -> None:
    """A named pipe passes the request file's check (`--request <(…)` is a legit use), but `--request <(yes)` or
    `--request /dev/stdin` fed without end was then read whole by the JSON reader until memory ran out; the read
    stops one byte past the limit and names the file. A request that fits in the pipe still loads."""
    from core.errors import RequestFileError
    from core.inputs import load_request, read_input_file

    request = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode("utf-8")
    fifo = tmp_path / "req.json"
    os.mkfifo(fifo)
    writer = feed(fifo, request)
    assert load_request(str(fifo), limit=len(request)).messages[0]["content"] == "hi"
    writer.join(5)
    writer = feed(fifo, b" " * 100_000)
    with pytest.raises(RequestFileError) as e:
        load_request(str(fifo), limit=1000)
    writer.join(5)
    assert str(fifo) in str(e.value) and "above the limit of 1,000 bytes" in str(e.value), str(e.value)
    writer = feed(fifo, b"[" * 100_000)   # explain's --expect file reads through the same reader
    with pytest.raises(RequestFileError) as e:
        read_input_file(str(fifo), "--expect file", limit=1000)
    writer.join(5)
    assert str(e.value).startswith("--expect file") and "above the limit of 1,000 bytes" in str(e.value), str(e.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_cases_pipe_of_one_endless_line_is_refused_at_the_limit(tmp_path: Any) -> None:
    """A cases file is read line by line, so the whole-file check never saw a pipe (`conform <(yes)`): one line
    without end was read into memory until it ran out. The read stops one byte past the limit, counted over the
    whole file, and names it; a cases file that fits still gives its rows, line numbers intact."""
    from core.chat.conformance import iter_cases
    from core.errors import RequestFileError

    fifo = tmp_path / "cases.jsonl"
    os.mkfifo(fifo)
    rows = b'{"id": "a"}\n\n{"id": "b"}\n'
    writer = feed(fifo, rows)
    assert [r["id"] for r in iter_cases(str(fifo), limit=len(rows))] == ["a", "b"]
    writer.join(5)
    writer = feed(fifo, b"y" * 200_000)          # one line, no line break
    with pytest.raises(RequestFileError) as e:
        list(iter_cases(str(fifo), limit=1000))
    writer.join(5)
    assert str(fifo) in str(e.value) and "above the limit of 1,000 bytes" in str(e.value), str(e.value)
    writer = feed(fifo, b'{"id": "a"}\n' * 20_000)   # many short lines: the limit counts the whole file
    with pytest.raises(RequestFileError) as e:
        list(iter_cases(str(fifo), limit=1000))
    writer.join(5)
    assert "above the limit of 1,000 bytes" in str(e.value), str(e.value)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": "a"}\n{"id": \xff}\n')
    with pytest.raises(RequestFileError, match=r"bad.jsonl:2.*not UTF-8"):
        list(iter_cases(str(bad)))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_tokenizer_config_pipe_without_end_is_refused_at_the_limit(tmp_path: Any) -> None:
    """`export --format tokenizer-config --tokenizer-config <(yes)`: a named pipe passes the file check and the
    JSON reader then read it whole, without end; it stops one byte past the input limit, one line naming it."""
    from core.inputs import MAX_INPUT_BYTES

    fifo = tmp_path / "tokenizer_config.json"
    os.mkfifo(fifo)

    def write() -> None:
        chunk = b" " * (1 << 20)
        try:
            with open(fifo, "wb") as f:
                for _ in range(MAX_INPUT_BYTES // len(chunk) + 16):
                    f.write(chunk)
        except BrokenPipeError:   # the reader stopped at the limit
            pass
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    proc = _run(["export", ASSET_TEMPLATE, "--format", "tokenizer-config", "--tokenizer-config", str(fifo)])
    writer.join(30)
    _one_line_error(proc, str(fifo), f"above the limit of {MAX_INPUT_BYTES:,} bytes")


def test_a_cases_file_with_any_line_break_or_a_byte_order_mark_reads_its_rows(tmp_path: Any) -> None:
    """The cases reader counts bytes, so it reads the file in binary: the text mode it replaced split lines at
    "\\r\\n" and a lone "\\r" (universal newlines), and a file saved with old Mac line breaks stopped reading at its
    first row ("Extra data"). A file saved with a UTF-8 byte order mark (Windows editors) reads too. Rows: the
    first three of the reference cases."""
    from core.chat.conformance import iter_cases
    from core.errors import RequestFileError

    lines = (REFERENCE / "cases.jsonl").read_bytes().splitlines()[:3]
    ids = [json.loads(line)["id"] for line in lines]
    for name, data in (("lf", b"\n".join(lines) + b"\n"), ("crlf", b"\r\n".join(lines) + b"\r\n"),
                       ("cr", b"\r".join(lines) + b"\r"), ("no-final-break", b"\n".join(lines)),
                       ("bom", b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(data)
        assert [r["id"] for r in iter_cases(str(path))] == ids, name
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(lines[0] + b"\r" + b"{not json}\r")
    with pytest.raises(RequestFileError, match=r"bad.jsonl:2"):   # line numbers count every kind of break
        list(iter_cases(str(bad)))


def test_json_files_with_a_byte_order_mark_read_as_without(tmp_path: Any) -> None:
    """Templates, tokenizer_config.json given as a template and cases files drop a UTF-8 BOM, but a request file
    saved by a Windows editor was refused ("not valid JSON: Unexpected UTF-8 BOM"), and so were `--expect` and
    `--tokenizer-config`. The same bytes after the BOM now give the same result."""
    bom = b"\xef\xbb\xbf"
    req = (ROOT / ASSET_REQUEST).read_bytes()
    output = (ROOT / "assets/outputs/output.txt").read_bytes()
    with_bom = tmp_path / "req-bom.json"
    with_bom.write_bytes(bom + req)
    plain = _run(["parse", ASSET_TEMPLATE, "--request", ASSET_REQUEST, "--compact"], output)
    proc = _run(["parse", ASSET_TEMPLATE, "--request", str(with_bom), "--compact"], output)
    assert proc.returncode == 0 and plain.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout and b'"get_weather"' in proc.stdout
    expect = tmp_path / "expect-bom.json"
    expect.write_bytes(bom + json.dumps(json.loads(plain.stdout)).encode("utf-8"))
    proc = _run(["explain", ASSET_TEMPLATE, "--request", ASSET_REQUEST, "--expect", str(expect)], output)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    config = tmp_path / "tokenizer_config.json"
    config.write_bytes(bom + json.dumps({"chat_template": (ROOT / ASSET_TEMPLATE).read_text(encoding="utf-8"),
                                         "eos_token": "<|im_end|>"}).encode("utf-8"))
    proc = _run(["export", ASSET_TEMPLATE, "--format", "tokenizer-config", "--tokenizer-config", str(config)])
    assert proc.returncode == 0, proc.stderr
    merged = json.loads(proc.stdout)
    assert merged["eos_token"] == "<|im_end|>" and merged["response_template"]["fields"]["reasoning_content"]


def test_explain_with_a_tool_name_of_thousands_of_characters(tmp_path: Any) -> None:
    """A request whose tool name is 3,000 characters long: `explain` on Qwen3-Coder (whose call opener
    `<function=NAME>` holds the name) stopped with "input too large or nested too deeply (RecursionError)" — the
    engine spelled the opener's cut prefixes as one nested regex group per character, which the re module's
    parser recurses into. The call is read and explained."""
    name = "x" * 3000
    req = _write(tmp_path, "req.json", {"messages": [{"role": "user", "content": "hi"}], "tools": [
        {"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})
    out = f"<tool_call>\n<function={name}>\n<parameter=city>\nSF\n</parameter>\n</function>\n</tool_call>"
    proc = _run(["explain", str(TEMPLATES / "Qwen-Qwen3-Coder-30B-A3B-Instruct.jinja"), "--request", req, "--json"],
                out.encode("utf-8"))
    assert proc.returncode == 0, proc.stderr.decode("utf-8")[-300:]
    data = json.loads(proc.stdout)
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in data["message"]["tool_calls"]] \
        == [(name, {"city": "SF"})]
