"""``python -m core analyze``: readable report, JSON, batch JSON lines, and clear errors for bad inputs."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tomllib

import pytest

from core.cli import main
from core.inputs import visible

from .conftest import ROOT, TEMPLATES

GOOD = "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"


def _gguf_without_template(path: pathlib.Path) -> None:
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), "llama")
    w.add_name("no-template")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("templates")
    shutil.copy(TEMPLATES / GOOD, d / GOOD)
    (d / "syntax.jinja").write_text("{% if %}")
    (d / "empty.jinja").write_text("")
    (d / "binary.jinja").write_bytes(b"\x00\x01\x02\xffbinary")
    (d / "raises.jinja").write_text("{{ raise_exception('not today') }}")
    _gguf_without_template(d / "notemplate.gguf")
    return d


def test_visible_whitespace():
    assert visible("a b\n\t<|im_end|>\x01\u202e") == "a␣b↵→<|im_end|>\\u0001\\u202e"


def test_readable_report(capsys):
    assert main(["analyze", str(TEMPLATES / GOOD)]) == 0
    out = capsys.readouterr().out
    assert "Reasoning: TAG_BASED  start «<think>↵»  end «↵</think>↵»" in out
    assert "Tools: TAG_WITH_TAGGED" in out
    assert "Caps: " in out and "Generation prompt: «<|im_start|>assistant↵<think>↵»" in out
    # each comparison with its split, whitespace visible
    assert "[T1] " in out and "    right:  <tool_call>↵<function=FFF_FIRST_FUN_F>↵" in out
    assert "found:  tools.arguments.name_prefix = «<parameter=»" in out


def test_json_report(capsys):
    assert main(["analyze", str(TEMPLATES / GOOD), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["analysis"]["tools"]["function"]["name_prefix"] == "<function="
    assert data["generation_prompt"] == "<|im_start|>assistant\n<think>\n"
    t3 = next(c for c in data["comparisons"] if c["id"] == "T3")
    assert t3["diff"]["left"] == "<function=FFF_FIRST_FUN_F>" and t3["output_a"].endswith(t3["diff"]["suffix"])


def test_overrides_and_disabled_workarounds_from_the_command_line(capsys):
    rc = main(["analyze", str(TEMPLATES / GOOD), "--json", "--no-comparisons",
               "--override", "reasoning.start=<r>", "--override", "tools.format.tools_array_wrapped=true"])
    assert rc == 0
    a = json.loads(capsys.readouterr().out)["analysis"]
    assert a["reasoning"]["start"] == "<r>" and a["tools"]["format"]["tools_array_wrapped"] is True


@pytest.mark.parametrize("name, cause", [
    ("syntax.jinja", "syntax error"),
    ("empty.jinja", "empty"),
    ("binary.jinja", "binary"),
    ("raises.jinja", "every probe"),
    ("notemplate.gguf", "no chat template"),
    ("missing.jinja", "not found"),
])
def test_single_file_errors_name_file_and_cause(bad_dir, capsys, name, cause):
    assert main(["analyze", str(bad_dir / name)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and name in err and cause in err
    assert "Traceback" not in err


def test_bad_override_is_a_clear_error(capsys):
    assert main(["analyze", str(TEMPLATES / GOOD), "--override", "tools.nope=1"]) == 2
    err = capsys.readouterr().err
    # the user's setting is at fault, not the template ("cannot analyse template" blamed the template)
    assert err == f"error: invalid analysis setting for template {GOOD!r}: unknown override path 'tools.nope'\n", err
    assert main(["analyze", str(TEMPLATES / GOOD), "--disable-workaround", "no-such-workaround"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: invalid analysis setting for template {GOOD!r}: unknown workaround name(s) "
                          "no-such-workaround; known: "), err


def test_batch_never_stops_at_a_bad_template(bad_dir, capsys):
    assert main(["analyze", "--batch", str(bad_dir), "--jsonl", "--workers", "2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by = {r["template"]: r for r in rows}
    assert sorted(by) == sorted(p.name for p in bad_dir.iterdir())
    assert [r["template"] for r in rows] == sorted(by)  # input order
    good = by[GOOD]
    assert good["analysis"]["tools"]["format"]["mode"] == "TAG_WITH_TAGGED"
    assert good["generation_prompt"] == "<|im_start|>assistant\n<think>\n"
    for name, cause in (("syntax.jinja", "syntax error"), ("empty.jinja", "empty"), ("binary.jinja", "binary"),
                        ("notemplate.gguf", "no chat template")):
        assert name in by[name]["error"] and cause in by[name]["error"]
    # a template that raises on every probe: llama.cpp's default analysis, flagged, no generation prompt
    assert "every probe" in by["raises.jinja"]["warning"] and "generation_prompt" not in by["raises.jinja"]
    assert by["raises.jinja"]["analysis"]["reasoning"]["mode"] == "NONE"


def test_batch_time_limit_replaces_a_hanging_worker(tmp_path, capsys):
    (tmp_path / "a_hang.jinja").write_text(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
    shutil.copy(TEMPLATES / GOOD, tmp_path / GOOD)
    assert main(["analyze", "--batch", str(tmp_path), "--workers", "1", "--timeout", "1.5"]) == 0
    by = {r["template"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert "time limit" in by["a_hang.jinja"]["error"] and "a_hang.jinja" in by["a_hang.jinja"]["error"]
    assert "analysis" in by[GOOD]


def test_module_entry_and_console_script_declared():
    proc = subprocess.run([sys.executable, "-m", "core", "workarounds"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0 and "functionary-3.1: Functionary 3.1" in proc.stdout
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["chat-template-explorer"] == "core.cli:main"
