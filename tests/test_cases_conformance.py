"""reference/cases.jsonl: every case through build_chat_parser, final message and char-by-char deltas compared
the way reference/README.md says (content / reasoning stripped, same tool calls, arguments equal as JSON, ids
where the expected id is not empty). Asserts 354/354 exactly and lists the failures."""

from __future__ import annotations

from collections import Counter

from core.chat.conformance import TemplateDir, run_case

from .conftest import TEMPLATES
from .handler_checks import compare_messages as message_mismatch  # noqa: F401  (also used by test_improved)


def accumulate(deltas: list[dict]) -> dict:
    """Deltas accumulated as an OpenAI client does."""
    m = {"role": "assistant", "content": "", "reasoning_content": "", "tool_calls": []}
    for d in deltas:
        m["content"] += d.get("content") or ""
        m["reasoning_content"] += d.get("reasoning_content") or ""
        for tc in d.get("tool_calls") or []:
            i = tc.get("index", 0)
            while len(m["tool_calls"]) <= i:
                m["tool_calls"].append({"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            t = m["tool_calls"][i]
            if tc.get("id"):
                t["id"] = tc["id"]
            f = tc.get("function") or {}
            if f.get("name"):
                t["function"]["name"] = f["name"]
            t["function"]["arguments"] += f.get("arguments") or ""
    return m


def run_all(cases: list[dict]) -> tuple[int, int, int, list[tuple[str, str, str]]]:
    """(final ok, stream ok, both ok, failures [(id, template, why)])."""
    templates = TemplateDir(str(TEMPLATES))
    final_ok = stream_ok = both = 0
    fails = []
    for case in cases:
        r = run_case(case, templates)
        if r.get("error"):
            fails.append((case["id"], case["template"], "error: " + r["error"][:160]))
            continue
        f = message_mismatch(case["expect"], r.get("message"))
        s = message_mismatch(case["expect"], accumulate(r.get("deltas") or []))
        final_ok += f is None
        stream_ok += s is None
        both += f is None and s is None
        if f or s:
            fails.append((case["id"], case["template"], ("final " + f) if f else ("stream " + s)))
    return final_ok, stream_ok, both, fails


def test_comparison_helpers():
    exp = {"content": " a ", "tool_calls": [{"function": {"name": "f", "arguments": '{"x": 1}'}, "id": ""}]}
    assert message_mismatch(exp, {"content": "a", "tool_calls": [{"function": {"name": "f",
                                                                              "arguments": '{"x":1}'}}]}) is None
    assert "arguments" in message_mismatch(exp, {"content": "a", "tool_calls": [{"function": {
        "name": "f", "arguments": '{"x":2}'}}]})
    acc = accumulate([{"content": "a"}, {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{"}}]},
                      {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}])
    assert acc["content"] == "a" and acc["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}


def test_reference_cases_pass_rate(reference_cases):
    final_ok, stream_ok, both, fails = run_all(reference_cases)
    n = len(reference_cases)
    by_template = Counter(t for _, t, _ in fails)
    report = "\n".join(f"  {i} [{t}]: {why}" for i, t, why in fails)
    summary = (f"final {final_ok}/{n}, deltas {stream_ok}/{n}, both {both}/{n} = {both / n:.1%}\n"
               f"failures by template: {dict(by_template.most_common())}\n{report}")
    print(summary)
    # the headline figures, held exactly: 354/354 final and 354/354 streamed
    assert (n, final_ok, stream_ok, both) == (354, 354, 354, 354), summary
