"""Reading a journal by the readers' rules (SPEC §2.3): the state as of a record or a
time, every record in order (replay, records, records_after: `log --follow`), and
verification of the whole chain and of the checkpoint against it.

Functions of a handle's `Fold`; `Journal`'s methods of the same names call them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from quotaledger.journal import checkpointing, codes
from quotaledger.journal.chain import Head, Visitor
from quotaledger.journal.checkpointing import latest_at
from quotaledger.journal.errors import JournalCorrupt
from quotaledger.journal.fold import Fold, Progress, VisitorRaised
from quotaledger.journal.record import Record
from quotaledger.journal.store import local_file_of

S = TypeVar("S")


def fold_as_of(
    fold: Fold[S], *, seq: int | None = None, at: str | None = None, use_checkpoint: bool = True
) -> tuple[S, Head]:
    """A fresh state as of record `seq` or time `at` (every event with at <= T);
    from genesis when not `use_checkpoint` (audit, verify: never trust the cache)."""
    fold.check_poisoned()
    head, state = Head(), fold.projector.initial()

    def in_prefix(covered: Head) -> bool:
        """Whether every record the checkpoint covers is in the requested prefix."""
        if seq is not None:
            return covered.seq <= seq
        latest = latest_at(covered.goal_last_at)
        return at is not None and (latest is None or latest <= at)

    # Quietly: the handle's own fold already warned about a checkpoint it ignored.
    accepted = fold.accept_checkpoint(say=None, covers=in_prefix) if use_checkpoint else None
    if accepted is not None:
        state, head = accepted.state, accepted.head
    apply = fold.projector.apply
    if at is None:
        visit = fold.visitor(state)
    else:
        limit = at

        def visit(record: Record, payload: Any, line: bytes) -> None:
            if record.at <= limit:
                apply(state, record, payload)

    failure = fold.fold_into(head, visit, stop_after_seq=seq)
    if failure is not None and seq is not None and failure.seq <= seq:
        fold.raise_if_corrupt(failure)
    fold.make_durable(head.offset)
    return state, head


def replay(
    fold: Fold[S],
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
    fold.check_poisoned()
    if not fold.valid:
        try:
            fold.catch_up(
                recover=False,
                use_checkpoint=use_checkpoint,
                tolerate_corrupt=fold.allow_corrupt,
                also=visit,
                progress=progress,
                resume=resume,
            )
        except VisitorRaised as raised:
            raise raised.error from None
        fold.make_durable(fold.head.offset)
        if fold.checkpoint_seq < 0 or resume is not None:
            return
    for record, payload, line in records(fold, progress=progress):
        visit(record, payload, line)


def records(
    fold: Fold[S],
    *,
    after_seq: int = -1,
    progress: Progress | None = None,
) -> Iterator[tuple[Record, Any, bytes]]:
    """Every verified record in order, with its decoded payload and its line."""
    fold.check_poisoned()
    fold.torn_tail = None
    head = Head()
    batch: list[tuple[Record, Any, bytes]] = []

    def collect(record: Record, payload: Any, line: bytes) -> None:
        if record.seq > after_seq:
            batch.append((record, payload, line))

    for failure in fold.scan_chunks(head, collect, progress=progress):
        fold.make_durable(head.offset)
        yield from batch
        batch.clear()
        if failure is not None:
            fold.raise_if_corrupt(failure)  # returns for a torn tail
            return


def records_after(fold: Fold[S], head: Head) -> Iterator[tuple[Record, Any, bytes]]:
    """The verified records after `head`, advancing it past each, by the readers'
    rules (SPEC §2.3): bytes after the last complete record that are a write in
    progress or a torn tail are left for a later call (the writer completes them,
    or the next writer's recovery moves them aside); mid-log corruption raises
    JournalCorrupt after the verified records. For `log --follow`, which calls it
    again with the same head to see what was appended since."""
    fold.check_poisoned()
    if (
        head.next_seq > 0
        and fold.store.tail_after(head.offset, head.seq, head.prev_hash) == "changed"
    ):
        raise JournalCorrupt(
            f"records up to seq {head.seq} of {fold.store.target} changed while being "
            "read (repaired or replaced)",
            code=codes.JOURNAL_CHANGED,
            seq=head.seq,
        )
    batch: list[tuple[Record, Any, bytes]] = []

    def collect(record: Record, payload: Any, line: bytes) -> None:
        batch.append((record, payload, line))

    for failure in fold.scan_chunks(head, collect):
        yield from batch
        batch.clear()
        if failure is not None:
            fold.raise_if_corrupt(failure)  # returns for a torn tail (or a write in progress)
            return


def verify(
    fold: Fold[S],
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
    fold.check_poisoned()
    fold.torn_tail = None
    local = local_file_of(fold.store)
    fd = local.local_fd() if local is not None else None
    found = None
    if parallel and visit is None and fd is not None:
        size = fold.store.size_hint(0, 0) or 0
        from quotaledger.journal.fanout import verify_file  # verify only: no start-up cost

        found = verify_file(fd, size, fold.decoder, progress)
    if found is not None:
        head, failure = found
        fold.snapshot_end = size
    else:
        head = Head()
        failure = fold.fold_into(head, visit, progress=progress)
    if failure is not None:
        fold.raise_if_corrupt(failure, verified=head)
    fold.store.verify_columns()  # SQL readers query those: they must say what lines say
    fold.make_durable(head.offset)
    return head


def check_checkpoint(fold: Fold[S], verified: Head) -> dict[str, Any] | None:
    """Compare the stored checkpoint with the fold of the journal from genesis up to
    its record (SPEC §2.5: a checkpoint is a cache, never a source of truth).

    None without a checkpoint. One writers would ignore (its record is not in the
    verified prefix, its projection version is not the code's, its state does not
    load) is reported as not used; one writers would trust whose state, journal
    id or per-goal times differ from the fold raises `checkpoint_mismatch`.
    """
    checkpoint = fold.stored_checkpoint()
    if checkpoint is None:
        return None
    summary: dict[str, Any] = {"seq": checkpoint.seq, "hash": checkpoint.hash}
    problem = fold.checkpoint_problem(checkpoint)
    if problem is None and checkpoint.seq > verified.seq:
        problem = f"seq {checkpoint.seq} is past the verified prefix (seq {verified.seq})"
    accepted, stored = None, b""
    if problem is None:
        try:
            accepted = checkpointing.accept(fold, checkpoint, None, strict=True)
            stored = b"" if accepted is None else fold.projector.dump(accepted.state)
        except Exception as exc:  # writers ignore it too (see Fold.accept_checkpoint)
            problem = f"its state does not load ({exc})"
    if problem is not None or accepted is None:
        return {**summary, "used": False, "reason": problem}
    state, head = fold_as_of(fold, seq=checkpoint.seq, use_checkpoint=False)
    projector = fold.projector
    differences = [
        what
        for what, same in (
            ("journal_id", head.journal_id == checkpoint.journal_id),
            ("goal times", accepted.head.goal_last_at == head.goal_last_at),
            # Through dump and load, so both sides are in the form a checkpoint keeps.
            ("state", projector.load(projector.dump(state)) == projector.load(stored)),
        )
        if not same
    ]
    if differences:
        raise JournalCorrupt(
            f"the checkpoint of {fold.store.target} at seq {checkpoint.seq} differs from "
            f"the journal folded from genesis ({', '.join(differences)}): writers that "
            "trusted it decided on a state the journal does not hold. Remove it (the "
            "<journal>.checkpoint file, or the quotaledger_checkpoints row) so writers "
            "fold from genesis, then `quotaledger audit` the decisions after it",
            code=codes.CHECKPOINT_MISMATCH,
            seq=checkpoint.seq,
            differences=differences,
        )
    return {**summary, "used": True, "matches": True}
