"""Explain's pytest reproducer parses with the explanation's own settings and compares messages as the reference
scoring does; its peg_tester snippet carries every request setting llama.cpp's test builder can set and says
which it cannot (found trying the product as a new user: each generated test below failed the moment it was
written — an ``improved`` explanation's calls get random ids, and overrides or a repair switched on alone were
dropped — so a characterisation test never passed and an expected-message reproducer never turned green)."""

from __future__ import annotations

import json

import pytest

from core.chat.request import ChatRequest
from core.explain.explain import explain
from core.explain.reproducer import peg_tester_snippet, pytest_test
from core.jinja.template import ChatTemplate

from .conftest import ROOT, TEMPLATES

TOUR = ROOT / "assets" / "templates" / "chatml-think-tools.jinja"
REQUEST = json.loads((ROOT / "assets" / "requests" / "req.json").read_text(encoding="utf-8"))
OUTPUT = (ROOT / "assets" / "outputs" / "output.txt").read_text(encoding="utf-8")


def _tmpl() -> ChatTemplate:
    return ChatTemplate(TOUR.read_text(encoding="utf-8"), TOUR.name)


def _run_generated(code: str) -> None:
    ns: dict = {}
    exec(compile(code, "generated_test.py", "exec"), ns)
    next(v for k, v in ns.items() if k.startswith("test_"))()


def test_improved_characterisation_test_passes_although_call_ids_are_random():
    ex = explain(_tmpl(), ChatRequest.from_dict(REQUEST), OUTPUT, fidelity="improved", fixes=False)
    assert [c["id"] for c in ex.message["tool_calls"]] == ["", ""]   # the template writes no ids
    code = pytest_test(ex, source=_tmpl().source)
    assert "compare_messages(case[\"expect\"], out[\"message\"])" in code
    _run_generated(code)


def test_expected_message_reproducer_turns_green_once_the_parse_gives_it():
    # the expected message as a user writes it: no ids, arguments spaced their own way
    ex = explain(_tmpl(), ChatRequest.from_dict(REQUEST), OUTPUT, fidelity="improved", fixes=False)
    expect = json.loads(json.dumps(ex.message))
    for call in expect["tool_calls"]:
        call["function"]["arguments"] = json.dumps(json.loads(call["function"]["arguments"]), indent=1)
    code = pytest_test(ex, source=_tmpl().source, expect=expect)
    ns: dict = {}
    exec(compile(code, "generated_test.py", "exec"), ns)
    fn = next(v for k, v in ns.items() if k.startswith("test_"))
    # the parse already gives the expected message: a regression test, not an xfail that would XPASS at once
    assert not hasattr(fn, "pytestmark") and "Regression test" in (fn.__doc__ or "")
    fn()


def _kept11_row(case: str) -> dict:
    rows = (ROOT / "tests" / "data" / "triage" / "kept11.jsonl").read_text(encoding="utf-8").splitlines()
    return next(r for r in map(json.loads, rows) if r["id"] == case)


def test_an_expected_message_reproducer_fails_before_the_fix_and_passes_after_it():
    """A real failing output (ollama's Qwen3-VL parser test: two calls without the line break the template writes
    after `<tool_call>`) with the message the engine reads: explained as it is, the reproducer is a strict xfail
    whose body fails; explained with the triage's fix applied (its one click: `--repair tag-whitespace`), the
    reproducer is written for a parse that already gives the message — it was still marked xfail(strict), so the
    test of the fixed parse failed at once as XPASS."""
    row = _kept11_row("kept10-ollama-qwen3vl-nonthinking-sequential-indices")
    tmpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    request = ChatRequest.from_dict({k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls",
                                                          "reasoning_format", "add_generation_prompt")})
    before = explain(tmpl, request, row["input"])
    fix = before.triage.fixes[0]
    assert (fix.change, fix.cli) == ({"repairs": ["tag-whitespace"]}, "--repair tag-whitespace")
    after = explain(tmpl, request, row["input"], only_repairs=("tag-whitespace",))
    for ex, marked in ((before, True), (after, False)):
        ns: dict = {}
        exec(compile(pytest_test(ex, source=tmpl.source, expect=row["expect"]), "generated_test.py", "exec"), ns)
        fn = next(v for k, v in ns.items() if k.startswith("test_"))
        assert hasattr(fn, "pytestmark") is marked
        if marked:
            assert fn.pytestmark[0].kwargs["strict"] is True
            with pytest.raises(AssertionError, match="content"):
                fn()
        else:
            fn()


