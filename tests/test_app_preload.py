"""explorer.preload: the pages' libraries are imported on a background thread after the first run, then frozen
out of the garbage collector's reach (Streamlit collects after every script run; walking the loaded libraries
was most of a page switch's server CPU). Run in a fresh interpreter: the freeze is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import ROOT

PROBE = """
import gc, json, sys
before = {m: m in sys.modules for m in ("pandas", "pygments.lexers.templates", "core.analysis")}
from explorer import preload
preload.start()
preload.start()   # a second call starts nothing
import threading
threads = [t.name for t in threading.enumerate() if t.name == "cte-preload"]
assert preload.done.wait(300)
print(json.dumps({"before": before, "threads": len(threads), "frozen": gc.get_freeze_count(),
                  "after": {m: m in sys.modules for m in before}}))
"""


def test_preload_imports_the_pages_libraries_once_and_freezes_them():
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not any(got["before"].values())          # importing explorer.preload loads none of them
    assert all(got["after"].values()), got["after"]
    assert got["threads"] <= 1
    assert got["frozen"] > 10_000                   # the libraries' objects are out of the collector's walk
