"""Issue 41: a PostgreSQL connection killed while idle (a restart, a failover,
`idle_session_timeout`, a pooler) is reconnected before the next transaction takes
its lock: nothing had been written on it, so the server's next commit succeeds, where
it answered its batch 503 and exited 4. A connection lost during a transaction (a
failed COMMIT, whose outcome is unknown) still acknowledges nothing (test_pg_store)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.pg.pg_helpers import connect
from tests.server.serving import serving
from tests.store.store_helpers import fresh_schema


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def _terminate(url: str, application: str) -> int:
    with connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (application,),
        ).fetchall()
    return len(rows)


@pytest.mark.slow
def test_the_server_reconnects_an_idle_connection_killed_before_a_write(pg_journal: str) -> None:
    application = f"ql-idle-{uuid.uuid4().hex[:12]}"
    url = f"{pg_journal}&application_name={application}"
    with serving(url) as server:
        first = server.post("configure", goal="g", quota_tpm=1000)
        assert first.status == 200, first.body
        assert _terminate(pg_journal, application) >= 1  # every connection it has, idle
        second = server.post("configure", goal="g", quota_tpm=2000)
        assert (second.status, second.exit_code) == (200, 0), second.body
        assert second.json["appended"] is True
        assert server.proc.poll() is None  # still serving
        shown = server.get("inspect", "goal=g")
        assert shown.json["goals"]["g"]["config"]["tokens"]["quota_tpm"] == 2000


@pytest.mark.slow
def test_a_ledger_reconnects_an_idle_connection_killed_between_writes(pg_journal: str) -> None:
    from quotaledger import Ledger

    application = f"ql-idle-{uuid.uuid4().hex[:12]}"
    with Ledger.open(f"{pg_journal}&application_name={application}") as ledger:
        ledger.configure(goal="g", quota_tpm=1000)
        assert _terminate(pg_journal, application) >= 1
        assert ledger.configure(goal="g", quota_tpm=2000)["appended"] is True
