"""The lint checks. Each ``check_*`` function is pure: it takes a :class:`LintContext` (the template, its
analysis and memoised renders) and returns findings. :func:`core.lint.lint` runs them all.

Two renderers are used, both through the project's sandbox: the transformers-style render
(:meth:`core.jinja.template.ChatTemplate.render` with the globals ``transformers.apply_chat_template`` passes:
``messages``, ``tools`` (None when absent), ``add_generation_prompt`` (always a bool), ``bos_token``,
``eos_token`` and the chat-template kwarg ``enable_thinking``) and the llama.cpp-compatible render
(:func:`core.jinja.llama.render` with llama.cpp's globals: ``tools`` only when non-empty,
``add_generation_prompt`` only when true — analysis notes §2).
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import ChatTemplateExplorerError
from ..jinja.hf import pinned_clock
from ..jinja.llama import render as llama_render
from ..diff import common_prefix_len
from ..jinja.template import ChatTemplate, chat_globals
from .model import Finding, Kind, Severity, visible
from .shapes import THINK, Needs, Shape, shapes
from ..chat.roundtrip import CONTENT_TEXT, REASONING_TEXT, eligibility, round_trip, round_trip_message
from ..chat.pipeline import cached_analysis
from ..analysis.preserved import get_path

_CONTEXT = 60  # characters of evidence either side of a position


@dataclass
class Render:
    """One render: ``text`` or ``error`` (the one-line render error)."""

    text: str = ""
    error: str | None = None


@dataclass
class LintContext:
    """What the checks share: ``template``, ``report`` (the analysis report, None when the analysis failed),
    ``fidelity``, ``shapes`` and the memoised renders (``transformers`` / ``llama`` by key)."""

    template: ChatTemplate
    report: Any
    fidelity: str = "llama.cpp"
    shapes: list[Shape] = field(default_factory=shapes)
    _memo: dict[tuple[str, str], Render] = field(default_factory=dict)

    @property
    def caps(self) -> Any:
        """The analysis's capabilities (None without an analysis)."""
        return getattr(getattr(self.report, "analysis", None), "caps", None)

    def render(self, engine: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool, enable_thinking: bool = True,
               llama_context: bool | None = None) -> Render:
        """Render with ``engine`` ``"transformers"`` or ``"llama"`` (memoised). ``llama_context``: use
        llama.cpp's globals convention (default: for the llama engine only)."""
        if llama_context is None:
            llama_context = engine == "llama"
        key = (engine + ("+llctx" if llama_context else ""),
               json.dumps([messages, tools, add_generation_prompt, enable_thinking], sort_keys=True, default=str))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        msgs, tls = copy.deepcopy(messages), copy.deepcopy(tools)
        if llama_context:
            ctx = chat_globals(msgs, tls, add_generation_prompt, enable_thinking)
        else:
            ctx = {"messages": msgs, "tools": tls or None, "add_generation_prompt": add_generation_prompt,
                   "bos_token": "", "eos_token": "", "enable_thinking": enable_thinking}
        try:
            if engine == "llama":
                out = Render(llama_render(self.template, ctx))
            else:
                out = Render(self.template.render(ctx))
        except ChatTemplateExplorerError as e:
            out = Render(error=_one_line(str(e)))
        except Exception as e:  # noqa: BLE001 - a template bug is a finding, never a crash of the linter
            out = Render(error=_one_line(f"{type(e).__name__}: {e}"))
        self._memo[key] = out
        return out

    def shape_render(self, shape: Shape, engine: str = "transformers") -> Render:
        """Render a whole shape (generation prompt when it ends with a user/tool turn)."""
        return self.render(engine, shape.messages, shape.tools, shape.add_generation_prompt, shape.enable_thinking)


