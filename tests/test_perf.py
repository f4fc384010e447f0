"""Speed-ups that must not change a single byte (issue 14, issue 16 point 8): the analysis with and without every
cache, the compiled code of the once-per-node optimizer, one parse per template, the bounded memos, the
resumable JSON scan and the streaming fast paths. No timing here: speed is measured in ``bench/``."""

from __future__ import annotations

import io
import json
import pathlib
import random
import subprocess
import sys

import jinja2
import pytest

from core import codepack
from core.analysis import analyze
from core.jinja import cache as jinja_cache
from core.jinja import hf as jinja_hf
from core.jinja import limits as jinja_limits
from core.jinja import llama
from core.jinja import sandbox as jinja_sandbox
from core.jinja import template as jinja_template
from core.chat.stream import StreamingParser
from core.memo import BoundedMemo, MISSING, clear_memos
from core.peg.scanners import scan_json_value, scan_json_value_resumable
from core.progress import ProgressBar
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES


def _sources() -> list[tuple[str, str]]:
    return [(p.name, p.read_text(encoding="utf-8")) for p in sorted(TEMPLATES.glob("*.jinja"))]


def _probe_trees(step: int):
    """(file name, probe environment's tree) of every ``step``-th corpus template (those it cannot parse
    skipped)."""
    for name, src in _sources()[::step]:
        try:
            yield name, llama.probe_environment()._parse(src, None, None)
        except jinja2.TemplateSyntaxError:
            continue


def _forget_compiled() -> None:
    """Drop every in-process cache of compiled templates (the disk cache stays as the environment says)."""
    jinja_cache._CODE_MEMO.clear()
    jinja_sandbox._PARSED.clear()
    jinja_cache._parsed_known.clear()  # the parse log and the code store's index are read again, as a new
    codepack.forget()                  # process would
    jinja_cache.check_syntax.cache_clear()
    jinja_template._compile.cache_clear()
    llama._compile_tracking.cache_clear()
    llama._compile_llama.cache_clear()
    clear_memos()


