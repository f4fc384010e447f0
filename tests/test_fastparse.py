"""core.fastparse builds exactly jinja2's tree (node classes, every field, children order, lineno, ctx, environment)
or raises exactly jinja2's error (type, message, line): on the corpus, on generated expressions in every statement
context, on mutated corpus templates, and on nesting past its limit (left to jinja2's parser)."""

from __future__ import annotations

import pathlib
import random
import sys

import jinja2
import jinja2.nodes as nodes
import jinja2.parser
import pytest

from core import fastparse, templating

TEMPLATES = pathlib.Path(__file__).resolve().parents[2] / "shared" / "templates"
if not TEMPLATES.is_dir():
    TEMPLATES = pathlib.Path("/work/shared/templates")
ENV = templating._ENV


def _dump(node: object) -> object:
    """A structural dump: class, every field (unset ones marked), lineno, and whether the environment is ENV."""
    if isinstance(node, nodes.Node):
        d = node.__dict__
        return (type(node).__name__,
                tuple((f, _dump(d[f]) if f in d else "<unset>") for f in node.fields),
                d.get("lineno", "<unset>"), d.get("environment", "<unset>") is ENV)
    if isinstance(node, list):
        return ["list", *(_dump(x) for x in node)]
    if isinstance(node, tuple):
        return ("tuple", *(_dump(x) for x in node))
    return (type(node).__name__, node)


def _outcome(parse, source: str) -> object:  # noqa: ANN001
    try:
        return _dump(parse(source))
    except jinja2.TemplateSyntaxError as e:
        return ("error", type(e).__name__, e.message, e.lineno, e.name)
    except RecursionError:
        return ("error", "RecursionError")


def _jinja2(source: str) -> nodes.Template:
    return jinja2.parser.Parser(ENV, source).parse()


def _ours(source: str) -> nodes.Template:
    return fastparse.parse(ENV, source)


def _fast_only(source: str) -> nodes.Template:
    """The fast parser alone, without the fallback to jinja2's."""
    return fastparse.FastParser(ENV, source).parse()


def _corpus() -> list[str]:
    files = sorted(TEMPLATES.glob("*.jinja"))
    if not files:
        pytest.skip(f"no templates in {TEMPLATES}")
    return [f.read_text(encoding="utf-8") for f in files]


def test_the_installed_jinja2_is_one_fastparse_reproduces():
    # a new jinja2 release: run this file with it, then add its version to JINJA2_VERSIONS (until then every
    # template is parsed by jinja2's own parser, correct but slower)
    assert fastparse.SUPPORTED, jinja2.__version__


def test_dump_sees_line_numbers_and_fields():
    a = _dump(_jinja2("{{ a + b\n+ c }}"))
    b = _dump(_jinja2("{{ a + b +\nc }}"))
    assert a != b  # only the outer Add's line differs (its operator's: 2, then 1)
    assert _dump(_jinja2("{{ a }}")) != _dump(_jinja2("{{ b }}"))


def test_corpus_trees_equal_jinja2s_without_falling_back():
    sources = _corpus()
    assert len(sources) >= 351
    for source in sources:
        theirs = _outcome(_jinja2, source)
        assert theirs[0] != "error"
        assert _outcome(_fast_only, source) == theirs


# -- generated expressions -------------------------------------------------------------------------------------

_NAMES = ["x", "y", "foo", "loop", "messages", "true", "False", "none", "None", "ns", "m"]
_BINARY = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "and",
           "or"]
