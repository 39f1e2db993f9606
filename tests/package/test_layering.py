"""One namespace, three layers: application -> projections -> journal, never back.

Read from the source itself (every import statement of every module), so a new
module cannot slip a backward import past the check.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Folder -> the package it installs as (pyproject's package-dir).
LAYERS = {"journal": "quotaledger.journal", "projections": "quotaledger.projections"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _ours(names: set[str]) -> set[str]:
    return {n for n in names if n == "quotaledger" or n.startswith("quotaledger.")}


def test_the_engine_imports_only_itself() -> None:
    for path in sorted((REPO / "journal").rglob("*.py")):
        foreign = {n for n in _ours(_imports(path)) if not n.startswith("quotaledger.journal")}
        assert not foreign, f"{path.relative_to(REPO)} imports {sorted(foreign)}"


def test_projections_import_only_the_engine_and_themselves() -> None:
    allowed = ("quotaledger.journal", "quotaledger.projections")
    for path in sorted((REPO / "projections").rglob("*.py")):
        foreign = {n for n in _ours(_imports(path)) if not n.startswith(allowed)}
        assert not foreign, f"{path.relative_to(REPO)} imports {sorted(foreign)}"


def test_no_generic_top_level_import_anywhere() -> None:
    """Every import of our code is under `quotaledger`: a bare `journal`, `commands`
    or `projections` would be a runner's package, or PyPI's `journal`."""
    generic = {"journal", "projections", "commands"}
    folders = ("journal", "projections", "commands", "tests", "fixtures")
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            bare = {n for n in _imports(path) if n.split(".")[0] in generic}
            assert not bare, f"{path.relative_to(REPO)} imports {sorted(bare)}"


def test_tests_import_their_helpers_by_package_path() -> None:
    """tests/ is a package: a helper is `tests.journal.journal_helpers`, never a module found
    because some file put its folder on sys.path (two helpers of one name would then
    shadow each other, depending on which test ran first)."""
    helpers = {path.stem for path in (REPO / "tests").rglob("*.py")} - {"__init__"}
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "path":
                owner = node.value
                assert not (isinstance(owner, ast.Name) and owner.id == "sys"), (
                    f"{path.relative_to(REPO)}:{node.lineno} changes sys.path"
                )
        bare = {n.split(".")[0] for n in _imports(path)} & helpers
        assert not bare, f"{path.relative_to(REPO)} imports test helpers {sorted(bare)} bare"
        assert (path.parent / "__init__.py").exists(), f"{path.parent} is not a package"


def _defines_a_struct(tree: ast.Module) -> bool:
    struct_bases = {"Struct", "Payload", "StateStruct"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name in struct_bases:
                    return True
    return False


def test_struct_modules_keep_their_annotations_evaluated() -> None:
    """msgspec compiles every string annotation each time a decoder is built (a CLI
    call loading a checkpoint builds one over the whole state): the modules that
    define Structs do without `from __future__ import annotations` (projections/types.py)."""
    postponed = []
    for folder in ("journal", "projections"):
        for path in sorted((REPO / folder).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            future = any(
                isinstance(node, ast.ImportFrom)
                and node.module == "__future__"
                and any(alias.name == "annotations" for alias in node.names)
                for node in tree.body
            )
            if future and _defines_a_struct(tree):
                postponed.append(f"{folder}/{path.name}")
    assert not postponed, postponed
