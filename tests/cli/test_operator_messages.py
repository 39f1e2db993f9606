"""Answers that say what is wrong and what to do (issue 19, item 5): who holds the
lock, which field of a replayed phase differs, no stale-coverage wording for a goal
never observed, no token shortfall beside a case constraint."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

from quotaledger import Ledger
from tests.support import run_cli

T0 = "2026-11-29T14:00:00Z"


def test_the_lock_timeout_names_the_holder_and_what_to_do(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=1000, at=T0)
    # A real process holds the journal's flock until we close its stdin.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()",
            journal_path,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"  # barrier
        timed_out = run_cli(
            "observe", "--journal", journal_path, "--goal", "g", "--uncached-input", "1",
            "--cached-input", "0", "--output", "0", "--lock-timeout-s", "0", "--json",
        )  # fmt: skip
        assert timed_out.code == 4, timed_out.stdout
        error = timed_out.json["error"]
        assert error["code"] == "lock_timeout"
        assert error["holder_pid"] == holder.pid
        assert f"pid {holder.pid}" in error["message"]
        assert "--lock-timeout-s" in error["message"]  # what to do
        text = run_cli(
            "observe", "--journal", journal_path, "--goal", "g", "--uncached-input", "1",
            "--cached-input", "0", "--output", "0", "--lock-timeout-s", "0",
        )  # fmt: skip
        assert text.code == 4 and f"pid {holder.pid}" in text.stderr
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)


def test_the_holder_is_found_for_a_lock_of_this_file_only(journal_path: str, tmp_path) -> None:
    from quotaledger.journal.filestore import flock_holder_pid

    other = tmp_path / "other"
    other.write_text("x")
    fd = os.open(other, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with open(journal_path, "w"):
            pass
        assert flock_holder_pid(journal_path) is None
        assert flock_holder_pid(str(other)) == os.getpid()
    finally:
        os.close(fd)


def test_a_replayed_relative_deadline_says_the_deadline_differs(journal_path: str) -> None:
    first = run_cli(
        "host", "phase", "--journal", journal_path, "--goal", "h", "--lane", "l1",
        "--deadline", "+1h", "--session", "s1", "--at", T0, "--json",
    )  # fmt: skip
    assert first.code == 0, first.stdout
    again = run_cli(
        "host", "phase", "--journal", journal_path, "--goal", "h", "--lane", "l1",
        "--deadline", "+1h", "--session", "s1", "--at", "2026-11-29T14:00:01Z", "--json",
    )  # fmt: skip
    assert again.code == 1
    body = again.json
    assert body["reasons"] == ["phase_exists_with_different_request"]
    assert body["differences"] == {
        "deadline": {
            "existing": "2026-11-29T15:00:00.000000Z",
            "requested": "2026-11-29T15:00:01.000000Z",
        }
    }
    text = run_cli(
        "host", "phase", "--journal", journal_path, "--goal", "h", "--lane", "l1",
        "--deadline", "+1h", "--session", "s1", "--at", "2026-11-29T14:00:02Z",
    )  # fmt: skip
    assert text.code == 1
    assert "deadline differs: phase 1 has 2026-11-29T15:00:00.000000Z" in text.stdout
    assert "this request 2026-11-29T15:00:02.000000Z" in text.stdout
    assert "--deadline 2026-11-29T15:00:00.000000Z" in text.stdout  # how to replay it


def test_a_goal_never_observed_is_not_called_stale(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, at=T0)
    refused = run_cli(
        "admit", "--journal", journal_path, "--goal", "g", "--run", "r1",
        "--forecast-tpm", "10", "--at", T0,
    )  # fmt: skip
    assert refused.code == 1 and "usage_observation_stale" in refused.stdout
    assert "last observation -" not in refused.stdout
    assert "(stale)" not in refused.stdout
    assert "no usage observed yet" in refused.stdout
    inspected = run_cli("inspect", "--journal", journal_path, "--goal", "g", "--at", T0)
    assert "(stale)" not in inspected.stdout and "no usage observed yet" in inspected.stdout
    audited = run_cli("audit", "--journal", journal_path, "--goal", "g", "--run", "r1")
    assert "(stale)" not in audited.stdout and "no usage observed yet" in audited.stdout


def test_audit_never_pairs_a_case_constraint_with_a_token_shortfall(journal_path: str) -> None:
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=1, quota_tpm=10_000, at=T0)
        ledger.observe(goal="g", uncached_input=8_000, cached_input=0, output=0, at=T0)
        ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=100, at=T0)
        refused = ledger.admit(goal="g", run="r2", arm="baseline", forecast_tpm=5_000, at=T0)
    assert refused["reasons"][0] == "target_capacity_exhausted"
    assert "token_headroom_exhausted" in refused["reasons"]
    audited = run_cli("audit", "--journal", journal_path, "--goal", "g", "--run", "r2")
    lines = audited.stdout.splitlines()
    binding = next(line for line in lines if line.startswith("binding constraint"))
    assert binding == "binding constraint: target_capacity_exhausted"
    token = next(line for line in lines if "shortfall" in line)
    assert token.startswith("also refused by the token gate: token_headroom_exhausted")
    assert "shortfall 4,000 TPM" in token
