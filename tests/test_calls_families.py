"""Issue 25, JSON and pythonic call families at ``improved`` fidelity: repairs ``pythonic-values``,
``call-list-spacing``, ``python-code-markers``, ``builtin-call-syntax`` and ``json-call-wrappers``
(core/chat/repairs.py, docs/fidelity-lossless.md). Each repair is shown on the real outputs of the evaluation set
that need it (tests/data/real_outputs, each case citing its public source), with its record; switched off, the
case fails again; at ``llama.cpp`` fidelity nothing changes. The value decoder is checked on its own: Python's
reading of a literal, and a decoding that only grows as a streamed value grows."""

from __future__ import annotations

import json

import pytest

from core.chat.mapper import python_literal_to_json
from core.chat.pipeline import build_chat_parser
from core.chat.realset import load_cases, run_case
from core.chat.request import ChatRequest
from core.chat.roundtrip import compare_messages
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

CASES = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs"))}

# case id -> the repairs its right message needs (each case's source is in its file)
NEEDS = {
    "lfm2-multiline-string": {"pythonic-values"},
    "lfm2-leading-zero": {"pythonic-values"},
    "lfm2-space-after-start": {"call-list-spacing"},
    "l4py-python-start-parallel": {"python-code-markers"},
    "l4py-three-calls": {"python-code-markers"},
    "l31-json-call": {"python-code-markers"},
    "l31-brave-search": {"python-code-markers", "builtin-call-syntax"},
    "l33-brave-search": {"python-code-markers", "builtin-call-syntax"},
    "xlam-json-code-block": {"json-call-wrappers"},
    "xlam-tool-call-tags": {"json-call-wrappers"},
    "granite-string-prefix": {"json-call-wrappers"},
}


def _parser(case, fidelity, disabled=()):
    with open(TEMPLATES / case.template, encoding="utf-8") as f:
        template = ChatTemplate(f.read(), case.template)
    return build_chat_parser(template, ChatRequest.from_dict(case.request), fidelity=fidelity,
                             disabled_repairs=disabled).parser


@pytest.mark.parametrize("case_id", sorted(NEEDS))
def test_each_repair_on_the_real_outputs_that_need_it(case_id):
    case = CASES[case_id]
    assert case.split == "dev"   # repairs were written from dev cases only
    msg = _parser(case, "improved").parse(case.output)
    assert compare_messages(case.expect, msg.to_openai()) is None
    assert NEEDS[case_id] <= {r.name for r in msg.repairs}
    # one-shot, streamed at several chunk sizes, no word lost
    assert run_case(case, str(TEMPLATES), "improved").ok
    # llama.cpp fidelity keeps llama.cpp's answer: the call is not read
    assert compare_messages(case.expect, _parser(case, "llama.cpp").parse(case.output).to_openai()) is not None


@pytest.mark.parametrize("case_id", sorted(NEEDS))
def test_each_repair_can_be_switched_off(case_id):
    case = CASES[case_id]
    msg = _parser(case, "improved", disabled=sorted(NEEDS[case_id])).parse(case.output)
    assert compare_messages(case.expect, msg.to_openai()) is not None
    assert not NEEDS[case_id] & {r.name for r in msg.repairs}


def test_a_pythonic_call_without_its_required_parameters_is_passed_on():
    """Llama 4 ``get_weather()`` where city and metric are required (vLLM's test expects the call with {}):
    checking the schema is the client's job."""
    case = CASES["l4py-three-calls"]
    required = case.request["tools"][0]["function"]["parameters"]["required"]
    msg = _parser(case, "improved").parse(case.output)
    assert required == ["city", "metric"]
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [
        ("get_weather", {"city": "LA", "metric": "C"}), ("get_weather", {}), ("do_something_cool", {"steps": []})]


