"""``tokenizer_config.json`` with the exported ``response_template`` merged in (what a model author uploads)."""

from __future__ import annotations

import copy
from typing import Any


def merge_tokenizer_config(config: dict[str, Any] | None, response_template: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` (a parsed ``tokenizer_config.json``; None: a new one) with ``response_template``
    set under the key transformers reads (``tokenization_utils_base``: ``kwargs.pop("response_template")``) —
    replacing any earlier one; every other key is kept as is. Raises ``ValueError`` when ``config`` is not a
    JSON object."""
    if config is not None and not isinstance(config, dict):
        raise ValueError(f"tokenizer_config: expected a JSON object, got {type(config).__name__}")
    out = copy.deepcopy(config) if config else {}
    out["response_template"] = copy.deepcopy(response_template)
    return out
