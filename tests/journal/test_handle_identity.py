"""SPEC §2.3: a long-lived handle checks, under the lock in every transaction, that the
journal path still names the file it holds; and a poisoned handle (a failed
fdatasync) refuses everything, reads included, until it is reopened."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from quotaledger.api import Ledger
from quotaledger.journal import JournalReplaced
from tests.support import REPO

STRACE = shutil.which("strace")


def _admit(ledger: Ledger, run: str) -> dict[str, object]:
    return ledger.admit(goal="g", run=run, case=f"case-{run}", arm="baseline")


def _one_slot(path: Path) -> Ledger:
    ledger = Ledger.open(str(path))
    ledger.configure(goal="g", max_active_cases=1)
    assert _admit(ledger, "r1")["admitted"] is True
    ledger.release(goal="g", run="r1")
    return ledger


def _renamed(path: Path) -> None:
    path.rename(path.with_name("moved.jsonl"))


def _unlinked(path: Path) -> None:
    path.unlink()


def _replaced(path: Path) -> None:
    # Moved away and a new journal created at the path by another process's first
    # command: the old handle must not append to either.
    path.rename(path.with_name("moved.jsonl"))
    with Ledger.open(str(path)) as other:
        other.configure(goal="g", max_active_cases=1)


@pytest.mark.parametrize("change", [_renamed, _unlinked, _replaced])
def test_a_handle_whose_path_no_longer_names_its_file_refuses(
    change: Callable[[Path], None], tmp_path: Path
) -> None:
    path = tmp_path / "j.jsonl"
    ledger = _one_slot(path)
    try:
        held = os.fstat(ledger.journal.store.local_fd() or -1).st_size
        change(path)
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        with pytest.raises(JournalReplaced) as raised:
            _admit(ledger, "r2")
        assert raised.value.exit_code == 3 and raised.value.code == "journal_replaced"
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
        assert os.fstat(ledger.journal.store.local_fd() or -1).st_size == held  # nothing appended
    finally:
        ledger.close()


def test_a_handle_whose_path_still_names_its_file_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    ledger = _one_slot(path)
    try:
        os.utime(path)  # metadata changes are not a replacement
        assert _admit(ledger, "r2")["admitted"] is True
    finally:
        ledger.close()


POISONED_SCRIPT = """
import json, sys
from quotaledger import Ledger, Error
ledger = Ledger.open(sys.argv[1])
answers = {}
calls = {
    "admit": lambda: ledger.admit(goal="g", run="r2", case="c2", arm="baseline"),
    "inspect": lambda: ledger.inspect(),
    "turn_resume": lambda: ledger.turn_resume(goal="g", agent="a1"),
    "host_status": lambda: ledger.host_status(goal="g"),
    "metrics": lambda: ledger.metrics(),
    "digest": lambda: ledger.digest(),
    "verify": lambda: ledger.verify(),
    "admit again": lambda: ledger.admit(goal="g", run="r3", case="c3", arm="baseline"),
}
for name, call in calls.items():
    try:
        answers[name] = {"ok": call().get("ok")}
    except Error as error:
        answers[name] = {"code": error.code, "exit_code": error.exit_code}
print(json.dumps(answers), flush=True)
"""


@pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
def test_a_poisoned_handle_refuses_everything_reads_included(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _one_slot(path).close()
    # A real process whose first fdatasync fails with EIO (strace injects it).
    proc = subprocess.run(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync"),
            *("-e", "inject=fdatasync:error=EIO:when=1", sys.executable, "-c", POISONED_SCRIPT),
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    answers = json.loads(proc.stdout)
    assert answers.pop("admit")["exit_code"] == 4  # the failed fdatasync itself
    for name, answer in answers.items():
        assert answer == {"code": "journal_poisoned", "exit_code": 4}, (name, answer)
    # Reopened, the journal recovers: r2's admission was never acknowledged.
    with Ledger.open(str(path)) as reopened:
        assert reopened.inspect()["ok"] is True
