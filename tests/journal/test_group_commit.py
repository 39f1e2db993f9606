"""`Journal.group` (journal/group.py): many transactions, one lock hold, one write and
one fdatasync; each sees the ones before it; nothing is written when a fold raised;
the checkpoint cadence runs when the caller says, after its answers are out."""

from __future__ import annotations

from pathlib import Path

from quotaledger import Ledger


def test_a_group_is_one_write_each_transaction_seeing_the_last(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Ledger.open(str(path), checkpoint_every=5) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=100_000)
        ledger.observe(goal="g", uncached_input=1, cached_input=0, output=1)
        size_before = path.stat().st_size
        answers = []
        with ledger.journal.group() as group:
            for run in ("r1", "r2", "r3"):
                answers.append(ledger.admit(goal="g", run=run, arm="baseline", forecast_tpm=10))
            assert path.stat().st_size == size_before  # nothing written yet
        assert [a["admitted"] for a in answers] == [True, True, False]
        lines = path.read_bytes()[size_before:].splitlines()
        assert len(lines) == 3 == len(group.staged)
        assert not (tmp_path / "j.jsonl.checkpoint").exists()  # due, not yet written
        group.refresh_checkpoint()
        assert (tmp_path / "j.jsonl.checkpoint").exists()
    with Ledger.open(str(path)) as reopened:
        runs = reopened.inspect(goal="g")["goals"]["g"]["active_runs"]
        assert [run["run"] for run in runs] == ["r1", "r2"]
