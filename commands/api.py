"""The Python API a runner holds in-process; the CLI is a thin layer over it.

    from commands.api import Runledger

    with Runledger.open("runledger.jsonl") as ledger:
        decision = ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=2000)

Every method returns the same JSON-ready dict the CLI prints with `--json`;
expected failures raise `journal.RunledgerError` subclasses.
"""

from __future__ import annotations

from typing import Any

from commands.capacity_service import CapacityService
from commands.host_service import HostService
from commands.journal_service import JournalService
from commands.operator_service import OperatorService
from commands.probe_service import ProbeService
from commands.settlement_service import SettlementService
from journal import Journal
from journal.limits import CHECKPOINT_EVERY_EVENTS, LOCK_TIMEOUT_S_DEFAULT
from projections.ledger import PROJECTOR


class Runledger(
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
    ) -> Runledger:
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

    def __enter__(self) -> Runledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
