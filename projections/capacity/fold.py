"""A goal's capacity state and the fold of the capacity events into it."""

from collections import OrderedDict
from collections.abc import Sequence
from operator import add
from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import US_PER_S, parse_at
from quotaledger.projections.capacity.config import ARM_GROUP, CaseConfig, Group, TokenConfig
from quotaledger.projections.capacity.events import (
    OBSERVED,
    PRICE_FIELDS,
    REJECTED,
    AdmitRequest,
    CapacityAdmitted,
    CapacityConfigured,
    CapacityDequeued,
    CapacityObserved,
    CapacityQueued,
    CapacityRefused,
    CapacityRejected,
    CapacityReleased,
    Caps,
    PoolRef,
    PriceSet,
    ProviderReport,
    Receipt,
)
from quotaledger.projections.capacity.money import dollars_micro, micro_of
from quotaledger.projections.capacity.requests import (
    REQUEST_ID_WINDOW_US,
    RequestIndex,
    SeenRequest,
    forget_requests,
    note_request,
)
from quotaledger.projections.types import StateStruct

VERSION = "9"
"""The shape of the checkpointed state (4: the goals' request-id index; 5: whether a
capacity.configured event names the goal; 6: the day's per-second totals, runs'
observed totals, spend and prices; 7: the queue; 8: pools; 9: pools' spend)."""

WINDOW_US = 60 * US_PER_S
"""The usage window: a sample counts at t while t - 60 s < at <= t."""
DAY_S = 86_400
DAY_US = DAY_S * US_PER_S
"""The daily window (SPEC §12.3): an observation at second s (its time truncated to the
second) counts at t while s > t - 86,400 s."""
PRICES_KEY = ""
"""The prices are journal-level (`price.set` names no goal): kept under the goal key of
journal-level records, so a checkpoint holds them in that section."""

# -- state -----------------------------------------------------------------------------

Totals = tuple[int, int, int, int, int, int, int, int, int]
"""Running totals over a goal's observations: uncached, cached, cache-write and output
tokens, requests, how many samples were unmetered and estimated, the tokens of
observations without a price (no model, or one never priced) and the dollars of the
priced ones, in micro-dollars (SPEC §12.4)."""
ZERO_TOTALS: Totals = (0, 0, 0, 0, 0, 0, 0, 0, 0)
RunTotals = tuple[int, int, int, int, int, int]
"""What was observed with one active run since its admission (SPEC §12.3): uncached,
cached, cache-write and output tokens, requests, micro-dollars."""
ZERO_RUN_TOTALS: RunTotals = (0, 0, 0, 0, 0, 0)
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
    observed: RunTotals = ZERO_RUN_TOTALS
    """The observations with this run that follow its admission record (by seq): what
    its forecast totals are reduced by (SPEC §12.3, §12.4)."""

    def active_at(self, at_us: int) -> bool:
        return self.lease_until_us is None or self.lease_until_us > at_us

    @property
    def group(self) -> Group | None:
        arm = self.request.arm
        return None if arm is None else ARM_GROUP[arm]


class QueueEntry(StateStruct):
    """A `capacity.queued` entry still waiting (SPEC §12.2). It leaves when its run is
    admitted or dequeued, and stops waiting at `expires_us` (a pure function of time:
    the fold drops it once the goal's time reaches that, as it drops ended leases)."""

    request: AdmitRequest
    reasons: list[str]
    seq: int
    at_us: int
    expires_us: int

    def waiting_at(self, at_us: int) -> bool:
        return at_us < self.expires_us