_FILTERS = ["trim", "length", "tojson", "join", "default", "replace", "selectattr", "map", "f.g"]
_TESTS = ["defined", "none", "string", "mapping", "sameas", "divisibleby", "in", "t.u", "eq"]


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def sp(self) -> str:
        r = self.rng.random()
        return "\n" if r < 0.12 else "" if r < 0.3 else " "

    def expr(self, depth: int = 0) -> str:
        rng, sp = self.rng, self.sp
        if depth > 2:
            return self.atom(depth)
        r = rng.random()
        if r < 0.3:
            return self.atom(depth)
        if r < 0.55:
            return f"{self.expr(depth + 1)}{sp()} {rng.choice(_BINARY)} {sp()}{self.expr(depth + 1)}"
        if r < 0.62:
            return f"{rng.choice(['-', '+', 'not ', '- -', 'not not '])}{sp()}{self.expr(depth + 1)}"
        if r < 0.7:
            tail = f" else{sp()} {self.expr(depth + 1)}" if rng.random() < 0.6 else ""
            return f"{self.expr(depth + 1)} if{sp()} {self.expr(depth + 1)}{tail}"
        if r < 0.8:
            return f"{self.atom(depth)}{sp()}|{sp()}{self.filt(depth)}"
        if r < 0.88:
            neg = "not " if rng.random() < 0.4 else ""
            arg = rng.choice([lambda: "", lambda: f" {self.atom(depth + 1)}", lambda: f"({self.args(depth)})",
                              lambda: rng.choice(["", " 3", " none", " x.y", " 'a'"])])()
            return f"{self.atom(depth)} is {neg}{rng.choice(_TESTS)}{arg}"
        a = [self.expr(depth + 1) for _ in range(rng.randint(2, 4))]
        ops = [rng.choice(_BINARY) for _ in a[1:]]
        return a[0] + "".join(f"{sp()} {o} {sp()}{e}" for o, e in zip(ops, a[1:]))

    def filt(self, depth: int) -> str:
        name = self.rng.choice(_FILTERS)
        if self.rng.random() < 0.5:
            return f"{name}({self.args(depth)})"
        return name

    def args(self, depth: int) -> str:
        rng = self.rng
        parts = [self.expr(depth + 2) for _ in range(rng.randint(0, 2))]
        parts += [f"k{i}{self.sp()}={self.sp()}{self.expr(depth + 2)}" for i in range(rng.randint(0, 2))]
        if rng.random() < 0.2:
            parts.append(f"*{self.atom(depth + 2)}")
        if rng.random() < 0.2:
            parts.append(f"**{self.atom(depth + 2)}")
        if parts and rng.random() < 0.15:
            parts.append("")  # trailing comma
        if rng.random() < 0.05:
            rng.shuffle(parts)  # keywords before positionals: jinja2's error
        return f",{self.sp()}".join(parts)

    def atom(self, depth: int) -> str:
        rng, sp = self.rng, self.sp
        r = rng.random()
        if r < 0.35:
            base = rng.choice(_NAMES)
        elif r < 0.45:
            base = rng.choice(["1", "42", "2.5", "1e3", "0x10", "1_000"])
        elif r < 0.55:
            base = rng.choice(["'a'", '"b"', "'a' 'b'", "'x'\n'y'", "''"])
        elif depth > 4:
            base = rng.choice(_NAMES)
        elif r < 0.62:
            base = f"[{sp()}{', '.join(self.expr(depth + 2) for _ in range(rng.randint(0, 3)))}{rng.choice(['', ','])}]"
        elif r < 0.68:
            items = ", ".join(f"{self.expr(depth + 2)}:{sp()}{self.expr(depth + 2)}"
                              for _ in range(rng.randint(0, 2)))
            base = f"{{{items}}}"
        elif r < 0.78:
            inner = rng.choice([lambda: self.expr(depth + 2), lambda: f"{self.expr(depth + 2)},", lambda: "",
                                lambda: f"{self.expr(depth + 2)},{sp()}{self.expr(depth + 2)}"])()
            base = f"({sp()}{inner}{sp()})"
        else:
            base = rng.choice(_NAMES)
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3]) if depth < 7 else 0):
            base += self.postfix(depth)
        return base

    def postfix(self, depth: int) -> str:
        rng, sp = self.rng, self.sp
        return rng.choice([  # built lazily: each option generates only when chosen
            lambda: f".{rng.choice(['a', 'content', 'role'])}", lambda: ".0", lambda: f"[{self.expr(depth + 2)}]",
            lambda: f"[{rng.choice(['1', ''])}:{rng.choice(['2', '', 'x'])}]", lambda: "[::-1]",
            lambda: f"[{sp()}a:b:{sp()}c]", lambda: "[0, 1]", lambda: "[:]", lambda: f"({self.args(depth)})",
            lambda: "()",
        ])()


