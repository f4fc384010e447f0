"""One source for the corpus figures: those of docs/fidelity.md are ``core.corpus.corpus_counts``'s (which the
Corpus page shows, see tests/test_app_corpus.py) on ../shared/templates."""

from __future__ import annotations

import re

import pytest

from core.corpus import CorpusCounts, corpus_counts, corpus_row, template_files

from .conftest import ROOT, TEMPLATES

pytestmark = pytest.mark.skipif(not TEMPLATES.is_dir(), reason="../shared/templates is not present")

FIDELITY = (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def counts() -> CorpusCounts:
    return corpus_counts(corpus_row(p) for p in template_files(TEMPLATES))


def test_fidelity_doc_corpus_block_is_the_core_counts(counts):
    block = FIDELITY[FIDELITY.index("    $ python -m core corpus ../shared/templates\n"):].splitlines()[1:4]
    assert [line.strip() for line in block] == counts.lines()
    assert counts.templates == 351 and counts.all_probes_failed == 5


def test_fidelity_doc_tables_use_the_same_counts(counts):
    assert f"Batch over all {counts.templates} templates" in FIDELITY
    assert f"the {counts.all_probes_failed} that fail every probe render" in FIDELITY
    assert f"({counts.autoparser} of {counts.templates} corpus templates;" in FIDELITY
    routes = FIDELITY[FIDELITY.index("### Which route each family takes"):FIDELITY.index("### Corpus figures")]
    named = set(re.findall(r"`([a-z0-9.-]+)`", routes.split("| family")[1])) - {"auto-parser"}
    assert named == set(counts.handlers), named ^ set(counts.handlers)


def test_counts_of_rows():
    rows = [{"route": "specialized", "handler": "gpt-oss", "error": "", "warning": ""},
            {"route": "autoparser", "handler": "", "error": "", "warning": "fails every probe render"},
            {"route": None, "handler": None, "error": "syntax error", "warning": ""},
            {"route": "specialized", "handler": "gpt-oss", "error": "", "warning": ""}]
    c = corpus_counts(rows)
    assert (c.templates, c.analysed, c.errors, c.autoparser, c.specialized, c.all_probes_failed) == (4, 3, 1, 1, 2, 1)
    assert c.handlers == {"gpt-oss": 2}
