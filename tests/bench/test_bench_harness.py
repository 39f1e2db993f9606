"""The bench's own machinery: what it measures must be what its figures say.

These run in CI (they time nothing); the targets themselves are in
test_performance_targets.py and run on request."""

from __future__ import annotations

import os
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from commands.bench import (
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


def test_each_appender_makes_its_own_events_in_turns() -> None:
    calls: list[tuple[str, int]] = []

    def recorder(name: str) -> Callable[[int], None]:
        return lambda i: calls.append((name, i))

    eps = measure_durable([(recorder("a"), 45), (recorder("b"), 45), (recorder("c"), 10)])
    for name, count in (("a", 45), ("b", 45), ("c", 10)):
        assert [i for who, i in calls if who == name] == list(range(count))
    # Blocks of 20 in a rotating order: a, b, c make events 0-19 (c all of its 10),
    # then b opens the second block, and c, with none left, drops out.
    assert calls[20] == ("b", 0) and calls[40] == ("c", 0)
    assert calls[50:52] == [("b", 20), ("b", 21)] and calls[70] == ("a", 20)
    assert len(eps) == 3 and all(value > 0 for value in eps)