class GoalCapacity(StateStruct):
    """Everything the fold knows about one goal."""

    cases: CaseConfig | None = None
    tokens: TokenConfig | None = None
    caps: Caps | None = None
    cap_totals: Totals = ZERO_TOTALS
    """The running totals when the caps were last configured: what was spent since
    `cap_since` is the caps' `counted` plus the totals since."""
    explicit: list[str] = msgspec.field(default_factory=list)
    """The latest configure's `explicit` (SPEC §3.5)."""
    pool: PoolRef | None = None
    """The pool the goal is a member of (SPEC §12.1)."""
    pool_base: Totals = ZERO_TOTALS
    """The running totals when the goal joined its pool: what it spent in the pool since
    is the difference (the pool's spend, SPEC §12.4)."""
    pool_spent: dict[str, Totals] = msgspec.field(default_factory=dict)
    """What the goal spent in each pool it left, while a member (raw sums): the pool's
    spend keeps it."""
    priority: int = 0
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
    day_seconds: list[int] = msgspec.field(default_factory=list)
    """The whole seconds of the last day with an observation, ascending (SPEC §12.3);
    those before `day_head` have left the day and wait to be dropped in bulk."""
    day_totals: list[Totals] = msgspec.field(default_factory=list)
    """The running totals at the end of each of `day_seconds`: a day's usage is the
    difference of two, whatever the number of observations in it."""
    day_head: int = 0
    day_base: Totals = ZERO_TOTALS
    """The running totals before `day_seconds[0]`."""
    provider: dict[str, ProviderState] = msgspec.field(default_factory=dict)
    """The latest provider report of each dimension reported."""
    runs: dict[str, ActiveRun] = msgspec.field(default_factory=dict)
    lease_check_us: int | None = None
    """No lease ends before this time (a lower bound: renewals only push ends later), so
    the fold looks for expired runs only once the goal's time reaches it."""
    cooldown_until_us: int | None = None
    streak: int = 0
    queue: dict[str, QueueEntry] = msgspec.field(default_factory=dict)
    """The goal's entries in its queue (SPEC §12.2), by run, in seq order."""
    queue_check_us: int | None = None
    """No entry expires before this time (as `lease_check_us`)."""
    queue_waits: list[int] = msgspec.field(default_factory=list)
    """How many promotions waited at most each bound of `QUEUE_WAIT_BUCKETS_S`, and
    (last) longer; with `queue_wait_sum_us`: the wait histogram (SPEC §12.2)."""
    queue_wait_sum_us: int = 0
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


class ModelPrice(StateStruct, gc=False):
    """One `price.set` of a model (SPEC §12.4)."""

    per_mtok_micro: tuple[int, int, int, int]
    """Micro-dollars per million tokens: input, cached input, cache write, output."""
    at_us: int
    seq: int


class PriceBook(StateStruct):
    """Every price ever set, by model, in journal order.

    The whole history, not only the latest: an observation is priced by the latest
    price of its model before it *by seq* (SPEC §12.4), and a fold that loads a goal
    from a checkpoint applies that goal's newer records after the journal-level ones
    that followed them (goalsources' `pending`), so "the latest folded" would be a
    later price. A model's prices are few; the lookup starts from the newest."""

    models: dict[str, list[ModelPrice]] = msgspec.field(default_factory=dict)

    def latest(self, model: str) -> ModelPrice | None:
        found = self.models.get(model)
        return found[-1] if found else None

    def in_force(self, model: str, seq: int) -> ModelPrice | None:
        """The model's price in force for the record at `seq`: the latest set before it."""
        found = self.models.get(model)
        if not found:
            return None
        for price in reversed(found):
            if price.seq < seq:
                return price
        return None


