"""Limits whose hit depends on the moment, not on the inputs, counted where they are hit.

A wall-clock limit (render time, analysis budget, compile time) says something about a template only when the
process had the CPU for that time: on a loaded machine a template that renders in 0.5 s on a quiet one can run
past its 2 s. A ``MemoryError`` says the process's address space ran out, which depends on what it held
before. :mod:`core.isolation` reads :func:`hits` around each call in a worker and turns a call that hit a
memory limit, or a time limit while the worker got less than half the CPU of its wall time (a render or compile
time limit counts only when it ended without its CPU: :func:`core.jinja.limits.time_limit_hit`), into a
:class:`~core.isolation.WorkerLimitError` — a failure no cache keeps as the template's verdict — whatever the
called function made of the error (an analysis may record a failed render and go on).
"""

from __future__ import annotations

TIME = "time"
MEMORY = "memory"

_counts = {TIME: 0, MEMORY: 0}


def hit(kind: str) -> None:
    """Count one hit of a ``TIME`` or ``MEMORY`` limit in this process."""
    _counts[kind] += 1


def hits() -> dict[str, int]:
    """The hits counted in this process so far, by kind."""
    return dict(_counts)
