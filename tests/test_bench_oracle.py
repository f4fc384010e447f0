"""bench.run.Oracle against a stand-in speaking the oracle's JSON-lines protocol (../shared/tools/oracle/oracle.cpp:
``analyze`` answers ``analyze_us``, ``parse`` answers ``parse_us`` for ``reps`` parses and ``msgs``, a failure
answers ``error``). The real binary is built outside the repository, so this checks the client side only."""

from __future__ import annotations

import pathlib
import shlex
import sys

import pytest

from bench.run import Oracle

FAKE = r'''
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["path"].endswith("bad.jinja"):
        out = {"id": req.get("id"), "error": "template failed"}
    elif req["op"] == "analyze":
        assert req["tools"] and req["tools"][0]["type"] == "function"
        out = {"id": req["id"], "analysis": {}, "analyze_us": 2500}
    else:
        out = {"id": req["id"], "parse_us": 600 * req["reps"],
               "msgs": [{"role": "assistant", "content": "x" + req["inputs"][0], "tool_calls": []}]}
    print(json.dumps(out), flush=True)
'''


def _script(tmp_path: pathlib.Path, body: str) -> str:
    """An executable that runs ``body`` with this interpreter. A ``#!`` line would hold the interpreter's path,
    which breaks when the venv's path has a space or is long; a shell line quotes it instead."""
    (tmp_path / "oracle.py").write_text(body)
    script = tmp_path / "oracle"
    line = f"exec {shlex.quote(sys.executable)} {shlex.quote(str(tmp_path / 'oracle.py'))} \"$@\""
    script.write_text(f"#!/bin/sh\n{line}\n")
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def oracle(tmp_path):
    o = Oracle(_script(tmp_path, FAKE))
    yield o
    o.close()


def test_analyze_time_in_ms_and_error_answers_give_none(oracle):
    assert oracle.analyze_ms(pathlib.Path("good.jinja")) == 2.5
    assert oracle.analyze_ms(pathlib.Path("bad.jinja")) is None
    assert oracle.analyze_ms(pathlib.Path("good.jinja")) == 2.5  # the process still answers after an error


def test_parse_time_is_per_repetition_with_the_message(oracle):
    req = {"messages": [{"role": "user", "content": "hi"}], "tools": [], "tool_choice": "auto"}
    ms, msg = oracle.parse(pathlib.Path("good.jinja"), req, "hello", reps=4)
    assert ms == 0.6
    assert msg["content"] == "xhello"
    assert oracle.parse(pathlib.Path("bad.jinja"), req, "hello", reps=1) is None


def test_a_dead_oracle_gives_none(tmp_path):
    o = Oracle(_script(tmp_path, "import sys\nsys.exit(0)\n"))
    o.proc.wait(5)
    assert o.analyze_ms(pathlib.Path("good.jinja")) is None
    o.close()
