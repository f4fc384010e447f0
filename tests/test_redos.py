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
from .export_corpus import corpus_exports

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
    # where the whitespace goes; the bounds every run then gets are pinned below
    assert linear_delimiter(before, bounded=False) == after
    assert check_pattern(after) == []


@pytest.mark.parametrize("before, after", [
    # issue 24, streamed: each chunk fed to transformers' ResponseParser searched a pending delimiter again from
    # its start, so an open name, id or whitespace run was read again on every chunk (Solar Open, Kimi-K2,
    # Qwen3-Coder, Mistral-Small-3.2, DeepSeek-V4): every run and repeat gets an upper bound
    (r"<tool_call>\s*", r"<tool_call>\s{0,1000}"),
    (r"(?:<tool_call>\s*)?<function=(?P<name>[^\s<>]+?)\s*>\s*",
     r"(?:<tool_call>\s{0,1000}+)?<function=(?P<name>[^\s<>]{1,256}+)\s{0,1000}+(?:>|(?!))\s{0,1000}"),
    (r"(?:<\|START_RESPONSE\|>\s*)+", r"(?:<\|START_RESPONSE\|>\s{0,1000}){1,4}"),
    (r"\A\s*(?=\{\s*\"name\"\s*:)", r"\A\s{0,1000}+(?=\{\s{0,1000}+\"name\"\s{0,1000}+:)"),
    (r'<\|open\|>call tool="(?P<name>[^"]+)"[^<]*<\|sep\|>',
     r'<\|open\|>call tool="(?P<name>[^"]{1,256}+)"[^<]{0,256}+<\|sep\|>'),
    (r"(?P<id>functions\.(?P<name>(?:(?!functions\.)[^\s<>])+?)\s*:\d+)",
     r"(?P<id>functions\.(?P<name>(?:(?!functions\.)[^\s<>]){1,256}?)\s{0,1000}+:\d{1,256})"),
    (r"\[TOOL_CALLS\]\s*(?P<name>[^\s<>\"'{}()\[\]]+)(?:[\s<>\"'}()\[\]](?:(?!\[TOOL_CALLS\])[^{])*)?(?=\{)",
     r"\[TOOL_CALLS\]\s{0,1000}+(?P<name>[^\s<>\"'{}()\[\]]{1,256}+)(?:[\s<>\"'}()\[\]]"
     r"(?:(?!\[TOOL_CALLS\])[^{]){0,256})?(?=\{)"),
    (r"<a>x{2,}y*+z\s+?(?:ab|cd)*", r"<a>x{2,256}+y{0,256}+z\s{1,1000}?(?:ab|cd){0,4}"),
    (r"<a>x{3,5}\s{0,9}", r"<a>x{3,5}\s{0,9}"),  # already bounded
])
def test_linear_delimiter_bounds_every_run(before, after):
    assert linear_delimiter(before) == after
    assert [f.kind for f in check_pattern(before, streamed=True)].count("STREAM") == (before != after)
    assert check_pattern(after, streamed=True) == []


def test_the_stream_check_bounds_how_far_a_match_reads():
    from core.export.redos import STREAM_MAX_CHARS, _scan_width
    from re import _parser as sre

    assert _scan_width(sre.parse(r"<a>\s{0,1000}(?=\{\s{0,10}x)")) == 3 + 1000 + 12
    assert _scan_width(sre.parse(r"(?:<b>\s{0,10}){1,4}")) == 4 * 13
    assert _scan_width(sre.parse(r"(?:(?!<x>).){0,256}x")) == 258  # a lookahead reads past what it consumes
    assert _scan_width(sre.parse(r"a\s*")) is None
    too_far = r"<a>(?:\s{0,1000}b){0,9}"
    assert [f.kind for f in check_pattern(too_far, streamed=True)] == ["STREAM"]
    assert "9,012 characters" in check_pattern(too_far, streamed=True)[0].detail and STREAM_MAX_CHARS < 9012
    assert check_pattern(too_far) == []  # only delimiters the streaming parser watches


def test_linear_delimiter_leaves_a_capture_edge_and_the_checker_still_sees_it():
    assert linear_delimiter(r"(?P<id>\s*x)\s*", bounded=False) == r"(?P<id>\s*(?:x|(?!)))\s*"
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
    assert rt["fields"]["tool_calls"]["open_pattern"] == r"<tool_call>\s{0,1000}"
    assert rt["fields"]["tool_calls"]["close_pattern"] == r"</tool_call>\s{0,1000}"
    assert check_response_template(rt) == {}
    outs = fuzz_outputs(rt, 1000)
    assert outs["spaces+letter"] == " " * 1000 + "a" and "near-miss '<tool_call'" in outs
    assert outs["repeat '</tool_call>'"].count("</tool_call>") == 1000 // len("</tool_call>")


