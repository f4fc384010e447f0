"""Structural probes of the triage (issue 26): llama.cpp's own test inputs (``../shared/reference/cases.jsonl``,
the inputs of its ``tests/test-chat.cpp``) changed the way a model or a decoder changes an output, one class of
change at a time, on one case per template; each class has the causes a right triage names. ``python -m
bench.triage_probes`` prints, per class, how many probes got one of them (and, with ``-v``, the misses). The
probes are constructed, not real outputs: they tell whether a rule works from the template and the analysis
across families, not how often a real model makes the mistake — the kept-aside batches of real reports measure
that. Not a test (no pinned figure): a rule change moves these counts, which the coordinator reads."""

from __future__ import annotations

import collections
import json
import pathlib
import re
import sys

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.model import Setup, build_bundle, reasoning_markers
from core.explain.triage import triage
from core.jinja.template import ChatTemplate

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
STRIPPED = {"SPECIAL_TOKENS_STRIPPED"}


_JSON_CALL = re.compile(r'\{\s*"name"\s*:\s*"special_function"')


def _calls(case: dict, toks: list[str], reasoning: set[str], end_token: str = "") -> dict[str, tuple[str, set[str]]]:
    out = case["input"]
    probes: dict[str, tuple[str, set[str]]] = {}
    special = [t for t in toks if re.fullmatch(r"<\|[^|]{1,40}\|>|<｜[^｜]{1,40}｜>|\[[A-Z_]{3,30}\]", t) and t in out]
    if len(special) >= 2:
        alt = "|".join(re.escape(t) for t in toks)
        probes["decoder spaces around special tokens"] = (
            re.sub("(" + alt + ")", r" \1 ", out).replace("  ", " ").strip(), STRIPPED | {"NONE"})
    m = re.search(r'"name"(\s*:\s*"[^"]*")(\s*,\s*)"(arguments|parameters)"(\s*:\s*)(\{[^{}]*\})', out)
    if m:
        # the template's keys, each named right, in another order: the call shape of another prompt the model was
        # trained with (issue 26, ninth round), not a field alias — a renamed key stays FIELD_ALIAS
        probes["JSON keys swapped"] = (out[:m.start()] + '"' + m.group(3) + '"' + m.group(4) + m.group(5)
                                       + m.group(2) + '"name"' + m.group(1) + out[m.end():],
                                       {"TEMPLATE_MODEL_MISMATCH"})
        probes["JSON key renamed"] = (out[:m.start(3)] + ("parameters" if m.group(3) == "arguments" else "arguments")
                                      + out[m.end(3):], {"FIELD_ALIAS", "NONE"})
    if _JSON_CALL.search(out):
        probes["the calls wrapped in a tag pair"] = ("<wrapped>" + out + "</wrapped>", {"FOREIGN_WRAPPER"})
    if "arg1" in out:
        probes["argument name not declared"] = (out.replace("arg1", "zzz"), {"UNKNOWN_PARAMETER", "MISSING_REQUIRED"})
        probes["Python literal in the arguments"] = (re.sub(r"(arg1\W{1,8})1", r"\1True", out, count=1),
                                                     {"TYPE_MISMATCH", "NONE"})
    m = re.search(r'"(arguments|parameters)"(\s*:\s*)(\{[^{}]*\})', out)
    if m:
        probes["arguments as a JSON string"] = (out[:m.start(3)] + json.dumps(m.group(3)) + out[m.end(3):],
                                                {"DOUBLE_ENCODED_ARGUMENTS"})
        probes["required argument left out"] = (out[:m.start(3)] + "{}" + out[m.end(3):], {"MISSING_REQUIRED"})
    first = min((t for t in toks if t in out and t not in reasoning), key=out.find, default="")
    if first:
        probes["first marker left out"] = (out.replace(first, "", 1), {"OMITTED_OPENER", "OMITTED_MARKER",
                                                                       "SPECIAL_TOKENS_STRIPPED", "NONE"})
    probes["tool name not declared"] = (out.replace("special_function", "launch_rocket"), {"UNKNOWN_TOOL"})
    probes["end-of-sequence token kept"] = (out + "<|endoftext|>", {"TRAILING_TEXT"})
    if end_token and not out.rstrip().endswith(end_token):
        probes["the turn's end token, then more text"] = (out + end_token + "\nAnything else?", {"TRAILING_TEXT"})
    probes["cut at 70 %"] = (out[:int(len(out) * 0.7)], {"CUT_SHORT"})
    closer = next((t for t in toks if t not in reasoning and t.startswith("</") and out.rstrip().endswith(t)), "")
    if closer:
        # the closer a stop string matched, removed with the whitespace before it (GLM's `\n</tool_call>`; tenth
        # round): a complete call, not a cut one
        probes["closer removed with its whitespace"] = (out.rstrip()[:-len(closer)].rstrip(),
                                                        {"STOP_STRING_STRIPPED"})
    return probes


