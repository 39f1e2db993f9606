"""Durable appends: quotaledger against the `eventsourcing` library on the same events.

Not part of the test suite, and not a dependency: run it by hand in an environment
that has both (`pip install -e . eventsourcing==9.5.6`):

    python tests/bench/eventsourcing_compare.py [EVENTS]

eventsourcing stores events in SQLite (WAL, its default synchronous=FULL: one
fdatasync per commit), one aggregate, one event per `save`, the same payloads as
`quotaledger bench`'s durable appends, taking turns with quotaledger and the raw
write+fdatasync loop as the bench's appenders do. Like the bench's SQLite figures it
reports a database in use (past its first WAL cycle) and a new one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from quotaledger.tools.bench import (
    SQLITE_WRAP_MARGIN_COMMITS,
    Appender,
    measure_durable,
    payloads,
    quotaledger_appender,
    raw_appender,
    sample_lines,
    sqlite_fresh_commits_max,
    sqlite_wal_cycle_pages,
)


class Goal(Aggregate):
    @event("Observed")
    def observe(  # the payload's fields (eventsourcing refuses **kwargs here)
        self,
        run: str | None,
        uncached_input: int,
        cached_input: int,
        output: int,
        requests: int | None,
        coverage: str,
        source: str | None,
    ) -> None:
        """One capacity observation, as quotaledger's capacity.observed payload."""


@contextmanager
def eventsourcing_appender(
    path: str, usages: list[dict[str, Any]], warm: int
) -> Iterator[Appender]:
    os.environ.update(PERSISTENCE_MODULE="eventsourcing.sqlite", SQLITE_DBNAME=path)
    app = Application()
    goal = Goal()
    app.save(goal)
    for i in range(warm):
        goal.observe(**usages[i % len(usages)])
        app.save(goal)

    def append(i: int) -> None:
        goal.observe(**usages[i])
        app.save(goal)  # one transaction, one commit

    try:
        yield append
    finally:
        app.close()


def main(events: int) -> None:
    workdir = tempfile.mkdtemp(prefix="quotaledger-vs-eventsourcing-", dir=os.getcwd())
    data = list(payloads(events + 1))
    usages = [json.loads(p) for p in data]
    in_use_warm = sqlite_wal_cycle_pages() + SQLITE_WRAP_MARGIN_COMMITS
    try:
        with ExitStack() as files:
            rates = measure_durable(
                [
                    (files.enter_context(appender), count)
                    for appender, count in (
                        (raw_appender(f"{workdir}/raw.bin", sample_lines(workdir, data)), events),
                        (quotaledger_appender(f"{workdir}/j.jsonl", data), events),
                        (
                            eventsourcing_appender(f"{workdir}/in-use.db", usages, in_use_warm),
                            events,
                        ),
                        (
                            eventsourcing_appender(f"{workdir}/new.db", usages, 0),
                            min(events, sqlite_fresh_commits_max()),
                        ),
                    )
                ]
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    raw, ours, in_use, new = (rate.eps for rate in rates)
    print(f"raw write+fdatasync      {raw:8,.0f} events/s")
    print(f"quotaledger                {ours:8,.0f} events/s  ({ours / raw:.2f} of raw)")
    print(f"eventsourcing, in use    {in_use:8,.0f} events/s  (quotaledger {ours / in_use:.2f}x)")
    print(f"eventsourcing, new db    {new:8,.0f} events/s  (quotaledger {ours / new:.2f}x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000)