def test_overrides_are_kept_by_the_pytest_reproducer():
    output = "plan\n</think>\n\nThe answer is 4."
    req = ChatRequest.from_dict({"messages": [{"role": "user", "content": "2+2?"}]})
    ex = explain(_tmpl(), req, output, overrides={"reasoning.end": "</plan>"}, fixes=False)
    assert ex.message.get("reasoning_content") == output            # the override moved the answer
    code = pytest_test(ex, source=_tmpl().source)
    assert "settings = json.loads(" in code and "**settings" in code
    _run_generated(code)
    plain = explain(_tmpl(), req, output, fixes=False)
    assert "settings" not in pytest_test(plain, source=_tmpl().source)


def test_a_repair_switched_on_alone_is_kept_by_the_pytest_reproducer():
    output = ('plan\n</think>\n\n<tool_call>\n'
              '{"name": "get_weather", "arguments": "{\\"location\\": \\"Paris\\"}"}\n</tool_call>')
    request = dict(REQUEST, chat_template_kwargs={"enable_thinking": True, "custom_flag": "x"})
    ex = explain(_tmpl(), ChatRequest.from_dict(request), output, only_repairs=("double-encoded-arguments",),
                 fixes=False)
    code = pytest_test(ex, source=_tmpl().source)
    assert '"only_repairs": ["double-encoded-arguments"]' in code and "custom_flag" in code
    _run_generated(code)


def test_peg_tester_snippet_sets_what_the_builder_can_and_names_what_it_cannot():
    request = dict(REQUEST, tool_choice="required", add_generation_prompt=True,
                   json_schema=None, chat_template_kwargs={"thinking": False})
    ex = explain(_tmpl(), ChatRequest.from_dict(request), OUTPUT, fixes=False)
    snippet = peg_tester_snippet(ex)
    assert "        .tool_choice(COMMON_CHAT_TOOL_CHOICE_REQUIRED)" in snippet
    assert ("    // not set here (peg_test_builder has no setter): the request's chat_template_kwargs; this test "
            "renders a different prompt or parser than the explanation did\n") in snippet   # fixed words only
    plain = peg_tester_snippet(explain(_tmpl(), ChatRequest.from_dict(REQUEST), OUTPUT, fixes=False))
    assert "tool_choice" not in plain and "not set here" not in plain
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    no_tools = {"messages": REQUEST["messages"], "json_schema": schema, "add_generation_prompt": False}
    s2 = peg_tester_snippet(explain(_tmpl(), ChatRequest.from_dict(no_tools), "{\"a\": \"b\"}", fixes=False))
    assert "        .add_generation_prompt(false)" in s2 and "        .json_schema(" in s2


def test_cases_line_escapes_bidi_and_invisible_characters_but_keeps_other_text_readable():
    # the Explain page shows this line in a code block and the CLI prints it: a raw U+202E there reversed the
    # rest of the line on screen (found pasting a call to "get\u202eweather" on the Playground)
    from core.explain.reproducer import case_line

    output = ('plan\n</think>\n\n<tool_call>\n'
              '{"name": "get\u202eweather\u200b", "arguments": {"city": "Pa\u2066ris 東京"}}\n</tool_call>')
    ex = explain(_tmpl(), ChatRequest.from_dict(REQUEST), output, fixes=False)
    line = case_line(ex, expect={"role": "assistant", "content": "tag \U000E0041 \u2028"})
    assert not any(ch in line for ch in "\u202e\u200b\u2066\u2028\U000E0041")
    assert "get\\u202eweather\\u200b" in line and "東京" in line and "\\udb40\\udc41" in line
    row = json.loads(line)
    assert row["input"] == output and row["expect"]["content"] == "tag \U000E0041 \u2028"


