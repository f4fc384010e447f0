"""``python -m bench.app``: how fast the explorer answers, driven through Streamlit's AppTest.

Each figure is the time of one script run of ``app.py`` after a user action — what Streamlit executes on the
server before the browser can draw (websocket and browser drawing are not included, so these are lower
bounds of the click → result time). Measured warm (every page visited once first), median and p90 over
``--runs`` repetitions, against the issue-9 target of 0.3 s:

* ``page switch`` — each per-template page (Overview, Comparisons, Overrides, Playground, Grammar);
* ``playground re-parse`` — a new model output typed into the Playground (a parse that was never cached);
* ``replay step`` — moving the streaming-replay slider;
* ``1 MB paste`` — a 1 MB output: the first run (parse + replay), then a redraw and a replay step;
* ``time-limit template`` — a template whose every render hits the render time limit: the first Overview,
  then every other page (the failed or degraded analysis is cached, so only the first visit waits).

With ``--browser`` the same actions are timed in Debian's chromium against ``streamlit run app.py``
(:mod:`bench.browser`): click → the new content is shown and Streamlit's run state is idle again, which
includes the websocket round trip and the browser's drawing (default bundled template; the figures then carry
the machine's load much more than the AppTest ones).

Two figures the machine's load does not skew (docs/app.md, "Speed"):

* ``--cpu [PAGES]`` — per page, the CPU of the server's script run (AppTest, the run's own thread) and of the
  worker processes: the page as a fresh server's first run, its first view after the front page, a second
  visitor's first view, a page switch;
* ``--server-cpu`` — the server process tree's CPU per page switch (/proc), the explorer beside a plain
  Streamlit app (``bench/plain_app.py``), both driven by the same ``--visitors`` chromium visitors (clicking at
  once, the apps alternated), with each step's latency (click → shown, p50 / p95 / max) and the server's own
  share of it (its script runs' wall time); ``--visitors 1,5,10`` measures each count on the same servers.

And the first view (``--first-view``, also part of ``--browser``): a plain Streamlit app beside the explorer's
front page and Overview, each on its own fresh server — the first visitor, new visitors, a returning visitor —
with the phases of each view and the browser main thread's CPU; ``--baseline DIR`` adds an earlier checkout's
front page side by side.

``--switches``: only the chromium tour of ``--browser`` (every page's switches, the Playground's re-parse and
replay steps) and what each page has drawn after a switch (elements, Markdown blocks, DOM nodes: counts the load
does not move); with ``--baseline DIR``, this checkout and DIR's side by side instead, the rounds alternated
(Overview and Playground switches and a re-parse, wall time and browser CPU).

Usage: ``python -m bench.app [--runs N] [--template PATH] [--json FILE] [--skip-slow] [--skip-big]
[--browser] [--first-view] [--switches] [--baseline DIR] [--cpu [PAGES]] [--server-cpu [--visitors N[,N…]]]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import statistics
import sys
import time
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
PAGES = ["overview", "comparisons", "overrides", "playground", "grammar"]
TARGET_S = 0.3
BROWSER_SWITCH_TARGET_S = 0.5   # issue 28: a page switch in the browser, click to shown and idle
DEFAULT_TEMPLATE = ROOT.parent / "shared" / "templates" / "Qwen-QwQ-32B.jinja"
SLOW_TEMPLATE = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
                 "{{ messages[0].content }}")  # tests/data/pathological_templates.json: nested_range_loops


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _stats(values: list[float]) -> dict[str, float]:
    vs = sorted(values)
    return {"median_s": statistics.median(vs), "p90_s": vs[min(len(vs) - 1, int(0.9 * len(vs)))],
            "max_s": vs[-1], "n": len(vs)}


def _ok(at: Any) -> Any:
    if at.exception:
        raise RuntimeError(f"the app raised: {at.exception}")
    return at


def _switch(at: Any, page: str) -> Any:
    return _ok(at.switch_page(f"explorer/pages/{page}.py").run())


def _app(template: str | None = None, source: str | None = None) -> Any:
    from streamlit.testing.v1 import AppTest

    from explorer import state

    at = AppTest.from_file(APP, default_timeout=300)
    _ok(at.run())
    if template:
        at.session_state["template"] = state.load_spec(template, origin="file")
    if source is not None:
        at.session_state["template"] = state.CurrentTemplate("slow.jinja", source, {"default": source})
    return at


def bench_pages(template: str, runs: int) -> dict[str, Any]:
    """Warm page switches, per page and over all."""
    at = _app(template)
    for p in PAGES:
        _switch(at, p)
    per: dict[str, list[float]] = {p: [] for p in PAGES}
    for _ in range(runs):
        for p in PAGES:
            per[p].append(_timed(lambda: _switch(at, p)))
    out = {f"page switch: {p}": _stats(v) for p, v in per.items()}
    out["page switch: all pages"] = _stats([x for v in per.values() for x in v])
    return out


def bench_playground(template: str, runs: int) -> dict[str, Any]:
    """Re-parse with a new output each time, then replay-slider steps."""
    at = _app(template)
    _switch(at, "playground")
    base = ("The user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n"
            '{"name": "get_weather", "arguments": {"city": "Paris", "days": %d}}\n</tool_call>')
    reparse = []
    for i in range(runs):
        text = base % i
        reparse.append(_timed(lambda: _ok(at.text_area(key="in_output").input(text).run())))
    n = len(at.slider(key="in_stream_step").options) if hasattr(at.slider(key="in_stream_step"), "options") else 0
    hi = int(at.slider(key="in_stream_step").max) if n == 0 else n
    steps = []
    for i in range(runs):
        k = 1 + (i * 7) % hi
        steps.append(_timed(lambda: _ok(at.slider(key="in_stream_step").set_value(k).run())))
    return {"playground re-parse": _stats(reparse), "replay step": _stats(steps)}


def bench_big_paste(template: str, runs: int, size: int = 1_000_000) -> dict[str, Any]:
    """A ~1 MB output: the first run, then redraws and replay steps (cached parse and replay)."""
    at = _app(template)
    _switch(at, "playground")
    unit = "Paris is mild in spring; the forecast says sun. " * 20 + "\n"
    big = "I should look this up.\n</think>\n\n" + unit * (size // len(unit) + 1)
    first = _timed(lambda: _ok(at.text_area(key="in_output").input(big).run()))
    redraw = [_timed(lambda: _ok(at.run())) for _ in range(runs)]
    hi = int(at.slider(key="in_stream_step").max)
    steps = [_timed(lambda: _ok(at.slider(key="in_stream_step").set_value(1 + (i * 97) % hi).run()))
             for i in range(runs)]
    return {"1 MB paste: first run (parse + replay)": _stats([first]), "1 MB paste: redraw": _stats(redraw),
            "1 MB paste: replay step": _stats(steps)}


def bench_slow_template() -> dict[str, Any]:
    """A template whose renders hit the time limit: the first Overview, then the other pages."""
    at = _app(source=SLOW_TEMPLATE)
    first = _timed(lambda: _switch(at, "overview"))
    others = [_timed(lambda: _switch(at, p)) for p in PAGES[1:] + PAGES[:1]]
    return {"time-limit template: first Overview": _stats([first]),
            "time-limit template: each page after": _stats(others)}


# every page of the navigation (its link's text), in the order the bench visits them, and the heading a page
# shows when it differs from its link
BROWSER_PAGES = {"comparisons": "Comparisons", "overrides": "Overrides", "playground": "Playground",
                 "grammar": "Grammar", "explain": "Explain", "edit": "Edit", "lint": "Lint", "compare": "Compare",
                 "sources": "Sources", "corpus": "Corpus", "export": "Export", "home": "Start here",
                 "overview": "Overview"}   # the first load is Overview: it comes last, so every click switches
HEADINGS = {"Start here": "Chat Template Explorer"}


def bench_browser(runs: int) -> dict[str, Any]:
    """Click → shown-and-idle times in chromium: first load, page switches, Playground re-parse, replay steps."""
    from playwright.sync_api import sync_playwright

    from .browser import CHROME_ARGS, CHROMIUM, IDLE_JS, PAGE_IDLE_JS, serve, wait_idle

    titles = BROWSER_PAGES
    out: dict[str, Any] = {}
    with serve() as url, sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS, headless=True)
        page = b.new_page(viewport={"width": 1400, "height": 1000})

        def shown(title: str) -> None:
            page.wait_for_function(PAGE_IDLE_JS, arg=title, timeout=120_000)

        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")

        def thread_time() -> float:
            return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}["ThreadTime"]

        def go(title: str) -> None:
            page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=title, exact=True).click()
            page.wait_for_timeout(30)  # let the click start the run before the idle check
            shown(HEADINGS.get(title, title))

        def timed_go(title: str, into: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
            c0 = thread_time()
            into[title].append(_timed(lambda: go(title)))
            cpu[title].append(thread_time() - c0)  # the browser main thread's CPU: the load hardly moves it

        t0 = time.perf_counter()
        page.goto(url + "/overview")
        shown("Overview")
        out["browser: first load"] = _stats([time.perf_counter() - t0])
        page.locator('[data-testid="stMetric"]').first.wait_for(timeout=120_000)  # a fresh server's deep link
        out["browser: first load, analysis shown"] = _stats([time.perf_counter() - t0])
        first: dict[str, list[float]] = {t: [] for t in titles.values()}
        first_cpu: dict[str, list[float]] = {t: [] for t in titles.values()}
        for t in titles.values():  # each page's first visit: its first run in this session
            timed_go(t, first, first_cpu)
        per: dict[str, list[float]] = {t: [] for t in titles.values()}
        cpu: dict[str, list[float]] = {t: [] for t in titles.values()}
        drawn: dict[str, dict[str, int]] = {}
        for i in range(runs):
            for t in titles.values():
                timed_go(t, per, cpu)
                if i == runs - 1:   # what each page had drawn once shown (counts the load does not move)
                    drawn[t.lower()] = page.evaluate(_DRAWN_JS)
        out.update({f"browser: first visit: {t.lower()}": _stats(v) for t, v in first.items()})
        out.update({f"browser: page switch: {t.lower()}": _stats(v) for t, v in per.items()})
        out["browser: page switch: all pages"] = _stats([x for v in per.values() for x in v])
        out["browser: drawn per page"] = drawn
        out.update({f"browser main-thread CPU per switch: {t.lower()}": _stats(v) for t, v in cpu.items()})

        go("Playground")
        area = page.locator('[data-testid="stTextArea"]').filter(has_text="Text the model generated").locator("textarea")
        reparse = []
        for i in range(runs):
            text = ("Plan.\n</think>\n\nChecking.\n<tool_call>\n"
                    f'{{"name": "get_weather", "arguments": {{"city": "Paris", "days": {1000 + i}}}}}\n</tool_call>')

            def reparse_once() -> None:
                area.fill(text)
                area.press("Control+Enter")
                page.locator('[data-testid="stCode"]').filter(has_text=f"{1000 + i}").first.wait_for(timeout=60_000)
                shown("Playground")
            reparse.append(_timed(reparse_once))
        out["browser: playground re-parse"] = _stats(reparse)

        page.get_by_role("tab", name="Streaming replay").click()
        wait_idle(page)
        thumb = page.locator('[data-testid="stSlider"] input[type="range"]').first
        thumb.focus()
        steps = []
        for _ in range(runs):
            want = int(thumb.evaluate("e => e.value")) - 1

            def step_once() -> None:
                page.keyboard.press("ArrowLeft")
                page.get_by_text(f"Step {want} of", exact=False).first.wait_for(timeout=60_000)
                page.wait_for_function(IDLE_JS, timeout=60_000)
            steps.append(_timed(step_once))
        out["browser: replay step"] = _stats(steps)
        b.close()
    return out


def bench_switches_ab(runs: int, baseline: pathlib.Path) -> dict[str, Any]:
    """This checkout and ``baseline`` served side by side, one chromium page each, the rounds alternating which
    goes first (so both see the same load): per round, Start here → Overview, → Playground, and a Playground
    re-parse of a typed output; wall time (click to shown and idle) and the browser main thread's CPU."""
    from playwright.sync_api import sync_playwright

    from .browser import CHROME_ARGS, CHROMIUM, PAGE_IDLE_JS, serve, wait_idle

    sides = {"this checkout": ROOT, "baseline": baseline}
    figures = ("switch to overview", "switch to playground", "playground re-parse")
    out: dict[str, dict[str, list[float]]] = {k: {f: [] for f in figures} | {f"CPU {f}": [] for f in figures}
                                              for k in sides}
    with contextlib.ExitStack() as stack:
        urls = {k: stack.enter_context(serve(cwd=root)) for k, root in sides.items()}
        b = stack.enter_context(sync_playwright()).chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS,
                                                                   headless=True)
        pages, cdps = {}, {}
        for k, url in urls.items():
            page = b.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url + "/overview")
            page.locator('[data-testid="stMetric"]').first.wait_for(timeout=120_000)
            wait_idle(page)
            cdps[k] = page.context.new_cdp_session(page)
            cdps[k].send("Performance.enable")
            pages[k] = page

        def go(k: str, link: str, title: str | None = None) -> None:
            pages[k].locator('[data-testid="stSidebarNav"]').get_by_role("link", name=link, exact=True).click()
            pages[k].wait_for_timeout(30)
            pages[k].wait_for_function(PAGE_IDLE_JS, arg=title or link, timeout=120_000)

        def timed(k: str, figure: str, fn: Callable[[], Any]) -> None:
            c0 = {m["name"]: m["value"] for m in cdps[k].send("Performance.getMetrics")["metrics"]}["ThreadTime"]
            out[k][figure].append(_timed(fn))
            c1 = {m["name"]: m["value"] for m in cdps[k].send("Performance.getMetrics")["metrics"]}["ThreadTime"]
            out[k][f"CPU {figure}"].append(c1 - c0)

        for k in sides:   # each page visited once before the rounds
            go(k, "Playground")
            go(k, "Overview")
        for i in range(runs):
            for k in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                page = pages[k]
                go(k, "Start here", HEADINGS["Start here"])
                timed(k, "switch to overview", lambda: go(k, "Overview"))
                timed(k, "switch to playground", lambda: go(k, "Playground"))
                area = page.locator('[data-testid="stTextArea"]').filter(
                    has_text="Text the model generated").locator("textarea")
                days = 3000 + i
                text = ("Plan.\n</think>\n\nChecking.\n<tool_call>\n"
                        f'{{"name": "get_weather", "arguments": {{"city": "Paris", "days": {days}}}}}\n</tool_call>')

                def reparse() -> None:
                    area.fill(text)
                    area.press("Control+Enter")
                    # the parsed message shows the number (a JSON view of either kind: code block or tree)
                    page.locator('[data-testid="stMain"]').get_by_text(str(days), exact=False).first.wait_for(
                        timeout=60_000)
                    page.wait_for_function(PAGE_IDLE_JS, arg="Playground", timeout=60_000)
                timed(k, "playground re-parse", reparse)
        b.close()
    return {(f"browser main-thread {f.split(' ', 1)[0]}, {k}: {f.split(' ', 1)[1]}" if f.startswith("CPU ")
             else f"{k}: {f}"): _stats(v) for k, r in out.items() for f, v in r.items()}


