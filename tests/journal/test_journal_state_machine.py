"""SPEC §10: a hypothesis state machine over appends, crashes, corruption, reopen, checkpoints.

Invariants: acknowledged ⊆ recovered ⊆ attempted; after a crash the recovered records
are exactly the old ones plus, for a one-event transaction, its event if its line
reached the disk whole, and for a transaction of several events all of them or none
(SPEC §2.4 item 5: however its one write was cut); the projection always equals the
fold of the recovered records.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from quotaledger.journal import Journal, JournalCorrupt
from quotaledger.journal.checkpoint import checkpoint_path, read_checkpoint
from tests.journal.journal_helpers import flip_byte, line_offsets, notes_in, toy_fold
from tests.toyprojector import TOY, Note


class _Abort(Exception):
    """Leaves a transaction without committing (to learn the bytes it would write)."""


class JournalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="quotaledger-sm-")
        self.path = os.path.join(self.directory, "j.jsonl")
        self.journal = Journal.open(self.path, TOY, checkpoint_every=5)
        self.recovered: list[int] = []  # the model: notes in the journal, in order
        self.acknowledged: set[int] = set()
        self.attempted: set[int] = set()
        self.counter = 0

    def teardown(self) -> None:
        self.journal.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _notes(self, count: int) -> list[int]:
        self.counter += count
        return list(range(self.counter - count + 1, self.counter + 1))

    def _commit(self, notes: list[int]) -> None:
        self.attempted.update(notes)
        with self.journal.transaction() as txn:
            for n in notes:
                txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
        # The transaction returned: these are acknowledged.
        self.acknowledged.update(notes)
        self.recovered.extend(notes)

    def _reopen(self) -> None:
        self.journal.close()
        self.journal = Journal.open(self.path, TOY, checkpoint_every=5)

    @rule()
    def append(self) -> None:
        self._commit(self._notes(1))

    @rule(count=st.integers(2, 6))
    def batch_append(self, count: int) -> None:
        self._commit(self._notes(count))

    @rule(count=st.integers(1, 12), data=st.data())
    def crash_during_append(self, count: int, data: st.DataObject) -> None:
        """A writer dies inside its one write: any prefix of its bytes may be on disk."""
        notes = self._notes(count)
        self.attempted.update(notes)
        try:
            with self.journal.transaction() as txn:
                for n in notes:
                    txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
                staged = txn.to_write()  # what its one write would be
                raise _Abort
        except _Abort:
            pass
        written = b"".join(p.line for p in staged)
        cut = data.draw(st.integers(0, len(written)), label="cut")
        self.journal.close()
        with open(self.path, "ab") as handle:
            handle.write(written[:cut])
        complete, end = [], 0
        for item in staged:
            end += len(item.line)
            if end <= cut and item.record.kind == "toy.note":
                complete.append(item.payload.n)
        if len(notes) > 1 and cut < len(written):
            complete = []  # a transaction of several events: all of it or none of it
        self.journal = Journal.open(self.path, TOY, checkpoint_every=5)
        # Whole lines that reached the disk verify and stay; the rest is torn off.
        self.recovered.extend(complete)

    @precondition(lambda self: len(self.recovered) >= 2)
    @rule(data=st.data())
    def corrupt_then_restore(self, data: st.DataObject) -> None:
        """A flipped byte in a record followed by valid ones: refused, file untouched."""
        self.journal.close()
        before = Path(self.path).read_bytes()
        offsets = line_offsets(before)
        seq = data.draw(st.integers(1, len(offsets) - 3), label="seq")  # never the last
        # Not the newline: merging the last two lines would make a (legitimately) torn tail.
        offset = data.draw(st.integers(offsets[seq], offsets[seq + 1] - 2), label="offset")
        flip_byte(self.path, offset)
        damaged = Path(self.path).read_bytes()

        with pytest.raises(JournalCorrupt) as refused:
            Journal.open(self.path, TOY, write=False, use_checkpoint=False)
        assert (refused.value.context["seq"], refused.value.context["offset"]) == (
            seq,
            offsets[seq],
        )
        checkpoint = read_checkpoint(checkpoint_path(self.path))
        trusted = checkpoint is not None and checkpoint.seq > seq  # covers it, still matches
        try:
            Journal.open(self.path, TOY).close()
            assert trusted, "a writer opened a corrupt journal"
        except JournalCorrupt as exc:
            assert exc.context["seq"] == seq
        assert Path(self.path).read_bytes() == damaged
        flip_byte(self.path, offset)
        assert Path(self.path).read_bytes() == before
        self.journal = Journal.open(self.path, TOY, checkpoint_every=5)

    @rule()
    def reopen(self) -> None:
        self._reopen()

    @precondition(lambda self: self.journal.head.next_seq > 0)
    @rule()
    def checkpoint(self) -> None:
        written = self.journal.write_checkpoint()
        assert written.seq == self.journal.head.seq
        self._reopen()
        assert self.journal.checkpoint_seq == written.seq

    @invariant()
    def projection_is_the_fold_of_the_recovered_records(self) -> None:
        expected, state = toy_fold(self.recovered), self.journal.state
        assert (state.count, state.total) == (expected.count, expected.total)
        # Seqs count the journal.batch records too: the last note's is in the file.
        assert state.last_seq == _last_note_seq(self.path)

    @invariant()
    def the_file_holds_exactly_the_recovered_records(self) -> None:
        if os.path.exists(self.path):
            assert notes_in(self.path) == self.recovered

    @invariant()
    def acknowledged_within_recovered_within_attempted(self) -> None:
        recovered = set(self.recovered)
        assert self.acknowledged <= recovered <= self.attempted
        assert len(recovered) == len(self.recovered)


def _last_note_seq(path: str) -> int:
    from tests.journal.independent_verifier import TOY_SCHEMAS, verify

    if not os.path.exists(path):
        return -1
    notes = [r["seq"] for r in verify(Path(path).read_bytes(), TOY_SCHEMAS).records]
    kinds = [r["kind"] for r in verify(Path(path).read_bytes(), TOY_SCHEMAS).records]
    found = [seq for seq, kind in zip(notes, kinds, strict=True) if kind == "toy.note"]
    return found[-1] if found else -1


JournalMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestJournalMachine = JournalMachine.TestCase
