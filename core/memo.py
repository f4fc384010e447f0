"""Bounded memos of plain data, shared by the analysis stages (renders, capability probes, diffs, pattern
matches).

A :class:`BoundedMemo` is an LRU mapping bounded both by its number of entries and by an estimate of the
bytes its keys and values hold (``str`` length for text, the caller's estimate otherwise), so a corpus pass
fits while one huge template cannot grow the process without bound. Only plain data goes in (strings,
tuples, frozen dataclasses, numbers): never an exception object or a render context, which would keep a
render's variables alive.

Every memo registers itself by name; :func:`memo_stats` reports them all and :func:`clear_memos` empties
them (benchmarks of cold analysis, tests that compare cached with uncached results). Caches of other shapes
(compiled templates in ``functools.lru_cache``s, parsed trees, analyses kept by the chat pipeline) register a
clearing function with :func:`register_cache`; :func:`clear_caches` empties all of it and hands the freed
memory back to the system, for a long-running server after a burst of hostile or one-off templates.
"""

from __future__ import annotations

import gc
import re
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable

_MISSING: Any = object()


@dataclass(frozen=True)
class MemoStats:
    """One memo's counters: ``name``, ``entries``, ``bytes`` (estimated), ``max_entries``, ``max_bytes``,
    ``hits``, ``misses``, ``evictions``."""

    name: str
    entries: int
    bytes: int
    max_entries: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int


class BoundedMemo:
    """LRU memo bounded by ``max_entries`` entries and ``max_bytes`` estimated bytes (keys and values).

    ``get(key)`` returns the value or :data:`MISSING`; ``put(key, value, nbytes)`` stores it (``nbytes``: the
    caller's size estimate; an entry larger than ``max_bytes / 4`` is not stored, so one huge render cannot
    evict a whole corpus). Thread-safe (the app serves sessions from several threads): one lock per memo, held
    only for the dictionary operations, never while a value is computed.
    """

    __slots__ = ("name", "max_entries", "max_bytes", "_data", "_bytes", "hits", "misses", "evictions", "_lock")

    def __init__(self, name: str, max_entries: int, max_bytes: int):
        if max_entries < 1 or max_bytes < 1:
            raise ValueError(f"memo {name!r}: max_entries and max_bytes must be >= 1")
        self.name = name
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._data: "OrderedDict[Hashable, tuple[Any, int]]" = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = self.evictions = 0
        self._lock = threading.Lock()
        _REGISTRY[name] = self

    def get(self, key: Hashable) -> Any:
        """The value stored under ``key`` (now the most recently used), else :data:`MISSING`."""
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                self.misses += 1
                return _MISSING
            self._data.move_to_end(key)
            self.hits += 1
            return hit[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        """Store ``value`` under ``key`` (``nbytes``: estimated size of key and value), evicting the least
        recently used entries while a bound is exceeded."""
        if nbytes > self.max_bytes // 4:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._data[key] = (value, nbytes)
            self._bytes += nbytes
            while len(self._data) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, n) = self._data.popitem(last=False)
                self._bytes -= n
                self.evictions += 1

    def discard(self, key: Hashable) -> None:
        """Forget the entry under ``key``, if any."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old[1]

    def values(self) -> list[Any]:
        """The stored values, least recently used first (a snapshot)."""
        with self._lock:
            return [v for v, _ in self._data.values()]

    def clear(self) -> None:
        """Forget every entry (the counters stay)."""
        with self._lock:
            self._data.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def stats(self) -> MemoStats:
        """The current :class:`MemoStats`."""
        return MemoStats(self.name, len(self._data), self._bytes, self.max_entries, self.max_bytes,
                         self.hits, self.misses, self.evictions)


MISSING = _MISSING
"""What :meth:`BoundedMemo.get` returns for an absent key (``None`` is a storable value)."""

_REGISTRY: dict[str, BoundedMemo] = {}


def memo_stats() -> list[MemoStats]:
    """Counters of every memo created so far, by name."""
    return [m.stats() for _, m in sorted(_REGISTRY.items())]


def clear_memos() -> None:
    """Empty every registered memo (the analysis then renders, probes and diffs everything again)."""
    for m in _REGISTRY.values():
        m.clear()


_CLEARERS: dict[str, Callable[[], None]] = {}


def register_cache(name: str, clear: Callable[[], None]) -> None:
    """Have :func:`clear_caches` call ``clear`` (no arguments) to empty the cache named ``name``: one that is
    not a :class:`BoundedMemo` (a ``functools.lru_cache``'s ``cache_clear``, a dict's ``clear``). Registering
    a name again replaces its function."""
    _CLEARERS[name] = clear


def registered_caches() -> list[str]:
    """Names given to :func:`register_cache`, sorted."""
    return sorted(_CLEARERS)


def clear_caches() -> None:
    """Empty every memo (:func:`clear_memos`) and every registered cache (compiled templates, parsed trees,
    cached analyses; the disk cache of compiled code stays), then the interpreter's type-attribute cache
    (it keeps the attribute names renders looked up alive), collect garbage and, where the C library is
    glibc, return its free heap pages (``malloc_trim``); also ``re.purge()``: the patterns built from templates'
    markers sit in ``re``'s process-wide cache (at most 512, recompiled on next use). What a server calls to give
    memory back: a compiled template or a type-cache name left alive keeps a whole pymalloc arena from being freed
    (docs/security.md, "Resource limits"). Never raises."""
    clear_memos()
    for clear in list(_CLEARERS.values()):
        clear()
    re.purge()  # re's own cache of compiled patterns holds ours too (markers, delimiters): 2-3 MB after the bombs
    sys._clear_type_cache()
    gc.collect()
    try:
        import ctypes  # here, not at import: only a server's occasional call needs it

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the allocator keeps its free pages
