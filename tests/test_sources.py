"""Template sources (core.sources): files written to tmp_path, real GGUF files (gguf.GGUFWriter), a real
Hugging Face cache folder in huggingface_hub's layout read with HF_HUB_OFFLINE=1, and Hub error mapping.
No network: every Hub test runs offline or with hf_hub_download replaced by a function that raises."""

from __future__ import annotations

import hashlib
import json
import os
import re
import pathlib

import gguf
import pytest

from core import sources
from core.errors import (
    HubGatedError,
    HubNotFoundError,
    HubOfflineError,
    HubTimeoutError,
    TemplateLoadError,
    TemplateTooLargeError,
    VariantNotFoundError,
)
from core.sources import LoadedTemplate, load_bytes, load_string, load_template

CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TOOL_USE = "{% if tools %}TOOLS{% endif %}" + CHATML


def _render(loaded: LoadedTemplate) -> str:
    return loaded.template().render({"messages": [{"role": "user", "content": "hi"}],
                                     "add_generation_prompt": True})


# ------------------------------------------------------------------------------------------------------
# strings and text files
# ------------------------------------------------------------------------------------------------------


def test_load_string():
    t = load_string(CHATML, "pasted")
    assert (t.name, t.origin, t.variant, t.path) == ("pasted", "string", "default", None)
    assert t.variants == {"default": CHATML}
    assert _render(t) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_load_jinja_file(tmp_path):
    f = tmp_path / "model.jinja"
    f.write_text(CHATML, encoding="utf-8")
    t = load_template(str(f))
    assert (t.name, t.origin, t.source, t.path) == ("model.jinja", "file", CHATML, str(f))
    assert load_template(f).source == CHATML  # PathLike too


def test_jinja_file_with_bom_and_unicode(tmp_path):
    f = tmp_path / "u.jinja"
    f.write_bytes("\ufeff<｜User｜>{{ messages[0].content }}".encode("utf-8"))
    assert load_template(str(f)).source == "<｜User｜>{{ messages[0].content }}"


def test_missing_file(tmp_path):
    with pytest.raises(TemplateLoadError, match="file not found") as e:
        load_template(str(tmp_path / "nope.jinja"))
    assert "nope.jinja" in str(e.value)


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"),
    (b"  \n\t\n", "only whitespace"),
    (b"\xef\xbb\xbf", "contains only a byte order mark$"),       # said "chat template 'default' is empty"
    (b"\xef\xbb\xbf\n", "contains only a byte order mark and whitespace"),
    (b"{{ x }}\x00\x01\x02", "binary"),
    (b"{{ x }} \xff\xfe caf\xe9", "not UTF-8"),
])
def test_bad_text_files(tmp_path, content, message):
    f = tmp_path / "bad.jinja"
    f.write_bytes(content)
    with pytest.raises(TemplateLoadError, match=message) as e:
        load_template(str(f))
    assert "bad.jinja" in str(e.value)


def test_size_limit(tmp_path):
    f = tmp_path / "big.jinja"
    f.write_text("x" * 5000, encoding="utf-8")
    with pytest.raises(TemplateTooLargeError, match="above the limit") as e:
        load_template(str(f), max_bytes=4096)
    assert e.value.size == 5000 and e.value.limit == 4096
    assert isinstance(e.value, TemplateLoadError)
    assert load_template(str(f), max_bytes=None).source == "x" * 5000
    assert sources.DEFAULT_MAX_BYTES == 2 * 1024 * 1024


def test_a_file_whose_size_says_less_is_read_only_up_to_the_limit(tmp_path, monkeypatch):
    """A device or pipe reports size 0 (and a file may grow after its size was read), so the size check passed and
    the whole stream was read: ``analyze /dev/zero`` never returned. At most one byte past the limit is read now;
    here the file's reported size is made small, as a device's is."""
    import os

    f = tmp_path / "grows.jinja"
    f.write_text("x" * 5000, encoding="utf-8")
    real_stat = pathlib.Path.stat

    def small_stat(self, *a, **kw):
        st = real_stat(self, *a, **kw)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 0,
                               int(st.st_atime), int(st.st_mtime), int(st.st_ctime))) if self == f else st

    monkeypatch.setattr(pathlib.Path, "stat", small_stat)
    with pytest.raises(TemplateLoadError, match="holds more than the limit of 4,096 bytes"):
        sources.load_file(f, max_bytes=4096)
    assert sources.load_file(f, max_bytes=None).source == "x" * 5000


