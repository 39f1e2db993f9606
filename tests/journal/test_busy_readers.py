"""SPEC §2.3: a reader classifies only what it read. The bytes after the last newline
of its snapshot are a write in progress, never corruption — even if, by the time it
looks again, the writer has completed the line and appended more.

Deterministic: strace stops the reader (SIGSTOP) right at its read of the journal,
whose size it has already taken; while it is stopped the "writer" completes the line
and appends another record; then the reader continues.
"""

from __future__ import annotations

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
pytestmark = pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
STOP_WAIT_S = 120.0
"""A bound on waiting for the reader to reach its read (a failure, never a timing premise)."""

OBSERVE = ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0"]
READERS = [
    ["inspect"],
    ["metrics"],
    ["audit", "--seq", "2"],
    ["turn", "status", "--goal", "g"],
    ["host", "status", "--goal", "g"],
    ["digest"],
    ["verify"],
]


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """A healthy journal's lines: genesis, a configure, an admission, four observations."""
    journal = tmp_path_factory.mktemp("busy") / "j.jsonl"
    args = ["--journal", str(journal), "--json"]
    assert run_cli("configure", "--goal", "g", "--max-active-cases", "2", *args).code == 0
    admit = ["admit", "--goal", "g", "--run", "r1", "--case", "c1", "--arm", "baseline"]
    assert run_cli(*admit, *args).code == 0
    for n in range(4):
        assert run_cli(*OBSERVE, "--output", str(n), *args).code == 0
    return journal.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("reader", READERS, ids=[" ".join(r) for r in READERS])
def test_a_line_completed_while_a_reader_reads_is_not_corruption(
    reader: list[str], lines: list[bytes], tmp_path: Path
) -> None:
    journal = tmp_path / "j.jsonl"
    in_progress = lines[-2]
    half = len(in_progress) // 2
    snapshot = b"".join(lines[:-2]) + in_progress[:half]
    journal.write_bytes(snapshot)
    log = tmp_path / "trace.log"
    proc = subprocess.Popen(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", str(log), "-P", str(journal.resolve())),
            *("-e", "trace=pread64,read", "-e", "inject=pread64:signal=SIGSTOP:when=1"),
            *(sys.executable, "-m", "quotaledger", *reader, "--journal", str(journal), "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        pid = _wait_until_stopped(log, proc)
        trace = log.read_text()
        # The premise, forced and checked: the reader's one read of the journal returned
        # exactly the snapshot, which ends inside a line.
        assert f", {len(snapshot)}, 0) = {len(snapshot)}" in trace, trace
        with journal.open("ab") as writer:  # the writer completes its line, and appends
            writer.write(in_progress[half:] + lines[-1])
        os.kill(pid, signal.SIGCONT)
        stdout, stderr = proc.communicate(timeout=STOP_WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "journal_corrupt" not in stdout, stdout
    assert proc.returncode == 0, (stdout, stderr)
    assert journal.read_bytes() == b"".join(lines)  # a reader never modifies the file


def _wait_until_stopped(log: Path, proc: subprocess.Popen[str]) -> int:
    """The reader's pid, once strace reports it stopped at its read of the journal."""
    deadline = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < deadline:
        if log.exists():
            for line in log.read_text().splitlines():
                if "stopped by SIGSTOP" in line:
                    return int(line.split()[0])
        if proc.poll() is not None:
            pytest.fail(f"the reader ended before reading the journal: {proc.communicate()}")
        time.sleep(0.01)
    pytest.fail("the reader never reached its read of the journal")
