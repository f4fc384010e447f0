"""``python -m bench.app`` runs (one repetition, no slow or 1 MB parts) and reports every figure it promises; speed
itself is never asserted here (bench/ measures it)."""

from __future__ import annotations

from bench import app as bench_app

from .conftest import TEMPLATES


def test_app_bench_reports_every_figure(tmp_path, capsys):
    out = tmp_path / "app.json"
    assert bench_app.main(["--runs", "1", "--skip-slow", "--skip-big", "--template", str(TEMPLATES / "Qwen-QwQ-32B.jinja"),
                           "--json", str(out)]) == 0
    import json

    results = json.loads(out.read_text())
    want = {f"page switch: {p}" for p in bench_app.PAGES} | {
        "page switch: all pages", "playground re-parse", "replay step"}
    assert set(results) == want
    assert all(r["n"] >= 1 and r["median_s"] > 0 for r in results.values())
    assert "| page switch: all pages |" in capsys.readouterr().out
    assert bench_app.main(["--runs", "0"]) == 2