ALL_PAGES = ["home", "overview", "comparisons", "overrides", "grammar", "playground", "explain", "edit", "lint",
             "compare", "sources", "corpus", "export"]
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid → (parent pid, CPU seconds of the process and its reaped children) from /proc."""
    out: dict[int, tuple[int, float]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            s = pathlib.Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        f = s[s.rindex(")") + 2:].split()  # state ppid … utime(11) stime(12) cutime(13) cstime(14)
        out[int(d)] = (int(f[1]), sum(int(x) for x in f[11:15]) / _TICK)
    return out


def tree_cpu(pid: int, *, children_only: bool = False) -> float:
    """CPU seconds (user + system, reaped children included) of ``pid`` and every live descendant, from /proc
    (Linux): what a server spent, whatever the machine's load — its worker processes included."""
    table = _proc_table()
    total = 0.0 if children_only else table.get(pid, (0, 0.0))[1]
    stack = [pid]
    while stack:
        parent = stack.pop()
        for child, (pp, cpu) in table.items():
            if pp == parent:
                total += cpu
                stack.append(child)
    return total


_SCRIPT_CPU: list[float] = []


def _count_script_cpu() -> None:
    """Record the CPU time of each script run in its own thread: what a server spends running the app's
    script, without AppTest's per-instance work (it scans every installed package for components, ~0.2 s,
    which a real server does once at start)."""
    from streamlit.runtime.scriptrunner import script_runner

    run = script_runner.exec_func_with_error_handling

    def timed(func: Any, ctx: Any) -> Any:
        t0 = time.thread_time()
        try:
            return run(func, ctx)
        finally:
            _SCRIPT_CPU.append(time.thread_time() - t0)
    script_runner.exec_func_with_error_handling = timed