@pytest.mark.parametrize("text, value", [
    ("'cat > f.py << EOF\nimport csv\nEOF'", "cat > f.py << EOF\nimport csv\nEOF"),
    ("07", 7), ("00", 0), ("-07", -7), ("0.5", 0.5), ("1e07", 1e7),
    ("'it\\'s'", "it's"), ('"say \\"hi\\""', 'say "hi"'), ("'a\"b'", 'a"b'),
    ("'\\x41\\101\\d\\u00e9'", "AA\\dé"), ("'line\\\ncontinued'", "linecontinued"),
    ("(1, 2,)", [1, 2]), ("[1, 2, ]", [1, 2]),
    ("{'a': (1,), 'b': None, 'c': True, 'd': false}", {"a": [1], "b": None, "c": True, "d": False}),
])
def test_python_literals_decode_as_python_reads_them(text, value):
    assert json.loads(python_literal_to_json(text)) == value


@pytest.mark.parametrize("text", [
    "{'k': [07, 'x\\'y\\x41', (1, 2,)], 'n': None}", "'multi\nline\\t\\101'", "[0, 00, 010, -0.5e3]",
])
def test_a_cut_literal_decodes_to_a_prefix_of_the_whole(text):
    """A streamed value: every prefix (cut=True) decodes to a prefix of the whole value's JSON, so argument
    deltas are never taken back."""
    whole = python_literal_to_json(text)
    for k in range(len(text) + 1):
        assert whole.startswith(python_literal_to_json(text[:k], cut=True)), text[:k]


def test_an_answer_with_a_code_block_stays_content_for_xlam():
    """json-call-wrappers only takes a fence that holds the calls: a Python code block in an answer is content,
    at both fidelities, with no repair record."""
    case = CASES["xlam-plain"]
    out = "Here is how:\n```python\nprint([1, 2])\n```\nDone."
    for fidelity in ("llama.cpp", "improved"):
        msg = _parser(case, fidelity).parse(out)
        assert (msg.content, msg.tool_calls, msg.repairs) == (out, [], [])


def test_a_quote_that_cannot_close_the_string_is_text():
    """vLLM's LFM2 parser names this shape in its rewrite list (a nested quote it closes when unambiguous,
    https://github.com/vllm-project/vllm/blob/011cde7c177a29bbcb0052d80e5ab7671a70f634/vllm/tool_parsers/
    lfm2_tool_parser.py): the inner quotes are followed by neither ',' nor ')', so they are the string's; the
    strict reading is atomic, so a stream never shows the string closed at the first of them."""
    from core.chat.stream import StreamingParser

    case = CASES["lfm2-multiline-string"]   # its request declares exec(command: string)
    out = "<|tool_call_start|>[exec(command='sed -n '1,9p' f.py')]<|tool_call_end|>"
    parser = _parser(case, "improved")
    msg = parser.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [("exec", {"command": "sed -n '1,9p' f.py"})]
    assert [r.name for r in msg.repairs] == ["pythonic-values"]
    for chunk in (1, 3, len(out)):
        sp = StreamingParser(parser)
        for i in range(0, len(out), chunk):
            sp.feed(out[i:i + chunk])
        sp.finish()
        assert sp.message.to_openai() == msg.to_openai()


def test_python_tag_is_read_for_a_llama3_template_that_does_not_name_it():
    """The Llama 3.2 template never writes <|python_tag|> (the 3.1 one does); it is the same tokenizer's token,
    and vLLM's llama3_json takes it for every Llama 3.x. The real Llama 3.1 output of case l31-json-call, parsed
    with the 3.2 template: one call at improved, the tag alone as content at llama.cpp fidelity."""
    case = CASES["l31-json-call"]
    with open(TEMPLATES / "meta-llama-Llama-3.2-3B-Instruct.jinja", encoding="utf-8") as f:
        template = ChatTemplate(f.read(), "meta-llama-Llama-3.2-3B-Instruct.jinja")
    assert "<|python_tag|>" not in template.source
    request = ChatRequest.from_dict(case.request)
    improved = build_chat_parser(template, request, fidelity="improved").parser.parse(case.output)
    assert compare_messages(case.expect, improved.to_openai()) is None
    assert [r.name for r in improved.repairs] == ["python-code-markers"]
    plain = build_chat_parser(template, request, fidelity="llama.cpp").parser.parse(case.output)
    assert plain.content == "<|python_tag|>" and [c.name for c in plain.tool_calls] == ["trending_songs"]


