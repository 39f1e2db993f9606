"""Issue 27, case 4 (SPEC §2.3): after a failed `fdatasync` the writer cuts the file
back to its size before the transaction (`ftruncate`, then `fdatasync`), so that no
later process takes the unsynced bytes for durable ones: a replay's own successful
fdatasync proves nothing about pages the kernel already dropped (fsyncgate). When the
cut fails too, `<journal>.unsynced` names the offset and every later open refuses
(`unsynced_tail`, exit 3) until `repair`.

The faults are real syscall failures injected by strace into a real CLI process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quotaledger import Error, Ledger
from tests.support import REPO, run_cli

STRACE = shutil.which("strace")
pytestmark = pytest.mark.skipif(
    STRACE is None and os.environ.get("CI") != "true", reason="needs strace (CI installs it)"
)
T0 = "2026-11-29T14:00:00Z"
ADMIT = ["admit", "--goal", "g", "--run", "r1", "--case", "c1", "--arm", "baseline"]
ADMIT_AT = [*ADMIT, "--at", "2026-11-29T14:00:01Z"]
LAST_DURABLE_SEQ = 1  # genesis, capacity.configured


def _configured(tmp_path: Path) -> Path:
    journal = tmp_path / "j.jsonl"
    with Ledger.open(str(journal)) as ledger:
        ledger.configure(goal="g", max_active_cases=2, at=T0)
    return journal


def _under_strace(journal: Path, injections: list[str], *args: str) -> tuple[int, dict]:
    """`quotaledger ARGS --journal J --json` with each `-e inject=...` of `injections`."""
    faults = [part for spec in injections for part in ("-e", f"inject={spec}")]
    proc = subprocess.run(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", "/dev/null"),
            *("-e", "trace=fdatasync,ftruncate", *faults),
            *(sys.executable, "-m", "quotaledger", *args, "--journal", str(journal), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _replayed_fresh(journal: Path) -> None:
    """The same admit again: it must decide afresh, never answer idempotent on the
    bytes the failed command wrote and nobody made durable."""
    again = run_cli(*ADMIT_AT, "--journal", str(journal), "--json")
    assert again.code == 0, again.stdout
    assert again.json["admitted"] is True
    assert again.json["idempotent"] is False and again.json["appended"] is True


def test_a_failed_fdatasync_cuts_the_unsynced_tail_back(tmp_path: Path) -> None:
    journal = _configured(tmp_path)
    durable = journal.read_bytes()
    code, answer = _under_strace(journal, ["fdatasync:error=EIO:when=1"], *ADMIT_AT)
    assert code == 4, answer
    assert answer["error"]["code"] == "fsync_failed"
    assert journal.read_bytes() == durable  # the unsynced line is gone
    assert not (tmp_path / "j.jsonl.unsynced").exists()
    _replayed_fresh(journal)


def test_a_cut_that_fails_too_leaves_unsynced_and_every_open_refuses(tmp_path: Path) -> None:
    journal = _configured(tmp_path)
    durable = journal.read_bytes()
    long_lived = Ledger.open(str(journal))  # a runner's handle, open before the failure
    code, answer = _under_strace(
        journal, ["fdatasync:error=EIO:when=1", "ftruncate:error=EIO"], *ADMIT_AT
    )
    assert code == 4, answer
    assert answer["error"]["code"] == "fsync_failed"
    marker = tmp_path / "j.jsonl.unsynced"
    assert json.loads(marker.read_text())["offset"] == len(durable)
    left = journal.read_bytes()
    assert left.startswith(durable) and len(left) > len(durable)  # the cut did not happen
    for argv in (ADMIT_AT, ["inspect"], ["log"], ["verify"]):
        refused = run_cli(*argv, "--journal", str(journal), "--json")
        assert refused.code == 3, (argv, refused.stdout)
        assert refused.json["error"]["code"] == "unsynced_tail"
        assert refused.json["error"]["offset"] == len(durable)
    # A handle opened before: its next transaction finds the file grown, and refuses.
    with pytest.raises(Error) as refused_in_process:
        long_lived.admit(goal="g", run="r2", case="c2", arm="baseline")
    assert refused_in_process.value.code == "unsynced_tail"
    long_lived.close()
    assert journal.read_bytes() == left
    # The way out: repair, never past the durable prefix.
    beyond = run_cli(
        "repair", "--truncate-after", str(LAST_DURABLE_SEQ + 1), "--yes",
        "--journal", str(journal), "--json",
    )  # fmt: skip
    assert beyond.code == 2, beyond.stdout
    assert journal.read_bytes() == left and marker.exists()
    repaired = run_cli(
        "repair", "--truncate-after", str(LAST_DURABLE_SEQ), "--yes",
        "--journal", str(journal), "--json",
    )  # fmt: skip
    assert repaired.code == 0, repaired.stdout
    assert not marker.exists()
    quarantine = tmp_path / repaired.json["quarantine"]
    assert quarantine.read_bytes() == left[len(durable) :]  # kept, never deleted
    _replayed_fresh(journal)


def test_a_cut_whose_sync_fails_leaves_unsynced_until_repair(tmp_path: Path) -> None:
    journal = _configured(tmp_path)
    durable = journal.read_bytes()
    code, answer = _under_strace(journal, ["fdatasync:error=EIO"], *ADMIT_AT)
    assert code == 4, answer
    marker = tmp_path / "j.jsonl.unsynced"
    assert json.loads(marker.read_text())["offset"] == len(durable)
    refused = run_cli(*ADMIT_AT, "--journal", str(journal), "--json")
    assert refused.code == 3 and refused.json["error"]["code"] == "unsynced_tail"
    repaired = run_cli(
        "repair", "--truncate-after", str(LAST_DURABLE_SEQ), "--yes",
        "--journal", str(journal), "--json",
    )  # fmt: skip
    assert repaired.code == 0, repaired.stdout
    assert not marker.exists()
    _replayed_fresh(journal)
