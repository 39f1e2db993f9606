"""The bench's many-goals figures (SPEC §9): a command about one goal costs the same
whatever the number of other goals. `admit` and `metrics --goal G` as whole processes
on a journal of 100,000 goals and on one of 10, each with its checkpoint, CPU time
(user + system, from the OS) in interleaved rounds: the ratio is the figure."""

from __future__ import annotations

from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import format_us, wall_us
from quotaledger.tools.bench import OBSERVED, Step, figure, interleaved
from quotaledger.tools.bench_process import cli_command, process_cpu_ms

GOALS_FEW = 10
GOALS_RUNS = 7
GOALS_PER_TRANSACTION = 1_000
PROBED_GOAL = "goal-7"
_CONFIGURED = (
    b'{"cases":{"max_active_cases":4,"target_active_cases":4,"max_baseline_cases":4,'
    b'"max_test_cases":4,"reserved_test_cases":0},"tokens":{"quota_tpm":100000,'
    b'"target_tpm":90000,"evaluator_reserve_tpm":0,"cold_start_reserve_tpm":0,'
    b'"cached_input_weight":1.0,"max_observation_age_s":60,"cooldown_base_s":15,'
    b'"cooldown_max_s":300},"explicit":["max_active_cases","quota_tpm"]}'
)
_OBSERVED = (
    b'{"run":null,"uncached_input":1200,"cached_input":300,"output":80,"requests":null,'
    b'"coverage":"measured","source":null}'
)


def build_goals_journal(path: str, goals: int) -> None:
    """`goals` goals, each configured (cases and tokens) and observed once, then a
    checkpoint: the state a command about one of them may not have to read whole."""
    at = format_us(wall_us() - 1_000_000)
    names = [f"goal-{n}" for n in range(goals)]
    with Ledger.open(path, checkpoint_every=10**12) as ledger:
        ledger.configure(goal=names[0], max_active_cases=4, quota_tpm=100_000, at=at)
        journal = ledger.journal
        for start in range(0, goals, GOALS_PER_TRANSACTION):
            with journal.transaction() as txn:
                for goal in names[start : start + GOALS_PER_TRANSACTION]:
                    if goal != names[0]:
                        txn.append("capacity.configured", goal, _CONFIGURED, at)
                    txn.append(OBSERVED, goal, _OBSERVED, at)
        journal.write_checkpoint()


def measure_goals(
    workdir: str, goals: int, step: Step, env: dict[str, str] | None
) -> dict[str, Any]:
    """`admit` and `metrics --goal` on `goals` goals against GOALS_FEW goals (judged
    against SPEC §9's target at GOALS_MANY goals only)."""
    step(f"many goals: a journal of {goals:,} goals and one of {GOALS_FEW}, with checkpoints")
    few, many = f"{workdir}/goals-few.jsonl", f"{workdir}/goals-many.jsonl"
    build_goals_journal(few, GOALS_FEW)
    build_goals_journal(many, goals)

    def admit(journal: str, r: int) -> float:
        args = ["admit", "--goal", PROBED_GOAL, "--run", f"probe-{r}", "--arm", "baseline"]
        return process_cpu_ms([*cli_command(), *args, "--forecast-tpm", "1",
                               "--journal", journal, "--json"], env)  # fmt: skip

    def metrics(journal: str, r: int) -> float:
        args = ["metrics", "--goal", PROBED_GOAL, "--journal", journal]
        return process_cpu_ms([*cli_command(), *args], env)

    step(f"many goals: {GOALS_RUNS} interleaved rounds of admit and metrics --goal")
    for journal in (few, many):  # warm the file cache (and compile, if need be)
        admit(journal, -1)
        metrics(journal, -1)
    few_admit, many_admit, few_metrics, many_metrics = interleaved(
        GOALS_RUNS,
        [lambda r: admit(few, r), lambda r: admit(many, r),
         lambda r: metrics(few, r), lambda r: metrics(many, r)],
    )  # fmt: skip
    return {
        "goals_admit_cpu_ms": {**figure(many_admit, "ms", few_admit), "goals": goals},
        "goals_metrics_cpu_ms": {**figure(many_metrics, "ms", few_metrics), "goals": goals},
    }
