"""The compiled-template caches (core.jinja.cache.compiled_code): disk round trip, keys per environment,
failures not cached, and the analysis renderer running the probe environment's code unchanged."""

from __future__ import annotations

import re

import jinja2
import pytest

from core import codepack
from core.jinja import cache as jinja_cache
from core.jinja import hf as jinja_hf
from core.jinja import llama
from core.jinja import sandbox as jinja_sandbox
from core.jinja.cache import compiled_code, template_from_code
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source

SAMPLE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{% if not loop.last %}\n{% endif %}"
          "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CTE_NO_DISK_CACHE", raising=False)
    monkeypatch.setattr(jinja_cache, "_CODE_MEMO", {})
    return tmp_path / "jinja"


def _entries(directory) -> int:
    path = directory / codepack.INDEX
    return path.stat().st_size // 44 if path.exists() else 0


def test_disk_round_trip_gives_code_that_renders_the_same(fresh_cache):
    src = SAMPLE + "{# round trip #}"
    code = compiled_code(jinja_hf.ENV, src)
    assert _entries(fresh_cache) == 1 and not list(fresh_cache.glob("*.bin"))
    jinja_cache._CODE_MEMO.clear()  # as a new process would: only the disk copy is left
    codepack.forget()
    again = compiled_code(jinja_hf.ENV, src)
    assert again is not code and again == code
    ctx = {"messages": [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "yo"}],
           "add_generation_prompt": True}
    assert template_from_code(jinja_hf.ENV, again).render(ctx) == "<|user|>hi<|assistant|>yo<|assistant|>"


def test_parse_log_records_sources_that_parsed_for_a_later_process(fresh_cache, monkeypatch):
    monkeypatch.setattr(jinja_cache, "_parsed_known", {})
    src = SAMPLE + "{# parse log #}"
    ChatTemplate(src, "log.jinja")
    llama.probe_code(src)  # the analysis' compile is what writes the verdict
    log = fresh_cache / jinja_cache.PARSED_LOG
    assert log.read_bytes() == jinja_cache._parsed_digest(src).encode() + b"\n"
    llama.probe_code(src)
    jinja_cache._CODE_MEMO.clear()
    llama.probe_code(src)  # from disk: nothing new to note
    assert len(log.read_bytes()) == 33
    jinja_cache._parsed_known.clear()  # as a new process: read from the log
    assert jinja_cache._is_parsed(fresh_cache, src) and not jinja_cache._is_parsed(fresh_cache, src + " ")
    assert not list(fresh_cache.glob("*.ok"))


def test_parse_log_starts_over_past_its_size_limit(fresh_cache, monkeypatch):
    monkeypatch.setattr(jinja_cache, "_parsed_known", {})
    monkeypatch.setattr(jinja_cache, "_PARSED_LOG_MAX_BYTES", 100)
    fresh_cache.mkdir(parents=True)
    for i in range(5):
        jinja_cache._note_parsed(fresh_cache, f"{{{{ x{i} }}}}")
    assert (fresh_cache / jinja_cache.PARSED_LOG).stat().st_size == 33  # 4 lines (132 bytes), then the 5th alone
    jinja_cache._parsed_known.clear()
    assert jinja_cache._is_parsed(fresh_cache, "{{ x4 }}") and not jinja_cache._is_parsed(fresh_cache, "{{ x3 }}")


def test_each_environment_tag_has_its_own_entry(fresh_cache):
    src = SAMPLE + "{# tags #}"
    compiled_code(jinja_hf.ENV, src)
    llama.probe_code(src)
    assert _entries(fresh_cache) == 2
    assert llama.probe_code_tag().startswith("probe|") and len(llama.probe_code_tag()) > len("probe|")


