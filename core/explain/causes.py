"""Why a parse went as it did: :func:`classify` names causes (:class:`~core.explain.explain.Cause`) with the
evidence for each, from the trace of the parse, the analysis / handler, the request and the output."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

from ..chat.prompt import THINKING_OFF_CONTEXT, prepare_request, render_prompt
from ..chat.request import ChatRequest, ToolChoice
from ..escapes import code_span
from .model import (MARKER_TOKEN, properties_of, required_of, written_arguments_kind, WS, Cause, Finding, Setup, build_bundle, called_names, message_of, reasoning_markers,
                   stop_point, tool_stub, trace, visible_text)
from .spans import SpanLabel
from .trace_routes import ParseTrace

# a name as the model wrote it, invisible format characters and backticks included (a zero-width space inside
# `get_\u200bweather` must show in the cause, not cut the name at `get_`; it is shown as one code span)
_IDENT = re.compile(r"[A-Za-z_](?:[\w.\-`]|[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff])*")
_CALL_WORDS = ("tool_call", "tool_calls", "function", "tools")


_CONTROL_SHAPE = re.compile(r"<\|[^<>]*\|>|<｜[^<>]*｜>|\[[A-Z_]+\]|<\|[a-z_]+>|<[a-z_]+\|>")


def is_special_token(marker: str, preserved: list[str]) -> bool:
    """``marker`` (trimmed) is one of the parser's preserved tokens *and* has a control token's shape
    (``<|…|>``, ``<｜…｜>``, ``[TOOL_CALLS]``, Gemma's ``<|tool_call>``): decoders drop such tokens unless told
    to keep them (``skip_special_tokens``). XML-like tags such as Qwen's ``<tool_call>`` are added tokens that
    decode as text."""
    m = marker.strip(WS)
    return m in preserved and bool(_CONTROL_SHAPE.fullmatch(m))


def _q(s: str) -> str:
    return code_span(visible_text(s))


def tools_active(req: ChatRequest) -> bool:
    """The request offers tools and ``tool_choice`` is not ``none``."""
    return bool(req.tools) and req.tool_choice != ToolChoice.NONE


def tool_names(req: ChatRequest) -> list[str]:
    """Names of the request's function tools."""
    return [t["function"]["name"] for t in req.tools or [] if isinstance(t, dict) and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str)]


_DUMMY = {"type": "function", "function": {"name": "explain_probe_tool",
                                           "parameters": {"type": "object", "properties": {}}}}


def _probe_triggers(setup: Setup) -> list[Any]:
    """The lazy grammar's triggers of a parser built for ``setup`` with at least one tool offered."""
    req = setup.request
    probe = replace(req, tools=list(req.tools or []) or [_DUMMY], tool_choice=ToolChoice.AUTO)
    try:
        bundle = build_bundle(replace(setup, request=probe))
    except Exception:  # noqa: BLE001 - a template that cannot build with tools simply has no opener
        return []
    return list(getattr(bundle.parser, "grammar_triggers", []) or [])


def tool_openers(setup: Setup) -> list[str]:
    """The words that start a tool call in this template's format: the lazy grammar's word triggers (and the
    literal head of pattern triggers) of a parser built for a one-tool request — the same markers llama.cpp
    would trigger the grammar on. ``[]`` when the format has none."""
    return _trigger_heads(_probe_triggers(setup))


def _trigger_heads(triggers: list[Any]) -> list[str]:
    out: list[str] = []
    for t in triggers:
        v = getattr(t, "value", "")
        if getattr(t, "type", None) is not None and t.type.value.startswith("pattern"):
            v = re.split(r"[\\(\[.*+?{|^$]", v.lstrip("^"), maxsplit=1)[0]
        if v.strip(WS) and v not in out:
            out.append(v)
    return out


def written_openers(setup: Setup, output: str) -> list[tuple[str, int]]:
    """Where ``output`` holds what starts a tool call in this template's format, as the lazy grammar's triggers of
    a one-tool parser fire on it: a word trigger where the output writes the word, a pattern trigger where the
    whole pattern matches (``^`` at the output's start, a trailing ``$`` dropped: it fires on a prefix) — not where
    only the pattern's first character stands (gpt-oss's `<|start|>assistant<|channel|>commentary to` is a call,
    the `<` of `<|message|>` is not). Each (the text that matched, its output position), first position first."""
    return _triggers_written(_probe_triggers(setup), output)


