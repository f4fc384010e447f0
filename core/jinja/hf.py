"""The transformers dialect: the sandbox configured as transformers' ``apply_chat_template`` configures jinja2.

* ``trim_blocks``, ``lstrip_blocks``, ``loopcontrols`` and the ``{% generation %}`` block tag (transformers'
  assistant-mask extension; here it only renders its body);
* globals ``raise_exception(msg)`` and ``strftime_now(fmt)`` (the clock can be pinned for tests);
* transformers' ``tojson`` (``ensure_ascii=False``, ``indent``, ``separators``, ``sort_keys``);
* every filter size-checked, ``range`` bounded (:mod:`core.jinja.sandbox`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import json.encoder
from dataclasses import dataclass
from typing import Any, Iterator

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser

from .limits import _limit_error, output_limit, projected_text_size
from .sandbox import (LOOP_FILTER, _CheckedLoop, _LimitedSandbox, _checked_print, _pprint, _size_checked, _sum,
                      _width_checked)


class _TemplateRaised(Exception):
    """Raised by the template's own ``raise_exception`` call."""


class GenerationBlockExtension(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}``: renders the body unchanged (transformers' AssistantTracker
    marks assistant tokens with it; rendering is what matters here)."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        """Parse ``{% generation %}`` … ``{% endgeneration %}`` into a scope node rendering the body as is."""
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def _tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # transformers' override: no HTML escaping, keys in insertion order unless asked.
    if separators is not None:
        separators = tuple(separators)
    limit = output_limit()
    if isinstance(indent, int) and not isinstance(indent, bool) and indent > limit:
        raise _limit_error("tojson indent", limit, "output size")
    if isinstance(indent, str) and len(indent) > limit:
        raise _limit_error("tojson indent", limit, "output size")
    step = indent if isinstance(indent, int) else len(indent) if isinstance(indent, str) else 0
    if projected_text_size(value, limit, max(step, 0)) > limit:
        raise _limit_error("tojson result size", limit, "output size")
    if separators is None and (type(indent) is int or type(indent) is str):
        # json's indenting encoder is pure Python (a generator per container, ~10x its C encoder); this one
        # writes the same text, and hands anything it does not know to json.dumps (same result or error)
        try:
            return _indented_json(value, indent if type(indent) is str else " " * indent, ensure_ascii, sort_keys)
        except (_NotPlainJson, RecursionError):
            pass
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class _NotPlainJson(Exception):
    pass


def _json_float(f: float) -> str:
    if f != f:
        return "NaN"
    if f == float("inf"):
        return "Infinity"
    if f == float("-inf"):
        return "-Infinity"
    return float.__repr__(f)


def _indented_json(value: Any, indent: str, ensure_ascii: bool, sort_keys: bool) -> str:
    """``json.dumps(value, indent=..., ensure_ascii=..., sort_keys=...)`` (default separators) for strings,
    numbers, booleans, None, lists, tuples and dicts with str/number/bool/None keys — the same text, built by a
    recursive walk over parts. Raises :class:`_NotPlainJson` for anything else (the caller lets json decide)."""
    quote = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    out: list[str] = []
    put = out.append

    def leaf(v: Any) -> str:
        if isinstance(v, str):
            return quote(v)
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, int):
            return int.__repr__(v)
        if isinstance(v, float):
            return _json_float(v)
        raise _NotPlainJson

    def key_text(k: Any) -> str:
        # json writes a number, boolean or null key as the string of its value
        return quote(k) if isinstance(k, str) else quote(leaf(k))

    def walk(v: Any, level: int) -> None:
        # lists and dicts share one writer; each item is followed by the separator, and the last separator
        # becomes the closing line (no first-item test per item)
        if isinstance(v, (list, tuple)):
            keyed, close, pairs = False, "]", v
            put("[")
        elif isinstance(v, dict):
            keyed, close, pairs = True, "}", (sorted(v.items()) if sort_keys else v.items())
            put("{")
        else:
            put(leaf(v))
            return
        if not v:
            put(close)
            return
        newline = "\n" + indent * (level + 1)
        put(newline)
        sep = "," + newline
        for x in pairs:
            if keyed:
                k, x = x
                put((quote(k) if type(k) is str else key_text(k)) + ": ")
            if type(x) is str:  # the commonest value: no call
                put(quote(x))
            else:
                walk(x, level + 1)
            put(sep)
        out[-1] = "\n" + indent * level + close

    walk(value, 0)
    return "".join(out)


def _raise_exception(message: Any = "") -> None:
    raise _TemplateRaised(str(message))


@dataclass
class Clock:
    """Source of ``strftime_now``; ``fixed`` pins the date (tests and reproducible renders)."""

    fixed: _dt.datetime | None = None

    def now(self) -> _dt.datetime:
        """The pinned ``fixed`` datetime, else the current local time (naive ``datetime``)."""
        return self.fixed or _dt.datetime.now()


_clock = Clock()


def pin_clock(when: _dt.datetime | None) -> _dt.datetime | None:
    """Pin (or with ``None`` unpin) the date every template's ``strftime_now`` and the request path's
    ``datetime`` / ``date_string`` see. Returns the previous pin (``None`` when the clock was live), so a caller
    can restore it; :func:`pinned_clock` does that for a block."""
    previous, _clock.fixed = _clock.fixed, when
    return previous


@contextlib.contextmanager
def pinned_clock(when: _dt.datetime | None) -> Iterator[None]:
    """Context manager: the clock pinned to ``when`` inside the block, the previous pin restored after it."""
    previous = pin_clock(when)
    try:
        yield
    finally:
        pin_clock(previous)


def now() -> _dt.datetime:
    """What templates see as "now": the pinned datetime if any (tests, reproducible renders), else local time."""
    return _clock.now()


def _strftime_now(fmt: str) -> str:
    return _clock.now().strftime(fmt)


def make_environment() -> _LimitedSandbox:
    """A new sandbox configured as transformers' ``apply_chat_template`` configures its environment (the
    dialect's filters and globals), with every filter size-checked."""
    env = _LimitedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationBlockExtension, jinja2.ext.loopcontrols],
        finalize=_checked_print,
        optimized=False,
    )
    env.filters["tojson"] = _tojson
    env.filters["pprint"] = _pprint
    env.filters["sum"] = _sum
    for name in ("center", "indent", "wordwrap", "truncate"):
        env.filters[name] = _width_checked(env.filters[name])
    for name, fn in list(env.filters.items()):
        env.filters[name] = _size_checked(name, fn)
    env.filters[LOOP_FILTER] = _CheckedLoop
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


ENV = make_environment()
"""The project's environment: every :class:`~core.jinja.template.ChatTemplate` renders with it."""
