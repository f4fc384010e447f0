"""Analysis → ``response_template`` (version 1), the declarative output format transformers reads from
``tokenizer_config.json`` (proven on transformers ≥ 5.25, :data:`core.export.consumers.TRANSFORMERS_MIN`); vLLM
(≥ 0.32) serves it with ``--tool-call-parser hf --reasoning-parser hf`` and SGLang (0.5.23) with
``--tool-call-parser response_template`` (which engines serve an export: :mod:`core.export.consumers`,
docs/export.md).

The format, as read from transformers' ``utils/chat_parsing/response_templates.py`` and ``response_parser.py``
(5.24): a ``start_anchor`` (literal or list) or ``start_anchor_pattern`` cuts the prompt after its last match;
``fields`` are regions, each opened by ``open``/``open_pattern`` (one field may have neither: the implicit
region, active outside every other) and closed by ``close``/``close_pattern`` (none: the end of the output);
only one region is open at a time; a region's text goes through a ``content`` parser (``text``, ``json``,
``xml-inline`` with a ``tag_pattern`` holding ``key``/``value`` groups, ``python-call-list``); ``transform``
restructures it with whole-string ``{placeholder}``s over ``content`` and the delimiters' named groups;
``repeats`` appends one value per region, ``transform_each`` maps a list. ``tools=`` at parse time casts
``xml-inline`` strings by the tool's JSON schema.

vLLM's ``response_template`` parser (``vllm/parser/response_template.py``) accepts only the fields
``thinking``, ``content`` and ``tool_calls``, only ``role`` in ``defaults``, and ``thinking``/``content`` must be
plain ``text`` without ``transform`` or ``join``.

What the format cannot carry is refused (:attr:`ExportResult.reasons`), never approximated; whatever is
exported is then checked by transformers itself (:mod:`core.export.verify`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

from .probe_text import probe_texts

FORMAT_VERSION = 1


class Flavour(str, enum.Enum):
    """Whose field names: transformers' (``reasoning_content``) or vLLM's (``thinking``)."""

    TRANSFORMERS = "transformers"
    VLLM = "vllm"


REASONING_FIELD = {Flavour.TRANSFORMERS: "reasoning_content", Flavour.VLLM: "thinking"}
REPEATED_OPENER_FIELD = "repeated_opener"
"""An always-empty field that swallows a content opener the generation prompt wrote and the model repeats."""
CONTENT_HEADER_FIELD = "turn_header"
"""An always-empty field that swallows the header a plain answer starts with (improvement content-turn-header)."""


@dataclass
class ExportResult:
    """One export: ``response_template`` (the dict, or None when the format cannot express the template),
    ``reasons`` (why not, one line each; empty when exported), ``notes`` (what the mapping decided and from
    which analysis field), ``route`` (``autoparser`` or ``specialized:<handler>``), ``generation_prompt`` (of
    the default request), ``fidelity``, ``flavour``."""

    template: str
    flavour: Flavour
    fidelity: str
    route: str
    generation_prompt: str
    response_template: dict[str, Any] | None
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exportable(self) -> bool:
        """True when a response_template was produced."""
        return self.response_template is not None

    @property
    def consumers(self) -> list[Any]:
        """Which engines serve this export and what each would refuse (:mod:`core.export.consumers`)."""
        from .consumers import consumer_verdicts

        return consumer_verdicts(self.response_template, self.reasons)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {"template": self.template, "flavour": self.flavour.value, "fidelity": self.fidelity,
                "route": self.route, "exportable": self.exportable, "reasons": list(self.reasons),
                "notes": list(self.notes), "generation_prompt": self.generation_prompt,
                "response_template": self.response_template,
                "consumers": [c.to_json() for c in self.consumers]}


class NotExpressible(Exception):
    """Raised inside the mapping when the format cannot carry a part of the template; the message is the reason."""


# ------------------------------------------------------------------------------------------------ regex pieces

_WS = r"\s*"


def _lit(marker: str) -> str:
    """A marker as a regex, outer whitespace made optional (renders and models differ in it; the comparison
    strips it anyway); "" for an empty or all-space marker."""
    core = marker.strip()
    return _WS + _digits(re.escape(core)) + _WS if core else _WS


def _digits(escaped: str) -> str:
    # an index the template printed (Kimi's ":0") is a counter, not a constant
    return re.sub(r"\d+", r"\\d+", escaped)


def _ws_opt(ws: str) -> str:
    """The exact whitespace of a marker's edge, optional ("" when none)."""
    return f"(?:{re.escape(ws)})?" if ws else ""


_CALL_ID = "call00001"  # core.analysis.probes.CALL_ID_001, the id the call-id probes render


_NAME_CHAR = r"[^\s<>\"'{}()\[\]]"
_NOT_NAME_CHAR = r"[\s<>\"'}()\[\]]"  # what may follow a name, "{" aside


def _name_re(suffix: str, prefix: str = "") -> str:
    """The function-name group: up to the suffix's first non-space character, never across whitespace or a
    tag bracket — nor across the name ``prefix`` (a regex) when its characters are name characters (Kimi's
    ``functions.``), so a search over a text repeating the prefix stays linear."""
    char = f"(?:(?!{prefix}){_NAME_CHAR})" if prefix else _NAME_CHAR
    return f"(?P<name>{char}+?)" if suffix.strip() else f"(?P<name>{char}+)"


def _no_restart(char: str, *markers: str) -> str:
    """``char`` (one character's regex) that does not start one of ``markers`` (regexes): a run of it stops at a
    new opener, so a search that retries from each opener scans each character once."""
    alts = "|".join(m for m in markers if m)
    return f"(?:(?!{alts}){char})" if alts else char


# ------------------------------------------------------------------------------------------------ mapping

