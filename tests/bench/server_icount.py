"""The server's instructions per request, by callgrind (load-independent).

Not part of the test suite; run it by hand:

    python tests/bench/server_icount.py [--clients N] [--small S] [--big B] [--keep DIR] \
        SYSTEM...

SYSTEM is one of `bare` (the bare ASGI app, `tools.bench_bare_asgi`), `skeleton`
(`tools.bench_skeleton`), `observe` or `admit_release` (a real `quotaledger serve` on a
journal whose goal has a full window, as `bench --serve` has it).

For each system the server process runs under `PYTHONHASHSEED=0 valgrind
--tool=callgrind` twice, once answering S and once B requests per client (default 100
and 600), from N keep-alive clients outside valgrind (default 1; with more, they send
at once, so the committer's groups hold several requests), each with the request bytes
and raw response reader of `bench --serve` (`tools.bench_serve_clients`). Printed: the
difference of the two runs' instruction counts over the difference of their requests,
i.e. the instructions one request costs the server, startup and shutdown cancelled
out. With --keep DIR the callgrind files stay there for `callgrind_annotate`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile

from quotaledger.api import Ledger
from quotaledger.tools import bench_serve_clients as clients_
from quotaledger.tools import bench_serve_systems as systems
from quotaledger.tools.bench import full_window

STARTUP_S = 600.0
"""A server under valgrind takes a while to import and fold."""


def server_command(system: str, workdir: str, port: int) -> list[str]:
    if system == "bare":
        return systems.bare_asgi_command(port)
    if system == "skeleton":
        return systems.skeleton_command(f"{workdir}/bare.jsonl", port)
    journal = f"{workdir}/serve.jsonl"
    with Ledger.open(journal, checkpoint_every=10**12) as ledger:
        full_window(ledger)
        # A server under valgrind takes minutes: its admits would find the window's
        # last observation stale, where `bench --serve`'s find it fresh.
        ledger.configure(goal="bench", max_observation_age_s=86400)
    return systems.serve_command(journal, port)


def requests_of(system: str) -> clients_.Callable[[int, int], bytes]:
    if system == "admit_release":
        return clients_.admit_release_request
    return clients_.observe_request


def _client(make: clients_.MakeStep, index: int, count: int, barrier: object) -> None:
    step = make(index)
    barrier.wait()  # type: ignore[attr-defined]
    for _ in range(count):
        step()


def drive(system: str, port: int, clients: int, per_client: int) -> None:
    """`clients` processes sending `per_client` requests each, all at once."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(clients)
    make = clients_.http_steps(port, requests_of(system))
    procs = [
        context.Process(target=_client, args=(make, i, per_client, barrier)) for i in range(clients)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a client failed ({proc.exitcode})")


def instructions(system: str, clients: int, per_client: int, keep: str | None) -> int:
    """The server process's instruction count over startup, the requests, and exit."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as workdir:
        port = systems.free_port()
        out = f"{keep or workdir}/callgrind.{system}.{clients}x{per_client}"
        command = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            *server_command(system, workdir, port),
        ]  # fmt: skip
        env = dict(os.environ, PYTHONHASHSEED="0")
        log_path = f"{workdir}/server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=log, env=env)
        try:
            systems.wait_healthy(proc, port, log_path, STARTUP_S)
            drive(system, port, clients, per_client)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(STARTUP_S)
        with open(log_path, encoding="utf-8", errors="replace") as log:
            found = re.search(r"Collected : (\d+)", log.read())
        if found is None:
            raise RuntimeError(f"no count in {log_path}")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "systems", nargs="+", choices=("bare", "skeleton", "observe", "admit_release")
    )
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--big", type=int, default=600)
    parser.add_argument("--keep")
    args = parser.parse_args()
    for system in args.systems:
        small = instructions(system, args.clients, args.small, args.keep)
        big = instructions(system, args.clients, args.big, args.keep)
        per = (big - small) / ((args.big - args.small) * args.clients)
        print(f"{system} at {args.clients} clients: {per / 1000:.1f}k instructions per request")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
