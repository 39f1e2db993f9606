"""`whatif` reports the flips of promotions too (SPEC §12.5, §12.2): replayed under a
changed config, a queued entry may start at once, later, or never; each entry whose
start differs from the recorded one is listed in `promotions`, with exact times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import at
from tests.server.serving import serving
from tests.support import run_cli


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    with Ledger.open(str(tmp_path / "j.jsonl")) as opened:
        yield opened


def _recorded(ledger: Any) -> int:
    """Two slots, held by r1 and r2 (no lease); r3 waits from 3 and is promoted at 10
    when r2 is released; r1 is released at 20. The seq of r3's capacity.queued."""
    ledger.configure(goal="g", max_active_cases=2, at=at(0))
    assert ledger.admit(goal="g", run="r1", arm="baseline", at=at(1))["admitted"]
    assert ledger.admit(goal="g", run="r2", arm="baseline", at=at(2))["admitted"]
    queued = ledger.admit(goal="g", run="r3", arm="baseline", lease_s=60, queue=True, at=at(3))
    assert queued["queued"] is True
    released = ledger.release(goal="g", run="r2", at=at(10))
    assert released["promoted"] == [{"goal": "g", "run": "r3"}]
    ledger.release(goal="g", run="r1", at=at(20))
    seq: int = queued["event"]["seq"]
    return seq


HELD = [
    R.TARGET_CAPACITY_EXHAUSTED,
    R.TOTAL_CAPACITY_EXHAUSTED,
    R.BASELINE_CAPACITY_EXHAUSTED,
    R.RESERVED_TEST_CAPACITY,
]


def test_a_queued_entry_that_would_start_at_once(ledger: Any) -> None:
    seq = _recorded(ledger)
    answer = ledger.whatif(goal="g", max_active_cases=3)
    assert answer["promotions"] == [
        {
            "seq": seq,
            "goal": "g",
            "run": "r3",
            "queued_at": at(3),
            "recorded_admitted_at": at(10),
            "whatif_admitted_at": at(3),
            "whatif_reasons": [],
        }
    ]
    # The queued request is a decision the replay takes the other way, as before.
    assert [(f["seq"], f["whatif_admitted"]) for f in answer["flips"]] == [(seq, True)]


def test_a_promotion_that_would_come_later_or_never(ledger: Any) -> None:
    seq = _recorded(ledger)
    # One slot: r2 is refused, so its release at 10 frees nothing; r3 starts when r1
    # is released, at 20.
    later = ledger.whatif(goal="g", max_active_cases=1)
    assert later["promotions"] == [
        {
            "seq": seq,
            "goal": "g",
            "run": "r3",
            "queued_at": at(3),
            "recorded_admitted_at": at(10),
            "whatif_admitted_at": at(20),
            "whatif_reasons": HELD,
        }
    ]
    assert [(f["run"], f["whatif_admitted"]) for f in later["flips"]] == [("r2", False)]
    # Up to 15, it never would.
    never = ledger.whatif(goal="g", max_active_cases=1, until=at(15))
    (promotion,) = never["promotions"]
    assert (promotion["recorded_admitted_at"], promotion["whatif_admitted_at"]) == (at(10), None)
    assert promotion["whatif_reasons"] == HELD


def test_unchanged_promotions_are_not_listed(ledger: Any) -> None:
    _recorded(ledger)
    assert ledger.whatif(goal="g")["promotions"] == []
    assert ledger.whatif(goal="g", max_active_cases=2)["promotions"] == []


def test_the_cli_shows_the_moved_promotions(tmp_path: Path) -> None:
    journal = str(tmp_path / "cli.jsonl")
    with Ledger.open(journal) as ledger:
        seq = _recorded(ledger)
    args = ["whatif", "--journal", journal, "--goal", "g", "--max-active-cases", "1"]
    done = run_cli(*args, "--until", at(15))
    assert done.code == 0, done.stderr
    assert "queued runs that would start otherwise: 1" in done.stdout
    (row,) = [line for line in done.stdout.splitlines() if line.startswith(f"{seq} ")]
    assert row.split()[:5] == [str(seq), "r3", at(3), at(10), "never"]
    assert "target_capacity_exhausted" in row
    (promotion,) = run_cli(*args, "--json").json["promotions"]
    assert promotion["whatif_admitted_at"] == at(20)


def test_the_server_and_its_schema_answer_the_moved_promotions(tmp_path: Path) -> None:
    journal = tmp_path / "served.jsonl"
    with Ledger.open(str(journal)) as ledger:
        seq = _recorded(ledger)
    with serving(journal) as server:
        answer = server.get("whatif", "goal=g&max_active_cases=1")
        schema = server.call("GET", "/openapi.json").body.decode()
    assert answer.exit_code == 0
    (promotion,) = answer.json["promotions"]
    assert (promotion["seq"], promotion["whatif_admitted_at"]) == (seq, at(20))
    assert "whatif_admitted_at" in schema and "recorded_admitted_at" in schema


def test_a_pools_promotions_under_a_changed_share(ledger: Any) -> None:
    """b waits behind a's run for the pool's headroom; with a larger target it would
    have started at once, with a smaller one only when a's second run is released."""
    ledger.pool_configure(pool="org", quota_tpm=1000, target_tpm=1000, at=at(0))
    for goal in ("a", "b"):
        ledger.configure(goal=goal, pool="org", pool_share=0.5, at=at(0))
    assert ledger.admit(goal="a", run="a1", forecast_tpm=600, at=at(1))["admitted"]
    assert ledger.admit(goal="a", run="a2", forecast_tpm=300, at=at(1))["admitted"]
    queued = ledger.admit(goal="b", run="b1", forecast_tpm=400, lease_s=60, queue=True, at=at(2))
    assert queued["queued"] is True
    released = ledger.release(goal="a", run="a1", at=at(10))
    assert released["promoted"] == [{"goal": "b", "run": "b1"}]
    ledger.release(goal="a", run="a2", at=at(20))
    seq = queued["event"]["seq"]
    wider = ledger.whatif(pool="org", quota_tpm=1400, target_tpm=1400)
    assert [
        (p["seq"], p["goal"], p["run"], p["whatif_admitted_at"]) for p in wider["promotions"]
    ] == [(seq, "b", "b1", at(2))]
    # A target of 600: a2 is refused, so a1's release frees 600 and b1 (400) fits then.
    assert ledger.whatif(pool="org", quota_tpm=600, target_tpm=600)["promotions"] == []
    # A target of 500: a1 (600) is refused and a2 (300) admitted; b1 (400) fits only when
    # a2 is released, at 20.
    narrower = ledger.whatif(pool="org", quota_tpm=500, target_tpm=500)
    assert narrower["promotions"] == [
        {
            "seq": seq,
            "goal": "b",
            "run": "b1",
            "queued_at": at(2),
            "recorded_admitted_at": at(10),
            "whatif_admitted_at": at(20),
            "whatif_reasons": [R.POOL_HEADROOM_EXHAUSTED],
        }
    ]