def _load_in_thread(fn):
    """``fn()`` run where a hang cannot stop the suite: returns (finished, result or exception)."""
    import threading

    box: list = []

    def run():
        try:
            box.append(fn())
        except Exception as e:  # noqa: BLE001 - the test inspects it
            box.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    return (not t.is_alive()), (box[0] if box else None)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_refused_at_once_never_read(tmp_path):
    """A FIFO with no writer blocked the loader in ``open`` (it opened the file twice); now a pipe, device or
    socket is refused by its file type before anything is read."""
    fifo = tmp_path / "pipe.jinja"
    os.mkfifo(fifo)
    done, got = _load_in_thread(lambda: load_template(str(fifo)))
    assert done, "loading a FIFO blocked"
    assert isinstance(got, TemplateLoadError)
    assert "named pipe (FIFO), not a regular file" in str(got) and "\n" not in str(got)
    if os.path.exists("/dev/zero"):
        with pytest.raises(TemplateLoadError, match="a character device, not a regular file"):
            sources.load_file("/dev/zero")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_among_a_folders_extra_templates_is_skipped(tmp_path):
    (tmp_path / "chat_template.jinja").write_text(CHATML)
    (tmp_path / "additional_chat_templates").mkdir()
    os.mkfifo(tmp_path / "additional_chat_templates" / "tool_use.jinja")
    done, got = _load_in_thread(lambda: load_template(str(tmp_path)))
    assert done, "loading a folder with a FIFO variant blocked"
    assert isinstance(got, LoadedTemplate) and list(got.variants) == ["default"]


def test_upload_bytes_and_limits():
    t = load_bytes(CHATML.encode(), "up.jinja")
    assert (t.name, t.origin, t.source, t.path) == ("up.jinja", "file", CHATML, None)
    with pytest.raises(TemplateTooLargeError):
        load_bytes(b"x" * 100, "up.jinja", max_bytes=10)
    with pytest.raises(TemplateLoadError, match="binary"):
        load_bytes(b"\x00\x01", "up.jinja")
    j = load_bytes(json.dumps({"chat_template": CHATML}).encode(), "tokenizer_config.json")
    assert (j.origin, j.source) == ("json", CHATML)


# ------------------------------------------------------------------------------------------------------
# JSON
# ------------------------------------------------------------------------------------------------------


def test_tokenizer_config_single_template(tmp_path):
    f = tmp_path / "tokenizer_config.json"
    f.write_text(json.dumps({"bos_token": "<s>", "chat_template": CHATML, "model_max_length": 4096}))
    t = load_template(str(f))
    assert (t.origin, t.variant, t.source, t.name) == ("json", "default", CHATML, "tokenizer_config.json")


def test_named_templates_and_variant_selection(tmp_path):
    f = tmp_path / "tokenizer_config.json"
    f.write_text(json.dumps({"chat_template": [{"name": "default", "template": CHATML},
                                               {"name": "tool_use", "template": TOOL_USE}]}))
    t = load_template(str(f))
    assert list(t.variants) == ["default", "tool_use"]
    assert t.variant == "default" and t.source == CHATML
    tu = load_template(str(f), "tool_use")
    assert (tu.variant, tu.source, tu.name) == ("tool_use", TOOL_USE, "tokenizer_config.json:tool_use")
    assert t.with_variant("tool_use").source == TOOL_USE
    with pytest.raises(VariantNotFoundError) as e:
        load_template(str(f), "rag")
    assert "'default', 'tool_use'" in str(e.value) and e.value.available == ["default", "tool_use"]


def test_only_named_templates_selects_first(tmp_path):
    f = tmp_path / "chat_template.json"
    f.write_text(json.dumps({"chat_template": [{"name": "tool_use", "template": TOOL_USE}]}))
    assert load_template(str(f)).variant == "tool_use"


def test_chat_template_json(tmp_path):
    f = tmp_path / "chat_template.json"
    f.write_text(json.dumps({"chat_template": CHATML}))
    assert load_template(str(f)).source == CHATML


@pytest.mark.parametrize("payload, message", [
    ({"bos_token": "<s>", "eos_token": "</s>"}, 'no "chat_template" field'),
    ({"chat_template": None}, "null"),
    ({"chat_template": 42}, r"must be a string or a list of \{name, template\}, got a number"),
    ({"chat_template": ""}, "is empty"),
    ({"chat_template": [{"name": "x"}]}, "not an object with"),
    ({"chat_template": []}, "empty list"),
    ([1, 2], "not an object with"),
    ("just a string", 'must be an object with a "chat_template" field, got a string'),
])
def test_json_without_usable_template(tmp_path, payload, message):
    f = tmp_path / "tokenizer_config.json"
    f.write_text(json.dumps(payload))
    with pytest.raises(TemplateLoadError, match=message) as e:
        load_template(str(f))
    assert "tokenizer_config.json" in str(e.value)