class CapacityState(StateStruct):
    goals: dict[str, GoalCapacity] = msgspec.field(default_factory=dict)
    prices: dict[str, PriceBook] = msgspec.field(default_factory=dict)
    """Under PRICES_KEY alone: a dict keyed by goal key, so that a checkpoint keeps it in
    the journal-level section and a command loads it as it loads a goal."""


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
    if record.goal is None:  # capacity events name a goal; prices are journal-level
        if isinstance(payload, PriceSet):
            _apply_price(state, payload, record)
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
        # Dollars at the model's price in force: the latest price.set folded before
        # this record (SPEC §12.4); without one the tokens count as unpriced.
        model = payload.model
        price = None
        if model is not None and (book := state.prices.get(PRICES_KEY)) is not None:
            price = book.in_force(model, record.seq)
        if price is None:
            unpriced, usd = uncached + cached + cache_write + output, 0
        else:
            unpriced = 0
            usd = dollars_micro(price.per_mtok_micro, uncached, cached, cache_write, output)
        t = goal.totals
        totals = goal.totals = (
            t[0] + uncached,
            t[1] + cached,
            t[2] + cache_write,
            t[3] + output,
            t[4] + requests,
            t[5] + (coverage == "unmetered"),
            t[6] + (coverage == "estimated"),
            t[7] + unpriced,
            t[8] + usd,
        )
        # Positional, in Sample's field order: keywords cost a name match per field.
        goal.samples.append(
            Sample(
                at_us, uncached, cached, output, coverage, payload.run, record.seq,
                cache_write, requests, totals,
            )
        )  # fmt: skip
        # The day's per-second totals: a second's entry is the running totals after
        # its last observation (SPEC §12.3: kept for every goal, tpd configured or not).
        second = at_us // US_PER_S
        day_seconds = goal.day_seconds
        if day_seconds and day_seconds[-1] == second:
            goal.day_totals[-1] = totals
        else:
            day_seconds.append(second)
            goal.day_totals.append(totals)
        if coverage != "unmetered":
            goal.last_metered_at_us = at_us
        if payload.run is not None and goal.runs:
            run = goal.runs.get(payload.run)
            if run is not None:
                o = run.observed
                run.observed = (
                    o[0] + uncached,
                    o[1] + cached,
                    o[2] + cache_write,
                    o[3] + output,
                    o[4] + requests,
                    o[5] + usd,
                )
                _renew_lease(run, at_us)
        if payload.provider is not None:
            _note_provider(goal, payload.provider, record.seq, at_us)
        if payload.request_id is not None:
            seen = SeenRequest(at_us, record.seq, record.hash, OBSERVED, bytes(record.data))
            note_request(goal.request_ids, payload.request_id, seen)
    elif isinstance(payload, CapacityAdmitted):
        _apply_admitted(goal, payload, record, at_us)
        if goal.queue:
            entry = goal.queue.pop(payload.request.run, None)
            if entry is not None and payload.queued is not None:
                _note_wait(goal, at_us - entry.at_us)
    elif isinstance(payload, CapacityQueued):
        _apply_queued(goal, payload, record, at_us)
    elif isinstance(payload, CapacityDequeued):
        goal.queue.pop(payload.run, None)
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
        goal.caps = payload.caps
        old_pool, new_pool = goal.pool, payload.pool
        old_name = None if old_pool is None else old_pool.name
        if old_name != (None if new_pool is None else new_pool.name):
            if old_name is not None:  # leaves: what it spent there stays the pool's
                stint = _difference(goal.totals, goal.pool_base)
                before = goal.pool_spent.get(old_name)
                goal.pool_spent[old_name] = stint if before is None else _sum(before, stint)
            goal.pool_base = goal.totals  # joins: its spending in the pool starts here
        goal.pool, goal.priority = new_pool, payload.priority
        goal.cap_totals = goal.totals
    previous_us = goal.last_at_us
    if at_us > previous_us:
        goal.last_at_us = at_us
    # Forget what no question "as of t >= the goal's latest event" can need; the checks
    # are inline because they run for every event and rarely find anything.
    last_us = goal.last_at_us
    # The window's, the day's and the request ids' trims depend on the goal's time
    # alone, and what an event adds is at its own time: after an event at the time the
    # goal's last one had (a batch's records share one), they would find nothing (the
    # invariant tests/capacity/test_fold_trims.py checks after every event).
    if at_us != previous_us:
        cutoff_us = last_us - WINDOW_US
        samples = goal.samples
        head = goal.head
        if head < len(samples) and samples[head].at_us <= cutoff_us:
            # Step, not bisect: on a busy goal each event moves the window by a sample
            # or two, and every sample passes `head` once (a bisection cost a dozen key
            # calls per event); a gap longer than the window drops them all just the same.
            count = len(samples)
            head += 1
            while head < count and samples[head].at_us <= cutoff_us:
                head += 1
            goal.head = head
            if head >= COMPACT_MIN and head * 2 >= count:
                _compact(goal)
        day_head = goal.day_head
        day_seconds = goal.day_seconds
        day_cutoff_us = last_us - DAY_US
        if day_head < len(day_seconds) and day_seconds[day_head] * US_PER_S <= day_cutoff_us:
            day_count = len(day_seconds)
            day_head += 1
            while day_head < day_count and day_seconds[day_head] * US_PER_S <= day_cutoff_us:
                day_head += 1
            goal.day_head = day_head
            if day_head >= COMPACT_MIN and day_head * 2 >= day_count:
                _compact_day(goal)
        request_ids = goal.request_ids
        if request_ids and next(iter(request_ids.values())).at_us < last_us - REQUEST_ID_WINDOW_US:
            forget_requests(request_ids, last_us)
    if goal.lease_check_us is not None and goal.lease_check_us <= last_us:
        _expire_leases(goal)
    if goal.queue_check_us is not None and goal.queue_check_us <= last_us:
        _expire_entries(goal)


Folded = tuple[Record, Any, bytes]
"""A record as the journal hands it to a fold: the record, its payload, its line."""