@pytest.mark.parametrize("case_id", ["lfm2-leading-zero", "lfm2-multiline-string", "l4py-three-calls"])
def test_explain_rebuilds_the_message_of_a_python_value(case_id):
    """Explain's spans label a pythonic-values value 'python' and rebuild the same message from them."""
    from core.explain.explain import explain

    case = CASES[case_id]
    with open(TEMPLATES / case.template, encoding="utf-8") as f:
        template = ChatTemplate(f.read(), case.template)
    ex = explain(template, ChatRequest.from_dict(case.request), case.output, fidelity="improved", fixes=False)
    assert not ex.consistency
    kinds = {s.kind for s in ex.spans if s.repair == "pythonic-values"}
    assert kinds <= {"python"} and (kinds or case_id == "l4py-three-calls")


def test_calls_in_the_list_word_the_template_instructions_show():
    """vLLM's Phi-4-mini template tells the model to write functools[{"name": …, "arguments": …}, …] (vLLM's
    phi4mini parser reads functools[…]); json-call-wrappers reads the word and brackets as markup (dev case
    phi4-parallel, on vLLM's template since the lossless contract; ollama's Phi-4-mini GGUF template renders no tools)."""
    case = CASES["phi4-parallel"]
    name = "vllm-tool_chat_template_phi4_mini.jinja"
    with open(TEMPLATES / name, encoding="utf-8") as f:
        template = ChatTemplate(f.read(), name)
    request = ChatRequest.from_dict(case.request)
    msg = build_chat_parser(template, request, fidelity="improved").parser.parse(case.output)
    assert compare_messages(case.expect, msg.to_openai()) is None
    assert [r.name for r in msg.repairs] == ["json-call-wrappers", "json-call-wrappers"]
    plain = build_chat_parser(template, request, fidelity="llama.cpp").parser.parse(case.output)
    assert plain.content == "functools[\n  ]" and len(plain.tool_calls) == 2


def test_a_raw_line_break_inside_a_dict_value_is_decoded():
    """The strict reading of a non-string value takes only JSON-safe strings, so a raw line break inside a dict
    (which llama.cpp's quote swap would copy into invalid JSON) goes to pythonic-values (LFM2 handler)."""
    case = CASES["lfm2-multiline-string"]
    request = dict(case.request)
    request["tools"] = [{"type": "function", "function": {"name": "run", "parameters": {
        "type": "object", "properties": {"opts": {"type": "object"}}}}}]
    with open(TEMPLATES / case.template, encoding="utf-8") as f:
        template = ChatTemplate(f.read(), case.template)
    out = "<|tool_call_start|>[run(opts={'cmd': 'cat > f.py << EOF\nimport csv\nEOF'})]<|tool_call_end|>"
    msg = build_chat_parser(template, ChatRequest.from_dict(request), fidelity="improved").parser.parse(out)
    assert [(c.name, json.loads(c.arguments)) for c in msg.tool_calls] == [
        ("run", {"opts": {"cmd": "cat > f.py << EOF\nimport csv\nEOF"}})]
    assert [r.name for r in msg.repairs] == ["pythonic-values"]


KEPT = {c.id: c for c in load_cases(str(ROOT / "tests" / "data" / "real_outputs_kept"))}


def test_a_fence_that_holds_only_the_call_list_is_markup_of_the_calls():
    """Gemma 3 (vLLM's pythonic template) writes its list inside ```tool_code … ``` after text (vLLM issue 14734,
    case kept-vllm-14734-tool-code-fence): the call is read and the fence goes with it (calls-after-text); a
    fence around other code stays content, verbatim."""
    case = KEPT["kept-vllm-14734-tool-code-fence"]
    msg = _parser(case, "improved").parse(case.output)
    assert compare_messages(case.expect, msg.to_openai()) is None
    assert "```" not in msg.content and "calls-after-text" in {r.name for r in msg.repairs}
    off = _parser(case, "improved", disabled=["calls-after-text"]).parse(case.output)
    assert off.tool_calls == [] and "```tool_code" in off.content
    code = "Run this:\n```python\n[x(1) for x in fs]\n```"
    assert _parser(case, "improved").parse(code).content == code
