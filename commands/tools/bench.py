"""`quotaledger bench`: this machine's figures, each beside a raw baseline from the same run.

Every figure is a ratio against something measured here and now, never an absolute
threshold, so a slow or busy machine moves both sides together (SPEC §7, §9). Each
figure also carries SPEC §9's target and whether this run met it.

- cli_observe_cpu_ms  a whole `quotaledger observe` process (CPU, user + system) vs
- cli_admit_cpu_ms    `python -c "import typer, msgspec"`, and `admit --dry-run`
- cli_client_cpu_ms   `observe` as a client of a server (`--journal http://...`) vs the
                      same bare import
- append_durable_eps  `observe` through the Python API, one event per transaction, on a
                      goal whose 60 s window is full (WINDOW_SAMPLES samples), vs a raw
                      O_APPEND write+fdatasync loop of the same lines, taking turns;
                      `baseline_p50_ms`: the loop's median time per event (the disk's)
- admit_release_durable_eps `admit` then `release` the same way (one event each)
- append_batch_eps    1,000 events per transaction vs raw 1,000-line write+fdatasync
- verify_eps          full chain verification (on every core for a file of 32 MiB or
                      more, as `quotaledger verify` does) vs a raw msgspec-decode +
                      SHA-256 loop on one core
- verify_one_core_eps the same verification kept on one core, vs the same loop
- fold_eps            fold from genesis (no checkpoint) vs a raw msgspec-decode loop
- admit_ms            `quotaledger admit` as a whole process on the N-event journal
                      (with checkpoint) vs the same on a 1,000-event journal
- inspect_checkpoint_s `inspect` as a whole process on up to 100,000 observations (one
                      every 10 ms) with the checkpoint its writers keep
- inspect_s, audit_s, whatif_s, report_s  operators' commands as whole processes on
                      the same journal without checkpoint
- pool_admit_cpu_ms     `admit` on a goal in a pool of 100 goals vs on a lone goal, as
                      whole processes on journals with checkpoints (tools.bench_pools)
- daily_event_cpu_us    an event's in-process CPU (one observation folded, one admission
                      decided against tpd and rpd) with 10^6 observations in the goal's
                      day vs the same with 10^3 (tools.bench_daily)
- sqlite_append_durable_eps (with --compare sqlite) what a user would write with
                      sqlite3 (WAL, synchronous=FULL, hash-chained rows) on a database
                      in use, its WAL past its first cycle; ratio = ours/SQLite
- sqlite_fresh_append_durable_eps the same on a new database, inside its first WAL
                      cycle, while its WAL file still grows
- postgresql_append_durable_eps (with --compare postgresql URL) `observe` through the
                      API on the server vs a raw psycopg loop doing the same work per
                      event (advisory lock, read the last hash, INSERT, COMMIT)
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from typing import Any, NamedTuple

import msgspec

from quotaledger.api import Ledger
from quotaledger.journal import Journal
from quotaledger.journal.clock import format_us, wall_us
from quotaledger.projections.ledger import PROJECTOR

Step = Callable[[str], None]

OBSERVED = "capacity.observed"
SMALL_JOURNAL_EVENTS = 1_000
BATCH_EVENTS = 1_000
ADMIT_RUNS = 9
READ_ROUNDS = 5
DURABLE_EVENTS = 2_000
DURABLE_BLOCK = 20
SQLITE_WRAP_MARGIN_COMMITS = 500
PG_EVENTS = 500
OPERATOR_OBSERVATIONS = 100_000
GOALS_MANY = 100_000
"""The many-goals figures are stated for this many goals (tools.bench_goals)."""
DAY_OBSERVATIONS = 1_000_000
"""The daily-window figure is stated for this many observations in the day."""


def payloads(count: int, seed: int = 0) -> Iterator[bytes]:
    """Realistic `capacity.observed` payloads (SPEC §3.1), deterministic."""
    encode = msgspec.json.encode
    for i in range(seed, seed + count):
        yield encode(
            {
                "run": f"run-{i % 97:03d}",
                "uncached_input": 1000 + (i * 7919) % 20000,
                "cached_input": (i * 104729) % 8000,
                "output": 200 + (i * 1299709) % 4000,
                "requests": 1 + i % 5,
                "coverage": "measured",
                "source": "bench",
            }
        )


Appender = Callable[[int], None]
"""Makes event `i` durable: one event per transaction (or per write+fdatasync)."""


WINDOW_SAMPLES = 6_000
"""Samples in the goal's 60 s window before the durable appends start: a busy goal
(100 observations/s), so the figure shows what a full window costs each command."""


def full_window(ledger: Ledger, goal: str = "bench", samples: int = WINDOW_SAMPLES) -> None:
    """Configure `goal` and fill its window with `samples` observations over the last
    59 s, in one transaction (before the clock starts)."""
    now_us = wall_us()
    start_us = now_us - 59_000_000
    ledger.configure(goal=goal, max_active_cases=1024, quota_tpm=10**12, at=format_us(start_us - 1))
    with ledger.journal.transaction() as txn:
        for i, payload in enumerate(payloads(samples)):
            txn.append(OBSERVED, goal, payload, format_us(start_us + i * 59_000_000 // samples))


@contextmanager
def observe_appender(target: str) -> Iterator[Appender]:
    """`observe` through the Python API, one event per transaction, on a full window."""
    with Ledger.open(target, checkpoint_every=10**12) as ledger:
        full_window(ledger)

        def append(i: int) -> None:
            ledger.observe(
                goal="bench",
                run=f"run-{i % 97:03d}",
                uncached_input=1000 + (i * 7919) % 20000,
                cached_input=(i * 104729) % 8000,
                output=200 + (i * 1299709) % 4000,
            )

        yield append


@contextmanager
def admit_release_appender(target: str) -> Iterator[Appender]:
    """`admit` (even i) and `release` (odd i) of the same run through the API: one
    event per call, on a full window."""
    with Ledger.open(target, checkpoint_every=10**12) as ledger:
        full_window(ledger)

        def append(i: int) -> None:
            run = f"bench-{i // 2}"
            if i % 2 == 0:
                ledger.admit(goal="bench", run=run, arm="baseline", forecast_tpm=1)
            else:
                ledger.release(goal="bench", run=run)

        yield append


@contextmanager
def raw_appender(path: str, lines: list[bytes]) -> Iterator[Appender]:
    """The same lines with a bare O_APPEND write + fdatasync each."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    write, sync = os.write, os.fdatasync

    def append(i: int) -> None:
        write(fd, lines[i])
        sync(fd)

    try:
        yield append
    finally:
        os.close(fd)


