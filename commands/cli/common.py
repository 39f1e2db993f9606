"""What every command shares: the common options, the context, the `command` decorator.

    commands = CommandTable()          # one per CLI module; register() adds it to the app

    @commands("admit", example="quotaledger admit --goal g --run r1 --arm baseline")
    def admit(ctx: Ctx, goal: GoalOpt, run: RunOpt, ...) -> dict:
        with ctx.service(write=True) as ledger:
            return ledger.admit(...)

`command` (which a CommandTable applies to each entry) adds `--journal`, `--json` and
`--lock-timeout-s` to the command's options (and `--at`, which SPEC §2.2 has every
command accept, to one that takes no time of its own), checks the input it can check
alone (the time, identifiers), turns the docstring and the example into help, and
routes the result or the expected error through `quotaledger.render.output` (the one
exit-code map).
"""

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import click
import typer

from quotaledger.console.context import (
    IDENTIFIER_OPTIONS,
    Ctx,
    check_common_input,
    request_of,
    run_command,
)
from quotaledger.console.printing import closed_stdout
from quotaledger.journal import codes
from quotaledger.journal.clock import parse_duration_s
from quotaledger.journal.environment import JOURNAL_ENV, JSON_ENV, LOCK_TIMEOUT_S_ENV
from quotaledger.journal.errors import Error, InvalidInput
from quotaledger.journal.limits import LOCK_TIMEOUT_S_DEFAULT
from quotaledger.journal.target import DEFAULT_JOURNAL
from quotaledger.render.output import Output

_F = TypeVar("_F", bound=Callable[..., Any])


