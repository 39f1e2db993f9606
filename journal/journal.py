"""The journal: a store, a projector folded over it, and transactions that append.

    journal = Journal.open("quotaledger.jsonl", projector)
    with journal.transaction() as txn:           # lock, catch up, sample time
        at = txn.time_for("goal-a", explicit_at=None)
        decision = decide(txn.state, ...)        # pure
        txn.append("capacity.admitted", "goal-a", payload, at)
    # committed: one write, one fdatasync, then the lock is released

The journal knows nothing of the domain: a `Projector` supplies the payload schemas,
the initial state and the fold step. This module opens a journal (recovery on open);
the fold is journal/fold.py, the append protocol journal/transaction.py, reading and
verifying journal/reading.py, repair and import their own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from quotaledger.journal import reading
from quotaledger.journal.chain import Failure, Head, PayloadDecoder, Visitor
from quotaledger.journal.checkpoint import Checkpoint
from quotaledger.journal.errors import Error, JournalCorrupt
from quotaledger.journal.filestore import FileStore
from quotaledger.journal.fold import Fold, Progress, Projector
from quotaledger.journal.group import Group
from quotaledger.journal.limits import CHECKPOINT_EVERY_EVENTS, GENESIS_PREV, LOCK_TIMEOUT_S_DEFAULT
from quotaledger.journal.lock_timeout import check_lock_timeout_s
from quotaledger.journal.record import Record
from quotaledger.journal.recovery import corrupt_error
from quotaledger.journal.store import Inserter, PendingRecord, Store, attribution_of
from quotaledger.journal.target import check_target, is_pg_url
from quotaledger.journal.transaction import Transaction

if TYPE_CHECKING:
    from quotaledger.journal.repair import RepairResult

S = TypeVar("S")


def open_store(target: str, *, write: bool, repairing: bool = False) -> Store:
    """The store a journal target names: a file path or a postgresql:// URL. Only a
    `repairing` writer opens a file past `<journal>.unsynced` (journal/unsynced.py)."""
    check_target(target)  # exit 2 for what cannot name a journal, before opening anything
    if is_pg_url(target):
        from quotaledger.journal.pgstore import PgStore

        pg_store: Store = PgStore(target, create=write)
        return pg_store
    return FileStore(target, create=write, repairing=repairing)


class Journal(Generic[S]):
    """An open journal with its projection state kept current.

    A handle may be shared by threads: their transactions take turns."""

    def __init__(
        self,
        store: Store,
        projector: Projector[S],
        *,
        lock_timeout_s: float = LOCK_TIMEOUT_S_DEFAULT,
        checkpoint_every: int = CHECKPOINT_EVERY_EVENTS,
        allow_corrupt: bool = False,
    ) -> None:
        self.store = store
        self.projector = projector
        self._fold = Fold(
            store,
            projector,
            lock_timeout_s=check_lock_timeout_s(lock_timeout_s),
            checkpoint_every=checkpoint_every,
            allow_corrupt=allow_corrupt,
        )
        self._group: Group[S] | None = None

    @classmethod
    def open(
        cls,
        target: str,
        projector: Projector[S],
        *,
        write: bool = True,
        lock_timeout_s: float = LOCK_TIMEOUT_S_DEFAULT,
        checkpoint_every: int = CHECKPOINT_EVERY_EVENTS,
        allow_corrupt: bool = False,
        use_checkpoint: bool = True,
        fold: bool = True,
    ) -> Journal[S]:
        """Open for writing (recovery on open: a torn tail is moved aside under the
        lock) or for reading (no lock). `lock_timeout_s` bounds every wait for the lock
        (0..LOCK_TIMEOUT_S_MAX seconds): it is checked before anything is opened.

        A writer's open folds as a reader does, without the lock, and takes it only
        when the fold did not end cleanly (a torn tail to recover, or what looked like
        corruption or no journal, judged again under the lock): a writing command's
        one lock hold is its transaction's, which catches up on what others appended
        meanwhile. A reader opened with `fold` false has not folded anything yet: its
        first call must be `replay`, which folds it in the same pass (a command whose
        work is a pass over the whole journal reads it once, not twice)."""
        if not fold and write:
            raise ValueError("only a reader opens without folding")
        check_lock_timeout_s(lock_timeout_s)
        # A writer that tolerates corruption is a repair's: the one way out of it.
        store = open_store(target, write=write, repairing=write and allow_corrupt)
        try:
            journal = cls(
                store,
                projector,
                lock_timeout_s=lock_timeout_s,
                checkpoint_every=checkpoint_every,
                allow_corrupt=allow_corrupt,
            )
            if write:
                journal._recover_on_open(use_checkpoint)
            elif fold:
                journal._fold.catch_up(
                    recover=False, use_checkpoint=use_checkpoint, tolerate_corrupt=allow_corrupt
                )
                journal._fold.make_durable(journal._fold.head.offset)
        except BaseException:
            store.close()
            raise
        return journal

    def _recover_on_open(self, use_checkpoint: bool) -> None:
        """SPEC §2.4 on a writer's open: fold without the lock, as readers may; if that
        did not end on a clean journal, fold again under the lock, recovering."""
        fold = self._fold
        # An empty (or not yet created) store has nothing to recover; its first
        # transaction takes the lock, and only then is a journal file created.
        if self.store.tail_after(0, -1, GENESIS_PREV) == "same":
            return
        try:
            fold.catch_up(
                recover=False, use_checkpoint=use_checkpoint, tolerate_corrupt=fold.allow_corrupt
            )
            if fold.torn_tail is None and fold.corruption is None:
                return
        except JournalCorrupt:
            pass  # perhaps a repair under way: judged again once it has the lock
        fold.valid, fold.torn_tail, fold.corruption = False, None, None
        fold.hold.acquire()
        try:
            fold.catch_up(
                recover=True, use_checkpoint=use_checkpoint, tolerate_corrupt=fold.allow_corrupt
            )
        finally:
            fold.hold.release()

    # -- the handle's state ---------------------------------------------------------

    @property
    def state(self) -> S:
        """The projection state after the last record this handle folded."""
        if self.store.poisoned:
            self._fold.check_poisoned()
        return self._fold.state

    @property
    def folded(self) -> bool:
        """Whether the state is the fold of the store as last read: false for a reader
        opened with fold=False until its `replay` (or after a fold that raised)."""
        return self._fold.valid

    @property
    def head(self) -> Head:
        """Where the verified prefix this handle folded ends."""
        if self.store.poisoned:
            self._fold.check_poisoned()
        return self._fold.head

    @property
    def lock_timeout_s(self) -> float:
        return self._fold.hold.timeout_s

    @property
    def checkpoint_every(self) -> int:
        return self._fold.checkpoint_every

    @property
    def checkpoint_seq(self) -> int:
        return self._fold.checkpoint_seq

    @property
    def recovered(self) -> list[str]:
        """Paths of torn tails this handle moved aside."""
        return self._fold.recovered

    @property
    def corruption(self) -> Failure | None:
        """For readers opened with allow_corrupt: where the verified prefix ends."""
        return self._fold.corruption

    @property
    def torn_tail(self) -> Failure | None:
        """A torn tail the last read saw and left (readers never move one)."""
        return self._fold.torn_tail

    @property
    def decoder(self) -> Callable[[str], PayloadDecoder | None]:
        """Each kind's payload decoder: the journal's own kinds', then the projector's."""
        return self._fold.decoder

    def refresh(self) -> S:
        """Fold what other processes appended since this handle last looked, without
        the lock and without recovery (a torn tail is left alone, as readers do).
        For long-lived handles that answer reads, e.g. an in-process `turn resume`."""
        fold = self._fold
        fold.check_poisoned()
        if self._group is not None:
            return fold.state  # the group holds the lock: no one else has appended
        with fold.hold.turn():
            fold.catch_up(recover=False, tolerate_corrupt=fold.allow_corrupt)
            fold.make_durable(fold.head.offset)
        return fold.state

    # -- writing ---------------------------------------------------------------------

    def transaction(self) -> Transaction[S]:
        """One locked read-decide-append cycle (see journal/transaction.py); inside
        `group`, one of the group's (no lock or write of its own)."""
        group = self._group
        return Transaction(self._fold if group is None else group)

    def create(self, at: str | None = None) -> None:
        """Write the genesis record of a journal that has none (a server's journal
        exists before it says it is ready), dated `at` (default now); nothing on one
        that has it."""
        with self.transaction() as transaction:
            transaction.create(at)

    @contextmanager
    def group(self) -> Iterator[Group[S]]:
        """Transactions committed together: one lock hold, one write and one fdatasync
        (or COMMIT) for all of them (see journal/group.py). One thread at a time."""
        if self._group is not None:
            raise RuntimeError("groups on one journal handle do not nest")
        with Group(self._fold) as group:
            self._group = group
            try:
                yield group
            finally:
                self._group = None

    def write_checkpoint(self) -> Checkpoint:
        """Store the current state as a checkpoint (covers only durable records)."""
        return self._fold.write_checkpoint()

    def repair(self, truncate_after_seq: int, explicit_at: str | None = None) -> RepairResult:
        """Move every record after `truncate_after_seq` to a quarantine file, journaled
        as a `journal.repaired` record (SPEC §2.4; see `quotaledger.journal.repair`)."""
        from quotaledger.journal.repair import repair

        return repair(self._fold, truncate_after_seq, explicit_at)

    def import_records(
        self, source: Journal[Any], progress: Progress | None = None
    ) -> PendingRecord:
        """Load every record of a verified journal into this empty store, hashes intact;
        the last record loaded (see `quotaledger.journal.importing`)."""
        from quotaledger.journal.importing import import_records

        return import_records(self._fold, source._fold, progress)

    # -- reading (journal/reading.py) -------------------------------------------------

    def fold_as_of(
        self, *, seq: int | None = None, at: str | None = None, use_checkpoint: bool = True
    ) -> tuple[S, Head]:
        """A fresh state as of record `seq` or time `at` (every event with at <= T);
        from genesis when not `use_checkpoint` (audit, verify: never trust the cache)."""
        return reading.fold_as_of(self._fold, seq=seq, at=at, use_checkpoint=use_checkpoint)

    def replay(
        self,
        visit: Visitor,
        *,
        use_checkpoint: bool = True,
        progress: Progress | None = None,
        resume: Callable[[Head], bool] | None = None,
    ) -> None:
        """Hand every verified record from genesis, in order, to `visit` (see
        `reading.replay`), the handle's state folded by the end."""
        reading.replay(
            self._fold, visit, use_checkpoint=use_checkpoint, progress=progress, resume=resume
        )

    def records(
        self, *, after_seq: int = -1, progress: Progress | None = None
    ) -> Iterator[tuple[Record, Any, bytes]]:
        """Every verified record in order, with its decoded payload and its line."""
        return reading.records(self._fold, after_seq=after_seq, progress=progress)

    def records_after(self, head: Head) -> Iterator[tuple[Record, Any, bytes]]:
        """The verified records after `head`, advancing it past each (`log --follow`;
        see `reading.records_after`)."""
        return reading.records_after(self._fold, head)

    def verify(
        self,
        progress: Progress | None = None,
        visit: Visitor | None = None,
        *,
        parallel: bool = True,
    ) -> Head:
        """Check the whole chain from genesis; returns the head of the verified prefix
        (on every core for a large file unless `parallel` is false)."""
        return reading.verify(self._fold, progress, visit, parallel=parallel)

    def check_checkpoint(self, verified: Head) -> dict[str, Any] | None:
        """Compare the stored checkpoint with the fold of the journal from genesis up to
        its record (see `reading.check_checkpoint`); None without a checkpoint."""
        return reading.check_checkpoint(self._fold, verified)

    def inserted_by(self, first_seq: int, last_seq: int) -> dict[int, str | None] | None:
        """Who inserted each record in the range, on a store that records it
        (PostgreSQL, SPEC §2.6); None on one that does not (a file)."""
        attribution = attribution_of(self.store)
        return None if attribution is None else attribution.inserted_by(first_seq, last_seq)

    def inserters(self) -> list[Inserter] | None:
        """Every role that inserted records, on a store that records it; else None."""
        attribution = attribution_of(self.store)
        return None if attribution is None else attribution.inserters()

    def corrupt_error(self, failure: Failure, verified: Head | None = None) -> JournalCorrupt:
        """The error that reports mid-log corruption at `failure` (SPEC §2.4)."""
        return corrupt_error(self.store.target, failure, verified)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Journal[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Error", "Journal", "Projector", "Transaction", "open_store"]
