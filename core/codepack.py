"""Append-only store of compiled template code in the disk cache directory: one data file and one index file
instead of one file per template.

Why: creating a file costs ~0.5 ms of system CPU on the machines this project is measured on (a Firecracker VM
on ext4), several per cent of a whole cold analysis, while appending to an existing file costs a few µs. So every
entry is appended to ``code.pack`` and its position to ``code.idx``:

* ``code.pack`` — records ``b"CTE1"``, the 32-byte key, the payload length and its CRC-32 (little-endian
  ``uint32`` each), then the payload (marshalled code);
* ``code.idx`` — 44-byte records: key, offset of the record in the pack (``uint64``), record length (``uint32``).

Each record is written by one ``write`` on a descriptor opened with ``O_APPEND``, so concurrent writers (the
batch's worker processes) never interleave, and the offset the record landed at is read back from the
descriptor. A reader loads the index once per process and again, from where it stopped, on a miss; every read is
checked against the record's own header (magic, key, length, CRC), so a torn, truncated or started-over store
only costs a recompile, never wrong code. :func:`core.jinja.cache.prune_disk_cache` removes both files together.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from typing import Any

PACK = "code.pack"
INDEX = "code.idx"
_MAGIC = b"CTE1"
_HEADER = struct.Struct("<4s32sII")  # magic, key, payload length, crc32 of the payload
_ENTRY = struct.Struct("<32sQI")     # key, record offset, record length


def _read_at(f: Any, length: int, offset: int) -> bytes:
    """``length`` bytes of the open file ``f`` from ``offset`` (``os.pread`` where the platform has it)."""
    if hasattr(os, "pread"):
        return os.pread(f.fileno(), length, offset)
    f.seek(offset)
    return f.read(length)


class CodePack:
    """The store of one directory. ``get(key)`` → payload bytes or None; ``put(key, payload)`` appends.
    ``key`` is 32 bytes (a sha256 digest). Methods raise ``OSError`` only from ``put`` (a read-only or full disk);
    ``get`` answers None for anything missing or damaged. Thread-safe."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.pack_path = os.path.join(directory, PACK)
        self.index_path = os.path.join(directory, INDEX)
        self._index: dict[bytes, tuple[int, int]] = {}
        self._read_upto = 0  # bytes of the index file already loaded
        self._lock = threading.Lock()

    def _refresh(self) -> None:
        """Load index entries appended since the last load (all of them if the index started over)."""
        try:
            size = os.stat(self.index_path).st_size
        except OSError:
            size = 0
        if size < self._read_upto:  # removed or started over: forget what it said
            self._index.clear()
            self._read_upto = 0
        if size == self._read_upto:
            return
        try:
            with open(self.index_path, "rb") as f:
                f.seek(self._read_upto)
                data = f.read(size - self._read_upto)
        except OSError:
            return
        usable = len(data) - len(data) % _ENTRY.size  # a record being written right now is read next time
        for key, offset, length in _ENTRY.iter_unpack(data[:usable]):
            self._index[key] = (offset, length)
        self._read_upto += usable

    def has(self, key: bytes) -> bool:
        """True when the index lists ``key`` (without reading or checking the record)."""
        with self._lock:
            if key not in self._index:
                self._refresh()
            return key in self._index

    def get(self, key: bytes) -> bytes | None:
        """The payload stored under ``key``, or None (not stored, or the record does not check out)."""
        with self._lock:
            where = self._index.get(key)
            if where is None:
                self._refresh()
                where = self._index.get(key)
        if where is None:
            return None
        offset, length = where
        try:
            with open(self.pack_path, "rb", buffering=0) as f:
                record = _read_at(f, length, offset)
        except OSError:
            return None
        if len(record) != length or length < _HEADER.size:
            return None
        magic, stored_key, size, crc = _HEADER.unpack_from(record)
        payload = record[_HEADER.size:]
        if magic != _MAGIC or stored_key != key or size != len(payload) or zlib.crc32(payload) != crc:
            return None
        return payload

    def put(self, key: bytes, payload: bytes) -> None:
        """Append ``payload`` under ``key`` (a later ``put`` of the same key wins). Raises ``OSError``."""
        record = _HEADER.pack(_MAGIC, key, len(payload), zlib.crc32(payload)) + payload
        fd = os.open(self.pack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, record)
            end = os.lseek(fd, 0, os.SEEK_CUR)
        finally:
            os.close(fd)
        if written != len(record):
            return  # a short write (disk full): the header check refuses whatever part of it landed
        offset = end - len(record)
        fd = os.open(self.index_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, _ENTRY.pack(key, offset, len(record)))
        finally:
            os.close(fd)
        with self._lock:
            self._index[key] = (offset, len(record))

    def size(self) -> int:
        """Bytes the store takes on disk (0 when absent)."""
        total = 0
        for path in (self.pack_path, self.index_path):
            try:
                total += os.stat(path).st_size
            except OSError:
                pass
        return total


_PACKS: dict[str, CodePack] = {}
_packs_lock = threading.Lock()


def pack_for(directory: str) -> CodePack:
    """The (process-wide, shared) :class:`CodePack` of ``directory``."""
    pack = _PACKS.get(directory)
    if pack is None:
        with _packs_lock:
            pack = _PACKS.setdefault(directory, CodePack(directory))
    return pack


def forget() -> None:
    """Drop every in-memory index (the next lookup reads the index file again, as a new process would)."""
    with _packs_lock:
        _PACKS.clear()
