"""Sandboxed Jinja rendering, configured as transformers' ``apply_chat_template`` configures it.

* jinja2 ``ImmutableSandboxedEnvironment`` with ``trim_blocks``, ``lstrip_blocks``, ``loopcontrols`` and the
  ``{% generation %}`` block tag (transformers' assistant-mask extension; here it only renders its body);
* globals ``raise_exception(msg)`` and ``strftime_now(fmt)`` (the clock can be pinned for tests);
* transformers' ``tojson`` (``ensure_ascii=False``, ``indent``, ``separators``, ``sort_keys``);
* resource limits: a per-render deadline and output-size cap, and a bounded ``range``.

Compiled templates are cached by source text (an LRU in memory), so re-rendering the same template with
other inputs, as the analysis and the explorer do constantly, never recompiles.

Errors: :class:`~core.errors.TemplateSyntaxError` at compile time, :class:`~core.errors.TemplateRenderError`
(and its subclasses for sandbox refusals and exceeded limits) at render time.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import json
import marshal
import os
import pathlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import re

import jinja2
import jinja2.compiler
import jinja2.ext
import jinja2.nodes
import jinja2.optimizer
import jinja2.sandbox

from .errors import RenderLimitError, TemplateRenderError, TemplateSecurityError, TemplateSyntaxError


@dataclass(frozen=True)
class RenderLimits:
    """Resource limits for one render.

    ``timeout_s`` (seconds of wall time), ``max_output_chars`` (characters of rendered text, also the cap on
    any single string a template builds), ``max_range`` (items one ``range()`` call may produce).
    """

    timeout_s: float = 2.0
    max_output_chars: int = 1_000_000
    max_range: int = 100_000


DEFAULT_LIMITS = RenderLimits()


class _TemplateRaised(Exception):
    """Raised by the template's own ``raise_exception`` call."""