@pytest.mark.parametrize("fidelity", ["llama.cpp", "improved"])
def test_every_corpus_export_passes_the_static_check(fidelity):
    exported, flagged = 0, {}
    for name, res in corpus_exports(fidelity).items():
        if not res.exportable:
            continue
        exported += 1
        assert response_template_patterns(res.response_template)
        found = check_response_template(res.response_template)
        if found:
            flagged[name] = found
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
<\|recipient\|>\s{0,1000}+|\A(?!\s{0,1000}+all\
<\|content\|>))"
                      r"(?P<name>[^\s<>\"'{}()\[\]]{1,256}+)\s{0,1000}+(?:<\|content\|>|(?!))\s{0,1000}")
    assert check_response_template(rt) == {}
    # the same opener before the rewrite and without the bounds every run got since (with them the partial
    # search is linear anyway: 0.00 s on 40,000 '<', where the unbounded one took 0.33 s)
    before = _unbound(opener.replace(r"(?:<\|content\|>|(?!))", r"<\|content\|>"))
    assert [f.kind for f in check_pattern(before)] == ["PARTIAL"]
    assert check_pattern(opener.replace(r"(?:<\|content\|>|(?!))", r"<\|content\|>")) == []
    # the same matches, spans and name on the texts the opener exists for, and on near misses
    texts = ["get_weather\n<|content|>{}", "all\n<|content|>Hi", "Hi<|from|>assistant\n<|recipient|>f\n<|content|>{}",
             "all\n<|content|>" + "<|content|" * 50, "f <|content|>", "<|from|>assistant\n<|recipient|> g\t<|content|>x"]
    for t in texts:
        a, b = re.search(before, t, re.DOTALL), re.search(opener, t, re.DOTALL)
        assert (a and (a.span(), a.groupdict())) == (b and (b.span(), b.groupdict())), t


def _unbound(pattern: str) -> str:
    """``pattern`` with the bounds of :func:`core.export.linear._bound_runs` taken off again (and the possessive
    marks of ``_possessive``: a possessive run of the whole text is no run the checker rescans)."""
    return re.sub(r"\{([01]),(?:1000|256)\}\+?", lambda m: "*+"[int(m.group(1))], pattern)


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


class _Counted:
    """A compiled delimiter that records how many characters each search or match is given (from ``pos`` to the
    end of the text): what the regex engine may read, a count that does not depend on the machine's speed."""

    def __init__(self, rx, log: list[int]) -> None:
        self.rx, self.log = rx, log

    def search(self, string, pos=0, *args, **kwargs):
        self.log.append(len(string) - pos)
        return self.rx.search(string, pos, *args, **kwargs)

    def match(self, string, pos=0, *args, **kwargs):
        self.log.append(len(string) - pos)
        return self.rx.match(string, pos, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.rx, name)


def _stream(rt, text: str, chunk: int) -> tuple[list[int], object]:
    """Feed ``text`` to transformers' ``ResponseParser`` ``chunk`` characters at a time; the characters each
    delimiter search was given, and the message (or the error's class)."""
    from transformers.utils.chat_parsing import ResponseParser
    from transformers.utils.chat_parsing.response_templates import load_response_template

    spec = load_response_template(rt)
    log: list[int] = []
    for f in spec.fields.values():
        f.open_re = _Counted(f.open_re, log) if f.open_re is not None else None
        f.close_re = _Counted(f.close_re, log) if f.close_re is not None else None
    parser = ResponseParser(spec, prefix="")
    try:
        for i in range(0, len(text), chunk):
            parser.feed(text[i:i + chunk])
        return log, parser.finalize()[0]
    except ValueError as e:  # a hostile output the field's content parser refuses
        return log, type(e)


def _one_shot(rt, text: str) -> object:
    from transformers.utils.chat_parsing import parse_response

    try:
        return parse_response(text, rt, prefix="")
    except ValueError as e:
        return type(e)


