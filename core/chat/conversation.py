"""A conversation rendered by a template as its author wrote it (the Edit page's live render): the messages and
tools as given, ``add_generation_prompt`` and ``enable_thinking`` as set, the date variables llama.cpp passes.
No request-path rewriting (that is :mod:`core.chat.prompt`): an author sees what the template itself does with
this conversation. Renders only in the jinja2 sandbox (:class:`core.jinja.template.ChatTemplate`), in
transformers' dialect or llama.cpp's (:mod:`core.jinja.llama`)."""

from __future__ import annotations

from typing import Any

from ..errors import ChatTemplateExplorerError, RequestError, TemplateLoadError


DIALECTS = ("transformers", "llama.cpp")


def render_conversation(source: str, name: str, messages: Any, tools: Any = None, *,
                        add_generation_prompt: bool = True, enable_thinking: bool = True,
                        chat_template_kwargs: dict[str, Any] | None = None, dialect: str = "transformers") -> str:
    """The text ``source`` renders for ``messages`` (a list of message objects) and ``tools`` (a list, or
    None), with the request's ``chat_template_kwargs`` in the template's context as a server passes them.
    ``dialect``: ``"transformers"`` (its sandbox: lists and dicts are immutable) or ``"llama.cpp"`` (its Jinja
    engine: ``list.append`` and friends work, as llama.cpp-only templates expect). Raises :class:`~core.errors.RequestError` naming the field for a malformed conversation,
    :class:`~core.errors.TemplateLoadError` for an empty template, and the template's syntax / render errors."""
    from ..jinja import llama
    from ..jinja.template import ChatTemplate, apply_template, chat_globals
    from .prompt import extra_context
    from .request import ChatRequest

    if not source.strip():
        raise TemplateLoadError(name, "the template is empty: there is nothing to render")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RequestError("messages", "must be a list of message objects")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise RequestError("tools", "must be a list of tool objects (or empty)")
    request = ChatRequest.from_dict({"messages": messages, "tools": tools or None,
                                     "enable_thinking": enable_thinking,
                                     "add_generation_prompt": add_generation_prompt,
                                     "chat_template_kwargs": dict(chat_template_kwargs or {})})
    if dialect not in DIALECTS:
        raise RequestError("dialect", f"must be one of {', '.join(DIALECTS)}, not {dialect!r}")
    if dialect == "llama.cpp":
        return llama.render(ChatTemplate(source, name),
                            chat_globals(messages, tools or None, add_generation_prompt, enable_thinking,
                                         extra_context(request)), template_tracebacks=False)
    return apply_template(ChatTemplate(source, name), messages, tools or None,
                          add_generation_prompt=add_generation_prompt, enable_thinking=enable_thinking,
                          extra_context=extra_context(request))


def render_located(source: str, name: str, messages: Any, tools: Any = None, *, add_generation_prompt: bool = True,
                   enable_thinking: bool = True, chat_template_kwargs: dict[str, Any] | None = None,
                   dialect: str = "transformers") -> tuple[str | None, Any]:
    """:func:`render_conversation`, with a template's syntax or render error returned as ``(None,``
    :class:`~core.lint.locate.ErrorLocation` ``)`` — located where it happened (in a worker process the traceback
    that holds the line is gone once the error is sent back). ``(text, None)`` on success; a malformed
    conversation or an empty template still raises."""
    from ..lint.locate import locate_error

    try:
        return render_conversation(source, name, messages, tools, add_generation_prompt=add_generation_prompt,
                                   enable_thinking=enable_thinking, chat_template_kwargs=chat_template_kwargs,
                                   dialect=dialect), None
    except (RequestError, TemplateLoadError):
        raise
    except ChatTemplateExplorerError as e:
        return None, locate_error(e, source)