def _reasoning(case: dict, start: str, ends: list[str]) -> dict[str, tuple[str, set[str]]]:
    out = case["input"]
    end = next((e for e in ends if e in out), "")
    if not end:
        return {}
    probes = {"reasoning closer dropped": (out.replace(end, "", 1),
                                           STRIPPED | {"CUT_SHORT", "REASONING_NOT_CLOSED", "NONE"})}
    if start:
        probes["reasoning opener written twice"] = (start + out, {"REOPENED_REASONING", "NONE"})
    if case["expect"].get("tool_calls") and "tool" not in end:     # (a handler may end reasoning at a call opener)
        probes["call written before the reasoning closer"] = (out.replace(end, "", 1) + end,
                                                              {"REASONING_NOT_CLOSED", "NONE"})
    return probes


def _end_token(t: ChatTemplate, req: ChatRequest) -> str:
    """The last control token the template's render of a call turn of ``special_function`` ends with (``<|im_end|>``,
    ``<|call|>``), or ``""`` when it ends with none."""
    from core.explain.nearest import _SPECIAL_SHAPE
    from core.explain.renders import _rendered_call

    render = _rendered_call(Setup(t, req, "llama.cpp", {}), "special_function", {"arg1": "V0"})
    end = re.search(r"(?:" + _SPECIAL_SHAPE.pattern + r"|\s)+$", render[render.find("V0") + 2:]) \
        if "V0" in render else None      # the tokens the call turn ends with, none of the call's own markup
    toks = list(_SPECIAL_SHAPE.finditer(end.group(0))) if end else []
    return toks[-1].group(0) if toks else ""


def main() -> None:
    verbose = "-v" in sys.argv[1:]
    cases = [json.loads(x) for x in (SHARED / "reference" / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    seen: dict[str, set[str]] = collections.defaultdict(set)
    score: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    misses: list[str] = []
    for c in cases:
        if c.get("is_partial"):
            continue
        kind = "calls" if c.get("tools") and c["expect"].get("tool_calls") and "special_function" in c["input"] \
            else "reasoning" if c["expect"].get("reasoning_content") else ""
        if not kind or c["template"] in seen[kind]:
            continue
        seen[kind].add(c["template"])
        t = ChatTemplate((SHARED / "templates" / c["template"]).read_text(encoding="utf-8"), c["template"])
        req = ChatRequest.from_dict(c)
        try:
            bundle = build_bundle(Setup(t, req, "llama.cpp", {}))
        except Exception:  # noqa: BLE001 - a template without a parser is no probe
            continue
        toks = sorted({x.strip() for x in getattr(bundle.parser, "preserved_tokens", None) or [] if x.strip()},
                      key=len, reverse=True)
        start, ends = reasoning_markers(bundle)
        probes = _calls(c, toks, {start, *ends}, _end_token(t, req)) if kind == "calls" \
            else _reasoning(c, start, ends)
        for name, (out, right) in probes.items():
            ex = explain(t, req, out, fixes=False)
            s = Setup(t, req, "llama.cpp", {})
            got = triage(ex, s, build_bundle(s), seconds=30.0, reexplain=explain).mistake.name
            score[name][got in right] += 1
            if got not in right:
                misses.append(f"  {name}: {c['template']} → {got}  {out[:70]!r}")
    for name, counter in score.items():
        print(f"{name:38} {counter[True]:>3} / {counter[True] + counter[False]}")
    if verbose:
        print("\n".join(misses))


if __name__ == "__main__":
    main()
