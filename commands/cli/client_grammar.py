"""The CLI client's grammar (quotaledger/lean/grammar.py), generated from the typer app.

    python -m quotaledger.cli.client_grammar > commands/lean/grammar.py

A CLI call with a server's URL (SPEC §11) reads its command line without typer
(quotaledger.lean.remote_call): each served command's options, their kinds, defaults and
request fields are taken here from the very click commands the local CLI parses with,
and tests/cli/test_client_grammar.py fails when the committed table differs.
"""

from __future__ import annotations

import sys
from typing import Any

import click
import msgspec
import typer.main

from quotaledger.cli.common import IDENTIFIER_OPTIONS
from quotaledger.cli.host import REPLAN_ACTIONS
from quotaledger.cli.main import build_app
from quotaledger.cli.strict_numbers import StrictFloat, StrictInt
from quotaledger.console.inputs import STDIN_OPTIONS
from quotaledger.render.output import TEXT_OPTIONS
from quotaledger.usecases.decode import CLI
from quotaledger.usecases.registry import SERVED

COMMON = {"journal": "journal", "json_": "json", "lock_timeout_s": "lock_timeout_s"}
"""Every command's own options (cli/common.py), read by the client itself."""
CHOICES = {"host_replan": ("action", REPLAN_ACTIONS)}
"""Flags that make a request field's value, by use case: (field, {parameter: value});
exactly one of them is given."""


def kind_of(param: click.Parameter) -> str:
    """How the client reads an option's value: flag, int, float, str, input (a `FILE|-`
    option), duration_s (whole seconds) or duration (seconds, fractions allowed); a
    flag of CHOICES is a choice (`option_of`)."""
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    if param.name in STDIN_OPTIONS:
        return "input"
    whole = getattr(getattr(param.type, "func", None), "whole", None)
    if whole is not None:
        return "duration_s" if whole else "duration"
    if isinstance(param.type, click.types.IntParamType | StrictInt):
        return "int"
    if isinstance(param.type, click.types.FloatParamType | StrictFloat):
        return "float"
    return "str"


def field_of(param: click.Parameter, fields: set[str]) -> str | None:
    """The request field an option fills: its own name, or the field whose flag it is
    (`--turn` fills `turn`, `--hash` `hash`); None for an option that fills none."""
    if param.name in fields:
        return param.name
    flags = param.opts if isinstance(param, click.Option) else []
    return next((f for f in sorted(fields) if CLI(f) in flags), None)


def default_of(param: click.Parameter, command: click.Command) -> Any:
    """The value the command receives when the option is not given, as typer gives it."""
    ctx = click.Context(command)
    value = param.get_default(ctx, call=True)
    if value is None or (param.multiple and not value):
        return [] if param.multiple else None
    converted = param.type_cast_value(ctx, value)
    return list(converted) if param.multiple else converted


def option_of(param: click.Parameter, command: click.Command, fields: set[str], case: str) -> Any:
    """(parameter, kind, multiple, required, default, request field or "", its role):
    the role is "common", "text" (TEXT_OPTIONS), "request", "checked" (`--at` of a
    command that records no time: only checked) or "" (the client leaves a call that
    gives it to the full CLI). A choice's default is the value it makes."""
    name = param.name or ""
    choice_field, choices = CHOICES.get(case, ("", {}))
    if name in choices:
        return (name, "choice", False, False, choices[name], choice_field, "request")
    field = field_of(param, fields)
    if name in COMMON:
        role = "common"
    elif name in TEXT_OPTIONS:
        role = "text"
    elif field:
        role = "request"
    else:
        role = "checked" if name == "at" else ""
    default = None if role == "common" else default_of(param, command)
    return (name, kind_of(param), param.multiple, param.required, default, field or "", role)


def commands_table() -> dict[str, Any]:
    """Each served command's words: (use case, writes, {flag: option index}, options)."""
    root = typer.main.get_command(build_app())
    table: dict[str, Any] = {}
    for name, case in SERVED.items():
        words = case.command
        if words is None or not (case.text or case.output or case.streams):
            continue
        command: Any = root
        for word in words.split():
            command = command.commands[word]
        request_type = case.request_type()
        fields = set(request_type.__struct_fields__)
        options = [option_of(p, command, fields, name) for p in command.params]
        filled = {option[5] for option in options}
        required = {f.name for f in msgspec.structs.fields(request_type) if f.required}
        assert required <= filled, f"{words}: no option fills {required - filled}"
        flags = {}
        for index, param in enumerate(command.params):
            if isinstance(param, click.Option):
                for flag in param.opts:
                    flags[flag] = (index, True)
                for flag in param.secondary_opts:
                    flags[flag] = (index, False)
        table[words] = (name, case.writes, flags, options)
    return table


def generated() -> str:
    lines = [
        "# ruff: noqa: E501",
        '"""GENERATED by `python -m quotaledger.cli.client_grammar`: do not edit.',
        "",
        "Each served command's words: (use case, writes, {flag: (option, value of a flag)},",
        "options as (parameter, kind, multiple, required, default, request field, role)),",
        "a choice's default being the value it makes (exactly one of a field's choices is",
        "given), and the options whose values are identifiers (cli/common.py), by parameter.",
        '"""',
        "",
        "from typing import Any",
        "",
        "# fmt: off",
        f"IDENTIFIERS = {IDENTIFIER_OPTIONS!r}",
        "",
        "COMMANDS: dict[str, Any] = {",
    ]
    for words, (name, writes, flags, options) in commands_table().items():
        lines += [f"    {words!r}: (", f"        {name!r}, {writes!r},", f"        {flags!r},"]
        lines += ["        [", *(f"            {option!r}," for option in options), "        ],"]
        lines.append("    ),")
    lines += ["}", "# fmt: on"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(generated())