def _contexts(g: _Gen) -> str:
    e = g.expr
    rng = g.rng
    return rng.choice([
        lambda: f"{{{{ {e()} }}}}",
        lambda: f"{{{{ {e()}, {e()} }}}}",
        lambda: f"{{{{ {e()}, }}}}",
        lambda: f"{{% if {e()} %}}a{{% elif {e()} %}}b{{% else %}}c{{% endif %}}",
        lambda: f"{{% if {e()}, {e()} %}}a{{% endif %}}",
        lambda: f"{{% set v = {e()} %}}{{{{ v }}}}",
        lambda: f"{{% set a, b = {e()}, {e()} %}}",
        lambda: f"{{% set ns.x = {e()} %}}",
        lambda: f"{{% set v | {g.filt(1)} %}}{{{{ {e()} }}}}{{% endset %}}",
        lambda: f"{{% set v %}}t{{% endset %}}",
        lambda: f"{{% for a in {e()} if {e()} %}}{{{{ a }}}}{{% else %}}{{{{ {e()} }}}}{{% endfor %}}",
        lambda: f"{{% for a, b in {e()} recursive %}}{{% if a %}}{{% break %}}{{% endif %}}{{% endfor %}}",
        lambda: f"{{% for a in x, y %}}{{% continue %}}{{% endfor %}}",
        lambda: f"{{% macro m(a, b={e()}) %}}{{{{ {e()} }}}}{{% endmacro %}}{{{{ m({g.args(1)}) }}}}",
        lambda: f"{{% call m({g.args(1)}) %}}{{{{ {e()} }}}}{{% endcall %}}",
        lambda: f"{{% filter upper %}}{{{{ {e()} }}}}{{% endfilter %}}",
        lambda: f"{{% with q = {e()} %}}{{{{ q }}}}{{% endwith %}}",
        lambda: f"{{% generation %}}{{{{ {e()} }}}}{{% endgeneration %}}",
        lambda: f"{{% print {e()} %}}",
        lambda: f"text\n{{{{- {e()} -}}}}\n{{# c #}}{{{{ {e()} }}}}",
    ])()


_BREAKERS = ["(", ")", "[", "]", "{", "}", ",", ":", "|", "is", "not", "if", "else", "=", ".", "%}", "}}", "{%",
             "{{", "endif", "endfor", "'", "**", "*", "in", ""]


def _mutate(rng: random.Random, source: str) -> str:
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(source) + 1)
        r = rng.random()
        if r < 0.4:
            source = source[:i] + source[i + rng.randint(1, 4):]
        elif r < 0.8:
            source = source[:i] + rng.choice(_BREAKERS) + source[i:]
        else:
            j = rng.randrange(len(source) + 1)
            source = source[:i] + source[j:j + rng.randint(1, 12)] + source[i:]
    return source


_EXPECTED_NODES = {"Add", "Sub", "Mul", "Div", "FloorDiv", "Mod", "Pow", "Concat", "Compare", "Operand", "And", "Or",
                   "Not", "Neg", "Pos", "CondExpr", "Filter", "Test", "Call", "Keyword", "Getattr", "Getitem",
                   "Slice", "Tuple", "List", "Dict", "Pair", "NSRef", "Const", "Name", "Assign", "AssignBlock",
                   "For", "If", "Macro", "CallBlock", "FilterBlock", "With", "Scope", "Break", "Continue", "Output"}


def test_generated_expressions_in_every_context_give_jinja2s_tree_or_error():
    rng = random.Random(14)
    g = _Gen(rng)
    valid = errors = 0
    seen: set[str] = set()
    for _ in range(1500):
        source = _contexts(g)
        if rng.random() < 0.25:
            source = _mutate(rng, source)
        try:
            tree = _jinja2(source)
        except jinja2.TemplateSyntaxError:
            errors += 1
            assert _outcome(_ours, source) == _outcome(_jinja2, source), source
            continue
        valid += 1
        seen.update(type(n).__name__ for n in tree.find_all(nodes.Node))
        assert _outcome(_fast_only, source) == _dump(tree), source  # parsed by fastparse itself, no fallback
    assert valid > 800 and errors > 300  # both kinds well covered
    assert _EXPECTED_NODES <= seen, _EXPECTED_NODES - seen


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jinja2 decoding a mutated string's escapes
def test_mutated_corpus_templates_give_jinja2s_tree_or_error():
    sources = _corpus()
    rng = random.Random(1414)
    picked = rng.sample(sources, 40)
    errors = 0
    for source in picked:
        for _ in range(4):
            mutated = _mutate(rng, source)
            theirs = _outcome(_jinja2, mutated)
            assert _outcome(_ours, mutated) == theirs, mutated
            errors += theirs[0] == "error"
    assert errors > 40


