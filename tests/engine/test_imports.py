"""Arrows that point down (issue 75): the engine's import graph has no circle but a pair of
modules of one package where one side imports the other for its types only. Every import is
read — at the top of a module, inside a function (a lazy import is still a dependency) and
under `TYPE_CHECKING` (a type-only import too, unless it stays inside its package)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    found = {}
    for path in (ROOT / "engine").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path, known: set[str]) -> tuple[set[str], set[str]]:
    """The engine modules `path` imports at run time, and those it imports for types only."""
    runtime: set[str] = set()
    typed: set[str] = set()

    def add(target: set[str], module: str, names: list[str]) -> None:
        for name in [module, *(f"{module}.{n}" for n in names)]:
            if name in known and name != "engine":
                target.add(name)

    def walk(node: ast.AST, types_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for inner in child.body:
                    visit(inner, True)
                for inner in child.orelse:
                    visit(inner, types_only)
            else:
                visit(child, types_only)

    def visit(child: ast.AST, types_only: bool) -> None:
        target = typed if types_only else runtime
        if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
            add(target, child.module, [a.name for a in child.names])
        elif isinstance(child, ast.Import):
            for alias in child.names:
                add(target, alias.name, [])
        walk(child, types_only)

    walk(ast.parse(path.read_text(encoding="utf-8")), False)
    return runtime, typed - runtime


def _graph() -> dict[str, set[str]]:
    """Each module's arrows: its run-time imports, and its type-only ones that leave its
    package."""
    modules = _modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        runtime, typed = _imports(path, known)
        package = name.rsplit(".", 1)[0]
        graph[name] = runtime | {t for t in typed if t.rsplit(".", 1)[0] != package}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected parts of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                strong(other)
                low[node] = min(low[node], low[other])
            elif other in on:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                other = stack.pop()
                on.discard(other)
                part.append(other)
                if other == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return found


def test_the_engine_imports_in_no_circle() -> None:
    assert _circles(_graph()) == []


def test_the_evaluation_floor_never_reaches_up_for_the_workspace() -> None:
    graph = _graph()
    up = sorted(f"{name} → {other}" for name, others in graph.items()
                if name.startswith("engine.evals") for other in others
                if other.startswith("engine.workspace"))
    assert up == []


def test_the_walk_finds_a_circle_when_there_is_one() -> None:
    """The check itself can fail: a made-up graph with a circle through two packages."""
    graph = {"engine.a.x": {"engine.b.y"}, "engine.b.y": {"engine.a.x"}, "engine.c": set()}
    assert _circles(graph) == [["engine.a.x", "engine.b.y"]]
