"""``python -m bench.bomb_reload``: how long another visitor's page reload takes while one visitor's runaway
template burns a worker (issue 24: "≤ 2 s for another visitor").

A demo-mode server (``CTE_DEMO=1``) and Debian's chromium, as ``tests/test_browser_isolation.py`` drives them:
visitor B opens the Overview of the default example; B reloads it ``--reloads`` times at rest; visitor A pastes
a template whose ``==`` bomb (2^64 comparisons inside CPython's C code) fires only on A's own request, and sends
that request from the Playground; while A's worker runs, B reloads ``--reloads`` times again. Each reload is
timed from ``reload()`` to the metrics shown, with its phases (Streamlit's scripts loaded = DOMContentLoaded,
websocket open, first message of the run), and the CPU seconds the server process, its workers and the machine
spent meanwhile (from /proc). The load average is printed beside them; nothing is asserted.

    python -m bench.bomb_reload [--reloads 5] [--timeout 60] [--json FILE]

``--share`` measures the mechanism without a browser, which the machine's load does not blur: a runaway ``==``
render in a worker and a CPU-bound stand-in for the server's and the browser's work, both pinned to one core
for ``--seconds``; prints the CPU seconds each got, demotion off (``CTE_ISOLATED_RUNAWAY_CPU_S=0``) and on.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import time
from typing import Any

from .app import _PHASE_HOOK, _TICK, tree_cpu
from .browser import CHROME_ARGS, CHROMIUM, IDLE_JS, serve

# the runaway of the browser isolation test (tests/test_browser_isolation.py): ChatML until the first message is
# "detonate", then `==` on two deep lists (work inside C code, which only the worker kill stops)
TRIPWIRE = """{%- if messages[0].content == 'detonate' -%}
{%- set ns = namespace(a=[0], b=[0]) -%}
{%- for i in range(64) -%}{%- set ns.a = [ns.a, ns.a] -%}{%- set ns.b = [ns.b, ns.b] -%}{%- endfor -%}
{{- ns.a == ns.b -}}
{%- endif -%}
{%- for m in messages -%}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""
RUNNING_JS = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
              " return !!a && a.getAttribute('data-test-script-state') === 'running'; }")
METRICS_JS = ("() => [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
              ".some(e => e.innerText.includes('TAG_BASED'))")
# when each websocket message arrived, and when the metrics were drawn (a mutation observer, not the poll)
_TRACE_HOOK = """
window.__cte_msgs = [];
const _WS2 = window.WebSocket;
window.WebSocket = function (...a) {
  const ws = new _WS2(...a);
  ws.addEventListener('message', (e) => {
    window.__cte_msgs.push([performance.now(), e.data.size || e.data.length || 0]); });
  return ws;
};
window.WebSocket.prototype = _WS2.prototype;
Object.assign(window.WebSocket, _WS2);
const _m = new MutationObserver(() => {
  const shown = [...document.querySelectorAll('[data-testid="stMetric"]')].some(e => e.innerText.includes('TAG_BASED'));
  if (!window.__cte_metrics && shown) {
    window.__cte_metrics = performance.now(); _m.disconnect(); }
});
document.addEventListener('DOMContentLoaded',
  () => _m.observe(document.body, {childList: true, subtree: true, characterData: true}));
"""
_PHASES = ("scripts", "ws_open", "first_msg", "last_msg", "metrics")