@pytest.mark.parametrize("source", [
    "{{ " + "(" * 60 + "x" + ")" * 60 + " }}",
    "{{ " + "[" * 60 + "]" * 60 + " }}",
    "{{ " + "not " * 120 + "x }}",
    "{{ " + "- " * 150 + "x }}",
    "{% if x %}" * 120 + "{% endif %}" * 120,
    "{{ " + " if x else ".join(["a"] * 80) + " }}",
], ids=["parens", "lists", "not", "minus", "blocks", "conditionals"])
def test_deep_nesting_is_left_to_jinja2(source):
    assert _outcome(_ours, source) == _outcome(_jinja2, source)


def _deep_outcome(parse, source: str) -> object:  # noqa: ANN001
    """_outcome for trees too deep for the default recursion limit: parsed under it, dumped above it."""
    try:
        tree = parse(source)
    except jinja2.TemplateSyntaxError as e:
        return ("error", type(e).__name__, e.message, e.lineno)
    except RecursionError:
        return ("error", "RecursionError")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 20_000)
    try:
        return repr(_dump(tree))
    finally:
        sys.setrecursionlimit(limit)


@pytest.mark.parametrize("unit", ["- ", "not ", "(", "[", "{% if x %}"])
def test_where_jinja2_runs_out_of_stack_the_outcome_is_jinja2s(unit):
    # the environment's _parse as jinja2 defines it (Parser(...).parse() one frame down), against fastparse.parse
    # at the same depth: the frames jinja2's parser can use are the same for both
    def theirs(source: str) -> nodes.Template:
        return jinja2.Environment._parse(ENV, source, None, None)

    closers = {"(": ")", "[": "]", "{% if x %}": "{% endif %}"}

    def source(n: int) -> str:
        if unit == "{% if x %}":
            return unit * n + "{% endif %}" * n
        if unit in closers:
            return "{{ " + unit * n + ("x" if unit == "(" else "") + closers[unit] * n + " }}"
        return "{{ " + unit * n + "x }}"

    lo, hi = 1, 4000  # the least n at which jinja2's parser raises RecursionError here
    while lo < hi:
        mid = (lo + hi) // 2
        if _deep_outcome(theirs, source(mid)) == ("error", "RecursionError"):
            hi = mid
        else:
            lo = mid + 1
    assert lo < 4000
    for n in range(max(1, lo - 8), lo + 8):
        assert _deep_outcome(_ours, source(n)) == _deep_outcome(theirs, source(n)), n


def test_nesting_past_the_limit_falls_back_to_jinja2s_parser(monkeypatch):
    calls = []
    real = jinja2.parser.Parser.parse

    def counting(self):  # noqa: ANN001, ANN202
        calls.append(type(self))
        return real(self)

    monkeypatch.setattr(jinja2.parser.Parser, "parse", counting)
    fastparse.parse(ENV, "{{ " + "(" * 40 + "x" + ")" * 40 + " }}")
    assert calls == [jinja2.parser.Parser]
    calls.clear()
    fastparse.parse(ENV, "{{ " + "(" * 5 + "x" + ")" * 5 + " }}")
    assert calls == []


def test_syntax_errors_are_jinja2s():
    for source in ["{{ a b }}", "{% if x %}", "{{ f(a=1, 2) }}", "{% set true = 1 %}", "{{ x is y is z }}",
                   "{% for a in %}{% endfor %}", "{% macro m(a=1, b) %}{% endmacro %}", "{{ x. }}", "{% endif %}",
                   "{{ x[1 }}", "{{ ( }}", "{% frobnicate %}"]:
        with pytest.raises(jinja2.TemplateSyntaxError) as ours:
            _ours(source)
        with pytest.raises(jinja2.TemplateSyntaxError) as theirs:
            _jinja2(source)
        assert (type(ours.value), ours.value.message, ours.value.lineno) == \
            (type(theirs.value), theirs.value.message, theirs.value.lineno)
        assert ours.value.__context__ is None  # raised by jinja2's parser, not inside our handler


def test_project_environment_parses_with_fastparse(monkeypatch):
    calls = []
    real = fastparse.FastParser.parse

    def counting(self):  # noqa: ANN001, ANN202
        calls.append(1)
        return real(self)

    monkeypatch.setattr(fastparse.FastParser, "parse", counting)
    tree = ENV.parse_raw("{{ a + b }}")
    assert calls == [1]
    assert _dump(tree) == _dump(_jinja2("{{ a + b }}"))
