"""The generated parser on llama.cpp's own test cases (reference/cases.jsonl), for every template the reference
routes to the auto-parser.

Each case's parser is built from the reference analysis, the case request and the case's generation prompt
(rendered with the request path of :mod:`core.chat.prompt`; the reference's one-tool generation prompt when this
renderer cannot render the template). A case passes when the final parse and the accumulated streaming deltas
(every prefix parsed as partial) both equal ``expect`` as reference/README.md compares them, and no partial
parse ever takes back text it already emitted.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.analysis.result import TemplateAnalysis
from core.chat.generator import GeneratedParser, ParserState, generate_parser
from core.chat.message import AssistantMessage, apply_deltas, compute_deltas
from core.chat.request import ChatRequest
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES
from .handler_checks import compare_messages


def case_generation_prompt(case: dict, row: dict, analysis: TemplateAnalysis, request: ChatRequest) -> str:
    """Generation prompt of ``case`` (request path), falling back to the reference's when rendering fails."""
    try:
        from core.chat.prompt import generation_prompt, prepare_request

        template = ChatTemplate((TEMPLATES / case["template"]).read_text(encoding="utf-8"), case["template"])
        return generation_prompt(prepare_request(template, request, caps=analysis.caps))
    except Exception:  # noqa: BLE001 - templates jinja2 renders differently from llama.cpp
        return row["apply"]["generation_prompt"]


def case_parser(case: dict, row: dict, **overrides: Any) -> GeneratedParser:
    """The generated parser for a reference case (``overrides`` replace request fields)."""
    analysis = TemplateAnalysis.from_json(row["analysis"])
    request = ChatRequest.from_dict({**case, **overrides})
    return generate_parser(analysis, request, case_generation_prompt(case, row, analysis, request))


def check_case(case: dict, parser: GeneratedParser) -> str | None:
    """``None`` when the case passes, else why it fails (final parse, then streaming)."""
    text = case["input"]
    final = parser.parse(text, case["is_partial"]).to_openai()
    why = compare_messages(case["expect"], final)
    if why:
        return "final " + why
    prev = acc = AssistantMessage()
    state = ParserState()
    for i in range(1, len(text) + 1):
        cur = parser.parse(text[:i], True, state=state)
        try:
            acc = apply_deltas(acc, compute_deltas(prev, cur))
        except ValueError as e:
            return f"stream: prefix of {i} chars takes back text ({e})"
        if acc.to_openai() != cur.to_openai():
            return f"stream: accumulated deltas differ from the parse after {i} chars"
        prev = cur
    why = compare_messages(case["expect"], acc.to_openai())
    return "stream " + why if why else None


def autoparser_cases(reference_analysis: dict, reference_cases: list) -> list[tuple[dict, dict]]:
    return [(c, reference_analysis[c["template"]]) for c in reference_cases
            if reference_analysis.get(c["template"], {}).get("route") == "autoparser"]


def test_autoparser_cases_pass(reference_analysis, reference_cases):
    cases = autoparser_cases(reference_analysis, reference_cases)
    assert len(cases) == 102
    failures = []
    for case, row in cases:
        why = check_case(case, case_parser(case, row))
        if why:
            failures.append(f"{case['id']} [{case['template']}]: {why}")
    print(f"auto-parser reference cases: {len(cases) - len(failures)}/{len(cases)} pass")
    assert failures == [], "failing cases:\n" + "\n".join(failures)  # 102/102, held exactly


@pytest.mark.parametrize("case_id", ["ref-0049", "ref-0187", "ref-0303", "ref-0095", "ref-0402"])
def test_selected_cases_individually(reference_analysis, reference_cases, case_id):
    case = next(c for c in reference_cases if c["id"] == case_id)
    assert check_case(case, case_parser(case, reference_analysis[case["template"]])) is None


def test_a_broken_parser_is_detected(reference_analysis, reference_cases):
    """The checker itself catches a wrong message (so the rate above means something)."""
    case = next(c for c in reference_cases if c["id"] == "ref-0187")
    parser = case_parser(case, reference_analysis[case["template"]], parallel_tool_calls=False)
    assert check_case(case, parser) is not None
