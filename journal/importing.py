"""Import: loading every record of a verified journal into an empty one, hashes and
bytes intact (`quotaledger import`), all of them durable or none (`Store.load`).

    last = journal.import_records(source)   # Journal.import_records calls this
"""

from __future__ import annotations

from typing import Any

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.fold import Fold, Progress
from quotaledger.journal.reading import records
from quotaledger.journal.store import PendingRecord


def import_records(
    fold: Fold[Any], source: Fold[Any], progress: Progress | None = None
) -> PendingRecord:
    """Load every record of a verified journal (`source`) into this empty store,
    hashes intact; the last record loaded."""
    fold.hold.acquire()
    try:
        fold.catch_up(recover=True)
        if fold.head.next_seq != 0:
            raise InvalidInput(
                f"{fold.store.target} already holds {fold.head.next_seq} records; "
                "import needs an empty journal",
                code=codes.JOURNAL_NOT_EMPTY,
            )
        pending = [
            PendingRecord(record, payload, line + b"\n")
            for record, payload, line in records(source, progress=progress)
        ]
        if source.torn_tail is not None:
            raise InvalidInput(
                f"{source.store.target} has a torn tail at byte {source.torn_tail.offset}; "
                "open it for writing once (or repair it) before importing",
                code=codes.SOURCE_TORN_TAIL,
            )
        if not pending:
            raise InvalidInput(f"{source.store.target} holds no records", code=codes.EMPTY_SOURCE)
        fold.valid = False
        fold.store.load(pending)
        fold.catch_up(recover=True)
        # Every record is now durable and folded: past the threshold, the next
        # command reads the checkpoint instead of folding them all again.
        fold.committed()
        return pending[-1]
    finally:
        fold.hold.release()
