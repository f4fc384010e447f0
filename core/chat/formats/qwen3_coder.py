"""Qwen3-Coder XML tool calls — also Qwen3.5, Nemotron 3 Nano and StepFun 3.5 Flash (llama.cpp
``common/parsers/qwen3-coder.cpp``).

Output shape (after the ``<|im_start|>assistant\\n`` generation prefix)::

    [<think> reasoning </think>] content
    <tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n ... </function>\\n</tool_call>

* Thinking templates (source contains ``<think>``): reasoning is ``<think>`` + space + text up to
  ``</think>`` or ``<tool_call>`` (a tool call also ends reasoning); Qwen3-Coder itself (no ``<think>``) may
  omit the first ``<tool_call>`` — a complete ``<function=NAME>`` for a known tool also starts the calls.
* Parameters: required ones in any order (``permute``, up to 6), then optional ones in any order. A value
  whose schema cannot be a string is JSON; a string-only value is raw text up to ``\\n</parameter>\\n``; a
  value that may be a string or something else is tried as JSON first (``{"a": 1}``, ``42``, ``null``) and
  falls back to raw text (``{not valid json``).
* No ``end()`` after the calls: trailing text after the last call is ignored, as the reference does.
* Improved fidelity (tolerance repairs of :mod:`core.chat.repairs`, each a ``repair:NAME`` variant tried after
  the template's form): ``tag-whitespace``, ``missing-closing-tags`` (``</parameter>`` after a JSON-typed value
  / ``</function>`` left out), ``drifted-closing-tag`` (a misspelled ``</parameter…`` closer before the tag that
  ends an unclosed value), ``mistyped-value-as-string`` (a scalar-typed value that is no such JSON, kept as
  text), ``json-call-in-tags`` (a Hermes JSON call inside ``<tool_call>``) and ``argument-order`` (an optional
  parameter before a required one).
"""

from __future__ import annotations

from typing import Any

from ...peg.chat import build_chat_peg_parser
from ...peg.gbnf import format_literal
from ..request import Continuation, ReasoningFormat, ToolChoice
from ._peg_handler import (foreach_function, foreach_function_indexed, foreach_parameter, grammar_for,
                           has_response_format, make_parser, prepared_for, word)
from ..prompt import render_prompt
from ..repairs import (CONSECUTIVE_CALL_BLOCKS, CONTENT_BETWEEN_CALLS, DRIFTED_CLOSING_TAG, MISSING_REQUIRED_ARGUMENT,
                        QUOTED_NUMBER, REASONING_START_REPEATED, any_order_args)
from ..generator import _any_subset

NAME = "qwen3-coder"
GEN_PREFIX = "<|im_start|>assistant\n"
PARAM_CLOSE = "\n</parameter>\n"
DRIFTED = "</parameter"


