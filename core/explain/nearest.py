"""The nearest accepted output (issue 26): the fewest edits of a model's output that make it parse.

From the parse's stop point, a bounded search tries small edits of the *output* — insert what the parser expected
there, delete what it could not place, replace a field name by the template's, insert the template's call opener
where call-like text starts, close what was left open — up to :data:`MAX_EDITS`, and keeps the first set whose
parse is clean, has calls and leaves no marker in content. The edits read as the model's mistake in one sentence
(:func:`sentence_of`) and as a diff (:func:`diff_of`): found by construction, not guessed.

Failure model: every candidate is one linear parse of the output, and the search shares a budget of parses and
characters (:class:`_Budget`, work: the same on any machine) with the fixes :mod:`core.explain.triage` ranks after
it, with a backstop of CPU seconds for hostile outputs; when the budget runs out the search reports what it found so
far (``budget_hit``, and which bound: ``limit``), never a partial edit.
"""

from __future__ import annotations

import enum
import itertools
import json
import re
import time
from dataclasses import dataclass, replace
from typing import Any

from ..chat.repairs import TOLERANCE_REPAIRS
from ..chat.roundtrip import compare_messages, expected_message
from ..escapes import code_span
from .model import MARKER_TOKEN as _TOKEN
from .model import Setup as _Setup
from .model import WS as _WS
from .model import stop_point as _stop_point
from .model import visible_text as _visible
from .model import properties_of, reasoning_markers, required_of, tool_parameters, tool_schemas
from .renders import _rendered_call

MAX_EDITS = 3
MAX_PARSES = 40
TIME_BUDGET = 2.0          # CPU seconds for the nearest-output search and the fixes together (a backstop)
TRIAGE_CHARS = 2 * 1024 * 1024   # characters the triage's parses may read in all (work linear in the output)
_KEY_ALIASES = ("arguments", "parameters", "params", "args", "input")
_JSON_CALL_START = re.compile(r'\{\s{0,40}"name"\s{0,8}:')
_SPECIAL_SHAPE = re.compile(r"<\|[^|<>\n]{1,40}\|>|<｜[^｜<>\n]{1,40}｜>|\[[A-Z_]{3,30}\]")


@dataclass
class Edit:
    """One edit of the output: ``kind`` insert / delete / replace / move at ``pos`` (output index), ``old`` the
    text removed, ``new`` the text put there (a ``move`` puts the same members back in another order)."""

    kind: str
    pos: int
    old: str = ""
    new: str = ""

    def apply(self, s: str) -> str:
        """``s`` with this edit made."""
        return s[:self.pos] + self.new + s[self.pos + len(self.old):]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"kind": self.kind, "pos": self.pos, "old": self.old, "new": self.new}


@dataclass
class NearestOutput:
    """The fewest edits found that make the output parse clean to a message with calls; ``repair``: a repair of
    improved fidelity that already accepts the original output (``""`` if none)."""

    edits: list[Edit]
    output: str
    message: dict[str, Any]
    sentence: str
    diff: str
    repair: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"edits": [e.to_json() for e in self.edits], "output": self.output, "message": self.message,
                "sentence": self.sentence, "diff": self.diff, "repair": self.repair}


def _q(s: str, n: int = 40) -> str:
    s = s if len(s) <= n else s[:n] + "…"
    return code_span(_visible(s))


# ------------------------------------------------------------------------------------------------ parsing


class Limit(str, enum.Enum):
    """The bound of :class:`_Budget` that stopped the triage's search."""

    NONE = ""
    PARSES = "re-parses"
    CHARACTERS = "characters"
    CPU = "CPU time"


def cpu_seconds() -> float:
    """CPU seconds this thread has spent: the clock of every explain time bound. A loaded machine stretches the
    wall time of the same work, not its CPU time, so the work that fits — and so the answer — stays the same (the
    app explains in a worker process, one explanation at a time, on one thread)."""
    return time.thread_time()


class _Budget:
    """Re-parses and characters the search may still spend (work, so the answer is a function of the input), and
    ``seconds`` of CPU (:func:`cpu_seconds`) as a backstop that only hostile outputs reach: a parse is not started
    when the last one's cost (``parse_cost`` before the first) would pass it. ``limit``: the bound that stopped it."""

    def __init__(self, seconds: float, parses: int, parse_cost: float = 0.0, chars: int = TRIAGE_CHARS):
        self.end = cpu_seconds() + seconds
        self.left = parses
        self.total = parses
        self.hit = False
        self.limit = Limit.NONE
        self.last: float | None = None
        self.first = parse_cost
        self.chars = chars

    def take(self, n: int = 0) -> bool:
        """One more parse of ``n`` characters, if the parse and character budgets allow and the last parse's
        CPU cost still fits in the backstop."""
        now = cpu_seconds()
        est = now - self.last if self.last is not None else self.first
        limit = (Limit.PARSES if self.left <= 0 else Limit.CHARACTERS if n > self.chars
                 else Limit.CPU if now + est > self.end else Limit.NONE)
        if limit != Limit.NONE:
            self.hit = True
            if self.limit == Limit.NONE:
                self.limit = limit
            return False
        self.last = now
        self.left -= 1
        self.chars -= n
        return True


@dataclass
class _Parsed:
    output: str
    message: Any
    clean: bool
    stop: int          # output position, -1 none
    expected: list[str]
    truncated: bool


def _accepted_parse(setup: _Setup, text: str, budget: Any, ctx: dict[str, Any]) -> Any:
    """The parse of an edited ``text`` when the budget allows it, it builds and it is accepted (clean, calls, no
    marker left: :func:`_accepts`); else None."""
    if not budget.take(len(text)):
        return None
    try:
        p = _parse(setup, text)
    except Exception:  # noqa: BLE001 - no parser, no evidence
        return None
    return p if _accepts(p, ctx) else None


def _parse(setup: _Setup, output: str, *, repairs: tuple[str, ...] | None = None, template: Any = None,
           request: Any = None) -> _Parsed:
    """Parse ``output``; ``repairs``: improved fidelity with only these tolerance repairs on."""
    from ..chat.pipeline import build_chat_parser, cached_analysis
    from .trace_routes import MAIN, trace_parse

    tpl = template if template is not None else setup.template
    req = request if request is not None else setup.request
    if repairs is None and setup.only_repairs is not None and setup.fidelity == "improved":
        repairs = setup.only_repairs
    if repairs is not None:
        off = tuple(n for n in TOLERANCE_REPAIRS if n not in repairs)
        bundle = build_chat_parser(tpl, req, fidelity="improved", disabled_repairs=off)
    else:
        report = None
        if setup.overrides or setup.disabled:
            from ..analysis import reapply

            report = reapply(cached_analysis(tpl, setup.fidelity), overrides=setup.overrides or None,
                             disabled_workarounds=setup.disabled)
        bundle = build_chat_parser(tpl, req, report=report, fidelity=setup.fidelity)
    from .trace_routes import peg_message

    got = peg_message(bundle.parser, output)     # the parser's own parse: no trace needed when it is clean
    if got is not None and got[1]:
        return _Parsed(output, got[0], True, -1, [], False)
    tr = trace_parse(bundle.parser, output, bundle.report)
    exp: list[str] = []
    stop = -1
    if tr.stop >= 0:
        sp = _stop_point(tr.text, tr.gp_len, tr.stop, tr.furthest.expected, tr.furthest.path)
        stop, exp = sp.output_pos, sp.expected
    clean = tr.entry == MAIN and tr.stop < 0 and tr.truncated_at < 0
    return _Parsed(output, tr.message, clean, stop, exp, tr.truncated_at >= 0)


def _literals(expected: list[str]) -> list[str]:
    out: list[str] = []
    for e in expected:
        if len(e) >= 3 and e.startswith("`") and e.endswith("`"):
            n = len(e) - len(e.lstrip("`"))    # a code span of n backticks (a literal holding backticks)
            inner = e[n:len(e) - n] if n > 1 and len(e) > 2 * n and e.endswith("`" * n) else e[1:-1]
            if n > 1 and inner[:1] == " " and inner[-1:] == " " and inner.strip(" "):
                inner = inner[1:-1]            # the padding a span adds around a backtick at either end
            lit = inner.replace("\\n", "\n").replace("\\t", "\t")
            if lit and lit not in out:
                out.append(lit)
    return out


def _accepts(p: _Parsed, ctx: dict[str, Any]) -> bool:
    """Whether an edited output's parse is one explain would call clean: calls read, no marker of the format or
    special-token-shaped text left in the content, and no call without a required argument the output writes."""
    if not p.clean or not p.message.tool_calls:
        return False
    content = p.message.content or ""
    return not any(m and m in content for m in ctx["markers"]) and not _SPECIAL_SHAPE.search(content) \
        and not re.fullmatch(r"\s*(```[\w-]{0,16}\s*)+", content) \
        and not _argument_left_out(p, ctx)     # (a fence left around nothing)


def _argument_left_out(p: _Parsed, ctx: dict[str, Any]) -> bool:
    """Whether a call of the parse lacks a required argument (the request's schema) whose name the model's output
    writes after the call's name: the edit read the call but left that argument out (in the text, or deleted), a
    parse explain calls suspicious. An argument the output never names is the model's omission, not the edit's."""
    written = ctx.get("output") or p.output
    for call in p.message.tool_calls:
        params = ctx.get("schemas", {}).get(call.name)
        need = required_of(params)
        if not need:
            continue
        try:
            args = json.loads(call.arguments or "{}")
        except (ValueError, RecursionError):
            continue
        if not isinstance(args, dict):
            continue
        at = written.find(call.name)
        if any(r not in args and _last_word(written, r, max(at, 0)) >= 0 for r in need):
            return True
    return False


# ------------------------------------------------------------------------------------------------ nearest


def _marked(text: str, marks: list[str]) -> bool:
    """Whether ``text`` holds a marker of the format or a special-token-shaped string."""
    return any(m in text for m in marks) or bool(_SPECIAL_SHAPE.search(text))


_END_OF_OUTPUT = "the end of the output"     # what a stop point expects where the output should end


