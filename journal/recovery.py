"""What the bytes a fold stopped at are (SPEC §2.4): a torn tail, mid-log corruption,
or no journal at all; and moving a torn tail aside.

Judged on what a handle read (its snapshot) and nothing more: a reader must not look
again, since a line it saw partial may be complete now, and a line completed after the
snapshot is no evidence against the bytes before it (SPEC §2.3).
"""

from __future__ import annotations

from typing import Any

from quotaledger.journal.chain import Failure, Head, TailKind, classify_tail
from quotaledger.journal.checkpoint import warn
from quotaledger.journal.errors import JournalCorrupt, NotAJournal
from quotaledger.journal.limits import FORMAT
from quotaledger.journal.store import LocalFile, Store, rest_from


def classify(store: Store, failure: Failure, snapshot_end: int) -> TailKind:
    """Torn tail or corruption, judged on the bytes up to `snapshot_end` (where the
    fold's read ended); NotAJournal for a file whose first line is no genesis record."""
    rest = rest_from(store, failure.offset, failure.seq)
    rest = rest[: max(0, snapshot_end - failure.offset)]
    kind = classify_tail(rest, failure)
    if kind == "not_a_journal":
        raise NotAJournal(
            f"{store.target} is not a quotaledger journal (its first line is not a "
            f"genesis record of format {FORMAT}); it was left as it is",
            path=store.target,
        )
    return kind


def corrupt_error(target: str, failure: Failure, verified: Head | None = None) -> JournalCorrupt:
    """The error that reports mid-log corruption at `failure` (SPEC §2.4)."""
    # Readers report the corruption and can still show the verified prefix.
    prefix: dict[str, Any] = {} if verified is None else {"verified_head": verified.to_json()}
    return JournalCorrupt(
        f"journal {target} is corrupt at seq {failure.seq} "
        f"(byte {failure.offset}): {failure.reason}",
        seq=failure.seq,
        offset=failure.offset,
        reason=failure.reason,
        **prefix,
    )


def move_torn_tail(local: LocalFile, torn: Failure, snapshot_end: int) -> str:
    """Move the torn bytes from `torn` on beside the journal and cut it there (SPEC
    §2.4 case 2); the path that keeps them."""
    path = local.cut_tail(torn.offset, torn.seq, "torn")
    warn(
        f"recovered a torn tail of {snapshot_end - torn.offset} bytes after "
        f"seq {torn.seq - 1}; the bytes are kept in {path}"
    )
    return path
