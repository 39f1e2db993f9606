"""Repair: moving a corrupt or torn rest of the journal to a quarantine file (SPEC
§2.4), journaled as a `journal.repaired` record.

    result = journal.repair(truncate_after_seq=41)   # Journal.repair calls repair()

A journal file is cut to a quarantine file beside it (the `LocalFile` capability);
in PostgreSQL the rows move to the `quotaledger_quarantine` table in the transaction
that commits the repair's record (the `Quarantine` capability, SPEC §2.6). The steps
run under the journal's lock on the handle's own fold, durability and commit steps
(`Fold.fold_into`, `make_durable`, `commit`).
"""

import hashlib
import os
from collections.abc import Callable
from typing import Any

import msgspec

from quotaledger.journal import codes, unsynced
from quotaledger.journal.chain import Head, PayloadDecoder, scan
from quotaledger.journal.clock import event_time, parse_at
from quotaledger.journal.errors import InvalidInput
from quotaledger.journal.fold import Fold
from quotaledger.journal.record import REPAIRED_KIND, JournalRepaired, self_verify
from quotaledger.journal.store import (
    PendingRecord,
    Store,
    local_file_of,
    quarantine_of,
    rest_from,
)
from quotaledger.journal.transaction import Transaction

_decode_repaired = msgspec.json.Decoder(JournalRepaired).decode


def repair(
    fold: Fold[Any], truncate_after_seq: int, explicit_at: str | None = None
) -> "RepairResult":
    """Move every record after `truncate_after_seq` to a quarantine file (SPEC §2.4).

    The prefix up to that record must verify. The repair is itself journaled as a
    `journal.repaired` record (at `explicit_at` if given, which must not be before
    the prefix's last journal-level record); running the same repair again finds
    that record and changes nothing.
    """
    fold.hold.acquire()
    try:
        head = _verified_prefix(fold, truncate_after_seq)
        durable_end = _durable_end(fold.store, head)
        rest = rest_from(fold.store, head.offset, head.next_seq)
        previous = _previous_repair(rest, truncate_after_seq)
        if previous is not None:  # the same repair already ran: report its file
            kept = previous.quarantine  # a table in the journal's schema (PostgreSQL)
            if local_file_of(fold.store) is not None:
                kept = os.path.join(os.path.dirname(fold.store.target), previous.quarantine)
            fold.make_durable(head.offset + len(rest))
            return RepairResult(truncate_after_seq, kept, 0, False)
        unlogged = None if rest else _unlogged_cut(fold.store, head)
        if not rest and unlogged is None:
            # A cut whose fdatasync failed is made durable now (a fresh call: the
            # failed one is never retried), and only then is its marker removed.
            fold.store.make_durable()
            _clear_unsynced(fold.store, durable_end)
            return RepairResult(truncate_after_seq, None, 0, False)
        if rest and durable_end is None and _verifies(rest, head.copy(), fold.decoder):
            # Repair is the way out of corruption (SPEC §2.4), not a way to discard
            # acknowledged records: a repeated command must not eat newer work. Bytes
            # after a failed fdatasync were never acknowledged: they may go.
            raise InvalidInput(
                f"every record after seq {truncate_after_seq} verifies: nothing to repair "
                "(repair only quarantines corrupt or torn bytes and what follows them)",
                code=codes.JOURNAL_NOT_CORRUPT,
            )
        # The record's time is checked before anything moves: a refused `at` must
        # leave the journal as it was.
        now_us = fold.now_us()
        at = event_time(None, head.goal_last_at.get(None), now_us, explicit_at)
        if unlogged is None:
            unlogged = _cut(fold.store, head), rest
        result = _journal_the_repair(fold, truncate_after_seq, unlogged, now_us, at)
        _clear_unsynced(fold.store, durable_end)
        return result
    finally:
        fold.hold.release()


def _durable_end(store: Store, head: Head) -> int | None:
    """Where the journal stops being known durable (`<journal>.unsynced`, SPEC §2.3),
    if a failed fdatasync left that marker; a repair must cut there or before."""
    if local_file_of(store) is None:
        return None
    end = unsynced.unsynced_offset(store.target)
    if end is not None and head.offset > end:
        raise InvalidInput(
            f"record {head.seq} ends at byte {head.offset}, after byte {end} where the "
            f"journal stops being durable ({unsynced.marker_path(store.target)}): truncate "
            "after an earlier record",
            code=codes.REPAIR_BEYOND_VERIFIED_PREFIX,
            verified_seq=head.seq,
            durable_offset=end,
        )
    return end


def _clear_unsynced(store: Store, durable_end: int | None) -> None:
    if durable_end is not None:
        unsynced.clear(store.target)


