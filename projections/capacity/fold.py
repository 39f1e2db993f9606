"""A goal's capacity state and the fold of the capacity events into it."""

from collections import OrderedDict
from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import US_PER_S, parse_at
from quotaledger.projections.capacity.config import ARM_GROUP, CaseConfig, Group, TokenConfig
from quotaledger.projections.capacity.events import (
    OBSERVED,
    REJECTED,
    AdmitRequest,
    CapacityAdmitted,
    CapacityConfigured,
    CapacityObserved,
    CapacityRefused,
    CapacityRejected,
    CapacityReleased,
    ProviderReport,
    Receipt,
)
from quotaledger.projections.capacity.requests import (
    REQUEST_ID_WINDOW_US,
    RequestIndex,
    SeenRequest,
    forget_requests,
    note_request,
)
from quotaledger.projections.types import StateStruct

VERSION = "5"
"""The shape of the checkpointed state (4: the goals' request-id index; 5: whether a
capacity.configured event names the goal)."""

WINDOW_US = 60 * US_PER_S
"""The usage window: a sample counts at t while t - 60 s < at <= t."""

# -- state -----------------------------------------------------------------------------

Totals = tuple[int, int, int, int, int, int, int]
"""Running totals over a goal's observations: uncached, cached, cache-write and output
tokens, requests, and how many samples were unmetered and estimated."""
ZERO_TOTALS: Totals = (0, 0, 0, 0, 0, 0, 0)
TOTALS_REBASE_AT = 2**62
"""Totals are rebased before they could leave MessagePack's 64-bit integers."""
COMPACT_MIN = 64
"""Samples that left the window are dropped in bulk, once at least this many (and at
least half the list) have: amortised O(1) per event, never a shift per event."""
PROVIDER_REPORT_MAX_AGE_US = 60 * US_PER_S
"""A provider report stays live at most this long (and never past its reset)."""


class Sample(StateStruct, gc=False, kw_only=False):
    """One `capacity.observed` event, as the window needs it.

    `totals` are the goal's running totals up to and including this sample: the usage
    of consecutive samples is the difference of two totals, so a window's usage costs
    two bisections however many samples it holds (SPEC §9).

    Untracked by the cycle collector (it holds only ints and strings, so it can never
    be part of a cycle): a busy goal keeps a minute of samples, often hundreds of
    thousands, and every full collection would otherwise walk them all. Positional
    fields (not kw_only): the fold builds one per observation, positionally.
    """

    at_us: int
    uncached_input: int
    cached_input: int
    output: int
    coverage: str
    run: str | None = None
    seq: int = -1
    cache_write_input: int = 0
    requests: int = 0
    """As counted for rpm: given, else one for a sample with tokens, none for a heartbeat."""
    totals: Totals = ZERO_TOTALS


class ProviderState(StateStruct, gc=False):
    """The latest provider report of one dimension (SPEC §3.6)."""

    at_us: int
    seq: int
    limit: int | None
    remaining: int | None
    reset_at_us: int | None
    totals: Totals
    """The goal's running totals when the report was folded: usage observed after it is
    the difference."""

    def live_at(self, at_us: int) -> bool:
        if at_us - self.at_us > PROVIDER_REPORT_MAX_AGE_US:
            return False
        return self.reset_at_us is None or at_us < self.reset_at_us

    def ends_us(self) -> int:
        """The first time the report is no longer live."""
        aged_us = self.at_us + PROVIDER_REPORT_MAX_AGE_US + 1
        return aged_us if self.reset_at_us is None else min(aged_us, self.reset_at_us)


class ActiveRun(StateStruct):
    """An admitted, unreleased run (it stops being active when its lease ends)."""

    request: AdmitRequest
    receipt: Receipt
    seq: int
    hash: str
    admitted_at_us: int
    lease_until_us: int | None = None

    def active_at(self, at_us: int) -> bool:
        return self.lease_until_us is None or self.lease_until_us > at_us

    @property
    def group(self) -> Group | None:
        arm = self.request.arm
        return None if arm is None else ARM_GROUP[arm]


