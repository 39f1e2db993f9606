"""A client that never finishes its request delays no one's commit; two servers on
one PostgreSQL journal decide as one serial writer would (SPEC §10, §11)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg.pg_helpers import fresh_schema
from tests.server.serving import Answer, Server, admit, configure_and_observe, serving
from tests.support import run_cli


def test_a_client_that_never_finishes_delays_no_commit(tmp_path: Path) -> None:
    with serving(tmp_path / "j.jsonl") as server:
        configure_and_observe(server)
        stalled_head = socket.create_connection(("127.0.0.1", server.port))
        stalled_body = socket.create_connection(("127.0.0.1", server.port))
        try:
            stalled_head.sendall(b"POST /v1/observe HTTP/1.1\r\nHost: x\r\nContent-Le")
            stalled_body.sendall(
                b"POST /v1/observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"goal": "g",'
            )
            for n in range(5):  # each would wait forever behind a server that waited for them
                answer = server.call(
                    "POST",
                    "/v1/observe",
                    {"goal": "g", "uncached_input": 0, "cached_input": 0, "output": n},
                    timeout_s=30,
                )
                assert (answer.status, answer.exit_code) == (200, 0)
        finally:
            stalled_head.close()
            stalled_body.close()
        assert server.get("inspect", "goal=g").status == 200


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


@pytest.mark.pg
@pytest.mark.slow
def test_two_servers_on_one_postgresql_journal_admit_exactly_three(pg_journal: str) -> None:
    with serving(pg_journal) as first, serving(pg_journal) as second:
        configure_and_observe(first)
        answers: list[Answer] = []
        lock = threading.Lock()

        def race(server: Server, run: str) -> None:
            answer = admit(server, run)
            with lock:
                answers.append(answer)

        threads = [
            threading.Thread(target=race, args=((first, second)[i % 2], f"r{i}")) for i in range(12)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(a.exit_code for a in answers) == [0] * 3 + [1] * 9
        for server in (first, second):
            seen = server.get("inspect", "goal=g").json["goals"]["g"]["active_runs"]
            assert len(seen) == 3
    verified = run_cli("verify", "--journal", pg_journal, "--json")
    assert verified.code == 0, verified.stdout


@pytest.mark.slow
def test_a_request_not_complete_within_60_s_is_closed(tmp_path: Path) -> None:
    """SPEC §11's slow-client limit, waited for in full (a minute on one worker)."""
    with serving(tmp_path / "j.jsonl") as server:
        stalled = socket.create_connection(("127.0.0.1", server.port), timeout=90)
        try:
            stalled.sendall(b"GET /v1/goals HTTP/1.1\r\nHost: x\r\n")  # never finished
            assert stalled.recv(1024) == b""  # closed by the server, nothing answered
        finally:
            stalled.close()
        assert server.call("GET", "/healthz").status == 200
