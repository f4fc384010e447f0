"""A conformance suite per template: the cases a reviewer checks by hand, rendered from the template itself.

Each case is an assistant message (plain content, reasoning + content, one call, parallel calls, a call after
text, empty / nested / unicode arguments, the template's own call marker inside an argument string) rendered by
the template after the round-trip conversation (:func:`core.chat.roundtrip.round_trip`, which cuts the model
output from the renders and drops the end-of-turn text), plus two truncations of those outputs (inside the
reasoning, inside the second call's arguments). A case the template cannot represent (it drops or refuses a
part of the message) is not written; :attr:`Suite.skipped` says why.

Rows have the fields of ``../shared/reference/cases.jsonl`` (``expect`` is the message itself, call ids kept
where the output holds them; a truncated second call's arguments are unparsable JSON, which the reference
comparison counts as equal to any unparsable text).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from ..escapes import json_visible
from ..sources import read_template_file
from .consumers import TRANSFORMERS_MIN
from .probe_text import SUITE_TOOLS, UNICODE_CITY

@dataclass
class Suite:
    """A generated suite: ``cases`` (rows in ``cases.jsonl`` form), ``skipped`` (case name → why the template
    cannot represent it), ``template`` (file name), ``fidelity``."""

    template: str
    fidelity: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def to_jsonl(self) -> str:
        """The cases, one JSON object per line (an invisible or bidi character in a name as JSON's escape, so a
        terminal or a diff of the file shows the line as it reads back)."""
        return "".join(json_visible(c) + "\n" for c in self.cases)


def _call(cid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _marker(analysis: Any) -> str:
    """The template's own text that ends a call (the marker a naive parser would stop at), else ``</think>``."""
    f, fn = analysis.tools.format, analysis.tools.function
    for m in (f.per_call_end, fn.close, f.section_end, analysis.reasoning.end):
        if m and m.strip():
            return m.strip()
    return "</tool_call>"


def suite_messages(analysis: Any = None) -> dict[str, dict[str, Any]]:
    """Name → assistant message (OpenAI shape, arguments as objects) of every rendered suite case."""
    from ..chat.roundtrip import CONTENT_TEXT, REASONING_TEXT

    weather = _call("call00001", "get_weather", {"city": "Paris", "days": 3})
    booking = _call("call00002", "book_table", {"restaurant": "Chez Nous", "guests": 4,
                                                "options": {"time": "19:30", "table": 12}})
    marker = _marker(analysis) if analysis is not None else "</tool_call>"
    a = "assistant"
    return {
        "plain_content": {"role": a, "content": "Paris is sunny today, 21 °C."},
        "reasoning_and_content": {"role": a, "reasoning_content": REASONING_TEXT, "content": "It is sunny."},
        "one_call": {"role": a, "content": "", "tool_calls": [weather]},
        "parallel_calls": {"role": a, "content": "", "tool_calls": [weather, booking]},
        "call_after_text": {"role": a, "content": CONTENT_TEXT, "tool_calls": [weather]},
        "empty_arguments": {"role": a, "content": "", "tool_calls": [_call("call00003", "get_time", {})]},
        "nested_arguments": {"role": a, "content": "", "tool_calls": [booking]},
        "unicode_arguments": {"role": a, "content": "", "tool_calls": [
            _call("call00004", "get_weather", {"city": UNICODE_CITY, "days": 1})]},
        "marker_in_argument": {"role": a, "content": "", "tool_calls": [
            _call("call00005", "get_time", {"tz": f"UTC {marker} Paris"})]},
    }


