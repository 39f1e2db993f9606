"""A runner's per-event command on a local journal, without typer or click (SPEC §9).

`quotaledger observe|admit|reject|release ...` is what a runner calls once per event,
and SPEC §9 holds its whole process to 1.3x `python -c "import typer, msgspec"`;
typer, click and building the command from its signature are most of what is left
once the engine is loaded. So the command line is read with the table generated from
the typer app (lean/grammar.py, as a client of a server reads it), and the command
runs through the very functions the typer command runs (console/per_event.py, and
console/context.py's checks and printing), so the two cannot differ in what they check,
do or print. A command line the table cannot read exactly as click would (`--help`,
an unknown option, a malformed number or duration) runs the full CLI.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from quotaledger.console import per_event
from quotaledger.console.context import IDENTIFIER_OPTIONS, Ctx, guarded, run_command
from quotaledger.journal.environment import JOURNAL_ENV
from quotaledger.journal.target import DEFAULT_JOURNAL
from quotaledger.lean.command_line import Call, Unread, lock_timeout_s
from quotaledger.render.output import Output
from quotaledger.usecases.registry import PER_EVENT

RUNS: dict[str, Callable[[Ctx, dict[str, Any]], Output]] = {
    name: getattr(per_event, name) for name in PER_EVENT
}
"""What each per-event command (the registry's per-event rows) does with its options:
console/per_event.py's function of the use case's name."""


def call(args: list[str]) -> int | None:
    """The exit code of `args`, a per-event command, or None: the full CLI runs it."""
    try:
        command = Call(args)
        run = RUNS[command.name]
        ctx = Ctx(
            journal_target=_journal(command),
            as_json=command.as_json,
            lock_timeout_s=lock_timeout_s(command),
        )
    except (Unread, KeyError):
        return None
    options = command.values
    identifiers = {name: value for name, value in options.items() if name in IDENTIFIER_OPTIONS}
    return guarded(
        lambda: run_command(lambda: run(ctx, options), ctx, options["at"], identifiers, options),
        as_json=ctx.as_json,
    )


def _journal(command: Call) -> str:
    """--journal, else QUOTALEDGER_JOURNAL, else the default, as click reads them (an
    empty variable is none)."""
    if command.target is not None:
        return command.target
    return os.environ.get(JOURNAL_ENV) or DEFAULT_JOURNAL
