"""export --for-hub: the tokenizer_config.json change and the pull-request description (core/export/hub.py)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from core.export.hub import _cell

from .conftest import TEMPLATES

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core", "export", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_for_hub_writes_merged_config_and_pr(tmp_path):
    base = tmp_path / "tokenizer_config.json"
    base.write_text(json.dumps({"model_max_length": 4096, "response_template": {"old": True}}), encoding="utf-8")
    out = tmp_path / "kit"
    p = _run(str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja"), "--for", "vllm", "--for-hub", str(out),
             "--tokenizer-config", str(base))
    assert p.returncode == 0, p.stderr
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["model_max_length"] == 4096 and "thinking" in config["response_template"]["fields"]
    pr = (out / "PR.md").read_text(encoding="utf-8")
    assert "| vllm-hf | yes | `vllm serve MODEL --enable-auto-tool-choice --tool-call-parser hf" in pr
    assert "| suite:parallel_calls | agree |" in pr and "Result: **agree" in pr


def test_for_hub_refuses_an_unexportable_template_in_one_line(tmp_path):
    p = _run(str(TEMPLATES / "Apertus-8B-Instruct.jinja"), "--for-hub", str(tmp_path / "kit"))
    assert p.returncode == 1 and not (tmp_path / "kit").exists()
    assert p.stderr.strip().splitlines()[-1].startswith("error: Apertus-8B-Instruct.jinja: cannot be exported")


def test_cells_are_one_line_without_pipes():
    assert _cell("a|b\nc") == "a\\|b c" and len(_cell("x" * 500)) == 158


def _model_dir(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    config = {"chat_template": (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8"),
              "eos_token": "<|im_end|>", "model_max_length": 40960, "response_template": {"old": True}}
    (d / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return d, config


def test_for_hub_merges_into_the_tokenizer_config_it_read_the_template_from(tmp_path):
    d, config = _model_dir(tmp_path)
    for source in (d, d / "tokenizer_config.json"):
        out = tmp_path / f"kit-{source.name}"
        p = _run(str(source), "--for-hub", str(out))
        assert p.returncode == 0, p.stderr
        kit = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
        assert {k: kit[k] for k in ("chat_template", "eos_token", "model_max_length")} == \
            {k: config[k] for k in ("chat_template", "eos_token", "model_max_length")}
        assert "reasoning_content" in kit["response_template"]["fields"]
        assert "holds only" not in (out / "PR.md").read_text(encoding="utf-8")
        assert not [n for n in (x.name for x in out.iterdir()) if n.endswith(".tmp")]


def test_for_hub_without_a_config_says_the_file_holds_only_the_key(tmp_path):
    out = tmp_path / "kit"
    p = _run(str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja"), "--for-hub", str(out))
    assert p.returncode == 0, p.stderr
    assert list(json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))) == ["response_template"]
    assert "holds only the `response_template` key" in (out / "PR.md").read_text(encoding="utf-8")
    assert "holds only the response_template key to add" in p.stderr


def test_for_hub_errors_name_the_path(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x", encoding="utf-8")
    p = _run(str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja"), "--for-hub", str(f))
    assert p.returncode != 0 and f"--for-hub {f}: exists and is not a directory" in p.stderr
    missing = tmp_path / "nope.json"
    p = _run(str(TEMPLATES / "Qwen-Qwen3-0.6B.jinja"), "--for-hub", str(tmp_path / "kit"),
             "--tokenizer-config", str(missing))
    assert p.returncode != 0 and f"--tokenizer-config {missing}: no such file" in p.stderr
    assert not (tmp_path / "kit").exists()


def test_hostile_template_name_cannot_open_html_links_or_code_spans_in_the_pr(tmp_path):
    # A file name that closed the code span around it put a live <img>, a link and an HTML comment (hiding the
    # verification table) into PR.md.
    name = "x`<img src=https:..evil.example.t.png> [a](https:..evil) <!-- .jinja"
    src = tmp_path / name
    src.write_text((TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "kit"
    p = _run(str(src), "--for", "vllm", "--for-hub", str(out))
    assert p.returncode == 0, p.stderr
    pr = (out / "PR.md").read_text(encoding="utf-8")
    assert "x\\`\\<img src=https:..evil.example.t.png\\> \\[a\\](https:..evil) \\<\\!-- .jinja" in pr
    assert "`x`" not in pr and "(`x" not in pr
    assert "| suite:parallel_calls | agree |" in pr


def test_cells_escape_what_opens_markdown_or_html():
    assert _cell("a`b<c>[d](e)!&f") == "a\\`b\\<c\\>\\[d\\](e)\\!\\&f"


def test_cells_write_bidi_and_invisible_characters_as_escapes():
    """A template file named with U+202E (the right-to-left override of "Trojan Source", CVE-2021-42574) went into
    PR.md as the raw character, reordering the description a reviewer reads on the Hub; PR.md is Markdown a
    person reads, so it gets the escapes every printed view uses."""
    name = "evil`\u202e](javascript:alert(1)).jinja"
    # the escape's backslash is itself escaped, so the Markdown shows \u202e
    assert _cell(name) == "evil\\`\\\\u202e\\](javascript:alert(1)).jinja"
    assert _cell("a\u200bb\u2066c") == "a\\\\u200bb\\\\u2066c"
    assert not any(ch in _cell(name) for ch in "\u202e\u200b")
