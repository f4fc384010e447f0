"""Checks the tests run on hand-written handlers and parsers against ``reference/cases.jsonl``.

* :func:`compare_messages`: the reference comparison of two OpenAI-shaped messages (reference/README.md); the
  one comparison used by the handler tests, the generated-parser tests and the whole-corpus conformance test.
* :func:`check_reference_case`: one case through a handler module, final parse and char-by-char streaming.
* :func:`fuzz_problems`: mutated case inputs never make a handler raise, sessions agree with one-shot parses.
* :func:`simple_generation_prompt`, :func:`normalize_gbnf`: inputs and normalisation for those checks.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from core.chat.message import AssistantMessage, StreamRetractionError, apply_deltas, compute_deltas
from core.chat.formats._request_view import request_view
from core.chat.request import ChatRequest
from core.jinja.template import apply_template


def simple_generation_prompt(template: Any, request: ChatRequest) -> str:
    """The generation prompt computed the plain way (llama.cpp since #23089): render the request's messages
    (without the continued last message) with and without ``add_generation_prompt`` and return what follows
    their character-level common prefix. Rendering errors propagate."""
    view = request_view(request)
    msgs = request.messages[:-1] if view.has_continuation else request.messages
    extra = dict(request.chat_template_kwargs or {})
    tools = request.tools or None
    a = apply_template(template, msgs, tools, False, view.enable_thinking, extra)
    b = apply_template(template, msgs, tools, True, view.enable_thinking, extra)
    i = 0
    m = min(len(a), len(b))
    while i < m and a[i] == b[i]:
        i += 1
    return b[i:]


def _norm_args(a: Any) -> str:
    if isinstance(a, (dict, list)):
        return json.dumps(a, sort_keys=True)
    try:
        return json.dumps(json.loads(a), sort_keys=True)
    except (TypeError, ValueError):
        return ""


def compare_messages(expect: dict[str, Any], got: dict[str, Any] | None) -> str | None:
    """None when ``got`` matches ``expect`` as reference/README.md compares them (content and reasoning after
    stripping, same tool calls with names, JSON-equal arguments, ids where the expected id is non-empty);
    otherwise a one-line reason ("no message" when ``got`` is not a dict; non-text content is compared as its
    JSON text)."""
    if not isinstance(got, dict):
        return "no message"
    for k in ("content", "reasoning_content"):
        e = (expect.get(k) or "").strip()
        g = got.get(k) or ""
        g = g.strip() if isinstance(g, str) else json.dumps(g)
        if e != g:
            return f"{k}: expected {e[:80]!r} got {g[:80]!r}"
    et = expect.get("tool_calls") or []
    gt = got.get("tool_calls") or []
    if len(et) != len(gt):
        return f"tool_calls: expected {len(et)} got {len(gt)}"
    for i, (e, g) in enumerate(zip(et, gt)):
        ef, gf = e.get("function", {}), g.get("function") or {}
        if ef.get("name") != gf.get("name"):
            return f"tool_calls[{i}].name: expected {ef.get('name')!r} got {gf.get('name')!r}"
        if _norm_args(ef.get("arguments", "")) != _norm_args(gf.get("arguments", "")):
            return f"tool_calls[{i}].arguments: expected {ef.get('arguments')!r} got {gf.get('arguments')!r}"
        if e.get("id") and e.get("id") != g.get("id"):
            return f"tool_calls[{i}].id: expected {e.get('id')!r} got {g.get('id')!r}"
    return None


def stepper(parser: Any) -> Any:
    """``parse(prefix, is_partial)`` through one incremental stream state of ``parser`` (its :meth:`new_state`).
    A final parse is the one-shot parse, as :meth:`core.chat.stream.StreamingParser.finish` does."""
    state = parser.new_state()
    return lambda text, partial: parser.parse(text, partial, state=state) if partial else parser.parse(text)


def check_reference_case(handler: Any, template: Any, case: dict[str, Any]) -> str | None:
    """Run one ``reference/cases.jsonl`` row through ``handler`` (a handler module): the final parse and the
    accumulated deltas of parsing every prefix of ``input`` (partial, through one handler session, each
    step also checked against a one-shot parse) must both match ``expect``, and no successive parse may take
    back emitted text. Returns None on success, else the reason."""
    request = ChatRequest.from_dict(case)
    gp = simple_generation_prompt(template, request)
    parser = handler.build(template, request, gp, None)
    text = case["input"]
    final = parser.parse(text, bool(case.get("is_partial")))
    why = compare_messages(case["expect"], final.to_openai())
    if why:
        return "final " + why
    prev = AssistantMessage()
    acc = AssistantMessage()
    step = stepper(parser)
    for i in range(1, len(text) + 1):
        partial = i < len(text) or bool(case.get("is_partial"))
        cur = step(text[:i], partial)
        if cur != parser.parse(text[:i], partial):
            return f"stream at {i}: the incremental session disagrees with a one-shot parse"
        try:
            acc = apply_deltas(acc, compute_deltas(prev, cur))
        except StreamRetractionError as e:
            return f"stream at {i}: {e} (prev={prev.to_openai()} cur={cur.to_openai()})"
        prev = cur
    why = compare_messages(case["expect"], acc.to_openai())
    return ("stream " + why) if why else None


def by_index(grammar: str) -> str:
    """A 0c1e57098 reference grammar for the one tool ``special_function(arg1)`` with its tool and parameter
    rules renamed as llama.cpp b11549 names them (``tool-<i>``, ``tool-<i>-arg-<j>``, ``ling3-arg-<i>-<j>``,
    ``kimi-k3-tool-<i>``, …) and its rules re-sorted by name (the emitter writes them sorted). Only the names
    changed upstream (b11549, see docs/llama-cpp-sync.md); every rule body must still be the reference's. JSON
    schema rules keep their property names (``tool-0-schema-arg1-kv``), as upstream."""
    out = re.sub(r"(?<![\w-])(kimi-k3|ling3)-arg-special-function-arg1(?![\w-])", r"\1-arg-0-0", grammar)
    out = re.sub(r"(?<![\w-])tool-special-function-arg-arg1(?![\w])", "tool-0-arg-0", out)
    out = re.sub(r"(?<![\w-])(tool|kimi-k3-tool|ling3-tool|ling3)-special-function(?![\w])", r"\1-0", out)
    tail = "\n" if grammar.endswith("\n") else ""
    return "\n".join(sorted(out.splitlines(), key=lambda line: line.split(" ::= ", 1)[0])) + tail


def normalize_gbnf(grammar: str) -> list[str]:
    """Grammar lines with the auto-numbered ``until-N`` helper rules renumbered by first appearance, so two
    grammars that differ only in those ids compare equal (tests against llama.cpp's grammars)."""
    ids: dict[str, str] = {}

    def ren(m: "re.Match[str]") -> str:
        key = m.group(1)
        if key not in ids:
            ids[key] = str(len(ids))
        return "until-" + ids[key]

    lines = [re.sub(r"until-(\d+)(?!\d)", ren, ln) for ln in grammar.strip().splitlines()]
    return sorted(lines)


_FUZZ_PIECES = ['"', "'", "{", "}", "[", "]", ",", ":", "=", "(", ")", "\\", " ", "\n", "x", "1", "<", ">", "|"]


def fuzz_problems(handler: Any, template: Any, case: dict[str, Any], *, trials: int = 10, seed: int = 0) -> list[str]:
    """Robustness check on mutations of a reference case's ``input`` (characters deleted, markers seen in the
    input or punctuation inserted, text cut): every prefix must parse without raising, and the streaming
    session must agree with one-shot parses. Returns the problems found (empty when fine). Retractions on
    malformed text are allowed (llama.cpp's parsers do the same; the stream layer holds them back)."""
    rng = random.Random(f"{seed}:{case.get('id')}")
    request = ChatRequest.from_dict(case)
    parser = handler.build(template, request, simple_generation_prompt(template, request), None)
    markers = re.findall(r"<[^<>\s]{1,40}>|\]<\]minimax\[>\[|<\|\"\|>", case["input"]) or ["<"]
    problems: list[str] = []
    for _ in range(trials):
        s = case["input"]
        for _ in range(rng.randint(1, 3)):
            i = rng.randint(0, len(s))
            op = rng.random()
            if op < 0.3:
                s = s[:i] + s[i + rng.randint(1, 6):]
            elif op < 0.6:
                s = s[:i] + rng.choice(markers) + s[i:]
            else:
                s = s[:i] + rng.choice(_FUZZ_PIECES) + s[i:]
        step = stepper(parser)
        try:
            for k in range(1, len(s) + 1):
                partial = k < len(s)
                a = step(s[:k], partial)
                if a != parser.parse(s[:k], partial):
                    problems.append(f"session disagrees at {k} on {s!r}")
                    break
        except Exception as e:  # noqa: BLE001 - the point of the check
            problems.append(f"{type(e).__name__}: {e} on {s!r}")
    return problems
