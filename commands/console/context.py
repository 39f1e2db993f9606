"""Where and how a command runs, and what runs it, without typer or click: the
context, the checks every command makes before it opens anything, the request built
from its options, and its outcome printed as its exit code.

The typer commands (cli/common.py) and a runner's per-event command read by the
generated grammar (quotaledger.lean.local, SPEC §9's start-up figure) both run
through `run_command`, so the two cannot differ in what they check or print.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import msgspec

from quotaledger.console.inputs import check_one_stdin_reader
from quotaledger.console.printing import closed_stdout
from quotaledger.journal.clock import check_moment
from quotaledger.journal.errors import Error, StorageFailure
from quotaledger.journal.filestore import storage_code
from quotaledger.journal.identifier import check_identifier
from quotaledger.journal.lock_timeout import check_lock_timeout_s
from quotaledger.journal.target import check_target, is_remote_target
from quotaledger.render.outcome import exit_code_of
from quotaledger.render.output import Output, Shown, emit, emit_error
from quotaledger.usecases.decode import CLI, Answer, Request, decode

Q = TypeVar("Q", bound=Request)


class Ctx(msgspec.Struct):
    """Where and how a command runs."""

    journal_target: str
    as_json: bool
    lock_timeout_s: float

    def shown(self, *, verbose: bool = False) -> Shown:
        return Shown(self.journal_target, verbose=verbose)

    @contextmanager
    def service(
        self,
        api: type[Any] | None = None,
        *,
        write: bool,
        allow_corrupt: bool = False,
        fold: bool = True,
    ) -> Iterator[Any]:
        """The in-process API opened on this journal: `api` (the command's own service,
        e.g. `CapacityService`: a runner's call imports no other), else `quotaledger.Ledger`.
        `fold` false: a reader that folds in its command's pass (ServiceBase.open_unfolded).
        On a server's URL (SPEC §11): a client of it with the same methods (`remote`)."""
        if is_remote_target(self.journal_target):
            from quotaledger.remote import RemoteService

            remote = RemoteService(self.journal_target)
            try:
                yield remote
            finally:
                remote.close()
            return
        if api is None:
            from quotaledger.api import Ledger

            api = Ledger
        if fold:
            ledger = api.open(
                self.journal_target,
                write=write,
                lock_timeout_s=self.lock_timeout_s,
                allow_corrupt=allow_corrupt,
            )
        else:
            assert not write
            ledger = api.open_unfolded(
                self.journal_target,
                lock_timeout_s=self.lock_timeout_s,
                allow_corrupt=allow_corrupt,
            )
        try:
            yield ledger
        finally:
            ledger.close()


IDENTIFIER_OPTIONS = {
    **{name: f"--{name}" for name in ("goal", "run", "case", "lane", "attempt", "session")},
    **{name: f"--{name}" for name in ("profile", "agent", "turn", "task", "replan", "pool")},
    "turn_id": "--turn",
    "request_id": "--request-id",
}
"""Parameters whose values are identifiers (SPEC §8), by name, with their option: the
command wrapper checks them before a command runs."""


def request_of(request_type: type[Q], options: dict[str, Any], **read: Any) -> Q:
    """A command's request from its options (its `locals()`: the parameters are named
    as the request's fields), `ctx` aside, with what the CLI read itself in place of
    a `FILE|-` option (`read`)."""
    values = {name: value for name, value in options.items() if name != "ctx"}
    return decode(request_type, {**values, **read}, CLI)


def check_common_input(
    ctx: Ctx, at: str | None, identifiers: dict[str, str | None], options: dict[str, Any]
) -> None:
    """Input errors first (exit 2), before the command opens anything: a bad target,
    lock timeout, time or identifier is the user's to fix whatever state the journal
    is in."""
    # `--journal ""` is never the default by accident; a missing directory or another
    # scheme (mysql://, file://) never becomes a relative path.
    check_target(ctx.journal_target, option="--journal")
    # The engine's bound (nan and inf refused: SPEC §2.3), checked before anything
    # opens, as every option is.
    check_lock_timeout_s(ctx.lock_timeout_s)
    if at is not None:
        check_moment("--at", at)
    for name, value in identifiers.items():
        if value is not None:
            option = IDENTIFIER_OPTIONS[name]
            check_identifier(option, value, option=option)
    check_one_stdin_reader(options)


def run_command(
    run: Callable[[], Output | Answer | dict[str, Any]],
    ctx: Ctx,
    at: str | None,
    identifiers: dict[str, str | None],
    options: dict[str, Any],
) -> int:
    """A command's exit code: its input checked, `run` run, its outcome printed."""
    try:
        check_common_input(ctx, at, identifiers, options)
        return emit(run(), as_json=ctx.as_json)
    except Error as error:
        return emit_error(error, as_json=ctx.as_json)
    except BrokenPipeError:
        # The reader of stdout went away (`quotaledger demo | head -1`): that is how
        # such a pipeline ends, not a failure of the command.
        return closed_stdout()


def guarded(run: Callable[[], int], *, as_json: bool) -> int:
    """`run`'s exit code, or that of what ends a command from outside it: Ctrl-C, a
    stdout closed under it, an I/O failure no command turned into its error."""
    try:
        return run()
    except KeyboardInterrupt:
        return aborted()
    except BrokenPipeError:  # help or a usage message piped into `head`
        return closed_stdout()
    except OSError as error:
        failure = StorageFailure(f"I/O failure: {error}", code=storage_code(error))
        return emit_error(failure, as_json=as_json)


def aborted() -> int:
    """Interrupted: exit 4, an interrupted command acknowledged nothing."""
    failure = StorageFailure("aborted")
    sys.stderr.write(f"quotaledger: {failure.message}\n")
    return exit_code_of(failure)
