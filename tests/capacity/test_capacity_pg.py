"""Capacity admission on the PostgreSQL store: the same decisions and JSON as on a file,
and processes racing for case slots through it still never over-admit."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from quotaledger.projections import reasons as R
from tests.capacity.capacity_helpers import Goal, race

pytestmark = pytest.mark.pg


@pytest.fixture
def pg_journal(pg_server):
    schema = f"t_cap_{uuid.uuid4().hex}"
    yield f"{pg_server}{'&' if '?' in pg_server else '?'}schema={schema}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_capacity_session_on_postgresql(pg_journal):
    from tests.support import run_cli

    goal = Goal(lambda *args: run_cli(*args, "--journal", pg_journal, "--json"))
    goal.ok("configure", 0, max_active_cases=1, quota_tpm=100_000)
    goal.heartbeat(1)
    first = goal.ok("admit", 2, run="r1", arm="baseline", forecast_tpm=1_000)
    assert (
        goal.ok("admit", 3, run="r1", arm="baseline", forecast_tpm=1_000)["receipt"]
        == first["receipt"]
    )
    assert goal.reasons(4, "r2", arm="treatment", forecast_tpm=1_000) == [
        R.TARGET_CAPACITY_EXHAUSTED,
        R.TOTAL_CAPACITY_EXHAUSTED,
    ]
    assert goal("admit", 3, run="r3", arm="baseline").json["error"]["code"] == "time_regression"
    assert [r["run"] for r in goal.inspect(5)["active_runs"]] == ["r1"]


@pytest.mark.slow
def test_processes_race_for_case_slots_on_postgresql(pg_journal):
    from quotaledger.api import Ledger

    with Ledger.open(pg_journal) as ledger:
        ledger.configure(goal="g", max_active_cases=2)
    commands = [["admit", "--goal", "g", "--run", f"r{i}", "--arm", "control"] for i in range(6)]
    results = [code for code, _ in race(pg_journal, commands)]
    assert sorted(results) == [0, 0, 1, 1, 1, 1]


@pytest.mark.slow
def test_processes_racing_one_request_id_on_postgresql_record_one_event(pg_journal):
    """SPEC §11 on the PostgreSQL store: a retried observation counts once, whichever
    of two racing processes commits it."""
    from quotaledger.api import Ledger

    with Ledger.open(pg_journal) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000)
    command = [
        "observe", "--goal", "g", "--request-id", "chatcmpl-pg1", "--uncached-input", "10",
        "--cached-input", "0", "--output", "1",
    ]  # fmt: skip
    results = race(pg_journal, [command, command, command])
    assert [code for code, _ in results] == [0, 0, 0]
    assert sorted(body["appended"] for _, body in results) == [False, False, True]
    assert len({body["event"]["seq"] for _, body in results}) == 1
    with Ledger.open(pg_journal) as ledger:
        assert ledger.inspect(goal="g")["goals"]["g"]["usage"]["uncached_input"] == 10
        conflict = ledger.observe(
            goal="g", uncached_input=11, cached_input=0, output=0, request_id="chatcmpl-pg1"
        )
        assert conflict["reasons"] == [R.REQUEST_ID_CONFLICT]