@contextmanager
def sqlite_appender(path: str, data: list[bytes], *, wrapped: bool) -> Iterator[Appender]:
    """Durable hash-chained rows as a user would write them with sqlite3.

    SQLite's speed depends on its WAL's phase. A new database appends to its WAL file,
    growing it, so every commit's fdatasync also commits the new file size to the
    file system's journal. Once the WAL holds `wal_autocheckpoint` pages, SQLite
    copies them into the database and starts the WAL over from its beginning:
    from then on a commit overwrites blocks the file already has, and its fdatasync
    writes about two blocks instead of three. With `wrapped`, the database is taken
    past that point before the clock starts (a database in use); without it, it is
    new, and the caller must stay inside its first cycle (`sqlite_fresh_commits_max`).
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, hash TEXT NOT NULL, "
        "payload TEXT NOT NULL)"
    )

    def append(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        prev = row[0] if row else "0" * 64
        digest = hashlib.sha256(prev.encode() + data[i]).hexdigest()
        conn.execute("INSERT INTO events (hash, payload) VALUES (?, ?)", (digest, data[i]))
        conn.execute("COMMIT")

    try:
        if wrapped:
            # Every commit adds at least one page to the WAL, so this many commits
            # fill it, checkpoint it and start it over at least once.
            for i in range(sqlite_wal_cycle_pages() + SQLITE_WRAP_MARGIN_COMMITS):
                append(i % len(data))
        yield append
    finally:
        conn.close()


def sqlite_wal_cycle_pages() -> int:
    """The WAL pages after which SQLite checkpoints and starts its WAL over (its
    compiled-in default, as every new connection gets it)."""
    with closing(sqlite3.connect(":memory:")) as conn:
        pages: int = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    return pages


def sqlite_fresh_commits_max() -> int:
    """Commits a new database surely makes inside its first WAL cycle: a commit adds
    one page most of the time, more when the table's b-tree splits."""
    return sqlite_wal_cycle_pages() // 2


class Rate(NamedTuple):
    """What an appender made durable: events/s, and the median time of one event."""

    eps: float
    p50_ms: float