def _triggers_written(triggers: list[Any], output: str) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for t in triggers:
        v = getattr(t, "value", "") or ""
        kind = getattr(getattr(t, "type", None), "value", "")
        if kind == "word":
            at = output.find(v.strip(WS)) if v.strip(WS) else -1
            if at >= 0:
                found.append((v.strip(WS), at))
            continue
        if not kind.startswith("pattern"):
            continue
        pat = v[:-1] if v.endswith("$") and not v.endswith("\\$") else v
        try:
            # the formats' own patterns (markers escaped), as repair call-ends-reasoning searches them: each is
            # anchored at the output's start or led by a literal, so one scan of the output (untrusted) is linear
            m = re.match(pat[1:], output) if pat.startswith("^") else re.search(pat, output)
        except re.error:
            continue
        if m and m.group(0).strip(WS):
            found.append((m.group(0).strip(WS), m.start() + len(m.group(0)) - len(m.group(0).lstrip(WS))))
    return sorted(dict.fromkeys(found), key=lambda f: f[1])


def classify(setup: Setup, bundle: Any, tr: ParseTrace, ex: Any) -> list[Finding]:  # noqa: C901
    """The causes of this parse, most specific first; ``[]`` for a clean parse with nothing suspicious."""
    req = setup.request
    out: list[Finding] = []
    msg = tr.message
    output = ex.output
    gp = ex.generation_prompt
    names = tool_names(req)
    active = tools_active(req)
    auto = bundle.format == "peg-native"
    analysis = bundle.report.analysis if (auto and bundle.report is not None) else None
    preserved = list(getattr(bundle.parser, "preserved_tokens", []) or [])

    # -- no tool format / tools not in the request
    if active and auto and analysis is not None and not analysis.caps.supports_tool_calls \
            and not analysis.tools.inferred_from:  # a format read from the instructions is parsed (improved)
        out.append(Finding(Cause.NO_TOOL_FORMAT, [
            "our analysis found no tool call in the renders it compared (caps.supports_tool_calls = false) — a gap "
            "of the analysis, not a statement about the template: the parser reads none, "
            "whatever the output holds"]))
    if active and auto and getattr(bundle.parser, "eps_fallback", False):
        src = getattr(setup.template, "source", "") or ""
        says = [w for w in _CALL_WORDS if w in src]
        out.append(Finding(Cause.NO_TOOL_FORMAT, [
            "the analysis found no tool-call format (tools.format.mode = "
            f"{analysis.tools.format.mode.value if analysis else 'NONE'}); the parser returns the output as content",
            ("the template's text mentions " + ", ".join(_q(w) for w in says) + " — its instructions may describe "
             "a format the renders did not show") if says else
            "the template's text does not mention tool calls: it gives the model no format to follow"]))
    triggers = _probe_triggers(setup) if (not active or not msg.tool_calls) else []
    openers = _trigger_heads(triggers)
    if not active:
        why = "has no tools" if not req.tools else "has tool_choice none"
        written = _triggers_written(triggers, output)
        if written:
            out.append(Finding(Cause.TOOLS_NOT_REQUESTED, [
                f"the output contains {_q(written[0][0])}, which starts a tool call in this template's format, "
                f"at output position {written[0][1]}",
                f"the request {why}, so the parser reads no tool calls: the call stays in content"]))
        else:
            probe = _call_without_tools(setup, ex)
            if probe:
                out.append(Finding(Cause.TOOLS_NOT_REQUESTED, [
                    probe, f"the request {why}, so the parser reads no tool calls: the call stays in content"]))

    # -- reasoning prefill
    r_start, r_ends = reasoning_markers(bundle)
    gp_tail = gp.rstrip(WS)
    opened = bool(r_start) and gp_tail.endswith(r_start)
    closed = bool(r_start and r_ends) and any(gp_tail.endswith(e) for e in r_ends) and r_start in gp
    parsed_content = "".join(sp.text for sp in tr.spans if sp.label == SpanLabel.CONTENT)
    leak = [m for m in [r_start] + r_ends if m and m in parsed_content]
    reopened = opened and msg.reasoning_content.lstrip(WS).startswith(r_start)
    if leak or reopened or (opened and tr.truncated_at >= 0 and not msg.content and msg.reasoning_content
                and not msg.tool_calls):
        ev = []
        if leak:
            ev.append(f"the content holds the reasoning marker {_q(leak[0])}")
        if reopened:
            ev.append(f"the output opens the reasoning again with {_q(r_start)}: the marker is now reasoning text")
        switch = _thinking_switch(setup, gp) if (opened or closed or (r_start and r_start in output)) else ""
        if opened:
            # "must not open it again" only beside an output that does write the opener
            ev.append(f"the generation prompt ends with {_q(r_start)}: it opens the reasoning block{switch}"
                      + (", so the output must not open it again" if r_start.strip(WS) in output else ""))
            if not any(e in output for e in r_ends):
                ev.append(f"the output never closes the reasoning ({' or '.join(_q(e) for e in r_ends)}): all of it "
                          "is reasoning")
        elif closed:
            ev.append(f"the generation prompt opens and closes the reasoning block{switch}: reasoning the model "
                      "still writes is content")
        elif r_start and r_start in output:
            flag = switch[2:-1] if switch.startswith(" (") else ""
            ev.append(f"the output opens reasoning with {_q(r_start)} while reasoning is not being extracted here "
                      f"(reasoning_format={req.reasoning_format.value}" + (f", {flag})" if flag else ")"))
        out.append(Finding(Cause.REASONING_PREFILL, ev))

    # -- truncated
    # (an output with nothing written was not cut: the triage says the model wrote nothing)
    if tr.truncated_at >= 0 and ex.truncated is not None and not ex.blank and not any(f.cause == Cause.REASONING_PREFILL and
                                                                     not msg.content for f in out):
        t = ex.truncated
        where = " > ".join(p for p in t.path if p) or "the format"
        out.append(Finding(Cause.TRUNCATED, [
            f"the output ends inside {where}" + (f"; a complete output would continue with {' or '.join(t.expected)}"
                                                  if t.expected else ""),
            "the parse accepts it only as the prefix of a longer output (llama.cpp keeps the partial result)"]))

    # -- where the main parse stopped
    if ex.stop is not None and msg.tool_calls and not req.parallel_tool_calls:
        found = ex.text[ex.stop.pos:]
        again = [o.strip(WS) for o in tool_openers(setup) if o.strip(WS) and found.startswith(o.strip(WS))]
        if again:
            out.append(Finding(Cause.PARALLEL_NOT_REQUESTED, [
                f"at output position {ex.stop.output_pos} a second tool call starts ({_q(again[0])}) after "
                f"{len(msg.tool_calls)} parsed call(s)",
                "the request has parallel_tool_calls = false, so the format allows one call: the rest stays in "
                "content"]))
    if ex.stop is not None and not any(f.cause == Cause.PARALLEL_NOT_REQUESTED for f in out):
        out.extend(_stop_findings(ex, names, preserved, output, analysis))

    # -- tool calls left in the content (clean parse)
    if active and not msg.tool_calls and msg.content and ex.stop is None:
        out.extend(_content_calls(setup, ex, msg.content, names, openers, preserved, output, analysis))

    # -- arguments vs schema
    if active and msg.tool_calls:
        ev = _schema_evidence(req, msg, output)
        if ev:
            out.append(Finding(Cause.SCHEMA_MISMATCH, ev))

    # -- fidelity
    other = "improved" if setup.fidelity == "llama.cpp" else "llama.cpp"
    try:
        om, oclean = message_of(replace(setup, fidelity=other), output)
    except Exception:  # noqa: BLE001 - the other fidelity may not build; that is not this parse's problem
        om = None
    tolerated = _tolerance_repairs(om) if om is not None else []
    if om is not None and om.to_openai() != msg.to_openai() and tolerated and out:
        # the other fidelity reads the call only because a repair tolerates the drift found above: that is
        # evidence for the drift (what the repair accepts), not a cause of its own
        ex.other = om.to_openai()
        out[-1].evidence.append(
            f"at {other} fidelity the repair {', '.join(tolerated)} "
            + ("accepts this drift: the parse is clean" if oclean else
               "fires, though the parse there is still not clean")
            + f" ({len(om.tool_calls)} tool call(s), content {len(om.content)} "
            f"chars; `python -m core repairs` lists what each repair accepts)")
    elif om is not None and om.to_openai() != msg.to_openai():
        ex.other = om.to_openai()
        out.append(Finding(Cause.FIDELITY_DIFFERS, [
            f"at {other} fidelity the parse is {'clean' if oclean else 'not clean'} and gives a different message "
            f"({len(om.tool_calls)} tool call(s), content {len(om.content)} chars, reasoning "
            f"{len(om.reasoning_content)} chars; here {len(msg.tool_calls)}, {len(msg.content)}, "
            f"{len(msg.reasoning_content)})"]))
    if not out and not ex.clean and not ex.blank:
        out.append(Finding(Cause.DRIFT, [ex.stop.words() if ex.stop else "the parse needed a recovery"]))
    return out


