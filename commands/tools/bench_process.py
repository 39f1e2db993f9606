"""The bench's whole-process figures: CLI start-up, and operators' commands at scale.

A runner calls the CLI once per event and an operator runs a command on a long
journal: both pay for a whole process, interpreter start-up included, so these run
real processes and read their CPU (start-up) or wall time (operators) from the OS.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal.checkpoint import FILE_SUFFIXES
from quotaledger.journal.clock import format_us, wall_us
from quotaledger.tools import bench_serve_systems as systems
from quotaledger.tools.bench import OBSERVED, figure, interleaved, payloads

STARTUP_RUNS = 15
OPERATOR_SPACING_US = 10_000
"""One observation every 10 ms: 6,000 samples in any 60 s window."""
OPERATOR_DECISION_EVERY = 200
OPERATOR_TIMEOUT_FACTOR = 20
"""An operator's command that takes this many times its target is stopped (and
reported at that time, not met): a quadratic command must not hang the bench."""
OPERATOR_TARGETS_S = {
    "inspect_checkpoint": 0.3,
    "inspect": 1.2,
    "audit": 1.5,
    "whatif": 2.0,
    "report": 3.0,
}


def cli_command() -> list[str]:
    """The `quotaledger` a runner calls: the console script beside this interpreter."""
    script = os.path.join(os.path.dirname(sys.executable), "quotaledger")
    if os.access(script, os.X_OK):
        return [script]
    found = shutil.which("quotaledger")
    return [found] if found else [sys.executable, "-m", "quotaledger"]


def process_cpu_ms(args: list[str], env: dict[str, str] | None = None) -> float:
    """User + system CPU of one whole process, as the kernel accounted it."""
    child = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, _, usage = os.wait4(child.pid, 0)
    return (usage.ru_utime + usage.ru_stime) * 1000


def measure_startup(journal: str, runs: int = STARTUP_RUNS) -> dict[str, Any]:
    """`observe` and `admit --dry-run` as whole processes against the bare import of
    their frameworks, in interleaved rounds (medians): SPEC §9's start-up figure; and
    `observe` as a client of a server (`--journal http://...`, a `quotaledger serve`
    on a copy of the journal), SPEC §9's CLI client figure.

    Every process runs with its bytecode cached, as an installed package has it (pip
    compiles a wheel's modules on install). Where this checkout has none (an editable
    install under PYTHONDONTWRITEBYTECODE=1, as on some CI machines) each call would
    compile every module it imports, which no runner's installation does: the
    processes then read and write their bytecode under a private PYTHONPYCACHEPREFIX,
    filled by the warm-up runs, and the figures say so.
    """
    bare = [sys.executable, "-c", "import typer, msgspec"]
    counts = ["--json", "--goal", "bench", "--uncached-input", "10", "--cached-input", "0"]
    counts += ["--output", "5"]
    observe = [*cli_command(), "observe", "--journal", journal, *counts]
    admit = [*cli_command(), "admit", "--journal", journal, "--json", "--goal", "bench"]
    admit += ["--run", "startup", "--arm", "baseline", "--forecast-tpm", "1", "--dry-run"]
    cached = bytecode_cached()
    served = f"{journal}.served.jsonl"
    shutil.copyfile(journal, served)
    port = systems.free_port()
    with (
        tempfile.TemporaryDirectory(prefix="quotaledger-bench-pycache-") as prefix,
        systems.http_server(systems.serve_command(served, port), port, f"{served}.log"),
    ):
        env = None if cached else cached_bytecode_env(prefix)
        client = [*cli_command(), "observe", "--journal", f"http://127.0.0.1:{port}", *counts]
        for args in (bare, observe, admit, client):  # warm the file cache (and the prefix)
            process_cpu_ms(args, env)
        bare_ms, observe_ms, admit_ms, client_ms = interleaved(
            runs, [lambda r: process_cpu_ms(bare, env), lambda r: process_cpu_ms(observe, env),
                   lambda r: process_cpu_ms(admit, env), lambda r: process_cpu_ms(client, env)],
        )  # fmt: skip
    figures = {
        "cli_observe_cpu_ms": figure(observe_ms, "ms", bare_ms),
        "cli_admit_cpu_ms": figure(admit_ms, "ms", bare_ms),
        "cli_client_cpu_ms": figure(client_ms, "ms", bare_ms),
    }
    if not cached:
        for found in figures.values():
            found["note"] = "bytecode cached under a private PYTHONPYCACHEPREFIX (none here)"
    return figures


def cached_bytecode_env(prefix: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = prefix
    return env


def compiled_env(prefix: str) -> dict[str, str] | None:
    """The environment for the bench's whole processes: None where this checkout's
    bytecode is cached (as an installed package's is), else one that caches it under
    `prefix`, so only the first process compiles (see `measure_startup`)."""
    return None if bytecode_cached() else cached_bytecode_env(prefix)


def bytecode_cached() -> bool:
    source = importlib.util.find_spec("quotaledger.cli.main")
    assert source is not None and source.origin is not None  # this very package
    return os.path.exists(importlib.util.cache_from_source(source.origin))


def build_operators_journal(path: str, observations: int) -> int:
    """`observations` observations one every 10 ms on goal "ops", an admission request
    every 200 of them (some refused), admitted runs released 5 s later, with the
    checkpoint its writers keep (refreshed every CHECKPOINT_EVERY_EVENTS records, as
    `Ledger.open` does by default). The seq of the last decision (for `audit`)."""
    start_us = wall_us() - observations * OPERATOR_SPACING_US - 120_000_000
    batch = list(payloads(OPERATOR_DECISION_EVERY))
    last_decision = 0
    with Ledger.open(path) as ledger:
        ledger.configure(
            goal="ops",
            max_active_cases=8,
            quota_tpm=120_000_000,
            target_tpm=110_000_000,
            at=format_us(start_us - 1),
        )
        held: list[tuple[int, str]] = []  # (release at, run)
        done = 0
        while done < observations:
            size = min(OPERATOR_DECISION_EVERY, observations - done)
            with ledger.journal.transaction() as txn:
                for i in range(size):
                    at_us = start_us + (done + i) * OPERATOR_SPACING_US
                    txn.append(OBSERVED, "ops", batch[i], format_us(at_us))
            done += size
            now_us = start_us + (done - 1) * OPERATOR_SPACING_US + 1
            for release_us, run in [h for h in held if h[0] <= now_us]:
                ledger.release(goal="ops", run=run, at=format_us(now_us))
                held.remove((release_us, run))
            run = f"ops-{done}"
            forecast = 1_000_000 * (done // OPERATOR_DECISION_EVERY % 8)
            answer = ledger.admit(
                goal="ops", run=run, arm="baseline", forecast_tpm=forecast,
                at=format_us(now_us + 1),
            )  # fmt: skip
            assert answer["event"] is not None  # a decision is always journaled here
            last_decision = answer["event"]["seq"]
            if answer["admitted"]:
                held.append((now_us + 5_000_000, run))
    return last_decision


def remove_checkpoint(path: str) -> None:
    """The journal at `path` without its checkpoint files (its records untouched)."""
    for suffix in FILE_SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


def run_timed(
    args: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> tuple[float, bool]:
    """Wall seconds of one whole process, and whether it was stopped at `timeout_s`."""
    start = time.perf_counter()
    try:
        subprocess.run(args, capture_output=True, check=False, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, True
    return time.perf_counter() - start, False


def measure_operators(
    path: str, observations: int, rounds: int = 3, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """`inspect` with the writers' checkpoint, then inspect, audit, whatif and report
    as whole processes on the same journal without one (each run starts as the last
    ended: readers write no checkpoint); medians of `rounds` after one warm-up run
    each (which compiles, where bytecode is not cached)."""
    decision = build_operators_journal(path, observations)
    cli = [*cli_command()]
    common = ["--journal", path, "--json"]
    inspect = [*cli, "inspect", *common, "--goal", "ops"]
    commands = {
        "inspect_checkpoint": inspect,
        "inspect": inspect,
        "audit": [*cli, "audit", *common, "--seq", str(decision)],
        "whatif": [*cli, "whatif", *common, "--goal", "ops", "--quota-tpm", "200000000",
                   "--target-tpm", "190000000"],
        "report": [*cli, "report", *common, "--goal", "ops", "--out", f"{path}.html"],
    }  # fmt: skip
    figures: dict[str, Any] = {}
    for name, args in commands.items():
        if name == "inspect":
            remove_checkpoint(path)  # from here on: the whole journal folded from genesis
        timeout_s = OPERATOR_TARGETS_S[name] * OPERATOR_TIMEOUT_FACTOR
        run_timed(args, timeout_s, env)
        times: list[float] = []
        stopped = False
        for _ in range(rounds):
            seconds, stopped = run_timed(args, timeout_s, env)
            times.append(seconds)
            if stopped:
                break
        found = figure(statistics.median(times), "s", None)
        if stopped:
            found["timed_out"] = True
        figures[f"{name}_s"] = found
    return figures