def _one_line(s: str) -> str:
    return " ".join(s.split())[:300]


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based (line, column) of character offset ``pos`` in ``text``."""
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def _around(text: str, pos: int) -> str:
    lo = max(0, pos - _CONTEXT)
    return ("…" if lo else "") + visible(text[lo:pos], None) + "⟦" + visible(text[pos:pos + _CONTEXT], None) + \
        ("…" if pos + _CONTEXT < len(text) else "")


# ------------------------------------------------------------------------------------------------ render matrix


def _raise_severity(shape: Shape, caps: Any) -> Severity:
    if shape.needs == Needs.BASIC:
        return Severity.ERROR
    if shape.needs == Needs.TOOLS:
        return Severity.WARNING if caps is None or caps.supports_tool_calls else Severity.INFO
    if shape.needs == Needs.SYSTEM:
        return Severity.WARNING if caps is None or caps.supports_system_role else Severity.INFO
    if shape.needs == Needs.REASONING:
        return Severity.WARNING
    return Severity.INFO


_RAISE_HINT = {
    Needs.BASIC: "every chat template should render this conversation; fix the condition that raises",
    Needs.SYSTEM: "accept a system message (or fold it into the first user turn) instead of raising",
    Needs.TOOLS: "OpenAI clients send this shape with tools; render it, or document that the model has no tools",
    Needs.REASONING: "accept reasoning_content on assistant turns (drop it from history if the model needs that)",
    Needs.TYPED: "OpenAI clients may send content as a list of {type: text} parts; join their text",
    Needs.EDGE: "the OpenAI API accepts this shape; render it or raise with a message that says what to send",
}


def check_render_matrix(ctx: LintContext) -> list[Finding]:
    """``render/<shape>``: the shapes whose transformers-style render raises, with the message."""
    out = []
    for shape in ctx.shapes:
        r = ctx.shape_render(shape)
        if r.error is None:
            continue
        out.append(Finding(
            f"render/{shape.id}", Kind.RENDER, _raise_severity(shape, ctx.caps),
            f"raises on {shape.title}", _RAISE_HINT[shape.needs],
            {"error": visible(r.error, spaces=False),
             "messages": visible(json.dumps(shape.messages, ensure_ascii=False))},
            {"shape": shape.id, "needs": shape.needs.value}))
    return out


# ------------------------------------------------------------------------------------------------ divergence

_KNOWN_CONSTRUCTS = [
    (re.compile(r"\|\s*safe\b"), "safe", "`| safe` HTML-escapes what is added to it in jinja2, not in llama.cpp"),
    (re.compile(r"\|\s*format\b|\bformat\("), "format",
     "`format` fills %-placeholders in jinja2, only {} placeholders in llama.cpp"),
    (re.compile(r"\|\s*(map|select|reject|selectattr|rejectattr)\b"), "filters-as-lists",
     "map/select give generators in jinja2, lists in llama.cpp"),
    (re.compile(r"\+\s*[a-z_.\[\]'\"]+|~"), "concatenation",
     "`str + x` concatenates x's string form in llama.cpp, raises or prints None in jinja2"),
    (re.compile(r"\btojson\b"), "tojson", "tojson spacing and key order differ between the engines"),
]


def _divergence_cause(ctx: LintContext, shape: Shape, tr: Render, ll: Render) -> tuple[str, str]:
    """(cause id, why) of a difference between the two renders of ``shape``."""
    if (tr.error is None) != (ll.error is None):
        side = "transformers" if tr.error else "llama"
        return f"raises-{side}", ("only the transformers-style render raises" if tr.error
                                  else "only the llama.cpp-compatible render raises")
    tr_ll = ctx.render("transformers", shape.messages, shape.tools, shape.add_generation_prompt,
                       shape.enable_thinking, llama_context=True)
    if tr_ll.error is None and tr_ll.text == ll.text:
        return "context", ("the template tests `add_generation_prompt` or `tools` for being defined: llama.cpp "
                           "leaves them undefined when false/empty, transformers passes False/None")
    pos = common_prefix_len(tr.text, ll.text)
    a, b = tr.text[pos:pos + 40], ll.text[pos:pos + 40]
    if a.startswith("None") or b.startswith("None"):
        return "none-printing", "jinja2 prints a none value as `None`, llama.cpp prints nothing"
    if any(e in a for e in ("&lt;", "&gt;", "&#39;", "&#34;", "&quot;", "&amp;")):
        return "safe", "`| safe` makes jinja2 HTML-escape the strings added to it; llama.cpp's safe is a no-op"
    if re.match(r"\s*\{['\"]|\s*\[['\"{]", a) or re.match(r"\s*\{['\"]|\s*\[['\"{]", b):
        return "mapping-printing", "a mapping or list is printed differently (Python repr in jinja2)"
    if a[:4] in ("True", "Fals") or b[:4] in ("true", "fals"):
        return "boolean-printing", "booleans print as True/False in jinja2, true/false in llama.cpp"
    used = [(name, why) for rx, name, why in _KNOWN_CONSTRUCTS if rx.search(ctx.template.source)]
    if used:
        return "engine", "the template uses constructs the engines evaluate differently: " + \
            "; ".join(why for _, why in used)
    return "engine", "the Jinja engines evaluate an expression differently (not one of the known divergences)"


DIVERGENCE_SHAPES = ("user", "system-user", "system-multi-turn", "assistant-final", "unicode", "markup-in-content",
                     "typed-user", "typed-system", "tools-user", "call-object-args", "call-string-args",
                     "parallel-results", "call-with-content", "reasoning-final", "reasoning-in-history",
                     "thinking-off", "developer-role", "content-null-final")
"""The shapes rendered by both engines (a cross-section of the matrix: the llama.cpp-compatible renderer is
about as costly as the whole rest of the lint, so not every shape is rendered twice)."""


def check_divergence(ctx: LintContext) -> list[Finding]:
    """``divergence/<cause>``: the transformers-style and the llama.cpp-compatible render of the same shape
    (:data:`DIVERGENCE_SHAPES`) differ — one finding per cause, with the first differing position of the first
    shape and the list of shapes."""
    by_cause: dict[str, Finding] = {}
    wanted = set(DIVERGENCE_SHAPES)
    for shape in ctx.shapes:
        if shape.id not in wanted:
            continue
        tr, ll = ctx.shape_render(shape, "transformers"), ctx.shape_render(shape, "llama")
        if tr.error and ll.error or (tr.error is None and ll.error is None and tr.text == ll.text):
            continue
        cause, why = _divergence_cause(ctx, shape, tr, ll)
        f = by_cause.get(cause)
        if f is not None:
            f.data["shapes"].append(shape.id)
            continue
        if tr.error or ll.error:
            ev = {"transformers": visible(tr.error, spaces=False) if tr.error else visible(tr.text),
                  "llama.cpp": visible(ll.error, spaces=False) if ll.error else visible(ll.text)}
            data: dict[str, Any] = {"shapes": [shape.id]}
        else:
            pos = common_prefix_len(tr.text, ll.text)
            line, col = line_col(tr.text, pos)
            ev = {"position": f"character {pos} (line {line}, column {col}) of the render of {shape.id}",
                  "transformers": _around(tr.text, pos), "llama.cpp": _around(ll.text, pos)}
            data = {"shapes": [shape.id], "position": pos}
        sev = Severity.WARNING if cause.startswith("raises-") else Severity.INFO
        by_cause[cause] = Finding(
            f"divergence/{cause}", Kind.DIVERGENCE, sev, f"transformers and llama.cpp render differently: {why}",
            "write the template so both engines agree (test `is defined and x`, avoid printing none or "
            "mappings, build strings with ~ and tojson)", ev, data)
    for f in by_cause.values():
        f.title += f" ({len(f.data['shapes'])} shape{'s' if len(f.data['shapes']) != 1 else ''})"
    return list(by_cause.values())


# ------------------------------------------------------------------------------------------------ prefix stability

PREFIX_SHAPES = ("system-multi-turn", "call-result-answer", "reasoning-two-turns", "two-call-rounds")


def check_prefix_stability(ctx: LintContext) -> list[Finding]:
    """``prefix/generation-prompt``: the prompt (conversation + generation prompt) is not a prefix of the
    render once the assistant turn exists, but the conversation without it is — the generation prompt's
    contribution differs from how the turn is written. ``prefix/reasoning-dropped``: extending a conversation
    by one turn removes reasoning from an earlier turn. ``prefix/history``: extending it changes earlier text
    otherwise. Checked on the multi-turn shapes :data:`PREFIX_SHAPES`; one finding per id, first occurrence."""
    found: dict[str, Finding] = {}
    by_id = {s.id: s for s in ctx.shapes}
    for sid in PREFIX_SHAPES:
        shape = by_id.get(sid)
        if shape is None:
            continue
        msgs, tools, et = shape.messages, shape.tools, shape.enable_thinking
        for i in range(1, len(msgs)):
            full = ctx.render("transformers", msgs[:i + 1], tools, False, et)
            before = ctx.render("transformers", msgs[:i], tools, False, et)
            if full.error or before.error:
                break
            if msgs[i].get("role") == "assistant":
                prompt = ctx.render("transformers", msgs[:i], tools, True, et)
                if prompt.error is None and not full.text.startswith(prompt.text) \
                        and full.text.startswith(before.text) and "prefix/generation-prompt" not in found:
                    gp = prompt.text[len(before.text):] if prompt.text.startswith(before.text) else prompt.text
                    pos = common_prefix_len(prompt.text, full.text)
                    found["prefix/generation-prompt"] = Finding(
                        "prefix/generation-prompt", Kind.PREFIX, Severity.WARNING,
                        "the generation prompt is not how the template writes the assistant turn in history",
                        "make the generation prompt the exact start of the rendered assistant turn (or render "
                        "history turns with it), so the prompt's cache and training masks line up",
                        {"generation prompt": visible(gp), "prompt at the difference": _around(prompt.text, pos),
                         "history at the difference": _around(full.text, pos),
                         "position": f"character {pos}, {len(before.text)} is where the generation prompt starts"},
                        {"shape": sid, "turn": i, "position": pos, "generation_prompt": gp})
                continue
            if full.text.startswith(before.text):
                continue
            pos = common_prefix_len(before.text, full.text)
            removed = before.text[pos:]
            fid = "prefix/reasoning-dropped" if _drops_reasoning(ctx, removed, full.text[pos:]) \
                else "prefix/history"
            if fid in found:
                continue
            line, col = line_col(before.text, pos)
            if fid == "prefix/reasoning-dropped":
                title = "adding a turn removes reasoning from an earlier assistant turn"
                hint = "by design in many reasoning templates; servers cannot reuse the KV cache past that turn"
                sev = Severity.INFO
            else:
                title = "adding a turn rewrites earlier text of the conversation"
                hint = "keep earlier turns byte-identical when a turn is appended (KV-cache reuse, training masks)"
                sev = Severity.WARNING
            found[fid] = Finding(
                fid, Kind.PREFIX, sev, title, hint,
                {"position": f"character {pos} (line {line}, column {col}), adding message {i} "
                             f"({msgs[i].get('role')}) of {sid}",
                 "before": _around(before.text, pos), "after": _around(full.text, pos)},
                {"shape": sid, "turn": i, "position": pos})
    return list(found.values())


def _drops_reasoning(ctx: LintContext, removed: str, kept: str) -> bool:
    if THINK in removed and THINK not in kept:
        return True
    a = getattr(ctx.report, "analysis", None)
    start = (getattr(getattr(a, "reasoning", None), "start", "") or "").strip()
    return bool(start) and removed.lstrip().startswith(start) and not kept.lstrip().startswith(start)


# ------------------------------------------------------------------------------------------------ round trip


def _cause_key(status: str, why: str) -> str:
    if status == "parser_mismatch":
        return "parser-mismatch"
    if status == "parser_error":
        return "parser-error"
    low = why.lower()
    if low.startswith("template raises"):
        return "raises"
    if "does not line up" in low:
        return "misaligned"
    if low.startswith("template drops"):
        first = why[len("template drops "):].split(",")[0].strip()
        for key in ("content", "reasoning", "tool call", "argument value"):
            if first.startswith(key):
                return "drops-" + key.replace(" ", "-")
    return "limited"


def roundtrip_messages() -> dict[str, tuple[dict[str, Any], bool]]:
    """The assistant messages of the per-shape round trip: id → (message, needs tool calls). ``standard`` is
    :func:`core.chat.roundtrip.round_trip_message` (the message ``tests/test_roundtrip.py`` uses)."""
    single = round_trip_message()
    single["tool_calls"] = single["tool_calls"][:1]
    single["content"] = ""
    return {
        "standard": (round_trip_message(), True),
        "single-call": (single, True),
        "content": ({"role": "assistant", "content": CONTENT_TEXT, "reasoning_content": REASONING_TEXT}, False),
    }


def check_roundtrip(ctx: LintContext) -> list[Finding]:
    """``roundtrip/<message>/<cause>``: the assistant messages of :func:`roundtrip_messages`, rendered and
    parsed back with our generated parser (:func:`core.chat.roundtrip.round_trip`, the template's fidelity);
    what is lost and why (the round trip's own reason, verbatim in the evidence). Messages with tool calls only
    for tool-capable templates (:func:`core.chat.roundtrip.eligibility`)."""
    if ctx.report is None:
        return []
    el = eligibility(ctx.template, ctx.fidelity)
    out = []
    for mid, (msg, needs_tools) in roundtrip_messages().items():
        if needs_tools and not el.eligible:
            continue
        res = round_trip(ctx.template, msg, None if needs_tools else [], report=ctx.report, reduce=False,
                         fidelity=ctx.fidelity)
        ids = [c.get("id") for c in msg.get("tool_calls") or [] if c.get("id")]
        if ids and res.rendered_output and not any(i in res.rendered_output for i in ids):
            out.append(Finding(
                f"roundtrip/{mid}/drops-ids", Kind.ROUNDTRIP, Severity.INFO,
                f"the template does not render the call ids of the {mid} message",
                "render each call's id (tool results refer to it); without it the parser makes up new ids",
                {"ids": ", ".join(ids), "rendered output": visible(res.rendered_output)},
                {"message": mid, "status": res.status.value, "why": None}))
        if res.ok:
            continue
        status = res.status.value
        cause = _cause_key(status, res.why or "")
        parser_side = status in ("parser_mismatch", "parser_error")
        ev = {"why": visible(res.why or "", None, spaces=False), "rendered output": visible(res.rendered_output)}
        if res.parsed is not None:
            ev["parsed"] = visible(json.dumps(res.parsed, ensure_ascii=False))
            ev["expected"] = visible(json.dumps(res.expected, ensure_ascii=False))
        out.append(Finding(
            f"roundtrip/{mid}/{cause}", Kind.ROUNDTRIP, Severity.ERROR if parser_side else Severity.WARNING,
            (f"the {mid} message does not parse back: " if parser_side else
             f"the template cannot represent the {mid} message: ") + _one_line(res.why or status),
            "the parser built from the analysis misreads the template's own output: check the markers the "
            "analysis found (override them) or report it" if parser_side else
            "render every part of an OpenAI assistant message (content beside calls, reasoning, every call and "
            "argument), or document what the model never produces",
            ev, {"message": mid, "status": status, "why": res.why, "variant": res.variant}))
    return out


# ------------------------------------------------------------------------------------------------ probes


def _safe_retry(inputs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    msgs = copy.deepcopy(inputs.get("messages") or [])
    fixes = []
    for m in msgs:
        if m.get("content") is None:
            m["content"] = ""
            if "content: null → \"\"" not in fixes:
                fixes.append("content: null → \"\"")
    if not any(m.get("role") == "user" for m in msgs):
        msgs.insert(0, {"role": "user", "content": "Hello"})
        fixes.append("a user turn added")
    return {**inputs, "messages": msgs}, fixes


def check_probes(ctx: LintContext) -> list[Finding]:
    """``probe/<comparison id>``: an analysis probe raised (the analysis part it serves is degraded, as in
    llama.cpp). A safe retry — content null replaced by "", a user turn added to an empty conversation —
    renders the failing input again with the llama.cpp-compatible renderer; ``data.recovered`` says whether
    the template accepts it. A JSON tool call that does not parse (T1) is retried at improved fidelity
    (string-argument probes)."""
    rep = ctx.report
    if rep is None:
        return []
    out = []
    seen: set[str] = set()
    for cmp in rep.comparisons:
        if not cmp.error or cmp.id in seen:
            continue
        seen.add(cmp.id)
        inputs = cmp.inputs_b if cmp.error.startswith("variant B") else cmp.inputs_a
        retry, fixes = _safe_retry(inputs)
        recovered = False
        if fixes:
            r = ctx.render("llama", retry["messages"], retry.get("tools"), bool(retry.get("add_generation_prompt")),
                           bool(retry.get("enable_thinking", True)))
            recovered = r.error is None
        out.append(Finding(
            f"probe/{cmp.id}", Kind.PROBE, Severity.WARNING,
            f"analysis probe {cmp.id} raised: {_one_line(cmp.error)}",
            ("the template rejects a shape the analysis uses (" + ", ".join(fixes) + ") and accepts it once "
             "fixed: accept it too" if recovered else
             "the template rejects this probe input; the analysis part it serves is degraded"),
            {"error": visible(cmp.error, spaces=False), "probe": visible(cmp.title, spaces=False),
             "retry": ("with " + ", ".join(fixes) + ": " + ("renders" if recovered else "still raises"))
             if fixes else "no safe retry for this input"},
            {"probe": cmp.id, "recovered": recovered, "fixes": fixes}))
    for failure in rep.probe_failures:
        pid = failure.split(":", 1)[0]
        if pid in seen:
            continue
        seen.add(pid)
        recovered = False
        if pid == "T1" and ctx.fidelity != "improved":
            try:
                imp = cached_analysis(ctx.template, "improved")
                recovered = not any(f.startswith("T1") for f in imp.probe_failures)
            except ChatTemplateExplorerError:
                recovered = False
        out.append(Finding(
            f"probe/{pid}", Kind.PROBE, Severity.WARNING, f"analysis probe {pid} failed: {_one_line(failure)}",
            "improved fidelity recovers it (string-argument-probes)" if recovered else
            "the analysis part this probe serves is degraded",
            {"error": visible(failure, spaces=False),
             "retry": "improved fidelity: " + ("recovers" if recovered else "no")},
            {"probe": pid, "recovered": recovered}))
    return out


# ------------------------------------------------------------------------------------------------ markers

_HYGIENE_FIELDS = ("reasoning.start", "reasoning.end", "content.start", "content.end",
                   "tools.format.section_start", "tools.format.section_end", "tools.format.per_call_start",
                   "tools.format.per_call_end")
_PLAIN = re.compile(r"^[\w\s:.,;!?'\"()\-]+$")
_TAG = re.compile(r"<\|?/?[A-Za-z_][\w:.\-]*\|?>|\[/?[A-Z_]{3,}\]")
_GEN_OPEN = re.compile(r"(\{%-?\s*generation\s*-?%\})")
_GEN_CLOSE = re.compile(r"(\{%-?\s*endgeneration\s*-?%\})")
_GEN_S, _GEN_E = "\x1eGEN_OPEN\x1e", "\x1eGEN_CLOSE\x1e"


def _markers(ctx: LintContext) -> dict[str, str]:
    a = ctx.report.analysis
    out = {}
    for path in _HYGIENE_FIELDS:
        v = str(get_path(a, path) or "").strip()
        if v:
            out[path] = v
    return out


def check_markers(ctx: LintContext) -> list[Finding]:
    """Marker hygiene. ``marker/prefix/<field>/<field>``: a marker is a proper prefix of another (a streaming
    parser or a grammar trigger cannot tell them apart until more text arrives). ``marker/ordinary-text/<field>``:
    a marker made only of words and punctuation, or a single character, likely to appear in ordinary text.
    ``marker/instructions/<tag>``: the tool instructions name a tag the rendered tool call never contains.
    ``marker/generation-block``: text after ``{% endgeneration %}`` in an assistant turn (usually the
    end-of-turn marker) is left out of the assistant mask."""
    out: list[Finding] = []
    if ctx.report is not None:
        m = _markers(ctx)
        for fa, a in m.items():
            for fb, b in m.items():
                if fa != fb and a != b and b.startswith(a):
                    out.append(Finding(
                        f"marker/prefix/{fa}/{fb}", Kind.MARKER, Severity.INFO,
                        f"marker {fa} is a prefix of {fb}",
                        "streaming and lazy-grammar triggers must wait for more text; prefer distinct markers",
                        {fa: visible(a), fb: visible(b)}, {"fields": [fa, fb]}))
        for f, v in m.items():
            if len(v) == 1 or _PLAIN.match(v):
                out.append(Finding(
                    f"marker/ordinary-text/{f}", Kind.MARKER, Severity.INFO if len(v) == 1 else Severity.WARNING,
                    f"marker {f} is likely to appear in ordinary text",
                    "a special token (one the tokenizer never splits) cannot be confused with text",
                    {f: visible(v)}, {"field": f}))
        out += _instruction_tags(ctx)
    out += _generation_block(ctx)
    return out


_PLACEHOLDER = re.compile(r"^<[a-z]+(-[a-z]+)+>$")  # "<tool-call-id>", "<function-name>": a slot, not a marker


def _wraps_definitions(text: str, tag: str) -> bool:
    """``tag`` opens a block (its closing form follows) that holds the tool definitions."""
    close = tag.replace("<|", "<|/", 1) if tag.startswith("<|") else tag.replace("<", "</", 1)
    i = text.find(tag)
    if i >= 0 and "Current weather for a city" in text[i:i + len(tag) + 120]:
        return True  # the definitions follow the tag directly
    j = text.find(close, i + len(tag))
    return i >= 0 and j > i and "get_weather" in text[i:j] and "Current weather for a city" in text[i:j]


def _instruction_tags(ctx: LintContext) -> list[Finding]:
    by_id = {s.id: s for s in ctx.shapes}
    with_tools = ctx.shape_render(by_id["tools-user"])
    without = ctx.shape_render(by_id["user"])
    call = ctx.shape_render(by_id["reasoning-content-calls"])
    call_plain = ctx.shape_render(by_id["parallel-calls"])
    if with_tools.error or without.error or (call.error and call_plain.error):
        return []
    call_text = call.text if call.error is None else call_plain.text
    base = set(_TAG.findall(without.text))
    out = []
    for tag in dict.fromkeys(_TAG.findall(with_tools.text)):
        low = tag.lower()
        # only call markers ("<tool_call>", "[TOOL_CALLS]"): tool-definition wrappers and placeholders such as
        # "<function-name>" are not a call format
        if tag in base or "call" not in low or low.startswith(("</", "<|/", "[/")) or _PLACEHOLDER.match(tag) \
                or _wraps_definitions(with_tools.text, tag):
            continue
        if call_text.count(tag) > with_tools.text.count(tag):
            continue
        slug = re.sub(r"[^\w\-]+", "", tag) or "tag"
        if any(f.id.endswith("/" + slug) for f in out):
            continue
        pos = with_tools.text.find(tag)
        out.append(Finding(
            f"marker/instructions/{slug}", Kind.MARKER, Severity.WARNING,
            f"the tool instructions name {tag} but a rendered tool call never contains it",
            "describe the format the template renders for calls, or render calls in the format described",
            {"instructions": _around(with_tools.text, pos), "rendered calls": visible(call_text[-300:])},
            {"tag": tag}))
    return out


def _generation_block(ctx: LintContext) -> list[Finding]:
    src = ctx.template.source
    if not _GEN_OPEN.search(src):
        return []
    marked = _GEN_CLOSE.sub(lambda m: "{{ '" + _GEN_E + "' }}" + m.group(1),
                            _GEN_OPEN.sub(lambda m: m.group(1) + "{{ '" + _GEN_S + "' }}", src))
    try:
        probe = ChatTemplate(marked, ctx.template.name)
        text = probe.render({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                                          {"role": "user", "content": "Bye"}],
                             "add_generation_prompt": False, "tools": None, "bos_token": "", "eos_token": ""})
    except ChatTemplateExplorerError:
        return []
    i = text.find(_GEN_E)
    if i < 0:
        return []
    after = text[i + len(_GEN_E):]
    nxt = after.find("Bye")
    tail = after[:nxt] if nxt >= 0 else after[:40]
    # the first tag after the block ends the assistant turn when the same tag ends the user turn too (it is an
    # end-of-turn marker, not the next turn's opening)
    tags = _TAG.findall(tail)[:1]
    after_user = text[text.find("Hi") + 2:].lstrip()
    tags = [t for t in tags if after_user.startswith(t)]
    if not tags:
        return []
    return [Finding(
        "marker/generation-block", Kind.MARKER, Severity.WARNING,
        f"the end-of-turn marker {tags[0]} is outside the {{% generation %}} block",
        "move the end-of-turn marker inside {% generation %}…{% endgeneration %} so the assistant mask teaches "
        "the model to stop",
        {"after the block": visible(tail[:120]), "assistant turn": visible(text[max(0, i - 40):i])},
        {"marker": tags[0]})]


# ------------------------------------------------------------------------------------------------ time

_DATES = (_dt.datetime(2026, 11, 30, 1, 57, 31), _dt.datetime(2024, 2, 29, 13, 45, 0))


def check_time(ctx: LintContext) -> list[Finding]:
    """``time/render``: the render of the same conversation differs between two dates (``strftime_now`` or a
    date the template computes) — the prompt is not reproducible and its cache expires daily."""
    by_id = {s.id: s for s in ctx.shapes}
    for sid in ("user", "tools-user"):
        shape = by_id[sid]
        texts = []
        for when in _DATES:
            with pinned_clock(when):
                try:
                    texts.append(ctx.template.render({"messages": copy.deepcopy(shape.messages),
                                                      "tools": copy.deepcopy(shape.tools),
                                                      "add_generation_prompt": True, "bos_token": "",
                                                      "eos_token": ""}))
                except ChatTemplateExplorerError:
                    texts.append(None)
        if None in texts or texts[0] == texts[1]:
            continue
        pos = common_prefix_len(texts[0], texts[1])
        line, col = line_col(texts[0], pos)
        return [Finding(
            "time/render", Kind.TIME, Severity.WARNING, "the render depends on the current date",
            "pass the date as a chat-template kwarg (or leave it out) so prompts are reproducible and cacheable",
            {"position": f"character {pos} (line {line}, column {col}) of {sid}",
             f"at {_DATES[0]:%Y-%m-%d}": _around(texts[0], pos), f"at {_DATES[1]:%Y-%m-%d}": _around(texts[1], pos)},
            {"shape": sid, "position": pos})]
    return []
