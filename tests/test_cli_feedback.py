"""What the command line tells a user beyond its JSON: ``conform``'s score (stderr) and ``--min`` exit status,
and edits (``--override`` / ``--disable-workaround``) that change nothing."""

from __future__ import annotations

import io
import json

from core.analysis import analyze
from core.analysis.provenance import EditKind, ineffective_edits
from core.chat.conformance import accumulate_deltas, parse_rate
from core.cli import main
from core.jinja.template import ChatTemplate

from .conftest import REFERENCE, TEMPLATES


def _run(argv, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _cases(tmp_path, n=3, break_expect=False):
    rows = [json.loads(line) for line in (REFERENCE / "cases.jsonl").read_text().splitlines()[:n]]
    if break_expect:
        rows[1]["expect"] = dict(rows[1]["expect"], content="something else")
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path), rows


def test_conform_scores_on_stderr_and_keeps_lines_on_stdout(tmp_path, capsys, monkeypatch):
    cases, rows = _cases(tmp_path)
    code, out, err = _run(["conform", cases, "--templates", str(TEMPLATES)], capsys, monkeypatch)
    assert code == 0
    assert [json.loads(x)["id"] for x in out.splitlines()] == [r["id"] for r in rows]
    assert err.splitlines() == ["final parse ok: 3/3; streamed deltas ok: 3/3", "cases passed: 3/3 = 100.0%"]


def test_conform_min_rate_fails_and_names_the_case(tmp_path, capsys, monkeypatch):
    cases, rows = _cases(tmp_path, break_expect=True)
    code, out, err = _run(["conform", cases, "--templates", str(TEMPLATES), "--min", "90%", "--summary-only"],
                          capsys, monkeypatch)
    assert code == 1 and out == ""
    assert f"FAIL {rows[1]['id']} [{rows[1]['template']}]: final content: expected 'something else'" in err
    assert "cases passed: 2/3 = 66.7%" in err and "below --min 90%" in err
    code, _, _ = _run(["conform", cases, "--templates", str(TEMPLATES), "--min", "0.6", "--quiet"],
                      capsys, monkeypatch)
    assert code == 0


def test_min_rate_forms():
    assert parse_rate("95%") == parse_rate("95") == parse_rate("0.95") == 0.95
    for bad in ("abc", "150%", "-1"):
        try:
            parse_rate(bad)
        except ValueError as e:
            assert bad in str(e)
        else:
            raise AssertionError(bad)


def test_accumulated_deltas_gather_calls_by_index():
    msg = accumulate_deltas([{"content": "a"}, {"tool_calls": [{"index": 1, "id": "x", "function": {"name": "f"}}]},
                             {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}, {"content": "b"}])
    assert msg["content"] == "ab" and len(msg["tool_calls"]) == 2
    assert msg["tool_calls"][1] == {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}


QWQ = str(TEMPLATES / "Qwen-QwQ-32B.jinja")


def test_override_that_changes_nothing_says_so(capsys, monkeypatch):
    # the README's former example: QwQ's reasoning already starts with <think>; granite-3.3 does not apply
    code, _, err = _run(["analyze", QWQ, "--no-comparisons", "--override", "reasoning.start=<think>",
                         "--disable-workaround", "granite-3.3"], capsys, monkeypatch)
    assert code == 0
    assert err.splitlines() == [
        "note: override reasoning.start changes nothing: the analysis already has '<think>'",
        "note: --disable-workaround granite-3.3 changes nothing: it does not apply to Qwen-QwQ-32B.jinja"]
    code, _, err = _run(["analyze", QWQ, "--no-comparisons", "--override", "reasoning.start=<thought>",
                         "--disable-workaround", "old-qwen-deepseek-thinking"], capsys, monkeypatch)
    assert code == 0 and err == ""


def test_ineffective_edits_from_the_report():
    rep = analyze(ChatTemplate((TEMPLATES / "Qwen-QwQ-32B.jinja").read_text(), "Qwen-QwQ-32B.jinja"),
                  overrides={"reasoning.end": "</think>", "content.start": "<answer>"})
    edits = ineffective_edits(rep)
    assert [(e.kind, e.name) for e in edits] == [(EditKind.OVERRIDE, "reasoning.end")]