def _anchor(gp: str, analysis: Any, prompt: str | tuple[str, ...] = "", opener: str = "") -> dict[str, Any]:
    """The start anchor, as ``start_anchor_pattern``: the generation prompt without outer whitespace, cut before
    a reasoning or content opener it carries (the opener must stay in the text the parser sees, so an opened
    ``<think>`` opens the reasoning region), then optionally the reasoning end (a generation prompt that closes
    reasoning when thinking is off, ``…<|Bot|></think>``, must not leave the closer as content). Where the
    generation prompt is empty (Mistral), the last marker of ``prompt``. ``prompt`` may be a tuple: the
    user-turn prompt, then prompts that do not end with the generation prompt (after a tool result), whose last
    markers the anchor also matches (``[/TOOL_RESULTS]``, ``<tool_response|>``), cut before a reasoning opener
    they end with (the analysis's, or ``opener`` when a special handler's differs: Gemma 4 ``<|channel>thought``)."""
    cut = len(gp)
    for m in (analysis.reasoning.start, analysis.reasoning.end):
        m = m.strip()
        if m and m in gp:
            cut = min(cut, gp.index(m))
    base = gp[:cut].strip()
    start = analysis.reasoning.start.strip()
    if not base and start and gp.strip().startswith(start) and _after_opener(gp, analysis):
        # the generation prompt opens reasoning and writes more text after the opener (Apriel 1.6:
        # "<|begin_assistant|>\nHere are my reasoning steps:\n"): anchoring on the prompt's last marker would
        # consume the opener, so the anchor is a lookahead just before the whole generation prompt; the
        # reasoning field's opener takes the text after it (_reasoning_field)
        return {"start_anchor_pattern": f"(?={re.escape(gp.strip())})"}
    # the prompts after which the model writes: the user-turn prompt (it ends with the generation prompt,
    # unless that is empty) and others whose end differs — after a tool result Mistral ends with
    # [/TOOL_RESULTS], Gemma 4 with <tool_response|> (the model goes on in the same turn), a DeepSeek R1
    # distill with <｜tool▁outputs▁end｜>: the anchor also matches each one's last marker
    bases: list[str] = [base] if base else []
    for i, p in enumerate((prompt,) if isinstance(prompt, str) else prompt):
        if not p or (base and i == 0):
            continue
        whole = p = p.rstrip()
        for m in (analysis.reasoning.end.strip(), start, opener):  # as the generation prompt: cut before an opener
            if m and p.endswith(m):
                p = p[:-len(m)].rstrip()
        b = _last_marker(p)
        if _probe_in(b):
            # the anchor would hold conversation text: the template's text after it, or the uncut prompt's end
            # where the cut reached back into the conversation (Solar Open's reasoning end
            # "<|end|><|begin|>assistant" is the turn header itself: without it the prompt ends with the user's
            # message)
            b = _prompt_end_marker(p) or _prompt_end_marker(whole)
        if b and b not in bases:
            bases.append(b)
    if not bases:
        raise NotExpressible("the generation prompt is empty: no start_anchor can find where the assistant turn "
                             "starts in the prompt")
    pattern = "|".join(re.escape(b) for b in bases)
    if len(bases) > 1:
        pattern = f"(?:{pattern})"
    end = analysis.reasoning.end.strip()
    if end and analysis.reasoning.mode.value != "NONE":
        pattern += f"(?:{_WS}{re.escape(end)})?"
    return {"start_anchor_pattern": pattern}


def _prompt_end_marker(prompt: str) -> str:
    """The template's own text at the end of ``prompt`` to anchor on: its last marker and the text after it
    (:func:`_last_marker`), never text of the conversation the prompt was rendered from (:func:`probe_texts`).
    When the text after the last marker holds the conversation (Ernie 4.5 writes no marker between the user's
    message and ``\nAssistant: ``), the anchor is what the template writes after the conversation's last text:
    its last marker with the text after it, else that text alone; "" when nothing follows the conversation."""
    b = _last_marker(prompt)
    if not _probe_in(b):
        return b
    end = max(prompt.rfind(t) + len(t) for t in probe_texts() if t in prompt)
    tail = prompt[end:]
    return _last_marker(tail) or tail.strip()


def _last_marker(prompt: str) -> str:
    """The prompt's last marker and the text after it ("[/INST]", "<|extra_0|>助手："); "" when the prompt does
    not end with a marker and at most one text segment."""
    from ..diff import SegmentKind, segmentize_markers

    segs = segmentize_markers(prompt.rstrip())
    last = max((i for i, seg in enumerate(segs) if seg.kind == SegmentKind.MARKER), default=-1)
    if last >= 0 and len(segs) - last <= 2:
        return "".join(seg.value for seg in segs[last:]).strip()
    return ""


def _after_opener(gp: str, a: Any) -> str:
    """The generation prompt's text after its reasoning opener, up to the reasoning end (stripped; "" when the
    generation prompt does not open reasoning or writes nothing after the opener)."""
    start, end = a.reasoning.start.strip(), a.reasoning.end.strip()
    if not start or start not in gp:
        return ""
    rest = gp[gp.index(start) + len(start):]
    if end and end in rest:
        rest = rest[:rest.index(end)]
    return rest.strip()


def _reasoning_field(a: Any, gp: str = "") -> dict[str, Any] | None:
    mode = a.reasoning.mode.value
    if mode == "NONE":
        return None
    start, end = a.reasoning.start.strip(), a.reasoning.end.strip()
    if not end:
        raise NotExpressible(f"reasoning ({mode}) has no end marker: a region needs a close the parser can see")
    if not start:
        raise NotExpressible(f"reasoning ({mode}) has no start marker (delimiter style: text before "
                             f"{end!r} is reasoning only once that marker arrives); a region must be opened by "
                             "a marker or be the one implicit region, which content already is")
    rest = _after_opener(gp, a)
    if rest and gp.strip().startswith(start):
        # the anchor stops before the opener (see _anchor): the opener and the prompt's text after it open
        # the region, so that text is not read as reasoning
        return {"open_pattern": f"{re.escape(start)}(?:{_WS}{re.escape(rest)})?", "close": end, "content": "text"}
    return {"open": start, "close": end, "content": "text"}


def _content_field(a: Any) -> dict[str, Any]:
    mode = a.content.mode.value
    if mode == "PLAIN":
        return {"content": "text"}
    if mode == "ALWAYS_WRAPPED" and a.content.start.strip() and a.content.end.strip():
        # the opener may come from the generation prompt and again from the model (Command R): take both
        return {"open_pattern": f"(?:{_lit(a.content.start)})+", "close": a.content.end.strip(), "content": "text"}
    raise NotExpressible(f"content mode {mode} (markers {a.content.start!r}/{a.content.end!r}): content is "
                         "wrapped only beside reasoning, and a field is either opened by a marker or implicit, "
                         "not both")


def _call_id_parts(a: Any) -> tuple[str, str, str]:
    """Regex pieces for the call id: (before the name prefix, between name and arguments, after arguments)."""
    cid = a.tools.call_id
    pos = cid.pos.value
    if pos == "NONE":
        return "", "", ""
    if not cid.suffix.strip() and pos != "POST_ARGS":
        raise NotExpressible(f"call id at {pos} has no closing marker: where the id ends cannot be matched")
    grp = _WS + re.escape(cid.prefix.strip()) + f"(?P<id>{_no_restart('.', re.escape(cid.prefix.strip()))}+?)" \
        + re.escape(cid.suffix.strip()) + _WS \
        if cid.suffix.strip() else _WS + re.escape(cid.prefix.strip()) + r"(?P<id>\S+?)" + _WS
    return (grp, "", "") if pos == "PRE_FUNC_NAME" else ("", grp, "") if pos == "BETWEEN_FUNC_AND_ARGS" \
        else ("", "", grp)


def _opener(f: Any, optional_call_start: bool = False) -> str:
    """Section start (optional: it precedes only the first call) and per-call start (optional too when a
    function-name marker follows: llama.cpp's parsers accept a call whose wrapper the model left out)."""
    sec = f"(?:{_lit(f.section_start)})?" if f.section_start.strip() else ""
    call = _lit(f.per_call_start) if f.per_call_start.strip() else ""
    if call and optional_call_start:
        call = f"(?:{call})?"
    return _WS + sec + call


def _closer(f: Any, *inner: str, next_open: str = "") -> str:
    """Inner closers, the per-call end, then the section end — which follows only the last call, so it is
    required unless the next call's opener follows (a lookahead, not consumed) or the output ends. An optional
    tail would be committed early by transformers' streaming (a complete match not at the buffer edge is final),
    leaving the tail as content."""
    tail = "".join(_lit(m) for m in inner if m.strip())
    if f.per_call_end.strip():
        tail += _lit(f.per_call_end)
    if f.section_end.strip():
        ahead = f"|(?={_WS}{next_open})" if next_open else ""
        tail += f"(?:{_lit(f.section_end)}{ahead}|\\Z)"
    return tail


