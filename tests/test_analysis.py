"""Analysis engine: mini-PEG semantics, golden templates (upstream assertions), comparisons kept on the
report, degraded probes, render memoization, workarounds as data, reapply and overrides."""

from __future__ import annotations

import pytest

from core.analysis import (
    WORKAROUNDS,
    CallIdPosition,
    ContentMode,
    ReasoningMode,
    ToolFormat,
    analyze,
    detect_route,
    reapply,
)
from core.analysis import session
from core.jinja import llama
from core.analysis.patterns import (
    ANY,
    END,
    LAST_MARKER,
    MARKER,
    REST,
    SPACE,
    lit,
    neg,
    opt,
    parse_and_extract,
    parse_anywhere,
    star,
    tag,
    until,
)
from core.analysis.workarounds import WORKAROUNDS_BY_NAME
from core.errors import AnalysisError
from core.jinja.template import ChatTemplate

from .conftest import template_source


def _t(name: str) -> ChatTemplate:
    return ChatTemplate(template_source(name), name)


# ------------------------------------------------------------------------------------------ mini-PEG

def test_until_stops_at_delimiter_or_partial_match_at_end():
    assert parse_and_extract(tag("a", until("END")), "abcENDx")["a"] == "abc"
    # the rest "EN" is a proper prefix of "END": until stops before it
    assert parse_and_extract(tag("a", until("END")), "abcEN")["a"] == "abc"
    assert parse_and_extract(tag("a", until("END")), "abc")["a"] == "abc"
    assert parse_and_extract(tag("a", until(">", "FUN")), "<x FUN>")["a"] == "<x "


def test_marker_space_and_end():
    m = parse_and_extract(tag("m", MARKER + SPACE) + END, "<think>\n \t")
    assert m.ok and m["m"] == "<think>\n \t"
    assert not parse_and_extract(MARKER, "<unterminated").ok
    assert parse_and_extract(tag("m", MARKER), "[a>b]x")["m"] == "[a>b]"


def test_captures_only_on_success_path_and_last_wins():
    p = (tag("x", lit("a")) + lit("zz")) | (tag("x", lit("ab")) + tag("x", lit("c")))
    m = parse_and_extract(p, "abc")
    assert m.ok and m.tags == {"x": "c"}
    assert parse_and_extract(tag("x", lit("q")), "abc").tags == {}


def test_parse_anywhere_first_start_and_failure():
    m = parse_anywhere(tag("pre", MARKER + SPACE) + lit("X") + tag("post", SPACE + MARKER), "ab<s> X <e>")
    assert (m.ok, m.start, m["pre"], m["post"]) == (True, 2, "<s> ", " <e>")
    f = parse_anywhere(tag("m", MARKER) + lit("nope"), "<a><b>")
    assert not f.ok and f.tags == {}


def test_last_marker_with_tail():
    p = star(neg(LAST_MARKER) + ANY) + tag("m", LAST_MARKER)
    assert parse_and_extract(p, "x<a>y<b>tail")["m"] == "<b>tail"
    assert not parse_and_extract(p, "no markers").ok


def test_star_stops_on_empty_match_and_opt():
    assert parse_and_extract(tag("s", star(opt(lit("a")))) + REST, "aab")["s"] == "aa"


# ------------------------------------------------------------------------------------------ golden templates
# (values asserted by llama.cpp's tests/test-chat-auto-parser.cpp, analysis notes §16)

def test_nemotron_3_nano_tagged_tools():
    a = analyze(_t("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja")).analysis
    assert (a.reasoning.mode, a.reasoning.start, a.reasoning.end) == (ReasoningMode.TAG_BASED, "<think>\n",
                                                                      "\n</think>\n")
    assert a.content.mode == ContentMode.PLAIN
    f, fn, ar = a.tools.format, a.tools.function, a.tools.arguments
    assert f.mode == ToolFormat.TAG_WITH_TAGGED
    assert (f.section_start, f.section_end, f.per_call_start, f.per_call_end) == ("", "", "<tool_call>\n",
                                                                                  "</tool_call>")
    assert (fn.name_prefix, fn.name_suffix, fn.close) == ("<function=", ">\n", "</function>\n")
    assert (ar.name_prefix, ar.name_suffix, ar.value_suffix) == ("<parameter=", ">\n", "\n</parameter>\n")
    assert a.caps.supports_parallel_tool_calls and a.caps.supports_tools


