"""What the inspect_ai hooks (adapters.inspect_ai) read from the environment, and the
names they give a sample in the journal (SPEC §13.1). Nothing here imports
inspect_ai: the settings and the names are checked without it.

- the run of a sample is `<eval_id>/<sample uuid>`: unique per sample and epoch, and
  what `validity --json`'s rows join an inspect log's samples by;
- its case is `<sample id>@<epoch>`, a sample id outside the identifier rule (SPEC §8)
  becoming `sha256:<its first 16 hex>`;
- the request (arm, forecasts, lease) and the wait bound come from the
  `QUOTALEDGER_INSPECT_*` variables, the journal from `QUOTALEDGER_JOURNAL` (a path,
  a postgresql:// URL or a server's URL; its token from `QUOTALEDGER_TOKEN`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from quotaledger.journal import codes
from quotaledger.journal.environment import (
    INSPECT_ARM_ENV,
    INSPECT_FORECAST_ENV,
    INSPECT_GOAL_ENV,
    INSPECT_LEASE_S_ENV,
    INSPECT_WAIT_S_ENV,
    JOURNAL_ENV,
)
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.identifier import is_identifier
from quotaledger.journal.limits import WAIT_S_MAX, WAIT_TTL_MARGIN_S

GOAL_ENV = INSPECT_GOAL_ENV
"""The goal every sample is admitted on: set, the hooks are enabled."""
ARM_ENV = INSPECT_ARM_ENV
LEASE_S_ENV = INSPECT_LEASE_S_ENV
WAIT_S_ENV = INSPECT_WAIT_S_ENV
FORECAST_ENV = INSPECT_FORECAST_ENV
ENV_OF: dict[str, str] = {
    "goal": GOAL_ENV,
    "arm": ARM_ENV,
    "lease_s": LEASE_S_ENV,
    "wait_s": WAIT_S_ENV,
    **FORECAST_ENV,
}
"""The variable that sets each of the admission's parameters (an error names it)."""

ARM_DEFAULT = "treatment"
LEASE_S_DEFAULT = 900
SAMPLE_WAIT_S_DEFAULT = 3600
"""A sample waits this long for its admission unless told otherwise; the range is
`admit --wait-timeout-s`'s (WAIT_S_MAX, SPEC §12.2)."""
QUEUE_TTL_PAST_WAIT_S = WAIT_TTL_MARGIN_S
"""The queue entry outlives the wait by this much (SPEC §13.1), so a waiter's last
poll still finds it."""
HASHED_ID_HEX = 16


@dataclass(frozen=True)
class Settings:
    """One process's admission request and where it is sent."""

    journal: str
    goal: str
    arm: str
    lease_s: int
    wait_s: int
    forecasts: Mapping[str, int | float]

    @property
    def queue_ttl_s(self) -> int:
        return min(self.wait_s + QUEUE_TTL_PAST_WAIT_S, WAIT_S_MAX)

    def admission(self, run: str, case: str) -> dict[str, Any]:
        """The keyword arguments of `Ledger.admit` for one sample (without the queue's)."""
        return {
            "goal": self.goal,
            "run": run,
            "case": case,
            "arm": self.arm,
            "lease_s": self.lease_s,
            **self.forecasts,
        }


def enabled(environ: Mapping[str, str]) -> bool:
    return bool(environ.get(GOAL_ENV, "").strip())


def settings(environ: Mapping[str, str]) -> Settings:
    """The settings the environment gives, or InvalidInput naming the variable at fault
    (the Ledger checks the values' ranges, and its errors are reworded with
    `worded_for_environment`)."""
    journal = environ.get(JOURNAL_ENV, "").strip()
    if not journal:
        raise InvalidInput(
            f"{JOURNAL_ENV} is not set: the inspect_ai hooks need the journal (a path, a "
            "postgresql:// URL or a server's URL)",
            code=codes.INVALID_ARGUMENT,
        )
    forecasts: dict[str, int | float] = {}
    for parameter, name in FORECAST_ENV.items():
        text = environ.get(name, "").strip()
        if text:
            forecasts[parameter] = _number(name, text, whole=parameter != "forecast_usd")
    wait_s = int(
        _number(WAIT_S_ENV, environ.get(WAIT_S_ENV, "").strip() or str(SAMPLE_WAIT_S_DEFAULT))
    )
    if not 1 <= wait_s <= WAIT_S_MAX:
        raise InvalidInput(
            f"{WAIT_S_ENV} must be an integer from 1 to {WAIT_S_MAX}, got {wait_s}",
            code=codes.INVALID_ARGUMENT,
        )
    lease_text = environ.get(LEASE_S_ENV, "").strip() or str(LEASE_S_DEFAULT)
    return Settings(
        journal=journal,
        goal=environ.get(GOAL_ENV, "").strip(),
        arm=environ.get(ARM_ENV, "").strip() or ARM_DEFAULT,
        lease_s=int(_number(LEASE_S_ENV, lease_text)),
        wait_s=wait_s,
        forecasts=forecasts,
    )


def _number(name: str, text: str, *, whole: bool = True) -> int | float:
    try:
        value = float(text) if not whole else int(text)
    except ValueError:
        kind = "an integer" if whole else "a number"
        raise InvalidInput(
            f"{name} must be {kind}, got {text!r}", code=codes.INVALID_ARGUMENT
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(
            f"{name} must be a finite number, got {text!r}", code=codes.INVALID_ARGUMENT
        )
    return value


def worded_for_environment(error: InvalidInput) -> str:
    """The Ledger's complaint about a parameter, naming the variable that set it (the
    parameter is the error's `about`, or the `option` a request's check names)."""
    if error.about in ENV_OF:
        return error.worded(lambda name: ENV_OF.get(name, name))
    option = error.context.get("option")
    if option in ENV_OF and error.message.startswith(f"{option} "):
        return ENV_OF[option] + error.message[len(option) :]
    return error.message


def run_name(eval_id: str, sample_uuid: str) -> str:
    """`<eval_id>/<sample uuid>` (SPEC §13.1): both are inspect's short uuids."""
    return f"{eval_id}/{sample_uuid}"


def case_name(sample_id: int | str, epoch: int) -> str:
    """`<sample id>@<epoch>`, a sample id outside the identifier rule hashed: the
    case stays an identifier, and the same sample id always names the same case."""
    text = str(sample_id)
    case = f"{text}@{epoch}"
    if is_identifier(case):
        return case
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:HASHED_ID_HEX]
    return f"sha256:{digest}@{epoch}"