# issue 24: the exports that were quadratic while streamed (an open name, id or whitespace run inside a
# delimiter), the gpt-oss export (its other-recipient body was part of a delimiter) and the bundled ChatML example
_STREAMED = ["upstage-Solar-Open-100B.jinja", "Kimi-K2-Instruct.jinja", "Qwen3-Coder.jinja",
             "Mistral-Small-3.2-24B-Instruct-2506.jinja", "deepseek-ai-DeepSeek-V4.jinja", "openai-gpt-oss-120b.jinja"]
_CHUNK = 61  # any size shows a held-back window that keeps growing; a larger one keeps the test short


@pytest.mark.parametrize("name", _STREAMED)
def test_streamed_exports_search_a_bounded_window(name):
    """Streamed, every hostile output of :func:`fuzz_outputs` (10,000 characters: spaces, near-miss and repeated
    markers, each marker followed by a run of spaces or letters that never ends) gives each delimiter search at
    most the chunk plus :data:`STREAM_MAX_CHARS` characters, so a stream costs at most a constant per character;
    before the bounds, the held-back delimiter grew with the output (the whole 10,000 characters), and so did
    every search. The streamed message is the one-shot one."""
    from core.export.redos import STREAM_MAX_CHARS

    path = TEMPLATES / name
    seen = set()
    for fidelity in ("llama.cpp", "improved"):
        rt = export_response_template(ChatTemplate(path.read_text(encoding="utf-8"), name),
                                      fidelity=fidelity).response_template
        key = repr(rt)
        if rt is None or key in seen:
            continue
        seen.add(key)
        worst = (0, "")
        for what, text in fuzz_outputs(rt, 10_000).items():
            log, message = _stream(rt, text, _CHUNK)
            worst = max(worst, (max(log), what))
            assert message == _one_shot(rt, text), (fidelity, what)
        assert STREAM_MAX_CHARS < 10_000 and worst[0] <= STREAM_MAX_CHARS + _CHUNK, (fidelity, worst)
    assert seen


def test_an_unbounded_delimiter_is_searched_again_over_the_whole_stream(monkeypatch):
    # the net under the construction: without the bounds the Solar Open export is refused (STREAM), and its
    # opener, streamed, is given the whole output again on every chunk
    import core.export.linear as linear

    path = TEMPLATES / "upstage-Solar-Open-100B.jinja"
    template = ChatTemplate(path.read_text(encoding="utf-8"), path.name)
    rt = export_response_template(template).response_template
    monkeypatch.setattr(linear, "_bound_runs", lambda seq: seq)
    res = export_response_template(template)
    assert not res.exportable and "STREAM" in res.reasons[0]
    unbounded = {**rt, "fields": {k: {**f, **{p: _unbound(f[p]) for p in ("open_pattern", "close_pattern")
                                              if f.get(p)}} for k, f in rt["fields"].items()}}
    log, _ = _stream(unbounded, "a" * 10_000, _CHUNK)
    assert max(log) > 9_000
    log, _ = _stream(rt, "a" * 10_000, _CHUNK)
    assert max(log) <= linear.RUN_BOUND + 2 * _CHUNK  # the id run at the start, then only the new chunks


@pytest.mark.parametrize("before, after", [
    # Solar Open's llama.cpp opener (the call id may start the pattern, behind a lookbehind): the optional section
    # openers spread into one alternation, every run that nothing after it can continue made possessive
    (r"(?:<\|tool_calls\|>\s*)?(?:<\|tool_call:begin\|>\s*)?(?<![^\s<>])(?P<id>[^\s<>]+?)<\|tool_call:name\|>"
     r"(?P<name>[^\s<>\"'{}()\[\]]+?)\s*<\|tool_call:args\|>\s*",
     r"(?:<\|tool_calls\|>\s{0,1000}+(?:<\|tool_call:begin\|>\s{0,1000}+)?|<\|tool_call:begin\|>\s{0,1000}+|)"
     r"(?<![^\s<>])(?P<id>[^\s<>]{1,256}+)(?:<\|tool_call:name\|>|(?!))(?P<name>[^\s<>\"'{}()\[\]]{1,256}+)"
     r"\s{0,1000}+(?:<\|tool_call:args\|>|(?!))\s{0,1000}"),
    (r"</call>\s*(?:</calls>\s*|(?=<call>)|\Z)", r"</call>\s{0,1000}+(?:</calls>\s{0,1000}|(?=<call>)|\Z)"),
    # kept: the name can hold a backtick, so it may end before ```json; a lazy run at the end; what follows can
    # match without a character (a negative lookahead, \b, $, the end, a repeat's end)
    (r"<｜tool▁sep｜>(?P<name>[^\s<>]+?)\s*```json\s*",
     r"<｜tool▁sep｜>(?P<name>[^\s<>]{1,256}?)\s{0,1000}+```json\s{0,1000}"),
    (r"<a>(?P<x>[^<]+?)", r"<a>(?P<x>[^<]{1,256}?)"),
    (r"<a>\s*(?!b)", r"<a>\s{0,1000}(?!b)"),
    (r"<a>[a-z]+\b", r"<a>[a-z]{1,256}\b"),
    (r"<a>\s*(?:<b>)?$", r"<a>\s{0,1000}(?:<b>)?$"),
    (r"(?:<b>\s*)+", r"(?:<b>\s{0,1000}){1,4}"),
])
def test_runs_are_possessive_only_where_what_follows_cannot_take_their_characters(before, after):
    # issue 24, streamed: a run that gives characters back is retried at every shorter length on every chunk
    # (Solar Open, <|tool_calls|> + 1,000 spaces: 1,000 tries per partial search)
    assert linear_delimiter(before) == after
    assert check_pattern(after, streamed=True) == []


