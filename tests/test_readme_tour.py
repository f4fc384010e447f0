"""The README's command-line tour runs as written.

Each ``python -m core …`` line of the README's "Command line" block is run through the shell from the checkout
(``python`` is this interpreter; files the tour writes under ``/tmp/`` go to a temporary directory so parallel
runs do not share them) and its output is checked. A tour line without a check here fails the test, so the
tour and this file change together.
"""

from __future__ import annotations

import json
import pathlib
import re
import shlex
import subprocess
import sys
from typing import Callable

import pytest

from core.chat.conformance import accumulate_deltas

from .conftest import REFERENCE, TEMPLATES

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def tour_commands() -> list[str]:
    """The commands of the README's "### Command line" block, trailing ``# comments`` removed."""
    text = README.read_text(encoding="utf-8")
    block = text[text.index("### Command line"):]
    block = block[:block.index("\n### ", 1)]
    cmds = []
    for line in block.splitlines():
        if line.startswith("    python -m core"):
            cmds.append(re.sub(r"\s{2,}#.*$", "", line.strip()))
    return cmds


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, tmp: pathlib.Path):
        self.rc, self.out, self.err, self.tmp = proc.returncode, proc.stdout, proc.stderr, tmp


PARSED = {
    "role": "assistant",
    "content": "I'll check the current weather in New York for you.\n",
    "reasoning_content": "The user is asking about the weather in New York. I should use the weather tool to get "
                         "this information.\n",
    "tool_calls": [
        {"type": "function", "id": "",
         "function": {"name": "get_weather", "arguments": '{"location": "New York", "unit": "celsius"}'}},
        {"type": "function", "id": "",
         "function": {"name": "get_weather", "arguments": '{"location": "Beijing", "unit": "celsius"}'}},
    ],
}


