"""Templates are untrusted code: injection payloads are refused, pathological templates stop within limits.

The payload and pathological-template corpora live in tests/data/; docs/security.md quotes their counts.
"""

from __future__ import annotations

import json
import pathlib
import time

import pytest

from core.errors import RenderLimitError, TemplateRenderError, TemplateSecurityError
from core.jinja.limits import RenderLimits
from core.jinja.template import ChatTemplate

DATA = pathlib.Path(__file__).parent / "data"
CANARY = pathlib.Path("/tmp/chat_template_explorer_canary")
PAYLOADS = json.loads((DATA / "sandbox_payloads.json").read_text())
PATHOLOGICAL = json.loads((DATA / "pathological_templates.json").read_text())


@pytest.fixture(autouse=True)
def no_canary():
    CANARY.unlink(missing_ok=True)
    yield
    assert not CANARY.exists(), "a template reached the file system"


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_injection_payload_is_refused(name):
    source = PAYLOADS[name].replace("CANARY", str(CANARY))
    t = ChatTemplate(source, name=name)
    ctx = {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}
    with pytest.raises(TemplateRenderError) as err:
        t.render(ctx)
    assert name in str(err.value)
    # refused by the sandbox itself, or (for names that do not exist in the sandbox) undefined
    assert isinstance(err.value, TemplateSecurityError) or "undefined" in str(err.value)


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_template_stops_within_limit(name):
    limits = RenderLimits(timeout_s=1.0, max_output_chars=200_000)
    t = ChatTemplate(PATHOLOGICAL[name], name=name, limits=limits)
    started = time.monotonic()
    with pytest.raises(RenderLimitError) as err:
        t.render({"messages": []})
    elapsed = time.monotonic() - started
    assert name in str(err.value)
    # generous bound: the limit is 1 s; this guards against "never stops", not against speed
    assert elapsed < 10


def test_legit_template_features_still_work():
    src = ("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
           "{{ m.role | upper }}:{{ m.content | trim }}{{ '\\n' if not loop.last }}{% endfor %}"
           "{{ ns.n }}{{ 'x' * 3 }}{{ '%05d' % 42 }}{{ 'ab' ~ 'cd' }}{{ range(3) | list | length }}")
    out = ChatTemplate(src).render({"messages": [{"role": "user", "content": " a "},
                                                  {"role": "assistant", "content": "b"}]})
    assert out == "USER:a\nASSISTANT:b2xxx00042abcd3"