def _cpu_of(fn: Callable[[], Any]) -> tuple[float, float]:
    """(CPU seconds of the script runs ``fn()`` made, its worker processes' CPU seconds)."""
    n, w0 = len(_SCRIPT_CPU), tree_cpu(os.getpid(), children_only=True)
    fn()
    return sum(_SCRIPT_CPU[n:]), tree_cpu(os.getpid(), children_only=True) - w0


def cpu_child(page: str, runs: int) -> dict[str, Any]:
    """In a fresh process (``--cpu-child PAGE``): the server's CPU for the first view of ``page`` as the
    process's first run (cold: imports, worker start, analysis); with ``PAGE:after-home``, for its first view
    after the front page's (the background imports of :mod:`explorer.preload` finished), for a second visitor's
    first view (process and caches warm) and for a switch back to it (median of ``runs``)."""
    from streamlit.testing.v1 import AppTest

    _count_script_cpu()
    page, _, mode = page.partition(":")

    def fresh() -> Any:
        return AppTest.from_file(APP, default_timeout=300)

    at = fresh()
    if mode != "after-home":
        return {"page": page, "cold": _cpu_of(lambda: _ok(at.switch_page(f"explorer/pages/{page}.py").run()))}
    _ok(at.run())
    from explorer import preload

    preload.done.wait(120)
    after_home = _cpu_of(lambda: _switch(at, page))
    at2 = fresh()
    second = _cpu_of(lambda: _ok(at2.switch_page(f"explorer/pages/{page}.py").run()))
    other = "overview" if page == "home" else "home"
    warm = []
    for _ in range(runs):
        _switch(at2, other)
        warm.append(_cpu_of(lambda: _switch(at2, page)))
    warm.sort()
    return {"page": page, "after_home": after_home, "second": second, "warm": warm[len(warm) // 2]}


def bench_cpu(runs: int, pages: list[str]) -> list[dict[str, Any]]:
    """Per page, the server's CPU seconds (load does not skew them), each figure in fresh processes."""
    import subprocess

    def child(arg: str) -> dict[str, Any]:
        proc = subprocess.run([sys.executable, "-m", "bench.app", "--cpu-child", arg, "--runs", str(runs)],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"--cpu-child {arg} failed: {proc.stderr[-1500:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return [{**child(page), **child(page + ":after-home")} for page in pages]


def render_cpu(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of :func:`bench_cpu`: server + worker CPU seconds per page and view."""
    lines = ["| page | first view, cold process | first view after the front page | first view, warm process "
             "| page switch |", "|---|---|---|---|---|"]

    def cell(v: list[float]) -> str:
        return f"{v[0]:.3f} s" + (f" + {v[1]:.3f} s workers" if v[1] >= 0.005 else "")
    for r in rows:
        lines.append(f"| {r['page']} | {cell(r['cold'])} | {cell(r['after_home'])} | {cell(r['second'])} "
                     f"| {cell(r['warm'])} |")
    return "\n".join(lines)


# link in the sidebar → the page's title (h1): the steps of --server-cpu
EXPLORER_STEPS = [("Overview", "Overview"), ("Comparisons", "Comparisons"), ("Playground", "Playground"),
                  ("Grammar", "Grammar"), ("Start here", "Chat Template Explorer")]
PLAIN_STEPS = [("One", "One"), ("Two", "Two"), ("Three", "Three")]
PLAIN_APP = "bench/plain_app.py"


# Arms a latency probe in the page and clicks the sidebar link ``link`` (one call, so every visitor of a round
# clicks at once): t0 just before the click, t1 when the page titled ``title`` is shown and the run idle (the
# first DOM change that makes it so), and the time the page last received a websocket message before t1 (the
# run's end as it reached the page: server + transport, and the page's main thread when it is busy).
_CLICK_JS = """([link, title]) => {
  const a = [...document.querySelectorAll('[data-testid="stSidebarNav"] a')]
    .find(a => [a, ...a.querySelectorAll('*')].some(e => e.textContent.trim() === link));  // past its icon
  if (!a) return false;
  const shown = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    return !!app && app.getAttribute('data-test-script-state') === 'notRunning'
      && [...document.querySelectorAll('h1')].some(e => e.textContent.trim() === title);
  };
  const lat = window.__lat = {t0: performance.now(), t1: null, msg: null};
  const seen = new MutationObserver(() => {
    if (lat.t1 === null && shown()) { lat.t1 = performance.now(); lat.msg = window.__lastMsg || null; seen.disconnect(); }
  });
  seen.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true,
                               attributeFilter: ['data-test-script-state']});
  a.click();
  return true;
}"""
_LAST_MSG_HOOK = """
const _WS = window.WebSocket;
window.WebSocket = function (...a) {
  const ws = new _WS(...a);
  ws.addEventListener('message', () => { window.__lastMsg = performance.now(); });
  return ws;
};
window.WebSocket.prototype = _WS.prototype;
Object.assign(window.WebSocket, _WS);
"""


def _pcts(values: list[float]) -> dict[str, float]:
    """p50 / p95 (nearest rank) / max of ``values`` (seconds) and their count."""
    vs = sorted(values)
    return {"p50_s": statistics.median(vs), "p95_s": vs[max(0, -(-95 * len(vs) // 100) - 1)], "max_s": vs[-1],
            "n": len(vs)}


def bench_server_cpu(visitor_counts: list[int], steps: int) -> list[dict[str, Any]]:
    """The server's CPU and the visitors' latency per step, the explorer beside a plain Streamlit app
    (:mod:`bench.plain_app`), both served at once and driven by the same chromium visitors. A step is a page
    switch in the sidebar; in each round the ``N`` visitors of one app click at the same moment and each is
    waited for until its new page is shown and the run is over; the rounds alternate between the two apps
    (every other pair in reverse order), so neither app is loaded while the other is measured. For each count
    ``N`` of ``visitor_counts``, ``steps`` rounds per app, on the same two servers (every visitor warmed first):

    * CPU per step, read from /proc for each server's process tree (worker processes included): neither the
      browsers' CPU nor the machine's load counts;
    * latency per step, timed in each visitor's page (click → the new page shown and idle), p50 / p95 / max,
      and the same to the run's last websocket message received, which leaves out the drawing after it; both
      include the browsers' own CPU, which shares the machine's cores with the servers;
    * the server's share: the wall time of each script run, from its start to its end, as the server logs it
      (:mod:`bench.timed_server`) — the other visitors' runs of the round, taking turns at the GIL, included."""
    import subprocess
    import tempfile

    from playwright.sync_api import sync_playwright

    from .browser import CHROME_ARGS, CHROMIUM, PAGE_IDLE_JS, serve

    procs: list[subprocess.Popen] = []
    out: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack, open(os.devnull, "w") as log:
        tmp = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory()))
        runs_log = {name: tmp / f"{name}.runs" for name in ("explorer", "plain")}
        urls = [stack.enter_context(serve(log, script=script, started=procs, module="bench.timed_server", env=dict(
                    os.environ, HF_HUB_OFFLINE="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
                    CTE_RUN_LOG=str(runs_log[name]))))
                for name, script in (("explorer", "app.py"), ("plain", PLAIN_APP))]
        url_x, url_p = urls
        pw = stack.enter_context(sync_playwright())
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS, headless=True)
        apps = {"explorer": (url_x, EXPLORER_STEPS, procs[0].pid), "plain": (url_p, PLAIN_STEPS, procs[1].pid)}

        def visitor() -> Any:
            page = b.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.add_init_script(_LAST_MSG_HOOK)
            return page
        pages = {name: [visitor() for _ in range(max(visitor_counts))] for name in apps}

        at: dict[Any, int] = {}   # visitor's page → the index of the step it shows

        def round_(name: str, group: list[Any]) -> list[tuple[float, float]]:
            """Every page of ``group`` clicks its next step at once; (shown, last message) seconds per page."""
            seq = apps[name][1]
            for page in group:
                at[page] = (at[page] + 1) % len(seq)
                if not page.evaluate(_CLICK_JS, list(seq[at[page]])):
                    raise RuntimeError(f"{name}: no sidebar link {seq[at[page]][0]!r}")
            lat = []
            for page in group:
                page.wait_for_function("() => window.__lat.t1 !== null", timeout=120_000)
                page.wait_for_function(PAGE_IDLE_JS, arg=seq[at[page]][1], timeout=120_000)
                t = page.evaluate("() => window.__lat")
                msg = t["msg"] if t["msg"] is not None and t["msg"] >= t["t0"] else t["t1"]
                lat.append(((t["t1"] - t["t0"]) / 1000, (msg - t["t0"]) / 1000))
            return lat

        for name, (url, seq, _) in apps.items():  # warm: each visitor opens the app and visits every page once
            for page in pages[name]:
                page.goto(url, wait_until="networkidle")
                at[page] = len(seq) - 1 if name == "explorer" else 0   # the front page / page One
                page.wait_for_function(PAGE_IDLE_JS, arg=seq[at[page]][1], timeout=120_000)
                for _ in seq:
                    round_(name, [page])

        def script_runs(name: str) -> list[float]:
            """The wall seconds of each script run the server ``name`` has logged so far."""
            text = runs_log[name].read_text(encoding="utf-8") if runs_log[name].exists() else ""
            return [float(line.split()[0]) for line in text.splitlines() if line.strip()]

        for visitors in visitor_counts:
            load0 = os.getloadavg()[0]
            logged = {name: len(script_runs(name)) for name in apps}
            before = {name: tree_cpu(pid) for name, (_, _, pid) in apps.items()}
            lat: dict[str, list[tuple[float, float]]] = {name: [] for name in apps}
            for i in range(steps):
                for name in (apps if i % 2 == 0 else list(apps)[::-1]):
                    lat[name] += round_(name, pages[name][:visitors])
            n = steps * visitors
            per_step = {name: (tree_cpu(pid) - before[name]) / n for name, (_, _, pid) in apps.items()}
            out.append({"visitors": visitors, "steps": n, "explorer_cpu_per_step_s": per_step["explorer"],
                        "plain_cpu_per_step_s": per_step["plain"],
                        "ratio": per_step["explorer"] / per_step["plain"],
                        "latency": {name: {"shown": _pcts([s for s, _ in v]), "last_message": _pcts([m for _, m in v]),
                                           "server_run": _pcts(script_runs(name)[logged[name]:])}
                                    for name, v in lat.items()},
                        "load_average": [load0, os.getloadavg()[0]]})
        b.close()
    return out


