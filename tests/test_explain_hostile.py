"""Explain never raises on the model output: a call whose arguments open 2,000 JSON arrays (parse reads it as
content without trouble) made explain end in a RecursionError from the causes' JSON reader, so the CLI printed
"input too large or nested too deeply" naming no input and the page showed no explanation at all. The parts that
cannot read such an output are left out and a note says so; the spans and the message stay."""

from __future__ import annotations

import json

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.jinja.template import ChatTemplate

from .conftest import template_source

NAME = "Qwen-Qwen2.5-7B-Instruct.jinja"
REQUEST = {"messages": [{"role": "user", "content": "hi"}],
           "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
               "type": "object", "properties": {"city": {"type": "string"}}}}}]}


def test_an_output_nested_deeper_than_the_recursion_limit_is_explained_with_a_note():
    t = ChatTemplate(template_source(NAME), NAME)
    for depth in (2_000, 50_000):
        out = '<tool_call>\n{"name": "get_weather", "arguments": ' + "[" * depth
        ex = explain(t, ChatRequest.from_dict(REQUEST), out)
        assert ex.message == {"role": "assistant", "content": out}
        assert "".join(s.text for s in ex.spans) == ex.text
        assert any("nested too deeply" in n for n in ex.notes), ex.notes
        json.dumps(ex.to_json())


# a tool name built to attack Markdown (no model wrote it): backtick runs of one and two, dollars, an icon, a link
HOSTILE_NAME = "a`b`` $x$ :material/home: [x](http://evil.example/a)"


def _hostile_request(name: str) -> ChatRequest:
    tool = {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    return ChatRequest.from_dict({**REQUEST, "tools": [tool]})


def test_a_name_holding_backticks_stays_in_one_code_span_of_the_sentences():
    """Explain's sentences quote names in code spans the page and a Markdown reader show as code; a name holding
    backticks was fenced with one backtick, so its own backticks closed the span and the rest was Markdown."""
    t = ChatTemplate(template_source(NAME), NAME)
    called = '<tool_call>\n{"name": ' + json.dumps(HOSTILE_NAME) + ', "arguments": {}}\n</tool_call>'
    ex = explain(t, _hostile_request(HOSTILE_NAME), called)
    assert ex.triage.sentence.startswith(f"```{HOSTILE_NAME}``` is called without `city`"), ex.triage.sentence
    # the same name called where the request offers get_weather: the stop point quotes what it found
    ex = explain(t, _hostile_request("get_weather"), called.replace("{}", '{"city": "Paris"}'))
    found = "a`b``␣$x$␣:material/home:␣[x](http://evi"
    assert ex.stop.words() == f"expected `get_weather`; found ```{found}```", ex.stop.words()


def test_a_called_name_with_backticks_and_a_bidi_override_is_quoted_whole_and_escaped():
    """The cause quoted the called name up to its first backtick (`get`: the identifier stopped there), and the
    stop point's expected name showed its U+202E raw, which reorders the rest of the line as shown: the name is
    now one code span, whole, every invisible character escaped, in the stop point and in the cause."""
    t = ChatTemplate(template_source(NAME), NAME)
    offered, called = "get`we\u202eath``er", "get`we\u202eath`"
    out = '<tool_call>\n{"name": ' + json.dumps(called, ensure_ascii=False) + ', "arguments": {}}\n</tool_call>'
    ex = explain(t, _hostile_request(offered), out)
    unknown = [f for f in ex.findings if f.cause.name == "UNKNOWN_TOOL"]
    assert len(unknown) == 1, ex.causes
    assert unknown[0].evidence[1] == ("the model called `` get`we\\u202eath` ``; the request offers "
                                      "```get`we\\u202eath``er```"), unknown[0].evidence
    assert "expected ```get`we\\u202eath``er```" in unknown[0].evidence[0], unknown[0].evidence[0]
    assert ex.stop.literals[0] == offered
    sentences = [ex.stop.words(), ex.triage.sentence, *(e for f in ex.findings for e in f.evidence)]
    assert not [s for s in sentences if "\u202e" in s], sentences


def test_a_declared_name_opening_with_a_backtick_is_compared_as_declared():
    """The causes read the expected names back from their code spans by stripping backticks, so a declared name
    that opens with one (fenced `` `x ``) came back as " `x " and matched no declared name."""
    t = ChatTemplate(template_source(NAME), NAME)
    out = '<tool_call>\n{"name": "other", "arguments": {}}\n</tool_call>'
    ex = explain(t, _hostile_request("`x"), out)
    assert ex.stop.literals == ("`x",), ex.stop
    assert any("the model called `other`; the request offers `` `x ``" in e
               for f in ex.findings for e in f.evidence), [f.evidence for f in ex.findings]


def test_a_line_break_the_parser_wanted_and_a_written_backslash_n_do_not_read_the_same():
    """A tool name holding a line break (built to attack the stop point's words; no model wrote it), called with
    the name JSON-escaped (``\\n``, two characters) where the template writes the line break raw: the stop point
    said ``expected `a\\nb`; found `a\\nb…``` — the same text on both sides, so the difference could not be seen.
    The expected literal is now shown as the found text is, a line break as ``↵``."""
    t = ChatTemplate(template_source(NAME), NAME)
    called = '<tool_call>\n{"name": "a\\nb", "arguments": {"city": "Paris"}}\n</tool_call>'
    ex = explain(t, _hostile_request("a\nb"), called)
    assert ex.stop is not None and ex.stop.words().startswith("expected `a↵b`; found `a\\nb"), ex.stop.words()
    assert ex.stop.expected == ["`a\\nb`"]       # the alternatives as the parser gives them (read by the fixes)
