"""The special-format families against the engine golden file (tests/engine_golden.py, docs/engine.md): final
message, fired repairs, deltas at chunk sizes 1, 7 and whole, grammar, lazy flag, triggers, preserved tokens and
explain spans, at both fidelities, over the reference cases, drift cases, round-trip renders and hostile outputs
of every family. A difference must be fixed, or listed in :data:`LISTED` with its reason (docs/engine.md)."""

from __future__ import annotations

import collections
import functools
import json

import pytest

from . import engine_golden as G

# "key|fidelity|field" -> the number of a listed, reviewed difference of docs/engine.md ("Golden file"): the new
# engine's answer differs from the recorded one there in that way only (checked below)
LISTED: dict[str, str] = json.loads(G.LISTED.read_text(encoding="utf-8")) if G.LISTED.exists() else {}


_ROWS, _GRAMMARS = G.load()
_BY_FAMILY: dict[str, list[dict]] = collections.defaultdict(list)
for _r in _ROWS:
    _BY_FAMILY[_r["family"]].append(_r)
_FIELDS = ("error", "grammar", "lazy", "triggers", "preserved", "message", "repairs", "stream", "explain")


@functools.cache
def _inputs_by_key() -> dict[str, dict]:
    """Every golden input by key, built once for all families (it routes every corpus template and renders the
    round-trip and hostile outputs of each family)."""
    return {i["key"]: i for i in G.inputs()}


def test_golden_covers_every_family():
    from core.chat.formats import FAMILIES

    assert {f.name for f in FAMILIES} == set(_BY_FAMILY)
    assert len(_ROWS) > 800


@pytest.mark.parametrize("family", sorted(_BY_FAMILY))
def test_family_matches_golden(family):
    items = {k: i for k, i in _inputs_by_key().items() if i["family"] == family}
    templates: dict = {}
    grammars: dict[str, str] = {}
    diffs = []
    from core.jinja.hf import pinned_clock

    from .conftest import REFERENCE_CLOCK

    with pinned_clock(REFERENCE_CLOCK):
        for want in _BY_FAMILY[family]:
            got = G.plain(G.record(items[want["key"]], want["fidelity"], templates, grammars))
            want = G.plain(want)
            for f in _FIELDS:
                if got.get(f) == want.get(f):
                    continue
                why = LISTED.get(f"{want['key']}|{want['fidelity']}|{f}")
                if why is None or not G.within(why, f, want.get(f), got.get(f), want):
                    diffs.append(f"{want['key']} [{want['fidelity']}] {f}: "
                                 f"recorded {str(want.get(f))[:200]} / now {str(got.get(f))[:200]}")
    assert not diffs, f"{len(diffs)} difference(s):\n" + "\n".join(diffs[:12])
