"""GBNF emission: combinator rules (llama.cpp's G1-G9), JSON-schema rules, the grammars of the generated chat
parsers compared with the reference, and every reference-case grammar checked by an independent GBNF
implementation (llguidance, see test_gbnf_validator.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from core.analysis.result import TemplateAnalysis
from core.chat.generator import generate_parser
from core.chat.request import ChatRequest
from core.grammar import GrammarBuilder, json_schema_to_grammar, schema_from_json
from core.grammar.json_schema import SchemaError, may_be_string
from core.peg import build_peg_parser

from .conftest import SHARED
from .handler_checks import by_index, normalize_gbnf
from .test_gbnf_validator import gbnf_accepts, gbnf_problems
from .test_generator_cases import autoparser_cases, case_parser

SPACE = 'space ::= | " " | "\\n"{1,2} [ \\t]{0,20}'


def rules(fn, lazy=False):
    return build_peg_parser(fn).to_gbnf(lazy).splitlines()


@pytest.mark.parametrize("fn, expect", [
    (lambda p: p.literal("hello"), ['root ::= "hello"']),
    (lambda p: p.one_or_more(p.literal("a") | "b"), ['root ::= ("a" | "b")+']),
    (lambda p: p.literal("hello") << "world", ['root ::= "hello" space "world"']),
    (lambda p: "a" + p.tag("t", p.literal("b") | "c"), ['root ::= "a" ("b" | "c")']),
    (lambda p: p.tag("t", p.literal("a") + "b") | "c", ['root ::= "a" "b" | "c"']),
    (lambda p: "a" + p.gbnf(p.literal("b") | "c", "") + "d", ['root ::= "a" "d"']),
    (lambda p: p.literal('q"\\\n\r'), ['root ::= "q\\"\\\\\\n\\r"']),
    (lambda p: p.repeat("ab", 2, 4) + p.repeat("c", 3) + p.optional(p.chars("[0-9]", 0, 2)),
     ['root ::= "ab"{2,4} "c"{3} [0-9]{0,2}?']),
])
def test_g1_to_g6_combinators(fn, expect):
    assert rules(fn) == expect + [SPACE]


def test_g7_only_reachable_rules():
    def fn(p):
        p.rule("orphan", p.literal("x"))
        return "hello" + p.rule("child", p.literal(" world"))
    assert rules(fn) == ['child ::= " world"', 'root ::= "hello" child', SPACE]


def test_g8_lazy_grammar_roots_at_trigger_rules():
    def fn(p):
        p.rule("rule-4", p.literal("d"), trigger=True)
        p.rule("rule-3", "c" + p.ref("rule-4"))
        p.rule("rule-2", "b" + p.ref("rule-3"), trigger=True)
        return p.rule("rule-1", "a" + p.ref("rule-2"))
    assert rules(fn) == ['root ::= rule-1', 'rule-1 ::= "a" rule-2', 'rule-2 ::= "b" rule-3',
                         'rule-3 ::= "c" rule-4', 'rule-4 ::= "d"', SPACE]
    assert rules(fn, lazy=True) == ['root ::= rule-2 | rule-4', 'rule-2 ::= "b" rule-3', 'rule-3 ::= "c" rule-4',
                                    'rule-4 ::= "d"', SPACE]


def test_g9_until_is_an_exclusion_automaton():
    g = rules(lambda p: p.until("</tag>"))
    assert g == ['root ::= until-0', SPACE,
                 'until-0 ::= | [<] until-0-01 | [^<] until-0',
                 'until-0-01 ::= | [<] until-0-01 | [/] until-0-02 | [^/<] until-0',
                 'until-0-02 ::= | [<] until-0-01 | [t] until-0-03 | [^<t] until-0',
                 'until-0-03 ::= | [<] until-0-01 | [a] until-0-04 | [^<a] until-0',
                 'until-0-04 ::= | [<] until-0-01 | [g] until-0-05 | [^<g] until-0',
                 'until-0-05 ::= | [<] until-0-01 | [^<>] until-0']
    grammar = "\n".join(g)
    assert gbnf_accepts(grammar, "a</ta</t</tagx<")[0]
    assert not gbnf_accepts(grammar, "a</tag>")[0]


def test_ac_is_an_inclusion_automaton():
    grammar = build_peg_parser(lambda p: p.ac(p.until("</v>") + "</v>", "</v>") + "!").to_gbnf()
    assert gbnf_problems(grammar) == []
    assert gbnf_accepts(grammar, "x</y</v>!")[0]
    assert not gbnf_accepts(grammar, "x</v></v>!")[0]
    assert not gbnf_accepts(grammar, "x!")[0]


def test_json_rules_match_the_reference_text():
    g = build_peg_parser(lambda p: p.json()).to_gbnf()
    ref = json.loads((SHARED / "reference" / "analysis.jsonl").read_text().splitlines()[0])["apply"]["grammar"]
    for line in g.splitlines():
        if line.startswith("json-"):
            assert line in ref.splitlines()


# ---------------------------------------------------------------------------------------------------------------
# JSON schema -> GBNF

def test_object_schema_rules():
    g = json_schema_to_grammar({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                                                  "c": {"type": "boolean"}}, "required": ["a"]})
    lines = g.splitlines()
    assert 'root ::= "{" space a-kv ( "," space ( b-kv b-rest | c-kv ) )? space "}"' in lines
    assert 'a-kv ::= "\\"a\\"" space ":" space integer' in lines
    assert 'b-rest ::= ( "," space c-kv )?' in lines


@pytest.mark.parametrize("schema, good, bad", [
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]},
     ['{"a": 1}', '{"a": -20, "b": "x\\n"}', '{ "a":0 }'], ['{"b": "x"}', '{"a": 1, "c": 2}', '{"a": 01}']),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "number"}},
     ['{"a": 1, "zz": 2.5}', '{"q": 1e5}', "{}"], ['{"q": "s"}', '{"a": "s"}']),
    ({"enum": ["red", 1, None]}, ['"red"', "1", "null"], ['"blue"', "2"]),
    ({"const": {"k": [1, 2]}}, ['{"k":[1,2]}'], ['{"k": [1, 2]}']),
    ({"type": "integer", "minimum": -5, "maximum": 130}, ["-5", "0", "99", "130"], ["-6", "131", "1000", "1.5"]),
    ({"type": "integer", "exclusiveMinimum": 10}, ["11", "12345"], ["10", "9", "-1"]),
    ({"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"'], ['"a"', '"abcd"']),
    ({"type": "string", "pattern": "^[a-c]+-[0-9]{2}$"}, ['"ab-12"'], ['"ab-1"', '"d-12"']),
    ({"type": "string", "format": "date"}, ['"2025-12-03"'], ['"2025-13-03"']),
    ({"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2}, ["[1]", "[1, 2.5]"],
     ["[]", "[1, 2, 3]"]),
    ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "null"}]}, ['["a", null]'], ['["a"]']),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, ["1", '"x"'], ["true"]),
    ({"type": ["string", "null"]}, ['"x"', "null"], ["1"]),
    ({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
      "$ref": "#/$defs/node"}, ['{"next": {"next": {}}}'], ['{"next": 1}']),
    ({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "integer"}}}]}, ['{"a": 1, "b": 2}'], ['{"b": 2}']),
    ({}, ['{"any": [1, "x", null]}', '"s"'], ["nope"]),
])
def test_schema_grammars_accept_exactly_valid_values(schema, good, bad):
    g = json_schema_to_grammar(schema)
    assert gbnf_problems(g) == []
    for text in good:
        assert gbnf_accepts(g, text)[0], text
    for text in bad:
        assert not gbnf_accepts(g, text)[0], text


@settings(max_examples=25, deadline=None)
@given(st.integers(-300, 300), st.integers(0, 400), st.lists(st.integers(-500, 800), min_size=1, max_size=6))
def test_integer_bounds_property(lo, width, samples):
    hi = lo + width
    g = json_schema_to_grammar({"type": "integer", "minimum": lo, "maximum": hi})
    for v in samples + [lo, hi, lo - 1, hi + 1]:
        assert gbnf_accepts(g, str(v))[0] == (lo <= v <= hi), (lo, hi, v)


def test_integer_bounds_past_int64():
    # A hostile tool schema: 1e400 loads as infinity (was an OverflowError), a 4,200-digit bound overflowed the
    # recursion of the digit-range grammar. llama.cpp reads bounds as int64_t: a bound past it on its own side
    # bounds nothing; on the other side it is a schema error naming the field.
    g = json_schema_to_grammar({"type": "integer", "minimum": -10 ** 4200, "maximum": 7})
    assert gbnf_accepts(g, "-123456789")[0] and gbnf_accepts(g, "7")[0] and not gbnf_accepts(g, "8")[0]
    assert schema_from_json({"type": "integer", "maximum": float("inf")}).root.maximum is None
    assert schema_from_json({"type": "integer", "exclusiveMinimum": -1e300}).root.minimum is None
    with pytest.raises(SchemaError, match="#/properties/n: minimum is outside the 64-bit integer range"):
        schema_from_json({"type": "object", "properties": {"n": {"type": "integer", "minimum": float("inf")}}})
    with pytest.raises(SchemaError, match="exclusiveMaximum is outside the 64-bit integer range"):
        schema_from_json({"type": "integer", "exclusiveMaximum": -(2 ** 64)})
    with pytest.raises(SchemaError, match="minimum must be a number"):
        schema_from_json({"type": "integer", "minimum": float("nan")})


def test_schema_errors_and_string_detection():
    with pytest.raises(SchemaError, match="#/properties/x"):
        schema_from_json({"type": "object", "properties": {"x": {"type": "strange"}}})
    assert may_be_string(schema_from_json({"type": ["string", "null"]}).root)
    assert not may_be_string(schema_from_json({"type": ["integer", "null"]}).root)
    assert may_be_string(schema_from_json({"enum": ["celsius", "fahrenheit"]}).root)
    assert may_be_string(schema_from_json({"format": "date-time"}).root)
    assert not may_be_string(schema_from_json({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}).root)


def test_rule_conflicts_get_suffixes():
    gb = GrammarBuilder()
    assert gb.add_rule("x_y", '"a"') == "x-y"
    assert gb.add_rule("x-y", '"a"') == "x-y"
    assert gb.add_rule("x-y", '"b"') == "x-y0"


def test_unsupported_pattern_falls_back_to_any_string():
    gb = GrammarBuilder()
    gb.add_schema("root", {"type": "string", "pattern": "^(?=a)b$"})
    assert gb.warnings and gb.rules["root"] == "string"


# ---------------------------------------------------------------------------------------------------------------
# grammars of generated chat parsers

ONE_TOOL = [{"type": "function", "function": {"name": "special_function", "description": "I need an arg",
             "parameters": {"type": "object", "properties": {"arg1": {"type": "integer", "description": "The arg."}},
                            "required": ["arg1"]}}}]


def test_by_index_renames_tool_and_argument_rules():
    ref = ("root ::= tool-call\ntool-call ::= (tool-special-function)\n"
           "tool-special-function ::= \"<f>\" tool-special-function-arg-arg1 tool-special-function-schema\n"
           "tool-special-function-arg-arg1 ::= integer\n")
    assert by_index(ref) == ("root ::= tool-call\ntool-0 ::= \"<f>\" tool-0-arg-0 tool-0-schema\n"
                             "tool-0-arg-0 ::= integer\ntool-call ::= (tool-0)\n")


def test_one_tool_grammar_equals_the_reference(reference_analysis):
    """The reference's ``apply`` (user "Hello", one tool, defaults): grammar text (rule names as b11549 gives
    them, :func:`by_index`), laziness and triggers."""
    request = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}], "tools": ONE_TOOL})
    total, equal, mismatches = 0, 0, []
    for name, row in sorted(reference_analysis.items()):
        if row.get("route") != "autoparser" or "apply" not in row:
            continue
        total += 1
        apply = row["apply"]
        parser = generate_parser(TemplateAnalysis.from_json(row["analysis"]), request, apply["generation_prompt"])
        ours = parser.to_json()
        assert ours["grammar_lazy"] == apply["grammar_lazy"], name
        if ours["grammar"] == by_index(apply["grammar"]) and ours["grammar_triggers"] == apply["grammar_triggers"]:
            equal += 1
        else:
            mismatches.append(name)
        if ours["grammar"]:
            assert gbnf_problems(ours["grammar"]) == [], name
    # the one difference: Llama 4 also triggers on the OpenAI wrapper, a flag the reference analysis does not print
    assert total == 291 and equal >= total - 1, mismatches


def _grammar_input(parser, case) -> str:
    text = case["input"]
    if not parser.grammar_lazy:
        return parser.generation_prompt + text
    start = 0
    for tag in parser.thinking_end_tags:  # llama.cpp ignores triggers inside a thinking block
        i = (parser.generation_prompt + text).find(tag)
        if i >= 0 and parser.thinking_start_tag and parser.thinking_start_tag in parser.generation_prompt + text:
            start = max(0, i + len(tag) - len(parser.generation_prompt))
    hits = [text.find(t.value, start) for t in parser.grammar_triggers if text.find(t.value, start) >= 0]
    return text[min(hits):] if hits else ""


def test_reference_case_grammars_accept_their_output(reference_analysis, reference_cases):
    """Every grammar made for an auto-parser reference case (as requested, and with ``tool_choice`` forced to
    ``required`` for cases with tool calls: a non-lazy grammar over the whole output) is valid GBNF for
    llguidance and accepts the case's output."""
    checked, failures = 0, []
    for case, row in autoparser_cases(reference_analysis, reference_cases):
        variants = [{}]
        if case["expect"].get("tool_calls") and not case["is_partial"]:
            variants.append({"tool_choice": "required"})
        for over in variants:
            parser = case_parser(case, row, **over)
            if not parser.grammar:
                continue
            checked += 1
            problems = gbnf_problems(parser.grammar)
            text = _grammar_input(parser, case)
            ok, why = gbnf_accepts(parser.grammar, text, complete=not case["is_partial"])
            if problems or not text or not ok:
                failures.append(f"{case['id']} {over}: {problems or why or 'no trigger in output'}")
    assert checked >= 70
    assert not failures, "\n".join(failures)


