"""`bench --serve`'s queue figure (SPEC §9, §12.2): N clients wait in one queue through a
real `quotaledger serve`, each holding `POST /v1/admit` with `"wait_s"`; how late each
is answered after the `estimated_start_at` it was told (p99 within 50 ms).

The goal has N case slots, held by N runs admitted SPACING_S apart on one lease
length, so they end SPACING_S apart; the N waiters queue behind them in order, each
told it starts when its slot's lease ends (the entries ahead take the slots that
end before). Every estimate stands on a lease alone, not on the admissions ahead,
so a late answer is the server's lateness, not an earlier waiter's carried on.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import threading
import time
from typing import Any

from quotaledger.journal.clock import US_PER_S, parse_at
from quotaledger.tools import bench_serve_systems as systems

SPACING_S = 0.2
"""How far apart the slots free (and the waiters are due)."""
LEAD_S = 2
"""The first slot frees this long (at least) after every waiter has queued."""
WAIT_S = 60
ANSWERED_WITHIN_MS = 50.0
"""SPEC §9: a waiter is answered within this of its estimate (p99)."""


class Client:
    """One keep-alive connection to the server, posting JSON."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S + 30)

    def post(self, command: str, **body: Any) -> dict[str, Any]:
        self.connection.request(
            "POST", f"/v1/{command}", json.dumps(body), {"Content-Type": "application/json"}
        )
        answer: dict[str, Any] = json.loads(self.connection.getresponse().read())
        return answer

    def close(self) -> None:
        self.connection.close()


def measure_queue_waits(workdir: str, clients: int) -> dict[str, Any]:
    """Run the N waiters once; how late each was answered (ms after its estimate)."""
    port = systems.free_port()
    journal = os.path.join(workdir, "queue.jsonl")
    command = systems.serve_command(journal, port)
    with systems.http_server(command, port, os.path.join(workdir, "queue.log")):
        setup = Client(port)
        try:
            estimates_us = _queue_behind_leases(setup, clients)
        finally:
            setup.close()
        late_ms = _wait_all(port, estimates_us)
    ordered = sorted(late_ms)

    def ms(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {
        "clients": clients,
        "answered": len(ordered),
        "p50_ms": ms(0.5),
        "p99_ms": ms(0.99),
        "max_ms": round(ordered[-1], 3),
        "earliest_ms": round(ordered[0], 3),
    }


def _queue_behind_leases(client: Client, clients: int) -> list[int]:
    """The goal, its N slots held by leases ending SPACING_S apart, and the N waiters
    queued behind them; each waiter's estimate (µs)."""
    ok = client.post("configure", goal="bench_queue", max_active_cases=clients)
    assert ok["ok"], ok
    lease_s = math.ceil(clients * SPACING_S) + LEAD_S
    for i in range(clients):
        held = client.post(
            "admit", goal="bench_queue", run=f"holder{i}", arm="baseline", lease_s=lease_s
        )
        assert held["admitted"], held
        time.sleep(SPACING_S)
    estimates_us = []
    for i in range(clients):
        queued = client.post(
            "admit", goal="bench_queue", run=f"waiter{i}", arm="baseline", lease_s=WAIT_S,
            queue=True, queue_ttl_s=WAIT_S * 2,
        )  # fmt: skip
        assert queued.get("queued") is True and queued["estimated_start_at"], queued
        estimates_us.append(parse_at(queued["estimated_start_at"]))
    return estimates_us


def _wait_all(port: int, estimates_us: list[int]) -> list[float]:
    """Every waiter holds its admit at once (a thread each); how late each answer came."""
    late_ms: list[float | None] = [None] * len(estimates_us)
    start = threading.Barrier(len(estimates_us))

    def wait(i: int) -> None:
        client = Client(port)
        try:
            start.wait()
            answer = client.post(
                "admit", goal="bench_queue", run=f"waiter{i}", arm="baseline", lease_s=WAIT_S,
                queue=True, queue_ttl_s=WAIT_S * 2, wait_s=WAIT_S,
            )  # fmt: skip
            answered_us = time.time() * US_PER_S
            if answer.get("admitted") is True:
                late_ms[i] = (answered_us - estimates_us[i]) / 1000
        finally:
            client.close()

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(estimates_us))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    missing = [i for i, late in enumerate(late_ms) if late is None]
    if missing:
        raise RuntimeError(f"waiters {missing} were not admitted within {WAIT_S} s")
    return [late for late in late_ms if late is not None]
