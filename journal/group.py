"""Group commit: the transactions of many requests made durable together (SPEC §11).

    with journal.group() as group:          # the lock taken, caught up
        for request in waiting:             # in arrival order
            answer(request)                 # each runs journal.transaction() as usual
    # one write and one fdatasync (one COMMIT) for every record staged, then the lock released
    deliver(answers)
    group.refresh_checkpoint()              # when one is due, after the answers are out

Inside a group a transaction takes no lock of its own and writes nothing: its commit
folds its records into the handle's state (so the next transaction sees them, exactly
as if it came after a durable commit) and stages their lines. The group writes them
all at its end. Until then nothing staged is durable, so a caller must not answer
from a group before it has ended cleanly; if its write or fdatasync fails, the handle
is poisoned (the store says so) and nothing of the group may be acknowledged.
"""

from __future__ import annotations

from types import TracebackType
from typing import Generic, TypeVar

from quotaledger.journal.chain import Head, PayloadDecoder
from quotaledger.journal.fold import Fold
from quotaledger.journal.store import PendingRecord

S = TypeVar("S")


class Group(Generic[S]):
    """One lock hold shared by many transactions; a `transaction.Host` to each."""

    __slots__ = ("_fold", "_start_offset", "broken", "staged")

    def __init__(self, fold: Fold[S]) -> None:
        self._fold = fold
        self._start_offset = 0
        self.staged: list[PendingRecord] = []
        """Every record the group's transactions committed, in order: its one write."""
        self.broken: BaseException | None = None
        """A fold that raised midway: the state is no longer the fold of anything, so
        the group writes nothing and the handle folds again from the store."""

    def __enter__(self) -> Group[S]:
        self._fold.begin()  # lock, catch up with every other writer, recover a torn tail
        self._start_offset = self._fold.head.offset
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        fold = self._fold
        try:
            if exc_type is not None or self.broken is not None:
                if self.staged or self.broken is not None:
                    fold.valid = False  # folded what will never be written: fold again
                return
            if self.staged:
                # One write and one fdatasync (or COMMIT) for the whole group.
                fold.store.append(self.staged, self._start_offset)
                fold.durable_offset = fold.head.offset
                fold.valid = True
            else:
                # Answers that stand on bytes others wrote are durable first (SPEC §2.3).
                fold.make_durable(fold.head.offset)
        finally:
            fold.end()

    def refresh_checkpoint(self) -> None:
        """The checkpoint cadence, run by the caller once the group's answers are out
        (a checkpoint of a large state takes a while; no answer should wait for it)."""
        if self.staged and self.broken is None and self._fold.valid:
            self._fold.committed()

    # -- what a transaction needs of its journal (`transaction.Host`) ------------------

    @property
    def head(self) -> Head:
        return self._fold.head

    @property
    def state(self) -> S:
        return self._fold.state

    def begin(self) -> None:
        if self.broken is not None:
            raise RuntimeError("a fold in this group failed; it answers nothing more")
        self._fold.check_poisoned()

    def end(self) -> None:
        """The lock stays held until the group ends."""

    def now_us(self) -> int:
        """The handle's clock (SPEC §2.2): on PostgreSQL the server's, read when the
        group took the lock, so every transaction of the group shares that time."""
        return self._fold.now_us()

    def clock_name(self) -> str:
        return self._fold.clock_name()

    def check_poisoned(self) -> None:
        self._fold.check_poisoned()

    def decoder_for(self, kind: str) -> PayloadDecoder:
        return self._fold.decoder_for(kind)

    def commit(self, pending: list[PendingRecord]) -> None:
        fold = self._fold
        fold.valid = False  # until the group's write is durable (or it is folded again)
        try:
            fold.fold_pending(pending)
        except BaseException as exc:
            self.broken = exc
            raise
        self.staged.extend(pending)

    def make_durable(self, end: int) -> None:
        """What the transaction folded is made durable when the group ends."""

    def committed(self) -> None:
        """The checkpoint cadence runs once, when the group ends."""
