"""quotaledger's storage engine: records, stores, recovery, checkpoints, transactions.

The journal knows nothing of the domain; a `Projector` supplies payload schemas and
the fold.
"""

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
