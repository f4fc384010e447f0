"""No probe text in an exported pattern: the text our analysis and export render as the conversation (the
differential analysis's needles, the round trip's messages and tools) is never text the model writes, so an anchor
or delimiter holding it does not match a real prompt. Before the fix, Solar Open's `improved` export and Ernie 4.5's
(both fidelities) anchored on the round trip's user message; transformers then found no anchor in a real prompt
and parsed the whole prompt as the answer."""

from __future__ import annotations

import re

import pytest

from core.analysis import probes
from core.chat import roundtrip
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.export import response_template as rt_module
from core.export.response_template import export_response_template
from core.export.suite import generate_suite
from core.export.consumers import TRANSFORMERS_MIN
from core.export.verify import transformers_available
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES
from .export_corpus import corpus_exports

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates not present")

# written out here, not read from the module under test: what the analysis and the round trip render
NEEDLES = [probes.FUN_FIRST, probes.FUN_SECOND, probes.ARG_FIRST, probes.ARG_SECOND, probes.USER_MSG,
           probes.USER_MSG_TWO, probes.ASSISTANT_MSG, probes.THINKING_CONTENT, "XXXX", "YYYY", "call00001",
           roundtrip.USER_MESSAGE, roundtrip.REASONING_TEXT, roundtrip.CONTENT_TEXT, "Chez Nous", "get_weather",
           "book_table", "Current weather for a city"]


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _leaks(rt) -> list[str]:
    out = []
    for s in _strings(rt):
        plain = re.sub(r"\\(.)", r"\1", s, flags=re.S)  # a regex's literal text: "What\ is" is "What is"
        out += [f"{n!r} in {s[:80]!r}" for n in NEEDLES if n in s or n in plain]
    return out


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_no_export_of_the_corpus_holds_probe_text(fidelity):
    exports = corpus_exports(fidelity)
    leaked = {name: _leaks(res.response_template) for name, res in exports.items() if res.exportable}
    assert {k: v for k, v in leaked.items() if v} == {}
    # and none is kept clean by the safety net's refusal: the anchor and markers are built without probe text
    refused = {name: res.reasons for name, res in exports.items()
               if any("exported pattern holds probe text" in r for r in res.reasons)}
    assert refused == {}
    assert sum(res.exportable for res in exports.values()) >= 300  # 304 (llama.cpp) and 320 (improved), 2026-12-06


def _template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)


def _prompt(template: ChatTemplate, fidelity: str, user: str) -> str:
    req = roundtrip.round_trip_request(messages=[{"role": "user", "content": user}])
    return build_chat_parser(template, ChatRequest.from_dict(req), fidelity=fidelity).prompt


def test_solar_open_anchors_on_the_assistant_turn_not_the_user_message():
    t = _template("upstage-Solar-Open-100B.jinja")
    res = export_response_template(t, fidelity="improved")
    assert res.exportable, res.reasons
    # the reasoning end "<|end|><|begin|>assistant" is the turn header itself: cutting it from the prompt left the
    # user's message as the last text; the anchor is the uncut prompt's end (and the tool result's end marker)
    assert res.response_template["start_anchor_pattern"] == (
        r"(?:<\|begin\|>assistant|<\|tool_response:end\|>)(?:\s*<\|end\|><\|begin\|>assistant)?")


def test_ernie_anchors_on_the_text_after_the_conversation():
    # Ernie 4.5 writes "User: MESSAGE\nAssistant: " with no marker between the message and the turn
    t = _template("xinference-Ernie4.5.jinja")
    for fidelity in ("llama.cpp", "improved"):
        res = export_response_template(t, fidelity=fidelity)
        assert res.response_template["start_anchor_pattern"] == r"(?:Assistant:|<\|end_of_sentence\|>Assistant:)"


@pytest.mark.skipif(not transformers_available(), reason=f"transformers >= {TRANSFORMERS_MIN} not installed")
@pytest.mark.parametrize("name, fidelity", [("upstage-Solar-Open-100B.jinja", "improved"),
                                            ("xinference-Ernie4.5.jinja", "llama.cpp")])
def test_the_export_parses_after_a_prompt_with_another_user_message(name, fidelity):
    from transformers.utils.chat_parsing import parse_response

    t = _template(name)
    rt = export_response_template(t, fidelity=fidelity).response_template
    prompt = _prompt(t, fidelity, "Bonjour, quel temps fait-il à Lyon ?")
    cases = [c for c in generate_suite(t, fidelity=fidelity).cases
             if not c["is_partial"] and c["id"] != "suite-marker_in_argument"]
    assert cases
    for case in cases:
        # before the fix the anchor was not found: the prompt's user message came back as content beside the call
        got = parse_response(case["input"], rt, prefix=prompt, tools=case["tools"])
        assert roundtrip.compare_messages(case["expect"], got) is None, (case["id"], got)


def test_a_pattern_with_probe_text_is_refused(monkeypatch):
    # the anchor as it was built before the fix: the safety net refuses the export rather than emit it
    monkeypatch.setattr(rt_module, "_prompt_end_marker", rt_module._last_marker)
    res = export_response_template(_template("upstage-Solar-Open-100B.jinja"), fidelity="improved")
    assert not res.exportable
    assert res.reasons and "exported pattern holds probe text" in res.reasons[0]
    assert roundtrip.USER_MESSAGE[:40] in res.reasons[0]


def test_an_anchor_is_never_the_reasoning_opener_it_cuts():
    # RWKV World's prompt ends "User: MESSAGE\n\nAssistant: <think>": cut before the opener, it ends with no marker;
    # anchoring on the uncut "<think>" would swallow the opener the reasoning field needs, so it is still refused
    res = export_response_template(_template("llama-cpp-rwkv-world.jinja"), fidelity="improved")
    assert not res.exportable and "the generation prompt is empty" in res.reasons[0]
