"""`Journal.replay`: a reader opened without folding folds in its command's own pass.

audit, whatif and report are a pass over the whole journal; on a handle opened with
fold=False the visitor rides along the handle's fold from genesis (one read of the
journal, counted here), by the readers' rules, and the state at the end is what an
ordinary open folds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotaledger.journal import Head, Journal, JournalCorrupt, Record
from tests.journal.journal_helpers import flip_byte, line_offsets, toy_fold, toy_journal
from tests.toyprojector import TOY, Note


def _reads(journal: Journal[Any]) -> list[int]:
    """Count the store's passes: each call of `chunks` is one read of the journal."""
    passes: list[int] = []
    chunks = journal.store.chunks

    def counted(*args: Any, **kwargs: Any) -> Any:
        passes.append(args[0] if args else 0)
        return chunks(*args, **kwargs)

    journal.store.chunks = counted  # type: ignore[method-assign]
    return passes


def _replayed(path: str, **options: Any) -> tuple[Journal[Any], list[Record], list[int]]:
    journal = Journal.open(path, TOY, write=False, fold=False)
    passes = _reads(journal)
    seen: list[Record] = []
    journal.replay(lambda record, payload, line: seen.append(record), **options)
    return journal, seen, passes


def test_an_unfolded_reader_folds_in_the_one_pass_it_replays(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    notes = list(range(1, 60))
    toy_journal(path, notes, batch=7).close()
    journal, seen, passes = _replayed(path)
    assert [r.seq for r in seen] == list(range(journal.head.next_seq))
    assert passes == [0]  # one read, from the start
    assert journal.folded
    with Journal.open(path, TOY, write=False) as folded:  # what an ordinary open folds
        assert (folded.state, folded.head) == (journal.state, journal.head)
    journal.close()


def test_the_visitor_sees_each_record_before_it_is_folded(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [5, 6, 7]).close()
    journal = Journal.open(path, TOY, write=False, fold=False)
    counts: list[int] = []
    journal.replay(lambda record, payload, line: counts.append(journal.state.count))
    assert counts == [0, 0, 1, 2]  # genesis, then each note sees the notes before it
    journal.close()


def test_with_a_checkpoint_the_fold_starts_there_and_the_records_are_read_again(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "j.jsonl")
    notes = list(range(1, 30))
    writer = toy_journal(path, notes)
    writer.write_checkpoint()
    writer.close()
    journal, seen, passes = _replayed(path)
    assert journal.checkpoint_seq >= 0
    assert [r.seq for r in seen] == list(range(len(notes) + 1))
    assert journal.state == toy_fold(notes)
    assert passes == [0]  # nothing after the checkpoint to fold; the records read again
    journal.close()
    # Not using the checkpoint (audit): one pass from genesis again.
    journal, seen, passes = _replayed(path, use_checkpoint=False)
    assert passes == [0] and journal.checkpoint_seq < 0
    assert journal.state == toy_fold(notes)
    journal.close()


def test_a_folded_handle_replays_by_reading_the_records_again(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1, 2]).close()
    with Journal.open(path, TOY, write=False) as journal:
        seen: list[int] = []
        journal.replay(lambda record, payload, line: seen.append(record.seq))
        assert seen == [0, 1, 2]
        assert journal.state == toy_fold([1, 2])


def test_the_visitors_own_error_is_raised_as_it_is(tmp_path: Path) -> None:
    """A ValueError from the command is its error, not a record that does not fold."""
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1, 2, 3]).close()
    journal = Journal.open(path, TOY, write=False, fold=False)

    def visit(record: Record, payload: Any, line: bytes) -> None:
        if record.seq == 2:
            raise ValueError("the command's own")

    with pytest.raises(ValueError, match="the command's own"):
        journal.replay(visit)
    journal.close()


def test_mid_log_corruption_raises_after_the_records_before_it(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1, 2, 3, 4]).close()
    offsets = line_offsets(Path(path).read_bytes())
    flip_byte(path, offsets[2] + 20)  # seq 2 no longer verifies; 3 and 4 do
    journal, seen, _ = _replayed_until_error(path)
    assert [r.seq for r in seen] == [0, 1]
    journal.close()


def _replayed_until_error(path: str) -> tuple[Journal[Any], list[Record], list[int]]:
    journal = Journal.open(path, TOY, write=False, fold=False)
    passes = _reads(journal)
    seen: list[Record] = []
    with pytest.raises(JournalCorrupt):
        journal.replay(lambda record, payload, line: seen.append(record))
    return journal, seen, passes


def test_a_torn_tail_ends_the_pass_quietly(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1, 2, 3]).close()
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[:-10])  # the last line cut: a write in progress
    journal, seen, _ = _replayed(path)
    assert [r.seq for r in seen] == [0, 1, 2]
    assert journal.torn_tail is not None
    assert journal.state == toy_fold([1, 2])
    journal.close()


def test_only_a_reader_opens_without_folding(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Journal.open(str(tmp_path / "j.jsonl"), TOY, write=True, fold=False)


def test_resume_rides_along_from_a_checkpoint_it_accepts_and_from_genesis_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report --since` starts at a checkpoint that holds nothing of its range: the
    visitor then sees only the records after it, riding along the fold; a checkpoint it
    does not accept is passed over quietly (it is sound, just not of use), and the
    visitor rides along a fold from genesis."""
    path = str(tmp_path / "j.jsonl")
    writer = toy_journal(path, list(range(1, 11)))
    checkpoint = writer.write_checkpoint()
    with writer.transaction() as txn:
        for n in (11, 12):
            txn.append("toy.note", "g", Note(n=n, text=f"note {n}"), txn.time_for("g"))
    writer.close()
    with Journal.open(path, TOY, write=False, use_checkpoint=False) as full:
        expected, count = full.state, full.head.next_seq
    capsys.readouterr()
    offered: list[int] = []

    def accept(head: Head) -> bool:
        offered.append(head.seq)
        return True

    journal = Journal.open(path, TOY, write=False, fold=False)
    counts: list[int] = []
    journal.replay(lambda record, payload, line: counts.append(journal.state.count), resume=accept)
    assert offered == [checkpoint.seq]
    assert journal.checkpoint_seq == checkpoint.seq
    assert counts == [10, 10, 11]  # the records after it (the batch marker, two notes),
    # each seen before it is folded
    assert journal.state == expected
    journal.close()
    journal, seen, passes = _replayed(path, resume=lambda head: False)
    assert journal.checkpoint_seq < 0 and passes == [0]
    assert [r.seq for r in seen] == list(range(count))
    assert journal.state == expected
    assert capsys.readouterr().err == ""
    journal.close()
