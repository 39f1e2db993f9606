"""The bench's own machinery: what it measures must be what its figures say.

These run in CI (they time nothing); the targets themselves are in
test_performance_targets.py and run on request."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from quotaledger.cli.tools import bench_text
from quotaledger.tools.bench import (
    TARGETS,
    admit_release_appender,
    figure,
    measure_durable,
    observe_appender,
    payloads,
    sqlite_appender,
    sqlite_fresh_commits_max,
    sqlite_wal_cycle_pages,
    with_targets,
)
from quotaledger.tools.bench_process import build_operators_journal, remove_checkpoint
from quotaledger.tools.bench_run import durable_figures
from tests.support import run_cli


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

    rates = measure_durable([(recorder("a"), 100), (recorder("b"), 100), (recorder("c"), 30)])
    for name, count in (("a", 100), ("b", 100), ("c", 30)):
        assert [i for who, i in calls if who == name] == list(range(count))
    # Five blocks of 20, the order rotating (a b c, b c a, c a b, ...). c has two
    # blocks' worth, so it takes every second turn: blocks 0 and 2, not 0 and 1.
    blocks = [calls[0:60], calls[60:100], calls[100:150], calls[150:190], calls[190:230]]
    assert [who for who, _ in blocks[1][::20]] == ["b", "a"]
    assert blocks[2][0] == ("c", 20) and len(blocks[2]) == 50
    assert not [c for c in blocks[3] + blocks[4] if c[0] == "c"]
    assert len(calls) == 230 and len(rates) == 3 and all(rate.eps > 0 for rate in rates)


def test_the_durable_figures_run_on_a_full_window(tmp_path: Path) -> None:
    # append_durable_eps and admit_release_durable_eps claim the runners' paths on a
    # busy goal: the window holds thousands of samples while they append.
    from quotaledger import Ledger
    from quotaledger.journal.clock import wall_us
    from quotaledger.projections.capacity import goal_of, window_samples

    for appender, kinds in (
        (observe_appender, ["capacity.observed"] * 4),
        (admit_release_appender, ["capacity.admitted", "capacity.released"] * 2),
    ):
        path = str(tmp_path / f"{appender.__name__}.jsonl")
        with appender(path) as append:
            for i in range(4):
                append(i)
        with Ledger.open(path, write=False) as ledger:
            state = goal_of(ledger.journal.state.capacity, "bench")
            assert len(window_samples(state, wall_us())) >= 5_000
            tail = [r.kind for r, _, _ in ledger.journal.records()][-4:]
        assert tail == kinds


def test_every_target_is_judged_on_its_own_number() -> None:
    figures = {
        "append_durable_eps": figure(90, "events/s", 100),  # ratio 0.9 >= 0.75
        "fold_eps": figure(30, "events/s", 100),  # ratio 0.3 < 0.4
        "append_batch_eps": figure(300_000, "events/s", 3_000_000),  # value
        "report_s": figure(2.0, "s", None),
        "verify_one_core_eps": figure(1, "events/s", 1),  # no target
    }
    judged = with_targets(figures, operator_observations=100_000)
    assert [judged[n]["met"] for n in judged] == [True, False, True, True, None]
    assert judged["append_durable_eps"]["target"] == "ratio >= 0.75"
    assert judged["report_s"]["target"] == "value <= 3"
    small = with_targets({"report_s": figure(2.0, "s", None)}, operator_observations=1_000)
    assert small["report_s"]["met"] is None  # stated for 100,000 observations
    few = {"goals_admit_cpu_ms": {**figure(1.1, "ms", 1.0), "goals": 1_000}}
    assert with_targets(few, operator_observations=100_000)["goals_admit_cpu_ms"]["met"] is None
    many = {"goals_admit_cpu_ms": {**figure(1.6, "ms", 1.0), "goals": 100_000}}
    assert with_targets(many, operator_observations=100_000)["goals_admit_cpu_ms"]["met"] is False
    assert {"cli_observe_cpu_ms", "postgresql_append_durable_eps", "inspect_s"} <= set(TARGETS)
    assert TARGETS["inspect_checkpoint_s"] == ("value", "<=", 0.3)
    assert {"writers_total_eps", "writers_spread"} <= set(TARGETS)


def test_each_writer_process_counts_the_events_it_made_durable(tmp_path: Path) -> None:
    # writers_total_eps and writers_spread claim each process's own count: the journal
    # must hold exactly the observations the writers say they made.
    from quotaledger import Ledger
    from quotaledger.tools.bench_writers import writers_round

    path = str(tmp_path / "writers.jsonl")
    found = writers_round(path, 2, 0.3, None)
    assert len(found["counts"]) == 2 and min(found["counts"]) > 0
    with Ledger.open(path, write=False) as ledger:
        kinds = [r.kind for r, _, _ in ledger.journal.records()]
    assert kinds.count("capacity.observed") == sum(found["counts"])
    assert found["eps"] > 0 and found["p99_ms"] > 0


def test_the_operators_journal_has_decisions_to_audit(tmp_path: Path) -> None:
    path = str(tmp_path / "ops.jsonl")
    decision = build_operators_journal(path, 1_000)
    audited = run_cli("audit", "--journal", path, "--json", "--seq", str(decision))
    assert audited.code == 0, audited.stdout
    assert audited.json["reproduced"] is True


def test_the_operators_journal_has_its_writers_checkpoint_until_removed(tmp_path: Path) -> None:
    # inspect_checkpoint_s claims the checkpoint writers keep (one cadence at most
    # behind), inspect_s and the others none at all.
    from quotaledger import Ledger
    from quotaledger.journal.limits import CHECKPOINT_EVERY_EVENTS

    path = str(tmp_path / "ops.jsonl")
    build_operators_journal(path, CHECKPOINT_EVERY_EVENTS + 2_000)
    with Ledger.open(path, write=False) as ledger:
        head, stored = ledger.journal.head.seq, ledger.journal.checkpoint_seq
    assert head - CHECKPOINT_EVERY_EVENTS < stored <= head
    remove_checkpoint(path)
    assert sorted(os.listdir(tmp_path)) == ["ops.jsonl"]
    with Ledger.open(path, write=False) as ledger:
        assert ledger.journal.checkpoint_seq == -1


def test_each_durable_rate_has_the_median_time_of_one_event() -> None:
    pause_s = [0.001, 0.001, 0.004]  # sleep never returns early: a lower bound only

    def sleeper(i: int) -> None:
        time.sleep(pause_s[i % 3])

    (rate,) = measure_durable([(sleeper, 30)])
    assert rate.p50_ms >= 1.0
    assert rate.eps <= 1 / 0.002  # 30 events of at least 60 ms in all


def test_the_durable_figures_print_the_raw_loops_p50(tmp_path: Path) -> None:
    figures = durable_figures(str(tmp_path), 1_000, False, lambda text: None)
    for name in ("append_durable_eps", "admit_release_durable_eps"):
        assert figures[name]["baseline_p50_ms"] > 0
    text = bench_text({"figures": with_targets(figures, operator_observations=1_000)})
    rows = [line for line in text.splitlines() if "durable_eps" in line]
    assert len(rows) == 2 and all("(p50 " in row for row in rows), text


def test_bench_refuses_a_postgresql_comparison_without_a_url(tmp_path: Path) -> None:
    for args in (["--compare", "postgresql"], ["postgresql://x/y"], ["--compare", "mysql"]):
        done = run_cli("bench", *args, "--json", "--dir", str(tmp_path))
        assert done.code == 2 and done.json["error"]["code"] == "invalid_option", done.stdout


def test_bench_refuses_fewer_than_two_writers_or_too_many(tmp_path: Path) -> None:
    for value in ("1", "0", "65"):
        done = run_cli("bench", "--writers", value, "--json", "--dir", str(tmp_path))
        assert done.code == 2 and done.json["error"]["code"] == "invalid_option", done.stdout
        assert "--writers" in done.json["error"]["message"]


def test_the_goals_journal_has_its_goals_and_a_checkpoint(tmp_path: Path) -> None:
    from quotaledger import Ledger
    from quotaledger.tools.bench_goals import PROBED_GOAL, build_goals_journal

    path = str(tmp_path / "goals.jsonl")
    build_goals_journal(path, 30)
    assert os.path.exists(f"{path}.checkpoint")
    with Ledger.open(path, write=False) as ledger:
        assert ledger.journal.checkpoint_seq == ledger.journal.head.seq
        assert len(ledger.goals()["goals"]) == 30
        assert ledger.inspect(goal=PROBED_GOAL)["goals"][PROBED_GOAL]["config"]["cases"]
