"""Fault injection (SPEC §2.3, §10): failed fdatasync, ENOSPC and short writes."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from quotaledger.journal import Journal, JournalPoisoned, StorageFailure
from tests.journal.independent_verifier import TOY_SCHEMAS, verify_strict
from tests.journal.journal_helpers import FIXTURES, notes_in, toy_fold, toy_journal
from tests.support import run_cli
from tests.toyprojector import TOY, Note

NOTES = [1, 2, 3]


def _append(journal: Journal[Any], n: int) -> None:
    with journal.transaction() as txn:
        txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))


def _every_call_raises_poisoned(journal: Journal[Any]) -> None:
    calls: list[Callable[[], object]] = [
        lambda: _append(journal, 99),
        lambda: journal.state,  # reads too (SPEC §2.3): a poisoned handle answers nothing
        lambda: journal.head,
        journal.refresh,
        journal.write_checkpoint,
        lambda: journal.repair(0),
        lambda: list(journal.records()),
        journal.verify,
        lambda: journal.fold_as_of(seq=1),
    ]
    for call in calls:
        with pytest.raises(JournalPoisoned):
            call()


def test_failed_fdatasync_poisons_the_handle(tmp_path: Path, monkeypatch: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = toy_journal(path, NOTES)
    state_before = journal.state
    size_before = os.path.getsize(path)
    calls = []
    real_fdatasync = os.fdatasync

    def failing_fdatasync(fd: int) -> None:
        calls.append(os.fstat(fd).st_size)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error")
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    with pytest.raises(JournalPoisoned) as failed:
        _append(journal, 4)
    assert failed.value.exit_code == 4
    # Never retried: the one later call syncs the file cut back to its durable size
    # (SPEC §2.3: no later process may take the unsynced bytes for durable ones).
    assert len(calls) == 2 and calls[1] == size_before
    assert os.path.getsize(path) == size_before
    assert journal.store.poisoned
    assert journal._fold.state == state_before  # nothing folded: nothing acknowledged
    monkeypatch.undo()  # the disk "recovers": the handle must stay poisoned anyway
    _every_call_raises_poisoned(journal)
    journal.close()

    reopened = Journal.open(path, TOY)  # recovery on open; the log is valid
    try:
        notes = notes_in(path)
        assert notes == NOTES  # the unacknowledged record was cut back
        assert reopened.state == toy_fold(notes)
        _append(reopened, 5)
    finally:
        reopened.close()
    verify_strict(Path(path).read_bytes(), TOY_SCHEMAS)


@pytest.mark.parametrize("fault", ["enospc", "short-write", "eio-write"])
def test_failed_writes_roll_back(fault: str, tmp_path: Path, monkeypatch: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = toy_journal(path, NOTES)
    before = Path(path).read_bytes()
    real_write = os.write
    fd = journal.store.write_fd  # type: ignore[attr-defined]

    def faulty_write(target: int, data: Any) -> int:
        if target != fd:
            return real_write(target, data)
        if fault == "short-write":
            return real_write(target, bytes(data)[: len(data) // 2])
        real_write(target, bytes(data)[:7])  # a failing write may leave bytes behind
        code = errno.ENOSPC if fault == "enospc" else errno.EIO
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "write", faulty_write)
    with pytest.raises(StorageFailure) as failed, journal.transaction() as txn:
        for n in (4, 5, 6):
            txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
    expected_code = {"enospc": "no_space", "short-write": "short_write", "eio-write": "io_error"}
    assert failed.value.code == expected_code[fault]
    assert failed.value.exit_code == 4
    assert Path(path).read_bytes() == before, "rolled back with ftruncate"
    monkeypatch.undo()
    _every_call_raises_poisoned(journal)
    journal.close()
    reopened = Journal.open(path, TOY)
    try:
        assert reopened.state == toy_fold(NOTES)
        assert reopened.recovered == []
    finally:
        reopened.close()
    assert notes_in(path) == NOTES


@pytest.mark.parametrize("fault", ["fdatasync-eio", "enospc", "short-write"])
def test_cli_maps_storage_faults_to_exit_4(fault: str, tmp_path: Path, monkeypatch: Any) -> None:
    """A new journal's first command: one write and one fdatasync, through the CLI."""
    target = tmp_path / "copy.jsonl"
    source = FIXTURES / "healthy.jsonl"
    real_write = os.write

    def faulty_write(fd: int, data: Any) -> int:
        if fault == "short-write":
            return real_write(fd, bytes(data)[:100])
        raise OSError(errno.ENOSPC, "No space left on device")

    def failing_fdatasync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    if fault == "fdatasync-eio":
        monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
    else:
        monkeypatch.setattr(os, "write", faulty_write)
    configure = ["configure", "--goal", "g", "--max-active-cases", "1"]
    result = run_cli(*configure, "--journal", target, "--json")
    monkeypatch.undo()
    assert result.code == 4, result.stdout + result.stderr
    error = result.json["error"]
    assert (
        error["code"]
        == {
            "fdatasync-eio": "fsync_failed",
            "enospc": "no_space",
            "short-write": "short_write",
        }[fault]
    )
    assert "Traceback" not in result.stderr
    # Rolled back (after a failed fdatasync too, SPEC §2.3: cut back to its size before,
    # nothing): nothing acknowledged, and no empty journal left behind.
    assert not target.exists()
    assert not (tmp_path / "copy.jsonl.unsynced").exists()
    human = run_cli("import", source, "--journal", tmp_path / "other.jsonl")
    assert human.code == 0 and "Traceback" not in human.stderr
