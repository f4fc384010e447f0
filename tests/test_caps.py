"""Capability probes (core.analysis.caps): agreement with llama.cpp on the corpus, the usage-recording
inputs, the llama.cpp engine behaviours the probes reproduce, and message normalisation."""

from __future__ import annotations

import dataclasses
import json

import pytest

from core.analysis.caps import CapsReport, normalize_messages, probe_caps, probe_caps_report
from core.jinja.llama import render_tracked
from core.jinja.usage import TrackedDict, TrackedList, TrackedStr
from core.analysis.result import Caps
from core.jinja.limits import RenderLimits
from core.jinja.template import ChatTemplate

from .conftest import TEMPLATES, template_source

FLAGS = [f.name for f in dataclasses.fields(Caps)]
REQUIRED_AGREEMENT = 0.95


# ------------------------------------------------------------------------------------------------------
# corpus agreement
# ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def caps_comparison(reference_analysis):
    """(number of templates, {flag: [(template, reference, ours), ...] mismatches})."""
    mismatches: dict[str, list[tuple[str, bool, bool]]] = {f: [] for f in FLAGS}
    total = 0
    for name, row in sorted(reference_analysis.items()):
        if "analysis" not in row:
            continue  # llama.cpp itself failed on this template
        ref = row["analysis"]["caps"]
        ours = dataclasses.asdict(probe_caps(ChatTemplate(template_source(name), name)))
        total += 1
        for flag in FLAGS:
            if ours[flag] != ref[flag]:
                mismatches[flag].append((name, ref[flag], ours[flag]))
    return total, mismatches


def test_corpus_is_present(caps_comparison):
    total, _ = caps_comparison
    assert total >= 340, f"expected the reference's ~347 analysed templates under {TEMPLATES}, got {total}"


@pytest.mark.parametrize("flag", FLAGS)
def test_caps_agree_with_llama_cpp(caps_comparison, flag):
    total, mismatches = caps_comparison
    bad = mismatches[flag]
    rate = 1 - len(bad) / total
    print(f"{flag}: {total - len(bad)}/{total} agree ({rate:.1%})")
    listing = "\n".join(f"  {n}: reference={r} ours={o}" for n, r, o in bad)
    assert rate >= REQUIRED_AGREEMENT, f"{flag} agrees on {rate:.1%} < {REQUIRED_AGREEMENT:.0%}:\n{listing}"


def test_known_templates_caps():
    """Spot checks with distinct outcomes (values from reference/analysis.jsonl)."""
    qwen = probe_caps(ChatTemplate(template_source("Qwen3-Coder.jinja")))
    assert qwen.supports_tool_calls and qwen.supports_object_arguments and qwen.supports_system_role
    # for-loop over string content fails in llama.cpp's engine: typed only
    vision = probe_caps(ChatTemplate(template_source("gguf-ollama-llama3.2-vision-90b.jinja")))
    assert vision.supports_typed_content and not vision.supports_string_content
    assert not vision.supports_tool_calls


# ------------------------------------------------------------------------------------------------------
# instrumented values behave as plain values
# ------------------------------------------------------------------------------------------------------

PLAIN_BEHAVIOUR = (
    "{{ m.content }}|{{ m.content is string }}|{{ m is mapping }}|{{ 'content' in m }}|{{ 'x' in m.content }}"
    "|{{ m | tojson }}|{{ m.content | upper }}|{{ m.content + '!' }}|{{ '<' ~ m.content ~ '>' }}"
    "|{{ m.content == 'hix' }}|{{ m.content[0] }}|{{ m.content.startswith('h') }}|{{ parts | length }}"
    "|{{ parts[1] }}|{% for p in parts %}{{ p }},{% endfor %}|{{ m.items() | list | length }}"
    "|{{ parts | join('-') }}|{{ '%s' % m.content }}|{{ m.get('role') }}|{{ m.content * 2 }}"
)


