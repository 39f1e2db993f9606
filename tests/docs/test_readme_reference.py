"""The README is the reference a user reads: it must name everything the tool has.

In sqlite-utils' style (tests/test_docs.py): the lists are read from the code, so a
new command, event kind or exit code that the README does not mention fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

import quotaledger.journal.errors as errors
from quotaledger.cli.main import build_app
from quotaledger.projections.ledger import EVENT_KINDS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return README.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def _command_paths() -> list[str]:
    paths: list[str] = []

    def walk(command: object, prefix: tuple[str, ...]) -> None:
        children = getattr(command, "commands", None)
        if children is None:
            paths.append(" ".join(prefix))
            return
        for name, child in children.items():
            walk(child, (*prefix, name))

    walk(typer.main.get_command(build_app()), ())
    return paths


def test_every_command_appears_in_the_readme() -> None:
    missing = [p for p in _command_paths() if not re.search(rf"quotaledger {p}\b", README)]
    assert not missing, f"commands the README never shows: {missing}"


def test_the_event_table_lists_every_kind_and_no_other() -> None:
    documented = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", _section("Event kinds")))
    assert documented == set(EVENT_KINDS), (
        f"undocumented: {sorted(set(EVENT_KINDS) - documented)}; "
        f"not a kind: {sorted(documented - set(EVENT_KINDS))}"
    )


def _error_classes() -> list[type[errors.Error]]:
    found: list[type[errors.Error]] = []
    pending: list[type[errors.Error]] = [errors.Error]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_the_exit_code_table_matches_the_error_classes() -> None:
    table = {int(code) for code in re.findall(r"^\| (\d) \|", _section("Exit codes"), re.M)}
    from_errors = {cls.exit_code for cls in _error_classes()}
    assert table == {0, 1} | from_errors, (table, from_errors)
