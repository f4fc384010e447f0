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
link to Overview) starts one itself, as it did before the warm-up was ready.

The imports never run beside page code. CPython's import system is not safe for two threads that initialise the
same package at once (python/cpython#83065, fixed only in 3.15): a visitor who opened Overview while this thread
was inside ``import core.analysis`` had the page import ``core.analysis.instructions`` from the half-initialised
package, this thread's import failed ("cannot import name … from partially initialized module", or the import
system's deadlock check) and took ``core.analysis`` out of ``sys.modules``, and the page failed with
``KeyError: 'core.analysis'`` (an intermittent CI failure of the Space's test under load, 1 run in 7). So each
import is a step of its own, taken only while no thread runs page code (:func:`page_started` ..
:func:`page_finished`, :func:`page_work`), and page code that starts during a step waits for that one step (at
most one library's import), not for the rest."""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

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

# page code against import steps: any number of page threads at once, or one step
_gate = threading.Condition()
_pages: set[threading.Thread] = set()   # threads running page code
_step: str | None = None                # the import step running, if any
_step_thread: threading.Thread | None = None
_pages_waiting = 0
_step_waiting = False
#: How often a step waiting for page code looks for page threads that ended without :func:`page_finished` (a run
#: stopped before the app's ``finally``); a page thread that finishes wakes it at once.
_PRUNE_S = 0.1


@dataclass(frozen=True)
class Status:
    """The background imports' state: ``step`` (the import running, if any), ``pages`` (threads running page
    code), ``pages_waiting`` (page threads waiting for the step), ``step_waiting`` (the next step waits for page
    code), ``done`` (every import was tried)."""

    step: str | None
    pages: int
    pages_waiting: int
    step_waiting: bool
    done: bool


def status() -> Status:
    """The state of the background imports now (tests and diagnostics)."""
    with _gate:
        return Status(_step, len(_pages), _pages_waiting, _step_waiting, done.is_set())


def page_started() -> bool:
    """This thread runs page code (a script run, a fragment, a background job) until :func:`page_finished` or its
    end; waits while an import step runs. True if this call registered the thread (False: it already was)."""
    global _pages_waiting
    me = threading.current_thread()
    with _gate:
        if me in _pages or me is _step_thread:  # an import that runs page code must not wait for itself
            return False
        _pages_waiting += 1
        try:
            while _step is not None:
                _gate.wait()
        finally:
            _pages_waiting -= 1
        _pages.add(me)
        return True


def page_finished() -> None:
    """This thread's page code is over: the imports may go on."""
    with _gate:
        _pages.discard(threading.current_thread())
        _gate.notify_all()


@contextlib.contextmanager
def page_work() -> Iterator[None]:
    """:func:`page_started` for the ``with`` body; the thread stays registered after it if it was before."""
    mine = page_started()
    try:
        yield
    finally:
        if mine:
            page_finished()


def _import_step(name: str, work: Callable[[], None]) -> None:
    """Run ``work`` once no thread runs page code, holding page code that starts meanwhile until it is over."""
    global _step, _step_thread, _step_waiting
    with _gate:
        while True:
            _pages.intersection_update([t for t in _pages if t.is_alive()])
            if not _pages:
                break
            _step_waiting = True
            _gate.wait(_PRUNE_S)
        _step_waiting = False
        _step, _step_thread = name, threading.current_thread()
    try:
        work()
    finally:
        with _gate:
            _step, _step_thread = None, None
            _gate.notify_all()


def _run() -> None:
    log = logging.getLogger("explorer")
    try:
        for name in MODULES:
            def one(name: str = name) -> None:
                try:
                    importlib.import_module(name)
                except Exception as e:  # noqa: BLE001 - an optional library missing only costs its page the import
                    log.debug("preload of %s skipped: %s", name, e)

            _import_step(name, one)

        def lexers() -> None:
            try:
                from pygments.lexers import get_lexer_by_name

                for lang in ("jinja", "json", "diff"):  # the lexer registry is built on the first lookup
                    get_lexer_by_name(lang)
            except Exception as e:  # noqa: BLE001
                log.debug("preload of the lexers skipped: %s", e)

        _import_step("pygments lexers", lexers)
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