class GoalCapacity(StateStruct):
    """Everything the fold knows about one goal."""

    cases: CaseConfig | None = None
    tokens: TokenConfig | None = None
    explicit: list[str] = msgspec.field(default_factory=list)
    """The latest configure's `explicit` (SPEC §3.5)."""
    configured: bool = False
    """A `capacity.configured` event names the goal: the capacity writers refuse
    `unknown_goal` until one does (SPEC §8), whatever its gates."""
    last_at_us: int = 0
    samples: list[Sample] = msgspec.field(default_factory=list)
    """Time-ordered (per-goal `at` never decreases in a journal); those before `head`
    have left the window and wait to be dropped in bulk."""
    head: int = 0
    base_totals: Totals = ZERO_TOTALS
    """The running totals before `samples[0]`."""
    totals: Totals = ZERO_TOTALS
    """The running totals over every observation folded."""
    last_metered_at_us: int | None = None
    """The latest measured or estimated observation, however old (for staleness)."""
    provider: dict[str, ProviderState] = msgspec.field(default_factory=dict)
    """The latest provider report of each dimension reported."""
    runs: dict[str, ActiveRun] = msgspec.field(default_factory=dict)
    lease_check_us: int | None = None
    """No lease ends before this time (a lower bound: renewals only push ends later), so
    the fold looks for expired runs only once the goal's time reaches it."""
    cooldown_until_us: int | None = None
    streak: int = 0
    admissions_total: int = 0
    refusal_events_total: int = 0
    refusals_total: dict[str, int] = msgspec.field(default_factory=dict)
    """Refusals by reason (a refusal with two reasons counts once under each)."""
    rejections_total: int = 0
    releases_total: int = 0
    request_ids: RequestIndex = msgspec.field(default_factory=OrderedDict)
    """The request ids of the last 900 s of the goal's log time, oldest first (SPEC §11;
    `requests`)."""

    def __post_init__(self) -> None:
        # A checkpoint decodes the index as a dict: it must drop its oldest entry in O(1).
        if type(self.request_ids) is not OrderedDict:
            self.request_ids = OrderedDict(self.request_ids)


class CapacityState(StateStruct):
    goals: dict[str, GoalCapacity] = msgspec.field(default_factory=dict)


def goal_of(state: CapacityState, goal: str) -> GoalCapacity:
    """The goal's state, or a fresh empty one (not added to `state`)."""
    found = state.goals.get(goal)
    return found if found is not None else GoalCapacity()


# -- the fold --------------------------------------------------------------------------


def apply(state: CapacityState, record: Record, payload: Any) -> None:  # noqa: C901, PLR0912, PLR0915
    """Fold one event of this domain into the state.

    Observations (most events) and the window's trim are inline, and ruff's complexity
    limits are waived here alone: this runs once per record of every fold, where a
    call per step costs measurably (docs/performance.md)."""
    if record.goal is None:  # capacity events always name a goal; nothing to fold
        return
    goal = state.goals.get(record.goal)
    if goal is None:
        goal = state.goals[record.goal] = GoalCapacity()
    at_us = parse_at(record.at)
    if isinstance(payload, CapacityObserved):  # most events: folded inline
        uncached, cached, output = payload.uncached_input, payload.cached_input, payload.output
        cache_write = payload.cache_write_input
        requests = payload.requests
        if requests is None:  # SPEC §3.6: one request when it carries tokens
            requests = 1 if uncached or cached or output or cache_write else 0
        coverage = payload.coverage
        t = goal.totals
        totals = goal.totals = (
            t[0] + uncached,
            t[1] + cached,
            t[2] + cache_write,
            t[3] + output,
            t[4] + requests,
            t[5] + (coverage == "unmetered"),
            t[6] + (coverage == "estimated"),
        )
        # Positional, in Sample's field order: keywords cost a name match per field.
        goal.samples.append(
            Sample(
                at_us, uncached, cached, output, coverage, payload.run, record.seq,
                cache_write, requests, totals,
            )
        )  # fmt: skip
        if coverage != "unmetered":
            goal.last_metered_at_us = at_us
        if payload.run is not None and goal.runs:
            _renew_lease(goal, payload.run, at_us)
        if payload.provider is not None:
            _note_provider(goal, payload.provider, record.seq, at_us)
        if payload.request_id is not None:
            seen = SeenRequest(at_us, record.seq, record.hash, OBSERVED, bytes(record.data))
            note_request(goal.request_ids, payload.request_id, seen)
    elif isinstance(payload, CapacityAdmitted):
        _apply_admitted(goal, payload, record, at_us)
    elif isinstance(payload, CapacityRefused):
        goal.refusal_events_total += 1
        for reason in payload.reasons:
            goal.refusals_total[reason] = goal.refusals_total.get(reason, 0) + 1
    elif isinstance(payload, CapacityRejected):
        until_us = parse_at(payload.cooldown_until)
        previous = goal.cooldown_until_us
        goal.cooldown_until_us = until_us if previous is None else max(previous, until_us)
        goal.streak = payload.streak
        goal.rejections_total += 1
        if payload.provider is not None:
            _note_provider(goal, payload.provider, record.seq, at_us)
        if payload.request_id is not None:
            seen = SeenRequest(at_us, record.seq, record.hash, REJECTED, bytes(record.data))
            note_request(goal.request_ids, payload.request_id, seen)
    elif isinstance(payload, CapacityReleased):
        if goal.runs.pop(payload.run, None) is not None:
            goal.releases_total += 1
    elif isinstance(payload, CapacityConfigured):
        goal.cases, goal.tokens = payload.cases, payload.tokens
        goal.explicit = list(payload.explicit)
        goal.configured = True
    if at_us > goal.last_at_us:
        goal.last_at_us = at_us
    # Forget what no question "as of t >= the goal's latest event" can need; the checks
    # are inline because they run for every event and rarely find anything.
    last_us = goal.last_at_us
    cutoff_us = last_us - WINDOW_US
    samples = goal.samples
    head = goal.head
    if head < len(samples) and samples[head].at_us <= cutoff_us:
        # Step, not bisect: on a busy goal each event moves the window by a sample or
        # two, and every sample passes `head` once (a bisection cost a dozen key calls
        # per event); a gap longer than the window drops them all just the same.
        count = len(samples)
        head += 1
        while head < count and samples[head].at_us <= cutoff_us:
            head += 1
        goal.head = head
        if head >= COMPACT_MIN and head * 2 >= count:
            _compact(goal)
    if goal.lease_check_us is not None and goal.lease_check_us <= last_us:
        _expire_leases(goal)
    request_ids = goal.request_ids
    if request_ids and next(iter(request_ids.values())).at_us < last_us - REQUEST_ID_WINDOW_US:
        forget_requests(request_ids, last_us)