class GenerationBlockExtension(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}``: renders the body unchanged (transformers' AssistantTracker
    marks assistant tokens with it; rendering is what matters here)."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        """Parse ``{% generation %}`` … ``{% endgeneration %}`` into a scope node rendering the body as is."""
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


class _Deadline:
    """Per-render budget, checked from the sandbox hooks the template cannot avoid calling."""

    __slots__ = ("limits", "until")

    def __init__(self, limits: RenderLimits):
        self.limits = limits
        self.until = time.monotonic() + limits.timeout_s

    def check(self) -> None:
        if time.monotonic() > self.until:
            raise RenderLimitError("<render>", f"render took longer than {self.limits.timeout_s:g} s")


class _OnceOptimizer(jinja2.optimizer.Optimizer):
    """jinja2's constant folder, run once per expression node instead of once per nesting level.

    jinja2's code generator re-runs the optimizer on every expression it visits, and each run walks the
    whole subtree: O(size × depth) per expression, which the probe rewriter's extra filter nodes deepen.
    Folding works bottom-up and is deterministic for a given node and evaluation context, so a subtree the
    optimizer has already visited is a fixed point: skipping it generates the very same code, faster."""

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        # (id(node), autoescape) -> node; the node is kept so its id cannot be reused during this compile
        self._done: dict[tuple[int, Any], Any] = {}

    def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
        autoescape = getattr(args[0], "autoescape", None) if args else None
        if (id(node), autoescape) in self._done:
            return node
        result = super().visit(node, *args, **kwargs)
        self._done[(id(node), autoescape)] = node
        self._done[(id(result), autoescape)] = result
        return result


class _LimitedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Compiles ``a ~ b`` to a size-checked join, so string doubling in a loop stops at the output cap
    instead of exhausting memory (jinja2 otherwise calls ``str_join`` directly); folds constants once per
    node (:class:`_OnceOptimizer`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.optimizer is not None:
            self.optimizer = _OnceOptimizer(self.environment)

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: Any) -> None:
        self.write("environment.checked_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


# printf-style widths large enough to build a huge string from a tiny template ("%*s", "%9999999s").
_HUGE_PERCENT_WIDTH = re.compile(r"%[-+ #0]*(\*|\d{7,})")


class _LimitedSandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):
    """Immutable sandbox whose attribute access, calls and arithmetic check the active render budget."""

    code_generator_class = _LimitedCodeGenerator
    intercepted_binops = frozenset(["*", "**", "+", "%"])
    _deadline: _Deadline | None = None

    def _parse(self, source: str, name: str | None, filename: str | None) -> jinja2.nodes.Template:
        # The tree _check_syntax parsed, handed to the first compile of the same source by any environment
        # that parses alike (same lexer and extensions), so a new template is lexed and parsed once, not
        # twice. Taken, not shared: code generation and the probe rewriter change the tree in place.
        node = _PARSED.pop(source, None)
        if node is not None and _parses_alike(self):
            return node
        return super()._parse(source, name, filename)

    def _limit(self) -> int:
        return self._deadline.limits.max_output_chars if self._deadline else DEFAULT_LIMITS.max_output_chars

    def checked_concat(self, parts: Any) -> str:
        self._tick()
        out = "".join(map(str, parts))
        if len(out) > self._limit():
            raise RenderLimitError("<render>", f"string longer than {self._limit()} characters")
        return out

    def _tick(self) -> None:
        d = self._deadline
        if d is not None:
            d.check()

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        # jinja2 returns a silent Undefined for a refused attribute; refuse loudly instead, so a payload
        # never renders as "" and the user sees what the template tried to do.
        raise jinja2.exceptions.SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is not allowed")

    def getattr(self, obj: Any, attribute: str) -> Any:
        self._tick()
        if isinstance(attribute, str) and attribute.startswith("__"):
            # No chat template needs dunder attributes; refusing them all (even missing ones) makes every
            # introspection attempt fail loudly instead of rendering as an empty Undefined.
            raise jinja2.exceptions.SecurityError(f"access to attribute {attribute!r} is not allowed")
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self._tick()
        return super().getitem(obj, argument)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        __self._tick()
        if isinstance(getattr(__obj, "__self__", None), str):
            # str methods that pad (center, ljust, rjust, zfill, expandtabs) can allocate from one int
            limit = __self._limit()
            if any(isinstance(a, int) and a > limit for a in (*args, *kwargs.values())):
                raise RenderLimitError("<render>", f"string method argument above {limit}")
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        self._tick()
        limit = self._limit()
        if operator == "*":
            seq, n = (left, right) if isinstance(right, int) else (right, left)
            if isinstance(seq, (str, list)) and isinstance(n, int) and len(seq) * n > limit:
                raise RenderLimitError("<render>", f"string/list repetition beyond {limit} items")
        if operator == "%" and isinstance(left, str) and _HUGE_PERCENT_WIDTH.search(left):
            raise RenderLimitError("<render>", "printf-style width too large")
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > 1000:
            raise RenderLimitError("<render>", "exponent too large")
        result = super().call_binop(context, operator, left, right)
        if isinstance(result, (str, list)) and len(result) > limit:
            raise RenderLimitError("<render>", f"value larger than {limit} characters")
        return result


# source -> parsed tree awaiting its compile (see _LimitedSandbox._parse); a few entries, as a template is
# compiled right after it is checked.
_PARSED: "dict[str, jinja2.nodes.Template]" = {}
_PARSED_MAX = 8
_PARSED_MAX_CHARS = 500_000


def _parses_alike(env: jinja2.Environment) -> bool:
    """True when ``env`` lexes and parses exactly as the project environment (same lexer settings, whose
    Lexer jinja2 shares, and the same extensions), so a tree or a parse verdict of one holds for the other."""
    return env.lexer is _ENV.lexer and env.extensions.keys() == _ENV.extensions.keys()


def _tojson(value: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # transformers' override: no HTML escaping, keys in insertion order unless asked.
    if separators is not None:
        separators = tuple(separators)
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _width_checked(filter_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a padding/width filter so a huge width argument is refused before allocating."""

    @functools.wraps(filter_fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        limit = _ENV._limit()
        if any(isinstance(a, int) and not isinstance(a, bool) and a > limit for a in (*args[1:], *kwargs.values())):
            raise RenderLimitError("<render>", f"filter width above {limit}")
        return filter_fn(*args, **kwargs)

    return wrapper


def _size_checked(filter_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a filter so a string or list result larger than the output cap stops the render (``join``
    or ``replace`` in a loop can otherwise double a string until memory runs out)."""

    @functools.wraps(filter_fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = filter_fn(*args, **kwargs)
        if isinstance(result, (str, list)):
            limit = _ENV._limit()
            if len(result) > limit:
                raise RenderLimitError("<render>", f"filter result longer than {limit}")
        _ENV._tick()
        return result

    return wrapper


def _raise_exception(message: Any = "") -> None:
    raise _TemplateRaised(str(message))


@dataclass
class Clock:
    """Source of ``strftime_now``; ``fixed`` pins the date (tests and reproducible renders)."""

    fixed: _dt.datetime | None = None

    def now(self) -> _dt.datetime:
        """The pinned ``fixed`` datetime, else the current local time (naive ``datetime``)."""
        return self.fixed or _dt.datetime.now()


_clock = Clock()


def pin_clock(when: _dt.datetime | None) -> _dt.datetime | None:
    """Pin (or with ``None`` unpin) the date every template's ``strftime_now`` and the request path's
    ``datetime`` / ``date_string`` see. Returns the previous pin (``None`` when the clock was live), so a caller
    can restore it; :func:`pinned_clock` does that for a block."""
    previous, _clock.fixed = _clock.fixed, when
    return previous


@contextlib.contextmanager
def pinned_clock(when: _dt.datetime | None) -> Iterator[None]:
    """Context manager: the clock pinned to ``when`` inside the block, the previous pin restored after it."""
    previous = pin_clock(when)
    try:
        yield
    finally:
        pin_clock(previous)


def now() -> _dt.datetime:
    """What templates see as "now": the pinned datetime if any (tests, reproducible renders), else local time."""
    return _clock.now()


def _strftime_now(fmt: str) -> str:
    return _clock.now().strftime(fmt)


def _make_environment() -> _LimitedSandbox:
    env = _LimitedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[GenerationBlockExtension, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    for name in ("center", "indent", "wordwrap", "truncate"):
        env.filters[name] = _width_checked(env.filters[name])
    for name, fn in list(env.filters.items()):
        env.filters[name] = _size_checked(fn)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


_ENV = _make_environment()


def normalize_source(source: str) -> str:
    """Source as llama.cpp's lexer sees it: CRLF and lone CR become LF, one trailing ``\\n`` removed.
    All substring tests (workarounds, handler detection) use this form."""
    s = source.replace("\r\n", "\n").replace("\r", "\n")
    return s[:-1] if s.endswith("\n") else s


# Bump when the code generator or environment changes what compiled code looks like (edits of this file are
# picked up automatically: its digest is part of every cache key).
_CODEGEN_VERSION = "2"


def _disk_cache_dir() -> pathlib.Path | None:
    """Where compiled templates persist across restarts: ``$CTE_CACHE_DIR`` or ``~/.cache/chat-template-explorer``;
    ``CTE_NO_DISK_CACHE=1`` disables it."""
    if os.environ.get("CTE_NO_DISK_CACHE") == "1":
        return None
    base = os.environ.get("CTE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chat-template-explorer")
    return pathlib.Path(base) / "jinja"


@functools.lru_cache(maxsize=None)
def module_digest(path: str) -> str:
    """sha256 prefix of a source file's bytes ("" if unreadable): part of compiled-code cache keys, so editing
    a module that shapes code generation (this one, an AST rewriter) invalidates what it compiled."""
    try:
        return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return ""


def _cache_key(source: str, env_tag: str = "") -> str:
    tag = (f"{_CODEGEN_VERSION}|{jinja2.__version__}|{sys.version_info[:2]}|{module_digest(__file__)}|"
           f"{env_tag}|").encode()
    return hashlib.sha256(tag + source.encode("utf-8", "surrogatepass")).hexdigest()


_CODE_MEMO: "dict[tuple[str, str], Any]" = {}
_CODE_MEMO_MAX = 1024


def compiled_code(env: jinja2.Environment, source: str, env_tag: str = "") -> Any:
    """Python code object of ``source`` compiled by ``env`` (jinja2 ``Environment.compile``), memoized in
    memory and in the disk cache (see :func:`_disk_cache_dir`) under ``env_tag`` — a string naming the
    environment's code-generation configuration (and a digest of any module that customises parsing or code
    generation). Loading marshalled code is ~10x cheaper than jinja2's compile (lexing, parsing, code
    generation, Python ``compile``). Raises ``jinja2.TemplateSyntaxError`` (and ``RecursionError``) as
    ``env.compile`` does; failures are not cached."""
    key = (env_tag, source)
    code = _CODE_MEMO.get(key)
    if code is not None:
        return code
    directory = _disk_cache_dir()
    path = directory / (_cache_key(source, env_tag) + ".bin") if directory else None
    if path is not None:
        try:
            code = marshal.loads(path.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            code = None
    if code is None:
        code = env.compile(source)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(marshal.dumps(code))
                os.replace(tmp, path)
                if _parses_alike(env):  # lets _check_syntax of a later process skip its parse
                    _syntax_marker(directory, source).touch()
            except OSError:
                pass  # a read-only or full cache only costs speed
    if len(_CODE_MEMO) >= _CODE_MEMO_MAX:
        _CODE_MEMO.pop(next(iter(_CODE_MEMO)))
    _CODE_MEMO[key] = code
    return code


def _syntax_marker(directory: pathlib.Path, source: str) -> pathlib.Path:
    """Empty file whose presence says ``source`` parsed in an environment that parses alike: the analysis
    only compiles with its probe environment, whose entries :func:`_check_syntax` cannot name without
    importing the analysis."""
    return directory / (_cache_key(source, "parsed") + ".ok")


def template_from_code(env: jinja2.Environment, code: Any) -> jinja2.Template:
    """A jinja2 ``Template`` of ``env`` running ``code`` (from :func:`compiled_code`)."""
    return env.template_class.from_code(env, code, env.make_globals(None), None)


def _load_compiled(source: str) -> jinja2.Template:
    """Compile ``source`` with the project environment, through :func:`compiled_code`'s caches."""
    return template_from_code(_ENV, compiled_code(_ENV, source))


