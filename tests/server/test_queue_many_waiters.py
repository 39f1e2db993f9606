"""Many clients wait in one queue (SPEC §12.2, §10): 32 through a server that is
SIGKILLed mid-run and started again, and 16 through two servers on one PostgreSQL
journal, both promoting the queue. Every client is admitted, no run twice, never more
runs active than the slots, every admission in queue order: as one serial writer
would, as an independent re-fold of the journal's records (written here from SPEC
§12.2, not the product's fold) finds them.

Each client queues with `"wait_s"`, and once admitted holds its slot a moment and
releases it (a release promotes the next). A client whose connection the kill cut
sends the same request again to the restarted server: a poll, which answers the
receipt if its run was admitted meanwhile. Leases are long, so a slot frees only by
a release: a client that never heard its receipt never releases, and its resent
request finds its run still active (the same request: idempotent, not a new run).
"""

from __future__ import annotations

import http.client
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from tests.pg.pg_helpers import fresh_schema
from tests.server.serving import Server, serving

CLIENTS = 32
SLOTS = 4
KILL_AFTER_ADMISSIONS = 10
HOLD_S = 0.05
"""How long an admitted client works before it releases (not a premise of the test)."""
DEADLINE_S = 240.0


class Target:
    """The port of the server a client talks to (it changes at the restart)."""

    def __init__(self, port: int) -> None:
        self.port = port


def _post(target: Target, command: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """One request; None when the server is gone (killed, or not up yet)."""
    connection = http.client.HTTPConnection("127.0.0.1", target.port, timeout=90)
    try:
        connection.request(
            "POST", f"/v1/{command}", json.dumps(body), {"Content-Type": "application/json"}
        )
        answer: dict[str, Any] = json.loads(connection.getresponse().read())
        return answer
    except (OSError, http.client.HTTPException, json.JSONDecodeError):
        return None
    finally:
        connection.close()


def _client(target: Target, run: str, errors: list[str]) -> None:
    request = {"goal": "g", "run": run, "arm": "baseline", "lease_s": 600, "wait_s": 30}
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        answer = _post(target, "admit", request)
        if answer is None:
            time.sleep(0.05)  # the server is down: try again (a retry, not a premise)
            continue
        if answer.get("admitted") is True:
            break
        if answer.get("queued") is not True:
            errors.append(f"{run}: {answer}")
            return
    else:
        errors.append(f"{run}: not admitted within {DEADLINE_S} s")
        return
    time.sleep(HOLD_S)
    while time.monotonic() < deadline:
        if _post(target, "release", {"goal": "g", "run": run}) is not None:
            return
        time.sleep(0.05)
    errors.append(f"{run}: never released")


def _lines(journal: Path) -> list[dict[str, Any]]:
    text = journal.read_text() if journal.exists() else ""
    # A torn last line (the kill) is not a record yet.
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def _admissions(journal: Path) -> int:
    return sum(1 for r in _lines(journal) if r["kind"] == "capacity.admitted")


def refold(records: list[dict[str, Any]], clients: int) -> None:
    """SPEC §12.2 from the records alone: one goal, one priority, SLOTS case slots, no
    lease ever ending (600 s), entries waiting from their capacity.queued until
    admitted or dequeued (none expires: the ttl outlives the test)."""
    waiting: dict[str, int] = {}  # run -> the seq of its capacity.queued
    active: set[str] = set()
    admitted: set[str] = set()
    for record in records:
        kind, data = record["kind"], record["data"]
        if kind == "capacity.queued":
            run = data["request"]["run"]
            assert run not in waiting and run not in admitted, record
            waiting[run] = record["seq"]
        elif kind == "capacity.admitted":
            run = data["request"]["run"]
            assert run not in admitted, f"{run} admitted twice"
            queued = data.get("queued")
            if queued is None:  # admitted on its own request: nobody may wait then
                assert not waiting, f"{run} jumped the queue ahead of {sorted(waiting)}"
            else:
                assert waiting.get(run) == queued["seq"], record
                head = min(waiting.values())
                assert queued["seq"] == head, f"{run} admitted out of queue order"
                del waiting[run]
            admitted.add(run)
            active.add(run)
            assert len(active) <= SLOTS, f"{len(active)} runs active in {SLOTS} slots"
        elif kind == "capacity.released":
            active.discard(data["run"])
        elif kind == "capacity.dequeued":
            pytest.fail(f"nothing leaves the queue but by admission: {record}")
    assert admitted == {f"w{i:02d}" for i in range(clients)}, sorted(admitted)
    assert not waiting and not active


@pytest.mark.slow
def test_32_waiters_through_a_sigkilled_and_restarted_server(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    first = Server(str(journal)).wait_ready()
    try:
        assert first.post("configure", goal="g", max_active_cases=SLOTS).exit_code == 0
        target = Target(first.port)
        errors: list[str] = []
        threads = [
            threading.Thread(target=_client, args=(target, f"w{i:02d}", errors))
            for i in range(CLIENTS)
        ]
        for thread in threads:
            thread.start()
        # A barrier on the journal itself: kill once the queue has moved a while.
        for _ in range(2400):
            if _admissions(journal) >= KILL_AFTER_ADMISSIONS:
                break
            time.sleep(0.05)
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    again = Server(str(journal))
    target.port = again.port  # the clients' next try goes to the restarted server
    try:
        again.wait_ready()
        for thread in threads:
            thread.join(DEADLINE_S + 30)
        assert not errors, errors
        refold(_lines(journal), CLIENTS)
    finally:
        again.stop(signal.SIGKILL)
    # The product agrees: every decision re-taken, nothing out of order.
    with Ledger.open(str(journal), write=False) as ledger:
        assert ledger.verify(decisions=True)["decisions"]["not_reproduced"] == []


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


@pytest.mark.pg
@pytest.mark.slow
def test_two_servers_on_one_postgresql_journal_promote_one_queue_in_order(
    pg_journal: str,
) -> None:
    clients = 16
    with serving(pg_journal) as first, serving(pg_journal) as second:
        assert first.post("configure", goal="g", max_active_cases=SLOTS).exit_code == 0
        errors: list[str] = []
        threads = [
            threading.Thread(
                target=_client,
                args=(Target((first, second)[i % 2].port), f"w{i:02d}", errors),
            )
            for i in range(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(DEADLINE_S + 30)
        assert not errors, errors
    with Ledger.open(pg_journal, write=False) as ledger:
        refold(list(ledger.log(goal="g")), clients)
        assert ledger.verify(decisions=True)["decisions"]["not_reproduced"] == []
