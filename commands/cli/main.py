"""The `quotaledger` command line: a thin layer over `quotaledger.Ledger`."""

import importlib
import sys
from typing import TYPE_CHECKING, Annotated

from quotaledger.console.collector import collector_paused

if TYPE_CHECKING:
    import click

with collector_paused():
    import typer
    import typer.main
    from click import exceptions as click_errors

    from quotaledger import __version__
    from quotaledger.cli.strict_numbers import harden
    from quotaledger.console.context import aborted, guarded
    from quotaledger.console.inputs import env_json
    from quotaledger.render.outcome import EXIT_OK
    from quotaledger.render.output import emit_error
    from quotaledger.startup import COMMAND_MODULES, MODULE_ORDER


def build_app(
    modules: tuple[str, ...] = MODULE_ORDER, invoked: list[str] | None = None
) -> typer.Typer:
    """The typer app with the commands of `modules` (all of them by default).

    With `invoked` (the command line's words), a command or group named by them keeps
    only that command: typer turns every registered function into a click command
    (signature, type hints, options) on every start, and one call runs one command.
    """
    app = typer.Typer(
        name="quotaledger",
        help="A hash-chained, fsynced journal that decides benchmark admission against a "
        "shared TPM quota, continues failed host lanes, and settles quota spends exactly "
        "once.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        # click already appends "Did you mean"; typer's own would say it a second time.
        suggest_commands=False,
        # Inherited by every command and group below.
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    for name in modules:
        importlib.import_module(f"quotaledger.cli.{name}").register(app)
    if invoked:
        _keep_only(app, invoked)
    return app


def print_version() -> None:
    sys.stdout.write(f"quotaledger {__version__}\n")


def _keep_only(app: typer.Typer, invoked: list[str]) -> None:
    """Drops the commands `invoked` does not name, level by level. A level whose word
    names none of its commands (an option, `--help`, a typo) keeps them all, so help
    and click's "No such command" suggestions are unchanged."""
    word, rest = invoked[0], invoked[1:]
    commands = [c for c in app.registered_commands if c.name == word]
    groups = [g for g in app.registered_groups if g.name == word]
    if commands or groups:
        app.registered_commands, app.registered_groups = commands, groups
    for group in groups:
        if rest and group.typer_instance is not None:
            _keep_only(group.typer_instance, rest)


def _show_version(wanted: bool) -> None:
    if wanted:
        print_version()
        raise typer.Exit(EXIT_OK)


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", is_eager=True, callback=_show_version
        ),
    ] = False,
) -> None:
    # Only the eager --version; the app's help text stays the one given to typer.Typer.
    return None


def __getattr__(name: str) -> typer.Typer:
    # `quotaledger.cli.main.app`: the full app, for tools and tests that walk every command.
    if name == "app":
        return build_app()
    raise AttributeError(name)


def main(argv: list[str] | None = None) -> int:
    """Entry point: runs a command and turns every outcome into an exit code."""
    args = sys.argv[1:] if argv is None else argv
    # Before parsing (a usage error must still answer in JSON); the last flag wins,
    # and an explicit flag wins over QUOTALEDGER_JSON.
    flags = [a for a in args if a in ("--json", "--no-json")]
    as_json = flags[-1] == "--json" if flags else bool(env_json())
    if args == ["--version"]:  # answered before any command module is built
        print_version()
        return _exit(EXIT_OK, argv)
    return _exit(guarded(lambda: _run(args, as_json=as_json), as_json=as_json), argv)


def _run(args: list[str], *, as_json: bool) -> int:
    """The command `args` names, run by click: its exit code."""
    try:
        module = COMMAND_MODULES.get(args[0]) if args else None
        with collector_paused():
            app = build_app() if module is None else build_app((module,), invoked=args)
        code = harden(typer.main.get_command(app)).main(
            args=args, prog_name="quotaledger", standalone_mode=False
        )
    except typer.Exit as done:
        code = done.exit_code
    except click_errors.NoArgsIsHelpError as error:  # bare `quotaledger` or `quotaledger host`
        sys.stdout.write(error.ctx.get_help() + "\n")
        code = EXIT_OK
    except click_errors.UsageError as error:
        from quotaledger.cli.parse_errors import parser_error

        error = _hint_option_after_command(error, args) or error
        # One line with the option's code, as every error (SPEC §8).
        code = emit_error(parser_error(error), as_json=as_json)
    except typer.Abort:
        code = aborted()
    return EXIT_OK if code is None else int(code)


def _hint_option_after_command(
    error: "click.UsageError", args: list[str]
) -> "click.UsageError | None":
    """`quotaledger --journal j inspect`: the root knows no --journal, and click's
    "No such option" (or its "Did you mean '--version'?") does not say that the
    options every command takes go after the command's name (SPEC §8)."""
    if not isinstance(error, click_errors.NoSuchOption):
        return None
    if error.ctx is None or error.ctx.parent is not None:  # a command's own options
        return None
    words = [a for a in args if not a.startswith("-")]
    command = next((i for i, word in enumerate(words) if word in COMMAND_MODULES), None)
    if command is None:
        return None
    # The group's subcommand too (`host status`), when the next word is one.
    groups = ("host", "budget", "turn", "probe", "price")
    named = words[command : command + 2] if words[command] in groups else words[command:][:1]
    # Without click's "Did you mean '--version'?": the option exists, in another place.
    return click_errors.UsageError(
        f"{error.message} (options go after the command: quotaledger {' '.join(named)} "
        f"{error.option_name} ...)",
        ctx=error.ctx,
    )


def _exit(code: int, argv: list[str] | None) -> int:
    if argv is None:
        sys.exit(code)
    return code
