"""Linear-time patterns (issue 24): the static check of :mod:`core.export.redos` finds the shapes that backtrack,
the whitespace rewrite of :mod:`core.export.linear` removes them from what the export emits, every exported
pattern of the corpus passes the check (both fidelities), and so do the regexes our parser and grammar build from
template or schema text. Wall-clock figures are in ``bench/redos.py``; nothing here is timed."""

from __future__ import annotations

import re

import pytest

from core.export.linear import linear_delimiter, parse, render
from core.export.redos import check_pattern, check_response_template, fuzz_outputs, response_template_patterns
from core.export.response_template import export_response_template
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

BAD = {
    # the bundled ChatML example's export before the fix (issue 24: 8.7 s at 1,000 spaces in transformers)
    r"\s*\s*<tool_call>\s*": {"ADJACENT", "LEADING"},
    r"\s*(?:\s*<tool_call>\s*)?\s*<function=(?P<name>[^\s<>]+?)\s*>": {"ADJACENT", "LEADING"},
    r"(?:\s*<\|START_RESPONSE\|>\s*)+": {"NESTED", "LEADING"},
    r"(\w+\s?)*$": {"NESTED"},
    r"</think>|(?=\s*<tool_call>)": {"LEADING"},
    r"<parameter=(?P<key>[^<>\n]+?)\s*>": {"ADJACENT"},
    r"<parameter=(?P<k>[^>]+)>(?P<value>.*?)</parameter>": {"SPAN"},
    r"functions\.(?P<name>[^\s<>]+?):\d+<x>": {"SPAN"},
    r"\[TOOL_CALLS\](?P<name>[^\s\[\]{]+)\s*[^{]*?(?=\{)": {"ADJACENT", "SPAN"},
    r"(?:a|b)+c": {"LEADING"},
    # linear for re, quadratic in the regex module's partial search (transformers' streaming)
    r"(?:<seed:tool_call>\s*)?<function=": {"PARTIAL"},
    # no literal start, and a literal needed after a run: the partial search looks for it from every start
    r"(?:<\|from\|>assistant\n<\|recipient\|>\s*|\A(?!\s*all\n<\|content\|>))(?P<name>[^\s<>]+?)\s*<\|content\|>\s*":
        {"PARTIAL"},
    r"(?:\A|>>>)(?!all\n)(?P<name>[^\s>]+)\n": {"PARTIAL"},
    r"(?:<a>|\A)\s*x": {"PARTIAL"},
    r"(?<![^\s<>])(?P<id>[^\s<>]+?)<\|name\|>": {"PARTIAL"},
    r'(?:<s>\s{0,1000})?<f name="(?P<name>[^"]+)">': {"PARTIAL"},
}
GOOD = [
    r"<tool_call>\s*", r"</tool_call>\s*(?:</tools>\s*|(?=<tool_call>)|\Z)", r"\A\s*<\|CHATBOT_TOKEN\|>",
    r"(?:<a>|\A)\s*(?:x|(?!))", r"<a>[^<]*</a>", r"[^a-zA-Z0-9-]+", r"x\s*y\s*z", r"\d{4}-\d{2}",
    r"(?:<x>\s*)+", r'(?:<｜DSML｜(?:tool_calls|function_calls)>\s{0,1000})?'
    r'<｜DSML｜invoke name="(?P<name>[^"]+)(?:">|(?!))\s*',
    r"<p=(?P<k>[^<>\n]*?[^<>\s])\s*>(?P<value>(?:(?!<p=).)*?)</p>", r"(?:<s>\s{0,1000})?<f>",
    r"(?<![^\s<>])(?P<id>[^\s<>]+?)(?:<\|name\|>|(?!))",
    r"(?:<\|from\|>assistant\n<\|recipient\|>\s*|\A(?!\s*all\n<\|content\|>))(?P<name>[^\s<>]+?)\s*"
    r"(?:<\|content\|>|(?!))\s*",
]


@pytest.mark.parametrize("pattern", sorted(BAD))
def test_checker_flags_backtracking_shapes(pattern):
    assert {f.kind for f in check_pattern(pattern)} >= BAD[pattern]


@pytest.mark.parametrize("pattern", GOOD)
def test_checker_passes_linear_shapes(pattern):
    assert check_pattern(pattern) == []