class OptionError(click.BadParameter):
    """A bad option value with its public error code (main() reports `code`): click
    adds the option's name to the message, unless the value's `error` names it."""

    def __init__(self, message: str, *, code: str, error: Error | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.error = error
        """The error that names the option itself (as its `about`), worded by the CLI."""


DURATION_HELP = "Seconds, or a duration: 90s, 1.5h, 1h30m, 2d."


def duration_option(flag: str, text: str, *, whole: bool = True, **options: Any) -> Any:
    """A `--*-s` option (SPEC §8): plain seconds or a duration (`90s`, `30m`, `2h`,
    `1d`), parsed by `journal.clock.parse_duration_s`, the one duration parser.

    `whole=True` (the default) refuses a fraction of a second; `whole=False` takes
    one (whole seconds still come as an int). `options` go to typer.Option (`envvar`, ...).
    """

    field = flag.removeprefix("--").replace("-", "_")  # the request's, the API's name

    def parse(value: str | float) -> float:
        if isinstance(value, int | float):  # a default given as a number
            return value
        try:
            seconds = parse_duration_s(value, field)
            if whole and not isinstance(seconds, int):
                raise InvalidInput(
                    lambda name: f"{name} must be a whole number of seconds, got {value!r}",
                    code=codes.INVALID_DURATION,
                    about=field,
                )
        except InvalidInput as error:
            raise OptionError(error.message, code=error.code, error=error) from None
        return seconds

    parse.whole = whole  # type: ignore[attr-defined]  # for the CLI client's grammar
    return typer.Option(
        flag,
        help=f"{text} {DURATION_HELP}",
        parser=parse,
        metavar="DURATION",
        show_default=False,
        **options,
    )


def choice_option(flag: str, choices: tuple[str, ...], text: str, **options: Any) -> Any:
    """An enumerated option whose choices show in --help (SPEC §8). The command's
    service checks the value, so a wrong one keeps its own error code."""
    return typer.Option(
        flag, help=text, metavar="[" + "|".join(choices) + "]", show_default=False, **options
    )


JournalOpt = Annotated[
    str | None,
    typer.Option(
        "--journal",
        envvar=JOURNAL_ENV,
        help="Journal file path or postgresql:// URL [default: ./quotaledger.jsonl].",
        show_default=False,
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json/--no-json",
        envvar=JSON_ENV,
        help=f"Print exactly one JSON object (--no-json overrides {JSON_ENV}).",
    ),
]
LockTimeoutOpt = Annotated[
    float | None,
    duration_option(
        "--lock-timeout-s",
        "How long to wait for the journal lock before exit 4 [default: 30s].",
        whole=False,
        envvar=LOCK_TIMEOUT_S_ENV,
    ),
]
AtOpt = Annotated[
    str | None,
    typer.Option("--at", help="Event time (RFC 3339); writers refuse one before the goal's last."),
]
GoalOpt = Annotated[str, typer.Option("--goal", help="Goal (campaign) identifier.")]
CheckedAtOpt = Annotated[
    str | None,
    typer.Option(
        "--at",
        help="Accepted by every command (RFC 3339); this one records no time of its "
        "own, so it only checks T.",
    ),
]


_COMMON = [
    inspect.Parameter(
        "journal", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=JournalOpt
    ),
    inspect.Parameter("json_", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=JsonOpt),
    inspect.Parameter(
        "lock_timeout_s", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=LockTimeoutOpt
    ),
]
_CHECKED_AT = inspect.Parameter(
    "at", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=CheckedAtOpt
)


def command(
    app: typer.Typer,
    name: str,
    *,
    example: str,
    journal_option: Any = None,
    journal_default: str = DEFAULT_JOURNAL,
    **options: Any,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register `func(ctx, **params)` as a command with the common options.

    `journal_option`/`journal_default` let a command (demo) take a different
    `--journal` option, e.g. one that ignores QUOTALEDGER_JOURNAL.
    """
    common = _COMMON
    if journal_option is not None:
        common = [_COMMON[0].replace(annotation=journal_option), *_COMMON[1:]]

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(func).parameters.values() if p.name != "ctx"]
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
        # A script may pass --at to every command (SPEC §2.2): one that records no time
        # of its own still accepts it. Every command refuses a malformed one before it
        # opens the journal (whose recovery could otherwise move a torn tail first).
        takes_at = any(p.name == "at" for p in own)
        added = common if takes_at else [*common, _CHECKED_AT]
        identifiers = [p.name for p in own if p.name in IDENTIFIER_OPTIONS]

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> None:
            as_json = bool(kwargs.pop("json_"))
            at = kwargs["at"] if takes_at else kwargs.pop("at")
            timeout = kwargs.pop("lock_timeout_s")
            journal = kwargs.pop("journal")  # None when neither the option nor the env
            ctx = Ctx(
                journal_target=journal_default if journal is None else journal,
                as_json=as_json,
                lock_timeout_s=LOCK_TIMEOUT_S_DEFAULT if timeout is None else timeout,
            )
            given = {name: kwargs[name] for name in identifiers}
            raise typer.Exit(run_command(lambda: func(ctx, **kwargs), ctx, at, given, kwargs))

        del wrapper.__wrapped__  # typer must see the new signature, not the original
        wrapper.__signature__ = inspect.Signature(own + added)  # type: ignore[attr-defined]
        doc = inspect.cleandoc(func.__doc__ or name)
        # A "\b" line: click prints the example unwrapped (a wrapped one does not paste).
        help_text = f"{doc}\n\nExample:\n\n\b\n    {example}"
        app.command(name, help=help_text, **options)(wrapper)
        return func

    return register


class CommandTable:
    """The commands one CLI module defines at module level, each with its name and
    `command` options, in order. `add_to(app)` registers them on the app (or group)
    that `build_app` creates afresh, so nothing typer mutates is shared between builds
    (tests build an app per in-process call)."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, dict[str, Any], Callable[..., Any]] | CommandTable] = []

    def __call__(self, name: str, **options: Any) -> Callable[[_F], _F]:
        def declare(func: _F) -> _F:
            self._entries.append((name, options, func))
            return func

        return declare

    def include(self, other: "CommandTable") -> None:
        """Registers `other`'s commands at this point of this table's order (a module
        kept apart for start-up, listed in its family's place in the help)."""
        self._entries.append(other)

    def add_to(self, app: typer.Typer) -> None:
        for entry in self._entries:
            if isinstance(entry, CommandTable):
                entry.add_to(app)
            else:
                name, options, func = entry
                command(app, name, **options)(func)


__all__ = [
    "IDENTIFIER_OPTIONS",
    "AtOpt",
    "Ctx",
    "GoalOpt",
    "Output",
    "check_common_input",
    "closed_stdout",
    "command",
    "request_of",
]
