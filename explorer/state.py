"""Session state and cached engine calls of the explorer.

Everything the pages show comes from ``core.*``; this module only decides *when* to call it and keeps the
results:

* the **current template** lives in ``st.session_state["template"]`` as a :class:`CurrentTemplate` (plain
  data: name, source text, all variants, origin), so switching pages or variants never re-fetches;
* the **analysis** is cached per ``(source, name)`` with ``st.cache_resource`` (shared by all sessions), and
  per ``(source, name, disabled workarounds, overrides)`` through ``core.analysis.reapply`` (no renders);
* **parsers** are cached per ``(analysis key, request)`` via ``core.chat.pipeline.build_chat_parser``;
* **no template code runs in this process**: every render (analysis, prompt, parser building, parses and
  replays with the parser, samples) runs in a limited worker (:mod:`core.isolated_ops`, :mod:`core.isolation`);
  a worker killed at its limit (:class:`core.isolation.WorkerLimitError`) is shown, never cached as the
  template's verdict;
* **user input** widgets use keys starting with ``in_``; :func:`keep_inputs` re-assigns them on every run so
  Streamlit does not drop them when their page is not shown (nothing the user typed is lost);
* per-template **overrides** (``{field path: value}``) and disabled workarounds are kept by template digest.

Errors from the engine are :class:`core.errors.ChatTemplateExplorerError`; :func:`show_error` displays their
message (escaped) with ``st.error`` and never a traceback.
"""

from __future__ import annotations

import collections
import concurrent.futures
import enum
import gc
import json
import os
import pathlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import streamlit as st
from streamlit.errors import StreamlitAPIException

from core import isolated_ops, isolation
from core.digest import source_digest
from core.errors import ChatTemplateExplorerError
from core.isolation import WorkerLimitError
from . import preload
from .components.text import md

if TYPE_CHECKING:  # jinja2 and the sandbox load on a page that renders, not on the front page's first view
    from core.jinja.template import ChatTemplate

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
BUNDLED_DIR = ASSETS / "templates"
SAMPLES_DIR = ASSETS / "samples"
DEFAULT_BUNDLED = "chatml-think-tools.jinja"
INPUT_PREFIX = "in_"

T = TypeVar("T")


class EngineMissing(ChatTemplateExplorerError):
    """A part of the engine the page needs has not landed (import failed)."""

    def __init__(self, what: str, err: Exception):
        super().__init__(f"{what} is not available in this build ({type(err).__name__}: {err})")


# ------------------------------------------------------------------------------------------------ inputs


KEPT_PREFIX = "_kept_"


def keep_inputs() -> None:
    """Keep the values of ``in_*`` widgets across pages: Streamlit drops a widget's state when a run does not
    draw it, so each value is copied to a plain key (``_kept_in_*``) and put back only when its widget key is
    gone. A widget key that is still there is never assigned: an assignment is sent to the browser as the
    widget's new value, and it overwrote what the visitor typed while the run was under way."""
    ss = st.session_state
    page = _page_hash()
    switched = page is not None and ss.get(_KEPT_PAGE) not in (None, page)
    ss[_KEPT_PAGE] = page
    for key in list(ss.keys()):
        if not (isinstance(key, str) and key.startswith(KEPT_PREFIX)) or key == _KEPT_PAGE:
            continue
        name = key[len(KEPT_PREFIX):]
        # A value put back in an earlier run whose page did not draw its widget is a plain value by now, and
        # Streamlit sends a widget the session's value only in the run that assigned it: the box came back
        # empty while the page worked on the kept text. So on a page switch (no box of the new page is in the
        # browser yet: the assignment lands on nothing typed) an unchanged kept value is assigned again; a
        # value a page set since (a permalink's output, a fix) differs from the kept one and stays.
        if name not in ss or (switched and _same(ss[name], ss[key])):
            try:
                ss[name] = ss[key]
            except StreamlitAPIException:  # buttons, uploaders: not settable, nothing to keep
                pass
    for key in list(ss.keys()):
        if isinstance(key, str) and key.startswith(INPUT_PREFIX):
            try:
                ss[KEPT_PREFIX + key] = ss[key]
            except (StreamlitAPIException, KeyError):
                pass


_KEPT_PAGE = KEPT_PREFIX + "page"


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 - a value without a plain equality is not assigned again
        return False