def _analyses(sources: list[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for name, src in sources:
        try:
            rep = analyze(ChatTemplate(src, name))
            out[name] = json.dumps([rep.to_json(), rep.generation_prompt, rep.probe_failures], sort_keys=True,
                                   default=str)
        except Exception as e:  # a template that does not load must fail the same way every time
            out[name] = f"{type(e).__name__}: {e}"
    return out


def test_analyses_identical_uncached_disk_cached_and_memoized_on_all_templates(tmp_path, monkeypatch):
    sources = _sources()
    assert len(sources) == 351
    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CTE_NO_DISK_CACHE", raising=False)
    _forget_compiled()
    try:
        uncached = _analyses(sources)      # compiled from source (one parse each), every render done
        cache = tmp_path / "jinja"
        assert (cache / jinja_cache.PARSED_LOG).stat().st_size and (cache / codepack.PACK).stat().st_size
        _forget_compiled()
        from_disk = _analyses(sources)     # a fresh process's view: code and syntax verdicts from disk
        memoized = _analyses(sources)      # renders, caps and diffs from the memos
    finally:
        _forget_compiled()
    assert from_disk == uncached
    assert memoized == uncached


def test_renders_without_the_constant_folder_equal_jinja2s_folded_renders():
    # our environments compile without jinja2's optimizer (core/jinja/sandbox.py, _LimitedCodeGenerator): what it
    # folded at compile time is computed by the render, to the same text or the same error
    env = jinja_hf.make_environment()
    assert not env.optimized and llama.probe_environment().optimized is False
    folded = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                          extensions=["jinja2.ext.loopcontrols"])
    assert folded.optimized
    cases = ["{{ 'a'|safe ~ x }}{{ (1 + 2) * x }}{{ not x and 'y' }}{{ 'a' if true else x }}{{ -x }}{{ -1 }}",
             "{{ x|string|upper is defined }}{{ 1 < x < 3 }}{{ 1 < 2 < x }}{{ 2 < 1 < x }}{{ [1, x]|length }}",
             "{{ 2 ** 3 }}{{ 7 // 2 }}{{ x or 1 }}{{ 0 and x }}{{ 1 or x }}{{ 'a' ~ 1 }}{{ 'ab'[0] }}",
             "{{ ('%s'|format(1)) ~ ('b'|safe) }}{{ {'a': x}.a }}{{ x|default(1 - 1) }}{{ 'a b'|title }}",
             "{% set a = ['x', 'y']|join('-') %}{{ a }}{% for i in [3, 1, 2]|sort %}{{ i }}{% endfor %}",
             "{% set a = 1 / 0 %}{{ a }}", "{{ 'abc'|unknown_filter }}"]
    compared = 0
    for src in cases:
        outs = []
        for e in (env, folded):
            try:
                outs.append(e.from_string(src).render(x=2))
            except Exception as exc:  # the same failure, raised by the render instead of at compile time
                outs.append(f"{type(exc).__name__}: {exc}")
        assert outs[0] == outs[1], src
        compared += 1
    assert compared == len(cases)
    code = env.compile("{% set v = 'a' ~ 'b' %}{{ v }}", raw=True)
    assert "checked_concat(('a', 'b', ))" in code  # evaluated by the render, not folded into 'ab'
    assert "'ab'" in folded.compile("{% set v = 'a' ~ 'b' %}{{ v }}", raw=True)


def test_a_new_template_is_parsed_once(monkeypatch, tmp_path):
    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path))
    _forget_compiled()
    calls = []

    def counting(real):  # noqa: ANN001, ANN202
        def parse(self):  # noqa: ANN001, ANN202
            calls.append(1)
            return real(self)
        return parse

    monkeypatch.setattr(jinja2.parser.Parser, "parse", counting(jinja2.parser.Parser.parse))
    src = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{# parse-once #}"
    analyze(ChatTemplate(src, "once.jinja"))
    assert len(calls) == 1
    # a later process finds the syntax verdict on disk: constructing the template parses nothing
    _forget_compiled()
    calls.clear()
    ChatTemplate(src, "once.jinja")
    assert calls == []
    _forget_compiled()


def test_bounded_memo_evicts_by_entries_and_bytes():
    m = BoundedMemo("test-memo", max_entries=3, max_bytes=100)
    for i in range(5):
        m.put(i, str(i), 10)
    assert len(m) == 3 and m.get(0) is MISSING and m.get(4) == "4"
    m.put("big", "x", 26)   # more than max_bytes / 4: not stored
    assert m.get("big") is MISSING
    for i in range(3):
        m.put(("b", i), "y", 24)
    assert m.stats().bytes <= 100 and m.stats().evictions >= 4
    with pytest.raises(ValueError, match="test-memo2"):
        BoundedMemo("test-memo2", 0, 10)


def test_failed_renders_are_memoized_as_plain_text():
    from core.analysis import session

    src = "{{ raise_exception('no probes here') }}"
    rep = analyze(ChatTemplate(src, "raises.jinja"))
    assert rep.all_probes_failed
    stored = [v for v, _ in session._GLOBAL_CACHE._data.values() if isinstance(v, session._RenderFailure)]
    assert stored and all(type(f.message) is str and "no probes here" in f.message for f in stored)
    again = analyze(ChatTemplate(src, "raises.jinja"))
    assert again.probe_failures == rep.probe_failures


def _random_json(rng: random.Random, depth: int = 0):
    c = rng.random()
    if depth > 4 or c < 0.3:
        return rng.choice([1, -2.5e3, 'q"\\\n\u1234', True, None, "", "[{", 0])
    if c < 0.65:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": _random_json(rng, depth + 1) for i in range(rng.randint(0, 3))}


def test_resumable_json_scan_equals_the_plain_scan_on_every_prefix():
    rng = random.Random(14)
    docs = ['{"a" :\t\v 1 }', "[ 1 , 2 ]x", '["\\u12', '{"x":"\\q"}', "[1,]", '{"a" 1}']
    for _ in range(120):
        d = json.dumps(_random_json(rng), indent=rng.choice([None, 1]), ensure_ascii=rng.random() < 0.5)
        if rng.random() < 0.3:  # some broken documents too
            k = rng.randrange(len(d))
            d = d[:k] + rng.choice(' ,:]}"\\x\v') + d[k:]
        docs.append(d)
    checked = 0
    for d in docs:
        for lenient in (True, False):
            hints: dict = {}
            for k in range(1, len(d) + 1):
                t = d[:k]
                want = scan_json_value(t, 0, k, lenient, "json-value")
                assert scan_json_value_resumable(t, 0, k, lenient, "json-value", hints, (1, 0)) == want, (t, lenient)
                checked += 1
    assert checked > 10_000


_HOSTILE: dict = {}


def _hostile(name: str) -> dict:
    from bench.hostile import hostile_samples

    if name not in _HOSTILE:
        src = (TEMPLATES / name).read_text(encoding="utf-8")
        samples, _ = hostile_samples(ChatTemplate(src, name), name, 300)
        _HOSTILE[name] = {s.kind: s for s in samples}
    return _HOSTILE[name]


# Qwen3: an auto-parser PEG; Kimi-K2: a special family's PEG (call ids around the name); GLM-4.6: tagged arguments
@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B.jinja", "Kimi-K2-Instruct.jinja", "GLM-4.6.jinja"])
@pytest.mark.parametrize("kind", ["escapes", "brackets", "calls", "lt", "plain"])
def test_streaming_hostile_outputs_same_deltas_as_full_reparse(name, kind):
    s = _hostile(name)[kind]
    runs = []
    for incremental in (True, False):
        sp = StreamingParser(s.parser, incremental=incremental)
        deltas = []
        for ch in s.output:
            deltas.extend(sp.feed(ch))
        deltas.extend(sp.finish())
        runs.append(([repr(d) for d in deltas], sp.message.to_openai(), sp.fast_steps))
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][1] == s.parser.parse(s.output).to_openai()
    if kind in ("escapes", "lt"):  # escape-dense arguments and `<` floods stay on the fast path
        assert runs[0][2] > len(s.output) // 2
    if kind == "calls":  # markers being streamed: a pending literal
        assert runs[0][2] > len(s.output) // 2


