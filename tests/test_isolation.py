"""The limited workers of core.isolation and the entry points of core.isolated_ops (issue 24): results and
errors come back as the same classes, a worker is reused until it is killed, a C-level runaway is killed at its
limit while other calls go on, parsers of every route (special handlers' closures included) answer through
the worker, and the explorer never caches a killed worker's failure as the template's verdict."""

from __future__ import annotations

import json
import os
import threading

import pytest

from core import isolated_ops, isolation
from core.chat.pipeline import build_chat_parser
from core.chat.request import ChatRequest
from core.errors import RequestError, TemplateRenderError, TemplateSyntaxError
from core.isolation import WorkerLimitError
from core.jinja.template import ChatTemplate

from .conftest import ROOT

SHARED = ROOT.parent / "shared" / "templates"
TOOLS = json.loads((ROOT / "assets" / "samples" / "tools.json").read_text(encoding="utf-8"))

# two separately built binary trees of lists, 64 levels: `==` walks 2^64 pairs inside CPython's C code
EQ_BOMB = ("{%- set ns = namespace(a=[0], b=[0]) -%}{%- for i in range(64) -%}{%- set ns.a = [ns.a, ns.a] -%}"
           "{%- set ns.b = [ns.b, ns.b] -%}{%- endfor -%}{{ ns.a == ns.b }}")


def _render(source: str) -> str:
    return ChatTemplate(source, "t.jinja").render({"messages": [{"role": "user", "content": "hi"}]})


def test_results_and_errors_come_back_as_in_process():
    assert isolation.call(_render, "{{ messages[0].content|upper }}") == "HI"
    with pytest.raises(TemplateSyntaxError) as e:
        isolation.call(_render, "{% if %}")
    assert e.value.lineno == 1 and "Jinja syntax error (line 1)" in str(e.value)
    with pytest.raises(TemplateRenderError, match="raise_exception: no"):
        isolation.call(_render, "{{ raise_exception('no') }}")
    with pytest.raises(RequestError) as r:
        isolation.call(ChatRequest.from_dict, {"messages": 3})
    assert r.value.field == "messages" and str(r.value).startswith("invalid request field 'messages'")


def test_a_worker_is_reused_until_it_is_killed():
    first = isolation.call(os.getpid)
    assert isolation.call(os.getpid) == first != os.getpid()
    with pytest.raises(WorkerLimitError) as e:
        isolation.call(_render, EQ_BOMB, timeout_s=3, what="render", name="eq.jinja")
    assert str(e.value) == ("template 'eq.jinja' stopped: the render was stopped after 3 s (limit: isolated render "
                            "time; set CTE_ISOLATED_TIMEOUT_S)")
    assert isolation.call(os.getpid) != first  # the killed worker was replaced
    assert isolation.call(_render, "{{ 1 + 1 }}") == "2"


def test_a_runaway_does_not_hold_other_calls():
    outcome: list[BaseException] = []

    def runaway() -> None:
        try:
            isolation.call(_render, EQ_BOMB, timeout_s=8, what="render")
        except BaseException as e:  # noqa: BLE001
            outcome.append(e)

    t = threading.Thread(target=runaway)
    t.start()
    # meanwhile: another caller's renders complete in another worker
    rendered = [isolation.call(_render, "{{ messages|length }}") for _ in range(5)]
    still_running = t.is_alive()
    t.join(60)
    assert rendered == ["1"] * 5 and still_running and not t.is_alive()
    assert isinstance(outcome[0], WorkerLimitError) and "limit: isolated render time" in str(outcome[0])


@pytest.mark.parametrize("name", ["Kimi-K2-Thinking.jinja", "Qwen-QwQ-32B.jinja", "MiniMax-M3.jinja"])
def test_parsers_answer_through_the_worker(name):
    """Auto-parser and special handlers (whose parsers are closures, kept in the worker): the view's fields and
    its parse are the in-process bundle's."""
    source = (SHARED / name).read_text(encoding="utf-8")
    request = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": TOOLS}
    local = build_chat_parser(ChatTemplate(source, name), ChatRequest.from_dict(request))
    view = isolated_ops.parser_bundle(isolated_ops.ParserRecipe(source, name, json.dumps(request)))
    assert (view.prompt, view.generation_prompt, view.format) == (local.prompt, local.generation_prompt, local.format)
    assert view.parser.grammar == local.parser.grammar
    assert view.parser.preserved_tokens == list(local.parser.preserved_tokens)
    assert view.parser.describe() == local.parser.describe()
    output = "Let me look.\n" + "x" * 40
    assert view.parser.parse(output).to_openai() == local.parser.parse(output).to_openai()
    replay = isolated_ops.stream_replay(view.parser.recipe, output, False)
    assert "".join(replay.pieces) == output and replay.pieces[-1] == ""


def test_a_killed_worker_is_not_cached_as_the_verdict(monkeypatch):
    from explorer import state

    calls: list[str] = []

    def flaky(recipe):
        calls.append(recipe.name)
        if len(calls) == 1:
            raise WorkerLimitError(recipe.name, "the render was stopped after 1 s (limit: isolated render time)",
                                   "render")
        raise TemplateRenderError(recipe.name, "raise_exception: bad")

    monkeypatch.setattr(state, "_report", lambda *a: None)
    monkeypatch.setattr(isolated_ops, "parser_bundle", flaky)
    key = ("{{ x }}", "flaky-iso.jinja", "llama.cpp", (), "{}", '{"messages": []}')
    with pytest.raises(WorkerLimitError):
        state._bundle(*key)
    failed = state._bundle(*key)  # asked again: the worker runs again (nothing cached)
    assert isinstance(failed, state.Failed) and "raise_exception: bad" in str(failed.error)
    assert state._bundle(*key) is failed and calls == ["flaky-iso.jinja"] * 2  # a real verdict is cached
