"""The engine golden file: what the special-format families' parsers give today, recorded so a change of parser
engine can be checked against it (issue 27, docs/engine.md).

Inputs (:func:`inputs`), for every template the registry routes to a special family:

* the reference cases (``../shared/reference/cases.jsonl``) of those templates, with their own request;
* llama.cpp b11549's own cases for the families it added (``tests/data/b11549/cases.jsonl``, their templates
  beside them);
* the drift suite cases (``tests/data/drift``) of those templates;
* per family (first template in file order): the round-trip message (:mod:`core.chat.roundtrip`) rendered by the
  template, whole and cut at a third and two thirds; and the hostile outputs of :mod:`bench.hostile` at a payload
  of 300 characters (escapes, brackets, many calls, a flood of ``<``, prose).

Per input and fidelity (``llama.cpp`` and ``improved``), :func:`record` keeps: the final message, the fired repairs,
the deltas streamed at chunk sizes 1, 7 and whole (plus the stream's settled message), the grammar (its SHA-256;
the text is stored once per digest), lazy flag, triggers, preserved tokens, and explain's spans and stop point.

Record: ``python -m tests.engine_golden`` (writes :data:`GOLDEN`); ``tests/test_engine_golden.py`` compares.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import sys
from typing import Any, Iterator

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = ROOT.parent / "shared" / "templates"
CASES = ROOT.parent / "shared" / "reference" / "cases.jsonl"
DRIFT = ROOT / "tests" / "data" / "drift"
B11549 = ROOT / "tests" / "data" / "b11549"   # llama.cpp b11549's families: their templates and upstream cases
GOLDEN = ROOT / "tests" / "data" / "engine_golden.jsonl.gz"
LISTED = ROOT / "tests" / "data" / "engine_golden_listed.json"  # the reviewed differences (docs/engine.md)
FIDELITIES = ("llama.cpp", "improved")
CHUNKS = (1, 7, 0)  # 0: the whole output in one feed
HOSTILE_CHARS = 300


def template_path(name: str) -> pathlib.Path:
    """A template by file name: tests/data/b11549 (the b11549 families' own templates), else the shared corpus."""
    return B11549 / name if (B11549 / name).exists() else TEMPLATES / name


def _route(name: str) -> str | None:
    from core.analysis.routing import detect_route

    return detect_route(template_path(name).read_text(encoding="utf-8")).handler


def inputs() -> Iterator[dict[str, Any]]:
    """Every golden input: ``{"key", "family", "template", "request" (ChatRequest dict), "output",
    "partial"}``, in a stable order."""
    from core.chat.drift import load_cases
    from core.chat.roundtrip import round_trip_message, round_trip_request, sample_output

    routes: dict[str, str | None] = {}

    def family(name: str) -> str | None:
        if name not in routes:
            routes[name] = _route(name)
        return routes[name]

    first: dict[str, str] = {}
    with open(CASES, encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            fam = family(case["template"])
            if fam is None:
                continue
            first.setdefault(fam, case["template"])
            req = {k: v for k, v in case.items() if k not in ("id", "template", "input", "is_partial", "expect")}
            yield {"key": f"case:{case['id']}", "family": fam, "template": case["template"], "request": req,
                   "output": case["input"], "partial": bool(case.get("is_partial"))}
    with open(B11549 / "cases.jsonl", encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            fam = family(case["template"])
            if fam is None:
                continue
            req = {k: v for k, v in case.items()
                   if k not in ("id", "source", "template", "input", "is_partial", "expect")}
            yield {"key": f"b11549:{case['id']}", "family": fam, "template": case["template"], "request": req,
                   "output": case["input"], "partial": bool(case.get("is_partial"))}
    for dc in load_cases([str(DRIFT)]):
        fam = family(dc.template)
        if fam is not None:
            yield {"key": f"drift:{dc.id}", "family": fam, "template": dc.template, "request": dc.request,
                   "output": dc.output, "partial": False}
    from core.jinja.template import ChatTemplate

    from bench.hostile import KINDS, _turn
    from bench.outputs import _request, _turn_text

    for fam, name in _family_templates().items():
        template = ChatTemplate(template_path(name).read_text(encoding="utf-8"), name)
        req = round_trip_request()
        for reasoning in (True, False):
            try:
                out = sample_output(template, req, round_trip_message(reasoning=reasoning))
            except Exception:  # the template cannot render this message: nothing to record
                continue
            tag = "rt" if reasoning else "rt-plain"
            for cut, part in ((1, 3), (2, 3), (3, 3)):
                n = len(out) * cut // part
                yield {"key": f"{tag}:{fam}:{cut}/{part}", "family": fam, "template": name, "request": req,
                       "output": out[:n], "partial": False}
        messages = [{"role": "user", "content": "Plan my trip to Paris."}]
        for kind in KINDS:
            try:
                out = _turn_text(template, messages, _turn(kind, HOSTILE_CHARS))
            except Exception:
                continue
            yield {"key": f"hostile:{fam}:{kind}", "family": fam, "template": name, "request": _request(messages),
                   "output": out, "partial": False}


def _family_templates() -> dict[str, str]:
    """Family -> its first template: the first reference case's, else the first corpus file routed to it."""
    out: dict[str, str] = {}
    with open(CASES, encoding="utf-8") as f:
        for line in f:
            name = json.loads(line)["template"]
            fam = _route(name)
            if fam is not None:
                out.setdefault(fam, name)
    for path in sorted(TEMPLATES.glob("*.jinja")) + sorted(B11549.glob("*.jinja")):
        fam = _route(path.name)
        if fam is not None:
            out.setdefault(fam, path.name)
    return out


def _digest(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def _stream(parser: Any, output: str, chunk: int, partial: bool) -> dict[str, Any]:
    from core.chat.stream import StreamingParser

    sp = StreamingParser(parser)
    deltas: list[Any] = []
    step = chunk or max(1, len(output))
    for i in range(0, len(output), step):
        deltas.extend(sp.feed(output[i:i + step]))
    deltas.extend(sp.finish(partial))
    return {"deltas": [d.to_openai() for d in deltas], "message": sp.message.to_openai(),
            "held_back": sp.held_back, "final_mismatch": bool(sp.final_mismatch)}


def record(item: dict[str, Any], fidelity: str, templates: dict[str, Any], grammars: dict[str, str]) -> dict:
    """The golden row of one input at one fidelity (see the module doc); grammar texts go to ``grammars``."""
    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest
    from core.explain.explain import explain
    from core.jinja.template import ChatTemplate

    name = item["template"]
    if name not in templates:
        templates[name] = ChatTemplate(template_path(name).read_text(encoding="utf-8"), name)
    template = templates[name]
    row: dict[str, Any] = {"key": item["key"], "fidelity": fidelity, "family": item["family"]}
    try:
        request = ChatRequest.from_dict(item["request"])
        bundle = build_chat_parser(template, request, fidelity=fidelity)
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"
        return row
    parser = bundle.parser
    output, partial = item["output"], item["partial"]
    g = getattr(parser, "grammar", None)
    row["grammar"] = _digest(g)
    if g is not None:
        grammars[row["grammar"]] = g
    row["lazy"] = bool(getattr(parser, "grammar_lazy", False))
    row["triggers"] = [[t.type.value if hasattr(t.type, "value") else str(t.type), t.value]
                       for t in getattr(parser, "grammar_triggers", []) or []]
    row["preserved"] = list(getattr(parser, "preserved_tokens", []) or [])
    msg = parser.parse(output, partial)
    row["message"] = msg.to_openai()
    row["repairs"] = [[r.name, r.start, r.end, r.detail, r.why] for r in msg.repairs]
    row["stream"] = {str(c): _stream(parser, output, c, partial) for c in CHUNKS}
    try:
        ex = explain(template, request, output, fidelity=fidelity, fixes=False)
        row["explain"] = {"spans": [s.to_json() for s in ex.spans],
                          "stop": ex.stop.to_json() if ex.stop else None,
                          "message": ex.message, "consistency": ex.consistency}
    except Exception as e:
        row["explain"] = {"error": f"{type(e).__name__}: {e}"}
    return row


def record_all(families: set[str] | None = None) -> tuple[list[dict], dict[str, str]]:
    """Rows for every input (of ``families`` only, when given) at both fidelities, and the grammar texts."""
    from core.jinja.hf import pinned_clock

    from tests.conftest import REFERENCE_CLOCK

    rows: list[dict] = []
    grammars: dict[str, str] = {}
    templates: dict[str, Any] = {}
    with pinned_clock(REFERENCE_CLOCK):
        for item in inputs():
            if families is not None and item["family"] not in families:
                continue
            for fid in FIDELITIES:
                rows.append(record(item, fid, templates, grammars))
    return rows, grammars


def plain(row: dict) -> dict:
    """``row`` with explain's spans compared as labels per character: without ``field`` (the scanner engine
    named its builder call there, e.g. ``add_content``; a PEG names the analysis field or nothing), blank text
    between markers counted as marker (the scanner took it into the marker, a PEG labels it whitespace) and
    neighbours of the same label, call and kind joined (where a marker run is cut in two differs by engine):
    listed difference 1 of docs/engine.md."""
    ex = row.get("explain")
    if isinstance(ex, dict) and "spans" in ex:
        spans: list[dict] = []
        for s in ex["spans"]:
            s = {k: v for k, v in s.items() if k != "field"}
            if s["label"] == "whitespace":
                s["label"] = "marker"
            p = spans[-1] if spans else None
            if p is not None and p["end"] == s["start"] and all(p.get(k) == s.get(k) for k in _SAME):
                spans[-1] = {**p, "end": s["end"], "text": p["text"] + s["text"]}
            else:
                spans.append(s)
        stop = ex.get("stop")
        # the stop point is compared by its fields (position, what was expected and found, the rule path); its
        # ``words`` are their wording for a reader (how a line break is shown), not the engine's answer
        if isinstance(stop, dict):
            stop = {k: v for k, v in stop.items() if k != "words"}
        row = {**row, "explain": {**ex, "spans": spans, "stop": stop}}
    return row


_SAME = ("label", "call", "kind", "in_prompt", "repair")


def plain_message(msg: dict) -> dict:
    """An OpenAI message with the default fields filled (role, content, reasoning, calls with ids), so two ways
    of writing the same message compare equal."""
    return {"role": "assistant", "content": msg.get("content") or "",
            "reasoning_content": msg.get("reasoning_content") or "",
            "tool_calls": [{"id": c.get("id") or "", "type": "function",
                            "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                           for c in msg.get("tool_calls") or []]}


def _accumulated(deltas: list[dict]) -> dict:
    from core.chat.conformance import accumulate_deltas

    return plain_message(accumulate_deltas(deltas))


def within(why: str, field: str, want, got, row: dict | None = None) -> bool:
    """Whether ``got`` differs from ``want`` only as the listed difference ``why`` allows: the deltas split
    otherwise (the same settled message, hold-backs and accumulated deltas per chunk size), or explain's spans
    and stop point (the same message and consistency)."""
    if why == "scanner-unparsed":   # the recorded scanner gave up there: its text became unparsed-text content
        return row is not None and any(r[0] == "unparsed-text" for r in row.get("repairs") or [])
    if type(want) is not type(got):
        return False
    if why == "characters":
        return _characters_kept(field, want, got)
    if field == "stream" and why == "deltas":
        return all(got[c]["message"] == w["message"] and got[c]["held_back"] == w["held_back"]
                   and got[c]["final_mismatch"] == w["final_mismatch"]
                   and _accumulated(got[c]["deltas"]) == _accumulated(w["deltas"]) for c, w in want.items())
    if field == "stream" and why == "cut-call":
        def calls(msg: dict) -> list:
            return msg.get("tool_calls") or []

        def ahead(w: dict, g: dict) -> bool:   # the same, except the last call's arguments went further
            wc, gc = calls(w), calls(g)
            if len(wc) != len(gc) or not wc or {**w, "tool_calls": wc[:-1]} != {**g, "tool_calls": gc[:-1]}:
                return False
            wa, ga = wc[-1]["function"]["arguments"], gc[-1]["function"]["arguments"]
            return wc[-1]["function"]["name"] == gc[-1]["function"]["name"] and ga.startswith(wa)

        return all(ahead(plain_message(w["message"]), plain_message(got[c]["message"]))
                   and ahead(_accumulated(w["deltas"]), _accumulated(got[c]["deltas"])) for c, w in want.items())
    if field == "repairs" and why == "rejected":   # truncated-call's why: the call's text does not fit, not cut
        return len(want) == len(got) and all(w[:4] == g[:4] and (w[4], g[4]) in (("cut", "rejected"),) or w == g
                                             for w, g in zip(want, got))
    if field == "explain" and why == "rebuilt":   # the recorded spans did not rebuild the message; now they do
        return (got.get("message") == want.get("message") and bool(want.get("consistency"))
                and not got.get("consistency"))
    if field == "explain" and why in ("end-marker", "spans"):
        return got.get("message") == want.get("message") and got.get("consistency") == want.get("consistency")
    return False


def _content_grew(want: dict, got: dict) -> bool:
    """``got`` is ``want`` with text appended to its content (a tail ``want`` had appended from a later start,
    unparsed-text's first lost word, may be replaced by the longer one): every other field the same."""
    w, g = plain_message(want), plain_message(got)
    if {**w, "content": ""} != {**g, "content": ""}:
        return False
    wc, gc = w["content"], g["content"]
    p = len(os.path.commonprefix([wc, gc]))
    return len(gc) > p and gc[p:].endswith(wc[p:])


def _characters_kept(field: str, want: Any, got: Any) -> bool:
    """Listed kind ``characters`` (repair unparsed-characters, improved): characters the final parse dropped
    without dropping a word are appended to the content, with the repair's record — nothing else differs."""
    if field == "message":
        return _content_grew(want, got)
    if field == "repairs":
        added = [r for r in got if r[0] == "unparsed-characters"]
        rest = [r for r in got if r[0] != "unparsed-characters"]
        replaced = [r for r in want if r not in rest]
        return len(added) == 1 and all(r in want for r in rest) and all(r[0] == "unparsed-text" for r in replaced) \
            and len(replaced) <= 1
    if field == "stream":
        return set(want) == set(got) and all(
            _content_grew(w["message"], got[c]["message"]) and got[c]["held_back"] == w["held_back"]
            and got[c]["final_mismatch"] == w["final_mismatch"]
            and _content_grew(_accumulated(w["deltas"]), _accumulated(got[c]["deltas"])) for c, w in want.items())
    if field == "explain":
        return _content_grew(want.get("message") or {}, got.get("message") or {}) \
            and got.get("consistency") == want.get("consistency")
    return False


def difference_list(families: set[str]) -> tuple[dict[str, str], list[str]]:
    """Compare the current engine with the golden rows of ``families``: ``(listed, unexplained)`` — the
    differences that fit a reviewed kind (``deltas``: only the split of the deltas; ``end-marker``: explain on
    an output that ends inside a marker; ``spans``: explain's spans, same message and consistency) and the
    others, which must be fixed."""
    from core.jinja.hf import pinned_clock

    from tests.conftest import REFERENCE_CLOCK

    rows, _ = load()
    items = {i["key"]: i for i in inputs() if i["family"] in families}
    listed: dict[str, str] = {}
    bad: list[str] = []
    templates: dict[str, Any] = {}
    with pinned_clock(REFERENCE_CLOCK):
        for want in rows:
            if want["family"] not in families:
                continue
            want = plain(want)
            got = plain(record(items[want["key"]], want["fidelity"], templates, {}))
            for f in ("error", "grammar", "lazy", "triggers", "preserved", "message", "repairs", "stream", "explain"):
                if got.get(f) == want.get(f):
                    continue
                kinds = {"stream": ["deltas", "cut-call"], "repairs": ["rejected"],
                         "explain": ["end-marker" if want["key"].endswith(":lt") else "spans", "rebuilt"]}
                why = next((k for k in kinds.get(f, []) + ["scanner-unparsed"]
                            if within(k, f, want.get(f), got.get(f), want)), None)
                key = f"{want['key']}|{want['fidelity']}|{f}"
                if why:
                    listed[key] = why
                else:
                    bad.append(f"{key}: recorded {str(want.get(f))[:300]} / now {str(got.get(f))[:300]}")
    return listed, bad


def load() -> tuple[list[dict], dict[str, str]]:
    """The stored golden rows and grammar texts."""
    rows, grammars = [], {}
    with gzip.open(GOLDEN, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if "grammar_text" in d:
                grammars[d["digest"]] = d["grammar_text"]
            else:
                rows.append(d)
    return rows, grammars


def main() -> int:
    if sys.argv[1:2] == ["--list"]:   # update the reviewed differences of the given families
        families = set(sys.argv[2:])
        listed, bad = difference_list(families)
        old = json.loads(LISTED.read_text(encoding="utf-8")) if LISTED.exists() else {}
        mine = {i["key"] for i in inputs() if i["family"] in families}
        keep = {k: v for k, v in old.items() if k.split("|")[0] not in mine}
        print("\n".join(bad[:20]), file=sys.stderr)
        print(f"{len(listed)} listed, {len(bad)} unexplained", file=sys.stderr)
        if not bad:
            LISTED.write_text(json.dumps({**keep, **listed}, indent=0, sort_keys=True) + "\n", encoding="utf-8")
        return 1 if bad else 0
    rows, grammars = record_all()
    with gzip.open(GOLDEN, "wt", encoding="utf-8", compresslevel=9) as f:
        for digest, text in sorted(grammars.items()):
            f.write(json.dumps({"digest": digest, "grammar_text": text}, ensure_ascii=False) + "\n")
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{GOLDEN}: {len(rows)} rows, {len(grammars)} grammars", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