# Timestamps in the page (ms since navigation start) for the phases of a first view: Streamlit's scripts loaded
# (DOMContentLoaded), the websocket open, the first message of the script run, the page's title drawn; and the
# number of websocket messages received (read when the view is shown: the run's messages).
_PHASE_HOOK = """
window.__cte = {};
const _WS = window.WebSocket;
window.WebSocket = function (...a) {
  const ws = new _WS(...a);
  ws.addEventListener('open', () => { window.__cte.ws_open = window.__cte.ws_open || performance.now(); });
  ws.addEventListener('message', () => {
    window.__cte.first_msg = window.__cte.first_msg || performance.now();
    window.__cte.msgs = (window.__cte.msgs || 0) + 1;
  });
  return ws;
};
window.WebSocket.prototype = _WS.prototype;
Object.assign(window.WebSocket, _WS);
const _seen = new MutationObserver(() => {
  if (document.querySelector('h1')) { window.__cte.h1 = performance.now(); _seen.disconnect(); }
});
_seen.observe(document, {subtree: true, childList: true});
"""
_PHASES = ("scripts", "ws_open", "first_msg", "h1")
# what a first view opens: (server script, path, the page's title)
FIRST_VIEWS = {"plain Streamlit app (bench/plain_app.py)": (PLAIN_APP, "/", "One"),
               "explorer front page": ("app.py", "/", "Chat Template Explorer"),
               "explorer Overview (deep link)": ("app.py", "/overview", "Overview")}
