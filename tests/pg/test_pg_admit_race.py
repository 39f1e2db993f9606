"""Runners on several machines: real processes racing `admit` through PostgreSQL.

Twelve processes ask for a run each against a goal with three free case slots: the
advisory lock serialises them across connections, so exactly three are admitted and
nine refused, and the journal verifies afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg.pg_helpers import fresh_schema
from tests.support import run_cli

REPO = Path(__file__).resolve().parents[2]
RACERS = 12
SLOTS = 3


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def admit_args(journal: str, i: int) -> list[str]:
    return [
        "--journal", journal, "--json", "--goal", "g", "--run", f"run-{i}",
        "--case", f"case-{i}", "--arm", "baseline", "--lock-timeout-s", "60",
    ]  # fmt: skip


@pytest.mark.slow
def test_racing_admit_through_postgresql_admits_exactly_the_free_slots(pg_journal: str) -> None:
    configured = run_cli(
        "configure", "--journal", pg_journal, "--json", "--goal", "g",
        "--max-active-cases", str(SLOTS),
    )  # fmt: skip
    assert configured.code == 0, configured.stdout + configured.stderr

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "quotaledger", "admit", *admit_args(pg_journal, i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for i in range(RACERS)
    ]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1), out + err
        body = json.loads(out)
        assert body["admitted"] is (proc.returncode == 0)
        outcomes.append(body)

    admitted = [o for o in outcomes if o["admitted"]]
    refused = [o for o in outcomes if not o["admitted"]]
    assert len(admitted) == SLOTS
    assert len(refused) == RACERS - SLOTS
    assert all(o["appended"] for o in outcomes)  # refusals are journaled too
    seqs = sorted(o["event"]["seq"] for o in outcomes)
    assert seqs == list(range(2, 2 + RACERS))  # after genesis and the configuration

    verified = run_cli("verify", "--journal", pg_journal, "--json")
    assert verified.code == 0, verified.stdout
    assert verified.json["records"] == 2 + RACERS
    inspected = run_cli("inspect", "--journal", pg_journal, "--json", "--goal", "g")
    assert inspected.code == 0, inspected.stdout
    active = inspected.json["goals"]["g"]["active_runs"]
    assert sorted(r["run"] for r in active) == sorted(o["receipt"]["run"] for o in admitted)
