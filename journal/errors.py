"""The errors the engine raises, each carrying its public code and exit code.

    Error                  exit 2 unless a subclass says otherwise
    ├── InvalidInput                2  bad argument or payload; nothing written
    │   ├── TimeRegression          2  explicit --at earlier than the goal's last event
    │   └── TimeInFuture            2  explicit --at beyond the clock-skew bound on a writer
    ├── JournalCorrupt              3  mid-log corruption, unreadable, wrong file type
    │   ├── NotRegularFile          3  a symlink, directory, FIFO or device
    │   ├── NotAJournal             3  a file whose first line is not a genesis record
    │   └── JournalReplaced         3  the path no longer names the file a handle holds
    └── StorageFailure              4  I/O failure; nothing acknowledged
        ├── LockTimeout             4  lock wait exceeded --lock-timeout-s
        └── JournalPoisoned         4  an fdatasync failed earlier on this handle

Lower-level OSErrors are translated into these at the store boundary; the
commands layer maps them to JSON error objects and exit codes in one place.
"""

from __future__ import annotations

from typing import Any


class Error(Exception):
    code = "error"
    exit_code = 2

    def __init__(self, message: str, *, code: str | None = None, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.context = context

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.context}


class InvalidInput(Error):
    code = "invalid_input"
    exit_code = 2


class TimeRegression(InvalidInput):
    code = "time_regression"


class TimeInFuture(InvalidInput):
    code = "time_in_future"


class JournalCorrupt(Error):
    code = "journal_corrupt"
    exit_code = 3


class NotRegularFile(JournalCorrupt):
    code = "not_regular_file"


class NotAJournal(JournalCorrupt):
    code = "not_a_journal"


class JournalReplaced(JournalCorrupt):
    code = "journal_replaced"


class StorageFailure(Error):
    code = "io_error"
    exit_code = 4


class LockTimeout(StorageFailure):
    code = "lock_timeout"


class JournalPoisoned(StorageFailure):
    code = "journal_poisoned"
