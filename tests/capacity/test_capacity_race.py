"""Real processes racing for capacity (SPEC §10), and the lock-order lesson of seed 000.

The test process holds the journal lock while the racers start, so they all queue on
it and race the moment it is released; each racer is a real `python -m commands`.
"""

from __future__ import annotations

import json
import time

import pytest

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from quotaledger.projections import capacity as cap
from tests.capacity.capacity_helpers import STARTUP_S, finish, race, spawn
from tests.support import run_cli


def kinds(journal: str) -> list[str]:
    with open(journal, "rb") as handle:
        return [json.loads(line)["kind"] for line in handle.read().splitlines()]


@pytest.mark.slow
def test_twelve_processes_race_for_three_free_case_slots(journal_path):
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", max_active_cases=4)
        ledger.admit(goal="g", run="r0", arm="baseline")
    commands = [
        ["admit", "--goal", "g", "--run", f"r{i}", "--arm", "treatment"] for i in range(1, 13)
    ]
    results = race(journal_path, commands)
    admitted = [body["receipt"]["run"] for code, body in results if code == 0]
    refused = [body for code, body in results if code == 1]
    assert len(admitted) == 3 and len(refused) == 9
    assert all(body["reasons"][0] == "target_capacity_exhausted" for body in refused)
    assert kinds(journal_path).count("capacity.admitted") == 4
    assert kinds(journal_path).count("capacity.refused") == 9
    assert run_cli("verify", "--journal", journal_path, "--json").code == 0
    view = run_cli("inspect", "--journal", journal_path, "--json").json["goals"]["g"]
    assert sorted(r["run"] for r in view["active_runs"]) == sorted(["r0", *admitted])


@pytest.mark.slow
def test_processes_racing_token_forecasts_never_reserve_beyond_target(journal_path):
    with Ledger.open(journal_path) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, target_tpm=90_000)
        ledger.observe(goal="g", uncached_input=10_000, cached_input=0, output=0)
    forecasts = [30_000, 25_000, 20_000, 20_000, 15_000, 10_000]
    commands = [
        ["admit", "--goal", "g", "--run", f"r{i}", "--forecast-tpm", str(f)]
        for i, f in enumerate(forecasts)
    ]
    results = race(journal_path, commands)
    reserved = sum(body["receipt"]["forecast_tpm"] for code, body in results if code == 0)
    assert 0 < reserved <= 90_000
    # Every refusal was right when it was made: its forecast did not fit what was left.
    for code, body in results:
        if code == 1:
            figures = body["figures"]
            assert body["reasons"] == ["token_headroom_exhausted"]
            assert figures["load_tpm"] + figures["forecast_tpm"] > 90_000
    view = run_cli("inspect", "--journal", journal_path, "--json").json["goals"]["g"]
    assert view["reserved_tpm"] == reserved <= 90_000
    assert run_cli("verify", "--journal", journal_path, "--json").code == 0


def test_a_writer_waiting_for_the_lock_samples_its_time_under_the_lock(journal_path):
    """Seed 000: writer A starts first, writer B takes the lock and commits a later time;
    A must then be admitted at a time >= B's, never refused with time_regression."""
    with Ledger.open(journal_path) as holder:
        holder.configure(goal="g", max_active_cases=4)
        with holder.journal.transaction() as txn:
            waiter = spawn(journal_path, "admit", "--goal", "g", "--run", "a", "--arm", "baseline")
            time.sleep(STARTUP_S)  # A is running, its clock reading now behind ours
            b_at = format_us(wall_us())
            payload = cap.CapacityObserved(
                run="b", uncached_input=0, cached_input=0, output=0, requests=None,
                coverage="measured", source=None,
            )  # fmt: skip
            txn.append(cap.OBSERVED, "g", payload, b_at)
        # B now commits an explicit time ahead of the wall clock; implicit time never goes
        # back, so the next waiter is stamped with B's time.
        with holder.journal.transaction() as txn:
            second = spawn(journal_path, "admit", "--goal", "g", "--run", "c", "--arm", "baseline")
            time.sleep(STARTUP_S)
            ahead_at = format_us(wall_us() + 30 * US_PER_S)
            txn.append(cap.OBSERVED, "g", payload, ahead_at)
    (a_code, a_body), (c_code, c_body) = finish([waiter, second])
    assert a_code == 0 and a_body["admitted"], a_body
    assert b_at <= a_body["event"]["at"]
    assert c_code == 0 and c_body["event"]["at"] == ahead_at