def _candidates(s: str, p: _Parsed, ctx: dict[str, Any]) -> list[Edit]:  # noqa: C901
    """Single edits to try on ``s`` (parsed as ``p``), most plausible first."""
    out: list[Edit] = []
    if p.stop >= 0:
        at = p.stop
        tok = _TOKEN.match(s, at)
        word = re.compile(r"[\w.\-]+|\s+").match(s, at)
        lits = _literals(p.expected)
        lits = [x for x in lits if x.strip(_WS) not in ctx["names"]]
        head = _prompt_tail_at(s, at, ctx.get("gp", ""))
        if head:    # the generation prompt's header written again where the reply starts (`<|start|>assistant`)
            out.append(Edit("delete", at, head, ""))
        for lit in lits[:4]:
            # the literal written but for its whitespace tail (`>` of `>\n`): the whitespace put in alone, not
            # the literal again before what the model wrote of it
            k = 0
            while k < len(lit) and at + k < len(s) and s[at + k] == lit[k]:
                k += 1
            if 0 < k < len(lit) and not lit[k:].strip(_WS):
                out.append(Edit("insert", at + k, "", lit[k:]))
            else:
                out.append(Edit("insert", at, "", lit))
        out.extend(_literal_head_left_out(s, at, lits))
        for lit in lits[:2]:
            if tok:
                out.append(Edit("replace", at, tok.group(0), lit))
            seg = s[at:at + len(lit)]
            if not tok and seg != lit and len(seg) == len(lit) and _punct_only(seg, lit) \
                    and (any(ch.isalnum() for ch in lit) or (at > 0 and s[at - 1].isalnum())):
                # the literal written with other punctuation (`functions_` for `functions.`, `_` for `:` inside
                # `get_weather_1`: a separator inside a name, not one between calls)
                out.append(Edit("replace", at, seg, lit))
        stray = _STRAY_END.fullmatch(s, at)
        if stray and not tok and lits and _marked(lits[0].strip(_WS), list(ctx["all_markers"]) + ctx["markers"]):
            # the output's last characters, a symbol and no word, written where the parser wants a marker there
            # (`⚗` for `</tool_call>`): the symbol replaced by the marker
            out.append(Edit("replace", at, stray.group(1), lits[0].strip(_WS)))
        if tok:
            out.append(Edit("delete", at, tok.group(0), ""))
        elif word and s[at:at + 1] in _WS:
            out.append(Edit("delete", at, word.group(0), ""))
        ws = re.compile(r"[ \t\r\n]{1,40}$").search(s, max(0, at - 40), at)
        if ws and lits:     # whitespace written just before what the parser wanted there (`…</arg_value>\n</tool_call>`)
            out.append(Edit("delete", ws.start(), ws.group(0), ""))
        out.extend(_gap_in_literal(s, at, lits, ctx["all_markers"]))
        out.extend(_literal_with_space_off(s, at, lits))
        before = _text_before_literal(s, at, lits, ctx)
        if before:
            out.append(before)
        if _JSON_VALUE in p.expected:
            out.extend(_json_value_edits(s, at))
            prose = _prose_json_value(s, ctx, at)
            if prose:   # the value the parse stopped at: a non-string parameter's text
                out.append(prose)
            args = _arguments_never_written(s, at, ctx)
            if args:
                out.append(args)
        undeclared = _undeclared_argument(s, at, lits, ctx)
        if undeclared:
            out.append(undeclared)
        missing = _required_argument_missing(s, at, lits, ctx)
        if missing:
            out.append(missing)
        moved_arg = _argument_first(s, at, lits, ctx)
        if moved_arg:
            out.append(moved_arg)
        out.extend(_invented_call(s, at, p, ctx))
        renamed = _only_tool_named(s, at, p, ctx)
        if renamed:
            out.append(renamed)
        if p.message.tool_calls:
            rest = s[at:]
            lead = rest.lstrip(_WS)
            if lead and (_TOKEN.match(lead) or _JSON_CALL_START.match(lead)
                         or re.match(r"[;,]\s{0,8}\{\s{0,40}\"name\"", lead)
                         or any(o.strip(_WS) and lead.startswith(o.strip(_WS)) for o in ctx["openers"])):
                # after the complete calls: another call, or an end token and what followed it — one deletion
                out.append(Edit("delete", at, rest, ""))
            elif lead and (_END_OF_OUTPUT in p.expected or (lits and all(
                    x.strip(_WS) in [o.strip(_WS) for o in ctx["openers"]] for x in lits))):
                # (or where only another call may follow: prose after the calls, Qwen3-Coder's `I will get that…`)
                # the parser wanted the output to end after the calls: the text written after them, deleted with
                # the whitespace before it (a parse waits on after trailing whitespace for another call)
                # (up to the next call when one follows: the text between two calls, not the call after it)
                m = _JSON_CALL_START.search(s, at, at + 4096)
                nxts = [i for i in (s.find(o.strip(_WS), at, at + 4096) for o in ctx["openers"] if o.strip(_WS))
                        if i > at] + ([m.start()] if m else [])
                # (prose only: text holding the format's markup is no text the model wrote instead of an end)
                marks = [x for x in ctx["all_markers"] | set(ctx["markers"]) if x]
                if nxts and not _marked(s[at:min(nxts)], marks):
                    out.append(Edit("delete", at, s[at:min(nxts)], ""))
                joined = _blocks_joined(s, at, ctx) if _END_OF_OUTPUT in p.expected else None
                if joined:
                    out.append(joined)
                ws0 = re.compile(r"[ \t\r\n]{1,40}$").search(s, max(0, at - 40), at)
                a0 = ws0.start() if ws0 else at
                if not _marked(s[a0:], marks):
                    out.append(Edit("delete", a0, s[a0:], ""))
        fence = re.compile(r"\s{0,8}```").match(s, at)
        if fence:       # a Markdown fence the format has no place for (its opener is deleted below)
            out.append(Edit("delete", at, fence.group(0), ""))
        moved = _member_first(s, at, lits)
        if moved:
            out.append(moved)
        quoted = _plain_quoted(s, at, lits)
        if quoted:
            out.append(quoted)
        key = re.compile(r'"([A-Za-z_]{1,20})"').match(s, at)
        if key and ctx["args_key"] and key.group(1) in _KEY_ALIASES and key.group(1) != ctx["args_key"]:
            out.append(Edit("replace", at, key.group(0), f'"{ctx["args_key"]}"'))
    # a JSON key the template writes otherwise ("parameters" where it writes "arguments")
    if ctx["args_key"]:
        for alias in _KEY_ALIASES:
            if alias == ctx["args_key"]:
                continue
            i = s.find(f'"{alias}"')
            if i >= 0:
                out.append(Edit("replace", i, f'"{alias}"', f'"{ctx["args_key"]}"'))
                break
    m = _JSON_CALL_START.search(s, 0, 4096) if not p.message.tool_calls else None
    bad = _BAD_ESCAPE.search(s, m.end(), m.end() + 4096) if m else None
    if bad:     # a backslash in the call's JSON that starts no escape (a Windows path's `\P`): written doubled
        out.append(Edit("insert", bad.end() - 1, "", "\\"))
    if not p.message.tool_calls and p.stop < 0:
        # an opener written without the whitespace the template puts after it (`<tool_call>{` for `<tool_call>\n{`)
        for op in ctx["openers"][:2]:
            core_, tail = op.rstrip(_WS), op[len(op.rstrip(_WS)):]
            i = s.find(core_.strip(_WS)) if core_.strip(_WS) else -1
            if tail and i >= 0 and not s.startswith(op.strip(_WS) + tail, i):
                out.append(Edit("insert", i + len(core_.strip(_WS)), "", tail))
        # call-like text in the content: the opener goes where it starts; closers at the end
        starts = []
        for name in ctx["names"]:
            for pat in (f"<function={name}", f"<tool_call>{name}", name + "("):
                i = s.find(pat)
                if i >= 0:
                    starts.append(i)
        m = _JSON_CALL_START.search(s)
        if m:
            starts.append(m.start())
        firsts = sorted(set(starts))[:2]
        ops = {o.strip(_WS) for o in ctx["openers"]}
        mark = min((i for i in (s.find(m_) for m_ in ctx["all_markers"] if m_[:1] in "<[" and m_ not in ops) if i >= 0),
                   default=-1)
        if mark >= 0 and mark not in firsts and not any(o and o in s[:mark] for o in ops):
            firsts.append(mark)     # the format's own call markup, written without the opener before it
        for i in firsts:
            for op in ctx["openers"][:2]:
                if not s.startswith(op.strip(_WS), i):
                    out.append(Edit("insert", i, "", op))
        for core_, head, lead, _closer in _render_pieces(ctx):
            # the render's call as it starts after its opener (`<｜DSML｜invoke name="`), written without the opener
            # (after prose or the reasoning's closer, not after a tag of its own: that tag stands where the opener
            # belongs)
            i = s.find(head)
            tag = _TAG_END.search(s, max(0, i - 80), i) if i >= 0 else None
            if i >= 0 and core_ not in s[:i] and (tag is None or tag.group(0).strip(_WS) in ctx["r_ends"]):
                out.append(Edit("insert", i, "", core_ + lead))
        if ctx["special_start"] and not s.startswith(ctx["special_start"]):
            out.append(Edit("insert", 0, "", ctx["special_start"]))
    if not p.message.tool_calls and (p.truncated or p.stop < 0) and ctx.get("r_ends"):
        # a call written while the reasoning is open: the reasoning closer put in before the first call marker
        own = set(ctx["markers"]) | ctx["all_markers"]
        ends = [e for e in ctx["r_ends"] if e.strip(_WS) and e.strip(_WS) not in own and e.strip(_WS) not in s]
        at = min((i for i in (s.find(m_) for m_ in ctx["markers"] if m_) if i >= 0), default=-1)
        turn = _prompt_tail_in(s, ctx.get("gp", ""))
        for e in ends[:1]:
            if turn > 0:    # the reply's header written again after the reasoning: the reasoning ends before it
                out.append(Edit("insert", turn, "", e.strip(_WS)))
            if at >= 0:
                out.append(Edit("insert", at, "", e))
                if e != e.strip(_WS):
                    out.append(Edit("insert", at, "", e.strip(_WS)))
    lead = len(s) - len(s.lstrip(_WS))
    head = _prompt_tail_at(s, lead, ctx.get("gp", "")) if p.stop != lead else ""
    if head:        # the output starts by writing the generation prompt's end again (DeepSeek's `<think>`)
        out.append(Edit("delete", lead, head, ""))
    m = re.search(r"```\w{0,16}\n", s)
    if m:
        out.append(Edit("delete", m.start(), m.group(0), ""))
    if p.message.tool_calls and p.stop < 0 and not p.clean:
        # the calls read by a route that is not the format's own (text before the call where the call turn
        # starts with it): the text before the first call start, deleted
        m = _JSON_CALL_START.search(s, 0, 4096)
        firsts = [i for i in (s.find(o.strip(_WS), 0, 4096) for o in ctx["openers"] if o.strip(_WS)) if i >= 0]
        i = min(firsts + ([m.start()] if m else []), default=-1)
        if i > 0 and s[:i].strip(_WS):
            out.append(Edit("delete", 0, s[:i], ""))
    hint = ctx.get("stop_hint")
    if p.message.tool_calls and p.stop < 0 and hint and hint[0] == s:
        out.extend(_closer_then_opener(s, hint[1], _literals(hint[2]), ctx))
        ws = re.compile(r"[ \t\r\n]{1,40}").match(s, hint[1]) \
            or re.compile(r"[ \t\r\n]{1,40}$").search(s, max(0, hint[1] - 40), hint[1])
        if ws and any(o.strip(_WS) and s.startswith(o.strip(_WS), ws.end()) for o in ctx["openers"]):
            # whitespace between two calls where the format writes them glued: the next call is read once it goes
            out.append(Edit("delete", ws.start(), ws.group(0), ""))
    if p.message.tool_calls and p.stop < 0:
        m = _SPECIAL_SHAPE.search(p.message.content or "")
        i = s.find(m.group(0)) if m else -1
        if i >= 0:
            out.append(Edit("delete", i, m.group(0), ""))
        for e in ctx.get("r_ends", [])[:1]:
            # the reasoning closed a second time: the closer left in the content (`Now call.\n</think>`)
            c = e.strip(_WS)
            first = s.find(c) if c and c in (p.message.content or "") else -1
            again = s.find(c, first + len(c)) if first >= 0 else -1
            if again > 0:
                out.append(Edit("delete", again, c, ""))
    early = _reasoning_closed_early(s, p, ctx)
    if early:
        out.append(early)
    if p.truncated:
        shut = _json_closing(s)
        if shut:        # a JSON body cut off: the brackets it leaves open closed, innermost first, as one edit
            out.append(Edit("insert", len(s), "", shut))
        # a tag the template's render of a call writes after whitespace (`\n</parameter>`), written bare: the
        # parse of the value before it waits for more input — the whitespace put in before its first bare use
        if "rendered_tags" not in ctx:
            ctx["rendered_tags"] = _tags_as_rendered(ctx.get("setup"), ctx)
        for ws, tag in ctx["rendered_tags"][:3]:
            i = s.find(tag)
            while i > 0 and s[:i].endswith(ws):
                i = s.find(tag, i + len(tag))
            if i > 0:
                out.append(Edit("insert", i, "", ws))
    if p.truncated or (p.stop < 0 and not p.message.tool_calls):
        out.extend(_closers_before_last(s, ctx))
        if "rendered_closers" not in ctx:
            ctx["rendered_closers"] = _closers_as_rendered(ctx.get("setup"), ctx)
        ctx["spaced_closers"] = list(dict.fromkeys(ctx.get("spaced_closers", []) + ctx["rendered_closers"]))
        for c in ctx.get("spaced_closers", [])[:2] + ctx["closers"][:2]:
            if not s.rstrip(_WS).endswith(c.strip(_WS)):
                out.append(Edit("insert", len(s), "", c))
        for core_, _head, _lead, closer in _render_pieces(ctx):
            # the opener's own closer as the render writes it (`\n</｜DSML｜tool_calls>`), when the output
            # opened it and never closed it
            if closer and core_ in s and s.rfind(closer.strip(_WS)) < s.rfind(core_):
                out.append(Edit("insert", len(s), "", closer))
        tail = re.compile(r"<[^<>\s]{1,40}$").search(s, max(0, len(s) - 42))
        for c in ctx.get("spaced_closers", [])[:2] + ctx["closers"][:2]:
            core_ = c.strip(_WS)
            if tail and core_.startswith(tail.group(0)) and core_ != tail.group(0):
                # a closer cut part-way (`</tool_` for `</tool_call>`): completing it is one edit (with the
                # whitespace the template writes before it, when the model left that out too)
                if c != core_:
                    out.append(Edit("replace", tail.start(), tail.group(0), c))
                out.append(Edit("insert", len(s), "", core_[len(tail.group(0)):]))
                break
    if p.truncated:
        cut = _cut_call_tail(s, ctx)
        if cut:     # a value cut off inside a call: the rest of the call as the render writes it, one insert
            out.append(Edit("insert", len(s), "", cut))
    if p.truncated and not p.message.tool_calls:
        prose = _prose_json_value(s, ctx)
        if prose:
            out.append(prose)
    seen: set[tuple] = set()
    uniq = []
    for e in out:
        k = (e.kind, e.pos, e.old, e.new)
        if k not in seen:
            seen.add(k)
            uniq.append(e)
    return uniq[:8]