def test_every_reference_analysis_gives_a_valid_grammar(reference_analysis):
    """Sweep: for each analysis in the corpus (both routes), the non-lazy grammar of a two-tool request with a
    string argument under a regex pattern is well-formed GBNF for llguidance, and parsing odd outputs never
    raises."""
    tools = ONE_TOOL + [{"type": "function", "function": {"name": "python", "parameters": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "^[a-z]+$"}}, "required": ["code"]}}}]
    request = ChatRequest.from_dict({"messages": [{"role": "user", "content": "hi"}], "tools": tools,
                                     "tool_choice": "required", "parallel_tool_calls": True})
    count = 0
    for name, row in sorted(reference_analysis.items()):
        if "analysis" not in row:
            continue
        parser = generate_parser(TemplateAnalysis.from_json(row["analysis"]), request,
                                 row.get("apply", {}).get("generation_prompt", ""))
        for out in ("hello", '{"name": "python", "arguments": {"code": "ab"}}', "<tool_call>", "</think>x"):
            parser.parse(out)
        if parser.grammar:
            count += 1
            assert gbnf_problems(parser.grammar) == [], name
    assert count >= 150


# ---------------------------------------------------------------------------------------------------------------
# rule names by index (llama.cpp b11549): parameters whose names sanitize alike keep one rule each

