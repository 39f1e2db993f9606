"""The CLI builds only the invoked command's module: the map must name every command."""

from __future__ import annotations

from quotaledger.cli.main import COMMAND_MODULES, MODULE_ORDER, build_app


def _top_level_names(modules: tuple[str, ...]) -> set[str]:
    import typer.main

    group = typer.main.get_command(build_app(modules))
    return set(group.commands)  # type: ignore[attr-defined]


INCLUDED = {"capacity": ("runner",)}
"""Modules whose help lists another's commands in their place (cli/capacity.py lists
the runner's per-event commands between configure and inspect, in SPEC order)."""


def test_every_registered_command_is_mapped_to_the_module_that_registers_it() -> None:
    everything = _top_level_names(MODULE_ORDER)
    assert everything == set(COMMAND_MODULES)
    for module in set(COMMAND_MODULES.values()):
        own = _top_level_names((module,))
        mapped = {module, *INCLUDED.get(module, ())}
        assert own == {name for name, m in COMMAND_MODULES.items() if m in mapped}, module


def test_the_capacity_commands_are_listed_in_spec_order() -> None:
    import typer.main

    group = typer.main.get_command(build_app(MODULE_ORDER))
    names = list(group.commands)  # type: ignore[attr-defined]
    at = names.index("configure")
    assert names[at : at + 6] == ["configure", "observe", "admit", "reject", "release", "inspect"]


def test_a_mapped_command_runs_with_only_its_module(cli) -> None:
    result = cli("digest")
    assert result.code == 3 and result.json["error"]["code"] == "journal_not_found"


def test_the_runner_hot_path_imports_nothing_heavy(tmp_path) -> None:
    """`admit` (a runner calls it once per run) loads no worker pool, database driver,
    terminal UI, other service or other command's code: each would add milliseconds
    to every call."""
    import subprocess
    import sys

    journal = str(tmp_path / "j.jsonl")
    admit = ["admit", "--journal", journal, "--json", "--goal", "g", "--run", "r"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "quotaledger", *admit, "--arm", "baseline"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-2000:]  # refused: the goal is not configured
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "quotaledger.services.capacity" in loaded  # the check sees what it imported
    heavy = {
        "multiprocessing",
        "concurrent.futures",
        "psycopg",
        "rich",
        "sqlite3",
        "dataclasses",
        "json",
        "quotaledger.api",
        "quotaledger.cli.host",
        "quotaledger.services.host",
        "quotaledger.services.journal",
        "quotaledger.services.operator",
        "quotaledger.services.probe",
        "quotaledger.services.settlement",
        "quotaledger.tools.bench",
        "quotaledger.adapters.headers",  # provider reports load only when given
        "email",
        # OpenSSL (hashlib) loads only once a process hashes in bulk (journal.sha256)
        "_hashlib",
        "hashlib",
    }
    assert not heavy & loaded, heavy & loaded
