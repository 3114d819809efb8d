"""The package shows its architecture: floors (sub-packages) with no import cycle among the
studio's modules, counting imports inside functions and under TYPE_CHECKING, a few modules
on the ground, and a web floor of pure ASGI. Which floor may import which is written in
pyproject.toml and checked by `lint-imports`, which the test command runs before the suite."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

from tests.backends import first_pass_only

STUDIO = Path(__file__).resolve().parent.parent / "studio"
pytestmark = first_pass_only


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in order:
            visit(module)
    return found


def test_no_module_of_the_studio_imports_itself_back_through_others() -> None:
    graph = grimp.build_graph("studio", exclude_type_checking_imports=False)
    assert len(graph.modules) > 60  # the whole package was read
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "b", "c", "d"):
        graph.add_module(module)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    assert cycles(graph) == [["a", "b", "c"]]


def test_only_what_every_floor_uses_stands_on_the_ground() -> None:
    """The settings, the refusals, addresses, the one rule of a line, the counters, the logs,
    where the shipped files are, and the language spoken: nothing else."""
    ground = sorted(path.name for path in STUDIO.glob("*.py"))
    assert ground == ["__init__.py", "addresses.py", "assets.py", "config.py", "counters.py",
                      "errors.py", "i18n.py", "lines.py", "logs.py"]
    floors = sorted(path.parent.name for path in STUDIO.glob("*/__init__.py"))
    assert floors == ["accounts", "billing", "leasing", "mail", "ops", "runtime", "store",
                      "web"]


def test_no_middleware_wraps_a_request_in_a_task() -> None:
    """Pure ASGI middleware only: BaseHTTPMiddleware runs each request in a task of its own
    and streams the answer through a queue, which every request would pay for."""
    for path in [*STUDIO.rglob("*.py"), STUDIO.parent / "app.py"]:
        tree = ast.parse(path.read_text())
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} | {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            for alias in node.names}
        assert "BaseHTTPMiddleware" not in names, path
