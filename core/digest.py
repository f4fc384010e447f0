"""A template source's short stable id (sha256 prefix), without the template engine: the app's front page and
links name a template by it before anything is compiled."""

from __future__ import annotations

import functools
import hashlib

from . import memo as _memo

_DIGEST_MEMO_MAX_CHARS = 65_536


def source_digest(source: str) -> str:
    """Short stable id of a template source (sha256 prefix, 16 hex chars). An analysis asks 2-3 times for the
    same source, so digests of sources up to 64 KB are memoized (1,024 of them: the corpus; at most 64 MB of
    sources held); a larger source is hashed each time."""
    if len(source) <= _DIGEST_MEMO_MAX_CHARS:
        return _small_source_digest(source)
    return _sha256_16(source)


def _sha256_16(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


_small_source_digest = functools.lru_cache(maxsize=1024)(_sha256_16)

_memo.register_cache("source digests", _small_source_digest.cache_clear)  # it holds the sources themselves