def test_tracked_values_render_exactly_as_plain_values():
    tmpl = ChatTemplate(PLAIN_BEHAVIOUR, "plain")
    ctx = {"m": {"role": "user", "content": "hix"}, "parts": ["a", "b", "c"]}
    plain = tmpl.render(ctx)
    tracked = render_tracked(tmpl, ctx, tracked_keys=("m", "parts"))
    assert tracked.success, tracked.error
    assert tracked.output == plain
    assert plain.startswith("hix|True|True|True|True|{\"role\": \"user\", \"content\": \"hix\"}|HIX|hix!|<hix>")
    assert isinstance(tracked.context["m"], TrackedDict)
    assert isinstance(tracked.context["parts"], TrackedList)
    assert isinstance(tracked.context["m"]["content"], TrackedStr)


def test_tracked_values_are_json_and_equal_to_plain():
    ctx = {"m": {"a": ["x", {"b": "y"}]}}
    r = render_tracked(ChatTemplate("{{ m.a[1].b }}"), ctx, tracked_keys=("m",))
    assert r.output == "y"
    assert json.dumps(r.context["m"]) == json.dumps(ctx["m"])
    assert r.context["m"] == ctx["m"]


# ------------------------------------------------------------------------------------------------------
# usage recording (llama.cpp runtime.cpp statistics)
# ------------------------------------------------------------------------------------------------------


def _usage(src: str, messages, **extra):
    r = render_tracked(ChatTemplate(src), {"messages": messages, **extra})
    return r, r.context["messages"]


