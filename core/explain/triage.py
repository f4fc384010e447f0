"""Triage that fixes (issue 26): the model's exact mistake and a change that works.

:func:`triage` runs after :func:`core.explain.explain.explain` and adds

* the **nearest accepted output** — a bounded search for the fewest edits of the output (insert what the parser
  expected at its stop point, delete what it could not place, replace a field name by the template's, insert the
  template's call opener where call-like text starts, close what was left open; at most :data:`MAX_EDITS`) that
  parse clean to a message with calls, shown as edits and one sentence ("the model omitted `<arg_value>` before
  `how`");
* the **mistake** (:class:`Mistake`, 27 named causes) with evidence from the parse, the request's schema and the
  analysis — what the analysis did *not* find is said as such (which comparisons came back empty), never as a
  fact about the template;
* **ranked fixes**, each re-parsed before it is offered: one repair switched on, a request edit, an analysis
  override (from :mod:`core.explain.fixes`), a template edit (a textual patch of the Jinja source re-analysed),
  a server setting (keep special tokens) — or, when nothing re-parses, which class of change would be needed
  and why none of ours applies.

Everything is bounded: the search stops after :data:`MAX_PARSES` parses or :data:`TIME_BUDGET` seconds (the
budget is shared with the fixes), and each candidate is one linear parse of the output.
"""

from __future__ import annotations

import enum
import itertools
import json
import re
import shlex
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from ..chat.prompt import prepare_request, render_prompt
from ..chat.repairs import (REPEATED_PROMPT_TAIL, REPEATED_TURN_HEADER, TAG_WHITESPACE, TEMPLATE_DEFAULT_THINKING,
                            TOLERANCE_REPAIRS, UNCLOSED_FINAL_CALL)
from ..chat.samples import end_of_turn_candidates
from ..escapes import code_span, escape_invisible
from ..jinja.template import ChatTemplate, apply_template
from .model import MARKER_TOKEN as _TOKEN
from .model import Cause
from .model import Setup as _Setup
from .model import build_bundle, dialect_failure, dialect_line, properties_of, required_of, written_arguments_kind
from .causes import tool_names
from .model import FixKind, reasoning_markers, stop_point, tool_stub
from .nearest import (MAX_EDITS, MAX_PARSES, TIME_BUDGET, TRIAGE_CHARS, _JSON_CALL_START, _KEY_ALIASES, _SPECIAL_SHAPE,
                      _WS, Edit, NearestOutput, _accepted_parse, _accepts, _Budget, _context, _format_markers, _last_word,
                      _literals, _parse, _Parsed, _q, _quote_for_delimiter, _shift, _tool_named_last, diff_of,
                      gives_expected, nearest_output, sentence_of)
from .renders import _rendered_call, _rendered_turns, _renderers
from .call_relation import (ALTERED_LITERAL, ALTERED_WHITESPACE, DECISIVE, MARKUP, MAX_OUTPUT, CallRelation,
                            Relation, call_pieces, relate)


class Mistake(str, enum.Enum):
    """What went wrong, named as a maintainer closing the report would name it."""

    MISSING_REQUIRED = "missing required parameter"
    UNKNOWN_PARAMETER = "parameter the schema does not declare"
    TYPE_MISMATCH = "argument of the wrong type"
    OMITTED_OPENER = "omitted call opener"
    OMITTED_MARKER = "omitted marker inside a call"
    OMITTED_CLOSER = "omitted closer"
    FOREIGN_WRAPPER = "wrapper the template does not render"
    FIELD_ALIAS = "field-name alias"
    CALL_OUTSIDE_SECTION = "call outside the call section"
    REOPENED_REASONING = "re-opened reasoning"
    REASONING_NOT_CLOSED = "reasoning never closed"
    REASONING_SETTING = "reasoning setting does not match the output"
    SPECIAL_TOKENS_STRIPPED = "special tokens stripped by the decoder"
    STOP_STRING_STRIPPED = "the closer missing at the very end of the output (a stop string stripped, or max_tokens)"
    FORMAT_NOT_FOUND = "format the analysis could not find"
    TEMPLATE_MODEL_MISMATCH = "the model writes another format than the template's"
    CUT_SHORT = "output cut short (max_tokens or a stop string)"
    UNKNOWN_TOOL = "tool not in the request"
    TOOLS_NOT_SENT = "tool call without tools in the request"
    PARALLEL_NOT_REQUESTED = "second call without parallel_tool_calls"
    CALL_ID_SHAPE = "call id of another shape"
    DOUBLE_ENCODED_ARGUMENTS = "arguments written as a JSON string"
    TRAILING_TEXT = "text after the call the format does not allow"
    LEADING_TEXT = "text before the call the format does not allow"
    REPEATED_PROMPT_TAIL = "the output repeats the generation prompt's tail"
    ANALYSIS_MISREAD = "the analysis misread the template's own format"
    NONE = "no mistake found"


class TriageFixKind(str, enum.Enum):
    """What a ranked fix changes (ordered by how little it changes)."""

    REPAIR = "repair"
    REQUEST = "request"
    OVERRIDE = "override"
    TEMPLATE = "template"
    SERVER = "server"
    FIDELITY = "fidelity"


_RANK = {TriageFixKind.REPAIR: 0, TriageFixKind.REQUEST: 1, TriageFixKind.OVERRIDE: 2, TriageFixKind.SERVER: 3,
         TriageFixKind.TEMPLATE: 4, TriageFixKind.FIDELITY: 5}






def _shell_args(pairs: list[tuple[str, str]]) -> str:
    """``--option value`` pairs as one shell-safe string: an override's value comes from the model's output (a
    key it wrote, a marker it emitted), so each value is quoted (``shlex.quote``); a value with a character that
    does not print (control, bidi, invisible) has no command-line form at all, since what the reader sees would
    not be what runs. ``""`` then: the fix stays offered as data (``change``)."""
    if any(not v.isprintable() for _o, v in pairs):
        return ""
    return " ".join(f"{o} {shlex.quote(v)}" for o, v in pairs)


@dataclass
class RankedFix:
    """A change re-parsed before it is offered; ``message`` is what the re-parse gives; ``cost`` ranks (lower
    first)."""

    kind: TriageFixKind
    description: str
    change: dict[str, Any]
    message: dict[str, Any]
    cost: int = 0
    gives_expected: bool | None = None      # None: no expected message was given

    def expected_words(self) -> str:
        """Whether the fix gives the expected message, in words (``""`` without an expected message)."""
        if self.gives_expected is None:
            return ""
        return "gives the expected message" if self.gives_expected else "does not give the expected message"

    @property
    def cli(self) -> str:
        """The ``explain`` options that apply this fix (``--repair NAME`` switches one repair on alone), or ``""``
        when it is not an option (a request edit, a template patch, a server setting)."""
        if "repairs" in self.change and len(self.change) == 1:
            return _shell_args([("--repair", str(n)) for n in self.change["repairs"]])
        if self.change.get("fidelity") == "improved" and len(self.change) == 1:
            return "--improved"
        if "overrides" in self.change and len(self.change) == 1:
            return _shell_args([("--override", f"{k}={v}") for k, v in self.change["overrides"].items()])
        return ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"kind": self.kind.value, "description": self.description, "change": self.change,
                "message": self.message, "cost": self.cost, "cli": self.cli, "gives_expected": self.gives_expected}


@dataclass
class Triage:
    """The mistake, its evidence, the nearest accepted output, the ranked fixes (or why none applies)."""

    mistake: Mistake
    sentence: str
    evidence: list[str] = field(default_factory=list)
    nearest: NearestOutput | None = None
    fixes: list[RankedFix] = field(default_factory=list)
    no_fix: str = ""
    searched: int = 0
    budget_hit: bool = False
    relation: CallRelation | None = None    # when the template's rendered call pieces decided the mistake or agree
    relation_decided: bool = False          # (it decided it; else it names the class the rules named)
    budget_limit: str = ""                  # the bound that stopped the search (:class:`~.nearest.Limit`) if one did

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (``explain --json`` key ``triage``)."""
        return {"mistake": self.mistake.name, "mistake_text": self.mistake.value, "sentence": self.sentence,
                "evidence": list(self.evidence), "nearest": self.nearest.to_json() if self.nearest else None,
                "fixes": [f.to_json() for f in self.fixes], "no_fix": self.no_fix, "searched": self.searched,
                "budget_hit": self.budget_hit, "relation": self.relation.to_json() if self.relation else None,
                "relation_decided": self.relation_decided, "budget_limit": self.budget_limit}




def _c(s: Any) -> str:
    """A name or key of the request or the output (a tool, a parameter, a schema type) as a code span, whole: it
    may hold backticks (:func:`core.escapes.code_span`) or invisible characters (escaped, a line break too)."""
    return code_span(escape_invisible(str(s), keep=""))


# ------------------------------------------------------------------------------------------------ mistake


_WRAPPER_JSON = re.compile(r'"(?:tool_calls|jsonrpc)"\s{0,40}:'
                           r'|"type"\s{0,40}:\s{0,40}"function"\s{0,40},\s{0,40}"function"')
_PY_CALL = re.compile(r"\b([A-Za-z_][\w.]{0,64})\((?:[A-Za-z_]\w{0,64}\s{0,8}[=:]|\))")


def _py_call_statement(text: str, names: list[str]) -> int | None:
    """Where ``text`` writes a call in a programming language's syntax (``get_weather(city="Paris")``): a match of
    ``_PY_CALL`` that starts a line or names a requested tool — a function named inside a sentence of prose
    (``describe resetGame() function``) is no call. None when there is none."""
    for m in itertools.islice(_PY_CALL.finditer(text), 16):
        head = text[:m.start()].rstrip(" \t")
        if not head or head.endswith("\n") or m.group(1) in names:
            return m.start()
    return None


def _schema_problems(req: Any, message: dict[str, Any], output: str = "") -> list[tuple[Mistake, str]]:
    """Missing required / undeclared / mistyped arguments of the calls in ``message`` against the request; a call
    shown with ``{}`` whose arguments ``output`` writes as JSON of another type is a type mismatch, not a call
    missing every required parameter."""
    tools = {t["function"]["name"]: t["function"].get("parameters") or {} for t in req.tools or []
             if isinstance(t, dict) and isinstance(t.get("function"), dict)}
    out: list[tuple[Mistake, str]] = []
    for tc in message.get("tool_calls") or []:
        f = tc.get("function", {})
        schema = tools.get(f.get("name"))
        if not isinstance(schema, dict):
            continue
        try:
            args = json.loads(f.get("arguments") or "{}")
        except (ValueError, RecursionError):    # not JSON, or nested past the decoder's depth
            continue
        if isinstance(args, str):
            out.append((Mistake.DOUBLE_ENCODED_ARGUMENTS, f"the arguments of {_c(f.get('name'))} are a JSON string, "
                                                          "not an object"))
            continue
        if not isinstance(args, dict):
            continue
        kind = written_arguments_kind(output, f.get("name") or "") if not args and output else ""
        if kind:
            out.append((Mistake.TYPE_MISMATCH, f"the arguments of {_c(f.get('name'))} are {kind}, not an object: a "
                                               "call's arguments must be a JSON object"))
            continue
        props = properties_of(schema)
        for r in required_of(schema):
            if r not in args:
                out.append((Mistake.MISSING_REQUIRED, f"{_c(f.get('name'))} is called without {_c(r)}, which the "
                                                      "request's schema lists in `required`"))
        for k, v in args.items():
            if props and k not in props:
                out.append((Mistake.UNKNOWN_PARAMETER, f"{_c(k)} is not a property of {_c(f.get('name'))}'s schema"))
            elif k in props and isinstance(props[k], dict) and props[k].get("type"):
                from .causes import _type_ok

                if not _type_ok(v, props[k]["type"]):
                    out.append((Mistake.TYPE_MISMATCH, f"{_c(k)} = {json.dumps(v)[:40]} is not of type "
                                                       f"{_c(props[k]['type'])}"))
    return out


def _unfound_format(ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any], ev: list[str], placeholder: str
                    ) -> tuple[Mistake, list[str]]:
    """The mistake when the analysis found no tool-call format (or, ``placeholder`` saying so, one that is an
    artefact of its probes): the empty comparisons listed; no mistake for an output with nothing call-like; another
    family's format when improved fidelity reads no call either; else the format not found."""
    ctx["specific"] = True      # (the analysis' gap, its empty comparisons listed: first whatever the call lacks)
    ev = ev + [e for f in ex.findings if f.cause == Cause.NO_TOOL_FORMAT for e in f.evidence]
    empty = [c for c in _empty_comparisons(bundle) if not c.startswith("R")]   # (R…: the reasoning's comparisons)
    if empty:
        ev.append(("the analysis found no tool-call markers; " if not placeholder else "")
                  + "comparisons that came back empty: " + "; ".join(empty))
    if placeholder:
        ev.append(placeholder)
    out = ex.output
    if not ex.message.get("tool_calls") and not _call_like(out, ctx["names"]):
        ev.append("the output holds no call-like text (no JSON call object, no declared tool's name written as "
                  "a call, no marker): it is a plain answer, which is what the parser returned — the gap of the "
                  "analysis does not change this output's message")
        return Mistake.NONE, ev
    foreign = _foreign_to_unfound_format(setup, out, ctx)
    if foreign:
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [foreign]
    if not placeholder and not re.search(r"tool", _src(setup), re.IGNORECASE):
        # nothing for an analysis to find: a template without tools is not the template of a model that calls them
        ctx["why_none"] = ("the template takes no tools and renders no calls, so there is no format to repair or "
                           "override, and no patch of a few lines gives it one: the template the model was trained "
                           "with (one with its tool-call branch) is needed")
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [
            "the template's source never mentions a tool (no tools, no tool calls, no tool role): it is a template "
            "without tool support, while the output writes a call — the model was trained with another template "
            "(its own, which renders its calls); the analysis has nothing to find here"]
    return Mistake.FORMAT_NOT_FOUND, ev


def _unfound_reasoning(setup: _Setup, out: str, msg: dict[str, Any], ctx: dict[str, Any], r_start: str,
                       r_ends: list[str]) -> tuple[dict[str, Any], list[str], str] | None:
    """A reasoning block the analysis did not find: it found no reasoning markers, the output opens with a tag pair
    ``<x>`` … ``</x>`` that is none of the format's markers and the parse leaves in the content, holding prose (no
    markup, no brackets, no declared tool's name) and followed by more of the output, and with that pair
    as the reasoning markers (an analysis override, whitespace as the output writes it) the output parses clean
    with its reasoning split off and at least the calls read now — at this fidelity, else at improved.
    ``(change, [opener, closer], evidence)`` or None; at most two parses."""
    budget = ctx.get("budget")
    if r_start or any(r_ends) or budget is None or len(out) > _STRIPPED_CHARS:
        return None
    m = re.match(r"\s*<([A-Za-z_][\w\-]{0,30})>(\s*)", out)
    if not m:
        return None
    opener, closer = f"<{m.group(1)}>", f"</{m.group(1)}>"
    own = ctx["all_markers"] | set(ctx["markers"]) | set(ctx["closers"])
    c = re.compile(r"(\s*)" + re.escape(closer) + r"(\s*)").search(out, m.end())
    if opener in own or closer in own or c is None or opener not in (msg.get("content") or ""):
        return None
    inner = out[m.end():c.start()]
    plain = not (_TOKEN.search(inner) or "{" in inner or any(n and n in inner for n in ctx["names"]))
    if not inner.strip(_WS) or not out[c.end():].strip(_WS) or (not plain and inner.lstrip(_WS)[:1] in "<{["):
        return None     # a block of prose followed by the answer or the calls; a call alone in it is no reasoning
    # (prose that goes on to markup — a call it plans — is reasoning only if taking the block out reads more calls)
    overrides = {"reasoning.mode": "TAG_BASED", "reasoning.start": opener + m.group(2),
                 "reasoning.end": c.group(1) + closer + c.group(2)}
    for fid in dict.fromkeys((setup.fidelity, "improved")):
        if not budget.take(len(out)):
            return None
        try:
            p = _parse(replace(setup, fidelity=fid, overrides={**setup.overrides, **overrides}), out)
        except Exception:  # noqa: BLE001 - an override that does not build gives no evidence
            continue
        content = p.message.content or ""
        if p.clean and (p.message.reasoning_content or "").strip(_WS) and opener not in content \
                and closer not in content and len(p.message.tool_calls) >= len(msg.get("tool_calls") or []) \
                + (0 if plain else 1):
            change: dict[str, Any] = {"overrides": overrides}
            if fid != setup.fidelity:
                change["fidelity"] = fid
            return change, [opener, closer], (
                f"the output opens with a reasoning block {_q(opener)} … {_q(closer)}, which the parse leaves in the "
                "content: our analysis found no reasoning markers for this template — a gap of the analysis, not a "
                "statement about the template; with that pair as the reasoning markers (an override"
                + (", at improved fidelity" if fid != setup.fidelity else "") + ") the output parses clean")
    return None


def _probe_placeholder(bundle: Any) -> tuple[str, str, str] | None:
    """``(field, placeholder, value)`` when a string field of the analysis's tool format holds one of the probe's
    own function or argument names (``name_suffix`` = ``(AA_ARG_FST_AA=%s, …)]``): the analysis took text of its
    probe renders for markers, so the format it learned is none the template writes; None otherwise."""
    from ..analysis import probes as P

    a = getattr(getattr(bundle, "report", None), "analysis", None)
    if a is None or getattr(bundle, "format", "") != "peg-native":
        return None
    needles = (P.FUN_FIRST, P.FUN_SECOND, P.ARG_FIRST, P.ARG_SECOND)
    stack: list[tuple[str, Any]] = [("tools", a.to_json().get("tools", {}))]
    while stack:
        path, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{path}.{k}", x) for k, x in v.items())
        elif isinstance(v, str):
            hit = next((n for n in needles if n in v), "")
            if hit:
                return path, hit, v
    return None


def _empty_comparisons(bundle: Any) -> list[str]:
    comps = getattr(getattr(bundle, "report", None), "comparisons", None) or []
    return [f"{c.id}: {c.title}" for c in comps if not (getattr(c, "found", None) or {})][:6]


def _thinking_flag_change(req: Any, on: bool) -> dict[str, Any]:
    """The request change that sets the template's thinking flag: the ``chat_template_kwargs`` key the request
    already passes (``thinking``, ``enable_thinking``) when it passes one, else ``enable_thinking``."""
    kw = dict(getattr(req, "chat_template_kwargs", None) or {})
    for key in ("enable_thinking", "thinking"):
        if isinstance(kw.get(key), bool):
            return {"chat_template_kwargs": {**kw, key: on}, **({"enable_thinking": on} if key == "enable_thinking"
                                                                else {})}
    return {"enable_thinking": on}


def _reread_without_thinking(ex: Any, setup: _Setup, ctx: dict[str, Any]) -> tuple[Any, _Setup, dict[str, Any]] | None:
    """The output explained again with the request's thinking flag off, when that changes the generation prompt:
    ``(explanation, setup, change)`` or None (one parse, outputs up to 16 KiB)."""
    budget, _explain = ctx.get("budget"), ctx.get("reexplain")
    if budget is None or _explain is None or len(ex.output) > _STRIPPED_CHARS:
        return None
    last = ex.output.rstrip(_WS)[-80:]
    ended = any(m.end() == len(last) for m in _SPECIAL_SHAPE.finditer(last))
    for change in _thinking_off_changes(setup, ended):
        if not budget.take(len(ex.output)):
            return None
        try:
            req2 = apply_request_change(setup.request, change)
            ex2 = _explain(setup.template, req2, ex.output, fidelity=setup.fidelity, overrides=dict(setup.overrides),
                           fixes=False)
        except Exception:  # noqa: BLE001 - a request the template does not render gives no evidence
            continue
        if ex2.generation_prompt != ex.generation_prompt:
            return ex2, replace(setup, request=req2), change
    return None


def _reread_unopened(ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any], flags: bool = True
                     ) -> tuple[Any, _Setup, dict[str, Any], str] | None:
    """The output explained again with a generation prompt that does not open the reasoning: the request's thinking
    flag off when the request has it on and that changes the prompt (with ``flags``), else a template patch that
    drops the opener the generation prompt ends with (:func:`_prompt_opener_patch`: a template that opens it
    whatever the request sets). ``(explanation, setup, change, what)`` — ``change`` a fix's change (``request`` or
    ``template_patch``)."""
    req = setup.request
    if flags and (req.enable_thinking or "thinking" in (req.chat_template_kwargs or {})):
        again = _reread_without_thinking(ex, setup, ctx)
        if again is not None:
            ex2, s2, change = again
            return ex2, s2, {"request": change}, ", ".join(f"{k}={json.dumps(v)}" for k, v in change.items())
    patch = _prompt_opener_patch(setup, ex, ctx, reasoning_markers(bundle)[0].strip(_WS))
    budget, _explain = ctx.get("budget"), ctx.get("reexplain")
    if patch is None or _explain is None or not budget.take(len(ex.output)):
        return None
    s2 = patch[1]
    try:
        ex2 = _explain(s2.template, req, ex.output, fidelity=setup.fidelity, overrides=dict(setup.overrides),
                       fixes=False)
    except Exception:  # noqa: BLE001 - a patched template that does not render gives no evidence
        return None
    return ex2, s2, {"template_patch": patch[0]}, "the template's generation prompt patched not to open it"


_OPENER_TAIL = re.compile(r"(?:\s|\\n){0,4}")


def _prompt_opener_patch(setup: _Setup, ex: Any, ctx: dict[str, Any], r_start: str
                         ) -> tuple[list[list[str]], _Setup] | None:
    """A template patch that drops the reasoning opener the generation prompt ends with: the opener's literal in
    the source (with the whitespace or ``\\n`` escapes written right after it) taken out at one place, written as the
    shortest text around it that occurs once; kept only when the patched template renders this request's prompt
    exactly as before without that opener at its end (so nothing else the template writes changes). Only the
    template's own text goes into the patch. At most three places tried (one render each), then, when the opener
    is no literal of the source, at most four expressions after the generation-prompt switch dropped in turn;
    cached per triage."""
    if "prompt_patch" in ctx:
        return ctx["prompt_patch"]
    ctx["prompt_patch"] = None
    from ..chat.prompt import prepare_request, render_prompt
    from ..jinja.template import ChatTemplate

    gp = ex.generation_prompt.rstrip(_WS)
    src = _src(setup)
    if not r_start or not gp.endswith(r_start) or not src:
        return None
    try:
        prep = prepare_request(setup.template, setup.request)
        before = render_prompt(prep).rstrip(_WS)
    except Exception:  # noqa: BLE001 - a prompt that does not render gives no patch
        return None
    if not before.endswith(r_start):
        return None
    want = before[:-len(r_start)].rstrip(_WS)
    places = [m.start() for m in re.finditer(re.escape(r_start), src)][-3:]
    for at in reversed(places):
        end = _OPENER_TAIL.match(src, at + len(r_start)).end()
        a = at
        while src.count(src[a:end]) > 1 and at - a < 80 and a > 0:
            a -= 1
        edge = max(src.rfind(q, max(0, at - 60), a) for q in "'\"\n}")
        a = edge if edge >= 0 else a       # (shown from the literal's quote or the line's start)
        old, new = src[a:end], src[a:at]
        if src.count(old) != 1:
            continue
        try:
            t2 = ChatTemplate(src.replace(old, new), getattr(setup.template, "name", ""))
            after = render_prompt(replace(prep, template=t2)).rstrip(_WS)
        except Exception:  # noqa: BLE001
            continue
        if after == want:
            ctx["prompt_patch"] = ([[old, new]], replace(setup, template=t2))
            break
    if ctx["prompt_patch"] is None and "add_generation_prompt" in src:
        # the opener written by an expression (a macro call, Kimi K3's `open_tag('think' …)`), not a literal: the
        # last expressions after the generation-prompt switch, each dropped in turn
        tail = src.rfind("add_generation_prompt")
        for m in list(_EXPRESSION.finditer(src, tail))[:4]:
            old = m.group(0)
            if src.count(old) != 1:
                continue
            try:
                t2 = ChatTemplate(src.replace(old, ""), getattr(setup.template, "name", ""))
                after = render_prompt(replace(prep, template=t2)).rstrip(_WS)
            except Exception:  # noqa: BLE001
                continue
            if after == want:
                ctx["prompt_patch"] = ([[old, ""]], replace(setup, template=t2))
                break
    return ctx["prompt_patch"]


_EXPRESSION = re.compile(r"\{\{-?[^{}\n]{1,200}?-?\}\}")


def _reread_opens(setup: _Setup, ex: Any) -> bool:
    """True when the request's thinking switches turned off give a prompt that no longer ends as this one does (the
    request's flag is what opened the reasoning); one render."""
    from ..chat.prompt import THINKING_OFF_CONTEXT, prepare_request, render_prompt

    try:
        prep = prepare_request(setup.template, setup.request)
        off = render_prompt(replace(prep, enable_thinking=False), additional_context=THINKING_OFF_CONTEXT)
    except Exception:  # noqa: BLE001 - a prompt that does not render with the switches off: no flag to blame
        return False
    return not off.rstrip(_WS).endswith(ex.generation_prompt.rstrip(_WS))


_READS_THINKING = re.compile(r"\bthinking\b(?!_)")


def _thinking_off_changes(setup: _Setup, ended: bool) -> list[dict[str, Any]]:
    """The request changes that may turn the template's thinking off, the likeliest first: the flag the request
    passes (else ``enable_thinking``), then — when the request passes no template kwarg for it, the source reads a
    variable ``thinking`` (Kimi's templates) and the output ``ended`` with a control token (a turn or message it
    closed: no reasoning cut by a budget) — ``chat_template_kwargs.thinking: false``."""
    req = setup.request
    first = _thinking_flag_change(req, False)
    out = [first]
    kw = dict(getattr(req, "chat_template_kwargs", None) or {})
    if ended and "thinking" not in kw and "chat_template_kwargs" not in first \
            and _READS_THINKING.search(_src(setup)):
        out.append({"chat_template_kwargs": {**kw, "thinking": False}})
    return out


def _complete_without_thinking(ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any], r_ends: list[str]
                               ) -> tuple[Mistake, list[str]] | None:
    """An output "cut inside the reasoning" that is a complete reply: the generation prompt opened the reasoning
    (the request's thinking flag on, as by default), the output writes no reasoning closer and no call is read —
    re-read with the flag off, it parses clean (the answer itself: ``REASONING_SETTING``) or stops somewhere not at
    its end (a fault of the reply, named by the same rules on that reading). Cut only when the parse really needs
    more input at the end."""
    out = ex.output
    own = ctx["all_markers"] | set(ctx["markers"])
    r_ends = [e for e in r_ends if e.strip(_WS) not in own] or r_ends[:1]    # (a call opener also ends it)
    if ex.message.get("tool_calls") or not r_ends or any(e.strip(_WS) and e.strip(_WS) in out for e in r_ends):
        return None
    again = _reread_unopened(ex, setup, bundle, ctx)
    if again is None:
        return None
    ex2, s2, change, flag = again
    if ex2.clean and ex2.truncated is None and "\n" not in out.strip(_WS):
        # (one line holds no reasoning and an answer after it; on several lines a closer the decoder dropped
        # reads the same, so that text keeps the reading below)
        if "request" in change:
            ctx["thinking_fix"] = change["request"]
        return Mistake.REASONING_SETTING, [
            f"the output ends inside the reasoning only because the generation prompt opens it ({_q(ex.generation_prompt.rstrip(_WS)[-24:])}, "
            f"{'the request' + chr(39) + 's thinking flag on' if 'request' in change else 'whatever the request sets'}) "
            f"and the output never writes {_q(r_ends[0].strip(_WS))}: read with {flag} it parses clean as the reply — "
            "it is complete, not cut; the model answered without reasoning"]
    if ex2.clean or ex2.truncated is not None or ex2.stop is None:
        return None
    b2 = build_bundle(s2)
    c2 = _context(s2, b2)
    c2["budget"] = ctx["budget"]
    m2, ev2 = classify_mistake(ex2, s2, b2, None, c2)
    if m2 in (Mistake.NONE, Mistake.CUT_SHORT):
        return None
    return m2, [f"the output writes no reasoning closer ({_q(r_ends[0].strip(_WS))}) and is no cut reasoning: read "
                f"with {flag} (a generation prompt that does not open the reasoning) its parse needs no more input "
                "at the end and stops inside the reply — that stop is the fault"] + ev2


_LONE_CLOSER = re.compile(r"</([A-Za-z_][\w:\-]{0,40})>")


def _closer_without_opener(setup: _Setup, out: str, msg: dict[str, Any], r_start: str, r_ends: list[str],
                           gp: str) -> str:
    """Evidence when a clean content keeps a closing tag ``</x>`` after prose that nothing opened: the output and
    the generation prompt write no ``<x>``, the template's source writes neither tag, and the analysis found no
    reasoning. The model closes a block its own template opens for it in the generation prompt (a reasoning it
    was trained to end): the template is not the model's. ``""`` otherwise."""
    content = msg.get("content") or ""
    if r_start.strip(_WS) or any(e.strip(_WS) for e in r_ends) or msg.get("tool_calls") or not content:
        return ""
    m = _LONE_CLOSER.search(content)
    if m is None or not content[:m.start()].strip(_WS) or _TAG.search(content[:m.start()]) \
            or _SPECIAL_SHAPE.search(content[:m.start()]):
        return ""
    tag = m.group(0)
    head = f"<{m.group(1)}"
    src = _src(setup)
    if tag in src or head + ">" in src or head in out or head in gp:
        return ""
    return (f"the content keeps {_q(tag)} after {_q(content[:m.start()].strip(_WS), 30)}: a closer of a block that "
            f"neither the output nor the generation prompt opens, and that the template's source never writes (the "
            "analysis found no reasoning either) — the model ends a reasoning its own template opens for it in the "
            "generation prompt; this template, which renders no reasoning at all, is not the model's")


_AFFIX_TOKENS = 64           # distinct markup tokens of the output compared with the template's markers
_SPECIAL_PIECE = re.compile(r"[|｜▁<>]")


def _marker_affix(setup: _Setup, bundle: Any, out: str, ctx: dict[str, Any]) -> tuple[str, list[str], str] | None:
    """A template whose markers all carry a piece the model never writes: the output writes markup tokens that are
    the template's markers each with one and the same piece left out (``<tool_calls>`` for
    ``<tool_calls:opensource>``, ``</think>`` for ``</think:opensource>``), the template writes that piece in at least
    two of its markers, and the output never writes it. One slip of one marker is an omitted marker; the same piece
    missing from a family of markers is a template whose markers are not the model's (a variant's suffix). A piece
    of a special token (``｜DSML｜``, a ``|``) is a stripped token, not this. ``(piece, written tokens, evidence)``
    or None; at most 64 tokens against the markers, no parse."""
    r_start, r_ends = reasoning_markers(bundle)
    own = {m for m in ctx["all_markers"] | set(ctx["markers"]) | set(ctx["closers"])
           | {x.strip(_WS) for x in [r_start] + r_ends} if m and m.startswith("<") and len(m) <= 80}
    if not own:
        return None
    written = list(dict.fromkeys(m.group(0) for m in itertools.islice(_TOKEN.finditer(out[:_SHAPE_CHARS]),
                                                                        4 * _AFFIX_TOKENS)))[:_AFFIX_TOKENS]
    pieces: dict[str, list[tuple[str, str]]] = {}
    for t in written:
        if t in own or not t.endswith(">"):
            continue
        for m in sorted(own):
            piece = _inserted_piece(Edit("replace", 0, t, m))
            if piece and piece == piece.strip(_WS) and len(piece) >= 2 and not _SPECIAL_PIECE.search(piece):
                pieces.setdefault(piece, []).append((t, m))
    for piece, pairs in sorted(pieces.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        carrying = sorted(m for m in own if piece in m)
        if len(carrying) < 2 or piece in out:
            continue
        shown = ", ".join(f"{_q(t)} for {_q(m)}" for t, m in pairs[:3])
        return piece, [t for t, _ in pairs], (
            f"the output writes {shown}: the template's markers each without {_q(piece)}, which the template writes "
            f"in {len(carrying)} of its markers ({', '.join(_q(m) for m in carrying[:3])}) and the output never "
            "writes — not a slip of one marker but a template whose markers are not the ones the model was trained "
            f"with (a variant of its template, its markers suffixed with {_q(piece)})")
    return None


_LITERAL = re.compile(r"'([^'\\\n{}%]{1,80})'|\"([^\"\\\n{}%]{1,80})\"")


def _prompt_open_patch(setup: _Setup, opener: str, ctx: dict[str, Any]) -> tuple[list[list[str]], _Setup] | None:
    """A template patch that makes the generation prompt end with ``opener`` + a line break: the last quoted
    literal after the ``add_generation_prompt`` switch that the rendered prompt ends with, written with the opener
    added; kept only when the patched template renders this request's prompt exactly as before plus the opener.
    At most three literals tried (one render each); only the template's own text and the opener (a closer the
    source writes, turned into its opener) go into the patch; cached per triage."""
    if "open_patch" in ctx:
        return ctx["open_patch"]
    ctx["open_patch"] = None

    src = _src(setup)
    tail = src.rfind("add_generation_prompt")
    if tail < 0 or not re.fullmatch(r"<[A-Za-z_][\w:\-]{0,40}>", opener):
        return None
    try:
        prep = prepare_request(setup.template, setup.request)
        before = render_prompt(prep)
    except Exception:  # noqa: BLE001 - a prompt that does not render gives no patch
        return None
    # (a quoted literal gets the opener and a `\n` escape before its closing quote; the template's raw text, written
    # outside any tag, gets the opener right after its last visible character, with a line break or, where the
    # next tag trims whitespace, without: both are tried, the render decides)
    lits = [(m.start(), m.end() - 1, ("\\n",)) for m in _LITERAL.finditer(src, tail)
            if before.endswith(m.group(1) or m.group(2))]
    lits += [(m.start(1), m.start(1) + len(m.group(1).rstrip(_WS)), ("\n", "")) for m in _RAW_TEXT.finditer(src, tail)
             if m.group(1).strip(_WS) and before.endswith(m.group(1).strip(_WS))]
    for start, at, breaks in sorted(lits, key=lambda x: x[1])[-3:][::-1]:
        end = at + 1
        while src.count(src[start:end]) > 1 and end - at < 60 and end < len(src):
            end += 1        # (written as the shortest text from the literal on that occurs once)
        old = src[start:end]
        if src.count(old) != 1:
            continue
        for brk in breaks:
            new = src[start:at] + opener + brk + src[at:end]
            try:
                t2 = ChatTemplate(src.replace(old, new), getattr(setup.template, "name", ""))
                after = render_prompt(replace(prep, template=t2))
            except Exception:  # noqa: BLE001
                continue
            if after in (before + opener + "\n", before + opener):
                ctx["open_patch"] = ([[old, new]], replace(setup, template=t2))
                return ctx["open_patch"]
    return ctx["open_patch"]


# the template's raw text after a tag, up to the next `{` (an opener goes after its last visible character)
_RAW_TEXT = re.compile(r"(?:%\}|\}\})([^{]*)")


def _unopened_closer(ex: Any, bundle: Any, ctx: dict[str, Any], absorbed: bool) -> str:
    """Evidence when the output closes the reasoning with the analysis' closer but never opens it, and the
    generation prompt opens none either (the labelling guide's clarification: the reasoning setting of step 2): the
    model reasons from its first token as the prompt it was trained with has it. Sets ``open_reasoning`` (the
    template patch that opens it is then tried). ``absorbed``: a clean parse whose message holds none of the
    reasoning's markers (the parse already reads it as the model meant). ``""`` otherwise; a few ``find``s."""
    out, gp = ex.output, ex.generation_prompt
    r_start, r_ends = reasoning_markers(bundle)
    ends = [e for e in r_ends if e in out and e not in ctx["markers"] and e not in ctx["all_markers"]]
    end_at = min((out.find(e) for e in ends), default=-1)
    if not (r_start and ends and r_start not in out and end_at >= 0 and (out[:end_at].strip(_WS) or ex.clean)
            and not absorbed and r_start not in gp and not _SPECIAL_SHAPE.match(out.lstrip(_WS))):
        # (an output that opens with a control token writes markup there, not reasoning: gpt-oss's `<|constrain|>`
        # of a call header before `<|end|>` is no reasoning the model began at its first token)
        # (the closer first, with nothing before it, is an empty reasoning closed: the same setting)
        return ""
    end = next(e for e in ends if out.find(e) == end_at)
    ctx["open_reasoning"] = r_start.strip(_WS)
    return (f"the output closes the reasoning with {_q(end)} but never opens it with {_q(r_start)}, and the "
            "generation prompt does not open it either: the model reasons from its first token as if the "
            "prompt had opened the block (the prompt it was trained with does); no decoder dropped "
            f"{_q(r_start)}, since it kept {_q(end)}, the other marker of the pair")


def _setup_fault_first(mistake: Mistake, ex: Any, bundle: Any, ctx: dict[str, Any]) -> tuple[Mistake, str] | None:
    """The labelling guide's "two faults in one output", the earlier step first: a fault named inside the call's
    markup (step 4) or inside the call (step 5) while the output, before the point the parse stopped at, closes a
    reasoning that neither it nor the generation prompt opens (:func:`_unopened_closer`, step 2) — the setting is
    the first fault, the one named the second. None otherwise (no parse)."""
    if GUIDE_STEP.get(mistake, 0) < 4 or ex.clean or ex.stop is None:
        return None
    said = _unopened_closer(ex, bundle, ctx, False)     # (a parse that stopped absorbed nothing)
    if not said:
        return None
    if min(ex.output.find(e) for e in reasoning_markers(bundle)[1] if e in ex.output) >= ex.stop.output_pos:
        ctx.pop("open_reasoning", None)     # (the closer after the stop: the parse never got to it)
        return None
    return Mistake.REASONING_SETTING, said + f" — the first fault by step (the second: {mistake.value})"


def _reasoning_from_prompt_only(ex: Any, bundle: Any, ctx: dict[str, Any]) -> bool:
    """The message holds reasoning that only the generation prompt opened: the output writes neither the
    reasoning's opener nor a closer of it (a call opener that also ends the reasoning does not count)."""
    r_start, r_ends = reasoning_markers(bundle)
    opener = r_start.strip(_WS)
    own = {m.strip(_WS) for m in ctx["all_markers"] | set(ctx["markers"]) if m}
    closers = [e.strip(_WS) for e in r_ends if e.strip(_WS) and e.strip(_WS) not in own]
    return bool(opener and closers and (ex.message.get("reasoning_content") or "").strip(_WS)
                and ex.generation_prompt.rstrip(_WS).endswith(opener) and opener not in ex.output
                and not any(c in ex.output for c in closers))


def _reply_filed_as_reasoning(ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any], r_start: str,
                              r_ends: list[str]) -> list[str]:
    """Evidence when calls were read after text the parse filed as reasoning only because a generation prompt that
    opens it whatever the request sets did: the output writes neither the reasoning's opener nor its closer, and
    read with the template patched not to open it (:func:`_prompt_opener_patch`) the text before the calls is
    content and at least the same calls are read. A clean re-read gives the fix; one that stops later names that
    stop as a second fault. With a thinking flag the request turned on, that text is reasoning ended by the call
    (llama.cpp's own inputs read it so) and a patch that changes the prompt is not looked for: the request's flag
    re-read is not tried here. ``[]`` otherwise; one re-read."""
    msg = ex.message
    opener = r_start.strip(_WS)
    own = {m.strip(_WS) for m in ctx["all_markers"] | set(ctx["markers"]) if m}
    closers = [e.strip(_WS) for e in r_ends if e.strip(_WS) and e.strip(_WS) not in own]
    if not _reasoning_from_prompt_only(ex, bundle, ctx):
        return []
    req = setup.request
    if req.enable_thinking and _reread_opens(setup, ex):
        return []       # the request's own thinking flag opened it: reasoning ended by the call
    again = _reread_unopened(ex, setup, bundle, ctx, flags=False)
    if again is None:
        return []
    ex2, _s2, change, flag = again
    m2 = ex2.message
    text = (msg.get("reasoning_content") or "").strip(_WS)
    if (m2.get("reasoning_content") or "").strip(_WS) or len(m2.get("tool_calls") or []) < len(msg["tool_calls"]) \
            or text not in (m2.get("content") or ""):
        return []
    ev = [f"the parse files {_q(text)} as reasoning only because the generation prompt opens it with {_q(opener)} "
          f"whatever the request sets; the output writes neither {_q(opener)} nor {_q(closers[0])}, and read with "
          f"{flag} that text is the reply's content before the calls"]
    if ex2.clean:
        return ev
    where = ex2.stop.words() if ex2.stop is not None else "before its end"
    ctx["why_none"] = (f"read with {flag} the output still does not parse clean (it stops at {where}): a second "
                       "fault of the output, which no repair, request edit, override or template patch of ours reads "
                       "together with the reasoning setting — only the model's output (or a new repair) can change")
    return ev + [f"a second fault: read so, the parse stops at {where}"]


def _reply_before_repaired_calls(ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any], r_start: str,
                                 r_ends: list[str], expected: bool = False) -> list[str]:
    """:func:`_reply_filed_as_reasoning` for calls that only a repair reads: no call is read, the reasoning (opened
    by a generation prompt that opens it whatever the request sets; the output writes neither marker) holds text
    and then the template's call opener (or the content starts with it), and read with the template patched not to
    open it and the tolerance repairs, that text is the content before the calls the repairs read. A second fault of
    the call's markup (its layout's whitespace left out) does not hide the first. Not asked when the request's
    thinking is on (llama.cpp's default when it says nothing): text it asked to be reasoning, then a call, is a
    reasoning the model did not close — unless the user's expected message has that text as content (``expected``,
    :func:`_expected_reading`). The clean re-read's change (the patch and the fewest repairs that read the
    same message) is kept in ``ctx["patch_repairs"]``; one that stops later names that stop as a third fault. ``[]``
    otherwise; at most four parses."""
    msg = ex.message
    opener = r_start.strip(_WS)
    if msg.get("tool_calls") or not _reasoning_from_prompt_only(ex, bundle, ctx):
        return []
    if setup.request.enable_thinking and not expected:
        return []       # thinking asked for (or left at its default): text in the block is reasoning left open
    reasoning = msg.get("reasoning_content") or ""
    own = [m.strip(_WS) for m in ctx["markers"] if m and m.strip(_WS) and len(m.strip(_WS)) >= 2]
    at = min((reasoning.find(m) for m in own if m in reasoning), default=-1)
    if at < 0 and any((msg.get("content") or "").lstrip(_WS).startswith(m) for m in own):
        at = len(reasoning)     # (the call's opener ended the reasoning and the call was left in the content)
    text = reasoning[:at].strip(_WS) if at > 0 else ""
    budget = ctx.get("budget")
    if not text or budget is None:
        return []
    patch = _prompt_opener_patch(setup, ex, ctx, opener)
    if patch is None or not budget.take(len(ex.output)):
        return []
    tolerance = TOLERANCE_REPAIRS
    try:
        p = _parse(patch[1], ex.output, repairs=tolerance)
    except Exception:  # noqa: BLE001 - improved may not build on the patched template: no evidence
        return []
    m2 = p.message
    if not m2.tool_calls or (m2.reasoning_content or "").strip(_WS) or text not in (m2.content or "") \
            or (p.clean and any(m in (m2.content or "") for m in own)):
        return []
    fired = _fired(m2, tolerance)
    closers = [e.strip(_WS) for e in r_ends if e.strip(_WS) and e.strip(_WS) not in own]
    ev = [f"the parse files {_q(text)} and the call after it as reasoning only because the generation prompt opens "
          f"it with {_q(opener)} whatever the request sets; the output writes neither {_q(opener)} nor "
          f"{_q(closers[0] if closers else '')}, and read with the template's generation prompt patched not to open "
          f"it and the repair(s) {', '.join(f'`{n}`' for n in fired) or 'of improved fidelity'} that text is the "
          "reply's content before the calls (a second fault: the calls' markup is not the template's exactly)"]
    if p.clean:
        group, best = fired, m2.to_openai()
        for n in fired[:3] if len(fired) > 1 else []:
            if not budget.take(len(ex.output)):
                break
            one = _parse(patch[1], ex.output, repairs=(n,))
            if one.clean and _same(one.message.to_openai(), best):
                group = [n]
                break
        ctx["patch_repairs"] = (patch[0], group, best)
        return ev
    ctx["why_none"] = (f"read with the template's generation prompt patched not to open the reasoning and the "
                       f"repairs of improved fidelity, the output still does not parse clean (it stops at output "
                       f"position {p.stop}, {_q(ex.output[p.stop:], 30)}): a third fault, which no repair, request "
                       "edit, override or template patch of ours reads together with the others — only the "
                       "model's output (or a new repair) can change")
    return ev + [f"a third fault: read so, the parse stops at output position {p.stop}, {_q(ex.output[p.stop:], 30)}"]


def _unfound_token_pair(setup: _Setup, bundle: Any, out: str, msg: dict[str, Any], ctx: dict[str, Any], r_start: str,
                        r_ends: list[str]) -> tuple[dict[str, Any] | None, list[str], str] | None:
    """Control tokens of the template's own source left in a clean content, in pairs the analysis placed in no
    role while it found no reasoning markers: a block ``<|a|>`` … ``<|b|>`` (two distinct special-shaped tokens
    the source writes, as often each, opener first). With the pair as the reasoning markers (an override) the
    output may parse clean with the block split off — then that override is the fix; ``(change or None, [a, b],
    evidence)``; at most one parse."""
    content = msg.get("content") or ""
    budget = ctx.get("budget")
    if r_start or any(r_ends) or budget is None or len(out) > _STRIPPED_CHARS or not content:
        return None
    src = _src(setup)
    own = ctx["all_markers"] | set(ctx["markers"]) | set(ctx["closers"])
    toks = [m.group(0) for m in _SPECIAL_SHAPE.finditer(content)]
    mine = [t for t in toks if t in src and t not in own and not any(t in o for o in own if o)]
    if len(mine) < 2 or mine[0] == mine[1]:
        return None
    a, b = mine[0], mine[1]
    if content.count(a) != content.count(b) or any(t not in (a, b) for t in mine) \
            or [t for t in mine] != [a, b] * (len(mine) // 2):
        return None
    empty = [c for c in _empty_comparisons(bundle) if c.startswith("R")]
    ev = (f"the content keeps {_q(a)} … {_q(b)}, control tokens the template's source writes, which our analysis "
          "placed in no role and with no reasoning markers found — a gap of the analysis, not a statement about the "
          "template; the parse is not clean" + ("; comparisons that came back empty: " + "; ".join(empty)
                                                 if empty else ""))
    overrides = {"reasoning.mode": "TAG_BASED", "reasoning.start": a, "reasoning.end": b}
    if not budget.take(len(out)):
        return None, [a, b], ev
    try:
        p = _parse(replace(setup, overrides={**setup.overrides, **overrides}), out)
        got = p.message.content or ""
        if p.clean and (p.message.reasoning_content or "").strip(_WS) and a not in got and b not in got \
                and len(p.message.tool_calls) >= len(msg.get("tool_calls") or []):
            return {"overrides": overrides}, [a, b], ev + "; with that pair as the reasoning markers (an override) " \
                                                          "the output parses clean"
    except Exception:  # noqa: BLE001 - an override that does not build gives no evidence
        pass
    where = "after other text" if not out.lstrip(_WS).startswith(a) else "more than once"
    ctx["why_none"] = (f"the block {_q(a)} … {_q(b)} is written {where}: the reasoning markers as an override read "
                       "one block at the very start of the output, so no change of ours (repair, request edit, "
                       "override, template patch, server setting) takes it out of the content — an analysis that "
                       "finds the template's reasoning markers and a parser that reads such blocks anywhere would "
                       "be needed")
    return None, [a, b], ev


def _omitted_control_token(setup: _Setup, ex: Any, ctx: dict[str, Any]) -> str:
    """Evidence when the parse stopped where it expected a control token the template's source writes, and with
    that token put in at the stop the output parses clean: plain text after an omitted marker is no call syntax.
    ``""`` otherwise; at most two parses."""
    stop, budget = ex.stop, ctx.get("budget")
    if stop is None or budget is None or len(ex.output) > _STRIPPED_CHARS or not 0 <= stop.output_pos <= len(ex.output):
        return ""
    src = _src(setup)
    for lit in [x for x in _literals(stop.expected) if _SPECIAL_SHAPE.fullmatch(x.strip(_WS)) and x.strip(_WS) in src][:2]:
        if not budget.take(len(ex.output)):
            return ""
        try:
            p = _parse(setup, Edit("insert", stop.output_pos, "", lit).apply(ex.output))
        except Exception:  # noqa: BLE001
            continue
        if p.clean and lit.strip(_WS) not in (p.message.content or ""):
            return (f"the parse wanted {_q(lit.strip(_WS))}, a marker the template writes, at output position "
                    f"{stop.output_pos} and found {_q(stop.found)}: with it put there the output parses clean — the "
                    "model omitted the marker; the text after it is the reply, no call syntax")
    return ""


def _restore_stripped_at_stop(ex: Any) -> str:
    """The output with the marker the parse wanted at its stop put back where the decoder left only its word:
    the expected literal whose text without its control tokens is the word found there (``analysis`` for
    ``<|channel|>analysis<|message|>``), the one space the decoder put after the word dropped. ``""`` if none."""
    stop = ex.stop
    if stop is None or not 0 <= stop.output_pos < len(ex.output):
        return ""
    out, at = ex.output, stop.output_pos
    word = re.compile(r"[\w.\-]{1,40}").match(out, at)
    if not word:
        return ""
    for lit in _literals(stop.expected):
        bare = _SPECIAL_SHAPE.sub("", lit).strip(_WS)
        if bare == word.group(0) and bare != lit.strip(_WS):
            rest = out[word.end():]
            return out[:at] + lit + (rest[1:] if rest.startswith(" ") else rest)
    return ""


def _prompt_tail_repeated(ex: Any, setup: _Setup, ctx: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """A clean content that starts with control text the generation prompt already ends with (an opener written
    again): the longest tail of the prompt, holding a whole control token, that the content starts with. When the
    request's thinking flag switched over gives a prompt that does not end with it and the output then parses
    clean without it, the setting is the fault: ``(change, evidence)``; at most two parses."""
    content = (ex.message.get("content") or "").lstrip(_WS)
    gp = ex.generation_prompt.rstrip(_WS)
    budget = ctx.get("budget")
    if not content or not gp or budget is None or len(ex.output) > _STRIPPED_CHARS:
        return None
    tail = ""
    for m in _SPECIAL_SHAPE.finditer(gp[-200:]):
        cand = gp[-200:][m.start():]
        if content.startswith(cand):
            tail = cand
            break
    if not tail:
        return None
    for on in (not setup.request.enable_thinking, setup.request.enable_thinking):
        change = _thinking_flag_change(setup.request, on)
        if not budget.take(len(ex.output)):
            return None
        try:
            req2 = apply_request_change(setup.request, change)
            p = _parse(setup, ex.output, request=req2)
        except Exception:  # noqa: BLE001
            continue
        if p.clean and tail not in (p.message.content or "") and p.message.to_openai() != ex.message:
            return change, (f"the content starts with {_q(tail)}, the control text the generation prompt already ends "
                            f"with: the model wrote that opener again, as the prompt of the other thinking setting "
                            f"leaves it to the model; read with {json.dumps(change)} the output parses clean — "
                            "the parse was not clean")
    return None


def _repeated_tail(ex: Any, r_start: str) -> str:
    """The tail of the generation prompt the output begins by writing again (the labelling guide's step 3): the
    longest stretch at the prompt's end that starts at a control token and that the output, outer whitespace aside,
    starts with, while the parse is not clean or keeps it in the message; ``""`` when there is none, when the parse
    read past it, or when it is the reasoning opener (that is re-opened reasoning)."""
    gp = ex.generation_prompt.rstrip(_WS)[-200:]
    out = ex.output.lstrip(_WS)
    kept = (ex.message.get("content") or "") + (ex.message.get("reasoning_content") or "")
    for m in _SPECIAL_SHAPE.finditer(gp):
        tail = gp[m.start():]
        if out.startswith(tail):
            opener = r_start.strip(_WS)
            if opener and (tail.startswith(opener) or opener.startswith(tail)):
                return ""
            # (a parse that skipped the tail and placed everything else read the output as meant: no mistake)
            return tail if not ex.clean or tail in kept else ""
    return ""


def _fired(message: Any, among: Any = None) -> list[str]:
    """The names of the repairs that fired on a parsed ``message``, in the order they first fired (those ``among``
    the given names when given)."""
    names = dict.fromkeys(getattr(r, "name", "") for r in message.repairs)
    return [n for n in names if n and (among is None or n in among)]


_TAIL_REPAIRS = (REPEATED_TURN_HEADER, REPEATED_PROMPT_TAIL)


def _left_after_tail_repairs(setup: _Setup, out: str, budget: Any) -> str:
    """Why no fix applies when a repair that skips a repeated prompt tail reads this one (its own record: it fires)
    and the parse still stops: where, and on what — the fault left is after the tail. ``""`` when neither repair
    fires, or the re-parse is clean (then a fix is offered) or cut."""
    if not budget.take(len(out)):
        return ""
    try:
        p = _parse(setup, out, repairs=_TAIL_REPAIRS)
    except Exception:  # noqa: BLE001 - improved fidelity may not build: nothing to say
        return ""
    fired = _fired(p.message, _TAIL_REPAIRS)
    if not fired or p.clean or p.stop < 0:
        return ""
    found = stop_point(out, 0, p.stop, [], ()).found
    return (f"the repair {', '.join(f'`{n}`' for n in fired)} reads the repeated tail (it fires on this output), "
            f"but its parse then stops at output position {p.stop}: expected "
            f"{' or '.join(p.expected) or 'something else'}; found {_q(found) if found else 'the end of the output'}"
            " — no change of ours (repair, request, override, template patch, server setting) reads what is left "
            "there: the model's output (or a new repair) must change")


# the call-format classes the relation of the template's call pieces to the output's markup decides
_CALL_FORMAT = frozenset({Mistake.FORMAT_NOT_FOUND, Mistake.TEMPLATE_MODEL_MISMATCH, Mistake.FOREIGN_WRAPPER,
                          Mistake.OMITTED_MARKER, Mistake.OMITTED_OPENER, Mistake.OMITTED_CLOSER})


# The labelling guide's step of each cause (docs/explain.md, "Labelling guide: a decision order"): the earlier step
# wins, within a step the fault first by position in the output
GUIDE_STEP = {
    Mistake.NONE: 1, Mistake.FORMAT_NOT_FOUND: 1, Mistake.ANALYSIS_MISREAD: 1,
    Mistake.REASONING_SETTING: 2, Mistake.SPECIAL_TOKENS_STRIPPED: 2, Mistake.STOP_STRING_STRIPPED: 2,
    Mistake.CUT_SHORT: 2, Mistake.TOOLS_NOT_SENT: 2, Mistake.PARALLEL_NOT_REQUESTED: 2,
    Mistake.REOPENED_REASONING: 3, Mistake.REPEATED_PROMPT_TAIL: 3,
    Mistake.TEMPLATE_MODEL_MISMATCH: 4, Mistake.OMITTED_OPENER: 4, Mistake.OMITTED_MARKER: 4,
    Mistake.OMITTED_CLOSER: 4, Mistake.FOREIGN_WRAPPER: 4, Mistake.REASONING_NOT_CLOSED: 4,
    Mistake.CALL_OUTSIDE_SECTION: 4, Mistake.LEADING_TEXT: 4, Mistake.TRAILING_TEXT: 4,
    Mistake.FIELD_ALIAS: 5, Mistake.DOUBLE_ENCODED_ARGUMENTS: 5, Mistake.UNKNOWN_TOOL: 5,
    Mistake.MISSING_REQUIRED: 5, Mistake.UNKNOWN_PARAMETER: 5, Mistake.TYPE_MISMATCH: 5, Mistake.CALL_ID_SHAPE: 5,
}
_ID_MEMBER = re.compile(r',\s?"id"\s?:')
_PY_WORDS = ("True", "False", "None")
_WORDY = re.compile(r"[A-Za-z0-9]")
_QUOTED = re.compile(r'"[^"\\\n]{1,64}"')


def edit_mistake(e: Edit, out: str, ctx: dict[str, Any]) -> Mistake | None:
    """The cause one edit of the nearest output stands for (``e.pos`` in ``out``, the original output), from the
    edit's kind, what it removes or puts in and where (docs/explain.md, "Nineteenth round of rules", the table);
    None where the edit alone does not say (an insert at the very end: a cut, a stop string or a closer, which the
    setup's step decides; an edit kind this table does not know)."""
    old, new = e.old.strip(_WS), e.new.strip(_WS)
    before, after = out[:e.pos].strip(_WS), out[e.pos + len(e.old):].strip(_WS)
    if e.kind == "insert":
        if _ID_MEMBER.match(e.new):
            return Mistake.CALL_ID_SHAPE
        if not after:
            return None
        if _required_put_in(e, out, ctx):
            return Mistake.MISSING_REQUIRED     # the schema's required argument the call never wrote
        if not new:
            return Mistake.OMITTED_MARKER
        if new.startswith("</"):
            return Mistake.OMITTED_CLOSER
        if not before or new in ctx.get("markers", ()):
            return Mistake.OMITTED_OPENER
        return Mistake.OMITTED_MARKER
    if e.kind == "delete":
        if not old:
            return Mistake.OMITTED_MARKER       # whitespace written inside the markup
        token = bool(_SPECIAL_SHAPE.fullmatch(old))
        if not before:
            if ctx.get("gp", "").rstrip(_WS).endswith(old):
                return Mistake.REPEATED_PROMPT_TAIL
            if token:
                return Mistake.FOREIGN_WRAPPER      # a control token before the call
            return Mistake.LEADING_TEXT if not MARKUP.search(old) else None
        if not after:
            if not _parallel_allowed(ctx) and _starts_call(old.lstrip(";,"), ctx):
                return None     # a second call: the request's parallel setting (step 2) or text after the call
            return Mistake.TRAILING_TEXT        # text (or a call) after the calls where the format ends the turn
        if token and (after.startswith("{") or any(m and after.startswith(m) for m in ctx.get("markers", ()))):
            return Mistake.FOREIGN_WRAPPER      # a control token right before a call, after text the parse reads
        return None
    if e.kind == "replace":
        if _QUOTED.fullmatch(old) and _QUOTED.fullmatch(new):
            return Mistake.FIELD_ALIAS
        if old in _PY_WORDS:
            return Mistake.TYPE_MISMATCH
        if not _WORDY.search(old) or _SPECIAL_SHAPE.fullmatch(old) or _TOKEN.fullmatch(old):
            return Mistake.OMITTED_MARKER       # a piece replaced by another string (punctuation, one marker)
        return None     # (text with markup around it replaced: two call blocks joined, text between them)
    return None


def _required_put_in(e: Edit, out: str, ctx: dict[str, Any]) -> bool:
    """Whether an insert puts in an argument the request's schema requires of the tool named last before it,
    whose name the output does not write between that tool's name and the insert (the nearest output's
    :func:`~.nearest._required_argument_missing`): the omission is the schema's to name, not a marker's."""
    tool = _tool_named_last(out, e.pos, ctx.get("names", ()))
    if tool[0] < 0 or any(n and n in e.new for n in ctx.get("names", ())):
        return False
    written = out[:e.pos]
    return any(_last_word(e.new, r, 0) >= 0 and _last_word(written, r, tool[0] + len(tool[1])) < 0
               for r in required_of(ctx.get("schemas", {}).get(tool[1]))[:16])


def _parallel_allowed(ctx: dict[str, Any]) -> bool:
    """Whether the request of the triage's setup allows parallel calls."""
    setup = ctx.get("setup")
    return bool(setup is not None and setup.request.parallel_tool_calls)


def _starts_call(text: str, ctx: dict[str, Any]) -> bool:
    """Whether ``text`` (stripped) begins a call: a JSON call object or one of the format's call markers."""
    text = text.strip(_WS)
    return bool(_JSON_CALL_START.match(text)) or any(m and text.startswith(m) for m in ctx.get("markers", ()))


def _first_edit_fault(mistake: Mistake, ex: Any, near: tuple[list[Edit], _Parsed] | None, ctx: dict[str, Any]
                      ) -> tuple[Mistake, str] | None:
    """The labelling guide's "two faults in one output" read from the nearest output, whose edits are the model's
    mistakes: where the mistake named is the cause of one edit (:func:`edit_mistake`) while another edit comes first
    — by the guide's step (:data:`GUIDE_STEP`), then by output position — that first edit's cause is the mistake and
    the named one the second. Every edit must have a cause; a reading of the setup (step 2, no edit's cause) is
    never overruled. None otherwise (no parse)."""
    if not near or len(near[0]) < 2 or len(near[0]) > MAX_EDITS:
        return None
    out = ex.output
    read = [(edit_mistake(e, out, ctx), e) for e in _shift(near[0])]
    known = [(m, e) for m, e in read if m is not None]
    if len(known) < len(read) or not any(m == mistake for m, _ in known):
        return None
    first_m, first_e = min(known, key=lambda x: (GUIDE_STEP[x[0]], x[1].pos))
    if first_m == mistake:
        return None
    how = "step" if GUIDE_STEP[first_m] < GUIDE_STEP[mistake] else "position"
    return first_m, sentence_of([first_e], out) + f" — the first fault by {how} (the second: {mistake.value})"


def classify_mistake(ex: Any, setup: _Setup, bundle: Any, near: tuple[list[Edit], _Parsed] | None,
                     ctx: dict[str, Any]) -> tuple[Mistake, list[str]]:
    """The mistake and its evidence (:func:`_classified`), the first of two faults where the nearest output's edits
    show that the one named comes later (:func:`_first_edit_fault`)."""
    mistake, ev = _classified(ex, setup, bundle, near, ctx)
    first = _setup_fault_first(mistake, ex, bundle, ctx) or _first_edit_fault(mistake, ex, near, ctx)
    if first is None:
        return mistake, ev
    ctx["headline"] = first[1]
    return first[0], ev + [first[1]]


def _classified(ex: Any, setup: _Setup, bundle: Any, near: tuple[list[Edit], _Parsed] | None,
                ctx: dict[str, Any]) -> tuple[Mistake, list[str]]:
    """The mistake and its evidence: the rules' reading (:func:`_rule_reading`), and where that is a call-format
    class (or no mistake with a call read nowhere) the relation of the template's rendered call
    pieces to the output's markup decides (:func:`_arbitrated`), unless a rule with evidence of its own named it."""
    mistake, ev = _rule_reading(ex, setup, bundle, near, ctx)
    expected = _expected_reading(mistake, ex, setup, bundle, ctx)
    if expected is not None:
        ctx["headline"] = expected[1]
        # (the reading of the output alone stays in the evidence, said to be that)
        stops = [e for e in ev if e.startswith("the parse stopped at")]
        return expected[0], stops + [expected[1]] + [f"the output alone reads as {mistake.value}: " + e
                                                     for e in ev[-1:] if e not in stops]
    spaced = _whitespace_before_expected(mistake, ex, ev, ctx)
    if spaced:
        ctx["specific"] = True
        return Mistake.OMITTED_MARKER, ev + [spaced]
    decided = _misnamed_call(ex, setup, ctx) or _misdecoded_spaces(mistake, ex, setup, bundle, ctx) \
        or _token_gone_everywhere(mistake, ex, setup, bundle, ctx) \
        or _whitespace_added_first(mistake, ex, setup, bundle, ctx) or _arbitrated(mistake, ex, setup, bundle, ctx) \
        or _leading_text(mistake, ex, setup, bundle, ctx) or _fault_before_call(mistake, ex, setup, bundle, ctx) \
        or _closer_omitted(mistake, ex, setup, bundle, ctx) or _text_opener_omitted(mistake, ex, setup, ctx) \
        or _bare_call_in_content(mistake, ex, setup, bundle, ctx) or _layout_before_key_order(mistake, ex, setup,
                                                                                             bundle, ctx) \
        or _opener_before_key_order(mistake, ex, setup, bundle, ctx)
    if decided is None or decided[0] == mistake:
        return mistake, ev
    if (mistake == Mistake.TRAILING_TEXT or mistake in _INSIDE_CALL) \
            and decided[0] in (Mistake.LEADING_TEXT, Mistake.FOREIGN_WRAPPER):
        # (the text after the call stays the second fault: its reading and its fix are kept)
        ctx["relation_decided"] = True
        ctx["headline"] = decided[1].split("; ", 1)[-1]
        return decided[0], ev + [decided[1]]
    why_none = ctx.get("why_none") if decided[0] == Mistake.SPECIAL_TOKENS_STRIPPED else None
    for key in ("restored", "restored_server", "restored_reasoning", "why_none", "headline", "affix", "needs_call"):
        ctx.pop(key, None)      # (what the overruled reading left for its own fixes and sentence)
    if why_none:
        ctx["why_none"] = why_none
    if decided[0] == Mistake.SPECIAL_TOKENS_STRIPPED and ctx.get("token_restored"):
        ctx["restored"] = ctx["token_restored"]     # (the output with the token put back: the server fix's)
        ctx["headline"] = decided[1].split("; ", 2)[-1]
    if ctx.get("headline_after"):
        ctx["headline"] = ctx.pop("headline_after")     # (the decision's own sentence, not the nearest output's)
    ctx["relation_decided"] = True
    return decided[0], [e for e in ev if e.startswith("the parse stopped at")] + [decided[1]]


def _whitespace_before_expected(mistake: Mistake, ex: Any, ev: list[str], ctx: dict[str, Any]) -> str:
    """The labelling guide's whitespace clarification where the rules named another format with no evidence but
    the stop point: the parse stopped where it expected one of the template's own markers, and the output writes
    whitespace there and then that very marker — whitespace inside the markup where the template writes none, an
    omitted marker of step 4, not another format (the marker the parser wanted is written). ``""`` otherwise; a
    ``strip`` and a ``startswith`` per expected literal, no parse."""
    stop = ex.stop
    if mistake != Mistake.TEMPLATE_MODEL_MISMATCH or ex.clean or stop is None \
            or not all(e.startswith("the parse stopped at") for e in ev):
        return ""
    found = stop.found or ""
    rest = found.lstrip(_WS)
    gap = found[:len(found) - len(rest)]
    own = ctx["all_markers"] | set(ctx["markers"]) | set(ctx["closers"])
    lit = next((x for x in stop.literals if x and x == x.lstrip(_WS) and x.strip(_WS) in own and rest.startswith(x)),
               "")
    if not gap or not lit:
        return ""
    return (f"the output writes {_q(gap)} and then {_q(lit.strip(_WS))}, the template's own marker the parser "
            "expected right there: whitespace written inside the markup where the template writes none — an omitted "
            "marker (the guide's whitespace clarification), not another format")


def _arbitrated(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                ) -> tuple[Mistake, str] | None:
    """The call-format class the relation names for this output, when it decides: the rules' answer is a
    call-format class without evidence of its own (``ctx["specific"]``), or none while no call was read and the
    output is call-like (stripped special tokens are not overruled: that reading re-parsed the output with the
    tokens put back). None when the relation has nothing to say."""
    msg = ex.message
    if ctx.get("specific") or msg.get("tool_calls"):
        return None
    if mistake not in _CALL_FORMAT and not (mistake == Mistake.NONE and _call_like(ex.output, ctx["names"])):
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None:
        return None
    empty = _empty_comparisons(bundle)
    unread = ("; comparisons that came back empty: " + "; ".join(empty)) if empty else \
        ("; this template is read by a handler of its own, not by the analysis" if bundle.format != "peg-native"
         else "")
    misread = _analysis_misread(ex, bundle)
    written = _written_by_prompt(rel, ex)
    if written and misread:
        # (the labelling guide's step 1: the output is the template's render after the prompt; the analysis
        # found a format, but not the one the render shows)
        return Mistake.ANALYSIS_MISREAD, rel.sentence() + f"; the generation prompt already ends with " \
            f"{', '.join(_q(x) for x in written)}, and the output writes every other piece, in order — it is the " \
            f"template's own call after the prompt — yet the parse read no call: the analysis found a format, but " \
            f"not the one the template renders ({misread})"
    if rel.relation == Relation.FOREIGN_WRAPPER and rel.pieces and rel.pieces[0] in rel.absent:
        # (the labelling guide's step 4: an omission wins over a wrapper — the opener is missing, the markup
        # around the call stands in its place)
        return Mistake.OMITTED_OPENER, rel.sentence() + f"; the template's opener {_q(rel.pieces[0])} is not " \
            "written, and the markup around the call stands where it belongs: the model omitted the opener " \
            "(an omission comes before a wrapper)"
    if mistake == Mistake.FOREIGN_WRAPPER and rel.relation == Relation.ALTERED and rel.pieces \
            and rel.pieces[0] in rel.absent and rel.altered:
        return Mistake.OMITTED_OPENER, rel.sentence() + f"; the template's opener {_q(rel.pieces[0])} is not " \
            f"written, {_q(rel.altered)} stands in its place: the model omitted the opener (an omission comes " \
            "before a wrapper)"
    inner = next((x for x in rel.absent if not x.startswith("</")), "") if rel.pieces and rel.pieces[0] \
        not in rel.absent else ""
    if mistake == Mistake.FOREIGN_WRAPPER and inner and inner != rel.pieces[0] \
            and rel.relation in (Relation.ALTERED, Relation.OMITTED_MARKER) and not rel.foreign:
        # (the "wrapper" is the template's own opener, written: a piece inside the call is what is missing)
        return Mistake.OMITTED_MARKER, rel.sentence() + f"; the output writes the template's opener " \
            f"{_q(rel.pieces[0])} but not {_q(inner)}: the model omitted a piece inside the call (an omission " \
            "comes before a wrapper)"
    if rel.relation in DECISIVE:
        return Mistake[rel.relation.value], rel.sentence() + (unread if rel.relation == Relation.FORMAT_NOT_FOUND
                                                               else "")
    whole = rel.relation == Relation.ALTERED and not rel.absent and not rel.foreign \
        and mistake == Mistake.TEMPLATE_MODEL_MISMATCH
    if whole and rel.altered == ALTERED_WHITESPACE:
        # (the labelling guide's clarification: whitespace written inside the template's markup where its render
        # writes none is an omitted marker of step 4, not another format)
        return Mistake.OMITTED_MARKER, rel.sentence() + "; every piece is written, in the template's order, with " \
            "whitespace of the output's own between them where the render writes none or other: the markup is the " \
            "template's but for that whitespace — an omitted marker, not another format"

    typed = _declared_type(setup.request, rel.stop_key) if rel.stop_in == "value" else ""
    if rel.relation == Relation.CONSISTENT and typed not in ("", "string") \
            and mistake in (Mistake.OMITTED_MARKER, Mistake.OMITTED_OPENER, Mistake.OMITTED_CLOSER):
        # every piece where the render writes it, its whitespace too: nothing was omitted, and the parse stopped
        # inside a value the schema types
        return Mistake.TYPE_MISMATCH, rel.sentence() + f"; the output writes every one of them as the template " \
            f"renders them (its whitespace too), so nothing was omitted: the parse stopped inside the value of " \
            f"{_q(rel.stop_key)}, which the schema types as {typed} — the value is not of its type"
    if rel.relation == Relation.CONSISTENT and mistake in (Mistake.TEMPLATE_MODEL_MISMATCH, Mistake.FOREIGN_WRAPPER):
        # every piece of the template's call written, in order, nothing around it no render writes, and the
        # parse read no call: the output is the template's own call, which our parser does not read
        if misread:
            return Mistake.ANALYSIS_MISREAD, rel.sentence() + "; the output writes every one of them, in order, " \
                "with nothing around the call that the template's renders do not write, yet the parse read no " \
                f"call: the analysis found a format, but not the one the template renders ({misread})"
        return Mistake.FORMAT_NOT_FOUND, rel.sentence() + "; the output writes every one of them, in order, with " \
            "nothing around the call that the template's renders do not write, yet the parse read no call: the " \
            "template writes this call, our parser (its analysis or handler) does not read it" + unread
    return None


def _expected_reading(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                      ) -> tuple[Mistake, str] | None:
    """The user's expected message decides where the output alone leaves two readings (the labelling guide's step 2
    before step 4): text that only the generation prompt's reasoning opener made reasoning (the output writes
    neither the opener nor a closer), then the calls, read as reasoning never closed — while the expected message
    has that text as its content and no reasoning: the engine ran no reasoning step on a prompt that opens the block
    whatever the request sets, a setting (``REASONING_SETTING``), not a model that forgot to close it; the template
    patched not to open it, with the repairs a second fault of the calls' markup needs, is looked for
    (:func:`_reply_before_repaired_calls`). ``None`` without an expected message or when it agrees with the rules'
    reading."""
    expect = ctx.get("expect")
    if expect is None:
        return None
    if mistake == Mistake.NONE and _reasoning_kept(ex, expect):
        ctx["reasoning_kept"] = True
        return Mistake.REASONING_SETTING, (
            f"the expected message keeps {_q((ex.message.get('reasoning_content') or '').strip(_WS))} in its content, "
            "with the reasoning's markers, where the parse reads it as reasoning: the engine ran no reasoning "
            "extraction on this output (a reasoning setting of the server or the template), not a fault of the model")
    if mistake == Mistake.NONE:
        return _expected_reasoning_unmarked(ex, bundle, ctx, expect)
    if mistake != Mistake.REASONING_NOT_CLOSED or not _reasoning_from_prompt_only(ex, bundle, ctx):
        return None
    if (expect.get("reasoning_content") or "").strip(_WS) or not expect.get("tool_calls"):
        return None
    reasoning = ex.message.get("reasoning_content") or ""
    own = [m.strip(_WS) for m in ctx["markers"] if m and len(m.strip(_WS)) >= 2]
    at = min((reasoning.find(m) for m in own if m in reasoning), default=len(reasoning))
    text = reasoning[:at].strip(_WS)
    if not text or text not in (expect.get("content") or ""):
        return None
    r_start, r_ends = reasoning_markers(bundle)
    opener = r_start.strip(_WS)
    _reply_before_repaired_calls(ex, setup, bundle, ctx, r_start, r_ends, expected=True)
    return Mistake.REASONING_SETTING, (
        f"the expected message has {_q(text)} as its content and no reasoning, while the parse files it as reasoning "
        f"only because the generation prompt opens {_q(opener)}: the engine read the output with no reasoning step, "
        "a setting of the server or the template, not reasoning the model left open")


def _reasoning_kept(ex: Any, expect: dict[str, Any] | None) -> bool:
    """The expected message has no reasoning, while the parse reads some, and its content holds that reasoning's
    text with more around it (the block's markers): the engine read the block as content."""
    if expect is None or not ex.clean or (expect.get("reasoning_content") or "").strip(_WS):
        return False
    reasoning = (ex.message.get("reasoning_content") or "").strip(_WS)
    want = expect.get("content") or ""
    return bool(reasoning) and reasoning in want and len(want.strip(_WS)) > len(reasoning) \
        and len(expect.get("tool_calls") or []) == len(ex.message.get("tool_calls") or [])


def _expected_reasoning_unmarked(ex: Any, bundle: Any, ctx: dict[str, Any], expect: dict[str, Any]
                                 ) -> tuple[Mistake, str] | None:
    """A clean parse with no calls whose content holds the text the expected message files as reasoning, while the
    output writes none of the template's reasoning markers: the engine reads reasoning from the output's first
    token (a prompt it treats as opening the block, or a reasoning parser that assumes it) — the reasoning setting
    (step 2), not "no mistake". A repair that reads an unclosed reasoning is then a fix (``unfinished_reasoning``)."""
    msg = ex.message
    r_start, r_ends = reasoning_markers(bundle)
    want = (expect.get("reasoning_content") or "").strip(_WS)
    content = msg.get("content") or ""
    if not (ex.clean and want and r_start.strip(_WS) and r_ends) or msg.get("tool_calls") or expect.get("tool_calls") \
            or (msg.get("reasoning_content") or "").strip(_WS) or want not in content:
        return None
    if any(m.strip(_WS) and m.strip(_WS) in ex.output for m in [r_start] + r_ends):
        return None
    ctx["unfinished_reasoning"] = True
    return Mistake.REASONING_SETTING, (
        f"the expected message files {_q(want)} as reasoning, which the parse gives as content: the output writes "
        f"neither {_q(r_start.strip(_WS))} nor {_q(r_ends[0].strip(_WS))}, so the engine read reasoning from the "
        "output's first token — a reasoning setting (the prompt or the reasoning parser taken to open the block), "
        "not a fault of the model's markup")


def _token_gone_everywhere(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                           ) -> tuple[Mistake, str] | None:
    """The labelling guide's step 2 before step 4: the template's render of the call writes one control token at
    two or more places inside the call (Gemma 4's string delimiter ``<|"|>`` around each value), the output writes
    it nowhere while every other piece of the call, its control tokens too, is written — that token gone at every
    instance is the decoder's (special tokens skipped), not an omission by the model. The call is put back together
    from the render (the output's own text in the render's value places) and re-parsed; the output with the token
    back is kept for the server fix. One parse; None otherwise."""
    msg, out = ex.message, ex.output
    if msg.get("tool_calls") or ctx.get("budget") is None or not (mistake in _CALL_FORMAT or mistake == Mistake.NONE):
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or rel.relation != Relation.ALTERED or rel.foreign or len(rel.absent) < 2 or not rel.matched:
        return None
    tok = rel.absent[0]
    if any(a != tok for a in rel.absent) or not MARKUP.fullmatch(tok) or tok in out \
            or rel.pieces[0] == tok or not any(MARKUP.fullmatch(m) for m in rel.matched):
        return None
    render = rel.render
    first, last = render.find(rel.matched[0]), render.rfind(rel.matched[-1])
    if first < 0 or last < first:
        return None
    call = render[first:last + len(rel.matched[-1])]
    # the render's literal text (the token taken out) between its value places, found in order in the output
    parts = re.split(r"(zqv\d+x)", call)
    start = out.find(parts[0].replace(tok, ""))
    if start < 0:
        return None
    at, built = start + len(parts[0].replace(tok, "")), [parts[0]]
    for i in range(1, len(parts), 2):
        lit = parts[i + 1].replace(tok, "")
        end = out.find(lit, at) if lit else len(out)
        if end < 0 or (lit and not lit.strip(_WS) and not parts[i + 1].strip(_WS)):
            return None
        value = out[at:end]
        if tok in parts[i - 1] + parts[i + 1] and value[:1] + value[-1:] and \
                (value[:1] in "\"'`" + _WS or value[-1:] in "\"'`" + _WS):
            return None     # (a quote or a space stands where the token goes: replaced, the omission of step 4)
        built += [value, parts[i + 1]]
        at = end + len(lit)
    restored = out[:start] + "".join(built) + out[at:]
    if restored == out or not ctx["budget"].take(len(restored)):
        return None
    p = _parse(setup, restored)
    if not (p.clean and p.message.tool_calls):
        return None
    ctx["token_restored"] = restored
    return Mistake.SPECIAL_TOKENS_STRIPPED, rel.sentence() + (
        f"; the template writes {_q(tok)} at {len(rel.absent)} places inside the call, the output at none, while it "
        "writes every other piece, its control tokens too: that token gone at every instance is the decoder's "
        f"(special tokens skipped), not an omission by the model; with {_q(tok)} put back where the render writes it "
        f"the output parses clean to {len(p.message.tool_calls)} call(s)")


# a byte-level tokenizer's mark for a whitespace character, left undecoded (GPT-2's byte-to-unicode table)
_BYTE_MARKS = {" ": "\u0120", "\n": "\u010a", "\t": "\u0109"}


def _misdecoded_spaces(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                       ) -> tuple[Mistake, str] | None:
    """The labelling guide's step 2 for a decoder that mis-decoded the whitespace the template writes between two
    of its call pieces (MiniCPM5's ``<function name=``): every instance of such a piece in the output is followed by
    the next piece glued to it or by the byte-level mark of that whitespace (``Ġ``) — never by the whitespace — and
    the output with the whitespace put back parses clean with calls. The decoder's fault, before any omission or
    wrapper of the model's markup; one parse. None otherwise."""
    if mistake not in _CALL_FORMAT or ex.message.get("tool_calls") or ctx.get("budget") is None:
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or len(rel.pieces) < 2:
        return None
    out, render, at, junctions = ex.output, rel.render, 0, {}
    for a, b in zip(rel.pieces, rel.pieces[1:]):
        i = render.find(a, at)
        j = render.find(b, i + len(a)) if i >= 0 else -1
        if j < 0:
            break
        gap, at = render[i + len(a):j], j
        if gap in _BYTE_MARKS and out.count(a):
            junctions[(a, gap, b)] = None
    faults, fixed = [], out
    for a, gap, b in junctions:
        # (whitespace lost between two whole tags is the model's layout, an omitted marker; lost inside one tag
        # head, `<param name=`, it is the token boundary the decoder dropped)
        inside = not a.endswith(">") and not b.startswith("<")
        marked, glued = out.count(a + _BYTE_MARKS[gap] + b), out.count(a + b) if inside else 0
        if out.count(a + gap + b) or marked + glued != out.count(a):
            continue
        faults.append((a, gap, b, marked, glued))
        fixed = fixed.replace(a + _BYTE_MARKS[gap] + b, a + gap + b).replace(a + b, a + gap + b)
    if not faults or not ctx["budget"].take(len(out)):
        return None
    p = _parse(setup, fixed)
    if not (p.clean and p.message.tool_calls):
        return None
    said = "; ".join(f"every {_q(a)} is followed by " + " or ".join(
        x for x in ((f"{_q(_BYTE_MARKS[gap] + b)} (the byte-level mark of {_q(gap)}, left undecoded)" if marked
                     else ""), (f"{_q(b)} glued to it (the {_q(gap)} lost)" if glued else "")) if x)
        + f" where the template writes {_q(a + gap + b)}" for a, gap, b, marked, glued in faults)
    ctx["why_none"] = ("the decoder mis-decoded the whitespace between the template's tag tokens (a byte-level mark "
                       "left undecoded, or the space between two tokens lost): decode the output with the tokenizer's "
                       "own decoder; no repair of ours reads the mis-decoded tags")
    return Mistake.SPECIAL_TOKENS_STRIPPED, (
        f"{said}: every instance of the piece alike, the rest of the call's markup as the template writes it — the "
        "decoder's fault, not an omission by the model; with the whitespace put back the output parses clean to "
        f"{len(p.message.tool_calls)} call(s)")


def _leading_text(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                  ) -> tuple[Mistake, str] | None:
    """The labelling guide's step 4 for text before a call whose markup is whole: every piece of the template's
    call is written (nothing absent, nothing foreign), text with no markup stands before the first piece, no
    reasoning or call was read, and the output from the first piece on parses clean with calls — the template's
    call turn starts with the call and the format has no place for the text. One parse; None otherwise."""
    msg = ex.message
    if msg.get("tool_calls") or (msg.get("reasoning_content") or "").strip(_WS) or ctx.get("budget") is None \
            or not (mistake in _CALL_FORMAT or mistake == Mistake.NONE):
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or not rel.pieces or rel.absent or rel.foreign \
            or rel.relation not in (Relation.CONSISTENT, Relation.ALTERED):
        return None
    first = ex.output.find(rel.pieces[0])
    lead = ex.output[:first] if first > 0 else ""
    if not lead.strip(_WS) or MARKUP.search(lead) or not ctx["budget"].take(len(ex.output)):
        return None
    p = _parse(setup, ex.output[first:])
    if not (p.clean and p.message.tool_calls):
        return None
    return Mistake.LEADING_TEXT, rel.sentence() + f"; the output writes every one of them, after the text " \
        f"{_q(lead.strip(_WS))}; from {_q(rel.pieces[0])} on, the output parses clean to " \
        f"{len(p.message.tool_calls)} call(s): the template's call turn starts with the call, and the format has no " \
        "place for text before it"


def _fault_before_call(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                       ) -> tuple[Mistake, str] | None:
    """The labelling guide's "first fault by position" within step 4 for an output read as text after a call: the
    parse read the calls, every piece of the template's call is written (nothing absent, nothing foreign), the
    template's call turn starts with the call, and the output writes something before it — text with no markup
    (``LEADING_TEXT``) or a control token the template's render of the call never writes (``FOREIGN_WRAPPER``, a
    control token before a call it reads). That fault comes first; the text after the call is the second. No
    parse; None otherwise."""
    if mistake in _INSIDE_CALL:
        return _token_before_step5(mistake, ex, setup, bundle, ctx)
    if mistake != Mistake.TRAILING_TEXT or not ex.message.get("tool_calls"):
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or not rel.pieces or rel.absent or rel.foreign or rel.relation != Relation.CONSISTENT:
        return None
    render = rel.render.lstrip(_WS)
    at, first = render.find(rel.pieces[0]), ex.output.find(rel.pieces[0])
    head = render[:at] if at >= 0 else ""
    if at < 0 or first < 0 or MARKUP.search(head) or not ex.output[:first].endswith(head):
        return None
    lead = ex.output[:first - len(head)].strip(_WS)
    if not lead:
        return None
    if not MARKUP.search(lead) and not _SPECIAL_SHAPE.search(lead) \
            and not _writes_text_before_call(setup, ex.message["tool_calls"][0]):
        return Mistake.LEADING_TEXT, rel.sentence() + f"; the output writes every one of them, after the text " \
            f"{_q(lead)}: the template's call turn starts with the call, and the format has no place for text " \
            "before it — the first fault by position (the text after the call is the second)"
    if _SPECIAL_SHAPE.fullmatch(lead) and lead not in rel.render and lead not in ex.generation_prompt[-200:]:
        return Mistake.FOREIGN_WRAPPER, rel.sentence() + f"; the output writes {_q(lead)} right before the call, " \
            "which the template's render of the call never writes: a control token before the template's own call " \
            "shape — the first fault by position (what follows the call is the second)"
    return None

# the labelling guide's step 5: faults inside a call whose markup is the template's
_INSIDE_CALL = frozenset({Mistake.FIELD_ALIAS, Mistake.DOUBLE_ENCODED_ARGUMENTS, Mistake.MISSING_REQUIRED,
                          Mistake.UNKNOWN_PARAMETER, Mistake.TYPE_MISMATCH})


def _token_before_step5(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                        ) -> tuple[Mistake, str] | None:
    """Step 4 before step 5: a fault inside the call was named, yet the output begins with a control token the
    template's render of the call never writes, the generation prompt does not end with, and right after which the
    call starts as the render starts it (``<|python_tag|>{"name": …`` where the template writes the call bare) — a
    control token before the template's own call shape, the earlier step. None otherwise (no parse)."""
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or not rel.pieces or rel.foreign or rel.pieces[0] in rel.absent:
        return None
    out, render = ex.output.lstrip(_WS), rel.render.lstrip(_WS)
    tok = _SPECIAL_SHAPE.match(out)
    at = render.find(rel.pieces[0])
    head = render[:at] if at > 0 else ""
    if not tok or not head.strip(_WS) or tok.group(0) in rel.render \
            or ex.generation_prompt.rstrip(_WS).endswith(tok.group(0)) \
            or not out[tok.end():].lstrip(_WS).startswith(head):
        return None
    return Mistake.FOREIGN_WRAPPER, rel.sentence() + f"; the output writes {_q(tok.group(0))} right before the " \
        "call, which the template's render of the call never writes: a control token before the template's own " \
        f"call shape (step 4) comes before the fault inside the call ({mistake.value}), which is the second"

def _closer_omitted(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                    ) -> tuple[Mistake, str] | None:
    """Another format (or an omitted marker, which the nearest output's closer-and-opener insert names) given with no
    evidence of its own, where every piece of the template's call is written (nothing absent, nothing foreign) and the
    parse stopped at the call's closer with a next call begun there (:func:`_closer_before_next_call`): the omitted
    closer, first by position. None otherwise (no parse)."""
    if mistake not in (Mistake.TEMPLATE_MODEL_MISMATCH, Mistake.OMITTED_MARKER) or ctx.get("specific"):
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or rel.relation != Relation.ALTERED or rel.absent or rel.foreign \
            or rel.altered != ALTERED_LITERAL:
        return None
    closer = _closer_before_next_call(rel, ex)
    return (Mistake.OMITTED_CLOSER, rel.sentence() + f"; {closer}") if closer else None


def _closer_before_next_call(rel: CallRelation, ex: Any) -> str:
    """Evidence when the parse stopped where the template writes a later piece of its call (its closer) and the
    output writes an earlier piece there instead — a next call begun inside the first: the closer is what the model
    left out (the first fault by position), not another format. ``""`` otherwise."""
    if ex.stop is None:
        return ""
    lits = [x.strip(_WS) for x in _literals(ex.stop.expected)]
    found = ex.output[ex.stop.output_pos:].lstrip(_WS)
    want = [rel.pieces.index(x) for x in lits if x in rel.pieces]
    began = [i for i, x in enumerate(rel.pieces) if x.strip(_WS) and found.startswith(x.strip(_WS))]
    if not want or not began or min(began) >= min(want):
        return ""
    closer, opener = rel.pieces[min(want)], rel.pieces[min(began)]
    return (f"where the template writes {_q(closer)} to end the call, the output begins another with {_q(opener)}: "
            f"the model left the call's closer {_q(closer)} out before it (not another format)")


_TEXT_FILL = "zqt0x"      # a reply text no template writes, so the render shows where it goes


# the labelling guide's step 5 (a fault inside a call whose markup is the template's): whitespace written inside the
# markup (step 4) comes before it by step
_STEP5 = frozenset(m for m, step in GUIDE_STEP.items() if step == 5)
_AFTER_THE_CALL = frozenset({Mistake.TRAILING_TEXT, Mistake.OMITTED_CLOSER, Mistake.CUT_SHORT,
                             Mistake.TEMPLATE_MODEL_MISMATCH})


def _json_layout(out: str, i: int, j: int) -> bool:
    """Whether the whitespace ``out[i:j]`` stands between two JSON tokens (after `{` `[` `,` `:`, before `"` `{`
    `[`): JSON's own layout, which any JSON reader takes and which the guide's "JSON keys are not markers" leaves out
    of the markup — not whitespace written inside a marker sequence."""
    return 0 < i < j < len(out) and out[i - 1] in "{[,:" and out[j] in '"{['


def _first_added_whitespace(rel: CallRelation, out: str) -> tuple[int, str, str] | None:
    """``(output position, piece, whitespace)`` of the first place where the output's first call writes whitespace
    at an edge of the text between two of the template's call pieces (the name, a key) where its render writes none
    (a gap holding an argument's fill is a value, free), walking the relation's pieces in order in the render and
    the output (linear ``find``s); None when the pieces run out or the walk finds none."""
    render = rel.render
    r, o = render.find(rel.pieces[0]), out.find(rel.pieces[0])
    if r < 0 or o < 0:
        return None
    for piece, nxt in zip(rel.pieces, rel.pieces[1:]):
        r2, o2 = render.find(nxt, r + len(piece)), out.find(nxt, o + len(piece))
        if r2 < 0 or o2 < 0:
            return None
        gap_r, gap_o = render[r + len(piece):r2], out[o + len(piece):o2]
        if "zqv" not in gap_r:
            lead_r, lead_o = (len(g) - len(g.lstrip(_WS)) for g in (gap_r, gap_o))
            trail_r, trail_o = (len(g) - len(g.rstrip(_WS)) for g in (gap_r, gap_o))
            at = o + len(piece)
            if not gap_o.strip(_WS):
                if not gap_r and gap_o and not _json_layout(out, at, o2):
                    return at, piece, gap_o
            elif not lead_r and lead_o and gap_r.strip(_WS) and not _json_layout(out, at, at + lead_o):
                return at, piece, gap_o[:lead_o]
            elif not trail_r and trail_o and gap_r.strip(_WS) and not _json_layout(out, o2 - trail_o, o2):
                return o2 - trail_o, gap_o.strip(_WS), gap_o[len(gap_o) - trail_o:]
        r, o = r2, o2
    return None


def _whitespace_added_first(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                            ) -> tuple[Mistake, str] | None:
    """The labelling guide's step 4, first fault by position, with its whitespace clarification: a fault named
    after the call's pieces (text after a call, a closer left out, a cut, another format) while, earlier in the
    first call, the output writes whitespace right after one of the template's pieces where the render writes the
    next piece (or the name) glued (GLM-4.5's ``get_weather↵<arg_key>``) and the parse stopped (or was cut) later
    than that place; a rule with evidence of its own stands. The whitespace written inside the markup is the first
    fault (``OMITTED_MARKER``), the other the second. The relation already computed; None otherwise."""
    out = ex.output
    if mistake not in _AFTER_THE_CALL | _STEP5 or ctx.get("budget") is None or ctx.get("specific"):
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or not rel.pieces or rel.foreign or rel.pieces[0] in rel.absent:
        return None
    slip = _first_added_whitespace(rel, out)
    stop = ex.stop or ex.truncated
    if slip is None or slip[0] >= (stop.output_pos if stop is not None else len(out)):
        return None
    at, piece, ws = slip
    said = f"the output writes {_q(ws)} after {_q(piece)} at output position {at}, where the template's render " \
        f"writes the call's next text glued to it: whitespace written inside the markup, the first fault by position " \
        f"(the second, later in the output: " + (f"{_q(rel.absent[0])} left out" if rel.absent else mistake.value) + ")"
    ctx["headline_after"] = said
    return Mistake.OMITTED_MARKER, rel.sentence() + "; " + said


def _layout_before_key_order(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                             ) -> tuple[Mistake, str] | None:
    """The labelling guide's step 4, the first fault by position: another format named for a call whose pieces are
    all written (one only out of the render's order: the JSON keys swapped) and whose markup differs from the
    render in whitespace, the first difference being the whitespace the render writes right after the call's
    opener (``<tool_call>`` then a line break) and the output leaves out — that omitted marker comes before the
    key order inside the object. The relation already computed; None otherwise."""
    out = ex.output
    if mistake != Mistake.TEMPLATE_MODEL_MISMATCH or ex.message.get("tool_calls"):
        return None
    rel = _call_relation(setup, bundle, ex, ctx) if ctx.get("budget") is not None else None
    if rel is None or rel.relation != Relation.ALTERED or rel.foreign or rel.altered != ALTERED_WHITESPACE \
            or not rel.pieces or rel.pieces[0] in rel.absent or any(a not in out for a in rel.absent):
        return None
    opener = rel.pieces[0]
    i, j = rel.render.find(opener), out.find(opener)
    if i < 0 or j < 0:
        return None
    after = rel.render[i + len(opener):]
    gap = after[:len(after) - len(after.lstrip(_WS))]
    if not gap or out[j + len(opener):][:1] in _WS:
        return None
    return Mistake.OMITTED_MARKER, rel.sentence() + f"; the model omitted {_q(gap)} after {_q(opener)}, where the " \
        "template's render writes it: the first fault by position, before the call's JSON keys written in another " \
        "order (the second)"


def _opener_before_key_order(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                             ) -> tuple[Mistake, str] | None:
    """The labelling guide's step 4, the first fault by position: another format named for a JSON call object whose
    keys are the template's in another order, while the template's call opener (the first piece of its render) is
    written nowhere in the output and nothing foreign stands around the call — the omitted opener comes before the
    key order inside the object (an omission wins). The relation already computed; None otherwise."""
    if mistake != Mistake.TEMPLATE_MODEL_MISMATCH or ex.message.get("tool_calls") or not ctx.get("key_order"):
        return None
    rel = _call_relation(setup, bundle, ex, ctx) if ctx.get("budget") is not None else None
    if rel is None or rel.foreign or not rel.pieces or rel.pieces[0] not in rel.absent \
            or rel.pieces[0].strip(_WS) in ex.output:
        return None
    return Mistake.OMITTED_OPENER, rel.sentence() + f"; the model omitted the template's opener " \
        f"{_q(rel.pieces[0])}: the first fault by position, before the call's JSON keys written in another order " \
        "(the second)"


def _bare_call_in_content(mistake: Mistake, ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]
                           ) -> tuple[Mistake, str] | None:
    """A clean parse with no call ("no mistake" by the rules) whose content writes the template's call pieces —
    all but the opener the template's render starts the calls with (the section's), nothing foreign — around a
    declared tool's name: the model omitted that opener (step 4), and the parser kept the bare call as text. The
    relation already computed; None otherwise."""
    msg = ex.message
    if mistake != Mistake.NONE or not ex.clean or msg.get("tool_calls") or ctx.get("budget") is None:
        return None
    content = msg.get("content") or ""
    if not any(n and n in content for n in ctx["names"]):
        return None
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or not rel.pieces or rel.foreign or tuple(rel.absent) != (rel.pieces[0],) \
            or rel.relation not in (Relation.ALTERED, Relation.OMITTED_OPENER):
        return None
    inner = [x for x in rel.matched if MARKUP.search(x) or x.startswith("<")]
    if len(inner) < 2 or not all(x in content for x in inner):
        return None
    return Mistake.OMITTED_OPENER, rel.sentence() + f"; the content writes the call's other pieces ({_q(inner[0])} " \
        f"…) with no {_q(rel.pieces[0])} before them: the model omitted the opener, and the parser kept the bare " \
        "call as text"


def _text_opener_omitted(mistake: Mistake, ex: Any, setup: _Setup, ctx: dict[str, Any]
                         ) -> tuple[Mistake, str] | None:
    """The labelling guide's step 4, the first piece by position: the parse stopped at the output's first character,
    where it expected the opener the template writes a call turn's reply text in (its render of a turn with a reply
    text and a call puts the text, after the generation prompt, behind a marker of its own — gpt-oss's
    ``<|channel|>analysis<|message|>``), while the output writes that text bare and the template's call markup after
    it: the text's opener is omitted (``OMITTED_OPENER``), not another family's format. No call read; one render
    (two dialects at most). None otherwise."""
    msg, out, stop = ex.message, ex.output, ex.stop
    if msg.get("tool_calls") or stop is None or stop.output_pos != 0 or not ctx["names"] \
            or not (mistake in _CALL_FORMAT or mistake == Mistake.NONE):
        return None
    mark = MARKUP.search(out)
    lead = out[:mark.start()] if mark else ""
    if not lead.strip(_WS) or not any(m and m.strip(_WS) and m.strip(_WS) in out[len(lead):] for m in ctx["markers"]):
        return None
    named = next((n for n in ctx["names"] if n in out[len(lead):]), "")
    if not named:
        return None
    msgs = [{"role": "user", "content": "hi"}]
    turn = msgs + [{"role": "assistant", "content": _TEXT_FILL, "tool_calls": [
        {"type": "function", "id": "call_1", "function": {"name": named, "arguments": {}}}]}]
    for render in _renderers(setup):
        try:
            gp, text = render(msgs, True), render(turn, False)
        except Exception:  # noqa: BLE001 - this dialect does not render the turn: the next one
            continue
        at = text.find(_TEXT_FILL)
        if not text.startswith(gp) or at < len(gp) or (text.rfind(named) >= 0 and text.rfind(named) < at):
            return None
        opener = text[len(gp):at].strip(_WS)
        if not opener or not MARKUP.search(opener) or opener in lead \
                or not any(lit.strip(_WS) and opener.startswith(lit.strip(_WS)) for lit in stop.literals):
            return None
        return Mistake.OMITTED_OPENER, (
            f"the model omitted {_q(opener)} before {_q(lead.strip(_WS), 40)}: the template writes a call turn's reply "
            f"text behind {_q(opener)} before the call, and the output writes the text bare, then the template's call "
            "markup")
    return None


def _writes_text_before_call(setup: _Setup, call: dict[str, Any]) -> bool:
    """Whether the template's render of an assistant turn with a reply text and the call writes the text before
    the call (then the format has a place for text there); False when it drops the text or writes it after, or
    when the turn does not render. At most two renders."""
    fn = call.get("function") or {}
    name, args = fn.get("name") or "", fn.get("arguments")
    try:
        args = json.loads(args) if isinstance(args, str) else (args or {})
    except ValueError:
        args = {}
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _TEXT_FILL, "tool_calls": [
        {"type": "function", "id": "call_1", "function": {"name": name, "arguments": args}}]}]
    for render in _renderers(setup):
        try:
            text = render(msgs, False)
        except Exception:  # noqa: BLE001 - this dialect does not render the turn: the next one
            continue
        at, named = text.find(_TEXT_FILL), text.rfind(name) if name else -1
        return 0 <= at and (named < 0 or at < named)
    return False


def _analysis_misread(ex: Any, bundle: Any) -> str:
    """The analysis' call markers, said as evidence, when it found a tool format of its own (read by the
    analysis, not a handler; no probe placeholder in it): then a template's own call the parse does not read is a
    misreading of the format, not a format not found. ``""`` otherwise."""
    if getattr(bundle, "format", "") != "peg-native" or _probe_placeholder(bundle) is not None \
            or Cause.NO_TOOL_FORMAT in {f.cause for f in ex.findings}:
        return ""
    a = getattr(getattr(bundle, "report", None), "analysis", None)
    fmt = ((a.to_json().get("tools") or {}).get("format") or {}) if a is not None else {}
    if not isinstance(fmt, dict) or fmt.get("mode") in (None, "", "NONE"):
        return ""
    marks = [(k, v) for k, v in (("section opener", fmt.get("section_start")),
                                 ("call opener", fmt.get("per_call_start"))) if isinstance(v, str) and v.strip(_WS)]
    return "its " + ", ".join(f"{k} {_q(v)}" for k, v in marks) if marks else "its tool format"


def _written_by_prompt(rel: CallRelation, ex: Any) -> tuple[str, ...]:
    """The template's call pieces the output lacks because the generation prompt already wrote them: the absent
    pieces are the first ones, the prompt ends with them (whitespace aside), every other piece is written, and
    nothing foreign is; ``()`` otherwise."""
    if not rel.absent or rel.foreign or rel.relation not in (Relation.ALTERED, Relation.OMITTED_OPENER):
        return ()
    lead = rel.pieces[:len(rel.absent)]
    if lead != rel.absent or len(lead) == len(rel.pieces):
        return ()
    gp = re.sub(r"\s+", "", ex.generation_prompt[-400:])
    return lead if gp.endswith("".join(re.sub(r"\s+", "", x) for x in lead)) else ()


def _declared_type(req: Any, key: str) -> str:
    """The JSON type the request's tools declare for an argument named ``key`` (the first that does), or ``""``."""
    for t in req.tools or []:
        props = ((t.get("function") or {}).get("parameters") or {}).get("properties") if isinstance(t, dict) else None
        spec = props.get(key) if isinstance(props, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("type"), str):
            return spec["type"]
    return ""


def _rule_reading(ex: Any, setup: _Setup, bundle: Any, near: tuple[list[Edit], _Parsed] | None,
                  ctx: dict[str, Any]) -> tuple[Mistake, list[str]]:  # noqa: C901
    """The mistake and its evidence by the rules (most specific rule first)."""
    causes = [f.cause for f in ex.findings]
    ev: list[str] = []
    out = ex.output
    msg = ex.message
    content = msg.get("content") or ""
    reasoning = msg.get("reasoning_content") or ""
    r_start, r_ends = reasoning_markers(bundle)
    gp = ex.generation_prompt.rstrip(_WS)
    if ex.stop is not None:
        ev.append(f"the parse stopped at output position {ex.stop.output_pos}: {ex.stop.words()}")
    # cut short: the output ends inside a structure and no edit inside it makes it a call
    edits = near[0] if near else []
    part = _ends_inside_opener(out, msg, ctx)
    if part:
        ev.append(f"the output ends with {_q(part[0])}, the first {len(part[0])} characters of the call opener "
                  f"{_q(part[1])}, and nothing after them: it was cut while writing the opener (max_tokens or a stop "
                  "string); the parse holds those characters back as a marker that may go on, and no call was lost")
        return Mistake.CUT_SHORT, ev
    opener = _ends_at_opener(out, ctx)
    if opener:
        ev.append(f"the output ends with {_q(opener)}, which opens a call, and nothing after it: the call was cut "
                  "before any of it was written (max_tokens or a stop string), not left out of the parse")
        return Mistake.CUT_SHORT, ev
    if not ex.clean or not msg.get("tool_calls"):
        spaced = _decoder_spaced(setup, bundle, out, ctx, ctx["budget"]) if ctx.get("budget") else None
        if spaced:
            ctx["restored"], ctx["restored_server"] = spaced[0], "spaces"
            return Mistake.SPECIAL_TOKENS_STRIPPED, ev + [spaced[1]]
    if not msg.get("tool_calls"):
        glued = _glued_token_words(setup, bundle, out, ctx)
        if glued:
            return Mistake.SPECIAL_TOKENS_STRIPPED, ev + [glued]
        bare = _bare_call(setup, bundle, out, ctx)
        if bare:
            ctx["restored"] = bare[0]
            return Mistake.SPECIAL_TOKENS_STRIPPED, ev + [bare[1]]
    part = _reasoning_opener_part(out, msg, r_start) if not ex.clean else None
    if part:
        ctx["specific"] = True      # (the reasoning's marker, not the call's: the relation does not read it)
        ctx["why_none"] = (
            f"no change of ours (repair, request, override, fidelity) re-parses {_q(part[0])} without "
            f"{_q(part[1])} as the reasoning's opener — only the model's output (or a new repair) can change")
        return Mistake.OMITTED_MARKER, ev + [
            f"the output opens with {_q(part[0])}, the template's reasoning opener {_q(part[0] + part[1])} without "
            f"{_q(part[1])}: the model left {_q(part[1])} out of the template's marker, and the parse reads none of "
            "the block as reasoning"]
    header = _header_without_word(out, msg, gp) if not ex.clean else None
    if header:
        # (the labelling guide's step 3, before the markup of step 4: the output begins with the control token the
        # generation prompt's tail starts with — that tail written again in part, not a header missing its word)
        ctx["specific"] = True      # (the turn header, not the call)
        ctx["why_none"] = (
            f"no change of ours (repair, request, override, fidelity) re-parses a header written {_q(header[0])} "
            f"without {_q(header[1])} — only the model's output (or a new repair) can change")
        ctx["headline"] = (f"the output begins with {_q(header[0])}, the control token the generation prompt's tail "
                           f"{_q(header[0] + header[1])} starts with: the model wrote the prompt's tail again, in part")
        return Mistake.REPEATED_PROMPT_TAIL, ev + [
            f"the output opens a turn with {_q(header[0])}, which the generation prompt already ends with as "
            f"{_q(header[0] + header[1])}: the model wrote the prompt's tail again, in part (without "
            f"{_q(header[1])}), and the parse reads none of the text"]
    affix = _marker_affix(setup, bundle, out, ctx)
    if affix:
        ctx["affix"], ctx["specific"] = affix[0], True     # (a piece present but altered: the affix reads it)
        ctx["why_none"] = (
            f"the template's markers carry {_q(affix[0])}, which the model does not write, and no patch that takes it "
            "out of the template re-parses this output to a clean message: the model's own template is needed")
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [affix[2]]
    undeclared = _undeclared_in_template_markup(setup, ex) if ex.stop is not None and not ex.clean \
        and not msg.get("tool_calls") and not _repeated_tail(ex, r_start) else None
    if undeclared:
        # (the labelling guide's step 5, reached: the template's markup is whole around the name; a JSON body in
        # the undeclared parameter is that parameter's value, not a call in another format)
        ctx["specific"] = True
        ctx["headline"] = (f"the model writes a parameter {_q(undeclared[1])}, which {_c(undeclared[0])}'s schema does "
                           "not declare, in the template's own call markup")
        if not _declared_written(setup.request, undeclared[0], out):
            # (the name stands in place of the declared ones: the request's schema may be what lags — the schema
            # edit that declares it is offered)
            ctx["undeclared"] = undeclared[:2]
            return Mistake.UNKNOWN_PARAMETER, ev + [undeclared[2]]
        # (written beside or around declared ones, the parameter is one more than the tool takes: declaring it
        # gives a call the tool cannot run, so no schema edit is offered)
        ctx["why_none"] = (f"{_c(undeclared[0])} does not take {_q(undeclared[1])}: declaring it in the request would "
                           "make a call the tool cannot run, and no repair of ours drops or unwraps a parameter the "
                           "schema does not declare — the model's output must change")
        return Mistake.UNKNOWN_PARAMETER, ev + [undeclared[2]]
    body = _json_body_in_markup(setup, out, msg, ctx, 0, "as the call, in markup or bare") \
        if not msg.get("tool_calls") and (not ex.clean or (reasoning and not content)) else ""
    replaced = _arguments_markup_replaced(setup, ex, out) if body else ""
    if replaced:
        # (the labelling guide's step 4: one of the template's pieces replaced by another string is its omission;
        # another format is a call with none of the template's pieces)
        return Mistake.OMITTED_MARKER, ev + [replaced]
    if body:
        ctx["needs_call"] = True
        # (before the readings of the reasoning's state: read as the reply or as reasoning, a call in a JSON dialect
        # the template never renders is read by neither)
        ctx["why_none"] = (
            "the model writes its call as JSON, which this template's call format never renders, and no repair, "
            "request setting or override of ours reads a JSON call in this format — the template the model was "
            "trained with (one whose calls are JSON) is needed")
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [body]
    opened = bool(r_start) and gp.endswith(r_start)
    if opened and reasoning and not content and not msg.get("tool_calls") and r_ends:
        closer = _stripped_reasoning_closer(setup, bundle, out, r_start, r_ends)
        if closer:
            ctx["restored"], ctx["restored_reasoning"] = closer[0], True
            return Mistake.SPECIAL_TOKENS_STRIPPED, ev + [closer[1]]
    if opened and reasoning and not content and not msg.get("tool_calls") and r_ends \
            and not any(e in out for e in r_ends):
        lead = [m for m in ctx["markers"] if m and reasoning.lstrip(_WS).startswith(m)]
        if lead:
            # no reasoning text at all before the call: this is the text that follows the reasoning, whose
            # reasoning was split off before (an API returning it separately) — not a model that forgot to close
            ev.append(f"the output starts with the call opener {_q(lead[0])} and holds no reasoning text, while the "
                      f"generation prompt opens the reasoning with {_q(r_start)}: the text is what follows "
                      f"{_q(r_ends[0])} (the reasoning was split off before it reached us), so extracting reasoning "
                      "again reads the whole call as reasoning")
            ctx["headline"] = ev[-1]    # (the nearest output's "the model omitted </think>" is not what happened)
            ctx["why_none"] = (
                "the text is what follows the reasoning (split off before it reached us), and read as that — without "
                "reasoning extraction (reasoning_format none) or with the thinking flag off — it still does not "
                "parse to a message with calls: the call itself then differs from what the template's format reads, "
                "and no repair of ours reads it; only the model's output (or a new repair) can change")
            return Mistake.REASONING_SETTING, ev
        block = _complete_block(reasoning, ctx)
        if block:
            ev.append(f"the output is one complete block {block} naming a tool: it was not cut; it sits in the "
                      f"reasoning only because the generation prompt opens {_q(r_start)} and the output never "
                      f"closes it, and its syntax is not the template's ({_q(ctx['markers'][0]) if ctx['markers'] else 'none found'})")
            return Mistake.TEMPLATE_MODEL_MISMATCH, ev
    if not msg.get("tool_calls") and not ctx.get("rereading"):
        before = _reply_before_repaired_calls(ex, setup, bundle, ctx, r_start, r_ends)
        if before:
            ctx["rereading"] = True
            ctx["headline"] = before[0]
            return Mistake.REASONING_SETTING, ev + before
    # an output that "ends inside reasoning" while its reasoning holds a call opener was not cut: the model called
    # the tool before closing the reasoning (a parser that reads an unclosed reasoning as cut names it so)
    in_reasoning = ex.truncated is not None and tuple(ex.truncated.path)[-1:] == ("reasoning",)
    if in_reasoning and reasoning and not content and not msg.get("tool_calls") and r_ends \
            and not any(e in out for e in r_ends):
        lead = [m for m in ctx["markers"] if m and m in reasoning]
        named = [n for n in ctx["names"] if n and n in reasoning]
        # (only markup the template writes before a call's arguments begins one: a section's end marker does not)
        special = [t for t in getattr(bundle.parser, "preserved_tokens", None) or [] if t and t in reasoning
                   and _written_before_arguments(setup, ctx, t)] if named else []
        if lead or (named and special):
            what = f"{_q(lead[0])}, which starts a call" if lead else (
                f"{_q(named[0])} inside template markup ({_q(special[0])}, which the template writes before a "
                "call's arguments)")
            ev.append(f"the reasoning holds {what}: the model called the tool before "
                      f"closing the reasoning with {_q(r_ends[0])}")
            return Mistake.REASONING_NOT_CLOSED, ev
    block = _closed_call_block_in_reasoning(out, reasoning, msg, ctx, r_ends) if in_reasoning else ""
    if block:
        return Mistake.REASONING_NOT_CLOSED, ev + [block]
    inside = _call_before_reasoning_end(out, reasoning, msg, ctx, r_ends)
    if inside:
        return Mistake.REASONING_NOT_CLOSED, ev + [inside]
    if len(edits) == 1 and edits[0].kind == "insert" and edits[0].pos >= len(out) \
            and _is_stop_closer(edits[0].new, ctx):
        unwrapped = _unwrapped_call(out, msg, ctx)
        if unwrapped:
            # the closer a stop string would match is missing, and so is its opener: the wrapper was never written
            # (a parser that reads the inner call without its opener asks only for the closer)
            ctx["headline"] = unwrapped     # (the nearest output's "stopped before" names the closer alone)
            return Mistake.OMITTED_OPENER, ev + [unwrapped]
        ev.append(f"the call is complete and only {_q(edits[0].new.strip(_WS))}, the closer the template writes after "
                  "it, is missing at the very end: the string a stop sequence matches — a server removes a matched "
                  "stop string from the output (or max_tokens ran out exactly there)")
        return Mistake.STOP_STRING_STRIPPED, ev
    if ex.truncated is not None and tuple(ex.truncated.path)[-1:] == ("reasoning",) and r_start \
            and gp.endswith(r_start.strip(_WS)) and out.lstrip(_WS).startswith(r_start.strip(_WS)) \
            and r_start.strip(_WS) in reasoning and not msg.get("tool_calls"):
        # unfinished reasoning loses nothing (the message is the reasoning so far); the opener written again and
        # kept in the reasoning is what makes the message differ
        ctx["unfinished_reasoning"] = True
        ev.append(f"the generation prompt already opens the reasoning with {_q(r_start.strip(_WS))} and the output "
                  "opens it again; the parse keeps the second opener in the reasoning (the output also ends inside "
                  "the reasoning, which loses no text)")
        return Mistake.REOPENED_REASONING, ev
    if in_reasoning and not ctx.get("rereading"):
        ctx["rereading"] = True
        done = _complete_without_thinking(ex, setup, bundle, ctx, r_ends)
        if done:
            return done[0], ev + done[1]
    if msg.get("tool_calls") and not ctx.get("rereading"):
        ctx["rereading"] = True
        before = _reply_filed_as_reasoning(ex, setup, bundle, ctx, r_start, r_ends)
        if before:
            ctx["headline"] = before[0]     # (the nearest output's edits would name the second fault first)
            return Mistake.REASONING_SETTING, ev + before
    if Cause.TRUNCATED in causes or (ex.truncated is not None and not edits):
        where = " > ".join(ex.truncated.path) if ex.truncated else "the format"
        if not near or all((e.kind == "insert" and e.pos >= len(out)) or (
                e.kind == "replace" and e.pos + len(e.old) >= len(out) and e.new.strip(_WS).startswith(e.old))
                for e in edits):    # (a closer cut part-way, completed)
            closed = _closer_written_last(setup, bundle, ex, ctx)
            if closed:
                return Mistake.OMITTED_CLOSER, ev + [closed]
            if not _ends_with_whole_call(setup, bundle, ex, ctx):
                ev.append(f"the output ends inside {where or 'a call'}: nothing after that point was generated")
                return Mistake.CUT_SHORT, ev
    open_json = _open_json_at_end(out, ctx["names"])
    if open_json and not msg.get("tool_calls"):
        ev.append(f"the output ends inside the call's JSON ({open_json} bracket(s) still open, nothing after the "
                  "last value): the call was cut before it was complete")
        return Mistake.CUT_SHORT, ev
    if Cause.SPECIAL_TOKENS_STRIPPED in causes:
        back = _restore_stripped_at_stop(ex)
        if back:
            # (restored, a reasoning the fixture ends inside stays unfinished: the message is the reasoning so far)
            ctx["restored"], ctx["unfinished_reasoning"] = back, True
        ev += [e for f in ex.findings if f.cause == Cause.SPECIAL_TOKENS_STRIPPED for e in f.evidence]
        return Mistake.SPECIAL_TOKENS_STRIPPED, ev
    left = [x for x in [r_start] + r_ends if x and x in content + reasoning]
    head = len(out) - len(out.lstrip(_WS)) + len(r_start)
    again = out.find(r_start, head) if r_start else -1
    shut = min((i for i in (out.find(e, head) for e in r_ends if e and e.strip(_WS)) if i >= 0), default=-1)
    if r_start and out.lstrip(_WS).startswith(r_start) and r_start in left and (shut < 0 or again < shut):
        # (written again after the block's closer it is a later message, not a re-opened block)
        # (before the readings of the stop point: a marker left in the message is the plainest evidence)
        # the output's own opener read, and the same marker written again inside the block: left in the message
        # (written once: the second opener is the prompt's, or the prompt opened and closed the block)
        head = r_start.strip(_WS)
        if again >= 0:
            said = f"the output opens the reasoning with {_q(r_start)} and writes {_q(r_start)} again inside the block"
        elif gp.rstrip(_WS).endswith(head):
            said = f"the generation prompt already opens the reasoning with {_q(head)} and the output opens it again"
        elif head in gp and any(e.strip(_WS) and e.strip(_WS) in gp[gp.rfind(head):] for e in r_ends):
            said = (f"the generation prompt opens and closes the reasoning, and the output opens it again with "
                    f"{_q(head)}")
        else:
            said = f"the output opens the reasoning with {_q(r_start)}"
        ev.append(said + ", which the parse leaves in the message")
        return Mistake.REOPENED_REASONING, ev
    pair = _unfound_token_pair(setup, bundle, out, msg, ctx, r_start, r_ends) if ex.clean else None
    if pair:
        ctx["specific"] = True      # (a control token of the reasoning the analysis placed in no role)
        if pair[0]:
            ctx["reasoning_override"] = pair[0]
        ctx["fault_markup"] = pair[1]
        return Mistake.FORMAT_NOT_FOUND, ev + [pair[2]]
    lone = _closer_without_opener(setup, out, msg, r_start, r_ends, gp) if ex.clean else ""
    if lone:
        ctx["specific"] = True      # (a reasoning closer, not the call)
        ctx["why_none"] = (
            "the template renders no reasoning and its generation prompt opens none, so nothing of ours gives the "
            "closer a role: an override of the reasoning markers reads a block only from its opener (the output "
            "writes none, the prompt neither), and no repair reads a reasoning this template never has — the "
            "template the model was trained with (one whose generation prompt opens the reasoning) is needed")
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [lone]
    result = _tool_result_markers(setup, msg, ctx) if ex.clean else []
    if result:
        ctx["specific"] = True      # (a tool result's markers in an answer, not the call)
        ctx["why_none"] = (
            f"no repair, override or fidelity of ours takes {_q(result[0])} out of an answer: it is a marker the "
            "template writes around a tool's result, not markup of the reply's format — only the model's output (or a "
            "server that drops those tokens) can change")
        return Mistake.FOREIGN_WRAPPER, ev + [
            f"the answer keeps {', '.join(_q(t) for t in result[:2])}, control tokens the template writes only around "
            "a tool's result (its render of a tool turn), never in a reply: the model wraps text of its answer in the "
            "tool-result markers, and the parse leaves them in the content"]
    kept = _stop_token_after_answer(setup, ex)
    if kept:
        ctx["stripped_output"] = kept[0]
        return Mistake.TRAILING_TEXT, ev + [kept[1]]
    closer = _other_turn_closer_after_answer(setup, ex)
    if closer:
        ctx["why_none"] = (f"no change of ours drops {_q(closer[0])} from an answer: the template ends a generated "
                           f"answer with another token, so {_q(closer[0])} is the model's, not a stop token the "
                           "server returned — only the model's output (or a server that strips the format's tokens "
                           "from text) can change")
        return Mistake.TRAILING_TEXT, ev + [closer[1]]
    lone = _lone_call_closer_after_answer(ex, setup, bundle, ctx)
    if lone:
        ctx["why_none"] = (f"no change of ours drops a lone {_q(lone)} from an answer: the model's output must end "
                           "with the answer (a server that strips the format's call tokens from text hides it)")
        return Mistake.TRAILING_TEXT, ev + [
            f"the answer ends with {_q(lone)}, a closer of the template's call format that no opener in the output "
            "opened: markup written after the answer, where the format ends the turn"]
    tail = _repeated_tail(ex, r_start)
    if tail:
        # (the labelling guide's step 3: before the call's markup; the reasoning opener again is REOPENED_REASONING)
        again = _prompt_tail_repeated(ex, setup, ctx) if ex.clean and not msg.get("tool_calls") else None
        if again:
            ctx["thinking_fix"] = again[0]
        # (a later step's fault is named as the second one, and its request fix offered with the tail's)
        undeclared = _undeclared_at_stop(setup.request, ex) if ex.stop is not None else None
        if undeclared:
            ctx["undeclared"] = undeclared[:2]
            ev = ev + ["a second fault, inside the call: " + undeclared[2]]
        ctx["specific"] = True
        left = _left_after_tail_repairs(setup, out, ctx["budget"]) if "budget" in ctx else ""
        if left:
            ctx["why_none"] = left
        ctx["headline"] = (f"the output begins with {_q(tail)}, which the generation prompt already ends with: the "
                           "model wrote the prompt's tail again")
        return Mistake.REPEATED_PROMPT_TAIL, ev + [
            f"the generation prompt ends with {_q(tail)} and the output begins by writing it again (not the "
            "reasoning opener, which would be re-opened reasoning): the parse takes the output as what follows "
            "the prompt, so the repeated tail is text the format has no place for"
            + (f"; {again[1]}" if again else "")]
    unsent_markup = _call_markup_without_tools(setup, ex) if not msg.get("tool_calls") else ""
    if unsent_markup:
        ctx["why_none"] = (
            "the request carries no tools, so the parser reads no call, and the output does not write the call "
            "as the template renders one: no change of ours re-parses it to a message with calls — send the tools "
            "and re-run the model")
        return Mistake.TOOLS_NOT_SENT, ev + [unsent_markup]
    seen = [o.strip(_WS) for o in ctx["openers"] if o.strip(_WS) and o.strip(_WS) in out]
    weak = Cause.TOOLS_NOT_REQUESTED in causes and bool(seen) and all(len(o) < 2 for o in seen) \
        and ex.clean and _unsent_tool_call(setup, out, content or reasoning) is None
    # (a one-character opener such as `<` is in any reply with markup: a call only when it re-parses as one)
    if Cause.TOOLS_NOT_REQUESTED in causes and not weak:
        ev += [e for f in ex.findings if f.cause == Cause.TOOLS_NOT_REQUESTED for e in f.evidence]
        return Mistake.TOOLS_NOT_SENT, ev
    if Cause.NO_TOOL_FORMAT in causes:
        return _unfound_format(ex, setup, bundle, ctx, ev, "")
    raw = _raw_line_breaks(setup, out, msg, ctx)
    if raw:
        ctx["near"] = raw[0]
        return Mistake.TYPE_MISMATCH, ev + [raw[1]]
    rep = _repeated_call(out, ctx["names"])
    if rep:
        ctx["repeat"] = rep
        first, seg, copies = rep
        return Mistake.TRAILING_TEXT, ev + [
            f"after the first call the output repeats {_q(seg)} {copies} more time(s) up to its end: "
            "the model did not stop after the call — the server did not stop generation at the call's end (the "
            "format's end-of-call / end-of-turn token as a stop), so it kept writing copies"]
    bare = out
    for x in [r_start] + r_ends:
        bare = bare.replace(x.strip(_WS), "") if x.strip(_WS) else bare
    placeholder = _probe_placeholder(bundle) if msg.get("tool_calls") or setup.request.tools \
        or _call_like(bare, ctx["names"]) else None
    # (the tool format's artefact says nothing of an output that writes no call and only reasoning markers, under
    # a request that offers no tools: the reasoning rules below read it)
    if placeholder:
        # the analysis kept the probe's own names in a marker: what it learned is an artefact of its renders
        # (llama.cpp's Jinja leaving `%s` unformatted, a probe value copied into a marker) — no format was found
        return _unfound_format(ex, setup, bundle, ctx, ev, (
            f"the analysis's tool format holds the probe's placeholder {_q(placeholder[1])} in "
            f"{_q(placeholder[0])} ({_q(placeholder[2], 60)}): what it learned is an artefact of its probe "
            "renders, not the template's format — a gap of the analysis, not a statement about the template"))
    unfound = _unfound_reasoning(setup, out, msg, ctx, r_start, r_ends)
    if unfound:
        ctx["reasoning_override"], ctx["fault_markup"] = unfound[0], unfound[1]
        ctx["specific"] = True      # (the reasoning's markers the analysis did not find, re-parsed with them)
        empty = [c for c in _empty_comparisons(bundle) if c.startswith("R")]
        if near:
            # the analysis's gap leads: the nearest output's edits work inside the block it did not read as reasoning
            ctx["headline"] = unfound[2]
            ev = ev + ["the nearest accepted output: " + sentence_of(_shift(near[0]), out)]
        return Mistake.FORMAT_NOT_FOUND, ev + [unfound[2] + ("; comparisons that came back empty: " + "; ".join(empty)
                                                             if empty else "")]
    header = _call_header_in_reasoning(out, r_start, ctx["names"])
    if header:
        return Mistake.CALL_OUTSIDE_SECTION, ev + [
            f"the call's header {_q(header)} is written after {_q(_reasoning_head(r_start))}, the header that opens "
            f"the reasoning ({_q(r_start)}): the model put the call on the reasoning's channel, where the template's "
            "format has no calls"]
    ctx["near_content"] = (near[1].message.content or "") if near else None
    wrapped = _wrapper_layers(setup, out, ctx)
    if wrapped:
        ctx["fault_markup"] = wrapped[0]
        return Mistake.FOREIGN_WRAPPER, ev + [wrapped[1]]
    before = _token_before_call(setup, out, msg, near)
    if before:
        return Mistake.FOREIGN_WRAPPER, ev + [before]
    wrapped_slips = _foreign_token_then_slips(setup, out, near)
    if wrapped_slips:
        ctx["headline"] = wrapped_slips
        ctx["fault_markup"] = [e.old.strip(_WS) for e in near[0] if e.kind == "delete"
                               and _SPECIAL_SHAPE.fullmatch(e.old.strip(_WS))]
        return Mistake.FOREIGN_WRAPPER, ev + [wrapped_slips]
    ended = _end_token_then_more(setup, ex, ctx)
    if ended:
        return Mistake.TRAILING_TEXT, ev + [ended]
    ran_on = _turn_run_on(ex)
    if ran_on:
        ctx["stop_at"] = ex.stop.output_pos
        return Mistake.TRAILING_TEXT, ev + [ran_on]
    tail = _trailing_token(out, near, setup) if near else ""
    if tail:        # what the nearest output deletes names it before a reading of the stop point ("a second call")
        ctx["trailing_token"] = True
        return Mistake.TRAILING_TEXT, ev + [tail]
    body = _json_body_in_markup(setup, out, msg, ctx, ex.stop.output_pos) \
        if ex.stop is not None and not ex.clean else ""
    if body:
        ctx["why_none"] = ("no change of ours reads a JSON body where the template's format writes markup: the "
                           "request, an override or a repair reads the template's format (improved fidelity its "
                           "other renders), not a second call format — only the model's output can change")
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [body]
    if Cause.PARALLEL_NOT_REQUESTED in causes:
        return Mistake.PARALLEL_NOT_REQUESTED, ev + [e for f in ex.findings
                                                      if f.cause == Cause.PARALLEL_NOT_REQUESTED for e in f.evidence]
    spaced = _spaced_tool_name(setup, ex) if Cause.UNKNOWN_TOOL in causes else ""
    if spaced:
        ctx["specific"] = True
        return Mistake.OMITTED_MARKER, ev + [spaced]
    if Cause.UNKNOWN_TOOL in causes:
        return Mistake.UNKNOWN_TOOL, ev + [e for f in ex.findings if f.cause == Cause.UNKNOWN_TOOL for e in f.evidence]
    if Cause.WRONG_CALL_ID in causes:
        return Mistake.CALL_ID_SHAPE, ev + [e for f in ex.findings if f.cause == Cause.WRONG_CALL_ID
                                            for e in f.evidence]
    ids = _ids_for_names(out, msg, ctx)
    if ids:
        return Mistake.CALL_ID_SHAPE, ev + [
            f"after the call opener the model writes {', '.join(_q(i) for i in ids[:3])} — call ids that name no "
            f"tool — where the template's calls name the tool ({', '.join(_q(n) for n in ctx['names'][:3])} "
            "occurs nowhere in the output): an id of another shape, not another call syntax"]
    between = _text_between_calls(out, msg, ctx, setup, ex.stop.output_pos if ex.stop is not None else -1)
    if between:
        ctx["headline"] = between
        return Mistake.TRAILING_TEXT, ev + [between]
    encoded = _encoded_arguments(out)
    if encoded:
        return Mistake.DOUBLE_ENCODED_ARGUMENTS, ev + [f"the arguments are written as a JSON string {_q(encoded)} "
                                                       "whose text is a JSON object; the template writes the object "
                                                       "itself"]
    # reasoning — a re-opened block the parse absorbed (clean, no reasoning marker left in the message) is no
    # mistake: the parse already reads it as the model meant
    opened = bool(r_start) and gp.endswith(r_start)
    absorbed = ex.clean and not any(x and x.strip(_WS) in content + reasoning for x in [r_start] + r_ends)
    if r_start and opened and out.lstrip(_WS).startswith(r_start) and not absorbed:
        ev.append(f"the generation prompt already opens the reasoning with {_q(r_start)} and the output opens it again")
        return Mistake.REOPENED_REASONING, ev
    head = r_start.strip(_WS)
    if head and opened and head in reasoning and head in out and not out.lstrip(_WS).startswith(head):
        # the same opener written again after text: kept inside the reasoning whatever the parse reads around it
        ev.append(f"the generation prompt already opens the reasoning with {_q(head)}; the output writes "
                  f"{_q(out[:out.find(head)].strip(_WS), 30)} and then opens it again with {_q(head)}, which the parse "
                  "keeps inside the reasoning")
        ctx["why_none"] = (f"no change of ours takes an opener written again after text off: the repair "
                           f"`reasoning-start-repeated` reads one only at the start of the reasoning, and without the "
                           f"prompt's {_q(head)} the text before the model's own opener is read otherwise than the "
                           "block it wrote — only the model's output can change")
        return Mistake.REOPENED_REASONING, ev
    if r_start and not opened and r_start in gp and any(e in gp for e in r_ends) \
            and out.lstrip(_WS).startswith(r_start) and not absorbed:
        ev.append(f"the generation prompt opens and closes the reasoning (enable_thinking="
                  f"{str(setup.request.enable_thinking).lower()}), and the output writes {_q(r_start)} again")
        return Mistake.REOPENED_REASONING, ev
    unopened = _unopened_closer(ex, bundle, ctx, absorbed)
    if unopened:
        ev.append(unopened)
        return Mistake.REASONING_SETTING, ev
    if reasoning and not content and not msg.get("tool_calls") and r_ends and not any(e in out for e in r_ends):
        lead = [m for m in ctx["markers"] if m and m in reasoning]
        if lead:
            ev.append(f"the reasoning holds {_q(lead[0])}, which starts a call: the model called the tool before "
                      f"closing the reasoning with {_q(r_ends[0])}")
            return Mistake.REASONING_NOT_CLOSED, ev
    if Cause.REASONING_PREFILL in causes and not msg.get("tool_calls"):
        before = _text_before_reasoning(setup, out, gp, r_start, r_ends)
        if before:
            return Mistake.LEADING_TEXT, ev + [before]
        ev += [e for f in ex.findings if f.cause == Cause.REASONING_PREFILL for e in f.evidence]
        if r_ends and not any(e in out for e in r_ends) and opened:
            return Mistake.REASONING_NOT_CLOSED, ev
        return Mistake.REASONING_SETTING, ev
    text0 = content or reasoning
    guess = _format_guess(text0, out)
    if guess and not near:
        return guess[0], ev + [guess[1]]
    fenced = bool(_FENCE.match(out)) and out.rstrip(_WS).endswith("```")
    moved = any(e.kind == "move" for e in edits)     # (the nearest output puts the members in the template's order)
    if not (ex.clean and msg.get("tool_calls")) and not fenced \
            and all((e.kind == "replace" and e.old.strip('"') in _KEY_ALIASES) or e.kind == "move"
                    or (moved and e.kind == "delete") for e in edits):
        # the call object the parse did not read (or stopped inside) against the template's render of one: what
        # differs names the slip (asked after the structures read off the output's look — a JSON-RPC or tool_calls
        # wrapper is no slip — and not inside a fence, the outer fault)
        shape = _json_shape_slip(setup, out, ctx, bool(msg.get("tool_calls")),
                                 ex.stop.output_pos if ex.stop is not None else -1)
        if shape:
            return shape[0], ev + [shape[1]]
    unwrapped = _unwrapped_call(out, msg, ctx)
    if unwrapped:
        return Mistake.OMITTED_OPENER, ev + [unwrapped]
    if ex.stop is not None and not edits:
        lits = _literals(ex.stop.expected)
        found = ex.text[ex.stop.pos:ex.stop.pos + 40]
        for lit in lits:
            core_ = lit.strip(_WS)
            if lit != core_ and core_ and found.startswith(core_) and not found.startswith(lit):
                return Mistake.OMITTED_MARKER, ev + [f"the model omitted the whitespace the template writes in "
                                                     f"{_q(lit)} (it wrote {_q(core_)} and went on)"]
    if _FENCE.match(out) and "```" not in _src(setup) and (msg.get("tool_calls") or _JSON_CALL_START.search(out)) \
            and out.rstrip(_WS).endswith("```"):
        return Mistake.FOREIGN_WRAPPER, ev + ["the call is inside a Markdown code fence (" + _q(out.lstrip(_WS)[:8])
                                              + " … ```), which the template never renders"]
    rest = ex.text[ex.stop.pos:] if ex.stop is not None else ""
    if ex.stop is not None and msg.get("tool_calls") and rest.strip(_WS) and not _TOKEN.match(rest.lstrip(_WS)) \
            and (any("end of the output" in e for e in ex.stop.expected) or not ex.stop.path) \
            and not any(m and m in rest for m in ctx["markers"]):
        return Mistake.TRAILING_TEXT, ev + ["text follows the complete call where the format ends the turn: "
                                            + _q(ex.text[ex.stop.pos:].strip(_WS)[:30])]
    mistyped = _mistyped_at_stop(setup.request, ex)
    if mistyped:
        return Mistake.TYPE_MISMATCH, ev + [mistyped]
    # the nearest output names it (unless it puts in a required argument the call never wrote: the schema's
    # omission, which the stop point's reading below names)
    if near and not any(e.kind == "insert" and _required_put_in(e, out, ctx) for e in _shift(edits)):
        nmsg = near[1].message.to_openai()
        probs = _schema_problems(setup.request, nmsg)
        one = edits[0]
        if len(edits) == 1 and one.kind == "replace" and one.old.strip('"') in _KEY_ALIASES:
            return Mistake.FIELD_ALIAS, ev + [f"the model's JSON key {_q(one.old)} is {_q(one.new)} in the template"]
        if len(edits) == 1 and one.kind == "replace" and _is_closer(one.new) and _is_closer(one.old) \
                and one.old.strip(_WS) in ctx["all_markers"]:
            # a closer written as another closer of the same format (`</arg_value>` for `</tool_call>`): the
            # call's own closer is what is missing, not a wrapper or a marker of another family
            return Mistake.OMITTED_CLOSER, ev + [
                f"the model closed with {_q(one.old.strip(_WS))}, which the template writes to close another part "
                f"of the call, where it writes {_q(one.new.strip(_WS))}: the call's own closer is missing"]
        delim = _quote_for_delimiter(edits)
        if delim:
            return Mistake.OMITTED_MARKER, ev + [
                f"the model wrote a string value in plain quotes ({_q(edits[0].old)}) where the template writes it "
                f"between {_q(delim)} tokens: the call is the template's but for that delimiter"]
        pair = _deleted_tag_pair(edits, setup, msg, near)
        if pair:
            ctx["fault_markup"] = [pair[0]]
            return Mistake.FOREIGN_WRAPPER, ev + [pair[1]]
        if any(e.kind == "delete" and e.old.startswith("```") for e in edits) and "```" not in _src(setup):
            return Mistake.FOREIGN_WRAPPER, ev + ["the call is inside a Markdown code fence"]
        pieces = [_inserted_piece(e) for e in edits if not _whitespace_only(e)]
        if pieces and all(pieces):
            # a marker written with a piece of it left out (`<tool_calls>` for `<｜DSML｜tool_calls>`)
            return Mistake.OMITTED_MARKER, ev + [
                sentence_of(_shift(edits), out) + ": the model left "
                + ", ".join(_q(x) for x in dict.fromkeys(pieces)) + " out of the template's marker"]
        solid_edits = [e for e in edits if (e.new or e.old).strip(_WS)]
        if solid_edits and all(e.kind == "insert" and _is_closer(e.new) for e in solid_edits):
            return Mistake.OMITTED_CLOSER, ev + [sentence_of(_shift(edits), out)]
        ins = [e for e in edits if e.kind == "insert"]
        solid = [e for e in ins if e.new.strip(_WS)]
        if any(e.kind != "insert" for e in edits) and all(_whitespace_only(e) for e in edits):
            # what the edits are names the mistake, whatever the text around them looks like: whitespace the
            # model put inside the call's markup where the template writes none (or after the call, where the
            # format ends the output)
            shifted = _shift(edits)
            if all(e.kind == "delete" and e.pos + len(e.old) >= len(out) for e in shifted):
                return Mistake.TRAILING_TEXT, ev + ["only whitespace follows the complete call, and the format "
                                                    "ends the output there: " + sentence_of(shifted, out)]
            return Mistake.OMITTED_MARKER, ev + ["the call's markup is the template's but for whitespace: "
                                                 + sentence_of(shifted, out) + " (the template writes the "
                                                 "markers there with no whitespace between them)"]
        if ins and not solid and len(ins) == len(edits):
            return Mistake.OMITTED_MARKER, ev + ["the model omitted the whitespace the template writes: "
                                                 + sentence_of(_shift(edits), out)]
        if len(solid) != len(ins) and len(ins) == len(edits):
            ins = solid      # whitespace the model also left out is secondary to what else it omitted
            if ins[0].new.strip(_WS) in ("}", "]", "}}", "]}"):
                return Mistake.OMITTED_CLOSER, ev + [sentence_of(_shift(edits), out)]
        if ins and ins[0].new.strip(_WS) in ("}", "]", "}}", "]}") and len(ins) == len(edits):
            return Mistake.OMITTED_CLOSER, ev + [sentence_of(_shift(edits), out)]
        if ins and all(e.pos >= len(out) for e in ins) and len(ins) == len(edits):
            return Mistake.OMITTED_CLOSER, ev + [sentence_of(_shift(edits), out)]
        if ins and (len(edits) == len(ins) or all(_whitespace_only(e) for e in edits if e.kind != "insert")):
            # (an opener rewritten with the whitespace the template writes after it is secondary to the insert)
            first = ins[0]
            if first.new.strip(_WS).startswith("</"):
                return Mistake.OMITTED_CLOSER, ev + [sentence_of(_shift(edits), out)]
            if first.new.strip(_WS) in [o.strip(_WS) for o in ctx["openers"]] or first.pos == 0 \
                    or (ex.stop is None and not msg.get("tool_calls")):
                if _SPECIAL_SHAPE.fullmatch(first.new.strip(_WS)) and not content.strip(_WS).startswith("{") \
                        and first.pos == 0 and Cause.MISSING_OPENER not in causes:
                    return Mistake.SPECIAL_TOKENS_STRIPPED, ev + [sentence_of(_shift(edits), out)]
                return Mistake.OMITTED_OPENER, ev + [sentence_of(_shift(edits), out)]
            stripped = _stripped_tokens(ins, setup, out)
            if stripped:
                return Mistake.SPECIAL_TOKENS_STRIPPED, ev + [sentence_of(_shift(edits), out), stripped]
            learned = _learned_separator(setup, edits, out, ctx)
            if learned:
                # (the nearest output's "omitted `,`" is the analysis' gap here, from the render of two calls)
                ctx["headline"], ctx["specific"] = learned, True
                empty = _empty_comparisons(bundle)
                # (the labelling guide's step 1: the analysis found a format, but a separator the template does
                # not write)
                return Mistake.ANALYSIS_MISREAD, ev + [learned + ("; comparisons that came back empty: "
                                                                  + "; ".join(empty) if empty else "")]
            return Mistake.OMITTED_MARKER, ev + [sentence_of(_shift(edits), out)]
        if probs and ex.stop is not None:
            return probs[0][0], ev + [p[1] for p in probs]
    if guess:
        # the edits of the nearest output named no mistake: the format reading stands
        return guess[0], ev + [guess[1]]
    # schema of what was parsed / what the stop point says
    probs = _schema_problems(setup.request, msg, out)
    if probs:
        return probs[0][0], ev + [p[1] for p in probs]
    if ex.stop is not None and Cause.SCHEMA_MISMATCH in causes:
        # the parser wanted another argument where the call ends: a required one is missing

        closer = ex.stop.found.strip(_WS)
        if closer.startswith("</") or closer == "":
            req_missing = _missing_from_text(setup.request, out)
            if req_missing:
                layout = _layout_beside_missing(setup, out, ctx)
                if layout:
                    # (the labelling guide's step 4 before step 5: the markup's whitespace is the first fault)
                    ctx["headline"] = layout
                    return Mistake.OMITTED_MARKER, ev + [layout, "a second fault, inside the call: " + req_missing]
                if near:
                    ctx["headline"] = req_missing   # (not the nearest output's "omitted `<parameter=…>`")
                return Mistake.MISSING_REQUIRED, ev + [req_missing]
        undeclared = _undeclared_at_stop(setup.request, ex)
        if undeclared:
            ctx["undeclared"] = undeclared[:2]
            return Mistake.UNKNOWN_PARAMETER, ev + [undeclared[2]]
        if tool_names(setup.request):
            return Mistake.OMITTED_MARKER, ev
    # the whole output misread (a call left in the content, or in the reasoning)
    text = content or reasoning
    if Cause.MISSING_OPENER in causes:
        if re.match(r"\s*```", text) or "```" in text:
            return Mistake.FOREIGN_WRAPPER, ev + ["the call is inside a Markdown code fence"]
        return Mistake.OMITTED_OPENER, ev + [e for f in ex.findings if f.cause == Cause.MISSING_OPENER
                                             for e in f.evidence]
    if _WRAPPER_JSON.search(text) or \
            re.match(r"\s*(```|<response>|<tools>)", text):
        return Mistake.FOREIGN_WRAPPER, ev + ["the call is wrapped in a structure the template never renders: "
                                              + _q(text.strip(_WS)[:30])]
    if Cause.OTHER_JSON_SHAPE in causes:
        for alias in _KEY_ALIASES:
            if f'"{alias}"' in text and ctx["args_key"] and alias != ctx["args_key"]:
                return Mistake.FIELD_ALIAS, ev + [f"the model writes {_q(alias)} where the template writes "
                                                  f"{_q(ctx['args_key'])}"]
        member = _member_for_key(ex, out, ctx)
        if member:
            return Mistake.FIELD_ALIAS, ev + [member]
        return Mistake.FOREIGN_WRAPPER, ev
    tok = _TOKEN.search(text)
    invented = _invented_opener(out, text, setup, ctx)
    if Cause.OTHER_MARKER in causes and invented:
        return Mistake.OMITTED_OPENER, ev + [invented]
    if Cause.OTHER_MARKER in causes and tok and tok.group(0) in [r_start] + r_ends and msg.get("tool_calls") \
            and not out[out.rfind(tok.group(0)) + len(tok.group(0)):].strip(_WS):
        # a reasoning marker of the template's own after the calls: not a wrapper, text the format ends before
        return Mistake.TRAILING_TEXT, ev + [f"the output ends with {_q(tok.group(0))}, the template's reasoning "
                                            "marker, after the complete calls, where the format ends the output"]
    src = getattr(setup.template, "source", "") or ""
    if Cause.OTHER_MARKER in causes and tok and _SPECIAL_SHAPE.fullmatch(tok.group(0)) and tok.group(0) in src \
            and tok.group(0) not in ctx["all_markers"] | set(ctx["markers"]) | {r_start, *r_ends}:
        # a control token the template itself writes, which the analysis placed in no role: its gap, not the
        # model's wrapper (Command R7B's <|START_THINKING|> where the analysis found no reasoning markers)
        ctx["specific"] = True
        empty = _empty_comparisons(bundle)
        return Mistake.FORMAT_NOT_FOUND, ev + [
            f"the output writes {_q(tok.group(0))}, a control token the template's source writes, but our analysis "
            "found it in no role (reasoning, content or call marker) — a gap of the analysis, not a statement about "
            "the template" + ("; comparisons that came back empty: " + "; ".join(empty) if empty else "")]
    if Cause.OTHER_MARKER in causes and tok:
        own = ctx["all_markers"] | set(ctx["markers"])
        # (a marker of the template's own written where another belongs is no misspelling of that other marker:
        # DeepSeek V3.1's call opener with the section opener before it left out)
        whole = "" if tok.group(0) in own else next(
            (m for m in sorted(own) if m not in out and _inserted_piece(Edit("replace", 0, tok.group(0), m))), "")
        if whole:
            # one of the template's own markers with a piece left out: a slip of its markup, not a wrapper
            piece = _inserted_piece(Edit("replace", 0, tok.group(0), whole))
            return Mistake.OMITTED_MARKER, ev + [f"the model wrote {_q(tok.group(0))} where the template writes "
                                                 f"{_q(whole)}: it left {_q(piece)} out of the template's marker"]
        if _SPECIAL_SHAPE.fullmatch(tok.group(0)) and tok.group(0) not in (getattr(setup.template, "source", "")
                                                                              or ""):
            return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [f"the output uses {_q(tok.group(0))}, a control token "
                                                          "this template's source never writes"]
        foreign = _foreign_inner(text[tok.end():], setup, ctx)
        if foreign:
            return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [f"inside {_q(tok.group(0))} the call is written {foreign}"]
        own = [o.strip(_WS) for o in ctx["openers"] if o.strip(_WS) and o.strip(_WS) not in out]
        if (tok.group(0) in ctx["all_markers"] | set(ctx["markers"]) or tok.group(0) in src) and own \
                and not msg.get("tool_calls") and _call_like(text[tok.start():], ctx["names"]):
            # the template's own call markup, not a wrapper of it: the call opener before it is what is missing
            return Mistake.OMITTED_OPENER, ev + [f"the output writes {_q(tok.group(0))}, the template's own call "
                                                 f"markup, without the opener {_q(own[0])} the template writes "
                                                 "before it"]
        mine = ctx["all_markers"] | set(ctx["markers"])
        if tok.group(0) in mine and msg.get("tool_calls") and len(edits) == 1 and edits[0].kind == "delete" \
                and edits[0].old.lstrip(_WS).startswith(tok.group(0)) \
                and not out[edits[0].pos + len(edits[0].old):].strip(_WS):
            # the analysis's own call marker opening a second section after the complete calls: no wrapper
            return Mistake.TRAILING_TEXT, ev + [
                f"after the complete call the output opens the template's own call section again with "
                f"{_q(tok.group(0))} (a marker of the format, no wrapper) and the parse, as requested, ends there: "
                + sentence_of(_shift(edits), out)]
        if tok.group(0) in mine:
            # the template's own call marker is no wrapper of its call: what follows it decides
            own_fault = _after_own_marker(setup, ex, out, tok, edits, ctx)
            if own_fault:
                return own_fault[0], ev + [own_fault[1]]
        return Mistake.FOREIGN_WRAPPER, ev + [f"the output wraps the call in {_q(tok.group(0))}"]
    if "<|channel|>" in out and "analysis" in out and "to=functions." in out and not msg.get("tool_calls"):
        return Mistake.CALL_OUTSIDE_SECTION, ev + ["the recipient `to=functions.…` is written on the analysis "
                                                   "channel, where the format has no calls"]
    if ex.stop is not None and re.match(r"\s*\{", out) and out.strip(_WS).endswith(("?", ".", "!")):
        return Mistake.TRAILING_TEXT, ev + ["text follows the JSON call; the format is the JSON call alone"]
    py = _py_call_statement(text, ctx["names"])
    if py is not None or ("call:" in out and "call:" not in src) \
            or re.search(r"<function>[\w.\-]{1,64}</function>", out):
        line = text[text.rfind("\n", 0, py) + 1:] if py is not None else text     # (from the call's line)
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + ["the call is written in a syntax of another format: "
                                                      + _q(line.strip(_WS)[:40])]
    omitted = _omitted_control_token(setup, ex, ctx) if not msg.get("tool_calls") else ""
    if omitted:
        ctx["specific"] = True      # (a marker outside any call)
        ctx["why_none"] = ("the output omits a marker the template writes outside any call (the parse stopped "
                           "there and reads the rest as nothing it expects), and no repair of ours reads a reply "
                           "without it: only the model's output (or a new repair) can change")
        return Mistake.OMITTED_MARKER, ev + [omitted]
    after = _text_after_read_calls(ex, out, msg, ctx) if Cause.DRIFT in causes else ""
    if after:
        return Mistake.TRAILING_TEXT, ev + [after]
    again = _call_block_after_turn_end(ex, out, msg, ctx) if Cause.DRIFT in causes else ""
    if again:
        ctx["why_none"] = ("no change of ours reads a second call block where the format ends the "
                           "turn after the first: only the model's output can change")
        return Mistake.TRAILING_TEXT, ev + [again]
    if Cause.DRIFT in causes or Cause.OTHER_MARKER in causes:
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev
    # a JSON call written when the request offers no tools: re-parsed with its tool offered, is it a call?
    unsent = _unsent_tool_call(setup, out, content or reasoning)
    if unsent is not None:
        ctx["unsent"] = unsent
        return Mistake.TOOLS_NOT_SENT, ev + [unsent[3]]
    # a "clean" parse that left a JSON call object in the content or reasoning dropped a call
    if not msg.get("tool_calls") and ctx["names"]:
        for where, txt in (("content", content), ("reasoning", reasoning)):
            named = _json_call_name(txt)
            if named is None or named in ctx["names"]:
                continue
            near_name = _misnamed(named, setup.request)
            ev.append(f"the {where} holds a JSON call object naming {_q(named)}, which is no tool of the request"
                      + (f" (a near name of the declared {_q(near_name)})" if near_name else
                         f" (it declares {', '.join(_q(n) for n in ctx['names'][:4])})")
                      + ": the parse dropped a call, it is not clean")
            own = [m for m in ctx["markers"] if m]
            if not near_name:
                ev.append(f"{_q(named)} is no declared tool nor a near name of one: even written in the template's "
                          "format the call would name no tool of the request, so the name is the fault before the "
                          "format")
                return Mistake.UNKNOWN_TOOL, ev
            if own and not any(m in out for m in own):
                ev.append(f"the template writes calls with {_q(own[0])}, which the output never writes: the bare JSON "
                          "object is another family's call format")
                return Mistake.TEMPLATE_MODEL_MISMATCH, ev
            return Mistake.UNKNOWN_TOOL, ev
    plain = _plain_line_call(content, ctx["names"]) if not msg.get("tool_calls") and ctx["markers"] else ""
    if plain:
        ctx["plain_line"] = plain
        return Mistake.TEMPLATE_MODEL_MISMATCH, ev + [
            f"the content writes {_q(plain)}, a declared tool's name, alone on a line and its argument on the next: a "
            f"call as plain lines, with none of the template's call markup ({_q(ctx['markers'][0])}): the parse is not "
            "clean, it dropped a call"]
    # a "clean" parse that left marker-like text and a tool's name in the content or reasoning dropped a call
    if not msg.get("tool_calls") and ctx["names"]:
        for where, txt in (("reasoning", reasoning), ("content", content)):
            tok = _TOKEN.search(txt)
            named = [n for n in ctx["names"] if n in txt]
            if tok and named:
                ev.append(f"the {where} holds marker-like text {_q(tok.group(0))} and the tool name {_q(named[0])}, "
                          "but the parse read no call: this is not a clean parse")
                if where == "reasoning" and r_ends and not any(e in out for e in r_ends):
                    ev.append(f"the output never closes the reasoning with {_q(r_ends[0])}")
                    return Mistake.REASONING_NOT_CLOSED, ev
                return Mistake.TEMPLATE_MODEL_MISMATCH, ev
    return Mistake.NONE, ev


_SHAPE_SCAN = 8              # JSON values tried per text (each one linear scan)
_SHAPE_CHARS = 256 * 1024    # text looked at for a call object


@dataclass
class _CallShape:
    """Where a call object sits in a JSON value and how it is written: the dict keys from the value's root down
    to the call object (list indices left out), its keys in order, the key holding the tool's name and the key
    holding the arguments object (``""`` when none)."""

    path: tuple[str, ...]
    keys: tuple[str, ...]
    name_key: str
    args_key: str
    end: int = -1       # where the JSON value holding it ends in the text looked at
    start: int = -1     # where that JSON value starts
    root: str = ""      # "list" or "dict": the JSON value's own type


def _find_call(value: Any, names: set[str], path: tuple[str, ...] = (), depth: int = 0) -> _CallShape | None:
    """The first dict under ``value`` (depth ≤ 4) with a member whose value is one of ``names``."""
    if depth > 4:
        return None
    if isinstance(value, dict):
        name_key = next((k for k, v in value.items() if isinstance(v, str) and v in names), "")
        if name_key:
            args_key = next((k for k, v in value.items() if k != name_key and isinstance(v, dict)), "")
            return _CallShape(path, tuple(value), name_key, args_key)
        for k, v in value.items():
            found = _find_call(v, names, path + (k,), depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for v in value[:8]:
            found = _find_call(v, names, path, depth + 1)
            if found:
                return found
    return None


def _json_call_in(text: str, names: set[str]) -> _CallShape | None:
    """The call object of the first JSON object or list in ``text`` that holds one (a declared tool's name as a
    member's value); at most :data:`_SHAPE_SCAN` starts tried, within the first :data:`_SHAPE_CHARS`."""
    text = text[:_SHAPE_CHARS]
    dec = json.JSONDecoder()
    for m in itertools.islice(re.finditer(r"[{\[]", text), _SHAPE_SCAN):
        try:
            value, end = dec.raw_decode(text, m.start())
        except (ValueError, RecursionError):     # not JSON there, or nested past the decoder's depth
            continue
        found = _find_call(value, names) if isinstance(value, (dict, list)) else None
        if found:
            return replace(found, end=end, start=m.start(), root="list" if isinstance(value, list) else "dict")
        if isinstance(value, (dict, list)):
            return None          # the first JSON value holds no call: the text is not a JSON call
    return None


def _json_shape_slip(setup: _Setup, out: str, ctx: dict[str, Any], read: bool = False, stop: int = -1
                     ) -> tuple[Mistake, str] | None:
    """What differs between the model's JSON call object and the one the template renders for a call of the same
    tool — computed from both, not guessed: an extra level around the call (``{"function": {…}}``,
    ``{"tool_calls": […]}``) is a wrapper the template never renders; a key renamed (``"parameters"`` for
    ``"arguments"``, ``"function"`` for ``"name"``) or the keys in another order (``{"arguments": …, "name": …}``) is
    a field slip of the template's own call shape. ``read``: the parse read a call — then only an object the parse
    stopped inside (``stop``) is looked at. ``(mistake, evidence)``, or None when the template renders no JSON call
    object, the output holds none, or they do not differ."""
    names = [n for n in ctx["names"] if n]
    if not names or len(out) > _SHAPE_CHARS:
        return None
    mine = _json_call_in(out, set(names))
    if mine is None or (read and not 0 <= stop < mine.end):
        return None      # a call the parse read, and stopped after: its shape is not what stopped it
    if not mine.args_key and not (mine.path and mine.keys == (mine.name_key,)):
        return None      # a tool's name as some value, with no arguments object beside it: no call written
    tool = next((t.get("function") or {} for t in setup.request.tools or [] if isinstance(t, dict)
                 and (t.get("function") or {}).get("name") in names), {})
    name = tool.get("name") or names[0]
    props = list(properties_of(tool.get("parameters")))[:1]
    render = _rendered_call(setup, name, {p: "V0" for p in props})
    theirs = _json_call_in(render, {name}) if render else None
    if theirs is None:
        return None
    q = _q
    extra = [k for k in mine.path if k not in theirs.path]
    if len(mine.path) > len(theirs.path) and extra:
        return Mistake.FOREIGN_WRAPPER, (
            f"the model's call object sits under {', '.join(q(chr(34) + k + chr(34)) for k in extra)}, a level the "
            f"template's call never writes (it writes {q('{' + ','.join(chr(34) + k + chr(34) for k in theirs.keys) + '}')}"
            + (f" under {', '.join(q(chr(34) + k + chr(34)) for k in theirs.path)}" if theirs.path else " at the top")
            + "): an extra wrapper around the template's own call shape")
    slips = []
    if mine.name_key != theirs.name_key:
        slips.append(f"names the tool under {q(chr(34) + mine.name_key + chr(34))} where the template writes "
                     f"{q(chr(34) + theirs.name_key + chr(34))}")
    if theirs.args_key and mine.args_key and mine.args_key != theirs.args_key:
        slips.append(f"writes the arguments under {q(chr(34) + mine.args_key + chr(34))} where the template writes "
                     f"{q(chr(34) + theirs.args_key + chr(34))}")
    if len(mine.path) < len(theirs.path):
        slips.append("writes the call object without the level "
                     + ", ".join(q(chr(34) + k + chr(34)) for k in theirs.path if k not in mine.path)
                     + " the template puts around it")
    rename = {mine.name_key: theirs.name_key, mine.args_key: theirs.args_key}
    order = [rename.get(k, k) for k in mine.keys if rename.get(k, k) in theirs.keys]
    want = [k for k in theirs.keys if k in order]
    if not slips and order != want:
        # the template's own keys, every one named right, in another order: no slip of a token — the call object of
        # another prompt or format the model was trained with (decided by the template's render, which writes the
        # keys in its order in the call and, when it shows one, in the system prompt's example)
        shown = _prompt_key_order(setup, order)
        ctx["key_order"] = True
        return Mistake.TEMPLATE_MODEL_MISMATCH, (
            f"the model's JSON call object writes the template's keys, each named as the template names it, in the "
            f"order {', '.join(q(chr(34) + k + chr(34)) for k in order)} where the template's render of a call of "
            f"{q(name)} writes {', '.join(q(chr(34) + k + chr(34)) for k in want)}: a key order is learned, not "
            "slipped — the model writes the call shape of another prompt or format it was trained with"
            + (f"; the template's own system prompt shows that order ({q(shown, 60)}) while its render of a call "
               "writes the other: the template contradicts itself" if shown else
               " (the template's prompt shows no call object in that order)"))
    extra_keys = [k for k in mine.keys if rename.get(k, k) not in theirs.keys]
    if not slips and extra_keys and set(want) == set(theirs.keys):
        slips.append(f"writes {', '.join(q(chr(34) + k + chr(34)) for k in extra_keys[:3])} beside the members the "
                     f"template writes ({', '.join(q(chr(34) + k + chr(34)) for k in theirs.keys)}), a member its call "
                     "never has")
    if not slips:
        return None
    return Mistake.FIELD_ALIAS, ("the model's JSON call object " + "; ".join(slips) + ": a field slip of the "
                                 "template's own call shape (compared with the template's render of a call of "
                                 f"{q(name)})")


_LAYER_OPEN = re.compile(r"<([A-Za-z_][\w:\-]{0,40})(?:\s[^<>\n]{0,200})?>$")
_GLUED_IDENT = re.compile(r"[A-Za-z_][\w.]{0,40}$")


def _layers(text: str, start: int, end: int, root: str, bare: bool) -> list[tuple[str, str, int, int]]:
    """The pairs written around ``text[start:end]`` (a JSON value), innermost first, each as ``(opener, closer,
    where the opener starts, where the closer starts)``: a tag pair ``<x …>`` … ``</x>`` (whitespace between
    allowed), repeated outward; when ``bare`` (the template writes the call as a lone object) a list holding the
    call is a layer too, named with an identifier glued before its ``[`` (``functools[`` … ``]``). At most 4."""
    out: list[tuple[str, str, int, int]] = []
    a, b = start, end
    if bare and root == "list":
        glued = _GLUED_IDENT.search(text, max(0, a - 41), a)
        name = glued.group(0) if glued else ""
        out.append((name + "[", "]", a - len(name), b - 1))
        a -= len(name)
    for _ in range(4):
        head = text[max(0, a - 240):a].rstrip(_WS)
        m = _LAYER_OPEN.search(head)
        tail = text[b:b + 80].lstrip(_WS)
        close = f"</{m.group(1)}>" if m else ""
        if not m or not tail.startswith(close):
            break
        a = max(0, a - 240) + m.start()
        b = b + (len(text[b:b + 80]) - len(tail))
        out.append((m.group(0), close, a, b))
        b += len(close)
    return out


def _wrapper_layers(setup: _Setup, out: str, ctx: dict[str, Any]) -> tuple[list[str], str] | None:
    """A wrapper the template never renders around its own call: the pairs written around the output's JSON call
    value (:func:`_layers`) set against those around the JSON call in the template's render of a call of the same
    tool. The output keeps every layer of the template's and adds one (``<answer>`` around ``<tool_calls>[…]``,
    ``<tool_call>`` around a bare list, ``functools[…]`` around a lone object). ``([its opener, its closer],
    evidence)`` or None; one render, outputs up to 256 KiB."""
    names = [n for n in ctx["names"] if n]
    if not names or len(out) > _SHAPE_CHARS:
        return None
    outer = _outer_tag_pair(setup, out, ctx)
    if outer:
        return outer
    mine = _json_call_in(out, set(names))
    if mine is None or (not mine.args_key and not mine.path):
        return None
    tool = next((t.get("function") or {} for t in setup.request.tools or [] if isinstance(t, dict)
                 and (t.get("function") or {}).get("name") in names), {})
    name = tool.get("name") or names[0]
    theirs = None
    for args in ({p: "V0" for p in list(properties_of(tool.get("parameters")))[:1]}, {}):
        render = _rendered_call(setup, name, args)
        theirs = _json_call_in(render, {name}) if render else None
        if theirs is not None:
            break       # (a template that writes argument values as Python renders no JSON with one)
    if theirs is None:
        return None
    bare = theirs.root == "dict"
    own = [x[:2] for x in _layers(render, theirs.start, theirs.end, theirs.root, bare)]
    got = _layers(out, mine.start, mine.end, mine.root, bare)
    if any(o not in [g[:2] for g in got] for o in own):
        return None         # a layer of the template's missing or renamed: not a wrapper around its shape
    extra = [g for g in got if g[:2] not in own and g[0] not in render]
    if not extra:
        return None
    budget = ctx.get("budget")
    o, c, oa, ca = extra[-1]
    edits = [Edit("delete", oa, o, ""), Edit("delete", ca - len(o), c, "")]
    unwrapped = edits[1].apply(edits[0].apply(out))
    left = ctx.get("near_content")
    if budget is not None and (left is None or o in left) and budget.take(len(unwrapped)):
        try:
            p = _parse(setup, unwrapped)
            if _accepts(p, ctx):
                # the nearest output by construction: the wrapper's two halves deleted (in place of a search's
                # that left the wrapper's opener in the content)
                ctx["near"], ctx["near_replaces"] = (edits, p), left is not None
        except Exception:  # noqa: BLE001 - no parser, no nearest output
            pass
    shown = f"{_q(o)} … {_q(c)}"
    inside = "the template's own call" + (" section " + _q(own[-1][0]) if own else
                                          " list" if theirs.root == "list" else " object")
    return [o, c], (
        f"the model writes {shown} around {inside}, a pair the template's render of a call of {_q(name)} never "
        "writes: a wrapper around the template's own call shape")


def _outer_tag_pair(setup: _Setup, out: str, ctx: dict[str, Any]) -> tuple[list[str], str] | None:
    """The whole output (or its part after a leading block) closed by a tag ``</x>`` at its very end whose opener
    ``<x…>`` the output writes before the calls, ``x`` a tag the template's source never writes, and with both
    halves deleted the output parses clean with calls (the nearest output, by construction): a wrapper around
    the template's own output. ``([opener, closer], evidence)`` or None; one parse."""
    budget = ctx.get("budget")
    tail = out.rstrip(_WS)
    m = re.search(r"</([A-Za-z_][\w:\-]{0,40})>$", tail)
    if not m or budget is None or len(out) > _STRIPPED_CHARS:
        return None
    name = m.group(1)
    o = re.compile(r"<" + re.escape(name) + r"(?:\s[^<>\n]{0,200})?>").search(out, 0, m.start())
    if not o or f"<{name}" in _src(setup) or out.find(f"</{name}>", o.end(), m.start()) >= 0:
        return None
    if not any(n and n in out[o.end():m.start()] for n in ctx["names"]):
        return None
    edits = [Edit("delete", o.start(), o.group(0), ""), Edit("delete", m.start() - len(o.group(0)), m.group(0), "")]
    unwrapped = edits[1].apply(edits[0].apply(out))
    p = _accepted_parse(setup, unwrapped, budget, ctx)
    if p is None:
        return None
    left = ctx.get("near_content")
    if left is None or o.group(0) in left:
        ctx["near"], ctx["near_replaces"] = (edits, p), left is not None
    return [o.group(0), m.group(0)], (
        f"the model writes {_q(o.group(0))} … {_q(m.group(0))} around the template's own output, a tag pair the "
        "template never writes: with both deleted the output parses into the calls — a wrapper, not another format")


def _token_before_call(setup: _Setup, out: str, msg: dict[str, Any], near: tuple[list[Edit], _Parsed] | None
                       ) -> str:
    """Evidence when the parse read the calls and left a control token before them in the content, and the nearest
    output only deletes such tokens (``<|python_tag|>{"name": …}`` where the template writes the call bare): a
    marker the template's render of a call never writes before it, left in the content — the parse is not clean.
    ``""`` otherwise."""
    if not near or not msg.get("tool_calls"):
        return ""
    edits, parsed = near
    if not edits or any(e.kind != "delete" or not _SPECIAL_SHAPE.fullmatch(e.old.strip(_WS)) for e in edits) \
            or len(parsed.message.tool_calls) != len(msg["tool_calls"]):
        return ""
    shifted = _shift(edits)
    if any(not out[e.pos + len(e.old):].strip(_WS) for e in shifted):
        return ""           # a token at the very end is a kept stop token (trailing text), not a marker before
    name = msg["tool_calls"][0].get("function", {}).get("name") or ""
    render = _rendered_call(setup, name, {}) if name else ""
    toks = list(dict.fromkeys(e.old.strip(_WS) for e in shifted))
    if not render or any(t in render for t in toks):
        return ""
    return (f"the model writes {', '.join(_q(t) for t in toks)} before the call, which the template's render of a call "
            f"of {_q(name)} never writes (it writes the call without it): a marker around the template's own call "
            "shape, left in the content — the parse read the call but is not clean")


def _foreign_token_then_slips(setup: _Setup, out: str, near: tuple[list[Edit], _Parsed] | None) -> str:
    """Evidence when the nearest output deletes a control token the template's source never writes, right before
    the call it reads (text follows it), and also mends the call itself (``<|python_tag|>`` before a JSON call that
    writes ``"arguments"`` for ``"parameters"``): the token wraps the call — the outer fault, named first; the
    call's own slips follow. Every such token deleted comes before the call's slips (no closer after it). ``""``
    otherwise (:func:`_token_before_call` names a token that is the only edit)."""
    if not near:
        return ""
    edits = _shift(near[0])
    src = _src(setup)
    toks = [e for e in edits if e.kind == "delete" and _SPECIAL_SHAPE.fullmatch(e.old.strip(_WS))
            and e.old.strip(_WS) not in src]
    rest = [e for e in edits if e not in toks]
    if not toks or not rest or not near[1].message.tool_calls or max(e.pos for e in toks) > min(e.pos for e in rest) \
            or not out[toks[0].pos + len(toks[0].old):].strip(_WS):
        return ""       # (a token pair around the call, `<|python_start|>` … `<|python_end|>`, is another section)
    return (f"the model writes {_q(toks[0].old.strip(_WS))} before the call, a control token the template's source "
            f"never writes: a wrapper around the call, the outer fault; inside it the call also differs from the "
            f"template's: {sentence_of(rest, out)}")


def _end_token_then_more(setup: _Setup, ex: Any, ctx: dict[str, Any]) -> str:
    """Evidence when the parse read the calls and stopped at a control token that the template's render of a call
    turn ends with (``<|call|>``, ``<|eom_id|>``: the end of the call turn, where a server stops generation) and that
    is no call opener or closer of the analysis, and more text after it: the model ended the call and went on writing. ``""``
    otherwise."""
    msg = ex.message
    if ex.stop is None or not msg.get("tool_calls"):
        return ""
    tok = _SPECIAL_SHAPE.match(ex.text, ex.stop.pos)
    if not tok or tok.group(0) in set(ctx["markers"]) | set(ctx["closers"]):
        return ""
    name = msg["tool_calls"][-1].get("function", {}).get("name") or ""
    render = _rendered_call(setup, name, {"a": "V0"}) if name else ""
    at = render.find("V0")
    end = re.search(r"(?:" + _SPECIAL_SHAPE.pattern + r"|\s)+$", render[at:]) if at >= 0 else None
    if end is None or tok.group(0) not in end.group(0):
        return ""       # not among the tokens the render of the call turn ends with
    rest = ex.text[tok.end():].strip(_WS)
    if not rest:
        return ""       # the token alone at the end: a kept stop token (the nearest output's deletion names it)
    return (f"after the complete call the model writes {_q(tok.group(0))}, the token the template's render of a call "
            "writes to end the call turn (a server stops generation there and strips it), and goes on: "
            f"{_q(rest, 30)} is text after the turn the format ends")


def _turn_run_on(ex: Any) -> str:
    """Evidence when the parse read the calls and stopped at a control token after which the output writes the
    generation prompt again (``<|eom_id|><|start_header_id|>assistant<|end_header_id|>``): the model ended its
    turn and went on into a next assistant turn of its own, which nothing stopped. ``""`` otherwise."""
    gp = ex.generation_prompt.strip(_WS)
    if ex.stop is None or not ex.message.get("tool_calls") or len(gp) < 4:
        return ""
    tok = _SPECIAL_SHAPE.match(ex.output, ex.stop.output_pos)
    if not tok or gp not in ex.output[tok.end():tok.end() + _SHAPE_CHARS]:
        return ""
    return (f"after the complete call the model writes {_q(tok.group(0))} and then the generation prompt "
            f"{_q(gp, 40)} again: it ended its turn and went on into a next assistant turn of its own (generation "
            "was not stopped at the end of the call turn), all of which is text after what the format reads")


def _lone_call_closer_after_answer(ex: Any, setup: _Setup, bundle: Any, ctx: dict[str, Any]) -> str:
    """The control token a clean answer with no call ends with (its only one) when it is the last piece of the
    template's render of a call (the relation's pieces: the section's closer) and the output writes none of the
    call's other pieces nor a declared tool's name: a closer no call opened, after the answer (the labelling
    guide's step 4: text after where the format ends the turn). ``""`` otherwise; the relation's renders."""
    content = ex.message.get("content") or ""
    tail = re.search(r"(?:" + _SPECIAL_SHAPE.pattern + r")\s*$", content)
    if not ex.clean or ex.message.get("tool_calls") or tail is None or not content[:tail.start()].strip(_WS) \
            or _SPECIAL_SHAPE.search(content[:tail.start()]):
        return ""
    tok = tail.group(0).strip(_WS)
    if ctx.get("budget") is None or any(m and m.strip(_WS) and m.strip(_WS) in ex.output for m in ctx["markers"]) \
            or any(n and n in content for n in ctx["names"]):
        return ""       # (a declared tool's name before it: a call whose opener is missing, not an answer)
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or len(rel.pieces) < 2 or rel.pieces[-1].strip(_WS) != tok \
            or any(x.strip(_WS) and x.strip(_WS) in ex.output for x in rel.pieces[:-1] if MARKUP.search(x)):
        return ""
    return tok


def _stop_token_after_answer(setup: _Setup, ex: Any) -> tuple[str, str] | None:
    """``(output without it, evidence)`` when a clean answer with no call ends with a control token (its only one)
    that the template writes right after an assistant turn (the end-of-turn texts derived from its renders,
    :func:`core.chat.samples.end_of_turn_candidates`: gpt-oss's ``<|return|>``, ``<|im_end|>``) and the parse keeps
    in the content: the server returned the stop token it stops on (improved fidelity's ``trailing-end-of-turn``
    cuts it). A few renders."""
    content = ex.message.get("content") or ""
    tail = re.search(r"(?:" + _SPECIAL_SHAPE.pattern + r")\s*$", content)
    if not ex.clean or ex.message.get("tool_calls") or tail is None or not content[:tail.start()].strip(_WS) \
            or _SPECIAL_SHAPE.search(content[:tail.start()]) \
            or not ex.output.rstrip(_WS).endswith(tail.group(0).strip(_WS)):
        return None     # (other control tokens in the answer: more is unread than a returned stop token)
    tok = tail.group(0).strip(_WS)
    try:
        ends = end_of_turn_candidates(setup.template, setup.request)
    except Exception:  # noqa: BLE001 - a template that does not render a reply gives no evidence
        return None
    if not any(e.strip(_WS).startswith(tok) for e in ends):
        return None
    cut = ex.output.rstrip(_WS)
    return cut[:len(cut) - len(tok)], (
        f"the answer ends with {_q(tok)}, the control token the template writes right after an assistant turn (the "
        "end of the turn, where a server stops generation and strips the token), kept in the content: the server "
        "returned its stop token")


_END_TAG = re.compile(r"</?[A-Za-z_|]{1,16}>")


def _after_own_marker(setup: _Setup, ex: Any, out: str, tok: re.Match[str], edits: list[Edit],
                      ctx: dict[str, Any]) -> tuple[Mistake, str] | None:
    """The fault after one of the template's own call markers (``tok``), which the stop point's reading took for
    a wrapper: the output ends right after the call's head where the arguments belong, only one token after it (a
    control token or a bare tag, the turn's end: ``[ARGS]</s>``) → cut short; the nearest output's first
    edit puts back whitespace the template writes right after the marker → the omitted marker. None otherwise."""
    st = ex.stop
    if st is not None and not ex.clean and any("args" in p for p in st.path):
        rest = out[st.output_pos:].strip(_WS)
        if rest and (_SPECIAL_SHAPE.fullmatch(rest) or _END_TAG.fullmatch(rest)) and out.rstrip(_WS).endswith(rest) \
                and not out[:st.output_pos].endswith(_WS):
            ctx["why_none"] = (f"no change of ours reads a call whose arguments were never written: the output ends "
                               f"with {_q(rest)} where the call's arguments belong — only the model's output (a longer "
                               "generation) can change")
            return Mistake.CUT_SHORT, (f"the output ends inside the call: after the call's head, where the "
                                       f"template writes the arguments, only {_q(rest)} (the turn's end) follows — "
                                       "the arguments were never written, the marker is the template's own, no wrapper")
    first = min(edits, key=lambda e: e.pos) if edits else None
    if first is not None and first.kind == "insert" and not first.new.strip(_WS) \
            and out[:first.pos].endswith(tok.group(0)):
        return Mistake.OMITTED_MARKER, (f"the output writes the template's own marker {_q(tok.group(0))} (no wrapper) "
                                        f"without the whitespace the template writes right after it: "
                                        + sentence_of(_shift(edits), out))
    return None


_NAME_RUN = re.compile(r"[\w.\-\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]{1,128}")
_NAME_TRIES = 4             # near names re-parsed at most (one parse each)


def _misnamed_call(ex: Any, setup: _Setup, ctx: dict[str, Any]) -> tuple[Mistake, str] | None:
    """The tool name is the only fault: the parse read no call, the output writes a declared tool's name but for
    its letter case or an invisible format character (U+200B …) in it, and with that one name written as declared
    the same output parses clean to a call. The nearest output is that one edit (``ctx["near"]``); whatever
    markup the call lacks otherwise (an opener the format reads without) is no fault. None otherwise."""
    names = list(ctx["names"])
    if not names or ex.message.get("tool_calls") or ctx.get("budget") is None:
        return None
    folded = {n.casefold(): n for n in names}
    out = ex.output
    tries = 0
    for m in _NAME_RUN.finditer(out[:_SHAPE_CHARS]):
        written = m.group(0)
        if out[m.start() - 1:m.start()] == " ":
            continue        # (a word of prose: a called name follows markup, a quote or a line break)
        plain = "".join(c for c in written if unicodedata.category(c) != "Cf")
        name = folded.get(plain.casefold())
        if name is None or written == name:
            continue
        hidden = [(i, c) for i, c in enumerate(written) if unicodedata.category(c) == "Cf"]
        if plain == name and len(hidden) == 1:
            edit = Edit("delete", m.start() + hidden[0][0], hidden[0][1], "")
        else:
            edit = Edit("replace", m.start(), written, name)
        tries += 1
        p = _accepted_parse(setup, edit.apply(out), ctx["budget"], ctx)
        if p is not None and any(c.name == name for c in p.message.tool_calls):
            how = ("with the invisible character " + ", ".join(f"U+{ord(c):04X}" for _, c in hidden) + " in it"
                   + (" and in other letter case" if plain != name else "")) if hidden else "in other letter case"
            ctx["near"], ctx["near_replaces"] = ([edit], p), True
            sentence = (f"the model called {_q(written)}; the request offers {_q(name)}, which the output writes "
                        f"{how}: with the name written {_q(name)} the same output parses clean to a call of "
                        f"{_q(name)}, so the name is the only fault")
            ctx["headline"] = ctx["headline_after"] = sentence    # (the rules' reading may name it too)
            return Mistake.UNKNOWN_TOOL, sentence
        if tries >= _NAME_TRIES:
            break
    return None


def _spaced_tool_name(setup: _Setup, ex: Any) -> str:
    """Evidence when the parse stopped where the template writes a declared tool's name and the output writes that
    name there with whitespace before it (and whitespace or the next marker after it): the name is offered, the
    whitespace is markup the template's render never writes there (the guide's whitespace clarification) — no
    unknown tool. ``""`` otherwise."""
    st = ex.stop
    if st is None:
        return ""
    names = set(tool_names(setup.request))
    found = ex.output[st.output_pos:st.output_pos + 256]
    body = found.lstrip(_WS)
    if body == found:
        return ""
    for lit in st.literals:
        if lit in names and body.startswith(lit) and (len(body) == len(lit) or not (body[len(lit)].isalnum()
                                                                                    or body[len(lit)] in "_-.")):
            after = body[len(lit):]
            spaced_after = after[:1] in tuple(_WS) if after else False
            return (f"the output writes whitespace before the declared tool's name {_q(lit)}"
                    + (" and after it" if spaced_after else "")
                    + ", where the template's render writes the name glued to the markup around it: the name is "
                    "offered, the whitespace is markup the template never writes there")
    return ""


def _other_turn_closer_after_answer(setup: _Setup, ex: Any) -> tuple[str, str] | None:
    """``(token, evidence)`` when an answer with no call ends with a control token (its only one) that the template
    writes after another kind of assistant turn than a generated answer — first in the text between an answer in the
    history and the next user turn (:func:`core.chat.samples.end_of_turn_candidates`' turn separator: gpt-oss's
    ``<|end|>``), or last in its render of a call turn (``<|call|>``) — and not at the end of a generated answer
    (that one is the server's stop token, :func:`_stop_token_after_answer`). The parse is clean, or stopped at that
    token and nowhere else. Two renders at most."""
    content = ex.message.get("content") or ""
    out = ex.output.rstrip(_WS)
    tail = re.search(r"(?:" + _SPECIAL_SHAPE.pattern + r")\s*$", content)
    if ex.message.get("tool_calls") or tail is None or not content[:tail.start()].strip(_WS) \
            or _SPECIAL_SHAPE.search(content[:tail.start()]) or not out.endswith(tail.group(0).strip(_WS)):
        return None
    tok = tail.group(0).strip(_WS)
    if not ex.clean and (ex.stop is None or ex.stop.output_pos != len(out) - len(tok)):
        return None     # (the parse stopped elsewhere: more is unread than a closer at the end)
    try:
        ends = end_of_turn_candidates(setup.template, setup.request)
    except Exception:  # noqa: BLE001 - a template that does not render a reply gives no evidence
        return None
    if not ends or ends[0].strip(_WS).startswith(tok):
        return None     # (the generated answer's own end: a returned stop token)
    if any(e.strip(_WS).startswith(tok) for e in ends[1:]):
        return tok, (f"the answer ends with {_q(tok)}, the control token the template writes after an answer in the "
                     "conversation's history (before the next turn), not after a generated answer: the model closed "
                     "its answer with another turn's closer, and the parse keeps it in the content")
    names = [n for n in tool_names(setup.request) if n]
    if any(n in content for n in names):
        return None     # (a declared tool's name before it: a call whose opener is missing, not an answer)
    call = _rendered_call(setup, names[0] if names else "f", {}).rstrip(_WS)
    if call.endswith(tok) and tok not in call[:len(call) - len(tok)]:
        return tok, (f"the answer ends with {_q(tok)}, the control token the template's call turn ends with (after "
                     "the call), written after an answer with no call: markup of the call format after the answer, "
                     "where the format ends the turn, and the parse keeps it in the content")
    return None


_QUOTED_KEY = re.compile(r'"[^"\\\n]{1,64}"')


def _member_for_key(ex: Any, out: str, ctx: dict[str, Any]) -> str:
    """Evidence when the parse stopped inside a JSON call object written right after one of the template's own call
    openers, expecting one of its keys and finding another key there (``"point"`` where it writes
    ``"arguments"``): the call object has a member the template's call never has — the opener is the template's,
    so no wrapper. ``""`` otherwise."""
    stop = ex.stop
    if stop is None or not _QUOTED_KEY.match(stop.found or ""):
        return ""
    wanted = [e.strip("`") for e in stop.expected if _QUOTED_KEY.fullmatch(e.strip("`"))]
    found = _QUOTED_KEY.match(stop.found).group(0)
    if not wanted or found in wanted or found.strip('"') in ("name", ctx["args_key"], *_KEY_ALIASES):
        return ""       # (one of the call's own keys, or an alias of one, out of order: not a foreign member)
    start = out.rfind("{", 0, stop.output_pos)
    head = out[:start].strip(_WS) if start >= 0 else ""
    own = [m for m in ctx["markers"] if m and head.endswith(m)]
    if not own:
        return ""
    return (f"inside the template's own call opener {_q(own[0])} the call object writes {_q(found)} where the "
            f"template's call writes {_q(wanted[0])}: a member the template's call never has (the arguments written "
            "beside the name, not inside the template's key) — the opener is the template's, not a wrapper")


def _tool_result_markers(setup: _Setup, msg: dict[str, Any], ctx: dict[str, Any]) -> list[str]:
    """The control tokens a clean answer (no call) keeps in its content that the template writes only around a
    tool's result: each is within 40 characters of the result in the template's render of a tool turn (an
    assistant call, then a tool message), appears in no render of a plain reply, and is no marker of the format
    (DeepSeek's ``<｜tool▁output▁begin｜>`` in an answer). ``[]`` otherwise; two renders."""
    content = msg.get("content") or ""
    if msg.get("tool_calls") or len(content) > _STRIPPED_CHARS:
        return []
    kept = list(dict.fromkeys(m.group(0) for m in _SPECIAL_SHAPE.finditer(content)))[:16]
    own = ctx["all_markers"] | set(ctx["markers"]) | set(ctx["closers"])
    kept = [t for t in kept if t not in own and t in _src(setup)]
    if not kept:
        return []
    tools = list(setup.request.tools or []) or [tool_stub("f")]
    name = tools[0].get("function", {}).get("name") or "f"
    user = [{"role": "user", "content": "hi"}]
    turn = user + [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "id": "call_1", "function": {"name": name, "arguments": {}}}]},
                   {"role": "tool", "tool_call_id": "call_1", "content": "R0"}]
    try:
        with_result = apply_template(setup.template, turn, tools, add_generation_prompt=False)
        reply = apply_template(setup.template, user + [{"role": "assistant", "content": "V0"}], tools,
                               add_generation_prompt=False)
    except Exception:  # noqa: BLE001 - a template that does not render a tool turn gives no evidence
        return []
    at = with_result.find("R0")
    if at < 0:
        return []
    near = with_result[max(0, at - 40):at + 42]
    return [t for t in kept if t in near and t not in reply]


def _prompt_key_order(setup: _Setup, order: list[str]) -> str:
    """The text of the template's rendered prompt (a user turn and the generation prompt, with the request's
    tools) where a JSON object names the keys ``order`` in that order (``{"arguments": <args-dict>, "name": …``),
    or ``""``."""
    from ..jinja.template import apply_template

    if len(order) < 2:
        return ""
    try:
        prompt = apply_template(setup.template, [{"role": "user", "content": "hi"}], list(setup.request.tools or []),
                                add_generation_prompt=True)
    except Exception:  # noqa: BLE001 - a template that does not render the prompt shows nothing
        return ""
    pat = re.compile(r"\{\s{0,8}" + r"[^{}\n]{0,120}?".join(re.escape(f'"{k}"') + r"\s{0,8}:" for k in order[:2]))
    m = pat.search(prompt[:_SHAPE_CHARS])
    return m.group(0) if m else ""


def _trailing_token(out: str, near: tuple[list[Edit], _Parsed], setup: _Setup) -> str:
    """Evidence when the nearest output only deletes control tokens from the very end of the output, after the
    complete calls (``…</tool_call><|im_end|>``): a token a server stops generation at and strips, kept — not a
    wrapper nor another format. ``""`` otherwise."""
    edits, parsed = near
    kept = parsed.output.rstrip(_WS)
    if not edits or any(e.kind != "delete" for e in edits) or not parsed.message.tool_calls \
            or not out.startswith(kept) or not out[len(kept):].strip(_WS):
        return ""
    rest = out[len(kept):].strip(_WS)
    toks = [m.group(0) for m in _TOKEN.finditer(rest)]
    if not toks or "".join(toks) != re.sub(r"\s+", "", rest):
        return ""
    names = [tc.name for tc in parsed.message.tool_calls if getattr(tc, "name", "")]
    render = _rendered_call(setup, names[0], {}) if names else ""
    own = [t for t in toks if t in render]
    return (f"the output ends with {', '.join(_q(t) for t in toks[:3])} after the complete call"
            + (", which the template writes to end the assistant turn" if own else "")
            + ": a token a server stops generation at and strips from the output, kept here — the call itself is "
              "the template's")


def _src(setup: _Setup) -> str:
    """The template's source (``""`` when it has none)."""
    return getattr(setup.template, "source", "") or ""


def _text_before_reasoning(setup: _Setup, out: str, gp: str, r_start: str, r_ends: list[str]) -> str:
    """The labelling guide's step 4 for text before a reasoning block, decided from the generation prompt and the
    analysis' reasoning markers: the prompt neither opens nor closes the reasoning (the turn starts with the block
    the model writes), the request extracts reasoning, and the output writes text with no markup, then the analysis'
    reasoning opener — the setting matches the output (the model does reason); the text stands where the turn has
    no place for it. ``""`` otherwise (no parse)."""
    tail, req = gp.rstrip(_WS), setup.request
    if req.enable_thinking is False or (req.chat_template_kwargs or {}).get("enable_thinking") is False:
        return ""      # (thinking asked off while the model reasons: the setting of step 2)
    if not r_start or getattr(req.reasoning_format, "value", "") == "none" or tail.endswith(r_start) \
            or any(e and tail.endswith(e) for e in r_ends):
        return ""
    at = out.find(r_start)
    lead = out[:at].strip(_WS) if at > 0 else ""
    if not lead or MARKUP.search(lead) or _SPECIAL_SHAPE.search(lead) or any(e and e in lead for e in r_ends):
        return ""
    return f"the output writes {_q(lead, 30)} before the reasoning opener {_q(r_start)}; the generation prompt opens " \
        "no reasoning, so the turn starts with the reasoning block the model writes, and the format has no place " \
        "for text before it (the reasoning setting matches: the model does open the block)"


def _closed_call_block_in_reasoning(out: str, reasoning: str, msg: dict[str, Any], ctx: dict[str, Any],
                                    r_ends: list[str]) -> str:
    """Evidence when the parse ends inside the reasoning, the output never writes a reasoning closer, and the
    reasoning holds a call opener that the format also ends the reasoning with (DeepSeek V4's
    ``<｜DSML｜tool_calls>``) followed by its own closing tag, the output ending right after that block: the block is
    complete, so the output was not cut — the model wrote its call before closing the reasoning (a parse ends the
    reasoning there only when tools are declared). ``""`` otherwise."""
    closers = [e for e in r_ends if e and e not in ctx["markers"]]
    if msg.get("tool_calls") or not reasoning or not closers or any(e in out for e in closers):
        return ""
    for m in ctx["markers"]:
        if not (m in r_ends and m in reasoning and re.fullmatch(r"<[^<>/\s][^<>\s]{0,60}>", m)):
            continue
        pair = "</" + m[1:]
        if out.rstrip(_WS).endswith(pair) and out.find(pair) > out.find(m):
            return (f"the reasoning holds {_q(m)} … {_q(pair)}, a complete call block, and the output ends right "
                    f"after it: it was not cut — the model wrote its call before closing the reasoning with "
                    f"{_q(closers[0])}" + ("" if ctx["names"] else
                                            " (the request declares no tools, so the parse does not end the "
                                            "reasoning at the block)"))
    return ""


def _call_before_reasoning_end(out: str, reasoning: str, msg: dict[str, Any], ctx: dict[str, Any],
                               r_ends: list[str]) -> str:
    """Evidence when the reasoning the parse read holds the template's call opener with a requested tool's name
    after it, and the output's reasoning closer comes only after that call (``…<tool_call>{…}</tool_call></think>``):
    the model called the tool before closing the reasoning — the call sits inside the block, not cut. ``""``
    otherwise."""
    if msg.get("tool_calls") or not reasoning or not r_ends:
        return ""
    for m in ctx["markers"]:
        at = out.find(m) if m and m in reasoning else -1
        if at < 0 or not any(n and n in out[at:at + 400] for n in ctx["names"]):
            continue
        end = next((e for e in r_ends if e and e not in ctx["markers"] and out.find(e, at) > at), "")
        if end:
            return (f"the reasoning holds {_q(m)} and a call of a requested tool, and the output closes the "
                    f"reasoning with {_q(end)} only after it: the model called the tool before closing the "
                    "reasoning — the call sits inside the block, where the format reads none")
    return ""


def _inserted_piece(e: Edit) -> str:
    """The text a replacement puts inside what the model wrote, when the template's marker is the model's with
    one piece added (``<tool_calls>`` → ``<｜DSML｜tool_calls>``: ``｜DSML｜``); ``""`` otherwise."""
    if e.kind != "replace" or not e.old.strip(_WS) or len(e.new) <= len(e.old):
        return ""
    i = 0
    while i < len(e.old) and e.old[i] == e.new[i]:
        i += 1
    piece = e.new[i:i + len(e.new) - len(e.old)]
    return piece if i > 0 and e.new == e.old[:i] + piece + e.old[i:] and piece.strip(_WS) else ""


def _deleted_tag_pair(edits: list[Edit], setup: _Setup, msg: dict[str, Any], near: tuple[list[Edit], _Parsed]
                      ) -> tuple[str, str] | None:
    """The nearest output only deletes a tag pair (``<arguments>`` … ``</arguments>``) that the template's render of
    a call never writes: a wrapper inside the call around the template's own markup. ``(opener, evidence)`` or
    None."""
    if len(edits) != 2 or any(e.kind != "delete" for e in edits):
        return None
    a, b = sorted(_shift(edits), key=lambda e: e.pos)
    m = re.fullmatch(r"<([A-Za-z_][\w:\-]{0,40})(?:\s[^<>]{0,200})?>", a.old.strip(_WS))
    if not m or b.old.strip(_WS) != f"</{m.group(1)}>":
        return None
    calls = near[1].message.tool_calls
    name = getattr(calls[0], "name", "") if calls else ""
    render = _rendered_call(setup, name, {}) if name else ""
    if not render or f"<{m.group(1)}" in render:
        return None
    return a.old.strip(_WS), (f"the model writes {_q(a.old.strip(_WS))} … {_q(b.old.strip(_WS))} inside the call, a "
                              f"tag pair the template's render of a call of {_q(name)} never writes: a wrapper "
                              "around the template's own markup (with both deleted the call is the template's)")


def _whitespace_only(e: Edit) -> bool:
    """The edit changes only whitespace (``<tool_call>`` for ``<tool_call>\\n``, a space deleted)."""
    return re.sub(r"\s+", "", e.old) == re.sub(r"\s+", "", e.new)


def _format_guess(text: str, out: str) -> tuple[Mistake, str] | None:
    """A cause read off the output's look (a JSON wrapper, ``<function>name</function>``). When a nearest output
    exists its edits are asked first: what they are is the model's mistake, found by construction."""
    if _WRAPPER_JSON.search(text):
        return Mistake.FOREIGN_WRAPPER, ("the call is wrapped in a structure the template never renders: "
                                         + _q(text.strip(_WS)[:30]))
    m = re.search(r"<function>[\w.\-]{1,64}</function>", out)
    if m:
        return Mistake.TEMPLATE_MODEL_MISMATCH, (f"the model names the function as {_q(m.group(0))}, a syntax the "
                                                 "template never renders")
    return None


_JSON_CALL_NAME = re.compile(r'\{\s{0,40}"name"\s{0,8}:\s{0,8}"([^"\\\n]{1,64})"\s{0,8},\s{0,40}"('
                             + "|".join(_KEY_ALIASES) + r')"\s{0,8}:')


def _json_call_name(text: str) -> str | None:
    """The name of the first ``{"name": "…", "arguments"|"parameters"|…: …`` object in ``text``, or None."""
    m = _JSON_CALL_NAME.search(text)
    return m.group(1) if m else None


def _call_like(out: str, names: list[str]) -> bool:
    """Whether ``out`` holds text that may be a call: a JSON ``{"name": …`` object, a marker-like token, or a
    declared tool's name followed by what opens arguments (``(``, ``{``, ``"``, ``:``, ``>``, ``=``)."""
    if _JSON_CALL_START.search(out) or _TOKEN.search(out):
        return True
    for n in names:
        at = out.find(n)
        while at >= 0:
            nxt = out[at + len(n):at + len(n) + 8].lstrip(_WS)
            if nxt[:1] in ("(", "{", '"', ":", ">", "="):
                return True
            at = out.find(n, at + 1)
    return False


_NAMING_TAG = re.compile(r"<([A-Za-z_][\w\-]{0,40})(?:=|\s{1,4}name=\"?)([A-Za-z_][\w.\-]{0,64})")


def _foreign_to_unfound_format(setup: _Setup, out: str, ctx: dict[str, Any]) -> str:
    """Evidence that a JSON call in ``out`` is another family's format although the analysis did not find the
    template's: the template's source writes special-shaped control tokens near ``tool_calls``, the output
    holds none of them, and improved fidelity (whose analysis finds more formats, with every repair on) reads no
    call either — so the analysis gap is not what keeps the call unread. ``""`` when that does not hold."""
    if len(out) > TRIAGE_CHARS // 8:
        return ""       # one more parse: bounded input
    name, how = _json_call_name(out), "as a JSON object"
    if name is None:
        # (or in tags naming a declared tool, `<function=get_weather>`: another family's XML call)
        tag = next((m for m in itertools.islice(_NAMING_TAG.finditer(out), 16) if m.group(2) in ctx["names"]), None)
        if tag is None:
            return ""
        name, how = tag.group(2), f"in tags ({_q(tag.group(0))})"
    src = getattr(setup.template, "source", "") or ""
    at = max(src.find("tool_calls"), 0)     # (a template that renders no calls may still describe its format)
    tokens = list(dict.fromkeys(m.group(0) for m in _SPECIAL_SHAPE.finditer(src, at) if "tool" in m.group(0)))
    if not tokens or any(t in out for t in tokens):
        return ""
    try:
        tolerance = TOLERANCE_REPAIRS
        p = _parse(setup, out, repairs=tolerance)
    except Exception:  # noqa: BLE001 - improved may not build: no evidence either way
        return ""
    if p.message.tool_calls:
        return ""
    return (f"the output writes the call {how} naming {_q(name)}; the template's source writes "
            f"{', '.join(_q(t) for t in tokens[:3])} for its calls, none of which the output holds, and at "
            "improved fidelity (every repair on) the call is still not read: the model writes another family's "
            "format, whatever the analysis found")


_STUB_NAME = "explain_stub_tool"


def _markup_words(text: str) -> list[str]:
    """The words of ``text``'s markup: those of each short stretch (at most 40 characters) between two control
    tokens, where a header, a channel or a recipient is written — prose between tokens is longer."""
    parts = _SPECIAL_SHAPE.split(text)
    return [w for p in parts[1:-1] if len(p) <= 40 for w in re.findall(r"[A-Za-z_]{3,40}", p)][:64]


def _call_markup_without_tools(setup: _Setup, ex: Any) -> str:
    """Evidence when the request offers no tools, the parse is clean and reads no call, and the output ends with a
    JSON object the parse does not return as the answer, right after the control token the template writes before
    a call's arguments, in a stretch of markup holding words only the template's render of a call writes
    (gpt-oss's ``<|channel|>commentary to=read_file <|constrain|>json<|message|>{…}``: ``commentary``, ``json``,
    never in a reply's render) — a call in the template's call markup, written for a request that sent no tools.
    ``""`` otherwise (two renders)."""
    req = setup.request
    out = ex.output
    if (req.tools and getattr(req.tool_choice, "value", req.tool_choice) != "none") or not ex.clean \
            or len(out) > TRIAGE_CHARS // 8:
        return ""
    toks = list(_SPECIAL_SHAPE.finditer(out))
    if len(toks) < 2:
        return ""
    last = toks[-1]
    try:
        obj, end = json.JSONDecoder().raw_decode(out, last.end())
    except ValueError:
        return ""
    if not isinstance(obj, dict) or out[end:].strip(_WS) \
            or out[last.end():end].strip(_WS) in (ex.message.get("content") or ""):
        return ""     # (a JSON object the parse returns as the answer is one: a structured final reply)
    call = _rendered_call(setup, _STUB_NAME, {})
    try:
        reply = apply_template(setup.template, [{"role": "user", "content": "hi"},
                                                {"role": "assistant", "content": "ANSWER7"}], None)
    except Exception:  # noqa: BLE001 - a template that renders no reply gives no comparison
        return ""
    at = call.find(_STUB_NAME)
    args = call.find("{}", max(at, 0))
    if at < 0 or args < 0:
        return ""
    before = [m.group(0) for m in _SPECIAL_SHAPE.finditer(call[:args])]
    if not before or before[-1] != last.group(0) or out[last.end():last.end() + 1] != "{":
        return ""
    lead = _SPECIAL_SHAPE.split(call[:at])[-1].strip(_WS)
    if not lead or lead in out:
        # (the text the template writes right before the tool's name, written so: the template's own call, which a
        # request with the tool may read — not this reading)
        return ""
    own = set(_markup_words(call.replace(_STUB_NAME, " "))) - set(re.findall(r"[A-Za-z_]{3,40}", reply))
    written = [w for w in dict.fromkeys(_markup_words(out[:last.end()] + "{")) if w in own]
    if not written:
        return ""
    why = "has no tools" if not req.tools else "has tool_choice none"
    return (f"the output ends with a call in the template's call markup — {', '.join(_q(w) for w in written[:3])}, "
            f"words only the template's render of a call writes, then {_q(last.group(0))} and a JSON object, as it "
            f"writes a call's arguments, but not {_q(lead)} before the tool's name — and the request {why}, so the "
            "parser reads no call")


def _unsent_tool_call(setup: _Setup, out: str, text: str
                      ) -> tuple[dict[str, Any], dict[str, Any], int, str] | None:
    """A JSON call object in ``text`` while the request offers no tools (none, or ``tool_choice`` none) that
    parses as a call once its tool is offered: at this fidelity, else with the tolerance repairs that read it
    (each alone first). ``(change, message, cost, evidence)`` of that request edit, or None."""
    req = setup.request
    if req.tools and getattr(req.tool_choice, "value", req.tool_choice) != "none":
        return None
    name = _json_call_name(text) if len(out) <= TRIAGE_CHARS // 8 else None   # up to four parses: bounded
    if name is None:
        return None
    change: dict[str, Any] = {"tools": list(req.tools or []) + [tool_stub(name)], "tool_choice": "auto"}
    req2 = apply_request_change(req, change)
    why = "has no tools" if not req.tools else "has tool_choice none"
    ev = (f"the output holds a JSON call of {_q(name)} and the request {why}, so the parser reads no calls; "
          f"with a tool {_q(name)} offered the output parses into a call")
    try:
        p = _parse(setup, out, request=req2)
        if p.clean and p.message.tool_calls:
            return {"request": change}, p.message.to_openai(), 2, ev
        tolerance = TOLERANCE_REPAIRS
        p = _parse(setup, out, repairs=tolerance, request=req2)
        if not (p.clean and p.message.tool_calls):
            return None
        fired = _fired(p.message, tolerance)
        if not fired:
            return ({"request": change, "fidelity": "improved"}, p.message.to_openai(), 3,
                    ev + " at improved fidelity (its parser improvements read the syntax; no repair fires)")
        for n in fired[:2]:
            one = _parse(setup, out, repairs=(n,), request=req2)
            if one.clean and len(one.message.tool_calls) >= len(p.message.tool_calls):
                return ({"request": change, "repairs": [n]}, one.message.to_openai(), 3,
                        ev + f" once the repair {_q(n)} reads its syntax, which the template's analysis does not give")
        return ({"request": change, "repairs": fired}, p.message.to_openai(), 2 + len(fired),
                ev + " once the repairs " + ", ".join(_q(n) for n in fired) + " read its syntax")
    except Exception:  # noqa: BLE001 - a request that does not build gives no evidence
        return None


def _stripped_tokens(ins: list[Edit], setup: _Setup, out: str) -> str:
    """Evidence that what the nearest output puts back inside a call is control tokens a decoder dropped: every
    insertion is one token of special shape (``[ARGS]``, ``<|…|>``) that the template writes, and the output still
    holds another of the template's control tokens (so the model did write the format's tokens; a decoder that
    skips special tokens keeps the ones its tokenizer does not mark special, as vLLM's Mistral tokenizer keeps
    ``[TOOL_CALLS]``). ``""`` when not so."""
    toks = [e.new.strip(_WS) for e in ins if e.new.strip(_WS)]
    src = getattr(setup.template, "source", "") or ""
    if not toks or not all(_SPECIAL_SHAPE.fullmatch(t) and t in src for t in toks):
        return ""
    kept = [m.group(0) for m in _SPECIAL_SHAPE.finditer(out) if m.group(0) not in toks and m.group(0) in src]
    if not kept:
        return ""
    return (f"{', '.join(_q(t) for t in dict.fromkeys(toks))} is a control token of the template and the output keeps "
            f"{_q(kept[0])}, another one: the model wrote the format, and a decoder that skips special tokens "
            "(skip_special_tokens) dropped the one its tokenizer marks special")


def _ends_at_opener(out: str, ctx: dict[str, Any]) -> str:
    """The call opener (or the last control token of one) that the output ends with, nothing after it; ``""``
    when it does not end so. A server cut there leaves an empty call the parse may swallow silently."""
    tail = out.rstrip(_WS)
    if not tail:
        return ""
    for m in dict.fromkeys(x.strip(_WS) for x in ctx["markers"] if x and x.strip(_WS)):
        if tail.endswith(m):
            return m
        last = [t.group(0) for t in _TOKEN.finditer(m)]
        if last and m.endswith(last[-1]) and _SPECIAL_SHAPE.fullmatch(last[-1]) and tail.endswith(last[-1]) \
                and tail.count(last[-1]) == 1 and _same_token_head(m[:-len(last[-1])], tail[:-len(last[-1])]):
            return last[-1]
    return ""


def _ends_inside_opener(out: str, msg: dict[str, Any], ctx: dict[str, Any]) -> tuple[str, str] | None:
    """``(piece, opener)`` when the output ends with a proper beginning of a call opener of the format (at least
    three characters, markup: not a word alone) that the message does not keep: a cut in the middle of the
    opener, which the parse holds back. None otherwise."""
    if msg.get("tool_calls"):
        return None
    kept = (msg.get("content") or "") + (msg.get("reasoning_content") or "")
    for m in dict.fromkeys(x.strip(_WS) for x in ctx["markers"] if x and x.strip(_WS)):
        for k in range(len(m) - 1, 2, -1):
            piece = m[:k]
            if out.endswith(piece) and not piece.isalnum() and not kept.rstrip(_WS).endswith(piece.rstrip(_WS)):
                return piece, m
    return None


def _text_after_read_calls(ex: Any, out: str, msg: dict[str, Any], ctx: dict[str, Any]) -> str:
    """Evidence when the parse read the output's calls and stopped right after the last one's closer (one of the
    format's own closers) at plain text — no markup after it, none of the format's call markers —: text after a
    complete call, where the format ends the turn, not a call of another format. ``""`` otherwise."""
    st = ex.stop
    if st is None or ex.clean or not msg.get("tool_calls"):
        return ""
    rest = out[st.output_pos:]
    text = rest.strip(_WS)
    head = out[:st.output_pos].rstrip(_WS)
    closers = [c.strip(_WS) for c in ctx["closers"] if c and c.strip(_WS)]
    if not text or MARKUP.search(text) or _SPECIAL_SHAPE.search(text) \
            or any(m.strip(_WS) and m.strip(_WS) in text for m in ctx["markers"]) \
            or not any(head.endswith(c) for c in closers):
        return ""
    return (f"after the call's closer the output writes {_q(text, 30)}: text after a complete call, where the format, "
            f"as requested, ends the turn (the parse read {len(msg['tool_calls'])} call(s) in the template's own "
            "markup, so no other format)")


def _call_block_after_turn_end(ex: Any, out: str, msg: dict[str, Any], ctx: dict[str, Any]) -> str:
    """Evidence when the parse read the output's calls and stopped where it wants the end of the output, at one of
    the template's own call markers (the call section opened again after its closer): markup after the turn's end,
    in the template's own format — no other format. ``""`` otherwise."""
    st = ex.stop
    if st is None or ex.clean or not msg.get("tool_calls") or st.literals or st.path \
            or "the end of the output" not in st.expected:
        return ""
    rest = out[st.output_pos:].lstrip(_WS)
    own = [m.strip(_WS) for m in set(ctx["markers"]) | ctx["all_markers"] if m and m.strip(_WS)]
    first = next((m for m in sorted(own, key=len, reverse=True) if rest.startswith(m)), "")
    if not first or not any(out[:st.output_pos].rstrip(_WS).endswith(c.strip(_WS)) for c in ctx["closers"]
                            if c and c.strip(_WS)):
        return ""
    return (f"after the complete call block the output opens the template's own call markup again with {_q(first)}, "
            "where the format ends the turn after its call block: markup after the turn's end in the template's own "
            "format (no other format)")


def _text_between_calls(out: str, msg: dict[str, Any], ctx: dict[str, Any], setup: _Setup | None = None,
                        stop: int = -1) -> str:
    """Evidence when the output writes the format's own call blocks (its opener … its closer) more than once with
    text between a closer and the next opener, and the parse read fewer calls than it wrote: the format, as
    requested, reads nothing but another call after a call, so the text between loses every later call. With
    ``setup``, whitespace or a marker of the format's own between them counts too when the template's render of two
    calls writes something else there (:func:`_rendered_gap`) and the parse stopped (``stop``) right there. ``""``
    otherwise (one linear scan per opener)."""
    closers = [c for c in ctx["closers"] if c]
    for o in dict.fromkeys(m.strip(_WS) for m in ctx["markers"] if m and m.strip(_WS)):
        starts = [m.start() for m in re.finditer(re.escape(o), out[:_SHAPE_CHARS])]
        if len(starts) < 2 or len(msg.get("tool_calls") or []) >= len(starts):
            continue
        written = out.count(o)      # the output's count, not the scanned window's (one linear count)
        for i, j in zip(starts, starts[1:]):
            ends = [out.find(c, i + len(o), j) for c in closers]
            end = max((e + len(c) for e, c in zip(ends, closers) if e >= 0), default=-1)
            raw = out[end:j] if end >= 0 else ""
            text = raw.strip(_WS)
            if text and not _SPECIAL_SHAPE.search(text):
                return (f"after a call's closer the output writes {_q(text, 30)} and then {_q(o)} again: text "
                        "between two calls, where the format, as requested, reads nothing but another call after "
                        f"a call — the output writes {written} call blocks and the parse reads "
                        f"{len(msg.get('tool_calls') or [])}")
            prev, gap = _rendered_gap(setup, o, ctx) if setup is not None else ("", "")
            at = out.rfind(prev, i + len(o), j) if prev else -1
            raw = out[at + len(prev):j] if at >= 0 else ""
            text = raw.strip(_WS)
            if prev and raw and raw != gap and stop == at + len(prev) and ((not text and not gap)
                                                or text in ctx["all_markers"] | set(ctx["markers"])):
                # whitespace where the template's render of two calls writes nothing between them (other
                # whitespace where it writes some is a slip of the layout), or a marker of the format's own (its
                # section opener written again)
                return (f"after a call's closer the output writes {_q(raw, 30)} and then {_q(o)} again, where the "
                        f"template's render of two calls writes {_q(gap) if gap else 'nothing'} between them: text "
                        "between two calls, which the format, as requested, does not read — the output writes "
                        f"{written} call blocks and the parse reads {len(msg.get('tool_calls') or [])}")
    return ""


def _rendered_gap(setup: _Setup, opener: str, ctx: dict[str, Any]) -> tuple[str, str]:
    """The marker the template's own render of a turn with two calls writes last before the second call's
    ``opener`` (a control token or tag) and what it writes between the two, or ``("", "")`` when that render or
    marker is not found (one render, cached)."""
    key = ("rendered_gap", opener)
    if key not in ctx:
        ctx[key] = ("", "")
        name = ctx["names"][0] if ctx["names"] else ""
        render = _rendered_call(setup, name, {}, copies=2) if name else ""
        second = render.find(opener, render.find(opener) + len(opener)) if opener in render else -1
        marks = list(_SPECIAL_SHAPE.finditer(render, 0, second)) + list(_TAG.finditer(render, 0, second)) \
            if second > 0 else []
        last = max(marks, key=lambda m: m.end(), default=None)
        if last is not None and not render[last.end():second].strip(_WS):
            ctx[key] = (last.group(0), render[last.end():second])
    return ctx[key]


def _written_before_arguments(setup: _Setup, ctx: dict[str, Any], token: str) -> bool:
    """Whether the template's own render of a call of the first requested tool writes ``token`` before the
    argument's value (one render, cached): markup that begins a call or its arguments, not one that ends it."""
    if "call_head" not in ctx:
        name = ctx["names"][0] if ctx["names"] else ""
        render = _rendered_call(setup, name, {"a": "V0"}) if name else ""
        v = render.find("V0")
        ctx["call_head"] = render[:v] if v >= 0 else ""
    return bool(token) and token in ctx["call_head"]


def _declared_params(req: Any) -> dict[str, set[str]]:
    """Each offered tool's declared parameter names (an untrusted schema yields what it holds)."""
    out: dict[str, set[str]] = {}
    for t in getattr(req, "tools", None) or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = set(properties_of(fn.get("parameters")))
    return out


def _arguments_markup_replaced(setup: _Setup, ex: Any, out: str) -> str:
    """Evidence when the parse read the template's own call markup up to the arguments and stopped there, where it
    wanted the template's argument marker (no JSON), at a JSON object whose keys are all declared parameters of the
    tool named before it: the call's head is the template's, only its argument markers are replaced by a JSON body
    — the omission of that piece, not another format. ``""`` otherwise (one JSON decode)."""
    st = ex.stop
    if st is None or ex.clean or not st.literals or any(x.lstrip(_WS)[:1] in '{"[' for x in st.literals) \
            or not any("tool" in p for p in st.path):
        return ""
    at = st.output_pos + len(out[st.output_pos:]) - len(out[st.output_pos:].lstrip(_WS))
    if not out.startswith("{", at):
        return ""
    try:
        obj, _end = json.JSONDecoder().raw_decode(out, at)
    except ValueError:
        return ""
    params = _declared_params(setup.request)
    head = out[max(0, at - 200):at]
    named = [n for n in params if n and n in head]
    if not isinstance(obj, dict) or not obj or not named:
        return ""
    name = max(named, key=head.rfind)
    if not set(obj) <= params[name]:
        return ""
    return (f"the output writes the template's own call markup up to {_q(name)}, then its arguments as a JSON "
            f"object ({_q(out[at:_end], 50)}) where the template writes {_q(st.literals[0])}: the call's argument "
            "markers replaced by another string (their omission; the call's head is the template's, so no other "
            "format)")


def _json_body_in_markup(setup: _Setup, out: str, msg: dict[str, Any], ctx: dict[str, Any], start: int,
                         where: str = "inside the call markup") -> str:
    """Evidence when the unread output (from ``start``) holds a JSON object standing for a call — a call object
    (``{"name": <offered tool>, "arguments": {…}}``) or the arguments of the tool named just before it (every key
    a declared parameter) — while the template's own render of that very call writes none of its keys as JSON
    keys: the model wrote the call in a JSON dialect inside markup whose format is not JSON (a JSON list inside
    LFM2's pythonic markers, a JSON body in GLM's ``<tool_call>`` or in a DSML invoke). ``""`` otherwise (at most
    :data:`_SHAPE_SCAN` objects decoded, each a linear scan)."""
    params = _declared_params(setup.request)
    if not params or start < 0:
        return ""
    dec = json.JSONDecoder()
    at, tried = out.find("{", start), 0
    while at >= 0 and tried < _SHAPE_SCAN and at < _SHAPE_CHARS:
        tried += 1
        try:
            obj, end = dec.raw_decode(out, at)
        except ValueError:
            at = out.find("{", at + 1)
            continue
        name, args, what = "", None, ""
        if isinstance(obj, dict):
            called = obj.get("name")
            body = next((obj[k] for k in _KEY_ALIASES if isinstance(obj.get(k), dict)), None)
            if isinstance(called, str) and called in params and body is not None:
                name, args, what = called, body, "a JSON call object"
            elif obj and all(isinstance(k, str) for k in obj):
                before = out[max(0, at - 200):at]
                named = [n for n in params if n and n in before and set(obj) <= params[n]]
                if named:
                    name, args = max(named, key=before.rfind), obj
                    what = f"the arguments of {_q(name)} as a JSON object"
        if name and isinstance(args, dict) and args:
            render = _rendered_call(setup, name, args)
            keys = [k for k in args if isinstance(k, str)]
            if render and not any(re.search(r'"' + re.escape(k) + r'"\s{0,8}:', render) for k in keys) \
                    and not re.search(r'"name"\s{0,8}:', render):
                return (f"the output writes {what} ({_q(out[at:end], 50)}) {where}, where the "
                        f"template's own render of that call writes no JSON keys ({_q(render.strip(_WS), 60)}): "
                        "a call format of another dialect (a JSON body), which the template never renders")
        at = out.find("{", end if name else at + 1)
    return ""


def _token_head(text: str) -> str:
    """The control token the text ends with and the word after it (``<|open|>tools`` of ``…<|open|>tools``);
    ``""`` when the text does not end so."""
    toks = list(_SPECIAL_SHAPE.finditer(text[-80:]))
    if not toks:
        return ""
    seg = text[-80:][toks[-1].start():]
    return seg if not any(c in _WS for c in seg) else ""


def _same_token_head(marker_head: str, out_head: str) -> bool:
    """A shared last control token opens a call only when the output writes it after the marker's own head: a
    closer token followed by another word (``<|close|>message<|sep|>`` where the opener is
    ``<|open|>tools<|sep|>``) ends something else."""
    m, o = _token_head(marker_head), _token_head(out_head)
    return not (m and o and m != o)


_STRIPPED_CHARS = 16 * 1024     # outputs longer than this are not rendered against (one render per check)
_PLACEHOLDER = "\x00V{}\x00"


def _special_tokens(bundle: Any) -> list[str]:
    """The parser's preserved tokens (those a server must keep in the decoded text), reasoning markers aside."""
    r_start, r_ends = reasoning_markers(bundle)
    skip = {x.strip(_WS) for x in [r_start] + r_ends if x}
    return [t for t in dict.fromkeys(getattr(getattr(bundle, "parser", None), "preserved_tokens", None) or [])
            if isinstance(t, str) and t.strip(_WS) and t.strip(_WS) not in skip]


_SEPARATOR = re.compile(r"[,;|]")


def _learned_separator(setup: _Setup, edits: list[Edit], out: str, ctx: dict[str, Any]) -> str:
    """Evidence when the nearest output only inserts a separator (``,`` ``;`` ``|``) between two JSON call objects
    and the template's own render of a turn with two calls writes only whitespace between them: the separator is
    what the analysis learned, not what the template writes — the output follows the template. ``""`` otherwise
    (one render)."""
    if len(edits) != 1 or edits[0].kind != "insert" or not _SEPARATOR.fullmatch(edits[0].new.strip(_WS)) \
            or len(out) > _STRIPPED_CHARS:
        return ""
    at = edits[0].pos
    if not out[:at].rstrip(_WS).endswith("}") or not out[at:].lstrip(_WS).startswith("{") or not ctx["names"]:
        return ""
    name = ctx["names"][0]
    render = _rendered_call(setup, name, {"a": "x"}, copies=2)
    first = render.find(name)
    second = render.find(name, first + len(name)) if first >= 0 else -1
    if second < 0:
        return ""
    gap = render[render.rfind("}", 0, second) + 1:render.rfind("{", 0, second)] if "}" in render[:second] else ""
    if gap.strip(_WS) or not gap:
        return ""
    return (f"the output writes its calls as the template's render of two calls does, {_q(gap)} between the JSON "
            f"objects, while the analysis learned {_q(edits[0].new.strip(_WS))} between calls: a separator the "
            "template does not write — a gap of the analysis, not a slip of the model")








_FILL = "zqv{}x"      # an argument value no template writes, so the render can be cut at it
_NUMBER_FILL = "97531{}"
_PROBE_KEY = "zqk0x"


def _ends_with_whole_call(setup: _Setup, bundle: Any, ex: Any, ctx: dict[str, Any]) -> bool:
    """Whether the output ends with the last of the template's call pieces it writes, a piece past the call's
    opening one, and leaves no more of the render's closing pieces absent than of its opening ones: the call the
    model wrote is whole, so where the parse ran out (in the reasoning the prompt opened, say) nothing was cut."""
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or not rel.matched or rel.foreign:
        return False
    order = [i for i, x in enumerate(rel.pieces) if x in rel.matched]
    last, first = max(order), min(order)
    if last == 0 or not ex.output.rstrip(_WS).endswith(rel.pieces[last].strip(_WS)):
        return False
    return len(rel.pieces) - 1 - last <= first


def _call_relation(setup: _Setup, bundle: Any, ex: Any, ctx: dict[str, Any]) -> CallRelation | None:
    """The relation between the template's call markup and the output's (:mod:`core.explain.call_relation`):
    the call rendered with the tool the output names (else the request's first tool) and the argument keys of it
    the output writes (a number-typed one with a number), against the same turn without a call; the turn with
    reasoning adds the markup the template writes. When the output writes no declared key, the call is also
    rendered with one argument: its relation stands when it places every piece where the one without arguments
    does not (arguments the schema does not declare). At most five renders, once per triage (cached in ``ctx``);
    None without tools, for an output over the relation's bound, or when the template renders no call."""
    if "call_relation" in ctx:
        return ctx["call_relation"]
    ctx["call_relation"] = None
    out = ex.output
    names = ctx["names"]
    if not names or len(out) > MAX_OUTPUT:
        return None
    at = {n: out.find(n) for n in names if n and n in out}
    name = min(at, key=lambda n: (at[n], -len(n))) if at else names[0]
    tool = next((t.get("function") or {} for t in setup.request.tools or []
                 if isinstance(t, dict) and (t.get("function") or {}).get("name") == name), {})
    props = list(properties_of(tool.get("parameters")))[:16]
    keys = [k for k in props if k and k in out][:4]
    kinds = {k: ((tool.get("parameters") or {}).get("properties") or {}).get(k) for k in keys}
    # (a number is rendered as one: a template writes a string's quotes or delimiters around strings only)
    args: dict[str, Any] = {k: (int(_NUMBER_FILL.format(i)) if isinstance(kinds[k], dict)
                                and kinds[k].get("type") in ("integer", "number") else _FILL.format(i))
                            for i, k in enumerate(keys)}
    tries = [args] + ([{_PROBE_KEY: _FILL.format(0)}] if not keys else [])
    r_start, r_ends = reasoning_markers(bundle)
    found = Cause.NO_TOOL_FORMAT not in {f.cause for f in ex.findings}
    best: CallRelation | None = None
    for kw in tries:
        with_call, without, reasoned = _rendered_turns(setup, name, kw)
        if not with_call or without is None:
            return None
        call = call_pieces(with_call, without, {name: "name", **{k: "key" for k in kw},
                                                **{str(v): "value" for v in kw.values()}, "call_1": "id",
                                                "123456789": "id"})
        # (markup the template's source spells out is its own too: a tool result's tokens, a turn not rendered here)
        rendered = frozenset(m.group(0) for text in (with_call, without, reasoned, ex.generation_prompt, r_start,
                                                     *r_ends, _src(setup)[:MAX_OUTPUT]) for m in MARKUP.finditer(text))
        rel = relate(call, out, format_found=found, rendered=rendered,
                     stop=ex.stop.output_pos if ex.stop is not None else -1, names=frozenset(names))
        if best is None or (rel.relation != Relation.ALTERED and not rel.absent
                            and best.relation == Relation.ALTERED):
            best = rel
    ctx["call_relation"] = best
    return best


def _decoder_spaced(setup: _Setup, bundle: Any, out: str, ctx: dict[str, Any], budget: _Budget
                    ) -> tuple[str, str] | None:
    """The output as the model wrote it when a decoder joined the special tokens with spaces (vLLM's
    ``spaces_between_special_tokens``): every one of at least two of the template's special tokens inside the
    output has a space on each side (one space between two adjacent tokens), where the template's render of a call
    writes them with none. The spaces next to the tokens are deleted; a reasoning marker that encloses the output
    and has no such space (not decoded with the rest: a client's wrapper around the reasoning) stays, or — the
    closing one — is left out when only then the output parses. ``(restored output, evidence)`` once it parses
    clean with calls, else None; one render and at most two parses, outputs up to 16 KiB."""
    r_start, r_ends = reasoning_markers(bundle)
    toks = sorted({t.strip(_WS) for t in getattr(getattr(bundle, "parser", None), "preserved_tokens", None) or []
                   if isinstance(t, str) and t.strip(_WS)} | {x for x in [r_start] + r_ends if x}, key=len,
                  reverse=True)
    names = [n for n in ctx["names"] if n and n in out]
    if not toks or not names or len(out) > _STRIPPED_CHARS or " " not in out:
        return None
    head = r_start if r_start and out.startswith(r_start) else ""
    tail = next((e for e in r_ends if out.endswith(e) and len(out) - len(e) >= len(head)), "")
    core = out[len(head):len(out) - len(tail)]
    alt = "|".join(re.escape(t) for t in toks)
    occ = list(re.finditer(alt, core))
    if len(occ) < 2 or any((m.start() > 0 and core[m.start() - 1] != " ") or (m.end() < len(core)
                                                                               and core[m.end()] != " ")
                           for m in occ):
        return None
    render = _rendered_call(setup, names[0], {})
    spaced = {m.group(0) for m in occ}
    bare = [m.group(0) for m in re.finditer(alt, render) if m.group(0) in spaced
            and (render[m.start() - 1:m.start()] not in (" ", "") or render[m.end():m.end() + 1] not in (" ", ""))]
    if not bare:
        return None      # the template itself writes its tokens between spaces: nothing to tell
    fixed = re.sub(" ?(" + alt + ") ?", r"\1", core)
    for restored in dict.fromkeys((head + fixed + tail, head + fixed)):
        if _accepted_parse(setup, restored, budget, ctx) is None:
            continue
        shown = [m.group(0) for m in occ[:3]]
        ev = (f"every one of the {len(occ)} special tokens inside the output has a space on each side "
              f"({', '.join(_q(' ' + t + ' ') for t in shown)}), where the template's render of a call writes "
              f"{_q(bare[0])} with none: the decoder joined the special tokens with spaces (vLLM's "
              "spaces_between_special_tokens, on by default) — with those spaces deleted the output parses into the "
              "call")
        if tail and not restored.endswith(tail):
            ev += (f"; the closing {_q(tail)} after the calls has no such space — it was not decoded with the rest "
                   "(a client's wrapper around the reasoning) and is left out")
        return restored, ev
    return None


def _glued_token_words(setup: _Setup, bundle: Any, out: str, ctx: dict[str, Any]) -> str:
    """Evidence that some control tokens were dropped from the decoded text: the output keeps some of the
    template's special tokens, but writes two words glued (``toolscall``) that the template's render of a call
    writes each right after a special token (``<|open|>tools<|sep|><|open|>call``). ``""`` otherwise."""
    toks = [t for t in _special_tokens(bundle) if _SPECIAL_SHAPE.fullmatch(t.strip(_WS))]
    names = [n for n in ctx["names"] if n and n in out]
    if not toks or not names or len(out) > _STRIPPED_CHARS or not any(t in out for t in toks):
        return ""
    render = _rendered_call(setup, names[0], {})
    if not render:
        return ""
    alt = "|".join(re.escape(t) for t in toks)
    pairs = re.finditer(f"(?<![A-Za-z_])([A-Za-z_]{{2,24}})((?:{alt}|\\s){{1,8}})(?=([A-Za-z_]{{2,24}})(?![A-Za-z_]))",
                        render)
    for m in pairs:
        w1, gap, w2 = m.group(1), m.group(2), m.group(3)
        glued = w1 + w2
        if any(t in gap for t in toks) and glued in out and glued not in render:
            return (f"the output writes {_q(glued)} where the template's call writes {_q(w1 + gap + w2, 60)}: the "
                    f"output keeps some of the template's special tokens ({_q(next(t for t in toks if t in out))}) "
                    "but lost the ones between those words — a decoder that skips special tokens dropped them")
    return ""


def _bare_call(setup: _Setup, bundle: Any, out: str, ctx: dict[str, Any]) -> tuple[str, str] | None:
    """The output is the template's call of a requested tool with every special token removed (MiniCPM5's
    ``<function name=…><param name=…>`` leaving `` name="get_weather"> name="city">Paris``): the template's render
    of that call (each argument a placeholder), its special tokens taken out, matches the whole output. Returns
    ``(the output with the tokens put back, evidence)`` or None."""
    toks = _special_tokens(bundle)
    names = [n for n in ctx["names"] if n and n in out]
    if not toks or not names or len(out) > _STRIPPED_CHARS or any(t.strip(_WS) in out for t in toks):
        return None
    name = names[0]
    tool = next((t.get("function") or {} for t in setup.request.tools or []
                 if isinstance(t, dict) and (t.get("function") or {}).get("name") == name), {})
    props = list(properties_of(tool.get("parameters")))[:8]
    required = [r for r in required_of(tool.get("parameters")) if r in props]
    tries = list(dict.fromkeys(tuple(x) for x in ([props, required] + [[p] for p in props[:2]] + [[]])))
    alt = "|".join(re.escape(t.strip(_WS)) for t in sorted(toks, key=len, reverse=True))
    for keys in tries[:4]:
        render = _rendered_call(setup, name, {k: _PLACEHOLDER.format(i) for i, k in enumerate(keys)})
        found = list(re.finditer(alt, render))
        if not render or not found:
            continue
        for call in _call_spans(render, found):
            bare = re.sub(alt, "", call)
            values = _fill(re.split("\x00V\\d\x00", bare.strip(_WS)), out.strip(_WS))
            if values is None or not bare.strip(_WS):
                continue
            if not re.search(alt, _inside_wrapper(call, alt)):
                # the tokens only wrap the call: a model that omitted the wrapper writes the same text, and nothing
                # inside the call shows a decoder at work — the omitted opener's reading (nearest edits) stands
                return None
            restored = call
            for i, v in enumerate(values):
                restored = restored.replace(_PLACEHOLDER.format(i), v)
            gone = [t.strip(_WS) for t in toks if t.strip(_WS) in call]
            return restored, (f"the output is the template's call of {_q(name)} with every special token taken out "
                              f"({', '.join(_q(t) for t in gone[:4])}): no marker of the format is left, only the "
                              "text between them — a decoder that skips special tokens (skip_special_tokens) "
                              "dropped them")
    return None


def _inside_wrapper(call: str, alt: str) -> str:
    """``call`` without the run of special tokens (``alt``) and whitespace it starts and ends with: the call's own
    text, where a token still found was written inside the call (MiniCPM5's ``<param``), not around it."""
    edge = re.compile(rf"(?:\s*(?:{alt}))+\s*")
    head = edge.match(call)
    body = call[head.end():] if head else call
    ends = [m for m in edge.finditer(body) if m.end() == len(body)]
    return body[:ends[0].start()] if ends else body


def _call_spans(render: str, found: list[Any]) -> list[str]:
    """The stretch of a rendered call turn that is the call: up to its last special token — as rendered, then
    trimmed to whole markup (from the start of the whitespace-free chunk holding the first token, which drops a
    reasoning closer the turn renders before it, to the end of the tag holding the last token, for a token
    written inside a tag such as DeepSeek-V3.2's ``</｜DSML｜function_calls>``)."""
    first = render[:found[-1].end()].strip(_WS)
    a = found[0].start()
    while a > 0 and render[a - 1] not in _WS:
        a -= 1
    b = found[-1].end()
    tail = re.compile(r"[^\s<]{0,60}").match(render, b)
    b = tail.end() if tail else b
    return list(dict.fromkeys((first, render[a:b].strip(_WS))))


# a sentence's end glued to the next one's start (`friendlier.1 + 1`): where a dropped token sat between them
_GLUE = re.compile(r"(?<=[a-z)\]\"'][.!?])(?=[A-Z0-9])")


def _marker_whitespace(setup: _Setup, bundle: Any, marker: str) -> tuple[str, str]:
    """The whitespace the template writes right before and right after the reasoning marker ``marker``: read off
    its render of an assistant turn with reasoning and an answer (Qwen3's ``\\n</think>\\n\\n``), else off the
    analysis's marker, which keeps it; ``("", "")`` when neither gives it."""
    from ..jinja.template import apply_template

    turn = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ANSWER7", "reasoning_content": "REASON7"}]
    try:
        render = apply_template(setup.template, turn, list(setup.request.tools or []) or None)
    except Exception:  # noqa: BLE001 - a template that does not render this turn: the analysis's marker below
        render = ""
    m = re.search(r"REASON7(\s*)" + re.escape(marker) + r"(\s*)ANSWER7", render)
    if m:
        return m.group(1), m.group(2)
    rep = getattr(bundle, "report", None)
    if rep is None or getattr(bundle, "format", "") != "peg-native":
        return "", ""
    r = rep.analysis.reasoning
    for raw in (r.end, r.start):
        if raw and raw.strip(_WS) == marker:
            i = raw.index(marker)
            return raw[:i], raw[i + len(marker):]
    return "", ""


_SEPARATORS = ("\n\n", "\n", " ")    # whitespace prose writes anyway: as a marker's place it must be the only one


def _stripped_places(out: str, before: str, after: str) -> list[int]:
    """Where a marker the template writes between ``before`` and ``after`` (whitespace) may have been dropped:
    each maximal whitespace run of the output equal to ``before + after`` (at the position the marker would
    take), or — when the template writes no whitespace there — each place where a sentence's end runs into the
    next with no space (:data:`_GLUE`). A run that prose writes anyway (a paragraph break) counts only when it is
    the output's only one. The last three, last first."""
    ws = before + after
    if not ws:
        return [m.start() for m in _GLUE.finditer(out)][-3:][::-1]
    runs = [m.start() + len(before) for m in re.finditer(r"(?<!\s)" + re.escape(ws) + r"(?!\s)", out)]
    if ws in _SEPARATORS and len(runs) != 1:
        return []
    return runs[-3:][::-1]


def _stripped_reasoning_closer(setup: _Setup, bundle: Any, out: str, r_start: str, r_ends: list[str]
                               ) -> tuple[str, str] | None:
    """The reasoning closer put back where a decoder dropped it: the generation prompt opened the reasoning, the
    output never closes it and holds none of the template's special tokens (so nothing tells a cut output from
    one whose tokens were all dropped), and at one of the last places where the output has exactly the whitespace
    the template writes around the closer (:func:`_stripped_places`: Qwen3's ``\\n`` before and ``\\n\\n`` after
    ``</think>``; none at all for DeepSeek-V3.2, where the reasoning's last sentence then runs into the answer)
    the closer put back makes the output parse clean into reasoning and an answer. Returns ``(the restored
    output, evidence)`` or None; at most three parses, only for outputs up to 16 KiB."""
    if len(out) > _STRIPPED_CHARS or any(t.strip(_WS) in out for t in _special_tokens(bundle)) \
            or r_start.strip(_WS) in out or any(e.strip(_WS) in out for e in r_ends if e.strip(_WS)):
        return None
    closer = r_ends[0].strip(_WS)
    before, after = _marker_whitespace(setup, bundle, closer)
    for at in _stripped_places(out, before, after):
        restored = out[:at] + closer + out[at:]
        try:
            p = _parse(setup, restored)
        except Exception:  # noqa: BLE001 - no parser, no evidence
            return None
        if p.clean and (p.message.reasoning_content or "").strip(_WS) and (p.message.content or "").strip(_WS):
            where = _q(out[max(0, at - len(before) - 12):at] + "|" + out[at:at + 12])
            how = (f"the output has exactly the whitespace the template writes around {_q(closer)} "
                   f"({_q(before + closer + after)}) and nothing between" if before + after else
                   "the reasoning's last sentence runs into the answer with no space")
            return restored, (f"the generation prompt opens the reasoning with {_q(r_start.strip(_WS))} and the output "
                              f"never closes it, holds none of the template's special tokens, and at {where} {how}: "
                              "a decoder that skips special tokens (skip_special_tokens) dropped "
                              f"{_q(closer)} there — put back, the output parses into reasoning and an answer")
    return None


def _plain_line_call(text: str, names: list[str]) -> str:
    """A declared tool's name alone on a line with text on the next line (its argument): a call written as
    plain lines, the form of no template's markup. The name line starts the text or a paragraph (or follows a line
    ending in ``:``), and the next line is not another declared name (a list of the tools is an answer). The name,
    or ``""``; looks at the first 200 lines."""
    lines = text.strip(_WS).split("\n", 200)[:200]
    for i, line in enumerate(lines[:-1]):
        after = lines[i + 1].strip(_WS)
        starts = i == 0 or not lines[i - 1].strip(_WS) or lines[i - 1].rstrip(_WS).endswith(":")
        if starts and line.strip(_WS) in names and after and after not in names:
            return line.strip(_WS)
    return ""


def _fill(literals: list[str], text: str) -> list[str] | None:
    """The values between ``literals`` when ``text`` is ``literals[0] + v0 + literals[1] + v1 + …`` (each value
    up to the next literal's first occurrence, non-empty): one left-to-right scan, no backtracking."""
    if not text.startswith(literals[0]):
        return None
    pos, values = len(literals[0]), []
    for i, lit in enumerate(literals[1:], 1):
        last = i == len(literals) - 1
        end = (len(text) if last else -1) if not lit else text.find(lit, pos + 1)
        if end <= pos:
            return None
        values.append(text[pos:end])
        pos = end + len(lit)
    return values if pos == len(text) else None


def _repeated_call(out: str, names: list[str]) -> tuple[int, str, int] | None:
    """A call the model kept repeating because nothing stopped it: from the first occurrence of a requested
    tool's name, the stretch up to its next occurrence comes again right after it, and the output then ends in
    a third copy, whole or cut (one more, whole, is enough too). ``(start of the second copy, the stretch, copies
    after the first)`` or None. Linear: a few slices per declared name."""
    for n in names[:64]:
        i1 = out.find(n) if n else -1
        i2 = out.find(n, i1 + len(n)) if i1 >= 0 else -1
        if i2 < 0 or i2 - i1 > 4096:
            continue
        seg = out[i1:i2]
        if out[i2:i2 + len(seg)] != seg:
            continue
        copies, at = 1, i2 + len(seg)
        while copies < 1000 and out[at:at + len(seg)] == seg:
            copies, at = copies + 1, at + len(seg)
        tail = out[at:].rstrip(_WS)
        common = next((k for k in range(min(len(tail), len(seg))) if tail[k] != seg[k]), min(len(tail), len(seg)))
        cut = bool(tail) and common >= 3 and len(tail) - common <= 3      # a cut copy (`…` of a quoted log aside)
        if (copies >= 2 and not tail) or (cut and copies >= 1):
            return i2, seg, copies + (1 if cut else 0)
    return None


_TAG = re.compile(r"</?[A-Za-z_][\w\-]{0,40}(?:=|>)")
_OPEN_TAG = re.compile(r"<([A-Za-z_][\w:\-]{0,40})[\s=>]")


def _foreign_inner(inner: str, setup: _Setup, ctx: dict[str, Any]) -> str:
    """The boundary between a wrapper and another family's syntax, judged by what is inside the outer tag: a
    wrapper (:attr:`Mistake.FOREIGN_WRAPPER`) holds the template's own call shape — one of its call markers, or a
    JSON call object; another family's call (:attr:`Mistake.TEMPLATE_MODEL_MISMATCH`) holds tags of its own that
    the template never writes and none of the template's markers. Returns the evidence for the latter (the inner
    tags), ``""`` otherwise."""
    inner = inner[:4096]
    own = {m.strip(_WS) for m in list(ctx["markers"]) + list(ctx["closers"]) + list(ctx["all_markers"])
           if m and m.strip(_WS)}
    if not own or any(m in inner for m in own) or _JSON_CALL_START.search(inner):
        return ""
    src = getattr(setup.template, "source", "") or ""
    tags = list(dict.fromkeys("<" + m.group(1) for m in _OPEN_TAG.finditer(inner)
                              if "<" + m.group(1) not in src))[:3]
    if not tags or not any(n and n in inner for n in ctx["names"]):
        return ""
    return (f"with tags of its own ({', '.join(_q(t) for t in tags)}) and none of the template's call markup "
            f"({', '.join(_q(m) for m in sorted(own)[:3])}): another family's call syntax, not the template's call "
            "inside an extra wrapper")


def _invented_opener(out: str, text: str, setup: _Setup, ctx: dict[str, Any]) -> str:
    """Evidence that the call starts with a tag the template never writes, right before a requested tool's name
    (``<name>task``), in place of the template's opener (absent from the output), while the rest of the call
    uses the template's own tags (``</parameter>``, ``</function>``): the model omitted the opener and invented
    one — not a wrapper around a call of the template's shape. ``""`` otherwise."""
    src = getattr(setup.template, "source", "") or ""
    m = _TAG.search(text)
    if not m or m.group(0).startswith("</") or m.group(0) in src or not ctx["openers"]:
        return ""
    if any(o.strip(_WS) and o.strip(_WS) in out for o in ctx["openers"]):
        return ""
    after = text[m.end():m.end() + 130].lstrip(_WS)
    name = next((n for n in ctx["names"] if n and after.startswith(n)
                 and not re.match(r"[\w]", after[len(n):len(n) + 1])), "")
    own = list(dict.fromkeys(t.group(0) for t in _TAG.finditer(text, m.end(), min(len(text), m.end() + 4096))
                             if t.group(0) in src))
    if not name or not own:
        return ""
    return (f"the call starts with {_q(m.group(0) + name)}: {_q(m.group(0))} is a tag the template never writes, in "
            f"place of its call opener {_q(ctx['openers'][0].strip(_WS))}, which the output never writes, while the "
            f"rest of the call uses the template's own tags ({', '.join(_q(t) for t in own[:3])}): the model "
            "omitted the opener and invented one")


def _reasoning_head(r_start: str) -> str:
    """The reasoning opener without its last control token (``<|channel|>analysis`` of
    ``<|channel|>analysis<|message|>``): the header that names the reasoning's channel; ``""`` when the opener is
    a single token."""
    toks = list(_SPECIAL_SHAPE.finditer(r_start.strip(_WS)))
    if len(toks) < 2 or toks[-1].end() != len(r_start.strip(_WS)):
        return ""
    head = r_start.strip(_WS)[:toks[-1].start()]
    return head if head.strip(_WS) and not _SPECIAL_SHAPE.fullmatch(head) else ""


def _call_header_in_reasoning(out: str, r_start: str, names: list[str]) -> str:
    """The header text (``to=functions.grep code``) between the reasoning opener's channel header and its last
    token when it names a requested tool: a call written on the reasoning's channel. ``""`` otherwise; looks at
    the first 50 occurrences, 200 characters each."""
    head = _reasoning_head(r_start)
    if not head or not names:
        return ""
    last = list(_SPECIAL_SHAPE.finditer(r_start.strip(_WS)))[-1].group(0)
    i = out.find(head)
    for _ in range(50):
        if i < 0:
            return ""
        j = out.find(last, i + len(head), i + len(head) + 200)
        header = out[i + len(head):j] if j >= 0 else ""
        if header.strip(_WS) and any(re.search(r"(?<![\w])" + re.escape(n) + r"(?![\w])", header)
                                     for n in names[:64] if n):
            return header.strip(_WS)
        i = out.find(head, i + 1)
    return ""


def _complete_block(text: str, ctx: dict[str, Any]) -> str:
    """``[X] … [/X]`` or ``<x> … </x>`` as the whole of ``text`` (not one of the template's markers) with a
    requested tool's name inside: a call complete in another syntax (shown as ``"`[X]` … `[/X]`"``)."""
    t = text.strip(_WS)
    m = re.match(r"\[([A-Z_]{2,30})\]|<([A-Za-z_][\w:\-]{0,40})>", t)
    if not m or m.group(0) in ctx["markers"]:
        return ""
    closer = f"[/{m.group(1)}]" if m.group(1) else f"</{m.group(2)}>"
    inner = t[len(m.group(0)):len(t) - len(closer)]
    if not t.endswith(closer) or not any(re.search(r"(?<![\w])" + re.escape(n) + r"(?![\w])", inner)
                                         for n in ctx["names"] if n):
        return ""
    return f"{_q(m.group(0))} … {_q(closer)}"


_CALL_ID = re.compile(r"(?:call|toolu|tool|chatcmpl-tool|fc)[_\-][A-Za-z0-9\-_]{1,40}")


def _ids_for_names(out: str, msg: dict[str, Any], ctx: dict[str, Any]) -> list[str]:
    """Call ids (``call_0``, ``toolu_…``) written right after each of the template's call openers, in an
    output that names none of the requested tools anywhere: the model put an id where the template's calls
    carry the tool's name. ``[]`` otherwise."""
    names = [n for n in ctx["names"] if n]
    if msg.get("tool_calls") or not names or any(n in out for n in names):
        return []
    ids: list[str] = []
    for op in dict.fromkeys(o.strip(_WS) for o in ctx["openers"] if o.strip(_WS)):
        for m in re.finditer(re.escape(op), out):
            rest = out[m.end():m.end() + 80].lstrip(_WS)
            i = _CALL_ID.match(rest)
            if i is None:
                return []
            ids.append(i.group(0))
    return ids


_FENCE = re.compile(r"\s{0,8}```[\w-]{0,16}\s")
_ENCODED_ARGS = re.compile(r'"\s{0,8}\{(?:\s|\\[nrt]){0,8}\\"')     # `"{\"k\"` or `"{\n  \"k\"`


def _reasoning_opener_part(out: str, msg: dict, r_start: str) -> tuple[str, str] | None:
    """``(written, left out)`` when the output opens with a whole tag that is the first part of the template's
    reasoning opener and goes on without the rest (Gemma 4's ``<|channel>`` for ``<|channel>thought``), the whole
    opener written nowhere, and the parse read no reasoning and no call. None otherwise."""
    r = r_start.strip(_WS)
    head = out.lstrip(_WS)
    if not r or msg.get("reasoning_content") or msg.get("tool_calls") or r in out:
        return None
    tag = re.match(r"<[^<>\s]{1,40}>", r)
    at = out.find(tag.group(0)) if tag and not head.startswith(tag.group(0)) else -1
    if at > 0 and not MARKUP.search(out[:at]) and not _SPECIAL_SHAPE.search(out[:at]):
        head = out[at:]     # (text before the opener hides it, but the opener is the first markup written)
    i = 0
    while i < len(r) and i < len(head) and r[i] == head[i]:
        i += 1
    written, rest = r[:i], r[i:].strip(_WS)
    if len(written) < 3 or not written.endswith(">") or not re.fullmatch(r"[A-Za-z_]{1,40}", rest):
        return None
    return written, rest


def _header_without_word(out: str, msg: dict, gp: str) -> tuple[str, str] | None:
    """``(token, word)`` when the generation prompt ends with a control token and a word (Muse Glimmer's
    ``<|start|>assistant``), the output opens with that token not followed by the word and never writes the two
    together, and the parse read no reasoning and no call: the model wrote the turn's header without its role.
    None otherwise."""
    m = re.search(r"(<\|[^|<>\n]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>)([A-Za-z_]{1,40})$", gp)
    head = out.lstrip(_WS)
    if not m or msg.get("reasoning_content") or msg.get("tool_calls") or not head.startswith(m.group(1)) \
            or m.group(0) in out:
        return None
    return m.group(1), m.group(2)


def _unwrapped_call(out: str, msg: dict, ctx: dict[str, Any]) -> str:
    """The call is not wrapped at all: its own opener is written, the section's tag pair around it never is — the
    outermost omission (what the parser then meets inside the call is secondary); a call that keeps the section's
    closer lost only what the parser stops at. Returns the evidence, or ``""``."""
    ops = [o.strip(_WS) for o in ctx["openers"] if o.strip(_WS)]
    pair = ("</" + ops[0][1:]) if ops and re.fullmatch(r"<[A-Za-z_][\w\-]{0,40}>", ops[0]) else ""
    if len(ops) < 2 or not pair or msg.get("tool_calls") or ops[0] in out or pair in out:
        return ""
    inner = next((o for o in ops[1:] if o in out), "")
    return (f"the output writes {_q(inner)} but neither {_q(ops[0])} nor {_q(pair)}, which the template writes "
            "around it: the call was started without its section's opener") if inner else ""


def _is_stop_closer(text: str, ctx: dict[str, Any]) -> bool:
    """``text`` is a closer of the call or section the analysis found (``</tool_call>``,
    ``<|tool_calls_section_end|>``), a tag closer or a control token — a string a server may use as a stop
    sequence."""
    t = text.strip(_WS)
    return bool(t) and (t in ctx["closers"] or t.startswith("</") or bool(_SPECIAL_SHAPE.fullmatch(t)))


def _is_closer(text: str) -> bool:
    t = text.strip(_WS)
    return bool(t) and (t.startswith("</") or set(t) <= set("}]"))


@dataclass
class _Walk:
    """The state of one :func:`_walk` pass: bracket depth and whether it ended inside a string."""

    depth: int = 0
    in_str: bool = False


def _walk(text: str, start: int, end: int, state: _Walk, quotes: str = '"', inside: bool = False
          ) -> Any:
    """The one string/escape walker of the triage's scans: yields ``(index, kind)`` over ``text[start:end]`` —
    ``"open"`` / ``"close"`` for a bracket outside strings (``state.depth`` already changed), ``"string"`` for the
    quote that ends a string, ``"other"`` for any other non-whitespace character outside strings, and with
    ``inside`` ``"in"`` for each character inside a string. A string opens with one of ``quotes`` and ends with the
    same quote; a backslash escapes the next character inside it. Linear in the text walked."""
    esc = False
    quote = ""
    for i in range(start, min(end, len(text))):
        ch = text[i]
        if state.in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                state.in_str = False
                yield i, "string"
                continue
            if inside:
                yield i, "in"
            continue
        if ch in quotes:
            state.in_str, quote = True, ch
        elif ch in "{[":
            state.depth += 1
            yield i, "open"
        elif ch in "}]":
            state.depth -= 1
            yield i, "close"
        elif ch not in _WS:
            yield i, "other"


def _raw_line_breaks(setup: _Setup, out: str, msg: dict[str, Any], ctx: dict[str, Any]
                     ) -> tuple[tuple[list[Edit], _Parsed], str] | None:
    """A string value with raw line breaks inside the template's own call (``<|tool_call_start|>[exec(command='cat
    …\nEOF')]``, a pythonic value): from the first of the template's call markers (else a declared tool's name and
    ``(``) on, each line break inside a quoted string (either quote) is written as the escape ``\\n``; when the
    output then parses clean with calls, the format writes a string on one line and the model did not.
    ``((edits, parse), evidence)`` or None; one walk and one parse, outputs up to 16 KiB."""
    budget = ctx.get("budget")
    if msg.get("tool_calls") or len(out) > _STRIPPED_CHARS or "\n" not in out or budget is None:
        return None
    starts = [out.find(m) for m in ctx["markers"] if m and m in out]
    starts += [out.find(n + "(") for n in ctx["names"] if n and n + "(" in out]
    if not starts:
        return None
    breaks = [i for i, kind in _walk(out, min(starts), len(out), _Walk(), quotes="'\"", inside=True)
              if kind == "in" and out[i] == "\n"][:64]
    if not breaks:
        return None
    fixed = out
    for i in reversed(breaks):
        fixed = fixed[:i] + "\\n" + fixed[i + 1:]
    p = _accepted_parse(setup, fixed, budget, ctx)
    if p is None:
        return None
    edits = [Edit("replace", i + k, "\n", "\\n") for k, i in enumerate(breaks)]
    near = (edits, p) if len(edits) <= MAX_EDITS else None
    return near, (f"a string value inside the template's own call syntax holds {len(breaks)} raw line break(s) "
                  f"(from {_q(out[min(starts):min(starts) + 30])}); the format writes a string on one line, a line "
                  "break as the escape `\\n` — with each one escaped the output parses into the call: the value is "
                  "not of the form the format's string takes")


def _open_json_at_end(out: str, names: list[str]) -> int:
    """Brackets still open when ``out`` ends inside a JSON value that follows a tool's name (the tail after the
    last value is whitespace): a call cut before it was complete; 0 otherwise. One linear scan."""
    first = min((i for i in (out.find(n) for n in names if n) if i >= 0), default=-1)
    if first < 0:
        return 0
    start = out.find("{", first)
    if start < 0:
        return 0
    state = _Walk()
    last_value = start
    for i, kind in _walk(out, start, len(out), state):
        last_value = i if kind != "open" else last_value
        if kind == "close" and state.depth == 0:
            start = out.find("{", i)
            if start < 0:
                return 0
    if state.in_str or state.depth <= 0:
        return 0
    tail = out[last_value + 1:]
    return state.depth if not tail.strip(_WS) and not _TOKEN.search(out[start:]) else 0


def _encoded_arguments(out: str) -> str:
    """The JSON string literal the model wrote where the arguments object goes (``"{\\"k\\": …}"``: a string whose
    text is a JSON object), or ``""``."""
    m = _ENCODED_ARGS.search(out)
    if not m:
        return ""
    try:
        val, end = json.JSONDecoder().raw_decode(out, m.start())
        inner = json.loads(val) if isinstance(val, str) else None
    except (ValueError, RecursionError):
        return ""
    return out[m.start():end] if isinstance(inner, dict) else ""


_PY_LITERAL = re.compile(r"\s*(True|False|None)\b|\s*\[\s*'|\s*\{\s*'")


def _mistyped_at_stop(req: Any, ex: Any) -> str:
    """Evidence when the parse stopped inside an argument whose schema type is not a string and the model wrote
    a Python literal there (``True``, ``['a']``, ``{'k': 1}``) instead of JSON; ``""`` otherwise."""
    stop = ex.stop
    if stop is None:
        return ""
    m = _PY_LITERAL.match(ex.text, stop.pos)
    prose = not m and "a JSON value" in stop.expected and bool(ex.text[stop.pos:stop.pos + 1].strip(_WS)) \
        and ex.text[stop.pos] not in '{["-0123456789tfn'
    if not m and not prose:
        return _python_literal_inside(req, ex.text, stop.pos)
    # the parser's rules name an argument ``tool-<name>-arg-<param>`` or, by position, ``tool-<i>-arg-<j>``
    typed: dict[str, tuple[str, str]] = {}
    for i, t in enumerate(req.tools or []):
        f = t.get("function", {}) if isinstance(t, dict) else {}
        props = (f.get("parameters") or {}).get("properties") or {}
        for j, (k, v) in enumerate(props.items() if isinstance(props, dict) else []):
            if isinstance(v, dict) and isinstance(v.get("type"), str):
                typed[f"tool-{i}-arg-{j}"] = (k, v["type"])
                typed[f"tool-{f.get('name')}-arg-{k}"] = (k, v["type"])
    for part in reversed(stop.path):
        k, ty = typed.get(part, ("", "string"))
        if ty != "string" and prose:
            # text where the call's markup announces a JSON value (a non-string parameter): not of its type
            return (f"{_c(k)} is of type {_c(ty)} and the call marks its value as JSON, but the model wrote text "
                    f"{_q(ex.text[stop.pos:stop.pos + 20].strip(_WS))} there: the value is not of its type")
        if ty != "string":
            return (f"{_c(k)} is of type {_c(ty)}, but the model wrote the Python literal "
                    f"{_q(ex.text[stop.pos:stop.pos + 20].strip(_WS))} where JSON is expected")
    return ""


_PY_WORD = re.compile(r"(True|False|None)(?![\w])")
_KEY_BEFORE = re.compile(r'"([^"\\\n]{1,64})"\s{0,8}:\s{0,8}$')


def _python_literal_inside(req: Any, text: str, at: int) -> str:
    """Evidence when the JSON value that starts at ``at`` (where the parse stopped) holds a Python literal
    outside its strings — ``True`` / ``False`` / ``None`` or a single-quoted string — that JSON does not have
    (``{"arg1": True}``): the model wrote the arguments as Python, not JSON. ``""`` otherwise; one scan of at most
    4 KiB, inside the value only."""
    if text[at:at + 1] not in ("{", "["):
        return ""
    state = _Walk()
    for i, kind in _walk(text, at, min(len(text), at + 4096), state):
        if kind == "close" and state.depth <= 0:
            return ""
        ch = text[i]
        if kind == "other" and (ch == "'" or (ch in "TFN" and not text[i - 1:i].isalnum() and _PY_WORD.match(text, i))):
            lit = _PY_WORD.match(text, i).group(1) if ch != "'" else text[i:text.find("'", i + 1) + 1 or i + 20]
            key = _KEY_BEFORE.search(text, max(at, i - 80), i)
            k = key.group(1) if key else ""
            types = [((t.get("function") or {}).get("parameters") or {}).get("properties", {}).get(k, {})
                     for t in req.tools or [] if isinstance(t, dict) and isinstance((t.get("function") or {})
                                                                                     .get("parameters"), dict)]
            ty = next((x.get("type") for x in types if isinstance(x, dict) and x.get("type")), "")
            json_form = {"True": "true", "False": "false", "None": "null"}.get(lit, "a double-quoted string")
            return (f"{'`' + k + '` = ' if k else ''}{_q(lit, 20)}: the model wrote the Python literal {_q(lit, 20)} "
                    f"inside the call's JSON arguments, where JSON writes {json_form}"
                    + (f" (the schema's type is {_c(ty)})" if ty else ""))
    return ""


_IDENT_AT = re.compile(r"[A-Za-z_][\w\-]{0,63}")


def _undeclared_at_stop(req: Any, ex: Any) -> tuple[str, str, str] | None:
    """Where the parse stopped expecting an argument's name (the expected literals are parameter names a tool of
    the request declares) and the model wrote another name there: ``(tool, the name written, evidence)``, or
    None. The tool is the one whose declared names were expected."""
    if ex.stop is None:
        return None
    m = _IDENT_AT.match(ex.text, ex.stop.pos)
    lits = [x.strip(_WS) for x in _literals(ex.stop.expected)]
    if not m:
        return None
    for t in req.tools or []:
        f = t.get("function") or {} if isinstance(t, dict) else {}
        props = list(properties_of(f.get("parameters")))
        wanted = [x for x in lits if x in props]
        if f.get("name") and wanted and m.group(0) not in props:
            return f["name"], m.group(0), (f"the model names an argument {_q(m.group(0))}, which {_c(f['name'])}'s schema "
                                           f"does not declare, where the parser expected a declared name "
                                           f"({', '.join(_q(w) for w in wanted[:3])})")
    return None


def _undeclared_in_template_markup(setup: _Setup, ex: Any) -> tuple[str, str, str] | None:
    """The labelling guide's step 5 for a parameter the tool does not declare, written in the template's own
    markup: the parse stopped where a declared name was expected (:func:`_undeclared_at_stop`), and what the output
    writes right after the undeclared name is what the template's render of that tool's call writes right after a
    declared one (``">`` of ``<param name="city">``) — the markup is whole, only the name is not the schema's.
    ``(tool, name, evidence)``, or None (one render)."""
    found = _undeclared_at_stop(setup.request, ex)
    if found is None:
        return None
    tool, name, said = found
    t = next((t.get("function") or {} for t in setup.request.tools or [] if isinstance(t, dict)
              and (t.get("function") or {}).get("name") == tool), {})
    props = list(properties_of(t.get("parameters")))
    if not props:
        return None
    render = _rendered_call(setup, tool, {props[0]: "x"})
    at = render.rfind(props[0])
    after = render[at + len(props[0]):at + len(props[0]) + 2] if at >= 0 else ""
    written = ex.text[ex.stop.pos + len(name):ex.stop.pos + len(name) + len(after)]
    if not after.strip(_WS) or written != after:
        return None
    return tool, name, said + f"; the output writes {_q(name + after)} as the template writes " \
        f"{_q(props[0] + after)}: the call's markup is the template's, only the parameter is not the schema's"


def _closer_written_last(setup: _Setup, bundle: Any, ex: Any, ctx: dict[str, Any]) -> str:
    """Evidence when an output the parse reads as ended inside a call was not cut: the template's pieces the
    output lacks are all closers, and the output ends with a closer of the template's call that the render writes
    after them (``</tool_call>`` after a missing ``</parameter></function>``) — the model closed the call, having
    left the inner closers out. ``""`` otherwise (no parse)."""
    rel = _call_relation(setup, bundle, ex, ctx)
    if rel is None or not rel.absent or rel.foreign or not all(_is_closer(x) for x in rel.absent):
        return ""
    end = ex.output.rstrip(_WS)
    last = max((i for i, x in enumerate(rel.pieces) if x in rel.absent), default=-1)
    closer = next((x for x in rel.pieces[last + 1:] if _is_closer(x) and end.endswith(x)), "")
    if last < 0 or not closer:
        return ""
    return (f"the output ends with {_q(closer)}, the closer the template writes after "
            f"{', '.join(_q(x) for x in dict.fromkeys(rel.absent))}, which the output never writes: the model closed "
            "the call, so it was not cut — it left those closers out")

def _declared_written(req: Any, tool: str, out: str) -> bool:
    """Whether the output writes, as a word, a parameter name that ``tool``'s schema declares."""
    for t in req.tools or []:
        f = t.get("function") or {} if isinstance(t, dict) else {}
        if f.get("name") == tool:
            return any(re.search(r"(?<![\w-])" + re.escape(p) + r"(?![\w-])", out)
                       for p in properties_of(f.get("parameters")) if p)
    return False

def _missing_pairs(req: Any, output: str) -> dict[str, list[str]]:
    """The required parameters the output never writes, by the tool it names: ``{tool: [names]}``."""
    out: dict[str, list[str]] = {}
    for t in req.tools or []:
        f = t.get("function", {}) if isinstance(t, dict) else {}
        name = f.get("name")
        if name and name in output:
            gone = [r for r in required_of(f.get("parameters")) if r not in output]
            if gone:
                out[name] = gone
    return out


def _layout_beside_missing(setup: _Setup, out: str, ctx: dict[str, Any]) -> str:
    """Evidence when a call lacks a required parameter and the output has a fault of the call's markup as well:
    read with those parameters not required it still does not parse clean, and with the tag-whitespace repair also
    on it does — the whitespace the template writes at its tags is missing, an omitted marker (the labelling
    guide's step 4, before the parameter of step 5). Two parses; ``""`` otherwise."""
    budget = ctx.get("budget")
    missing = _missing_pairs(setup.request, out)
    if not missing or budget is None:
        return ""
    keep = {}
    for t in setup.request.tools or []:
        f = t.get("function") or {} if isinstance(t, dict) else {}
        if f.get("name") in missing:
            keep[f["name"]] = [r for r in required_of(f.get("parameters")) if r not in missing[f["name"]]]
    try:
        req = apply_request_change(setup.request, {"required": keep})
        if not budget.take(len(out)) or _parse(setup, out, request=req).clean or not budget.take(len(out)):
            return ""
        p = _parse(setup, out, repairs=(TAG_WHITESPACE,), request=req)
    except Exception:  # noqa: BLE001
        return ""
    if not (p.clean and p.message.tool_calls):
        return ""
    return (f"read with {', '.join(_q(x) for xs in missing.values() for x in xs)} not required the output still "
            "does not parse clean; with the whitespace the template writes at its tags put back it does: the model "
            "omitted that whitespace, a marker of the template's call (the first fault, before the missing "
            "parameter)")

def _missing_from_text(req: Any, output: str) -> str:
    for t in req.tools or []:
        f = t.get("function", {}) if isinstance(t, dict) else {}
        name = f.get("name")
        if not name or name not in output:
            continue
        for r in required_of(f.get("parameters")):
            if r not in output:
                return f"{_c(name)} is called without {_c(r)}, which the request's schema lists in `required`"
    return ""


# ------------------------------------------------------------------------------------------------ fixes


def apply_request_change(req: Any, change: dict[str, Any]) -> Any:
    """``req`` with a request change made: plain keys (``parallel_tool_calls``, ``tool_choice``,
    ``reasoning_format``, ``enable_thinking``, ``tools``) replace; ``required`` ``{tool: [names]}`` and ``type``
    ``{tool: {param: type}}`` edit the tools' schemas."""
    from ..chat.request import ChatRequest

    d = {**req.to_row()}
    tools = json.loads(json.dumps(d.get("tools") or []))
    for k, v in change.items():
        if k == "required":
            for t in tools:
                if t.get("function", {}).get("name") in v:
                    t["function"].setdefault("parameters", {})["required"] = list(v[t["function"]["name"]])
        elif k == "add_tools":
            for n in v:
                tools.append({"type": "function", "function": {"name": n, "parameters": {"type": "object",
                                                                                      "properties": {}}}})
        elif k == "type":
            for t in tools:
                for p, ty in (v.get(t.get("function", {}).get("name")) or {}).items():
                    t["function"]["parameters"]["properties"].setdefault(p, {})["type"] = ty
        else:
            d[k] = v
    if "enable_thinking" in change and "enable_thinking" in (d.get("chat_template_kwargs") or {}):
        # the kwarg decides the flag (ChatRequest.from_dict): the edit must change it there too
        d["chat_template_kwargs"] = {**d["chat_template_kwargs"], "enable_thinking": change["enable_thinking"]}
    if "tools" not in change:
        d["tools"] = tools or None
    d["messages"] = d.get("messages") or [{"role": "user", "content": "hi"}]
    return ChatRequest.from_dict(d)



def _calls_of(message: dict[str, Any]) -> list[tuple[str, Any]]:
    """A message's calls as (name, arguments decoded when they are JSON)."""
    out = []
    for tc in message.get("tool_calls") or []:
        f = tc.get("function") or {}
        try:
            args = json.loads(f.get("arguments") or "{}")
        except (ValueError, RecursionError):
            args = f.get("arguments")
        out.append((f.get("name"), args))
    return out


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    from ..chat.message import AssistantMessage
    from .spans import same_message

    return same_message(AssistantMessage.from_openai(a), AssistantMessage.from_openai(b))


def _expected_rank(message: dict[str, Any], expect: dict[str, Any], output: str) -> int:
    """How closely ``message`` gives the expected message, for ranking: 0 exactly (the whitespace at the edges of its
    content and reasoning too), 1 as :func:`~.nearest.gives_expected` compares (that whitespace aside), 2 not."""
    if not gives_expected(message, expect, output):
        return 2
    return 0 if all((message.get(k) or "") == (expect.get(k) or "") for k in ("content", "reasoning_content")) else 1


def _keep_special_tokens(setup: _Setup, budget: _Budget, ok: Any, restored: str, shown: str,
                         server: str = "keep-special-tokens",
                         what: str = "keep special tokens in the decoded text (skip_special_tokens=false / --special)"
                         ) -> RankedFix | None:
    """The server fix ``server`` ("keep special tokens" unless said) when ``restored`` (the output as the model
    wrote it, the decoder's change undone) re-parses as ``ok`` wants, at the setup's fidelity, else at improved
    fidelity; None when it does not."""
    for fid in dict.fromkeys((setup.fidelity, "improved")):
        if not budget.take(len(restored)):
            return None
        try:
            p = _parse(replace(setup, fidelity=fid), restored)
        except Exception:  # noqa: BLE001
            continue
        if ok(p):
            change: dict[str, Any] = {"server": server, "output": restored}
            extra = ""
            if fid != setup.fidelity:
                change["fidelity"], extra = fid, ", and parse at improved fidelity"
            return RankedFix(TriageFixKind.SERVER, f"{what}{extra}: the output then {shown}", change,
                             p.message.to_openai(), 4)
    return None


def _json_type_of(message: dict[str, Any], tool: str, arg: str, raw: bool = False) -> str:
    """The JSON type of argument ``arg`` of the first call of ``tool``: with ``raw``, of the value as it is; else
    of a string value's text read as JSON, when that is an object or an array (``'{"a": 1}'`` → ``object``; a
    text such as ``1`` stays a string: a tagged format writes every value as text). ``""`` if none."""
    names = {dict: "object", list: "array", bool: "boolean", int: "integer", float: "number", str: "string"}
    for tc in message.get("tool_calls") or []:
        if tc["function"]["name"] != tool:
            continue
        try:
            v = json.loads(tc["function"]["arguments"] or "{}").get(arg)
            if not raw:
                if not isinstance(v, str):
                    return ""
                v = json.loads(v)
                if not isinstance(v, (dict, list)):
                    return ""
        except (ValueError, AttributeError):
            return ""
        return names.get(type(v), "") if v is not None else ""
    return ""


def _prompt_tail_fixed(ex: Any, setup: _Setup, p: _Parsed, change: dict[str, Any], budget: _Budget,
                       ok: Callable[[_Parsed], bool]) -> tuple[dict[str, Any], _Parsed] | None:
    """A request fix whose message still starts its content with control text the generation prompt already ends
    with (the model wrote that opener again: a second fault of the thinking setting), with the thinking flag
    switched over too, when that re-parses and the text is gone: ``(change, parse)``; None otherwise."""
    content = (p.message.content or "").lstrip(_WS)
    gp = ex.generation_prompt.rstrip(_WS)
    tail = next((gp[-200:][m.start():] for m in _SPECIAL_SHAPE.finditer(gp[-200:])
                 if content.startswith(gp[-200:][m.start():])), "")
    if not tail:
        return None
    for on in (not setup.request.enable_thinking, setup.request.enable_thinking):
        flag = _thinking_flag_change(setup.request, on)
        both = {**change, **flag}
        if not budget.take(len(ex.output)):
            return None
        try:
            p2 = _parse(setup, ex.output, request=apply_request_change(setup.request, both))
        except Exception:  # noqa: BLE001
            continue
        if ok(p2) and tail not in (p2.message.content or "") and len(p2.message.tool_calls) >= len(p.message.tool_calls):
            return both, p2
    return None


def ranked_fixes(ex: Any, setup: _Setup, bundle: Any, mistake: Mistake, near: tuple[list[Edit], _Parsed] | None,
                 budget: _Budget, ctx: dict[str, Any]) -> tuple[list[RankedFix], str]:  # noqa: C901
    """Fixes of every kind, each re-parsed; ``(fixes, why none)``."""
    out: list[RankedFix] = []
    cur = ex.message
    markers = ctx["markers"]

    def ok(p: _Parsed) -> bool:
        if not p.clean and not (ctx.get("unfinished_reasoning") and p.truncated and p.stop < 0
                                and not p.message.tool_calls):
            return False    # (an output that ends inside its reasoning stays unfinished whatever the change)
        m = p.message.to_openai()
        if m == cur:
            return False
        r_start, r_ends = reasoning_markers(bundle)
        if any(x and (x in (p.message.content or "") or x in (p.message.reasoning_content or ""))
               for x in [r_start] + r_ends):
            return False
        if p.message.tool_calls:
            return not any(x and x in (p.message.content or "") for x in markers)
        if ctx.get("stripped_output") is not None:     # (a kept stop token: the reply without it)
            return not _SPECIAL_SHAPE.search(p.message.content or "")
        return not cur.get("tool_calls") and mistake in (Mistake.REASONING_SETTING, Mistake.REOPENED_REASONING,
                                                        Mistake.SPECIAL_TOKENS_STRIPPED, Mistake.REPEATED_PROMPT_TAIL)

    # one repair switched on
    tolerance = list(TOLERANCE_REPAIRS)
    if budget.take(len(ex.output)):
        try:
            imp = _parse(setup, ex.output, repairs=tuple(tolerance))
            used = tuple(tolerance)     # the set that made imp's message
            fired = _fired(imp.message, tolerance)
            imp_ok = ok(imp)
            if not imp_ok and not imp.message.tool_calls and fired and budget.take(len(ex.output)):
                # a repair that fired may have taken the text the call is in (read as reasoning, say) before the
                # one that reads the call could: the set again without those
                rest = tuple(n for n in tolerance if n not in fired)
                again = _parse(setup, ex.output, repairs=rest)
                if ok(again) and again.message.tool_calls:
                    imp, imp_ok, used = again, True, rest
                    fired = _fired(again.message, tolerance)
            if imp_ok and not fired:
                out.append(RankedFix(TriageFixKind.FIDELITY, "parse at improved fidelity (its parser improvements; "
                                     "no repair fires)", {"fidelity": "improved"}, imp.message.to_openai(), 3))
            elif imp_ok:
                # a repair alone (then two together) must read the calls the full set reads: a contract fallback
                # (the stream's view of a call the final grammar rejects, text left unparsed) can settle "clean"
                # with later calls gone or a call's arguments left behind in the content
                full = _calls_of(imp.message.to_openai())
                alone = [(n,) for n in fired[:2]]
                pairs = [(a, b) for i, a in enumerate(fired[:3]) for b in fired[i + 1:3]] if len(fired) > 2 else []
                for group in alone + pairs:
                    if not budget.take(len(ex.output)):
                        break
                    one = _parse(setup, ex.output, repairs=group)
                    if ok(one) and _calls_of(one.message.to_openai()) == full \
                            and set(_SPECIAL_SHAPE.findall(one.message.content or "")) \
                            <= set(_SPECIAL_SHAPE.findall(imp.message.content or "")):
                        # (reading the calls while leaving a control token the full set took is half the fix)
                        what = f"the repair `{group[0]}` alone (improved fidelity with only this repair)" \
                            if len(group) == 1 else (f"the repairs `{group[0]}` and `{group[1]}` together (improved "
                                                     "fidelity with only these repairs; each alone does not read the "
                                                     "calls)")
                        out.append(RankedFix(TriageFixKind.REPAIR, f"switch on {what}", {"repairs": list(group)},
                                             one.message.to_openai(), len(group)))
                        break
                else:
                    # (the repairs that fired are the change only when they alone give this message: a repair that
                    # shapes the parse without recording itself may be in the set that made it — then that set)
                    group = used
                    # template-default-thinking shapes the prompt and leaves a note, no record: tried beside them
                    silent = (TEMPLATE_DEFAULT_THINKING,) if TEMPLATE_DEFAULT_THINKING in used else ()
                    if tuple(fired) == used:
                        group = tuple(fired)
                    else:
                        for cand in dict.fromkeys((tuple(fired), tuple(fired) + silent)):
                            if cand == used or not budget.take(len(ex.output)):
                                break
                            alone_fired = _parse(setup, ex.output, repairs=cand)
                            if ok(alone_fired) and _same(alone_fired.message.to_openai(), imp.message.to_openai()):
                                group = cand
                                break
                    out.append(RankedFix(TriageFixKind.REPAIR, "switch on the repairs " + ", ".join(
                        f"`{n}`" for n in group), {"repairs": list(group)}, imp.message.to_openai(), len(group)))
            elif not imp_ok and len(imp.message.tool_calls) > len(cur.get("tool_calls") or []) \
                    and _marker_free(imp.message.to_openai(), bundle) \
                    and imp.stop >= max((ex.output.rfind(c) + len(c) for c in ctx["closers"] if c in ex.output),
                                        default=len(ex.output) + 1) \
                    and not any(m and m.strip(_WS) in (imp.message.content or "") for m in markers + ctx["closers"]):
                # the repairs read every call the output writes, its markup all consumed (the parse stops after
                # the last call's closer), but the parse stays unclean (a second fault, such as text after the
                # call): offered last, saying what is left
                ctx["partial_fix"] = (fired, imp.message.to_openai(), imp.stop)
            if not imp_ok and imp.message.tool_calls and not setup.request.parallel_tool_calls:
                # two faults: a repair reads the first call and the parse then stops at a second one the request
                # did not allow — the repair together with parallel_tool_calls, each repair alone first
                par = {"parallel_tool_calls": True}
                req2 = apply_request_change(setup.request, par)
                if budget.take(len(ex.output)):
                    both = _parse(setup, ex.output, repairs=tuple(tolerance), request=req2)
                    fired = _fired(both.message, tolerance)
                    if ok(both) and fired:   # no repair fired: an improvement read it, the fidelity fix says so
                        for n in fired[:2]:
                            if not budget.take(len(ex.output)):
                                break
                            one = _parse(setup, ex.output, repairs=(n,), request=req2)
                            if ok(one) and _calls_of(one.message.to_openai()) == \
                                    _calls_of(both.message.to_openai()):
                                out.append(RankedFix(TriageFixKind.REPAIR, f"switch on the repair `{n}` alone and "
                                                     "set parallel_tool_calls to true", {"repairs": [n],
                                                     "request": par}, one.message.to_openai(), 2))
                                break
                        else:
                            out.append(RankedFix(TriageFixKind.REPAIR, "switch on the repairs " + ", ".join(
                                f"`{n}`" for n in fired) + " and set parallel_tool_calls to true",
                                {"repairs": fired, "request": par}, both.message.to_openai(), len(fired) + 1))
        except Exception:  # noqa: BLE001 - improved may not build; then no repair fix
            pass
    if mistake == Mistake.TOOLS_NOT_SENT and ctx.get("unsent"):
        change, message, cost, _ev = ctx["unsent"]
        what = ", ".join(_c(t['function']['name']) for t in change["request"]["tools"][-1:])
        extra = (" and switch on " + ", ".join(f"`{n}`" for n in change["repairs"])) if change.get("repairs") else \
            (" and parse at improved fidelity" if "fidelity" in change else "")
        out.append(RankedFix(TriageFixKind.REQUEST, f"send the tool {what} in the request (tools){extra}: the "
                             "output is a call of it", change, message, cost))
    # request edits of the schema
    req = setup.request
    if mistake in (Mistake.UNKNOWN_PARAMETER, Mistake.REPEATED_PROMPT_TAIL) and ctx.get("undeclared") \
            and budget.take(len(ex.output)):
        # declare the argument the model sends (a string) and require only what the call holds
        tool, arg = ctx["undeclared"]
        t = next((t.get("function") or {} for t in req.tools or [] if isinstance(t, dict)
                  and (t.get("function") or {}).get("name") == tool), {})
        keep = [r for r in required_of(t.get("parameters")) if r in ex.output]
        change = {"type": {tool: {arg: "string"}}, "required": {tool: keep}}
        try:
            p = _parse(setup, ex.output, request=apply_request_change(req, change))
            if ok(p):
                # the type of the value the model wrote: a string that is JSON of another type is declared so
                typed = _json_type_of(p.message.to_openai(), tool, arg)
                if typed and budget.take(len(ex.output)):
                    change2 = {"type": {tool: {arg: typed}}, "required": {tool: keep}}
                    p2 = _parse(setup, ex.output, request=apply_request_change(req, change2))
                    if ok(p2) and _json_type_of(p2.message.to_openai(), tool, arg, raw=True) == typed:
                        change, p = change2, p2
                extra = _prompt_tail_fixed(ex, setup, p, change, budget, ok)
                if extra is not None:
                    change, p = extra
                ty = change["type"][tool][arg]
                full = apply_request_change(req, change).to_row().get("tools")
                out.append(RankedFix(TriageFixKind.REQUEST, f"edit the request's schema: declare {_q(arg)} (type "
                                     f"{ty}) in {_c(tool)}" + (f" and require only {keep}" if keep != required_of(
                                         t.get("parameters")) else "") + "".join(
                                         f", and set {k} = {json.dumps(v)}" for k, v in change.items()
                                         if k not in ("type", "required")),
                                     {"request": {**change, "tools": full}}, p.message.to_openai(), 2))
        except Exception:  # noqa: BLE001 - a request that does not build is not offered
            pass
    if mistake in (Mistake.MISSING_REQUIRED, Mistake.TYPE_MISMATCH):
        change: dict[str, Any] = {}
        probe = near[1].message.to_openai() if near else None
        text = ex.output
        for t in req.tools or []:
            f = t.get("function", {}) if isinstance(t, dict) else {}
            params = f.get("parameters") or {}
            if not f.get("name") or f["name"] not in text:
                continue
            if mistake == Mistake.MISSING_REQUIRED:
                keep = [r for r in required_of(params) if r in text]
                if keep != required_of(params):
                    change.setdefault("required", {})[f["name"]] = keep
            elif probe:
                for tc in probe.get("tool_calls") or []:
                    if tc["function"]["name"] == f["name"]:
                        try:
                            keys = list(json.loads(tc["function"]["arguments"] or "{}"))
                        except (ValueError, RecursionError):
                            keys = []
                        for k in keys:
                            change.setdefault("type", {}).setdefault(f["name"], {})[k] = "string"
        if change and budget.take(len(ex.output)):
            try:
                p = _parse(setup, ex.output, request=apply_request_change(req, change))
                if ok(p):
                    what = "; ".join(f"{_c(n)} requires only {v}" for n, v in change.get("required", {}).items()) \
                        or "the argument's type is `string`"
                    full = apply_request_change(req, change).to_row().get("tools")
                    out.append(RankedFix(TriageFixKind.REQUEST, "edit the request's schema: " + what,
                                         {"request": {**change, "tools": full}}, p.message.to_openai(), 2))
            except Exception:  # noqa: BLE001
                pass
    if ctx.get("thinking_fix") and budget.take(len(ex.output)):
        change = ctx["thinking_fix"]
        try:
            p = _parse(setup, ex.output, request=apply_request_change(req, change))
            if ok(p):
                out.append(RankedFix(TriageFixKind.REQUEST, "set the template's thinking flag: " + ", ".join(
                    f"{k} = {json.dumps(v)}" for k, v in change.items()), {"request": change},
                    p.message.to_openai(), 1))
        except Exception:  # noqa: BLE001 - a request the template does not render is not offered
            pass
    expect = ctx.get("expect")
    if mistake == Mistake.REASONING_SETTING and ctx.get("reasoning_kept") and expect is not None:
        # the engine kept the reasoning block as content: no extraction, or a prompt that does not open it
        tries = [(TriageFixKind.REQUEST, "set reasoning_format to none: the engine keeps the reasoning block in the "
                  "content", {"request": {"reasoning_format": "none"}}, None)]
        patch = _prompt_opener_patch(setup, ex, ctx, reasoning_markers(bundle)[0].strip(_WS))
        if patch is not None:
            tries.append((TriageFixKind.TEMPLATE, "patch the template: its generation prompt no longer opens the "
                          f"reasoning (write {_q(patch[0][0][1], 60)} for {_q(patch[0][0][0], 60)})",
                          {"template_patch": patch[0]}, patch[1]))
        for kind, what, change, patched in tries:
            if not budget.take(len(ex.output)):
                break
            try:
                p = _parse(patched, ex.output) if patched is not None else \
                    _parse(setup, ex.output, request=apply_request_change(req, change["request"]))
            except Exception:  # noqa: BLE001 - a change that does not build is not offered
                continue
            if p.clean and gives_expected(p.message.to_openai(), expect, ex.output):
                out.append(RankedFix(kind, what, change, p.message.to_openai(), 1 if kind == TriageFixKind.REQUEST
                                     else 2))
    if mistake in (Mistake.REASONING_SETTING, Mistake.REOPENED_REASONING) and "thinking_fix" not in ctx \
            and (not out or (expect is not None and not any(gives_expected(f.message, expect, ex.output)
                                                            for f in out))):
        # a generation prompt that opens the reasoning whatever the request sets: the template patched not to
        opener = reasoning_markers(bundle)[0].strip(_WS)
        patch = _prompt_opener_patch(setup, ex, ctx, opener)
        if patch is not None and budget.take(len(ex.output)):
            try:
                p = _parse(patch[1], ex.output)
                left = any(m and m.strip(_WS) in (p.message.content or "") for m in markers)
                if not left and (ok(p) or (p.clean and not p.message.tool_calls and not cur.get("tool_calls")
                                           and p.message.to_openai() != cur and opener not in
                                           (p.message.content or "") + (p.message.reasoning_content or ""))):
                    # (a reply without calls is fixed only when no call markup is left in it)
                    out.append(RankedFix(TriageFixKind.TEMPLATE, f"patch the template: its generation prompt no "
                                         f"longer opens the reasoning with {_q(opener)} (write {_q(patch[0][0][1], 60)} "
                                         f"for {_q(patch[0][0][0], 60)})", {"template_patch": patch[0]},
                                         p.message.to_openai(), 2))
            except Exception:  # noqa: BLE001 - a patched template that does not build is not offered
                pass
    if mistake == Mistake.REASONING_SETTING and ctx.get("patch_repairs"):
        patch_, group, message = ctx["patch_repairs"]
        out.append(RankedFix(TriageFixKind.TEMPLATE, f"patch the template: its generation prompt no longer opens the "
                             f"reasoning (write {_q(patch_[0][1], 60)} for {_q(patch_[0][0], 60)}), and switch on "
                             + (", ".join(f"`{n}`" for n in group) + " for the calls' markup" if group else
                                "improved fidelity"),
                             {"template_patch": patch_, **({"repairs": group} if group else {"fidelity": "improved"})},
                             message, 2))
    if ctx.get("reasoning_override") and budget.take(len(ex.output)):
        change = ctx["reasoning_override"]
        try:
            p = _parse(replace(setup, fidelity=change.get("fidelity", setup.fidelity),
                               overrides={**setup.overrides, **change["overrides"]}), ex.output)
            fault = [m for m in ctx.get("fault_markup") or [] if m]
            if ok(p) or (mistake == Mistake.FORMAT_NOT_FOUND and fault and p.clean and not cur.get("tool_calls")
                         and p.message.to_openai() != cur and (p.message.reasoning_content or "").strip(_WS)
                         and not any(m in (p.message.content or "") for m in fault)):
                # (a reply with no calls is fixed when the block the analysis missed leaves its content)
                out.append(RankedFix(TriageFixKind.OVERRIDE, "override the reasoning markers: " + ", ".join(
                    f"{k} = {_q(v)}" for k, v in change["overrides"].items()) + (" (at improved fidelity)" if
                                                                                "fidelity" in change else ""),
                    change, p.message.to_openai(), 3))
        except Exception:  # noqa: BLE001 - an override that does not build is not offered
            pass
    # the reasoning was split off before the output reached us: stop extracting it (re-parsed like the rest)
    if mistake == Mistake.REASONING_SETTING and not cur.get("tool_calls") \
            and req.reasoning_format.value != "none" and budget.take(len(ex.output)):
        change = {"reasoning_format": "none"}
        try:
            p = _parse(setup, ex.output, request=apply_request_change(req, change))
            r_start = reasoning_markers(bundle)[0]
            # without extraction the prompt's own reasoning opener comes back as the content's first line: that
            # is the generation prompt's text, not the model's
            left = (p.message.content or "").strip(_WS)
            if p.clean and p.message.tool_calls and left in ("", r_start) and p.message.to_openai() != cur \
                    and not any(x and x in left for x in markers):
                out.append(RankedFix(TriageFixKind.REQUEST, "set reasoning_format to none: the output is the text "
                                     "after the reasoning, which was already split off, so do not extract reasoning "
                                     "from it again", {"request": change}, p.message.to_openai(), 2))
        except Exception:  # noqa: BLE001 - a request that does not build is not offered
            pass
    # what explain's own candidates re-parsed (request settings, overrides, fidelity)
    passed: list[str] = []      # explain's own candidates that re-parse clean but are no fix, and why
    for fx in ex.fixes:
        if not _marker_free(fx.message, bundle):
            # a setting that leaves reasoning markers in the message fixes nothing
            passed.append(f"{_short(fx.description)} leaves the reasoning's markers in the message")
            continue
        if fx.message.get("tool_calls") and any(m and m.strip(_WS) and m.strip(_WS) in (fx.message.get("content") or "")
                                                for m in markers + ctx["closers"]):
            # a call read while the call's own markup stays in the content (text left unparsed)
            passed.append(f"{_short(fx.description)} reads a call but leaves call markup in the content")
            continue
        src = getattr(setup.template, "source", "") or ""
        left = [t.group(0) for t in _SPECIAL_SHAPE.finditer((fx.message.get("content") or "")
                                                            + (fx.message.get("reasoning_content") or ""))
                if t.group(0) in src]
        if left:
            # the template's own control tokens left in the message: the markup is still unread
            passed.append(f"{_short(fx.description)} leaves the template's control token {_q(left[0])} in the "
                          "message (its markup still unread)")
            continue
        kind = {FixKind.REQUEST: TriageFixKind.REQUEST, FixKind.OVERRIDE: TriageFixKind.OVERRIDE,
                FixKind.FIDELITY: TriageFixKind.FIDELITY}[fx.kind]
        if kind == TriageFixKind.FIDELITY and out and not (
                expect is not None and _expected_rank(fx.message, expect, ex.output)
                < min(_expected_rank(o.message, expect, ex.output) for o in out)):
            continue    # (kept where it gives the expected message more closely than every fix before it)
        added = [t for t in (fx.change.get("request") or {}).get("tools") or [] if isinstance(t, dict)
                 and (t.get("function") or {}).get("description") == "added by explain"]
        if any(not _IDENT.fullmatch(t["function"]["name"]) or _misnamed(t["function"]["name"], req)
               for t in added):
            # a tool offered under a name that is not a name (or another tool's, reworded) renames the fault
            passed.append(f"{_short(fx.description)} offers a tool under the name the model got wrong")
            continue
        if kind == TriageFixKind.OVERRIDE and _turns_call_marker(fx.change.get("overrides") or {}, ctx):
            continue    # an override that makes the call's own marker a content/reasoning marker hides the call
        if kind == TriageFixKind.OVERRIDE and _swaps_own_marker(fx.change.get("overrides") or {}, ctx, bundle):
            # teaching the parser the model's slip makes two parts of the format share a marker
            passed.append(f"{_short(fx.description)} would make two parts of the format share a marker")
            continue
        cost = {TriageFixKind.REQUEST: 2, TriageFixKind.OVERRIDE: 3, TriageFixKind.FIDELITY: 6}[kind]
        if any(_same(fx.message, o.message) and o.cost <= cost for o in out):
            continue
        out.append(RankedFix(kind, fx.description, fx.change, fx.message, cost))
    ctx["passed_candidates"] = passed
    if not out and ctx.get("partial_fix"):
        fired, message, stop = ctx["partial_fix"]
        left = f" at output position {stop}" if stop >= 0 else ""
        what = ("switch on the repairs " + ", ".join(f"`{n}`" for n in fired)) if fired else \
            "parse at improved fidelity"
        out.append(RankedFix(TriageFixKind.REPAIR if fired else TriageFixKind.FIDELITY,
                             f"{what}: it reads the call(s), but the parse is still not clean{left} (a second fault "
                             "of the output, which no change of ours reads)",
                             {"repairs": fired} if fired else {"fidelity": "improved"}, message, 8))
    if ctx.get("open_reasoning"):
        patch = _prompt_open_patch(setup, ctx["open_reasoning"], ctx)
        if patch is not None and budget.take(len(ex.output)):
            try:
                patched = replace(patch[1], overrides={}, disabled=())
                closer = "</" + ctx["open_reasoning"][1:]

                def opened(p: _Parsed) -> bool:
                    return ok(p) and closer not in (p.message.content or "") + (p.message.reasoning_content or "") \
                        and bool((p.message.reasoning_content or "").strip(_WS) + (p.message.content or "").strip(_WS))
                p, group = _parse(patched, ex.output), ()
                if not opened(p) and p.message.tool_calls and budget.take(len(ex.output)):
                    # two faults: the prompt opens the reasoning, and the repairs that fire read the calls' second
                    # fault (each alone first)
                    full = _parse(patched, ex.output, repairs=tuple(TOLERANCE_REPAIRS))
                    fired = _fired(full.message, TOLERANCE_REPAIRS)
                    if opened(full) and fired:
                        p, group = full, tuple(fired)
                        for n in fired[:2]:
                            if not budget.take(len(ex.output)):
                                break
                            one = _parse(patched, ex.output, repairs=(n,))
                            if opened(one) and _calls_of(one.message.to_openai()) == _calls_of(full.message.to_openai()):
                                p, group = one, (n,)
                                break
                if opened(p):
                    out.append(RankedFix(TriageFixKind.TEMPLATE, f"patch the template: its generation prompt opens "
                                         f"the reasoning with {_q(ctx['open_reasoning'])} (write "
                                         f"{_q(patch[0][0][1], 60)} for {_q(patch[0][0][0], 60)})" + (
                                             ", and switch on " + ", ".join(f"`{n}`" for n in group)
                                             + " for the calls' second fault" if group else ""),
                                         {"template_patch": patch[0], **({"repairs": list(group)} if group else {})},
                                         p.message.to_openai(), 2 + len(group)))
            except Exception:  # noqa: BLE001 - a patched template that does not build is not offered
                pass
    if ctx.get("affix"):
        fix = _affix_fix(setup, bundle, ex, ctx["affix"], budget)
        if fix is not None:
            out.append(fix)
    # a template edit from the nearest output's edits: make the template render what the model wrote
    if near:
        patch = _template_patch(setup, near[0], ex.output)
        if patch and patch[1].strip(_WS) != patch[0].strip(_WS) and patch[1].strip(_WS) in ctx["all_markers"]:
            patch = None    # the template would write one of its own markers in another's place: ambiguous
        if patch and budget.take(len(ex.output)):
            old, new = patch
            try:
                from ..jinja.template import ChatTemplate

                src = setup.template.source
                t2 = ChatTemplate(src.replace(old, new), setup.template.name)
                p = _parse(replace(setup, overrides={}, disabled=()), ex.output, template=t2)
                if ok(p):
                    out.append(RankedFix(TriageFixKind.TEMPLATE, f"patch the template: write {_q(new)} where it "
                                         f"writes {_q(old)} ({src.count(old)} place(s))", {"template_patch":
                                         [[old, new]]}, p.message.to_openai(), 5))
            except Exception:  # noqa: BLE001 - a patched template that does not render is not offered
                pass
    # a template that renders no tool calls at all (the analysis found none): add a branch that renders them the
    # way the model writes them (`name` + whitespace + JSON arguments), re-analysed and re-parsed
    if mistake == Mistake.FORMAT_NOT_FOUND and not cur.get("tool_calls"):
        for old, new in _tool_call_branch(setup, ex.output, ctx):
            if not budget.take(len(ex.output)):
                break
            try:
                from ..jinja.template import ChatTemplate

                t2 = ChatTemplate(setup.template.source.replace(old, new), setup.template.name)
                p = _parse(replace(setup, overrides={}, disabled=()), ex.output, template=t2)
            except Exception:  # noqa: BLE001 - a patched template that does not render is not offered
                continue
            if ok(p):
                out.append(RankedFix(TriageFixKind.TEMPLATE, "patch the template: add a branch that renders an "
                                     "assistant turn's tool_calls as the model writes them (the tool's name, then "
                                     "its JSON arguments) before " + _q(old, 60), {"template_patch": [[old, new]]},
                                     p.message.to_openai(), 5))
                break
    # server setting: keep special tokens — the output with only the control tokens of the nearest output put
    # back, re-parsed (at this fidelity, else at improved fidelity)
    special = [e for e in (_shift(near[0]) if near else []) if e.kind == "insert"
               and _SPECIAL_SHAPE.fullmatch(e.new.strip(_WS))]
    if special and mistake == Mistake.SPECIAL_TOKENS_STRIPPED:
        restored = ex.output
        for e in sorted(special, key=lambda e: -e.pos):
            restored = e.apply(restored)
        fix = _keep_special_tokens(setup, budget, ok, restored, "starts " + _q(restored[:30]))
        if fix is not None:
            out.append(fix)
    if mistake == Mistake.SPECIAL_TOKENS_STRIPPED and ctx.get("restored_server") == "spaces":
        restored = ctx["restored"]
        fix = _keep_special_tokens(setup, budget, ok, restored, "reads " + _q(restored[:40]),
                                   server="decode-special-tokens-without-spaces",
                                   what="decode special tokens without spaces between them "
                                        "(spaces_between_special_tokens=false)")
        if fix is not None:
            out.append(fix)
    elif mistake == Mistake.SPECIAL_TOKENS_STRIPPED and ctx.get("restored") and not special:
        restored = ctx["restored"]
        fix = _keep_special_tokens(setup, budget, ok, restored, "reads " + _q(restored[:40]))
        if fix is not None:
            out.append(fix)
    if near and mistake == Mistake.STOP_STRING_STRIPPED and budget.take(len(near[1].output)):
        restored = near[1].output
        try:
            p = _parse(setup, restored)
            # the message may be the one the unclean parse already showed: what changes is that the parse is
            # clean (llama.cpp answers a final parse that is not with an error)
            if p.clean and p.message.tool_calls and not any(x and x in (p.message.content or "") for x in markers):
                closer = near[0][0].new.strip(_WS)
                # (the request we read carries no `stop`: whether one removed the closer is not known, so the fix
                # is said for that case)
                out.append(RankedFix(TriageFixKind.SERVER, f"if a stop sequence removed {_q(closer)}: keep it in the "
                                     "output (include_stop_str_in_output=true, or take it out of the stop sequences "
                                     "the request or server sets): the output then "
                                     "ends " + _q(restored[-30:]), {"server": "keep-stop-string", "output": restored},
                                     p.message.to_openai(), 4))
                unclosed = _unclosed_final_call_fix(setup, ex.output, p.message.to_openai(), budget)
                if unclosed is not None:
                    out.append(unclosed)
        except Exception:  # noqa: BLE001
            pass
    if near and mistake == Mistake.TRAILING_TEXT and ctx.get("trailing_token") and budget.take(len(near[1].output)):
        fix = _strip_stop_fix(setup, near[1].output, "end token and strip it from the output", ok)
        if fix is not None:
            out.append(fix)
    if mistake == Mistake.TRAILING_TEXT and ctx.get("stripped_output") is not None \
            and budget.take(len(ctx["stripped_output"])):
        fix = _strip_stop_fix(setup, ctx["stripped_output"], "end-of-turn token and do not return it", lambda p: (
            p.clean and p.message.to_openai() != cur and not _SPECIAL_SHAPE.search(p.message.content or "")))
        if fix is not None:
            out.append(fix)
    if mistake in (Mistake.TRAILING_TEXT, Mistake.FOREIGN_WRAPPER, Mistake.LEADING_TEXT) \
            and ctx.get("stop_at") is not None:     # (a turn run on after the call, also as the second fault)
        fix = _stop_at_turn_end(setup, ex, ctx["stop_at"], budget)
        if fix is not None:
            out.append(fix)
    if mistake == Mistake.TRAILING_TEXT and ctx.get("repeat"):
        out = [f for f in out if ctx["repeat"][1] not in (f.message.get("content") or "")]   # leaves the copies
        stop = _stop_after_call(setup, ex.output, ctx["repeat"], budget)
        if stop is not None:
            change, message = stop
            out.append(RankedFix(TriageFixKind.SERVER, "stop generation after the call (the format's end-of-call / "
                                 "end-of-turn token as a stop sequence): the output then ends "
                                 + _q(change["output"][-30:]) + (", parsed at improved fidelity" if "fidelity" in
                                                                change else ""), change, message, 4))
    out = _cut_kept_tokens(setup, ex.output, out, ok, budget,
                           ctx["all_markers"] | set(ctx["markers"]) | set(ctx["closers"]))
    fault = [m for m in ctx.get("fault_markup") or [] if m]
    if fault:
        # a change that still leaves the fault's markup in the message fixes nothing (the wrapper's opener after
        # its closer was cut as a "stop token")
        out = [f for f in out if not any(m in (f.message.get("content") or "") for m in fault)]
    out.sort(key=lambda f: (f.cost, _RANK[f.kind]))
    uniq: list[RankedFix] = []
    for f in out:
        if not any(_same(f.message, u.message) and f.kind == u.kind for u in uniq):
            uniq.append(f)
    if ctx.get("needs_call"):
        # the output writes a call: a change that reads it as text (the reply, thinking off) fixes nothing
        uniq = [f for f in uniq if f.message.get("tool_calls")]
    if ctx.get("restored_reasoning"):
        # the reasoning closer was dropped: a setting that reads the whole text as the answer hides the fault
        uniq = [f for f in uniq if (f.message.get("reasoning_content") or "").strip(_WS)]
    if ex.clean:
        # a change whose message differs from this clean parse only by whitespace at the edges of the content or
        # reasoning fixes nothing (llama.cpp keeps the whitespace after an empty think block; improved drops it)
        uniq = [f for f in uniq if not _same_but_edge_whitespace(f.message, cur)]
    expect = ctx.get("expect")
    rel = ctx.get("call_relation")
    calls_wanted = bool(expect.get("tool_calls")) if expect is not None else \
        bool(near and near[1].message.tool_calls) or (rel is not None and rel.relation != Relation.NO_CALL
                                                      and len(rel.matched) >= 2)
    if calls_wanted:
        # the expected message (else the nearest accepted output, or the template's call pieces the output writes)
        # has calls: a change that reads none — a request setting that makes the parse clean with the call left in
        # the content, a parse explain calls suspicious — fixes nothing
        for f in uniq:
            if not f.message.get("tool_calls"):
                ctx.setdefault("passed_candidates", []).append(f"{_short(f.description)} reads no call")
        uniq = [f for f in uniq if f.message.get("tool_calls")]
    if expect is not None:
        rank = {id(f): _expected_rank(f.message, expect, ex.output) for f in uniq}    # (one comparison each)
        for f in uniq:
            f.gives_expected = rank[id(f)] < 2
        # those that give it exactly, then those that give it but for whitespace at the edges, then the rest
        # (stable: the ranking above, by how little each changes, within each part)
        uniq.sort(key=lambda f: rank[id(f)])
    r_marks = reasoning_markers(bundle)
    kept = [(x.strip(_WS), f) for f in ("reasoning_content", "content")
            for x in dict.fromkeys([r_marks[0], *r_marks[1], *markers]) if x and x.strip(_WS) in (cur.get(f) or "")]
    why = "" if uniq else (ctx.get("why_none") or _why_none(mistake, near, ex, setup.request, kept))
    if not uniq and not ctx.get("why_none") and mistake == Mistake.OMITTED_OPENER:
        # the table's reason blames the opener; when the repairs read the call once something else is mended, that
        # is what stops them
        why = _what_stops_repairs(setup, ex.output, budget) or why
    if why and ctx.get("passed_candidates"):
        # explain lists its own candidates beside this: say why a clean re-parse among them is no fix
        many = len(ctx["passed_candidates"]) > 1
        why += (" (the candidate changes listed with the explanation re-parse clean but fix nothing: " if many else
                " (the candidate change listed with the explanation re-parses clean but fixes nothing: ") \
            + "; ".join(ctx["passed_candidates"][:3]) + ")"
    if not uniq and ctx.get("plain_line"):
        why = (f"none of our changes helps, because the call is written as plain lines ({_q(ctx['plain_line'])} on "
               "one line, its argument on the next) with no markup at all: no repair, request edit, override or "
               "template patch can tell a tool's name on a line from the text of an answer — the model must write "
               f"the template's call ({_q(ctx['markers'][0])} …), e.g. under the lazy tool-call grammar")
    if not uniq and mistake == Mistake.TRAILING_TEXT and ctx.get("repeat"):
        why = ("the model kept repeating the call because nothing stopped it, and no cut of the output at its "
               "first copy's end re-parses clean to a message with calls: the server must stop at the call's end "
               "(the format's end-of-call / end-of-turn token as a stop) and the model be re-run")
    return uniq, why


def _affix_fix(setup: _Setup, bundle: Any, ex: Any, piece: str, budget: _Budget) -> RankedFix | None:
    """The template patched to write its markers without ``piece`` (every place the source writes it), re-analysed
    and re-parsed: offered when the output then parses clean to another message with none of the patched markers
    left in its text — at this fidelity, else with the fewest tolerance repairs that read the same message (the
    model's own slips beside the template's suffix). At most four parses."""
    src = _src(setup)
    if piece not in src:
        return None     # (written once, in a variable every marker is built from, is one place)
    try:
        t2 = ChatTemplate(src.replace(piece, ""), getattr(setup.template, "name", ""))
    except Exception:  # noqa: BLE001 - a patched template that does not build is not offered
        return None
    plain = [m.replace(piece, "") for m in _format_markers(getattr(getattr(bundle, "report", None), "analysis",
                                                                      None), bundle) | {
        x.strip(_WS) for x in [reasoning_markers(bundle)[0]] + reasoning_markers(bundle)[1] if x} if piece in m]

    def fixed(p: _Parsed) -> bool:
        text = (p.message.content or "") + (p.message.reasoning_content or "")
        return p.clean and p.message.to_openai() != ex.message and not any(m in text for m in plain) \
            and len(p.message.tool_calls) >= len(ex.message.get("tool_calls") or [])

    base = replace(setup, overrides={}, disabled=())
    tries: list[tuple[str, ...] | None] = [None, tuple(TOLERANCE_REPAIRS)]
    while tries and budget.take(len(ex.output)):
        repairs = tries.pop(0)
        try:
            p = _parse(base, ex.output, template=t2, repairs=repairs)
        except Exception:  # noqa: BLE001 - a patched template that does not render is not offered
            return None
        if not fixed(p):
            continue
        fired = _fired(p.message) if repairs is not None else []
        if repairs is not None and fired and tuple(fired) != repairs:
            tries = [tuple(fired)]     # the repairs that fired, alone: the message must stay the same
            whole = p.message.to_openai()
            while tries and budget.take(len(ex.output)):
                q = _parse(base, ex.output, template=t2, repairs=tries.pop(0))
                if fixed(q) and _same(q.message.to_openai(), whole):
                    p = q
        change: dict[str, Any] = {"template_patch": [[piece, ""]]}
        if repairs is not None:
            change.update({"repairs": fired} if fired else {"fidelity": "improved"})
        return RankedFix(TriageFixKind.TEMPLATE, f"patch the template: write its markers without {_q(piece)} "
                         f"({src.count(piece)} place(s)), as the model writes them"
                         + (", and switch on " + ", ".join(f"`{n}`" for n in fired) if fired else
                            ", at improved fidelity" if repairs is not None else ""),
                         change, p.message.to_openai(), 5)
    return None


def _strip_stop_fix(setup: _Setup, restored: str, what: str, accept: Callable[[Any], bool]) -> RankedFix | None:
    """The server fix ``strip-stop-token``: ``restored`` (the output without the stop token the server should stop
    on, ``what`` says which and how) re-parsed, offered when ``accept`` takes the parse; else None."""
    try:
        p = _parse(setup, restored)
        if not accept(p):
            return None
        said = f"stop at the {what} (the server's stop list / skip_special_tokens): the output then ends "
        return RankedFix(TriageFixKind.SERVER, said + _q(restored[-30:]),
                         {"server": "strip-stop-token", "output": restored}, p.message.to_openai(), 4)
    except Exception:  # noqa: BLE001 - no parser, no fix
        return None


def _stop_at_turn_end(setup: _Setup, ex: Any, at: int, budget: _Budget) -> RankedFix | None:
    """The output cut where the parse stopped after the calls (the turn's end), re-parsed: at this fidelity, else
    with the fewest tolerance repairs that read it clean (a second slip of the call, such as a control token before
    it). Offered when it parses clean to the same calls with no control token left in the content. At most three
    parses."""
    cut = ex.output[:at]
    calls = _calls_of(ex.message)
    tries: list[tuple[str, ...] | None] = [None, tuple(TOLERANCE_REPAIRS)]
    while tries and budget.take(len(cut)):
        repairs = tries.pop(0)
        try:
            p = _parse(setup, cut, repairs=repairs)
        except Exception:  # noqa: BLE001 - no parser, no fix
            return None
        content = p.message.content or ""
        if not (p.clean and p.message.tool_calls and _calls_of(p.message.to_openai()) == calls
                and not _SPECIAL_SHAPE.search(content) and not content.strip(_WS)):
            continue
        fired = _fired(p.message) if repairs is not None else []
        change: dict[str, Any] = {"server": "stop-after-call", "output": cut}
        if repairs is not None:
            if fired and budget.take(len(cut)):
                q = _parse(setup, cut, repairs=tuple(fired))
                if q.clean and _same(q.message.to_openai(), p.message.to_openai()):
                    p = q
                else:
                    fired = list(repairs)
            change.update({"repairs": fired} if fired else {"fidelity": "improved"})
        return RankedFix(TriageFixKind.SERVER, "stop generation at the end of the call turn (its end token as a "
                         "stop sequence): the output then ends " + _q(cut[-30:])
                         + (", with " + ", ".join(f"`{n}`" for n in fired) + " for the call's own slip" if fired
                            else ""), change, p.message.to_openai(), 4)
    return None


def _cut_kept_tokens(setup: _Setup, output: str, fixes: list[RankedFix], ok: Any, budget: _Budget,
                     own: set[str]) -> list[RankedFix]:
    """A fix that reads the calls but leaves, as the whole content, markup tokens the output ends with
    (``<start_function_response>``: the next turn's opener the model went on to) leaves markup in the message; the
    server fix "stop at that token and strip it" with the same change is put in its place when the cut output
    re-parses to the same calls and no content, else the fix stays. A marker of the format itself (``own``: a
    call closer the model wrote without its opener) is the call's markup, not a token the model went on to."""
    out: list[RankedFix] = []
    for f in fixes:
        left = (f.message.get("content") or "").strip(_WS)
        toks = [m.group(0) for m in _TOKEN.finditer(left)]
        tail = output.rstrip(_WS)
        if not f.message.get("tool_calls") or not toks or any(t in own for t in toks) or "".join(toks) != re.sub(r"\s+", "", left) \
                or not tail.endswith(toks[-1]) or "server" in f.change:
            out.append(f)
            continue
        cut = tail[:len(tail) - len(left)] if tail.endswith(left) else ""
        change = {**f.change, "server": "strip-stop-token", "output": cut}
        try:
            if not cut.strip(_WS) or not budget.take(len(cut)):
                raise ValueError
            p = _parse(replace(setup, fidelity=change.get("fidelity", setup.fidelity)), cut,
                       repairs=tuple(change["repairs"]) if "repairs" in change else None)
        except Exception:  # noqa: BLE001 - no cut, or no parser: the fix stays as it was
            out.append(f)
            continue
        if ok(p) and not (p.message.content or "").strip(_WS) and _calls_of(p.message.to_openai()) == \
                _calls_of(f.message):
            out.append(RankedFix(TriageFixKind.SERVER, f"stop at {_q(toks[0])} and strip it from the output (the "
                                 "server's stop list) — the model went on past the call's end — "
                                 f"with {f.description}", change, p.message.to_openai(), max(4, f.cost)))
        else:
            out.append(f)
    return out


def _same_but_edge_whitespace(a: dict[str, Any], b: dict[str, Any]) -> bool:
    def norm(m: dict[str, Any]) -> dict[str, Any]:
        return {k: (v.strip(_WS) if k in ("content", "reasoning_content") and isinstance(v, str) else v)
                for k, v in m.items() if v not in (None, "")}
    return norm(a) == norm(b)


def _unclosed_final_call_fix(setup: _Setup, output: str, closed: dict[str, Any], budget: _Budget
                             ) -> RankedFix | None:
    """The repair ``unclosed-final-call`` alone, offered when it fires on ``output`` and gives ``closed``, the
    message the output with its missing closer put back parses clean to. Its parse still reports the output as
    ending inside the call (the repair completes the closer for the message only), so the fix says so; None
    otherwise (one parse)."""
    if not budget.take(len(output)):
        return None
    q = _parse(setup, output, repairs=(UNCLOSED_FINAL_CALL,))
    fired = any(getattr(r, "name", "") == UNCLOSED_FINAL_CALL for r in q.message.repairs)
    if not fired or q.message.to_openai() != closed:
        return None
    return RankedFix(TriageFixKind.REPAIR, f"switch on the repair `{UNCLOSED_FINAL_CALL}` alone (improved fidelity "
                     "with only this repair): it reads the call as the output with its closer put back reads it (the "
                     "parse still reports the output as ending inside the call)", {"repairs": [UNCLOSED_FINAL_CALL]},
                     q.message.to_openai(), 1)


def _stop_after_call(setup: _Setup, output: str, repeat: tuple[int, str, int], budget: _Budget
                     ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The output cut where its first call ends — after a control token of the first copy (the last first), or
    where the second copy starts — that parses clean to calls with no content, at this fidelity else at improved:
    ``(change, message)``, or None."""
    second = repeat[0]
    first = second - len(repeat[1])
    cuts = [m.end() for m in _TOKEN.finditer(output, first, second)][::-1] + [second]
    for p in list(dict.fromkeys(cuts))[:4]:
        for fid in dict.fromkeys((setup.fidelity, "improved")):
            if not budget.take(p):
                return None
            try:
                q = _parse(replace(setup, fidelity=fid), output[:p])
            except Exception:  # noqa: BLE001 - a parser that does not build at that fidelity
                continue
            # (content is allowed when it is the text the model wrote before its first call, not a copy)
            text = (q.message.content or "").strip(_WS)
            if q.clean and q.message.tool_calls and (not text or (text in output[:first]
                                                                   and repeat[1].strip(_WS) not in text)):
                change: dict[str, Any] = {"server": "stop-after-call", "output": output[:p]}
                if fid != setup.fidelity:
                    change["fidelity"] = fid
                return change, q.message.to_openai()
    return None


_IDENT = re.compile(r"[A-Za-z_][\w.\-]{0,127}")


def _misnamed(called: str, req: Any) -> str:
    """The offered tool whose name's words all occur in ``called`` (``apply_tags`` for "Apply tags to a document"),
    or ``""``."""
    words = set(re.findall(r"[a-z0-9]+", called.lower()))
    for t in req.tools or []:
        name = (t.get("function") or {}).get("name") if isinstance(t, dict) else None
        parts = set(re.findall(r"[a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", name or "").lower()))
        if name and name != called and parts and parts <= words:
            return name
    return ""


def _turns_call_marker(overrides: dict[str, Any], ctx: dict[str, Any]) -> bool:
    """An override of a field other than the tool format's whose value is a call opener/closer (or the last
    token of one): it "re-parses" only by reading the call marker as content or reasoning."""
    marks = [m.strip(_WS) for m in ctx["markers"] + ctx["closers"] if m and m.strip(_WS)]
    for k, v in overrides.items():
        if str(k).startswith("tools.") or not isinstance(v, str) or not v.strip(_WS):
            continue
        if any(v.strip(_WS) == m or m.endswith(v.strip(_WS)) for m in marks):
            return True
    return False


def _swaps_own_marker(overrides: dict[str, Any], ctx: dict[str, Any], bundle: Any) -> bool:
    """An override that sets a format field to another marker the format already writes in another role
    (``per_call_end`` = ``</arg_value>``): it "re-parses" by teaching the parser the model's slip, and the two
    parts of the format would then share a marker."""
    from .fixes import _field_value

    a = getattr(getattr(bundle, "report", None), "analysis", None)
    for k, v in overrides.items():
        vs = v.strip(_WS) if isinstance(v, str) else ""
        cur = _field_value(a, str(k)).strip(_WS) if a is not None else ""
        if vs and vs != cur and vs in ctx["all_markers"]:
            return True
    return False


def _marker_free(message: dict[str, Any], bundle: Any) -> bool:
    r_start, r_ends = reasoning_markers(bundle)
    text = (message.get("content") or "") + (message.get("reasoning_content") or "")
    return not any(x and x in text for x in [r_start] + r_ends)


def _template_patch(setup: _Setup, edits: list[Edit], output: str) -> tuple[str, str] | None:
    src = getattr(setup.template, "source", "") or ""
    if len(edits) != 1:
        return None
    e = edits[0]
    lit = e.new.strip(_WS)
    if e.kind == "replace" and any(ch in _JINJA_SYNTAX for ch in e.old.strip('"')):
        return None     # the model's text goes into the Jinja source: nothing that could quote out or open a tag
    if e.kind == "replace" and e.new.strip('"') and e.new in src:
        return e.new, e.old
    if e.kind == "replace" and f"'{e.new.strip(chr(34))}'" in src:
        return f"'{e.new.strip(chr(34))}'", f"'{e.old.strip(chr(34))}'"
    if e.kind == "insert" and lit and src.count(lit) == 1 and _TOKEN.fullmatch(lit):
        return lit, ""
    return None


_JINJA_SYNTAX = frozenset("{}%#'\"\\\n\r")


_ROLE_BRANCH = re.compile(r"\{%-?\s{0,4}(el)?if\s{1,4}(role|\w{1,20}\.role|\w{1,20}\[['\"]role['\"]\])\s{0,4}==\s{0,4}"
                          r"(['\"])assistant\3[^%{}]{0,80}?-?%\}")
_NAME_THEN_JSON = re.compile(r"[ \t]{0,4}\n?[ \t]{0,4}\{")


def _tool_call_branch(setup: _Setup, output: str, ctx: dict[str, Any]) -> list[tuple[str, str]]:
    """Template patches adding a ``tool_calls`` branch before the template's (first) assistant branch, for an
    output that is a requested tool's name, whitespace, and a JSON object: ``[(old, new)]``, the assistant
    prefix as the template writes it and with its trailing whitespace dropped (the generation prompt may end
    before it). Only whitespace from the output goes into the patch, never the output's text."""
    src = getattr(setup.template, "source", "") or ""
    text = output.lstrip(_WS)
    name = next((n for n in ctx["names"] if n and text.startswith(n)), "")
    sep = _NAME_THEN_JSON.match(text, len(name)) if name else None
    if sep is None:
        return []
    try:
        json.JSONDecoder().raw_decode(text, sep.end() - 1)
    except ValueError:
        return []
    heads = [m for m in _ROLE_BRANCH.finditer(src) if "tool_calls" not in m.group(0)]
    if not heads or src.count(heads[0].group(0)) != 1:
        return []
    head = heads[0]
    loops = re.findall(r"\{%-?\s{0,4}for\s{1,4}(\w{1,30})\s{1,4}in\s{1,4}messages\b", src[:head.start()])
    var = loops[-1] if loops else "message"
    lit = re.match(r"[^{]{0,80}", src[head.end():]).group(0)
    kw = "elif" if head.group(1) else "if"
    role = head.group(2)
    cond = f"{kw} {role} == 'assistant' and {var}.tool_calls"
    args = "tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson"
    out = []
    for prefix in dict.fromkeys((lit.rstrip(_WS), lit)):
        branch = ("{%- " + cond + " %}" + prefix + "{%- for tc in " + var + ".tool_calls %}{{ tc.function.name }}"
                  + sep.group(0)[:-1] + "{{ " + args + " }}{%- endfor %}")
        old = head.group(0)
        new = branch + (old if head.group(1) else old.replace("if", "elif", 1))
        out.append((old, new))
    return out


_WHY = {
    Mistake.STOP_STRING_STRIPPED: "the closer is missing from the output and no repair of ours reads the call "
                                  "without it: if a stop sequence removed it, keep it in the output "
                                  "(include_stop_str_in_output) or take it out of the stop sequences; if max_tokens "
                                  "ran out, raise it and re-run",
    Mistake.CUT_SHORT: "the output ends before the call was written: no parser, request or template change can "
                       "produce what was never generated — raise max_tokens / drop the stop string and re-run",
    Mistake.TEMPLATE_MODEL_MISMATCH: "the model writes a call syntax the template never renders and no repair "
                                     "reads: a different template (the one the model was trained with) or a "
                                     "handler for that syntax would be needed — none of ours applies",
    Mistake.FOREIGN_WRAPPER: "the wrapper is not one a repair removes and the call inside it is not in the "
                             "template's shape: the model's output (or a new repair) would have to change",
    Mistake.OMITTED_MARKER: "the missing marker is inside the call and no repair tolerates it; a template edit "
                            "that drops the marker would make other outputs ambiguous — only the model's output "
                            "(or a new repair) can fix it",
    Mistake.CALL_OUTSIDE_SECTION: "the call sits where the format has no calls (the reasoning / analysis channel): "
                                  "accepting it there would change the format itself — a new repair would be "
                                  "needed",
    Mistake.SPECIAL_TOKENS_STRIPPED: "the decoder dropped the control tokens: keep special tokens on the server "
                                     "(skip_special_tokens=false); the stripped text cannot be re-parsed as is",
    Mistake.TOOLS_NOT_SENT: "the request carries no tools, so the parser reads no call, and no change of ours adds "
                            "the tools the model was given (their names and parameters are not in the request): send "
                            "them and parse this output again",
    Mistake.CALL_ID_SHAPE: "the call id is not the template's shape and no repair of ours reads an id of that shape "
                           "to the message asked for: only the model's output (or a new repair) can change it",
    Mistake.TRAILING_TEXT: "the format, as requested, allows nothing after the call it reads; accepting text there "
                           "needs a new repair",
    Mistake.OMITTED_OPENER: "no repair reads a call without its opener in this format (nor one whose opener "
                            "the model invented)",
    Mistake.OMITTED_CLOSER: "the call's closer is missing (or written as another marker of the format) and no "
                            "repair reads the call without it; teaching the parser to take that marker as the "
                            "closer would make the format ambiguous — only the model's output (or a new repair) "
                            "can change",
    Mistake.REASONING_SETTING: "the model writes its reasoning without the opener the generation prompt does not "
                               "write either, and no repair reads that here: a template whose generation prompt "
                               "opens the reasoning (the one the model was trained with) would be needed",
    Mistake.REASONING_NOT_CLOSED: "the call is written inside the reasoning, which the format never reads calls "
                                  "from, and no repair of ours moves it out: the model must close the reasoning "
                                  "before calling (or a new repair read calls there)",
    Mistake.TYPE_MISMATCH: "the value is not of its schema's type (or is written as Python, not JSON) and no repair "
                           "or schema edit of ours reads it: the model's output must change — the lazy tool-call "
                           "grammar constrains the arguments to the schema",
    Mistake.UNKNOWN_TOOL: "the model called a name the request does not offer; offering a tool under that name "
                          "would only rename the fault — the model's output (or the tool's name) must change",
    Mistake.LEADING_TEXT: "the format, as requested, has the call turn start with the call (or its reasoning "
                          "block), and no repair of ours reads a call after text here: a new repair that reads "
                          "the text before the call as content (as calls-after-text does for the pythonic and "
                          "Gemma formats) would be needed, or the model's output must change",
    Mistake.REPEATED_PROMPT_TAIL: "the output writes again what the generation prompt already ends with, and no "
                                  "repair of ours skips it here (repeated-prompt-tail and repeated-turn-header read "
                                  "a repeated section or header): the model's output (or a new repair) must change",
    Mistake.ANALYSIS_MISREAD: "the output is what the template renders, but the analysis misread the template's "
                              "format and no override or repair of ours re-parses it: the analysis must be "
                              "mended (an analysis override, or a repair of improved fidelity that reads the "
                              "template's real markers) — the model made no mistake",
}


def _short(description: str, n: int = 70) -> str:
    """A fix's own description, cut at ``n`` characters; the names in it may be the model's, so invisible, bidi
    and control characters are escaped."""
    from ..escapes import escape_invisible

    d = escape_invisible(description, keep="")
    return d if len(d) <= n else d[:n - 1] + "…"


_NAMED_TAG = re.compile(r"<(/?)([A-Za-z_][\w\-]{0,40})(?:[=\s][^<>\n]{0,200})?>")
_ESCAPE = re.compile(r"\\(.)", re.S)


def _what_stops_repairs(setup: _Setup, out: str, budget: Any) -> str:
    """Why no repair reads a call when it is not the omitted opener: the repairs (improved fidelity, every
    tolerance repair) read the call once the tags the output leaves open at its end are closed (Qwen3-Coder's
    ``<function=…>`` / ``<parameter=…>`` never closed), or once a backslash escape JSON does not have (``\\P``) is
    escaped. At most two parses; ``""`` when neither mends it."""
    stack: list[str] = []
    tags = list(itertools.islice(_NAMED_TAG.finditer(out), 257))
    for m in tags if len(tags) <= 256 else []:     # (the open tags at the end are known only from all of them)
        if not m.group(1):
            stack.append(m.group(2))
        elif m.group(2) in stack:
            del stack[len(stack) - 1 - stack[::-1].index(m.group(2)):]
    if stack and budget.take(len(out)):
        closers = [f"</{n}>" for n in reversed(stack)]
        p = _parse(setup, out.rstrip(_WS) + "".join("\n" + c for c in closers), repairs=TOLERANCE_REPAIRS)
        if p.clean and p.message.tool_calls:
            return (f"what stops the repairs is not the opener: the output ends with the call still open "
                    f"({', '.join(_q('<' + n) for n in stack[:3])} never closed), which none of our repairs reads "
                    f"— with {_q(''.join(closers))} appended, the repairs read the call: only the model's output "
                    "(a complete call) can change")
    bad = [m for m in itertools.islice(_ESCAPE.finditer(out), 4096) if m.group(1) not in '"\\/bfnrtu']
    if bad and budget.take(len(out)):
        cuts = [0] + [m.start() for m in bad] + [len(out)]
        mended = "\\".join(out[a:b] for a, b in zip(cuts, cuts[1:]))     # (one pass: linear in the output)
        p = _parse(setup, mended, repairs=TOLERANCE_REPAIRS)
        if p.clean and p.message.tool_calls:
            return (f"what stops the repairs is not the opener: the call's JSON writes {_q(bad[0].group(0))}, a "
                    "backslash escape JSON does not have, and no repair reads invalid JSON — with the backslash "
                    "escaped, the repairs read the call: only the model's output can change")
    return ""


def _why_none(mistake: Mistake, near: Any, ex: Any, req: Any = None, left: list[tuple[str, str]] | None = None
              ) -> str:
    """Why no change of ours helps; ``left``: the format's markers the message keeps, with the field each is in."""
    named = _json_call_name(ex.message.get("content") or ex.message.get("reasoning_content") or "")

    if req is not None and named is not None and named not in tool_names(req) \
            and mistake in (Mistake.TEMPLATE_MODEL_MISMATCH, Mistake.UNKNOWN_TOOL):
        near_name = _misnamed(named, req)
        return (f"the call names {_q(named)}, which the request does not declare"
                + (f" (the model misspelt {_q(near_name)})" if near_name else "")
                + ": no repair, request edit, override or template patch of ours renames a call — offering a tool "
                  "under the misspelt name would hide the fault; constrain the model to the declared names (the "
                  "lazy tool-call grammar enumerates them) or prompt it with the template's format")
    other = getattr(ex, "other", None) or {}
    if mistake not in _WHY and other.get("content") \
            and len(other.get("tool_calls") or []) > len(ex.message.get("tool_calls") or []):
        # the other fidelity's message, shown below, reads the call: what none does is read it clean
        fid = "improved" if getattr(ex, "fidelity", "llama.cpp") == "llama.cpp" else "llama.cpp"
        left = other.get("content") or ""
        return (f"no change of ours re-parses this output clean to a message with calls: at {fid} fidelity the "
                f"call is read but text is left ({_q(left, 40) if left.strip(_WS) else repr(left)} in the content), "
                "so that parse is not clean")
    calls = ex.message.get("tool_calls") or []
    if calls and mistake not in _WHY:
        # the parse already reads the calls: what no change does is read them without the markup left in the message
        kept = " or ".join(f"{_q(x)} in its {'reasoning' if f == 'reasoning_content' else 'content'}"
                           for x, f in (left or [])[:2])
        return (f"the parse already reads the call{'s' if len(calls) > 1 else ''}, and no change of ours (repair, "
                "request, override, template patch, server setting) re-parses this output to a message "
                + (f"without {kept}" if kept else "other than this one"))
    return _WHY.get(mistake, "no change of ours (repair, request, override, template patch, server setting) "
                             "re-parses this output to a message with calls")


# ------------------------------------------------------------------------------------------------ entry


def triage(ex: Any, setup: _Setup, bundle: Any, *, seconds: float = TIME_BUDGET, parses: int = MAX_PARSES,
           parse_cost: float = 0.0, reexplain: Callable[..., Any] | None = None,
           expect: dict[str, Any] | None = None) -> Triage:
    """The mistake, the nearest accepted output and the ranked fixes of an explanation (see the module doc).
    ``parse_cost``: seconds one parse of this output took (a parse is not started when it would overrun).
    ``reexplain``: :func:`core.explain.explain.explain`, for the rules that read the output again under another
    request (passed in: explain calls the triage, so the triage cannot import it); without it they are skipped.
    ``expect``: the message the user expected (an OpenAI message): it decides the readings the output alone leaves
    open (:func:`_expected_reading`) and each fix says whether it gives it, those that do ranked first."""
    why = dialect_failure(setup) if getattr(ex, "in_transformers_dialect", None) is not None else None
    if why is not None:
        return _in_transformers_dialect(ex, setup, why, seconds=seconds, parses=parses, parse_cost=parse_cost,
                                        reexplain=reexplain, expect=expect)
    if not ex.output.strip(_WS):
        # nothing was generated: no call was cut and no marker omitted, whatever the parser expected next
        return Triage(Mistake.NONE, "the output is empty: the model wrote nothing (no text, no call)", [],
                      no_fix="there is no output to re-parse: only the model (or the server that returned it) "
                             "can change")
    budget = _Budget(seconds, parses, parse_cost)
    ctx = _context(setup, bundle)
    ctx["budget"], ctx["setup"], ctx["reexplain"], ctx["expect"] = budget, setup, reexplain, expect
    ctx["output"] = ex.output
    tools = bool(setup.request.tools)
    near = None
    if tools and not (ex.clean and ex.message.get("tool_calls") and not ex.findings
                      and not _SPECIAL_SHAPE.search(ex.message.get("content") or "")):
        near = nearest_output(setup, bundle, ex.output, budget, ctx, stop=ex.stop)
    elif tools and expect is not None and not gives_expected(ex.message, expect, ex.output):
        # a clean parse with calls, but not the message the user expected: the nearest output that gives it
        near = nearest_output(setup, bundle, ex.output, budget, ctx, stop=ex.stop, want=expect)
    content = ex.message.get("content") or ""
    if ex.clean and not ex.findings and ex.message.get("tool_calls") and not _SPECIAL_SHAPE.search(content) \
            and not any(m and m in content for m in ctx["markers"]) and _marker_free(ex.message, bundle) \
            and not _reasoning_from_prompt_only(ex, bundle, ctx) and not _reasoning_kept(ex, expect):
        # the format read the calls and left nothing marker-like: the loose rules below (call syntax of another
        # family, a recipient on the analysis channel) describe misreads, not a parse like this one
        return Triage(Mistake.NONE, "the parse is clean and nothing suspicious was found", [],
                      searched=budget.total - budget.left)
    mistake, evidence = classify_mistake(ex, setup, bundle, near, ctx)
    if ctx.get("near") and (near is None or ctx.get("near_replaces")):
        near = ctx["near"]      # a nearest output the classification constructed (escaped line breaks, a wrapper)
    if ex.clean and not ex.findings and mistake == Mistake.NONE:
        return Triage(Mistake.NONE, "the parse is clean and nothing suspicious was found", evidence,
                      searched=budget.total - budget.left)
    nearest = None
    if near:
        edits = _shift(near[0])
        nearest = NearestOutput(edits, near[1].output, near[1].message.to_openai(),
                                sentence_of(edits, ex.output, frozenset({0}) if _learned_separator(
                                    setup, edits, ex.output, ctx) else frozenset()),
                                diff_of(edits, ex.output))
    fixes, why = ranked_fixes(ex, setup, bundle, mistake, near, budget, ctx)
    if nearest:
        rep = [f for f in fixes if f.kind == TriageFixKind.REPAIR]
        if rep:
            nearest.repair = ", ".join(rep[0].change["repairs"])
    sentence = ctx.get("headline") or (nearest.sentence if nearest else (evidence[-1] if evidence else
                                                                         mistake.value))
    parts = sentence.split("; then ")
    if len(parts) > 1:
        # the headline names one mistake, the first the edits meet; the others follow in the evidence
        sentence = parts[0]
        evidence = evidence + ["the nearest accepted output also needs: " + "; then ".join(parts[1:])]
    # the relation goes with the triage when it stands behind the mistake: it decided it, or it names the class the
    # rules named (a view shows the template's pieces against the output's markup either way)
    rel, decided = ctx.get("call_relation"), bool(ctx.get("relation_decided"))
    if not decided and (rel is None or rel.relation not in DECISIVE or rel.relation.value != mistake.name):
        rel = None
    return Triage(mistake, sentence, evidence, nearest, fixes, why, budget.total - budget.left, budget.hit,
                  rel, decided and rel is not None, budget_limit=budget.limit.value)


def _in_transformers_dialect(ex: Any, setup: _Setup, why: str, **budget: Any) -> Triage:
    """The triage of a template llama.cpp's Jinja dialect cannot render (no parser at llama.cpp fidelity): the
    model's mistake is read where the template renders — improved fidelity, improvement transformers-dialect —
    after one line saying so; every fix there needs that fidelity too, so its change says so."""
    imp = replace(setup, fidelity="improved", only_repairs=None)
    there = ex.in_transformers_dialect
    tg = triage(there, imp, build_bundle(imp), **budget)   # (the expected message too, in ``budget``)
    tg.evidence.insert(0, dialect_line(why))
    for f in tg.fixes:
        f.change = {"fidelity": "improved", **f.change}
    if tg.mistake == Mistake.NONE and there.clean and there.message.get("tool_calls"):
        tg.fixes.insert(0, RankedFix(TriageFixKind.FIDELITY, "parse at improved fidelity (improvement "
                                     "transformers-dialect renders the template)", {"fidelity": "improved"},
                                     there.message, 6))
        tg.sentence = dialect_line(why)
        if not ex.message.get("tool_calls"):
            # llama.cpp serves no parser, so its message is the whole output as content while the template's own
            # parser reads calls: no format was found at this fidelity — not "nothing wrong"
            tg.mistake, tg.no_fix = Mistake.FORMAT_NOT_FOUND, ""
            tg.evidence.append("at llama.cpp fidelity no tool-call format exists for this template (it does not "
                               "render there), so the calls the template's own format reads stay content")
    return tg


def apply_fix(template: Any, request: Any, output: str, change: dict[str, Any], fidelity: str = "llama.cpp"
              ) -> tuple[dict[str, Any], bool]:
    """Re-parse ``output`` with ``change`` made (the ``change`` of a :class:`RankedFix` or a hand-written one:
    ``repairs``, ``request``, ``overrides``, ``fidelity``, ``template_patch``, ``server`` + ``output``) and
    return ``(message, clean)``."""
    from ..jinja.template import ChatTemplate

    setup = _Setup(template, request, fidelity, dict(change.get("overrides") or {}))
    if "fidelity" in change:
        setup = replace(setup, fidelity=change["fidelity"])
    if "request" in change:
        setup = replace(setup, request=apply_request_change(request, change["request"]))
    if "template_patch" in change:
        src = template.source
        for old, new in change["template_patch"]:
            src = src.replace(old, new)
        setup = replace(setup, template=ChatTemplate(src, template.name))
    if "server" in change:
        output = change["output"]
    p = _parse(setup, output, repairs=tuple(change["repairs"]) if "repairs" in change else None)
    return p.message.to_openai(), p.clean
