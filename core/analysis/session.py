"""One analysis run's rendering session: memoized renders and the recorded comparisons.

Every comparison of the analysis goes through :meth:`ProbeSession.compare`, which renders both variants
(each distinct input once per session — the same inputs recur across comparisons), diffs them with
:func:`core.diff.calculate_diff_split` and records a :class:`Comparison` (inputs, both renders, the diff
split, the fields it set, or the render error). A render error never propagates: it degrades that
comparison only (llama.cpp's ``compare_variants`` returning "no result").
"""

from __future__ import annotations

import marshal
from dataclasses import dataclass, field
from typing import Any, Callable

from ..diff import DiffSplit, RenderParams, calculate_diff_split
from ..errors import ChatTemplateExplorerError, RenderLimitError, TemplateRenderError
from ..memo import MISSING, BoundedMemo
from ..digest import source_digest
from ..jinja.template import ChatTemplate, apply_template, chat_globals
from .fidelity import STRING_ARGUMENT_PROBES, stringify_call_arguments, with_reasoning_field
from .result import Caps

from ..jinja import llama as _llama


#: limits whose hit depends on the machine's load or the process's memory, not on the template alone
_MOMENT_LIMITS = ("(limit: analysis budget", "(limit: render time", "(limit: compile time", "(limit: memory)")


