"""The errors the engine raises, each carrying its public code and exit code.

    Error                  exit 2 unless a subclass says otherwise
    ├── InvalidInput                2  bad argument or payload; nothing written
    │   ├── TimeRegression          2  an explicit `at` earlier than the goal's last event
    │   ├── TimeInFuture            2  an explicit `at` beyond the clock-skew bound on a writer
    │   └── LedgerClosed            2  a call on a closed `quotaledger.Ledger`
    ├── JournalCorrupt              3  mid-log corruption, unreadable, wrong file type
    │   ├── NotRegularFile          3  a symlink, directory, FIFO or device
    │   ├── NotAJournal             3  a file whose first line is not a genesis record
    │   └── JournalReplaced         3  the path no longer names the file a handle holds
    └── StorageFailure              4  I/O failure; nothing acknowledged
        ├── LockTimeout             4  lock wait exceeded `lock_timeout_s`
        ├── JournalPoisoned         4  an fdatasync failed earlier on this handle
        └── ServerUnreachable       4  a client cannot reach its server (or lost it)

Lower-level OSErrors are translated into these at the store boundary. A class's
`exit_code` is the one statement of its exit code (SPEC §8); a raise site names its
`code` from journal/codes.py. The commands layer turns an error into its JSON object
and exit code in one place (`quotaledger.cli.output.exit_code_of`).

A message about one of the engine's parameters (`at`, `lock_timeout_s`) names it as
the engine does; a caller with its own names for them (the CLI's flags) words it
with `worded(names)`: such an error is built from a function of the parameter's name,
and `about` says which parameter it is (or, for a message naming several, from a
function of the caller's `Names`, `about` listing them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quotaledger.journal import codes

Names = Callable[[str], str]
"""A caller's word for one of the engine's parameters (the CLI: its flag)."""
_MARK = "\0"
"""Brackets a parameter's name in a message: no path, URL or time holds a NUL."""


def _marked(field: str) -> str:
    return _MARK + field + _MARK


class Error(Exception):
    code = codes.ERROR
    exit_code = 2
    about: str | None = None
    """The parameter the message names, if it names one (see `worded`); the first,
    when it names several."""

    def __init__(
        self,
        message: str | Names | Callable[[Names], str],
        *,
        code: str | None = None,
        about: str | tuple[str, ...] | None = None,
        **context: Any,
    ) -> None:
        # Kept as pieces, text and parameters' names in turn: plain strings, so an
        # error still pickles (a process pool hands it back to its caller).
        if isinstance(message, str):
            self._pieces: tuple[str, ...] = (message,)
        elif isinstance(about, str):  # a function of the one parameter's name
            self._pieces = tuple(message(_marked(about)).split(_MARK))  # type: ignore[arg-type]
            self.about = about
        else:  # a function of the caller's `Names`, for a message naming several
            assert about, "a message built from names says which parameters"
            self._pieces = tuple(message(_marked).split(_MARK))  # type: ignore[arg-type]
            self.about = about[0]
        self.message = self.worded(str)
        super().__init__(self.message)
        if code is not None:
            self.code = code
        self.context = context

    def worded(self, names: Names) -> str:
        """The message with `names`' word for each parameter it names."""
        pieces = self._pieces  # text, a name, text, ...: every odd piece a name
        return "".join(names(piece) if i % 2 else piece for i, piece in enumerate(pieces))

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters the message names, in order (the engine's names)."""
        return self._pieces[1::2]

    def to_json(self, names: Names | None = None) -> dict[str, Any]:
        message = self.message if names is None else self.worded(names)
        return {"code": self.code, "message": message, **self.context}


class InvalidInput(Error):
    code = codes.INVALID_INPUT
    exit_code = 2


class TimeRegression(InvalidInput):
    code = codes.TIME_REGRESSION


class TimeInFuture(InvalidInput):
    code = codes.TIME_IN_FUTURE


class LedgerClosed(InvalidInput):
    """A call on a closed `quotaledger.Ledger` (or a journal handle)."""

    code = codes.LEDGER_CLOSED


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


class ServerUnreachable(StorageFailure):
    """A client of a server (`Ledger.open(url)`, `--journal http://...`) cannot connect
    to it, or it closed the connection before answering: a network's or the server's
    state, named for what it is (a StorageFailure still: nothing was acknowledged)."""

    code = codes.SERVER_UNREACHABLE