# what a view shows once its content is in, when that can come after the first paint: Overview's analysis (a
# session's first view paints a placeholder while the analysis runs, explorer.state.analysis_pending)
RESULT = {"explorer Overview (deep link)": '[data-testid="stMetric"]'}
BASELINE_VIEW = "explorer front page, --baseline checkout"
# what a first view had drawn once shown (counts, which the machine's load does not move): the page's elements,
# the blocks that went through Streamlit's Markdown renderer (~5 ms of the browser's main thread each: headings,
# text, captions, navigation labels) and the page's HTML elements
_DRAWN_JS = ("() => ({elements: document.querySelectorAll('[data-testid=\"stElementContainer\"]').length,"
             " 'Markdown blocks': document.querySelectorAll('[data-testid=\"stMarkdownContainer\"],"
             " [data-testid=\"stCaptionContainer\"]').length,"
             " 'DOM nodes': document.getElementsByTagName('*').length})")


def _settle(pid: int, quiet_s: float = 0.05, timeout: float = 60.0) -> None:
    """Wait until the server tree ``pid`` spends under ``quiet_s`` CPU seconds in half a second (its background
    imports and worker start after a first run are over), at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = tree_cpu(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = tree_cpu(pid)
        if now - last < quiet_s:
            return
        last = now


def _quiet(page: Any, pid: int, timeout: float = 10.0) -> None:
    """Wait until ``page`` loads nothing more (at most 10 s) and its server ``pid`` is quiet (at most
    ``timeout`` seconds)."""
    with contextlib.suppress(Exception):  # a page that keeps a request open is not waited for longer
        page.wait_for_load_state("networkidle", timeout=10_000)
    _settle(pid, timeout=timeout)


def bench_first_view(runs: int, baseline: pathlib.Path | None = None) -> dict[str, Any]:
    """First views in chromium, a plain Streamlit app beside the explorer, each served by its own fresh server
    (all started at once; the visits alternate, every other round in reverse order, and each view's loading
    and its server's work are over before the next visit starts): the first visitor of the fresh server, then
    ``runs`` new
    visitors (a fresh browser profile each: nothing cached) once the server is quiet, then a returning visitor
    (a second tab of the last profile: Streamlit's scripts come from the browser's cache). Each view is timed
    from navigation to the page's title shown and the run idle, with its phases. ``baseline``: another
    checkout (an earlier commit) whose explorer front page is served and visited beside this one's."""
    import subprocess

    from playwright.sync_api import sync_playwright

    from .browser import CHROME_ARGS, CHROMIUM, PAGE_IDLE_JS, serve

    views = dict(FIRST_VIEWS)
    where = {name: ROOT for name in views}
    if baseline is not None:
        views[BASELINE_VIEW] = views["explorer front page"]
        where[BASELINE_VIEW] = baseline
    procs: list[subprocess.Popen] = []
    with contextlib.ExitStack() as stack, open(os.devnull, "w") as log:
        urls = {name: stack.enter_context(serve(log, script=script, started=procs, cwd=where[name]))
                for name, (script, _, _) in views.items()}
        pids = dict(zip(views, (p.pid for p in procs)))
        pw = stack.enter_context(sync_playwright())
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS, headless=True)

        def visit(name: str, ctx: Any) -> dict[str, float]:
            _, path, title = views[name]
            page = ctx.new_page()
            page.add_init_script(_PHASE_HOOK)
            cdp = ctx.new_cdp_session(page)
            cdp.send("Performance.enable")
            t0 = time.perf_counter()
            page.goto(urls[name] + path)
            page.wait_for_function(PAGE_IDLE_JS, arg=title, timeout=120_000)
            out = {"shown": time.perf_counter() - t0}
            if name in RESULT:
                page.locator(RESULT[name]).first.wait_for(timeout=120_000)
                out["result"] = time.perf_counter() - t0
            # the CPU time of the page's main thread: the browser's own work, which the load hardly moves
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            out["main_thread"] = metrics.get("ThreadTime", float("nan"))
            marks = page.evaluate("() => ({...window.__cte, scripts: performance.getEntriesByType('navigation')[0]"
                                  ".domContentLoadedEventEnd})")
            out.update({k: marks[k] / 1000 for k in _PHASES if marks.get(k)})
            out["drawn"] = {**page.evaluate(_DRAWN_JS), "messages": marks.get("msgs", 0)}
            return out

        def fresh() -> Any:
            return b.new_context(viewport={"width": 1400, "height": 1000})

        per: dict[str, dict[str, Any]] = {name: {"new": []} for name in views}
        for name in views:
            ctx = fresh()
            per[name]["first"] = visit(name, ctx)
            _quiet(ctx.pages[0], pids[name], timeout=60.0)   # a fresh server's background imports too
            ctx.close()
        last: dict[str, Any] = {}
        for i in range(runs):
            # every other run in reverse order, and each visit's tail over before the next visit starts: what a
            # view loads after it is shown (the code of its widgets, fonts, the icon) took the cores from the
            # next view's start, and the plain app's tail (its table's code, ~1.2 MB) always fell on the front page
            for name in (views if i % 2 == 0 else list(views)[::-1]):
                ctx = fresh()
                per[name]["new"].append(visit(name, ctx))
                _quiet(ctx.pages[0], pids[name])
                if i == runs - 1:
                    last[name] = ctx
                else:
                    ctx.close()
        for name in views:
            per[name]["returning"] = visit(name, last[name])
        b.close()
    out: dict[str, Any] = {}
    for name, r in per.items():
        new = r["new"]
        out[name] = {"first_visitor_s": r["first"]["shown"], "returning_s": r["returning"]["shown"],
                     "first_visitor_result_s": r["first"].get("result"),
                     "new_visitor": _stats([v["shown"] for v in new]),
                     "main_thread_s": statistics.median([v["main_thread"] for v in new]),
                     "phases_s": {k: statistics.median([v[k] for v in new if k in v]) for k in _PHASES
                                  if any(k in v for v in new)},
                     "first_visitor_phases_s": {k: r["first"][k] for k in _PHASES if k in r["first"]},
                     "drawn": {k: statistics.median([v["drawn"][k] for v in new]) for k in new[0]["drawn"]}}
    return out


