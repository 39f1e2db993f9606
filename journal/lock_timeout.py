"""The lock wait a caller may ask for (SPEC §2.3), checked before anything opens: by
the engine, by the CLI, and by the CLI's client of a server, which loads nothing
else of the engine to check it.
"""

from __future__ import annotations

import math

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.limits import LOCK_TIMEOUT_S_MAX


def check_lock_timeout_s(value: object) -> float:
    """`value` as a lock wait in seconds, 0..LOCK_TIMEOUT_S_MAX; nan and inf refused:
    every wait for the lock is bounded (SPEC §2.3)."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value <= LOCK_TIMEOUT_S_MAX  # also false for nan
        and not math.isinf(value)
    ):
        return float(value)
    raise InvalidInput(
        lambda name: f"{name} must be between 0 and {LOCK_TIMEOUT_S_MAX:g} seconds",
        code=codes.INVALID_OPTION,
        about="lock_timeout_s",
    )
