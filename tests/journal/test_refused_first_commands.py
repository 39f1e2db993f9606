"""A refused or invalid first command leaves no file behind (SPEC §8: nothing
written), and removing that empty file never loses a writer that opened it
meanwhile: the writer finds it unlinked under the lock and creates the path again."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO, run_cli

STRACE = shutil.which("strace")
STOP_WAIT_S = 120.0
"""A bound on waiting for a process to reach its stop (a failure, never a timing premise)."""

OBSERVE = ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0"]
OBSERVE += ["--output", "0"]
CONFIGURE = ["configure", "--goal", "g", "--max-active-cases", "1"]
"""A first command that appends (a capacity writer would refuse the unknown goal)."""


def test_refused_and_invalid_first_commands_leave_no_file(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    invalid = run_cli(*OBSERVE, "--at", "2026-01-01T00:00:00", "--journal", path, "--json")
    assert invalid.code == 2
    refused = run_cli(
        "host", "phase", "--goal", "g", "--lane", "l", "--deadline", "+0s",
        "--session", "s", "--profile", "p", "--journal", path, "--json",
    )  # fmt: skip
    assert refused.code == 1
    assert not os.path.lexists(path)
    assert run_cli(*CONFIGURE, "--journal", path, "--json").code == 0
    assert Path(path).read_bytes().count(b"\n") == 2  # genesis and the configuration


@pytest.mark.slow
def test_racing_refused_and_appending_first_commands_lose_no_event(tmp_path: Path) -> None:
    for round_ in range(3):
        path = str(tmp_path / f"j{round_}.jsonl")
        refusing = ["host", "phase", "--goal", "h", "--lane", "l", "--deadline", "+0s"]
        refusing += ["--session", "s", "--profile", "p"]
        appending = [["configure", "--goal", f"g{i}", "--max-active-cases", "1"] for i in range(5)]
        commands = [c for pair in zip(appending, [refusing] * 5, strict=True) for c in pair]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "quotaledger", *args, "--journal", path, "--json"],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args in commands
        ]
        codes = [proc.wait(timeout=120) for proc in procs]
        # With --json an error is on stdout: show both, so a rare failure says which.
        answers = [(p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        assert codes == [0, 1] * 5, answers
        lines = Path(path).read_bytes().splitlines()
        kinds = [json.loads(line)["kind"] for line in lines]
        assert kinds == ["journal.created"] + ["capacity.configured"] * 5
        assert run_cli("verify", "--journal", path, "--json").code == 0


def test_a_writer_holding_a_removed_empty_file_writes_to_the_path_again(tmp_path: Path) -> None:
    """The interleaving the race above can only hit by chance, made deterministic."""
    from quotaledger.journal import Journal
    from tests.toyprojector import TOY, Note

    path = str(tmp_path / "j.jsonl")
    first = Journal.open(path, TOY)
    try:
        with first.transaction():
            pass  # the first command is refused: it appends nothing
        second = Journal.open(path, TOY)  # opens the same, still empty, file
    finally:
        first.close()  # removes the empty file it created
    assert not os.path.lexists(path)
    try:
        with second.transaction() as txn:
            txn.append("toy.note", "g", Note(n=7), txn.time_for("g"))
    finally:
        second.close()
    kinds = [json.loads(line)["kind"] for line in Path(path).read_bytes().splitlines()]
    assert kinds == ["journal.created", "toy.note"]


REFUSING = ["host", "phase", "--goal", "h", "--lane", "l", "--deadline", "+0s"]
REFUSING += ["--session", "s", "--profile", "p"]


@pytest.mark.slow
@pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
@pytest.mark.parametrize("stop_at", ["open", "create"])
def test_a_first_command_whose_empty_file_is_removed_between_its_opens_still_appends(
    tmp_path: Path, stop_at: str
) -> None:
    """The interleaving behind a rare exit 3 of the race above, forced with strace: a
    writer opens the (empty) file a refused first command created, and that command
    removes it before the writer has opened it for reading too. The writer must find
    the path again, not report "no journal" (exit 3).

    `open`: the file exists when the writer starts (it opens it at once); `create`: it
    does not yet (the writer opens it in its first transaction, where a missing file is
    created)."""
    path = tmp_path / "j.jsonl"
    refused_log, writer_log = tmp_path / "refused.log", tmp_path / "writer.log"
    writer = None
    if stop_at == "create":
        # The writer starts first and stops after its first open of the path: it found
        # nothing yet (a missing file is created by the first transaction); it stops
        # again after its second, once the refused command has created the file.
        writer = _under_strace(writer_log, path, "openat", "1..2", CONFIGURE)
        writer_pid = _wait_until_stopped(writer_log, writer)
    # The refused command creates the file and stops holding the lock, right before it
    # removes the empty file (its third flock: lock, unlock, then the lock to remove).
    refused = _under_strace(refused_log, path, "flock", "3", REFUSING)
    refused_pid = _wait_until_stopped(refused_log, refused)
    assert path.exists() and path.stat().st_size == 0
    if writer is None:
        writer = _under_strace(writer_log, path, "openat", "1", CONFIGURE)
        writer_pid = _wait_until_stopped(writer_log, writer)
    else:
        os.kill(writer_pid, signal.SIGCONT)  # on to its next open, which creates or opens
        writer_pid = _wait_until_stopped(writer_log, writer, count=2)
    # The premise, checked: the writer holds a descriptor of the file, opened to append.
    opened = _stopped_call(writer_log)
    assert "O_APPEND" in opened and "= -1" not in opened, writer_log.read_text()
    try:
        os.kill(refused_pid, signal.SIGCONT)
        refused_out, _ = refused.communicate(timeout=STOP_WAIT_S)
        assert refused.returncode == 1, refused_out
        assert not path.exists()  # removed while the writer holds it
        os.kill(writer_pid, signal.SIGCONT)
        writer_out, writer_err = writer.communicate(timeout=STOP_WAIT_S)
    finally:
        for proc in (refused, writer):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert writer.returncode == 0, (writer_out, writer_err)
    kinds = [json.loads(line)["kind"] for line in path.read_bytes().splitlines()]
    assert kinds == ["journal.created", "capacity.configured"]


def _under_strace(
    log: Path, path: Path, syscall: str, when: str, args: list[str]
) -> subprocess.Popen[str]:
    """A first command that stops (SIGSTOP) on returning from the `when`-th (strace's
    syntax) `syscall` on the journal's path."""
    return subprocess.Popen(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", str(log), "-P", str(path)),
            *("-e", "trace=openat,flock,unlink", "-e"),
            f"inject={syscall}:signal=SIGSTOP:when={when}",
            *(sys.executable, "-m", "quotaledger", *args, "--journal", str(path), "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _wait_until_stopped(log: Path, proc: subprocess.Popen[str], count: int = 1) -> int:
    """The pid of `proc`'s traced process once strace has reported its `count`-th stop."""
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if log.exists():
            stops = [line for line in log.read_text().splitlines() if "stopped by SIGSTOP" in line]
            if len(stops) >= count:
                return int(stops[-1].split()[0])
        if proc.poll() is not None:
            pytest.fail(f"the command ended before its stop: {proc.communicate()}")
        time.sleep(0.01)
    pytest.fail("the command never reached its stop")


def _stopped_call(log: Path) -> str:
    """The traced call right before the last stop."""
    lines = log.read_text().splitlines()
    last_stop = max(i for i, line in enumerate(lines) if "stopped by SIGSTOP" in line)
    return next(line for line in reversed(lines[:last_stop]) if "SIGSTOP" not in line)
