"""Time (SPEC §2.2), checkpoints (SPEC §2.5) and folding as of a seq or a time."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from quotaledger.journal import Journal, TimeRegression
from quotaledger.journal.checkpoint import checkpoint_path, read_checkpoint
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.journal.record import REPAIRED_KIND, encode_line, encode_payload
from tests.checkpoint_files import forge, rewrite
from tests.journal.journal_helpers import line_offsets, repaired_payload, toy_fold, toy_journal
from tests.support import hours_ahead_t0
from tests.toyprojector import TOY, Note, ToyProjector, ToyState

NOTES = [10, 20, 30, 40, 50, 60]


def _note(journal: Journal[Any], n: int, goal: str = "g", at: str | None = None) -> None:
    with journal.transaction() as txn:
        txn.append("toy.note", goal, Note(n=n), txn.time_for(goal, at))


# -- time ---------------------------------------------------------------------------


def test_explicit_time_before_the_goals_last_event_is_refused(
    tmp_path: Path, clock_far_ahead: None
) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = toy_journal(path, [])
    ahead_us = parse_at(hours_ahead_t0(2))  # an event ahead of the wall clock
    last = format_us(ahead_us)
    try:
        _note(journal, 1, at=last)
        before = Path(path).read_bytes()
        with pytest.raises(TimeRegression) as refused, journal.transaction() as txn:
            txn.time_for("g", format_us(ahead_us - 1))
        assert refused.value.exit_code == 2 and refused.value.code == "time_regression"
        with pytest.raises(TimeRegression), journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=2), format_us(ahead_us - 3600 * 1_000_000))
        assert Path(path).read_bytes() == before, "nothing written"
        with journal.transaction() as txn:
            # Another goal has its own clock; the same instant is not a regression;
            # an offset is normalised to UTC.
            assert txn.time_for("other", "2000-01-01T00:00:00Z") == "2000-01-01T00:00:00.000000Z"
            plus_two = datetime.fromtimestamp(ahead_us // 1_000_000, timezone(timedelta(hours=2)))
            assert txn.time_for("g", plus_two.isoformat()) == last
            # Implicit time never goes back: the goal's last event is ahead of the clock.
            assert txn.time_for("g") == last
    finally:
        journal.close()


_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(0.6)
print(time.time_ns() // 1000, flush=True)
"""


def test_time_is_sampled_after_the_lock_is_held(tmp_path: Path) -> None:
    """Seed 000: a writer that waited for the lock must not stamp the time it started."""
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1]).close()
    journal = Journal.open(path, TOY, lock_timeout_s=20)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with journal.transaction() as txn:
            stamped = parse_at(txn.time_for("g"))
        released_us = int(holder.stdout.readline())
    finally:
        holder.wait()
        journal.close()
    assert stamped >= released_us


# -- checkpoints ----------------------------------------------------------------------


def test_a_valid_checkpoint_is_used(tmp_path: Path, capsys: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = toy_journal(path, NOTES)
    written = journal.write_checkpoint()
    journal.close()
    assert (written.seq, written.offset) == (len(NOTES), os.path.getsize(path))

    # Proof that it is used (not refolded): a state only the checkpoint could supply.
    def tamper(state: ToyState) -> None:
        state.count, state.total, state.last_seq = 999, 1, 6

    forge(path, tamper, projector=TOY)
    reopened = Journal.open(path, TOY)
    try:
        assert reopened.state.count == 999
        assert reopened.checkpoint_seq == written.seq
        _note(reopened, 70)  # folds on top of it
        assert reopened.state.count == 1000
    finally:
        reopened.close()
    assert "warning" not in capsys.readouterr().err


def _assert_ignored(path: str, capsys: Any, why: str, notes: list[int] = NOTES) -> None:
    journal = Journal.open(path, TOY)
    try:
        assert journal.state == toy_fold(notes)
        assert journal.checkpoint_seq == -1
    finally:
        journal.close()
    err = capsys.readouterr().err
    assert "ignoring checkpoint" in err and why in err, err


def test_a_checkpoint_of_a_replaced_journal_is_ignored(tmp_path: Path, capsys: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [999] * len(NOTES)).write_checkpoint()
    saved = Path(checkpoint_path(path)).read_bytes()
    os.unlink(path)
    toy_journal(path, NOTES).close()  # same shape, another journal
    Path(checkpoint_path(path)).write_bytes(saved)
    capsys.readouterr()
    _assert_ignored(path, capsys, "no record seq")


def test_a_checkpoint_of_another_projection_version_is_ignored(tmp_path: Path, capsys: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    other = ToyProjector()
    other.version = "toy/0"
    journal = Journal.open(path, other)
    for n in NOTES:
        _note(journal, n)
    journal.write_checkpoint()
    journal.close()
    capsys.readouterr()
    _assert_ignored(path, capsys, "projection version")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "directory", "wrong-hash"])