def test_member_access_marks_value_used():
    r, msgs = _usage("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}",
                     [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert r.output == "U"
    assert not r.recorder.used(msgs[0]["content"])
    assert r.recorder.used(msgs[1]["content"])
    assert r.recorder.has_op(msgs, "array_access")


def test_tests_and_filters_record_their_name():
    r, msgs = _usage("{% if messages[0].content is string %}{{ messages[0].content | trim }}{% endif %}",
                     [{"role": "user", "content": " x "}])
    assert r.recorder.has_op(msgs[0]["content"], "test_is_string") and r.recorder.has_op(msgs[0]["content"], "trim")
    assert r.recorder.has_op(msgs, "array_access")  # messages[0]


def test_tojson_marks_all_descendants_but_printing_does_not():
    msgs = [{"role": "user", "content": "c", "extra": {"deep": "d"}}]
    r, m = _usage("{{ messages[0] | tojson }}", msgs)
    assert r.recorder.used(m[0]["extra"]["deep"])
    r, m = _usage("{{ messages[0] }}", msgs)
    assert not r.recorder.used(m[0]["extra"]["deep"])


def test_tojson_through_a_template_built_dict_marks_the_input():
    r, m = _usage("{{ dict(x=messages[0].extra) | tojson }}", [{"role": "user", "extra": {"deep": "d"}}])
    assert r.recorder.used(m[0]["extra"]["deep"])


def test_get_method_does_not_mark_the_result():
    r, m = _usage("{% if messages[0].get('tool_calls') %}yes{% endif %}",
                  [{"role": "assistant", "tool_calls": [{"id": "1"}]}])
    assert r.output == "yes"
    assert not r.recorder.used(m[0]["tool_calls"])
    assert r.recorder.has_op(m[0], "get")


def test_loop_variable_printed_marks_value():
    r, m = _usage("{% for k, v in messages[0].args.items() %}{{ k }}={{ v }}{% endfor %}",
                  [{"args": {"arg": "value"}}])
    assert r.output == "arg=value"
    assert r.recorder.used(m[0]["args"]["arg"])


def test_selectattr_over_content_counts_as_list_use():
    r, m = _usage("{{ messages[0].content | selectattr('type', 'equalto', 'text') | list | length }}",
                  [{"role": "user", "content": "abc"}])
    assert r.recorder.has_op(m[0]["content"], "selectattr")


# ------------------------------------------------------------------------------------------------------
# llama.cpp engine behaviours the probes reproduce
# ------------------------------------------------------------------------------------------------------


def test_for_over_a_string_fails_after_recording_array_access():
    r, m = _usage("{% for c in messages[0].content %}{{ c }}{% endfor %}", [{"content": "abc"}])
    assert not r.success and "Expected iterable" in r.error
    assert r.recorder.has_op(m[0]["content"], "array_access")


def test_string_plus_none_concatenates():
    r, _ = _usage("{{ 'a' + none + 'b' + undefined_name }}", [])
    assert r.success and r.output == "ab"


def test_list_append_is_allowed_in_probes_only():
    src = "{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('x') %}{{ ns.ids | length }}"
    r, _ = _usage(src, [])
    assert r.success and r.output == "1"
    with pytest.raises(Exception):
        ChatTemplate(src).render({"messages": []})


def test_probe_renders_keep_the_sandbox_and_bound_append(tmp_path):
    canary = tmp_path / "canary"
    for payload in ["{{ ''.__class__.__mro__[1].__subclasses__() }}",
                    "{{ messages[0].content.__class__ }}",
                    "{{ messages.__class__.__base__ }}",
                    "{{ cycler.__init__.__globals__ }}",
                    "{{ lipsum.__globals__['os'].system('touch " + str(canary) + "') }}"]:
        r, _ = _usage(payload, [{"content": "x"}])
        assert not r.success, payload
    assert not canary.exists()
    # a generous render time limit, so the append bound (not the clock of a loaded machine) is what stops it
    r = render_tracked(ChatTemplate("{% set l = [1] %}{% for x in l %}{% set _ = l.append(1) %}{% endfor %}",
                                    limits=RenderLimits(timeout_s=120)), {"messages": []})
    assert not r.success and "append" in r.error and "limit: list size" in r.error


def test_two_argument_selectattr_and_filter_mapping_fail_as_in_llama_cpp():
    r, _ = _usage("{{ messages | selectattr('tool_calls', 'undefined') | list }}", [{"role": "user"}])
    assert not r.success and "unknown test" in r.error
    r, _ = _usage("{{ messages | map(attribute='role') | map('upper') | join }}", [{"role": "user"}])
    assert not r.success and "filter-mapping" in r.error
    r, _ = _usage("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='role') | join }}",
                  [{"role": "user"}])
    assert r.success and r.output == "user"


def test_map_result_is_a_list_so_tojson_works():
    r, _ = _usage("{{ messages | map(attribute='role') | tojson }}", [{"role": "user"}])
    assert r.success and r.output == '["user"]'


def test_macro_arguments_bound_like_llama_cpp():
    src = ("{% macro m(a, b=none, flag=false) %}{{ b is defined }}/{{ flag }}{% endmacro %}"
           "{{ m(1, flag=true) }}")
    r, _ = _usage(src, [])
    assert r.output == "False/False"
    assert ChatTemplate(src).render({}) == "True/True"


def test_call_block_caller_is_not_counted_as_an_argument():
    src = "{% macro m(a=1) %}{{ a }}{{ caller() }}{% endmacro %}{% call m() %}x{% endcall %}"
    r, _ = _usage(src, [])
    assert r.success and r.output == "1x"


def test_builtins_llama_cpp_lacks_for_a_type_fail():
    r, _ = _usage("{{ messages[0].content | first }}", [{"content": "abc"}])
    assert not r.success and "filter 'first'" in r.error
    r, _ = _usage("{{ messages[0].content.find('b') }}", [{"content": "abc"}])  # str.find: no llama builtin
    assert not r.success
    r, _ = _usage("{{ messages[0].copy }}|{{ messages[0].content.upper() }}|{{ 5 | upper }}",
                  [{"content": "abc", "copy": "kept"}])
    assert r.success and r.output == "kept|ABC|5"


def test_undefined_members_chain_and_non_strings_print_like_llama_cpp():
    r, _ = _usage("[{{ messages[3].content.text }}][{{ messages[0] }}][{{ none }}][{{ ['a', ['b', 1]] }}]",
                  [{"content": "abc"}])
    assert r.success and r.output == "[][][][ab1]"


def test_in_with_undefined_left_side_fails():
    r, _ = _usage("{{ nothing in messages }}", [])
    assert not r.success
    r, _ = _usage("{{ 'x' in nothing }}|{{ 'x' not in nothing }}", [])
    assert r.success and r.output == "False|True"


# ------------------------------------------------------------------------------------------------------
# probe logic on small templates
# ------------------------------------------------------------------------------------------------------


def test_template_ignoring_system_and_tools():
    caps = probe_caps(ChatTemplate(
        "{% for m in messages %}{% if m.role == 'user' %}[U]{{ m.content }}{% endif %}{% endfor %}"))
    assert caps.supports_system_role is False
    assert caps.supports_tools is False and caps.supports_tool_calls is False
    assert caps.supports_string_content is True and caps.supports_typed_content is False


def test_chatml_with_tools_and_object_arguments():
    src = (
        "{% if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "{% if m.tool_calls %}{% for tc in m.tool_calls %}<tool_call>{{ tc.function.name }}"
        "{{ tc.function.arguments | tojson }}</tool_call>{% endfor %}{% endif %}"
        "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
        "<|im_end|>\n{% endfor %}{% if reasoning_effort %}effort={{ reasoning_effort }}{% endif %}")
    report = probe_caps_report(ChatTemplate(src))
    assert isinstance(report, CapsReport)
    c = report.caps
    assert (c.supports_tools, c.supports_tool_calls, c.supports_object_arguments,
            c.supports_parallel_tool_calls, c.supports_system_role, c.supports_preserve_reasoning,
            c.supports_reasoning_effort) == (True, True, True, True, True, True, True)
    ids = [p.id for p in report.probes]
    assert ids == ["typed_content", "system_role", "tool_call_object_args", "parallel_tool_calls",
                   "preserve_reasoning", "reasoning_effort"]
    assert all(p.success and p.error is None for p in report.probes)


def test_typed_only_template():
    src = ("{% for m in messages %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}"
           "{% endfor %}{% endfor %}")
    caps = probe_caps(ChatTemplate(src))
    assert caps.supports_typed_content is True
    assert caps.supports_string_content is False


def test_template_that_checks_for_string_gets_second_probe():
    src = ("{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}"
           "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}")
    report = probe_caps_report(ChatTemplate(src))
    assert report.caps.supports_string_content and report.caps.supports_typed_content
    assert report.probes[1].id == "typed_content_list"


def test_template_raising_on_every_probe():
    caps = probe_caps(ChatTemplate("{{ raise_exception('no') }}"))
    assert (caps.supports_string_content, caps.supports_tools, caps.supports_tool_calls,
            caps.supports_parallel_tool_calls) == (False, False, False, False)


def test_time_limit_stops_remaining_probes():
    report = probe_caps_report(ChatTemplate(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "slow"))
    assert not report.probes[0].success
    assert all(p.error and p.error.startswith("skipped") for p in report.probes[1:])


# ------------------------------------------------------------------------------------------------------
# targeted snippets with llama.cpp's own answers
# ------------------------------------------------------------------------------------------------------

# Expected caps were produced by llama.cpp's own engine (common/jinja, built from the vendored source that
# made the reference) for each snippet; flags as bits, in sorted flag order (object_arguments,
# parallel_tool_calls, preserve_reasoning, reasoning_effort, string_content, system_role, tool_calls, tools,
# typed_content).
LLAMA_CPP_SNIPPETS = [
    ('{{ messages[0].content }}',
     '000011000'),
    ('{% for m in messages %}{{ m.content | tojson }}{% endfor %}',
     '000011000'),
    ('{% for m in messages %}{% if m.tool_calls %}{{ m.tool_calls | length }}{% endif %}{% endfor %}{% for t in tools %}{{ t.function.name }}{% endfor %}',
     '000010110'),
    ("{% for m in messages %}{% set tc = m.get('tool_calls') %}{% if tc %}x{% endif %}{% endfor %}{{ tools | tojson }}",
     '000010110'),
    ("{{ tools | map(attribute='function') | map(attribute='name') | join(',') }}{% for m in messages %}{{ m.content }}{% endfor %}",
     '000011000'),
    ('{% for m in messages %}{{ m | string }}{% endfor %}',
     '111011100'),
    ('{{ messages | tojson }}{{ tools | tojson }}',
     '111011110'),
    ('{% for m in messages %}{{ m }}{% endfor %}{{ tools }}',
     '000010000'),
    ('{% for m in messages %}{% for tc in m.tool_calls or [] %}{{ tc.function.arguments.arg }}{% endfor %}{{ m.content }}{% endfor %}',
     '110011100'),
    ('{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}',
     '000011001'),
    ("{% for m in messages %}{{ m['content'][0] }}{% endfor %}",
     '000001001'),
    ('{% for m in messages %}{% for k, v in m.items() %}{{ k }}{% endfor %}{% endfor %}',
     '000010000'),
    ('{% for m in messages %}{% for k, v in m.items() %}{{ v }}{% endfor %}{% endfor %}',
     '001011100'),
    ('{% set e = reasoning_effort %}{% if e %}x{% endif %}{{ messages[0].content }}',
     '000111000'),
    ("{% if reasoning_strength == 'low' %}L{% endif %}{% for m in messages %}{% if m.role != 'system' %}{{ m.content }}{% endif %}{% endfor %}",
     '000110000'),
    ("{% for m in messages %}{% if m.role == 'assistant' and m.tool_calls %}{% for tc in m.tool_calls %}{% set f = tc.function %}{{ f.name }}({{ f.arguments }}){% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
     '010011100'),
    ('{% for m in messages %}{% if m.tool_calls is defined %}{% for tc in m.tool_calls %}{% if loop.first %}{{ tc.function.name }}{% endif %}{% endfor %}{% endif %}{{ m.content }}{% endfor %}',
     '000011100'),
    ('{% for m in messages %}{% set c = m.content %}{% if c %}{{ c }}{% endif %}{% endfor %}{% for t in tools %}{{ t.function.name }}{% endfor %}',
     '000011010'),
    ("{% for m in messages %}{{ m.content | default('') }}{% if m.tool_calls %}{% for tc in m.tool_calls %}{% for k, v in tc.function.arguments | items %}{{ k }}={{ v }}{% endfor %}{% endfor %}{% endif %}{% endfor %}",
     '110011100'),
    ('{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}{% endfor %}{% endif %}{% endfor %}',
     '110010100'),
    ("{% for m in messages %}{% for p in m.content | selectattr('type', 'equalto', 'text') %}{{ p.text }}{% endfor %}{% endfor %}",
     '000001001'),
    ('{% for m in messages %}{% if m.content is not string %}{% for p in m.content %}{{ p.text }}{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}',
     '000011001'),
    ('{% for m in messages %}{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}{% endfor %}',
     '001011000'),
    ("{% for m in messages %}{% if m.content.startswith('User') %}U{% endif %}{% endfor %}",
     '000011000'),
    ('{% for m in messages[1:] %}{{ m.content }}{% endfor %}',
     '000010000'),
    ('{% for m in messages | reverse %}{{ m.content }}{% endfor %}',
     '000011000'),
    ("{% set sys = messages | selectattr('role', 'equalto', 'system') | list %}{% if sys %}{{ sys[0].content }}{% endif %}",
     '000011000'),
    ('{% for m in messages %}{{ m.tool_calls | tojson if m.tool_calls else m.content }}{% endfor %}',
     '110011100'),
    ('{% for m in messages %}{% for tc in m.tool_calls | default([]) %}{{ tc.id }}{% endfor %}{% endfor %}',
     '000010100'),
    ('{% macro r(x) %}{{ x }}{% endmacro %}{% for m in messages %}{{ r(m.content) }}{% if m.tool_calls %}{{ r(m.tool_calls[1].function.name) }}{% endif %}{% endfor %}',
     '010011100'),
    ("{% for m in messages %}{{ m.content | trim }}{% endfor %}{{ messages[1].tool_calls[0].function.arguments['arg'] }}",
     '100011100'),
    ("{% for m in messages %}{{ m.content ~ '' }}{% endfor %}{{ messages | length }}",
     '000011000'),
    ("{% if tools %}{% for t in tools %}{{ t['function']['name'] }}{% endfor %}{% endif %}{% for m in messages %}{% if m.role == 'assistant' %}{{ m.tool_calls | map(attribute='function') | map(attribute='name') | join }}{% endif %}{% endfor %}",
     '000010110'),
    ('{% for m in messages %}{{ m.content if m.content is string else m.content[0].text }}{% endfor %}',
     '000011001'),
    ("{% for m in messages %}{{ m.get('content') }}{% endfor %}",
     '000010000'),
    ("{% for m in messages %}{% if m.get('content') %}x{% endif %}{% endfor %}{{ messages[-1].content }}",
     '000010000'),
    ('{% for m in messages %}{{ m }}{{ [m.reasoning_content] }}{% endfor %}',
     '001010000'),
    ("{% for m in messages %}{{ none }}{{ m.content }}{% if m.reasoning_content %}{{ m.reasoning_content ~ '' }}{% endif %}{% endfor %}",
     '001011000'),
    ("{% for m in messages %}{{ m.content.split(' ')[0] }}{% endfor %}",
     '000011000'),
    ('{% for m in messages %}{% for tc in m.tool_calls %}{{ tc.function.name }}{% endfor %}{% endfor %}',
     '010010100'),
    ('{% for m in messages %}{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments | tojson }}{% endif %}{% endfor %}{% for t in tools %}{{ t.function | tojson }}{% endfor %}',
     '100010110'),
    ("{% set ns = namespace(c=[]) %}{% for m in messages %}{% set ns.c = ns.c + [m.content] %}{% endfor %}{{ ns.c | join('\\n') }}",
     '000011000'),
    ("{% for m in messages %}{% if m.role == 'system' %}{% set s = m.content %}{% endif %}{% endfor %}{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}",
     '000011000'),
    ("{% for m in messages %}{% if m.role == 'system' %}{% set sys = m.content %}{% endif %}{% endfor %}{{ sys }}",
     '000011000'),
    ('{% for m in messages %}{{ m.content[:5] }}{% endfor %}',
     '000011000'),
    ('{% for m in messages %}{{ m.content | first }}{% endfor %}',
     '000001000'),
    ('{% for m in messages %}{{ m.content | list | length }}{% endfor %}',
     '000001000'),
    ('{% for m in messages %}{{ m.content | length }}{% endfor %}',
     '000011000'),
    ('{% for m in messages %}{% if m.content is iterable %}{{ m.content }}{% endif %}{% endfor %}',
     '000011000'),
    ('{% for m in messages %}{% if m.content is sequence and m.content is not string %}{% for c in m.content %}{{ c.text }}{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}',
     '000011001'),
    ('{% for m in messages %}{% if m.content is mapping %}M{% else %}{{ m.content }}{% endif %}{% endfor %}',
     '000011000'),
    ('{% for m in messages %}{% for tc in m.tool_calls %}{% if tc.function.arguments is mapping %}{% for k in tc.function.arguments %}{{ k }}{% endfor %}{% else %}{{ tc.function.arguments }}{% endif %}{% endfor %}{% endfor %}',
     '010010100'),
    ('{% for m in messages %}{% for tc in m.tool_calls %}{% if tc.function.arguments is mapping %}{% for k in tc.function.arguments %}{{ k }}={{ tc.function.arguments[k] }}{% endfor %}{% endif %}{% endfor %}{% endfor %}',
     '110010100'),
    ('{% for m in messages %}{% for tc in m.tool_calls %}{% for k, v in tc.function.arguments.items() %}{{ k }}{% endfor %}{% endfor %}{% endfor %}',
     '000010000'),
    ('{% for m in messages %}{% for tc in m.tool_calls %}{{ tc.function.arguments.values() | list | tojson }}{% endfor %}{% endfor %}',
     '110010100'),
    ("{{ messages | map(attribute='content') | join(' ') }}",
     '000010000'),
    ("{% for m in messages %}{{ m['content'] | replace('User', 'U') }}{% endfor %}",
     '000011000'),
    ("{{ (messages | last).content }}{% if messages[0].role == 'system' %}{% endif %}",
     '000010000'),
    ("{% for m in messages %}{% if loop.index0 == 0 and m.role == 'system' %}{% continue %}{% endif %}{{ m.content }}{% endfor %}",
     '000010000'),
    ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}{% for m in loop_messages %}{{ m.content }}{% endfor %}",
     '000010000'),
    ('{% for m in messages %}{{ m.content | string }}{{ m.tool_calls | string }}{% endfor %}',
     '110011100'),
    ('{% for tool in tools %}{{ tool }}{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}',
     '000011000'),
    ('{% for tool in tools %}{{ tool.function.name }}{% endfor %}{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}{{ loop.length }}{% endfor %}{% endif %}{% endfor %}',
     '000010110'),
    ("{% for m in messages %}{{ '%s' | format(m.content) }}{% endfor %}",
     '000011000'),
]


