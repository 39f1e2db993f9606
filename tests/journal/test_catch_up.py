"""Several writers on one journal (SPEC §9, issue 30): each catches up with only what
the others appended since its own last look, a new handle starts from the newest
checkpoint, and the writers refresh the one stored checkpoint once per cadence
between them, not once each. Records folded are counted, not timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quotaledger.journal import Journal, Record
from quotaledger.journal.checkpoint import checkpoint_path, read_checkpoint
from tests.checkpoint_files import rewrite
from tests.toyprojector import TOY, Note, ToyState


class CountingProjector:
    """The toy projector, counting the records it folds (appends of its own included)."""

    version = TOY.version

    def __init__(self) -> None:
        self.folded = 0

    def decoder(self, kind: str) -> Any:
        return TOY.decoder(kind)

    def initial(self) -> ToyState:
        return TOY.initial()

    def apply(self, state: ToyState, record: Record, payload: Any) -> None:
        self.folded += 1
        TOY.apply(state, record, payload)

    def dump(self, state: ToyState) -> bytes:
        return TOY.dump(state)

    def load(self, blob: bytes) -> ToyState:
        return TOY.load(blob)


def _note(journal: Journal[Any], n: int) -> None:
    with journal.transaction() as txn:
        txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))


def test_a_writer_folds_only_what_others_appended_since_its_own_last_look(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "j.jsonl")
    counting = CountingProjector()
    other = Journal.open(path, TOY, checkpoint_every=3)
    mine = Journal.open(path, counting, checkpoint_every=10**9)
    try:
        _note(other, 1)
        _note(mine, 2)
        for round_ in range(5):
            for n in range(round_ + 1):  # the other writes (and checkpoints) meanwhile
                _note(other, 10 + n)
            counting.folded = 0
            _note(mine, 100 + round_)
            # The other's new records, then its own: never the ones before its last look.
            assert counting.folded == round_ + 1 + 1
        assert mine.state.count == other.refresh().count
    finally:
        mine.close()
        other.close()


def test_a_new_handle_starts_from_the_newest_checkpoint(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    writer = Journal.open(path, TOY, checkpoint_every=5)
    try:
        for n in range(13):
            _note(writer, n)
    finally:
        writer.close()
    stored = read_checkpoint(checkpoint_path(path))
    assert stored is not None and stored.seq >= 5
    counting = CountingProjector()
    cold = Journal.open(path, counting, write=False)
    try:
        assert cold.checkpoint_seq == stored.seq
        assert counting.folded == cold.head.seq - stored.seq  # only the records after it
        assert cold.state.count == 13
    finally:
        cold.close()


def test_several_writers_refresh_the_checkpoint_once_per_cadence(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    cadence = 10
    writers = [Journal.open(path, TOY, checkpoint_every=cadence) for _ in range(3)]
    refreshed_at: list[int] = []
    try:
        for n in range(90):
            writer = writers[n % 3]
            _note(writer, n)
            stored = read_checkpoint(checkpoint_path(path))
            seq = -1 if stored is None else stored.seq
            if not refreshed_at or seq != refreshed_at[-1]:
                refreshed_at.append(seq)
            # A cold process never folds more than the cadence past the checkpoint.
            assert writer.head.seq - seq <= cadence
    finally:
        for writer in writers:
            writer.close()
    refreshes = [seq for seq in refreshed_at if seq >= 0]
    assert len(refreshes) <= 91 // cadence, refreshed_at  # one per cadence, not per writer


def test_a_checkpoint_of_another_projection_version_is_refreshed_on_cadence(
    tmp_path: Path,
) -> None:
    # Its seq is no reason to wait: no handle of this code would load it.
    path = str(tmp_path / "j.jsonl")
    writer = Journal.open(path, TOY, checkpoint_every=4)
    try:
        for n in range(4):
            _note(writer, n)
        stored = read_checkpoint(checkpoint_path(path))
        assert stored is not None
        rewrite(path, projection_version="toy/0")
        other = Journal.open(path, TOY, checkpoint_every=4)
        try:
            for n in range(4):
                _note(other, n)
        finally:
            other.close()
        refreshed = read_checkpoint(checkpoint_path(path))
        assert refreshed is not None and refreshed.projection_version == TOY.version
        assert refreshed.seq > stored.seq
    finally:
        writer.close()
