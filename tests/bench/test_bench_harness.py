"""The bench's own machinery: what it measures must be what its figures say.

These run in CI (they time nothing); the targets themselves are in
test_performance_targets.py and run on request."""

from __future__ import annotations

import os
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from quotaledger.tools.bench import (
    measure_durable,
    payloads,
    sqlite_appender,
    sqlite_fresh_commits_max,
    sqlite_wal_cycle_pages,
)


def _wal_bytes(db: Path) -> int:
    return os.path.getsize(f"{db}-wal")


def test_a_database_in_use_overwrites_its_wal_in_place(tmp_path: Path) -> None:
    # sqlite_append_durable_eps claims SQLite's steady state: commits that rewrite
    # blocks its WAL file already has, so the file no longer grows.
    db = tmp_path / "in-use.db"
    data = list(payloads(50))
    with sqlite_appender(str(db), data, wrapped=True) as append:
        before = _wal_bytes(db)
        assert before >= sqlite_wal_cycle_pages() * 4096  # one full cycle of pages
        for i in range(len(data)):
            append(i)
        assert _wal_bytes(db) == before


def test_a_new_database_grows_its_wal_with_every_commit(tmp_path: Path) -> None:
    # sqlite_fresh_append_durable_eps claims the other phase: inside the first
    # cycle every commit appends to the WAL file.
    db = tmp_path / "fresh.db"
    data = list(payloads(sqlite_fresh_commits_max()))
    with sqlite_appender(str(db), data, wrapped=False) as append:
        sizes = []
        for i in range(len(data)):
            append(i)
            sizes.append(_wal_bytes(db))
    assert all(later > earlier for earlier, later in pairwise(sizes))


def test_each_appender_makes_its_own_events_in_turns_spread_over_the_run() -> None:
    calls: list[tuple[str, int]] = []

    def recorder(name: str) -> Callable[[int], None]:
        return lambda i: calls.append((name, i))

    eps = measure_durable([(recorder("a"), 100), (recorder("b"), 100), (recorder("c"), 30)])
    for name, count in (("a", 100), ("b", 100), ("c", 30)):
        assert [i for who, i in calls if who == name] == list(range(count))
    # Five blocks of 20, the order rotating (a b c, b c a, c a b, ...). c has two
    # blocks' worth, so it takes every second turn: blocks 0 and 2, not 0 and 1.
    blocks = [calls[0:60], calls[60:100], calls[100:150], calls[150:190], calls[190:230]]
    assert [who for who, _ in blocks[1][::20]] == ["b", "a"]
    assert blocks[2][0] == ("c", 20) and len(blocks[2]) == 50
    assert not [c for c in blocks[3] + blocks[4] if c[0] == "c"]
    assert len(calls) == 230 and len(eps) == 3 and all(value > 0 for value in eps)
