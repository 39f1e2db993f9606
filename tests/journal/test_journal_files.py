"""The journal path: special files refused without blocking, creation, permissions, locks."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from quotaledger.journal import Journal, LockTimeout, NotRegularFile, StorageFailure
from tests.journal.independent_verifier import TOY_SCHEMAS, verify_strict
from tests.journal.journal_helpers import FIXTURES, engine_journal, toy_journal
from tests.support import run_cli, run_process
from tests.toyprojector import TOY, Note

READERS = [("verify",), ("digest",), ("log",)]
WRITERS = [("checkpoint",), ("repair", "--truncate-after", "0", "--yes")]


def _special(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{kind}.jsonl"
    if kind == "symlink":
        target = tmp_path / "real.jsonl"
        target.write_bytes((FIXTURES / "healthy.jsonl").read_bytes())
        path.symlink_to(target)
    elif kind == "dangling-symlink":
        path.symlink_to(tmp_path / "nowhere.jsonl")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind", ["symlink", "dangling-symlink", "directory", "fifo"])
def test_special_files_are_refused_without_blocking(kind: str, tmp_path: Path) -> None:
    path = _special(kind, tmp_path)
    for command in READERS + WRITERS:
        if kind == "fifo":  # a real process with a timeout: blocking fails, never hangs
            result = run_process(*command, "--journal", path, "--json", timeout=30)
        else:
            result = run_cli(*command, "--journal", path, "--json")
        assert result.code == 3, (kind, command, result.stdout, result.stderr)
        error = result.json["error"]
        assert error["code"] == "not_regular_file", (kind, command, error)
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "nowhere.jsonl").exists(), "a symlink is never followed"
    if kind == "symlink":
        assert (tmp_path / "real.jsonl").read_bytes() == (FIXTURES / "healthy.jsonl").read_bytes()


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_the_api_refuses_special_files(kind: str, tmp_path: Path) -> None:
    path = str(_special(kind, tmp_path))
    for write in (True, False):
        with pytest.raises(NotRegularFile):
            Journal.open(path, TOY, write=write)


def test_a_new_journal_is_created_by_its_first_event(tmp_path: Path) -> None:
    """Genesis shares the first event's write and fdatasync; opening, or a transaction
    that appends nothing, creates nothing."""
    path = tmp_path / "new.jsonl"
    journal = Journal.open(str(path), TOY)
    try:
        assert not path.exists()
        with journal.transaction():
            pass
        assert path.read_bytes() == b""  # the lock needs the file; nothing is written
        with pytest.raises(ValueError), journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=1), txn.time_for("g"))
            raise ValueError("a refused decision")
        assert path.read_bytes() == b""
        with journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=1), txn.time_for("g"))
        assert journal.head.next_seq == 2
    finally:
        journal.close()
    records = verify_strict(path.read_bytes(), TOY_SCHEMAS).records
    assert [r["kind"] for r in records] == ["journal.created", "toy.note"]
    assert records[0]["at"] <= records[1]["at"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_readers_of_a_missing_journal_exit_3_and_create_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing.jsonl"
    result = run_cli("verify", "--journal", path, "--json")
    assert result.code == 3 and result.json["error"]["code"] == "journal_not_found"
    assert not path.exists()
    refused = run_cli("checkpoint", "--journal", path, "--json")
    # One code per condition (SPEC §8): checkpoint needs a journal, as readers do.
    assert refused.code == 3 and refused.json["error"]["code"] == "journal_not_found"
    assert not path.exists()  # a refused writer leaves nothing behind either


_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_lock(path: str, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, path, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    return holder


def test_lock_timeout_exits_4(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 2)
    before = Path(path).read_bytes()
    holder = _hold_lock(path, 30)
    try:
        started = time.monotonic()
        result = run_cli("checkpoint", "--journal", path, "--json", "--lock-timeout-s", "0.3")
        waited = time.monotonic() - started
        assert result.code == 4, result.stdout
        assert result.json["error"]["code"] == "lock_timeout"
        assert 0.3 <= waited < 10
        env = {"QUOTALEDGER_LOCK_TIMEOUT_S": "0.2"}
        by_env = run_cli("checkpoint", "--journal", path, "--json", env=env)
        assert by_env.code == 4 and by_env.json["error"]["code"] == "lock_timeout"
        # Readers take no lock.
        assert run_cli("verify", "--journal", path, "--json").code == 0
        # A writer's open folds as readers do; its transaction waits for the lock.
        writer = Journal.open(path, TOY, lock_timeout_s=0.1)
        with pytest.raises(LockTimeout), writer.transaction():
            pass
        writer.close()
    finally:
        holder.kill()
        holder.wait()
    assert Path(path).read_bytes() == before
    assert run_cli("checkpoint", "--journal", path, "--json", "--lock-timeout-s", "5").code == 0


@pytest.mark.parametrize("value", ["-1", "nan", "abc"])
def test_bad_lock_timeouts_are_usage_errors(value: str, tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    engine_journal(path, 1)
    result = run_cli("checkpoint", "--journal", path, "--json", "--lock-timeout-s", value)
    assert result.code == 2, result.stdout
    assert result.json["ok"] is False
    assert not Path(path + ".checkpoint").exists()


def test_a_waiting_writer_gets_the_lock_when_it_is_released(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1]).close()
    holder = _hold_lock(path, 0.5)
    try:
        journal: Journal[Any] = Journal.open(path, TOY, lock_timeout_s=20)
        with journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=2), txn.time_for("g"))
        journal.close()
    finally:
        holder.wait()
    assert Journal.open(path, TOY, write=False).state.count == 2


def test_a_closed_handle_never_recreates_its_file(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal.open(str(path), TOY)
    journal.close()
    with pytest.raises(StorageFailure), journal.transaction() as txn:
        txn.append("toy.note", "g", Note(n=1), txn.time_for("g"))
    assert not path.exists()