@functools.lru_cache(maxsize=512)
def _compile(source: str, name: str) -> jinja2.Template:
    try:
        return _load_compiled(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateSyntaxError(name, e.message or str(e), e.lineno) from None
    except RecursionError:
        raise TemplateSyntaxError(name, "template nests too deeply to compile") from None


@functools.lru_cache(maxsize=1024)
def _check_syntax(source: str, name: str) -> None:
    """Raise :class:`TemplateSyntaxError` if ``source`` does not parse. Skipped when compiled code for it is
    already memoized or on disk (it parsed before); otherwise the tree is kept for the first compile (one
    parse per template, see ``_LimitedSandbox._parse``). Errors found only by code generation (an unknown filter)
    surface at the first render, as the same error class."""
    if ("", source) in _CODE_MEMO:
        return
    directory = _disk_cache_dir()
    if directory is not None and (_syntax_marker(directory, source).exists()
                                  or (directory / (_cache_key(source) + ".bin")).exists()):
        return
    try:
        node = _ENV.parse(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateSyntaxError(name, e.message or str(e), e.lineno) from None
    except RecursionError:
        raise TemplateSyntaxError(name, "template nests too deeply to parse") from None
    if len(source) > _PARSED_MAX_CHARS:  # a huge tree is not kept waiting: its compile parses again
        return
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)), None)
    _PARSED[source] = node


