"""Corpus page: analyse a folder of real templates, filter by format / modes / caps, open one."""

from __future__ import annotations

import os
import shutil

import pytest

from .test_app_helpers import errors, frame_with, metrics, page, start, unmd
from .conftest import TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

PICK = ["Qwen-Qwen3-0.6B.jinja", "ByteDance-Seed-OSS.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja",
        "Qwen3-Coder.jinja", "hfjs-fireworks-ai-firefunction-v1.jinja", "chujiezheng-vicuna.jinja"]


@pytest.fixture(autouse=True)
def allowed_folders(tmp_path, monkeypatch):
    """The operator allows the shared corpus and the test's own folder (server folders are off by default)."""
    monkeypatch.setenv("CTE_ALLOW_ROOTS", f"{TEMPLATES}{os.pathsep}{tmp_path}")


@pytest.fixture
def folder(tmp_path):
    for name in PICK:
        shutil.copy(TEMPLATES / name, tmp_path / name)
    (tmp_path / "notes.txt").write_text("not a template")
    (tmp_path / "broken.jinja").write_text("{% for m in messages %}no end")
    return tmp_path


def test_template_failing_every_probe_is_flagged(tmp_path):
    """Its row holds the default analysis: the warning column and a message say so, and 'Errors only' lists it."""
    shutil.copy(TEMPLATES / "Qwen-Qwen3-0.6B.jinja", tmp_path / "Qwen-Qwen3-0.6B.jinja")
    (tmp_path / "raises.jinja").write_text("{{ raise_exception('not for probes') }}")
    at = page(start(), "corpus")
    at.text_input(key="in_corpus_folder").input(str(tmp_path)).run()
    [b for b in at.button if b.label.startswith("Analyse")][0].click().run()
    table = frame_with(at, "reasoning").set_index("template")
    # the reason is in the "problem" column, second after the name (it was cut off at the table's far right)
    assert list(table.reset_index().columns[:2]) == ["template", "problem"]
    assert "fails every probe" in table.loc["raises.jinja", "problem"]
    assert "not for probes" in table.loc["raises.jinja", "problem"]
    assert not table.loc["Qwen-Qwen3-0.6B.jinja", "problem"]
    assert any("fail every probe" in unmd(w.value) for w in at.warning)
    at.toggle(key="in_corpus_errors").set_value(True).run()
    assert list(frame_with(at, "reasoning")["template"]) == ["raises.jinja"]


def test_corpus_table_filters_and_click_through(folder, reference_analysis):
    at = page(start(), "corpus")
    assert at.text_input(key="in_corpus_folder").value == str(TEMPLATES)  # default: the shared corpus
    at.text_input(key="in_corpus_folder").input(str(folder)).run()
    [b for b in at.button if b.label.startswith("Analyse")][0].click().run()
    assert not at.exception
    assert metrics(at) == {"Templates": "7", "Analysed": "6", "Errors": "1", "Auto-parser": "5",
                           "Special handler": "1", "Fail every probe": "1"}
    # the page's figures are core.corpus_counts' (the function docs/fidelity.md's figures come from)
    from core.corpus import corpus_counts, corpus_row, template_files

    counts = corpus_counts(corpus_row(p) for p in template_files(folder))
    assert metrics(at) == {"Templates": str(counts.templates), "Analysed": str(counts.analysed),
                           "Errors": str(counts.errors), "Auto-parser": str(counts.autoparser),
                           "Special handler": str(counts.specialized),
                           "Fail every probe": str(counts.all_probes_failed)}
    assert any(unmd(c.value) == "Special handlers: qwen3-coder 1" for c in at.caption)
    table = frame_with(at, "reasoning").set_index("template")
    for name in PICK:
        ref = reference_analysis[name]
        if "analysis" not in ref or not table.loc[name, "route"]:
            continue
        assert table.loc[name, "tools"] == ref["analysis"]["tools"]["format"]["mode"], name
        assert table.loc[name, "reasoning"] == ref["analysis"]["reasoning"]["mode"], name
        assert table.loc[name, "route"] == ref["route"], name
    assert "syntax error" in table.loc["broken.jinja", "problem"]

    at.multiselect(key="in_corpus_tools").select("TAG_WITH_TAGGED").run()
    assert set(frame_with(at, "reasoning")["template"]) == {"ByteDance-Seed-OSS.jinja", "Qwen3-Coder.jinja"}
    at.multiselect(key="in_corpus_route").select("autoparser").run()
    assert list(frame_with(at, "reasoning")["template"]) == ["ByteDance-Seed-OSS.jinja"]
    at.multiselect(key="in_corpus_tools").unselect("TAG_WITH_TAGGED").run()
    at.multiselect(key="in_corpus_caps").select("supports_tools").run()
    shown = set(frame_with(at, "reasoning")["template"])
    assert "chujiezheng-vicuna.jinja" not in shown and "Qwen-Qwen3-0.6B.jinja" in shown

    at.selectbox(key="in_corpus_open").select("Qwen-Qwen3-0.6B.jinja").run()
    [b for b in at.button if b.label == "Open in Overview"][0].click().run()
    assert not errors(at)
    assert "Qwen-Qwen3-0.6B.jinja" in unmd(at.markdown[0].value)
    assert metrics(at)["Reasoning"] == "TAG_BASED"


