"""The typer-free command line: a call with a server's URL runs as a lean client of
it, and a runner's per-event command without typer.

`quotaledger COMMAND ... --journal http://HOST:PORT` (or https://, unix:PATH, or the
same in QUOTALEDGER_JOURNAL) is a client of `quotaledger serve` (SPEC §11): it costs
at most half of `python -c "import typer, msgspec"` (SPEC §9), so it reads its command
line with a table generated from the typer app (lean/grammar.py) and loads neither
typer, the engine nor the projections (lean/remote_call.py). `observe`, `admit`, `reject`
and `release` on a local journal read theirs with the same table and run without
typer or click (lean/local.py, SPEC §9's start-up figure). Every other call, and
any command line the table cannot read exactly as click does (`--help`, a malformed
value), runs the full CLI (quotaledger.cli.main): the program's entry
(quotaledger.entry) chooses.
"""

from __future__ import annotations

import os

from quotaledger.console.collector import collector_paused
from quotaledger.journal.environment import JOURNAL_ENV
from quotaledger.journal.target import is_remote_target
from quotaledger.startup import PER_EVENT_COMMANDS


def remote_target(args: list[str]) -> str | None:
    """The server's URL the command line names as its journal (the last --journal, as
    click reads it, else QUOTALEDGER_JOURNAL), or None."""
    target = os.environ.get(JOURNAL_ENV)
    for index, arg in enumerate(args):
        if arg == "--journal" and index + 1 < len(args):
            target = args[index + 1]
        elif arg.startswith("--journal="):
            target = arg[len("--journal=") :]
    if target is None or not is_remote_target(target):
        return None
    return target


def lean_call(args: list[str]) -> int | None:
    """The exit code of `args` run as a client of a server, or as a per-event command
    without typer; None: the full CLI runs it."""
    target = remote_target(args)
    if target is not None:
        from quotaledger.lean.remote_call import call

        return call(args, target)
    if args and args[0] in PER_EVENT_COMMANDS:
        with collector_paused():
            from quotaledger.lean import local
        return local.call(args)
    return None
