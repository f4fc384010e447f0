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
