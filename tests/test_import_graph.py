"""The shape of ``core/``'s imports, read from the source with ``ast`` (every import statement, those inside
functions too): no library module imports a command-line module or Streamlit, and there is no import cycle."""

from __future__ import annotations

import ast
import pathlib

from .conftest import ROOT

CORE = ROOT / "core"
# the command line: python -m core and each package's commands
CLI_NAMES = {"cli", "cli_commands", "repairs_cli", "roundtrip_cli", "__main__"}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted(CORE.rglob("*.py"))}


def _imported(name: str, path: pathlib.Path, node: ast.AST, known: set[str]) -> list[str]:
    """The modules of ``known`` (or other top-level names, e.g. ``streamlit``) an import statement names."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        assert isinstance(node, ast.ImportFrom)
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            package = package[:len(package) - node.level + 1]
            base = ".".join(package + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` the module mod
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for t in targets:
        while t not in known and "." in t:
            t = t.rsplit(".", 1)[0]
        out.append(t)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules (of ``core``, or other top-level packages) its source imports anywhere."""
    mods = _modules()
    known = set(mods)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = {t for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                       for t in _imported(name, path, node, known) if t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module among ``core``'s (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _is_cli(module: str) -> bool:
    return module.split(".")[-1] in CLI_NAMES


def test_the_graph_sees_core():
    graph = import_graph()
    assert len(graph) > 100 and "core.cli" in graph and "core.inputs" in graph
    assert "core.chat.conformance" in graph["core.chat.cli_commands"]   # from .conformance import …
    assert "core.inputs" in graph["core.explain.model"]                 # from ..inputs import visible
    assert "core.chat.pipeline" in graph["core.chat.roundtrip"]          # an import inside a function counts


def test_no_library_module_imports_a_command_line_module():
    graph = import_graph()
    offenders = {m: sorted(t for t in ts if _is_cli(t)) for m, ts in graph.items() if not _is_cli(m)}
    assert {m: ts for m, ts in offenders.items() if ts} == {}


def test_no_core_module_imports_streamlit():
    graph = import_graph()
    assert sorted(m for m, ts in graph.items() if "streamlit" in ts) == []


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
