"""Two servers on one PostgreSQL journal admitting into one pool (SPEC §11, §12.1):
every decision is the one a single serial writer would take in the journal's order
(an independent re-fold agrees with each), and none overruns the pool."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.capacity.test_pool_race import refold
from tests.pg.pg_helpers import fresh_schema
from tests.server.serving import Server, serving
from tests.support import run_cli


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


@pytest.mark.pg
@pytest.mark.slow
def test_two_servers_admit_into_one_pool_as_one_serial_writer(
    pg_journal: str, tmp_path: Path
) -> None:
    with serving(pg_journal) as first, serving(pg_journal) as second:
        assert (
            first.post("pool_configure", pool="org", quota_tpm=2000, target_tpm=1000).status == 200
        )
        for goal, share, lending in (("g0", 0.25, 0.1), ("g1", 0.25, 0.25), ("g2", 0.3, 0.3)):
            joined = second.post(
                "configure", goal=goal, pool="org", pool_share=share, pool_lending_limit=lending
            )
            assert joined.status == 200, joined.json
        codes: list[int] = []
        lock = threading.Lock()

        def race(server: Server, goal: str, run: str, forecast: int) -> None:
            answer = server.post("admit", goal=goal, run=run, forecast_tpm=forecast)
            with lock:
                codes.append(answer.exit_code)

        threads = [
            threading.Thread(
                target=race, args=((first, second)[i % 2], f"g{i % 3}", f"r{i}", 90 + 30 * (i % 4))
            )
            for i in range(12)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert sorted(set(codes)) <= [0, 1] and len(codes) == 12
    assert run_cli("verify", "--decisions", "--journal", pg_journal, "--json").code == 0
    copy = tmp_path / "copy.jsonl"
    assert run_cli("export", "--journal", pg_journal, "--to", str(copy)).code == 0
    admitted, refused = refold(copy)
    assert admitted + refused == 12 and admitted > 0