def _thinking_switch(setup: Setup, gp: str) -> str:
    """The request's thinking switch as a line about the generation prompt names it: ``" (enable_thinking=…)"``
    where the request sets it, or where the renders show the switch changes the generation prompt (then the value is
    the default the request left); ``", whatever enable_thinking is set to"`` where the prompt rendered with every
    thinking switch off still ends with ``gp``; ``""`` where that render fails (nothing shown either way)."""
    req = setup.request
    flag = f"enable_thinking={str(req.enable_thinking).lower()}"
    if req.enable_thinking_given:
        return f" ({flag})"
    try:
        prep = prepare_request(setup.template, req)
        off = render_prompt(replace(prep, enable_thinking=False), additional_context=THINKING_OFF_CONTEXT)
    except Exception:  # noqa: BLE001 - a prompt that does not render with the switches off shows nothing
        return ""
    if off.rstrip(WS).endswith(gp.rstrip(WS)):
        return ", whatever enable_thinking is set to"
    return f" ({flag}, the default)"


def _tolerance_repairs(m: Any) -> list[str]:
    """Names of the tolerance repairs (improved fidelity only, :mod:`core.chat.repairs`) that settled ``m``."""
    from ..chat.repairs import REPAIRS_BY_NAME, RepairStage

    names = [getattr(r, "name", "") for r in getattr(m, "repairs", None) or []]
    return list(dict.fromkeys(n for n in names
                              if n in REPAIRS_BY_NAME and REPAIRS_BY_NAME[n].stage is RepairStage.TOLERANCE))


