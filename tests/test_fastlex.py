"""core.fastlex gives exactly jinja2's token list (types, values, line numbers) for the project's lexer settings,
or gives up (None) and leaves the template to jinja2's lexer — on the corpus and on a fixed-seed mutation fuzz."""

from __future__ import annotations

import pathlib
import random
import re

import jinja2
import pytest

from core import fastlex, templating

TEMPLATES = pathlib.Path(__file__).resolve().parents[2] / "shared" / "templates"
if not TEMPLATES.is_dir():
    TEMPLATES = pathlib.Path("/work/shared/templates")

ENV = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)


def _corpus() -> "list[str]":
    files = sorted(TEMPLATES.glob("*.jinja"))
    if not files:
        pytest.skip(f"no templates under {TEMPLATES}")
    return [f.read_text(encoding="utf-8") for f in files]


def _jinja2(source: str):
    """jinja2's tokens as (lineno, type, value, type of value), or its exception's (type, message, lineno)."""
    try:
        return [(t.lineno, t.type, t.value, type(t.value)) for t in ENV.lexer.tokenize(source)]
    except Exception as e:  # noqa: BLE001 - compared as data
        return (type(e), str(e), getattr(e, "lineno", None))


def _ours(source: str):
    got = fastlex.tokenize(source)
    return None if got is None else [(t.lineno, t.type, t.value, type(t.value)) for t in got]


def _agrees(source: str, outcome: "list | None" = None) -> "str | None":
    """Why fastlex disagrees with jinja2 on ``source`` (None when it agrees: same tokens, or it gave up).
    ``outcome`` collects (fastlex gave up, jinja2 raised)."""
    want, got = _jinja2(source), _ours(source)
    if outcome is not None:
        outcome.append((got is None, isinstance(want, tuple)))
    if got is None:
        return None
    if isinstance(want, tuple):
        return f"jinja2 raised {want}, fastlex returned {len(got)} tokens"
    if got != want:
        i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        return f"token {i}: {got[i:i + 1]} != jinja2's {want[i:i + 1]} ({len(got)} vs {len(want)} tokens)"
    return None


def test_the_project_environment_is_supported_and_others_are_not():
    assert fastlex.supports(templating._ENV)
    assert fastlex.supports(ENV)
    assert not fastlex.supports(jinja2.Environment())
    assert not fastlex.supports(jinja2.Environment(trim_blocks=True, lstrip_blocks=True, line_statement_prefix="#"))
    assert not fastlex.supports(jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True))
    assert not fastlex.supports(jinja2.Environment(trim_blocks=True, lstrip_blocks=True, block_start_string="<%"))


def test_token_lists_equal_jinja2s_on_every_corpus_template():
    sources = _corpus()
    assert len(sources) >= 351
    gave_up = [i for i, s in enumerate(sources) if fastlex.tokenize(s) is None]
    assert gave_up == []  # the corpus is all ordinary templates
    for source in sources:
        assert _agrees(source) is None
    assert fastlex.triples(sources[0]) == [tuple(t) for t in ENV.lexer.tokenize(sources[0])]


# Fragments for the fuzz: tags with whitespace control, comments, raw blocks, brackets, literals and the odd
# characters jinja2's lexer treats specially (end-of-tag marks inside brackets, unicode, CR/CRLF, tabs).
FRAGMENTS = [
    "{%- ", " -%}", "{%+ ", " +%}", "{% ", " %}", "{{- ", " -}}", "{{ ", " }}", "{{+ ", "{#", "#}", "{#- ", " -#}",
    " +#}", "{% raw %}", "{% endraw %}", "{%- raw -%}", "{%- endraw -%}", "{%raw%}", "{%endraw%}", "{% raw -%}\n ",
    "\n", "\r\n", "\r", "  ", "\t", "\x0b", "\x0c", "\u00a0", "\u2028", "\x85", "é", "名", "²", "·", "\U0001f600",
    "'", '"', "\\", "'a\\nb'", '"x\\"y"', "'\\u00e9'", "'\\N{DASH}'", "'\\x'", "'\\u12'", "'é\\t'",
    "(", ")", "[", "]", "{", "}", "{{", "}}", "%}", "%", "-", "+", "*", "**", "/", "//", "==", "!=", "<=", ">",
    "|", ",", ".", ":", ";", "~", "!", "$", "?", "@", "`", "^", "&",
    "0", "1", "0x1F", "0b101", "0o17", "1_000", "1.5", "1e3", "1.5E-2", "2_0.5", ".5", "007", "0b2", "1__0",
    "x", "message", "loop.index0", "a.0.b", "_x", "x1", "not", "in", "is", "true",
    "{% if x %}", "{% endif %}", "{% for m in messages %}", "{% endfor %}", "{{ x|tojson }}",
    "{% set d = {'a': {'b': 1}} %}", "{{ {'a': 1}}}", "{{ (1 }}", "{% set x = [1, 2 %}", "{{ a %}}",
    "{{ x -}}\n  ", "  {% if %}\n", "\n    {%- endif %}", "{# a -#}\n", "{% x +%}\n",
]