def test_a_damaged_checkpoint_is_ignored(damage: str, tmp_path: Path, capsys: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = toy_journal(path, NOTES)
    journal.write_checkpoint()
    journal.close()
    target = Path(checkpoint_path(path))
    if damage == "garbage":
        target.write_bytes(b"\x93not msgpack at all")
    elif damage == "truncated":
        target.write_bytes(target.read_bytes()[:-5])
    elif damage == "directory":
        target.unlink()
        target.mkdir()
    else:
        rewrite(path, hash="0" * 64)
    capsys.readouterr()
    _assert_ignored(path, capsys, "" if damage != "wrong-hash" else "no record seq")


def test_checkpoints_cover_only_durable_records(tmp_path: Path, monkeypatch: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = Journal.open(path, TOY, checkpoint_every=3)
    for n in NOTES[:3]:
        _note(journal, n)
    automatic = read_checkpoint(checkpoint_path(path))  # 3 records past "none": at seq 2
    assert automatic is not None and automatic.seq == 2
    assert automatic.offset == line_offsets(Path(path).read_bytes())[3]
    journal.close()

    # Lines a writer wrote but died before syncing: the next writer folds them, and its
    # checkpoint may cover them only once they are durable.
    shutil.copyfile(path, path + ".copy")
    donor = toy_journal(path + ".copy", [])
    _note(donor, 77)
    donor.close()
    tail = Path(path + ".copy").read_bytes()[os.path.getsize(path) :]
    with open(path, "ab") as handle:
        handle.write(tail)
    events: list[str] = []
    real_fdatasync, real_replace = os.fdatasync, os.replace
    monkeypatch.setattr(
        os, "fdatasync", lambda fd: events.append("fdatasync") or real_fdatasync(fd)
    )
    monkeypatch.setattr(os, "replace", lambda a, b: events.append("replace") or real_replace(a, b))
    journal = Journal.open(path, TOY)
    try:
        assert journal.state.total == sum(NOTES[:3]) + 77
        checkpoint = journal.write_checkpoint()
    finally:
        journal.close()
    assert checkpoint.seq == 4
    assert events.index("fdatasync") < events.index("replace")


def test_the_null_goal_and_an_empty_goal_keep_their_own_times(
    tmp_path: Path, clock_far_ahead: None
) -> None:
    path = str(tmp_path / "j.jsonl")
    writer = toy_journal(path, [1])
    head = writer.head
    writer.close()
    ahead = hours_ahead_t0(5)
    # Appends refuse the goal "" (not an identifier); a journal an older version wrote
    # may hold it, and the checkpoint keeps it apart from the journal-level goal (None).
    data = encode_payload(Note(n=2))
    line, _ = encode_line(head.next_seq, ahead, "toy.note", "", data, head.prev_hash)
    with open(path, "ab") as file:
        file.write(line)
    journal = Journal.open(path, TOY)
    with journal.transaction() as txn:
        txn.append(REPAIRED_KIND, None, repaired_payload(1), txn.time_for(None))
    null_goal_at = journal.head.goal_last_at[None]
    journal.write_checkpoint()
    journal.close()
    reopened = Journal.open(path, TOY)
    try:
        assert reopened.checkpoint_seq == 3
        with reopened.transaction() as txn:
            assert txn.last_at("") == ahead
            assert txn.last_at(None) == null_goal_at
            assert txn.last_at("g") is not None and txn.last_at("g") < ahead
    finally:
        reopened.close()


# -- folding as of ------------------------------------------------------------------


def test_fold_as_of_a_seq_or_a_time(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = toy_journal(path, [])
    base = parse_at("2026-01-01T00:00:00Z")
    # Two goals whose clocks interleave: "as of T" is not a prefix of the journal.
    for i, n in enumerate(NOTES):
        goal = "a" if i < 3 else "b"
        offset_s = 10 * (i + 1) if goal == "a" else 10 * (i - 3) + 5
        _note(journal, n, goal=goal, at=format_us(base + offset_s * 1_000_000))
    try:
        for seq in range(1, len(NOTES) + 1):
            state, head = journal.fold_as_of(seq=seq)
            assert state == toy_fold(NOTES[:seq]) and head.seq == seq
        journal.write_checkpoint()  # covers everything: unusable for earlier requests
        for seq in (2, 6):
            assert journal.fold_as_of(seq=seq)[0] == toy_fold(NOTES[:seq])
        state, _ = journal.fold_as_of(at=format_us(base + 17 * 1_000_000))
        # a: 10 s, (20 s no); b: 5 s, 15 s (25 s no)
        assert (state.count, state.total) == (3, NOTES[0] + NOTES[3] + NOTES[4])
        everything, _ = journal.fold_as_of(at="2027-01-01T00:00:00.000000Z")
        assert everything.count == len(NOTES) and everything.total == sum(NOTES)
    finally:
        journal.close()
    assert time.time() > 0
