"""Which parser llama.cpp uses for a template: a hand-written handler or the auto-parser (notes §14).

Follows ``common_chat_try_specialized_template`` of the llama.cpp that produced the reference data
(llama-cpp-python 0.3.36): the families of :data:`core.chat.formats.FAMILIES` are tried in order, the first whose
substring test matches the normalised source wins; anything else goes to the differential auto-parser.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..chat.formats import detect_family
from ..jinja.cache import normalize_source


@dataclass(frozen=True)
class Route:
    """``kind`` is ``"autoparser"`` or ``"specialized"``; ``handler`` names the special family (or None)."""

    kind: str
    handler: str | None = None


def detect_route(source: str) -> Route:
    """Route of a template source (normalised here). Never raises."""
    fam = detect_family(normalize_source(source))
    return Route("specialized", fam.name) if fam else Route("autoparser", None)