@pytest.mark.parametrize("src, expected", LLAMA_CPP_SNIPPETS, ids=[f"s{i:02d}" for i in range(len(LLAMA_CPP_SNIPPETS))])
def test_snippet_caps_match_llama_cpp(src, expected):
    caps = dataclasses.asdict(probe_caps(ChatTemplate(src)))
    got = "".join(str(int(caps[k])) for k in sorted(caps))
    diff = [k for k, a, b in zip(sorted(caps), expected, got) if a != b]
    assert got == expected, f"flags differing from llama.cpp: {diff}"


# ------------------------------------------------------------------------------------------------------
# normalize_messages (analysis notes §2)
# ------------------------------------------------------------------------------------------------------

STRING_ONLY = Caps(supports_string_content=True, supports_typed_content=False)
TYPED_ONLY = Caps(supports_string_content=False, supports_typed_content=True)
BOTH = Caps(supports_string_content=True, supports_typed_content=True)


def test_normalize_string_only_joins_text_parts():
    msgs = [{"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "b"},
        {"type": "media_marker", "text": "<M>"}, {"type": "text", "text": "c"}]}]
    out = normalize_messages(msgs, STRING_ONLY)
    assert out[0]["content"] == "a\nb<M>c"
    assert isinstance(msgs[0]["content"], list)  # input untouched


def test_normalize_string_only_first_empty_text_adds_no_newline():
    out = normalize_messages([{"role": "user", "content": [{"type": "text", "text": ""},
                                                            {"type": "text", "text": "x"}]}], STRING_ONLY)
    assert out[0]["content"] == "x"


def test_normalize_typed_only_wraps_strings():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
            {"role": "user", "content": ""}]
    out = normalize_messages(msgs, TYPED_ONLY)
    assert out[0]["content"] == [{"type": "text", "text": "hi"}]
    assert out[1]["content"] is None
    assert out[2]["content"] == [{"type": "text", "text": ""}]
    assert msgs[0]["content"] == "hi"


def test_normalize_both_is_unchanged():
    msgs = [{"role": "user", "content": "hi"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}]
    assert normalize_messages(msgs, BOTH) == msgs