def test_command_r7b_json_native_and_tools_only_reasoning():
    rep = analyze(_t("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja"))
    a = rep.analysis
    assert (a.content.mode, a.content.start, a.content.end) == (ContentMode.ALWAYS_WRAPPED, "<|START_RESPONSE|>",
                                                                "<|END_RESPONSE|>")
    f = a.tools.format
    assert f.mode == ToolFormat.JSON_NATIVE and f.tools_array_wrapped
    assert (f.name_field, f.args_field, f.id_field) == ("tool_name", "parameters", "")
    assert f.section_end == "<|END_ACTION|>"
    assert a.user_start == "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>" and a.assistant_start == "<|START_RESPONSE|>"


def test_smollm3_reasoning_from_thinking_toggle():
    rep = analyze(_t("HuggingFaceTB-SmolLM3-3B.jinja"))
    a = rep.analysis
    assert (a.reasoning.mode, a.reasoning.start, a.reasoning.end) == (ReasoningMode.TAG_BASED, "<think>",
                                                                      "</think>")
    assert {"<think>", "</think>"} <= set(a.preserved_tokens)
    assert rep.comparison("R2").found.get("reasoning.start") == "<think>"


def test_mistral_small_32_call_id_between_name_and_args():
    a = analyze(_t("Mistral-Small-3.2-24B-Instruct-2506.jinja")).analysis
    cid = a.tools.call_id
    assert (cid.pos, cid.prefix, cid.suffix) == (CallIdPosition.BETWEEN_FUNC_AND_ARGS, "[CALL_ID]", "[ARGS]")
    assert (a.user_start, a.assistant_start) == ("[INST]", "")


@pytest.mark.parametrize("name, user, assistant", [
    ("Qwen-Qwen3-0.6B.jinja", "<|im_start|>user", "<|im_start|>assistant"),
    ("Apertus-8B-Instruct.jinja", "<|user_start|>", "<|assistant_start|>"),
    ("ByteDance-Seed-OSS.jinja", "<seed:bos>user", "<seed:bos>assistant"),
    ("ibm-granite-granite-4.0.jinja", "<|start_of_role|>user<|end_of_role|>",
     "<|start_of_role|>assistant<|end_of_role|>"),
])
def test_role_markers(name, user, assistant):
    a = analyze(_t(name)).analysis
    assert (a.user_start, a.assistant_start) == (user, assistant)


# ------------------------------------------------------------------------------------------ the report

def test_every_comparison_is_recorded_with_inputs_renders_and_diff():
    rep = analyze(_t("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"))
    ids = [c.id for c in rep.comparisons]
    for expected in ("R1", "R2", "R3", "C1-tools", "C1-reasoning", "T1", "T2", "T3", "A1", "A2", "T5", "T7",
                     "assistant_start", "user_start", "generation_prompt"):
        assert expected in ids
    t1 = rep.comparison("T1")
    assert t1.diff is not None and t1.error is None
    assert t1.diff.prefix + t1.diff.right + t1.diff.suffix == t1.output_b
    assert t1.inputs_b["messages"][1]["tool_calls"][0]["function"]["name"] == "FFF_FIRST_FUN_F"
    assert t1.found["tools.format.mode"] == "TAG_WITH_TAGGED"
    assert rep.comparison("R1").found["reasoning.end"] == "\n</think>\n"
    js = rep.to_json()
    assert js["analysis"]["tools"]["format"]["mode"] == "TAG_WITH_TAGGED"
    assert any(c["id"] == "A2" for c in js["comparisons"])


TOOLS_RAISE = """{%- for m in messages -%}
{%- if m.tool_calls and m.reasoning_content -%}{{ raise_exception('no reasoning with tool calls') }}{%- endif -%}
<|{{ m.role }}|>{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}
{%- if m.content %}{{ m.content }}{% endif %}
{%- for tc in m.tool_calls or [] %}<tool_call>{{ tc.function.name }} {{ tc.function.arguments | tojson }}</tool_call>{% endfor %}<|end|>
{% endfor -%}
{%- if add_generation_prompt %}<|assistant|>{% endif -%}"""


