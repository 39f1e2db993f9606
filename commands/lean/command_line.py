"""A command line read with the table generated from the typer app (lean/grammar.py)
exactly as click reads it, or not at all (`Unread`: the full CLI runs it): what a
client of a server (lean/remote_call.py) and a per-event command on a local journal
(lean/local.py) both run on, without typer or click.
"""

from __future__ import annotations

import os
from typing import Any

from quotaledger.console.inputs import env_json
from quotaledger.console.numbers import finite, integer
from quotaledger.journal.environment import JSON_ENV, LOCK_TIMEOUT_S_ENV
from quotaledger.journal.errors import Error
from quotaledger.journal.limits import LOCK_TIMEOUT_S_DEFAULT
from quotaledger.lean.grammar import COMMANDS, IDENTIFIERS


class Unread(Exception):
    """A command line the grammar does not read as click would: the full CLI runs it."""


class Call:
    """One command line, read: the use case, its request, how to print its answer."""

    def __init__(self, args: list[str]) -> None:
        words = 2 if " ".join(args[:2]) in COMMANDS else 1
        key = " ".join(args[:words])
        if key not in COMMANDS or args[:words][-1].startswith("-"):
            raise Unread(key)
        self.name, self.writes, flags, options = COMMANDS[key]
        given = _given(args[words:], flags, options)
        self.target: str | None = given.pop("journal", None)
        json_flag = given.pop("json_", None)
        from_env = env_json()
        if from_env is None:
            raise Unread(JSON_ENV)  # a value click refuses, even with --json
        self.as_json = from_env if json_flag is None else bool(json_flag)
        self.lock_timeout: str | None = given.pop("lock_timeout_s", None)
        """--lock-timeout-s as given (a server's client leaves it to the full CLI)."""
        flag_of = {index: flag for flag, (index, on) in reversed(flags.items()) if on}
        self.flags: dict[str, str] = {}
        """Each request field's flag (its option's first), for an error's wording."""
        self.at: str | None = given.get("at")
        self.request: dict[str, Any] = {}
        self.identifiers: dict[str, str] = {}
        self.shown: dict[str, Any] = {}
        self.values: dict[str, Any] = {}
        """Each option's value by parameter, as click gives them to the command."""
        chosen: dict[str, list[tuple[str, str]]] = {}
        """Each field a choice makes: the values and flags given for it."""
        for index, option in enumerate(options):
            param, kind, _multiple, _required, value, field, _role = option
            if kind == "choice":
                made = [(value, flag_of[index])] if param in given else []
                chosen[field] = chosen.get(field, []) + made
            else:
                self._read(option, given, flag_of[index])
        for field, made in chosen.items():
            if len(made) != 1:
                raise Unread(field)  # none or both of --open/--settle: the full CLI says so
            self.request[field], self.flags[field] = made[0]

    def _read(self, option: Any, given: dict[str, Any], flag: str) -> None:
        param, kind, multiple, required, default, field, role = option
        if role in ("common", "checked"):
            return
        if param not in given:
            if required:
                raise Unread(param)
            if role == "":
                return
            value = default
        elif role == "":
            raise Unread(param)  # an option that fills no field (`metrics --listen`)
        else:
            raw = given[param]
            value = [_value(kind, v) for v in raw] if multiple else _value(kind, raw)
        self.values[param] = value
        if param in IDENTIFIERS and value is not None:
            self.identifiers[IDENTIFIERS[param]] = value
        if role == "text":
            self.shown[param] = value
        else:
            self.request[field] = value
            self.flags[field] = flag


def _given(args: list[str], flags: dict[str, Any], options: list[Any]) -> dict[str, Any]:
    """Each option's value(s) as given (the last of a repeated one, as click keeps)."""
    given: dict[str, Any] = {}
    rest = iter(args)
    for arg in rest:
        # A short option only as a word of its own (`-f`): click reads `-fx` and `-f=x`
        # in ways of its own.
        flag, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        found = flags.get(flag)
        if found is None:
            raise Unread(arg)  # an argument, `--help`, a typo
        index, on = found
        param, kind, multiple = options[index][:3]
        if kind in ("flag", "choice"):
            if eq:
                raise Unread(arg)
            given[param] = on
            continue
        if not eq:
            following = next(rest, None)
            if following is None:
                raise Unread(arg)
            value = following
        if multiple:
            given.setdefault(param, []).append(value)
        else:
            given[param] = value
    return given


def _value(kind: str, text: str) -> Any:
    if kind == "int":
        number: int | float | None = integer(text)
    elif kind == "float":
        number = finite(text)
    elif kind.startswith("duration"):
        number = _duration(text, whole=kind == "duration_s")
    else:
        return text  # a string, or the name of a `FILE|-` option's file (read later)
    if number is None:
        raise Unread(text)
    return number


def _duration(text: str, *, whole: bool) -> int | float | None:
    from quotaledger.journal.clock import parse_duration_s

    try:
        seconds = parse_duration_s(text, "duration")  # its error: the full CLI words it
    except Error:
        return None
    if whole:
        return seconds if isinstance(seconds, int) else None
    return float(seconds)


def lock_timeout_s(command: Call) -> float:
    """--lock-timeout-s, else QUOTALEDGER_LOCK_TIMEOUT_S, else the default; a value
    the duration parser refuses is worded by the full CLI (click's usage error)."""
    text = command.lock_timeout
    if text is None:
        text = os.environ.get(LOCK_TIMEOUT_S_ENV) or None
    if text is None:
        return LOCK_TIMEOUT_S_DEFAULT
    from quotaledger.journal.clock import parse_duration_s

    try:
        return parse_duration_s(text, "lock_timeout_s")
    except Error:
        raise Unread(text) from None