@pytest.mark.parametrize("before, after", [
    (r"\s*\s*<tool_call>\s*", r"<tool_call>\s*"),
    (r"\s*</tool_call>\s*", r"</tool_call>\s*"),
    (r"\s*(?:\s*<tool_call>\s*)?\s*<function=(?P<name>[^\s<>]+?)\s*>\s*",
     r"(?:<tool_call>\s{0,1000})?<function=(?P<name>[^\s<>]+?)\s*(?:>|(?!))\s*"),
    (r"\s*</invoke>\s*(?:\s*</m>\s*|(?=\s*\s*<invoke)|\Z)", r"</invoke>\s*(?:</m>\s*|(?=<invoke)|\Z)"),
    (r"(?:\s*<\|START_RESPONSE\|>\s*)+", r"(?:<\|START_RESPONSE\|>\s*)+"),
    (r"</think>|(?=\s*<tool_call>)", r"</think>|(?=<tool_call>)"),
    (r"(?=\s*<function_call>\s*)", r"(?=<function_call>)"),
    (r"\A\s*<\|CHATBOT_TOKEN\|>", r"\A\s*<\|CHATBOT_TOKEN\|>"),
    # no literal start: a literal needed after a run goes into an alternation the regex module takes no
    # required text from; the first literal (bounded offset) and an anchored pattern stay as written
    (r"(?:<f>\n<r>\s*|\A(?!\s*all\n<c>))(?P<name>[^\s<>]+?)\s*<c>\s*",
     r"(?:<f>\n<r>\s*|\A(?!\s*all\n<c>))(?P<name>[^\s<>]+?)\s*(?:<c>|(?!))\s*"),
    (r"(?:<tool_call>\s*)?<function=(?P<name>[^\s<>]+?)\s*>\s*",
     r"(?:<tool_call>\s{0,1000})?<function=(?P<name>[^\s<>]+?)\s*(?:>|(?!))\s*"),
    (r"(?:\A|>>>)(?!all\n)(?P<name>[^\s>]+)\n", r"(?:\A|>>>)(?!all\n)(?P<name>[^\s>]+)(?:\n|(?!))"),
    (r"<function=(?P<name>[^\s<>]+?)\s*>\s*", r"<function=(?P<name>[^\s<>]+?)\s*>\s*"),
    (r"\A(?P<name>[^\s<>]+?)\s*<c>", r"\A(?P<name>[^\s<>]+?)\s*<c>"),
])
def test_linear_delimiter_rewrites(before, after):
    assert linear_delimiter(before) == after
    assert check_pattern(after) == []


def test_linear_delimiter_leaves_a_capture_edge_and_the_checker_still_sees_it():
    assert linear_delimiter(r"(?P<id>\s*x)\s*") == r"(?P<id>\s*(?:x|(?!)))\s*"
    assert {f.kind for f in check_pattern(r"(?P<id>\s*x)\s*")} >= {"LEADING", "PARTIAL"}


def test_linear_delimiter_keeps_what_an_anchored_delimiter_matches():
    # where the text before a delimiter cannot hold spaces (\A), the rewrite matches exactly the same texts
    pats = [r"\s*(?:\s*<a>\s*)?(?:\s*<b>\s*)?\s*<c>(?P<n>\w+)\s*", r"\s*<e>\s*(?:\s*<f>\s*|(?=\s*\s*<g>)|\Z)"]
    texts = ["<c>x", " <a> <c>y ", "<a>\n\n<b><c>z", "\t<b>  <c>w\n", "<a><a><c>v", "<e> <f>", "<e>  <g>",
             "<e>", "<e> x", " <c> "]
    for p in pats:
        q = linear_delimiter(p, search=False)
        for t in texts:
            m1, m2 = re.match(p, t), re.match(q, t)
            assert (m1 and (m1.span(), m1.groupdict())) == (m2 and (m2.span(), m2.groupdict())), (p, q, t)


def test_parse_and_render_round_trip_every_corpus_pattern_shape():
    for p in list(BAD) + GOOD + [r"[]a]+\[x\]", r"(?:a{2,3}|b+?)c*+", r"(?>ab)\Z"]:
        assert render(parse(p)) == p


