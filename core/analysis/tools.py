"""Phase 3 — how tool calls are written (analysis notes §10; llama.cpp ``analyze_tools``).

* T1 ``analyze_tool_calls``: an answer vs a tool-call turn; classifies the format (JSON_NATIVE /
  TAG_WITH_JSON / TAG_WITH_TAGGED) and finds the section / per-call markers; for JSON_NATIVE also the
  field mapping and, with parallel calls, ``T1-parallel`` (per-call vs section wrapper);
* T2 ``check_per_call_markers``: one call vs two — section or per-call markers;
* T3 ``extract_function_markers``: two function names — name prefix/suffix, argument separator, closer
  (``T3-close`` when no end marker is known);
* A1 / A2 (TAG_WITH_TAGGED): argument name markers and value markers;
* T5 ``extract_argument_separator`` (always "": the needles share no prefix — kept for parity);
* T7 ``extract_call_id_markers``: two call ids — where the id sits and its markers.

T6 (``extract_args_markers``) only acts for JSON_NATIVE but is never called for it upstream, so it is not
run. Exceptions of upstream (a JSON parse error in T1) are reported as probe failures instead of aborting.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..diff import (RenderParams, SegmentKind, calculate_diff_split, segmentize_markers, trim, trim_leading,
                    until_common_prefix)
from . import probes as P
from .patterns import (
    ANY,
    END,
    LAST_MARKER,
    MARKER,
    REST,
    SPACE,
    choice,
    lit,
    neg,
    parse_and_extract,
    parse_anywhere,
    star,
    tag,
    until,
)
from .result import (
    CallIdPosition,
    Caps,
    ReasoningAnalysis,
    ToolFormat,
    ToolsAnalysis,
)
from .fidelity import (CALL_ID_BEFORE_NAME, CALL_TURN_HEADER, MARKER_WHITESPACE_ALIGNMENT, PYTHONIC_CALLS,
                       STRING_ARGUMENT_PROBES)
from .session import Comparison, ProbeSession

_NOT_MARKER_CHAR = neg(MARKER) + ANY


def _in_json_pattern(needle: str):
    return (lit("{") | lit(":")) << tag("dq", lit('"' + needle + '"'))


def _dump(v: Any) -> str:
    """nlohmann ``dump()``: compact separators, non-ASCII kept."""
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _set(cmp: Comparison | None, obj: Any, path: str, **kw: Any) -> None:
    for k, v in kw.items():
        setattr(obj, k, v)
        if cmp is not None:
            cmp.found[f"{path}.{k}"] = v.value if hasattr(v, "value") else v


def analyze_tools(s: ProbeSession, caps: Caps, reasoning: ReasoningAnalysis) -> ToolsAnalysis:
    """Run T1–T7 (as the format requires) and return the tool-call analysis."""
    t = ToolsAnalysis()
    _t1(s, t, reasoning, caps.supports_parallel_tool_calls)
    if t.format.mode not in (ToolFormat.NONE, ToolFormat.JSON_NATIVE, ToolFormat.PYTHONIC):
        if caps.supports_parallel_tool_calls:
            _t2(s, t)
        _t3(s, t)
        if t.format.mode == ToolFormat.TAG_WITH_TAGGED:
            _a1(s, t)
            _a2(s, t)
        _t5(s, t)
        _t7(s, t)
    return t


def _call_turn(*calls: dict[str, Any]) -> RenderParams:
    return RenderParams([P.user(), P.assistant_calls(*calls)], tools=P.tools())


# ---------------------------------------------------------------------------------------------------- T1

def _t1(s: ProbeSession, t: ToolsAnalysis, reasoning: ReasoningAnalysis, parallel: bool) -> None:
    a = RenderParams([P.user(), P.assistant()], tools=P.tools())
    b = _call_turn(P.first_call())
    cmp = s.compare("T1", "How is a tool call written? An answer vs a turn with one call.", a, b)
    if not cmp.ok:
        return
    hay = cmp.diff.right
    if not hay:
        cmp.notes.append("the tool call is not rendered: no tool-call format")
        return
    if STRING_ARGUMENT_PROBES in s.improvements and not s.caps.supports_object_arguments \
            and _dump(P.first_call()["function"]["arguments"]) in hay:
        remark = ("T1: the template prints the call arguments as given: probes send them as JSON text, as requests "
                  "do (llama.cpp sends objects, printed as Python dict text)")
        cmp.notes.append(remark)
        s.note_improvement(STRING_ARGUMENT_PROBES, remark)
    if MARKER_WHITESPACE_ALIGNMENT in s.improvements:
        aligned = align_padded_markers(cmp.diff.left, hay)
        if aligned is not None:
            skipped, hay = aligned
            remark = (f"T1: {skipped.strip()!r} starts both turns with different padding: taken as common text, "
                      "not as part of the tool-call format")
            cmp.notes.append(remark)
            s.note_improvement(MARKER_WHITESPACE_ALIGNMENT, remark)
    f = t.format
    if parse_anywhere(_in_json_pattern(P.FUN_FIRST), hay).ok:
        mode = ToolFormat.JSON_NATIVE
        cmp.notes.append("the function name is a JSON string: the whole call is JSON")
    elif parse_anywhere(_in_json_pattern(P.ARG_FIRST), hay).ok:
        mode = ToolFormat.TAG_WITH_JSON
        cmp.notes.append("an argument name is a JSON key: arguments are a JSON object")
    else:
        mode = ToolFormat.TAG_WITH_TAGGED
        cmp.notes.append("neither the name nor the arguments are JSON strings: tagged arguments")
        if PYTHONIC_CALLS in s.improvements:
            span = find_pythonic_call(hay)
            if span is not None:
                _pythonic(cmp, t, hay, span)
                s.note_improvement(PYTHONIC_CALLS, cmp.notes[-1])
                return
    _set(cmp, f, "tools.format", mode=mode)

    clean = hay
    if reasoning.start:
        i = hay.find(reasoning.start)
        if i >= 0:
            clean = hay[:i] + hay[i + len(reasoning.start):]
    if reasoning.end:
        i = clean.find(reasoning.end)
        if i >= 0:
            clean = clean[:i] + clean[i + len(reasoning.end):]

    if mode == ToolFormat.JSON_NATIVE:
        try:
            _json_native(cmp, t, clean)
        except ValueError as e:
            msg = f"T1: the JSON tool call does not parse ({e}); JSON field mapping skipped"
            cmp.notes.append(msg)
            s.failures.append(msg)
            return
        if parallel:
            _json_parallel(s, t)
    else:
        _non_json(cmp, t, clean)
    f.section_end = trim(f.section_end)
    f.per_call_end = trim(f.per_call_end)
    cmp.found["tools.format.section_end"] = f.section_end
    cmp.found["tools.format.per_call_end"] = f.per_call_end


_WS = " \t\n\r\v\f"


def align_padded_markers(left: str, right: str) -> tuple[str, str] | None:
    """Improvement ``marker-whitespace-alignment``: the two sides of a diff may start with the same text that
    only whitespace makes different (the character diff stopped inside padding). Walk both sides while their
    non-whitespace characters agree; when that common run covers at least one whole marker of ``right``,
    return ``(the text of right up to the end of the last such marker, the rest of right without leading
    whitespace)``; else None."""
    i = j = 0
    nl, nr = len(left), len(right)
    while True:
        while i < nl and left[i] in _WS:
            i += 1
        while j < nr and right[j] in _WS:
            j += 1
        if i >= nl or j >= nr or left[i] != right[j]:
            break
        i += 1
        j += 1
    cut = 0
    pos = 0
    for seg in segmentize_markers(right[:j]):
        pos += len(seg.value)
        if seg.kind == SegmentKind.MARKER:
            cut = pos
    if cut == 0:
        return None
    rest = right[cut:].lstrip(_WS)
    return right[:len(right) - len(rest)], rest


# the value is the quoted probe value, or "%s" (optionally quoted) from a template that formats values with
# `"%s" | format(v)`, a filter the engine (llama.cpp's too) leaves unapplied (vLLM's Llama 3.2/4 pythonic, ToolACE)
_PY_CALL = re.compile(re.escape(P.FUN_FIRST) + r"\(\s*" + re.escape(P.ARG_FIRST)
                      + r"\s*=\s*(?:(['\"])XXXX\1|(['\"]?)%s\2)")


def find_pythonic_call(text: str) -> tuple[int, int] | None:
    """Improvement ``pythonic-calls``: the span ``(start, end)`` of the probe call written as a Python call
    (``FFF_FIRST_FUN_F(AA_ARG_FST_AA="XXXX", ...)``, either quote, or ``AA_ARG_FST_AA=%s`` from an unapplied
    ``format`` filter) in ``text``, up to its closing parenthesis
    (parentheses inside quoted strings ignored); None when there is none or it is not closed."""
    m = _PY_CALL.search(text)
    if m is None:
        return None
    depth = 0
    quote = ""
    i = m.start() + len(P.FUN_FIRST)
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return m.start(), i + 1
        i += 1
    return None


def _pythonic(cmp: Comparison, t: ToolsAnalysis, hay: str, span: tuple[int, int]) -> None:
    f = t.format
    before, after = hay[:span[0]].rstrip(_WS), hay[span[1]:].lstrip(_WS)
    wrapped = before.endswith("[") and after.startswith("]")
    if wrapped:
        before, after = before[:-1], after[1:]
    _set(cmp, f, "tools.format", mode=ToolFormat.PYTHONIC, section_start=trim(before), section_end=trim(after),
         tools_array_wrapped=wrapped)
    cmp.notes.append(f"the call is written as a Python call{' in a list' if wrapped else ''} between "
                     f"{f.section_start!r} and {f.section_end!r}: PYTHONIC")


def _json_native(cmp: Comparison, t: ToolsAnalysis, clean: str) -> None:
    f = t.format
    js = clean.find("{")
    je = clean.rfind("}")
    if js < 0:
        raise ValueError("no '{' in the rendered call")
    cut = clean[js:je + 1] if je >= js else clean[js:]
    obj = json.loads(cut)  # duplicate keys: first position, last value (as nlohmann's ordered_json)
    if not isinstance(obj, dict):
        raise ValueError("the rendered call is not a JSON object")

    def register(prefix: str, key: str, val: Any) -> None:
        full = f"{prefix}.{key}" if prefix else key
        if isinstance(val, str) and "call0000" in val:
            f.id_field = full
        elif isinstance(val, str) and val == P.FUN_FIRST:
            f.name_field = full
        elif P.ARG_FIRST in _dump(val):
            f.args_field = full
        elif "id" in key:
            f.gen_id_field = full

    for key, val in obj.items():
        if key == P.FUN_FIRST:
            f.fun_name_is_key = True
            f.name_field = ""
            f.args_field = ""
        else:
            if isinstance(val, dict) and P.ARG_FIRST not in _dump(val):
                f.function_field = key
                for k2, v2 in val.items():
                    register(key, k2, v2)
            register("", key, val)

    arr = parse_anywhere(tag("pre", lit("[") + SPACE) + lit(cut) + tag("post", SPACE + lit("]")), clean)
    if arr.ok:
        f.tools_array_wrapped = True
        js -= len(arr["pre"])
        je += len(arr["post"])
    je += 1
    located = []
    for name in (f.name_field, f.args_field, f.id_field, f.gen_id_field):
        if name:
            pos = clean.find(name)
            located.append((pos if pos >= 0 else float("inf"), name))
    located.sort()
    f.parameter_order = [n for _, n in located]
    f.section_start = trim_leading(clean[:js])
    f.section_end = trim(clean[je:])
    if f.tools_array_wrapped and f.section_end == "]":
        f.section_end = ""
    for k in ("fun_name_is_key", "tools_array_wrapped", "function_field", "name_field", "args_field", "id_field",
              "gen_id_field", "parameter_order", "section_start"):
        cmp.found[f"tools.format.{k}"] = getattr(f, k)


def _json_parallel(s: ProbeSession, t: ToolsAnalysis) -> None:
    cmp = s.compare("T1-parallel", "Is the JSON wrapper per call or per section? One call vs two.",
                    _call_turn(P.first_call()), _call_turn(P.first_call(), P.second_call()))
    if not cmp.ok:
        return
    f = t.format
    if f.section_start and f.section_start in cmp.diff.right:
        _set(cmp, f, "tools.format", per_call_start=f.section_start, per_call_end=f.section_end,
             section_start="", section_end="")


_FUN_MARKER = tag("fun_marker", choice(
    tag("fun_pre", lit("<") + until(">", P.FUN_FIRST)) + lit(P.FUN_FIRST)
    + tag("fun_post", neg(SPACE + lit("<")) + until(">") + lit(">")) + SPACE,
    tag("fun_pre", lit("[") + until("]", P.FUN_FIRST)) + lit(P.FUN_FIRST)
    + tag("fun_post", neg(SPACE + lit("[") + until("]") + lit("]")) + SPACE),
))
_DOUBLE_CLOSER = tag("call_end", MARKER + SPACE) + tag("sec_end", MARKER + SPACE) + END
_SINGLE_CLOSER = tag("sec_end", MARKER + SPACE) + END


def _non_json(cmp: Comparison, t: ToolsAnalysis, clean: str) -> None:
    f = t.format
    fm = parse_anywhere(_FUN_MARKER, clean)
    fun_marker = fm["fun_marker"] if fm.ok else P.FUN_FIRST
    per_tool = (tag("sec_start", MARKER + SPACE) + tag("call_start", MARKER + SPACE)
                + tag("fun_pre", until(fun_marker)) + lit(fun_marker) + tag("rest", REST))
    section = tag("sec_start", MARKER + SPACE) + lit(fun_marker) + tag("rest", REST)
    res = parse_anywhere(per_tool, clean)
    if res.ok:
        end = parse_anywhere(_DOUBLE_CLOSER, res["rest"])
        t.function.name_prefix = fm["fun_pre"] + t.function.name_prefix
        cmp.found["tools.function.name_prefix"] = t.function.name_prefix
        cmp.notes.append(f"two markers open the call; the function marker is {fun_marker!r}")
    else:
        res = parse_anywhere(section, clean)
        end = parse_anywhere(_SINGLE_CLOSER, res["rest"])
        cmp.notes.append(f"the function marker is {fun_marker!r}")
    _set(cmp, f, "tools.format", per_call_start=res["call_start"], per_call_end=end["call_end"],
         section_start=res["sec_start"], section_end=end["sec_end"])


# ---------------------------------------------------------------------------------------------------- T2

def _t2(s: ProbeSession, t: ToolsAnalysis) -> None:
    cmp = s.compare("T2", "Are the call markers per call or per section? One call vs two.",
                    _call_turn(P.first_call()), _call_turn(P.first_call(), P.second_call()))
    if not cmp.ok:
        return
    f = t.format
    d = cmp.diff
    second = trim_leading(calculate_diff_split(d.suffix, d.right).right)
    if f.section_start and second.startswith(f.section_start):
        cmp.notes.append("the second call repeats the section start: the markers are per call")
        _set(cmp, f, "tools.format", per_call_start=f.section_start, per_call_end=f.section_end,
             section_start="", section_end="")
    if CALL_TURN_HEADER in s.improvements and f.section_start and not f.per_call_start and not f.section_end:
        header = call_turn_header(s, f.section_start, cmp.output_b)
        if header:
            remark = (f"T2: every call is its own turn: {header!r} (turn header + section start) is written "
                      "before each call, so it is the per-call start")
            cmp.notes.append(remark)
            s.note_improvement(CALL_TURN_HEADER, remark)
            _set(cmp, f, "tools.format", per_call_start=header, section_start="")
    if f.per_call_end:
        n1 = cmp.output_a.count(f.per_call_end)
        n2 = cmp.output_b.count(f.per_call_end)
        if n1 > 0 and n1 == n2:
            cmp.notes.append("the call end marker occurs as often with two calls: it closes the section")
            _set(cmp, f, "tools.format", section_end=f.per_call_end, per_call_end="")


def call_turn_header(s: ProbeSession, section_start: str, two_calls: str) -> str:
    """Improvement :data:`CALL_TURN_HEADER`: the per-call start ``H + ws + section_start`` when the one-call
    turn of T1 writes a turn header ``H`` (non-blank, starting with a marker) before ``section_start`` and
    ``two_calls`` (T2's two-call render) writes that same text between the two probe calls; "" otherwise."""
    t1 = next((c for c in s.comparisons if c.id == "T1" and c.ok), None)
    if t1 is None:
        return ""
    hay = t1.diff.right
    k = hay.find(section_start)
    head = hay[:k].strip() if k > 0 else ""
    if not head or not parse_and_extract(MARKER, head).ok:
        return ""
    header = hay[hay.find(head):k + len(section_start)]
    i1, i2 = two_calls.find(P.FUN_FIRST), two_calls.find(P.FUN_SECOND)
    if i1 < 0 or i2 < i1 or header not in two_calls[i1:i2]:
        return ""
    return header


# ---------------------------------------------------------------------------------------------------- T3

_NAME = tag("pre", until(P.FUN_FIRST)) + lit(P.FUN_FIRST) + tag("post", star(_NOT_MARKER_CHAR))
_JSON_EXT = (tag("ext", star(MARKER | (neg(lit("{")) + neg(lit("[")) + ANY)))
             + star(_NOT_MARKER_CHAR) + MARKER)
_TAGGED_EXT = tag("ext", star(_NOT_MARKER_CHAR))
_ARG_START = MARKER + SPACE + (lit(P.ARG_FIRST) | lit(P.ARG_SECOND))
_SEP = tag("sep", star(neg(_ARG_START) + ANY)) + _ARG_START
_CLOSE_TAGGED = until("YYYY") + lit("YYYY") + SPACE + MARKER + SPACE + tag("close", REST)
_CLOSE_JSON = until("YYYY") + lit("YYYY") + tag("post_val", REST)


def _t3(s: ProbeSession, t: ToolsAnalysis) -> None:
    base = _call_turn(P.first_call())
    cmp = s.compare("T3", "How is the function name marked? A call to one function vs another.",
                    base, _call_turn(P.second_call()))
    if not cmp.ok:
        return
    d = cmp.diff
    f, fn = t.format, t.function
    if P.FUN_FIRST not in d.left or P.FUN_SECOND not in d.right:
        cmp.notes.append("the function names are not where expected in the diff")
        return
    pm = f.per_call_start or f.section_start
    if pm and d.prefix.rfind(pm) >= 0:
        fn.name_prefix = d.prefix[d.prefix.rfind(pm) + len(pm):]
    nm = parse_and_extract(_NAME, d.left)
    if nm.ok:
        fn.name_prefix += nm["pre"]
        fn.name_suffix = nm["post"]
    if f.mode == ToolFormat.TAG_WITH_JSON:
        m = parse_and_extract(_JSON_EXT, d.suffix)
        if m.ok:
            fn.name_suffix += m["ext"]
    else:
        m = parse_and_extract(_TAGGED_EXT, d.suffix)
        if m.ok:
            ext = m["ext"]
            fn.name_suffix += ext
            sm_ = parse_and_extract(_SEP, d.suffix[len(ext):])
            if sm_.ok:
                fn.args_separator = trim(sm_["sep"])
                cmp.found["tools.function.args_separator"] = fn.args_separator
    cmp.found["tools.function.name_prefix"] = fn.name_prefix
    cmp.found["tools.function.name_suffix"] = fn.name_suffix

    sm = f.per_call_end or f.section_end
    closer = ""
    close_cmp = cmp
    if not sm:
        nt = s.compare("T3-close", "What closes a call? A call vs a plain answer (no end marker known).",
                       base, RenderParams([P.user(), P.assistant()], tools=P.tools()))
        close_cmp = nt
        if nt.ok:
            left = nt.diff.left
            i = left.find("YYYY")
            if i >= 0:
                closer = left[i + 4:]
            elif len(left) >= 3:
                closer = left[3:]  # upstream's unsigned "npos + 4" arithmetic
            else:
                msg = "T3-close: no 'YYYY' in the call and fewer than 3 characters (llama.cpp raises here)"
                nt.notes.append(msg)
                s.failures.append(msg)
    else:
        i = d.suffix.find(sm)
        closer = d.suffix[:i] if i >= 0 else d.suffix
    if closer:
        if f.mode == ToolFormat.TAG_WITH_TAGGED:
            m = parse_and_extract(_CLOSE_TAGGED, closer)
            if m.ok:
                fn.close = m["close"]
        elif f.mode == ToolFormat.TAG_WITH_JSON:
            m = parse_and_extract(_CLOSE_JSON, closer)
            if m.ok:
                post = m["post_val"]
                k = max(post.rfind("}"), post.rfind("]"))
                if 0 <= k < len(post) - 1:
                    fn.close = trim_leading(post[k + 1:])
    fn.close = trim_leading(fn.close)
    if fn.close:
        close_cmp.found["tools.function.close"] = fn.close


# ---------------------------------------------------------------------------------------------------- A1/A2

_LASTM_TAIL = star(neg(LAST_MARKER) + ANY)


def _a1(s: ProbeSession, t: ToolsAnalysis) -> None:
    cmp = s.compare("A1", "How is an argument name marked? One argument name vs another.",
                    _call_turn(P.one_arg()), _call_turn(P.other_arg()))
    if not cmp.ok:
        return
    d = cmp.diff
    a = t.arguments
    if not d.left or not d.right:
        return
    lr = parse_anywhere(tag("pre", until(P.ARG_FIRST)) + lit(P.ARG_FIRST) + tag("suffix", until('"', "X")), d.left)
    rr = parse_anywhere(tag("pre", until(P.ARG_SECOND)) + lit(P.ARG_SECOND) + tag("suffix", until('"', "Y")),
                        d.right)
    if lr.ok and rr.ok and lr["pre"] and lr["pre"] == rr["pre"] and lr["suffix"] == rr["suffix"]:
        cmp.notes.append("the argument name sits inside a shared wrapper")
        _set(cmp, a, "tools.arguments", name_prefix=lr["pre"], name_suffix=lr["suffix"])
    elif d.left.startswith(P.ARG_FIRST) and d.right.startswith(P.ARG_SECOND):
        cmp.notes.append("the argument name is bare in the diff: prefix is the last marker before it")
        pm = parse_and_extract(_LASTM_TAIL + tag("name_prefix", LAST_MARKER), d.prefix)
        _set(cmp, a, "tools.arguments", name_prefix=pm["name_prefix"] if pm.ok else d.prefix)
        after = d.left[len(P.ARG_FIRST):] + d.suffix
        sm = parse_anywhere(tag("suffix", star(_NOT_MARKER_CHAR) + MARKER + SPACE), after)
        if sm.ok:
            _set(cmp, a, "tools.arguments", name_suffix=sm["suffix"])


def _a2(s: ProbeSession, t: ToolsAnalysis) -> None:
    cmp = s.compare("A2", "How is an argument value marked? One value vs another.",
                    _call_turn(P.one_arg()), _call_turn(P.one_arg_other_val()))
    if not cmp.ok:
        return
    d = cmp.diff
    a, f, fn = t.arguments, t.format, t.function
    if d.left != "XXXX" or d.right != "YYYY":
        cmp.notes.append("the values are not a clean XXXX/YYYY difference")
        return
    ending = P.ARG_FIRST + a.name_suffix
    prefix = d.prefix
    if prefix.rfind(ending) >= 0:
        prefix = prefix[prefix.rfind(ending) + len(ending):]
    if prefix:
        pm = parse_and_extract(_LASTM_TAIL + tag("val_prefix", LAST_MARKER), prefix)
        _set(cmp, a, "tools.arguments", value_prefix=pm["val_prefix"] if pm.ok else prefix)
    vs = d.suffix
    if fn.close:
        i = vs.find(fn.close)
        if i >= 0:
            vs = vs[:i]
    elif f.per_call_end or f.section_end:
        em = f.per_call_end or f.section_end
        i = vs.find(em)
        if i >= 0:
            vs = vs[:i]
    if trim(vs):
        _set(cmp, a, "tools.arguments", value_suffix=vs)


# ---------------------------------------------------------------------------------------------------- T5/T7

def _t5(s: ProbeSession, t: ToolsAnalysis) -> None:
    cmp = s.compare("T5", "What separates arguments? One argument vs two.",
                    _call_turn(P.one_arg()), _call_turn(P.first_call()))
    if cmp.ok and cmp.diff.right:
        t.arguments.separator = until_common_prefix(cmp.diff.right, P.ARG_FIRST, P.ARG_SECOND)
        if t.arguments.separator:
            cmp.found["tools.arguments.separator"] = t.arguments.separator


def _last_marker(text: str) -> str:
    m = parse_anywhere(_LASTM_TAIL + tag("m", MARKER), text)
    return m["m"] if m.ok else ""


def _first_marker(text: str) -> str:
    m = parse_anywhere(tag("m", MARKER), text)
    return m["m"] if m.ok else ""


def _id_out_of_name_prefix(s: ProbeSession, cmp: Comparison, t: ToolsAnalysis) -> None:
    """Improvement ``call-id-before-name``: T3 learned the name prefix from two calls whose ids share a start, so
    it holds the rest of the probe's id ('call00001<|tool_call:name|>'); with the id placed before the name, the
    name prefix is the id's suffix marker and what precedes it there (text, no marker) is id text."""
    cid, fn = t.call_id, t.function
    note = "T7: the function name before the id is in the tool list, not the call turn: the id precedes the name"
    if cid.suffix and fn.name_prefix.endswith(cid.suffix):
        head = fn.name_prefix[: len(fn.name_prefix) - len(cid.suffix)]
        if head and not parse_anywhere(MARKER, head).ok:
            fn.name_prefix = cid.suffix
            cmp.found["tools.function.name_prefix"] = cid.suffix
            note += f"; {head!r} is id text, removed from the name prefix"
    cmp.notes.append(note)
    s.note_improvement(CALL_ID_BEFORE_NAME, note)


def _t7(s: ProbeSession, t: ToolsAnalysis) -> None:
    cmp = s.compare("T7", "Where is the call id written? The same call with two ids.",
                    _call_turn(P.first_call()), _call_turn(P.first_call_alt_id()))
    if not cmp.ok:
        return
    d = cmp.diff
    if not d.left and not d.right:
        cmp.notes.append("the call id is not rendered")
        return
    cid = t.call_id
    common = "call"
    fp = d.prefix.rfind(P.FUN_FIRST)
    fs = d.suffix.find(P.FUN_FIRST)
    before_name = False
    if fp >= 0 and fs >= 0 and CALL_ID_BEFORE_NAME in s.improvements:
        # the name before the id may be the tool list of the system prompt: search the call turn only
        opener = t.format.per_call_start or t.format.section_start
        k = d.prefix.rfind(opener) if opener else -1
        if k >= 0 and d.prefix.find(P.FUN_FIRST, k) < 0:
            fp = -1
            before_name = True
    if fp >= 0 and fs < 0:
        ap = d.prefix.find("{", fp)
        as_ = d.suffix.find("{")
        if as_ >= 0 and ap < 0:
            cid.pos = CallIdPosition.BETWEEN_FUNC_AND_ARGS
            af = d.prefix[fp + len(P.FUN_FIRST):]
            m = parse_anywhere(tag("prefix", MARKER) + star(neg(MARKER) + neg(lit(common)) + ANY) + lit(common), af)
            cid.prefix = m["prefix"] if m.ok else _last_marker(af)
            m = parse_anywhere(star(neg(MARKER) + neg(lit("{")) + ANY) + tag("suffix", MARKER), d.suffix)
            if m.ok:
                cid.suffix = m["suffix"]
        elif ap >= 0:
            cid.pos = CallIdPosition.POST_ARGS
            aa = d.prefix[ap:]
            k = aa.rfind("}")
            if k >= 0:
                cid.prefix = _last_marker(aa[k + 1:])
            cid.suffix = _first_marker(d.suffix)
    elif fs >= 0 and fp < 0:
        cid.pos = CallIdPosition.PRE_FUNC_NAME
        cid.prefix = _last_marker(d.prefix)
        cid.suffix = _first_marker(d.suffix[:fs])
        if before_name:
            _id_out_of_name_prefix(s, cmp, t)
    if cid.prefix == t.arguments.end:
        cid.prefix = ""
    if cid.suffix == t.arguments.start:
        cid.suffix = ""
    cmp.found.update({"tools.call_id.pos": cid.pos.value, "tools.call_id.prefix": cid.prefix,
                      "tools.call_id.suffix": cid.suffix})
    if cid.pos != CallIdPosition.NONE and cid.suffix and t.format.per_call_end.startswith(cid.suffix):
        t.format.per_call_end = ""
        cmp.found["tools.format.per_call_end"] = ""
