"""Numbers on the command line as SPEC §8 means them: ASCII digits, bounded.

click converts an integer option with Python's `int()`, which also takes `١٢` (Arabic-
Indic digits), `1_000` and surrounding blanks, and raises a bare ValueError beyond
4,300 digits; its float takes `nan`, `inf` and `1e400`. `harden` gives every integer
and float option of a command these strict types instead, so a value is a number
only as a user would type one, and what is refused is refused by the option parser,
whose error `parse_errors` gives the option's one code.
"""

from __future__ import annotations

import math
from typing import Any

import click

from quotaledger.console.numbers import FLOAT, INTEGER
from quotaledger.journal.limits import NUMBER_CHARS_MAX


class StrictInt(click.types.IntParamType):
    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        text = str(value)
        if len(text) > NUMBER_CHARS_MAX or INTEGER.fullmatch(text) is None:
            self.fail(f"{_shown(text)} is not a valid integer", param, ctx)
        return int(text)


class StrictFloat(click.types.FloatParamType):
    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        text = str(value)
        if len(text) > NUMBER_CHARS_MAX or FLOAT.fullmatch(text) is None:
            self.fail(f"{_shown(text)} is not a valid number", param, ctx)
        number = float(text)
        if not math.isfinite(number):  # 1e400
            self.fail(f"{_shown(text)} is not a finite number", param, ctx)
        return number


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:20]) + f"... ({len(text)} characters)"


def harden(command: click.Command) -> click.Command:
    """`command` (and its subcommands) with strict integer and float options."""
    for param in command.params:
        if isinstance(param.type, click.types.IntParamType) and not isinstance(
            param.type, click.types.IntRange
        ):
            param.type = StrictInt()
        elif isinstance(param.type, click.types.FloatParamType) and not isinstance(
            param.type, click.types.FloatRange
        ):
            param.type = StrictFloat()
    for child in getattr(command, "commands", {}).values():
        harden(child)
    return command


__all__ = ["StrictFloat", "StrictInt", "harden"]
