"""The journal: a store, a projector folded over it, and transactions that append.

    journal = Journal.open("quotaledger.jsonl", projector)
    with journal.transaction() as txn:           # lock, catch up, sample time
        at = txn.time_for("goal-a", explicit_at=None)
        decision = decide(txn.state, ...)        # pure
        txn.append("capacity.admitted", "goal-a", payload, at)
    # committed: one write, one fdatasync, then the lock is released

The journal knows nothing of the domain: a `Projector` supplies the payload schemas,
the initial state and the fold step.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import msgspec

from quotaledger.journal import codes
from quotaledger.journal.chain import (
    Failure,
    Head,
    PayloadDecoder,
    TailKind,
    Visitor,
    classify_tail,
    scan,
)
from quotaledger.journal.checkpoint import Checkpoint, JournalHeadState, warn
from quotaledger.journal.clock import (
    check_not_in_future,
    event_time,
    format_us,
    is_canonical_at,
    wall_us,
)
from quotaledger.journal.errors import (
    Error,
    InvalidInput,
    JournalCorrupt,
    JournalPoisoned,
    NotAJournal,
    StorageFailure,
    TimeRegression,
)
from quotaledger.journal.limits import (
    BATCH_BYTES_MAX,
    BATCH_EVENTS_MAX,
    CHECKPOINT_EVERY_EVENTS,
    FORMAT,
    FORMAT_VERSION,
    GENESIS_PREV,
    LINE_BYTES_MAX,
    LOCK_TIMEOUT_S_DEFAULT,
)
from quotaledger.journal.record import (
    BATCH_KIND,
    REPAIRED_KIND,
    JournalBatch,
    JournalCreated,
    JournalRepaired,
    Record,
    encode_line,
    encode_payload,
    genesis_line,
    self_verify,
)
from quotaledger.journal.store import PendingRecord, Store, Tail, rest_from
from quotaledger.journal.target import check_target, is_pg_url

if TYPE_CHECKING:
    from quotaledger.journal.repair import RepairResult

S = TypeVar("S")
_decode_genesis = msgspec.json.Decoder(JournalCreated).decode
_ENGINE_DECODERS: dict[str, PayloadDecoder] = {
    REPAIRED_KIND: msgspec.json.Decoder(JournalRepaired).decode,
    BATCH_KIND: msgspec.json.Decoder(JournalBatch).decode,
}
"""The journal's own kinds, which every projector's journal reads."""
_Raw = msgspec.Raw
_new_pending = tuple.__new__
"""Builds a PendingRecord without the NamedTuple's Python-level __new__ (every append)."""
_NOTHING_CHECKED: tuple[str | None, object] = (None, object())  # no string is this time
Progress = Callable[[int], None]
"""Called with the number of bytes just processed (for progress bars)."""


class Projector(Protocol[S]):
    """What the journal needs to know about the domain.

    A projector may also offer `visitor(state)`: `apply` on that state as a Visitor,
    which the fold then calls for each record instead of wrapping `apply` (a step
    that binds the state once per fold instead of per record)."""

    version: str

    def decoder(self, kind: str) -> PayloadDecoder | None: ...

    def initial(self) -> S: ...

    def apply(self, state: S, record: Record, payload: Any) -> None: ...

    def dump(self, state: S) -> bytes: ...

    def load(self, blob: bytes) -> S: ...


def open_store(target: str, *, write: bool) -> Store:
    """The store a `--journal` target names: a file path or a postgresql:// URL."""
    check_target(target)  # exit 2 for what cannot name a journal, before opening anything
    if is_pg_url(target):
        from quotaledger.journal.pgstore import PgStore

        pg_store: Store = PgStore(target, create=write)
        return pg_store
    from quotaledger.journal.filestore import FileStore

    return FileStore(target, create=write)