def test_a_rejected_probe_degrades_only_its_part():
    rep = analyze(ChatTemplate(TOOLS_RAISE, "tools-raise"))
    a = rep.analysis
    # R3 (reasoning on a tool-call turn) is rejected: reasoning comes from R1 alone, tools still analysed
    assert rep.comparison("R3").error and rep.comparison("R3").diff is None
    assert any(f.startswith("R3:") and "no reasoning with tool calls" in f for f in rep.probe_failures)
    assert (a.reasoning.mode, a.reasoning.start, a.reasoning.end) == (ReasoningMode.TAG_BASED, "<think>", "</think>")
    assert a.tools.format.mode == ToolFormat.TAG_WITH_JSON
    assert (a.tools.format.per_call_start, a.tools.format.per_call_end) == ("<tool_call>", "</tool_call>")
    assert a.assistant_start == "<|assistant|>"
    assert rep.generation_prompt == "<|assistant|>"
    assert not rep.all_probes_failed


def test_template_failing_every_probe():
    t = ChatTemplate("{{ raise_exception('nope') }}", "always-raises")
    rep = analyze(t)
    assert rep.all_probes_failed and rep.analysis.tools.format.mode == ToolFormat.NONE
    assert rep.generation_prompt_error is not None
    with pytest.raises(AnalysisError, match="always-raises.*every probe.*nope"):
        analyze(t, strict=True)


def test_each_distinct_render_runs_once(monkeypatch):
    session._GLOBAL_CACHE.clear()
    calls = []
    real = llama.render

    def counting(template, context, **kw):
        calls.append(1)
        return real(template, context, **kw)

    monkeypatch.setattr(llama, "render", counting)
    rep = analyze(_t("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"))
    distinct = {repr(c.inputs_a) for c in rep.comparisons} | {repr(c.inputs_b) for c in rep.comparisons}
    assert len(calls) == rep.render_count == len(distinct)
    assert len(calls) < 2 * len(rep.comparisons)
    calls.clear()
    analyze(_t("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja"))  # warm: every render memoized
    assert calls == []


# ------------------------------------------------------------------------------------------ workarounds

def test_workarounds_are_named_listable_rules():
    names = [w.name for w in WORKAROUNDS]
    assert len(names) == 13 and len(set(names)) == 13
    for w in WORKAROUNDS:
        assert w.trigger_text and w.description
    fc = WORKAROUNDS_BY_NAME["functionary-3.1"]
    assert fc.applies('x set has_code_interpreter = tools | selectattr("type", "equalto", "code_interpreter") '
                      '| list | length > 0 y', analyze(ChatTemplate("{{ messages }}")).analysis)
    assert not fc.applies("nothing", analyze(ChatTemplate("{{ messages }}")).analysis)


def test_workaround_fires_and_can_be_switched_off():
    t = _t("meetkai-functionary-medium-v3.1.jinja")
    rep = analyze(t)
    assert "functionary-3.1" in rep.workarounds_applied
    assert rep.analysis.tools.format.per_call_start == "<function="
    assert rep.analysis.preserved_tokens == ["<|eot_id|>", "<|eom_id|>", "<function=", ">", "</function>"]
    off = analyze(t, disabled_workarounds=["functionary-3.1"])
    assert "functionary-3.1" not in off.workarounds_applied
    assert off.analysis.tools.format.per_call_start != "<function="


def test_reapply_renders_nothing_and_applies_overrides(monkeypatch):
    rep = analyze(_t("meetkai-functionary-medium-v3.1.jinja"))

    def boom(*a, **k):
        raise AssertionError("reapply must not render")

    monkeypatch.setattr(llama, "render", boom)
    monkeypatch.setattr(session, "apply_template", boom)
    r2 = reapply(rep, disabled_workarounds=["functionary-3.1"],
                 overrides={"reasoning.start": "<think>", "reasoning.mode": "TAG_BASED",
                            "tools.format.mode": "TAG_WITH_JSON"})
    assert r2.analysis.reasoning.start == "<think>" and r2.analysis.reasoning.mode == ReasoningMode.TAG_BASED
    assert r2.analysis.tools.format.mode == ToolFormat.TAG_WITH_JSON
    assert "<think>" in r2.analysis.preserved_tokens
    assert r2.workarounds_applied == [] and r2.overrides["reasoning.start"] == "<think>"
    assert rep.analysis.reasoning.start == ""  # the original report is unchanged
    assert r2.raw is rep.raw and r2.comparisons is rep.comparisons