def _next_open(f: Any, fn: Any) -> str:
    """What starts the next call: the per-call start or the function-name prefix (either may come first)."""
    alts = [re.escape(m.strip()) for m in (f.per_call_start, fn.name_prefix) if m.strip()]
    return _WS + "(?:" + "|".join(_digits(a) for a in alts) + ")" if len(alts) > 1 else _WS + (alts[0] if alts else "")


def _json_call_transform(a: Any, prefix: str = "content.") -> dict[str, Any]:
    f = a.tools.format
    order = list(f.parameter_order or [])
    nested = f.function_field and f.function_field in order and f.name_field not in order
    base = f"{prefix}{f.function_field}." if nested else prefix
    out: dict[str, Any] = {"type": "function", "function": {"name": "{" + base + f.name_field + "}",
                                                             "arguments": "{" + base + f.args_field + "}"}}
    if f.id_field or f.gen_id_field:
        out["id"] = "{" + prefix + (f.id_field or f.gen_id_field) + "}"
    return out


PYTHON_LITERAL_VALUE_PARSER = {"name": "json", "args": {"string_delims": [["'", "'"]], "allow_non_json": True,
                                                       "strip": False}}
"""xml-inline ``value_parser`` for a template that renders object values as Python literals (Seed-OSS)."""


def _tool_field(a: Any, notes: list[str], python_literals: bool = False) -> dict[str, Any] | None:
    f = a.tools.format
    mode = f.mode.value
    if mode == "NONE":
        return None
    if f.fun_name_is_key:
        raise NotExpressible("JSON calls keyed by the function name ({\"NAME\": {args}}): a transform can only "
                             "read fixed keys, not turn a key into the name")
    pre_id, mid_id, post_id = _call_id_parts(a)
    fn = a.tools.function
    if mode == "JSON_NATIVE":
        if pre_id or mid_id or post_id:
            raise NotExpressible("JSON calls with the call id outside the JSON object")
        if f.per_call_start.strip() and f.tools_array_wrapped:
            notes.append("tool_calls: one region per call marker holding a JSON array, mapped call by call")
            if not (f.per_call_end.strip() or f.section_end.strip()):
                raise NotExpressible("a JSON array of calls without a closing marker")
            return {"open_pattern": _opener(f), "close_pattern": _closer(f), "content": "json",
                    "transform_each": True, "transform": _json_call_transform(a, "")}
        if f.per_call_start.strip():
            notes.append("tool_calls: one region per call, opened by per_call_start (section start optional)")
            close = _closer(f, next_open=_lit(f.per_call_start))
            if not close.replace(_WS, ""):
                close = f"(?={_lit(f.per_call_start)})"
                notes.append("tool_calls: no closing marker; a call ends at the next call's opener or the end")
            return {"open_pattern": _opener(f), "close_pattern": close,
                    "repeats": True, "content": "json", "transform": _json_call_transform(a)}
        if f.section_start.strip() and f.tools_array_wrapped:
            notes.append("tool_calls: one region for the section, a JSON array mapped call by call")
            out: dict[str, Any] = {"open_pattern": _WS + _lit(f.section_start), "content": "json",
                                   "transform_each": True, "transform": _json_call_transform(a, "")}
            if f.section_end.strip():
                out["close_pattern"] = _lit(f.section_end)
            return out
        if f.section_start.strip() and not f.tools_array_wrapped and not a.caps.supports_parallel_tool_calls:
            # the template renders at most one call per turn, so the section holds exactly one JSON object
            notes.append("tool_calls: the template renders no parallel calls: one region from the section start "
                         "to its end (or the end of the output) holding one JSON call")
            single: dict[str, Any] = {"open_pattern": _lit(f.section_start), "repeats": True,
                                      "content": "json", "transform": _json_call_transform(a)}
            if f.section_end.strip():
                single["close_pattern"] = _lit(f.section_end)
            return single
        if f.section_start.strip() or f.tools_array_wrapped:
            raise NotExpressible("JSON calls in a section without per-call markers and not written as one JSON "
                                 "array: consecutive objects cannot be split into regions (with parallel calls)")
        if a.caps.supports_parallel_tool_calls:
            raise NotExpressible("bare JSON calls without any marker and parallel calls allowed: consecutive "
                                 "objects cannot be split into regions")
        notes.append("tool_calls: a bare JSON object at the start of the output (no marker); one call")
        return {"open_pattern": r"\A\s*(?=\{\s*\"" + re.escape(f.name_field) + r"\"\s*:)", "content": "json",
                "repeats": True, "transform": _json_call_transform(a)}
    if mode in ("TAG_WITH_JSON", "TAG_WITH_TAGGED"):
        name_prefix = _digits(re.escape(fn.name_prefix.strip())) if fn.name_prefix.strip() else ""
        if _CALL_ID in fn.name_prefix and not pre_id:
            # the analysis left the call id inside the name prefix (Solar Open: "call00001<|tool_call:name|>")
            # the start is optional, so the pattern may begin with the id: it starts only after a non-id character
            name_prefix = name_prefix.replace(_digits(re.escape(_CALL_ID)), r"(?<![^\s<>])(?P<id>[^\s<>]+?)")
            pre_id = " "  # marks the transform as carrying an id; the group sits in the name prefix
        optional_start = bool(fn.name_prefix.strip())
        cid = a.tools.call_id
        if cid.pos.value == "PRE_FUNC_NAME" and cid.prefix.strip() == f.per_call_start.strip() \
                and cid.suffix.strip() == fn.name_prefix.strip() and name_prefix:
            # the id sits between the per-call start and the name prefix, which are its own markers
            # (improvement call-id-before-name): required start, so the id cannot swallow the text before it
            pre_id = _WS + r"(?P<id>[^\s<>]+?)"
            optional_start = False
        name_start = _opener(f, optional_start) + pre_id.strip() + (_WS + name_prefix if name_prefix else "")
        if not (f.per_call_start.strip() or fn.name_prefix.strip()):
            raise NotExpressible(f"{mode} calls without a per-call or function-name opening marker")
        crossable = fn.name_prefix.strip() and not re.search(r"[\s<>\"'{}()\[\]]", fn.name_prefix.strip())
        opener = name_start + _name_re(fn.name_suffix, name_prefix if crossable else "") \
            + (_lit(fn.name_suffix) if fn.name_suffix.strip() else _WS)
        opener += mid_id
        transform = {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}
        if pre_id or mid_id or post_id:
            transform["id"] = "{id}"
        if mode == "TAG_WITH_JSON":
            if fn.args_separator.strip():
                opener += _lit(fn.args_separator)
            elif not (fn.name_suffix.strip() or mid_id):
                # a marker the analysis did not name ([ARGS]) before the JSON arguments: after the (greedy) name
                # a non-name character, then anything up to "{" that does not open another call
                skip = _no_restart("[^{]", *(_digits(re.escape(m.strip())) for m in (f.per_call_start,
                                                                                       fn.name_prefix) if m.strip()))
                opener = opener[: -len(_WS)] + f"(?:{_NOT_NAME_CHAR}{skip}*)?(?=\\{{)"
            close = post_id + _closer(f, fn.close, next_open=_next_open(f, fn))
            if not close.replace(_WS, ""):
                # no closer (Mistral's [TOOL_CALLS]name[ARGS]{…}): a call ends where the next one opens, or at the end
                close = f"(?={_WS}{_next_open(f, fn)})"
                notes.append("tool_calls: no closing marker; a call ends at the next call's opener or the end")
            return {"open_pattern": opener, "close_pattern": close, "repeats": True, "content": "json",
                    "transform": transform}
        args = a.tools.arguments
        if not (args.name_prefix.strip() and args.value_suffix.strip()):
            raise NotExpressible("tagged arguments without a name opener and a value closer")
        if args.start.strip():
            opener += _lit(args.start)
        # a value keeps its own whitespace: only the markers' whitespace (Qwen3-Coder's "\n" on each side) is
        # taken off, as llama.cpp does ("#include\n" stays "#include\n")
        # the key ends with a non-space character, so it cannot trade spaces with the \s* before the suffix
        key = re.escape(args.name_prefix.strip()) + r"(?P<key>[^<>\n\"]*?[^<>\s\"])"
        key += _WS + re.escape(args.name_suffix.strip()) if args.name_suffix.strip() else ""
        if not (args.name_suffix.strip() or args.value_prefix.strip()):
            key += r"(?=\s)"
        v_pre = args.value_prefix if args.value_prefix.strip() else args.name_suffix
        v_suf = args.value_suffix
        value = (_WS + re.escape(args.value_prefix.strip()) if args.value_prefix.strip() else "")
        # a value does not run across the next argument's opener (linear on a text repeating it)
        value += _ws_opt(v_pre[len(v_pre.rstrip()):]) \
            + f"(?P<value>{_no_restart('.', re.escape(args.name_prefix.strip()))}*?)" \
            + _ws_opt(v_suf[: len(v_suf) - len(v_suf.lstrip())])
        value += re.escape(v_suf.strip())
        close = _closer(f, args.end, fn.close, next_open=_next_open(f, fn))
        if not close.replace(_WS, ""):
            raise NotExpressible("TAG_WITH_TAGGED calls without a closing marker")
        notes.append("tool_calls: xml-inline arguments; values are strings, typed by the tools' JSON schema "
                     "(pass tools= to parse_response)")
        content_args: dict[str, Any] = {"tag_pattern": key + value}
        if python_literals:
            # the template writes object/array values with Jinja's `string` filter, i.e. as Python literals
            # ({'time': '19:30'}), which the schema typing (json.loads) cannot read: each value goes through
            # the json parser with ' as a second string delimiter; a value that is not JSON stays the raw text
            content_args["value_parser"] = PYTHON_LITERAL_VALUE_PARSER
            notes.append("tool_calls: the template writes object values as Python literals; values are read as "
                         "JSON with ' string delimiters (a JSON-looking string value such as \"12\" is then a "
                         "number; a value holding Python's True, False or None is not JSON and stays the raw text, "
                         "where our parser reads it)")
        return {"open_pattern": opener, "close_pattern": close, "repeats": True, "content": "xml-inline",
                "content_args": content_args, "transform": transform}
    if mode == "PYTHONIC":
        if not f.tools_array_wrapped:
            raise NotExpressible("python-style calls not written as a call list ([name(...)]): transformers' "
                                 "python-call-list reads only a bracketed list")
        if f.section_start.strip():
            out = {"open_pattern": _WS + _lit(f.section_start), "content": "python-call-list",
                   "transform_each": True, "transform": {"type": "function", "function": {
                       "name": "{name}", "arguments": "{arguments}"}}}
            if f.section_end.strip():
                out["close_pattern"] = _lit(f.section_end)
            return out
        # a bare call list ([get_weather(city='Paris')], vLLM's Llama 3.2/4 pythonic): the region opens just
        # before the '[' of a call list at the start of the output (zero-width, so python-call-list sees the
        # brackets) and runs to the end of the output
        notes.append("tool_calls: a bare Python call list at the start of the output, read to the end")
        return {"open_pattern": r"\A\s*(?=\[\s*[A-Za-z_][\w.-]*\()", "content": "python-call-list",
                "transform_each": True, "transform": {"type": "function", "function": {
                    "name": "{name}", "arguments": "{arguments}"}}}
    raise NotExpressible(f"tool format {mode} has no response_template counterpart")