def _own_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` itself (all its threads), from /proc."""
    try:
        s = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    f = s[s.rindex(")") + 2:].split()
    return (int(f[11]) + int(f[12])) / _TICK


def _machine_cpu() -> float:
    """CPU seconds the whole machine spent (all cores, not idle), from /proc/stat."""
    f = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(f) - f[3] - f[4]) / _TICK


def _wait_idle(page: Any) -> None:
    page.wait_for_function(IDLE_JS, timeout=60_000)


def _browser_metrics(cdp: Any) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


_BROWSER = ("ThreadTime", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "TaskDuration")


def _reload(page: Any, pid: int, cdp: Any = None) -> dict[str, Any]:
    cpu0, tree0, all0 = _own_cpu(pid), tree_cpu(pid), _machine_cpu()
    t0 = time.perf_counter()
    page.reload()
    page.wait_for_function(METRICS_JS, timeout=60_000, polling=20)
    out = {"shown": time.perf_counter() - t0}
    out["server_cpu"] = _own_cpu(pid) - cpu0
    out["workers_cpu"] = tree_cpu(pid) - tree0 - out["server_cpu"]
    out["machine_cpu"] = _machine_cpu() - all0
    if cdp is not None:  # the page's main thread, counted from the new document's start
        bm = _browser_metrics(cdp)
        out.update({f"browser_{k}": bm.get(k, float("nan")) for k in _BROWSER})
    _wait_idle(page)
    marks = page.evaluate("() => ({...window.__cte, scripts: performance.getEntriesByType('navigation')[0]"
                          ".domContentLoadedEventEnd, metrics: window.__cte_metrics, msgs: window.__cte_msgs,"
                          " late: performance.getEntriesByType('resource').filter(r => r.startTime > "
                          "(window.__cte.first_msg || 0))"
                          ".map(r => [r.name.split('/').pop(), r.startTime, r.duration])})")
    msgs = [m for m in marks.pop("msgs") or [] if marks.get("metrics") is None or m[0] <= marks["metrics"]]
    marks["last_msg"] = msgs[-1][0] if msgs else None
    out["msgs_before_metrics"] = len(msgs)
    out["late_resources"] = marks.pop("late")
    out.update({k: marks[k] / 1000 for k in _PHASES if marks.get(k)})
    return out


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ["shown", *_PHASES, "server_cpu", "workers_cpu", "machine_cpu", "msgs_before_metrics",
            *(f"browser_{k}" for k in _BROWSER)]
    return {"n": len(rows), "shown_all": [round(r["shown"], 3) for r in rows],
            "late_resources": len(rows[-1].get("late_resources") or []),
            **{f"{k}_median": round(statistics.median(r[k] for r in rows if k in r), 3) for k in keys
               if any(k in r for r in rows)}}


def run(reloads: int, timeout_s: float, env_extra: dict[str, str], rest_only: bool = False) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    env = dict(os.environ, HF_HUB_OFFLINE="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", CTE_DEMO="1",
               CTE_ISOLATED_TIMEOUT_S=str(timeout_s), **env_extra)
    env.pop("CTE_ALLOW_ROOTS", None)
    procs: list[Any] = []
    out: dict[str, Any] = {"load_before": os.getloadavg()}
    with open(os.devnull, "w") as log, serve(log, env=env, started=procs) as url, sync_playwright() as pw:
        pid = procs[0].pid
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS, headless=True)
        ctx_a = browser.new_context(viewport={"width": 1400, "height": 1000})
        ctx_b = browser.new_context(viewport={"width": 1400, "height": 1000})
        b = ctx_b.new_page()
        b.add_init_script(_PHASE_HOOK)
        b.add_init_script(_TRACE_HOOK)
        cdp = ctx_b.new_cdp_session(b)
        cdp.send("Performance.enable")
        b.goto(f"{url}/overview")
        b.wait_for_function(METRICS_JS, timeout=120_000)
        _wait_idle(b)
        _reload(b, pid, cdp)  # the first reload warms what a reload needs
        rest = [_reload(b, pid, cdp) for _ in range(reloads)]
        if rest_only:
            out["load_after"] = os.getloadavg()
            browser.close()
            out["at_rest"] = _summary(rest)
            return out

        a = ctx_a.new_page()
        a.goto(f"{url}/sources")
        a.get_by_role("heading", name="Sources").wait_for(timeout=60_000)
        _wait_idle(a)
        a.get_by_text("Paste text").click()
        _wait_idle(a)
        box = a.locator('[data-testid="stTextInput"]').filter(has_text="Name").locator("input")
        box.fill("tripwire.jinja")
        box.press("Enter")
        area = a.locator('[data-testid="stTextArea"]').filter(has_text="Jinja template").locator("textarea")
        area.fill(TRIPWIRE)
        area.press("Control+Enter")
        _wait_idle(a)
        a.get_by_role("button", name="Use this text").click()
        a.get_by_text("Loaded tripwire.jinja", exact=False).first.wait_for(timeout=60_000)
        _wait_idle(a)
        a.locator('[data-testid="stSidebarNav"] a').filter(has_text="Playground").click()
        a.get_by_role("heading", name="Playground").wait_for(timeout=60_000)
        _wait_idle(a)
        a.get_by_text("messages (JSON)").first.click()
        msgs = a.locator('[data-testid="stExpander"]').filter(has_text="messages (JSON)").locator("textarea")
        msgs.fill(json.dumps([{"role": "user", "content": "detonate"}]))
        msgs.press("Control+Enter")
        a.wait_for_function(RUNNING_JS, timeout=60_000)
        time.sleep(1.0)  # the worker is in the bomb
        bomb: list[dict[str, float]] = []
        for _ in range(reloads):
            if not a.evaluate(RUNNING_JS):
                break
            row = _reload(b, pid, cdp)
            if a.evaluate(RUNNING_JS):
                bomb.append(row)
        out["load_after"] = os.getloadavg()
        browser.close()
    out["at_rest"] = _summary(rest)
    out["during_bomb"] = _summary(bomb) if bomb else {"n": 0}
    return out


_SPIN = "import time\nt = time.monotonic() + {s}\nwhile time.monotonic() < t:\n    sum(range(1000))\n"


def share(seconds: float) -> dict[str, Any]:
    """CPU seconds a runaway worker and a CPU-bound process at the server's priority each get on one shared core,
    with the worker's demotion off and on (each in a fresh process, so the module constant is read anew)."""
    import subprocess
    import sys

    out: dict[str, Any] = {"load_before": os.getloadavg()}
    for label, cpu_s in (("demotion off", "0"), ("demotion on", "")):
        env = dict(os.environ, CTE_ISOLATED_RUNAWAY_CPU_S=cpu_s)
        r = subprocess.run([sys.executable, "-m", "bench.bomb_reload", "--share-child", str(seconds)], env=env,
                           capture_output=True, text=True, timeout=seconds + 120)
        out[label] = json.loads(r.stdout.strip().splitlines()[-1])
    out["load_after"] = os.getloadavg()
    return out


def _share_child(seconds: float) -> dict[str, float]:
    import subprocess
    import sys
    import threading

    from core import isolation

    bomb = ("{%- set ns = namespace(a=[0], b=[0]) -%}{%- for i in range(64) -%}{%- set ns.a = [ns.a, ns.a] -%}"
            "{%- set ns.b = [ns.b, ns.b] -%}{%- endfor -%}{{ ns.a == ns.b }}")
    isolation.call(_render, "{{ 1 }}")  # the worker imports this module now
    pid = isolation.call(os.getpid)
    core0 = {min(os.sched_getaffinity(0))}
    os.sched_setaffinity(pid, core0)
    t = threading.Thread(target=lambda: _swallow(isolation.call, _render, bomb, timeout_s=seconds + 70,
                                                 what="render"))
    t.start()
    c0, deadline = _own_cpu(pid), time.monotonic() + 60
    while _own_cpu(pid) - c0 < 0.7 and time.monotonic() < deadline:  # in the bomb, past the demotion's 0.5 s
        time.sleep(0.05)
    time.sleep(0.2)
    w0 = _own_cpu(pid)
    spin = subprocess.Popen([sys.executable, "-c", _SPIN.format(s=seconds)])
    os.sched_setaffinity(spin.pid, core0)
    _, _, usage = os.wait4(spin.pid, 0)
    got = {"worker_cpu_s": round(_own_cpu(pid) - w0, 2), "server_like_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
           "worker_nice": os.getpriority(os.PRIO_PROCESS, pid)}
    os.kill(pid, 9)  # the bomb's job is done; its call ends with "the worker died"
    t.join()
    return got


def _render(source: str) -> str:
    """In a worker: render ``source`` (sandboxed, with the default limits)."""
    from core.jinja.template import ChatTemplate

    return ChatTemplate(source, "bomb.jinja").render({"messages": [{"role": "user", "content": "hi"}]})


def _swallow(fn: Any, *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the bomb ends at its kill
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bomb_reload", description=__doc__.splitlines()[0])
    p.add_argument("--reloads", type=int, default=5)
    p.add_argument("--timeout", type=float, default=60.0, help="CTE_ISOLATED_TIMEOUT_S of the server")
    p.add_argument("--env", action="append", default=[], metavar="K=V", help="more server environment")
    p.add_argument("--rest-only", action="store_true", help="only the reloads at rest (no bomb)")
    p.add_argument("--share", action="store_true", help="the CPU share test (no browser)")
    p.add_argument("--seconds", type=float, default=5.0, help="with --share: how long both run")
    p.add_argument("--share-child", type=float, help=argparse.SUPPRESS)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    if args.share_child:
        print(json.dumps(_share_child(args.share_child)))
        return 0
    extra = dict(kv.split("=", 1) for kv in args.env)
    if args.share:
        r = share(args.seconds)
    else:
        r = run(args.reloads, args.timeout, extra, args.rest_only)
        r["env"] = extra
    text = json.dumps(r, indent=1)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
