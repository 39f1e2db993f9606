"""A handle's projection state kept current over its store: the fold, its lock, its
checkpoints, and what makes its answers durable.

`Fold` is the engine's inside, shared by the modules of one job each: `Journal` (open,
the public handle), `Transaction` (the append protocol), `reading` (replay, verify),
`repair` and `importing`. It knows nothing of the domain: a `Projector` supplies the
payload schemas, the initial state and the fold step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from quotaledger.journal import checkpointing, codes
from quotaledger.journal.chain import (
    Failure,
    Head,
    NotFolded,
    PayloadDecoder,
    RunVisitor,
    Visitor,
    scan,
)
from quotaledger.journal.checkpoint import Checkpoint, warn
from quotaledger.journal.checkpointing import Accepted
from quotaledger.journal.clock import wall_us
from quotaledger.journal.errors import InvalidInput, JournalCorrupt, JournalPoisoned
from quotaledger.journal.goalsources import GoalSections, Sectioned
from quotaledger.journal.limits import CHECKPOINT_EVERY_EVENTS
from quotaledger.journal.locking import LockHold
from quotaledger.journal.record import (
    BATCH_KIND,
    REPAIRED_KIND,
    JournalBatch,
    JournalRepaired,
    Record,
    self_verify,
)
from quotaledger.journal.recovery import classify, corrupt_error, move_torn_tail
from quotaledger.journal.sections import Damaged
from quotaledger.journal.store import (
    PendingRecord,
    Store,
    Tail,
    checkpoints_of,
    local_file_of,
    server_clock_of,
)

S = TypeVar("S")
ENGINE_DECODERS: dict[str, PayloadDecoder] = {
    REPAIRED_KIND: msgspec.json.Decoder(JournalRepaired).decode,
    BATCH_KIND: msgspec.json.Decoder(JournalBatch).decode,
}
"""The journal's own kinds, which every projector's journal reads."""
Progress = Callable[[int], None]
"""Called with the number of bytes just processed (for progress bars)."""


class Projector(Protocol[S]):
    """What the journal needs to know about the domain.

    A projector may also offer `visitor(state, noting=None)`: `apply` on that state as
    a Visitor, which the fold then calls for each record instead of wrapping `apply`
    (a step that binds the state once per fold instead of per record), telling
    `noting` each record's goal key and seq before it folds it; and with it
    `run_visitor(state)`: the same fold as a RunVisitor, which the fold calls with a
    transaction's records at once."""

    version: str

    def decoder(self, kind: str) -> PayloadDecoder | None: ...

    def initial(self) -> S: ...

    def apply(self, state: S, record: Record, payload: Any) -> None: ...

    def dump(self, state: S) -> bytes: ...

    def load(self, blob: bytes) -> S: ...


