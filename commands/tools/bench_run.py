"""`quotaledger bench`'s run: every measure of `tools.bench` (and of its process and
PostgreSQL modules) in turn, in one scratch folder, with SPEC §9's targets."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import AbstractContextManager, ExitStack
from typing import Any

from quotaledger.journal.clock import format_us, wall_us
from quotaledger.tools.bench import (
    ADMIT_RUNS,
    BATCH_EVENTS,
    DURABLE_BLOCK,
    DURABLE_EVENTS,
    GOALS_MANY,
    OPERATOR_OBSERVATIONS,
    PG_EVENTS,
    READ_ROUNDS,
    SMALL_JOURNAL_EVENTS,
    Appender,
    Step,
    admit_release_appender,
    build_journal,
    figure,
    interleaved,
    measure_batch,
    measure_durable,
    measure_fold,
    measure_raw_batch,
    measure_raw_verify,
    measure_verify,
    observe_appender,
    payloads,
    raw_appender,
    read_lines,
    run_admit,
    sample_lines,
    sqlite_appender,
    sqlite_fresh_commits_max,
    with_targets,
)
from quotaledger.tools.bench_daily import measure_daily
from quotaledger.tools.bench_goals import measure_goals
from quotaledger.tools.bench_pg import measure_postgresql
from quotaledger.tools.bench_pools import measure_pools
from quotaledger.tools.bench_process import (
    STARTUP_RUNS,
    compiled_env,
    measure_operators,
    measure_startup,
)
from quotaledger.tools.bench_writers import WRITERS_ROUNDS, measure_writers


def run_bench(
    events: int,
    *,
    compare_sqlite: bool,
    directory: str | None,
    step: Step,
    pg_url: str | None = None,
    writers: int | None = None,
) -> dict[str, Any]:
    workdir = tempfile.mkdtemp(prefix="quotaledger-bench-", dir=directory or os.getcwd())
    try:
        figures = durable_figures(workdir, events, compare_sqlite, step)
        if pg_url is not None:
            step(f"postgresql: {PG_EVENTS:,} durable appends each (ours, raw psycopg), in turns")
            ours_pg, raw_pg = measure_postgresql(pg_url, PG_EVENTS)
            figures["postgresql_append_durable_eps"] = figure(ours_pg, "events/s", raw_pg)
        figures.update(read_figures(workdir, events, step))
        env = compiled_env(f"{workdir}/pycache")  # whole processes run compiled bytecode
        figures.update(process_figures(workdir, events, step, env))
        observations = min(events, OPERATOR_OBSERVATIONS)
        step(f"operators: inspect, audit, whatif, report on {observations:,} observations")
        figures.update(measure_operators(f"{workdir}/operators.jsonl", observations, env=env))
        figures.update(measure_goals(workdir, min(events, GOALS_MANY), step, env))
        figures.update(measure_pools(workdir, step, env))
        step("daily windows: an event's CPU with 10^6 and 10^3 observations in the day")
        figures["daily_event_cpu_us"] = measure_daily(events)
        if writers is not None:
            step(f"several writers: {WRITERS_ROUNDS} rounds of 1 and of {writers} processes")
            figures.update(measure_writers(workdir, writers))
        return {
            "ok": True,
            "events": events,
            "at": format_us(wall_us()),
            "figures": with_targets(figures, operator_observations=observations),
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def durable_figures(workdir: str, events: int, compare_sqlite: bool, step: Step) -> dict[str, Any]:
    """One event per transaction: ours (observe, admit+release) beside the raw loop
    (and SQLite), taking turns."""
    figures: dict[str, Any] = {}
    durable_count = max(200, min(DURABLE_EVENTS, events // 50))
    fresh_count = min(durable_count, sqlite_fresh_commits_max())
    step(
        f"durable appends on a full window: {durable_count:,} each (observe, admit+release, raw"
        f"{f', sqlite in use; {fresh_count:,} on a new sqlite database' if compare_sqlite else ''}"
        f"), in turns of {DURABLE_BLOCK}"
    )
    data = list(payloads(durable_count + 1))
    lines = sample_lines(workdir, data)
    with ExitStack() as files:

        def taking_turns(
            appender: AbstractContextManager[Appender], count: int = durable_count
        ) -> tuple[Appender, int]:
            return files.enter_context(appender), count

        appenders = [
            taking_turns(raw_appender(f"{workdir}/durable.bin", lines)),
            taking_turns(observe_appender(f"{workdir}/durable.jsonl")),
            taking_turns(admit_release_appender(f"{workdir}/admit.jsonl")),
        ]
        if compare_sqlite:
            appenders += [
                taking_turns(sqlite_appender(f"{workdir}/durable.db", data, wrapped=True)),
                taking_turns(
                    sqlite_appender(f"{workdir}/fresh.db", data, wrapped=False), fresh_count
                ),
            ]
        raw, ours, admit, *sqlite = measure_durable(appenders)
    # The raw loop's p50 beside each ratio against it: the disk's own cost of an append.
    beside_raw = {"baseline_p50_ms": round(raw.p50_ms, 3)}
    figures["append_durable_eps"] = figure(ours.eps, "events/s", raw.eps) | beside_raw
    figures["admit_release_durable_eps"] = figure(admit.eps, "events/s", raw.eps) | beside_raw
    if sqlite:
        in_use, fresh = sqlite
        figures["sqlite_append_durable_eps"] = figure(ours.eps, "events/s", in_use.eps)
        figures["sqlite_fresh_append_durable_eps"] = figure(ours.eps, "events/s", fresh.eps)
    return figures


def read_figures(workdir: str, events: int, step: Step) -> dict[str, Any]:
    """Batch appends into `big.jsonl`, then its verification and fold, each beside its
    raw loop."""
    step(f"batch appends: {events:,} events, {BATCH_EVENTS} per transaction")
    big = f"{workdir}/big.jsonl"
    batch_eps = measure_batch(big, events)
    raw_batch = measure_raw_batch(f"{workdir}/raw-batch.bin", read_lines(big))
    rounds = READ_ROUNDS if events <= 200_000 else 3
    step(f"verify and fold: {rounds} interleaved rounds over {events:,} events")
    verify_eps, one_core_eps, raw_verify_eps, fold_eps, raw_decode_eps = interleaved(
        rounds,
        [
            lambda r: measure_verify(big),
            lambda r: measure_verify(big, parallel=False),
            lambda r: measure_raw_verify(big, hash_lines=True),
            lambda r: measure_fold(big),
            lambda r: measure_raw_verify(big, hash_lines=False),
        ],
    )
    return {
        "append_batch_eps": figure(batch_eps, "events/s", raw_batch),
        "verify_eps": figure(verify_eps, "events/s", raw_verify_eps),
        "verify_one_core_eps": figure(one_core_eps, "events/s", raw_verify_eps),
        "fold_eps": figure(fold_eps, "events/s", raw_decode_eps),
    }


def process_figures(
    workdir: str, events: int, step: Step, env: dict[str, str] | None
) -> dict[str, Any]:
    """`admit` as a process on a small and a large journal, and CLI start-up."""
    step(f"admit as a process: {SMALL_JOURNAL_EVENTS:,}-event vs {events:,}-event journal")
    small, large = f"{workdir}/small.jsonl", f"{workdir}/large.jsonl"
    build_journal(small, SMALL_JOURNAL_EVENTS, step)
    build_journal(large, events, step)
    run_admit(small, -1, env)  # warm the interpreter's file cache (and compile, if need be)
    small_ms, large_ms = interleaved(
        ADMIT_RUNS, [lambda r: run_admit(small, r, env), lambda r: run_admit(large, r, env)]
    )
    step(f"start-up: {STARTUP_RUNS} interleaved rounds of CLI processes vs the bare import")
    return {"admit_ms": figure(large_ms, "ms", small_ms), **measure_startup(small)}
