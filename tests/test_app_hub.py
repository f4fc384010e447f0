"""Sources page, Hugging Face Hub option, offline: a real HF cache folder with a template (and a named
variant) is read with HF_HUB_OFFLINE=1; a repo that is not cached gives a clear offline message."""

from __future__ import annotations

import hashlib
import pathlib

import pytest

from .test_app_helpers import errors, metrics, page, start, unmd

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.reasoning_content %}<think>\n"
          "{{ m.reasoning_content }}\n</think>\n\n{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TOOL_USE = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"


def _cache_repo(cache: pathlib.Path, repo_id: str, files: dict[str, str]) -> None:
    """The layout huggingface_hub writes: refs/main → commit; snapshots/<commit>/<file> → ../../blobs/<sha>."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    for name, text in files.items():
        data = text.encode()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        snap = repo / "snapshots" / COMMIT / name
        snap.parent.mkdir(parents=True, exist_ok=True)
        snap.symlink_to(pathlib.Path(*([".."] * len(pathlib.PurePosixPath(name).parts)), "..", "blobs", blob.name))


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return cache


def _fetch(repo: str):
    at = page(start(), "sources")
    at.radio(key="in_source_kind").set_value("Hugging Face Hub").run()
    at.text_input(key="in_hub_repo").input(repo).run()
    [b for b in at.button if b.label == "Fetch"][0].click().run()
    assert not at.exception, at.exception
    return at


def test_hub_template_from_offline_cache_with_variants(offline_cache):
    _cache_repo(offline_cache, "acme/chat-model", {"chat_template.jinja": CHATML,
                                                    "additional_chat_templates/tool_use.jinja": TOOL_USE})
    at = _fetch("acme/chat-model")
    assert not errors(at)
    assert any("Loaded acme/chat-model" in unmd(s.value) for s in at.success)
    assert at.selectbox(key="in_variant").options == ["default", "tool_use"]
    at = page(at, "overview")
    assert metrics(at)["Reasoning"] == "TAG_BASED"
    assert "acme/chat-model" in unmd(at.markdown[0].value)
    at = page(at, "sources")
    at.selectbox(key="in_variant").select("tool_use").run()
    at = page(at, "overview")
    assert "acme/chat-model:tool_use" in unmd(at.markdown[0].value)
    assert metrics(at)["Reasoning"] == "NONE"


def test_hub_offline_not_cached_is_a_clear_message(offline_cache):
    at = _fetch("acme/never-downloaded")
    errs = errors(at)
    assert len(errs) == 1
    assert "acme/never-downloaded" in errs[0] and "offline" in errs[0].lower()
    assert at.text_input(key="in_hub_repo").value == "acme/never-downloaded"  # the input is kept
    assert "hf_" not in errs[0].lower().replace("hf_hub_offline", "")       # no token material shown


@pytest.mark.parametrize("typed", ["not a repo id", "a/b/c/d", "/etc/hostname", "assets/templates/plain-chat.jinja"])
def test_hub_field_takes_repo_ids_only(offline_cache, typed):
    """What is typed in the Hub field is a repo id: a wrong shape is named as such (it said 'file not found'),
    and a local path is not loaded from the server's disk under the 'hub' label."""
    at = _fetch(typed)
    errs = errors(at)
    assert len(errs) == 1 and "not a Hub repository id" in errs[0] and typed in errs[0]
    assert not at.success