def _call_without_tools(setup: Setup, ex: Any) -> str:
    """Evidence that the output is a tool call in the template's own format although the request offers no
    tools: re-parsed with the called name offered as a tool, the parser reads a call (or reads into one);
    ``""`` when it does not."""
    for name in called_names(ex, setup.request)[:4]:
        req = replace(setup.request, tools=[tool_stub(name)], tool_choice=ToolChoice.AUTO)
        try:
            _b, tr = trace(replace(setup, request=req), ex.output)
        except Exception:  # noqa: BLE001 - evidence only
            continue
        at = ex.output.find(name)
        if tr.message.tool_calls or (at >= 0 and tr.stop - tr.gp_len > at):
            how = (f"parses into a call of {_q(name)}" if tr.message.tool_calls
                   else f"reads into a call of {_q(name)} (up to output position {tr.stop - tr.gp_len})")
            return f"offered a tool named {_q(name)}, the parser {how}: the output is a tool call in this template's format"
    return ""


def _stop_findings(ex: Any, names: list[str], preserved: list[str], output: str, analysis: Any) -> list[Finding]:
    st = ex.stop
    found = ex.text[st.pos:]
    path = " > ".join(p for p in st.path if p)
    where = f"at output position {st.output_pos} (in {path or 'the top level'}): {st.words()}"
    # the literals with line breaks and tabs written \n \t, the form the rules below were written on (read back
    # from their code spans, they lost a name's own backticks)
    lits = [x.replace("\n", "\\n").replace("\t", "\\t") for x in st.literals]
    ident = _IDENT.match(found)
    if "a name the request declares" in st.expected and ident:
        got = ident.group(0)
        if re.match(r"functions[._]", got):
            return [Finding(Cause.WRONG_CALL_ID, [where, f"the call id {_q(got)} carries the tool name, but not in the "
                                                  "template's id shape (functions.NAME:N)"])]
        return [Finding(Cause.UNKNOWN_TOOL, [where, f"the model called {_q(got)}; the request offers "
                                             + ", ".join(_q(n) for n in names)])]
    if names and any(x in names for x in lits):
        got = ident.group(0) if ident else found[:20]
        if got not in names:
            return [Finding(Cause.UNKNOWN_TOOL, [where, f"the model called {_q(got)}; the request offers "
                                                 + ", ".join(_q(n) for n in names)])]
    arg_rules = [p for p in st.path if "-arg-" in p]
    if arg_rules or any(p.endswith("-schema") for p in st.path):
        return [Finding(Cause.SCHEMA_MISMATCH, [where, "the parser reads arguments by the tool's schema: the "
                                                "argument here is not one the schema declares, or not of its type"])]
    fmt = analysis.tools.format if analysis is not None else None
    id_keys = [k for k in ((fmt.id_field, fmt.gen_id_field) if fmt is not None else ()) if k]
    if any("tool-id" in p for p in st.path) or (id_keys and "`,`" in st.expected and
                                                 any(p.startswith("tool") for p in st.path)):
        return [Finding(Cause.WRONG_CALL_ID, [where, "the template's calls carry a call id"
                                              + (f" (JSON key {_q(id_keys[0])})" if id_keys else "")
                                              + "; the model's call does not have it in the template's shape"])]
    if lits and found.startswith('"') and all(x.startswith('"') for x in lits):
        key = re.match(r'"[^"]*"', found)
        return [Finding(Cause.OTHER_JSON_SHAPE, [where, f"the model wrote the key {_q(key.group(0) if key else found[:20])}"
                                                 f" where the template's calls have {' or '.join(_q(x) for x in lits)}"])]
    if preserved and not any(p in output for p in preserved):
        for lit in lits:
            residue = _CONTROL_SHAPE.sub("", lit).strip(WS)
            if residue and residue != lit.strip(WS) and found.startswith(residue):
                return [Finding(Cause.SPECIAL_TOKENS_STRIPPED, [
                    where, f"the output has {_q(residue)} where the format has {_q(lit)}: the special tokens around "
                    f"it are missing, and the output holds none of the template's special tokens "
                    f"({', '.join(_q(p) for p in preserved[:6])}) — they were dropped when the tokens were decoded"])]
    tok = MARKER_TOKEN.match(found)
    if tok and tok.group(0) not in lits:
        stripped = [x for x in lits if is_special_token(x, preserved)]
        return [Finding(Cause.OTHER_MARKER, [where, f"the model wrote {_q(tok.group(0))} where the template's format "
                                             f"has {' or '.join(_q(x) for x in lits) or 'something else'}"
                                             + (" (a special token)" if stripped else "")])]
    opening = [x for x in lits if any(x.strip(WS).startswith(p) and is_special_token(p, preserved)
                                      for p in preserved if p)]
    if st.output_pos == 0 and preserved and len(opening) * 2 > len(lits) and output.strip(WS) \
            and not any(p in output for p in preserved):
        # every way the format lets the output begin starts with a control token (but for a header
        # continuation), and the output holds none of them anywhere: a decoder that skips special tokens
        # removed them all, it is not another syntax
        return [Finding(Cause.SPECIAL_TOKENS_STRIPPED, [
            where, f"{len(opening)} of the {len(lits)} ways the format begins the output start with a special token "
            f"({', '.join(_q(x) for x in opening[:3])}), and the output holds none of the template's special tokens "
            f"({', '.join(_q(p) for p in preserved[:6])}) anywhere: they were dropped when the tokens were decoded"])]
    if lits and all(is_special_token(x, preserved) for x in lits if x.strip(WS)) and \
            not any(p in output for p in preserved):
        return [Finding(Cause.SPECIAL_TOKENS_STRIPPED, [where, "the expected marker is a special token and the "
                                                        "output holds none of the template's special tokens "
                                                        f"({', '.join(_q(p) for p in preserved[:6])})"])]
    return [Finding(Cause.DRIFT, [where])]


