"""core.serving (allowed roots, demo mode, work slots), the ``serve`` verb, and the Hub's fast offline answer."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import threading

import pytest

from core import serving
from core.errors import HubOfflineError, TemplateLoadError
from core.serving import (BusyError, Limits, Mode, PathNotAllowedError, ServingConfigError, WorkKind, confine,
                          confined_entries, confined_template_path, parse_roots, policy_from_env, policy_or_closed,
                          work_slot)
from core.serving.cli import serve_command

from .conftest import ROOT
from .test_app_hub import CHATML, _cache_repo


@pytest.fixture
def tree(tmp_path):
    """``root/`` (allowed) with a template, links out, a model folder; ``root2`` (a prefix twin); ``out/``."""
    root, out, twin = tmp_path / "root", tmp_path / "out", tmp_path / "root2"
    for d in (root, out, twin, root / "sub", root / "model", root / "leaky"):
        d.mkdir()
    (root / "a.jinja").write_text("{{ 1 }}")
    (root / "notes.txt").write_text("x")
    (root / "sub" / "b.json").write_text('{"chat_template": "{{ 2 }}"}')
    (out / "secret.jinja").write_text("SECRET")
    (twin / "t.jinja").write_text("TWIN")
    (root / "link.jinja").symlink_to(out / "secret.jinja")
    (root / "inner.jinja").symlink_to(root / "a.jinja")
    (root / "outdir").symlink_to(out, target_is_directory=True)
    (root / "model" / "chat_template.jinja").write_text("{{ 3 }}")
    (root / "leaky" / "chat_template.jinja").write_text("{{ 4 }}")
    (root / "leaky" / "additional_chat_templates").symlink_to(out, target_is_directory=True)
    return root.resolve(), out.resolve(), twin.resolve()


def test_confine_resolves_before_checking(tree):
    root, out, twin = tree
    roots = (root,)
    assert confine(str(root / "sub" / ".." / "a.jinja"), roots) == root / "a.jinja"
    assert confine(str(root / "inner.jinja"), roots) == root / "a.jinja"  # a link that stays inside is fine
    assert confine(str(root / "not-yet"), roots) == root / "not-yet"      # nothing is read
    for bad in ["/etc", "/root", "/etc/passwd", f"{root}/../out", f"{root}/../../../../etc", str(root / "link.jinja"),
                str(root / "outdir"), str(root / "outdir" / "secret.jinja"), str(twin), "~root"]:
        with pytest.raises(PathNotAllowedError, match="outside the allowed folders") as e:
            confine(bad, roots)
        assert str(out) not in str(e.value)  # never says where a link points
    with pytest.raises(PathNotAllowedError, match="NUL"):
        confine(f"{root}/a\x00.jinja", roots)
    with pytest.raises(PathNotAllowedError, match="no folder given"):
        confine("  ", roots)


_AUDIT: dict[str, list] = {"on": [], "seen": []}


def _audit(event: str, args: tuple) -> None:
    if _AUDIT["on"] and event in ("open", "os.listdir", "os.scandir") and args and args[0] is not None:
        _AUDIT["seen"].append((event, os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else str(args[0])))


def test_nothing_outside_the_roots_is_opened_or_listed(tree):
    """Python's audit events (every open, listdir, scandir) while the checks run: none touches ``out/``."""
    root, out, twin = tree
    if not _AUDIT.get("hooked"):
        sys.addaudithook(_audit)  # cannot be removed: it records only while _AUDIT["on"] is set
        _AUDIT["hooked"] = [True]
    _AUDIT["on"].append(True)
    try:
        for bad in [str(out), f"{root}/../out", str(root / "link.jinja"), str(root / "outdir"), str(twin)]:
            with pytest.raises(PathNotAllowedError):
                confine(bad, (root,))
        confined_entries(root, (root,), (".jinja", ".json"))
        with pytest.raises(PathNotAllowedError):
            confined_template_path(str(root / "leaky"), (root,))
    finally:
        _AUDIT["on"].clear()
    seen, _AUDIT["seen"] = _AUDIT["seen"], []
    assert any(path == str(root) for _, path in seen)  # the recorder works: the allowed folder was listed
    assert not [x for x in seen if x[1].startswith((str(out), str(twin)))], seen