def build(template: Any, request: Any, generation_prompt: str, report: Any = None, *, prepared: Any = None):
    """Parser, grammar and prompt for a Qwen3-Coder-family template (see module doc). ``generation_prompt``:
    the request path's generation prompt (rebuilt here for a continuation)."""
    prep = prepared_for(template, request, prepared)
    prompt = render_prompt(prep)
    gp = generation_prompt
    supports_reasoning = "<think>" in template.source
    is_qwen3_coder = not supports_reasoning
    preserved = ["<tool_call>", "</tool_call>"] + (["<think>", "</think>"] if supports_reasoning else [])

    tools = foreach_function(request.tools)
    has_tools = bool(request.tools)
    tools_active = has_tools and request.tool_choice != ToolChoice.NONE
    has_rf = has_response_format(request)
    extract = request.reasoning_format != ReasoningFormat.NONE
    include_grammar = has_rf or tools_active

    if prep.has_continuation:
        gp = GEN_PREFIX
        if supports_reasoning:
            gp += "<think>\n" + prep.continue_reasoning
            if prep.continuation == Continuation.CONTENT:
                gp += "\n</think>\n\n"
        if prep.continuation == Continuation.CONTENT:
            gp += prep.continue_content
        prompt += gp

    tool_call_starts = ["<tool_call>"]
    if is_qwen3_coder:
        tool_call_starts += [f"<function={fn['name']}>" for fn in tools]

    def root(p):
        late: list[Any] = []   # repair widenings made once the tree is built (ChatBuilder.widen_late)
        prefix = p.literal(GEN_PREFIX)
        reasoning = p.eps()
        if supports_reasoning and extract:
            opened = p.literal("<think>") + p.space()
            if REASONING_START_REPEATED in p.repairs:
                # repair reasoning-start-repeated: <think> written again after the one the prompt opened, with
                # reasoning after it (an empty re-emitted block stays as llama.cpp reads it: reference ref-0014)
                opened = opened + p.optional(p.repair(REASONING_START_REPEATED, p.literal("<think>") + p.space()
                                                      + p.negate(p.literal("</think>"))))
            reasoning = p.optional(opened
                                   + p.reasoning(p.until_one_of(["</think>", "<tool_call>"]))
                                   + p.choice(p.literal("</think>"), p.peek(p.literal("<tool_call>"))))
        if has_rf:
            return prefix + (reasoning << p.content(p.schema(p.json(), "response-format", request.json_schema)))
        if tools_active:
            arg_close = p.tool_arg_close(p.flexible(PARAM_CLOSE))
            # repair tag-whitespace: a value may also end at "\n</parameter>" with no line break after it (Qwen3.5's
            # compact layout: the layout newline is not the value's), " </parameter>" or "</parameter>"
            ends = ([PARAM_CLOSE, "\n</parameter>", " </parameter>", "</parameter>"] if "tag-whitespace" in p.repairs
                    else [PARAM_CLOSE])
            arg_string = p.rule("xml-arg-string",
                                p.ac(p.tool_arg_string_value(p.until_one_of(ends)) + arg_close, PARAM_CLOSE))
            # repair missing-closing-tags: a JSON-typed value (its end is known without the tag) may stop where
            # the function, the call or the next parameter starts; a function where the call ends
            typed_close = arg_close
            func_close = p.flexible("</function>\n")
            if "missing-closing-tags" in p.repairs:
                nexts = p.choice(p.literal("</function>"), p.literal("</tool_call>"), p.literal("<parameter="))
                typed_close = p.choice(arg_close, p.tool_arg_close(
                    p.repair("missing-closing-tags", _drifted_gap(p, late) + p.peek(nexts))))
                func_close = p.choice(func_close, p.repair("missing-closing-tags",
                                                           p.space() + p.peek(p.literal("</tool_call>"))))
                # and a call that runs to the end of the output without its closers (a server stripped the
                # stop string; vLLM reads such a call): tried first, as "</function>" at the very end is a
                # prefix of the template's "</function>\n". The grammar keeps the template's closer.
                func_close = p.gbnf(p.choice(p.repair("missing-closing-tags", p.literal("</function>") + p.space()
                                                      + p.end()), func_close),
                                    "(" + format_literal("</function>\n") + ")")
            mistyped = "mistyped-value-as-string" in p.repairs
            choices = []
            for idx, fn in foreach_function_indexed(request.tools):
                name = fn["name"]
                required, optional = [], []
                pnames = [pn for pn, _, _ in foreach_parameter(fn)]
                for j, (pname, pschema, is_req) in enumerate(foreach_parameter(fn)):
                    tool_string = arg_string
                    others = [q for q in pnames if q != pname]
                    if "missing-closing-tags" in p.repairs and others:
                        # repair missing-closing-tags: a string value whose </parameter> is left out ends where the
                        # next parameter of the same tool opens (vLLM's qwen3coder parser ends a value at the next
                        # <parameter=); the grammar keeps the template's value rule
                        # (and repair drifted-closing-tag: a misspelled closer before it is markup)
                        opens = [f"<parameter={q}>" for q in others]
                        unclosed = p.tool_arg_close(p.repair("missing-closing-tags", _drifted_gap(p, late) + p.peek(
                            p.choice(*[p.literal(o) for o in opens]))))
                        drifted = ["\n" + DRIFTED, DRIFTED] if DRIFTED_CLOSING_TAG in p.repairs else []
                        loose = (p.tool_arg_string_value(p.until_one_of(
                            ends + ["\n" + o for o in opens] + opens + drifted)) + p.choice(arg_close, unclosed))
                        tool_string = p.gbnf(p.choice(loose, arg_string), "xml-arg-string")
                    rule_name = f"tool-{idx}-arg-{j}"
                    arg_open = p.tool_arg_open("<parameter=" + p.tool_arg_name(p.literal(pname)) + p.flexible(">\n"))
                    value = p.tagged_arg_value(rule_name, pschema, tool_string, typed_close, mistyped=mistyped,
                                             quoted=QUOTED_NUMBER in p.repairs)
                    arg_rule = p.rule(rule_name, p.tool_arg(arg_open + value))
                    (required if is_req else optional).append(arg_rule)
                # repair argument-order: an optional parameter before a required one (tried after)
                args = p.tagged_args(idx, required, optional,
                                     any_order_args if "argument-order" in p.repairs else None)
                if MISSING_REQUIRED_ARGUMENT in p.repairs and required:
                    # repair missing-required-argument: the declared parameters, each at most once, required ones
                    # possibly missing (the client checks the schema), tried last; made once the tree is built
                    # so the grammar stays the template's (widen_late)
                    late.append(lambda args=args, idx=idx, params=required + optional: p.widen_late(
                        args, MISSING_REQUIRED_ARGUMENT, lambda _: _any_subset(p, f"tool-{idx}-subset", params)))
                func = p.tool(p.tool_open("<function=" + p.tool_name(p.literal(name)) + p.flexible(">\n"))
                              + p.tool_args(args) + p.tool_close(func_close))
                choices.append(p.rule(f"tool-{idx}", func))
            tool_choice = p.choice(*choices)
            min_calls = 1 if request.tool_choice == ToolChoice.REQUIRED else 0
            call_close = p.literal("</tool_call>")
            if "missing-closing-tags" in p.repairs:
                # repair missing-closing-tags: </tool_call> left out at the very end of the output
                call_close = p.gbnf(p.choice(p.repair("missing-closing-tags", p.space() + p.end()), call_close),
                                    format_literal("</tool_call>"))
            closed = tool_choice + call_close
            after = p.space()
            body = closed + after
            if CONTENT_BETWEEN_CALLS in p.repairs:
                # repair content-between-calls: text after a call, up to the next call or the end, is content with
                # the whitespace before it; whitespace alone (then the end or a call) stays layout, decided before
                # any of it shows
                late.append(lambda: p.widen_late(after, CONTENT_BETWEEN_CALLS, lambda _: p.peek(
                    p.space() + p.negate(p.end()) + p.negate(p.choice(*[p.literal(s) for s in tool_call_starts])))
                    + p.content(p.space() + p.until_one_of(tool_call_starts)), first=True))
            xml_call = p.flexible("<tool_call>\n") + body
            if "json-call-in-tags" in p.repairs:
                # repair json-call-in-tags: the Hermes JSON call inside <tool_call> (tried after the XML one)
                json_call = p.repair("json-call-in-tags", p.literal("<tool_call>") + p.space()
                                     + p.flat_json_call(request.tools) + p.space() + "</tool_call>" + p.space())
                xml_call = p.choice(xml_call, json_call)
                first_call = p.choice(p.optional(p.flexible("<tool_call>\n")) + body, json_call)
            else:
                first_call = p.optional(p.flexible("<tool_call>\n")) + body
            tool_call = p.rule("tool-call", xml_call)
            first = p.rule("tool-call-first", first_call) if is_qwen3_coder else tool_call
            calls = first + p.zero_or_more(tool_call) if request.parallel_tool_calls else first
            if is_qwen3_coder and request.parallel_tool_calls and CONSECUTIVE_CALL_BLOCKS in p.repairs:
                # repair consecutive-call-blocks: as the first call may come without <tool_call>, so may the next
                # ones: a bare <function=…> block closes where the next bare one opens (grammar unchanged)
                bare_next = p.space() + p.peek(p.literal("<function="))
                late.append(lambda: p.widen_late(call_close, CONSECUTIVE_CALL_BLOCKS, lambda _: bare_next))
                late.append(lambda: p.widen_late(xml_call, CONSECUTIVE_CALL_BLOCKS, lambda _: p.peek(
                    p.literal("<function=")) + body))
            if "tag-whitespace" in p.repairs:
                late.append(lambda calls=calls: p.widen_late(
                    calls, "tag-whitespace", lambda _: _indented_calls(p, request, mistyped)))
            tool_calls = p.trigger_rule("tool-call-root", p.repeat(calls, min_calls, 1))
            tree = prefix + (reasoning << p.content(p.until_one_of(tool_call_starts)) << tool_calls)
            for widen in late:
                widen()
            return tree
        return prefix + (reasoning << p.content(p.rest()))

    arena = build_chat_peg_parser(root)
    notes: list[str] = []
    lazy = has_tools and request.tool_choice == ToolChoice.AUTO
    grammar, lazy, triggers = grammar_for(arena, notes, include=include_grammar, lazy=lazy,
                                          triggers=[word(s) for s in tool_call_starts] if lazy else [])
    return make_parser(
        NAME, arena, generation_prompt=gp, parser_generation_prompt=generation_prompt, prompt=prompt,
        grammar=grammar, grammar_lazy=lazy, grammar_triggers=triggers, preserved_tokens=preserved,
        supports_thinking=supports_reasoning, thinking_start_tag="<think>" if supports_reasoning else "",
        thinking_end_tags=["\n</think>", "</think>", "<tool_call>"] if supports_reasoning else [],
        message_delimiters=[("assistant", "<|im_start|>assistant"), ("tool", "<|im_start|>user\n<tool_response>"),
                            ("tool", "<|im_start|>tool_response"), ("user", "<|im_start|>user"),
                            ("system", "<|im_start|>system")],
        notes=notes)