class Journal(Generic[S]):
    """An open journal with its projection state kept current."""

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
        self.lock_timeout_s = lock_timeout_s
        self.checkpoint_every = checkpoint_every
        self._head = Head()
        self._state = projector.initial()
        self.checkpoint_seq = -1
        self.recovered: list[str] = []
        """Paths of torn tails this handle moved aside."""
        self.corruption: Failure | None = None
        """For readers opened with allow_corrupt: where the verified prefix ends."""
        self.torn_tail: Failure | None = None
        self._allow_corrupt = allow_corrupt
        project_decoder = projector.decoder
        self.decoder: Callable[[str], PayloadDecoder | None] = lambda kind: (
            _ENGINE_DECODERS.get(kind) or project_decoder(kind)
        )
        self._decoders: dict[str, PayloadDecoder] = {}
        """Known kinds' decoders, so an append finds its decoder with one dict lookup."""
        self._in_transaction = False
        self._state_valid = False
        self._snapshot_end = 0
        """Where the last fold's read of the store ended: what failures are judged on."""
        self._durable_offset = 0
        """The bytes before this offset are known durable: this handle's own commit, or
        its fdatasync before an answer, covered them."""

    @property
    def state(self) -> S:
        """The projection state after the last record this handle folded."""
        if self.store.poisoned:
            self._check_poisoned()
        return self._state

    @property
    def folded(self) -> bool:
        """Whether the state is the fold of the store as last read: false for a reader
        opened with fold=False until its `replay` (or after a fold that raised)."""
        return self._state_valid

    @property
    def head(self) -> Head:
        """Where the verified prefix this handle folded ends."""
        if self.store.poisoned:
            self._check_poisoned()
        return self._head

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
        """Open for writing (recovery runs under the lock) or for reading (no lock).

        A reader opened with `fold` false has not folded anything yet: its first call
        must be `replay`, which folds it in the same pass (a command whose work is a
        pass over the whole journal reads it once, not twice)."""
        if not fold and write:
            raise ValueError("only a reader opens without folding")
        store = open_store(target, write=write)
        journal = cls(
            store,
            projector,
            lock_timeout_s=lock_timeout_s,
            checkpoint_every=checkpoint_every,
            allow_corrupt=allow_corrupt,
        )
        try:
            # An empty (or not yet created) store has nothing to recover; its first
            # transaction takes the lock, and only then is a journal file created.
            if write and store.tail_after(0, -1, GENESIS_PREV) != "same":
                store.lock(lock_timeout_s)
                try:
                    journal._refresh(
                        recover=True, use_checkpoint=use_checkpoint, tolerate_corrupt=allow_corrupt
                    )
                finally:
                    store.unlock()
            elif not write and fold:
                journal._refresh(
                    recover=False, use_checkpoint=use_checkpoint, tolerate_corrupt=allow_corrupt
                )
                journal._durable(journal._head.offset)
        except BaseException:
            store.close()
            raise
        return journal

    # -- folding -------------------------------------------------------------------

    def _refresh(
        self,
        *,
        recover: bool,
        use_checkpoint: bool = True,
        tolerate_corrupt: bool = False,
        also: Visitor | None = None,
        progress: Progress | None = None,
        resume: Callable[[Head], bool] | None = None,
    ) -> None:
        """Bring head and state up to the end of the store.

        Mid-log corruption raises JournalCorrupt unless `tolerate_corrupt` (a handle
        opened with allow_corrupt, e.g. for `verify` or `repair`): then the state is
        the verified prefix and `self.corruption` says where it ends. Transactions
        never tolerate it. `also` sees every record the fold folds, before it is
        folded, if the fold starts from genesis, or with `resume` from a checkpoint
        whose head `resume` accepts (see `replay`).
        """
        head, store = self._head, self.store
        tail: Tail = (
            store.tail_after(head.offset, head.next_seq - 1, head.prev_hash)
            if self._state_valid
            else "changed"
        )
        if tail == "same":
            return  # what every transaction of a lone writer finds: one read, nothing to do
        if tail == "changed":
            # First use, or someone cut records we had folded (a repair): start over.
            self._head = head = Head()
            self._state = self.projector.initial()
            self.checkpoint_seq = -1
            self._durable_offset = 0
            if use_checkpoint:
                self._load_checkpoint(covers=resume)
                head = self._head
            if self.checkpoint_seq >= 0 and resume is None:
                also = None  # the visitor needs every record: `replay` reads them again
            self._state_valid = True
            if store.tail_after(head.offset, head.next_seq - 1, head.prev_hash) == "same":
                return
        # `scan` advances the head before the visitor folds a record: if the fold raises
        # midway, head and state disagree, so the state counts as valid only once the
        # fold (and the handling of its failure) has finished.
        self._state_valid = False
        visit = self._apply_visitor(self._state, also)
        failure = self._fold_into(self._head, self._state, visit, progress=progress)
        if failure is not None:
            self._handle_failure(failure, recover=recover, tolerate_corrupt=tolerate_corrupt)
        self._state_valid = True

    def _durable(self, end: int) -> None:
        """Make the bytes this handle folded, up to `end`, durable before it answers from
        them (SPEC §2.3): another process may have written them and died before its
        fdatasync, and an answer must not be false after a power loss. A commit's own
        fdatasync covers what it appended, so this costs a syscall only when an answer
        stands on bytes another handle wrote, and little then: nothing is dirty unless
        that writer died before its fdatasync."""
        if end > self._durable_offset:
            self.store.make_durable()
            self._durable_offset = end

    def _new_decoder(self, kind: str) -> PayloadDecoder:
        """The decoder of a kind this handle has not appended yet (then cached), or
        `unknown_kind`."""
        found = self.decoder(kind)
        if found is None:
            raise InvalidInput(f"unknown event kind {kind!r}", code=codes.UNKNOWN_KIND)
        self._decoders[kind] = found
        return found

    def _apply_visitor(self, state: S, also: Visitor | None = None) -> Visitor:
        """The fold step on `state` as scan's visitor (the projector's own `visitor`,
        if it has one: a step that binds the state once), after `also` if given."""
        make_visitor = getattr(self.projector, "visitor", None)
        if make_visitor is not None:
            fold: Visitor = make_visitor(state)
        else:
            apply = self.projector.apply

            def fold(record: Record, payload: Any, line: bytes) -> None:
                apply(state, record, payload)

        if also is None:
            return fold

        def visit_also(record: Record, payload: Any, line: bytes) -> None:
            try:
                also(record, payload, line)
            except Exception as exc:
                # The caller's error, not a record that does not fold: scan must not
                # take it for corruption (`replay` raises it as it is).
                raise _VisitorRaised(exc) from exc
            fold(record, payload, line)

        return visit_also

    def _fold_into(
        self,
        head: Head,
        state: S,
        visit: Visitor | None,
        *,
        stop_after_seq: int | None = None,
        progress: Progress | None = None,
        batches: list[tuple[int, int]] | None = None,
    ) -> Failure | None:
        """Verify and visit the records after `head`; returns the first failure."""
        for failure in self._scan_chunks(
            head, visit, stop_after_seq=stop_after_seq, progress=progress, batches=batches
        ):
            if failure is not None:
                return failure
        return None

    def _scan_chunks(
        self,
        head: Head,
        visit: Visitor | None,
        *,
        stop_after_seq: int | None = None,
        progress: Progress | None = None,
        batches: list[tuple[int, int]] | None = None,
    ) -> Iterator[Failure | None]:
        """The one loop that reads the store after `head` chunk by chunk, carrying a
        line split between chunks into the next, and verifies each: every verified
        record goes to `visit` and advances `head`. Yields once per chunk (None, or the
        first failure, which ends it), so a reader can hand on each chunk's records as
        they come; bytes left over at the end are yielded as an incomplete failure.
        Notes where this read ended (`_snapshot_end`): what failures are judged on."""
        carry = b""
        decoder = self.decoder
        self._snapshot_end = head.offset
        for chunk in self.store.chunks(head.offset, head.next_seq):
            self._snapshot_end += len(chunk)
            buf = carry + chunk if carry else chunk
            start = head.offset
            failure = scan(
                buf, head, decoder, visit, stop_after_seq=stop_after_seq, batches=batches
            )
            if progress is not None:
                progress(head.offset - start)
            yield failure
            if failure is not None:
                return
            if stop_after_seq is not None and head.next_seq > stop_after_seq:
                return
            carry = buf[head.offset - start :]
        if carry:
            # A partial line, or a transaction not all of whose records are there yet.
            why = "incomplete transaction" if b"\n" in carry else "unterminated last line"
            yield Failure(head.next_seq, head.offset, why, False, True)

    def _classify(self, failure: Failure) -> TailKind:
        """Torn tail, corruption or not a journal, judged on this handle's snapshot only:
        the bytes up to where its last read ended (`_snapshot_end`). A reader must not
        look again: a line it saw partial may be complete now, and a line completed
        after the snapshot is no evidence against the bytes before it (SPEC §2.3)."""
        rest = rest_from(self.store, failure.offset, failure.seq)
        rest = rest[: max(0, self._snapshot_end - failure.offset)]
        kind = classify_tail(rest, failure)
        if kind == "not_a_journal":
            raise NotAJournal(
                f"{self.store.target} is not a quotaledger journal (its first line is not a "
                f"genesis record of format {FORMAT}); it was left as it is",
                path=self.store.target,
            )
        return kind

    def _judge(
        self, failure: Failure, *, recover: bool = False, verified: Head | None = None
    ) -> JournalCorrupt | None:
        """What the failure a fold ended on is, for every reader and writer: a torn tail
        (only a file can have one) is noted in `torn_tail`, or, when `recover`, moved
        aside and forgotten, and None is returned; corruption is returned as the error
        that reports it, for the caller to raise (or to note, if it tolerates it)."""
        local = self.store.local_file
        if local is None or self._classify(failure) != "torn":
            return self.corrupt_error(failure, verified)
        self.torn_tail = torn = failure.torn_from()
        if recover:
            path = local.cut_tail(torn.offset, torn.seq, "torn")
            self.recovered.append(path)
            warn(
                f"recovered a torn tail of {self._snapshot_end - torn.offset} bytes after "
                f"seq {torn.seq - 1}; the bytes are kept in {path}"
            )
            self.torn_tail = None
        return None

    def _handle_failure(self, failure: Failure, *, recover: bool, tolerate_corrupt: bool) -> None:
        corrupt = self._judge(failure, recover=recover)
        if corrupt is not None:
            self.corruption = failure
            if not tolerate_corrupt:
                raise corrupt

    def corrupt_error(self, failure: Failure, verified: Head | None = None) -> JournalCorrupt:
        """The error that reports mid-log corruption at `failure` (SPEC §2.4)."""
        # Readers report the corruption and can still show the verified prefix.
        prefix: dict[str, Any] = {} if verified is None else {"verified_head": verified.to_json()}
        return JournalCorrupt(
            f"journal {self.store.target} is corrupt at seq {failure.seq} "
            f"(byte {failure.offset}): {failure.reason}",
            seq=failure.seq,
            offset=failure.offset,
            reason=failure.reason,
            **prefix,
        )

    def _load_checkpoint(self, covers: Callable[[Head], bool] | None = None) -> None:
        accepted = self._accept_checkpoint(say=warn, covers=covers)
        if accepted is not None:
            self._state, self._head = accepted
            self.checkpoint_seq = self._head.seq

    def _accept_checkpoint(
        self,
        *,
        say: Callable[[str], None] | None,
        covers: Callable[[Head], bool] | None = None,
    ) -> tuple[S, Head] | None:
        """The stored checkpoint as a state and the head to fold on from, if it may be
        trusted (its projection version is the code's, the journal has its record at its
        offset with its seq and hash, its state loads) and `covers` accepts its head;
        else None, and `say` is told why it was ignored."""
        checkpoint = self.store.load_checkpoint()
        if checkpoint is None:
            return None
        problem = self._checkpoint_problem(checkpoint)
        if problem is not None:
            if say is not None:
                say(f"ignoring checkpoint of {self.store.target}: {problem}; folding from genesis")
            return None
        head = Head(
            next_seq=checkpoint.seq + 1,
            prev_hash=checkpoint.hash,
            offset=checkpoint.offset,
            journal_id=checkpoint.journal_id,
            goal_last_at=checkpoint.head.goal_last_at_map(),
        )
        if covers is not None and not covers(head):
            return None
        try:
            state = self.projector.load(bytes(checkpoint.state))
        except Exception as exc:  # a checkpoint is an optimisation: never trust it blindly
            if say is not None:
                say(f"ignoring checkpoint of {self.store.target}: state does not load ({exc})")
            return None
        return state, head

    def _checkpoint_problem(self, checkpoint: Checkpoint) -> str | None:
        if checkpoint.projection_version != self.projector.version:
            return (
                f"projection version {checkpoint.projection_version!r} is not the code's "
                f"{self.projector.version!r}"
            )
        line = self.store.line_ending_at(checkpoint.offset, checkpoint.seq)
        record = self_verify(line) if line is not None else None
        if record is None or record.seq != checkpoint.seq or record.hash != checkpoint.hash:
            return f"the journal has no record seq {checkpoint.seq} ending at {checkpoint.offset}"
        return None

    def write_checkpoint(self) -> Checkpoint:
        """Store the current state as a checkpoint (covers only durable records)."""
        self._check_poisoned()
        if self._head.journal_id is None:
            raise InvalidInput(
                "the journal is empty; nothing to checkpoint", code=codes.EMPTY_JOURNAL
            )
        checkpoint = Checkpoint(
            seq=self._head.seq,
            hash=self._head.prev_hash,
            offset=self._head.offset,
            journal_id=self._head.journal_id,
            projection_version=self.projector.version,
            state=_raw(self.projector.dump(self._state)),
            head=JournalHeadState.of(self._head.goal_last_at),
        )
        self.store.save_checkpoint(checkpoint)
        self.checkpoint_seq = checkpoint.seq
        return checkpoint

    # -- transactions --------------------------------------------------------------

    def transaction(self) -> Transaction[S]:
        return Transaction(self)

    def _begin(self) -> None:
        if self._in_transaction:
            raise RuntimeError("transactions on one journal handle do not nest")
        store = self.store
        if store.poisoned:
            self._check_poisoned()
        store.lock(self.lock_timeout_s)
        self._in_transaction = True
        try:
            self._refresh(recover=True)
            if self._head.next_seq == 0:
                local = store.local_file
                if local is not None and local.ensure_linked(self.lock_timeout_s):
                    self._state_valid = False  # another file now: fold it from the start
                    self._refresh(recover=True)
        except BaseException:
            self._end()
            raise

    @staticmethod
    def _genesis(at: str) -> PendingRecord:
        """The genesis record of a new journal. A transaction stages it in front of its
        first event, so genesis and that event share one write and one fdatasync, and a
        transaction that appends nothing (a refused or invalid command) writes nothing."""
        line, _ = genesis_line(uuid.uuid4().hex, at)
        record = self_verify(line[:-1])
        assert record is not None
        return PendingRecord(record, _decode_genesis(record.data), line)

    def _commit(self, pending: list[PendingRecord]) -> None:
        """Fold `pending`, then make it durable; until both succeed the state is invalid.

        The fold runs before the write and fdatasync, not after: a projection that
        raises then leaves nothing on disk, and the CPU work is done while caches are
        warm instead of after the sleep in fdatasync (measurably faster durable
        appends). A failed write or sync leaves the state to be rebuilt from the log.
        """
        self._state_valid = False
        head, apply, state = self._head, self.projector.apply, self._state
        offset = end = head.offset
        goal_last_at = head.goal_last_at
        for record, payload, line in pending:
            if record.seq == 0:
                head.journal_id = payload.journal_id
            apply(state, record, payload)
            end += len(line)
            goal_last_at[record.goal] = record.at
        last = pending[-1].record
        head.next_seq = last.seq + 1
        head.prev_hash = last.hash
        head.offset = end
        self.store.append(pending, offset)  # a new journal's directory entry too (SPEC §2.3)
        self._durable_offset = end
        self._state_valid = True

    def _end(self) -> None:
        self._in_transaction = False
        self.store.unlock()

    def _maybe_checkpoint(self) -> None:
        if self._head.next_seq - 1 - self.checkpoint_seq >= self.checkpoint_every:
            try:
                self.write_checkpoint()
            except Exception as exc:  # the commit is durable: a checkpoint is only a cache
                warn(f"could not refresh the checkpoint: {exc}")

    # -- repair and import (journal/repair.py, journal/importing.py) ------------------

    def repair(self, truncate_after_seq: int, explicit_at: str | None = None) -> RepairResult:
        """Move every record after `truncate_after_seq` to a quarantine file, journaled
        as a `journal.repaired` record (SPEC §2.4; see `quotaledger.journal.repair`)."""
        from quotaledger.journal.repair import repair

        return repair(self, truncate_after_seq, explicit_at)

    def import_records(
        self, source: Journal[Any], progress: Progress | None = None
    ) -> PendingRecord:
        """Load every record of a verified journal into this empty store, hashes intact;
        the last record loaded (see `quotaledger.journal.importing`)."""
        from quotaledger.journal.importing import import_records

        return import_records(self, source, progress)

    # -- reading -------------------------------------------------------------------

    def fold_as_of(
        self, *, seq: int | None = None, at: str | None = None, use_checkpoint: bool = True
    ) -> tuple[S, Head]:
        """A fresh state as of record `seq` or time `at` (every event with at <= T);
        from genesis when not `use_checkpoint` (audit, verify: never trust the cache)."""
        self._check_poisoned()
        head, state = Head(), self.projector.initial()

        def in_prefix(covered: Head) -> bool:
            """Whether every record the checkpoint covers is in the requested prefix."""
            return (seq is not None and covered.seq <= seq) or (
                at is not None and all(t <= at for t in covered.goal_last_at.values())
            )

        # Quietly: the handle's own fold already warned about a checkpoint it ignored.
        accepted = self._accept_checkpoint(say=None, covers=in_prefix) if use_checkpoint else None
        if accepted is not None:
            state, head = accepted
        apply = self.projector.apply
        if at is None:
            visit = self._apply_visitor(state)
        else:
            limit = at

            def visit(record: Record, payload: Any, line: bytes) -> None:
                if record.at <= limit:
                    apply(state, record, payload)

        failure = self._fold_into(head, state, visit, stop_after_seq=seq)
        if failure is not None and seq is not None and failure.seq <= seq:
            self._raise_if_corrupt(failure)
        self._durable(head.offset)
        return state, head

    def replay(
        self,
        visit: Visitor,
        *,
        use_checkpoint: bool = True,
        progress: Progress | None = None,
        resume: Callable[[Head], bool] | None = None,
    ) -> None:
        """Hand every verified record from genesis, in order, to `visit`, by the
        readers' rules (mid-log corruption raises after the records before it; a torn
        tail ends the pass quietly), the handle's state folded by the end.

        For a handle opened with fold=False whose fold starts from genesis (no usable
        checkpoint, or not `use_checkpoint`), `visit` rides along that fold, called
        before each record is folded: one pass over the journal instead of two. Else
        (the fold started at a checkpoint, or the handle had folded already) the
        records are read again, as `records` reads them.

        With `resume` (and `use_checkpoint`), a handle opened with fold=False starts
        its fold at a usable checkpoint only if `resume` accepts the checkpoint's head,
        else from genesis, and `visit` always rides along: from a checkpoint it sees
        only the records after it, and what came before is in the state (a caller that
        needs nothing of the prefix but the state skips it).
        """
        self._check_poisoned()
        if not self._state_valid:
            try:
                self._refresh(
                    recover=False,
                    use_checkpoint=use_checkpoint,
                    tolerate_corrupt=self._allow_corrupt,
                    also=visit,
                    progress=progress,
                    resume=resume,
                )
            except _VisitorRaised as raised:
                raise raised.error from None
            self._durable(self._head.offset)
            if self.checkpoint_seq < 0 or resume is not None:
                return
        for record, payload, line in self.records(progress=progress):
            visit(record, payload, line)

    def records(
        self,
        *,
        after_seq: int = -1,
        progress: Progress | None = None,
    ) -> Iterator[tuple[Record, Any, bytes]]:
        """Every verified record in order, with its decoded payload and its line."""
        self._check_poisoned()
        self.torn_tail = None
        head = Head()
        batch: list[tuple[Record, Any, bytes]] = []

        def collect(record: Record, payload: Any, line: bytes) -> None:
            if record.seq > after_seq:
                batch.append((record, payload, line))

        for failure in self._scan_chunks(head, collect, progress=progress):
            self._durable(head.offset)
            yield from batch
            batch.clear()
            if failure is not None:
                self._raise_if_corrupt(failure)  # returns for a torn tail
                return

    def records_after(self, head: Head) -> Iterator[tuple[Record, Any, bytes]]:
        """The verified records after `head`, advancing it past each, by the readers'
        rules (SPEC §2.3): bytes after the last complete record that are a write in
        progress or a torn tail are left for a later call (the writer completes them,
        or the next writer's recovery moves them aside); mid-log corruption raises
        JournalCorrupt after the verified records. For `log --follow`, which calls it
        again with the same head to see what was appended since."""
        self._check_poisoned()
        if (
            head.next_seq > 0
            and self.store.tail_after(head.offset, head.seq, head.prev_hash) == "changed"
        ):
            raise JournalCorrupt(
                f"records up to seq {head.seq} of {self.store.target} changed while being "
                "read (repaired or replaced)",
                code=codes.JOURNAL_CHANGED,
                seq=head.seq,
            )
        batch: list[tuple[Record, Any, bytes]] = []

        def collect(record: Record, payload: Any, line: bytes) -> None:
            batch.append((record, payload, line))

        for failure in self._scan_chunks(head, collect):
            yield from batch
            batch.clear()
            if failure is not None:
                self._raise_if_corrupt(failure)  # returns for a torn tail (or a write in progress)
                return

    def verify(
        self,
        progress: Progress | None = None,
        visit: Visitor | None = None,
        *,
        parallel: bool = True,
    ) -> Head:
        """Check the whole chain from genesis; returns the head of the verified prefix.

        Without a visitor a large journal file is verified on every core (see
        journal.fanout) unless `parallel` is false; the answer is the same as the
        sequential scan's.
        """
        self._check_poisoned()
        self.torn_tail = None
        local = self.store.local_file
        fd = local.local_fd() if local is not None else None
        found = None
        if parallel and visit is None and fd is not None:
            size = self.store.size_hint(0, 0) or 0
            from quotaledger.journal.fanout import verify_file  # verify only: no start-up cost

            found = verify_file(fd, size, self.decoder, progress)
        if found is not None:
            head, failure = found
            self._snapshot_end = size
        else:
            head = Head()
            failure = self._fold_into(head, self.projector.initial(), visit, progress=progress)
        if failure is not None:
            self._raise_if_corrupt(failure, verified=head)
        self.store.verify_columns()  # SQL readers query those: they must say what lines say
        self._durable(head.offset)
        return head

    def check_checkpoint(self, verified: Head) -> dict[str, Any] | None:
        """Compare the stored checkpoint with the fold of the journal from genesis up to
        its record (SPEC §2.5: a checkpoint is a cache, never a source of truth).

        None without a checkpoint. One writers would ignore (its record is not in the
        verified prefix, its projection version is not the code's, its state does not
        load) is reported as not used; one writers would trust whose state, journal
        id or per-goal times differ from the fold raises `checkpoint_mismatch`.
        """
        checkpoint = self.store.load_checkpoint()
        if checkpoint is None:
            return None
        summary: dict[str, Any] = {"seq": checkpoint.seq, "hash": checkpoint.hash}
        problem = self._checkpoint_problem(checkpoint)
        if problem is None and checkpoint.seq > verified.seq:
            problem = f"seq {checkpoint.seq} is past the verified prefix (seq {verified.seq})"
        stored = None
        if problem is None:
            try:
                stored = self.projector.load(bytes(checkpoint.state))
            except Exception as exc:  # writers ignore it too (see _load_checkpoint)
                problem = f"its state does not load ({exc})"
        if problem is not None:
            return {**summary, "used": False, "reason": problem}
        state, head = self.fold_as_of(seq=checkpoint.seq, use_checkpoint=False)
        projector = self.projector
        differences = [
            what
            for what, same in (
                ("journal_id", head.journal_id == checkpoint.journal_id),
                ("goal times", head.goal_last_at == checkpoint.head.goal_last_at_map()),
                # Through dump and load, so both sides are in the form a checkpoint keeps.
                ("state", projector.load(projector.dump(state)) == stored),
            )
            if not same
        ]
        if differences:
            raise JournalCorrupt(
                f"the checkpoint of {self.store.target} at seq {checkpoint.seq} differs from "
                f"the journal folded from genesis ({', '.join(differences)}): writers that "
                "trusted it decided on a state the journal does not hold. Remove it (the "
                "<journal>.checkpoint file, or the quotaledger_checkpoints row) so writers "
                "fold from genesis, then `quotaledger audit` the decisions after it",
                code=codes.CHECKPOINT_MISMATCH,
                seq=checkpoint.seq,
                differences=differences,
            )
        return {**summary, "used": True, "matches": True}

    def _check_poisoned(self) -> None:
        """A handle whose store failed a write or fdatasync answers nothing any more."""
        if self.store.poisoned:
            raise JournalPoisoned(
                f"an earlier write or fdatasync of {self.store.target} failed; this handle is "
                "poisoned: reopen the journal (recovery runs on open)"
            )

    def _raise_if_corrupt(self, failure: Failure, verified: Head | None = None) -> None:
        corrupt = self._judge(failure, verified=verified)
        if corrupt is not None:
            raise corrupt

    def refresh(self) -> S:
        """Fold what other processes appended since this handle last looked, without
        the lock and without recovery (a torn tail is left alone, as readers do).
        For long-lived handles that answer reads, e.g. an in-process `turn resume`."""
        self._check_poisoned()
        self._refresh(recover=False, tolerate_corrupt=self._allow_corrupt)
        self._durable(self._head.offset)
        return self._state

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Journal[S]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _VisitorRaised(Exception):
    """A `replay` visitor's own exception, carried through the fold unchanged."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class Transaction(Generic[S]):
    """One locked read-decide-append cycle; commits on a clean exit."""

    __slots__ = (
        "_checked",
        "_goal_last_at",
        "_journal",
        "_more",
        "_pending",
        "_pending_bytes",
        "committed",
        "wall_us",
    )

    def __init__(self, journal: Journal[S]) -> None:
        self._journal = journal
        self._pending: list[PendingRecord] = []
        """Staged and encoded: the genesis record of a new journal, the first event."""
        self._more: list[tuple[str, str | None, bytes, str, Any]] = []
        """The events after the first (kind, goal, data, at, payload), encoded at commit
        behind the journal.batch record that leads a transaction of several (_final)."""
        self.committed: list[PendingRecord] = []
        """The records the transaction wrote, as written, once it has committed."""
        self._pending_bytes = 0
        self._goal_last_at: dict[str | None, str] = {}
        self._checked: tuple[str | None, object] = _NOTHING_CHECKED
        """A goal and a time known canonical and not before the goal's last event."""
        self.wall_us = 0

    def __enter__(self) -> Transaction[S]:
        self._journal._begin()
        # Time is sampled only now, under the lock (SPEC §2.2, seed 000).
        self.wall_us = wall_us()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        journal = self._journal
        pending = self._pending
        try:
            if pending and exc_type is None:
                pending = self.to_write()
                journal._commit(pending)
                self.committed = pending
            else:
                self._pending = []
                # Nothing appended: the answer (an idempotent replay, a refusal, an
                # input error judged against the state) stands on bytes folded from
                # others, which must be durable before it is given.
                if exc_type is None or (
                    issubclass(exc_type, Error) and not issubclass(exc_type, StorageFailure)
                ):
                    journal._durable(journal._head.offset)
        finally:
            journal._end()
        if exc_type is None and pending:
            journal._maybe_checkpoint()

    @property
    def state(self) -> S:
        return self._journal.state

    @property
    def head(self) -> Head:
        return self._journal.head

    def last_at(self, goal: str | None) -> str | None:
        staged = self._goal_last_at.get(goal)
        if staged is not None:
            return staged
        if goal is None and self._journal._head.next_seq == 0:
            return format_us(self.wall_us)  # the genesis record this transaction will stage
        return self._journal._head.goal_last_at.get(goal)

    def time_for(self, goal: str | None, explicit_at: str | None = None) -> str:
        """The event time for `goal`: implicit never goes back; explicit must not."""
        at = event_time(goal, self.last_at(goal), self.wall_us, explicit_at)
        self._checked = (goal, at)  # so append need not check this time again
        return at

    def _check_time(self, goal: str | None, at: str) -> None:
        if not is_canonical_at(at):
            raise InvalidInput(f"event time {at!r} is not canonical", code=codes.INVALID_TIME)
        last = self.last_at(goal)
        if last is not None and at < last:
            raise TimeRegression(f"event time {at} is earlier than {last}", at=at, last_at=last)
        check_not_in_future(at, self.wall_us, last)

    def append(self, kind: str, goal: str | None, payload: Any, at: str) -> PendingRecord:
        """Stage one event; it becomes durable when the transaction commits.

        The record returned is final for a transaction of one event. Once a second is
        staged, a journal.batch record will lead them and every seq and hash shifts:
        `committed` holds the records as written after the commit."""
        checked_goal, checked_at = self._checked
        if at is not checked_at or goal != checked_goal:
            self._check_time(goal, at)  # not the time time_for gave, nor a batch's shared one
        journal = self._journal
        decode = journal._decoders.get(kind) or journal._new_decoder(kind)
        staged = self._pending
        genesis = None
        if staged:
            previous = staged[-1].record
            seq, prev = previous.seq + 1, previous.hash
        elif journal._head.next_seq == 0:
            # A new journal: staged together with the first event (see Journal._genesis),
            # and only once that event is accepted.
            genesis = Journal._genesis(format_us(self.wall_us))
            seq, prev = 1, genesis.record.hash
        else:
            seq, prev = journal._head.next_seq, journal._head.prev_hash
        data = payload if isinstance(payload, bytes) else encode_payload(payload)
        # Check the payload against its schema right before it is written: a payload
        # that did not decode would make the journal corrupt for every later reader.
        try:
            decoded = decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise InvalidInput(
                f"payload of {kind} is invalid: {exc}", code=codes.INVALID_PAYLOAD
            ) from exc
        if kind == BATCH_KIND:
            raise InvalidInput(
                "journal.batch records are the journal's own", code=codes.RESERVED_KIND
            )
        if staged and staged[-1].record.seq != 0:
            return self._stage_more(kind, goal, data, at, decoded)
        line, digest = encode_line(seq, at, kind, goal, data, prev)
        size = len(line)
        if size > LINE_BYTES_MAX:
            raise InvalidInput(
                f"event of {size} bytes exceeds the 1 MiB line limit", code=codes.LINE_TOO_LARGE
            )
        pending_bytes = self._pending_bytes + size
        if len(staged) >= BATCH_EVENTS_MAX or pending_bytes > BATCH_BYTES_MAX:
            raise InvalidInput("too many events in one transaction", code=codes.BATCH_TOO_LARGE)
        record = Record(FORMAT_VERSION, seq, at, kind, goal, _Raw(data), prev, digest)
        pending = _new_pending(PendingRecord, (record, decoded, line))
        if genesis is not None:
            staged.append(genesis)
            pending_bytes += len(genesis.line)
            self._goal_last_at[None] = genesis.record.at
        staged.append(pending)
        self._pending_bytes = pending_bytes
        self._goal_last_at[goal] = at
        self._checked = (goal, at)  # the goal's last time now: the next event may share it
        return pending

    def to_write(self) -> list[PendingRecord]:
        """The records this transaction's one write would hold, were it to commit now."""
        return self._final() if self._more else self._pending

    def _stage_more(
        self, kind: str, goal: str | None, data: bytes, at: str, decoded: Any
    ) -> PendingRecord:
        """Stage an event after the first: the transaction is one of several records,
        so a journal.batch record will lead them, and every seq and hash shifts; they
        are encoded once, at commit. What this returns has the event's final seq but
        no prev or hash yet (`committed` has them after the commit)."""
        more = self._more
        events = len(more) + 2
        # A line is its payload plus an envelope of at most this many bytes (the exact
        # size is checked when it is encoded).
        size = len(data) + len(kind) * 6 + len(goal or "") * 6 + 256
        pending_bytes = self._pending_bytes + size
        if events > BATCH_EVENTS_MAX or pending_bytes > BATCH_BYTES_MAX:
            raise InvalidInput("too many events in one transaction", code=codes.BATCH_TOO_LARGE)
        if len(data) >= LINE_BYTES_MAX:
            raise InvalidInput(
                f"event of {len(data)} bytes exceeds the 1 MiB line limit",
                code=codes.LINE_TOO_LARGE,
            )
        more.append((kind, goal, data, at, decoded))
        self._pending_bytes = pending_bytes
        self._goal_last_at[goal] = at
        self._checked = (goal, at)
        seq = self._pending[-1].record.seq + len(more) + 1  # the announcement takes the first
        record = Record(FORMAT_VERSION, seq, at, kind, goal, _Raw(data), "", "")
        return _new_pending(PendingRecord, (record, decoded, b""))

    def _final(self) -> list[PendingRecord]:
        """The records a transaction of several events writes: a journal.batch record
        announcing how many follow, then the events, chained as usual (SPEC §2.4: all
        or nothing after a crash)."""
        *genesis, first = self._pending
        events = [
            (
                first.record.kind,
                first.record.goal,
                bytes(first.record.data),
                first.record.at,
                first.payload,
            ),
            *self._more,
        ]
        journal = self._journal
        base = genesis[0].record.at if genesis else journal._head.goal_last_at.get(None)
        # A journal-level time: not before the last journal-level event, nor after a
        # journal-level event of this transaction (times never go back per goal).
        at = min(
            [event_time(None, base, self.wall_us, None)]
            + [event_at for _, goal, _, event_at, _ in events if goal is None]
        )
        seq, prev = first.record.seq, first.record.prev
        announced = JournalBatch(records=len(events))
        data = encode_payload(announced)
        line, digest = encode_line(seq, at, BATCH_KIND, None, data, prev)
        record = Record(FORMAT_VERSION, seq, at, BATCH_KIND, None, _Raw(data), prev, digest)
        written = [*genesis, PendingRecord(record, announced, line)]
        for kind, goal, data, event_at, payload in events:
            seq, prev = seq + 1, digest
            line, digest = encode_line(seq, event_at, kind, goal, data, prev)
            if len(line) > LINE_BYTES_MAX:
                raise InvalidInput(
                    f"event of {len(line)} bytes exceeds the 1 MiB line limit",
                    code=codes.LINE_TOO_LARGE,
                )
            record = Record(FORMAT_VERSION, seq, event_at, kind, goal, _Raw(data), prev, digest)
            written.append(_new_pending(PendingRecord, (record, payload, line)))
        return written


def _raw(blob: bytes) -> Any:
    return msgspec.Raw(blob)


__all__ = ["Error", "Journal", "Projector", "Transaction", "open_store"]