# A transaction's records share one time, and after an event at the goal's own time
# `apply`'s trims, lease and queue checks find nothing (the window, the day and the
# request ids depend on the goal's time alone; a renewal only moves a lease's end
# later; tests/capacity/test_fold_trims.py). So a run of observations of one goal at
# one time needs `apply` for its first only; the others add their sample and totals,
# the goal and its state looked up once. One with a provider report ends the run
# (`apply` folds it: its reset times may not parse), so nothing after the first
# raises: a record that does not fold is the first of its run.
def fold_observations(state: CapacityState, items: Sequence[Folded], start: int) -> int:
    """Fold the observation of a goal at `items[start]` and those right after it of the
    same goal at the same time, as `apply` would one by one (tests/capacity/
    test_fold_observations.py); returns the index of the first item not folded."""
    first, payload, _ = items[start]
    apply(state, first, payload)
    name, at, count = first.goal, first.at, len(items)
    goal, at_us = state.goals[name], parse_at(at)  # type: ignore[index]
    book, runs, totals = state.prices.get(PRICES_KEY), goal.runs, goal.totals
    add_sample, metered, index = goal.samples.append, False, start + 1
    while index < count:
        record, payload, _ = items[index]
        if (
            type(payload) is not CapacityObserved
            or record.at != at
            or record.goal != name
            or payload.provider is not None
        ):
            break
        uncached, cached, output = payload.uncached_input, payload.cached_input, payload.output
        cache_write, requests = payload.cache_write_input, payload.requests
        coverage, model = payload.coverage, payload.model
        if requests is None:  # SPEC §3.6: one request when it carries tokens
            requests = 1 if uncached or cached or output or cache_write else 0
        price = None if model is None or book is None else book.in_force(model, record.seq)
        if price is None:
            unpriced, usd = uncached + cached + cache_write + output, 0
        else:
            unpriced = 0
            usd = dollars_micro(price.per_mtok_micro, uncached, cached, cache_write, output)
        t = totals
        totals = (
            t[0] + uncached, t[1] + cached, t[2] + cache_write, t[3] + output, t[4] + requests,
            t[5] + (coverage == "unmetered"), t[6] + (coverage == "estimated"),
            t[7] + unpriced, t[8] + usd,
        )  # fmt: skip
        run = payload.run
        add_sample(
            Sample(
                at_us, uncached, cached, output, coverage, run, record.seq,
                cache_write, requests, totals,
            )
        )  # fmt: skip
        metered = metered or coverage != "unmetered"
        if run is not None and runs and (active := runs.get(run)) is not None:
            observed = (uncached, cached, cache_write, output, requests, usd)
            active.observed = tuple(map(add, active.observed, observed))
            _renew_lease(active, at_us)
        if payload.request_id is not None:
            seen = SeenRequest(at_us, record.seq, record.hash, OBSERVED, bytes(record.data))
            note_request(goal.request_ids, payload.request_id, seen)
        index += 1
    if index > start + 1:  # the first's second is the day's last: its totals move on
        goal.totals = goal.day_totals[-1] = totals
        if metered:
            goal.last_metered_at_us = at_us
    return index


def _difference(after: Totals, before: Totals) -> Totals:
    return tuple(a - b for a, b in zip(after, before, strict=True))  # type: ignore[return-value]


def _sum(a: Totals, b: Totals) -> Totals:
    return tuple(x + y for x, y in zip(a, b, strict=True))  # type: ignore[return-value]


def _compact(goal: GoalCapacity) -> None:
    """Drop the samples that left the window (and rebase totals grown too large)."""
    head = goal.head
    goal.base_totals = goal.samples[head - 1].totals
    del goal.samples[:head]
    goal.head = 0
    if max(goal.totals) >= TOTALS_REBASE_AT:
        _rebase(goal)


def _compact_day(goal: GoalCapacity) -> None:
    """Drop the seconds that left the day."""
    head = goal.day_head
    goal.day_base = goal.day_totals[head - 1]
    del goal.day_seconds[:head]
    del goal.day_totals[:head]
    goal.day_head = 0


