"""Smoke test of the benchmark command (``python -m bench``) on a tiny input: it runs, prints the table with
the expected rows and fills every cell. No timing assertions (benchmarks are not tests)."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT, TEMPLATES


def _run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_bench_quick_tiny_input_prints_every_row(tmp_path):
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    proc = _run("--quick", "--limit", "3", "--batch", "6", "--sizes", "1,2", "--parse-kb", "4",
                "--stream-chars", "200", "--templates", str(TEMPLATES), "--json", str(out_json),
                "--markdown", str(out_md))
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout
    assert out_md.read_text(encoding="utf-8") == table  # --markdown writes what it prints
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| ID")]
    ids = [line.split("|")[1].strip() for line in rows]
    formats = ("JSON_NATIVE", "TAG_WITH_JSON", "TAG_WITH_TAGGED", "MISTRAL_TOOL_CALLS")
    expected = ["P1-cold-empty", "P1-cold-disk", "P1-mem", "P1-warm-reapply", "P1-warm-analyze",
                "P1-warm-cleared", "P1-warm-cycle"]
    expected += [f"P2-{fmt}" for fmt in formats]
    expected += [f"P3-{kb}KB-{fmt}" for kb in (1, 2) for fmt in formats]
    expected += ["P4-cli", "P5-warm"]
    expected += ["P6-200-Qwen-Qwen3-0", "P6-200-NousResearch-Hermes-2-Pr", "P6-200-meta-llama-Llama-3"]
    assert ids == expected
    assert "the full run (no --quick" in table and "minutes" in table  # --quick says what the full run costs
    for line in rows:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        assert len(cells) == 7
        assert cells[2], f"empty value in {cells[0]}"
        assert cells[5], f"no target in {cells[0]}"
        # no verdict where the target is a ratio to llama.cpp and the oracle is absent
        assert cells[6] in (("yes", "NO", "") if "llama.cpp" in cells[5] else ("yes", "NO")), cells
    # the progress bar goes to stderr, the table to stdout
    assert "P5 batch" in proc.stderr and "P5 batch" not in table
    assert "\r" not in proc.stderr  # not a terminal: progress lines, no carriage returns
    assert "oracle absent" in table
    data = json.loads(out_json.read_text())
    assert [r["id"] for r in data["rows"]] == expected
    assert len(data["raw"]["p1_cold_empty"][0]["times_ms"]) == 3
    assert len(data["raw"]["p5_warm"]) == 1 and data["raw"]["p5_warm"][0]["errors"] == 0
    p2 = {r["format"]: r for r in data["raw"]["p2"]}
    assert set(p2) == set(formats)
    assert all(3500 < r["bytes"] < 4700 for r in p2.values())
    assert {(r["kb"], r["format"]) for r in data["raw"]["p3"]} == {(kb, fmt) for kb in (1, 2) for fmt in formats}
    assert all(r["step_p99_us"] > 0 for r in data["raw"]["p3"])
    p6 = data["raw"]["p6"]
    assert {r["kind"] for r in p6} == {"escapes", "brackets", "calls", "lt", "plain"}
    assert all(r["stream_equals_parse"] and r["feeds"] > 150 for r in p6)
    assert len(data["raw"]["p4_cli_ms"]) == 1


def test_bench_only_one_part():
    proc = _run("--quick", "--only", "P2", "--parse-kb", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    ids = [line.split("|")[1].strip() for line in proc.stdout.splitlines()
           if line.startswith("| ") and not line.startswith("| ID")]
    assert ids == ["P2-JSON_NATIVE", "P2-TAG_WITH_JSON", "P2-TAG_WITH_TAGGED", "P2-MISTRAL_TOOL_CALLS"]


def test_bench_bad_options_are_named():
    proc = _run("--only", "P9", "--sizes", "x", "--templates", "/nonexistent-dir")
    assert proc.returncode == 2
    assert "--only: unknown part(s) P9" in proc.stderr
    assert "--sizes" in proc.stderr and "/nonexistent-dir" in proc.stderr
