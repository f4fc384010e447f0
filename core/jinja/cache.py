"""The compiled-template store: Python code of a template compiled once, kept in memory and on disk
(:mod:`core.codepack`, one append-only store), so a template seen once is never lexed or parsed again; the parse
log that lets a later process skip a syntax check; source digests and the normalised source.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import pathlib
import sys
import threading
import time
from typing import Any

import jinja2

from .. import codepack
from .. import memo as _memo
from ..errors import TemplateSyntaxError
from . import hf as _hf
from . import sandbox as _sandbox
from .hf import ENV
from .limits import env_number
from .sandbox import keep_parsed, parses_alike


#: Bytes the compiled-code disk cache may hold; the oldest files are removed beyond it (``$CTE_CACHE_MAX_BYTES``).
DISK_CACHE_MAX_BYTES = env_number("CTE_CACHE_MAX_BYTES", 256 * 1024 * 1024)
#: Sources longer than this are compiled but not written to the disk cache (compiled code is ~40x the source).
DISK_CACHE_MAX_SOURCE = 100_000


def normalize_source(source: str) -> str:
    """Source as llama.cpp's lexer sees it: CRLF and lone CR become LF, one trailing ``\\n`` removed.
    All substring tests (workarounds, handler detection) use this form."""
    s = source.replace("\r\n", "\n").replace("\r", "\n")
    return s[:-1] if s.endswith("\n") else s


# Bump when the code generator or environment changes what compiled code looks like (edits of the sandbox and of
# the dialect are picked up automatically: their digests are part of every cache key).
_CODEGEN_VERSION = "4"


def _disk_cache_dir() -> pathlib.Path | None:
    """Where compiled templates persist across restarts: ``$CTE_CACHE_DIR`` or ``~/.cache/chat-template-explorer``;
    ``CTE_NO_DISK_CACHE=1`` disables it."""
    if os.environ.get("CTE_NO_DISK_CACHE") == "1":
        return None
    base = os.environ.get("CTE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chat-template-explorer")
    return pathlib.Path(base) / "jinja"


@functools.lru_cache(maxsize=None)
def module_digest(path: str) -> str:
    """sha256 prefix of a source file's bytes ("" if unreadable): part of compiled-code cache keys, so editing
    a module that shapes code generation (this one, an AST rewriter) invalidates what it compiled."""
    try:
        return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def _own_digest() -> str:
    """Digests of the modules that shape the project environment's code generation (the sandbox's code
    generator, the dialect's extensions and ``finalize``)."""
    return module_digest(_sandbox.__file__) + module_digest(_hf.__file__)


def _cache_hash(source: str, env_tag: str = "") -> Any:
    tag = f"{_CODEGEN_VERSION}|{jinja2.__version__}|{sys.version_info[:2]}|{_own_digest()}|{env_tag}|".encode()
    return hashlib.sha256(tag + source.encode("utf-8", "surrogatepass"))


def _cache_key(source: str, env_tag: str = "") -> str:
    return _cache_hash(source, env_tag).hexdigest()


_CODE_MEMO: "dict[tuple[str, str], Any]" = {}
_CODE_MEMO_MAX = 1024


def compiled_code(env: jinja2.Environment, source: str, env_tag: str = "") -> Any:
    """Python code object of ``source`` compiled by ``env`` (jinja2 ``Environment.compile``), memoized in
    memory and in the disk cache (see :func:`_disk_cache_dir`; stored by :mod:`core.codepack`) under
    ``env_tag`` — a string naming the environment's code-generation configuration (and a digest of any module
    that customises parsing or code generation). Loading marshalled code is ~10x cheaper than jinja2's compile
    (lexing, parsing, code generation, Python ``compile``). Raises ``jinja2.TemplateSyntaxError`` (and ``RecursionError``) as
    ``env.compile`` does; failures are not cached."""
    key = (env_tag, source)
    code = _CODE_MEMO.get(key)
    if code is not None:
        return code
    directory = _disk_cache_dir()
    pack = codepack.pack_for(str(directory)) if directory is not None else None
    digest = _cache_hash(source, env_tag).digest() if pack is not None else b""
    if pack is not None:
        data = pack.get(digest)
        if data is not None:
            try:
                code = marshal.loads(data)
            except (ValueError, EOFError, TypeError):
                code = None
    if code is None:
        code = env.compile(source)
        if pack is not None and len(source) <= DISK_CACHE_MAX_SOURCE:
            try:
                data = marshal.dumps(code)
                try:
                    pack.put(digest, data)
                except FileNotFoundError:  # the first entry of a new cache directory
                    os.makedirs(directory, exist_ok=True)
                    pack.put(digest, data)
                _note_disk_write(directory)
                if parses_alike(env, ENV):  # lets check_syntax of a later process skip its parse
                    _note_parsed(directory, source)
            except OSError:
                pass  # a read-only or full cache only costs speed
    if len(_CODE_MEMO) >= _CODE_MEMO_MAX:
        _CODE_MEMO.pop(next(iter(_CODE_MEMO)))
    _CODE_MEMO[key] = code
    return code


_disk_writes = 0


def _note_disk_write(directory: pathlib.Path) -> None:
    """Prune the disk cache on the first write of the process and every 32nd after it."""
    global _disk_writes
    if _disk_writes % 32 == 0:
        prune_disk_cache(directory, DISK_CACHE_MAX_BYTES)
    _disk_writes += 1