class VisitorRaised(Exception):
    """A `replay` visitor's own exception, carried through the fold unchanged."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


class Fold(Generic[S]):
    """The head and state of one handle, brought up to the end of its store."""

    def __init__(
        self,
        store: Store,
        projector: Projector[S],
        *,
        lock_timeout_s: float,
        checkpoint_every: int = CHECKPOINT_EVERY_EVENTS,
        allow_corrupt: bool = False,
    ) -> None:
        self.store = store
        self.projector = projector
        self.hold = LockHold(store, lock_timeout_s)
        self.server_clock = server_clock_of(store)
        self.checkpoint_every = checkpoint_every
        self.allow_corrupt = allow_corrupt
        self.head = Head()
        self.state = projector.initial()
        self.valid = False
        """Whether the state is the fold of the store as last read (see catch_up)."""
        self.checkpoint_seq = -1
        """The seq of the checkpoint this handle's fold started from or last wrote."""
        self.projector_sections: Sectioned[S] | None = checkpointing.sectioned(projector)
        self.source: GoalSections | None = None
        """What fills the state goal by goal, if it started from a checkpoint."""
        self.basis: Checkpoint | None = None
        """The checkpoint the state started from or this handle last wrote."""
        self.dirty: dict[str, int] = {}
        """The goals (sections' keys) the fold changed since `basis`: the seq of each
        one's last change."""
        self.stored_seq = -1
        """The newest checkpoint's seq this handle knows stored, by any writer (the
        checkpoint cadence counts from it)."""
        self.recovered: list[str] = []
        """Paths of torn tails this handle moved aside."""
        self.corruption: Failure | None = None
        """For readers opened with allow_corrupt: where the verified prefix ends."""
        self.torn_tail: Failure | None = None
        project_decoder = projector.decoder
        self.decoder: Callable[[str], PayloadDecoder | None] = lambda kind: (
            ENGINE_DECODERS.get(kind) or project_decoder(kind)
        )
        self.decoders: dict[str, PayloadDecoder] = {}
        """Known kinds' decoders, so an append finds its decoder with one dict lookup."""
        self.snapshot_end = 0
        """Where the last fold's read of the store ended: what failures are judged on."""
        self.durable_offset = 0
        """The bytes before this offset are known durable: this handle's own commit, or
        its fdatasync before an answer, covered them."""
        self._bound_step: tuple[S, Visitor, RunVisitor | None] | None = None
        """The fold steps bound to the state they fold into (see _own_steps)."""

    # -- folding -------------------------------------------------------------------

    def catch_up(
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
        the verified prefix and `corruption` says where it ends. Transactions never
        tolerate it. `also` sees every record the fold folds, before it is folded, if
        the fold starts from genesis, or with `resume` from a checkpoint whose head
        `resume` accepts (see `reading.replay`).
        """
        head, store = self.head, self.store
        tail: Tail = (
            store.tail_after(head.offset, head.next_seq - 1, head.prev_hash)
            if self.valid
            else "changed"
        )
        if tail == "same":
            return  # what every transaction of a lone writer finds: one read, nothing to do
        if tail == "changed":
            # First use, or someone cut records we had folded (a repair): start over.
            self.head = head = Head()
            self.state = self.projector.initial()
            self.checkpoint_seq = self.stored_seq = -1
            self.source, self.basis, self.dirty = None, None, {}
            self.durable_offset = 0
            if use_checkpoint:
                self.load_checkpoint(covers=resume)
                head = self.head
            if self.checkpoint_seq >= 0 and resume is None:
                also = None  # the visitor needs every record: `replay` reads them again
            self.valid = True
            if store.tail_after(head.offset, head.next_seq - 1, head.prev_hash) == "same":
                return
        # `scan` advances the head before the visitor folds a record: if the fold raises
        # midway, head and state disagree, so the state counts as valid only once the
        # fold (and the handling of its failure) has finished.
        self.valid = False
        visit = self.visitor(self.state, also)
        failure = self.fold_into(
            self.head, visit, progress=progress, visit_run=self.run_visitor(self.state, also)
        )
        if failure is not None:
            corrupt = self.judge(failure, recover=recover)
            if corrupt is not None:
                self.corruption = failure
                if not tolerate_corrupt:
                    raise corrupt
        self.valid = True

    def make_durable(self, end: int) -> None:
        """Make the bytes this handle folded, up to `end`, durable before it answers from
        them (SPEC §2.3): another process may have written them and died before its
        fdatasync, and an answer must not be false after a power loss. A commit's own
        fdatasync covers what it appended, so this costs a syscall only when an answer
        stands on bytes another handle wrote, and little then: nothing is dirty unless
        that writer died before its fdatasync."""
        if end > self.durable_offset:
            self.store.make_durable()
            self.durable_offset = end

    def decoder_for(self, kind: str) -> PayloadDecoder:
        """The decoder of `kind` (cached), or `unknown_kind`."""
        found = self.decoders.get(kind)
        if found is None:
            found = self.decoder(kind)
            if found is None:
                raise InvalidInput(f"unknown event kind {kind!r}", code=codes.UNKNOWN_KIND)
            self.decoders[kind] = found
        return found

    def visitor(
        self, state: S, also: Visitor | None = None, source: GoalSections | None = None
    ) -> Visitor:
        """The fold step on `state` as scan's visitor (the projector's own `visitor`,
        if it has one: a step that binds the state once), after `also` if given. On
        the handle's own state it notes each record's goal as changed since the
        checkpoint, and a record of a goal its `source` has not loaded yet waits for
        that goal's first use instead of being folded now."""
        make_visitor = getattr(self.projector, "visitor", None)
        source = self.source
        noting = state is self.state and self.notes_changes()
        if make_visitor is not None and noting and source is None:
            fold: Visitor = make_visitor(state, self.dirty.__setitem__)
        else:
            if make_visitor is not None:
                fold = make_visitor(state)
            else:
                apply = self.projector.apply

                def fold(record: Record, payload: Any, line: bytes) -> None:
                    apply(state, record, payload)

            if noting:
                fold = self._noting(fold, source)
        if also is None:
            return fold

        def visit_also(record: Record, payload: Any, line: bytes) -> None:
            try:
                also(record, payload, line)
            except Exception as exc:
                # The caller's error, not a record that does not fold: scan must not
                # take it for corruption (`replay` raises it as it is).
                raise VisitorRaised(exc) from exc
            fold(record, payload, line)

        return visit_also

    def run_visitor(self, state: S, also: Visitor | None = None) -> RunVisitor | None:
        """The projector's run visitor on `state`, where `visitor` is its plain step
        (no `also`, no changes to note, no goals waiting for their section)."""
        make_run_visitor = getattr(self.projector, "run_visitor", None)
        if make_run_visitor is None or also is not None or self.source is not None:
            return None
        if state is self.state and self.notes_changes():
            return None
        run_visitor: RunVisitor = make_run_visitor(state)
        return run_visitor

    def notes_changes(self) -> bool:
        """Whether the fold must note the goals it changes (`dirty`): only against a
        checkpoint (`basis`). Without one the next checkpoint writes every goal, and a
        basis set later (`wrote`, `load_checkpoint`) starts `dirty` anew, so a fold
        from genesis skips a dict write per record."""
        return self.basis is not None or self.source is not None

    def _noting(self, fold: Visitor, source: GoalSections | None) -> Visitor:
        changed = self.dirty.__setitem__
        if source is None:

            def noting(record: Record, payload: Any, line: bytes) -> None:
                changed(record.goal or "", record.seq)
                fold(record, payload, line)

            return noting
        loaded, pending = source.loaded, source.pending

        def deferring(record: Record, payload: Any, line: bytes) -> None:
            key = record.goal or ""
            changed(key, record.seq)
            if key in loaded or source.complete:
                fold(record, payload, line)
            else:
                waiting = pending.get(key)
                if waiting is None:
                    pending[key] = [(record, payload)]
                else:
                    waiting.append((record, payload))

        return deferring

    def fold_into(
        self,
        head: Head,
        visit: Visitor | None,
        *,
        stop_after_seq: int | None = None,
        progress: Progress | None = None,
        batches: list[tuple[int, int]] | None = None,
        visit_run: RunVisitor | None = None,
    ) -> Failure | None:
        """Verify and visit the records after `head`; returns the first failure."""
        for failure in self.scan_chunks(
            head,
            visit,
            stop_after_seq=stop_after_seq,
            progress=progress,
            batches=batches,
            visit_run=visit_run,
        ):
            if failure is not None:
                return failure
        return None

    def scan_chunks(
        self,
        head: Head,
        visit: Visitor | None,
        *,
        stop_after_seq: int | None = None,
        progress: Progress | None = None,
        batches: list[tuple[int, int]] | None = None,
        visit_run: RunVisitor | None = None,
    ) -> Iterator[Failure | None]:
        """The one loop that reads the store after `head` chunk by chunk, carrying a
        line split between chunks into the next, and verifies each: every verified
        record goes to `visit` and advances `head`. Yields once per chunk (None, or the
        first failure, which ends it), so a reader can hand on each chunk's records as
        they come; bytes left over at the end are yielded as an incomplete failure.
        Notes where this read ended (`snapshot_end`): what failures are judged on."""
        carry = b""
        decoder = self.decoder
        self.snapshot_end = head.offset
        for chunk in self.store.chunks(head.offset, head.next_seq):
            self.snapshot_end += len(chunk)
            buf = carry + chunk if carry else chunk
            start = head.offset
            failure = scan(
                buf,
                head,
                decoder,
                visit,
                stop_after_seq=stop_after_seq,
                batches=batches,
                visit_run=visit_run,
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

    # -- what a fold stopped at (journal/recovery.py) --------------------------------

    def judge(
        self, failure: Failure, *, recover: bool = False, verified: Head | None = None
    ) -> JournalCorrupt | None:
        """What the failure a fold ended on is, for every reader and writer: a torn tail
        (only a file can have one) is noted in `torn_tail`, or, when `recover`, moved
        aside and forgotten, and None is returned; corruption is returned as the error
        that reports it, for the caller to raise (or to note, if it tolerates it)."""
        local = local_file_of(self.store)
        if local is None or classify(self.store, failure, self.snapshot_end) != "torn":
            return corrupt_error(self.store.target, failure, verified)
        self.torn_tail = torn = failure.torn_from()
        if recover:
            self.recovered.append(move_torn_tail(local, torn, self.snapshot_end))
            self.torn_tail = None
        return None

    def raise_if_corrupt(self, failure: Failure, verified: Head | None = None) -> None:
        corrupt = self.judge(failure, verified=verified)
        if corrupt is not None:
            raise corrupt

    def check_poisoned(self) -> None:
        """A handle whose store failed a write or fdatasync answers nothing any more."""
        if self.store.poisoned:
            raise JournalPoisoned(
                f"an earlier write or fdatasync of {self.store.target} failed; this handle is "
                "poisoned: reopen the journal (recovery runs on open)"
            )

    # -- under the lock (transactions, repair, import) -------------------------------

    def begin(self) -> None:
        """Take the lock (this thread's turn, then the store's) and catch up, recovering
        a torn tail: what every command that writes does first."""
        if self.store.poisoned:
            self.check_poisoned()
        self.hold.acquire(self.read_ahead)
        try:
            self.catch_up(recover=True)
            if self.head.next_seq == 0:
                local = local_file_of(self.store)
                if local is not None and local.ensure_linked(self.hold.timeout_s):
                    self.valid = False  # another file now: fold it from the start
                    self.catch_up(recover=True)
        except BaseException:
            self.hold.release()
            raise

    def read_ahead(self) -> None:
        """While this writer waits for the lock: fold what the others appended since
        its last look, unlocked, as a reader does, so the locked catch-up folds only
        what the holders ahead of it append meanwhile (the fold of N-1 writers' records
        moves out of the critical section). A line being written ends it; a failure
        of any other kind is left whole to the locked catch-up, which judges it."""
        head = self.head
        if (
            not self.valid
            or self.store.tail_after(head.offset, head.next_seq - 1, head.prev_hash) != "grew"
        ):
            return
        self.valid = False
        state = self.state
        failure = self.fold_into(head, self.visitor(state), visit_run=self.run_visitor(state))
        self.valid = failure is None or failure.incomplete

    def end(self) -> None:
        self.hold.release()

    def now_us(self) -> int:
        """The clock implicit time comes from (SPEC §2.2), under the lock: the database
        server's for PostgreSQL (read when the lock was taken), else this machine's."""
        if self.server_clock is not None:
            server_us = self.server_clock.locked_now_us()
            if server_us is not None:
                return server_us
        return wall_us()

    def clock_name(self) -> str:
        """Whose clock `now_us` reads, as an error message names it."""
        return "the database server's clock" if self.server_clock else "this machine's clock"

    def commit(self, pending: list[PendingRecord]) -> None:
        """Fold `pending`, then make it durable; until both succeed the state is invalid.

        The fold runs before the write and fdatasync, not after: a projection that
        raises then leaves nothing on disk, and the CPU work is done while caches are
        warm instead of after the sleep in fdatasync (measurably faster durable
        appends). A failed write or sync leaves the state to be rebuilt from the log.
        """
        self.valid = False
        offset = self.head.offset
        end = self.fold_pending(pending)
        self.store.append(pending, offset)  # a new journal's directory entry too (SPEC §2.3)
        self.durable_offset = end
        self.valid = True

    def fold_pending(self, pending: list[PendingRecord]) -> int:
        """Fold records about to be written and advance the head past them; returns
        where they will end. The caller marks the state invalid until they are durable."""
        head = self.head
        self._fold_own(pending)
        if pending[0].record.seq == 0:
            head.journal_id = pending[0].payload.journal_id
        end = head.offset
        goal_last_at = head.goal_last_at
        changed = self.dirty.__setitem__ if self.notes_changes() else None
        for record, _, line in pending:
            if changed is not None:
                changed(record.goal or "", record.seq)
            end += len(line)
            goal_last_at[record.goal] = record.at
        last = pending[-1].record
        head.next_seq = last.seq + 1
        head.prev_hash = last.hash
        head.offset = end
        return end

    def _fold_own(self, pending: list[PendingRecord]) -> None:
        """Fold `pending` into the handle's own state: a transaction of several records
        in one call of the projector's run visitor, if it has one."""
        step, run_step = self._own_steps()
        if run_step is None or len(pending) < 2:
            for record, payload, line in pending:
                step(record, payload, line)
            return
        try:
            run_step(pending)
        except NotFolded as exc:
            error = exc.error
        else:
            return
        raise error  # as the visitor would have raised it

    def _own_steps(self) -> tuple[Visitor, RunVisitor | None]:
        """The fold step on the handle's own state (the projector's visitor, which
        binds the state and each kind's step once), and its run visitor if it has one:
        made once per state, not per commit, as a lone writer commits one event at a
        time."""
        state = self.state
        bound = self._bound_step
        if bound is None or bound[0] is not state:
            make_visitor = getattr(self.projector, "visitor", None)
            if make_visitor is not None:
                step: Visitor = make_visitor(state)
            else:
                apply = self.projector.apply

                def step(record: Record, payload: Any, line: bytes) -> None:
                    apply(state, record, payload)

            make_run_visitor = getattr(self.projector, "run_visitor", None)
            run_step = None if make_run_visitor is None else make_run_visitor(state)
            bound = self._bound_step = (state, step, run_step)
        return bound[1], bound[2]

    def committed(self) -> None:
        """After a commit, the lock released: refresh the checkpoint once the records
        past the newest one stored reach the cadence (a cache: a failure only warns).
        Several writers of one journal share the stored checkpoint: a writer that finds
        one refreshed by another since its own look adopts it instead of writing the
        whole state again, so the journal's checkpoint is refreshed once per cadence,
        not once per writer, and a cold process never folds more than the cadence."""
        head_seq = self.head.next_seq - 1
        if head_seq - max(self.checkpoint_seq, self.stored_seq) < self.checkpoint_every:
            return
        checkpoints = checkpoints_of(self.store)
        if checkpoints is None:
            return
        try:
            peeked = checkpoints.peek_checkpoint()
            if (
                peeked is not None
                and peeked[1] == self.projector.version
                # A seq beyond what this cadence allows is not trusted to stand for a
                # fresh checkpoint (another journal's, say): at worst one cadence late.
                and self.stored_seq < peeked[0] <= head_seq + self.checkpoint_every
            ):
                self.stored_seq = peeked[0]
                if head_seq - peeked[0] < self.checkpoint_every:
                    return
            self.write_checkpoint()
        except Exception as exc:  # the commit is durable: a checkpoint is only a cache
            warn(f"could not refresh the checkpoint: {exc}")

    # -- checkpoints (SPEC §2.5; journal/checkpointing.py) --------------------------

    def load_checkpoint(self, covers: Callable[[Head], bool] | None = None) -> None:
        accepted = self.accept_checkpoint(say=warn, covers=covers)
        if accepted is not None:
            self.state, self.head, self.source, self.basis = accepted
            self.dirty = {}
            self.checkpoint_seq = self.head.seq
            self.stored_seq = max(self.stored_seq, self.head.seq)

    def accept_checkpoint(
        self,
        *,
        say: Callable[[str], None] | None,
        covers: Callable[[Head], bool] | None = None,
    ) -> Accepted | None:
        """The stored checkpoint as a state (lazy: each goal loaded on first use), the
        head to fold on from and the state's source, if it may be trusted (its
        projection version is the code's, the journal has its record at its offset
        with its seq and hash, its files are whole) and `covers` accepts its head;
        else None, and `say` is told why it was ignored."""
        checkpoint = self.stored_checkpoint()
        if checkpoint is None:
            return None
        problem = self.checkpoint_problem(checkpoint)
        if problem is None:
            try:
                accepted = checkpointing.accept(self, checkpoint, covers)
            except (Damaged, ValueError, msgspec.DecodeError, msgspec.ValidationError) as exc:
                problem = f"state does not load ({exc})"
        if problem is not None:
            if say is not None:
                say(f"ignoring checkpoint of {self.store.target}: {problem}; folding from genesis")
            return None
        return accepted

    def stored_checkpoint(self) -> Checkpoint | None:
        checkpoints = checkpoints_of(self.store)
        return None if checkpoints is None else checkpoints.load_checkpoint()

    def checkpoint_problem(self, checkpoint: Checkpoint) -> str | None:
        """Why writers would not trust `checkpoint` (None: they would)."""
        if checkpoint.projection_version != self.projector.version:
            return (
                f"projection version {checkpoint.projection_version!r} is not the code's "
                f"{self.projector.version!r}"
            )
        checkpoints = checkpoints_of(self.store)
        line = (
            None
            if checkpoints is None
            else checkpoints.line_ending_at(checkpoint.offset, checkpoint.seq)
        )
        record = self_verify(line) if line is not None else None
        if record is None or record.seq != checkpoint.seq or record.hash != checkpoint.hash:
            return f"the journal has no record seq {checkpoint.seq} ending at {checkpoint.offset}"
        return None

    def write_checkpoint(self) -> Checkpoint:
        """Store the current state as a checkpoint (covers only durable records)."""
        return checkpointing.write(self)

    def wrote(self, checkpoint: Checkpoint) -> Checkpoint:
        """`checkpoint` is stored: what this handle's next refresh is written against."""
        self.basis, self.dirty = checkpoint, {}
        self.checkpoint_seq = self.stored_seq = checkpoint.seq
        return checkpoint
