"""Improvement ``transformers-dialect``: a template llama.cpp's Jinja engine cannot render is rendered as
transformers renders it.

llama.cpp's engine lacks some of jinja2's constructs (``selectattr(attr, "undefined")``, ``map('filter')``,
``unique``, …): a template written for transformers or vLLM that uses one fails every render there, so llama.cpp
serves no parser for it at all. At ``improved`` fidelity such a template — the reference request (user "Hello" +
one tool, with the generation prompt) fails in the llama.cpp dialect with a render error and renders in the
transformers dialect — is analysed and rendered in the transformers dialect (:mod:`core.jinja.hf`, the sandbox
transformers' ``apply_chat_template`` uses). At ``llama.cpp`` fidelity nothing changes.

The capability probes of llama.cpp record how a render *reads* its inputs, which only the llama.cpp dialect's
tracking environment can do; in the transformers dialect the capabilities are read from what the renders *write*
(:func:`written_caps`).
"""

from __future__ import annotations

from typing import Any

from ..errors import RenderLimitError, TemplateRenderError, TemplateSecurityError
from ..jinja import llama as _llama
from ..digest import source_digest
from ..jinja.template import ChatTemplate, apply_template, chat_globals
from ..memo import MISSING, BoundedMemo
from .result import Caps
from . import probes as P
from .caps import normalize_messages, probe_caps
from .generation_prompt import request_extra_context
from ..diff import RenderParams

_DIALECT_CACHE = BoundedMemo("dialect", max_entries=4096, max_bytes=4 * 2**20)


def llama_dialect_failure(template: ChatTemplate) -> str | None:
    """The llama.cpp dialect's render error when a probe request (a user message and the probe tools, with the
    generation prompt) does not render in it but renders in the transformers dialect (the template is written in a
    Jinja llama.cpp's engine lacks); None otherwise (it renders in both, fails in both, or fails on a limit or a
    sandbox refusal, which no dialect changes). Memoized by source."""
    key = source_digest(template.source)
    hit = _DIALECT_CACHE.get(key)
    if hit is not MISSING:
        return hit

    # as the request path sends them: string content becomes typed parts for a template that reads only those
    msgs = normalize_messages([P.user()], probe_caps(template))
    tools = P.tools()
    extra = request_extra_context()
    found: str | None = None
    try:
        _llama.render(template, chat_globals(msgs, tools, True, True, extra))
    except RenderLimitError:
        return None         # a render cut by a limit decides nothing (and may pass next time: not memoized)
    except TemplateSecurityError:
        pass
    except TemplateRenderError as e:
        try:
            apply_template(template, [P.user()], tools, True, True, extra_context=extra)
            found = e.message
        except Exception:   # fails in both dialects: the template's own fault, not the dialect's
            pass
    _DIALECT_CACHE.put(key, found, 200 + len(found or ""))
    return found


def written_caps(render: Any) -> Caps:
    """Capabilities read from what the template writes, for the transformers dialect. ``render(RenderParams)``
    renders one probe (raising on failure). A capability holds when a render with the input writes the input's
    marker text (a system message's text, a tool's name, a call's name, an object argument's value) that the
    render without it does not; the probe texts are the analysis' own (:mod:`core.analysis.probes`)."""
    def text(params: RenderParams) -> str:
        try:
            return render(params)
        except Exception:   # a probe that does not render shows nothing
            return ""

    base = text(RenderParams([P.user()]))
    system = "System probe text 7c1e"
    with_system = text(RenderParams([{"role": "system", "content": system}, P.user()]))
    typed = text(RenderParams([{"role": "user", "content": [{"type": "text", "text": system}]}]))
    tools = text(RenderParams([P.user()], tools=P.tools()))
    plain_tools = text(RenderParams([P.user(), P.assistant()], tools=P.tools()))

    def call_turn(*calls: dict[str, Any]) -> str:
        return text(RenderParams([P.user(), P.assistant("", tool_calls=list(calls))], tools=P.tools()))

    one = call_turn(P.first_call())
    two = call_turn(P.first_call(), P.second_call())
    renders_call = one.count(P.FUN_FIRST) > plain_tools.count(P.FUN_FIRST)
    args = P.first_call()["function"]["arguments"]
    return Caps(
        supports_system_role=system in with_system,
        supports_string_content=P.USER_MSG in base,
        # the part's text written, not the list printed whole as Python text
        supports_typed_content=system in typed and "'type'" not in typed,
        supports_tools=P.FUN_FIRST in tools and P.FUN_FIRST not in base,
        supports_tool_calls=renders_call,
        supports_parallel_tool_calls=renders_call and two.count(P.FUN_SECOND) > plain_tools.count(P.FUN_SECOND),
        # the object's values written, not the object printed whole as Python text (a template for text arguments)
        supports_object_arguments=renders_call and all(v in one for v in args.values()) and str(args) not in one,
    )
