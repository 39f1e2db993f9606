"""Processes racing for one pool (SPEC §10, §12.1): 16 writers over 4 goals of one pool,
through the CLI, the Python API and the server, some killed with SIGKILL mid-flight.
Afterwards the journal verifies, `verify --decisions` re-takes every decision, and an
independent re-fold (tests/capacity/independent_pool.py, not the product's fold)
agrees with every recorded decision and finds every admission within the pool's
target, its goal's borrowing limit and the others' guaranteed shares."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

from quotaledger.api import Ledger
from quotaledger.journal.clock import parse_at
from tests.capacity.capacity_helpers import STARTUP_S
from tests.capacity.independent_pool import Member, PoolModel
from tests.server.serving import serving
from tests.support import REPO, run_cli

GOALS = {"g0": (0.25, 0.1), "g1": (0.25, 0.25), "g2": (0.3, 0.3), "g3": (0.2, 0.05)}
"""goal -> (share, lending limit)."""
TARGET = 1000

API_RACER = """
import sys
from quotaledger.api import Ledger
journal, goal, prefix = sys.argv[1:4]
with Ledger.open(journal) as ledger:
    for i, forecast in enumerate((90, 60, 120)):
        ledger.admit(goal=goal, run=f"{prefix}-{i}", forecast_tpm=forecast)
"""


def _cli(journal: str, goal: str, run: str, forecast: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "quotaledger", "admit", "--goal", goal, "--run", run,
         "--forecast-tpm", str(forecast), "--journal", journal, "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip


def _api(journal: str, goal: str, prefix: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", API_RACER, journal, goal, prefix],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO,
    )  # fmt: skip


def refold(journal: Path) -> tuple[int, int]:
    """The independent model fed the journal's records in order; every recorded
    decision checked against it. (admissions, refusals)."""
    model = PoolModel(targets={"tpm": TARGET})
    admitted = refused = 0
    for line in journal.read_bytes().splitlines():
        record = json.loads(line)
        kind, goal, data = record["kind"], record["goal"], record["data"]
        at_us = parse_at(record["at"])
        if kind == "capacity.configured" and data.get("pool"):
            pool = data["pool"]
            model.members[goal] = Member(
                Fraction(str(pool["share"])),
                Fraction(str(pool["borrowing_limit"])),
                Fraction(str(pool["lending_limit"])),
            )
        elif kind in ("capacity.admitted", "capacity.refused"):
            request = data["request"]
            forecasts = {"forecast_tpm": request.get("forecast_tpm")}
            expected = model.reasons(goal, forecasts, at_us)
            if kind == "capacity.admitted":
                assert expected == [], (record["seq"], expected)
                assert model.admission_holds(goal, forecasts, at_us), record["seq"]
                model.admit(goal, request["run"], at_us, forecasts)
                admitted += 1
            else:
                assert data["reasons"] == expected, (record["seq"], data["reasons"], expected)
                refused += 1
    return admitted, refused


@pytest.mark.slow
def test_sixteen_writers_over_four_goals_of_one_pool(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    with Ledger.open(str(journal)) as ledger:
        ledger.pool_configure(pool="org", quota_tpm=2 * TARGET, target_tpm=TARGET)
        for goal, (share, lending) in GOALS.items():
            ledger.configure(goal=goal, pool="org", pool_share=share, pool_lending_limit=lending)
    with serving(journal) as server:
        with Ledger.open(str(journal)) as holder, holder.journal.transaction():
            procs = []
            for i in range(8):  # CLI processes, one admission each
                goal = f"g{i % 4}"
                procs.append(_cli(str(journal), goal, f"cli-{i}", 80 + 40 * (i % 5)))
            for i in range(4):  # API processes, three admissions each
                procs.append(_api(str(journal), f"g{i}", f"api-{i}"))
            for i in range(4):  # the server's clients (the CLI with the server's URL)
                procs.append(_cli(server.url, f"g{(i + 1) % 4}", f"srv-{i}", 100 + 50 * i))
            time.sleep(STARTUP_S)
        time.sleep(0.05 * (os.getpid() % 5))
        for proc in procs[:8:3]:  # some CLI writers die mid-flight
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait(timeout=300)
    assert run_cli("verify", "--journal", str(journal), "--json").code == 0
    decisions = run_cli("verify", "--decisions", "--journal", str(journal), "--json")
    assert decisions.code == 0, decisions.stdout
    admitted, refused = refold(journal)
    assert admitted > 0 and admitted + refused >= 12