def source_digest(source: str) -> str:
    """Short stable id of a template source (sha256 prefix, 16 hex chars)."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


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
        _check_syntax(self.source, self.name)

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
        compiled = self._compiled  # may raise TemplateSyntaxError (first render compiles)
        deadline = _Deadline(self.limits)
        ctx = dict(context)
        ctx.setdefault("range", _bounded_range(deadline))
        previous = _ENV._deadline
        _ENV._deadline = deadline
        try:
            out: list[str] = []
            size = 0
            for chunk in compiled.generate(ctx):
                size += len(chunk)
                if size > self.limits.max_output_chars:
                    raise RenderLimitError(self.name, f"output longer than {self.limits.max_output_chars} characters")
                out.append(chunk)
                deadline.check()
            return "".join(out)
        except RenderLimitError as e:
            raise RenderLimitError(self.name, e.message) from None
        except _TemplateRaised as e:
            raise TemplateRenderError(self.name, f"raise_exception: {e}") from None
        except jinja2.exceptions.SecurityError as e:
            raise TemplateSecurityError(self.name, f"sandbox refused: {e}") from None
        except RecursionError:
            raise RenderLimitError(self.name, "recursion too deep") from None
        except MemoryError:
            raise RenderLimitError(self.name, "out of memory") from None
        except TemplateRenderError:
            raise
        except TypeError as e:
            if "no loader" in str(e):
                raise TemplateSecurityError(self.name, "templates may not import, include or extend other templates") from None
            raise TemplateRenderError(self.name, f"TypeError: {e}") from None
        except Exception as e:  # any other template-level failure: undefined, TypeError, …
            raise TemplateRenderError(self.name, f"{type(e).__name__}: {e}") from None
        finally:
            _ENV._deadline = previous


def _bounded_range(deadline: _Deadline) -> Callable[..., Any]:
    def _range(*args: int) -> Any:
        r = range(*args)
        if len(r) > deadline.limits.max_range:
            raise RenderLimitError("<render>", f"range() of {len(r)} items exceeds {deadline.limits.max_range}")

        def gen() -> Any:
            for x in r:
                deadline.check()
                yield x

        return _RangeView(r, gen)

    return _range


class _RangeView:
    """What ``range()`` returns inside templates: iterable (with deadline checks), ``len``-able and
    indexable like a real range, so ``range(n)|list`` and ``range(n)[0]`` keep working."""

    __slots__ = ("_r", "_gen")

    def __init__(self, r: range, gen: Callable[[], Any]):
        self._r = r
        self._gen = gen

    def __iter__(self) -> Any:
        return self._gen()

    def __len__(self) -> int:
        return len(self._r)

    def __getitem__(self, i: Any) -> Any:
        return self._r[i]

    def __reversed__(self) -> Any:
        return reversed(self._r)

    def __contains__(self, x: Any) -> bool:
        return x in self._r


def apply_template(
    template: ChatTemplate,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    enable_thinking: bool = True,
    extra_context: dict[str, Any] | None = None,
    bos_token: str = "",
    eos_token: str = "",
) -> str:
    """Render the way llama.cpp's analysis does (analysis notes §2): globals in this order —
    ``messages``, ``bos_token``/``eos_token``, ``enable_thinking``, ``tools`` only when non-empty,
    each ``extra_context`` key, and ``add_generation_prompt`` **only when true** (otherwise undefined).

    Raises what :meth:`ChatTemplate.render` raises.
    """
    ctx: dict[str, Any] = {
        "messages": messages,
        "bos_token": bos_token,
        "eos_token": eos_token,
        "enable_thinking": enable_thinking,
    }
    if tools:
        ctx["tools"] = tools
    if extra_context:
        ctx.update(extra_context)
    if add_generation_prompt:
        ctx["add_generation_prompt"] = True
    return template.render(ctx)
