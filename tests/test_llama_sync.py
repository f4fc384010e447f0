"""scripts/llama_sync.py: the parser-area diff of two llama.cpp trees (small trees written here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("llama_sync", Path(__file__).parent.parent / "scripts" / "llama_sync.py")
llama_sync = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("llama_sync", llama_sync)    # dataclasses look their module up by name
_SPEC.loader.exec_module(llama_sync)   # type: ignore[union-attr]

OLD_CHAT = '''
namespace autoparser {
static int helper(int a) { return a; }   // "{" in a comment
}
common_chat_params init_x(const tmpl & t) {
    if (src.find("<old|marker>") != std::string::npos) { return 1; }
    p.rule("tool-" + name, body);
    const char * s = "}";
    return data;
}
'''
NEW_CHAT = OLD_CHAT.replace("return a;", "return a + 1;").replace('"<old|marker>"', '"<new|marker>"').replace(
    'p.rule("tool-" + name, body)', 'p.rule("tool-" + std::to_string(i), body)') + '''
static void added_fn() {
}
'''


def _tree(root: Path, chat: str, extra: dict[str, str]) -> Path:
    (root / "common" / "parsers").mkdir(parents=True)
    (root / "common" / "chat.cpp").write_text(chat)
    (root / "common" / "log.cpp").write_text("outside the parser area\n")
    for rel, text in extra.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_diff_names_files_functions_needles_and_rules(tmp_path):
    old = _tree(tmp_path / "old" / "vendor" / "llama.cpp", OLD_CHAT,
                {"common/parsers/a.cpp": "int a() { return 1; }\n"})
    new = _tree(tmp_path / "new", NEW_CHAT, {"models/templates/T.jinja": "{{ x }}", "common/log.cpp": "changed"})
    d = llama_sync.diff_trees(tmp_path / "old", new)       # the old tree is found under vendor/llama.cpp
    by = {f.path: f for f in d.files}
    assert by["common/parsers/a.cpp"].status == "removed" and by["models/templates/T.jinja"].status == "added"
    assert by["common/chat.cpp"].functions == ["+added_fn", "helper", "init_x"]   # namespace blocks see through
    assert "common/log.cpp" not in by
    assert d.needles_added == ["<new|marker>"] and d.needles_removed == ["<old|marker>"]
    assert d.rules_added == ['"tool-" + std::to_string(i)'] and d.rules_removed == ['"tool-" + name']


def test_not_a_llama_tree_is_a_one_line_error(tmp_path, capsys):
    assert llama_sync.main(["diff", str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no llama.cpp tree" in err


def test_braces_in_strings_and_comments_do_not_count():
    funcs = llama_sync.functions('int f() { const char * s = "}"; /* } */ return 0; }\nint g() { return 1; }\n')
    assert set(funcs) == {"f", "g"} and funcs["g"] == "int g() { return 1; }"


FAKE_ORACLE = '''#!{python}
# answers oracle requests from ../shared/reference itself (one case tampered with when TAMPER names it)
import json, os, sys
ref = sys.argv[1]
cases = {{}}
for line in open(os.path.join(ref, "cases.jsonl"), encoding="utf-8"):
    row = json.loads(line)
    cases[row["id"]] = row
analyses = {{}}
for line in open(os.path.join(ref, "analysis.jsonl"), encoding="utf-8"):
    row = json.loads(line)
    analyses[row["template"]] = row
upstream = {{}}
for line in open(sys.argv[2], encoding="utf-8"):
    row = json.loads(line)
    upstream[row["id"]] = row
for line in sys.stdin:
    req = json.loads(line)
    if req["op"] == "parse":
        row = cases.get(req["id"]) or upstream[req["id"]]
        msg = dict(row["expect"])
        if req["id"] == os.environ.get("TAMPER"):
            msg["content"] = "changed"
        out = {{"id": req["id"], "msgs": [msg for _ in req["inputs"]]}}
    else:
        row = analyses[req["id"]]
        if "reference_error" in row:
            out = {{"id": req["id"], "error": row["reference_error"]}}
        else:
            out = {{"id": req["id"], "analysis": row["analysis"], "specialized": row["route"] == "specialized"}}
            if "apply_error" in row:
                out["apply_tools_error"] = row["apply_error"]
            else:
                out["apply_tools"] = dict(row["apply"])
    print(json.dumps(out), flush=True)
'''


def _fake_oracle(tmp_path: Path, upstream: Path) -> Path:
    from .conftest import REFERENCE

    script = tmp_path / "oracle"
    script.write_text(FAKE_ORACLE.format(python=sys.executable))
    script.chmod(0o755)
    wrapper = tmp_path / "oracle.sh"
    wrapper.write_text(f'#!/bin/sh\nexec "{script}" "{REFERENCE}" "{upstream}"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_oracle_diff_of_the_reference_itself_lists_nothing(tmp_path, monkeypatch):
    from .conftest import SHARED

    upstream = Path(__file__).parent / "data" / "b11549" / "cases.jsonl"
    report = llama_sync.oracle_diff(_fake_oracle(tmp_path, upstream), SHARED, [upstream])
    assert (report.cases, report.cases_same, report.analyses, report.analyses_same) == (354, 354, 351, 351)
    assert (report.upstream, report.upstream_pass) == (34, 34)
    assert report.differences == [] and report.grammar_renamed_only == 0


def test_oracle_diff_names_a_changed_answer(tmp_path, monkeypatch):
    from .conftest import SHARED

    monkeypatch.setenv("TAMPER", "ref-0000")
    upstream = Path(__file__).parent / "data" / "b11549" / "cases.jsonl"
    report = llama_sync.oracle_diff(_fake_oracle(tmp_path, upstream), SHARED, [upstream])
    assert report.cases_same == 353
    assert [(d.kind, d.id) for d in report.differences] == [("case", "ref-0000")]
    assert report.differences[0].what == "content: expected \"Hello, world!\\nWhat's up?\", got 'changed'"


def test_parse_request_takes_llama_servers_continuation_values(tmp_path):
    case = {"id": "x", "template": "T.jinja", "messages": [], "tools": None, "continue_final_message": "reasoning",
            "reasoning_format": "auto", "json_schema": None}
    req = llama_sync.parse_request(case, [tmp_path], ["out"], False, now=1796003851)
    assert req["continue_final_message"] == "reasoning_content" and "tools" not in req and req["now"] == 1796003851
    assert llama_sync.parse_request(dict(case, continue_final_message="auto"), [tmp_path], [], False)[
        "continue_final_message"] is True
    assert "continue_final_message" not in llama_sync.parse_request(dict(case, continue_final_message=None),
                                                                     [tmp_path], [], False)


def test_a_retraction_is_named():
    before = {"content": "Hello", "tool_calls": [{"function": {"name": "f", "arguments": '{"a": 1'}}]}
    assert llama_sync._retraction(before, dict(before, content="Hello, world")) is None
    assert llama_sync._retraction(before, dict(before, content="Help")) == "content 'Hello' -> 'Help'"
    assert llama_sync._retraction(before, dict(before, tool_calls=[])) == "tool_calls 1 -> 0"


def test_token_id_check_names_a_missing_tokenizer(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("token_id_check",
                                                  Path(__file__).parent.parent / "scripts" / "token_id_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)   # type: ignore[union-attr]
    assert mod.main([str(tmp_path / "nope.gguf"), str(tmp_path / "T.jinja")]) == 2
    err = capsys.readouterr().err
    assert err == f"token_id_check: {tmp_path / 'nope.gguf'}: no such tokenizer file or directory\n"


def test_identical_trees_say_so(tmp_path, capsys):
    tree = _tree(tmp_path / "t", OLD_CHAT, {})
    assert llama_sync.main(["diff", str(tree), str(tree)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "no change in the parser area"


def test_oracle_diff_exits_1_when_an_answer_differs(tmp_path, monkeypatch, capsys):
    # a maintainer's script (or CI) needs the exit status to see a behaviour change
    from .conftest import SHARED

    monkeypatch.setenv("TAMPER", "ref-0000")
    upstream = Path(__file__).parent / "data" / "b11549" / "cases.jsonl"
    oracle = _fake_oracle(tmp_path, upstream)
    assert llama_sync.main(["oracle-diff", str(oracle), "--shared", str(SHARED), "--upstream", str(upstream)]) == 1
    assert "ref-0000" in capsys.readouterr().out
