"""One namespace, three layers: application -> projections -> journal, never back.

Read from the source itself (every import statement of every module), so a new
module cannot slip a backward import past the check.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.package.source import MODULES, imported

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


# -- the application's folders (commands/, package `quotaledger`) ---------------------

FLOOR = (
    "adapters",
    "usecases",
    "startup",
    "render",
    "report",
    "services",
    "api",
    "client",
    "console",
)
"""The floor every face stands on, bottom to top: a floor folder imports only those
below it. `adapters` reads what providers send (usage bodies, rate-limit headers);
`usecases` are the request and answer types and the registry's rows; `startup` is
the table of what loads when; `render` turns answers into text and holds the outcome
policy (exit code, HTTP status, error body); `report` renders the HTML report page
(the `report` service writes it, as `metrics --out` writes render's exposition);
`services` carry out the use cases; `api` is `Ledger`, the services composed, which
the server and the tools run on; `client` is the HTTP transport; `console` is what
the two command lines share."""
FACES = ("cli", "lean", "remote", "server", "tools")
"""What a caller holds: the typer CLI, the typer-free CLI, the remote Ledger (HTTP),
the server, the demo and the bench. A face imports the floor, never another face
(but `LAUNCHES`)."""
ROOTS = ("entry", "__main__", "(package)")
"""Composition roots: the program (which command line runs a call), `python -m`,
and the package (`quotaledger.Ledger`, named lazily). Anything may import the
package itself (`__version__`)."""
LAUNCHES = {("cli", "server"), ("cli", "tools"), ("tools", "server")}
"""A face that starts another program of the package: `serve` and `metrics --listen`
start the server, `demo` and `bench` run the tools, `bench --serve` measures a server."""
UPWARD = {
    ("api.py", "remote"): "Ledger.open on a server's URL is the remote Ledger",
    ("console/context.py", "remote"): "a command on a server's URL calls it over HTTP",
}
"""The imports that run up the house, each with why: at most three. (The LiteLLM
callback, `adapters.litellm`, names `Ledger` for its type only.)"""


def _folder(module: str) -> str:
    """`quotaledger.cli.main` -> `cli`; `quotaledger.api` -> `api`."""
    parts = module.split(".")
    return "(package)" if len(parts) == 1 else parts[1]


def _folder_imports() -> dict[tuple[str, str], set[str]]:
    """(importing file, imported folder) -> the modules, for every import between two
    folders of the application (deferred imports and `import_module("literal")` too)."""
    found: dict[tuple[str, str], set[str]] = {}
    for name, path in MODULES.items():
        if not path.is_relative_to(REPO / "commands"):
            continue
        source = _folder(name)
        for module, _taken, _line in imported(name, path):
            if not module.startswith("quotaledger") or module.split(".")[1:2] in (
                ["journal"],
                ["projections"],
            ):
                continue
            target = _folder(module)
            if target != source:
                where = str(path.relative_to(REPO / "commands"))
                found.setdefault((where, target), set()).add(module)
    return found


def _allowed(where: str, source: str, target: str) -> bool:
    if target == "(package)" or source in ROOTS:
        return True
    if source in FLOOR:
        return target in FLOOR and FLOOR.index(target) < FLOOR.index(source)
    return target in FLOOR or (source, target) in LAUNCHES


def test_every_folder_is_a_floor_a_face_or_a_root() -> None:
    folders = {_folder(name) for name, path in MODULES.items() if "commands" in path.parts}
    assert folders == set(FLOOR) | set(FACES) | set(ROOTS)


def test_the_folders_import_down_the_floor_and_faces_no_face() -> None:
    wrong = []
    for (where, target), modules in sorted(_folder_imports().items()):
        source = _folder("quotaledger." + where.removesuffix(".py").replace("/", "."))
        if (where, target) in UPWARD:
            continue
        if not _allowed(where, source, target):
            wrong.append(f"{where} -> {sorted(modules)}")
    assert wrong == []


def test_the_upward_imports_are_few_and_exist() -> None:
    assert len(UPWARD) <= 3
    assert set(UPWARD) <= set(_folder_imports())


def test_no_folder_loop() -> None:
    edges: dict[str, set[str]] = {}
    for (where, target), _modules in _folder_imports().items():
        source = _folder("quotaledger." + where.removesuffix(".py").replace("/", "."))
        edges.setdefault(source, set()).add(target)
    loops = []
    for start in edges:
        seen, todo = set(), list(edges[start])
        while todo:
            node = todo.pop()
            if node == start:
                loops.append(start)
                break
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
    assert loops == []
