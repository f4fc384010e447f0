"""A real ``streamlit run app.py`` server and Debian's chromium, for ``python -m bench.app --browser`` and
``tests/test_browser.py``: start the server on a free local port (offline, no usage statistics), wait until it
is healthy, and wait for a script run to finish the way the browser sees it."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request
from typing import IO, Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# The app root's own run state: "running" / "rerunRequested" while a script run is under way, "notRunning"
# after (the status widget's wording changes between Streamlit versions, the attribute does not).
IDLE_JS = ("() => { const a = document.querySelector('[data-testid=\"stApp\"]');"
           " return !!a && a.getAttribute('data-test-script-state') === 'notRunning'; }")
# …and the page titled ``t`` is the one shown
PAGE_IDLE_JS = ("(t) => { const a = document.querySelector('[data-testid=\"stApp\"]');"
                " const h = [...document.querySelectorAll('h1')].some(e => e.innerText.trim() === t);"
                " return !!a && h && a.getAttribute('data-test-script-state') === 'notRunning'; }")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(log: IO[str] | None = None, timeout: float = 90.0, env: dict[str, str] | None = None,
          extra_args: tuple[str, ...] = (), port: int | None = None, script: str = "app.py",
          started: list[subprocess.Popen] | None = None, cwd: pathlib.Path | None = None,
          module: str = "streamlit") -> Iterator[str]:
    """Run ``streamlit run app.py`` (headless, 127.0.0.1, ``HF_HUB_OFFLINE=1``, no usage statistics, no file
    watcher) and yield its URL once ``/_stcore/health`` answers ``ok``; the server is stopped on exit. ``env``
    replaces the default environment (this process's plus the two settings above); ``extra_args`` are more
    ``streamlit run`` options; ``port``: this one instead of a free one (a restart on the same address);
    ``script``: another Streamlit script of the checkout; ``started``: the server's process is appended to it;
    ``cwd``: serve another checkout (an earlier commit, side by side) instead of this one; ``module``: the module
    run as ``python -m MODULE run …`` (``bench.timed_server`` logs each script run's time).

    Raises ``RuntimeError`` when the server exits early or is not healthy within ``timeout`` seconds."""
    port = port or free_port()
    if env is None:
        env = dict(os.environ, HF_HUB_OFFLINE="1", STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "run", script, "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
         *extra_args],
        cwd=cwd or ROOT, env=env, stdout=log if log is not None else subprocess.DEVNULL, stderr=subprocess.STDOUT)
    if started is not None:
        started.append(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"streamlit did not become healthy within {timeout:.0f} s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_idle(page: object, timeout: float = 60_000) -> None:
    """Wait until Streamlit has finished the current script run: the run state must read ``notRunning`` twice,
    250 ms apart, so a rerun requested by the last click is waited for too (``page``: a Playwright page)."""
    page.wait_for_timeout(150)  # type: ignore[attr-defined]
    page.wait_for_function(IDLE_JS, timeout=timeout)  # type: ignore[attr-defined]
    page.wait_for_timeout(250)  # type: ignore[attr-defined]
    page.wait_for_function(IDLE_JS, timeout=timeout)  # type: ignore[attr-defined]