def _without_stop_token(text: str, analysis: Any, expect: dict[str, Any]) -> str:
    """``text`` without a trailing special token that ends a tool-call turn (Llama 3.1's ``<|eom_id|>``,
    gpt-oss's ``<|call|>``): the round trip removes the end of a content turn, found from renders, but a turn that
    ends with calls may end with another token, at which generation stops — a model never writes it. Only a
    final marker that no marker of the analysis contains is removed."""
    from ..diff import SegmentKind, segmentize_markers

    if not expect.get("tool_calls"):
        return text
    segs = segmentize_markers(text.rstrip())
    if not segs or segs[-1].kind != SegmentKind.MARKER:
        return text
    last = segs[-1].value
    if not (last.startswith("<|") and last.endswith("|>")):  # special tokens only: "[…]" may be a JSON array
        return text
    t = analysis.tools
    known = [t.format.section_start, t.format.section_end, t.format.per_call_start, t.format.per_call_end,
             *(v for v in vars(t.function).values() if isinstance(v, str)),
             *(v for v in vars(t.arguments).values() if isinstance(v, str)), t.call_id.prefix, t.call_id.suffix]
    if any(last in m for m in known if m):
        return text
    return text.rstrip()[: len(text.rstrip()) - len(last)]


def _row(template: str, name: str, tools: list[dict[str, Any]], text: str, expect: dict[str, Any],
         partial: bool = False, note: str | None = None) -> dict[str, Any]:
    from ..chat.roundtrip import USER_MESSAGE

    return {"id": f"suite-{name}", "template": template, **({"note": note} if note else {}),
            "messages": [{"role": "user", "content": USER_MESSAGE}], "tools": copy.deepcopy(tools),
            "tool_choice": "auto", "parallel_tool_calls": True, "reasoning_format": "auto",
            "enable_thinking": True, "add_generation_prompt": True, "continue_final_message": None,
            "json_schema": None, "input": text, "is_partial": partial, "expect": expect}


