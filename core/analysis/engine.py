"""Rendering as llama.cpp's Jinja engine does, for the analysis probes.

The reference analyses were produced by llama.cpp's own Jinja engine, which differs from jinja2 on a few
constructs real templates use — and a differing render changes the diff, so the analysis must render the
way llama.cpp does. The capability module (:mod:`core.analysis.caps`) already carries an environment that
emulates that engine for its probes (``str + x`` concatenates x's string form and ``str + none`` treats
the none as "", ``map``/``select`` give lists, llama.cpp's macro argument binding, ``in`` on undefined,
filters llama.cpp refuses, and llama.cpp's undefined values and printing). This module reuses it — as an
``overlay()``, so usage tracking stays inactive outside probe renders (its variable-read filter is a plain
identity here, ``caps.UNTRACKED_FILTERS``) — and adds two filters:

* ``safe`` is a no-op (jinja2 returns ``Markup``, which then HTML-escapes every string added to it);
* ``format`` only fills ``{}`` placeholders (``"%s" | format(x)`` stays ``"%s"``; any other ``{`` fails).

llama.cpp's undefined handling — an undefined value is chainable (``x.a.b`` of an undefined ``x`` is
undefined) and its builtin methods (``items()``, ``join()``, …) return empty values — and its printing of
non-strings (``{{ mapping }}`` / ``{{ none }}`` print nothing) are defined once, in
:class:`core.analysis.caps.LlamaUndefined` and ``caps._finalize``, and inherited through the overlay.

:func:`render` raises :class:`~core.errors.TemplateRenderError`; if the caps module is unavailable it
falls back to the project's standard (transformers-like) rendering.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jinja2

from .. import memo as _memo
from ..errors import ChatTemplateExplorerError, TemplateRenderError
from ..templating import ChatTemplate

from . import caps as _caps


def _safe(value: Any) -> Any:
    return value


def _llama_format(value: Any, *args: Any, **kwargs: Any) -> str:
    if not isinstance(value, str):
        raise jinja2.exceptions.TemplateRuntimeError("format() first argument must be a string")
    out: list[str] = []
    i = 0
    k = 0
    n = len(value)
    while i < n:
        c = value[i]
        if c != "{":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n or value[i + 1] != "}":
            raise jinja2.exceptions.TemplateRuntimeError("format() only supports simple '{}' placeholders")
        if k >= len(args):
            raise jinja2.exceptions.TemplateRuntimeError("format(): not enough arguments")
        a = args[k]
        out.append("" if a is None or isinstance(a, jinja2.Undefined) else str(a))
        k += 1
        i += 2
    return "".join(out)


@functools.lru_cache(maxsize=1)
def _env() -> Any:
    base = _caps.probe_environment()
    env = base.overlay()
    env.filters = dict(base.filters)
    env.filters["safe"] = _safe
    env.filters["format"] = _llama_format
    env.filters.update(_caps.UNTRACKED_FILTERS)  # no usage recorded here
    # undefined type and finalize: inherited from the probe environment (caps.LlamaUndefined, caps._finalize)
    return env


@functools.lru_cache(maxsize=1)
def _own_names() -> tuple[str, ...]:
    """Filter and test names whose function differs from the probe environment's (``safe``, ``format``)."""
    base = _caps.probe_environment()
    env = _env()
    untracked = _caps.UNTRACKED_FILTERS  # same behaviour: the probe code serves
    names = {k for k, f in env.filters.items() if base.filters.get(k) is not f and k not in untracked}
    names |= {k for k, f in env.tests.items() if base.tests.get(k) is not f}
    return tuple(sorted(names))


@functools.lru_cache(maxsize=1)
def _own_use() -> "re.Pattern[str]":
    """Where a source may apply one of :func:`_own_names`: after ``|`` (filter), ``filter`` (filter block)
    or ``is`` / ``is not`` (test) — the only syntax that makes a Filter/Test node jinja2 could fold."""
    names = "|".join(re.escape(n) for n in _own_names()) or "(?!)"
    return re.compile(r"(?:\||\bfilter\b|\bis\b(?:\s+not\b)?)\s*(?:" + names + r")\b")


@functools.lru_cache(maxsize=1)
def _own_use_parts() -> "tuple[re.Pattern[str], re.Pattern[str]] | None":
    """:func:`_own_use` split for a fast search (see :func:`_uses_own`): the names followed by a word boundary,
    and what must precede them — whitespace, then ``|``, ``filter`` or ``is`` / ``is not`` — written backwards,
    to be matched on the reversed text from where a name starts. None when there are no names."""
    names = _own_names()
    if not names:
        return None
    name_at = re.compile("(?:" + "|".join(re.escape(n) for n in names) + r")\b")
    before_reversed = re.compile(r"\s*(?:\||\bretlif\b|(?:\bton\s+)?\bsi\b)")
    return name_at, before_reversed


def _uses_own(source: str) -> bool:
    """True exactly when :func:`_own_use` finds a match in ``source``. That search costs ~100 µs on a typical
    template (its pattern starts with an alternation of common letters, so every ``i``, ``f`` and ``|`` is a
    start to try); this finds the names first (rare, by substring search) and checks the text before each one
    by matching the preceding part of the pattern, reversed, on the reversed source: same verdict (word
    boundaries and whitespace read the same either way; tested against the pattern on the corpus and on
    generated strings)."""
    parts = _own_use_parts()
    if parts is None:
        return False
    name_at, before_reversed = parts
    rev = None
    for name in _own_names():
        i = source.find(name)
        while i >= 0:
            if name_at.match(source, i):
                if rev is None:
                    rev = source[::-1]
                if before_reversed.match(rev, len(source) - i):
                    return True
            i = source.find(name, i + 1)
    return False


def _code_tag() -> str:
    from ..templating import module_digest

    return f"llama|{module_digest(__file__)}|{_caps.probe_code_tag()}"


@functools.lru_cache(maxsize=512)
def _compile(source: str) -> jinja2.Template:
    # This environment is an overlay of the probe environment that changes only runtime objects (two
    # filters, the undefined type). Code generation differs only where jinja2's optimizer folds a constant
    # through one of those filters (``"…" | safe`` becomes a Markup constant), so a source that never names
    # them runs the probe environment's compiled code (shared, disk-cached); others get their own entry.
    from ..templating import compiled_code, template_from_code

    env = _env()
    if _uses_own(source):
        code = compiled_code(env, source, _code_tag())
    else:
        code = _caps.probe_code(source)
    return _caps.plain_globals(template_from_code(env, code))


_memo.register_cache("llama.cpp templates", _compile.cache_clear)  # see core.memo.clear_caches


def available() -> bool:
    """True when the llama.cpp-compatible environment can be built."""
    try:
        _env()
        return True
    except Exception:
        return False


def render(template: ChatTemplate, context: dict[str, Any], *, template_tracebacks: bool = True) -> str:
    """Render ``template`` with ``context`` as globals the way llama.cpp's engine would (within the
    template's render limits). Raises :class:`TemplateRenderError` (or a subclass) when it fails; with
    ``template_tracebacks=False`` its cause keeps Python's traceback, not jinja2's rewrite of it into template
    lines (see :meth:`ChatTemplate.render_with`)."""
    if not available():
        return template.render(context)
    try:
        compiled = _compile(template.source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateRenderError(template.name, f"syntax error: {e}") from None
    try:
        return template.render_with(compiled, context, template_tracebacks=template_tracebacks)
    except ChatTemplateExplorerError:
        raise
    except Exception as e:  # pragma: no cover - ChatTemplate.render already classifies
        raise TemplateRenderError(template.name, f"{type(e).__name__}: {e}") from None
