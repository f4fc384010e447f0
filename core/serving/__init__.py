"""How the app may be served: which server folders a browser user may read, and the demo mode's caps.

Whoever starts the app decides; a visitor cannot change it. Two settings, read from the environment at call
time (``python -m core serve`` sets them from its flags):

* ``CTE_ALLOW_ROOTS`` — folders (separated by ``os.pathsep``) whose templates the app may read when a browser
  user types a path (Sources → Local folder, Corpus folder). Unset or empty: **no server path is read at all**
  and the app shows no path input; uploads, the Hub and the bundled examples work as before.
* ``CTE_DEMO=1`` — public demo: smaller paste/upload caps, at most :attr:`Limits.max_analyses` analyses and
  :attr:`Limits.max_corpus_runs` corpus runs at once per server process, and the Hub never sends the operator's
  ``HF_TOKEN`` for a repo a visitor names.

A typed path is resolved first (``~``, ``..`` and every symlink, as :func:`os.path.realpath` does) and accepted
only when the result lies inside one of the resolved roots. Outside them nothing is opened or listed, and a refusal
names only the text as typed, so it says nothing about what exists there. All functions here are pure apart from
reading the file system and the process-wide work slots.
"""

from __future__ import annotations

import contextlib
import enum
import os
import pathlib
import re
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from ..errors import ChatTemplateExplorerError
from ..sources import ADDITIONAL_TEMPLATES_DIR, HUB_TEMPLATE_FILES

__all__ = [
    "ENV_DEMO",
    "ENV_ROOTS",
    "BusyError",
    "DEMO_LIMITS",
    "Limits",
    "Mode",
    "PathNotAllowedError",
    "PER_VISITOR_SLOTS",
    "VisitorBusyError",
    "current_visitor",
    "redact_paths",
    "set_visitor",
    "ServingConfigError",
    "ServingPolicy",
    "WorkKind",
    "confine",
    "confined_entries",
    "confined_template_path",
    "is_within",
    "parse_roots",
    "policy_from_env",
    "policy_or_closed",
    "work_slot",
]

ENV_ROOTS = "CTE_ALLOW_ROOTS"
ENV_DEMO = "CTE_DEMO"


class ServingConfigError(ChatTemplateExplorerError):
    """The operator's settings are wrong (a root that is not a folder, a bad ``CTE_DEMO`` value)."""

    def __init__(self, setting: str, reason: str):
        self.setting = setting
        self.reason = reason
        super().__init__(f"{setting}: {reason}")


