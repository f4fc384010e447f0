"""Every corpus template exported once per fidelity and test run (the linear-time check in test_redos.py and the
probe-text check in test_export_probe_text.py read the same exports)."""

from __future__ import annotations

import functools

from core.export.response_template import ExportResult, export_response_template
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES


@functools.lru_cache(maxsize=2)
def corpus_exports(fidelity: str) -> dict[str, ExportResult]:
    """Template file name → its export at ``fidelity`` (transformers flavour), for every ``*.jinja`` of the
    shared corpus."""
    return {path.name: export_response_template(ChatTemplate(path.read_text(encoding="utf-8"), path.name),
                                                fidelity=fidelity)
            for path in sorted(TEMPLATES.glob("*.jinja"))}
