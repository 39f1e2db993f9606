"""The Python API a runner holds in-process; the CLI is a thin layer over it.

    from quotaledger import Ledger

    with Ledger.open("quotaledger.jsonl") as ledger:
        decision = ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=2000)

Every method returns the same JSON-ready dict the CLI prints with `--json`;
expected failures raise `quotaledger.Error` subclasses. Every method takes keyword
arguments only; a value of the wrong type raises `InvalidInput` naming the parameter
(`quotaledger.arguments`), and a closed ledger refuses every call.
"""

from __future__ import annotations

import os
from typing import Any

from quotaledger.arguments import checked
from quotaledger.journal import InvalidInput, codes
from quotaledger.journal.limits import CHECKPOINT_EVERY_EVENTS, LOCK_TIMEOUT_S_DEFAULT
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

    closed = False

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
        """Open the journal at `target` (a file path or a postgresql:// URL)."""
        if isinstance(target, os.PathLike):
            target = os.fspath(target)
        if not isinstance(target, str) or not target:
            raise InvalidInput(
                f"target must name a journal (a path or a postgresql:// URL), not {target!r}",
                code=codes.INVALID_ARGUMENT,
                parameter="target",
            )
        return super().open(
            target,
            write=write,
            lock_timeout_s=lock_timeout_s,
            checkpoint_every=checkpoint_every,
            allow_corrupt=allow_corrupt,
        )

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.journal.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# Every public method of the services that follows the API's convention (keyword
# arguments only, SPEC §8) is checked at the boundary. A method with positional
# parameters is a helper the services call among themselves; `open`, `close` and the
# context-manager protocol stay as they are.
_UNCHECKED = frozenset({"open", "close"})
for _name in dir(Ledger):
    _method = getattr(Ledger, _name)
    _code = getattr(_method, "__code__", None)
    _public = not _name.startswith("_") and _name not in _UNCHECKED
    if _public and _code is not None and _code.co_argcount == 1:  # only `self` positional
        setattr(Ledger, _name, checked(_method))
del _name, _method, _code, _public
