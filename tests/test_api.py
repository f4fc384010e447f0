"""The public library API (``core/__init__.py``): every entry point on a bundled template, and the README's
library example run as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import core
from core.chat.conformance import accumulate_deltas
from core.errors import RequestError, TemplateLoadError
from core.jinja.template import ChatTemplate

from .conftest import ROOT

TEMPLATE = ROOT / "assets" / "templates" / "chatml-think-tools.jinja"
REQUEST = json.loads((ROOT / "assets" / "requests" / "req.json").read_text(encoding="utf-8"))
OUTPUT = (ROOT / "assets" / "outputs" / "output.txt").read_text(encoding="utf-8")
CALLS = [{"type": "function", "id": "",
          "function": {"name": "get_weather", "arguments": '{"location": "New York", "unit": "celsius"}'}},
         {"type": "function", "id": "",
          "function": {"name": "get_weather", "arguments": '{"location": "Beijing", "unit": "celsius"}'}}]


@pytest.fixture(scope="module")
def tmpl() -> ChatTemplate:
    return core.load_template(TEMPLATE)


def test_load_template_from_a_path_and_its_one_line_error(tmpl):
    assert isinstance(tmpl, ChatTemplate) and tmpl.name == "chatml-think-tools.jinja"
    assert core.load_template(str(TEMPLATE)).source == TEMPLATE.read_text(encoding="utf-8")
    with pytest.raises(TemplateLoadError, match="no-such.jinja"):
        core.load_template(str(ROOT / "no-such.jinja"))


def test_analyze_learns_the_bundled_templates_format(tmpl):
    report = core.analyze(tmpl)
    a = report.analysis.to_json()
    assert (a["reasoning"]["mode"], a["reasoning"]["start"], a["reasoning"]["end"]) == \
        ("TAG_BASED", "<think>\n", "\n</think>\n\n")
    assert a["tools"]["format"]["mode"] == "JSON_NATIVE"
    assert a["tools"]["format"]["per_call_start"] == "<tool_call>\n"
    edited = core.analyze(tmpl, overrides={"reasoning.start": "<thought>"})
    assert edited.analysis.to_json()["reasoning"]["start"] == "<thought>"
    assert core.analyze(str(TEMPLATE)).analysis.to_json() == a  # a path works as the template


def test_build_parser_gives_the_grammar_and_prompt(tmpl):
    bundle = core.build_parser(tmpl, REQUEST)
    assert bundle.parser.grammar_lazy is True
    assert [t.value for t in bundle.parser.grammar_triggers] == ["<tool_call>\n"]
    assert 'tool-0 ::= "{" space "\\"name\\"" space ":" space ("\\"" "get_weather" "\\"")' in bundle.parser.grammar
    assert bundle.prompt.endswith(bundle.generation_prompt)
    plain = core.build_parser(tmpl)  # no request: one user message, no tools
    assert plain.parser.grammar_triggers == []
    with pytest.raises(RequestError, match="tool_choice"):
        core.build_parser(tmpl, {**REQUEST, "tool_choice": "sometimes"})


def test_parse_reads_reasoning_content_and_calls(tmpl):
    message = core.parse(tmpl, OUTPUT, REQUEST).to_openai()
    assert message["reasoning_content"].startswith("The user is asking about the weather in New York.")
    assert message["content"] == "I'll check the current weather in New York for you.\n"
    assert message["tool_calls"] == CALLS
    bundle = core.build_parser(tmpl, REQUEST)  # a bundle built once serves many outputs
    assert core.parse(bundle, OUTPUT).to_openai() == message
    # the generation prompt opens <think>: text before </think> is reasoning
    assert core.parse(tmpl, "Hmm.\n</think>\n\nHello!", REQUEST).to_openai() == \
        {"role": "assistant", "content": "Hello!", "reasoning_content": "Hmm.\n"}


def test_stream_accumulates_to_the_parsed_message(tmpl):
    deltas = [d.to_openai() for d in core.stream(tmpl, [OUTPUT[i:i + 3] for i in range(0, len(OUTPUT), 3)],
                                                 REQUEST)]
    assert len(deltas) > 10
    acc = accumulate_deltas(deltas)
    assert acc["content"] == "I'll check the current weather in New York for you.\n"
    assert [c["function"] for c in acc["tool_calls"]] == [c["function"] for c in CALLS]
    assert list(core.stream(tmpl, [], REQUEST)) == []


def test_explain_output_labels_every_character(tmpl):
    ex = core.explain_output(tmpl, OUTPUT, REQUEST)
    assert ex.stop is None and ex.consistency == ""  # "": the spans cover the text once and rebuild the message
    assert "".join(s.text for s in ex.spans) == ex.text
    assert ex.message["tool_calls"] == CALLS
    cut = core.explain_output(tmpl, OUTPUT.replace("</tool_call>", "", 1), REQUEST)
    assert cut.findings  # a call left open: explain names a cause


def test_lint_template_reports_findings_by_kind(tmpl):
    report = core.lint_template(tmpl)
    assert report.template == "chatml-think-tools.jinja" and report.error is None
    assert report.by_kind()["roundtrip"] == 2 and report.by_kind()["render"] == 0
    quiet = core.lint_template(tmpl, suppressed=["roundtrip/*"])
    assert quiet.by_kind()["roundtrip"] == 0 and quiet.suppressed


def test_compare_templates_finds_a_changed_marker(tmpl):
    assert core.compare_templates(tmpl, tmpl).identical
    other = ChatTemplate(tmpl.source.replace("<think>", "<thought>").replace("</think>", "</thought>"), "edited")
    diff = core.compare_templates(tmpl, other, with_lint=False)
    assert not diff.identical
    assert [f.path for f in diff.fields] == ["analysis.preserved_tokens", "analysis.reasoning.end",
                                            "analysis.reasoning.start", "generation_prompt"]


def test_export_template_for_transformers_and_vllm(tmpl):
    res = core.export_template(tmpl)
    assert res.exportable and res.reasons == []
    assert res.response_template["fields"]["reasoning_content"]["open"] == "<think>"
    vllm = core.export_template(tmpl, flavour="vllm")
    assert set(vllm.response_template["fields"]) == {"thinking", "content", "tool_calls"}
    with pytest.raises(ValueError, match="flavour|Flavour"):
        core.export_template(tmpl, flavour="sglang")


def test_the_readmes_library_example_runs_as_written():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", readme[readme.index("### As a library"):], re.S).group(1)
    assert all(f"core.{name}(" in code for name in core.__all__)  # the example shows every entry point
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["JSON_NATIVE", "['get_weather', 'get_weather']", "True ['<tool_call>\\n']",
                                        "None", "2", "True", "True"]


def test_import_core_loads_no_stage():
    # the entry points import their stage when called: a bare ``import core`` stays cheap
    code = "import sys, core; print(sorted(m for m in sys.modules if m.startswith('core.')))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


@pytest.mark.parametrize("output", [b"<tool_call>", None, 42], ids=["bytes", "None", "int"])
def test_parse_and_explain_name_an_output_that_is_not_text(tmpl, output):
    """`core.parse(tmpl, b"…")` failed deep in the parser with "can only concatenate str (not "bytes") to str"
    (None: "'NoneType' object is not subscriptable"); the output's type is named at the call, as
    StreamingParser.feed() names it."""
    for call in (core.parse, core.explain_output):
        with pytest.raises(TypeError, match=rf"output must be the model's text \(str\), not {type(output).__name__}"):
            call(tmpl, output, REQUEST)
