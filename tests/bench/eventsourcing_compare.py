"""quotaledger against the `eventsourcing` library on the same events (SPEC §9):
durable appends, and a whole-process replay.

Not part of the test suite, and not a dependency: run it by hand in an environment
that has both (`pip install -e . eventsourcing==9.5.6`), with compiled bytecode:

    python tests/bench/eventsourcing_compare.py [EVENTS]

eventsourcing stores events in SQLite (WAL, its default synchronous=FULL: one
fdatasync per commit), one aggregate, one event per `save`, the same observations as
`quotaledger bench`'s durable appends (`observe` through the API on a full window),
taking turns with quotaledger and the raw write+fdatasync loop as the bench's
appenders do. Like the bench's SQLite figures it reports a database in use (past its
first WAL cycle) and a new one.

The replay is a new process that reads a store from its start and answers from it:
quotaledger's `inspect` of the goal on the journal just written, its checkpoint
removed (every line decoded, its hash checked, folded), against eventsourcing's
`repository.get` of the aggregate (every event decoded and applied). Each side's
figure is its events over the process's CPU seconds (interpreter and imports
included), the median of REPLAY_ROUNDS interleaved processes.
"""

from __future__ import annotations

import inspect
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event

from quotaledger.tools.bench import (
    BATCH_EVENTS,
    SQLITE_WRAP_MARGIN_COMMITS,
    Appender,
    measure_batch,
    measure_durable,
    observe_appender,
    payloads,
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


REPLAY_ROUNDS = 5
REPLAY_EVENTS = 100_000
"""Events in each replayed store, written 1,000 to a transaction (as `bench` does for
its fold figures): a replay's per-event cost, not the interpreter's start, decides."""

QUOTALEDGER_REPLAY = """
import sys
from quotaledger.api import Ledger
with Ledger.open(sys.argv[1]) as ledger:
    ledger.inspect(goal="bench")
"""
EVENTSOURCING_REPLAY = """
import os, sys, uuid
os.environ.update(PERSISTENCE_MODULE="eventsourcing.sqlite", SQLITE_DBNAME=sys.argv[1])
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
{goal_class}
app = Application()  # held: a dropped Application closes its connections
goal = app.repository.get(uuid.UUID(sys.argv[2]))
assert isinstance(goal, Goal) and goal.version > 1
"""
"""The replay process defines `Goal` as this script does: run as a script, its events'
topics name `__main__:Goal`, which the replay's `__main__` then holds."""


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


def child_cpu_s(command: list[str]) -> float:
    """The CPU seconds (user + system) of one whole process running `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def replay_stores(workdir: str, usages: list[dict[str, Any]]) -> tuple[str, str, str]:
    """A journal and a database of REPLAY_EVENTS observations each, and the
    aggregate's id."""
    journal, database = f"{workdir}/replay.jsonl", f"{workdir}/replay.db"
    measure_batch(journal, REPLAY_EVENTS)
    os.environ.update(PERSISTENCE_MODULE="eventsourcing.sqlite", SQLITE_DBNAME=database)
    app = Application()
    goal = Goal()
    for i in range(REPLAY_EVENTS):
        goal.observe(**usages[i % len(usages)])
        if i % BATCH_EVENTS == BATCH_EVENTS - 1:
            app.save(goal)
    app.save(goal)
    app.close()
    return journal, database, str(goal.id)


def replay_eps(journal: str, database: str, aggregate_id: str) -> tuple[float, float]:
    """Events replayed per CPU second by a new process: quotaledger's, eventsourcing's."""
    for leftover in (journal + ".checkpoint", journal + ".checkpoint.delta"):
        if os.path.exists(leftover):
            os.remove(leftover)
    with open(journal, "rb") as lines:
        ours_events = sum(1 for _ in lines)
    with closing(sqlite3.connect(database)) as db:
        (theirs_events,) = db.execute("SELECT count(*) FROM stored_events").fetchone()
    theirs = EVENTSOURCING_REPLAY.format(goal_class=inspect.getsource(Goal))
    ours_s, theirs_s = [], []
    for _ in range(REPLAY_ROUNDS):
        ours_s.append(child_cpu_s([sys.executable, "-c", QUOTALEDGER_REPLAY, journal]))
        theirs_s.append(child_cpu_s([sys.executable, "-c", theirs, database, aggregate_id]))
    return ours_events / statistics.median(ours_s), theirs_events / statistics.median(theirs_s)


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
                        (observe_appender(f"{workdir}/j.jsonl"), events),
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
        ours_replay, theirs_replay = replay_eps(*replay_stores(workdir, usages))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    raw, ours, in_use, new = (rate.eps for rate in rates)
    print(f"raw write+fdatasync      {raw:8,.0f} events/s")
    print(f"quotaledger                {ours:8,.0f} events/s  ({ours / raw:.2f} of raw)")
    print(f"eventsourcing, in use    {in_use:8,.0f} events/s  (quotaledger {ours / in_use:.2f}x)")
    print(f"eventsourcing, new db    {new:8,.0f} events/s  (quotaledger {ours / new:.2f}x)")
    print(
        f"replay, whole process    quotaledger {ours_replay:,.0f} events/CPU s, "
        f"eventsourcing {theirs_replay:,.0f} (quotaledger {ours_replay / theirs_replay:.2f}x)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000)
