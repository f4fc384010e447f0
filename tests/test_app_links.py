"""Links and typed inputs follow the serving policy (issue 15): a page link's ``src=file:…`` / ``bundled:…`` /
``hub:…`` and the Compare page's "File or Hub id" never read a server file outside the operator's allowed folders,
and none at all by default. Found by a fresh-eyes pass: ``/edit?src=file:/etc/passwd`` showed the file."""

from __future__ import annotations

import os

import pytest

from .conftest import TEMPLATES
from .test_app_edit import start_with
from .test_app_helpers import errors, page, start, unmd

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
    assert any("B: ok.jinja (file)" in unmd(m.value) for m in at.markdown), [m.value for m in at.markdown]


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


# ---------------------------------------------------------------- a link that cannot be honoured says so on top
# (issue 28: it silently showed the default template, its one-line error at the sidebar's foot, below the fold)

def _top_error(at) -> str:
    """The main area's first element, which must be an error (the notice above the page the link opened)."""
    first = at.main.children[0]
    assert first.type == "error", first
    return first.value


@pytest.mark.parametrize("src, reason", [
    ("file:/etc/passwd", "reading server files is off"),
    ("bundled:nope.jinja", "not one of the bundled examples"),
    ("hub:not a repo!", "not a Hub repository id"),
    ("text:0123456789abcdef", "edited text that this server does not keep"),
    ("bundled:**bold**[x](http://e.example)", "not one of the bundled examples"),
])
def test_a_link_that_cannot_be_opened_says_so_at_the_top(server, src, reason):
    from explorer.components.text import md
    from explorer.state import DEFAULT_BUNDLED

    at = start_with({"src": src})
    cur = at.session_state["template"]
    assert cur.origin == "bundled" and cur.name == DEFAULT_BUNDLED          # the fallback
    top = _top_error(at)
    assert md(f"src={src}") in top, top                                    # the link's value, escaped
    assert reason in unmd(top) and DEFAULT_BUNDLED in unmd(top)
    assert not at.sidebar.error                                            # not (also) at the sidebar's foot
    at.run()                                                               # a rerun of the same page keeps it
    assert md(f"src={src}") in _top_error(at)
    page(at, "overview")                                                   # another page: said once is enough
    assert not [e for e in errors(at) if "src=" in e], errors(at)


def test_a_link_with_an_unknown_override_path_drops_it_and_says_so(server):
    import json

    at = start_with({"src": "bundled:chatml-think-tools.jinja",
                     "ov": json.dumps({"nope.field": 1, "reasoning.start": "<think>\n"})})
    top = unmd(_top_error(at))
    assert "override nope.field=1 was dropped" in top and "unknown override path" in top, top
    cur = at.session_state["template"]
    assert at.session_state["overrides"][cur.digest] == {"reasoning.start": "<think>\n"}  # the good one kept
    ov = at.query_params["ov"]
    assert json.loads(ov[0] if isinstance(ov, list) else ov) == {"reasoning.start": "<think>\n"}  # link rewritten
    for name in ("overrides", "explain"):                                  # no page carries the bad path on
        page(at, name)
        assert not [e for e in errors(at) if "override" in e], (name, errors(at))


def test_a_link_with_many_bad_overrides_names_a_few_and_counts_the_rest(server):
    import json

    from explorer.urlstate import NOTICE_MAX_OVERRIDES

    at = start_with({"src": "bundled:chatml-think-tools.jinja", "ov": json.dumps({f"x{i}": i for i in range(300)})})
    shown = [unmd(e.value) for e in at.main.error]
    assert len(shown) == NOTICE_MAX_OVERRIDES + 1, shown
    assert shown[-1] == f"This link's ov=… had {300 - NOTICE_MAX_OVERRIDES} more overrides that were dropped."
    assert "ov" not in at.query_params and not at.session_state["overrides"].get(at.session_state["template"].digest)


def test_a_link_with_an_unknown_fidelity_says_it_was_ignored(server):
    """A hand-edited ``fidelity=`` that is no fidelity was dropped without a word, while a bad ``ov`` or ``src``
    is named at the top of the page."""
    at = start_with({"src": "bundled:chatml-think-tools.jinja", "fidelity": "improve"})
    top = unmd(_top_error(at))
    assert "This link's fidelity=improve was ignored: it is not one of llama.cpp, improved, so the page shows " \
           "llama.cpp" in top, top
    assert at.session_state["fidelity"] == "llama.cpp"


@pytest.mark.parametrize("src", ["hub:" + "a/" * 3000, "file:" + "/x" * 3000, "bundled:" + "y" * 6000,
                                 "hub:org/model@" + "b" * 6000], ids=["hub", "file", "bundled", "revision"])
def test_a_long_link_value_is_cut_in_the_reason_too(server, src):
    """The notice cut a link's value to a line, but the load error it quotes repeated the value in full: a 6 KB
    ``src`` filled the top of the page with 6,000 characters (seen in chromium). The reason names it cut too."""
    from explorer.urlstate import NOTICE_VALUE_CHARS

    at = start_with({"src": src})
    top = unmd(_top_error(at))
    assert len(top) < 3 * NOTICE_VALUE_CHARS + 400, (len(top), top[-300:])
    assert "cannot be opened" in top and top.count("…") >= 2, top


def test_a_long_display_name_in_a_link_is_cut(server):
    """A ``text:`` link's ``name=`` is the template's display name: 20,000 characters of it filled the Overview
    page and the sidebar (seen in chromium). A name longer than a file name may be is cut, and the page says so."""
    from explorer import urlstate
    from explorer.urlstate import LINK_NAME_MAX_CHARS

    digest = urlstate.save_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    at = start_with({"src": f"text:{digest}", "name": "n" * 20_000})
    cur = at.session_state["template"]
    assert cur.origin == "edited" and cur.name == "n" * LINK_NAME_MAX_CHARS + "…", len(cur.name)
    assert "was cut to" in unmd(_top_error(at))
    at = start_with({"src": f"text:{digest}", "name": "mine.jinja"})
    assert at.session_state["template"].name == "mine.jinja" and not at.main.error


def test_a_reloaded_upload_is_not_called_an_edit(server):
    """An uploaded template's link is ``src=text:DIGEST``, which a reload read back as an edit: the sidebar said
    "edited" and the Edit page "The current analysis is of the edited source" for a file nobody had touched (seen
    in chromium: Sources → Upload → Load this file → reload). The link now names the kind, and an edit of the upload
    keeps it as the loaded source."""
    from explorer import state, urlstate

    data = (TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja").read_bytes()
    up = state.load_upload(data, "Qwen-Qwen2.5-7B-Instruct.jinja")
    params = urlstate.params_for(up, "llama.cpp", {})
    assert params["kind"] == "upload", params
    at = start_with(params)
    cur = at.session_state["template"]
    assert (cur.origin, cur.name, cur.source) == ("upload", up.name, up.source)
    at = start_with({"src": params["src"], "name": up.name})      # a link from before the kind: an edit, as it was
    assert at.session_state["template"].origin == "edited"
    edited = state.from_edit(up, up.source.replace("arguments | tojson", "arguments | tojson(indent=2)"))
    assert edited.source != up.source
    at = start_with({**urlstate.params_for(edited, "llama.cpp", {}), "base": params["src"], "base_kind": "upload"})
    assert at.session_state["template"].origin == "edited" and at.session_state["edit_base"].origin == "upload"
