"""The server's own Prometheus families (SPEC §11), beside `metrics`' exposition.

The Prometheus client library keeps and renders them; a private registry holds only
these four, so the process's default collectors (gc, platform) stay out of /metrics.
The requests counter is the hot one (every answer adds to it, on the event loop's
thread): it counts in a plain dict that the library renders when scraped
(`RequestCounts`), not through a locked library counter per request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
COMMIT_SECONDS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
OTHER = "other"
"""The label of every path the server does not serve: a URL is the client's text, so
it never becomes a label (a read-only token holder would read it; a scanner would
grow a series per made-up path)."""


class RequestCounts(Collector):
    """`quotaledger_http_requests_total{command,status}`, counted by the event loop's
    thread alone (so no lock) and rendered when scraped."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = {}

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "quotaledger_http_requests",
            "HTTP requests answered, by command (or path) and status.",
            labels=("command", "status"),
        )
        for (command, status), count in list(self.counts.items()):
            family.add_metric((command, str(status)), count)
        yield family


class Telemetry:
    def __init__(self, waiting: Callable[[], int], routes: frozenset[str]) -> None:
        self.routes = routes
        """The labels a request may be counted under: the served routes' names."""
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self._requests = RequestCounts()
        registry.register(self._requests)
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

    def request(self, command: str, status: int) -> None:
        """Count an answer; `command` a known route's label (`ROUTES`) or any text."""
        counts = self._requests.counts
        key = (command if command in self.routes else OTHER, status)
        counts[key] = counts.get(key, 0) + 1

    def commit(self, size: int, seconds: float) -> None:
        self._batch.observe(size)
        self._seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