def _check_batch(r: Run) -> None:
    rows = [json.loads(x) for x in (r.tmp / "ours.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(list(TEMPLATES.glob("*.jinja")))
    assert {"template"} <= set(rows[0]) and sum("analysis" in x for x in rows) >= 297


def _check_stream(r: Run) -> None:
    lines = [json.loads(x) for x in r.out.splitlines()]
    assert lines[-1] == PARSED and len(lines) > 10
    acc = accumulate_deltas(lines[:-1])
    assert acc["content"] == PARSED["content"] and acc["reasoning_content"] == PARSED["reasoning_content"]
    assert [c["function"]["arguments"] for c in acc["tool_calls"]] == \
        [c["function"]["arguments"] for c in PARSED["tool_calls"]]


def _check_conform(r: Run) -> None:
    n = sum(1 for line in (REFERENCE / "cases.jsonl").read_text(encoding="utf-8").splitlines() if line.strip())
    assert len((r.tmp / "cases.jsonl").read_text(encoding="utf-8").splitlines()) == n
    assert f"final parse ok: {n}/{n}; streamed deltas ok: {n}/{n}" in r.err
    assert f"cases passed: {n}/{n} = 100.0%" in r.err


def readme_compare_output() -> list[str]:
    """The lines of the README's shown ``compare`` output (the indented block after "`compare` above takes"),
    the "…" that marks a cut left out."""
    text = README.read_text(encoding="utf-8")
    rest = text[text.index("`compare` above takes"):]
    rest = rest[rest.index("\n\n    ") + 2:]
    block = rest[:rest.index("\n\n")]
    return [line[4:] for line in block.splitlines() if line.strip() != "…"]


def _check_compare(r: Run) -> None:
    # two real revisions of QwQ-32B's template (llama.cpp's first import from the Hub, its later edit adding
    # enable_thinking): the thinking-off generation prompt differs, so a thinking-off output parses differently
    shown = readme_compare_output()
    assert len(shown) >= 8 and "Parser changes: yes" in shown
    lines = r.out.splitlines()
    at = 0
    for want in shown:  # every line the README shows, in the same order
        assert want in lines[at:], f"README shows {want!r}, compare printed:\n{r.out}"
        at = lines.index(want, at) + 1


CHECKS: dict[str, Callable[[Run], None]] = {
    "python -m core analyze ../shared/templates/Qwen-QwQ-32B.jinja":
        lambda r: (r.out.startswith("Template: Qwen-QwQ-32B.jinja"), "Reasoning: TAG_BASED" in r.out,
                   "Comparisons" in r.out or "R1" in r.out),
    "python -m core analyze assets/templates/mistral-tool-calls.jinja --json":
        lambda r: (json.loads(r.out)["analysis"]["tools"]["format"]["mode"] == "TAG_WITH_JSON",),
    "python -m core analyze --batch ../shared/templates --jsonl > /tmp/ours.jsonl": _check_batch,
    "python -m core analyze ../shared/templates/Qwen-QwQ-32B.jinja --override reasoning.start='<thought>'":
        lambda r: ("start «<thought>»" in r.out, "Overrides: reasoning.start='<thought>'" in r.out,
                   "changes nothing" not in r.err),
    "python -m core analyze ../shared/templates/ibm-granite-granite-3.3-2B-Instruct.jinja "
    "--disable-workaround granite-3.3":
        lambda r: ("Reasoning: NONE" in r.out, "Workarounds applied" not in r.out, "changes nothing" not in r.err),
    "python -m core workarounds": lambda r: ("granite-3.3: Granite 3.3" in r.out,),
    "python -m core parse assets/templates/chatml-think-tools.jinja --request assets/requests/req.json "
    "< assets/outputs/output.txt": lambda r: (json.loads(r.out) == PARSED,),
    "python -m core parse assets/templates/chatml-think-tools.jinja --request assets/requests/req.json --stream "
    "--chunk 4 < assets/outputs/output.txt": _check_stream,
    "python -m core grammar assets/templates/chatml-think-tools.jinja --request assets/requests/req.json":
        lambda r: ("# lazy: true" in r.out, '# trigger word: "<tool_call>\\n"' in r.out,
                   "root ::=" in r.out and "tool-0 ::=" in r.out and "\"get_weather\"" in r.out),
    "python -m core conform ../shared/reference/cases.jsonl --templates ../shared/templates --min 100% "
    "> /tmp/cases.jsonl": _check_conform,
    "python -m core roundtrip assets/templates/chatml-think-tools.jinja":
        lambda r: (r.out.startswith("chatml-think-tools.jinja: pass"),),
    "python -m core analyze assets/templates/chatml-think-tools.jinja --improved":
        lambda r: ("Fidelity: improved" in r.out,),
    "python -m core repairs": lambda r: ("stream-consistent-final" in r.out,),
    "python -m core explain assets/templates/chatml-think-tools.jinja --request assets/requests/req.json "
    "< assets/outputs/output.txt":
        lambda r: ("parse clean" in r.out, "[marker reasoning.end] «</think>»" in r.out),
    "python -m core render assets/templates/chatml-think-tools.jinja --request assets/requests/req.json":
        lambda r: (r.out.startswith("<|im_start|>system\nYou can call these functions"),
                   r.out.endswith("<|im_start|>assistant\n<think>\n")),
    "python -m core lint assets/templates/chatml-think-tools.jinja":
        lambda r: (r.out.startswith("Template: chatml-think-tools.jinja"), "conversation shapes" in r.out),
    "python -m core compare ../shared/templates/Qwen-QwQ-32B.jinja "
    "../shared/templates/Qwen-QwQ-32B.llamacpp-edit.jinja": _check_compare,
    "python -m core export assets/templates/chatml-think-tools.jinja --format response-template":
        lambda r: (json.loads(r.out)["fields"]["reasoning_content"]["open"] == "<think>",),
}


# commands whose documented exit status is not 0 (compare: 1 when the parser changes)
EXIT_STATUS = {"python -m core compare ../shared/templates/Qwen-QwQ-32B.jinja "
               "../shared/templates/Qwen-QwQ-32B.llamacpp-edit.jinja": 1}


def test_every_tour_command_has_a_check() -> None:
    assert tour_commands() == list(CHECKS)


def tour_shell(command: str, python: str, tmp: pathlib.Path) -> str:
    """The shell line for a tour command: its ``/tmp/`` files moved to ``tmp``, then ``python`` swapped for the
    interpreter (quoted), in that order so neither path is rewritten, wherever the venv or the checkout lives."""
    line = command.replace("/tmp/", f"{tmp}/")
    assert line.startswith("python "), command
    return shlex.quote(python) + line[len("python"):]


def test_tour_shell_keeps_an_interpreter_path_under_tmp(tmp_path: pathlib.Path) -> None:
    # A venv under /tmp (or a folder named tmp anywhere) puts "/tmp/" in the interpreter's path; the rewrite of the
    # tour's output files must not touch it. The link's directory also has a space, which needs quoting.
    bindir = tmp_path / "tmp" / "venv dir" / "bin"
    bindir.mkdir(parents=True)
    python = bindir / "python"
    python.symlink_to(sys.executable)
    out = tmp_path / "out"
    out.mkdir()
    command = "python -m core workarounds > /tmp/ours.txt"
    shell = tour_shell(command, str(python), out)
    assert shell.startswith(shlex.quote(str(python)) + " -m core")
    proc = subprocess.run(["bash", "-c", shell], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "granite-3.3: Granite 3.3" in (out / "ours.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("command", list(CHECKS))
def test_tour_command_runs_as_written(command: str, tmp_path: pathlib.Path) -> None:
    shell = tour_shell(command, sys.executable, tmp_path)
    proc = subprocess.run(["bash", "-c", shell], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_STATUS.get(command, 0), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    result = CHECKS[command](Run(proc, tmp_path))
    if result is not None:
        assert all(result), f"{command}: {result}\n{proc.stdout[:1500]}"
