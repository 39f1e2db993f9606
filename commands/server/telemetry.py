"""The server's own Prometheus families (SPEC §11), on a registry of its own so that
only they are added to the `metrics` exposition."""

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

# `_created` samples are one more gauge per family a scrape never needs.
disable_created_metrics()  # type: ignore[no-untyped-call]

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Telemetry:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "quotaledger_http_requests",
            "HTTP requests answered, by command and status",
            ("command", "status"),
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "quotaledger_commit_batch_size",
            "Requests decided in one commit",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.commit_seconds = Histogram(
            "quotaledger_commit_seconds",
            "Wall time of one commit (decide, write, sync)",
            buckets=COMMIT_BUCKETS,
            registry=self.registry,
        )
        self.waiting = Gauge(
            "quotaledger_requests_waiting",
            "Requests waiting for the next commit",
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
