"""Host continuation on the PostgreSQL store: the same decisions, the same refusals
appending nothing, across a store shared by several machines (SPEC §2.6, §4)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hosts.hosts_helpers import Lane, ok, refused
from tests.support import run_cli

pytestmark = pytest.mark.usefixtures("clock_far_ahead")


@pytest.fixture
def pg_lane(pg_server: str, tmp_path: Path) -> Iterator[Lane]:
    import psycopg

    schema = f"t_hosts_{uuid.uuid4().hex}"
    url = f"{pg_server}{'&' if '?' in pg_server else '?'}schema={schema}"
    try:
        yield Lane(url, tmp_path)
    finally:
        with psycopg.connect(pg_server, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def digest(url: str) -> str:
    return run_cli("digest", "--journal", url, "--json").json["digest"]


@pytest.mark.pg
def test_quota_failure_continued_on_its_session_through_postgresql(pg_lane: Lane) -> None:
    ok(pg_lane.phase())
    bind = pg_lane.failed_attempt("a1")
    path, sha = pg_lane.handoff("pg handoff")
    handoff = ["--handoff", path, "--handoff-sha256", sha]
    head = digest(pg_lane.journal)
    refused(pg_lane.start("a2"), "lane_failed")
    refused(pg_lane.cont(bind, *handoff, session="other"), "session_mismatch")
    assert digest(pg_lane.journal) == head
    phase = ok(pg_lane.cont(bind, *handoff, deadline="+1h"))["phase"]
    head = digest(pg_lane.journal)
    replay = ok(pg_lane.cont(bind, *handoff, deadline=phase["deadline"]))
    assert replay["idempotent"] is True and digest(pg_lane.journal) == head
    assert ok(pg_lane.heartbeat())["handoff"]["content"] == "pg handoff"
    assert ok(pg_lane.start("a2"))["attempt"]["number"] == 2
    ok(pg_lane.exit("a2", "--exit-code", "0"))
    ok(pg_lane.ret("a2", "completed"))
    assert ok(pg_lane.heartbeat())["handoff"] is None
