"""The file's lock is waited for in the kernel (SPEC §9, issue 30): a waiting writer is
a blocked flock request in the kernel's queue, never a loop of non-blocking tries and
sleeps; its wait is still bounded, names the holder when it runs out, and a wait given
up on never leaves the handle sitting on the lock."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaledger.journal import Journal, LockTimeout
from tests.journal.journal_helpers import toy_journal
from tests.journal.test_catch_up import CountingProjector
from tests.toyprojector import TOY, Note

_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def journal_file(tmp_path: Path) -> str:
    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1]).close()
    return path


@pytest.fixture
def holder(journal_file: str) -> Iterator[subprocess.Popen[str]]:
    """A process holding the journal's flock until its stdin is closed."""
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, journal_file],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "locked\n"
    yield process
    _let_go(process)


def _let_go(process: subprocess.Popen[str]) -> None:
    if process.stdin is not None and not process.stdin.closed:
        process.stdin.close()
    process.wait(timeout=60)


def _flocks(path: str) -> tuple[list[int], list[int]]:
    """The pids holding, and the pids waiting for, a flock on `path` (/proc/locks)."""
    st = os.stat(path)
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    held: list[int] = []
    waiting: list[int] = []
    with open("/proc/locks", encoding="ascii") as locks:
        for line in locks:
            fields = line.split()
            blocked = len(fields) > 1 and fields[1] == "->"
            if blocked:
                del fields[1]
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
                (waiting if blocked else held).append(int(fields[4]))
    return held, waiting


def _until(condition: Callable[[], bool], limit_s: float = 10.0) -> bool:
    """Whether `condition` holds within `limit_s` (a barrier on state the kernel shows)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def _write_in_thread(journal: Journal[Any], n: int) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def write() -> None:
        try:
            with journal.transaction() as txn:
                txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
            outcome.append("committed")
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    return thread, outcome


def test_a_waiting_writer_is_queued_in_the_kernel(
    journal_file: str, holder: subprocess.Popen[str]
) -> None:
    journal = Journal.open(journal_file, TOY, lock_timeout_s=60)
    try:
        thread, outcome = _write_in_thread(journal, 2)
        # Polling would show no waiter here, ever: only a blocked flock request does.
        assert _until(lambda: _flocks(journal_file)[1] == [os.getpid()])
        assert outcome == []
        _let_go(holder)
        thread.join(timeout=30)
        assert outcome == ["committed"]
        assert journal.state.count == 2
    finally:
        journal.close()


def test_a_wait_that_runs_out_names_the_holder_and_never_keeps_the_lock(
    journal_file: str, holder: subprocess.Popen[str]
) -> None:
    journal = Journal.open(journal_file, TOY, lock_timeout_s=0.2)
    try:
        with pytest.raises(LockTimeout) as caught, journal.transaction():
            pass
        assert caught.value.context["holder_pid"] == holder.pid
        assert f"pid {holder.pid}" in caught.value.message
        _let_go(holder)
        # The kernel grants the wait given up on as the holder lets go: the handle
        # must let go at once, though nobody calls it again.
        assert _until(lambda: _flocks(journal_file) == ([], []))
        with journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=2), txn.time_for("g"))
        assert journal.state.count == 2
    finally:
        journal.close()


def test_closing_a_handle_whose_wait_ran_out_lets_others_in(
    journal_file: str, holder: subprocess.Popen[str]
) -> None:
    journal = Journal.open(journal_file, TOY, lock_timeout_s=0.2)
    with pytest.raises(LockTimeout), journal.transaction():
        pass
    journal.close()
    _let_go(holder)
    other = Journal.open(journal_file, TOY, lock_timeout_s=30)
    try:
        with other.transaction() as txn:
            txn.append("toy.note", "g", Note(n=2), txn.time_for("g"))
        assert other.state.count == 2
    finally:
        other.close()
    assert _until(lambda: _flocks(journal_file) == ([], []))


_TEARING_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b'{"v":1,"seq":')  # a line being written: no newline yet
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_waiting_writer_folds_what_others_appended_before_it_holds_the_lock(
    journal_file: str, holder: subprocess.Popen[str]
) -> None:
    # The fold of the others' records moves out of the critical section: it runs
    # while the writer's wait is queued, and the locked catch-up does not repeat it.
    counting = CountingProjector()
    mine = Journal.open(journal_file, counting, lock_timeout_s=60)
    try:
        assert counting.folded == 2  # genesis and the first note
        _let_go(holder)
        with Journal.open(journal_file, TOY) as other:
            for n in range(5):
                with other.transaction() as txn:
                    txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
        again = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, journal_file],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert again.stdout is not None and again.stdout.readline() == "locked\n"
            thread, outcome = _write_in_thread(mine, 9)
            assert _until(lambda: counting.folded == 7)  # its wait is still queued
            assert outcome == [] and _flocks(journal_file)[1] == [os.getpid()]
        finally:
            _let_go(again)
        thread.join(timeout=30)
        assert outcome == ["committed"]
        assert counting.folded == 8  # and then only its own record
        assert mine.state.count == 7
    finally:
        mine.close()


def test_a_line_being_written_stops_the_fold_ahead_and_is_judged_under_the_lock(
    journal_file: str,
) -> None:
    counting = CountingProjector()
    mine = Journal.open(journal_file, counting, lock_timeout_s=60)
    with Journal.open(journal_file, TOY) as other, other.transaction() as txn:
        txn.append("toy.note", "g", Note(n=2), txn.time_for("g"))
    tearing = subprocess.Popen(
        [sys.executable, "-c", _TEARING_HOLDER, journal_file],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert tearing.stdout is not None and tearing.stdout.readline() == "locked\n"
        thread, outcome = _write_in_thread(mine, 3)
        assert _until(lambda: counting.folded == 3)  # up to the partial line
        _let_go(tearing)  # it dies mid-line: a torn tail, moved aside under the lock
        thread.join(timeout=30)
        assert outcome == ["committed"]
        assert counting.folded == 4  # nothing folded twice
        assert mine.state.count == 3 and len(mine.recovered) == 1
    finally:
        mine.close()