def test_no_roots_means_no_server_path(tree):
    root, _, _ = tree
    with pytest.raises(PathNotAllowedError, match="reading server folders is off.*--allow-root"):
        confine(str(root), ())


def test_listing_leaves_out_links_that_escape(tree):
    root, _, _ = tree
    names = [p.name for p in confined_entries(root, (root,), (".jinja", ".json"))]
    assert names == ["a.jinja", "inner.jinja", "leaky", "model"]  # no link.jinja, outdir, notes.txt, sub (no model)


def test_model_folder_whose_files_link_out_is_refused(tree):
    root, _, _ = tree
    assert confined_template_path(str(root / "model"), (root,)) == root / "model"
    with pytest.raises(PathNotAllowedError, match="additional_chat_templates in this folder links outside"):
        confined_template_path(str(root / "leaky"), (root,))


def test_policy_from_env(tree):
    root, out, _ = tree
    assert policy_from_env({}) == serving.ServingPolicy()
    assert not policy_from_env({}).server_paths and policy_from_env({}).hub_token is None
    pol = policy_from_env({"CTE_ALLOW_ROOTS": f"{root}{os.pathsep}{out}{os.pathsep}{root}/", "CTE_DEMO": "1"})
    assert pol.roots == (root, out) and pol.mode is Mode.DEMO
    assert pol.hub_token is False and pol.limits.max_analyses == 2 and pol.limits.max_paste_bytes == 256 * 1024
    with pytest.raises(ServingConfigError, match="CTE_ALLOW_ROOTS: '/no/such/dir' is not an existing folder"):
        policy_from_env({"CTE_ALLOW_ROOTS": "/no/such/dir"})
    with pytest.raises(ServingConfigError, match="CTE_DEMO: expected 1 or 0, got 'maybe'"):
        policy_from_env({"CTE_DEMO": "maybe"})
    closed, err = policy_or_closed({"CTE_ALLOW_ROOTS": str(root), "CTE_DEMO": "maybe"})
    assert closed.roots == () and closed.mode is Mode.DEMO and isinstance(err, ServingConfigError)
    assert parse_roots([str(root / "sub" / "..")]) == (root,)


def test_work_slots_bound_concurrent_work():
    limits = Limits(max_analyses=1, max_corpus_runs=1, wait_seconds=0.0)
    entered, release = threading.Event(), threading.Event()

    def hold():
        with work_slot(WorkKind.ANALYSIS, limits):
            entered.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert entered.wait(10)
    with pytest.raises(BusyError, match=r"the server is busy: 1 analysis already running"):
        with work_slot(WorkKind.ANALYSIS, limits):
            pass
    with work_slot(WorkKind.CORPUS, limits):  # another kind has its own slots
        pass
    release.set()
    t.join(10)
    with work_slot(WorkKind.ANALYSIS, limits):  # freed again
        pass
    with work_slot(WorkKind.ANALYSIS, Limits()), work_slot(WorkKind.ANALYSIS, Limits()):  # no bound: local mode
        pass


