"""The modules of ``spark_jobs`` import one another one way: no import cycle, however late the import.

Read from the source with :mod:`ast`, as ``tests/test_layers.py`` reads
``zaqar_lite``, so an import inside a function is seen too: such an import
hides a cycle from Python until the function runs, not from this test. An
import of ``spark_jobs.a.b`` is an edge to that module, not to its package
``spark_jobs.a`` (whose ``__init__`` Python runs first whoever imports it).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Set
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent.parent / "spark_jobs"


def module_name(path: Path) -> str:
    """``spark_jobs/sources/plan.py`` -> ``spark_jobs.sources.plan``; an ``__init__`` is its package."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path) -> set[str]:
    """The ``spark_jobs`` modules a source file imports (``from M import x``: ``M.x`` if a module, else M)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "spark_jobs" or node.module.startswith("spark_jobs."):
                named = (f"{node.module}.{alias.name}" for alias in node.names)
                found.update(name if name in MODULES else node.module for name in named)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("spark_jobs."))
    return found


def reachable(graph: Mapping[str, Set[str]], start: str) -> set[str]:
    """The modules that ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def cycles(graph: Mapping[str, Set[str]]) -> list[list[str]]:
    """The import cycles of a graph, each as its sorted modules (those that reach each other)."""
    reach = {node: reachable(graph, node) for node in graph}
    found = {tuple(sorted(other for other in reach[node] if node in reach[other]))
             for node in graph if node in reach[node]}
    return sorted(list(cycle) for cycle in found)


def test_the_cycle_finder_finds_a_cycle_through_three_modules_and_a_self_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["e"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_an_import_names_the_module_it_reaches():
    export = imported(MODULES["spark_jobs.export"])
    assert "spark_jobs.sources.plan" in export and "spark_jobs.sources.rows" in export
    assert imported(MODULES["spark_jobs.output"]) >= {"spark_jobs.report_html", "spark_jobs.options"}


def test_no_import_cycle_among_the_modules_of_spark_jobs():
    graph = {name: imported(path) & MODULES.keys() for name, path in MODULES.items()}
    assert cycles(graph) == [], "an import cycle: move what both modules need into the lower one"