def _rule_bodies(grammar: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in grammar.splitlines() if " ::= " in line)


COLLIDING = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"my-param": {"type": "integer"}, "my_param": {"type": "string"}},
    "required": ["my-param", "my_param"]}}}]
NON_ASCII = [{"type": "function", "function": {"name": "größe", "parameters": {
    "type": "object", "properties": {"höhe": {"type": "integer"}, "hühe": {"type": "integer"}},
    "required": ["höhe", "hühe"]}}},
             {"type": "function", "function": {"name": "grüße", "parameters": {"type": "object", "properties": {}}}}]


def test_colliding_parameter_names_get_one_rule_each(reference_analysis):
    """Seed-OSS (tagged arguments): b11549 names the rules ``tool-0``, ``tool-0-arg-0``, ``tool-0-arg-1``
    (common/chat-auto-parser-generator.cpp, ``foreach_parameter``'s index); with names both parameters were
    ``tool-f-arg-my-param`` and the integer one vanished while the string one was required twice."""
    row = reference_analysis["ByteDance-Seed-OSS.jinja"]
    request = ChatRequest.from_dict({"messages": [{"role": "user", "content": "Hello"}], "tools": COLLIDING})
    grammar = generate_parser(TemplateAnalysis.from_json(row["analysis"]), request,
                              row["apply"]["generation_prompt"]).to_json()["grammar"]
    rules_ = _rule_bodies(grammar)
    assert rules_["tool-call"] == '"<seed:tool_call>\\n" space (tool-0) space "</seed:tool_call>" space'
    assert rules_["tool-0"] == '("<function=" "f" ">\\n") space tool-0-arg-0 space tool-0-arg-1 space "</function>\\n"'
    assert rules_["tool-0-arg-0"] == '("<parameter=" "my-param" ">") "" integer "</parameter>\\n"'
    assert rules_["tool-0-arg-1"].startswith('("<parameter=" "my_param" ">") "" ')
    call = ("<seed:tool_call>\n<function=f>\n<parameter=my-param>1</parameter>\n"
            "<parameter=my_param>x</parameter>\n</function>\n</seed:tool_call>")
    assert gbnf_accepts(grammar, call)[0]
    assert not gbnf_accepts(grammar, call.replace("<parameter=my-param>1</parameter>\n", ""))[0]


