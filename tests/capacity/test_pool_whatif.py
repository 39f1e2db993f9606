"""`whatif --pool P` (SPEC §7, §12.1, §12.5): the range it replays and the pool's
cooldowns recomputed under the replayed pool's cooldown terms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotaledger import Ledger
from tests.capacity.capacity_helpers import at


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger.open(str(tmp_path / "j.jsonl")) as opened:
        yield opened


def two_members(ledger: Any) -> None:
    """a and b, half each of a 1000 TPM target, lending all of it."""
    ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=at(0))
    ledger.configure(goal="a", pool="org", pool_share=0.5, at=at(0))
    ledger.configure(goal="b", pool="org", pool_share=0.5, at=at(0))


def flipped(answer: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(f["run"], f["whatif_admitted"]) for f in answer["flips"]]


def test_the_range_restricts_the_replayed_requests(ledger: Any) -> None:
    two_members(ledger)
    assert ledger.admit(goal="a", run="r1", forecast_tpm=600, at=at(1))["admitted"]
    assert not ledger.admit(goal="b", run="r2", forecast_tpm=500, at=at(2))["admitted"]
    assert ledger.admit(goal="a", run="r3", forecast_tpm=300, at=at(3))["admitted"]
    assert not ledger.admit(goal="b", run="r4", forecast_tpm=200, at=at(10))["admitted"]
    larger = {"quota_tpm": 2000, "target_tpm": 2000}
    whole = ledger.whatif(pool="org", **larger)
    assert whole["decisions"] == 4 and flipped(whole) == [("r2", True), ("r4", True)]
    assert whole["range"] == {"from": at(1), "to": at(10)}
    one = ledger.whatif(pool="org", since=at(2), until=at(2), **larger)
    assert one["decisions"] == 1 and flipped(one) == [("r2", True)]
    assert one["range"] == {"from": at(2), "to": at(2)}
    # From 3 s: r1 holds its recorded 600, r2 its recorded nothing; r3 and r4 fit 2000.
    late = ledger.whatif(pool="org", since=at(3), **larger)
    assert late["decisions"] == 2 and flipped(late) == [("r4", True)]
    # Before the range the pool's limits are the recorded ones: nothing flips there.
    early = ledger.whatif(pool="org", until=at(2), **larger)
    assert early["decisions"] == 2 and flipped(early) == [("r2", True)]
    assert any("range" in note for note in late["assumptions"])


def test_the_pools_cooldown_follows_the_replayed_cooldown_terms(ledger: Any) -> None:
    two_members(ledger)
    ledger.reject(goal="a", at=at(1))  # the pool cools down 15 s: until 16
    refused = ledger.admit(goal="b", run="r1", forecast_tpm=100, at=at(10))
    assert refused["reasons"] == ["pool_cooldown_active"]
    assert ledger.admit(goal="b", run="r2", forecast_tpm=100, at=at(20))["admitted"]
    shorter = ledger.whatif(pool="org", cooldown_base_s=5)  # until 6
    assert flipped(shorter) == [("r1", True)]
    longer = ledger.whatif(pool="org", cooldown_base_s=30, cooldown_max_s=300)  # until 31
    assert [(f["run"], f["whatif_reasons"]) for f in longer["flips"]] == [
        ("r2", ["pool_cooldown_active"])
    ]
    # A cooldown started before the range is as recorded.
    assert ledger.whatif(pool="org", cooldown_base_s=5, since=at(5))["flips"] == []
    assert any("cooldown" in note for note in shorter["assumptions"])


def test_the_cli_takes_the_range(journal_path: str, cli: Any) -> None:
    with Ledger.open(journal_path) as ledger:
        two_members(ledger)
        assert ledger.admit(goal="a", run="r1", forecast_tpm=900, at=at(1))["admitted"]
        assert not ledger.admit(goal="b", run="r2", forecast_tpm=600, at=at(2))["admitted"]
        assert not ledger.admit(goal="b", run="r3", forecast_tpm=600, at=at(5))["admitted"]
    done = cli("whatif", "--pool", "org", "--quota-tpm", "2000", "--target-tpm", "2000",
               "--since", at(5), "--until", at(5))  # fmt: skip
    assert done.code == 0, done.stderr
    assert done.json["decisions"] == 1 and flipped(done.json) == [("r3", True)]
    bad = cli("whatif", "--pool", "org", "--since", at(5), "--until", at(1))
    assert bad.code == 2 and bad.json["error"]["code"] == "invalid_option"
