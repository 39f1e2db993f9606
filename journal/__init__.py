"""quotaledger's storage engine: records, stores, recovery, checkpoints, transactions.

The journal knows nothing of the domain; a `Projector` supplies payload schemas and
the fold.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from quotaledger.journal.chain import Head
    from quotaledger.journal.errors import (
        Error,
        InvalidInput,
        JournalCorrupt,
        JournalPoisoned,
        JournalReplaced,
        LockTimeout,
        NotAJournal,
        NotRegularFile,
        StorageFailure,
        TimeInFuture,
        TimeRegression,
    )
    from quotaledger.journal.journal import Journal, Projector, Transaction, open_store
    from quotaledger.journal.record import Record

__all__ = [
    "Error",
    "Head",
    "InvalidInput",
    "Journal",
    "JournalCorrupt",
    "JournalPoisoned",
    "JournalReplaced",
    "LockTimeout",
    "NotAJournal",
    "NotRegularFile",
    "Projector",
    "Record",
    "StorageFailure",
    "TimeInFuture",
    "TimeRegression",
    "Transaction",
    "open_store",
]

_HOME = {
    "Head": "chain",
    **dict.fromkeys(("Journal", "Projector", "Transaction", "open_store"), "journal"),
    "Record": "record",
}
"""Where each name lives; every other name of `__all__` is an error (`errors`)."""


def __getattr__(name: str) -> typing.Any:
    # Resolved on first use, so that `quotaledger.journal.codes` and `.errors` load
    # alone: a client of a server (quotaledger.client) needs them and not the engine.
    if name not in __all__:
        raise AttributeError(f"module 'quotaledger.journal' has no attribute {name!r}")
    module = importlib.import_module(f"quotaledger.journal.{_HOME.get(name, 'errors')}")
    return getattr(module, name)
