"""SPEC §2.5: a checkpoint is a cache, never a source of truth. `verify` folds the
whole journal from genesis and compares the result with the checkpoint (exit 3
`checkpoint_mismatch`, naming its seq); `audit` never uses one, so a decision a
writer made on a forged checkpoint shows `reproduced: false`. `verify` modifies
nothing."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.checkpoint import checkpoint_path
from quotaledger.projections.ledger import LedgerState
from tests.checkpoint_files import forge, rewrite
from tests.support import run_cli

T = "2026-11-29T10:00:{:02d}Z"


def cli(journal: str, *args: str) -> Any:
    return run_cli(*args, "--journal", journal, "--json")


def full_goal(journal: str) -> int:
    """A goal with one case slot, held by r1, and a checkpoint after it; its seq."""
    assert (
        cli(
            journal, "configure", "--goal", "g", "--max-active-cases", "1", "--at", T.format(0)
        ).code
        == 0
    )
    assert cli(
        journal, "admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--at", T.format(1)
    ).json["admitted"]
    written = cli(journal, "checkpoint")
    assert written.code == 0, written.stdout
    return int(written.json["seq"])


def forged_state(state: LedgerState) -> None:
    """The checkpoint's state with the goal's active run removed: a full goal made to
    look empty, seq, hash and offset untouched."""
    del state.capacity.goals["g"].runs["r1"]


def forge_file_checkpoint(journal: str) -> None:
    forge(journal, forged_state)


def _files(journal: str) -> dict[str, bytes]:
    directory = Path(journal).parent
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_a_forged_checkpoint_is_found_by_verify_and_its_decision_by_audit(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.jsonl")
    seq = full_goal(journal)
    honest = cli(journal, "verify")
    assert honest.code == 0 and honest.json["checkpoint"] == {
        "seq": seq,
        "hash": honest.json["head"]["hash"],
        "used": True,
        "matches": True,
    }
    forge_file_checkpoint(journal)
    # A writer trusts a checkpoint whose record matches (SPEC §2.5): it over-admits.
    over = cli(
        journal, "admit", "--goal", "g", "--run", "r2", "--arm", "baseline", "--at", T.format(2)
    )
    assert over.code == 0 and over.json["admitted"] is True, over.stdout
    before = _files(journal)
    found = cli(journal, "verify")
    assert found.code == 3, found.stdout
    error = found.json["error"]
    assert error["code"] == "checkpoint_mismatch" and error["seq"] == seq, error
    assert "state" in error["differences"] and f"seq {seq}" in error["message"]
    human = run_cli("verify", "--journal", journal)
    assert human.code == 3 and "checkpoint_mismatch" in human.stderr
    assert _files(journal) == before, "verify modifies nothing"
    audit = cli(journal, "audit", "--goal", "g", "--run", "r2")
    assert audit.code == 1, audit.stdout
    body = audit.json
    assert body["reproduced"] is False
    assert body["recorded"]["admitted"] is True and body["replayed"]["admitted"] is False
    assert "total_capacity_exhausted" in body["replayed"]["reasons"]
    # The decision before the checkpoint, and the honest one, still reproduce.
    assert cli(journal, "audit", "--goal", "g", "--run", "r1").json["reproduced"] is True
    assert _files(journal) == before


def test_a_checkpoint_writers_ignore_is_reported_not_refused(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.jsonl")
    full_goal(journal)
    path = checkpoint_path(journal)
    rewrite(journal, projection_version="ledger/0")
    result = cli(journal, "verify")
    assert result.code == 0, result.stdout
    assert result.json["checkpoint"]["used"] is False
    assert "projection version" in result.json["checkpoint"]["reason"]
    Path(path).unlink()
    assert cli(journal, "verify").json["checkpoint"] is None


def test_checkpoints_writers_refresh_over_a_long_history_match_the_genesis_fold(
    tmp_path: Path,
) -> None:
    # No false alarm: fractional weights, leases, cooldowns and releases, checkpointed
    # every few events by writers that each continue from the previous checkpoint.
    journal = str(tmp_path / "j.jsonl")
    rng = random.Random(16)
    ledger = Ledger.open(journal, checkpoint_every=7)
    ledger.configure(goal="g", max_active_cases=3, quota_tpm=100_000, cached_input_weight=0.3)
    for i in range(300):
        roll, run = rng.random(), f"r{rng.randrange(6)}"
        if roll < 0.5:
            usage = {"uncached_input": rng.randrange(5000), "cached_input": rng.randrange(5000)}
            ledger.observe(goal="g", run=run, output=rng.randrange(999), **usage)
        elif roll < 0.75:
            lease = rng.choice([None, 1, 30])
            forecast = rng.randrange(1, 9000)
            ledger.admit(goal="g", run=run, arm="control", forecast_tpm=forecast, lease_s=lease)
        elif roll < 0.95:
            ledger.release(goal="g", run=run)
        else:
            ledger.reject(goal="g", run=run, retry_after_s=0.5)
        if i % 50 == 49:  # a fresh handle continues from the checkpoint on disk
            ledger.close()
            ledger = Ledger.open(journal, checkpoint_every=7)
    ledger.close()
    result = cli(journal, "verify")
    assert result.code == 0, result.stdout
    assert result.json["checkpoint"]["matches"] is True
    assert result.json["checkpoint"]["seq"] > 250


def test_every_domain_survives_a_checkpoint_without_a_false_mismatch(tmp_path: Path) -> None:
    # The demo journals every domain (capacity, hosts, settlement); each checkpoint
    # below is written by a handle that continued from the previous one.
    journal = str(tmp_path / "demo.jsonl")
    assert run_cli("demo", "--journal", journal, "--json").code == 0
    assert cli(journal, "checkpoint").code == 0
    later = [
        ["host", "phase", "--goal", "g2", "--lane", "l", "--deadline", "+1h"],
        ["host", "start", "--goal", "g2", "--lane", "l", "--attempt", "a1", "--session", "s",
         "--profile", "p"],
        ["budget", "configure", "--goal", "g2", "--allowed-units", "9", "--window-hours", "1"],
        ["turn", "open", "--goal", "g2", "--agent", "a", "--turn", "t", "--task", "k"],
        ["turn", "writeback", "--goal", "g2", "--agent", "a", "--turn", "t", "--amount", "3"],
        ["probe", "run", "--goal", "g2", "--journal", journal, "--", "true"],
    ]  # fmt: skip
    for args in later:
        if args[0] == "probe":
            result = run_cli(*args[:-2], "--json", *args[-2:])
        else:
            result = cli(journal, *args)
        assert result.code == 0, (args, result.stdout)
        assert cli(journal, "checkpoint").code == 0
    result = cli(journal, "verify")
    assert result.code == 0, result.stdout
    assert result.json["checkpoint"]["matches"] is True
