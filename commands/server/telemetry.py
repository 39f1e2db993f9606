"""The server's own Prometheus families (SPEC §11), beside `metrics`' exposition.

The Prometheus client library renders them; a private registry holds only these
four, so the process's default collectors (gc, platform) stay out of /metrics. The
hot ones count in plain Python, each on the one thread that adds to it, and the
library renders them when scraped: the requests counter (every answer adds to it, on
the event loop's thread: `RequestCounts`) and the commit histograms (every group adds
to both, on the committer's thread: `CommitHistograms`), not through the library's
locked counters, whose observe is a dozen Python calls a group.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

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


class Counts:
    """One histogram's counts: per bucket (not cumulative; the last is +Inf's), the
    sum, and when it was made (what the library shows as `_created`)."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(bound) for bound in bounds)
        self.les = [floatToGoString(b) for b in (*self.bounds, float("inf"))]  # type: ignore[no-untyped-call]
        """Each bucket's `le` label, as the library writes it."""
        self.buckets = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, value: float) -> None:
        self.buckets[bisect_left(self.bounds, value)] += 1  # `le`: value <= bound
        self.sum += value

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        """As the library's `Histogram` renders: cumulative buckets, count, sum, created."""
        family = HistogramMetricFamily(name, documentation)
        cumulative, buckets = 0, []
        for le, count in zip(self.les, list(self.buckets), strict=True):
            cumulative += count
            buckets.append((le, float(cumulative)))
        family.add_metric([], buckets, self.sum)
        family.add_sample(f"{name}_created", {}, self.created)
        return family


class CommitHistograms(Collector):
    """`quotaledger_commit_batch_size` and `quotaledger_commit_seconds`, observed by
    the committer's thread alone (so no lock) and rendered when scraped. A scrape
    during a commit may see one histogram a group ahead of the other, as the
    library's per-bucket locks allow too."""

    def __init__(self) -> None:
        self.batch = Counts(BATCH_SIZES)
        self.seconds = Counts(COMMIT_SECONDS)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        yield self.batch.family(
            "quotaledger_commit_batch_size",
            "Writer requests committed together by one write and fdatasync (or COMMIT).",
        )
        yield self.seconds.family(
            "quotaledger_commit_seconds",
            "Time of one group commit: lock, decisions, write and fdatasync (or COMMIT).",
        )


class Telemetry:
    def __init__(self, waiting: Callable[[], int], routes: frozenset[str]) -> None:
        self.routes = routes
        """The labels a request may be counted under: the served routes' names."""
        self.registry = registry = CollectorRegistry(auto_describe=True)
        self._requests = RequestCounts()
        registry.register(self._requests)
        self._commits = CommitHistograms()
        registry.register(self._commits)
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
        self._commits.batch.observe(size)
        self._commits.seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
