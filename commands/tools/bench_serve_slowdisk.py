"""`bench --serve`'s slow disk (SPEC §9): on a disk whose fdatasync p50 is >= 1 ms,
the server at N clients against the one-writer loop (one process: a write and an
fdatasync per event), where group commit matters most.

No disk here is that slow, and a delay device (dm-delay) needs device-mapper, which
this machine's kernel lacks. So both run under strace, which holds the return of
every fdatasync by SLOW_SYNC_US (`inject=fdatasync:delay_exit`); with seccomp-bpf
strace stops the process at fdatasync alone, so no other system call pays for the
tracing. The one-writer loop's p50 is printed: it is the disk's fdatasync p50 plus
a write. Without strace the figure is not measured (and says so).

`python -m quotaledger.tools.bench_serve_slowdisk PATH LINE SECONDS` is the one-writer
loop's process (an internal entry point, run only by the bench): it prints its
phase as JSON.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from quotaledger.tools import bench_serve_clients as clients_
from quotaledger.tools import bench_serve_systems as systems
from quotaledger.tools.bench_serve_clients import Phase

SLOW_SYNC_US = 1000
"""What strace adds to each fdatasync: SPEC §9's slow disk has a p50 of at least 1 ms."""
LOOP_TIMEOUT_S = 600.0


def strace_prefix() -> list[str] | None:
    """The command prefix that makes every fdatasync of a process SLOW_SYNC_US slower,
    or None where strace is not installed."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    return [strace, "--seccomp-bpf", "-f", "-qq", "-o", "/dev/null", "-e", "trace=fdatasync",
            "-e", f"inject=fdatasync:delay_exit={SLOW_SYNC_US}"]  # fmt: skip


@contextmanager
def slow_disk_runs(
    workdir: str, journal: str, line: bytes, clients: int, seconds: float
) -> Iterator[dict[str, Callable[[], Phase]] | None]:
    """The two runs to take turns while the block lasts: a server on `journal` under
    the slow disk with `clients` clients on `observe`, and the one-writer loop
    appending `line`; None without strace."""
    prefix = strace_prefix()
    if prefix is None:
        yield None
        return
    port = systems.free_port()
    command = [*prefix, *systems.serve_command(journal, port)]
    with systems.http_server(command, port, f"{workdir}/slow-serve.log") as server:
        make = clients_.http_steps(server.port, clients_.observe_request)
        raw = [sys.executable, "-m", __name__, f"{workdir}/slow-raw.jsonl", line.decode()]
        loop = [*prefix, *raw, str(seconds)]
        yield {
            # The server process is strace's child: its CPU is not read here.
            "server_observe": lambda: clients_.run_clients(make, clients, seconds, None),
            "one_writer_loop": lambda: _loop_phase(loop),
        }


def _loop_phase(command: list[str]) -> Phase:
    done = subprocess.run(command, capture_output=True, timeout=LOOP_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the one-writer loop failed: {done.stderr[-500:]!r}")
    found = json.loads(done.stdout)
    return Phase(found["counts"], found["seconds"], array("d", found["latencies_s"]), None)


def main(argv: list[str]) -> int:
    path, line, seconds = argv
    phase = clients_.run_clients(clients_.raw_steps(path, line.encode()), 1, float(seconds), None)
    json.dump(
        {"counts": phase.counts, "seconds": phase.seconds, "latencies_s": list(phase.latencies_s)},
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
