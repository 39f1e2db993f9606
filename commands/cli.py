"""The `runledger` command line: a thin layer over `commands.api.Runledger`."""

import os
import sys

import typer

from commands import (
    capacity_cli,
    host_cli,
    journal_cli,
    operator_cli,
    probe_cli,
    settlement_cli,
    tools_cli,
)
from commands.common import env_json
from commands.output import EXIT_IO, EXIT_USAGE, emit_error
from journal.errors import InvalidInput, StorageFailure

app = typer.Typer(
    name="runledger",
    help="A hash-chained, fsynced journal that decides benchmark admission against a "
    "shared TPM quota, continues failed host lanes, and settles quota spends exactly once.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for module in (
    journal_cli,
    capacity_cli,
    host_cli,
    settlement_cli,
    probe_cli,
    operator_cli,
    tools_cli,
):
    module.register(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs a command and turns every outcome into an exit code."""
    from click import exceptions as click_errors

    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args or env_json()
    try:
        code = app(args=args, prog_name="runledger", standalone_mode=False)
    except typer.Exit as done:
        code = done.exit_code
    except click_errors.UsageError as error:
        if as_json:
            code = emit_error(InvalidInput(error.format_message(), code="usage"), as_json=True)
        else:
            error.show()
            code = EXIT_USAGE
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("runledger: aborted\n")
        code = EXIT_IO
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_IO
    except OSError as error:
        code = emit_error(StorageFailure(f"I/O failure: {error}"), as_json=as_json)
    code = 0 if code is None else int(code)
    if argv is None:
        sys.exit(code)
    return code
