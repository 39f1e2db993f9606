"""`bench --serve`'s skeleton: the same `quotaledger serve` appending bare lines.

SPEC §9 holds the server's CPU per event to at most 1.3x that of the same server doing
no ledger work: the HTTP layer, the routes, the request decoding, the committer
thread and its group commit are all the real ones; only the ledger is replaced by
one that appends each request's JSON as a bare line (no chain, no fold, no
decision), one write and one fdatasync per group under the file's lock, as the
journal does. So the ratio is what the ledger's work adds per event.

It is an internal entry point, run only by the bench
(`python -m quotaledger.tools.bench_skeleton FILE HOST:PORT`): no command, option or
environment variable reaches it.
"""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from quotaledger.server.run import serve


class BareGroup:
    broken = None
    """The journal's group reports a broken transaction here; bare lines never break."""

    def refresh_checkpoint(self) -> None:
        """Bare lines keep no checkpoint."""


class BareStore:
    poisoned = False


class BareJournal:
    """A file that takes lines: one write and one fdatasync per group, under flock."""

    def __init__(self, path: str, lock_timeout_s: float) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.lock_timeout_s = lock_timeout_s
        self.store = BareStore()
        self.pending: list[bytes] = []

    def create(self) -> None:
        """The file is there once open: bare lines have no genesis record."""

    @contextmanager
    def group(self) -> Iterator[BareGroup]:
        self.pending = []
        yield BareGroup()
        if self.pending:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                os.write(self.fd, b"".join(self.pending))
                os.fdatasync(self.fd)
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def refresh(self) -> None:
        """Readers catch up first in the real server; bare lines have nothing to fold."""

    def close(self) -> None:
        os.close(self.fd)


class BareLedger:
    """What the committer calls on a ledger, answering every writer `{"ok": true}`."""

    def __init__(self, path: str, lock_timeout_s: float) -> None:
        self.journal = BareJournal(path, lock_timeout_s)
        self.lines = 0

    @classmethod
    def open(cls, target: str, *, write: bool, lock_timeout_s: float) -> BareLedger:
        assert write
        return cls(target, lock_timeout_s)

    def answer(self, name: str, request: Any) -> dict[str, Any]:
        self.journal.pending.append(msgspec.json.encode(request) + b"\n")
        self.lines += 1
        return {"ok": True, "command": name, "line": self.lines}

    def close(self) -> None:
        self.journal.close()


def main(argv: list[str]) -> int:
    path, listen = argv
    return serve(path, listen, lock_timeout_s=30.0, open_ledger=BareLedger.open)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