def test_non_ascii_names_get_rules_by_index():
    """Qwen3-Coder's handler (common/parsers/qwen3-coder.cpp at b11549): two tools and two parameters whose
    names sanitize to the same rule name are told apart by their indexes."""
    from .test_handlers_golden import bundle
    grammar = bundle("Qwen3-Coder.jinja", tools=NON_ASCII).parser.grammar
    rules_ = _rule_bodies(grammar)
    assert {"tool-0", "tool-1", "tool-0-arg-0", "tool-0-arg-1"} <= set(rules_)
    assert '"höhe"' in rules_["tool-0-arg-0"] and '"hühe"' in rules_["tool-0-arg-1"]
    assert '"grüße"' in rules_["tool-1"] and '"größe"' in rules_["tool-0"]
    assert not any(name.startswith("tool-gr") for name in rules_)


B11549_GRAMMARS = json.loads((Path(__file__).parent / "data" / "b11549" / "grammar-collisions.json")
                             .read_text(encoding="utf-8"))["rows"]


def _renumber_helpers(grammar: str) -> list[str]:
    """normalize_gbnf with the ``ac-N`` helper rules (the until-matchers of a literal set) renumbered too: their
    N is an emitter counter, one higher in ours after a string parameter, not part of the language."""
    ids: dict[str, str] = {}

    def ren(m: "re.Match[str]") -> str:
        return "ac-" + ids.setdefault(m.group(1), str(len(ids)))

    return normalize_gbnf(re.sub(r"\bac-(\d+)(?!\d)", ren, grammar))