class PathNotAllowedError(ChatTemplateExplorerError):
    """A path typed in the browser is outside the allowed roots, or server paths are off. ``path`` is the
    text as typed (never the resolved target, which would tell a visitor where a symlink points)."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path!r} cannot be read: {reason}")


class BusyError(ChatTemplateExplorerError):
    """Every work slot of a kind is taken (demo mode); ``kind`` is the :class:`WorkKind`, ``limit`` the bound."""

    def __init__(self, kind: "WorkKind", limit: int, waited: float):
        self.kind = kind
        self.limit = limit
        noun = kind.value if limit == 1 else {WorkKind.ANALYSIS: "analyses"}.get(kind, kind.value + "s")
        super().__init__(f"the server is busy: {limit} {noun} already running "
                         f"(the demo's limit; waited {waited:g} s); try again in a moment")


class Mode(enum.Enum):
    """``LOCAL``: the engine's own limits, the operator's Hub token used. ``DEMO``: public demo caps."""

    LOCAL = "local"
    DEMO = "demo"


class WorkKind(enum.Enum):
    """What a work slot bounds (the value is the noun used in :class:`BusyError`'s message)."""

    ANALYSIS = "analysis"
    CORPUS = "corpus run"


@dataclass(frozen=True)
class Limits:
    """Per-session caps, in bytes / characters / counts; ``None`` = no cap beyond the engine's own.

    ``max_paste_bytes``: pasted template text (UTF-8 bytes); ``max_text_chars``: other text boxes (model output,
    tools / messages JSON, imported overrides); ``max_template_upload`` / ``max_json_upload`` /
    ``max_gguf_upload``: uploaded ``.jinja`` / ``.json`` / ``.gguf`` files; ``max_analyses`` /
    ``max_corpus_runs``: at once per server process; ``wait_seconds``: how long a request waits for a slot
    before :class:`BusyError`; ``max_line_chars``: one-line inputs (repo ids, revisions, names, patterns).
    """

    max_paste_bytes: int | None = None
    max_text_chars: int | None = None
    max_template_upload: int | None = None
    max_json_upload: int | None = None
    max_gguf_upload: int | None = None
    max_analyses: int | None = None
    max_corpus_runs: int | None = None
    wait_seconds: float = 0.0
    max_line_chars: int | None = None


#: Public demo caps. Real templates are at most ~40 KB (the largest of 351 in ../shared/templates), a
#: tokenizer_config.json with its added tokens a few MB; a model output worth exploring fits in 256 KB.
DEMO_LIMITS = Limits(max_paste_bytes=256 * 1024, max_text_chars=256 * 1024, max_template_upload=256 * 1024,
                     max_json_upload=8 * 1024 * 1024, max_gguf_upload=16 * 1024 * 1024, max_analyses=2,
                     max_corpus_runs=1, wait_seconds=5.0, max_line_chars=1024)


@dataclass(frozen=True)
class ServingPolicy:
    """The operator's choices: ``roots`` (resolved allowed folders; empty = no server path is read),
    ``mode`` and its ``limits``."""

    roots: tuple[pathlib.Path, ...] = ()
    mode: Mode = Mode.LOCAL
    limits: Limits = Limits()

    @property
    def server_paths(self) -> bool:
        """True when a browser user may type a server path at all."""
        return bool(self.roots)

    @property
    def send_hub_token(self) -> bool:
        """Whether the Hub source may send the operator's token (``HF_TOKEN`` / stored login): never in demo mode,
        where the repo id comes from a visitor."""
        return self.mode is Mode.LOCAL

    @property
    def hub_token(self) -> bool | None:
        """The ``token`` argument for :func:`core.sources.load_hub`: ``False`` (send none) in demo mode, else
        ``None`` (huggingface_hub's usual lookup)."""
        return None if self.send_hub_token else False


def parse_roots(text: str | Sequence[str], setting: str = ENV_ROOTS) -> tuple[pathlib.Path, ...]:
    """Resolved, de-duplicated allowed roots from ``os.pathsep``-separated text (or a list of paths).

    Each must be an existing folder; raises :class:`ServingConfigError` naming ``setting`` (the variable or
    flag the value came from) and the first root that is not.
    """
    parts = text.split(os.pathsep) if isinstance(text, str) else list(text)
    out: list[pathlib.Path] = []
    for raw in parts:
        raw = raw.strip()
        if not raw:
            continue
        if "\x00" in raw:
            raise ServingConfigError(setting, f"{raw!r} contains a NUL character")
        p = pathlib.Path(os.path.realpath(os.path.expanduser(raw)))
        if not p.is_dir():
            raise ServingConfigError(setting, f"{raw!r} is not an existing folder")
        if p not in out:
            out.append(p)
    return tuple(out)


def _env_flag(environ: Mapping[str, str], name: str) -> bool:
    value = environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ServingConfigError(name, f"expected 1 or 0, got {value!r}")


def policy_from_env(environ: Mapping[str, str] | None = None) -> ServingPolicy:
    """The policy set by ``CTE_ALLOW_ROOTS`` and ``CTE_DEMO`` in ``environ`` (default: ``os.environ``).

    Raises :class:`ServingConfigError` for a root that is not a folder or a ``CTE_DEMO`` that is not a
    yes/no value; a caller that cannot stop (the app) should then fall back to ``ServingPolicy()`` plus demo caps.
    """
    env = os.environ if environ is None else environ
    demo = _env_flag(env, ENV_DEMO)
    roots = parse_roots(env.get(ENV_ROOTS, ""))
    return ServingPolicy(roots, Mode.DEMO if demo else Mode.LOCAL, DEMO_LIMITS if demo else Limits())


def policy_or_closed(environ: Mapping[str, str] | None = None
                     ) -> tuple[ServingPolicy, ServingConfigError | None]:
    """:func:`policy_from_env`, or — when the settings are wrong — the closed policy (no server paths, demo caps)
    with the error, for a caller that must keep serving (the app shows the error and stays on the safe side)."""
    try:
        return policy_from_env(environ), None
    except ServingConfigError as e:
        return ServingPolicy((), Mode.DEMO, DEMO_LIMITS), e


def is_within(path: pathlib.Path, roots: Sequence[pathlib.Path]) -> bool:
    """True if the already-resolved ``path`` is one of ``roots`` or below one (component-wise, so
    ``/data2`` is not inside ``/data``)."""
    return any(path == r or r in path.parents for r in roots)


def _resolve(text: str) -> pathlib.Path:
    return pathlib.Path(os.path.realpath(os.path.expanduser(text)))


def confine(path_text: str, roots: Sequence[pathlib.Path]) -> pathlib.Path:
    """The resolved path of ``path_text`` (symlinks, ``..`` and ``~`` followed), if it lies inside ``roots``.

    Raises :class:`PathNotAllowedError` when ``roots`` is empty (server paths are off), the text is empty or
    holds a NUL, or the resolved path is outside every root. Nothing is read; the path need not exist.
    """
    if not roots:
        raise PathNotAllowedError(path_text, "reading server folders is off (the operator can allow folders with "
                                             f"`python -m core serve --allow-root DIR` or {ENV_ROOTS})")
    if not isinstance(path_text, str) or not path_text.strip():
        raise PathNotAllowedError(str(path_text), "no folder given")
    if "\x00" in path_text:
        raise PathNotAllowedError(path_text, "the path contains a NUL character")
    resolved = _resolve(path_text.strip())
    if not is_within(resolved, roots):
        allowed = ", ".join(str(r) for r in roots)
        raise PathNotAllowedError(path_text, f"it is outside the allowed folders ({allowed}); links and '..' are "
                                             "followed before this check")
    return resolved


def confined_entries(folder: pathlib.Path, roots: Sequence[pathlib.Path], suffixes: Sequence[str]
                     ) -> list[pathlib.Path]:
    """The entries of the confined ``folder`` a user may pick, sorted by name: files with one of ``suffixes``
    and model folders (holding a chat_template.jinja / .json or tokenizer_config.json), each kept only when its
    resolved target is inside ``roots`` (a symlink out of a root is left out, never followed further).

    Returns the entries as listed (not resolved), so names stay the ones the user sees. Raises ``OSError``
    when the folder cannot be listed.
    """
    out: list[pathlib.Path] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        target = pathlib.Path(os.path.realpath(entry))
        if not is_within(target, roots):
            continue
        if target.is_file() and entry.suffix.lower() in suffixes:
            out.append(entry)
        elif target.is_dir() and any(is_within(pathlib.Path(os.path.realpath(target / f)), roots)
                                     and (target / f).is_file() for f in HUB_TEMPLATE_FILES):
            out.append(entry)
    return out


def confined_template_path(path_text: str, roots: Sequence[pathlib.Path]) -> pathlib.Path:
    """:func:`confine`, and for a model folder also every file the loader would read in it (its template files
    and ``additional_chat_templates/*.jinja``): each must resolve inside ``roots``.

    Returns the resolved path to hand to :func:`core.sources.load_file`. Raises :class:`PathNotAllowedError`.
    """
    resolved = confine(path_text, roots)
    if resolved.is_dir():
        inner = [resolved / f for f in HUB_TEMPLATE_FILES]
        extra = resolved / ADDITIONAL_TEMPLATES_DIR
        inner.append(extra)
        if is_within(pathlib.Path(os.path.realpath(extra)), roots) and extra.is_dir():
            inner += sorted(extra.glob("*.jinja"))
        for f in inner:  # lexists: a dangling or outside link is caught without following it
            if os.path.lexists(f) and not is_within(pathlib.Path(os.path.realpath(f)), roots):
                raise PathNotAllowedError(path_text, f"{f.relative_to(resolved)} in this folder links outside the "
                                                     "allowed folders")
    return resolved


# ---------------------------------------------------------------------------------------------- work slots

_SLOTS: dict[tuple[WorkKind, int], threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()
_HELD: dict[tuple[WorkKind, str], int] = {}   # (kind, visitor) -> slots in flight
_visitor = threading.local()

#: slots of one kind one visitor may hold at once (demo mode): with the demo's two analysis slots, one visitor
#: holding both turned every other visitor away
PER_VISITOR_SLOTS = 1


class VisitorBusyError(BusyError):
    """This visitor already holds :data:`PER_VISITOR_SLOTS` slots of the kind (demo mode)."""

    def __init__(self, kind: "WorkKind", limit: int):
        self.kind = kind
        self.limit = limit
        self.waited = 0.0
        noun = kind.value if limit == 1 else {WorkKind.ANALYSIS: "analyses"}.get(kind, kind.value + "s")
        ChatTemplateExplorerError.__init__(
            self, f"you already have {limit} {noun} running on this server (the demo's limit per visitor); "
                  "wait for it to finish")


def set_visitor(visitor: str | None) -> None:
    """Name the visitor whose work this thread does next (the app: the browser session, at the start of each
    script run); :func:`work_slot` then holds at most :data:`PER_VISITOR_SLOTS` per visitor in demo mode."""
    _visitor.id = visitor


def current_visitor() -> str | None:
    """The visitor :func:`set_visitor` named on this thread, or None."""
    return getattr(_visitor, "id", None)


def _semaphore(kind: WorkKind, limit: int) -> threading.BoundedSemaphore:
    with _SLOTS_LOCK:
        sem = _SLOTS.get((kind, limit))
        if sem is None:
            sem = _SLOTS[(kind, limit)] = threading.BoundedSemaphore(limit)
        return sem


@contextlib.contextmanager
def work_slot(kind: WorkKind, limits: Limits) -> Iterator[None]:
    """Hold one of the process-wide slots of ``kind`` for the ``with`` body (no bound when the limit is None).

    Waits up to ``limits.wait_seconds`` for a free slot, then raises :class:`BusyError` (a one-line message
    for the visitor). Slots are per server process and shared by every session; a visitor named with
    :func:`set_visitor` holds at most :data:`PER_VISITOR_SLOTS` of a kind at once (a request past it waits for
    the visitor's own slot, as long, then :class:`VisitorBusyError`), so one visitor cannot take every slot.
    """
    limit = limits.max_analyses if kind is WorkKind.ANALYSIS else limits.max_corpus_runs
    if limit is None:
        yield
        return
    who = current_visitor()
    key = (kind, who or "")
    if who is not None:
        # the visitor's own earlier work (a rerun that Streamlit stopped while its analysis went on) is waited
        # for as a busy server is; past the wait the visitor is told, and the other slots stay free
        deadline = time.monotonic() + max(0.0, limits.wait_seconds)
        while True:
            with _SLOTS_LOCK:
                if _HELD.get(key, 0) < PER_VISITOR_SLOTS:
                    _HELD[key] = _HELD.get(key, 0) + 1
                    break
            if time.monotonic() >= deadline:
                raise VisitorBusyError(kind, PER_VISITOR_SLOTS)
            time.sleep(0.05)
    try:
        sem = _semaphore(kind, limit)
        if not sem.acquire(timeout=max(0.0, limits.wait_seconds)):
            raise BusyError(kind, limit, limits.wait_seconds)
        try:
            yield
        finally:
            sem.release()
    finally:
        if who is not None:
            with _SLOTS_LOCK:
                left = _HELD.get(key, 1) - 1
                if left > 0:
                    _HELD[key] = left
                else:
                    _HELD.pop(key, None)


# ---------------------------------------------------------------------------------------------- visitor text

# an absolute server path: /a/b…, ~/a…, C:\a\… (two components at least, so "and/or" or "1/2" stay); not the
# path of a URL (after "//host" or a word character) nor a Hub repo id (org/name has no leading slash)
# (one component per repetition, slashes excluded inside it: linear time)
_PATH_CHARS = r"[^\s'\"`,;:()\[\]<>|/\\]"
# A path starts after anything but a name character, a dot, a slash or "~" (a URL's path follows its host, so
# it is kept; after a bare ":" it is a path: "x.jinja:/home/op/x"); "file://" and a UNC "\\\\" prefix belong to
# it; a component may hold single spaces when a separator follows ("/home/my user/.cache").
_PATH = re.compile(rf"(?<![\w./\\~-])(?:file://|\\(?=\\))?(?:~|[A-Za-z]:)?"
                   rf"(?:[/\\][\w.@+=-]{_PATH_CHARS}*(?: {_PATH_CHARS}+(?=[/\\]))*){{2,}}")


def redact_paths(text: str) -> str:
    """``text`` with every absolute file path (``/home/op/.cache/huggingface/…``, ``~/x/y``, ``C:\\x\\y``)
    replaced by ``<server path>``: what a demo visitor is shown of an error (the operator's cache folder, the
    app's install folder and the like are not the visitor's business). URLs and Hub repo ids are kept."""
    return _PATH.sub("<server path>", text)