def _anchor_consumes(opener: str, gp: str, analysis: Any, prompt: str | tuple[str, ...]) -> bool:
    """True when the start_anchor matches the whole reasoning ``opener``, so the prompt's opener is cut off with
    the anchor and never opens the region (False when there is no anchor: that refusal comes later)."""
    try:
        return re.fullmatch(_anchor(gp, analysis, prompt)["start_anchor_pattern"], opener) is not None
    except NotExpressible:
        return False


def map_analysis(analysis: Any, generation_prompt: str, flavour: Flavour = Flavour.TRANSFORMERS,
                 notes: list[str] | None = None, prompt: str = "", *,
                 python_literals: bool = False) -> dict[str, Any]:
    """The response_template for a :class:`~core.analysis.result.TemplateAnalysis` and the generation prompt
    of the request the model is served with. ``python_literals``: the template renders object-valued tagged
    arguments as Python literals (:func:`renders_python_literals`). Raises :class:`NotExpressible` (message:
    the reason) when the format cannot carry the template."""
    notes = notes if notes is not None else []
    from ..chat.roundtrip import USER_MESSAGE

    if USER_MESSAGE in generation_prompt:
        raise NotExpressible("the generation prompt found for this template holds the conversation itself (it "
                             "writes the tools after the messages): there is no fixed text to anchor on")
    fields: dict[str, Any] = {}
    reasoning = _reasoning_field(analysis, generation_prompt)
    if reasoning is not None:
        fields[REASONING_FIELD[flavour]] = reasoning
        start = analysis.reasoning.start.strip()
        if start and start in generation_prompt:
            if _anchor_consumes(start, generation_prompt, analysis, prompt):
                # the anchor consumes the opener (a generation prompt that is only the assistant marker, which the
                # analysis took for the reasoning start): saying the prefix opens the region would be false
                notes.append(f"the reasoning opener {start!r} is also the start_anchor, which the prompt ends "
                             "with: the prefix never opens the reasoning region (was the assistant marker taken for "
                             "a reasoning opener? check reasoning.start)")
            else:
                notes.append(f"the generation prompt opens reasoning ({start!r}): it is left after the "
                             "start_anchor, so the prefix opens the reasoning region")
    tools = _tool_field(analysis, notes, python_literals)
    if tools is not None:
        fields["tool_calls"] = tools
    c_start = analysis.content.start.strip()
    if c_start and c_start in generation_prompt and analysis.content.end.strip():
        # the generation prompt opens the content wrapper (Command R): the whole turn is content up to its end
        # marker, tool calls included, so content is the implicit region and the opener stays in the anchor
        fields["content"] = {"close": analysis.content.end.strip(), "content": "text"}
        notes.append(f"the generation prompt opens content ({c_start!r}): content is the implicit region")
        if flavour == Flavour.TRANSFORMERS:
            # a model may write the opener again (Command R+ reference case ref-0340: "<|CHATBOT_TOKEN|>Hello…");
            # an extra field opened by it at the very start of the output and closed at once swallows it (its
            # value is empty, so transformers leaves it out of the message); vLLM accepts no extra field
            fields[REPEATED_OPENER_FIELD] = _dropped_at_start(c_start)
            notes.append(f"{REPEATED_OPENER_FIELD}: an opener {c_start!r} the model repeats at the start is dropped")
    else:
        fields["content"] = _content_field(analysis)
    return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, **_anchor(generation_prompt, analysis, prompt),
            "fields": fields}


