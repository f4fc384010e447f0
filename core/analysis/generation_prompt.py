"""The extra context of llama.cpp's request path (``datetime``, ``date_string``), shared by the analysis and the
request path (:mod:`core.chat.prompt`)."""

from __future__ import annotations

import datetime as _dt

from ..jinja.hf import now as _clock_now


def request_extra_context(now: _dt.datetime | None = None) -> dict[str, str]:
    """The extra context llama.cpp's request path adds: ``datetime`` ("%b %d %Y") and ``date_string``
    ("%d %b %Y"), from ``now`` or else the templating clock (:func:`core.jinja.hf.now`, pinnable)."""
    now = now or _clock_now()
    return {"datetime": now.strftime("%b %d %Y"), "date_string": now.strftime("%d %b %Y")}