def _rebase(goal: GoalCapacity) -> None:
    """Subtract the oldest running totals still needed from every running total kept,
    before they could leave MessagePack's 64-bit integers (differences are unchanged)."""
    oldest = (goal.base_totals, goal.day_base, goal.cap_totals, goal.pool_base)
    base = tuple(min(parts) for parts in zip(*oldest, strict=True))

    def rebased(totals: Totals) -> Totals:
        return tuple(a - b for a, b in zip(totals, base, strict=True))  # type: ignore[return-value]

    for sample in goal.samples:
        sample.totals = rebased(sample.totals)
    for report in goal.provider.values():
        report.totals = rebased(report.totals)
    goal.day_totals = [rebased(totals) for totals in goal.day_totals]
    goal.totals = rebased(goal.totals)
    goal.base_totals = rebased(goal.base_totals)
    goal.day_base = rebased(goal.day_base)
    goal.cap_totals = rebased(goal.cap_totals)
    goal.pool_base = rebased(goal.pool_base)


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


def _apply_price(state: CapacityState, payload: PriceSet, record: Record) -> None:
    book = state.prices.get(PRICES_KEY)
    if book is None:
        book = state.prices[PRICES_KEY] = PriceBook()
    micro = tuple(micro_of(getattr(payload, name)) or 0 for name in PRICE_FIELDS)
    price = ModelPrice(per_mtok_micro=micro, at_us=parse_at(record.at), seq=record.seq)  # type: ignore[arg-type]
    history = book.models.setdefault(payload.model, [])
    if not history or history[-1].seq < record.seq:  # a record folds once
        history.append(price)


def _renew_lease(run: ActiveRun, at_us: int) -> None:
    """An observation of an active leased run extends its lease."""
    if run.lease_until_us is not None and run.active_at(at_us):
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


QUEUE_WAIT_BUCKETS_S = (0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 21600, 86400)
"""The bounds of the queue wait histogram (`quotaledger_queue_wait_seconds`)."""


def _note_wait(goal: GoalCapacity, waited_us: int) -> None:
    if not goal.queue_waits:
        goal.queue_waits = [0] * (len(QUEUE_WAIT_BUCKETS_S) + 1)
    waited_s = waited_us / US_PER_S
    index = next(
        (i for i, bound in enumerate(QUEUE_WAIT_BUCKETS_S) if waited_s <= bound),
        len(QUEUE_WAIT_BUCKETS_S),
    )
    goal.queue_waits[index] += 1
    goal.queue_wait_sum_us += waited_us


def _apply_queued(goal: GoalCapacity, p: CapacityQueued, record: Record, at_us: int) -> None:
    run = p.request.run
    goal.queue.pop(run, None)  # a run queued again after its entry expired waits anew
    expires_us = at_us + p.ttl_s * US_PER_S
    goal.queue[run] = QueueEntry(
        request=p.request,
        reasons=list(p.reasons),
        seq=record.seq,
        at_us=at_us,
        expires_us=expires_us,
    )
    check_us = goal.queue_check_us
    goal.queue_check_us = expires_us if check_us is None else min(check_us, expires_us)


def _expire_entries(goal: GoalCapacity) -> None:
    """The goal's time reached an entry's expiry: drop expired entries."""
    last_us = goal.last_at_us
    for run in [r for r, e in goal.queue.items() if not e.waiting_at(last_us)]:
        del goal.queue[run]
    ends = [e.expires_us for e in goal.queue.values()]
    goal.queue_check_us = min(ends) if ends else None


def _expire_leases(goal: GoalCapacity) -> None:
    """The goal's time reached a lease's end: drop ended runs, find the next check time."""
    for run in [r for r, active in goal.runs.items() if not active.active_at(goal.last_at_us)]:
        del goal.runs[run]
    ends = [r.lease_until_us for r in goal.runs.values() if r.lease_until_us is not None]
    goal.lease_check_us = min(ends) if ends else None


def fork_goal(goal: GoalCapacity) -> GoalCapacity:
    """A copy of `goal` that `apply` may change without touching `goal`: a promotion
    decides on the goal as its own transaction's events leave it, before they commit.

    Every container `apply` changes is copied (lists and dicts shallowly: a sample is
    never changed once folded, except by a rebase of totals near 2^62, which a fork
    does not outlive); the active runs, which observations renew, are copied too."""
    return msgspec.structs.replace(
        goal,
        explicit=list(goal.explicit),
        samples=list(goal.samples),
        day_seconds=list(goal.day_seconds),
        day_totals=list(goal.day_totals),
        provider=dict(goal.provider),
        runs={run: msgspec.structs.replace(active) for run, active in goal.runs.items()},
        queue=dict(goal.queue),
        queue_waits=list(goal.queue_waits),
        pool_spent=dict(goal.pool_spent),
        refusals_total=dict(goal.refusals_total),
        request_ids=OrderedDict(goal.request_ids),
    )
