"""Shared test fixtures (helpers that are not fixtures live in tests/support.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from quotaledger.journal import transaction
from tests.support import CLOCK_SKEW_S_WIDEST, CliResult, pg_url, run_cli

# Every payload a test appends as its kind's own Struct is decoded all the same and
# must come back equal and encode to the same bytes: the suite proves the shortcut of
# Transaction.append (keep such a payload as built) exact on every payload it makes.
transaction.CHECK_KEPT_PAYLOADS = True


@pytest.fixture
def clock_far_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writers accept explicit times up to a day ahead of the wall clock (SPEC §2.2)."""
    monkeypatch.setenv("QUOTALEDGER_MAX_CLOCK_SKEW_S", CLOCK_SKEW_S_WIDEST)


@pytest.fixture
def journal_path(tmp_path: Path) -> str:
    return str(tmp_path / "quotaledger.jsonl")


@pytest.fixture
def cli(journal_path: str):
    """`cli("admit", "--goal", "g", ...)`: runs with --journal and --json, in-process."""

    def call(*args: str) -> CliResult:
        return run_cli(*args, "--journal", journal_path, "--json")

    return call


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The PostgreSQL URL tests use; skips locally when unreachable, fails under CI=true."""
    url = pg_url()
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("select 1")
    except Exception as exc:  # any failure to reach the server
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL at {url} is required under CI=true: {exc}")
        pytest.skip(f"PostgreSQL at {url} is not reachable: {exc}")
    return url