# Special handlers whose format the generic analysis does not describe, written down from the format the handler
# parses (core/chat/formats/); each is proven by verify like every other export.
def _special(handler: str, analysis: Any, gp: str, flavour: Flavour, prompt: str = "",
             python_literals: bool = False) -> dict[str, Any] | None:
    think = REASONING_FIELD[flavour]
    if handler in ("qwen3-coder", "ling3"):
        # core/chat/formats/qwen3_coder.py, ling3.py: a tool call ends reasoning even without </think> (Qwen3.5
        # opens <think> in the generation prompt and models may call a tool straight away)
        rt = map_analysis(analysis, gp, flavour, prompt=prompt, python_literals=python_literals)
        fields = rt["fields"]
        if think in fields and "tool_calls" in fields:
            end = fields[think].pop("close")
            fields[think]["close_pattern"] = f"{re.escape(end)}|(?={_WS}<tool_call>)"
        if handler == "ling3":  # the handler ends the turn at <|role_end|> when the model writes it
            fields["content"] = {"close_pattern": r"\s*<\|role_end\|>", "content": "text"}
        return rt
    if handler == "ministral-3":
        # core/chat/formats/ministral3.py: optional [THINK]…[/THINK] before the content and calls
        rt = map_analysis(analysis, gp, flavour, prompt=prompt)
        rt["fields"] = {think: {"open": "[THINK]", "close": "[/THINK]", "content": "text"}, **rt["fields"]}
        return rt
    if handler == "kimi-k2":
        # the call id is the whole "functions.NAME:IDX" the model writes (the handler keeps it as the id);
        # core/chat/formats/kimi_k2.py reads an optional <think>…</think> first
        rt = map_analysis(analysis, gp, flavour, prompt=prompt)
        if think not in rt["fields"]:
            rt["fields"] = {think: {"open": "<think>", "close": "</think>", "content": "text"}, **rt["fields"]}
        call = rt["fields"].get("tool_calls")
        if call is not None:
            call["open_pattern"] = call["open_pattern"].replace(
                r"functions\.(?P<name>", r"(?P<id>functions\.(?P<name>").replace(r":\d+", r":\d+)", 1)
            call["transform"]["id"] = "{id}"
        return rt
    if handler in ("lfm2", "lfm2.5"):
        # core/chat/formats/lfm2.py: [<think>…</think>] content [<|tool_call_start|>[name(arg=value), …]<|tool_call_end|>]
        fields: dict[str, Any] = {
            think: {"open": "<think>", "close": "</think>", "content": "text"},
            "tool_calls": {"open_pattern": r"\s*<\|tool_call_start\|>", "close_pattern": r"<\|tool_call_end\|>\s*",
                           "content": "python-call-list", "transform_each": True,
                           "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}},
            "content": {"content": "text"}}
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, **_anchor(gp, analysis, prompt),
                "fields": fields}
    if handler == "deepseek-v3.2":
        # core/chat/formats/deepseek.py (DSML): <｜DSML｜tool_calls> (V3.2: function_calls) around
        # <｜DSML｜invoke name="NAME"><｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>…;
        # string="false" values are JSON, which tools= typing reproduces from the schema; reasoning may end at
        # the call block without </think>
        block = r"<｜DSML｜(?:tool_calls|function_calls)>"
        fields = {
            think: {"open": "<think>", "close_pattern": rf"</think>|(?={_WS}{block})", "content": "text"},
            "tool_calls": {
                "open_pattern": rf"{_WS}(?:{block}{_WS})?<｜DSML｜invoke name=\"(?P<name>[^\"]+)\">{_WS}",
                "close_pattern": rf"{_WS}</｜DSML｜invoke>(?:{_WS}</｜DSML｜(?:tool_calls|function_calls)>{_WS}"
                                 rf"|(?={_WS}<｜DSML｜invoke)|\Z)",
                "repeats": True, "content": "xml-inline",
                "content_args": {"tag_pattern": r'<｜DSML｜parameter name="(?P<key>[^"]+)"(?: string="(?:true|false)")?>'
                                                r"(?P<value>(?:(?!<｜DSML｜parameter name=).)*?)"
                                                r"</｜DSML｜parameter>"},
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
            "content": {"content": "text"}}
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, **_anchor(gp, analysis, prompt),
                "fields": fields}
    if handler == "functionary-v3.2":
        # core/chat/formats/functionary_v3_2.py: the generation prompt ends with ">>>", so each message starts with
        # its recipient: "all\n" then content, or "NAME\n" then the call's JSON arguments; ">>>" starts the next
        fields = {
            "tool_calls": {"open_pattern": r"(?:\A|>>>)(?!all\n)(?P<name>[^\s>]+)\n", "close_pattern": r"(?=>>>)",
                           "repeats": True, "content": "json",
                           "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
            # no "|\Z" in the closers: while streaming, transformers commits a \Z at the buffer's end and cuts the
            # region early; the end of the output closes the last region anyway
            "content": {"open_pattern": r"(?:\A|>>>)all\n", "close_pattern": r"(?=>>>)", "content": "text"}}
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, **_anchor(gp, analysis, prompt),
                "fields": fields}
    if handler == "gpt-oss" and flavour == Flavour.TRANSFORMERS:
        # core/chat/formats/gpt_oss.py: messages <|channel|>CHANNEL…<|message|>TEXT<|end|>, each after
        # <|start|>assistant (dropped between regions); analysis is reasoning, final and a recipient-less
        # commentary are content; a call names "to=functions.NAME" in the role header or after the channel;
        # calls to other recipients are read into a field whose transform empties it (transformers drops empty
        # values); the body is the field's region, not part of its opener: a delimiter's runs are bounded
        # (core/export/linear.py) and such a body (code for a python tool) can be long
        constraint = r"(?:\s*<\|constrain\|>\s*[A-Za-z0-9_-]+|\s+[A-Za-z0-9_-]+)?"
        fields = {
            think: {"open": "<|channel|>analysis<|message|>", "close_pattern": r"<\|end\|>", "content": "text"},
            "tool_calls": {
                "open_pattern": (r"(?: to=functions\.|<\|channel\|>(?:commentary|analysis) to=functions\.)"
                                 r"(?P<name>[^<\s]+)(?:<\|channel\|>(?:commentary|analysis))?"
                                 + constraint + r"<\|message\|>"),
                "close_pattern": r"<\|call\|>|<\|end\|>", "repeats": True, "content": "json",
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
            "content": {"open_pattern": r"<\|channel\|>(?:final" + constraint + r"|commentary)<\|message\|>",
                        "close_pattern": r"<\|end\|>|<\|return\|>", "content": "text"},
            "other_recipient": {
                "open_pattern": (r"(?: to=(?!functions\.|assistant)[^<\s]+<\|channel\|>[a-z]+|<\|channel\|>[a-z]+ "
                                 r"to=(?!functions\.|assistant)[^<\s]+)" + constraint + r"<\|message\|>"),
                "close_pattern": r"(?=<\|end\|>|<\|call\|>|<\|return\|>)", "content": "text", "transform": ""}}
        # the turn starts after the last message that is not the assistant's: a continued turn holds several
        # <|start|>assistant messages (the prefilled analysis, then the final one)
        anchor = r"<\|start\|>(?:user|system|developer|functions\.)(?:(?!<\|end\|>).)*<\|end\|>"
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, "start_anchor_pattern": anchor,
                "fields": fields}
    if handler == "kimi-k3":
        # core/chat/formats/kimi_k3.py: XTML sections <|open|>TAG attrs<|sep|> … <|close|>TAG<|sep|>; the
        # generation prompt opens the message and its think section, which ends at its closer or where the
        # response or tools section starts; argument values are typed by the tool schema (tools=), not by the
        # type attribute; the tools/message section markers fall between regions and are dropped
        fields = {
            think: {"open": "<|open|>think<|sep|>",
                    "close_pattern": r"<\|close\|>think<\|sep\|>|(?=<\|open\|>(?:response|tools)<\|sep\|>)",
                    "content": "text"},
            "content": {"open": "<|open|>response<|sep|>", "close": "<|close|>response<|sep|>", "content": "text"},
            "tool_calls": {
                "open_pattern": r'<\|open\|>call tool="(?P<name>[^"]+)"[^<]*<\|sep\|>',
                "close_pattern": r"<\|close\|>call<\|sep\|>", "repeats": True, "content": "xml-inline",
                "content_args": {"tag_pattern": r'<\|open\|>argument key="(?P<key>[^"]+)"[^<]*<\|sep\|>'
                                                r"(?P<value>(?:(?!<\|close\|>argument<\|sep\|>).)*)"
                                                r"<\|close\|>argument<\|sep\|>"},
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}}}
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"},
                "start_anchor": '<|open|>message role="assistant"<|sep|>', "fields": fields}
    if handler == "muse-glimmer":
        # core/chat/formats/muse_glimmer.py: messages "<|start|>assistant to=RECIPIENT<|message|>BODY<|eom|>";
        # to=self is reasoning, to=user (or no recipient) the answer, any other recipient holds
        # <atem:function_calls><atem:invoke name="NAME"><atem:parameter name="K">V</atem:parameter>…; the
        # header of a message is the opener of its region, so the recipient decides the field
        fields = {
            think: {"open": " to=self<|message|>", "close": "<|eom|>", "content": "text"},
            "tool_calls": {
                "open_pattern": r'<atem:invoke name="(?P<name>[^"]+)">',
                "close_pattern": r"</atem:invoke>", "repeats": True, "content": "xml-inline",
                "content_args": {"tag_pattern": r'<atem:parameter name="(?P<key>[^"]+)">'
                                                r"(?P<value>(?:(?!</atem:parameter>).)*)</atem:parameter>"},
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
            # " to=user" may be left out, right after the turn start only: a call's header ends in <|message|> too
            "content": {"open_pattern": r" to=user<\|message\|>|\A<\|message\|>|(?<=<\|start\|>assistant)<\|message\|>",
                        "close_pattern": r"<\|eom\|>|<\|eot\|>", "content": "text"}}
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, "start_anchor": "<|start|>assistant",
                "fields": fields}
    if handler == "minicpm5":
        # core/chat/formats/minicpm5.py: [<think>…</think>] content <function name="NAME"><param name="K">V</param>…
        # </function>…; a string value may be wrapped in <![CDATA[…]]> (then it may hold </param>); non-string
        # values are JSON, which tools= typing reproduces from the schema
        fields = {
            think: {"open": "<think>", "close": "</think>", "content": "text"},
            "tool_calls": {
                "open_pattern": rf'{_WS}<function name="(?P<name>[^"]+)">', "close_pattern": rf"</function>{_WS}",
                "repeats": True, "content": "xml-inline",
                # one value group (Python's re takes no repeated name): a CDATA opener selects the branch
                "content_args": {"tag_pattern": r'<param name="(?P<key>[^"]+)">(?P<cdata><!\[CDATA\[)?'
                                                r"(?P<value>(?(cdata)(?:(?!\]\]>).)*|(?:(?!</param>).)*))"
                                                r"(?(cdata)\]\]>)</param>"},
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
            "content": {"content": "text"}}
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, **_anchor(gp, analysis, prompt),
                "fields": fields}
    if handler == "gemma4":
        # core/chat/formats/gemma4.py: [<|channel>thought\n…<channel|>] content [<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>]…
        fields = {
            think: {"open": "<|channel>thought", "close": "<channel|>", "content": "text"},
            "tool_calls": {"open_pattern": r"\s*<\|tool_call>call:(?P<name>[A-Za-z0-9_.-]+)", "close_pattern": r"<tool_call\|>\s*",
                           "repeats": True, "content": "json",
                           "content_args": {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>']]},
                           "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
            # the turn ends at <turn|> / <|tool_response>; a stray <channel|> is dropped, as the handler does
            "content": {"close_pattern": r"\s*(?:<channel\|>|<turn\|>|<\|tool_response>)", "content": "text"}}
        return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"},
                **_anchor(gp, analysis, prompt, opener="<|channel>thought"),
                "fields": fields}
    return None


_SPECIAL_HANDLERS = ("lfm2", "lfm2.5", "gemma4", "kimi-k2", "ministral-3", "qwen3-coder", "ling3", "deepseek-v3.2",
                     "minicpm5", "functionary-v3.2", "gpt-oss", "kimi-k3", "muse-glimmer")
_REFUSED_HANDLERS = {
    "gpt-oss": "special handler gpt-oss (harmony channels) for vLLM: calls to other recipients (to=python, "
               "to=container.exec) must be swallowed by an extra always-empty field, and vLLM serves no field but "
               "thinking, content and tool_calls (the transformers export has it)",
}


def _probe_in(text: str, *, ids: bool = True) -> str:
    """The first of :func:`probe_texts` that ``text`` holds — read as a regex's literal text too (``\\ `` is a
    space) — else "". ``ids=False`` leaves out the call ids (``call00001``)."""
    if not text:
        return ""
    plain = re.sub(r"\\(.)", r"\1", text, flags=re.S)
    return next((t for t in probe_texts() if (ids or not _is_call_id(t)) and (t in text or t in plain)), "")


def _is_call_id(text: str) -> bool:
    return re.fullmatch(r"call\d{5}", text) is not None


def _probe_text_in_markers(analysis: Any) -> str:
    """A marker of the analysis that holds probe text (:func:`probe_texts`), else "". A call id is left out: the
    analysis may keep it in a marker (Solar Open's name prefix ``call00001<|tool_call:name|>``), which the
    mapping turns into the call id's group (:func:`_tool_field`); the exported patterns are checked for it again."""
    t = analysis.tools
    markers = [t.format.section_start, t.format.section_end, t.format.per_call_start, t.format.per_call_end,
               *vars(t.function).values(), *(v for v in vars(t.arguments).values() if isinstance(v, str)),
               analysis.reasoning.start, analysis.reasoning.end, analysis.content.start, analysis.content.end]
    return next((m for m in markers if isinstance(m, str) and _probe_in(m, ids=False)), "")


def probe_text_in_export(rt: Any) -> tuple[str, str]:
    """(the string of ``rt`` — a response_template — that holds probe text, that probe text), or ("", "")."""
    if isinstance(rt, str):
        found = _probe_in(rt)
        return (rt, found) if found else ("", "")
    for v in (rt.values() if isinstance(rt, dict) else rt if isinstance(rt, list) else ()):
        hit = probe_text_in_export(v)
        if hit[1]:
            return hit
    return "", ""


def export_response_template(template: Any, *, fidelity: str = "llama.cpp",
                             flavour: Flavour | str = Flavour.TRANSFORMERS) -> ExportResult:
    """Export ``template`` (a :class:`~core.jinja.template.ChatTemplate`) as a response_template at ``fidelity``
    (``"llama.cpp"`` or ``"improved"``: the analysis the parser is built from) for ``flavour``.

    The generation prompt is that of the round-trip request (:func:`core.chat.roundtrip.round_trip_request`:
    tools, ``enable_thinking`` true). Never raises for template problems: they become ``reasons``; raises
    ``ValueError`` for an unknown flavour or fidelity."""
    from ..chat.pipeline import build_chat_parser, cached_analysis, route_for
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import round_trip_request
    from ..errors import ChatTemplateExplorerError
    from .linear import linear_response_template
    from .redos import check_response_template

    flavour = Flavour(flavour)
    if fidelity not in ("llama.cpp", "improved"):
        raise ValueError(f"fidelity: unknown value {fidelity!r} (llama.cpp or improved)")
    route = route_for(template.source)
    route_name = f"specialized:{route.handler}" if route.kind == "specialized" else "autoparser"
    res = ExportResult(template.name, flavour, fidelity, route_name, "", None)
    try:
        report = cached_analysis(template, fidelity)
        bundle = build_chat_parser(template, ChatRequest.from_dict(round_trip_request()), fidelity=fidelity)
    except ChatTemplateExplorerError as e:
        res.reasons.append(f"the analysis or the parser fails: {e}")
        return res
    res.generation_prompt = bundle.generation_prompt or _generation_prompt(bundle)
    analysis = report.analysis
    leaked = _probe_text_in_markers(analysis)
    if leaked and not (route.kind == "specialized" and route.handler in _SPECIAL_HANDLERS):
        res.reasons.append(f"the analysis's markers contain probe text ({leaked[:60]!r}…): the differential analysis "
                           "(llama.cpp's too) did not isolate this template's markers")
        return res
    if route.kind == "specialized" and route.handler in _REFUSED_HANDLERS and not (
            route.handler == "gpt-oss" and flavour == Flavour.TRANSFORMERS):
        res.reasons.append(_REFUSED_HANDLERS[route.handler])
        return res
    literals = analysis.tools.format.mode.value == "TAG_WITH_TAGGED" and renders_python_literals(template)
    prompt: str | tuple[str, ...] = bundle.prompt
    gp = res.generation_prompt.strip()
    after_tool = _tool_result_prompt(template, fidelity)
    if after_tool and not (gp and after_tool.rstrip().endswith(gp)):
        # after a tool result the prompt does not end with the generation prompt: anchor on its end too
        prompt = (bundle.prompt, after_tool)
    try:
        special = _special(route.handler, analysis, res.generation_prompt, flavour, prompt, literals) \
            if route.kind == "specialized" else None
        if bundle.format == "glm4-chat":  # improvement metadata-call-turns chose the glm4-chat format
            res.response_template = metadata_call_turns(template, analysis, res.generation_prompt, prompt, res.notes)
        elif special is not None:
            res.notes.append(f"special handler {route.handler}: format written from the handler")
            res.response_template = special
        else:
            res.response_template = map_analysis(analysis, res.generation_prompt, flavour, res.notes, prompt,
                                                 python_literals=literals)
            header = getattr(bundle.parser, "content_header", "")
            if header:  # improvement content-turn-header
                _content_header_field(res.response_template, header, flavour, res.notes)
            if any(n.startswith("improvement call-turn-header") for n in getattr(bundle.parser, "notes", ())):
                _bare_first_call(res.response_template, analysis.tools.format.per_call_start, header, res.notes)
            if route.kind == "specialized":
                _handler_fields_kept(route.handler, bundle.parser, res.response_template, flavour)
                res.notes.append(f"special handler {route.handler}: exported from the analysis; verification "
                                 "compares with the handler's parses")
        if res.response_template is not None:
            where, probe = probe_text_in_export(res.response_template)
            if probe:  # a safety net: the anchor and markers are built to avoid it (_prompt_end_marker)
                raise NotExpressible(f"an exported pattern holds probe text ({probe[:40]!r} in {where[:80]!r}): text "
                                     "the analysis rendered as the conversation, not text the model writes")
            linear_response_template(res.response_template)  # core/export/linear.py
            slow = check_response_template(res.response_template)  # core/export/redos.py: never export one
            if slow:
                where, found = next(iter(slow.items()))
                raise NotExpressible(f"a pattern would not run in linear time on some outputs ({where}: "
                                     f"{found[0].kind}, {found[0].detail})")
        if flavour == Flavour.VLLM and res.response_template is not None:
            vllm_limits(res.response_template)
    except NotExpressible as e:
        res.reasons.append(str(e))
        res.response_template = None
    return res


def metadata_call_turns(template: Any, analysis: Any, gp: str, prompt: str | tuple[str, ...] = "",
                        notes: list[str] | None = None) -> dict[str, Any]:
    """Improvement ``metadata-call-turns`` (GLM-4 chat, :mod:`core.chat.formats.glm4_chat`): after the generation
    prompt a call is ``NAME`` + the learned separator (a line break) + a JSON object, further calls follow the
    learned ``between`` text (the turn header again), and a plain answer starts with a line break.

    The call region opens at the start of the output (or at ``between`` right after a call) on a first line of one
    name followed by a line break and ``{``; it closes just after a ``}`` that a line break and a character no JSON
    value can continue with follow (a raw line break never occurs inside a JSON string, so such a ``}`` ends the
    object), or ``between``, or the end of the output — so text after the call stays content. Raises
    :class:`NotExpressible` when the template has no such layout."""
    from ..chat.formats import glm4_chat

    notes = notes if notes is not None else []
    layout = glm4_chat.call_layout_of(template)
    if layout is None:
        raise NotExpressible("improvement metadata-call-turns: the template renders no call turn (NAME, line break, "
                             "JSON arguments) after its generation prompt")
    between = re.escape(layout.between) if layout.between else ""
    # a further call turn only right after a call's "}" (or its line break), as the parser reads parallel calls:
    # a turn header after text is content
    start = rf"(?:\A|(?<=\}}){between}|(?<=\}}\n){between})" if between else r"\A"
    # no run of spaces before the line break: the lookahead would start with a run (not linear; core/export/redos.py)
    after = rf"\r?\n\s*[^\s,\]\}}]|{between}" if between else r"\r?\n\s*[^\s,\]\}]"
    fields: dict[str, Any] = {
        "tool_calls": {"open_pattern": rf"{start}\s*(?P<name>{_NAME_CHAR}+)[ \t]*\n(?=\s*\{{)",
                       "close_pattern": rf"(?<=\}})(?={after})", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
        "content": {"content": "text"}}
    notes.append(f"improvement metadata-call-turns: a call is NAME{layout.separator!r}{{json arguments}} at the start "
                 "of the output" + (f", further calls after {layout.between!r}" if layout.between else "")
                 + "; any name on the first line is read as a call (the parser reads only the request's tools)")
    return {"version": FORMAT_VERSION, "defaults": {"role": "assistant"}, **_anchor(gp, analysis, prompt),
            "fields": fields}


def _handler_fields_kept(handler: str, parser: Any, rt: dict[str, Any], flavour: Flavour) -> None:
    """Raise :class:`NotExpressible` when a template exported from the generic analysis lacks a field the special
    handler's parser produces (K2 Horizon: the analysis sees content only, the handler parses reasoning and tool
    calls) — offering it would silently drop the model's reasoning or calls."""
    fields = rt.get("fields", {}) if isinstance(rt, dict) else {}
    missing = []
    if getattr(parser, "supports_thinking", False) and REASONING_FIELD[flavour] not in fields:
        missing.append("reasoning")
    if (getattr(parser, "grammar_triggers", None) or getattr(parser, "grammar", None)) and "tool_calls" not in fields:
        missing.append("tool calls")
    if missing:
        raise NotExpressible(f"special handler {handler}: the handler parses {' and '.join(missing)}, but the generic "
                             f"analysis (the export's source for this family) finds none; the export would drop them")


def _dropped_at_start(text: str) -> dict[str, Any]:
    """An extra field that swallows ``text`` at the very start of the output: opened by it and closed at once, so
    its value is empty and transformers leaves it out of the message (the repeated opener, the turn header)."""
    return {"open_pattern": r"\A\s*" + re.escape(text), "close_pattern": "", "content": "text"}


def _content_header_field(rt: dict[str, Any], header: str, flavour: Flavour, notes: list[str]) -> None:
    """Improvement ``content-turn-header``: the header a plain answer starts with (Hunyuan A13B's ``助手：``) is
    swallowed, as the repeated opener is, by an extra field opened by it at the very start of the output and
    closed at once (transformers leaves the empty value out of the message). The start anchor cannot take it:
    transformers looks for the anchor in the prompt only. vLLM accepts no extra field: raises
    :class:`NotExpressible`."""
    if flavour != Flavour.TRANSFORMERS:
        raise NotExpressible(f"the template's answers start with a header ({header!r}) the generation prompt lacks; "
                             "vLLM's response_template accepts no field to drop it")
    if REPEATED_OPENER_FIELD in rt["fields"]:
        raise NotExpressible(f"a header ({header!r}) and a repeated opener at the start of the output: one "
                             "start-of-output field only")
    rt["fields"][CONTENT_HEADER_FIELD] = _dropped_at_start(header)
    notes.append(f"{CONTENT_HEADER_FIELD}: the header {header!r} a plain answer starts with is dropped")


def _bare_first_call(rt: dict[str, Any], per_call_start: str, header: str, notes: list[str]) -> None:
    """Improvement ``call-turn-header``: the generation prompt ends with the per-call start, so a call may open
    the output without it (Functionary v2.2: ``get_weather\\n<|content|>{…}``). The tool-call opener also
    accepts the very start of the output, unless the answer's own header (``content_header``, e.g.
    ``all\\n<|content|>``) is there. Leaves ``rt`` unchanged when the opener is not the expected one."""
    field = rt.get("fields", {}).get("tool_calls")
    lit = _lit(per_call_start)
    if not field or lit not in field.get("open_pattern", ""):
        return
    guard = f"(?!\\s*{re.escape(header)})" if header else ""
    field["open_pattern"] = field["open_pattern"].replace(lit, f"(?:{lit}|\\A{guard})", 1)
    notes.append("tool_calls: the first call may start the output without its header (the generation prompt "
                 "wrote it)")


def _tool_result_prompt(template: Any, fidelity: str) -> str:
    """The prompt for the turn after a tool result: the round trip's user message, its assistant message with
    the two calls (no reasoning; empty content, else the round trip's), one tool result per call, generation
    prompt. "" when the template cannot render it."""
    from ..chat.pipeline import build_chat_parser
    from ..chat.request import ChatRequest
    from ..chat.roundtrip import round_trip_message, round_trip_request

    msg = round_trip_message(reasoning=False)
    results = [{"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"], "content": "done"}
               for c in msg["tool_calls"]]
    user = round_trip_request()["messages"]
    # without content first: some templates refuse content beside tool calls (Mistral v3)
    for assistant in ({**msg, "content": ""}, msg):
        try:
            bundle = build_chat_parser(template, ChatRequest.from_dict(round_trip_request(
                messages=[*user, assistant, *results])), fidelity=fidelity)
        except Exception:  # noqa: BLE001 - a template that cannot render tool turns keeps the user-turn anchor
            continue
        return bundle.prompt or ""
    return ""


def renders_python_literals(template: Any) -> bool:
    """True when ``template`` writes an object-valued call argument as a Python literal (``{'time': '19:30'}``,
    Jinja's ``string`` filter, as Seed-OSS does) rather than JSON: found by rendering the round trip's
    ``book_table`` call, whose ``options`` argument is an object. False when the template cannot render it."""
    from ..chat.roundtrip import round_trip_message, round_trip_request, sample_output

    msg = round_trip_message(reasoning=False)
    calls = [c for c in msg.get("tool_calls") or [] if isinstance(c["function"].get("arguments"), dict)
             and isinstance(c["function"]["arguments"].get("options"), dict)]
    if not calls:
        return False
    msg = {**msg, "content": "", "tool_calls": calls[:1]}
    try:
        out = sample_output(template, round_trip_request(), msg)
    except Exception:  # noqa: BLE001 - a template that cannot render the call has nothing to tell
        return False
    return str(calls[0]["function"]["arguments"]["options"]) in out


def vllm_limits(rt: dict[str, Any]) -> None:
    """Raise :class:`NotExpressible` when ``rt`` breaks what vLLM's response_template parser accepts
    (``validate_response_template_for_serving``): fields only ``thinking``/``content``/``tool_calls``, defaults
    only ``role``, and ``thinking``/``content`` plain ``text`` without ``transform`` or ``join``."""
    extra = (set(rt["fields"]) - {"thinking", "content", "tool_calls"}) | (set(rt.get("defaults", {})) - {"role"})
    if extra:
        raise NotExpressible(f"vLLM accepts only the fields thinking, content, tool_calls (found {sorted(extra)})")
    for name in ("thinking", "content"):
        f = rt["fields"].get(name)
        if f is not None and (f.get("content", "text") != "text" or "transform" in f or "join" in f):
            raise NotExpressible(f"vLLM streams {name} only as plain text (no transform or join)")


def _generation_prompt(bundle: Any) -> str:
    prepared = getattr(bundle, "prepared", None)
    return getattr(prepared, "generation_prompt", "") or ""
