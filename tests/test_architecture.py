"""The package's import graph: no module takes part in an import circle.

The layer order itself is import-linter's contract in pyproject.toml (run by
``make lint``); this test catches circles inside a layer as well, including
imports made only for type checking, which the layers contract cannot see.
"""

from __future__ import annotations

from collections.abc import Iterator

import grimp


def _imports(graph: grimp.ImportGraph, module: str) -> Iterator[str]:
    return iter(sorted(graph.find_modules_directly_imported_by(module)))


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, _imports(graph, root))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_is_part_of_an_import_circle() -> None:
    graph = grimp.build_graph("tribal_memory", exclude_type_checking_imports=False)
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.d")
    assert _circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_only_the_interfaces_and_benchmarks_import_the_service() -> None:
    graph = grimp.build_graph("tribal_memory", exclude_type_checking_imports=False)
    importers = {
        module
        for module in graph.modules
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("tribal_memory.service.")
    }
    allowed = ("tribal_memory.interfaces.", "tribal_memory.bench.", "tribal_memory.service.")
    assert sorted(m for m in importers if not m.startswith(allowed) and m != "tribal_memory") == []