def _reasoning_closed_early(s: str, p: _Parsed, ctx: dict[str, Any]) -> Edit | None:
    """A clean parse with calls that reads reasoning where the user's expected message (``ctx["want"]``) has none:
    the reasoning closer put in where that reasoning starts in the output (the prompt's opened reasoning closed
    empty, the text after it the reply's content)."""
    want = ctx.get("want")
    if want is None or not p.clean or not p.message.tool_calls or (want.get("reasoning_content") or "").strip(_WS):
        return None
    said = (p.message.to_openai().get("reasoning_content") or "").strip(_WS)
    ends = [e.strip(_WS) for e in ctx.get("r_ends", []) if e.strip(_WS)]
    i = s.find(said[:64]) if said else -1
    if i < 0 or not ends or ends[0] in s[:i]:
        return None
    return Edit("insert", i, "", ends[0])


def gives_expected(message: dict[str, Any], expect: dict[str, Any], output: str) -> bool:
    """Whether ``message`` (an OpenAI message parsed from ``output``) is the expected message ``expect`` as the
    reproducer's regression test compares them (:func:`core.chat.roundtrip.compare_messages`: text fields equal after
    outer whitespace, calls by name and JSON arguments), a call id counting only where the output writes it (an engine
    makes up its own otherwise)."""
    return compare_messages(expected_message(expect, output), message) is None


_TAG_OPEN = re.compile(r"<[A-Za-z_][\w:.\-]{0,40}[ \t]")     # a tag with attributes (`<parameter name="`)
_STRAY_END = re.compile(r"([^\w\s<>\[\]{}()\"'`,;:.|\\/]{1,2})[ \t\r\n]{0,8}")
_BAD_ESCAPE = re.compile(r'(?<!\\)(?:\\\\)*\\(?![\\"/bfnrtu])')
_TAG_END = re.compile(r"<[^<>\n]{1,60}>[ \t\r\n]{0,8}$")
_HEADER_CHARS = 200     # how much of the generation prompt's end a repeated header may span


def _punct_only(a: str, b: str) -> bool:
    """Whether two strings of one length differ only in up to two punctuation characters, each side's, none of
    them whitespace or a bracket (markup, not a separator)."""
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    return 0 < len(diff) <= 2 and all(not x.isalnum() and not y.isalnum() and x not in _WS + "<>[]{}"
                                      and y not in _WS + "<>[]{}" for x, y in diff)


def _json_closing(s: str) -> str:
    """The brackets (and the quote) a JSON body cut at the end of ``s`` leaves open, innermost first (``"}}]``),
    read from the last marker token within the output's last 4 KiB; ``""`` when nothing is open or no JSON starts
    there."""
    a = max(0, len(s) - 4096)
    last = None
    for last in _SPECIAL_SHAPE.finditer(s, a):
        pass
    i = last.end() if last else a
    j = len(s) - len(s[i:].lstrip(_WS))
    if j >= len(s) or s[j] not in "[{":
        return ""
    stack: list[str] = []
    quoted = escaped = False
    for ch in s[j:]:
        if quoted:
            quoted, escaped = (quoted, False) if escaped else (ch != '"', ch == "\\")
        elif ch == '"':
            quoted = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}":
            if not stack or stack.pop() != ch:
                return ""
    return ('"' if quoted else "") + "".join(reversed(stack)) if stack else ""


def _prompt_tail_at(s: str, at: int, gp: str) -> str:
    """The longest tail of the generation prompt that starts with a marker token and that ``s`` writes again at
    ``at`` (with the prompt's whitespace after it when the output writes that too), ``""`` if none: the prompt's
    own header repeated by the model."""
    for m in _TOKEN.finditer(gp, max(0, len(gp) - _HEADER_CHARS)):
        tail = gp[m.start():]
        for t in (tail, tail.rstrip(_WS)):
            if t.strip(_WS) and s.startswith(t, at):
                return t
    return ""


def _prompt_tail_in(s: str, gp: str) -> int:
    """Where ``s`` first writes again the longest tail of the generation prompt that starts with a marker token
    (a new turn's header the model wrote after text of its own), -1 if nowhere."""
    for m in _TOKEN.finditer(gp, max(0, len(gp) - _HEADER_CHARS)):
        tail = gp[m.start():].rstrip(_WS)
        i = s.find(tail) if tail else -1
        if i >= 0:
            return i
    return -1


_CLOSE_TAG = re.compile(r"</([A-Za-z_][\w:\-]{0,40})>")
_TAIL_FILL = "zqv0x"     # an argument value no template writes, so the render can be cut after it


def _call_tail(ctx: dict[str, Any]) -> str:
    """What the template's render of a call writes after its last argument value (Qwen3-Coder's
    ``\n</parameter>\n</function>\n</tool_call>…``); one render per triage, ``""`` when it does not render."""
    if "call_tail" not in ctx:
        tail = ""
        if ctx.get("setup") is not None and ctx["names"]:
            render = _rendered_call(ctx["setup"], ctx["names"][0], {"a": _TAIL_FILL})
            i = render.rfind(_TAIL_FILL)
            tail = render[i + len(_TAIL_FILL):] if i >= 0 else ""
        ctx["call_tail"] = tail
    return ctx["call_tail"]


def _cut_call_tail(s: str, ctx: dict[str, Any]) -> str:
    """What the template's render of a call writes after the value of the parameter the output names last (of the
    declared tool it names last), up to the end of the format's last closer there (MiniMax-M3's
    ``]<]minimax[>[</user_id>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>``): the rest of a call cut inside
    that value. ``""`` when the output names no declared parameter after the tool, the render writes no closer
    after the value, or the output already writes any closer of that rest after the value (a value that runs on
    for another reason is not cut)."""
    setup = ctx.get("setup")
    tool = _tool_named_last(s, len(s), ctx["names"])
    if setup is None or tool[0] < 0:
        return ""
    params = tool_parameters(setup.request, tool[1])
    at = tool[0] + len(tool[1])
    param = max(((_last_word(s, k, at), k) for k in list(properties_of(params))[:64]), default=(-1, ""))
    value = param[0] + len(param[1])
    if param[0] < 0 or not s[value:].strip(_WS):
        return ""
    tails = ctx.setdefault("cut_tails", {})
    if (tool[1], param[1]) not in tails:      # one render per tool and parameter
        render = _rendered_call(setup, tool[1], {param[1]: _TAIL_FILL})
        v = render.find(_TAIL_FILL)
        tails[(tool[1], param[1])] = render[v + len(_TAIL_FILL):] if v >= 0 else ""
    tail = tails[(tool[1], param[1])]
    end = max((tail.rfind(c) + len(c) for c in ctx["closers"] if c and c in tail), default=-1)
    if end <= 0 or any(m.group(0) in s[value:] for m in _CLOSE_TAG.finditer(tail, 0, end)) \
            or any(c and c in s[value:] for c in ctx["closers"]):
        return ""
    return tail[:end]