def _content_calls(setup: Setup, ex: Any, content: str, names: list[str], openers: list[str],
                   preserved: list[str], output: str, analysis: Any) -> list[Finding]:
    """A clean parse without tool calls although the content looks like one: which marker is missing or
    different (checked by re-parsing with the template's opener inserted)."""
    hits = [n for n in names if re.search(r"(?<![\w])" + re.escape(n) + r"(?![\w])", content)]
    if not hits:
        return []
    pos = content.find(hits[0])
    toks = [m for m in MARKER_TOKEN.finditer(content[:pos]) if m.group(0).strip("<>/|[]=") not in names]
    other = [o for o in openers if o.strip(WS) in content]
    loose = [o for o in other if o not in content]
    if loose:
        return _loose_opener(setup, ex, loose[0], hits[0], analysis)
    if toks and not other:
        t = toks[-1].group(0)
        return [Finding(Cause.OTHER_MARKER, [
            f"the content calls {_q(hits[0])} after {_q(t)}; the template's tool calls start with "
            + (" or ".join(_q(o) for o in openers) or "a marker the analysis did not find")])]
    if not openers:
        return []
    opener = openers[0]
    start = _call_start(content, pos)
    idx = output.find(content[start:start + 40]) if content[start:start + 40] else -1
    if idx < 0:
        return []
    got = None
    for ins in dict.fromkeys((opener, opener.strip(WS))):
        fixed = output[:idx] + ins + output[idx:]
        try:
            _b, ftr = trace(setup, fixed)
        except Exception:  # noqa: BLE001 - a candidate that does not build proves nothing
            continue
        at_name = output.find(hits[0], idx)
        inside = ftr.stop - ftr.gp_len > max(idx + len(ins), at_name + len(ins))   # read past the tool name
        if ftr.message.tool_calls or inside:
            got = (ftr, ins)
            break
    if got is None:
        return _json_call_in_content(content, hits[0], analysis) or _python_call_in_content(content, hits[0], opener)
    ftr, ins = got
    m, clean = ftr.message, ftr.entry == "main" and ftr.stop < 0
    opener = opener.strip(WS)
    # (a decoder that skips special tokens skips all of them: a control token of the template's own kept in the
    # output, `<|"|>` inside Gemma 4's call, shows the tokens were decoded and the model left the opener out)
    src = getattr(setup.template, "source", "") or ""
    intact = [t for t in _CONTROL_SHAPE.findall(output) if t in src]
    stripped = is_special_token(opener, preserved) and not any(p in output for p in preserved if p) and not intact
    # an earlier assistant turn of this conversation carries tool calls: the same server read the opener then,
    # so its decoder keeps the token and this time the model left it out
    earlier = stripped and _history_has_calls(setup.request)
    cause = Cause.SPECIAL_TOKENS_STRIPPED if stripped and not earlier else Cause.MISSING_OPENER
    if m.tool_calls:
        ev = [f"the content calls {_q(hits[0])} without the opener {_q(opener)}; with {_q(opener)} inserted at "
              f"output position {idx} the output parses {'clean ' if clean else ''}into {len(m.tool_calls)} tool "
              "call(s)"]
        if not clean and ftr.stop >= 0:
            sp = stop_point(ftr.text, ftr.gp_len, ftr.stop, ftr.furthest.expected, ftr.furthest.path)
            ev[0] += (f", not clean: the parser stops at position {max(0, sp.output_pos - len(ins))} of the output, "
                      f"where it {sp.words()}")
    else:
        sp = stop_point(ftr.text, ftr.gp_len, ftr.stop, ftr.furthest.expected, ftr.furthest.path)
        ev = [f"the content calls {_q(hits[0])} without the opener {_q(opener)}; with {_q(opener)} inserted at "
              f"output position {idx} the parser reads the call up to position {sp.output_pos - len(ins)}, where "
              f"it {sp.words()}"]
    if earlier:
        ev.append(f"{_q(opener)} is a special token, but an earlier assistant turn of the conversation carries tool "
                  "calls, which the same server read with this opener: the model omitted it here (a decoder that "
                  "strips special tokens would have lost it then too)")
    elif stripped:
        ev.append(f"{_q(opener)} is a special token and the output holds none of the template's special tokens "
                  f"({', '.join(_q(p) for p in preserved[:6])}): they were dropped when the tokens were "
                  "detokenized (llama.cpp keeps them only when they are in the parser's preserved tokens)")
    return [Finding(cause, ev)]