@pytest.mark.parametrize("overrides, message", [
    ({"reasoning.nope": "x"}, "unknown override path 'reasoning.nope'"),
    ({"tools.format.mode": "XML"}, "'tools.format.mode'.*not one of"),
    ({"tools.format.tools_array_wrapped": "yes"}, "needs true/false"),
    ({"reasoning": "x"}, "unknown override path 'reasoning'"),
])
def test_bad_overrides_name_the_path(overrides, message):
    rep = analyze(ChatTemplate(TOOLS_RAISE, "tools-raise"))
    with pytest.raises(AnalysisError, match=message):
        reapply(rep, overrides=overrides)


def test_unknown_workaround_name_is_an_error():
    with pytest.raises(AnalysisError, match="unknown workaround name"):
        analyze(ChatTemplate(TOOLS_RAISE, "tools-raise"), disabled_workarounds=["no-such-rule"])


# ------------------------------------------------------------------------------------------ routing, gp

@pytest.mark.parametrize("name, kind, handler", [
    ("Qwen3-Coder.jinja", "specialized", "qwen3-coder"),
    ("GLM-4.6.jinja", "autoparser", None),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "specialized", "qwen3-coder"),
])
def test_detect_route(name, kind, handler):
    r = detect_route(template_source(name))
    assert (r.kind, r.handler) == (kind, handler)


def test_generation_prompt_is_tail_after_common_prefix():
    t = ChatTemplate("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
                     "{% if add_generation_prompt %}<assistant>\n{% endif %}")
    assert analyze(t).generation_prompt == "<assistant>\n"
    ignores = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert analyze(ignores).generation_prompt == ""


def test_pattern_scans_skip_only_where_no_match_can_start():
    """``star(neg(x) + ANY)`` and ``parse_anywhere`` jump over characters ``x`` / the pattern cannot start with
    (patterns.first_chars): same ends and captures as trying every position."""
    import random

    from core.analysis.patterns import ANY, LAST_MARKER, Match, first_chars, neg, seq, star, choice

    def scan_by_hand(x, s, pos):  # star(neg(x) + ANY), one character at a time
        step = neg(x) + ANY
        while pos < len(s):
            e = step.match(s, pos, [])
            if e < 0:
                break
            pos = e
        return pos

    def anywhere_by_hand(p, s):
        for i in range(len(s)):
            caps: list = []
            e = p.match(s, i, caps)
            if e >= 0:
                return i, e, [c for c in caps if c is not None]
        return None

    stops = [MARKER, LAST_MARKER, lit("ab"), tag("t", lit("<") + until(">")), choice("a", "[b"), SPACE + lit("a")]
    pats = [tag("pre", MARKER + SPACE) + lit("ab") + tag("post", SPACE + MARKER), choice(lit("b]"), lit("<a")) + REST,
            star(neg(LAST_MARKER) + ANY) + tag("last", LAST_MARKER), seq(SPACE, lit("a"))]
    assert first_chars(LAST_MARKER) == frozenset("<[") and first_chars(SPACE + lit("a")) is None
    rnd = random.Random(5)
    for _ in range(3000):
        s = "".join(rnd.choice("ab<>[] \n") for _ in range(rnd.randint(0, 16)))
        for x in stops:
            assert star(neg(x) + ANY).match(s, 0, []) == scan_by_hand(x, s, 0), (x, s)
        for p in pats:
            m = parse_anywhere(p, s) if s else None
            ref = anywhere_by_hand(p, s)
            if s:
                assert (m.ok and (m.start, m.end, sorted(m.tags.items()))
                        == (ref[0], ref[1], sorted(dict(ref[2]).items()))) if ref else m == Match(False), (p, s)
