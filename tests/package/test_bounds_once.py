"""Every bound is stated once, in a limits module, and every environment variable's
name once, in journal/environment.py: a second spelling is one that can drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.package.source import MODULES, REPO

LIMITS = ("quotaledger.journal.limits", "quotaledger.projections.limits")
ENVIRONMENT = "quotaledger.journal.environment"
BOUND = re.compile(r"[A-Z][A-Z0-9_]*_(MAX|MIN|S|MS|BYTES|CHARS|DEFAULT)")
FACES = ("quotaledger.server", "quotaledger.client", "quotaledger.services.probe")
"""The server's, the clients' and the probe's modules: their bounds are the limits
modules' (the tools' bench parameters and the adapters' are their own)."""


def _module_constants(path: Path) -> dict[str, ast.expr]:
    """Each name a module assigns at its top level, and its value."""
    found: dict[str, ast.expr] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                found[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            found[node.target.id] = node.value
    return found


def _literal_number(value: ast.expr) -> bool:
    """A number written out (`40`, `16 * 1024`, `1 << 20`), not a name of one."""
    nodes = list(ast.walk(value))
    return all(
        isinstance(n, ast.Constant | ast.BinOp | ast.UnaryOp | ast.operator | ast.unaryop)
        for n in nodes
    ) and any(isinstance(n, ast.Constant) and isinstance(n.value, int | float) for n in nodes)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are documentation (a statement of its own)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def test_a_limits_module_name_is_defined_nowhere_else() -> None:
    limits = {name for module in LIMITS for name in _module_constants(MODULES[module])}
    twice = [
        f"{path.relative_to(REPO)}: {name}"
        for module, path in MODULES.items()
        if module not in LIMITS
        for name, value in _module_constants(path).items()
        if name in limits and _literal_number(value)
    ]
    assert twice == []


def test_the_faces_take_their_bounds_from_the_limits_modules() -> None:
    stated = [
        f"{path.relative_to(REPO)}: {name}"
        for module, path in MODULES.items()
        if module.startswith(FACES)
        for name, value in _module_constants(path).items()
        if BOUND.fullmatch(name) and _literal_number(value)
    ]
    assert stated == []


def test_the_finder_sees_a_bound_written_out(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("A_MAX = 16 * 1024\nB_S = LIMIT\nC_BYTES: int = 1 << 20\nD = 'x'\n")
    constants = _module_constants(path)
    assert [name for name, value in constants.items() if _literal_number(value)] == [
        "A_MAX",
        "C_BYTES",
    ]


def test_an_environment_variable_is_named_in_one_module() -> None:
    spelled = []
    for module, path in MODULES.items():
        if module == ENVIRONMENT:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        documentation = _docstrings(tree)
        spelled += [
            f"{path.relative_to(REPO)}:{node.lineno} {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "QUOTALEDGER_" in node.value
            and id(node) not in documentation
        ]
    assert spelled == []


def test_the_environment_module_names_what_the_spec_names() -> None:
    spec_names = {"JOURNAL", "JSON", "LOCK_TIMEOUT_S", "MAX_CLOCK_SKEW_S", "TOKEN"}
    inspect_ai = {"GOAL", "ARM", "LEASE_S", "WAIT_S"} | {
        f"FORECAST_{d}" for d in ("TPM", "ITPM", "OTPM", "RPM", "TOKENS", "REQUESTS", "USD")
    }  # SPEC §13.1
    spec_names |= {f"INSPECT_{name}" for name in inspect_ai}
    values = set()
    for value in _module_constants(MODULES[ENVIRONMENT]).values():
        named = value.values if isinstance(value, ast.Dict) else [value]  # a table of names
        values |= {v.value for v in named if isinstance(v, ast.Constant)}
    assert values == {f"QUOTALEDGER_{name}" for name in spec_names}
