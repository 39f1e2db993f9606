"""A PostgreSQL journal that can be read but not written (SPEC §8, as the file store on
a read-only filesystem): a role with SELECT and no INSERT, or a role whose transactions
are read-only (`default_transaction_read_only = on`). Readers and replays that append
nothing answer as usual; a command that must append is exit 4 `journal_read_only`,
one line on stderr, no row changed. The roles are real PostgreSQL roles."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from quotaledger import Ledger, StorageFailure
from quotaledger.journal.pgstore import split_url
from tests.pg.pg_helpers import connect, events_table, fresh_schema
from tests.server.serving import serving
from tests.support import run_cli

pytestmark = pytest.mark.pg

T = "2026-11-29T10:00:{:02d}Z"
ADMIT_R1 = ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm",
            "100", "--at", T.format(2)]  # fmt: skip


def _as_role(url: str, role: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


def _rows(journal: str) -> list[tuple[int, str]]:
    with connect(journal) as conn:
        return conn.execute(
            f"SELECT seq, hash FROM {events_table(journal)} ORDER BY seq"
        ).fetchall()


@pytest.fixture(params=["select only", "read-only transactions"])
def reader_url(pg_server: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a journal (a goal, an admitted run r1) for a role that cannot write it."""
    role = f"reader_{uuid.uuid4().hex[:12]}"
    with fresh_schema(pg_server) as journal:
        with Ledger.open(journal) as ledger:
            ledger.configure(goal="g", quota_tpm=100_000, max_active_cases=2, at=T.format(0))
            ledger.observe(goal="g", uncached_input=1, cached_input=0, output=0, at=T.format(1))
        assert run_cli(*ADMIT_R1, "--journal", journal).code == 0
        schema = split_url(journal)[1]
        with connect(journal, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN")
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
            if request.param == "select only":
                conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {role}')
            else:  # every privilege, but each transaction of the role is read-only
                conn.execute(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO {role}')
                conn.execute(f"ALTER ROLE {role} SET default_transaction_read_only = on")
        try:
            yield _as_role(journal, role)
        finally:
            with connect(journal, autocommit=True) as conn:
                conn.execute(f"DROP OWNED BY {role}")
                conn.execute(f"DROP ROLE {role}")


WRITERS = {
    "observe": ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0",
                "--output", "0"],
    "admit": ["admit", "--goal", "g", "--run", "r2", "--arm", "baseline", "--forecast-tpm", "1"],
    "reject": ["reject", "--goal", "g"],
    "release": ["release", "--goal", "g", "--run", "r1"],
    "configure": ["configure", "--goal", "g", "--quota-tpm", "200000"],
    "host phase": ["host", "phase", "--goal", "g", "--lane", "a", "--deadline", "+1h",
                   "--session", "s", "--profile", "p"],
    "budget configure": ["budget", "configure", "--goal", "g", "--allowed-units", "5",
                         "--window-hours", "1"],
}  # fmt: skip


def test_writers_fail_journal_read_only_and_change_nothing(reader_url: str) -> None:
    before = _rows(reader_url)
    for name, args in WRITERS.items():
        text = run_cli(*args, "--journal", reader_url)
        assert (text.code, text.stdout) == (4, ""), (name, text)
        (line,) = text.stderr.splitlines()
        assert line.endswith("[journal_read_only]"), (name, line)
        as_json = run_cli(*args, "--journal", reader_url, "--json")
        assert as_json.code == 4 and as_json.json["error"]["code"] == "journal_read_only", name
    with Ledger.open(reader_url) as ledger, pytest.raises(StorageFailure) as by_api:
        ledger.observe(goal="g", uncached_input=1, cached_input=0, output=0)
    assert (by_api.value.code, by_api.value.exit_code) == ("journal_read_only", 4)
    assert _rows(reader_url) == before


def test_readers_and_a_replay_still_answer(reader_url: str) -> None:
    before = _rows(reader_url)
    readers = [
        ["inspect", "--goal", "g"],
        ["log", "--goal", "g"],
        ["verify"],
        ["goals"],
        ["audit", "--goal", "g", "--run", "r1"],
        ["host", "status", "--goal", "g"],
    ]
    for args in readers:
        answer = run_cli(*args, "--journal", reader_url, "--json")
        assert answer.code == 0, (args, answer)
    replay = run_cli(*ADMIT_R1, "--journal", reader_url, "--json")
    assert replay.code == 0, replay
    assert replay.json["idempotent"] is True and replay.json["appended"] is False
    assert _rows(reader_url) == before


def test_the_server_answers_readers_and_refuses_writers(reader_url: str) -> None:
    before = _rows(reader_url)
    with serving(reader_url) as server:
        refused = server.post("observe", goal="g", uncached_input=1, cached_input=0, output=0)
        assert (refused.status, refused.exit_code) == (503, 4), refused.body
        assert refused.json["error"]["code"] == "journal_read_only"
        assert server.get("inspect", "goal=g").status == 200  # the server goes on
        replay = server.post(
            "admit", goal="g", run="r1", arm="baseline", forecast_tpm=100, at=T.format(2)
        )
        assert replay.status == 200 and replay.json["idempotent"] is True, replay.body
    assert _rows(reader_url) == before