def _history_has_calls(req: Any) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
               for m in getattr(req, "messages", None) or [])


def _find_call(value: Any, name: str, path: str = "", depth: int = 0) -> str | None:
    """The JSON path of the object inside ``value`` that names the tool ``name`` (``None`` if none)."""
    if depth > 4:
        return None
    if isinstance(value, dict):
        if name in [v for v in value.values() if isinstance(v, str)]:
            return path or "(top level)"
        for k, v in value.items():
            found = _find_call(v, name, f"{path}.{k}" if path else k, depth + 1)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value[:8]):
            found = _find_call(v, name, f"{path}[{i}]", depth + 1)
            if found:
                return found
    return None


def _json_call_in_content(content: str, name: str, analysis: Any) -> list[Finding]:
    """The content holds the call as a JSON value of another shape than the template's: where in it the call
    sits and which keys it uses, against the analysis' JSON fields."""
    dec = json.JSONDecoder()
    for i, ch in enumerate(content):
        if ch not in "{[":
            continue
        try:
            value, _end = dec.raw_decode(content, i)
        except ValueError:
            continue
        path = _find_call(value, name)
        if path is None:
            continue
        keys = ""
        node: Any = value
        for part in re.findall(r"[^.\[\]]+|\[\d+\]", path if path != "(top level)" else ""):
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        if isinstance(node, dict):
            keys = ", ".join(_q(json.dumps(k)) for k in node)
        want = ""
        if analysis is not None:
            f = analysis.tools.format
            want = (f"; the template writes {_q(f.section_start or f.per_call_start or '')} then "
                    f"{{{json.dumps(f.name_field or 'name')}: …, {json.dumps(f.args_field or 'arguments')}: …}}")
        return [Finding(Cause.OTHER_JSON_SHAPE, [
            f"the content holds the call of {_q(name)} as JSON at {_q(path)} with the keys {keys}{want}"])]
    return []


