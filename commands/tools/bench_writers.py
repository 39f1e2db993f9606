"""`bench --writers N`: several writer processes on one journal, without a server.

Each writer is a whole process holding the Python API (`Ledger.open`) on the same
journal and calling `observe` on one shared goal for a fixed time, one event per
transaction, as a runner without a server would. The figure is the total at N writers
against one writer alone, measured in alternating rounds of the same length (the
machine's speed drifts), and the spread: the busiest writer's count over the least
busy one's (SPEC §9: the lock is waited for in the kernel, in arrival order).

Writers run with cached bytecode, as an installed package has it (see
`bench_process.measure_startup`): their start-up is outside the clock anyway, but a
writer compiling every module would start long after the others.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from quotaledger.api import Ledger
from quotaledger.tools.bench import figure
from quotaledger.tools.bench_process import compiled_env

WRITERS_ROUNDS = 3
WRITERS_ROUND_S = 3.0
GOAL = "bench"


def run_writer(path: str, duration_s: float) -> dict[str, Any]:
    """One writer: open, say ready, wait for the word, observe for `duration_s`."""
    latencies_us: list[int] = []
    with Ledger.open(path) as ledger:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()
        clock = time.perf_counter
        start = clock()
        stop = start + duration_s
        now = start
        i = 0
        while now < stop:
            ledger.observe(
                goal=GOAL,
                run=f"run-{i % 97:03d}",
                uncached_input=1000 + (i * 7919) % 20000,
                cached_input=(i * 104729) % 8000,
                output=200 + (i * 1299709) % 4000,
            )
            after = clock()
            latencies_us.append(int((after - now) * 1_000_000))
            now = after
            i += 1
        spent_s = now - start
    return {"events": i, "spent_s": spent_s, "latencies_us": latencies_us}


def writers_round(
    path: str, writers: int, duration_s: float, env: dict[str, str] | None
) -> dict[str, Any]:
    """`writers` processes on a new journal at `path`, started together: total events/s,
    each writer's count, and the latencies of every event."""
    with Ledger.open(path) as ledger:
        ledger.configure(goal=GOAL, max_active_cases=1024, quota_tpm=10**12)
    args = [sys.executable, "-m", "quotaledger.tools.bench_writers", path, str(duration_s)]
    children = [
        subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        for _ in range(writers)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a bench writer failed to start")
        for child in children:  # the word, to every writer at once (they wait on stdin)
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = []
        for child in children:
            out, _ = child.communicate()
            results.append(json.loads(out))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    counts = [r["events"] for r in results]
    spent_s = max(r["spent_s"] for r in results)
    latencies = sorted(us for r in results for us in r["latencies_us"])
    return {
        "eps": sum(counts) / spent_s,
        "counts": counts,
        "p99_ms": latencies[int(len(latencies) * 0.99)] / 1000 if latencies else 0.0,
    }


def measure_writers(
    workdir: str,
    writers: int,
    *,
    rounds: int = WRITERS_ROUNDS,
    duration_s: float = WRITERS_ROUND_S,
) -> dict[str, Any]:
    """One writer and `writers` writers in alternating rounds; the medians."""
    one: list[float] = []
    many: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="quotaledger-bench-pycache-") as prefix:
        env = compiled_env(prefix)
        for r in range(rounds):
            order = [1, writers] if r % 2 == 0 else [writers, 1]
            for n in order:
                found = writers_round(f"{workdir}/writers-{r}-{n}.jsonl", n, duration_s, env)
                if n == 1:
                    one.append(found["eps"])
                else:
                    many.append(found)
    spreads = [max(f["counts"]) / max(1, min(f["counts"])) for f in many]
    return {
        "writers_total_eps": figure(statistics.median(f["eps"] for f in many), "events/s",
                                    statistics.median(one)),
        "writers_spread": figure(statistics.median(spreads), "x", None),
        "writers_p99_ms": figure(statistics.median(f["p99_ms"] for f in many), "ms", None),
    }  # fmt: skip


if __name__ == "__main__":
    json.dump(run_writer(sys.argv[1], float(sys.argv[2])), sys.stdout)
