"""A bounded reader of GGUF metadata that returns only the ``tokenizer.chat_template*`` keys.

Written over the GGUF specification (ggml ``docs/gguf.md``): magic ``GGUF``, ``uint32`` version (2 or 3),
``uint64`` tensor count, ``uint64`` metadata key/value count, then the key/value pairs (key: ``uint64``
length + UTF-8 bytes; ``uint32`` value type; value), all little-endian. The file is memory-mapped and walked
with a cursor: every other value is skipped by its size (known from its type for numbers and arrays of
numbers, read length by length for strings and string arrays), so a model file of any size is read in time
proportional to its metadata (a 150,000-token vocabulary: 0.08 s; the ``gguf`` package's reader: 71 s), and
nothing is copied but the template strings.

Nothing in the header is trusted: every count and length is checked against the bytes left in the file
*before* it is used, nesting of arrays is bounded, and reading stops at :data:`READ_TIMEOUT_S`. A claim
that does not fit raises :class:`GGUFError` naming the key and the problem.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass
from typing import Any

TEMPLATE_KEY = "tokenizer.chat_template"
MAGIC = b"GGUF"
READ_TIMEOUT_S = 5.0
MAX_KEY_BYTES = 65_536
MAX_ARRAY_DEPTH = 4

# value type → (name, fixed size in bytes or 0 for string/array)
_TYPES = {0: ("uint8", 1), 1: ("int8", 1), 2: ("uint16", 2), 3: ("int16", 2), 4: ("uint32", 4), 5: ("int32", 4),
          6: ("float32", 4), 7: ("bool", 1), 8: ("string", 0), 9: ("array", 0), 10: ("uint64", 8),
          11: ("int64", 8), 12: ("float64", 8)}
_STRING, _ARRAY = 8, 9
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


class GGUFError(ValueError):
    """The file is not a GGUF file we can read, or its metadata claims what the file cannot hold."""


@dataclass
class GGUFTemplates:
    """What :func:`read_chat_templates` found: ``templates`` (key → raw UTF-8 bytes of each
    ``tokenizer.chat_template*`` string), ``version``, ``kv_count`` (key/value pairs walked)."""

    templates: dict[str, bytes]
    version: int
    kv_count: int


class _Reader:
    """Cursor over the memory-mapped file: no read copies anything but the template strings, and the page
    cache, not the heap, holds what is looked at."""

    def __init__(self, mm: Any, size: int, timeout_s: float):
        self.mm = mm
        self.pos = 0
        self.size = size
        self.until = time.monotonic() + timeout_s
        self.timeout_s = timeout_s
        self.steps = 0

    def left(self) -> int:
        return self.size - self.pos

    def read(self, n: int, what: str) -> bytes:
        if n > self.left():
            raise GGUFError(f"{what} claims {n} bytes but only {self.left()} are left in the file")
        data = self.mm[self.pos:self.pos + n]
        self.pos += n
        return data

    def skip(self, n: int, what: str) -> None:
        if n > self.left():
            raise GGUFError(f"{what} claims {n} bytes but only {self.left()} are left in the file")
        self.pos += n

    def u32(self, what: str) -> int:
        if self.left() < 4:
            raise GGUFError(f"{what}: the file ends early")
        self.pos += 4
        return _U32.unpack_from(self.mm, self.pos - 4)[0]

    def u64(self, what: str) -> int:
        if self.left() < 8:
            raise GGUFError(f"{what}: the file ends early")
        self.pos += 8
        return _U64.unpack_from(self.mm, self.pos - 8)[0]

    def tick(self) -> None:
        self.steps += 1
        if not self.steps & 1023 and time.monotonic() > self.until:
            raise GGUFError(f"reading the metadata took longer than {self.timeout_s:g} s (limit: GGUF read time)")

    def string_len(self, what: str) -> int:
        n = self.u64(what)
        if n > self.left():
            raise GGUFError(f"{what} claims a string of {n} bytes but only {self.left()} are left in the file")
        return n

    def skip_strings(self, count: int, what: str) -> None:
        # the hot loop of every model file (the vocabulary: 100k-250k strings), kept free of method calls
        mm, pos, size, unpack = self.mm, self.pos, self.size, _U64.unpack_from
        for i in range(count):
            if pos + 8 > size:
                raise GGUFError(f"{what}: string #{i} runs past the end of the file")
            pos += 8 + unpack(mm, pos)[0]
            if not i & 16383 and time.monotonic() > self.until:
                raise GGUFError(f"reading the metadata took longer than {self.timeout_s:g} s "
                                "(limit: GGUF read time)")
        if pos > size:
            raise GGUFError(f"{what}: the last string runs past the end of the file")
        self.pos = pos

    def skip_value(self, vtype: int, what: str, depth: int = 0) -> None:
        self.tick()
        if vtype not in _TYPES:
            raise GGUFError(f"{what} has unknown value type {vtype}")
        size = _TYPES[vtype][1]
        if size:
            self.skip(size, what)
        elif vtype == _STRING:
            self.skip(self.string_len(what), what)
        else:
            if depth >= MAX_ARRAY_DEPTH:
                raise GGUFError(f"{what} nests arrays more than {MAX_ARRAY_DEPTH} deep")
            etype = self.u32(what)
            count = self.u64(what)
            if etype not in _TYPES:
                raise GGUFError(f"{what} is an array of unknown type {etype}")
            esize = _TYPES[etype][1] or 8  # a string or array element takes at least 8 bytes
            if count * esize > self.left():
                raise GGUFError(f"{what} claims {count} elements ({count * esize} bytes at least) but only "
                                f"{self.left()} bytes are left in the file")
            if _TYPES[etype][1]:
                self.skip(count * esize, what)
            elif etype == _STRING:
                self.skip_strings(count, what)
            else:
                for _ in range(count):
                    self.skip_value(etype, what, depth + 1)


def _type_name(vtype: int) -> str:
    return _TYPES.get(vtype, (f"type {vtype}", 0))[0]


def read_chat_templates(path: str | os.PathLike[str], *, max_template_bytes: int = 2 * 1024 * 1024,
                        timeout_s: float = READ_TIMEOUT_S) -> GGUFTemplates:
    """The ``tokenizer.chat_template`` and ``tokenizer.chat_template.<name>`` strings of the GGUF file at
    ``path``, as raw bytes (decode and validate them yourself). Reads only the metadata section, skipping
    every other value; time is bounded by ``timeout_s`` and memory by ``max_template_bytes`` per template.

    Raises :class:`GGUFError` (a ``ValueError``) for a file that is not GGUF v2/v3, a template key whose value
    is not a string (a number, a string array, …; the message names the type), a template above
    ``max_template_bytes``, a count or length the file cannot hold, or a read over ``timeout_s``;
    ``OSError`` when the file cannot be read."""
    with open(path, "rb") as f:  # noqa: SIM117
        size = os.fstat(f.fileno()).st_size
        if size < 4 or f.read(4) != MAGIC:
            raise GGUFError("not a GGUF file (it does not start with the GGUF magic bytes)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _read(_Reader(mm, size, timeout_s), max_template_bytes)


def _read(r: _Reader, max_template_bytes: int) -> GGUFTemplates:
    """Walk the header and metadata of ``r``; see :func:`read_chat_templates`."""
    if r.read(4, "magic") != MAGIC:
        raise GGUFError("not a GGUF file (it does not start with the GGUF magic bytes)")
    version = r.u32("version")
    if version not in (2, 3):
        raise GGUFError(f"GGUF version {version} is not supported (only 2 and 3; version 1 files predate "
                        "chat templates)")
    r.u64("tensor count")
    kv_count = r.u64("metadata count")
    if kv_count * 13 > r.left():  # the smallest pair: 8-byte key length, 1-byte key, 4-byte type
        raise GGUFError(f"the header claims {kv_count} metadata pairs, more than the file can hold")
    found: dict[str, bytes] = {}
    for i in range(kv_count):
        klen = r.string_len(f"metadata key #{i}")
        if klen > MAX_KEY_BYTES:
            raise GGUFError(f"metadata key #{i} is {klen} bytes long (keys are short names)")
        key = r.read(klen, f"metadata key #{i}").decode("utf-8", "replace")
        vtype = r.u32(f"type of {key!r}")
        if key == TEMPLATE_KEY or key.startswith(TEMPLATE_KEY + "."):
            if vtype != _STRING:
                extra = ""
                if vtype == _ARRAY:
                    extra = f" of {_type_name(r.u32(key))}"
                raise GGUFError(f"GGUF key {key!r} is {'an' if vtype == _ARRAY else 'a'} "
                                f"{_type_name(vtype)}{extra}, not a string")
            n = r.string_len(key)
            if n > max_template_bytes:
                raise GGUFError(f"GGUF key {key!r} holds {n} bytes, above the limit of {max_template_bytes}")
            found[key] = r.read(n, key)
        else:
            r.skip_value(vtype, repr(key))
    return GGUFTemplates(found, version, kv_count)