@pytest.mark.parametrize("payload, kind", [
    ({"chat_template": 5}, "got a number"), ({"chat_template": True}, "got true/false"),
    ({"chat_template": {"tool_use": 7}}, "got a number"), ({"chat_template": [{"template": ["x"]}]}, "got a list"),
])
def test_wrong_kind_named_in_plain_words(tmp_path, payload, kind):
    """Review finding: '"chat_template" is a int' leaked a Python type name; the kind is said in JSON terms."""
    f = tmp_path / "tokenizer_config.json"
    f.write_text(json.dumps(payload))
    with pytest.raises(TemplateLoadError, match=kind) as e:
        load_template(str(f))
    assert not re.search(r"\b(int|bool|dict|str|NoneType)\b", str(e.value)), str(e.value)


def test_invalid_json(tmp_path):
    f = tmp_path / "tokenizer_config.json"
    f.write_text('{"chat_template": "abc",,}')
    with pytest.raises(TemplateLoadError, match=r"not valid JSON: Expecting .* at line 1 column 25$"):
        load_template(str(f))


# ------------------------------------------------------------------------------------------------------
# GGUF (real files written with gguf.GGUFWriter)
# ------------------------------------------------------------------------------------------------------


def _write_gguf(path: pathlib.Path, chat_template=None) -> pathlib.Path:
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_name("test-model")
    w.add_context_length(4096)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_with_template(tmp_path):
    f = _write_gguf(tmp_path / "model.gguf", CHATML)
    t = load_template(str(f))
    assert (t.origin, t.source, t.variant, t.name) == ("gguf", CHATML, "default", "model.gguf")
    assert _render(t).startswith("<|im_start|>user\nhi")


def test_gguf_named_variant(tmp_path):
    f = _write_gguf(tmp_path / "model.gguf", [{"name": "default", "template": CHATML},
                                              {"name": "tool_use", "template": TOOL_USE}])
    t = load_template(str(f))
    assert t.variants == {"default": CHATML, "tool_use": TOOL_USE}
    assert load_template(str(f), "tool_use").source == TOOL_USE
    with pytest.raises(VariantNotFoundError, match="'default', 'tool_use'"):
        load_template(str(f), "rag")


def test_gguf_without_template(tmp_path):
    f = _write_gguf(tmp_path / "notemplate.gguf")
    with pytest.raises(TemplateLoadError, match="no chat template") as e:
        load_template(str(f))
    assert "notemplate.gguf" in str(e.value)


def test_gguf_detected_by_magic_and_from_upload(tmp_path):
    f = _write_gguf(tmp_path / "weights.bin", CHATML)
    assert load_template(str(f)).origin == "gguf"
    t = load_bytes(f.read_bytes(), "uploaded.gguf")
    assert (t.name, t.source, t.origin) == ("uploaded.gguf", CHATML, "gguf")


def test_not_a_gguf(tmp_path):
    f = tmp_path / "fake.gguf"
    f.write_bytes(b"NOPE" + b"\x00" * 64)
    with pytest.raises(TemplateLoadError, match="not a GGUF file"):
        load_template(str(f))
    g = tmp_path / "truncated.gguf"
    g.write_bytes(_write_gguf(tmp_path / "full.gguf", CHATML).read_bytes()[:40])
    with pytest.raises(TemplateLoadError, match="GGUF"):
        load_template(str(g))


# ------------------------------------------------------------------------------------------------------
# local folder and bundled examples
# ------------------------------------------------------------------------------------------------------


def test_local_model_folder(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": TOOL_USE}))
    t = load_template(str(tmp_path))
    assert (t.origin, t.source) == ("folder", TOOL_USE)
    (tmp_path / "chat_template.jinja").write_text(CHATML)
    (tmp_path / "additional_chat_templates").mkdir()
    (tmp_path / "additional_chat_templates" / "tool_use.jinja").write_text(TOOL_USE)
    t = load_template(str(tmp_path))
    assert t.source == CHATML and t.variants["tool_use"] == TOOL_USE
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TemplateLoadError, match="none of chat_template.jinja"):
        load_template(str(empty))


