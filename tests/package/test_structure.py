"""The product's size and import rules, read from its source (commands/, journal/,
projections/): small functions and modules, no import circle, no private name taken
from another module.

Every import statement counts, a function's included (a deferred import still ties
two modules together); only `if TYPE_CHECKING:` blocks do not, since they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.package.source import MODULES, REPO, imported, statements

FUNCTION_LINES_MAX = 60
MODULE_LINES_MAX = 800
HOT_LOOP_LINES_MAX = 200
HOT_LOOPS = {"journal/chain.py": "scan", "projections/capacity/fold.py": "apply"}
"""The two measured hot loops (docs/performance.md): every record of every fold and
verify goes through them, and a call saved there is measurable, so they stay inline."""


def _edges() -> dict[str, set[str]]:
    """Each module's imports of the product's modules (a submodule taken by `from
    package import submodule` is the submodule)."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, taken, _line in imported(name, path):
            target = f"{module}.{taken}" if f"{module}.{taken}" in MODULES else module
            if target in MODULES and target != name:
                edges[name].add(target)
    return edges


def _reachable(edges: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges[node])
    return seen


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that reach one another (through their imports)."""
    reach = {node: _reachable(edges, node) for node in edges}
    circles = {
        tuple(sorted(n for n in reach[node] if node in reach[n]))
        for node in edges
        if node in reach[node]
    }
    return sorted(list(circle) for circle in circles)


def test_the_circle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(edges) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_an_import_module_literal_is_an_import(tmp_path: Path) -> None:
    """`importlib.import_module("quotaledger.cli.main")` ties two modules as an import
    statement does (the lean CLI and the typer CLI once imported each other so)."""
    path = tmp_path / "m.py"
    path.write_text(
        "import importlib\n"
        "def f(name):\n"
        "    importlib.import_module('quotaledger.cli.main').main()\n"
        "    importlib.import_module(f'quotaledger.cli.{name}')\n"
    )
    found = [(module, line) for module, _taken, line in imported("quotaledger.m", path)]
    assert found == [("importlib", 1), ("quotaledger.cli.main", 3)]


def test_no_import_circle() -> None:
    assert _circles(_edges()) == []


def _private_names_taken(name: str, path: Path) -> list[str]:
    """Where `path` takes a private name of another module of ours: `from module import
    _name`, or `module._name` on a module it imported."""
    taken = []
    modules: set[str] = set()  # the names this file binds to modules of ours
    for module, member, line in imported(name, path):
        if not module.startswith("quotaledger"):
            continue
        if member is None:
            modules.add(module.split(".")[0])
        elif member.startswith("_") and not member.startswith("__"):
            taken.append(f"{path.name}:{line} {module}.{member}")
        elif f"{module}.{member}" in MODULES:
            modules.add(member)
    for node in statements(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules.update(a.asname for a in node.names if a.asname)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name | ast.Attribute)
            and ast.unparse(node.value).split(".")[0] in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            taken.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return taken


def test_the_private_name_finder_finds_them(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "from quotaledger.journal.fold import _x, y\n"
        "from quotaledger.journal import fold as f, chain\n"
        "import quotaledger.journal.record\n"
        "def g(): return f._a, chain._b, quotaledger.journal.record._c, self._d, f.__doc__\n"
    )
    assert _private_names_taken("quotaledger.m", path) == [
        "m.py:1 quotaledger.journal.fold._x",
        "m.py:4 f._a",
        "m.py:4 chain._b",
        "m.py:4 quotaledger.journal.record._c",
    ]


def test_no_private_name_is_imported_across_modules() -> None:
    taken = [t for name, path in MODULES.items() for t in _private_names_taken(name, path)]
    assert taken == []


def test_no_module_is_over_800_lines() -> None:
    long = {}
    for path in MODULES.values():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MODULE_LINES_MAX:
            long[str(path.relative_to(REPO))] = lines
    assert long == {}


def test_no_function_is_over_60_lines_but_the_hot_loops() -> None:
    """From its `def` to its last line, signature and docstring included."""
    long = {}
    hot_loops_seen = set()
    for path in MODULES.values():
        where = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                hot = HOT_LOOPS.get(where) == node.name
                hot_loops_seen.update([where] if hot else [])
                if lines > (HOT_LOOP_LINES_MAX if hot else FUNCTION_LINES_MAX):
                    long[f"{where}:{node.lineno} {node.name}"] = lines
    assert long == {}
    assert hot_loops_seen == set(HOT_LOOPS)  # the exceptions name functions that exist