def render_first_view(r: dict[str, Any]) -> str:
    """The --first-view figures as a Markdown table (seconds; phases are the new visitors' medians)."""
    lines = ["| first view | first visitor, fresh server (its content in) | new visitor, median (p90, max) "
             "| returning visitor | new visitor's phases: scripts loaded / websocket open / first message / title "
             "drawn | new visitor's browser main-thread CPU | drawn: elements / Markdown blocks / DOM nodes "
             "/ messages |", "|---|---|---|---|---|---|---|"]
    for name, v in r.items():
        nv, ph = v["new_visitor"], v["phases_s"]
        res = f" ({v['first_visitor_result_s']:.2f} s)" if v.get("first_visitor_result_s") else ""
        lines.append(f"| {name} | {v['first_visitor_s']:.2f} s{res} | {nv['median_s']:.2f} s ({nv['p90_s']:.2f}, "
                     f"{nv['max_s']:.2f}) | {v['returning_s']:.2f} s | "
                     + " / ".join(f"{ph[k]:.2f}" if k in ph else "–" for k in _PHASES)
                     + f" s | {v['main_thread_s']:.2f} s | "
                     + " / ".join(f"{x:.0f}" for x in v["drawn"].values()) + " |")
    return "\n".join(lines)


def render_server_cpu(rows: list[dict[str, Any]]) -> str:
    """The --server-cpu figures as a Markdown table, a row per visitor count."""
    lines = ["| visitors | steps per app | server CPU per step: explorer / plain (ratio, target ≤ 1.5×) "
             "| step shown, explorer: p50 / p95 / max | step shown, plain: p50 / p95 / max | p95 explorer ÷ plain "
             "| run's last message in, p95: explorer / plain | server's script run: p50 / p95 / max, explorer; plain "
             "| load average |", "|---|---|---|---|---|---|---|---|---|"]

    def lat(v: dict[str, float]) -> str:
        return f"{v['p50_s']:.2f} / {v['p95_s']:.2f} / {v['max_s']:.2f} s"
    for r in rows:
        x, pl = r["latency"]["explorer"], r["latency"]["plain"]
        lines.append(f"| {r['visitors']} | {r['steps']} | {r['explorer_cpu_per_step_s'] * 1000:.0f} / "
                     f"{r['plain_cpu_per_step_s'] * 1000:.0f} ms ({r['ratio']:.2f}×) | {lat(x['shown'])} "
                     f"| {lat(pl['shown'])} | {x['shown']['p95_s'] / pl['shown']['p95_s']:.2f}× "
                     f"| {x['last_message']['p95_s']:.2f} / {pl['last_message']['p95_s']:.2f} s "
                     f"| {lat(x['server_run'])}; {lat(pl['server_run'])} "
                     f"| {r['load_average'][0]:.1f} → {r['load_average'][1]:.1f} |")
    return "\n".join(lines)