def _verified_prefix(fold: Fold[Any], truncate_after_seq: int) -> Head:
    """The head after record `truncate_after_seq`, which must verify and must not be
    inside a transaction of several records."""
    head = Head()
    batches: list[tuple[int, int]] = []
    failure = fold.fold_into(head, None, stop_after_seq=truncate_after_seq, batches=batches)
    for first, last in batches:
        if first <= truncate_after_seq < last:
            # Cutting inside a transaction would keep part of it (SPEC §2.4 item 5).
            raise InvalidInput(
                f"record {truncate_after_seq} is inside the transaction of records "
                f"{first}-{last}: truncate after {first - 1} or after {last}",
                code=codes.REPAIR_INSIDE_TRANSACTION,
                transaction=[first, last],
            )
    if head.seq < truncate_after_seq and failure is None:
        # One code per condition (SPEC §8): a seq past the head of a sound journal.
        raise InvalidInput(
            lambda name: f"{name} {truncate_after_seq} is not in the journal (head is {head.seq})",
            code=codes.SEQ_OUT_OF_RANGE,
            about="truncate_after",
        )
    if head.seq < truncate_after_seq and failure is not None:
        raise InvalidInput(
            f"record {truncate_after_seq} is not in the verified prefix, which ends at "
            f"seq {head.seq} ({failure.reason})",
            code=codes.REPAIR_BEYOND_VERIFIED_PREFIX,
            verified_seq=head.seq,
        )
    return head


def _journal_the_repair(
    fold: Fold[Any], truncate_after_seq: int, cut: tuple[str, bytes], now_us: int, at: str
) -> "RepairResult":
    """Append the `journal.repaired` record naming the quarantine file `cut` made
    (its path and the bytes it holds), on the journal folded again after the cut."""
    path, moved = cut
    fold.valid = False
    fold.catch_up(recover=True)
    payload = JournalRepaired(
        truncated_after_seq=truncate_after_seq,
        quarantine=os.path.basename(path),
        quarantined_bytes=len(moved),
        quarantined_sha256=hashlib.sha256(moved).hexdigest(),
    )
    txn = Transaction(fold)
    txn.wall_us = now_us
    appended = txn.append(REPAIRED_KIND, None, payload, at)
    fold.commit(txn.to_write())
    return RepairResult(truncate_after_seq, path, len(moved), True, appended)


def _cut(store: Store, head: Head) -> str:
    """Move the records after `head` aside: to a file beside a journal file; to the
    quarantine table in PostgreSQL, in the transaction the repair's record commits."""
    local = local_file_of(store)
    if local is not None:
        return local.cut_tail(head.offset, head.next_seq, "quarantine")
    in_transaction = quarantine_of(store)
    if in_transaction is not None:
        return in_transaction.quarantine_after(head.next_seq)
    raise _cannot_cut(store, head.next_seq)


def _cannot_cut(store: Store, next_seq: int) -> InvalidInput:
    """Only a file can be cut: the other store is PostgreSQL, whose rows stay."""
    return InvalidInput(
        f"journal {store.target} is in PostgreSQL, where every row was committed whole "
        f"and a trigger refuses DELETE: records from seq {next_seq} on cannot be cut. "
        "Export the verified prefix (`quotaledger export`) and import it into a new schema "
        "(`?schema=`) instead.",
        code=codes.REPAIR_UNSUPPORTED,
        seq=next_seq,
    )


def _unlogged_cut(store: Store, head: Head) -> tuple[str, bytes] | None:
    """The quarantine file of a repair that crashed after cutting the journal at
    `head` and before its record was durable: the journal ends there, so no record
    names the file. Only a file cut after the last journal-level record kept (the
    genesis at least) counts: an older one belongs to an earlier journal that lived
    at this path."""
    last_at = head.goal_last_at.get(None)
    local = local_file_of(store)
    if last_at is None or local is None:
        return None
    for cut_us, path in reversed(local.cut_files(head.next_seq, "quarantine")):
        if cut_us >= parse_at(last_at):
            with open(path, "rb") as quarantined:
                return path, quarantined.read()
    return None


class RepairResult(msgspec.Struct, frozen=True):
    truncated_after_seq: int
    quarantine: str | None
    quarantined_bytes: int
    appended: bool
    event: PendingRecord | None = None
    """The journal.repaired record this repair appended."""


def _verifies(rest: bytes, head: Head, decoder: Callable[[str], PayloadDecoder | None]) -> bool:
    """Whether `rest` (the bytes after `head`) is whole records that all verify."""
    end = head.offset + len(rest)
    return scan(rest, head, decoder, None) is None and head.offset == end


def _previous_repair(rest: bytes, truncate_after_seq: int) -> JournalRepaired | None:
    """The repair record if `rest` is exactly the record an identical repair appended."""
    if rest.count(b"\n") != 1 or not rest.endswith(b"\n"):
        return None
    record = self_verify(rest[:-1])
    if record is None or record.kind != REPAIRED_KIND:
        return None
    repaired = _decode_repaired(record.data)
    if isinstance(repaired, JournalRepaired) and repaired.truncated_after_seq == truncate_after_seq:
        return repaired
    return None