def measure_durable(appenders: list[tuple[Appender, int]]) -> list[Rate]:
    """Events/s and p50 latency of each appender over its own number of events, in
    interleaved blocks.

    The disk's fdatasync latency drifts by 2-3x within seconds on a shared machine:
    blocks of DURABLE_BLOCK events, the appenders taking turns in a rotating order,
    put every appender on the same disk at the same time. An appender with fewer
    events takes its turn only every few blocks, so its blocks too are spread over
    the whole run. Each event is timed alone, so the raw loop's p50 shows the disk's
    own cost of one append beside the ratios.
    """
    blocks = [max(1, -(-count // DURABLE_BLOCK)) for _, count in appenders]
    strides = [max(blocks) // n for n in blocks]
    done = [0] * len(appenders)
    spent_s: list[list[float]] = [[] for _ in appenders]
    clock = time.perf_counter
    for block in range(max(blocks)):
        for k in range(len(appenders)):
            which = (block + k) % len(appenders)
            append, count = appenders[which]
            if block % strides[which] or done[which] >= count:
                continue
            events = range(done[which], min(done[which] + DURABLE_BLOCK, count))
            spent = spent_s[which]
            for i in events:
                start = clock()
                append(i)
                spent.append(clock() - start)
            done[which] = events.stop
    return [
        Rate(count / sum(spent), statistics.median(spent) * 1000)
        for (_, count), spent in zip(appenders, spent_s, strict=True)
    ]


def measure_batch(path: str, count: int, goal: str = "bench") -> float:
    with Ledger.open(path, checkpoint_every=10**12) as ledger:
        journal = ledger.journal
        batch = list(payloads(BATCH_EVENTS))
        start = time.perf_counter()
        done = 0
        while done < count:
            with journal.transaction() as txn:
                at = txn.time_for(goal)
                for payload in batch[: min(BATCH_EVENTS, count - done)]:
                    txn.append(OBSERVED, goal, payload, at)
            done += min(BATCH_EVENTS, count - done)
        eps = count / (time.perf_counter() - start)
        journal.write_checkpoint()  # so each verify round opens without folding it all
        return eps


def measure_raw_batch(path: str, lines: list[bytes]) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        start = time.perf_counter()
        for i in range(0, len(lines), BATCH_EVENTS):
            os.write(fd, b"".join(lines[i : i + BATCH_EVENTS]))
            os.fdatasync(fd)
        return len(lines) / (time.perf_counter() - start)
    finally:
        os.close(fd)


def measure_verify(path: str, *, parallel: bool = True) -> float:
    """Events/s of a full verify, as `quotaledger verify` runs it or on one core."""
    with Ledger.open(path, write=False) as ledger:
        start = time.perf_counter()
        head = ledger.journal.verify(parallel=parallel)
        return head.next_seq / (time.perf_counter() - start)


def measure_raw_verify(path: str, *, hash_lines: bool) -> float:
    decode = msgspec.json.decode
    sha256 = hashlib.sha256
    with open(path, "rb") as handle:
        start = time.perf_counter()
        data = handle.read()
        count = 0
        for line in data.splitlines():
            decode(line)
            if hash_lines:
                sha256(line).hexdigest()
            count += 1
        return count / (time.perf_counter() - start)


def measure_fold(path: str) -> float:
    """Events/s folding the whole journal from genesis (the checkpoint ignored)."""
    start = time.perf_counter()
    with Journal.open(path, PROJECTOR, write=False, use_checkpoint=False) as journal:
        events = journal.head.next_seq
    return events / (time.perf_counter() - start)


EVENT_SPACING_US = 60_000
"""Event spacing in built journals: 1,000 samples in any 60 s window, whatever the
journal's length, so the state a command loads is the same size on both journals
and only the length differs."""


def build_journal(path: str, events: int, step: Step) -> None:
    """A journal of about `events` records across three goals, with a checkpoint."""
    end_us = wall_us() - 1_000_000
    start_us = end_us - events * EVENT_SPACING_US
    goals = ["bench", "bench-b", "bench-c"]
    with Ledger.open(path, checkpoint_every=10**12) as ledger:
        for goal in goals:
            ledger.configure(
                goal=goal, max_active_cases=1024, quota_tpm=10**12, at=format_us(start_us)
            )
        journal = ledger.journal
        done = journal.head.next_seq
        batch = list(payloads(BATCH_EVENTS))
        while done < events:
            size = min(BATCH_EVENTS, events - done)
            with journal.transaction() as txn:
                for i, payload in enumerate(batch[:size]):
                    n = done + i
                    txn.append(
                        OBSERVED, goals[n % 3], payload, format_us(start_us + n * EVENT_SPACING_US)
                    )
            done += size
            if done % 100_000 < BATCH_EVENTS:
                step(f"built {done:,} of {events:,} events")
        journal.write_checkpoint()


def run_admit(path: str, i: int = 0, env: dict[str, str] | None = None) -> float:
    """Wall time in ms of one `quotaledger admit` as a whole process (`env`: see
    `bench_process.compiled_env`)."""
    args = [
        sys.executable,
        "-m",
        "quotaledger",
        "admit",
        "--journal",
        path,
        "--json",
        "--goal",
        "bench",
        "--run",
        f"probe-{i}-{os.getpid()}",
        "--arm",
        "baseline",
        "--forecast-tpm",
        "1",
    ]
    start = time.perf_counter()
    subprocess.run(args, capture_output=True, check=False, env=env)
    return (time.perf_counter() - start) * 1000


def figure(value: float, unit: str, baseline: float | None) -> dict[str, Any]:
    ratio = value / baseline if baseline else None
    return {
        "value": round(value, 3),
        "unit": unit,
        "baseline": None if baseline is None else round(baseline, 3),
        "ratio": None if ratio is None else round(ratio, 3),
    }


TARGETS: dict[str, tuple[str, str, float]] = {
    "cli_observe_cpu_ms": ("ratio", "<=", 1.3),
    "cli_admit_cpu_ms": ("ratio", "<=", 1.3),
    "cli_client_cpu_ms": ("ratio", "<=", 0.5),
    "append_durable_eps": ("ratio", ">=", 0.75),
    "admit_release_durable_eps": ("ratio", ">=", 0.65),
    "writers_total_eps": ("ratio", ">=", 0.8),
    "writers_spread": ("value", "<=", 2.0),
    "sqlite_append_durable_eps": ("ratio", ">=", 0.8),
    "sqlite_fresh_append_durable_eps": ("ratio", ">=", 1.3),
    "postgresql_append_durable_eps": ("ratio", ">=", 0.7),
    "append_batch_eps": ("value", ">=", 250_000),
    "verify_eps": ("ratio", ">=", 0.5),
    "fold_eps": ("ratio", ">=", 0.4),
    "admit_ms": ("ratio", "<=", 1.2),
    "goals_admit_cpu_ms": ("ratio", "<=", 1.5),
    "goals_metrics_cpu_ms": ("ratio", "<=", 1.5),
    "inspect_checkpoint_s": ("value", "<=", 0.3),
    "inspect_s": ("value", "<=", 1.2),
    "audit_s": ("value", "<=", 1.5),
    "whatif_s": ("value", "<=", 2.0),
    "report_s": ("value", "<=", 3.0),
    "daily_event_cpu_us": ("ratio", "<=", 1.2),
    "pool_admit_cpu_ms": ("ratio", "<=", 1.5),
}
"""SPEC §9's targets: which number of a figure is held to what. The operators' are
stated for 100,000 observations, the many-goals ones for GOALS_MANY goals; a smaller
run reports them without judging."""


def with_targets(figures: dict[str, Any], *, operator_observations: int) -> dict[str, Any]:
    """Each figure with its "target" (e.g. "ratio >= 0.85") and "met" (None: no target,
    or not judged at this size)."""
    for name, found in figures.items():
        rule = TARGETS.get(name)
        if rule is None:
            found.update(target=None, met=None)
            continue
        key, op, bound = rule
        found["target"] = f"{key} {op} {bound:g}"
        judged = not (name.endswith("_s") and operator_observations < OPERATOR_OBSERVATIONS)
        judged = judged and found.get("goals", GOALS_MANY) >= GOALS_MANY
        judged = judged and found.get("observations", DAY_OBSERVATIONS) >= DAY_OBSERVATIONS
        number = found[key]
        if not judged or number is None:
            found["met"] = None
        else:
            found["met"] = bool(number >= bound if op == ">=" else number <= bound)
    return figures


Measure = Callable[[int], float]
"""One measurement for round `r` (it names its scratch files by the round)."""


def interleaved(rounds: int, measures: list[Measure]) -> list[float]:
    """The median of each measure over `rounds` rounds, its order rotating per round.

    This machine's speed drifts (the disk's fdatasync latency, a neighbour's load):
    short rounds that alternate what they measure expose ours and the baseline to the
    same drift, so their ratio holds where two long back-to-back runs would not.
    """
    results: list[list[float]] = [[] for _ in measures]
    for r in range(rounds):
        for i in range(len(measures)):
            k = (r + i) % len(measures)
            results[k].append(measures[k](r))
    return [statistics.median(values) for values in results]


def sample_lines(workdir: str, data: list[bytes]) -> list[bytes]:
    """Journal lines of these payloads, for the raw loop to write."""
    path = f"{workdir}/sample.jsonl"
    with (
        Ledger.open(path, checkpoint_every=10**12) as ledger,
        ledger.journal.transaction() as txn,
    ):
        at = txn.time_for("bench")
        for payload in data:
            txn.append(OBSERVED, "bench", payload, at)
    return read_lines(path)[1:]


def read_lines(path: str) -> list[bytes]:
    with open(path, "rb") as handle:
        return handle.read().splitlines(keepends=True)