# content full of near-misses of the markers of several formats (cut delimiters that turn out to be text)
_NEAR = ("x <tool_cal y <| <|chan <|channel|x <think z <tool_call <</ </tool_call <|im_end|x [TOOL_CALLS x "
         "[TOOL_ <|tool_calls_section_begin| \n< \n<< ") * 4


@pytest.mark.parametrize("name", ["Qwen-Qwen3-0.6B.jinja", "openai-gpt-oss-120b.jinja", "GLM-4.6.jinja"])
def test_streaming_near_miss_markers_same_deltas_as_full_reparse(name):
    from bench.outputs import _assistant, _request, _turn_text
    from core.chat.pipeline import build_chat_parser
    from core.chat.request import ChatRequest

    t = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
    messages = [{"role": "user", "content": "Plan my trip to Paris."}]
    parser = build_chat_parser(t, ChatRequest.from_dict(_request(messages))).parser
    out = _turn_text(t, messages, _assistant("", "hello " + _NEAR, []))
    for step in (1, 3):
        runs = []
        for incremental in (True, False):
            sp = StreamingParser(parser, incremental=incremental)
            deltas = []
            for i in range(0, len(out), step):
                deltas.extend(sp.feed(out[i:i + step]))
            deltas.extend(sp.finish())
            runs.append(([repr(d) for d in deltas], sp.message.to_openai()))
        assert runs[0] == runs[1], (name, step)
        assert runs[0][1] == parser.parse(out).to_openai()


def test_progress_bar_prints_lines_without_carriage_returns_off_a_terminal():
    out = io.StringIO()
    bar = ProgressBar(40, "batch", out)
    for i in range(41):
        bar.update(i)
    bar.update(40)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0].startswith("batch: 0/40 (0 %)") and lines[-1].startswith("batch: 40/40 (100 %)")
    assert len(lines) == 11
    tty = io.StringIO()
    ProgressBar(2, "t", tty, tty=True).update(2)
    assert tty.getvalue().startswith("\rt [") and tty.getvalue().endswith("\n")


def test_bounded_memo_stays_consistent_under_threads():
    import threading

    m = BoundedMemo("test-memo-threads", max_entries=50, max_bytes=10_000)

    def work(k: int) -> None:
        for i in range(3000):
            key = (k * 7 + i) % 120
            if m.get(key) is MISSING:
                m.put(key, str(key), 30)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st = m.stats()
    assert st.entries == len(m._data) <= 50
    assert st.bytes == 30 * st.entries
    assert st.hits + st.misses == 12_000


