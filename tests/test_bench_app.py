"""``python -m bench.app`` runs (one repetition, no slow or 1 MB parts) and reports every figure it promises; speed
itself is never asserted here (bench/ measures it)."""

from __future__ import annotations

import pytest

from bench import app as bench_app

from .conftest import ROOT, TEMPLATES


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


def test_cpu_mode_reports_each_view_of_each_page(tmp_path, capsys):
    out = tmp_path / "cpu.json"
    assert bench_app.main(["--cpu", "home,grammar", "--runs", "1", "--json", str(out)]) == 0
    import json

    rows = json.loads(out.read_text())
    assert [r["page"] for r in rows] == ["home", "grammar"]
    for r in rows:  # (script CPU s, workers' CPU s) per view; the cold view imports, so it costs something
        assert {"cold", "after_home", "second", "warm"} <= set(r)
        assert r["cold"][0] > 0 and all(len(r[k]) == 2 and min(r[k]) >= 0 for k in ("after_home", "second", "warm"))
    assert "| grammar |" in capsys.readouterr().out


def test_tree_cpu_counts_a_child_process():
    import os
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.3: pass\ntime.sleep(30)"])
    try:
        for _ in range(200):  # until the child has spent its 0.3 s (it then sleeps)
            if bench_app.tree_cpu(os.getpid(), children_only=True) >= 0.25:
                break
            subprocess.run(["sleep", "0.05"])
        assert bench_app.tree_cpu(os.getpid(), children_only=True) >= 0.25
        assert bench_app.tree_cpu(os.getpid()) >= bench_app.tree_cpu(os.getpid(), children_only=True)
    finally:
        child.kill()
        child.wait()


@pytest.mark.browser
def test_server_cpu_mode_drives_both_servers(tmp_path):
    import json
    import os

    from bench.browser import CHROMIUM

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: apt-get install chromium)")
    import subprocess
    import sys

    out = tmp_path / "server.json"
    # in a process of its own: Playwright's sync API refuses to start a second time inside a process whose
    # session-wide browser (tests/conftest.py) already runs one
    proc = subprocess.run([sys.executable, "-m", "bench.app", "--server-cpu", "--visitors", "1", "--runs", "2",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["steps"] == 2 and r["visitors"] == 1
    # every step made both servers run a page script: neither spent nothing
    assert r["explorer_cpu_per_step_s"] > 0 and r["plain_cpu_per_step_s"] > 0
    assert r["ratio"] == r["explorer_cpu_per_step_s"] / r["plain_cpu_per_step_s"]
    assert "| plain Streamlit app (bench/plain_app.py) |" in proc.stdout


@pytest.mark.browser
def test_first_view_mode_times_the_plain_app_beside_the_explorer(tmp_path):
    import json
    import os

    from bench.browser import CHROMIUM

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: apt-get install chromium)")
    import subprocess
    import sys

    out = tmp_path / "first.json"
    # --baseline: this same checkout, served a second time (the flag's path, not a comparison)
    proc = subprocess.run([sys.executable, "-m", "bench.app", "--first-view", "--runs", "1", "--baseline", str(ROOT),
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(out.read_text())
    assert list(r) == [*bench_app.FIRST_VIEWS, bench_app.BASELINE_VIEW]
    for name, v in r.items():
        assert v["first_visitor_s"] > 0 and v["returning_s"] > 0 and v["new_visitor"]["n"] == 1, name
        assert v["main_thread_s"] > 0, name
        ph = v["phases_s"]
        # the title is drawn from a message of the script run, which comes over the open websocket
        assert set(ph) == set(bench_app._PHASES) and ph["ws_open"] <= ph["first_msg"] <= ph["h1"], (name, ph)
        drawn = v["drawn"]   # counts of what the view drew: its title at least, the run's messages
        assert drawn["elements"] >= 1 and drawn["Markdown blocks"] >= 1 and drawn["messages"] >= 3, (name, drawn)
        assert drawn["DOM nodes"] > drawn["elements"], (name, drawn)
    assert "| plain Streamlit app (bench/plain_app.py) |" in proc.stdout
    # the navigation lists 13 pages against the plain app's 3: more Markdown blocks (each link's label is one)
    assert r["explorer front page"]["drawn"]["Markdown blocks"] > r[next(iter(bench_app.FIRST_VIEWS))]["drawn"][
        "Markdown blocks"]
    # the deep link paints before its analysis: the analysis shown is timed too, at or after the first paint
    deep = r["explorer Overview (deep link)"]
    assert deep["first_visitor_result_s"] >= deep["first_visitor_s"] > 0
    assert r["explorer front page"]["first_visitor_result_s"] is None