def _mutants(sources: "list[str]", count: int, seed: int) -> "list[str]":
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        base = rng.choice(sources)
        if len(base) > 1500:  # a window, often from a line start: keeps the fuzz to seconds
            i = rng.choice([rng.randrange(len(base)), base.find("\n", rng.randrange(len(base))) + 1])
            base = base[i:i + 1500]
        op = rng.randrange(6)
        if op == 0:  # cut at a random point (unterminated strings, comments, tags, brackets)
            s = base[:rng.randrange(len(base) + 1)]
        elif op == 1:  # splice a piece of another template in
            other = rng.choice(sources)
            a = rng.randrange(len(other) + 1)
            i = rng.randrange(len(base) + 1)
            s = base[:i] + other[a:a + rng.randrange(200)] + base[i:]
        elif op == 2:  # insert fragments near tag marks
            s = base
            for _ in range(rng.randrange(1, 4)):
                marks = [m.start() + rng.randrange(3) for m in re.finditer(r"[{%#}-]", s)] or [0]
                i = min(rng.choice(marks), len(s))
                s = s[:i] + rng.choice(FRAGMENTS) + s[i:]
        elif op == 3:  # line-ending and whitespace changes
            s = base.replace("\n", rng.choice(["\r\n", "\r", "\n\n", " \n", "\n\t", "\u2028\n"]))
            if rng.random() < 0.5:
                s += rng.choice(["\n", "\n\n", "\r\n", " "])
        elif op == 4:  # a short random template made of fragments
            s = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(1, 25)))
        else:  # a window of a template with fragments at both ends
            i = rng.randrange(len(base) + 1)
            s = rng.choice(FRAGMENTS) + base[i:i + rng.randrange(400)] + rng.choice(FRAGMENTS)
        out.append(s)
    return out


def test_mutation_fuzz_same_tokens_or_a_give_up():
    sources = _corpus()
    mutants = _mutants(sources, 4000, seed=20261202)
    outcome: list = []
    disagreements = [(s, why) for s in mutants if (why := _agrees(s, outcome)) is not None]
    assert disagreements == []
    # the fuzz exercises both outcomes: most variants are lexed, the broken ones are left to jinja2
    gave_up, erred = (sum(x) for x in zip(*outcome))
    assert gave_up >= erred > 200
    assert gave_up < len(mutants) // 2


def test_fragment_pairs_and_triples_exhaustively_short():
    rng = random.Random(7)
    cases = [a + b for a in FRAGMENTS for b in FRAGMENTS[::3]]
    cases += ["".join(rng.choice(FRAGMENTS) for _ in range(3)) for _ in range(3000)]
    assert [(c, why) for c in cases if (why := _agrees(c)) is not None] == []


@pytest.mark.parametrize("source", [
    "a\n  {% if x %}\n    b\n  {% endif %}\n",
    "{{ 'x' }}\r\n{# c\r\nd #}\r\n  {%- raw %} {{ y }} \n  {% endraw %}\n\n",
    "{% set d = {'a': {'b': [1, (2)]}} %}{{ d }}",
    "{{ {'a': {'b': 1}}}}\n{{ {'x': 2}}}",  # end-of-print marks inside braces are operators to jinja2
    "{% set x = {'a': 5 %}%} {{ x }}",  # and so is an end-of-block mark
    "{% raw -%}\n  {{ x }}\n  {%- endraw %}\n  {% if y %}z{% endif %}",
    "{{ a.0.b }}{{ 1_000 }}{{ 0x1F }}{{ 1.5e3 }}{{ 'é\\n\\u00e9' }}",
    "{#- only a comment -#}\n   {{- x -}}   \n",
    "x{#",  # an unterminated comment at the very end: jinja2 stops quietly
    "{{ a",  # end of template inside a tag: the parser's error, not the lexer's
])
def test_hand_picked_cases(source):
    assert _ours(source) is not None
    assert _ours(source) == _jinja2(source)


@pytest.mark.parametrize("source", [
    "{{ 'abc }}", "{# never closed", "{% raw %} never closed", "{{ a ]] }}", "{{ a } }}", "{{ x ? }}",
    "{{ ² }}", "{{ '\\N{NOPE}' }}", "{{ (a %}", "{{ a %}}",
])
def test_gives_up_where_jinja2_fails_or_is_unusual(source):
    assert fastlex.tokenize(source) is None


def test_unicode_whitespace_agrees_with_the_regex_class():
    # fastlex uses str.isspace/str.rstrip where jinja2 uses \s: they must agree on every code point
    space = re.compile(r"\s")
    assert [c for c in map(chr, range(0x110000)) if bool(space.fullmatch(c)) != c.isspace()] == []


def test_the_environment_uses_it_and_errors_stay_jinja2s():
    source = "{% for m in messages %}{{ m['content'] | trim }}{% endfor %}"
    assert list(templating._ENV._tokenize(source, None)) == list(ENV.lexer.tokenize(source))
    with pytest.raises(jinja2.TemplateSyntaxError) as ours:
        templating._ENV.parse_raw("line\n{{ 'abc }}")
    with pytest.raises(jinja2.TemplateSyntaxError) as theirs:
        ENV.parse("line\n{{ 'abc }}")
    assert (ours.value.message, ours.value.lineno) == (theirs.value.message, theirs.value.lineno) == (
        "unexpected char \"'\" at 8", 2)


def test_names_are_tried_first_safely():
    # fastlex tries names before the other rules (jinja2 tries them after whitespace, numbers and the end of a
    # tag): safe only if no character a name can start with can start another rule, digits aside (excluded)
    from jinja2._identifier import pattern as name

    others = re.compile(r"""[\s+\-%}'"()\[\]{}/*=!<>~.:|,;]""")
    assert [c for c in map(chr, range(0x110000)) if name.match(c) and others.match(c)] == []
