"""SPEC §2.2 (issue 27 item 5): on a PostgreSQL journal, implicit event time is the
database server's clock, read in the round trip that takes the lock. One machine whose
clock runs a day ahead cannot stamp a goal's events a day ahead and freeze its 60 s
window for every machine sharing the journal.

The skewed machine is this process with `time.time_ns` (every wall-clock read of the
engine) a day ahead: an injected clock, as the issue allows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from quotaledger.journal.clock import US_PER_S, format_us, parse_at, wall_us
from tests.pg.pg_helpers import fresh_schema
from tests.support import run_cli

pytestmark = pytest.mark.pg

DAY_NS = 86_400 * 10**9
TOLERANCE_US = 30 * US_PER_S
"""How far this machine's and the server's clocks may differ, plus the test's run time."""


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def cli(journal: str, *args: str) -> dict[str, object]:
    result = run_cli(*args, "--journal", journal, "--json")
    assert result.code == 0, result.stdout + result.stderr
    answer = json.loads(result.stdout)
    assert isinstance(answer, dict)
    return answer


def event_ats(journal: str) -> list[str]:
    result = run_cli("log", "--journal", journal, "--json")
    assert result.code == 0, result.stderr
    return [json.loads(line)["at"] for line in result.stdout.splitlines()]


def test_a_machine_a_day_ahead_stamps_with_the_servers_clock(
    pg_journal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli(pg_journal, "configure", "--goal", "g", "--max-active-cases", "4", "--quota-tpm", "1000")
    real_time_ns = time.time_ns
    with monkeypatch.context() as skewed:
        skewed.setattr(time, "time_ns", lambda: real_time_ns() + DAY_NS)
        assert wall_us() - real_time_ns() // 1000 > DAY_NS // 1000 - US_PER_S  # really skewed
        cli(pg_journal, "observe", "--goal", "g", "--uncached-input", "900",
            "--cached-input", "0", "--output", "0")  # fmt: skip
    # Back on a machine whose clock is right: the goal's next event is not a day ahead.
    cli(pg_journal, "release", "--goal", "g", "--run", "nobody")
    now_us = wall_us()
    for at in event_ats(pg_journal):
        assert abs(parse_at(at) - now_us) < TOLERANCE_US, (at, format_us(now_us))
    # The sample leaves the 60 s window 60 s after it was taken, not a day later.
    later = format_us(now_us + 61 * US_PER_S)
    # A fresh sample then (else the admission is refused as stale).
    cli(pg_journal, "observe", "--goal", "g", "--uncached-input", "0", "--cached-input", "0",
        "--output", "0", "--at", later)  # fmt: skip
    admitted = cli(pg_journal, "admit", "--goal", "g", "--run", "r1", "--arm", "baseline",
                   "--forecast-tpm", "500", "--at", later)  # fmt: skip
    assert admitted["admitted"] is True, admitted


def test_explicit_time_is_bounded_by_the_servers_clock(
    pg_journal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`time_in_future` compares with the same clock: a machine a day ahead cannot
    write `--at` its own (wrong) now either."""
    cli(pg_journal, "configure", "--goal", "g", "--max-active-cases", "4")
    real_time_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + DAY_NS)
    result = run_cli("admit", "--goal", "g", "--run", "r1", "--arm", "baseline",
                     "--at", format_us(wall_us()), "--journal", pg_journal, "--json")  # fmt: skip
    assert result.code == 2, result.stdout + result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "time_in_future"
    # The bound is the database server's clock, and the message says so.
    assert "ahead of the database server's clock" in error["message"], error