@pytest.mark.parametrize("row", B11549_GRAMMARS, ids=lambda r: f"{r['template']}:{r['tools_name']}")
def test_colliding_names_grammar_is_llama_cpp_b11549s(row):
    """Tools whose names sanitize to one rule name: our grammar, laziness and triggers are the ones llama.cpp
    b11549 gives for the same request (recorded from b11549's source, tests/data/b11549/README.md)."""
    from core.chat.pipeline import build_chat_parser

    from .test_handlers_golden import TRIGGER_CODES, template

    req = row["request"]
    bundle = build_chat_parser(template(row["template"]),
                               ChatRequest.from_dict({"messages": req["messages"], "tools": req["tools"]}))
    theirs = row["answer"]
    assert _renumber_helpers(bundle.parser.grammar) == _renumber_helpers(theirs["grammar"])
    assert bundle.parser.grammar_lazy == theirs["grammar_lazy"]
    assert [{"type": TRIGGER_CODES[t.type.value], "value": t.value} for t in bundle.parser.grammar_triggers] == \
        theirs["grammar_triggers"]
    # no argument rule is named after a parameter any more (JSON-schema rules keep property names, deduplicated)
    assert not any("-arg-my" in line.split(" ::= ")[0] or "-arg-h" in line.split(" ::= ")[0]
                   for line in theirs["grammar"].splitlines())