def test_bundled_chatml_export_is_linear():
    # issue 24 named this export: \s*\s*<tool_call>\s* and \s*(?:\s*X\s*)?\s*Y
    t = ChatTemplate((ROOT / "assets" / "templates" / "chatml-think-tools.jinja").read_text(encoding="utf-8"),
                     "chatml-think-tools.jinja")
    rt = export_response_template(t).response_template
    assert rt["fields"]["tool_calls"]["open_pattern"] == r"<tool_call>\s*"
    assert rt["fields"]["tool_calls"]["close_pattern"] == r"</tool_call>\s*"
    assert check_response_template(rt) == {}
    outs = fuzz_outputs(rt, 1000)
    assert outs["spaces+letter"] == " " * 1000 + "a" and "near-miss '<tool_call'" in outs
    assert outs["repeat '</tool_call>'"].count("</tool_call>") == 1000 // len("</tool_call>")


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_every_corpus_export_passes_the_static_check(fidelity):
    exported, flagged = 0, {}
    for path in sorted(TEMPLATES.glob("*.jinja")):
        res = export_response_template(ChatTemplate(path.read_text(encoding="utf-8"), path.name), fidelity=fidelity)
        if not res.exportable:
            continue
        exported += 1
        assert response_template_patterns(res.response_template)
        found = check_response_template(res.response_template)
        if found:
            flagged[path.name] = found
    assert exported >= 290, exported  # 294 (llama.cpp) and 306 (improved) when this was written
    assert flagged == {}


def test_parser_and_grammar_regexes_are_linear():
    """The regexes our parser and grammar compile from template or schema text, and the trigger patterns
    handed to llama.cpp, for hostile delimiters; module-level patterns used with ``match`` (anchored at one
    position) need only the ADJACENT/NESTED part."""
    from core.chat import stream
    from core.chat.formats import muse_glimmer
    from core.chat import grammar_after, mapper
    from core.grammar import converter
    from core.peg import engine, nodes, scanners

    hostile = ["<tool_call>", "</think>", "\\s*", "a*b", "((((", "    ", "<|x|>", "ab" * 40, "\u2028", "a"]
    from core.chat.formats import gemma4

    search = [engine._partial_regex(hostile).__self__.pattern, muse_glimmer.TRIGGER_PATTERN, gemma4._CALL_PROBE.pattern,
              converter._INVALID_RULE_CHARS.pattern, nodes._INVALID_RULE_CHARS.pattern]
    anchored = [scanners.string_body_regex(d).pattern for d in ("'", '"', "<|\"|>"[:1])]
    anchored += [v.pattern if isinstance(v, re.Pattern) else v.__self__.pattern
                 for m in (stream, gemma4, grammar_after, mapper, engine, scanners)
                 for v in vars(m).values()
                 if isinstance(v, re.Pattern) or isinstance(getattr(v, "__self__", None), re.Pattern)]
    assert len(anchored) >= 12
    # our own partial matching is Python's re, llama.cpp's triggers std::regex: not the regex module's partial mode
    assert [(p, check_pattern(p, partial=False)) for p in search if check_pattern(p, partial=False)] == []
    assert [(p, check_pattern(p, search=False)) for p in anchored if check_pattern(p, search=False)] == []


def test_an_export_the_check_flags_is_refused(monkeypatch):
    # the construction is the guarantee; the check is the net: without the rewrite the ChatML export is refused
    import core.export.linear as linear

    monkeypatch.setattr(linear, "linear_response_template", lambda rt: None)
    t = ChatTemplate((ROOT / "assets" / "templates" / "chatml-think-tools.jinja").read_text(encoding="utf-8"),
                     "chatml-think-tools.jinja")
    res = export_response_template(t)
    assert not res.exportable
    assert res.reasons[0].startswith("a pattern would not run in linear time on some outputs (tool_calls.")


