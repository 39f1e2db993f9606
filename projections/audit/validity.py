"""Which results quota touched (SPEC §13.2): one row per run of a goal, and its verdict.

`Validity` is fed a goal's records in journal order and keeps, per run that a
capacity event names, what the verdict needs: when it was first queued and admitted,
when it stopped holding its admission (its last release, or its lease's end if that
came first), the tokens observed with it and the 429s that named it while it was
active. `rows` adds the host lane of the same name (SPEC §4) from the folded host
state and gives each run its verdict, the first that applies in `VERDICTS`' order.
"""

from dataclasses import dataclass, field
from typing import Any

from quotaledger.journal import Record
from quotaledger.journal.clock import US_PER_S, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections.hosts.fold import GoalHosts

VERDICTS: tuple[str, ...] = ("never_admitted", "quota_failed", "continued", "throttled", "clean")
"""Every verdict, in SPEC §13.2's order of precedence: a run gets the first that applies."""

QUEUED = "capacity.queued"
"""The queue's event (SPEC §12.2): `{request, reasons, figures, ttl_s}`. Read by its
kind, so that the rows need no change when the queue's payload type is registered."""

QUOTA_EXHAUSTED = "quota_exhausted"


@dataclass
class RunHistory:
    """What the capacity events of a goal say about one of its runs (times in µs)."""

    run: str
    first_seq: int
    first_at_us: int
    case: str | None = None
    arm: str | None = None
    queued_at_us: int | None = None
    admitted_at_us: int | None = None
    released_at_us: int | None = None
    active: bool = False
    lease_s: int | None = None
    lease_until_us: int | None = None
    tokens: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    """uncached_input, cached_input, cache_write_input, output: raw, every observation."""
    rejections: int = 0

    def active_at(self, at_us: int) -> bool:
        """Admitted, not released, and its lease (as observations renewed it) not ended."""
        return self.active and (self.lease_until_us is None or self.lease_until_us > at_us)

    def settle(self, at_us: int) -> None:
        """A lease that ended by `at_us` ended the admission at its end."""
        if self.active and self.lease_until_us is not None and self.lease_until_us <= at_us:
            self.active = False
            self.released_at_us = self.lease_until_us


@dataclass(frozen=True)
class HostSummary:
    """The lane of a run's name (SPEC §4): counts and the last attempt."""

    lane: str
    attempts: int
    last_outcome: str | None
    last_failure: str | None
    quota_failures: int
    continued: int
    quota_continued: bool
    """A quota failure of the lane was continued (on its original session, as `host
    continue` requires)."""


@dataclass(frozen=True)
class ValidityRow:
    history: RunHistory
    host: HostSummary | None
    verdict: str


class Validity:
    """A goal's runs from its capacity events, fed in journal order."""

    def __init__(self, goal: str) -> None:
        self.goal = goal
        self.runs: dict[str, RunHistory] = {}

    def feed(self, record: Record, payload: Any) -> None:
        if record.goal != self.goal or not record.kind.startswith("capacity."):
            return
        run = _run_named(record.kind, payload)
        if run is None:
            return
        at_us = parse_at(record.at)
        history = self.runs.get(run)
        if history is None:
            history = self.runs[run] = RunHistory(run, record.seq, at_us)
        history.settle(at_us)
        request = getattr(payload, "request", None)
        if request is not None and history.case is None and history.arm is None:
            history.case, history.arm = request.case, request.arm
        _apply(history, record.kind, payload, at_us)

    def rows(
        self,
        hosts: GoalHosts | None,
        now_us: int,
        since_us: int | None = None,
        until_us: int | None = None,
    ) -> list[ValidityRow]:
        """The runs whose first event falls in `[since_us, until_us]`, in the order of
        that event, each with its lane and verdict as of `now_us`."""
        rows = []
        for history in sorted(self.runs.values(), key=lambda h: h.first_seq):
            if since_us is not None and history.first_at_us < since_us:
                continue
            if until_us is not None and history.first_at_us > until_us:
                continue
            history.settle(now_us)
            host = host_summary(hosts, history.run)
            rows.append(ValidityRow(history, host, verdict_of(history, host)))
        return rows


def _run_named(kind: str, payload: Any) -> str | None:
    """The run a capacity event names, if any (a configure names none)."""
    if kind in (cap.ADMITTED, cap.REFUSED, QUEUED):
        run: str | None = payload.request.run
        return run
    if kind in (cap.OBSERVED, cap.REJECTED, cap.RELEASED):
        return payload.run  # type: ignore[no-any-return]
    return None


def _apply(history: RunHistory, kind: str, payload: Any, at_us: int) -> None:
    if kind == cap.ADMITTED:
        if history.admitted_at_us is None:
            history.admitted_at_us = at_us
        lease_s = payload.request.lease_s
        history.active, history.released_at_us = True, None
        history.lease_s = lease_s
        history.lease_until_us = None if lease_s is None else at_us + lease_s * US_PER_S
    elif kind == QUEUED:
        if history.queued_at_us is None:
            history.queued_at_us = at_us
    elif kind == cap.OBSERVED:
        tokens = history.tokens
        tokens[0] += payload.uncached_input
        tokens[1] += payload.cached_input
        tokens[2] += payload.cache_write_input
        tokens[3] += payload.output
        # An observation of an active leased run renews its lease (as the fold does).
        if history.active_at(at_us) and history.lease_s is not None:
            assert history.lease_until_us is not None
            renewed_us = at_us + history.lease_s * US_PER_S
            history.lease_until_us = max(history.lease_until_us, renewed_us)
    elif kind == cap.REJECTED:
        if history.active_at(at_us):
            history.rejections += 1
    elif kind == cap.RELEASED and history.active:
        history.active, history.released_at_us = False, at_us


def host_summary(hosts: GoalHosts | None, lane_name: str) -> HostSummary | None:
    """The lane named as the run, if the goal has one."""
    lane = None if hosts is None else hosts.lanes.get(lane_name)
    if hosts is None or lane is None:
        return None
    attempts = [hosts.attempts[a] for a in lane.attempts if a in hosts.attempts]
    last = attempts[-1] if attempts else None
    quota_returns = {
        a.returned_hash for a in attempts if a.returned and a.failure_code == QUOTA_EXHAUSTED
    }
    continuations = [p for p in lane.phases if p.bound is not None]
    return HostSummary(
        lane=lane_name,
        attempts=len(attempts),
        last_outcome=None if last is None else last.outcome,
        last_failure=None if last is None else last.failure_code,
        quota_failures=len(quota_returns),
        continued=len(continuations),
        quota_continued=any(p.bound in quota_returns for p in continuations),
    )


def verdict_of(history: RunHistory, host: HostSummary | None) -> str:
    """The first verdict of SPEC §13.2 that applies."""
    if history.admitted_at_us is None:
        return "never_admitted"
    if host is not None and host.last_failure == QUOTA_EXHAUSTED:
        return "quota_failed"
    if host is not None and host.quota_continued:
        return "continued"
    if history.rejections:
        return "throttled"
    return "clean"