def _page_hash() -> str | None:
    """The script hash of the page this run draws, or None outside a Streamlit run."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    try:
        return ctx.page_script_hash if ctx is not None else None
    except AttributeError:
        return None


def default(key: str, value: Any) -> Any:
    """Set ``st.session_state[key]`` to ``value`` unless present; return the current value."""
    if key not in st.session_state:
        st.session_state[key] = value
    return st.session_state[key]


def for_visitor(msg: str) -> str:
    """``msg`` as a visitor of a public demo should read it: the operator-only hint of the analysis budget error
    (an environment variable of the server) becomes "a limit set by the server's operator" and every server path
    becomes ``<server path>`` (:func:`core.serving.redact_paths`). Unchanged when the app runs locally (the user
    is the operator)."""
    from core.serving import Mode, policy_or_closed, redact_paths
    from core.jinja.limits import BUDGET_HINT

    if policy_or_closed()[0].mode is Mode.DEMO:  # and no server path (the operator's Hub cache, the install folder)
        return redact_paths(msg.replace(BUDGET_HINT, "a limit set by the server's operator"))
    return msg


def edited_words(msg: str, name: str) -> str:
    """``msg`` about a template text edited from the file ``name``: the engine names a template by its name
    (``template 'x.jinja' stopped: …``), which for an edit is the loaded file's, as if that file were at fault;
    here it says ``the edited template (from x.jinja)``."""
    return msg.replace(f"template {name!r}", f"the edited template (from {name})")


def show_error(err: BaseException, prefix: str = "", *, edited_from: str | None = None) -> None:
    """``st.error`` with the error's message (escaped, never a traceback; operator hints replaced for demo
    visitors, :func:`for_visitor`). Unexpected exceptions show their type and message too. ``edited_from``: the
    error is about a text edited from that file (:func:`edited_words`); by default, when the current template
    is an edit, about it."""
    if isinstance(err, ChatTemplateExplorerError):
        msg = str(err)
    else:
        msg = f"{type(err).__name__}: {err}"
    if edited_from is None:
        cur = st.session_state.get("template")
        edited_from = cur.name if getattr(cur, "origin", None) == "edited" else None
    if edited_from is not None:
        msg = edited_words(msg, edited_from)
    st.error(md(for_visitor(f"{prefix}{msg}")))


def attempt(fn: Callable[..., T], *args: Any, prefix: str = "", edited_from: str | None = None,
            **kw: Any) -> T | None:
    """Call ``fn``; on any exception show it with :func:`show_error` and return ``None``."""
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the UI must show every failure as a message
        show_error(e, prefix, edited_from=edited_from)
        return None


# ------------------------------------------------------------------------------------------------ template


@dataclass
class CurrentTemplate:
    """The template the explorer works on: ``name``, ``source`` (selected variant's text), ``variants``
    (variant name → text), ``variant``, ``origin`` (file | json | gguf | hub | bundled | string | upload |
    edited: the source as changed in the Edit page, ``path`` / ``revision`` still those of the loaded one),
    ``path`` (file path or repo id, for display), ``revision`` (Hub)."""

    name: str
    source: str
    variants: dict[str, str] = field(default_factory=dict)
    variant: str = "default"
    origin: str = "string"
    path: str | None = None
    revision: str | None = None

    @property
    def file_stem(self) -> str:
        """A safe file-name stem for downloads: the name without variant and extension, other characters than
        letters, digits, ``.``, ``_``, ``-`` replaced by ``_`` (``org/model`` → ``org_model``)."""
        import re

        base = self.name.split(":")[0]
        base = base.rsplit(".", 1)[0] if base.endswith((".jinja", ".j2", ".json", ".gguf")) else base
        return re.sub(r"[^\w.-]+", "_", base).strip("._") or "template"

    @property
    def digest(self) -> str:
        """Short stable id of the source: 16 hex chars of its sha256 (:func:`core.digest.source_digest`)."""
        return source_digest(self.source)

    def template(self) -> ChatTemplate:
        """Compiled template (raises :class:`core.errors.TemplateSyntaxError`)."""
        from core.jinja.template import ChatTemplate

        return ChatTemplate(self.source, self.name)

    def with_variant(self, variant: str) -> "CurrentTemplate":
        """The same template switched to ``variant`` (name ``base`` or ``base:variant``, source of that variant).

        Raises ``KeyError`` when ``variant`` is not in ``variants``.
        """
        return CurrentTemplate(self.name.split(":")[0] + ("" if variant == "default" else f":{variant}"),
                               self.variants[variant], self.variants, variant, self.origin, self.path,
                               self.revision)


def from_loaded(loaded: Any, origin: str | None = None) -> CurrentTemplate:
    """A :class:`CurrentTemplate` from ``core.sources.LoadedTemplate``."""
    return CurrentTemplate(name=loaded.name, source=loaded.source, variants=dict(loaded.variants or {}),
                           variant=loaded.variant or "default", origin=origin or loaded.origin,
                           path=loaded.path, revision=getattr(loaded, "revision", None))


def load_spec(spec: str, variant: str | None = None, *, revision: str | None = None,
              origin: str | None = None) -> CurrentTemplate:
    """Load a template with ``core.sources.load_template`` (path, JSON, GGUF or Hub repo id).
    Raises :class:`core.errors.TemplateLoadError` (and its Hub subclasses) with a clear message."""
    try:
        from core.sources import load_template
    except ImportError as e:
        p = pathlib.Path(spec)
        if p.suffix == ".jinja" and p.is_file():  # until core.sources lands: plain .jinja files only
            text = p.read_text(encoding="utf-8")
            return CurrentTemplate(p.name, text, {"default": text}, "default",
                                   origin or "file", str(p))
        raise EngineMissing("core.sources.load_template", e) from None
    kw: dict[str, Any] = {}
    if revision:
        kw["revision"] = revision
    return from_loaded(load_template(spec, variant, **kw), origin)


def is_repo_id(spec: str) -> bool:
    """True if ``spec`` has the shape of a Hub repo id (``org/name``, ``org/name@rev``, a huggingface.co URL)."""
    from core.sources import is_repo_id as _is_repo_id

    return _is_repo_id(spec)


def load_upload(data: bytes, filename: str, **limits: Any) -> CurrentTemplate:
    """An uploaded file's bytes through ``core.sources.load_bytes`` (format from the name / GGUF magic);
    ``limits``: ``max_bytes`` / ``max_json_bytes`` / ``max_gguf_bytes``. Raises the load error, or
    :class:`core.errors.TemplateSyntaxError` (with the line) when the template does not compile."""
    try:
        from core.sources import load_bytes
    except ImportError as e:
        raise EngineMissing("core.sources.load_bytes", e) from None
    tpl = from_loaded(load_bytes(data, filename, **limits), "upload")
    tpl.path = filename
    tpl.template()  # a Jinja syntax error is refused here (as Paste does), so it never replaces the current one
    return tpl


def bundled_names() -> list[str]:
    """File names of the bundled example templates (assets/templates/*.jinja), sorted."""
    return sorted(p.name for p in BUNDLED_DIR.glob("*.jinja"))


def load_bundled(name: str) -> CurrentTemplate:
    """A bundled example by file name. Raises :class:`core.errors.TemplateLoadError` when ``name`` is not one of
    :func:`bundled_names` (a link's ``bundled:../../etc/passwd`` must not read a server file)."""
    names = bundled_names()
    if name not in names:
        from core.errors import TemplateLoadError

        raise TemplateLoadError(name, "not one of the bundled examples (" + ", ".join(names) + ")")
    return load_spec(str(BUNDLED_DIR / name), origin="bundled")


def load_visitor_hub(spec: str, variant: str | None = None, revision: str | None = None) -> CurrentTemplate:
    """A Hub repository a visitor names (a link, the Compare page): Hub only, never a server path
    (:func:`core.sources.load_hub_spec`), with the operator's token only when the serving policy sends it.
    Raises :class:`core.errors.TemplateLoadError` (not a repo id) and the Hub errors."""
    from core.serving import policy_or_closed
    from core.sources import load_hub_spec

    policy = policy_or_closed()[0]
    return from_loaded(load_hub_spec(spec, variant, revision=revision, token=policy.hub_token), "hub")


def load_visitor_path(path_text: str, variant: str | None = None) -> CurrentTemplate:
    """A server path a visitor types or links: refused unless the operator allowed folders (``serve
    --allow-root`` / ``CTE_ALLOW_ROOTS``), and then only inside them, symlinks and ``..`` resolved first (the
    rule of the Sources and Corpus folder inputs, :func:`core.serving.confined_template_path`).
    Raises :class:`core.serving.PathNotAllowedError`."""
    from core.serving import PathNotAllowedError, confined_template_path, policy_or_closed

    policy = policy_or_closed()[0]
    if not policy.server_paths:
        raise PathNotAllowedError(path_text, "reading server files is off on this server")
    return load_spec(str(confined_template_path(path_text, policy.roots)), variant, origin="file")


def from_edit(base: CurrentTemplate | None, source: str, name: str | None = None) -> CurrentTemplate:
    """The source kind ``edited``: ``source`` as edited from ``base`` (the loaded template; None when restored
    from a link), keeping its name, variant, path and revision."""
    if base is None:
        return CurrentTemplate(name or "edited.jinja", source, {"default": source}, "default", "edited")
    return CurrentTemplate(name or base.name, source, {base.variant: source}, base.variant, "edited", base.path,
                           base.revision)


def current() -> CurrentTemplate:
    """The current template; the first time, the one the URL names (explorer.urlstate), else the default
    bundled example (works offline). The URL follows the current template."""
    from . import urlstate

    cur = st.session_state.get("template")
    if cur is None:
        cur = urlstate.restore() or load_bundled(DEFAULT_BUNDLED)
        st.session_state["template"] = cur
    urlstate.sync(cur)
    return cur


def set_current(tpl: CurrentTemplate) -> None:
    """Make ``tpl`` the current template (other state is kept per template digest)."""
    st.session_state["template"] = tpl
    st.session_state.pop("parse_result", None)


# ------------------------------------------------------------------------------------------------ analysis


def _analysis_api() -> tuple[Callable[..., Any], Callable[..., Any]]:
    try:
        from core.analysis import analyze, reapply
    except ImportError as e:
        raise EngineMissing("The analysis engine (core.analysis.analyze / reapply)", e) from None
    return analyze, reapply


FIDELITIES = ("llama.cpp", "improved")


def fidelity() -> str:
    """The session's analysis fidelity: ``"llama.cpp"`` (default: exactly llama.cpp's analysis) or
    ``"improved"`` (the engine's named improvements beyond llama.cpp)."""
    value = st.session_state.get("fidelity", FIDELITIES[0])
    return value if value in FIDELITIES else FIDELITIES[0]


@dataclass(frozen=True)
class Failed:
    """A cached engine failure: the same inputs fail the same way, so a template that hits the render time
    limit costs its wait once, not on every page that asks for its analysis or parser. Never a
    :class:`~core.isolation.WorkerLimitError` (a worker killed or out of memory, the server busy): that says
    nothing about the template, and cached it would turn every visitor away."""

    error: BaseException

    def __post_init__(self) -> None:
        # the traceback and the exception chain would keep the failed render's frames and context alive in the cache
        self.error.__traceback__ = None
        self.error.__context__ = self.error.__cause__ = None


def unwrap(value: Any) -> Any:
    """``value``, or raise the error a cached :class:`Failed` holds."""
    if isinstance(value, Failed):
        raise value.error
    return value


APP_ANALYSIS_BUDGET_S = 2.5


def app_analysis_budget() -> float | None:
    """Seconds one analysis may take in the app: :data:`APP_ANALYSIS_BUDGET_S` (a template that hits the render
    time limit costs a visitor at most this, once: the failure is cached), unless the operator set
    ``CTE_ANALYSIS_BUDGET_S`` (then ``None``: the analyzer reads it). The slowest real corpus template analyses in
    under 1 s cold."""
    return None if os.environ.get("CTE_ANALYSIS_BUDGET_S", "").strip() else APP_ANALYSIS_BUDGET_S


def _analyse(source: str, name: str, fidelity: str) -> Any:
    """The analysis (uncached): the report, a :class:`Failed` for a template's own failure, or raises a transient
    :class:`~core.isolation.WorkerLimitError`."""
    from core.analysis.isolated import analyze_isolated  # a worker process: a runaway cannot hold the server
    from core.serving import WorkKind, policy_or_closed, work_slot

    _analysis_api()
    with work_slot(WorkKind.ANALYSIS, policy_or_closed()[0].limits):  # demo mode: bounded analyses per server
        try:
            result = analyze_isolated(source, name, fidelity=fidelity, budget_s=app_analysis_budget())
        except WorkerLimitError:  # transient: not cached (st.cache_resource keeps no exception)
            raise
        except ChatTemplateExplorerError as e:  # cached: a busy server (BusyError, above) is not
            result = Failed(e)
    with _jobs_lock:
        _analysed[_analysed_key(source, name, fidelity)] = None
        while len(_analysed) > ANALYSED_MAX:
            _analysed.popitem(last=False)
    return result


@st.cache_resource(max_entries=48, show_spinner="Analysing the template…")
def _base_report(source: str, name: str, fidelity: str = FIDELITIES[0]) -> Any:
    job = take_job(("analysis", source, name, fidelity))
    if job is not None:  # started in the background by a first view (analysis_pending): its answer, once
        return job.result()  # a transient failure re-raises here, so it is not cached either
    return _analyse(source, name, fidelity)


# ------------------------------------------------------------------------------------------------ later
# Work a page shows after its first paint: the page starts it on a background thread, draws a placeholder and
# finishes its run; a small fragment reruns the page once the work is over, and the rerun takes the answer.
# A session's first view of Overview (a deep link, often on a fresh server that must first start a worker)
# painted nothing but its title until the analysis was over; Export's first view of a template waited ~2 s for
# transformers' verification.

_jobs: dict[tuple[Any, ...], "concurrent.futures.Future[Any]"] = {}
_jobs_lock = threading.Lock()
_pool: "concurrent.futures.ThreadPoolExecutor | None" = None
POLL_S = 0.25
_RAN = "_cte_ran"   # session state: this session has finished a script run


MAX_JOBS = 4       # jobs not over at once; past it a page computes in its run, as before (a visitor who keeps
#                    starting views and leaving must not queue work without end)
MAX_DONE = 16      # finished jobs nobody took (the visitor left) kept for a rerun that may still come


def start_job(key: tuple[Any, ...], work: Callable[[], Any]) -> bool:
    """Run ``work`` on a background thread under ``key`` unless a job with that key exists (sessions asking for
    the same thing share one job); False when :data:`MAX_JOBS` are running (then compute in the run). The job
    runs under this run's visitor's name (:func:`core.serving.set_visitor`), so a demo-mode slot it takes is
    that visitor's."""
    global _pool
    from core.serving import set_visitor
    from .visitor import session_id

    who = session_id()

    def job() -> Any:
        set_visitor(who)
        with preload.page_work():  # its imports must not run beside the background imports (explorer.preload)
            return work()

    with _jobs_lock:
        if key in _jobs:
            return True
        done = [k for k, j in _jobs.items() if j.done()]
        if len(_jobs) - len(done) >= MAX_JOBS:
            return False
        for k in done[:max(0, len(done) - MAX_DONE)]:
            del _jobs[k]
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="cte-later")
        _jobs[key] = _pool.submit(job)
        return True


def any_job_running() -> bool:
    """Whether some background job is not over (``app.py`` holds the background imports back until then)."""
    with _jobs_lock:
        return any(not job.done() for job in _jobs.values())


def job_running(key: tuple[Any, ...]) -> bool:
    """Whether a job with ``key`` exists and is not over."""
    with _jobs_lock:
        job = _jobs.get(key)
    return job is not None and not job.done()


def take_job(key: tuple[Any, ...]) -> "concurrent.futures.Future[Any] | None":
    """The job with ``key``, removed (its answer is the taker's to keep), or None."""
    with _jobs_lock:
        return _jobs.pop(key, None)


def main_has_spec() -> None:
    """Give the ``__main__`` module Streamlit installed for this run a spec, if it has none. Streamlit installs a
    fresh spec-less one for every run, a fragment's too, and leaves it there; ``app.py`` gives its own one a spec,
    but a fragment's run does not execute ``app.py``. A worker process started while a spec-less ``__main__`` is
    installed (by any thread: a background job, the warm-up, another session) re-runs the script file in bare
    mode before its work: "missing ScriptRunContext!" on the server console and a failed bootstrap. Every
    fragment of the explorer calls this first (:func:`fragment_started`)."""
    import importlib.machinery
    import sys

    main = sys.modules.get("__main__")
    if main is not None and getattr(main, "__spec__", None) is None:
        main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)


def fragment_started() -> None:
    """The first call of every fragment of the explorer: :func:`main_has_spec`, and the run is page code for
    :mod:`explorer.preload` (a fragment's run does not pass ``app.py``, which registers the others): its imports
    must not run beside the background imports. The registration ends with the run's thread."""
    main_has_spec()
    preload.page_started()


def rerun_when_done(key: tuple[Any, ...], note: str) -> None:
    """Draw ``note`` as the placeholder of job ``key`` and rerun the page once the job is over."""
    st.info(note, icon=":material/hourglass_top:")
    # Streamlit collects garbage after every script run, a poll's too: before explorer.preload froze the loaded
    # modules, each collection walked them all (~0.1 s of CPU, four times a second, beside the job)
    gc.freeze()

    @st.fragment(run_every=POLL_S)
    def poll() -> None:
        fragment_started()
        if not job_running(key):
            st.rerun()

    poll()


_kept: "collections.OrderedDict[tuple[Any, ...], Any]" = collections.OrderedDict()
KEPT_MAX = 64


def later(key: tuple[Any, ...], work: Callable[[], Any]) -> tuple[bool, Any]:
    """``(True, answer)`` once ``work``'s answer for ``key`` is in (the newest :data:`KEPT_MAX` are kept, shared
    by all sessions); until then ``(False, None)``, with ``work`` started in the background (:func:`start_job`;
    show :func:`rerun_when_done`). A failure is raised to the run that collects it and is not kept: the next
    ask starts the work again (a worker killed under load says nothing about the input)."""
    with _jobs_lock:
        if key in _kept:
            _kept.move_to_end(key)
            return True, _kept[key]
    if job_running(key):
        return False, None
    job = take_job(key)
    if job is None:
        if start_job(key, work):
            return False, None
        value = work()   # too many jobs running: in this run, as before
    else:
        value = job.result()
    with _jobs_lock:
        _kept[key] = value
        while len(_kept) > KEPT_MAX:
            _kept.popitem(last=False)
    return True, value


def finished_run() -> None:
    """Mark the session's first script run as done (``app.py``, after the page)."""
    st.session_state[_RAN] = True


# the templates analysed in this process (the cache may have evicted some since), by digest, the newest kept
_analysed: "collections.OrderedDict[tuple[str, str, str], None]" = collections.OrderedDict()
ANALYSED_MAX = 4096


def _analysed_key(source: str, name: str, fidelity: str) -> tuple[str, str, str]:
    return source_digest(source), name, fidelity


def analysis_pending(tpl: CurrentTemplate) -> bool:
    """On a session's first run, when this template's analysis was not made in this process yet: start it on a
    background thread (one job per key) and answer True until it is over; :func:`_base_report` takes the answer
    and caches it as one computed in the run. Any later run answers False (the page computes in the run, with
    the spinner, as before)."""
    key = (tpl.source, tpl.name, fidelity())
    job_key = ("analysis", *key)
    with _jobs_lock:
        if job_key in _jobs:
            return not _jobs[job_key].done()
    if st.session_state.get(_RAN) or _analysed_key(*key) in _analysed:
        return False
    return start_job(job_key, lambda: _analyse(*key))


def wait_for_analysis(tpl: CurrentTemplate) -> None:
    """Draw the placeholder of a pending analysis (:func:`analysis_pending`) and rerun the page when it is over."""
    rerun_when_done(("analysis", tpl.source, tpl.name, fidelity()),
                    "Analysing the template… the analysis appears here in a moment.")


@st.cache_resource(max_entries=96, show_spinner=False)
def _report(source: str, name: str, fidelity: str, disabled: tuple[str, ...], overrides_json: str) -> Any:
    base = unwrap(_base_report(source, name, fidelity))
    overrides = json.loads(overrides_json)
    if not disabled and not overrides:
        return base
    _analysis_api()
    return isolated_ops.reapply(base, disabled, overrides or None, name=name)


def overrides_for(tpl: CurrentTemplate) -> dict[str, Any]:
    """This template's overrides (field path → value), mutable, kept in the session."""
    return st.session_state.setdefault("overrides", {}).setdefault(tpl.digest, {})


def disabled_for(tpl: CurrentTemplate) -> list[str]:
    """This template's switched-off workaround names, mutable, kept in the session."""
    return st.session_state.setdefault("disabled_workarounds", {}).setdefault(tpl.digest, [])


def _key(tpl: CurrentTemplate, disabled: list[str] | None, overrides: dict[str, Any] | None
         ) -> tuple[str, str, str, tuple[str, ...], str]:
    d = tuple(sorted(disabled_for(tpl) if disabled is None else disabled))
    o = overrides_for(tpl) if overrides is None else overrides
    return tpl.source, tpl.name, fidelity(), d, json.dumps(o, sort_keys=True, ensure_ascii=False)


def automatic_report(tpl: CurrentTemplate | None = None) -> Any:
    """``core.analysis.analyze`` of the template, no overrides, all workarounds on (cached)."""
    tpl = tpl or current()
    return unwrap(_base_report(tpl.source, tpl.name, fidelity()))


def report(tpl: CurrentTemplate | None = None, *, disabled: list[str] | None = None,
           overrides: dict[str, Any] | None = None) -> Any:
    """The analysis report with this session's (or the given) disabled workarounds and overrides applied
    through ``core.analysis.reapply`` (cached). Raises the engine's errors."""
    tpl = tpl or current()
    return _report(*_key(tpl, disabled, overrides))


def route(tpl: CurrentTemplate | None = None) -> Any:
    """The route llama.cpp takes for the template (``kind``, ``handler``)."""
    tpl = tpl or current()
    try:
        from core.analysis.routing import detect_route
    except ImportError:
        try:
            from core.chat.pipeline import route_for
        except ImportError as e:
            raise EngineMissing("Route detection (core.analysis.routing)", e) from None
        return route_for(tpl.source)
    from core.jinja.cache import normalize_source

    return detect_route(normalize_source(tpl.source))


# ------------------------------------------------------------------------------------------------ request


def default_tools() -> list[dict[str, Any]]:
    """The sample tool list (assets/samples/tools.json)."""
    return json.loads((SAMPLES_DIR / "tools.json").read_text(encoding="utf-8"))


def sample_output(tpl: CurrentTemplate) -> str:
    """The bundled sample model output for a bundled template, else ""."""
    p = SAMPLES_DIR / (pathlib.Path(tpl.name.split(":")[0]).stem + ".txt")
    return p.read_text(encoding="utf-8") if tpl.origin == "bundled" and p.is_file() else ""


class Thinking(enum.Enum):
    """The Playground's ``enable_thinking`` choice. ``in_enable_thinking`` holds its flag: ``None`` for the template
    default — the request leaves the flag unset, as a request file without it does for ``python -m core``: llama.cpp
    renders with true, and at improved fidelity the repair ``template-default-thinking`` may render with the
    template's own default instead — else ``True`` / ``False``."""

    TEMPLATE_DEFAULT = "template default"
    ON = "on"
    OFF = "off"

    @property
    def flag(self) -> bool | None:
        return {Thinking.ON: True, Thinking.OFF: False}.get(self)

    @classmethod
    def of(cls, flag: Any) -> "Thinking":
        """The choice of a request's ``enable_thinking`` (``None``: unset)."""
        return cls.TEMPLATE_DEFAULT if flag is None else cls.ON if flag else cls.OFF


THINKING_KEY = "in_enable_thinking"
THINKING_WIDGET = "in_thinking_choice"


def sync_thinking_widget() -> None:
    """Before the Playground draws its ``enable_thinking`` choice: show the flag the session holds (a link, a fix or
    a test may have set it since the last run)."""
    st.session_state[THINKING_WIDGET] = Thinking.of(st.session_state.get(THINKING_KEY)).value


def thinking_chosen() -> None:
    """``on_change`` of the ``enable_thinking`` choice: keep its flag."""
    st.session_state[THINKING_KEY] = Thinking(st.session_state[THINKING_WIDGET]).flag


def request_dict() -> dict[str, Any]:
    """The request settings of the playground (shared with the grammar and overrides pages) as a
    ``reference/cases.jsonl``-shaped dict. Raises :class:`core.errors.RequestError` for bad JSON."""
    from core.errors import RequestError

    from core.serving import policy_or_closed

    cap = policy_or_closed()[0].limits.max_text_chars

    def parse_json(key: str, what: str, fallback: str) -> Any:
        text = st.session_state.get(key, fallback)
        if cap is not None and len(text) > cap:
            raise RequestError(what, f"is {len(text):,} characters, over this server's {cap:,}-character cap "
                                     "(limit: paste size)")
        try:
            return json.loads(text) if text.strip() else None
        except json.JSONDecodeError as e:
            raise RequestError(what, f"is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
        except RecursionError:
            raise RequestError(what, "nests too deeply to read as JSON") from None

    tools = parse_json("in_tools", "tools", json.dumps(default_tools(), indent=2))
    messages = parse_json("in_messages", "messages", json.dumps(DEFAULT_MESSAGES, indent=2))
    kwargs = parse_json("in_kwargs", "chat_template_kwargs", "")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise RequestError("chat_template_kwargs", "must be a JSON object, e.g. {\"thinking\": false}")
    req = {
        "messages": messages or [],
        "tools": tools or None,
        "tool_choice": st.session_state.get("in_tool_choice", "auto"),
        "parallel_tool_calls": bool(st.session_state.get("in_parallel", False)),
        "reasoning_format": st.session_state.get("in_reasoning_format", "auto"),
        "enable_thinking": Thinking.of(st.session_state.get(THINKING_KEY)).flag,   # None: unset
        "add_generation_prompt": True,
    }
    if kwargs:  # a report's request often carries them (Kimi K3's thinking, Cohere's reasoning): kept as given
        req["chat_template_kwargs"] = kwargs
    return req


DEFAULT_MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def _request_api() -> tuple[Any, Any]:
    try:
        from core.chat.pipeline import build_chat_parser
        from core.chat.request import ChatRequest
    except ImportError as e:
        raise EngineMissing("The parser pipeline (core.chat.pipeline.build_chat_parser)", e) from None
    return build_chat_parser, ChatRequest


@st.cache_resource(max_entries=64, show_spinner="Building the parser…")
def _bundle(source: str, name: str, fidelity: str, disabled: tuple[str, ...], overrides_json: str,
            request_json: str) -> Any:
    _request_api()
    rep = _report(source, name, fidelity, disabled, overrides_json)
    recipe = isolated_ops.ParserRecipe(source, name, request_json, rep, key=(fidelity, disabled, overrides_json))
    try:  # a ParserBundleView: the prompt rendered and the parser built in a worker, which parses for it
        return isolated_ops.parser_bundle(recipe)
    except WorkerLimitError:  # transient: not cached
        raise
    except ChatTemplateExplorerError as e:  # e.g. the prompt render hit the time limit: fail once
        return Failed(e)


def parser_bundle(tpl: CurrentTemplate | None = None, request: dict[str, Any] | None = None, *,
                  disabled: list[str] | None = None, overrides: dict[str, Any] | None = None) -> Any:
    """``build_chat_parser`` for the template and request (default: the playground settings), with the
    session's overrides (cached). Returns a ``ChatParserBundle`` (parser, prompt, generation_prompt, route,
    format). Raises the engine's errors."""
    tpl = tpl or current()
    request = request_dict() if request is None else request
    from core.chat.request import ChatRequest

    ChatRequest.from_dict(request)  # validate before caching (clear RequestError)
    return unwrap(_bundle(*_key(tpl, disabled, overrides),
                          json.dumps(request, ensure_ascii=False)))


# ------------------------------------------------------------------------------------------------ samples


def rendered_sample(tpl: CurrentTemplate, request: dict[str, Any], message: dict[str, Any]) -> str:
    """What a model following the template would write for ``message`` (an assistant message) after the
    conversation of ``request``: :func:`core.chat.roundtrip.sample_output` — the render with ``message``
    appended, after the render that ends with the generation prompt, minus the end-of-turn text the template
    writes (derived from renders). Raises render/request errors."""
    return isolated_ops.sample_output(tpl.source, tpl.name, request, message)


def sample_message(tools: list[dict[str, Any]] | None, *, reasoning: bool = True, content: bool = True,
                   calls: int = 1) -> dict[str, Any]:
    """An assistant message to render as a sample: reasoning, content and ``calls`` tool calls of the first
    tool (arguments filled from its schema: strings "Paris", integers 2, numbers 1.5, booleans true)."""
    msg: dict[str, Any] = {"role": "assistant", "content": "Here is what I found." if content else ""}
    if reasoning:
        msg["reasoning_content"] = "The user asked a question; I will answer it."
    if tools and calls:
        fn = tools[0].get("function", {})
        props = (fn.get("parameters") or {}).get("properties") or {}
        fill = {"string": "Paris", "integer": 2, "number": 1.5, "boolean": True, "array": [], "object": {}}
        args = {k: fill.get((v or {}).get("type"), "x") for k, v in props.items()}
        msg["tool_calls"] = [{"id": f"call_{i + 1}", "type": "function",
                              "function": {"name": fn.get("name", "tool"), "arguments": args}}
                             for i in range(calls)]
    return msg


# ------------------------------------------------------------------------------------------------ parses


# cache_resource, not cache_data: results are read-only here, and copying a 1 MB parse on every redraw
# (cache_data pickles) was most of a redraw's time
@st.cache_resource(max_entries=16, show_spinner=False)
def _parsed(source: str, name: str, fidelity: str, disabled: tuple[str, ...], overrides_json: str,
            request_json: str, output: str, partial: bool) -> tuple[dict[str, Any], tuple[Any, ...]]:
    bundle = unwrap(_bundle(source, name, fidelity, disabled, overrides_json, request_json))
    return isolated_ops.parse_openai(bundle.parser.recipe, output, partial)


def _parse_result(tpl: CurrentTemplate, request: dict[str, Any], output: str,
                  partial: bool) -> tuple[dict[str, Any], tuple[Any, ...]]:
    parser_bundle(tpl, request)  # validates the request, builds (or reuses) the parser
    return _parsed(*_key(tpl, None, None), json.dumps(request, ensure_ascii=False), output,
                   partial)


def parsed_message(tpl: CurrentTemplate, request: dict[str, Any], output: str, partial: bool) -> dict[str, Any]:
    """The OpenAI message the parser for ``tpl`` / ``request`` (session overrides applied) makes of
    ``output``; cached per (template, overrides, request, output), so a redraw never parses again."""
    return _parse_result(tpl, request, output, partial)[0]


def parsed_repairs(tpl: CurrentTemplate, request: dict[str, Any], output: str, partial: bool) -> tuple[Any, ...]:
    """The :class:`core.chat.repairs.FiredRepair` entries of the same (cached) parse as :func:`parsed_message`:
    which repairs settled it and where; empty for a clean parse."""
    return _parse_result(tpl, request, output, partial)[1]


# the replay is computed in a worker, with the parser built there (core.isolated_ops)
REPLAY_STEPS = isolated_ops.REPLAY_STEPS
Replay = isolated_ops.Replay
replay_pieces = isolated_ops.replay_pieces


@st.cache_resource(max_entries=8, show_spinner="Streaming the output through the parser…")
def _replay(source: str, name: str, fidelity: str, disabled: tuple[str, ...], overrides_json: str,
            request_json: str, output: str, partial: bool) -> Replay:
    bundle = unwrap(_bundle(source, name, fidelity, disabled, overrides_json, request_json))
    return isolated_ops.stream_replay(bundle.parser.recipe, output, partial)


def replay(tpl: CurrentTemplate, request: dict[str, Any], output: str, partial: bool) -> Replay:
    """The streaming replay of ``output`` (see :class:`Replay`), cached like :func:`parsed_message`."""
    parser_bundle(tpl, request)
    return _replay(*_key(tpl, None, None), json.dumps(request, ensure_ascii=False), output,
                   partial)