def _drifted_gap(p: Any, late: list[Any]) -> Any:
    """The whitespace before the tag that ends an unclosed value (repair missing-closing-tags); with repair
    drifted-closing-tag, tried first, a parameter closer the model misspelled inside it: ``</parameter`` then a
    name's characters (``</parameter1>``, ``</parameter_function>``) or none, then ``>`` or not (a bare
    ``</parameter``). Its callers use it only where the value's end is known otherwise (the next ``<parameter=``,
    ``</function>``, ``</tool_call>``), so a value closed by its real ``</parameter>`` keeps any such text. Made
    once the tree is built (``late``), so the grammar stays the one without the repair."""
    gap = p.space()
    if DRIFTED_CLOSING_TAG in p.repairs:
        # (">" as a character class: a literal would make a lone ">" markup to the lossless checks)
        late.append(lambda: p.widen_late(gap, DRIFTED_CLOSING_TAG, lambda _: p.space() + p.literal(DRIFTED)
                                         + p.negate(p.one("[>]")) + p.chars("[A-Za-z0-9_]", 0)
                                         + p.optional(p.one("[>]")) + p.space(), first=True))
    return gap


def _indented_calls(p: Any, request: Any, mistyped: bool) -> Any:
    """Repair tag-whitespace, indented layout (tried after the template's): every tag of the call may follow
    whitespace (the markup indented as a block, SGLang's qwen3coder fixtures) and a string value is read without
    the whitespace at its ends, as SGLang's and vLLM's parsers strip it. Only reached when the template's layout
    fails, so a value whose own indentation matters under an unindented tag (reference ref-0008) keeps it."""
    ws = p.space()
    close = ws + p.tool_arg_close(p.literal("</parameter>"))
    word = p.one_or_more(p.choice(p.chars("[^ \\t\\n\\r<]"), p.literal("<") + p.negate(p.literal("/parameter>"))))
    trimmed = word + p.zero_or_more(p.chars("[ \\t\\n\\r]") + word)
    string = p.tool_arg_string_value(trimmed) + close
    funcs = []
    for idx, fn in foreach_function_indexed(request.tools):
        required, optional = [], []
        for j, (pname, pschema, is_req) in enumerate(foreach_parameter(fn)):
            name = f"tool-{idx}-arg-{j}-indented"
            opener = p.tool_arg_open(ws + "<parameter=" + p.tool_arg_name(p.literal(pname)) + ">")
            value = p.tagged_arg_value(name, pschema, string, close, mistyped=mistyped,
                                     quoted=QUOTED_NUMBER in p.repairs)
            (required if is_req else optional).append(p.rule(name, p.tool_arg(opener + ws + value)))
        args = p.permute(f"tool-{idx}-args-indented", required)
        if optional:
            args = args + p.zero_or_more(p.choice(*optional))
        funcs.append(p.tool(p.tool_open(ws + "<function=" + p.tool_name(p.literal(fn["name"])) + ">")
                            + p.tool_args(args) + p.tool_close(ws + "</function>")))
    call = ws + "<tool_call>" + p.choice(*funcs) + ws + p.choice(p.literal("</tool_call>"), p.end()) + ws
    if not request.parallel_tool_calls:
        return call
    later = call
    if "content-between-calls" in p.repairs:
        # repair content-between-calls: text between two indented calls is content, without the layout around it
        piece = p.one_or_more(p.choice(p.chars("[^ \\t\\n\\r<]"), p.literal("<") + p.negate(p.literal("tool_call>"))))
        text = p.content(piece + p.zero_or_more(p.chars("[ \\t\\n\\r]") + piece))
        later = p.choice(call, p.repair("content-between-calls", text + call))
    return call + p.zero_or_more(later)


__all__ = ["NAME", "build"]