def test_checker_flags_the_partial_mode_alternation_of_functionary_v22():
    # re-attack of issue 24: the opener (?:<|from|>…\s*|\A(?!…))NAME\s*<|content|> was quadratic in the regex
    # module's partial search (transformers' streaming; 2.5 s CPU on 80,000 '<' after the header). The checker
    # flags that shape; the export leaves <|content|> to an alternation the search takes no required text from
    path = TEMPLATES / "hfjs-meetkai-functionary-medium-v2.2.jinja"
    rt = export_response_template(ChatTemplate(path.read_text(encoding="utf-8"), path.name),
                                  fidelity="improved").response_template
    opener = rt["fields"]["tool_calls"]["open_pattern"]
    assert opener == (r"(?:<\|from\|>assistant\
<\|recipient\|>\s*|\A(?!\s*all\
<\|content\|>))"
                      r"(?P<name>[^\s<>\"'{}()\[\]]+?)\s*(?:<\|content\|>|(?!))\s*")
    assert check_response_template(rt) == {}
    before = opener.replace(r"(?:<\|content\|>|(?!))", r"<\|content\|>")
    assert [f.kind for f in check_pattern(before)] == ["PARTIAL"]
    # the same matches, spans and name on the texts the opener exists for, and on near misses
    texts = ["get_weather\n<|content|>{}", "all\n<|content|>Hi", "Hi<|from|>assistant\n<|recipient|>f\n<|content|>{}",
             "all\n<|content|>" + "<|content|" * 50, "f <|content|>", "<|from|>assistant\n<|recipient|> g\t<|content|>x"]
    for t in texts:
        a, b = re.search(before, t, re.DOTALL), re.search(opener, t, re.DOTALL)
        assert (a and (a.span(), a.groupdict())) == (b and (b.span(), b.groupdict())), t


# corpus openers before the required-literal rewrite (llama.cpp fidelity unless noted), as the export built them
_OPENERS = [
    r"(?:<seed:tool_call>\s{0,1000})?<function=(?P<name>[^\s<>\"'{}()\[\]]+?)\s*>\s*",  # Seed-OSS
    r"(?:<\|tool_calls_section_begin\|>\s{0,1000})?(?:<\|tool_call_begin\|>\s{0,1000})?(?P<id>functions\."
    r"(?P<name>(?:(?!functions\.)[^\s<>\"'{}()\[\]])+?)\s*:\d+)<\|tool_call_argument_begin\|>\s*",  # Kimi K2
    r"(?:\A|>>>)(?!all\n)(?P<name>[^\s>]+)\n",  # Functionary v3.2
    r"(?: to=functions\.|<\|channel\|>(?:commentary|analysis) to=functions\.)(?P<name>[^<\s]+)(?:<\|channel\|>"
    r"(?:commentary|analysis))?(?:\s*<\|constrain\|>\s*[A-Za-z0-9_-]+|\s+[A-Za-z0-9_-]+)?<\|message\|>",  # gpt-oss
    r"(?:<\|tool_calls\|>\s{0,1000})?(?:<\|tool_call:begin\|>\s{0,1000})?(?<![^\s<>])(?P<id>[^\s<>]+?)"
    r"<\|tool_call:name\|>(?P<name>[^\s<>\"'{}()\[\]]+?)\s*<\|tool_call:args\|>\s*",  # Solar Open
    r'(?:<｜DSML｜(?:tool_calls|function_calls)>\s{0,1000})?<｜DSML｜invoke name="(?P<name>[^"]+)">\s*',  # DeepSeek V3.2
]


@pytest.mark.parametrize("opener", _OPENERS)
def test_the_required_literal_rewrite_keeps_every_match(opener):
    from core.export.redos import _literals

    hidden = linear_delimiter(opener)
    assert hidden != opener and "|(?!))" in hidden
    assert check_pattern(opener) and check_pattern(hidden) == []
    lits = _literals(opener)
    pieces = lits + ["get_weather", "functions.f", ":0", " ", "\n", "x", "all\n", '">', ">", ":", "<"]
    texts = set()
    for a in pieces:
        for b in pieces:
            for c in lits:
                texts |= {a + b + c, c + a + b, a + c + b + c, "".join(lits), " " + "".join(reversed(lits)),
                          a.join(lits) + b, b.join(lits) + a + c}
    for t in sorted(texts):
        m1, m2 = re.search(opener, t, re.DOTALL), re.search(hidden, t, re.DOTALL)
        assert (m1 and (m1.span(), m1.groupdict())) == (m2 and (m2.span(), m2.groupdict())), (opener, t)
    assert any(re.search(opener, t, re.DOTALL) for t in texts)
