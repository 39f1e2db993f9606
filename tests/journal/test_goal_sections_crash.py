"""Crash-safety of the sectioned checkpoint's writes (SPEC §2.5, issue 30): a refresh
killed at the fsync or the rename of its delta or base, or between a new base and the
removal of the delta it replaces, leaves a checkpoint readers trust and that folds to
the journal's state, or one they ignore; never a torn file they use.

Deterministic: strace SIGKILLs `quotaledger checkpoint` on entry to a system call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quotaledger.api import Ledger
from quotaledger.journal import Journal
from quotaledger.journal.checkpoint import checkpoint_path, delta_path, read_checkpoint
from quotaledger.journal.fsutil import TEMP_MARK
from quotaledger.projections.ledger import PROJECTOR
from tests.journal.test_abandoned_temps import STRACE, needs_strace
from tests.journal.test_goal_sections import at, many_goals
from tests.support import REPO, run_cli

RENAMES = "rename,renameat,renameat2"
UNLINKS = "unlink,unlinkat"


def killed_checkpoint(journal: str, syscalls: str, when: int = 1) -> None:
    proc = subprocess.run(
        [
            *(STRACE or "strace", "-f", "-qq", "-o", "/dev/null", "-e", f"trace={syscalls}"),
            *("-e", f"inject={syscalls}:signal=SIGKILL:when={when}"),
            *(sys.executable, "-m", "quotaledger", "checkpoint", "--journal", journal, "--json"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode in (-9, 137), (proc.returncode, proc.stdout, proc.stderr)


def observe(journal: str, goals: range, step: int) -> None:
    with Ledger.open(journal, checkpoint_every=10**9) as ledger:
        for n in goals:
            ledger.observe(goal=f"g{n}", uncached_input=n, cached_input=0, output=1, at=at(step))


def assert_folds_to_the_journal(journal: str) -> int:
    """The checkpoint readers use (its seq, -1 for none) gives the state from genesis."""
    with (
        Journal.open(journal, PROJECTOR, write=False, use_checkpoint=False) as genesis,
        Journal.open(journal, PROJECTOR, write=False) as checkpointed,
    ):
        same = PROJECTOR.load(PROJECTOR.dump(checkpointed.state))
        assert same == PROJECTOR.load(PROJECTOR.dump(genesis.state))
        assert dict(checkpointed.head.goal_last_at) == dict(genesis.head.goal_last_at)
        return checkpointed.checkpoint_seq


def temps(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if TEMP_MARK in name)


@pytest.mark.slow
@needs_strace
@pytest.mark.parametrize("syscalls", ["fsync", RENAMES])
def test_a_delta_killed_mid_write_leaves_the_base_readers_trust(
    tmp_path: Path, syscalls: str
) -> None:
    journal = str(tmp_path / "j.jsonl")
    many_goals(journal, 40)
    base = read_checkpoint(checkpoint_path(journal))
    assert base is not None
    observe(journal, range(2), 100)
    killed_checkpoint(journal, syscalls)
    assert len(temps(tmp_path)) == 1  # the premise: killed with its temp file written
    assert not os.path.exists(delta_path(checkpoint_path(journal)))
    assert assert_folds_to_the_journal(journal) == base.seq
    assert run_cli("checkpoint", "--journal", journal, "--json").code == 0
    assert temps(tmp_path) == []
    refreshed = read_checkpoint(checkpoint_path(journal))
    assert refreshed is not None and refreshed.delta is not None
    assert {e.goal for e in refreshed.delta.entries()} == {"g0", "g1"}
    assert assert_folds_to_the_journal(journal) == refreshed.seq


@pytest.mark.slow
@needs_strace
@pytest.mark.parametrize("syscalls", ["fsync", RENAMES, UNLINKS])
def test_a_compaction_killed_anywhere_leaves_a_checkpoint_that_folds_right(
    tmp_path: Path, syscalls: str
) -> None:
    journal = str(tmp_path / "j.jsonl")
    many_goals(journal, 8)
    observe(journal, range(1), 100)
    assert run_cli("checkpoint", "--journal", journal, "--json").code == 0  # a delta: g0
    before = read_checkpoint(checkpoint_path(journal))
    assert before is not None and before.delta is not None
    observe(journal, range(1, 6), 101)  # most goals: the next refresh is a new base
    killed_checkpoint(journal, syscalls)
    used = assert_folds_to_the_journal(journal)
    after = read_checkpoint(checkpoint_path(journal))
    assert after is not None
    if syscalls == UNLINKS:  # the new base is in place; the old delta names the old base
        assert after.base.header.file_id != before.base.header.file_id
        assert after.delta is None and os.path.exists(delta_path(checkpoint_path(journal)))
        assert used == after.seq
    else:  # the old base and its delta
        assert after.base.header.file_id == before.base.header.file_id
        assert used == before.seq
    assert run_cli("checkpoint", "--journal", journal, "--json").code == 0
    assert temps(tmp_path) == []
    assert assert_folds_to_the_journal(journal) >= after.seq