def test_serve_command(tree):
    root, _, _ = tree
    cmd, env = serve_command([str(root / "sub" / "..")], True, 8765, "0.0.0.0", {"CTE_ALLOW_ROOTS": "/etc"})
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(ROOT / "app.py")
    assert cmd[5:] == ["--server.port", "8765", "--server.address", "0.0.0.0"]
    assert env["CTE_ALLOW_ROOTS"] == str(root) and env["CTE_DEMO"] == "1"  # the inherited value is replaced
    assert serve_command([], False, 1, "127.0.0.1", {})[1]["CTE_ALLOW_ROOTS"] == ""
    r = subprocess.run([sys.executable, "-m", "core", "serve", "--allow-root", "/no/such/dir"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == "error: --allow-root: '/no/such/dir' is not an existing folder\n"


# ------------------------------------------------------------------------------------------------ Hub, offline


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on return: connecting is refused at once


@pytest.fixture
def no_network(tmp_path, monkeypatch):
    """Online mode, but the Hub endpoint refuses connections (a closed local port): no real network involved."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    return cache


def test_hub_check_answers_within_its_timeout(monkeypatch):
    import core.sources as sources

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{srv.getsockname()[1]}")
        for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(var, raising=False)
        assert sources._hub_reachable(5.0) is True
    hang = threading.Event()

    def never_answers(*a, **k):  # a name lookup / connect that does not return by itself
        hang.wait(30)
        raise OSError("gave up")

    monkeypatch.setattr(socket, "create_connection", never_answers)
    assert sources._hub_reachable(0.2) is False
    hang.set()


def test_hub_without_network_reads_the_cache_at_once(no_network, monkeypatch):
    import huggingface_hub

    from core.sources import load_template

    calls = []
    real = huggingface_hub.hf_hub_download
    monkeypatch.setattr(huggingface_hub, "hf_hub_download",
                        lambda *a, **kw: calls.append(kw.get("local_files_only")) or real(*a, **kw))
    _cache_repo(no_network, "acme/cached", {"chat_template.jinja": CHATML})
    assert load_template("acme/cached").source == CHATML
    with pytest.raises(HubOfflineError, match="cannot be reached and the template files are not in the local cache"):
        load_template("acme/never-downloaded")
    assert calls and all(calls)  # every lookup was cache-only: no retries against the network


def test_cli_hub_offline_is_one_line(no_network):
    r = subprocess.run([sys.executable, "-m", "core", "analyze", "acme/never-downloaded"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Retrying" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: cannot load chat template from 'acme/never-downloaded': the Hub cannot be "
                               "reached"), r.stderr


def test_hub_spec_is_never_a_local_path(tmp_path, monkeypatch):
    """Text typed in the Hub field that happens to name a server file (repo-shaped) is not read from disk."""
    from core.sources import load_hub_spec

    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "model").write_text("{{ 'LOCAL FILE' }}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(HubOfflineError):
        load_hub_spec("org/model")
    with pytest.raises(TemplateLoadError, match="not a Hub repository id"):
        load_hub_spec("/etc/passwd")


def test_demo_hub_sends_no_token(monkeypatch):
    import huggingface_hub
    import core.sources as sources

    seen = []

    def fake(repo_id, filename, **kw):
        seen.append(kw.get("token"))
        return str(pathlib.Path(__file__).parent.parent / "assets" / "templates" / "plain-chat.jinja")

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_TOKEN", "hf_OPERATOR")
    monkeypatch.setattr(sources, "_hub_reachable", lambda timeout=None: True)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda *a, **kw: seen.append(kw.get("token")) or [])
    policy = policy_from_env({"CTE_DEMO": "1"})
    sources.load_hub_spec("visitor/repo", token=policy.hub_token)
    assert seen == [False, False]  # huggingface_hub sends no Authorization header for token=False


def test_serve_names_an_address_or_port_it_cannot_listen_on():
    """`serve --address 999.1.1.1` ended in streamlit's 40-line traceback (socket.gaierror) after the "serving on"
    line; an address or port that cannot be bound is one error line naming the flag, before streamlit starts."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for args, flag in ((["--address", "999.1.1.1", "--port", str(port)], "--address 999.1.1.1"),
                           (["--port", str(port)], f"--port {port}")):
            r = subprocess.run([sys.executable, "-m", "core", "serve", *args], cwd=ROOT, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
            assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"error: {flag}: cannot listen on "), \
                r.stderr
