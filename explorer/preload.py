"""Import what the pages need in the background, once per server process, after its first script run.

A fresh server paid every library's import inside some visitor's first view of a page: pandas and pyarrow
(~0.4 s of CPU) on the first table, pygments' lexers on the first highlighted source, the analysis, lint,
explain and corpus modules on their pages — 0.6-1.6 s of CPU per page on a quiet machine, several seconds on
a loaded one. :func:`start` imports them on a daemon thread right after the first run (the front page's, which
needs none of them), so the next pages a visitor opens find them loaded. Imports only: no template, no
analysis, nothing a visitor sent. Then the loaded objects are frozen out of the garbage collector's reach
(:func:`gc.freeze`), so the collection Streamlit runs after each script run only walks what is new.

The first analysis worker is started at the same moment (:func:`core.isolation.warm`: the forkserver's start,
~1-1.7 s of CPU in its own process), not when the explorer's modules are first imported: on two cores it took
a core from the first view of the front page, which runs no analysis. A first view that needs a worker (a deep
link to Overview) starts one itself, as it did before the warm-up was ready."""

from __future__ import annotations

import gc
import importlib
import logging
import threading

# what the pages and components import at their top or on first use (explorer/pages/*, explorer/components/*)
MODULES = (
    "numpy", "pandas", "pyarrow", "streamlit.dataframe_util", "streamlit.elements.arrow",
    "streamlit.elements.lib.column_config_utils", "streamlit.elements.vega_charts", "altair",
    "pygments.lexers.data", "pygments.lexers.templates", "pygments.lexers.diff",
    "explorer.components.code_view", "explorer.components.diff_view", "explorer.components.marker_table",
    "explorer.components.spans", "explorer.components.lint_view", "explorer.components.live_render",
    "explorer.components.provenance", "explorer.components.glossary",
    "core.analysis", "core.analysis.instructions", "core.analysis.routing", "core.chat.pipeline",
    "core.chat.request", "core.chat.conversation", "core.diff", "core.explain.explain", "core.lint.locate",
    "core.lint.model", "core.corpus", "core.sources", "core.isolated_ops",
)

done = threading.Event()
_lock = threading.Lock()
_started = False


def _run() -> None:
    log = logging.getLogger("explorer")
    try:
        for name in MODULES:
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001 - an optional library missing only costs its page the import
                log.debug("preload of %s skipped: %s", name, e)
        try:
            from pygments.lexers import get_lexer_by_name

            for lang in ("jinja", "json", "diff"):  # the lexer registry is built on the first lookup
                get_lexer_by_name(lang)
        except Exception as e:  # noqa: BLE001
            log.debug("preload of the lexers skipped: %s", e)
        # Streamlit runs a full garbage collection after every script run (runner.postScriptGC): with the
        # libraries loaded that walked ~140k objects, most of a page switch's server CPU (0.06-0.1 s, a plain
        # app's whole step). The modules live as long as the process: frozen, the collector skips them.
        gc.collect()
        gc.freeze()
    finally:
        done.set()


def start() -> None:
    """Start the background imports (once per process; later calls do nothing)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    from core import isolation

    threading.Thread(target=isolation.warm, daemon=True, name="cte-warm-worker").start()
    threading.Thread(target=_run, daemon=True, name="cte-preload").start()
