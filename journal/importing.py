"""Import: loading every record of a verified journal into an empty one, hashes and
bytes intact (`quotaledger import`), all of them durable or none (`Store.load`).

    last = journal.import_records(source)   # Journal.import_records calls this
"""

from __future__ import annotations

from typing import Any

from quotaledger.journal import codes
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.journal import Journal, Progress
from quotaledger.journal.store import PendingRecord


def import_records(
    journal: Journal[Any], source: Journal[Any], progress: Progress | None = None
) -> PendingRecord:
    """Load every record of a verified journal into this empty store, hashes intact;
    the last record loaded."""
    journal.store.lock(journal.lock_timeout_s)
    try:
        journal._refresh(recover=True)
        if journal._head.next_seq != 0:
            raise InvalidInput(
                f"{journal.store.target} already holds {journal._head.next_seq} records; "
                "import needs an empty journal",
                code=codes.JOURNAL_NOT_EMPTY,
            )
        pending = [
            PendingRecord(record, payload, line + b"\n")
            for record, payload, line in source.records(progress=progress)
        ]
        if source.torn_tail is not None:
            raise InvalidInput(
                f"{source.store.target} has a torn tail at byte {source.torn_tail.offset}; "
                "open it for writing once (or repair it) before importing",
                code=codes.SOURCE_TORN_TAIL,
            )
        if not pending:
            raise InvalidInput(f"{source.store.target} holds no records", code=codes.EMPTY_SOURCE)
        journal._state_valid = False
        journal.store.load(pending)
        journal._refresh(recover=True)
        # Every record is now durable and folded: past the threshold, the next
        # command reads the checkpoint instead of folding them all again.
        journal._maybe_checkpoint()
        return pending[-1]
    finally:
        journal.store.unlock()
