"""The Python API a runner holds in-process; the CLI is a thin layer over it.

    from quotaledger.api import Ledger

    with Ledger.open("quotaledger.jsonl") as ledger:
        decision = ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=2000)

Every method returns the same JSON-ready dict the CLI prints with `--json`;
expected failures raise `journal.Error` subclasses.
"""

from __future__ import annotations

from typing import Any

from quotaledger.journal import Journal
from quotaledger.journal.limits import CHECKPOINT_EVERY_EVENTS, LOCK_TIMEOUT_S_DEFAULT
from quotaledger.projections.ledger import PROJECTOR
from quotaledger.services.capacity import CapacityService
from quotaledger.services.host import HostService
from quotaledger.services.journal import JournalService
from quotaledger.services.operator import OperatorService
from quotaledger.services.probe import ProbeService
from quotaledger.services.settlement import SettlementService


class Ledger(
    JournalService, CapacityService, HostService, SettlementService, ProbeService, OperatorService
):
    """One open journal and every use case over it."""

    @classmethod
    def open(
        cls,
        target: str,
        *,
        write: bool = True,
        lock_timeout_s: float = LOCK_TIMEOUT_S_DEFAULT,
        checkpoint_every: int = CHECKPOINT_EVERY_EVENTS,
        allow_corrupt: bool = False,
    ) -> Ledger:
        journal = Journal.open(
            target,
            PROJECTOR,
            write=write,
            lock_timeout_s=lock_timeout_s,
            checkpoint_every=checkpoint_every,
            allow_corrupt=allow_corrupt,
        )
        return cls(journal)

    def close(self) -> None:
        self.journal.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