def test_peg_tester_snippet_thinks_as_the_explanation_did_when_the_request_leaves_it_unset():
    """A request that leaves enable_thinking unset renders with llama.cpp's default, true, but the snippet wrote
    `.enable_thinking(false)`: for vLLM's Gemma 4 test output (kept11) that renders another generation prompt
    (`<|channel>thought\\n<channel|>`), so the pasted test checked another parser than the one explained."""
    row = _kept11_row("kept10-vllm-gemma4-multiple-sequential-canonical-calls")
    assert row["enable_thinking"] is None
    tmpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    base = {k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format")}
    unset = explain(tmpl, ChatRequest.from_dict(base), row["input"], fixes=False)
    off = explain(tmpl, ChatRequest.from_dict(dict(base, enable_thinking=False)), row["input"], fixes=False)
    assert unset.generation_prompt == "<|turn>model\n" != off.generation_prompt
    assert "        .enable_thinking(true)\n" in peg_tester_snippet(unset)
    assert "        .enable_thinking(false)\n" in peg_tester_snippet(off)
    kwarg = explain(tmpl, ChatRequest.from_dict(dict(base, chat_template_kwargs={"enable_thinking": False})),
                    row["input"], fixes=False)
    assert kwarg.generation_prompt == off.generation_prompt
    assert "        .enable_thinking(false)\n" in peg_tester_snippet(kwarg)


def test_peg_tester_snippet_sends_the_requests_messages():
    """The snippet never set the request's messages, so llama.cpp's peg_tester rendered its own one-line user
    message: llama-box's Granite 3.1 report (kept12) sends a system message with the date, which the explained
    prompt holds and the pasted test's prompt did not. Each message is a `common_chat_msg` of the snippet's
    `repro_msgs`, its text only in string literals; content parts, the calls of an earlier assistant turn and a
    tool result's id go in as well."""
    row = json.loads((ROOT / "tests" / "data" / "triage" / "kept12.jsonl").read_text(encoding="utf-8")
                     .splitlines()[2])
    assert row["id"] == "kept12-llama-box-17-granite31-hermes-opener-unclosed-list"
    tmpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    req = {k: row[k] for k in ("messages", "tools", "tool_choice", "reasoning_format")}
    snippet = peg_tester_snippet(explain(tmpl, ChatRequest.from_dict(req), row["input"], fixes=False))
    # (a `?` is written \077: no trigraph)
    assert ("    std::vector<common_chat_msg> repro_msgs(2);\n"
            "    repro_msgs[0].role = \"system\";\n"
            "    repro_msgs[0].content = \"Today is 2024-12-24.\\012You are a helpful assistant.\";\n"
            "    repro_msgs[1].role = \"user\";\n"
            "    repro_msgs[1].content = \"What's the weather like today in ShenZhen\\077\";\n") in snippet
    assert "        .messages(repro_msgs)\n" in snippet and "not set here" not in snippet
    turns = [{"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                          {"type": "media_marker", "text": "<image>"}]},
             {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                 "name": "get_weather", "arguments": "{\"location\": \"ShenZhen\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
             {"role": "user", "content": "And tomorrow?"}]
    ex = explain(tmpl, ChatRequest.from_dict(dict(req, messages=turns)), row["input"], fixes=False)
    snippet = peg_tester_snippet(ex)
    assert ("    repro_msgs[0].content_parts.push_back({ \"text\", \"Weather\\077\" });\n"
            "    repro_msgs[0].content_parts.push_back({ \"media_marker\", \"<image>\" });\n"
            "    repro_msgs[1].role = \"assistant\";\n"
            "    repro_msgs[1].tool_calls.push_back({ \"get_weather\", \"{\\042location\\042: \\042ShenZhen\\042}\", "
            "\"c1\" });\n"
            "    repro_msgs[2].role = \"tool\";\n"
            "    repro_msgs[2].content = \"sunny\";\n"
            "    repro_msgs[2].tool_call_id = \"c1\";\n") in snippet
    assert "not set here" not in snippet


def test_case_ids_differ_when_the_settings_differ():
    """The reproducer of an output as it fails and the one written with the fix applied (`--repair NAME`) had one
    case id, so both tests pasted into one file defined one function name and the first was silently replaced —
    and two cases.jsonl lines carried the same id. The settings (fidelity, a repair alone, overrides, workarounds
    off) are hashed too when any is set; an explanation with none keeps the id of template, request and output."""
    from core.explain.reproducer import case_id

    row = _kept11_row("kept10-ollama-qwen3vl-nonthinking-sequential-indices")
    tmpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    request = ChatRequest.from_dict({k: row[k] for k in ("messages", "tools", "parallel_tool_calls")})
    runs = [explain(tmpl, request, row["input"], fixes=False),
            explain(tmpl, request, row["input"], fixes=False, only_repairs=("tag-whitespace",)),
            explain(tmpl, request, row["input"], fixes=False, fidelity="improved"),
            explain(tmpl, request, row["input"], fixes=False, overrides={"tools.format.per_call_start": "<tool_call>"})]
    ids = [case_id(ex) for ex in runs]
    assert len(set(ids)) == 4, ids
    assert ids[0] == case_id(explain(tmpl, request, row["input"], fixes=False))
    import hashlib
    h = hashlib.sha256()
    # the id of an explanation without settings: template, request, output — and, since the tools' schemas here
    # are not in sorted key order (`type` before `properties`), the request in its own order
    for part in (row["template"], json.dumps(runs[0].request, sort_keys=True, ensure_ascii=False), row["input"],
                 "request: " + json.dumps(dict(sorted(runs[0].request.items())), ensure_ascii=False)):
        h.update(part.encode("utf-8") + b"\0")
    assert ids[0] == "explain-" + h.hexdigest()[:12]
    ns: dict = {}
    for ex in runs[:2]:
        exec(compile(pytest_test(ex, source=tmpl.source, expect=row["expect"]), "generated_test.py", "exec"), ns)
    assert len([k for k in ns if k.startswith("test_")]) == 2


def test_an_expected_call_without_arguments_is_written_with_empty_arguments():
    """`check_expected` lets a call leave out `arguments` (as the message comparison does: none is ""), but the
    peg_tester snippet indexed it and `explain --expect` ended in "internal error in explain: KeyError:
    'arguments'" (exit 3)."""
    from core.explain.reproducer import check_expected

    expect = check_expected({"role": "assistant", "tool_calls": [{"function": {"name": "get_weather"}}]})
    ex = explain(_tmpl(), ChatRequest.from_dict(REQUEST), OUTPUT, fixes=False)
    snippet = peg_tester_snippet(ex, expect=expect)
    assert '        .expect_tool_calls({ { "get_weather", "", {} } })\n' in snippet
    assert "def test_" in pytest_test(ex, source=_tmpl().source, expect=expect)


def test_expected_arguments_nested_too_deeply_are_named():
    """Expected arguments whose JSON text nests 100,000 arrays: comparing them with the parse (to tell a
    reproducer from a regression test) ended explain in a RecursionError, which the CLI reported naming no input.
    The check of the expected message names the field instead."""
    from core.errors import ExpectedMessageError
    from core.explain.reproducer import check_expected

    deep = "[" * 100_000 + "]" * 100_000
    msg = {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": deep}}]}
    with pytest.raises(ExpectedMessageError) as e:
        check_expected(msg, "--expect deep.json")
    assert "tool_calls[0].function.arguments" in str(e.value) and "nested too deeply" in str(e.value), str(e.value)
    ok = {"role": "assistant", "tool_calls": [{"function": {"name": "get_weather", "arguments": "not JSON {"}}]}
    assert check_expected(ok) is ok      # text that is no JSON stays allowed, as the comparison reads it


def _path_lines(snippet: str) -> list[str]:
    return [ln for ln in snippet.splitlines() if "peg_tester(" in ln or "models/templates/" in ln]


def test_peg_tester_snippet_names_llama_cpps_template_file_or_says_where_to_save_the_template():
    """The snippet read the template from `models/templates/<the explained file's name>`, a path that holds
    nothing for a template llama.cpp does not have (vLLM's Gemma 4 example, the tour's template) and another
    file's name for the corpus's copy of llama.cpp's edit (`NAME.llamacpp-edit.jinja` is llama.cpp's `NAME.jinja`).
    On vLLM's Gemma 4 case (kept11, its source cited there) with each template."""
    from core.explain.reproducer import template_path

    row = _kept11_row("kept10-vllm-gemma4-multiple-sequential-canonical-calls")
    base = {k: row[k] for k in ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format")}

    def snippet(name: str) -> str:
        tmpl = ChatTemplate((TEMPLATES / name).read_text(encoding="utf-8"), name)
        return peg_tester_snippet(explain(tmpl, ChatRequest.from_dict(base), row["input"], fixes=False))

    assert _path_lines(snippet(row["template"])) == [   # llama.cpp's own file
        '    auto tst = peg_tester("models/templates/google-gemma-4-31B-it.jinja", detailed_debug);']
    assert _path_lines(snippet("vllm-tool_chat_template_gemma4.jinja")) == [
        "    // the template is not one of llama.cpp's models/templates/ files: save it as "
        "models/templates/repro-vllm-tool_chat_template_gemma4.jinja first",
        '    auto tst = peg_tester("models/templates/repro-vllm-tool_chat_template_gemma4.jinja", detailed_debug);']
    assert template_path("Qwen-QwQ-32B.llamacpp-edit.jinja") == "models/templates/Qwen-QwQ-32B.jinja"
    # the first version beside it is not llama.cpp's file of that name (which holds the edit): saved apart
    assert template_path("Qwen-QwQ-32B.jinja") == "models/templates/repro-Qwen-QwQ-32B.jinja"
    assert template_path("Qwen/Qwen3-0.6B") == "models/templates/repro-Qwen-Qwen3-0.6B.jinja"   # a Hub id
    tour = peg_tester_snippet(explain(_tmpl(), ChatRequest.from_dict(REQUEST), OUTPUT, fixes=False))
    assert _path_lines(tour)[-1] == \
        '    auto tst = peg_tester("models/templates/repro-chatml-think-tools.jinja", detailed_debug);'


def test_the_list_of_llama_cpps_templates_is_the_manifests():
    """core/explain/llama_templates.py is the corpus manifest's rows from llama.cpp at the reproduced version and
    the templates b11549 added."""
    import csv

    from core.explain.llama_templates import LLAMA_CPP_EDIT, LLAMA_CPP_TEMPLATES

    manifest = TEMPLATES / "MANIFEST.tsv"
    if not manifest.is_file():
        pytest.skip("the template corpus is not present")
    with open(manifest, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    ours = {r["file"] for r in rows if r["source_repo"].startswith("ggml-org/llama.cpp")
            and "0.3.16" not in r["source_repo"] and r["source_path"].startswith("models/templates/")}
    b11549 = {p.name for p in (ROOT / "tests" / "data" / "b11549").glob("*.jinja")}   # added upstream since
    assert ours | b11549 == LLAMA_CPP_TEMPLATES and (len(ours), len(b11549)) == (71, 3)
    assert all("models/templates/" + n.replace(LLAMA_CPP_EDIT, "") == r["source_path"]
               for r in rows for n in [r["file"]] if n in ours)


def test_the_expect_reproducer_and_the_characterisation_test_of_one_output_collect_both_in_one_file(tmp_path):
    """The ``--expect`` reproducer and the characterisation test of the same output were both
    ``test_explain_<same hash>``: the expected message was not hashed, so pasted into one file pytest collected one
    of them (the xfail reproducer shadowed). The expected message is hashed now (and the template's text the test
    carries, and the request's key order when it is not sorted): both are collected and run — the reproducer xfails,
    the characterisation test passes — and each test's case line carries its test's id."""
    import subprocess
    import sys

    from core.explain.reproducer import case_id

    row = _kept11_row("kept10-ollama-qwen3vl-nonthinking-sequential-indices")
    tmpl = ChatTemplate((TEMPLATES / row["template"]).read_text(encoding="utf-8"), row["template"])
    request = ChatRequest.from_dict({k: row[k] for k in ("messages", "tools", "parallel_tool_calls")})
    ex = explain(tmpl, request, row["input"], fixes=False)
    assert ex.message != row["expect"]      # the parse fails: with --expect the test is a strict xfail
    plain, expecting = case_id(ex, source=tmpl.source), case_id(ex, row["expect"], tmpl.source)
    assert plain != expecting and case_id(ex) != plain != case_id(ex, row["expect"])
    tools = [{**t, "function": {**t["function"], "parameters": dict(reversed(t["function"]["parameters"].items()))}}
             for t in row["tools"]]     # the same request, its schemas' keys in another order
    other = explain(tmpl, ChatRequest.from_dict({**{k: row[k] for k in ("messages", "parallel_tool_calls")},
                                                 "tools": tools}), row["input"], fixes=False)
    assert case_id(other) != case_id(ex)
    tests = [pytest_test(ex, source=tmpl.source), pytest_test(ex, source=tmpl.source, expect=row["expect"])]
    assert f"def test_{plain.replace('-', '_')}():" in tests[0]
    assert f"def test_{expecting.replace('-', '_')}():" in tests[1]
    (tmp_path / "test_both.py").write_text("\n\n".join(tests), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "test_both.py"], cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)
    assert "1 passed, 1 xfailed" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
