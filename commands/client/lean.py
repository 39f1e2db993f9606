"""The `quotaledger` program's entry: a call with a server's URL runs as a lean client,
and a runner's per-event command without typer.

`quotaledger COMMAND ... --journal http://HOST:PORT` (or https://, unix:PATH, or the
same in QUOTALEDGER_JOURNAL) is a client of `quotaledger serve` (SPEC §11): it costs
at most half of `python -c "import typer, msgspec"` (SPEC §9), so it reads its command
line with a table generated from the typer app (client/grammar.py) and loads neither
typer, the engine nor the projections (client/call.py). `observe`, `admit`, `reject`
and `release` on a local journal read theirs with the same table and run without
typer or click (client/local.py, SPEC §9's start-up figure). Every other call, and
any command line the table cannot read exactly as click does (`--help`, a malformed
value), runs the full CLI (quotaledger.cli.main).
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def collector_paused() -> Iterator[None]:
    """Start-up without the cycle collector.

    A runner calls the CLI once per event, so start-up is on its hot path. Importing
    typer, click, msgspec and this package and building the command allocate tens of
    thousands of objects that live until exit, and the collector walks them again and
    again while they are made: about a tenth of a call's CPU, and none of it garbage.
    It is paused while they are made and resumed before the command runs (or the
    importer goes on), so long commands collect as usual.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def lean_call(args: list[str]) -> int | None:
    """The exit code of `args` run as a client of a server, or as a per-event command
    without typer; None: the full CLI runs it."""
    target = remote_target(args)
    if target is not None:
        from quotaledger.client.call import call

        return call(args, target)
    if args and args[0] in PER_EVENT_COMMANDS:
        with collector_paused():
            from quotaledger.client import local
        return local.call(args)
    return None


def main() -> None:
    """The console script: `quotaledger ARGS`."""
    code = lean_call(sys.argv[1:])
    if code is None:
        importlib.import_module("quotaledger.cli.main").main()
    sys.exit(code)
