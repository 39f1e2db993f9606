"""The server's own Prometheus families (SPEC §11), beside `metrics`' exposition.

The Prometheus client library keeps and renders them; a private registry holds only
these four, so the process's default collectors (gc, platform) stay out of /metrics.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
COMMIT_SECONDS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Telemetry:
    def __init__(self, waiting: Callable[[], int]) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "quotaledger_http_requests",
            "HTTP requests answered, by command (or path) and status.",
            ("command", "status"),
            registry=registry,
        )
        self._batch = Histogram(
            "quotaledger_commit_batch_size",
            "Writer requests committed together by one write and fdatasync (or COMMIT).",
            buckets=BATCH_SIZES,
            registry=registry,
        )
        self._seconds = Histogram(
            "quotaledger_commit_seconds",
            "Time of one group commit: lock, decisions, write and fdatasync (or COMMIT).",
            buckets=COMMIT_SECONDS,
            registry=registry,
        )
        gauge = Gauge(
            "quotaledger_requests_waiting",
            "Requests queued for the committer.",
            registry=registry,
        )
        gauge.set_function(lambda: float(waiting()))
        self._counters: dict[tuple[str, int], Counter] = {}

    def request(self, command: str, status: int) -> None:
        key = (command, status)
        counter = self._counters.get(key)
        if counter is None:
            if len(self._counters) > 1000:  # paths a scanner made up: one series for all
                key = ("other", status)
            counter = self._counters[key] = self._requests.labels(key[0], str(status))
        counter.inc()

    def commit(self, size: int, seconds: float) -> None:
        self._batch.observe(size)
        self._seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
