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

Lower-level OSErrors are translated into these at the store boundary. A class's
`exit_code` is the one statement of its exit code (SPEC §8); a raise site names its
`code` from journal/codes.py. The commands layer turns an error into its JSON object
and exit code in one place (`quotaledger.cli.output.exit_code_of`).
"""

from __future__ import annotations

from typing import Any

from quotaledger.journal import codes


class Error(Exception):
    code = codes.ERROR
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
    code = codes.INVALID_INPUT
    exit_code = 2


class TimeRegression(InvalidInput):
    code = codes.TIME_REGRESSION


class TimeInFuture(InvalidInput):
    code = codes.TIME_IN_FUTURE


class JournalCorrupt(Error):
    code = codes.JOURNAL_CORRUPT
    exit_code = 3


class NotRegularFile(JournalCorrupt):
    code = codes.NOT_REGULAR_FILE


class NotAJournal(JournalCorrupt):
    code = codes.NOT_A_JOURNAL


class JournalReplaced(JournalCorrupt):
    code = codes.JOURNAL_REPLACED


class StorageFailure(Error):
    code = codes.IO_ERROR
    exit_code = 4


class LockTimeout(StorageFailure):
    code = codes.LOCK_TIMEOUT


class JournalPoisoned(StorageFailure):
    code = codes.JOURNAL_POISONED
