"""Numbers on the command line as SPEC §8 means them: ASCII digits, bounded, finite.

The local CLI's option parser (cli/strict_numbers.py) and the CLI client of a server
(lean/remote_call.py) read them with these same rules.
"""

from __future__ import annotations

import math
import re

from quotaledger.journal.limits import NUMBER_CHARS_MAX

INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def integer(text: str) -> int | None:
    """The integer `text` spells, or None if it is not one."""
    if len(text) > NUMBER_CHARS_MAX or INTEGER.fullmatch(text) is None:
        return None
    return int(text)


def finite(text: str) -> float | None:
    """The finite number `text` spells, or None if it is not one (`nan`, `1e400`)."""
    if len(text) > NUMBER_CHARS_MAX or FLOAT.fullmatch(text) is None:
        return None
    number = float(text)
    return number if math.isfinite(number) else None