def render(results: dict[str, Any]) -> str:
    """A Markdown table: figure, median, p90, max, runs, target verdict."""
    lines = ["| figure | median | p90 | max | runs | target |", "|---|---|---|---|---|---|"]
    drawn = results.get("browser: drawn per page")
    for k, v in results.items():
        if k == "browser: drawn per page":
            continue
        if k.startswith("time-limit template: first") or k.endswith(("first run (parse + replay)", "first load", "analysis shown")):
            verdict = "(once)"
        elif k.startswith("browser main-thread CPU"):
            verdict = "(CPU)"
        elif k.startswith(("browser: page switch", "browser: first visit")):  # every switch, the max included
            verdict = f"≤ {BROWSER_SWITCH_TARGET_S} s: " + ("✓" if v["max_s"] <= BROWSER_SWITCH_TARGET_S else "✗")
        else:
            verdict = f"≤ {TARGET_S} s: " + ("✓" if v["median_s"] <= TARGET_S else "✗")
        lines.append(f"| {k} | {v['median_s'] * 1000:.0f} ms | {v['p90_s'] * 1000:.0f} ms | "
                     f"{v['max_s'] * 1000:.0f} ms | {v['n']} | {verdict} |")
    if drawn:
        lines += ["", "| page (after a switch) | elements | Markdown blocks | DOM nodes |", "|---|---|---|---|"]
        lines += [f"| {p} | {d['elements']} | {d['Markdown blocks']} | {d['DOM nodes']} |" for p, d in drawn.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the app benchmarks, print the table (and write ``--json``)."""
    ap = argparse.ArgumentParser(prog="python -m bench.app", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9, help="repetitions per figure (default 9)")
    ap.add_argument("--template", default=str(DEFAULT_TEMPLATE) if DEFAULT_TEMPLATE.is_file() else None,
                    help="template for the page and playground figures (default: ../shared/templates/"
                         "Qwen-QwQ-32B.jinja, else the bundled default)")
    ap.add_argument("--skip-slow", action="store_true", help="leave out the time-limit template (~20 s)")
    ap.add_argument("--skip-big", action="store_true", help="leave out the 1 MB paste")
    ap.add_argument("--browser", action="store_true",
                    help="also time the actions in chromium against streamlit run app.py (needs /usr/bin/chromium)")
    ap.add_argument("--cpu", nargs="?", const=",".join(ALL_PAGES), metavar="PAGES",
                    help="only the server's CPU seconds per page (comma-separated pages, default all): the first "
                         "view in a fresh process, a second visitor's first view, a page switch")
    ap.add_argument("--cpu-child", metavar="PAGE", help=argparse.SUPPRESS)
    ap.add_argument("--server-cpu", action="store_true",
                    help="only the server's CPU per page switch, the explorer beside a plain Streamlit app, driven "
                         "by --visitors chromium visitors (needs /usr/bin/chromium)")
    ap.add_argument("--first-view", action="store_true",
                    help="only the first views in chromium: a plain Streamlit app beside the explorer's front page "
                         "and Overview, each on its own fresh server (first visitor, new visitors, a returning "
                         "visitor, with phases; needs /usr/bin/chromium)")
    ap.add_argument("--switches", action="store_true",
                    help="only the page switches in chromium (every page; the Playground and replay steps), with "
                         "the elements and Markdown blocks each page draws (needs /usr/bin/chromium)")
    ap.add_argument("--baseline", metavar="DIR", help="with --first-view or --browser: also serve the explorer "
                    "front page of this checkout (e.g. `git archive` of an earlier commit) side by side; with "
                    "--switches: only Overview and Playground switches and a re-parse, this checkout and DIR's "
                    "alternated")
    ap.add_argument("--visitors", default="2", metavar="N[,N…]",
                    help="visitors of --server-cpu, clicking at once; a comma-separated list measures each count "
                         "in turn on the same servers (default 2)")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args(argv)
    if args.runs < 1:
        print("error: --runs must be >= 1", file=sys.stderr)
        return 2
    import logging
    import os

    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    if args.cpu_child:
        print(json.dumps(cpu_child(args.cpu_child, args.runs)), flush=True)
        # The measurement is printed; AppTest's script threads and the preload thread may still be inside C
        # code, and tearing the interpreter down under them can abort ("FATAL: exception not rethrown").
        os._exit(0)
    if args.server_cpu:
        try:
            counts = [int(v) for v in args.visitors.split(",") if v.strip()]
        except ValueError:
            counts = []
        if not counts or min(counts) < 1:
            print(f"error: --visitors must be whole numbers >= 1, got {args.visitors!r}", file=sys.stderr)
            return 2
        r = bench_server_cpu(counts, args.runs)
        print(render_server_cpu(r))
        print(f"\n(CPU of each server's process tree from /proc, per page switch; latency timed in each visitor's "
              f"page, click → the new page shown and the run idle, the visitors of a round clicking at once and "
              f"the rounds alternating between the apps; {args.runs} rounds per app and count; the browsers share "
              f"the machine with the servers)")
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(r, indent=2), encoding="utf-8")
        return 0
    if args.first_view:
        fv = bench_first_view(args.runs, pathlib.Path(args.baseline) if args.baseline else None)
        print(render_first_view(fv))
        print(f"\n(seconds from navigation to the title shown and the run idle; {args.runs} new visitors each; "
              f"load average {os.getloadavg()[0]:.1f})")
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(fv, indent=2), encoding="utf-8")
        return 0
    if args.switches and args.baseline:
        r = bench_switches_ab(args.runs, pathlib.Path(args.baseline))
        print(render(r))
        print(f"\n(click to shown and idle, and the browser main thread's CPU in the rows 'CPU …'; {args.runs} "
              f"alternated rounds; load average {os.getloadavg()[0]:.1f})")
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(r, indent=2), encoding="utf-8")
        return 0
    if args.switches:
        r = bench_browser(args.runs)
        print(render(r))
        print(f"\n(click to shown and idle; {args.runs} switches per page; load average {os.getloadavg()[0]:.1f})")
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(r, indent=2), encoding="utf-8")
        return 0
    if args.cpu:
        rows = bench_cpu(args.runs, [p.strip() for p in args.cpu.split(",") if p.strip()])
        print(render_cpu(rows))
        print(f"\n(CPU seconds of the server's script run, AppTest in-process; worker processes' CPU "
              f"added where any; median of {args.runs} switches; load average {os.getloadavg()[0]:.1f})")
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
        return 0
    results: dict[str, Any] = {}
    t0 = time.perf_counter()
    results.update(bench_pages(args.template, args.runs))
    results.update(bench_playground(args.template, args.runs))
    if not args.skip_big:
        results.update(bench_big_paste(args.template, max(3, args.runs // 3)))
    if not args.skip_slow:
        results.update(bench_slow_template())
    first_view = None
    if args.browser:
        results.update(bench_browser(args.runs))
        first_view = bench_first_view(args.runs, pathlib.Path(args.baseline) if args.baseline else None)
    print(render(results))
    if first_view is not None:
        print("\n" + render_first_view(first_view))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n(AppTest script-run times{'; browser: click to shown and idle' if args.browser else ''}; "
          f"{time.perf_counter() - t0:.0f} s in all, load average {load:.1f}; template "
          f"{pathlib.Path(args.template).name if args.template else 'bundled default'})")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            results if first_view is None else {**results, "first view": first_view}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