def test_spec_neither_path_nor_repo():
    with pytest.raises(TemplateLoadError, match="not a Hub repo id"):
        load_template("definitely-not-a-file.jinja")
    with pytest.raises(TemplateLoadError, match="no template given"):
        load_template("")


# ------------------------------------------------------------------------------------------------------
# Hugging Face Hub: a real cache folder, offline
# ------------------------------------------------------------------------------------------------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _cache_file(repo_dir: pathlib.Path, filename: str, content: bytes, commit: str = COMMIT) -> None:
    """Place ``filename`` in the cache as huggingface_hub does: blob by hash, snapshot symlink to it."""
    blob = hashlib.sha256(content).hexdigest()
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "blobs" / blob).write_bytes(content)
    snap = repo_dir / "snapshots" / commit / filename
    snap.parent.mkdir(parents=True, exist_ok=True)
    depth = len(pathlib.PurePosixPath(filename).parts) + 1
    snap.symlink_to(pathlib.Path(*([".."] * depth), "blobs", blob))


def _make_repo_cache(cache: pathlib.Path, repo_id: str, files: dict[str, bytes], ref: str = "main",
                     commit: str = COMMIT) -> pathlib.Path:
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / ref).write_text(commit)
    for name, content in files.items():
        _cache_file(repo_dir, name, content, commit)
    return repo_dir


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    home = tmp_path / "hf_home"
    cache = home / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return cache


def test_hub_offline_from_cache_chat_template_jinja(hf_cache):
    _make_repo_cache(hf_cache, "acme/chat-model", {
        "chat_template.jinja": CHATML.encode(),
        "additional_chat_templates/tool_use.jinja": TOOL_USE.encode(),
        "config.json": b"{}",
    })
    t = load_template("acme/chat-model")
    assert (t.name, t.origin, t.source, t.variant) == ("acme/chat-model", "hub", CHATML, "default")
    assert t.variants == {"default": CHATML, "tool_use": TOOL_USE}
    assert t.path.startswith(str(hf_cache)) and t.path.endswith("chat_template.jinja")
    assert load_template("acme/chat-model", "tool_use").name == "acme/chat-model:tool_use"
    assert _render(t).endswith("<|im_start|>assistant\n")


def test_hub_offline_falls_back_to_tokenizer_config(hf_cache):
    _make_repo_cache(hf_cache, "acme/old-model", {
        "tokenizer_config.json": json.dumps({"chat_template": [
            {"name": "default", "template": CHATML}, {"name": "tool_use", "template": TOOL_USE}]}).encode(),
    })
    t = load_template("acme/old-model", "tool_use")
    assert (t.source, t.origin, t.path.endswith("tokenizer_config.json")) == (TOOL_USE, "hub", True)


def test_hub_revision_and_url_forms(hf_cache):
    _make_repo_cache(hf_cache, "acme/chat-model", {"chat_template.json": json.dumps({"chat_template": CHATML}).encode()},
                     ref="v1.0")
    assert load_template("acme/chat-model", revision="v1.0").revision == "v1.0"
    assert load_template("acme/chat-model@v1.0").source == CHATML
    assert load_template("https://huggingface.co/acme/chat-model/tree/v1.0").source == CHATML
    assert load_template("acme/chat-model", revision=COMMIT).source == CHATML


def test_hub_offline_not_cached(hf_cache):
    with pytest.raises(HubOfflineError) as e:
        load_template("acme/never-downloaded")
    msg = str(e.value)
    assert "acme/never-downloaded" in msg and "HF_HUB_OFFLINE" in msg and "cache" in msg
    assert isinstance(e.value, TemplateLoadError)


def test_hub_cached_repo_without_template(hf_cache):
    repo = _make_repo_cache(hf_cache, "acme/base-model", {"config.json": b"{}"})
    for name in sources.HUB_TEMPLATE_FILES:  # the cache's record of files the Hub said do not exist
        marker = repo / ".no_exist" / COMMIT / name
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    with pytest.raises(HubNotFoundError, match="has no chat template") as e:
        load_template("acme/base-model")
    assert "acme/base-model" in str(e.value)


def test_hub_bad_cached_file_names_repo_file(hf_cache):
    _make_repo_cache(hf_cache, "acme/broken", {"tokenizer_config.json": b"{not json"})
    with pytest.raises(TemplateLoadError, match="acme/broken/tokenizer_config.json.*not valid JSON"):
        load_template("acme/broken")


# ------------------------------------------------------------------------------------------------------
# Hub error mapping (hf_hub_download replaced: no network)
# ------------------------------------------------------------------------------------------------------