def _truncated_reasoning(row: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    reasoning = row["expect"].get("reasoning_content") or ""
    text = row["input"]
    i = text.find(reasoning) if reasoning else -1
    if i < 0:
        return None
    cut = i + len(reasoning) // 2
    return text[:cut], {"role": "assistant", "content": "", "reasoning_content": text[i:cut]}


def _truncated_second_call(row: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    calls = row["expect"].get("tool_calls") or []
    text = row["input"]
    i = text.find("Chez Nous")
    if len(calls) != 2 or i < 0 or text.find("Paris") > i:
        return None
    cut = i + len("Chez N")
    exp = copy.deepcopy(row["expect"])
    exp["tool_calls"][1]["function"]["arguments"] = '{"restaurant": "Chez N'  # unparsable: any partial matches
    exp["tool_calls"][1]["id"] = ""
    return text[:cut], exp


SYNTHESIZED_NOTE = ("reasoning synthesized: the generation prompt opens reasoning that the template drops from "
                    "rendered turns, so the model's reasoning and its end marker are written before the rendered "
                    "turn")


def _synthesized_reasoning(template: Any, analysis: Any, msg: dict[str, Any], tools: list[dict[str, Any]],
                           fidelity: str) -> tuple[str, dict[str, Any]] | None:
    """For a template whose generation prompt opens reasoning that its rendered turns drop (QwQ, DeepSeek V3.1,
    MiniCPM-V 4.5): the output a model writes after the prompt's opener — the round trip's reasoning text, the
    reasoning end marker, then the turn the template renders for ``msg`` without reasoning. Returns (output,
    expected message), or None when the turn cannot be lined up with the prompt or holds an end of turn."""
    from ..chat.prompt import generation_prompt, prepare_request, render_prompt
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import (REASONING_TEXT, with_messages, end_of_turn_candidates, expected_message,
                                  round_trip_request, strip_end_of_turn)

    start, end = analysis.reasoning.start.strip(), analysis.reasoning.end.strip()
    plain = {k: v for k, v in msg.items() if k != "reasoning_content"}
    try:
        req = ChatRequest.from_dict(round_trip_request(tools))
        prep = prepare_request(template, req)
        prompt, gp = render_prompt(prep, add_generation_prompt=True), generation_prompt(prep)
        full = render_prompt(prepare_request(template, with_messages(req, plain), caps=prep.caps),
                             add_generation_prompt=False)
        eot = end_of_turn_candidates(template, req, caps=prep.caps, full=full)
    except Exception:  # noqa: BLE001 - the case is then skipped with the round trip's reason
        return None
    if not (start and end and prompt.endswith(gp) and start in gp):
        return None
    before = prompt[: len(prompt) - len(gp) + gp.rindex(start)]  # the prompt up to its reasoning opener
    if not full.startswith(before):
        return None
    turn = strip_end_of_turn(full[len(before):], eot)
    if any(e.strip() and e.strip() in turn for e in eot):
        # an end of turn inside: the template writes this message as several turns (DeepSeek R1 distills put
        # the calls and the content in two assistant blocks), which no single model output is
        return None
    if turn.lstrip().startswith(start):  # the template renders an empty reasoning block: fill it
        rest = turn.lstrip()[len(start):]
        if not rest.lstrip().startswith(end):
            return None
        output = REASONING_TEXT + rest
    else:
        output = f"{REASONING_TEXT}\n{end}\n\n{turn.lstrip()}"
    return output, expected_message({**plain, "reasoning_content": REASONING_TEXT}, output)


FIELD_NOTE = ("reasoning given as message.{field}: the template renders reasoning from that field, never from "
              "reasoning_content (which the request path passes), so the case is the template's own render of the "
              "message with its reasoning there")


def _reasoning_under_field(template: Any, msg: dict[str, Any], tools: list[dict[str, Any]]
                           ) -> tuple[str, dict[str, Any], str] | None:
    """For a template that renders an assistant message's reasoning from another field than
    ``reasoning_content`` — ``thinking`` (gpt-oss's analysis channel, LFM2) or ``reasoning`` (Solar Open), the
    names of :data:`core.analysis.reasoning.REASONING_FIELDS` — the output a model writes after the generation
    prompt: the template's render of ``msg`` with its reasoning under that field, after the prompt, end of turn
    removed. Returns (output, expected message, field), or None when ``msg`` has no reasoning, no field is
    rendered or the render does not continue the prompt."""
    from ..analysis.reasoning import REASONING_FIELDS
    from ..chat.prompt import prepare_request, render_prompt
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import (with_messages, end_of_turn_candidates, expected_message, round_trip_request,
                                  strip_end_of_turn)

    text = msg.get("reasoning_content")
    if not isinstance(text, str) or not text:
        return None
    try:
        req = ChatRequest.from_dict(round_trip_request(tools))
        prep = prepare_request(template, req)
        prompt = render_prompt(prep, add_generation_prompt=True)
        with_msg = prepare_request(template, with_messages(req, msg), caps=prep.caps)
    except Exception:  # noqa: BLE001 - the case is then skipped with the round trip's reason
        return None
    for name in REASONING_FIELDS:
        last = {**copy.deepcopy(with_msg.messages[-1]), name: text}
        try:
            full = render_prompt(with_msg, add_generation_prompt=False,
                                 messages_override=[*with_msg.messages[:-1], last])
            eot = end_of_turn_candidates(template, req, caps=prep.caps, full=full)
        except Exception:  # noqa: BLE001 - this field is not the template's
            continue
        if not full.startswith(prompt) or text not in full[len(prompt):]:
            continue
        output = strip_end_of_turn(full[len(prompt):], eot)
        return output, expected_message(msg, output), name
    return None


CONTENT_AS_REASONING = ("the template writes content beside a call exactly as it writes the same text as reasoning "
                        "(the two renders are equal), so no parser can read it back as content")


def _content_written_as_reasoning(template: Any, msg: dict[str, Any], tools: list[dict[str, Any]]) -> bool:
    """True when ``msg`` (content beside tool calls, no reasoning) renders exactly as the same message whose
    content is given as reasoning instead (under ``reasoning_content`` and ``thinking``, the two names templates
    read) and the text is in the render — gpt-oss writes the text beside a call in its ``analysis`` channel, which
    is reasoning (a template that drops both is reported as dropping the content by the round trip). The renders
    are the template's own; the canonical request path keeps no ``thinking`` field, so the reasoning message is
    rendered directly. False when either render fails or the message has no content beside a call."""
    from ..chat.prompt import prepare_request, render_prompt
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import with_messages, round_trip_request

    text = msg.get("content")
    if not (isinstance(text, str) and text.strip() and msg.get("tool_calls")) or msg.get("reasoning_content"):
        return False
    try:
        req = ChatRequest.from_dict(round_trip_request(tools))
        prep = prepare_request(template, with_messages(req, msg))
        as_content = render_prompt(prep, add_generation_prompt=False)
        last = {**copy.deepcopy(prep.messages[-1]), "content": "", "reasoning_content": text, "thinking": text}
        as_reasoning = render_prompt(prep, add_generation_prompt=False,
                                     messages_override=[*prep.messages[:-1], last])
    except Exception:  # noqa: BLE001 - a render failure is the round trip's to report
        return False
    return text in as_content and as_content == as_reasoning


METADATA_NOTE = ("calls rendered as the template renders a call turn (improvement metadata-call-turns): one assistant "
                 "turn per call, metadata the name and content the JSON arguments, as GLM-4's own server writes a "
                 "call into the history")


def _metadata_layout(template: Any, tools: list[dict[str, Any]], fidelity: str) -> tuple[Any, Any] | None:
    """(the suite request's bundle, the call-turn layout) when that request is parsed by the glm4-chat format
    (improvement ``metadata-call-turns``: the template renders calls only as metadata turns), else None."""
    from ..chat.formats import glm4_chat
    from ..chat.pipeline import build_chat_parser
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import round_trip_request

    try:
        bundle = build_chat_parser(template, ChatRequest.from_dict(round_trip_request(tools)), fidelity=fidelity)
    except Exception:  # noqa: BLE001 - the round trips report the failure
        return None
    layout = glm4_chat.call_layout_of(template) if bundle.format == glm4_chat.NAME else None
    return (bundle, layout) if layout is not None else None


def _metadata_call_turns(found: tuple[Any, Any], msg: dict[str, Any]) -> tuple[str, dict[str, Any]] | str:
    """The output of ``msg``'s calls as the template renders call turns after the prompt of the suite request
    (``found``: :func:`_metadata_layout`), and the expected message; or why the case is not written."""
    from ..chat.prompt import render_prompt
    from ..chat.roundtrip import expected_message

    bundle, layout = found
    if (msg.get("content") or "").strip():
        return ("template_limited: the template writes text beside a call as a turn of its own before the call "
                "turn, and the glm4-chat parser reads calls only at the start of the output (as GLM-4's own server)")
    prep = bundle.prepared
    base = list(prep.messages)
    if layout.tools_in_messages and not any(isinstance(m, dict) and m.get("tools") for m in base):
        base = [{"role": "system", "content": "", "tools": prep.tools}, *base]  # as the parser's prompt has them
    turns = [{"role": "assistant", "metadata": c["function"]["name"],
              "content": json.dumps(c["function"]["arguments"], ensure_ascii=False)} for c in msg["tool_calls"]]
    try:
        prompt = render_prompt(prep, add_generation_prompt=True, messages_override=base)
        full = render_prompt(prep, add_generation_prompt=False, messages_override=[*base, *turns])
    except Exception as e:  # noqa: BLE001 - a template that cannot render the turns has no such case
        return f"template_limited: the call turns do not render ({type(e).__name__})"
    if prompt != bundle.prompt or not full.startswith(prompt) or not full.rstrip().endswith(turns[-1]["content"]):
        return "template_limited: the call turns do not continue the prompt"
    output = full[len(prompt):].rstrip()
    return output, expected_message(msg, output)


def _forced_reasoning(template: Any, analysis: Any, tools: list[dict[str, Any]], fidelity: str) -> bool:
    """The suite request's generation prompt opens reasoning (holds the reasoning start marker and no end marker
    after it): forced-open reasoning."""
    from ..chat.pipeline import build_chat_parser
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import round_trip_request

    start = analysis.reasoning.start.strip()
    if analysis.reasoning.mode.value == "NONE" or not start:
        return False
    try:
        gp = build_chat_parser(template, ChatRequest.from_dict(round_trip_request(tools)),
                               fidelity=fidelity).generation_prompt
    except Exception:  # noqa: BLE001 - the round trips report the failure
        return False
    if start not in gp:
        return False
    # opened and not closed again; text may follow the opener (Apriel 1.6: "…\nHere are my reasoning steps:\n")
    end = analysis.reasoning.end.strip()
    return not (end and end in gp[gp.rindex(start) + len(start):])


def generate_suite(template: Any, *, fidelity: str = "llama.cpp") -> Suite:
    """The suite for ``template`` (a :class:`~core.jinja.template.ChatTemplate`) at ``fidelity``. Never raises for
    template failures (a case the template cannot render lands in ``skipped``)."""
    from ..chat.pipeline import cached_analysis
    from ..chat.roundtrip import REASONING_TEXT, ROUND_TRIP_TOOLS, RoundTripStatus, round_trip
    from ..errors import ChatTemplateExplorerError

    tools = copy.deepcopy(ROUND_TRIP_TOOLS) + copy.deepcopy(SUITE_TOOLS)
    suite = Suite(template.name, fidelity)
    try:
        analysis = cached_analysis(template, fidelity).analysis
    except ChatTemplateExplorerError as e:
        suite.skipped["*"] = f"analysis fails: {e}"
        return suite
    has_tools = analysis.caps.supports_tool_calls
    forced = _forced_reasoning(template, analysis, tools, fidelity)
    from ..chat.pipeline import route_for

    reads_reasoning = analysis.reasoning.mode.value != "NONE" or route_for(template.source).kind == "specialized"
    rows: dict[str, dict[str, Any]] = {}
    turns = _metadata_layout(template, tools, fidelity) if not has_tools else None
    for name, msg in suite_messages(analysis).items():
        if forced and not msg.get("reasoning_content"):
            # the generation prompt opens reasoning: a model always writes reasoning and its end marker first
            msg = {**msg, "reasoning_content": REASONING_TEXT}
        if msg.get("tool_calls") and turns is not None:
            if name == "marker_in_argument":  # the text that starts the next call turn, inside a string
                call = copy.deepcopy(msg["tool_calls"][0])
                call["function"]["arguments"]["tz"] = f"UTC {turns[1].between or '<|assistant|>'} Paris"
                msg = {**msg, "tool_calls": [call]}
            got = _metadata_call_turns(turns, msg)
            if isinstance(got, str):
                suite.skipped[name] = got
            else:
                rows[name] = _row(template.name, name, tools, got[0], got[1], note=METADATA_NOTE)
            continue
        if msg.get("tool_calls") and not has_tools:
            suite.skipped[name] = "the template does not render tool calls"
            continue
        if _content_written_as_reasoning(template, msg, tools):
            suite.skipped[name] = f"template_limited: {CONTENT_AS_REASONING}"
            continue
        r = round_trip(template, msg, tools, reduce=False, fidelity=fidelity)
        if forced and r.status == RoundTripStatus.TEMPLATE_LIMITED and r.why == "template drops reasoning" \
                and (synth := _synthesized_reasoning(template, analysis, msg, tools, fidelity)) is not None:
            rows[name] = _row(template.name, name, tools, synth[0], synth[1], note=SYNTHESIZED_NOTE)
            continue
        if r.status == RoundTripStatus.TEMPLATE_LIMITED or r.status == RoundTripStatus.PARSER_ERROR:
            suite.skipped[name] = f"{r.status.value}: {r.why}"
            continue
        if name == "reasoning_and_content" and r.variant != "full":
            # only where this fidelity's parser is meant to read reasoning: a special handler (gpt-oss) or an
            # analysis that found reasoning (Solar Open at improved: reasoning-field)
            if reads_reasoning and (field := _reasoning_under_field(template, msg, tools)) is not None:
                rows[name] = _row(template.name, name, tools, field[0], field[1],
                                  note=FIELD_NOTE.format(field=field[2]))
                continue
            suite.skipped[name] = "the template has no place for reasoning here: " + "; ".join(r.notes)
            continue
        rows[name] = _row(template.name, name, tools, _without_stop_token(r.rendered_output, analysis, r.expected),
                          r.expected)
    for name, base, cut in (("truncated_in_reasoning", "reasoning_and_content", _truncated_reasoning),
                            ("truncated_in_second_call", "parallel_calls", _truncated_second_call)):
        got = cut(rows[base]) if base in rows else None
        if got is None:
            suite.skipped[name] = f"no {base} case to cut" if base not in rows else "the output cannot be cut there"
            continue
        rows[name] = _row(template.name, name, tools, got[0], got[1], partial=True, note=rows[base].get("note"))
    suite.cases = list(rows.values())
    return suite


def check_suite_ours(suite: Suite, template: Any) -> dict[str, str | None]:
    """Run every suite case through our parser (one-shot and one character at a time, as ``conform`` does);
    case id → None (pass) or the first difference."""
    from ..chat.conformance import accumulate_deltas, run_case
    from ..chat.roundtrip import compare_messages

    class _One:
        def get(self, name: str) -> Any:
            return template

    out: dict[str, str | None] = {}
    for case in suite.cases:
        res = run_case(case, _One(), suite.fidelity)  # type: ignore[arg-type]
        if res.get("error"):
            out[case["id"]] = f"error: {res['error']}"
            continue
        why = compare_messages(case["expect"], res["message"]) or \
            compare_messages(case["expect"], accumulate_deltas(res["deltas"]))
        out[case["id"]] = why
    return out


# The file is fixed text: the template's name (untrusted: a file or variant name) enters it only as an ASCII string
# literal (core.codegen.py_str), never in the docstring or a comment.
_TEST_FILE = '''"""Conformance suite for the template in template.jinja (its name: TEMPLATE_NAME), generated by
`python -m core suite` (Chat Template Explorer).

Runs cases.jsonl beside this file against
  * our parser (SUITE_BACKEND=ours, the default when the `core` package is importable), or
  * transformers' parse_response with response_template.json (SUITE_BACKEND=transformers; transformers >= {transformers_min}).
Messages are compared as llama.cpp's reference compares them: content / reasoning_content after stripping
outer whitespace, the same tool calls (name, arguments as JSON, id where the expected id is not empty); a
truncated call's unparsable arguments equal any unparsable text.
"""
import importlib.util
import json
import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent
CASES = [json.loads(line) for line in (HERE / "cases.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
TEMPLATE = (HERE / "template.jinja").read_text(encoding="utf-8")
PROMPTS = json.loads((HERE / "prompts.json").read_text(encoding="utf-8"))


def _importable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


_NEEDS = {{"ours": ("core.chat.pipeline", "the Chat Template Explorer's `core` package (PYTHONPATH=its checkout)"),
          "transformers": ("transformers.utils.chat_parsing", "transformers >= {transformers_min}")}}
BACKEND = os.environ.get("SUITE_BACKEND") or ("ours" if _importable("core.chat.pipeline") else "transformers")
# an unknown or missing backend stops the run: skipping every case would report a suite that checked nothing as green
if BACKEND not in _NEEDS:
    pytest.exit(f"SUITE_BACKEND={{BACKEND!r}}: expected 'ours' or 'transformers'", returncode=4)
if not _importable(_NEEDS[BACKEND][0]):
    pytest.exit(f"SUITE_BACKEND={{BACKEND}} needs {{_NEEDS[BACKEND][1]}}, which is not importable", returncode=4)
FIDELITY = {fidelity}
TEMPLATE_NAME = {name}


def _args(a):
    if isinstance(a, str):
        try:
            return json.loads(a)
        except ValueError:
            return "<unparsable>"
    return a


def same(expected, got):
    for k in ("content", "reasoning_content"):
        assert (expected.get(k) or "").strip() == (got.get(k) or "").strip(), k
    et, gt = expected.get("tool_calls") or [], got.get("tool_calls") or []
    assert len(et) == len(gt), "number of tool calls"
    for e, g in zip(et, gt):
        assert e["function"]["name"] == g["function"]["name"]
        assert _args(e["function"]["arguments"]) == _args(g["function"]["arguments"])
        if e.get("id"):
            assert e["id"] == g.get("id")


def parse_ours(case):
    from core.chat import pipeline as core_pipeline
    from core.chat.request import ChatRequest
    from core.jinja.template import ChatTemplate

    bundle = core_pipeline.build_chat_parser(ChatTemplate(TEMPLATE, TEMPLATE_NAME), ChatRequest.from_dict(case),
                                             fidelity=FIDELITY)
    return bundle.parser.parse(case["input"], bool(case["is_partial"])).to_openai()


def parse_transformers(case):
    from transformers.utils import chat_parsing
    if case["is_partial"]:
        pytest.skip("transformers parses a region only once it closes (truncated output)")
    if case["id"] == "suite-marker_in_argument":
        pytest.skip("a response_template finds regions by their delimiters alone: the template's own closing "
                    "marker inside an argument string ends the region early (a limit of the format)")
    rt = json.loads((HERE / "response_template.json").read_text(encoding="utf-8"))
    msg = chat_parsing.parse_response(case["input"], rt, prefix=PROMPTS[case["id"]], tools=case["tools"])
    if "thinking" in msg:
        msg["reasoning_content"] = msg.pop("thinking")
    return msg


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    if BACKEND == "transformers" and not (HERE / "response_template.json").exists():
        pytest.skip("no response_template.json: the template cannot be exported")
    got = parse_transformers(case) if BACKEND == "transformers" else parse_ours(case)
    same(case["expect"], got)
'''


def write_suite(suite: Suite, template: Any, directory: str, *, flavour: str = "transformers") -> dict[str, str]:
    """Write ``cases.jsonl``, ``template.jinja`` (the template text, so the suite runs anywhere),
    ``prompts.json`` (case id → the prompt, the ``prefix`` transformers needs), ``response_template.json``
    (when the template exports), ``skipped.json`` and ``test_suite.py`` into ``directory`` (created). Returns
    the paths by kind. Raises ``OSError`` when the directory cannot be written."""
    import os

    from ..chat.pipeline import build_chat_parser
    from ..chat.request import ChatRequest
    from ..codegen import py_str
    from .response_template import export_response_template

    os.makedirs(directory, exist_ok=True)
    paths = {k: os.path.join(directory, f) for k, f in (
        ("cases", "cases.jsonl"), ("template", "template.jinja"), ("prompts", "prompts.json"),
        ("response_template", "response_template.json"), ("skipped", "skipped.json"), ("test", "test_suite.py"))}
    prompts = {c["id"]: build_chat_parser(template, ChatRequest.from_dict(c), fidelity=suite.fidelity).prompt
               for c in suite.cases}
    res = export_response_template(template, fidelity=suite.fidelity, flavour=flavour)
    files = {"cases": suite.to_jsonl(), "template": template.source,
             "prompts": json_visible(prompts, indent=1),
             "skipped": json_visible({**suite.skipped, **({"response_template": res.reasons} if res.reasons else {})},
                                     indent=1),
             "test": _TEST_FILE.format(name=py_str(template.name), fidelity=py_str(suite.fidelity),
                                      transformers_min=TRANSFORMERS_MIN)}
    if res.exportable:
        files["response_template"] = json_visible(res.response_template, indent=2)
    elif os.path.exists(paths["response_template"]):
        os.remove(paths["response_template"])
    for kind, text in files.items():
        with open(paths[kind], "w", encoding="utf-8") as f:
            f.write(text)
    return paths


def suite_batch(directory: str, *, fidelity: str = "llama.cpp") -> list[dict[str, Any]]:
    """For every tool-capable template of ``directory`` (``*.jinja``; :func:`core.chat.roundtrip.eligibility`):
    generate its suite and run it with our parser. Rows: ``template``, ``cases``, ``failed`` (case id → first
    difference), ``skipped`` (case name → reason). Never raises for a template."""
    import pathlib

    from ..chat.roundtrip import eligibility
    from ..jinja.template import ChatTemplate

    rows = []
    for path in sorted(pathlib.Path(directory).glob("*.jinja")):
        try:
            template = ChatTemplate(read_template_file(path), path.name)
        except Exception:  # noqa: BLE001 - unreadable files are not part of the population
            continue
        if not eligibility(template, fidelity).eligible:
            continue
        suite = generate_suite(template, fidelity=fidelity)
        failed = {k: v for k, v in check_suite_ours(suite, template).items() if v}
        rows.append({"template": path.name, "cases": len(suite.cases), "failed": failed, "skipped": suite.skipped})
    return rows
