"""Links and typed inputs follow the serving policy (issue 15): a page link's ``src=file:…`` / ``bundled:…`` /
``hub:…`` and the Compare page's "File or Hub id" never read a server file outside the operator's allowed folders,
and none at all by default. Found by a fresh-eyes pass: ``/edit?src=file:/etc/passwd`` showed the file."""

from __future__ import annotations

import os

import pytest

from .test_app_edit import start_with
from .test_app_helpers import errors, page, start

SECRET = "SECRET_TOKEN_DO_NOT_SHOW"


@pytest.fixture
def server(tmp_path, monkeypatch):
    """An allowed root holding a template, a secret file beside it (outside the root), and symlinks that lead out."""
    monkeypatch.setenv("CTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CTE_ALLOW_ROOTS", raising=False)
    monkeypatch.delenv("CTE_DEMO", raising=False)
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "ok.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}", encoding="utf-8")
    secret = tmp_path / "secret.jinja"
    secret.write_text(SECRET, encoding="utf-8")
    os.symlink(secret, root / "evil.jinja")
    os.symlink(tmp_path, root / "sub" / "up")
    return root, secret


def _shown(at) -> str:
    cur = at.session_state["template"]
    return cur.source + "\n".join(errors(at))


@pytest.mark.parametrize("src", ["file:/etc/passwd", "bundled:../../../../etc/passwd", "hub:../../etc/passwd",
                                 "bundled:../app.py"])
def test_links_read_no_server_file_by_default(server, src):
    at = start_with({"src": src})
    cur = at.session_state["template"]
    assert cur.origin == "bundled" and "root:x:" not in cur.source and "import" not in cur.source[:200]
    shown = "\n".join(errors(at))
    assert "cannot" in shown and "root:x:" not in shown
    assert "/work" not in shown and "Error:" not in shown  # no server path or exception class shown to a visitor


def test_links_with_allowed_root_read_only_inside_it(server, monkeypatch):
    root, secret = server
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(root))
    for src in (f"file:{secret}", f"file:{root}/evil.jinja", f"file:{root}/sub/up/secret.jinja",
                f"file:{root}/../secret.jinja"):
        at = start_with({"src": src})
        assert SECRET not in _shown(at), src
        assert at.session_state["template"].origin == "bundled", src
        assert any("cannot be read" in e for e in errors(at)), src
    ok = start_with({"src": f"file:{root}/ok.jinja"})
    assert ok.session_state["template"].name == "ok.jinja" and ok.session_state["template"].origin == "file"


def test_compare_reads_no_server_path(server, monkeypatch):
    root, secret = server
    at = page(start(), "compare")
    at.radio(key="in_compare_kind_B").set_value("Hub repo (or server file)").run()
    assert at.text_input(key="in_compare_spec_B").label == "Hub repo id"  # no server paths by default
    for spec in ("/etc/passwd", str(secret)):
        at.text_input(key="in_compare_spec_B").input(spec).run()
        assert not at.exception
        body = "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.code)
        assert "root:x:" not in body and SECRET not in body
        assert any("not a Hub repository id" in e for e in errors(at)), errors(at)
    monkeypatch.setenv("CTE_ALLOW_ROOTS", str(root))
    at = page(start(), "compare")
    at.radio(key="in_compare_kind_B").set_value("Hub repo (or server file)").run()
    at.text_input(key="in_compare_spec_B").input(f"{root}/evil.jinja").run()
    assert any("cannot be read" in e for e in errors(at)), errors(at)
    at.text_input(key="in_compare_spec_B").input(f"{root}/ok.jinja").run()
    assert any("B: ok.jinja (file)" in m.value.replace("\\", "") for m in at.markdown), [m.value for m in at.markdown]


def test_deeply_nested_override_import_is_a_message_not_a_crash(server):
    at = page(start(), "overrides")
    at.text_area(key="in_ov_import").input("[" * 5000 + "]" * 5000).run()
    [b for b in at.button if b.label == "Apply imported JSON"][0].click().run()
    assert not at.exception, at.exception
    assert any("nests too deeply" in e for e in errors(at)), errors(at)


def test_corpus_opens_a_bundled_example_by_name_not_by_server_path(server):
    """With server folders off the Corpus page lists the bundled examples; opening one must link it as
    ``bundled:NAME`` (a second pass saw ``src=file:/abs/install/path/…`` in the URL, telling visitors where the app
    is installed)."""
    at = page(start(), "corpus")
    [b for b in at.button if b.label.startswith("Analyse ")][0].click().run()
    at.selectbox(key="in_corpus_open").select("xml-function-tags.jinja").run()
    [b for b in at.button if b.label == "Open in Overview"][0].click().run()
    assert not at.exception and not errors(at)
    cur = at.session_state["template"]
    assert cur.name == "xml-function-tags.jinja" and cur.origin == "bundled"
    src = at.query_params["src"]
    src = src[0] if isinstance(src, list) else src
    assert src == "bundled:xml-function-tags.jinja"
