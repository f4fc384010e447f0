"""A chat template: compiled once (cached by source), rendered in the sandbox as transformers renders it, within
its render limits.

Errors: :class:`~core.errors.TemplateSyntaxError` at compile time, :class:`~core.errors.TemplateRenderError`
(and its subclasses for sandbox refusals and exceeded limits) at render time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Iterator

import jinja2

from .. import memo as _memo
from .. import transient
from ..errors import RenderLimitError, TemplateRenderError, TemplateSecurityError, TemplateSyntaxError
from .cache import check_syntax, compiled_code, normalize_source, template_from_code
from .hf import ENV, _TemplateRaised
from .limits import DEFAULT_LIMITS, RenderLimits, _Deadline, _monotonic, check_source_size
from .sandbox import _bounded_range


def _load_compiled(source: str) -> jinja2.Template:
    """Compile ``source`` with the project environment, through :func:`compiled_code`'s caches."""
    return template_from_code(ENV, compiled_code(ENV, source))


@functools.lru_cache(maxsize=512)
def _compile(source: str, name: str) -> jinja2.Template:
    try:
        return _load_compiled(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateSyntaxError(name, e.message or str(e), e.lineno) from None
    except RecursionError:
        raise TemplateSyntaxError(name, "template nests too deeply to compile") from None
    except SyntaxError as e:
        # Python refused the generated code (a macro naming an argument twice; ifs nested past Python's 100
        # indentation levels); its line number is one of the generated source, which means nothing to the
        # template's author and moves whenever the code generator changes, so it is left out
        raise TemplateSyntaxError(name, f"the template compiles to code Python refuses: {e.msg}") from None


_memo.register_cache("templates", _compile.cache_clear)


@dataclass
class ChatTemplate:
    """A compiled chat template: ``render(context)`` → text.

    ``source`` is the Jinja text, ``name`` a label used in error messages (file name, repo id).
    Construction compiles (cached by source) and raises :class:`TemplateSyntaxError` on bad Jinja.
    """

    source: str
    name: str = "<template>"
    limits: RenderLimits = field(default=DEFAULT_LIMITS)

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise TypeError(f"template source must be str, got {type(self.source).__name__}")
        check_source_size(self.name, self.source)
        check_syntax(self.source, self.name)

    @property
    def _compiled(self) -> jinja2.Template:
        # Compiled on first render: the analysis renders through its own environments, so compiling here too
        # would double the cold cost of every new template (a parse is a third of a compile).
        compiled = self.__dict__.get("_compiled_template")
        if compiled is None:
            compiled = self.__dict__["_compiled_template"] = _compile(self.source, self.name)
        return compiled

    @_compiled.setter
    def _compiled(self, value: jinja2.Template) -> None:
        self.__dict__["_compiled_template"] = value

    @property
    def normalized_source(self) -> str:
        """See :func:`normalize_source`."""
        return normalize_source(self.source)

    def render(self, context: dict[str, Any]) -> str:
        """Render with ``context`` as the template globals. Returns the text.

        Raises :class:`TemplateRenderError` (template raised, undefined value misuse, type errors),
        :class:`TemplateSecurityError` (sandbox refusal) or :class:`RenderLimitError`; on the first render
        :class:`TemplateSyntaxError` for errors only code generation finds (an unknown filter).
        """
        return self.render_with(self._compiled, context)  # _compiled may raise TemplateSyntaxError

    def render_with(self, compiled: jinja2.Template, context: dict[str, Any], *,
                    template_tracebacks: bool = True) -> str:
        """Render ``context`` with ``compiled`` — this template's source compiled by another environment (the
        analysis' probe and llama.cpp-compatible environments) — under this template's name and limits, as
        :meth:`render` does (same errors raised, same messages). ``template_tracebacks=False``: a failure keeps
        Python's traceback instead of jinja2's rewrite of it into template lines (which ``core.lint`` reads, and
        which costs ~0.1 ms per failure), for callers that keep only the message (the analysis' renders)."""
        deadline = _Deadline(self.limits)
        ctx = dict(context)
        ctx.setdefault("range", _bounded_range(deadline))
        previous = ENV._deadline
        ENV._deadline = deadline
        try:
            out: list[str] = []
            size = 0
            for chunk in (compiled.generate(ctx) if template_tracebacks else _chunks(compiled, ctx)):
                size += len(chunk)
                if size > self.limits.max_output_chars:
                    raise RenderLimitError(self.name, f"output longer than {self.limits.max_output_chars} characters "
                                                      "(limit: output size)")
                out.append(chunk)
                if _monotonic() > deadline.until:
                    deadline.check()
            return "".join(out)
        except RenderLimitError as e:
            raise RenderLimitError(self.name, e.message) from None
        except _TemplateRaised as e:
            raise TemplateRenderError(self.name, f"raise_exception: {e}") from None
        except jinja2.exceptions.SecurityError as e:
            raise TemplateSecurityError(self.name, f"sandbox refused: {e}") from None
        except RecursionError:
            raise RenderLimitError(self.name, "recursion too deep (limit: recursion depth)") from None
        except MemoryError:
            transient.hit(transient.MEMORY)  # not a verdict on the template: core/transient.py
            raise RenderLimitError(self.name, "out of memory (limit: memory)") from None
        except TemplateRenderError:
            raise
        except TypeError as e:
            if "no loader" in str(e):
                raise TemplateSecurityError(self.name, "templates may not import, include or extend other templates") from None
            raise TemplateRenderError(self.name, f"TypeError: {e}") from None
        except Exception as e:  # any other template-level failure: undefined, TypeError, …
            raise TemplateRenderError(self.name, f"{type(e).__name__}: {e}") from None
        finally:
            ENV._deadline = previous


def _chunks(compiled: jinja2.Template, ctx: dict[str, Any]) -> Iterator[str]:
    """``compiled.generate(ctx)`` without jinja2's traceback rewrite, except for a syntax error (whose message
    the rewrite changes): the same chunks, the same exceptions."""
    try:
        yield from compiled.root_render_func(compiled.new_context(ctx))
    except jinja2.exceptions.TemplateSyntaxError:
        compiled.environment.handle_exception()


def chat_globals(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 add_generation_prompt: bool = False, enable_thinking: bool = True,
                 extra_context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The globals llama.cpp's analysis renders with (analysis notes §2), in this order: ``messages``,
    ``bos_token`` / ``eos_token`` (""), ``enable_thinking``, ``tools`` only when non-empty, each ``extra_context``
    key, and ``add_generation_prompt`` **only when true** (otherwise undefined)."""
    ctx: dict[str, Any] = {"messages": messages, "bos_token": "", "eos_token": "", "enable_thinking": enable_thinking}
    if tools:
        ctx["tools"] = tools
    if extra_context:
        ctx.update(extra_context)
    if add_generation_prompt:
        ctx["add_generation_prompt"] = True
    return ctx


def apply_template(template: ChatTemplate, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   add_generation_prompt: bool = False, enable_thinking: bool = True,
                   extra_context: dict[str, Any] | None = None) -> str:
    """Render ``template`` with :func:`chat_globals` (llama.cpp's analysis conventions) in the transformers
    dialect. Raises what :meth:`ChatTemplate.render` raises."""
    return template.render(chat_globals(messages, tools, add_generation_prompt, enable_thinking, extra_context))