def test_analyze_command_does_not_import_the_other_commands_modules():
    # a fresh `python -m core analyze T` registers only cli.py's own commands (start-up time, issue 14)
    code = ("import sys; from core.cli import main; main(['workarounds']); "
            "print(sorted(m for m in ('core.chat.roundtrip', 'core.lint', 'core.serving', 'core.compare') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=pathlib.Path(__file__).resolve().parents[1], timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _code(env: jinja2.Environment, src: str) -> bytes:
    """The Python code ``env`` generates for ``src`` (or the syntax error's text)."""
    try:
        return env._generate(env._parse(src, None, None), None, None).encode()
    except jinja2.TemplateSyntaxError as e:
        return str(e).encode()


def _random_value(rnd: random.Random, depth: int, pool: list) -> object:
    """JSON-like value with shared containers (drawn again from ``pool``) and, rarely, a container inside itself."""
    r = rnd.random()
    if depth > 5 or r < 0.35:
        return rnd.choice(["", "ab", "x" * rnd.randint(0, 40), 0, 7, -12345678901234, True, False, None, 1.5])
    if pool and r < 0.45:
        return rnd.choice(pool)
    if r < 0.7:
        v: object = [_random_value(rnd, depth + 1, pool) for _ in range(rnd.randint(0, 5))]
    elif r < 0.8:
        v = tuple(_random_value(rnd, depth + 1, pool) for _ in range(rnd.randint(0, 4)))
    else:
        v = {f"k{i}": _random_value(rnd, depth + 1, pool) for i in range(rnd.randint(0, 5))}
    if isinstance(v, list) and rnd.random() < 0.03:
        v.append(v)
    pool.append(v)
    return v


def test_projected_text_size_recursive_walk_equals_the_iterative_walk():
    rnd = random.Random(14)
    deep: object = "leaf"
    for _ in range(200):  # beyond the recursive walk's depth: must take the iterative walk, same answer
        deep = [deep, {"a": [1, 2]}]
    values = [_random_value(rnd, 0, []) for _ in range(1500)] + [deep]
    for v in values:
        for limit in (0, 5, 40, 300, 10**6):
            for indent in (0, 2):
                expected = jinja_limits._projected_size_iterative(v, limit, indent) if isinstance(
                    v, (list, tuple, dict)) else jinja_limits._leaf_size(v)
                got = jinja_limits.projected_text_size(v, limit, indent)
                if expected is not None and not isinstance(v, (list, tuple, dict)):
                    expected = expected if expected <= limit else limit + 1
                assert got == expected, (v, limit, indent)


def test_indented_tojson_writes_what_json_dumps_writes():
    """``tojson(indent=…)`` takes a recursive writer instead of json's pure-Python indenting encoder: same text
    for every plain value (floats' special values, non-string keys, sorting, ASCII escaping), json's own error
    otherwise."""
    rnd = random.Random(9)

    def val(depth: int) -> object:
        r = rnd.random()
        if depth > 4 or r < 0.4:
            return rnd.choice(["", 'a"b\\\n\u00e9\U0001F600', 0, -5, 10**30, 1.5, -0.0, float("nan"), float("inf"),
                               True, False, None])
        if r < 0.65:
            return [val(depth + 1) for _ in range(rnd.randint(0, 4))]
        if r < 0.75:
            return tuple(val(depth + 1) for _ in range(rnd.randint(0, 3)))
        return {rnd.choice(["k", "é", 1, 2.5, True, None, "a"]): val(depth + 1) for _ in range(rnd.randint(0, 4))}

    for _ in range(1500):
        v = val(0)
        for indent in (0, 2, 4, "\t"):
            for ensure_ascii in (False, True):
                for sort_keys in (False, True):
                    try:
                        expected = json.dumps(v, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)
                    except TypeError as e:  # keys that do not sort
                        with pytest.raises(TypeError) as got:
                            jinja_hf._tojson(v, ensure_ascii, indent, None, sort_keys)
                        assert str(got.value) == str(e)
                        continue
                    assert jinja_hf._tojson(v, ensure_ascii, indent, None, sort_keys) == expected
    with pytest.raises(TypeError, match="not JSON serializable"):  # a set: json's own error, from json itself
        jinja_hf._tojson({"a": {1, 2}}, False, 2)


def test_dependency_walk_finds_what_jinja2s_dependency_finder_finds_on_the_corpus():
    from jinja2.compiler import DependencyFinderVisitor

    checked = 0
    for _name, tree in _probe_trees(3):
        finder = DependencyFinderVisitor()
        for node in tree.body:
            finder.visit(node)
        assert jinja_sandbox._dependencies(tree.body) == (finder.filters, finder.tests)
        checked += bool(finder.filters)
    assert checked > 100
    block = jinja_hf.ENV.parse_raw("{{ a|upper }}{% block b %}{{ c|lower }}{% if d is odd %}{% endif %}"
                                      "{% endblock %}")
    assert jinja_sandbox._dependencies(block.body) == ({"upper"}, set())


@pytest.mark.parametrize("src", [
    "{% for loop in x %}{% endfor %}",
    "{% for a, loop in x %}{% endfor %}",
    "{% for a in x %}{% for b in y %}{% set loop = 1 %}{% endfor %}{% endfor %}",
    "{% for a in x %}{{ loop.index }}{% endfor %}{% set loop = 2 %}{{ loop }}",
    "{% set loop = 2 %}{% for a in x %}{{ a }}{% endfor %}",
])
def test_assigning_loop_fails_or_compiles_as_in_jinja2(src):
    def outcome(env: jinja2.Environment) -> str:
        try:
            env.compile(src)
            return "compiled"
        except jinja2.TemplateAssertionError as e:
            return f"{e.message} (line {e.lineno})"

    expected = outcome(jinja2.sandbox.ImmutableSandboxedEnvironment())
    assert outcome(jinja_hf.ENV) == expected
    assert outcome(llama.probe_environment()) == expected


def test_filters_and_tests_without_arguments_are_written_as_jinja2_writes_them(monkeypatch):
    # _LimitedCodeGenerator._plain_call writes ``t_1(value)`` itself; jinja2's own method (the fast path off)
    # writes the same bytes on the corpus and on filters with arguments, context-taking filters, filter blocks,
    # unknown names in a soft frame and tests with and without arguments
    env = llama.probe_environment()
    extra = [("x", "{{ a|upper }}{{ a|map('upper')|list }}{{ a|join(', ') }}{{ a|default(1, true) }}"
                   "{% filter upper %}x{{ b }}{% endfilter %}{% if c %}{{ c|nosuch }}{{ c is nosuch }}{% endif %}"
                   "{{ a is defined }}{{ a is divisibleby(3) }}{{ a is not none }}{{ a|attr('b') }}"
                   "{{ a|select('odd')|sum }}{% set s %}{{ a|trim }}{% endset %}{{ s|e }}")]

    def codes() -> list[bytes]:
        return [_code(e, src) for _n, src in _sources()[::4] + extra
                for e in (env, jinja_hf.ENV)]

    fast = codes()
    monkeypatch.setattr(jinja_sandbox._LimitedCodeGenerator, "_plain_call", lambda self, node, frame, kind: False)
    assert codes() == fast
    assert any(b"t_1(" in c for c in fast)


def test_missing_filters_and_tests_bound_in_one_statement_fail_when_called():
    # one bind_dependencies statement per kind: a missing name fails only when it is used, with jinja2's message
    t = ChatTemplate("{% if x %}{{ x|nosuch }}{% endif %}{% if y %}{{ y is nosuchtest }}{% endif %}"
                     "{{ 'a'|upper }}ok")
    assert t.render({}) == "Aok"
    with pytest.raises(Exception, match="No filter named 'nosuch' found"):
        t.render({"x": 1})
    with pytest.raises(Exception, match="No test named 'nosuchtest' found"):
        t.render({"y": 1})
    code = jinja_hf.ENV._generate(jinja_hf.ENV._parse("{{ a|upper|lower }}", None, None), None, None)
    assert "t_1, t_2, = environment.bind_dependencies('filters', ('lower', 'upper'))" in code


def test_our_tree_walks_see_the_children_jinja2_yields_on_the_corpus():
    # jinja_sandbox._child_nodes (the walks of _loops and _dependencies) lists what jinja2's iter_child_nodes yields
    checked = 0
    for _name, tree in _probe_trees(3):
        for node in [tree, *tree.find_all(jinja2.nodes.Node)]:
            assert jinja_sandbox._child_nodes(node) == list(node.iter_child_nodes())
            checked += 1
    assert checked > 20_000


def test_loop_search_skipping_expressions_finds_every_for_loop_on_the_corpus():
    found = 0
    for _name, src in _sources():
        try:
            tree = jinja_hf.ENV.parse_raw(src)
        except jinja2.TemplateSyntaxError:
            continue
        loops = list(tree.find_all(jinja2.nodes.For))
        assert sorted(map(id, jinja_sandbox._loops(tree))) == sorted(map(id, loops))
        # no statement anywhere below an expression: what lets _loops skip expressions
        for expr in tree.find_all(jinja2.nodes.Expr):
            assert not any(True for _ in expr.find_all(jinja2.nodes.Stmt))
        found += len(loops)
    assert found > 500


def test_compiles_under_threads_give_the_serial_code():
    # several threads compiling at once (ours and a plain jinja2 environment): each compile's code is what a
    # serial compile gives (the code generator's per-compile state is its own)
    import threading

    env = llama.probe_environment()
    plain = jinja2.Environment()
    sources = [src for _name, src in _sources()[::40]]
    expected = [env.compile(s, raw=True) for s in sources]
    plain_expected = [plain.compile(s, raw=True) for s in sources[:3]]
    errors: list[str] = []

    def ours() -> None:
        for _ in range(3):
            if [env.compile(s, raw=True) for s in sources] != expected:
                errors.append("ours")

    def theirs() -> None:
        for _ in range(3):
            if [plain.compile(s, raw=True) for s in sources[:3]] != plain_expected:
                errors.append("plain")

    threads = [threading.Thread(target=f) for f in (ours, ours, theirs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
