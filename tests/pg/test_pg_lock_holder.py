"""A PostgreSQL lock timeout names the session that holds the journal's advisory lock
and what to do (issue 19, item 5), as the file store's names the process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from quotaledger.journal.pgstore import lock_key, split_url
from tests.pg.pg_helpers import connect, fresh_schema
from tests.support import run_cli


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def _configure(target: str, *extra: str):
    return run_cli(
        "budget", "configure", "--journal", target, "--json", "--goal", "g",
        "--allowed-units", "5", "--window-hours", "1", *extra,
    )  # fmt: skip


def test_the_lock_timeout_names_the_backend_holding_it(pg_journal: str) -> None:
    assert _configure(pg_journal).code == 0
    _conninfo, schema = split_url(pg_journal)
    with connect(pg_journal) as other:
        other.execute("SET application_name = 'stuck-runner'")
        other.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        backend = other.execute("SELECT pg_backend_pid()").fetchone()[0]
        blocked = _configure(pg_journal, "--lock-timeout-s", "0")
        assert blocked.code == 4
        error = blocked.json["error"]
        assert error["code"] == "lock_timeout"
        assert error["holder_pid"] == backend
        assert f"backend pid {backend}" in error["message"]
        assert "stuck-runner" in error["message"]
        assert f"pg_terminate_backend({backend})" in error["message"]
        assert "--lock-timeout-s" in error["message"]
