"""The `quotaledger` program's entry: a call with a server's URL runs as a lean client.

`quotaledger COMMAND ... --journal http://HOST:PORT` (or https://, unix:PATH, or the
same in QUOTALEDGER_JOURNAL) is a client of `quotaledger serve` (SPEC §11): it costs
at most half of `python -c "import typer, msgspec"` (SPEC §9), so it reads its command
line with a table generated from the typer app (client/grammar.py) and loads neither
typer, the engine nor the projections (client/call.py). Every other call, and any
command line the table cannot read exactly as click does (`--help`, a malformed
value), runs the full CLI (quotaledger.cli.main).
"""

from __future__ import annotations

import importlib
import os
import sys

from quotaledger.journal.target import is_remote_target

JOURNAL_ENV = "QUOTALEDGER_JOURNAL"


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
    """The exit code of `args` run as a client of a server, or None: the full CLI runs it."""
    target = remote_target(args)
    if target is None:
        return None
    from quotaledger.client.call import call

    return call(args, target)


def main() -> None:
    """The console script: `quotaledger ARGS`."""
    code = lean_call(sys.argv[1:])
    if code is None:
        importlib.import_module("quotaledger.cli.main").main()
    sys.exit(code)