def _python_call_in_content(content: str, name: str, opener: str) -> list[Finding]:
    """The content holds the call in Python call syntax (``name(key=value, …)``), as pythonic-format models
    write it, where the template's format starts with ``opener``: drift the opener re-parse cannot fix."""
    m = re.search(r"(?<![\w.])" + re.escape(name) + r"\(\s*(?:\)|[A-Za-z_]\w*\s*=)", content)
    if m is None:
        return []
    call = content[m.start():].split("\n", 1)[0]
    return [Finding(Cause.DRIFT, [
        f"the content calls {_q(name)} in Python call syntax ({_q(call[:60])}); the template's tool calls start "
        f"with {_q(opener.strip(WS))}, so the parser reads none"])]


def opener_path(analysis: Any) -> str:
    """The analysis field that starts a tool call: the per-call start, else the section start, else the
    function-name prefix (``""`` when none is set)."""
    f = analysis.tools.format
    return ("tools.format.per_call_start" if f.per_call_start else "tools.format.section_start" if f.section_start
            else "tools.function.name_prefix" if analysis.tools.function.name_prefix else "")


def _loose_opener(setup: Setup, ex: Any, opener: str, name: str, analysis: Any) -> list[Finding]:
    """The content holds the opener without the whitespace the template writes around it (llama.cpp matches
    it byte for byte): checked by re-parsing with the opener field trimmed; what that parse then meets is
    reported as well (a model drifting in one place often drifts in another)."""
    ev = [f"the content calls {_q(name)} after {_q(opener.strip(WS))}, but the template's opener is {_q(opener)}: "
          "the parser matches it byte for byte, whitespace included"]
    out = [Finding(Cause.OTHER_MARKER, ev)]
    path = opener_path(analysis) if analysis is not None else ""
    if not path:
        return out
    trimmed = replace(setup, overrides={**setup.overrides, path: opener.strip(WS)})
    try:
        _b, tr = trace(trimmed, ex.output)
    except Exception:  # noqa: BLE001 - the check is evidence, not a requirement
        return out
    out[0].overrides = {path: opener.strip(WS)}
    if tr.stop >= 0:
        sp = stop_point(tr.text, tr.gp_len, tr.stop, tr.furthest.expected, tr.furthest.path)
        ev.append(f"with {path} = {_q(opener.strip(WS))} the parser reads on into the call and stops: {sp.words()}")
        sub = type("Sub", (), {"stop": sp, "text": tr.text})()
        for f in _stop_findings(sub, tool_names(setup.request), [], ex.output, analysis):
            f.evidence = [f"after {path} = {_q(opener.strip(WS))}: " + e for e in f.evidence]
            out.append(f)
    elif tr.message.tool_calls:
        ev.append(f"with {path} = {_q(opener.strip(WS))} the output parses into {len(tr.message.tool_calls)} call(s)")
    return out


