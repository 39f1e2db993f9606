"""runledger's storage engine: records, stores, recovery, checkpoints, transactions.

The journal knows nothing of the domain; a `Projector` supplies payload schemas and
the fold.
"""

from journal.chain import Head
from journal.errors import (
    InvalidInput,
    JournalCorrupt,
    JournalPoisoned,
    LockTimeout,
    NotRegularFile,
    RunledgerError,
    StorageFailure,
    TimeRegression,
)
from journal.journal import Journal, Projector, Transaction, open_store
from journal.record import Record

__all__ = [
    "Head",
    "InvalidInput",
    "Journal",
    "JournalCorrupt",
    "JournalPoisoned",
    "LockTimeout",
    "NotRegularFile",
    "Projector",
    "Record",
    "RunledgerError",
    "StorageFailure",
    "TimeRegression",
    "Transaction",
    "open_store",
]
