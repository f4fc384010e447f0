"""Improvement ``gemma-call-syntax``: Gemma-style calls with a template's own markers (FunctionGemma)."""

from __future__ import annotations

import json

import pytest

from core.analysis import analyze
from core.analysis.fidelity import GEMMA_CALL_SYNTAX, IMPROVEMENTS_BY_NAME
from core.chat import roundtrip as RT
from core.chat.formats.gemma4 import GEMMA4_SYNTAX, call_syntax_of, typed_value
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.export.suite import check_suite_ours, generate_suite
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

FG = "vllm-tool_chat_template_functiongemma.jinja"
CALL = ("<start_function_call>call:get_weather{city:<escape>Paris, France<escape>,days:<escape>3<escape>}"
        "<end_function_call>")


def _tmpl(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


def _bundle(fidelity: str, report=None):
    req = ChatRequest.from_dict(RT.round_trip_request())
    return build_chat_parser(_tmpl(FG), req, fidelity=fidelity, report=report)


def test_markers_learned_from_the_render():
    s = call_syntax_of(_tmpl(FG))
    assert (s.call_start, s.call_end, s.string, s.quoted_values) == \
        ("<start_function_call>", "<end_function_call>", "<escape>", True)
    # Gemma 4's own template gives back llama.cpp's markers, values not quoted
    assert call_syntax_of(_tmpl("google-gemma-4-31B-it.jinja")) == GEMMA4_SYNTAX
    assert call_syntax_of(_tmpl("hfjs-deepseek-ai-DeepSeek-R1.jinja")) is None


def test_functiongemma_calls_parse_at_improved_only():
    b = _bundle("improved")
    assert b.format == "gemma4" and any(GEMMA_CALL_SYNTAX in n for n in b.notes)
    msg = b.parser.parse("\n" + CALL + "\n").to_openai()
    assert (msg.get("content") or "").strip() == ""
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"]
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris, France", "days": 3}
    plain = b.parser.parse("It is sunny.").to_openai()
    assert plain["content"] == "It is sunny." and not plain.get("tool_calls")
    # llama.cpp fidelity, and improved with the improvement switched off: the call stays content
    assert not _bundle("llama.cpp").parser.parse(CALL).to_openai().get("tool_calls")
    off = analyze(_tmpl(FG), fidelity="improved", disabled_improvements=[GEMMA_CALL_SYNTAX])
    assert not _bundle("improved", off).parser.parse(CALL).to_openai().get("tool_calls")
    assert IMPROVEMENTS_BY_NAME[GEMMA_CALL_SYNTAX].example == FG


def test_typed_values():
    assert typed_value('"3"', "integer") == "3"
    assert typed_value('"3"', "string") == '"3"'
    assert typed_value('"True"', "boolean") == "true"
    assert typed_value('"x"', "integer") == '"x"'
    assert typed_value('"[1, 2]"', "array") == "[1,2]"
    assert typed_value('"2.5"', ["number", "null"]) == "2.5"


def test_generated_suite_passes_streamed_and_one_shot():
    suite = generate_suite(_tmpl(FG), fidelity="improved")
    assert len(suite.cases) == 5
    assert check_suite_ours(suite, _tmpl(FG)) == {c["id"]: None for c in suite.cases}


def test_typed_values_never_take_back_a_streamed_comma():
    # a fresh-eyes report: with typed values the comma after a complete member streamed, then the parse of the
    # next key (which streams nothing until its value is complete) dropped it again ({"origin":"ICN", → …"ICN")
    from core.chat.stream import StreamingParser

    parser = _bundle("improved").parser
    out = ("<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:<escape>3<escape>}"
           "<end_function_call>")
    for cut in range(len(out) + 1):
        sp = StreamingParser(parser)
        for ch in out[:cut]:
            sp.feed(ch)
        sp.finish(is_partial=cut < len(out))
        one_shot = parser.parse(out[:cut], cut < len(out))
        assert sp.held_back == 0 and not sp.final_mismatch, cut
        assert [c.arguments for c in sp.message.tool_calls] == [c.arguments for c in one_shot.tool_calls], cut
    assert json.loads(one_shot.tool_calls[0].arguments) == {"city": "Paris", "days": 3}


def test_cli_parse_switches_an_improvement_off(tmp_path):
    # `parse --disable-improvement NAME` (the README's switch) was only on `analyze`
    import pathlib
    import subprocess
    import sys

    req = tmp_path / "req.json"
    req.write_text(json.dumps(RT.round_trip_request()), encoding="utf-8")
    root = pathlib.Path(__file__).resolve().parents[1]

    def parse(*extra: str) -> tuple[int, str, str]:
        p = subprocess.run([sys.executable, "-m", "core", "parse", str(TEMPLATES / FG), "--request", str(req),
                            "--compact", *extra], input=CALL, capture_output=True, text=True, cwd=root, timeout=120)
        return p.returncode, p.stdout, p.stderr

    rc, out, _ = parse("--improved")
    assert rc == 0 and json.loads(out)["tool_calls"][0]["function"]["name"] == "get_weather"
    rc, out, _ = parse("--improved", "--disable-improvement", GEMMA_CALL_SYNTAX)
    assert rc == 0 and json.loads(out) == {"role": "assistant", "content": CALL}
    rc, out, err = parse("--disable-improvement", GEMMA_CALL_SYNTAX)
    assert rc == 2 and err.strip().splitlines()[-1] == "error: --disable-improvement needs --improved"
    rc, out, err = parse("--improved", "--disable-improvement", "nope")
    assert rc == 2 and err.strip().splitlines()[-1].startswith(
        f"error: cannot analyse template {FG!r}: unknown improvement name(s) nope; known: ")


# ---------------------------------------------------------------- repair unmarked-argument-values (a class of drift)

G4 = "google-gemma-4-31B-it.jinja"


def _parser(name: str, fidelity: str, off: tuple = ()):
    req = ChatRequest.from_dict(RT.round_trip_request())
    return build_chat_parser(_tmpl(name), req, fidelity=fidelity, disabled_repairs=off).parser


def _streamed_args(parser, out: str, size: int) -> list[str]:
    from core.chat.stream import StreamingParser

    sp = StreamingParser(parser)
    for i in range(0, len(out), size):
        sp.feed(out[i:i + size])
    sp.finish()
    assert sp.held_back == 0 and not sp.final_mismatch
    return [c.arguments for c in sp.message.tool_calls]


@pytest.mark.parametrize("value, expected", [
    ('"2+2"', "2+2"),                                  # the report's call (ml-explore/mlx#3460)
    ('"Paris, \\"France\\" \\u00e9"', 'Paris, "France" é'),   # commas, escapes and \u inside the quotes
    ('"a}b"', "a}b"),
])
def test_gemma4_string_in_plain_quotes_is_read_at_improved_only(value, expected):
    out = f"<|tool_call>call:get_weather{{city:{value},days:3}}<tool_call|>"
    improved = _parser(G4, "improved")
    msg = improved.parse(out)
    assert [json.loads(c.arguments) for c in msg.tool_calls] == [{"city": expected, "days": 3}]
    assert [r.name for r in msg.repairs] == ["unmarked-argument-values"]
    assert out[msg.repairs[0].start:msg.repairs[0].end] == value
    for size in (1, 3, 17):   # stream = one-shot
        assert _streamed_args(improved, out, size) == [c.arguments for c in msg.tool_calls]
    for parser in (_parser(G4, "llama.cpp"), _parser(G4, "improved", ("unmarked-argument-values",))):
        assert not parser.parse(out).tool_calls


def test_gemma4_values_of_the_template_fire_nothing():
    out = '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>'
    msg = _parser(G4, "improved").parse(out)
    assert json.loads(msg.tool_calls[0].arguments) == {"city": "Paris", "days": 3} and msg.repairs == []


@pytest.mark.parametrize("args, expected", [
    ("city:None,days:<escape>3<escape>", {"city": None, "days": 3}),
    ("city:2025-06-06 14:00:00,days:3", {"city": "2025-06-06 14:00:00", "days": 3}),
    ("city:Paris ,days:True", {"city": "Paris", "days": True}),
])
def test_functiongemma_bare_values_are_read(args, expected):
    out = f"<start_function_call>call:get_weather{{{args}}}<end_function_call>"
    parser = _parser(FG, "improved")
    msg = parser.parse(out)
    assert [json.loads(c.arguments) for c in msg.tool_calls] == [expected]
    assert {r.name for r in msg.repairs} == {"unmarked-argument-values"}
    for size in (1, 3, 17):
        assert _streamed_args(parser, out, size) == [c.arguments for c in msg.tool_calls]
    assert not _parser(FG, "improved", ("unmarked-argument-values",)).parse(out).tool_calls


def test_bare_values_stay_off_where_the_template_writes_values_unquoted():
    # Gemma 4 writes numbers bare, so a bare word there is no drift of this class: the call stays content
    out = "<|tool_call>call:get_weather{city:Paris,days:3}<tool_call|>"
    msg = _parser(G4, "improved").parse(out)
    assert not msg.tool_calls and msg.content == out
