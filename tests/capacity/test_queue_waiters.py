"""CLI waiters in processes of their own (SPEC §12.2 `--wait`), on a file journal and on
PostgreSQL: each waits in the queue, polls, and is admitted in queue order as the
slot ahead of it is released; none twice, none out of order."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from tests.capacity.capacity_helpers import finish, spawn

WAITERS = ("w1", "w2", "w3")


def _queued(ledger: Any) -> list[str]:
    return [e["data"]["request"]["run"] for e in ledger.log(goal="g", kind="capacity.queued")]


def _until(check: Any) -> Any:
    """A barrier on the journal (never a sleep-and-hope: it waits for the fact)."""
    for _ in range(1200):
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("the journal never showed it")


def _waiters_in_order(journal: str) -> None:
    with Ledger.open(journal) as ledger:
        ledger.configure(goal="g", max_active_cases=1)
        ledger.admit(goal="g", run="blocker", arm="baseline")  # no lease: a release frees it
        waiters = {
            run: spawn(
                journal, "admit", "--goal", "g", "--run", run, "--arm", "baseline",
                "--lease-s", "600", "--wait", "--wait-timeout-s", "120",
            )
            for run in WAITERS
        }  # fmt: skip
        order = _until(lambda: len(_queued(ledger)) == len(WAITERS) and _queued(ledger))
        previous, results = "blocker", []
        for run in order:
            released = ledger.release(goal="g", run=previous)
            assert released["promoted"] == [{"goal": "g", "run": run}]
            # The waiter sees its admission at its next poll (at most 1 s later); only
            # then is its run done with and released.
            results += finish([waiters[run]])
            previous = run
        admitted = [e["data"] for e in ledger.log(goal="g", kind="capacity.admitted")]
    assert [code for code, _ in results] == [0, 0, 0]
    assert {answer["receipt"]["run"] for _, answer in results} == set(WAITERS)
    assert [a["request"]["run"] for a in admitted] == ["blocker", *order]
    assert all(a["queued"] is not None for a in admitted[1:])


def test_cli_waiters_on_a_file_journal(tmp_path: Path) -> None:
    _waiters_in_order(str(tmp_path / "j.jsonl"))


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    import psycopg

    schema = f"t_queue_{uuid.uuid4().hex}"
    yield f"{pg_server}{'&' if '?' in pg_server else '?'}schema={schema}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.pg
def test_cli_waiters_on_postgresql(pg_journal: str) -> None:
    _waiters_in_order(pg_journal)