def test_corpus_table_shows_whether_a_template_exports(tmp_path):
    """Issue 13's Corpus column: the rows carry it (core.corpus) but the page's fixed column order had dropped it."""
    for name in ("Qwen-Qwen3-0.6B.jinja", "Apertus-8B-Instruct.jinja"):
        shutil.copy(TEMPLATES / name, tmp_path / name)
    at = page(start(), "corpus")
    at.text_input(key="in_corpus_folder").input(str(tmp_path)).run()
    [b for b in at.button if b.label.startswith("Analyse")][0].click().run()
    table = frame_with(at, "reasoning").set_index("template")
    assert table.loc["Qwen-Qwen3-0.6B.jinja", "response_template"] == "exportable"
    # Apertus keys its JSON calls by the function name, which a response_template cannot turn into a name
    assert table.loc["Apertus-8B-Instruct.jinja", "response_template"].startswith("no: JSON calls keyed by")


def test_corpus_charts_count_what_the_table_holds(folder):
    at = page(start(), "corpus")
    at.text_input(key="in_corpus_folder").input(str(folder)).run()
    [b for b in at.button if b.label.startswith("Analyse")][0].click().run()
    assert not at.exception, at.exception
    charts = at.get("vega_lite_chart")
    assert len(charts) == 3, len(charts)     # formats by route, modes, problems per family (the folder has an error)
    import json

    specs = [json.loads(c.proto.spec) for c in charts]
    assert all("bar" in json.dumps(s.get("mark")) for s in specs), [s.get("mark") for s in specs]
    # the format chart's counts add up to the table's rows
    import pyarrow as pa

    data = pa.ipc.open_stream(charts[0].proto.datasets[0].data.data).read_pandas()
    counted = data[[c for c in data.columns if "templates" in str(c)][0]].sum()
    assert counted == int(metrics(at)["Templates"]), (counted, data)
    captions = " ".join(unmd(c.value) for c in at.caption)
    assert "Tool-call format, by route" in captions and "Problems per family" in captions


def test_empty_problem_and_handler_columns_are_left_out(tmp_path):
    """Two auto-parser templates that analyse cleanly: no problem, no handler — the columns that would be empty are
    not drawn, so the modes come right after the route (they were cut off at the right edge at 1400 px)."""
    for name in ("Qwen-Qwen3-0.6B.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja"):
        shutil.copy(TEMPLATES / name, tmp_path / name)
    at = page(start(), "corpus")
    at.text_input(key="in_corpus_folder").input(str(tmp_path)).run()
    [b for b in at.button if b.label.startswith("Analyse")][0].click().run()
    assert not errors(at)
    table = frame_with(at, "reasoning")
    assert list(table.columns[:5]) == ["template", "route", "tools", "reasoning", "content"], list(table.columns)