def _json_value_piece(ctx: dict[str, Any], tool: str, prop: str) -> tuple[str, str]:
    """What the template's render of a call of ``tool`` writes right before a parameter ``prop`` given as a JSON
    object (from the parameter's name: ``payload" string="false">``) and the tag right after that value
    (``</｜DSML｜parameter>``); ``("", "")`` when the render writes no such piece. One render per tool and
    parameter."""
    pieces = ctx.setdefault("json_pieces", {})
    if (tool, prop) not in pieces:
        render = _rendered_call(ctx["setup"], tool, {prop: {_TAIL_FILL: 1}})
        f = render.find(_TAIL_FILL)
        j = render.rfind("{", 0, f) if f >= 0 else -1
        e = render.find("}", f) + 1 if f >= 0 else 0
        i = render.rfind(prop, 0, j) if j >= 0 else -1
        post = render[e:render.find(">", e, e + 64) + 1] if e > 0 and render.startswith("<", e) else ""
        pieces[(tool, prop)] = (render[i:j], post) if i >= 0 and post.endswith(">") and render[i:j].strip(_WS) \
            else ("", "")
    return pieces[(tool, prop)]


def _prose_json_value(s: str, ctx: dict[str, Any], at: int = -1) -> Edit | None:
    """A parameter the request's schema types as no string (an object, a number), written where the template's
    render writes a JSON value but holding text that is no JSON (``string="false">Здравствуйте, мир!</…``): the
    text written as a JSON string, one edit (the value's type is the schema check's to name). ``at``: only the value
    that starts there (where the parser stopped wanting a JSON value: Spark 2.5's ``<arg_value>not-an-int``)."""
    if ctx.get("setup") is None:
        return None
    if at >= 0:
        tool = _tool_named_last(s, at, ctx["names"])
        if tool[0] < 0:
            return None
        for prop, sch in list(properties_of(tool_parameters(ctx["setup"].request, tool[1])).items())[:64]:
            if not isinstance(sch, dict) or sch.get("type") in (None, "string"):
                continue
            pre, post = _json_value_piece(ctx, tool[1], prop)
            b = s.find(post, at, at + 4096) if pre and s.startswith(pre, at - len(pre)) else -1
            value = s[at:b] if b >= 0 else ""
            if not value.strip(_WS) or value.lstrip(_WS)[:1] in "{[\"" or _PY_LITERAL.fullmatch(value.strip(_WS)):
                continue    # (Python's `True` is JSON's `true`, not a string: :func:`_json_value_edits`)
            try:
                json.loads(value)
            except ValueError:
                return Edit("replace", at, value, json.dumps(value, ensure_ascii=False))
        return None
    for t in (ctx["setup"].request.tools or [])[:16]:
        f = t.get("function") if isinstance(t, dict) else None
        if not isinstance(f, dict) or not f.get("name") or f["name"] not in s:
            continue
        for prop, sch in list(properties_of(f.get("parameters")).items())[:16]:
            if not isinstance(sch, dict) or sch.get("type") in (None, "string") or prop not in s:
                continue
            pre, post = _json_value_piece(ctx, f["name"], prop)
            i = s.find(pre) if pre else -1
            b = s.find(post, i + len(pre), i + len(pre) + 4096) if i >= 0 else -1
            value = s[i + len(pre):b] if b >= 0 else ""
            if not value.strip(_WS) or value.lstrip(_WS)[:1] in "{[\"":
                continue
            try:
                json.loads(value)
                continue
            except ValueError:
                return Edit("replace", i + len(pre), value, json.dumps(value, ensure_ascii=False))
    return None


def _argument_piece(ctx: dict[str, Any], tool: str, prop: str) -> tuple[str, str]:
    """What the template's render of a call of ``tool`` writes for one argument ``prop``, around its name and value:
    the text from the argument's first marker token up to the name (``<|open|>argument key="``) and the text after
    the value up to the end of the argument (``<|close|>argument<|sep|>``), read as what a render with the argument
    writes more than one without it; ``("", "")`` when the two renders do not differ so. One pair of renders per
    tool and parameter."""
    head, _between, tail = _argument_parts(ctx, tool, prop)
    return head, tail


def _argument_parts(ctx: dict[str, Any], tool: str, prop: str) -> tuple[str, str, str]:
    """:func:`_argument_piece`'s two pieces with the text the render writes between the name and the value
    (``>\n`` of ``<parameter=city>\n``); ``("", "", "")`` where it has none."""
    pieces = ctx.setdefault("argument_pieces", {})
    if (tool, prop) not in pieces:
        none = _rendered_call(ctx["setup"], tool, {})
        one = _rendered_call(ctx["setup"], tool, {prop: _TAIL_FILL})
        k = 0
        while k < min(len(none), len(one)) and none[k] == one[k]:
            k += 1
        k0 = k
        while k > 0 and one[k - 1] not in _WS + ">]":      # (whole marker tokens: the two renders differ inside one)
            k -= 1
        if not _TOKEN.match(one, k):
            # the argument's first marker glued to the name before it (`set_state<arg_key>`): that token's start
            k = next((m.start() for m in _TOKEN.finditer(one, max(0, k0 - 64), k0 + 64)
                      if m.start() <= k0 < m.end() or m.start() == k0), k)
        j = 0
        while j < min(len(none), len(one)) - k and none[len(none) - 1 - j] == one[len(one) - 1 - j]:
            j += 1
        e = len(one) - j
        while e < len(one) and one[e - 1] not in _WS + ">]":
            e += 1
        mid = one[k:e] if none and one and k < e else ""
        n, v = mid.find(prop), mid.find(_TAIL_FILL)
        first = _TOKEN.match(mid) or _SPECIAL_SHAPE.match(mid) or _TAG_OPEN.match(mid)
        pieces[(tool, prop)] = (mid[:n], mid[n + len(prop):v], mid[v + len(_TAIL_FILL):]) \
            if first and 0 < n < v and mid[v + len(_TAIL_FILL):].strip(_WS) else ("", "", "")
    return pieces[(tool, prop)]


def _undeclared_argument(s: str, at: int, lits: list[str], ctx: dict[str, Any]) -> Edit | None:
    """Where the parser wants a declared parameter's name and the output names one the request's schema does not
    declare: that whole argument deleted, from its first marker token to the end of its value as the render writes
    an argument (one edit)."""
    setup = ctx.get("setup")
    word = re.compile(r"[A-Za-z_][\w.\-]{0,63}").match(s, at)
    tool = _tool_named_last(s, at, ctx["names"])
    if setup is None or not word or tool[0] < 0:
        return None
    params = tool_parameters(setup.request, tool[1])
    props = properties_of(params)
    names = [x.strip(_WS) for x in lits]
    if not names or not set(names) <= set(props) or word.group(0) in props:
        return None
    head, tail = _argument_piece(ctx, tool[1], names[0])
    a = at - len(head)
    if not head or a <= tool[0] or not s.startswith(head, a):
        return None
    b = s.find(tail, at, at + 4096)
    return Edit("delete", a, s[a:b + len(tail)], "") if b >= 0 else None


def _required_argument_missing(s: str, at: int, lits: list[str], ctx: dict[str, Any]) -> Edit | None:
    """Where the parser wants another argument (the expected literal is the head the render writes an argument
    with: ``<parameter=``) and the call written so far lacks a string parameter the request's schema requires,
    whose name the output never writes in that call: the argument put in as the render writes it, empty, with the
    whitespace the output writes before the stop after it (one insert; the schema check names the omission)."""
    setup = ctx.get("setup")
    tool = _tool_named_last(s, at, ctx["names"])
    wanted = {x.strip(_WS) for x in lits}
    if setup is None or tool[0] < 0 or not wanted:
        return None
    params = tool_parameters(setup.request, tool[1])
    props = properties_of(params)
    written = s[:at]
    for name in required_of(params)[:16]:
        sch = props.get(name)
        if not isinstance(sch, dict) or sch.get("type") != "string" \
                or _last_word(written, name, tool[0] + len(tool[1])) >= 0:
            continue
        head, between, tail = _argument_parts(ctx, tool[1], name)
        if not head.strip(_WS) or head.strip(_WS) not in wanted or s.startswith(head.strip(_WS), at):
            continue
        ws = re.compile(r"[ \t\r\n]{1,8}$").search(s, max(0, at - 8), at)
        return Edit("insert", at, "", head.lstrip(_WS) + name + between + tail.rstrip(_WS) + (ws.group(0) if ws else ""))
    return None