def test_a_corrupt_cache_file_is_recompiled(fresh_cache):
    src = SAMPLE + "{# corrupt #}"
    compiled_code(jinja_hf.ENV, src)
    pack = fresh_cache / codepack.PACK
    data = bytearray(pack.read_bytes())
    data[-10:] = b"not marsha"  # the record's CRC no longer matches
    pack.write_bytes(bytes(data))
    jinja_cache._CODE_MEMO.clear()
    codepack.forget()
    code = compiled_code(jinja_hf.ENV, src)
    assert template_from_code(jinja_hf.ENV, code).render({"messages": []}) == ""
    assert _entries(fresh_cache) == 2  # compiled again and stored again


def test_code_store_skips_damaged_and_foreign_records_and_reads_what_others_appended(tmp_path):
    a, b = codepack.CodePack(str(tmp_path)), codepack.CodePack(str(tmp_path))  # two processes' views
    a.put(b"k" * 32, b"first")
    assert b.get(b"k" * 32) == b"first" and b.get(b"x" * 32) is None
    b.put(b"x" * 32, b"second")
    assert a.get(b"x" * 32) == b"second"  # a miss reads the index from where it stopped
    (tmp_path / codepack.INDEX).write_bytes((tmp_path / codepack.INDEX).read_bytes() + b"partial")
    c = codepack.CodePack(str(tmp_path))
    assert c.get(b"k" * 32) == b"first" and c.get(b"x" * 32) == b"second"  # a torn index record is skipped
    (tmp_path / codepack.PACK).unlink()
    (tmp_path / codepack.INDEX).unlink()
    assert a.get(b"k" * 32) is None  # the store was removed: the stale index entry reads nothing
    b.put(b"y" * 32, b"third")  # ...and started over, at offset 0 where "first" was
    assert a.get(b"k" * 32) is None and a.get(b"y" * 32) == b"third"


def test_pruning_removes_the_code_store_with_its_index(tmp_path):
    pack = codepack.CodePack(str(tmp_path))
    pack.put(b"k" * 32, b"x" * 3000)
    assert jinja_cache.prune_disk_cache(tmp_path, 1000) == 2
    assert not list(tmp_path.iterdir()) and pack.get(b"k" * 32) is None


def test_syntax_errors_are_raised_and_not_cached(fresh_cache):
    with pytest.raises(jinja2.TemplateSyntaxError):
        compiled_code(jinja_hf.ENV, "{% for x in %}")
    assert _entries(fresh_cache) == 0
    assert ("", "{% for x in %}") not in jinja_cache._CODE_MEMO


def _own_use() -> "re.Pattern[str]":
    """The plain regex :func:`core.jinja.llama._uses_own` answers as: one of the dialect's own names after ``|``,
    ``filter`` or ``is`` / ``is not``."""
    names = "|".join(re.escape(n) for n in llama._own_names())
    return re.compile(r"(?:\||\bfilter\b|\bis\b(?:\s+not\b)?)\s*(?:" + names + r")\b")


def test_engine_shares_the_probe_code_only_for_sources_without_its_own_filters():
    assert set(llama._own_names()) == {"safe", "format"}
    # every corpus template in this sample that names neither generates identical code in both environments
    names = ["Qwen-Qwen2.5-7B-Instruct.jinja", "GLM-4.6.jinja", "Reka-Edge.jinja", "deepseek-ai-DeepSeek-V3.1.jinja",
             "meta-llama-Llama-3.1-8B-Instruct.jinja", "Apertus-8B-Instruct.jinja", "Kimi-K3.jinja"]
    for name in names:
        src = template_source(name)
        if not llama._uses_own(src):
            assert llama._llama_env().compile(src, raw=True) == llama.probe_environment().compile(src, raw=True), name


def test_only_filter_or_test_syntax_counts_as_using_safe_or_format():
    use = llama._uses_own
    assert not use("Answer in the format you like; {{ messages[0].content }} stays safe")
    assert use("{{ x | safe }}") and use("{{ '%s'|format(x) }}") and use("{% filter safe %}x{% endfilter %}")
    assert use("{{ x|trim|\n  format(y) }}") and not use("{{ x | safety }}")