def _call_start(content: str, pos: int) -> int:
    """Where the call around a tool name at ``pos`` starts: the ``{`` or ``[`` that opens the JSON around it,
    else the start of the line."""
    brace = max(content.rfind("{", 0, pos), content.rfind("[", 0, pos))
    line = content.rfind("\n", 0, pos) + 1
    if brace >= line or (brace >= 0 and not content[brace:pos].count("\n")):
        # the outermost brace on the way back
        j = brace
        while j > 0 and content[j - 1] in "{[ \t\n" and content[j - 1] not in "\n":
            j -= 1
        return j if content[j] in "{[" else brace
    return line


def _schema_evidence(req: ChatRequest, msg: Any, output: str = "") -> list[str]:
    ev: list[str] = []
    tools = {t["function"]["name"]: t["function"] for t in req.tools or []
             if isinstance(t, dict) and isinstance(t.get("function"), dict)}
    # what a call's arguments say depends on its name and arguments only: thousands of equal calls are read once
    said: dict[tuple[str, str], list[str]] = {}
    for i, call in enumerate(msg.tool_calls):
        fn = tools.get(call.name)
        if fn is None:
            continue
        key = (call.name, call.arguments)
        found = said.get(key)
        if found is None:
            kind = written_arguments_kind(output, call.name) if _empty_object(call.arguments) else ""
            found = said[key] = [f"the arguments are {kind}, not an object: a call's arguments must be a JSON "
                                 "object (the parser shows {})"] if kind else _call_evidence(fn, call.arguments)
        if found:
            where = f"call {i} ({_q(call.name)}): "
            ev.extend(where + e for e in found)
    return ev


def _empty_object(arguments: str) -> bool:
    return arguments.strip(WS) in ("{}", "")


def _call_evidence(fn: dict[str, Any], arguments: str) -> list[str]:
    """What is wrong with ``arguments`` for the function ``fn`` against its schema (each without the call)."""
    try:
        args = json.loads(arguments)
    except ValueError:
        return [f"the arguments are not valid JSON: {_q(arguments[:60])}"]
    except RecursionError:      # valid JSON may nest past the decoder's depth: nothing to check it against
        return []
    schema = fn.get("parameters") or {}
    if not isinstance(args, dict) or not isinstance(schema, dict):
        return []
    ev: list[str] = []
    props = properties_of(schema)
    for r in required_of(schema):
        if r not in args:
            ev.append(f"required argument {_q(r)} is missing")
    for k, v in args.items():
        if props and k not in props and schema.get("additionalProperties") is False:
            ev.append(f"argument {_q(k)} is not in the schema")
        t = (props.get(k) or {}).get("type") if isinstance(props.get(k), dict) else None
        if isinstance(t, str) and not _type_ok(v, t):
            ev.append(f"argument {_q(k)} is {type(v).__name__}, the schema says {t}")
    return ev


def _type_ok(v: Any, t: Any) -> bool:
    """Whether ``v`` is of JSON Schema type ``t``: a name, or a list of names (any of them); any other ``type``
    (the request's schema is untrusted) says nothing."""
    if isinstance(t, list):
        return not t or any(_type_ok(v, x) for x in t[:16] if isinstance(x, str))
    if not isinstance(t, str):
        return True
    return {"string": isinstance(v, str), "integer": isinstance(v, int) and not isinstance(v, bool),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool), "boolean": isinstance(v, bool),
            "object": isinstance(v, dict), "array": isinstance(v, list), "null": v is None}.get(t, True)
