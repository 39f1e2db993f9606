"""The `quotaledger` program (the console script, `python -m quotaledger`): the
composition root that chooses which command line runs a call.

A call with a server's URL, or a runner's per-event command on a local journal, runs
without typer when its command line can be read without it (quotaledger.lean, SPEC
§9); every other call runs the typer CLI (quotaledger.cli.main), imported only then.
The one module that imports both command lines: neither imports the other.
"""

from __future__ import annotations

import importlib
import sys

from quotaledger.lean.dispatch import lean_call


def main(argv: list[str] | None = None) -> int:
    """Runs `argv` (the process's arguments by default, then exits with the code)."""
    args = sys.argv[1:] if argv is None else argv
    code = lean_call(args)
    if code is None:
        full: int = importlib.import_module("quotaledger.cli.main").main(argv)
        return full
    if argv is None:
        sys.exit(code)
    return code