@dataclass
class Comparison:
    """One A-versus-B render comparison of the analysis, kept so the app and CLI can show how each marker
    was found.

    ``id`` (e.g. ``"R1"``, ``"T3-close"``), ``title`` (a sentence), ``inputs_a`` / ``inputs_b`` (dict:
    messages, tools, add_generation_prompt, enable_thinking — messages as rendered, i.e. after content
    normalisation), ``output_a`` / ``output_b`` (renders, "" when failed), ``diff`` (None when a render
    failed), ``error`` (the render error or None), ``found`` (analysis field path → value this comparison
    set, e.g. ``{"reasoning.start": "<think>"}``), ``notes`` (free-text remarks of the step).
    """

    id: str
    title: str
    inputs_a: dict[str, Any]
    inputs_b: dict[str, Any]
    output_a: str = ""
    output_b: str = ""
    diff: DiffSplit | None = None
    error: str | None = None
    found: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True if both renders succeeded (``diff`` is set)."""
        return self.diff is not None

    def to_json(self) -> dict[str, Any]:
        """JSON dict with the field names above; ``diff`` as :meth:`DiffSplit.to_json` or None."""
        return {
            "id": self.id,
            "title": self.title,
            "inputs_a": self.inputs_a,
            "inputs_b": self.inputs_b,
            "output_a": self.output_a,
            "output_b": self.output_b,
            "diff": self.diff.to_json() if self.diff else None,
            "error": self.error,
            "found": self.found,
            "notes": self.notes,
        }


class _RenderFailure:
    """A memoized render failure as plain data (error class, template name, message): holding the exception
    itself would keep its traceback and ``__context__`` chain — every frame and variable of the failed render
    — alive for as long as the memo lives. ``error`` builds a fresh, chain-free exception each time."""

    __slots__ = ("cls", "name", "message")

    def __init__(self, error: Exception):
        if isinstance(error, TemplateRenderError):
            self.cls: type[TemplateRenderError] = type(error)
            self.name, self.message = error.name, error.message
        else:
            self.cls, self.name = TemplateRenderError, "<template>"
            self.message = f"{type(error).__name__}: {_msg(error)}"

    @property
    def error(self) -> TemplateRenderError:
        return self.cls(self.name, self.message)

    def size(self) -> int:
        return len(self.message)


def _identity(messages: list[dict[str, Any]], caps: Caps) -> list[dict[str, Any]]:
    return messages


# Renders shared across sessions of the same template source: a second analysis of a template (the explorer
# re-running, a warm benchmark, a batch cycling through a corpus: ~21 renders of ~2 KB per template) renders
# nothing. Sized for several passes over the 351-template corpus; plain data only (render text, or a
# _RenderFailure's strings), bounded in entries and in bytes.
_GLOBAL_CACHE = BoundedMemo("renders", max_entries=32_768, max_bytes=128 * 2**20)


def _memo_key(inputs: dict[str, Any]) -> Any:
    """Memo key of render inputs: their ``marshal`` bytes (format 2: no back-references, so the bytes depend
    on the values only, not on how objects are shared), ~8x cheaper than ``repr`` and ~14x than JSON for these
    plain inputs; ``repr`` for inputs marshal cannot write (a date in the extra context). Equal bytes mean
    equal values of equal types (``1`` and ``True``, lists and tuples differ); a string's interning can only
    make two equal inputs miss each other, never meet."""
    try:
        return marshal.dumps(inputs, 2)
    except ValueError:
        return repr(inputs)


class ProbeSession:
    """Renders probe inputs for one template with the analysis conventions (analysis notes §2).

    ``normalize(messages, caps)`` converts content shapes to what the template accepts (caps module).
    ``bos_token`` / ``eos_token`` are "" as in the reference. ``improvements``: names of the
    :mod:`core.analysis.fidelity` improvements in force (empty at llama.cpp fidelity, the default); the
    steps read it, and record in ``improvement_notes`` (name → remarks) the ones that changed something.
    """

    def __init__(self, template: ChatTemplate, caps: Caps,
                 normalize: Callable[[list[dict[str, Any]], Caps], list[dict[str, Any]]] | None = None,
                 engine: str = "llama", improvements: frozenset[str] = frozenset()):
        self.template = template
        self.caps = caps
        self.improvements = frozenset(improvements)
        self.improvement_notes: dict[str, list[str]] = {}
        # improvement reasoning-field: the other name the template reads reasoning under ("" = none)
        self.reasoning_field = ""
        # improvement null-content-calls: a call turn's empty content is sent as None
        self.null_call_content = False
        self.normalize = normalize or _identity
        self.comparisons: list[Comparison] = []
        self.failures: list[str] = []
        self.render_count = 0
        self._cache: dict[str, Any] = {}
        self.engine = engine
        # memo key of everything a render depends on besides its inputs (the source as its digest: it can be large)
        self._src = (engine, template.name, source_digest(template.source))

    def note_improvement(self, name: str, remark: str) -> None:
        """Record that improvement ``name`` changed something (``remark`` says what; duplicates dropped)."""
        notes = self.improvement_notes.setdefault(name, [])
        if remark not in notes:
            notes.append(remark)

    def _messages_for(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        msgs = self.normalize(messages, self.caps)
        if STRING_ARGUMENT_PROBES in self.improvements and not self.caps.supports_object_arguments:
            msgs, _ = stringify_call_arguments(msgs)  # recorded by T1 when the template prints that text
        if self.null_call_content:
            msgs = [{**m, "content": None} if isinstance(m, dict) and m.get("tool_calls") and m.get("content") == ""
                    else m for m in msgs]
        return with_reasoning_field(msgs, self.reasoning_field)

    def inputs_of(self, p: RenderParams) -> dict[str, Any]:
        """The render inputs as given to the template (messages normalised; with the
        ``string-argument-probes`` improvement, call arguments as JSON text when the template does not read
        object arguments; with ``reasoning-field``, reasoning also under :attr:`reasoning_field`)."""
        d = {
            "messages": self._messages_for(p.messages),
            "tools": p.tools or None,
            "add_generation_prompt": p.add_generation_prompt,
            "enable_thinking": p.enable_thinking,
        }
        if p.extra_context:
            d["extra_context"] = p.extra_context
        return d

    def render_inputs(self, inputs: dict[str, Any]) -> str:
        """Render an ``inputs_of`` dict (memoized). Raises the render error (also memoized)."""
        key = _memo_key(inputs)
        hit = self._cache.get(key)
        if hit is None:
            hit = _GLOBAL_CACHE.get((self._src, key))
            if hit is MISSING:
                hit = None
            else:
                self._cache[key] = hit
        if hit is None:
            hit = self._render_uncached(inputs)
            self.render_count += 1
            self._cache[key] = hit
            if not (isinstance(hit, _RenderFailure) and issubclass(hit.cls, RenderLimitError)
                    and any(m in hit.message for m in _MOMENT_LIMITS)):
                # a render cut by a wall-clock or memory limit may pass next time (core/transient.py): not shared
                size = len(key) + (len(hit) if isinstance(hit, str) else hit.size()) + 200
                _GLOBAL_CACHE.put((self._src, key), hit, size)
        if isinstance(hit, _RenderFailure):
            raise hit.error
        return hit

    def _render_uncached(self, inputs: dict[str, Any]) -> Any:
        ctx = dict(inputs.get("extra_context") or {})
        ctx["enable_thinking"] = inputs["enable_thinking"]
        if self.engine == "llama":
            full = chat_globals(inputs["messages"], inputs["tools"], inputs["add_generation_prompt"],
                                inputs["enable_thinking"], ctx)
            try:
                return _llama.render(self.template, full, template_tracebacks=False)  # kept: the message
            except Exception as e:
                return _RenderFailure(e)
        try:
            return apply_template(self.template, inputs["messages"], inputs["tools"],
                                  inputs["add_generation_prompt"], inputs["enable_thinking"],
                                  extra_context=ctx)
        except ChatTemplateExplorerError as e:
            return _RenderFailure(e)
        except Exception as e:  # a template-level bug we did not classify: still only this probe fails
            return _RenderFailure(e)

    def render(self, p: RenderParams) -> str:
        """Render one :class:`RenderParams` (memoized). Raises the render error."""
        return self.render_inputs(self.inputs_of(p))

    def compare(self, id_: str, title: str, a: RenderParams, b: RenderParams) -> Comparison:
        """Render A and B, diff them, record and return the :class:`Comparison` (``diff`` None and
        ``error`` set when a render failed; the failure is also listed in ``failures``)."""
        ia, ib = self.inputs_of(a), self.inputs_of(b)
        cmp = Comparison(id_, title, ia, ib)
        self.comparisons.append(cmp)
        try:
            cmp.output_a = self.render_inputs(ia)
        except Exception as e:
            cmp.error = f"variant A failed to render: {_msg(e)}"
        if cmp.error is None:
            try:
                cmp.output_b = self.render_inputs(ib)
            except Exception as e:
                cmp.error = f"variant B failed to render: {_msg(e)}"
        if cmp.error is None:
            cmp.diff = calculate_diff_split(cmp.output_a, cmp.output_b)
        else:
            self.failures.append(f"{id_}: {cmp.error}")
        return cmp


def _msg(e: Exception) -> str:
    m = getattr(e, "message", None)
    return m if isinstance(m, str) and m else str(e)
