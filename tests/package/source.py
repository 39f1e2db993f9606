"""The product's source as syntax trees: its modules, and the imports that can run
(an `if TYPE_CHECKING:` block never does)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Folder -> the package it installs as (pyproject's package-dir).
PACKAGES = {
    "commands": "quotaledger",
    "journal": "quotaledger.journal",
    "projections": "quotaledger.projections",
}


def modules() -> dict[str, Path]:
    """Every module of the product, by its import name."""
    found: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = modules()


def runs(node: ast.AST) -> bool:
    """Whether the statement can run (not an `if TYPE_CHECKING:` block)."""
    return not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(tree):
        if runs(child):
            yield child
            yield from statements(child)


def imported(name: str, path: Path) -> Iterator[tuple[str, str | None, int]]:
    """(module, name taken from it or None, line) for every import that can run,
    `importlib.import_module("literal")` included (an import all the same, which an
    import statement's check would not see)."""
    for node in statements(ast.parse(path.read_text(encoding="utf-8"))):
        if _imports_module(node):
            yield node.args[0].value, None, node.lineno  # type: ignore[attr-defined]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + 1]
                if path.name != "__init__.py":
                    base = base[:-1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                yield module, alias.name, node.lineno


def imported_in_functions(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(module, line) of every import inside a function that can run; `from package
    import submodule` names the submodule."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = [
        node
        for node in statements(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    lines = {
        node.lineno
        for function in functions
        for node in statements(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
    }
    for module, member, line in imported(name, path):
        if line in lines:
            submodule = f"{module}.{member}"
            yield (submodule if submodule in MODULES else module), line


def _imports_module(node: ast.AST) -> bool:
    """`importlib.import_module("literal")` (or `import_module("literal")`)."""
    if not isinstance(node, ast.Call) or not node.args:
        return False
    function = node.func
    called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    first = node.args[0]
    return (
        called == "import_module"
        and isinstance(first, ast.Constant)
        and isinstance(first.value, str)
    )