def _compact(goal: GoalCapacity) -> None:
    """Drop the samples that left the window (and rebase totals grown too large)."""
    head = goal.head
    goal.base_totals = goal.samples[head - 1].totals
    del goal.samples[:head]
    goal.head = 0
    if max(goal.totals) >= TOTALS_REBASE_AT:
        base = goal.base_totals

        def rebased(totals: Totals) -> Totals:
            return tuple(a - b for a, b in zip(totals, base, strict=True))  # type: ignore[return-value]

        for sample in goal.samples:
            sample.totals = rebased(sample.totals)
        for report in goal.provider.values():
            report.totals = rebased(report.totals)
        goal.totals = rebased(goal.totals)
        goal.base_totals = ZERO_TOTALS


def _note_provider(goal: GoalCapacity, report: ProviderReport, seq: int, at_us: int) -> None:
    for dimension, limit in report.items():
        goal.provider[dimension] = ProviderState(
            at_us=at_us,
            seq=seq,
            limit=limit.limit,
            remaining=limit.remaining,
            reset_at_us=None if limit.reset_at is None else parse_at(limit.reset_at),
            totals=goal.totals,
        )


def _renew_lease(goal: GoalCapacity, run_id: str, at_us: int) -> None:
    """An observation of an active leased run extends its lease."""
    run = goal.runs.get(run_id)
    if run is not None and run.lease_until_us is not None and run.active_at(at_us):
        assert run.request.lease_s is not None
        renewed_us = at_us + run.request.lease_s * US_PER_S
        run.lease_until_us = max(run.lease_until_us, renewed_us)


def _apply_admitted(goal: GoalCapacity, p: CapacityAdmitted, record: Record, at_us: int) -> None:
    lease_s = p.request.lease_s
    goal.runs[p.request.run] = ActiveRun(
        request=p.request,
        receipt=p.receipt,
        seq=record.seq,
        hash=record.hash,
        admitted_at_us=at_us,
        lease_until_us=None if lease_s is None else at_us + lease_s * US_PER_S,
    )
    goal.admissions_total += 1
    if lease_s is not None:
        end_us = at_us + lease_s * US_PER_S
        check_us = goal.lease_check_us
        goal.lease_check_us = end_us if check_us is None else min(check_us, end_us)


def _expire_leases(goal: GoalCapacity) -> None:
    """The goal's time reached a lease's end: drop ended runs, find the next check time."""
    for run in [r for r, active in goal.runs.items() if not active.active_at(goal.last_at_us)]:
        del goal.runs[run]
    ends = [r.lease_until_us for r in goal.runs.values() if r.lease_until_us is not None]
    goal.lease_check_us = min(ends) if ends else None
