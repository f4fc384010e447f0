"""Shared test fixtures: where the reference material lives (../shared, read-only)."""

from __future__ import annotations

import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
TEMPLATES = SHARED / "templates"
REFERENCE = SHARED / "reference"


def _jsonl(path: pathlib.Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def reference_analysis() -> dict[str, dict]:
    """reference/analysis.jsonl keyed by template file name."""
    return {r["template"]: r for r in _jsonl(REFERENCE / "analysis.jsonl")}


@pytest.fixture(scope="session")
def reference_cases() -> list[dict]:
    """reference/cases.jsonl rows."""
    return _jsonl(REFERENCE / "cases.jsonl")


def template_source(name: str) -> str:
    """Source text of a corpus template in ../shared/templates."""
    return (TEMPLATES / name).read_text(encoding="utf-8")