def test_fast_own_filter_check_agrees_with_the_pattern_on_the_corpus_and_generated_text():
    import random

    pattern = _own_use().search
    for p in sorted(TEMPLATES.glob("*.jinja")):
        src = p.read_text(encoding="utf-8")
        assert llama._uses_own(src) == bool(pattern(src)), p.name
    rng = random.Random(14)
    atoms = ["|", " ", "\n", "\t", "\u3000", "is", "not", "filter", "safe", "format", "x", "_", "un", "é", "1", ")"]
    hits = 0
    for _ in range(20_000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 8)))
        expected = bool(pattern(text))
        assert llama._uses_own(text) == expected, repr(text)
        hits += expected
    assert hits > 100


def test_constant_folded_safe_is_not_shared_between_environments():
    # jinja2 folded '"…" | safe' at compile time with the compiling environment's filter (its constant folder,
    # off in our environments since 2026-12-02): the probe environment's Markup would HTML-escape later
    # concatenations in the llama renderer. A printed constant is still folded (``{{ "%x"|format(…) }}``), with
    # the filter of the compiling environment, so such sources keep their own compile
    src = template_source("meetkai-functionary-medium-v3.1.jinja")
    assert llama._uses_own(src)
    printed = "{{ '%s'|format('a') }}"
    assert llama._uses_own(printed)
    assert "yield 'a'" in llama.probe_environment().compile(printed, raw=True)
    t = ChatTemplate(src, "functionary")
    out = llama.render(t, {"messages": [{"role": "user", "content": "Hello"}], "bos_token": "", "eos_token": "",
                            "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                                                                        "parameters": {"type": "object"}}}]})
    assert '{"name": "f"' in out and "&#34;" not in out


def test_engine_renders_with_shared_code_like_a_fresh_compile(fresh_cache):
    src = template_source("Qwen-Qwen2.5-7B-Instruct.jinja")
    t = ChatTemplate(src, "qwen")
    ctx = {"messages": [{"role": "user", "content": "Hello"}], "bos_token": "", "eos_token": "",
           "add_generation_prompt": True}
    fresh = llama._llama_env().from_string(src).render(dict(ctx))
    assert llama.render(t, dict(ctx)) == fresh
    assert fresh.endswith("<|im_start|>assistant\n")


def test_engine_inherits_llama_undefined_and_finalize_from_the_probe_environment():
    # one definition of llama.cpp's undefined values / printing serves both renderers
    env, base = llama._llama_env(), llama.probe_environment()
    assert env.undefined is llama.LlamaUndefined is base.undefined
    assert env.finalize is base.finalize
    src = "{{ x.a.b }}|{{ x.join(',') }}|{{ x.length() }}|{{ x.items() | list | length }}|{{ {'k': 1} }}|{{ ['a', 1] }}"
    assert env.from_string(src).render({}) == base.from_string(src).render({}) == "||0|0||a1"


def test_compiled_code_cache_key_follows_the_code_generator(monkeypatch):
    # core/jinja/sandbox.py holds our code generator: editing it must not let a later process reuse code compiled
    # before the edit (the key holds its source digest and jinja2's version)

    src = "{{ messages | length }}"
    before = jinja_cache._cache_key(src, "probe")
    real = jinja_cache.module_digest
    monkeypatch.setattr(jinja_cache, "module_digest",
                        lambda path: "edited" if path == jinja_sandbox.__file__ else real(path))
    assert jinja_cache._cache_key(src, "probe") != before
    monkeypatch.setattr(jinja_cache, "module_digest", real)
    assert jinja_cache._cache_key(src, "probe") == before
    monkeypatch.setattr(jinja_cache.jinja2, "__version__", "3.1.99")
    assert jinja_cache._cache_key(src, "probe") != before
