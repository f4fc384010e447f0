"""Helpers the tests of repairs written from real-output sets share: the sets' cases by id, a case parsed at a
fidelity with repairs switched off, its calls, and the check that a parse loses nothing and streams as it parses."""

from __future__ import annotations

import json

from core.chat.casefiles import parse_case
from core.chat.char_audit import audit_parse
from core.chat.realset import load_cases

from .conftest import ROOT, TEMPLATES
from .test_reasoning_repairs import _streamed


def cases_of(*sets: str) -> dict:
    """The cases of the real-output sets ``sets`` (directories of tests/data), by id."""
    return {c.id: c for name in sets for c in load_cases(str(ROOT / "tests" / "data" / name))}


def parse_in(cases: dict, case_id: str, fidelity: str = "improved", disabled=(), output: str | None = None):
    """``(parser, message)`` of the case ``case_id`` of ``cases`` (its own output unless ``output`` is given)."""
    case = cases[case_id]
    return parse_case(str(TEMPLATES), case.template, case.request, case.output if output is None else output,
                      fidelity, disabled_repairs=disabled)


def calls(msg) -> list[tuple[str, dict]]:
    """The message's calls as ``(name, arguments)``."""
    return [(c.name, json.loads(c.arguments)) for c in msg.tool_calls]


def check_streams(parser, output: str, msg) -> None:
    """No character of ``output`` lost, and streamed at chunk sizes 1, 3, 17 and whole it gives ``msg``."""
    assert not audit_parse(parser, output, msg).lost()
    for size in (1, 3, 17, len(output)):
        assert _streamed(parser, output, size).to_openai() == msg.to_openai()
