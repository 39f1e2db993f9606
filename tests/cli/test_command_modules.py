"""The CLI builds only the invoked command's module: the map (`startup.py`)
must name every command. What a per-event command loads: tests/package/test_startup.py."""

from __future__ import annotations

from quotaledger.cli.main import build_app
from quotaledger.startup import COMMAND_MODULES, MODULE_ORDER


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


def test_every_use_case_with_a_command_is_mapped() -> None:
    from quotaledger.usecases.registry import USE_CASES

    for name, case in USE_CASES.items():
        if case.command is not None:
            assert case.command.split()[0] in COMMAND_MODULES, name