_KEPT = list(_OPENERS) + [
    r"<\|tool_call:end\|>\s*(?:<\|calls\|>\s*|(?=(?:<\|tool_call:begin\|>|call\d+<\|tool_call:name\|>))|\Z)",
    r"(?:<\|tool_calls\|>\s*)?<\|tool_call:begin\|>\s*(?P<id>[^\s<>]+?)\s*<\|tool_call:name\|>"
    r"(?P<name>[^\s<>\"'{}()\[\]]+?)\s*<\|tool_call:args\|>\s*",  # Solar Open, improved
    r"(?:<｜tool▁calls▁begin｜>\s*)?(?:<｜tool▁call▁begin｜>\s*)?function<｜tool▁sep｜>(?P<name>[^\s<>\"'{}()\[\]]+?)"
    r"\s*```json\s*",  # DeepSeek R1
    r"\A\s*(?=\[\s*[A-Za-z_][\w.-]*\()",  # ToolACE
    r"(?:<a>\s*)?(?:<b>|<c>\s*)?(?<![^\s<>])(?P<id>\w+?)\s*<n>",
]


@pytest.mark.parametrize("pattern", _KEPT)
def test_possessive_runs_and_spread_openers_keep_every_match(pattern, monkeypatch):
    """The possessive runs and the spread optional openers change no match, no group and no partial match's start
    (what transformers' streaming holds back), in the ``regex`` module the consumers run: compared with the same
    export without them, on texts built from the pattern's markers, near misses and long runs."""
    regex = pytest.importorskip("regex")
    import core.export.linear as linear
    from core.export.redos import _literals

    new = linear_delimiter(pattern)
    monkeypatch.setattr(linear, "_possessive", lambda seq, after, sample: None)
    monkeypatch.setattr(linear, "_spread_leading_optionals", lambda seq: seq)
    old = linear_delimiter(pattern)
    assert new != old
    a, b = regex.compile(new, regex.DOTALL), regex.compile(old, regex.DOTALL)
    lits = [x for x in _literals(pattern) if x]
    pieces = lits + ["get_weather", "call00001", "f", " ", "  \n", "\t", "x" * 300, " " * 1001, "<", ">", "`", "7",
                     "[", "(", "functions.f", ":0", "all\n"]
    texts = {"".join(lits), " ".join(lits)}
    for p in pieces:
        for q in pieces:
            texts |= {p + q, p + q + "".join(lits), "".join(lits[:1]) + p + q}
            for c in lits:
                texts |= {c + p + q + c, p + c + q}
    for t in sorted(texts):
        for pos in (0, 1):
            m1, m2 = a.search(t, pos), b.search(t, pos)
            assert (m1 and (m1.span(), m1.groupdict())) == (m2 and (m2.span(), m2.groupdict())), (new, t, pos)
            m1, m2 = a.search(t, pos, partial=True), b.search(t, pos, partial=True)
            assert (m1 and (m1.span(), m1.partial)) == (m2 and (m2.span(), m2.partial)), (new, t, pos)
            if m1 and not m1.partial:  # transformers' check whether a match at the buffer's end may still grow
                x1, x2 = a.match(t + "\x00", m1.start()), b.match(t + "\x00", m1.start())
                assert (x1 and (x1.span(), x1.groupdict())) == (x2 and (x2.span(), x2.groupdict())), (new, t)
