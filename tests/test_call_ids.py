"""Tool-call ids at ``improved`` fidelity (core.chat.call_ids): generated as llama.cpp's server does for calls
written without one, stable across a stream's deltas and its final message; none at llama.cpp fidelity."""

from __future__ import annotations

import json
import pathlib
import random
import re
import subprocess
import sys

from core.chat.call_ids import CallIds, new_call_id
from core.chat.cli_commands import load_chat_template, load_request
from core.chat.conformance import accumulate_deltas
from core.chat.message import AssistantMessage, ToolCall
from core.chat.pipeline import build_chat_parser
from core.chat.stream import StreamingParser

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
SHAPE = re.compile(r"call_[A-Za-z0-9]{24}")


def _bundle(fidelity: str):
    request = load_request(str(ASSETS / "requests" / "req.json"))
    template = load_chat_template(str(ASSETS / "templates" / "chatml-think-tools.jinja"), None, request)
    return build_chat_parser(template, request, fidelity=fidelity)


OUTPUT = (ASSETS / "outputs" / "output.txt").read_text(encoding="utf-8")


def test_seeded_ids_are_reproducible_and_shaped() -> None:
    a, b = new_call_id(random.Random(7)), new_call_id(random.Random(7))
    assert a == b and SHAPE.fullmatch(a)
    assert SHAPE.fullmatch(new_call_id()) and new_call_id() != new_call_id()


def test_improved_one_shot_fills_every_missing_id() -> None:
    bundle = _bundle("improved")
    msg = bundle.call_ids(random.Random(1)).message(bundle.parser.parse(OUTPUT, False))
    ids = [c.id for c in msg.tool_calls]
    assert len(ids) == 2 and all(SHAPE.fullmatch(i) for i in ids) and ids[0] != ids[1]
    again = bundle.call_ids(random.Random(1)).message(bundle.parser.parse(OUTPUT, False))
    assert [c.id for c in again.tool_calls] == ids


def test_llama_cpp_fidelity_keeps_the_reference_empty_ids() -> None:
    bundle = _bundle("llama.cpp")
    msg = bundle.call_ids().message(bundle.parser.parse(OUTPUT, False))
    assert [c.id for c in msg.tool_calls] == ["", ""]


def test_stream_ids_come_once_per_call_and_match_the_final_message() -> None:
    bundle = _bundle("improved")
    ids = bundle.call_ids()
    sp = StreamingParser(bundle.parser)
    deltas = []
    for i in range(0, len(OUTPUT), 3):
        deltas += ids.deltas(sp.feed(OUTPUT[i:i + 3]))
    deltas += ids.deltas(sp.finish(False), final=True)
    raw = [d.to_openai() for d in deltas]
    with_id = [(d["tool_calls"][0]["index"], d["tool_calls"][0]["id"]) for d in raw
               if "tool_calls" in d and "id" in d["tool_calls"][0]]
    assert [i for i, _ in with_id] == [0, 1]            # one id per call, on its first delta
    final = ids.message(sp.message)
    assert [c.id for c in final.tool_calls] == [cid for _, cid in with_id]
    assert [c["id"] for c in accumulate_deltas(raw)["tool_calls"]] == [cid for _, cid in with_id]


def test_a_models_own_id_is_kept() -> None:
    ids = CallIds(rng=random.Random(3))
    msg = ids.message(AssistantMessage(tool_calls=[ToolCall("f", "{}", "abc123"), ToolCall("g", "{}")]))
    assert msg.tool_calls[0].id == "abc123" and SHAPE.fullmatch(msg.tool_calls[1].id)


def test_cli_parse_improved_prints_ids() -> None:
    proc = subprocess.run([sys.executable, "-m", "core", "parse", "assets/templates/chatml-think-tools.jinja",
                           "--request", "assets/requests/req.json", "--improved"], input=OUTPUT, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert all(SHAPE.fullmatch(c["id"]) for c in json.loads(proc.stdout)["tool_calls"])


def test_a_format_with_ids_streams_the_models_id_not_a_generated_one(reference_cases) -> None:
    # ref-0344 (llama.cpp's own test, Mistral Nemo): the call's "id" field comes after its arguments, so a
    # stream shows the call before its id; the generated id must not take its place.
    from core.chat.cli_commands import TemplateDir, run_case

    from .conftest import TEMPLATES

    case = next(c for c in reference_cases if c["id"] == "ref-0344")
    r = run_case(case, TemplateDir(str(TEMPLATES)), "improved")
    want = case["expect"]["tool_calls"][0]["id"]
    assert want and r["message"]["tool_calls"][0]["id"] == want
    assert accumulate_deltas(r["deltas"])["tool_calls"][0]["id"] == want


def test_deferred_ids_come_in_the_final_deltas_when_the_model_wrote_none() -> None:
    from core.chat.message import MessageDelta, ToolCallDelta

    ids = CallIds(rng=random.Random(5), defer=True)
    first = ids.deltas([MessageDelta(tool_call=ToolCallDelta(0, "", "f", "{"))])
    assert first[0].tool_call.id == ""
    last = ids.deltas([MessageDelta(tool_call=ToolCallDelta(0, "", "", "}"))], final=True)
    assert SHAPE.fullmatch(last[-1].tool_call.id) and last[-1].tool_call.index == 0
    assert ids.message(AssistantMessage(tool_calls=[ToolCall("f", "{}")])).tool_calls[0].id == last[-1].tool_call.id


def test_playground_shows_call_ids_at_improved_only():
    from .test_app_helpers import json_views, page, start

    at = page(start(), "playground")
    assert [c["id"] for c in json.loads(json_views(at)[0].value)["tool_calls"]] == [""]          # llama.cpp: as is
    at.radio(key="fidelity").set_value("improved").run()
    parsed = json.loads(json_views(at)[0].value)
    final = json.loads(json_views(at)[2].value)                                                   # the stream's end
    assert SHAPE.fullmatch(parsed["tool_calls"][0]["id"]) and SHAPE.fullmatch(final["tool_calls"][0]["id"])