_EMPTY_OF_TYPE = {"string": "", "integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


def _arguments_never_written(s: str, at: int, ctx: dict[str, Any]) -> Edit | None:
    """Where the parser wants a JSON value (a call's arguments) and the output writes only control tokens from there
    to its end (``[ARGS]</s>``: the turn ended where the arguments belong): those tokens replaced by the arguments as
    the template's render of that call writes them after the same marker, with each parameter the schema requires
    given an empty value of its type (one edit; a required parameter left out is the schema check's to name, not
    the edit's)."""
    rest = s[at:]
    if ctx.get("setup") is None or len(rest) > 64 or _TOKEN.sub("", rest).strip(_WS):
        return None
    tool = _tool_named_last(s, at, ctx["names"])
    if tool[0] < 0:
        return None
    mark = s[tool[0] + len(tool[1]):at]
    if not mark.strip(_WS) or not _TOKEN.fullmatch(mark.strip(_WS)):
        return None
    params = tool_parameters(ctx["setup"].request, tool[1])
    props = properties_of(params)
    args = {k: _EMPTY_OF_TYPE.get((props.get(k) or {}).get("type") if isinstance(props.get(k), dict) else "", "")
            for k in required_of(params)[:16]}
    render = _rendered_call(ctx["setup"], tool[1], args)
    i = render.find(tool[1] + mark.strip(_WS))
    v = i + len(tool[1] + mark.strip(_WS)) if i >= 0 else -1
    try:
        _val, e = _JSON.raw_decode(render, v) if v >= 0 else (None, -1)
    except ValueError:
        return None
    if e <= v:
        return None
    return Edit("replace", at, rest.rstrip(_WS), render[v:e]) if rest.strip(_WS) else Edit("insert", at, "",
                                                                                              render[v:e])


def _argument_first(s: str, at: int, lits: list[str], ctx: dict[str, Any]) -> Edit | None:
    """Where the parser wants a declared parameter's name and the output writes another declared parameter there,
    with the wanted one written further on in the same call (as the render writes an argument): the wanted argument
    moved before it (one ``move``: the arguments' order; the parser follows the schema's)."""
    setup = ctx.get("setup")
    word = re.compile(r"[A-Za-z_][\w.\-]{0,63}").match(s, at)
    tool = _tool_named_last(s, at, ctx["names"])
    if setup is None or not word or tool[0] < 0:
        return None
    props = properties_of(tool_parameters(setup.request, tool[1]))
    names = [x.strip(_WS) for x in lits]
    if not names or not set(names) <= set(props) or word.group(0) not in props or word.group(0) in names:
        return None
    for name in names[:4]:
        head, tail = _argument_piece(ctx, tool[1], name)
        a = at - len(head)
        if not head or a <= tool[0] or not s.startswith(head, a):
            continue
        w = s.find(head + name, at, a + 4096)
        b = s.find(tail, at, w) if w > 0 else -1
        we = s.find(tail, w, a + 4096 - len(tail)) if w > 0 else -1      # (the move within 4 KiB)
        if b < 0 or we < 0 or any(n and n in s[at:w] for n in ctx["names"]):
            continue
        gap = re.compile(r"[ \t\r\n]{0,8}").match(s, b + len(tail)).group(0)
        sep = gap if s[:w].endswith(gap) else ""
        before = s[a:w - len(sep)]
        return Edit("move", a, s[a:we + len(tail)], s[w:we + len(tail)] + sep + before)
    return None


def _tool_named_last(s: str, at: int, names: Any) -> tuple[int, str]:
    """``(position, name)`` of the declared tool's name written last before ``at`` in ``s``, looked for in the
    4 KiB before it (a call's name is near its arguments); ``(-1, "")`` when none is."""
    a = max(0, at - 4096)
    return max(((s.rfind(n, a, at), n) for n in names if n), default=(-1, ""))


def _last_word(s: str, word: str, start: int) -> int:
    """Where ``s`` writes ``word`` last after ``start`` as a whole name (no word character or ``-`` either side),
    -1 if nowhere."""
    last = -1
    for m in re.finditer(r"(?<![\w\-])" + re.escape(word) + r"(?![\w\-])", s[start:]):
        last = start + m.start()
    return last if word else -1


def _render_pieces(ctx: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Per opener of the format that the template's render of a call writes: the opener, the text the render
    writes after it up to the tool's name (stripped), the whitespace between the two, and the opener's mirror
    closer (``<x>`` -> ``</x>``) with the whitespace the render writes before it (``""`` when the render writes
    none); one render per triage."""
    if "render_pieces" not in ctx:
        pieces: list[tuple[str, str, str, str]] = []
        render = _rendered_call(ctx["setup"], ctx["names"][0], {"a": _TAIL_FILL}) \
            if ctx.get("setup") is not None and ctx["names"] else ""
        for op in ctx["openers"][:2]:
            core_ = op.strip(_WS)
            i = render.find(core_) if core_.startswith("<") else -1
            if i < 0:
                continue
            body = render[i + len(core_):]
            k = min((body.find(n) for n in ctx["names"] if n in body), default=-1)
            head = body[:k].strip(_WS) if k >= 0 else ""
            if len(head) < 2:
                continue
            m = re.compile(r"[ \t\r\n]{0,8}" + re.escape("</" + core_[1:])).search(body)
            closer = m.group(0) if m else ""
            v = body.find(_TAIL_FILL)
            if not closer and v >= 0:
                # no mirror tag: the first marker of the format the render writes after the call's value
                # (Gemma 4's `<tool_call|>`)
                t = min(((j, x) for j, x in ((body.find(x, v), x) for x in ctx["all_markers"] if x != core_)
                         if j >= 0), default=None)
                if t is not None:
                    ws = re.compile(r"[ \t\r\n]{0,8}$").search(body, v, t[0])
                    closer = (ws.group(0) if ws else "") + t[1]
            pieces.append((core_, head, body[:len(body[:k]) - len(body[:k].lstrip(_WS))], closer))
        ctx["render_pieces"] = pieces
    return ctx["render_pieces"]


def _call_start(text: str, i: int) -> int:
    """Where the call whose tool name is at ``i`` starts: the ``{`` or ``<`` nearest before the name."""
    return max(text.rfind("{", 0, i), text.rfind("<", 0, i))


def _blocks_joined(s: str, at: int, ctx: dict[str, Any]) -> Edit | None:
    """A second call block where the parser wants the output to end after the first (``…}]<|tools_suffix|>between
    <|tools_prefix|>[{…``): from the first block's closer to the second call's start replaced by what the
    template's render of two calls writes between them (``, ``), one edit; None when the render of two calls
    does not write one block."""
    if ctx.get("setup") is None or not ctx["names"]:
        return None
    if "two_calls" not in ctx:
        name = ctx["names"][0]
        one = _rendered_call(ctx["setup"], name, {"a": _TAIL_FILL})
        two = _rendered_call(ctx["setup"], name, {"a": _TAIL_FILL}, copies=2)
        ctx["two_calls"] = None
        k = 0
        while k < min(len(one), len(two)) and one[k] == two[k]:
            k += 1
        n1, n2 = one.find(name), two.find(name, k)
        if one and two and 0 <= n1 < k and n2 > k:
            c1, c2 = _call_start(one, n1), _call_start(two, n2)
            tok = _TOKEN.search(one, k)
            if 0 <= c1 and c2 >= k and tok:
                # (the block's closer up to its first marker token, the opener from the turn's first marker token)
                first = _TOKEN.search(one)
                ctx["two_calls"] = (one[k:tok.end()].strip(_WS), one[first.start() if first else 0:c1].strip(_WS),
                                    two[k:c2])
    if not ctx["two_calls"]:
        return None
    closer, opener, sep = ctx["two_calls"]
    head = s[:at].rstrip(_WS)
    j = s.find(opener, at, at + 4096) if opener else -1
    if not closer or not head.endswith(closer) or j < 0 or _TOKEN.search(s, at, j):
        return None
    a = len(head) - len(closer)
    return Edit("replace", a, s[a:j + len(opener)], sep)


def _closers_before_last(s: str, ctx: dict[str, Any]) -> list[Edit]:
    """A value that runs on into the call's last closer (``fahrenheit\n</tool_call>``, the parse waiting for
    the value's end): the closers the render writes between a value and that closer, put in before it as one edit
    (and in place of the whitespace there, when the render writes none)."""
    tail = _call_tail(ctx)
    body = s.rstrip(_WS)
    out: list[Edit] = []
    for c in ctx["closers"][:2]:
        j = tail.find(c) if c else -1
        if j <= 0 or not body.endswith(c):
            continue
        piece = tail[:j]
        i = len(body) - len(c)
        if not piece.strip(_WS) or body[:i].rstrip(_WS).endswith(piece.strip(_WS)):
            continue
        op = max((s.rfind(o.strip(_WS), 0, i) for o in ctx["openers"] if o.strip(_WS)), default=-1)
        if op < 0 or c in s[op:i]:     # the value runs on only when the call's closer ends it, written once
            continue
        tag = _CLOSE_TAG.search(piece)
        if tag and s.rfind("</" + tag.group(1) + ">", 0, i) > s.rfind("<" + tag.group(1), 0, i):
            continue                   # the last value's own closer is written: no value runs on
        ws = re.compile(r"[ \t\r\n]{0,8}$").search(s, max(0, i - 8), i)
        lead = ws.group(0) if ws else ""
        if lead and piece.startswith(lead):
            out.append(Edit("insert", i, "", piece[len(lead):]))
            continue
        if lead:
            out.append(Edit("replace", i - len(lead), lead, piece))
        out.append(Edit("insert", i, "", piece))
    return out


def _closer_then_opener(s: str, at: int, lits: list[str], ctx: dict[str, Any]) -> list[Edit]:
    """Two calls written in one call block (``…}call:glob{…}``): where the parser wanted a closer of the format
    and the text there starts as the template's render of a call starts after its opener, the closer and the
    opener put in at that one place (one edit)."""
    if not 0 <= at < len(s):
        return []
    render = _rendered_call(ctx["setup"], ctx["names"][0], {"a": _TAIL_FILL}) \
        if ctx.get("setup") is not None and ctx["names"] else ""
    out: list[Edit] = []
    for op in ctx["openers"][:2]:
        core_ = op.strip(_WS)
        i = render.find(core_) if core_ else -1
        if i < 0:
            continue
        body = render[i + len(core_):]
        k = min((body.find(n) for n in ctx["names"] if n in body), default=-1)
        head = body[:k] if k >= 0 else ""
        if not head.strip(_WS) or not s.startswith(head.strip(_WS), at + len(s[at:]) - len(s[at:].lstrip(_WS))):
            continue
        for lit in lits[:2]:
            if lit.strip(_WS) in ctx["all_markers"] and lit.strip(_WS) != core_:
                out.append(Edit("insert", at, "", lit + core_))
    return out


_WRAP_HEAD = re.compile(r"[ \t\r\n]{0,8}(?:<([A-Za-z_][\w\-]{0,40})>|```[\w\-]{0,16})[ \t\r\n]{0,200}")
_WRAP_TAIL = re.compile(r"[ \t\r\n]{0,200}(?:</([A-Za-z_][\w\-]{0,40})>|```)[ \t\r\n]{0,8}")


def _wrapper_pair(s: str, ctx: dict[str, Any]) -> list[Edit]:
    """A JSON call object alone inside a pair no render writes (``<response>`` … ``</response>``, a Markdown
    fence): the pair's two halves deleted (two edits), when neither half is a marker of the format."""
    m = _JSON_CALL_START.search(s, 0, 256)
    if not m:
        return []
    head = _WRAP_HEAD.fullmatch(s, 0, m.start())
    if not head:
        return []
    try:
        _obj, end = json.JSONDecoder().raw_decode(s, m.start())
    except ValueError:
        return []
    tail = _WRAP_TAIL.fullmatch(s, end)
    if not tail or (head.group(1) or None) != (tail.group(1) or None):
        return []
    marks = ctx["all_markers"] | set(ctx["markers"])
    if any(x.strip(_WS) in marks for x in (head.group(0), tail.group(0))):
        return []
    return [Edit("delete", 0, head.group(0), ""), Edit("delete", end - head.end(), tail.group(0), "")]


def _closers_as_rendered(setup: _Setup | None, ctx: dict[str, Any]) -> list[str]:
    """The analysis's closers with the whitespace the template's render of a call writes before them
    (GLM's ``\n</tool_call>``): what a server's stop string may have removed, whitespace and all."""
    if setup is None or not ctx["names"] or not ctx["closers"]:
        return []
    render = _rendered_call(setup, ctx["names"][0], {"a": "V0"})
    out = []
    for c in ctx["closers"][:2]:
        m = re.compile(r"([ \t\r\n]{1,8})" + re.escape(c)).search(render)
        if m:
            out.append(m.group(0))
    return out


_WS_TAG = re.compile(r"([ \t\r\n]{1,8})(</[A-Za-z_][\w:\-]{0,40}>)")


def _tags_as_rendered(setup: _Setup | None, ctx: dict[str, Any]) -> list[tuple[str, str]]:
    """Closing tags the template's render of a call writes after whitespace, with that whitespace
    (``("\n", "</parameter>")``); one render per triage."""
    if setup is None or not ctx["names"]:
        return []
    render = _rendered_call(setup, ctx["names"][0], {"a": "V0"})
    return list(dict.fromkeys((m.group(1), m.group(2)) for m in _WS_TAG.finditer(render)))


def _literal_head_left_out(s: str, at: int, lits: list[str]) -> list[Edit]:
    """Where the parser wants a literal and the output writes all of it but its first character(s) there
    (``function=`` for ``<function=``): the missing head put in — one insert, not the whole literal again before
    what the model wrote of it. The tail written must be the longer part and hold a word character."""
    out: list[Edit] = []
    for lit in lits[:4]:
        for i in range(1, len(lit)):
            tail = lit[i:]
            if len(tail) <= i or not re.search(r"\w", tail):
                break
            if lit[:i].strip(_WS) and s.startswith(tail, at):
                out.append(Edit("insert", at, "", lit[:i]))
                break
    return out


def _gap_in_literal(s: str, at: int, lits: list[str], marks: set[str] | frozenset[str] = frozenset()
                    ) -> list[Edit]:
    """Where the parser wants a literal of several tokens (``<|START_THINKING|><|END_THINKING|><|START_ACTION|>``)
    and the output writes its first token(s) there and the rest further on: deleting the text between (what the
    model wrote inside a marker sequence the format writes glued) — one edit per literal, looked for within 4 KiB."""
    out: list[Edit] = []
    for lit in lits[:4]:
        toks = list(_TOKEN.finditer(lit))
        if len(toks) < 2:
            heads = [lit[:t.end()] for t in toks[:1] if t.start() == 0] + sorted(
                (m for m in marks if len(m) < len(lit) and lit.startswith(m)), key=len, reverse=True)
            if heads and lit[len(heads[0]):].strip(_WS):
                # a marker and text (`<|tool_call>call:`): a few characters written between the two
                head, rest = heads[0], lit[len(heads[0]):]
                j = s.find(rest, at + len(head), at + len(head) + 9) if s.startswith(head, at) else -1
                if j > at + len(head) and not _TOKEN.search(s, at + len(head), j):
                    out.append(Edit("delete", at + len(head), s[at + len(head):j], ""))
            continue
        for t in toks[:-1][::-1]:
            head, rest = lit[:t.end()], lit[t.end():]
            if s.startswith(head, at) and rest.strip(_WS):
                j = s.find(rest, at + len(head), at + len(head) + 4096)
                if j > at + len(head):
                    out.append(Edit("delete", at + len(head), s[at + len(head):j], ""))
                break
    return out


def _literal_with_space_off(s: str, at: int, lits: list[str]) -> list[Edit]:
    """Where the parser wants a literal holding whitespace (``<function name="``) and the output writes it with
    one whitespace character left out (``<functionname="``) or another character in its place (a tokenizer's
    ``Ġ``, a space for a line break): that whitespace put back (one edit per literal)."""
    out: list[Edit] = []
    for lit in lits[:4]:
        for k, ch in enumerate(lit):
            if ch not in _WS or k == 0:
                continue
            if s.startswith(lit[:k], at) and s.startswith(lit[k + 1:], at + k) and lit[k + 1:]:
                out.append(Edit("insert", at + k, "", ch))
                break
            if at + k < len(s) and s[at + k] != ch and s.startswith(lit[:k], at) \
                    and s.startswith(lit[k + 1:], at + k + 1):
                out.append(Edit("replace", at + k, s[at + k], ch))
                break
    return out


def _text_before_literal(s: str, at: int, lits: list[str], ctx: dict[str, Any]) -> Edit | None:
    """Where the parser wants a marker literal the output writes further on (``Sure! <|START_ACTION|>`` where
    ``<|START_ACTION|>`` belongs first): the text in between deleted, when it holds no marker of the format
    (prose the model wrote where the format allows none); looked for within 4 KiB."""
    marks = [x for x in ctx["all_markers"] | set(ctx["markers"]) if x]
    for lit in lits[:2]:
        core_ = lit.strip(_WS)
        if not _marked(core_, marks):
            continue
        j = s.find(core_, at + 1, at + 4096)
        if core_.startswith("</") and j > at and re.search(r'[\w"]', s[at:j]):
            continue        # (words or a quote before a closer are inside the call, a member: only a stray bracket)
        if j > at and s[at:j].strip(_WS) and not _marked(s[at:j], marks):
            return Edit("delete", at, s[at:j], "")
    return None


_JSON_VALUE = "a JSON value"      # what a stop point expects where the grammar wants any JSON value
_PY_LITERAL = re.compile(r"(True|False|None)(?![\w.\-])")
_JSON_LITERAL = {"True": "true", "False": "false", "None": "null"}


def _json_value_edits(s: str, at: int) -> list[Edit]:
    """Where the parser wants a JSON value and the output writes Python's ``True`` / ``False`` / ``None`` there:
    the word replaced by JSON's literal (one edit)."""
    word = _PY_LITERAL.match(s, at)
    if word:
        return [Edit("replace", at, word.group(0), _JSON_LITERAL[word.group(0)])]
    return []


def _invented_call(s: str, at: int, p: _Parsed, ctx: dict[str, Any]) -> list[Edit]:
    """Where the parser wants a declared tool's name and the output names another, and a further call follows: the
    whole invented call deleted, up to where the next call starts (one edit); and, when the invented call's JSON
    follows an opener of the format and a closer of the format ends it before the next call, that block alone, from
    the opener through the closer (a call block inside the reasoning, with the reasoning's closer after it)."""
    names = [n for n in ctx["names"] if n]
    lits = [x.strip(_WS) for x in _literals(p.expected)]
    word = re.compile(r"[A-Za-z_][\w.\-]{0,63}").match(s, at)
    if not word or word.group(0) in names or not lits or not set(lits) <= set(names):
        return []
    opens = [o.strip(_WS) for o in ctx["openers"] if o.strip(_WS)]
    starts = [m.start() for m in _JSON_CALL_START.finditer(s, max(0, at - 200), at)]
    starts += [i for i in (s.rfind(o, max(0, at - 200), at) for o in opens) if i >= 0]
    if not starts:
        return []
    a = max(starts)
    nxt = [m.start() for m in itertools.islice(_JSON_CALL_START.finditer(s, at), 1)]
    nxt += [i for i in (s.find(o, at) for o in opens) if i >= 0]
    if not nxt:
        return []
    out = [Edit("delete", a, s[a:min(nxt)], "")]
    op = max(((i, o) for i, o in ((s.rfind(o, max(0, a - 40), a + 1), o) for o in opens) if i >= 0), default=None)
    if op is not None and op[0] < a and not s[op[0] + len(op[1]):a].strip(_WS):
        ends = [(j, c) for j, c in ((s.find(c, at, min(nxt)), c) for c in ctx["closers"] if c) if j >= 0]
        if ends:
            j, c = min(ends)
            out.append(Edit("delete", op[0], s[op[0]:j + len(c)], ""))
    return out


_JSON = json.JSONDecoder()
_JSON_KEY = re.compile(r'"[^"\\\n]{1,64}"')
_MEMBER_SEP = re.compile(r"\s{0,40}:\s{0,40}")
_MEMBER_NEXT = re.compile(r"\s{0,40},\s{0,40}")


def _member_spans(s: str, at: int) -> list[tuple[str, int, int]]:
    """The members of the JSON object whose first member starts at ``at``: ``(key, start, end)`` each, read within
    4 KiB; ``[]`` when the text there is no such object."""
    out: list[tuple[str, int, int]] = []
    i, end = at, min(len(s), at + 4096)
    while i < end and len(out) < 32:
        k = _JSON_KEY.match(s, i)
        sep = _MEMBER_SEP.match(s, k.end()) if k else None
        if not sep:
            return []
        try:
            _v, j = _JSON.raw_decode(s, sep.end())
        except ValueError:
            return []
        out.append((k.group(0), i, j))
        nxt = _MEMBER_NEXT.match(s, j)
        if not nxt:
            rest = re.compile(r"\s{0,40}\}").match(s, j)
            return out if rest else []
        i = nxt.end()
    return []


def _member_first(s: str, at: int, lits: list[str]) -> Edit | None:
    """Where the parser wants a JSON key first (``"name"``) and the object written at ``at`` holds that key after
    another member (``{"arguments": {…}, "name": "f"}``): the wanted member moved first (one edit, the members'
    order)."""
    keys = [x for x in lits if _JSON_KEY.fullmatch(x)]
    if not keys or not s.startswith('"', at) or not s[:at].rstrip(_WS).endswith("{"):
        return None
    spans = _member_spans(s, at)
    for key in keys[:2]:
        hit = [m for m in spans if m[0] == key]
        if hit and hit[0][1] > at:
            _k, a, b = hit[0]
            sep = s[spans[0][2]:spans[1][1]]          # the separator the model writes between members
            before = s[at:a][:len(s[at:a]) - len(sep)]   # the members written before the wanted one
            return Edit("move", at, s[at:b], s[a:b] + sep + before)
    return None


def _only_tool_named(s: str, at: int, p: _Parsed, ctx: dict[str, Any]) -> Edit | None:
    """Where the parser wants a tool's name and the request declares that one tool only, and the output names
    another there (``tool="a&amp;b"``): the name replaced by the declared one, up to the character the template's
    render writes right after a tool's name (one edit; with one tool declared the edit guesses nothing)."""
    lits = [x.strip(_WS) for x in _literals(p.expected)]
    names = [n for n in ctx["names"] if n]
    if len(names) != 1 or lits != names or ctx.get("setup") is None or s.startswith(names[0], at):
        return None
    if "after_name" not in ctx:
        render = _rendered_call(ctx["setup"], names[0], {})
        i = render.find(names[0])
        ctx["after_name"] = render[i + len(names[0]):i + len(names[0]) + 1] if i >= 0 else ""
    end = ctx["after_name"]
    if not end or end.isalnum() or end in _WS:
        return None
    j = s.find(end, at, at + 65)
    name = s[at:j] if j > at else ""
    if not name or any(ch in _WS + "<>[]{}" for ch in name) or _TOKEN.search(name) or _WELL_FORMED_NAME.fullmatch(name):
        # a name a request could declare is another tool, not a garbled one: the request lacks it (UNKNOWN_TOOL)
        return None
    return Edit("replace", at, name, names[0])


# what function-calling APIs accept as a tool's name (letters, digits, ``_ - . :``)
_WELL_FORMED_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


_NAME_MEMBER_BEFORE = re.compile(r'"name"\s{0,8}:\s{0,8}"([^"\\\n]{1,64})"\s{0,8},\s{0,8}$')


def _arguments_beside_name(s: str, p: _Parsed, ctx: dict[str, Any]) -> list[Edit]:
    """Where the parser wants the template's arguments key (``"arguments"``) and the call object writes, from there
    to its end, only members the request's schema declares for the tool it names (``{"name": "click", "point":
    […]}``): the arguments key and its object's brace put in before those members and the brace after them (two
    edits, kept for the next depth whatever its parse)."""
    key = f'"{ctx["args_key"]}"' if ctx.get("args_key") else ""
    at = p.stop
    if not key or key not in _literals(p.expected) or ctx.get("setup") is None or not s.startswith('"', at):
        return []
    head = _NAME_MEMBER_BEFORE.search(s, max(0, at - 200), at)
    if not head or head.group(1) not in ctx["names"]:
        return []
    props = properties_of(tool_parameters(ctx["setup"].request, head.group(1)))
    spans = _member_spans(s, at)
    if not spans or any(k[1:-1] not in props for k, _a, _b in spans):
        return []
    lead = key + ": {"
    return [Edit("insert", at, "", lead), Edit("insert", spans[-1][2] + len(lead), "", "}")]


def _plain_quoted(s: str, at: int, lits: list[str]) -> Edit | None:
    """A string value in plain quotes at ``at`` where the parser expects a delimiter token holding a quote
    character (Gemma 4's ``<|"|>``): one edit writing the value between that token on both sides."""
    q = s[at:at + 1]
    delims = [x for x in lits if q and q in x and _SPECIAL_SHAPE.fullmatch(x.strip(_WS))]
    if q not in ('"', "'") or not delims:
        return None
    i = at + 1
    end = min(len(s), at + 4096)
    while i < end and s[i] != q and s[i] != "\n":
        i += 2 if s[i] == "\\" else 1
    if i >= end or s[i] != q:
        return None
    d = delims[0].strip(_WS)
    return Edit("replace", at, s[at:i + 1], d + s[at + 1:i] + d)


def _quote_for_delimiter(edits: list[Edit]) -> str:
    """The delimiter token of edits that each put a plain-quoted value between a delimiter token, else ``""``."""
    toks = set()
    for e in edits:
        d = _SPECIAL_SHAPE.match(e.new)
        if e.kind != "replace" or not d or len(e.old) < 2 or e.old[0] != e.old[-1] or e.old[0] not in "\"'" \
                or e.new != d.group(0) + e.old[1:-1] + d.group(0):
            return ""
        toks.add(d.group(0))
    return toks.pop() if len(toks) == 1 else ""


def _context(setup: _Setup, bundle: Any) -> dict[str, Any]:
    from .causes import tool_names, tool_openers

    a = getattr(getattr(bundle, "report", None), "analysis", None)
    args_key = ""
    closers: list[str] = []
    spaced: list[str] = []
    markers: list[str] = []
    if a is not None and bundle.format == "peg-native":
        fj = a.to_json().get("tools", {})
        fmt = fj.get("format", {}) or {}
        args_key = (fmt.get("args_field") or fj.get("function", {}).get("args_field") or "").strip(_WS) \
            if isinstance(fmt, dict) else ""
        for k in ("per_call_end", "section_end"):
            raw = (fmt.get(k) or "") if isinstance(fmt, dict) else ""
            v = raw.strip(_WS)
            if v:
                closers.append(v)
                if raw.rstrip(_WS) != v:
                    spaced.append(raw.rstrip(_WS))     # the closer as the template writes it, its whitespace first
        for k in ("per_call_start", "section_start"):
            v = (fmt.get(k) or "").strip(_WS) if isinstance(fmt, dict) else ""
            if v:
                markers.append(v)
    src = getattr(setup.template, "source", "") or ""
    if not args_key:
        for k in ("arguments", "parameters"):
            if f'"{k}"' in src or f"'{k}'" in src:
                args_key = k
                break
    if not closers:     # a handler's format (no analysis): the preserved tokens that close a tag
        closers = [t.strip(_WS) for t in getattr(getattr(bundle, "parser", None), "preserved_tokens", None) or []
                   if isinstance(t, str) and t.strip(_WS).startswith("</")][:2]
    openers = tool_openers(setup)
    special = ""
    for o in openers:
        if o.strip(_WS).startswith("[") or o.strip(_WS).startswith("<|"):
            special = o
            break
    try:
        r_ends = [e for e in reasoning_markers(bundle)[1] if e]
    except Exception:  # noqa: BLE001 - a bundle without an analysis has no reasoning markers
        r_ends = []
    schemas = tool_schemas(setup.request)
    return {"names": tool_names(setup.request), "schemas": schemas, "openers": openers, "closers": closers, "spaced_closers": spaced,
            "gp": getattr(bundle, "generation_prompt", "") or "",
            "r_ends": r_ends,
            "args_key": args_key,
            "all_markers": _format_markers(a, bundle),
            "markers": markers + [o.strip(_WS) for o in openers if o.strip(_WS)], "special_start": special}


def _format_markers(analysis: Any, bundle: Any) -> set[str]:
    """Every marker of the format, whatever its role: the parser's preserved tokens and each string field of the
    analysis's tool format (openers, closers, argument markers), stripped; reasoning markers excluded."""
    out = {t.strip(_WS) for t in getattr(getattr(bundle, "parser", None), "preserved_tokens", None) or []
           if isinstance(t, str) and t.strip(_WS)}
    if analysis is not None:
        stack = [analysis.to_json().get("tools", {})]
        while stack:
            v = stack.pop()
            if isinstance(v, dict):
                stack.extend(v.values())
            elif isinstance(v, str) and len(v.strip(_WS)) >= 2:
                out.add(v.strip(_WS))
    r_start, r_ends = reasoning_markers(bundle)
    return out - {x.strip(_WS) for x in [r_start] + r_ends if x}


def nearest_output(setup: _Setup, bundle: Any, output: str, budget: _Budget, ctx: dict[str, Any],
                   stop: Any = None, want: dict[str, Any] | None = None) -> tuple[list[Edit], _Parsed] | None:
    """Breadth-first over edit sequences (≤ :data:`MAX_EDITS`), bounded by ``budget``: the first sequence
    whose output parses clean with calls and no marker text left in the content. ``stop``: the explanation's
    stop point, where the search starts when the parse itself settled the output as content. ``want``: the
    user's expected message (an output that already parses clean but to another message): only a parse that
    also gives it is accepted."""
    try:
        if not budget.take(len(output)):
            return None
        start = _parse(setup, output)
    except Exception:  # noqa: BLE001 - a parser that does not build has no nearest output
        return None
    if stop is not None and start.stop < 0 and not start.message.tool_calls and 0 <= stop.output_pos < len(output):
        # the content route read the whole output; the call route's furthest point is where an edit belongs
        start = replace(start, stop=stop.output_pos, expected=list(stop.expected))
    if stop is not None and start.stop < 0 and start.message.tool_calls and 0 <= stop.output_pos < len(output):
        # calls read and text left after them: where the call route stopped is where a call-joining edit belongs
        ctx["stop_hint"] = (output, stop.output_pos, list(stop.expected))
    ctx.setdefault("output", output)
    ctx["want"] = want
    frontier: list[tuple[list[Edit], str, _Parsed]] = [([], output, start)]
    seen = {output}
    for _depth in range(MAX_EDITS):
        nxt: list[tuple[int, list[Edit], str, _Parsed]] = []
        kept: list[tuple[list[Edit], str, _Parsed]] = []
        for edits, s, p in frontier:
            groups = [[e] for e in _candidates(s, p, ctx)]
            if not edits and not p.message.tool_calls:
                pair = _wrapper_pair(s, ctx)
                if pair:
                    groups.append(pair)
            if p.stop >= 0 and len(edits) + 2 <= MAX_EDITS:
                wrap = _arguments_beside_name(s, p, ctx)
                if wrap:
                    groups.append(wrap)
            for group in groups:
                if len(edits) + len(group) > MAX_EDITS:
                    continue
                e = group[0]
                if e.kind == "insert" and e.new.strip(_WS) == "," and _CLOSING.match(s, e.pos):
                    # a lone separator before a closing bracket is no model's mistake (a grammar may accept the
                    # trailing comma): the member the grammar wants after it is what was left out
                    e = _member_insert(setup, s, e.pos, budget)
                    if e is None:
                        continue
                    group = [e]
                t = s
                for g in group:
                    t = g.apply(t)
                if t in seen:
                    continue
                seen.add(t)
                if not budget.take(len(t)):
                    return None
                try:
                    q = _parse(setup, t)
                except Exception:  # noqa: BLE001
                    continue
                if _accepts(q, ctx) and (want is None or gives_expected(q.message.to_openai(), want, q.output)):
                    return edits + group, q
                if len(group) > 1:
                    # a wrapper taken off whole: the call inside is what the next edit works on, however far
                    # the parse of it gets
                    kept.append((edits + group, t, q))
                    continue
                # progress: how far the parse got (a clean parse with calls got all the way; one step from done)
                # (a parse that reads to the end and waits for more got past any stop inside the output)
                progress = q.stop if q.stop >= 0 else (len(t) + 1 if q.message.tool_calls else
                                                       len(t) if q.truncated else -1)
                base = p.stop if p.stop >= 0 else -1
                if progress > base or (q.message.tool_calls and not p.message.tool_calls):
                    nxt.append((progress, edits + group, t, q))
        nxt.sort(key=lambda x: -x[0])
        # (and the furthest parse that reads calls, when the three are parses that wait for more input: the calls
        # read, what follows them is what the next edit works on)
        # (only prose after those calls: markup there is more of a call, which no deletion should take)
        calls = [x for x in nxt[3:] if x[3].message.tool_calls and x[3].stop >= 0
                 and not _TOKEN.search(x[2], x[3].stop)][:1] \
            if not any(x[3].message.tool_calls for x in nxt[:3]) else []
        frontier = [(e, t, q) for _pr, e, t, q in nxt[:3] + calls] + kept[:1]
        if not frontier:
            return None
    return None


_CLOSING = re.compile(r"\s{0,40}[}\]]")
_KEY_LITERAL = re.compile(r'"[A-Za-z_][\w\-]{0,40}"')
_MEMBER = re.compile(r',\s?("[A-Za-z_][\w\-]{0,40}"): ""')


def _member_insert(setup: _Setup, s: str, pos: int, budget: _Budget) -> Edit | None:
    """Where the parser wants a ``,`` before a closing bracket: the JSON member it wants after the comma (its
    key from one probe parse; the value an empty string, which the edit's sentence calls any value), as one
    insert; None when the parser names no key there."""
    probe = s[:pos] + ", \x01" + s[pos:]
    if not budget.take(len(probe)):
        return None
    try:
        q = _parse(setup, probe)
    except Exception:  # noqa: BLE001
        return None
    keys = [x for x in _literals(q.expected) if _KEY_LITERAL.fullmatch(x)]
    return Edit("insert", pos, "", f", {keys[0]}: \"\"") if keys else None


def _shift(edits: list[Edit]) -> list[Edit]:
    """Edits made one after another, as positions in the original output, listed in output order (the first
    mistake a reader meets first; edits at one position keep the order they were made in). The search's own list
    stays in the order it applied them. Whitespace put in and then more at the same position is one insert there
    (``\n`` then ``<`` where the model left out ``\n<``); two pieces of markup stay two edits."""
    out: list[Edit] = []
    for i, e in enumerate(edits):
        pos = e.pos
        for prev in reversed(edits[:i]):
            if prev.pos <= pos:
                pos -= len(prev.new) - len(prev.old)
        out.append(Edit(e.kind, pos, e.old, e.new))
    merged: list[Edit] = []
    for e in sorted(out, key=lambda e: e.pos):
        if merged and e.kind == "insert" and merged[-1].kind == "insert" and merged[-1].pos == e.pos \
                and not merged[-1].new.strip(_WS):
            merged[-1] = Edit("insert", e.pos, "", merged[-1].new + e.new)
        else:
            merged.append(e)
    return merged


def sentence_of(edits: list[Edit], output: str, unrendered: frozenset[int] = frozenset()) -> str:
    """One line naming what the model did, from the edits (positions in ``output``). An opener and its closer
    both inserted around the same text are one mistake (the model wrote the call bare), told once: "never
    closed" is said only of an opener the model did write and left open. ``unrendered``: the indices of inserts
    the template's own render does not write there — the parser wants them, the model omitted nothing."""
    parts = []
    paired = _inserted_pairs(edits, output)
    for i, e in enumerate(edits):
        if i in paired.values():
            continue
        after = output[e.pos:e.pos + 24].split("\n")[0] if e.pos < len(output) else ""
        member = _MEMBER.fullmatch(e.new) if e.kind == "insert" else None
        if member:
            parts.append(f"the model omitted the member {_q(member.group(1))} (any value)"
                         + (f" before {_q(after)}" if after.strip(_WS) else ""))
            continue
        if i in paired:
            closer = edits[paired[i]]
            parts.append(f"the model omitted both {_q(e.new.strip(_WS))} and its closer {_q(closer.new.strip(_WS))}"
                         + (f" around {_q(output[e.pos:closer.pos].strip(_WS), 24)}"
                            if output[e.pos:closer.pos].strip(_WS) else ""))
            continue
        if e.kind == "insert":
            tag = _CLOSER_TAG.match(e.new.strip(_WS))
            opener = _open_tag_before(output, tag.group(1), e.pos) if tag else ""
            if tag and opener and e.pos >= len(output):
                # (at the very end: the model may have written the closer and a stop sequence removed it)
                parts.append(f"the output ends without closing {_q(opener)}")
            elif tag and opener:
                parts.append(f"the model never closed {_q(opener)}"
                             + (f" (expected {_q(e.new.strip(_WS))} before {_q(after)})" if after else ""))
            elif i in unrendered:
                parts.append(f"the parser wants {_q(e.new.strip(_WS) or e.new)}"
                             + (f" before {_q(after)}" if after.strip(_WS) else "")
                             + " where the template's render of two calls writes none: the model omitted nothing "
                               "the template writes there")
            elif e.pos >= len(output):
                parts.append(f"the model stopped before {_q(e.new.strip(_WS) or e.new)}")
            else:
                parts.append(f"the model omitted {_q(e.new.strip(_WS) or e.new)}"
                             + (f" before {_q(after)}" if after.strip(_WS) else ""))
        elif e.kind == "delete":
            body = e.old.strip(_WS + ";,")
            tok = _TOKEN.match(body)
            # (one word between control tokens, `<|open|>think<|sep|>`, is one marker of the format: no call or turn)
            words = [w for w in _TOKEN.split(body) if w.strip(_WS)]
            marker = len(words) == 1 and words[0].isidentifier()
            whole = (_JSON_CALL_START.match(body) and body.endswith("}")) or (tok and len(body) > tok.end() + 10
                                                                               and not marker)
            parts.append(f"the model wrote {_q(e.old.strip(_WS) or e.old)}, "
                         + ("a whole call or turn where the format has no place for one" if whole else
                            "which the template's format has no place for"))
        elif e.kind == "replace" and _TOKEN.match(e.old) and not _TOKEN.sub("", e.old).strip(_WS) \
                and e.new[:1] in "{[" and not output[e.pos + len(e.old):].strip(_WS):
            parts.append(f"the output ends where the template writes the call's arguments: the model wrote "
                         f"{_q(e.old)} (the turn's end) where the template writes {_q(e.new)}")
        elif e.kind == "replace" and e.old and e.new == json.dumps(e.old, ensure_ascii=False):
            parts.append(f"the model wrote the text {_q(e.old)} where the template writes a JSON value (quoted, it "
                         "is a JSON string)")
        elif e.kind == "move" and _JSON_KEY.match(e.new) and _JSON_KEY.match(e.old):
            key = _JSON_KEY.match(e.new).group(0)
            parts.append(f"the model wrote the member {_q(key)} after {_q(_JSON_KEY.match(e.old).group(0))}, "
                         "where the template writes it first")
        elif e.kind == "move":
            moved = _moved_part(e)
            parts.append(f"the model wrote {_q(moved)} after {_q(e.old)}, where the parser wants it first (the "
                         "schema's order)" if moved else f"the model wrote {_q(e.old)} in another order")
        else:
            parts.append(f"the model wrote {_q(e.old)} where the template writes {_q(e.new)}")
    return "; then ".join(parts)


_CLOSER_TAG = re.compile(r"</([\w:\-]{1,64})>?$")


def _moved_part(e: Edit) -> str:
    """What a ``move`` put first: the shortest head of ``e.new`` that ``e.old`` ends with, the rest of ``e.new``
    being the rest of ``e.old`` (``""`` when the move is no such swap)."""
    for n in range(1, len(e.new)):
        head, rest = e.new[:n], e.new[n:]
        k = len(rest) - len(rest.lstrip(_WS))        # the separator, moved with the part
        if e.old.endswith(head) and rest[k:] + rest[:k] == e.old[:len(e.old) - n]:
            return head
    return ""


def _open_tag_before(output: str, name: str, pos: int) -> str:
    """The last ``<name…>`` the model wrote before ``pos`` and did not close before it (``""`` if none)."""
    i = output.rfind("<" + name, 0, pos)
    while i >= 0 and output[i + 1 + len(name):i + 2 + len(name)] not in (">", "=", " ", "\n", "\t"):
        i = output.rfind("<" + name, 0, i)          # `<tool_call_x` is no `<tool_call`
    if i < 0 or output.find("</" + name, i, pos) >= 0:
        return ""
    j = output.find(">", i, pos)
    return output[i:j + 1] if j > 0 else "<" + name + ">"


def _inserted_pairs(edits: list[Edit], output: str) -> dict[int, int]:
    """Index of an inserted opener -> index of the inserted closer of the same tag after it, where the model
    wrote no such opener between them: both edits put back one wrapper the model left out."""
    pairs: dict[int, int] = {}
    for j, c in enumerate(edits):
        tag = _CLOSER_TAG.match(c.new.strip(_WS)) if c.kind == "insert" else None
        if not tag or _open_tag_before(output, tag.group(1), c.pos):
            continue
        name = tag.group(1)
        for i, o in enumerate(edits):
            if i != j and i not in pairs and o.kind == "insert" and o.pos <= c.pos \
                    and re.fullmatch(rf"<{re.escape(name)}(?:[\s=][^<>]{{0,200}})?>", o.new.strip(_WS)) \
                    and output.find("<" + name, o.pos, c.pos) < 0:
                pairs[i] = j
                break
    return pairs


def _diff_visible(s: str) -> str:
    """``s`` as one line of the diff: whitespace visible and every invisible character escaped (``\\u2028``,
    ``\\u0085``: every character that could break a line among them), so no text of the output can start a diff
    line of its own."""
    return _visible(s)


def diff_of(edits: list[Edit], output: str, width: int = 30) -> str:
    """A readable diff that no text can forge: per edit a header with its position (numbers only), the original
    window on a ``-`` line and the edited one on a ``+`` line, each followed by a ``?`` guide line that marks the
    removed (``-``) or inserted (``+``) characters in columns (difflib's ndiff style). The output's own text is
    never wrapped in markup, so a ``}``, ``[-`` or ``+}`` the model wrote reads as itself."""
    lines = []
    for e in edits:
        a = max(0, e.pos - width)
        before = _diff_visible(output[a:e.pos])
        old, new = _diff_visible(e.old), _diff_visible(e.new)
        after = _diff_visible(output[e.pos + len(e.old):min(len(output), e.pos + len(e.old) + width)])
        what = (f"insert {len(e.new)} character(s)" if not e.old else f"delete {len(e.old)} character(s)"
                if not e.new else f"replace {len(e.old)} character(s) with {len(e.new)}")
        lines.append(f"@@ output position {e.pos}: {what} @@")
        lines.append("- " + before + old + after)
        if old:
            lines.append("? " + " " * len(before) + "-" * len(old))
        lines.append("+ " + before + new + after)
        if new:
            lines.append("? " + " " * len(before) + "+" * len(new))
    return "\n".join(lines)
