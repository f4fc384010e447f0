"""``python -m bench.timed_server run SCRIPT [options]``: ``streamlit run`` that appends each script run's wall
time and CPU time to the file named by ``CTE_RUN_LOG`` — the server's own share of a step's latency, which
``python -m bench.app --server-cpu`` reads beside the latency its visitors see (their browsers share the
machine). One line per run: ``wall_seconds cpu_seconds`` (the run's own thread, from its start to its end,
the other sessions' runs and the server's threads taking the GIL meanwhile included)."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any


def _log_runs(path: str) -> None:
    from streamlit.runtime.scriptrunner import script_runner

    run = script_runner.exec_func_with_error_handling
    lock = threading.Lock()

    def timed(func: Any, ctx: Any) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return run(func, ctx)
        finally:
            line = f"{time.perf_counter() - t0:.6f} {time.thread_time() - c0:.6f}\n"
            with lock, open(path, "a", encoding="utf-8") as f:
                f.write(line)
    script_runner.exec_func_with_error_handling = timed


if __name__ == "__main__":
    if os.environ.get("CTE_RUN_LOG"):
        _log_runs(os.environ["CTE_RUN_LOG"])
    from streamlit.web import cli

    sys.argv = ["streamlit", *sys.argv[1:]]
    sys.exit(cli.main())
