"""No two modules of agenvoy_desktop import each other, directly or round a longer circle.

import-linter keeps the layers apart but says nothing about modules inside one layer. A circle
there means neither file can be read, tested or moved without the other. Every import counts:
top-level, deferred inside a function, and under ``TYPE_CHECKING``; a deferred import only hides
the circle from Python, not from the reader.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "agenvoy_desktop"
ROOT = PACKAGE.name

KNOWN_CYCLES: dict[frozenset[str], str] = {}
"""Circles allowed for now, each with the reason it is still there (keep this empty if you can)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from … import`` names, resolving leading dots."""
    if node.level == 0:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _targets(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every module of the package that ``module`` imports, wherever the import statement sits."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, path, node)
            for alias in node.names:
                # `from pkg import sub` imports the submodule; `from mod import name` the module.
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in known else base


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself left out)."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {t for t in _targets(module, path, known) if t in known and t != module}
        graph[module] = targets
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    groups.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def _describe(group: Iterable[str], graph: dict[str, set[str]]) -> str:
    members = set(group)
    edges = sorted(f"{a} -> {b}" for a in members for b in graph[a] & members)
    return "\n    ".join(edges)


def test_the_graph_sees_every_kind_of_import() -> None:
    """Guards the checker itself: deferred and relative imports are edges too."""
    graph = import_graph()
    assert f"{ROOT}.paths" in graph
    assert any(graph.values())


def test_tarjan_finds_a_three_module_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    groups = [g for g in strongly_connected(graph) if len(g) > 1]
    assert groups == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    graph = import_graph()
    cycles = [g for g in strongly_connected(graph) if len(g) > 1]
    unexpected = [g for g in cycles if frozenset(g) not in KNOWN_CYCLES]
    report = "\n".join(f"  {' <-> '.join(g)}:\n    {_describe(g, graph)}" for g in unexpected)
    assert not unexpected, f"modules that import each other:\n{report}"


def test_known_cycles_are_still_cycles() -> None:
    """An exception that no longer applies is removed, so the list never grows stale."""
    graph = import_graph()
    cycles = {frozenset(g) for g in strongly_connected(graph) if len(g) > 1}
    assert set(KNOWN_CYCLES) <= cycles
