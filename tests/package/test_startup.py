"""What loads when is declared once (`commands/startup.py`): an import inside a
function is of a module `DEFERRED` names, and a runner's per-event commands load
none of those, nor another command's code.

A runner calls the CLI once per event: each module its command loads is start-up
CPU on that path (docs/performance.md, SPEC §9's start-up figure).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaledger import Ledger
from quotaledger.startup import (
    CLIENT_DEFERRED,
    COMMAND_MODULES,
    DEFERRED,
    LAZY_NAMES,
    LEAN_PATH,
    PER_EVENT_COMMANDS,
)
from tests.package.source import MODULES, REPO, imported_in_functions
from tests.support import run_importtime


def _declared(module: str, tables: tuple[dict[str, str], ...] = (DEFERRED,)) -> str | None:
    """The entry of `tables` that `module` is (or is a submodule of), if any."""
    keys = [key for table in tables for key in table]
    return next((k for k in keys if module == k or module.startswith(k + ".")), None)


def test_every_import_inside_a_function_is_declared() -> None:
    undeclared = [
        f"{path.relative_to(REPO)}:{line} {module}"
        for name, path in MODULES.items()
        for module, line in imported_in_functions(name, path)
        if _declared(module, (DEFERRED, LAZY_NAMES, CLIENT_DEFERRED, LEAN_PATH)) is None
    ]
    assert undeclared == []


def test_every_declared_module_is_imported_inside_a_function() -> None:
    deferred = {
        _declared(module, (DEFERRED, LAZY_NAMES, CLIENT_DEFERRED, LEAN_PATH))
        for name, path in MODULES.items()
        for module, _line in imported_in_functions(name, path)
    }
    declared = set(DEFERRED) | set(LAZY_NAMES) | set(CLIENT_DEFERRED) | set(LEAN_PATH)
    assert declared - deferred == set()


def test_the_finder_sees_imports_in_functions_only(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import json\n"
        "def f():\n"
        "    import ssl\n"
        "    from quotaledger.server import metrics_listen\n"
        "    if TYPE_CHECKING:\n"
        "        import rich\n"
        "class C:\n"
        "    def g(self):\n"
        "        from concurrent.futures import ProcessPoolExecutor\n"
    )
    assert list(imported_in_functions("quotaledger.m", path)) == [
        ("ssl", 6),
        ("quotaledger.server.metrics_listen", 7),
        ("concurrent.futures", 12),
    ]


OTHER_COMMANDS = {
    f"quotaledger.cli.{module}" for module in COMMAND_MODULES.values() if module != "runner"
} | {
    f"quotaledger.services.{name}"
    for name in ("capacity_state", "host", "journal", "operator", "probe", "settlement")
}
HEAVY = {"sqlite3", "dataclasses", "email", "_hashlib", "psycopg"}
"""Loaded by no per-event command either: each would add milliseconds to every call."""


@pytest.mark.parametrize("command", PER_EVENT_COMMANDS)
def test_a_per_event_command_loads_nothing_deferred(tmp_path: Path, command: str) -> None:
    journal = str(tmp_path / "j.jsonl")
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=100_000)
    args = {
        "observe": ["--uncached-input", "1", "--cached-input", "0", "--output", "0"],
        "admit": ["--run", "r", "--arm", "baseline", "--forecast-tpm", "10"],
        "reject": ["--run", "r", "--retry-after-s", "1"],
        "release": ["--run", "r"],
    }[command]
    done, loaded = run_importtime([command, "--journal", journal, "--json", "--goal", "g", *args])
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert "quotaledger.services.capacity" in loaded  # the check sees what it imported
    deferred = {module for module in loaded if _declared(module) is not None}
    assert deferred == set()
    assert loaded & (OTHER_COMMANDS | HEAVY) == set()