def prune_disk_cache(directory: pathlib.Path | None = None, max_bytes: int | None = None) -> int:
    """Delete the least recently written compiled-code files of ``directory`` (default: the disk cache)
    until its code store (:mod:`core.codepack`: pack and index, removed together) and parse log
    (:data:`PARSED_LOG`) take at most ``max_bytes`` (default :data:`DISK_CACHE_MAX_BYTES`); deletes the
    ``*.bin`` files and ``*.ok`` syntax markers older versions wrote (one per template, no longer read) and
    leftover ``*.tmp`` files older than an hour. Returns the number of files removed; never raises."""
    directory = directory or _disk_cache_dir()
    limit = DISK_CACHE_MAX_BYTES if max_bytes is None else max_bytes
    if directory is None:
        return 0
    removed = 0
    try:
        entries = []
        now = time.time()
        for e in os.scandir(directory):
            st = e.stat()
            if e.name.endswith(".tmp") and now - st.st_mtime > 3600:
                os.unlink(e.path)
                removed += 1
            elif e.name.endswith((".bin", ".ok")):  # what older versions wrote, one file per template: never read
                with contextlib.suppress(FileNotFoundError):  # now, and scanning thousands of them slows every prune
                    os.unlink(e.path)
                    removed += 1
            elif e.name == PARSED_LOG:
                entries.append((st.st_mtime, st.st_size, e.path))
            elif e.name == codepack.PACK:  # the code store goes as a whole, with its index
                index = os.path.join(directory, codepack.INDEX)
                entries.append((st.st_mtime, st.st_size + (os.path.getsize(index) if os.path.exists(index) else 0),
                                e.path, index))
        total = sum(e[1] for e in entries)
        for _, size, *paths in sorted(entries):
            if total <= limit:
                break
            for p in paths:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)
                    removed += 1
            total -= size
    except OSError:
        pass
    return removed


#: Append-only list of the sources known to parse (one digest a line) in the disk cache directory: the analysis
#: only compiles with its probe environment, whose entries :func:`check_syntax` cannot name without importing the
#: analysis. Appending a line costs a few µs, a marker file per template ~0.5 ms of system time.
PARSED_LOG = "parsed.log"
_PARSED_LOG_MAX_BYTES = 4 * 1024 * 1024  # ~120k sources; past it the list starts over (costs only re-parses)
_parsed_known: "dict[str, set[str]]" = {}  # directory -> digests read from its log (and appended by us)
_parsed_lock = threading.Lock()


def _parsed_digest(source: str) -> str:
    return _cache_key(source, "parsed")[:32]


def _parsed_set(directory: pathlib.Path) -> "set[str]":
    """The digests of ``directory``'s parse log, read once per process (a source that parsed always parses,
    so an entry never goes stale; one appended by another process later is only a missed shortcut)."""
    key = str(directory)
    known = _parsed_known.get(key)
    if known is None:
        try:
            with open(os.path.join(key, PARSED_LOG), "rb") as f:
                known = {line.decode("ascii", "replace") for line in f.read().split(b"\n") if len(line) == 32}
        except OSError:
            known = set()
        with _parsed_lock:
            known = _parsed_known.setdefault(key, known)
    return known


def _is_parsed(directory: pathlib.Path, source: str) -> bool:
    """True when ``directory``'s parse log lists ``source``."""
    return _parsed_digest(source) in _parsed_set(directory)


def _note_parsed(directory: pathlib.Path, source: str) -> None:
    """Append ``source``'s digest to ``directory``'s parse log (one ``write`` of 33 bytes with ``O_APPEND``, so
    lines of concurrent writers do not interleave). Raises ``OSError`` as the file system does."""
    digest = _parsed_digest(source)
    known = _parsed_set(directory)
    if digest in known:
        return
    path = os.path.join(directory, PARSED_LOG)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size > _PARSED_LOG_MAX_BYTES:
            os.ftruncate(fd, 0)
        os.write(fd, digest.encode("ascii") + b"\n")
    finally:
        os.close(fd)
    known.add(digest)


def template_from_code(env: jinja2.Environment, code: Any) -> jinja2.Template:
    """A jinja2 ``Template`` of ``env`` running ``code`` (from :func:`compiled_code`)."""
    return env.template_class.from_code(env, code, env.make_globals(None), None)


@functools.lru_cache(maxsize=1024)
def check_syntax(source: str, name: str) -> None:
    """Raise :class:`TemplateSyntaxError` if ``source`` does not parse. Skipped when compiled code for it is
    already memoized or on disk (it parsed before); otherwise the tree is kept for the first compile (one
    parse per template, see ``_LimitedSandbox._parse``). Errors found only by code generation (an unknown filter)
    surface at the first render, as the same error class."""
    if ("", source) in _CODE_MEMO:
        return
    directory = _disk_cache_dir()
    if directory is not None and (_is_parsed(directory, source)
                                  or codepack.pack_for(str(directory)).has(_cache_hash(source).digest())):
        return
    try:
        node = ENV.parse_raw(source, name)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateSyntaxError(name, e.message or str(e), e.lineno) from None
    except RecursionError:
        raise TemplateSyntaxError(name, "template nests too deeply to parse") from None
    keep_parsed(ENV, source, node)


# compiled templates and parsed trees, bounded in number; emptied by core.memo.clear_caches
_memo.register_cache("compiled code", _CODE_MEMO.clear)
_memo.register_cache("syntax checks", check_syntax.cache_clear)


_memo.register_cache("parse logs read", _parsed_known.clear)  # read again on next use
