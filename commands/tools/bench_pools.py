"""The bench's pool figure (SPEC §9, §12.1): `admit` on a goal in a pool of 100 goals
beside `admit` on a lone goal, as whole processes on journals with their checkpoints,
CPU time (user + system, from the OS) in interleaved rounds. A pooled decision folds
the pool's members (their sections of the checkpoint), never the goals outside it:
the ratio is the figure (target <= 1.5)."""

from __future__ import annotations

from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.clock import format_us, wall_us
from quotaledger.tools.bench import Step, figure, interleaved
from quotaledger.tools.bench_process import cli_command, process_cpu_ms

POOL_MEMBERS = 100
POOL_RUNS = 7
PROBED = "member-7"


def build_pool_journal(path: str, members: int) -> None:
    """A pool of `members` goals (each joined, observed once and holding one run), or
    with `members` 0 a lone goal (configured, observed, one run); then a checkpoint."""
    at = format_us(wall_us() - 1_000_000)
    with Ledger.open(path, checkpoint_every=10**12) as ledger:
        if members == 0:
            ledger.configure(goal=PROBED, quota_tpm=10**9, at=at)
            goals = [PROBED]
        else:
            ledger.pool_configure(pool="bench-pool", quota_tpm=10**9, quota_rpm=10**6, at=at)
            goals = [f"member-{n}" for n in range(members)]
            share = 1 / members
            for goal in goals:
                ledger.configure(goal=goal, pool="bench-pool", pool_share=round(share, 4), at=at)
        for goal in goals:
            ledger.observe(goal=goal, uncached_input=1_200, cached_input=300, output=80, at=at)
            ledger.admit(goal=goal, run="held", forecast_tpm=100, forecast_rpm=1, at=at)
        ledger.journal.write_checkpoint()


def measure_pools(workdir: str, step: Step, env: dict[str, str] | None) -> dict[str, Any]:
    """`pool_admit_cpu_ms`: admit in a pool of POOL_MEMBERS goals vs on a lone goal."""
    step(f"pools: admit on a goal in a pool of {POOL_MEMBERS} goals vs a lone goal")
    lone, pooled = f"{workdir}/pool-lone.jsonl", f"{workdir}/pool-many.jsonl"
    build_pool_journal(lone, 0)
    build_pool_journal(pooled, POOL_MEMBERS)

    def admit(journal: str, r: int) -> float:
        args = ["admit", "--goal", PROBED, "--run", f"probe-{r}", "--forecast-tpm", "1"]
        return process_cpu_ms(
            [*cli_command(), *args, "--forecast-rpm", "1", "--journal", journal, "--json"], env
        )

    for journal in (lone, pooled):  # warm the file cache (and compile, if need be)
        admit(journal, -1)
    lone_ms, pooled_ms = interleaved(
        POOL_RUNS, [lambda r: admit(lone, r), lambda r: admit(pooled, r)]
    )
    return {"pool_admit_cpu_ms": {**figure(pooled_ms, "ms", lone_ms), "members": POOL_MEMBERS}}