class _Resp:
    def __init__(self, status: int):
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.request = None
        self.url = "https://huggingface.co/x"

    def json(self):
        return {}

    @property
    def text(self):
        return ""


def _online(monkeypatch):
    """The Hub's reachability check answers "reachable" whatever this machine's network: the fakes below play
    the Hub, so these tests never depend on the network."""
    import core.sources

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(core.sources, "_hub_reachable", lambda timeout=None: True)


def _hub_raising(monkeypatch, exc: Exception):
    import huggingface_hub

    def fake(*a, **kw):
        raise exc

    _online(monkeypatch)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)


def _http_error(cls, status: int):
    try:
        return cls("boom", response=_Resp(status))
    except Exception:  # constructor details differ across huggingface_hub versions
        err = cls.__new__(cls)
        Exception.__init__(err, "boom")
        err.response = _Resp(status)
        return err


@pytest.mark.parametrize("cls_name, status, expected, words", [
    ("GatedRepoError", 403, HubGatedError, ["gated", "HF_TOKEN"]),
    ("RepositoryNotFoundError", 401, HubNotFoundError, ["not found", "private", "HF_TOKEN"]),
    ("RevisionNotFoundError", 404, HubNotFoundError, ["revision"]),
    ("HfHubHTTPError", 403, HubGatedError, ["HTTP 403", "hf auth login"]),
])
def test_hub_http_errors(monkeypatch, cls_name, status, expected, words):
    from huggingface_hub import errors as hf_errors

    _hub_raising(monkeypatch, _http_error(getattr(hf_errors, cls_name), status))
    with pytest.raises(expected) as e:
        load_template("acme/secret", revision="dev" if cls_name == "RevisionNotFoundError" else None)
    for w in words:
        assert w in str(e.value)
    assert "acme/secret" in str(e.value)


def test_hub_timeout(monkeypatch):
    from huggingface_hub import errors as hf_errors

    class ReadTimeout(Exception):
        pass

    err = hf_errors.LocalEntryNotFoundError("could not reach the Hub")
    err.__cause__ = ReadTimeout("timed out")
    _hub_raising(monkeypatch, err)
    with pytest.raises(HubTimeoutError, match="did not answer in time"):
        load_template("acme/slow")


def test_hub_unreachable(monkeypatch):
    from huggingface_hub import errors as hf_errors

    err = hf_errors.LocalEntryNotFoundError("could not reach the Hub")
    err.__cause__ = ConnectionError("connection refused")
    _hub_raising(monkeypatch, err)
    with pytest.raises(HubOfflineError, match="cannot be reached"):
        load_template("acme/far-away")


def test_hub_token_passed_but_never_shown(monkeypatch):
    import huggingface_hub
    from huggingface_hub import errors as hf_errors

    seen = []

    def fake(repo_id, filename, **kw):
        seen.append(kw.get("token"))
        raise _http_error(hf_errors.HfHubHTTPError, 401)

    _online(monkeypatch)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    with pytest.raises(HubGatedError) as e:
        load_template("acme/secret", token="hf_SECRET123")
    assert seen == ["hf_SECRET123"]
    assert "hf_SECRET123" not in str(e.value)


def test_hub_unreachable_is_asked_once_then_the_cache(monkeypatch, tmp_path):
    """No network: huggingface_hub spends ~25 s of retries on a file, so after the first unreachable file the
    others are looked up in the cache only (a cached tokenizer_config.json still loads)."""
    import huggingface_hub
    from huggingface_hub import errors as hf_errors

    cached = tmp_path / "tokenizer_config.json"
    cached.write_text(json.dumps({"chat_template": "{{ messages[0].content }}"}), encoding="utf-8")
    networked = []

    def fake(repo_id, filename, **kw):
        if not kw.get("local_files_only"):
            networked.append(filename)
            err = hf_errors.LocalEntryNotFoundError("could not reach the Hub")
            err.__cause__ = ConnectionError("Name or service not known")
            raise err
        if filename == "tokenizer_config.json" and cached.exists():
            return str(cached)
        raise hf_errors.LocalEntryNotFoundError("not in the cache")

    _online(monkeypatch)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    loaded = load_template("acme/cached-config")
    assert networked == ["chat_template.jinja"]
    assert "messages[0].content" in loaded.source
    cached.unlink()
    networked.clear()
    with pytest.raises(HubOfflineError, match="cannot be reached"):
        load_template("acme/cached-config")
    assert networked == ["chat_template.jinja"]
