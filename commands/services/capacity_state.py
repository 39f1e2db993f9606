"""The capacity use cases over a goal's config and state (SPEC §3.5): configure and
inspect, with the views their answers show a goal in.

A module apart from `services.capacity` (observe, admit, reject, release): a
runner's per-event command loads neither these views nor their types.
"""

from __future__ import annotations

from typing import Any

import msgspec

from quotaledger.journal import InvalidInput, Transaction, codes
from quotaledger.journal.clock import (
    canonical_at,
    check_not_in_future,
    format_us,
    format_us_or_none,
    parse_at,
    wall_us,
)
from quotaledger.journal.store import PendingRecord
from quotaledger.projections import capacity as cap
from quotaledger.projections import reasons as R
from quotaledger.projections.capacity import events as cap_events
from quotaledger.projections.capacity import queue as cq
from quotaledger.projections.ledger import LedgerState, pool_context_of
from quotaledger.services.base import ServiceBase
from quotaledger.services.clocks import clock_ahead_of
from quotaledger.services.pooling import pool_clock
from quotaledger.services.pools import (
    Membership,
    PoolsService,
    membership_after,
    require_not_pool,
)
from quotaledger.services.queueing import (
    final_records,
    held_in_queue,
    promote,
    promoted_of,
    queue_rows,
    queue_view,
)
from quotaledger.services.spend_views import spend_view
from quotaledger.usecases.capacity_state import (
    ActiveRunView,
    CapsView,
    ConfigureAnswer,
    ConfigureRequest,
    ConfigView,
    DimensionView,
    GoalView,
    Headroom,
    InspectAnswer,
    InspectRequest,
    ProviderView,
    TokensView,
    Totals,
)
from quotaledger.usecases.decode import event_or_unset


class CapacityStateService(ServiceBase):
    """A goal's capacity config and state over the open journal."""

    # -- configure ---------------------------------------------------------------------

    def configure(self, request: ConfigureRequest) -> ConfigureAnswer:
        """Change a goal's capacity config: only the fields given change (SPEC §3.5),
        and its pool membership (SPEC §12.1)."""
        goal = request.goal
        remove_limit, remove_gate = tuple(request.remove_limit), tuple(request.remove_gate)
        given = cap.given_fields(request.config_fields())
        capping = _names_caps(request)
        pooling = _names_pool(request)
        if not given and not remove_limit and not remove_gate and not capping and not pooling:
            raise _nothing_to_configure()
        # The rule needs the goal's config: an invalid result raises inside the
        # transaction, which then appends nothing.
        with self.journal.transaction() as txn:
            require_not_pool(txn.state, goal)
            state = cap.goal_of(txn.state.capacity, goal)
            membership = _membership(txn.state, goal, state, request)
            at_text = txn.time_for(goal, request.at, pool_clock(txn.state, goal) + membership.clock)
            current = cap.Config(state.cases, state.tokens, tuple(state.explicit))
            new = cap.reconfigure(
                current, given, remove_limits=remove_limit, remove_gates=remove_gate
            )
            caps = self._caps_after(request, state, at_text, txn.wall_us) if capping else state.caps
            config = config_view(new.cases, new.tokens, caps, membership.pool, membership.priority)
            changes = cap.changes(current, new) | cap.cap_changes(state.caps, caps)
            changes |= _pool_changes(state, membership)
            active = cap.evaluate(state, parse_at(at_text)).active_cases
            below = cap.config_below_occupancy(active, new.cases)
            if below:
                return _below_answer(goal, below, active, config, changes)
            pending = None
            several = False
            promoted: list[PendingRecord] = []
            # Nothing changes (SPEC §8): no event, and a goal that no configure named
            # (`--remove-limit` on a typo) is not created.
            changed = not unchanged(current, new) or cap.cap_changes(state.caps, caps)
            if changed or membership.events or membership.priority != state.priority:
                payload = _configured(new, caps, membership)
                own = _append_configured(txn, goal, state, payload, membership, at_text)
                pending = own[0]
                # A configuration may let an entry in, or refuse it (SPEC §12.2).
                promoted = promote(txn, goal, at_text, own)
                several = len(own) > 1 or bool(promoted)
        if pending is not None and several:
            pending = final_records(txn)[0]
        return ConfigureAnswer(
            ok=True,
            goal=goal,
            appended=pending is not None,
            config=config,
            explicit=list(new.explicit),
            changes=changes,
            event=event_or_unset(pending),
            promoted=promoted_of(promoted),
        )

    def _caps_after(
        self, request: ConfigureRequest, state: cap.GoalCapacity, at: str, wall_us: int
    ) -> cap.Caps | None:
        """The goal's caps after this configure (SPEC §12.4)."""
        cap_since = None if request.cap_since is None else canonical_at(request.cap_since)
        if cap_since is not None:  # SPEC §2.2's bound, as for every time a writer takes
            check_not_in_future(cap_since, wall_us)
        return cap.recap(
            state,
            cap_tokens=request.cap_tokens,
            cap_usd=request.cap_usd,
            cap_since=cap_since,
            remove=request.remove_cap,
            at=at,
            counted_since=lambda since_us: self._counted_since(state, request.goal, since_us),
        )

    def _counted_since(self, state: cap.GoalCapacity, goal: str, since_us: int) -> cap.Totals:
        """What `goal` observed at or after `since_us`: from the samples the fold keeps
        when they reach back that far, else read from the journal once (SPEC §12.4)."""
        found = cap.counted_from_samples(state, since_us)
        if found is not None:
            return found
        records = ((record, payload) for record, payload, _ in self.journal.records())
        return cap.counted_in_records(records, goal, since_us)

    # -- inspect -----------------------------------------------------------------------

    def inspect(self, request: InspectRequest) -> InspectAnswer:
        """Every goal (or one) as of now, as of time `at`, or as of record `seq`."""
        goal, at, seq = request.goal, request.at, request.seq
        if request.pool is not None:
            if goal is not None:
                raise InvalidInput(
                    lambda names: f"give {names('goal')} or {names('pool')}, not both",
                    code=codes.INVALID_OPTION,
                    about=("goal", "pool"),
                )
            pools = PoolsService(self.journal).inspect_pool(request.pool, at, seq)
            return InspectAnswer(ok=True, pools=pools.pools)
        if goal is not None:
            self.require_goal(goal)
        if at is None and seq is None:
            self.journal.refresh()  # a long-lived handle shows what others appended since
        ledger: LedgerState = self._state_as_of(at=at, seq=seq)
        goals = ledger.capacity.goals
        names = sorted(goals) if goal is None else [goal]
        now_us = wall_us()
        ahead = clock_ahead_of(self.journal, now_us)
        result: dict[str, GoalView] = {}
        for name in names:
            state = cap.goal_of(ledger.capacity, name)
            if at is not None:
                at_us = parse_at(canonical_at(at))
            elif seq is not None:
                at_us = state.last_at_us
            else:
                at_us = max(now_us, state.last_at_us)
            view = queue_view(ledger, name)
            pool = pool_context_of(ledger, name)
            result[name] = inspect_goal(
                name, state, at_us, view, clock_ahead=ahead(name), pool=pool
            )
        return InspectAnswer(ok=True, goals=result)


def config_view(
    cases: cap.CaseConfig | None,
    tokens: cap.TokenConfig | None,
    caps: cap.Caps | None = None,
    pool: cap.PoolRef | None = None,
    priority: int = 0,
) -> ConfigView:
    """The config as answers show it: `limits` always present (events omit it when empty),
    `caps` when the goal has one, `pool` and `priority` when it is in a pool or has one."""
    shown = None if tokens is None else TokensView(**msgspec.structs.asdict(tokens))
    view = ConfigView(cases=cases, tokens=shown)
    if caps is not None:
        view.caps = CapsView(
            cap_tokens=caps.cap_tokens, cap_usd=caps.cap_usd, cap_since=caps.cap_since
        )
    if pool is not None or priority:
        view.pool = pool
        view.priority = priority
    return view


def _below_answer(
    goal: str, below: list[str], active: cap.ActiveCases, config: ConfigView, changes: Any
) -> ConfigureAnswer:
    """The refusal of case limits below the runs already active (SPEC §3.1)."""
    return ConfigureAnswer(
        ok=False,
        goal=goal,
        appended=False,
        reasons=[R.CONFIG_BELOW_OCCUPANCY],
        detail=below,
        active_cases=active,
        config=config,
        changes=changes,
    )


def _configured(
    new: cap.Config, caps: cap.Caps | None, membership: Membership
) -> cap.CapacityConfigured:
    return cap.CapacityConfigured(
        cases=new.cases,
        tokens=new.tokens,
        explicit=list(new.explicit),
        **({} if caps is None else caps.members()),
        pool=membership.pool,
        priority=membership.priority,
    )


def _names_pool(request: ConfigureRequest) -> bool:
    """The configure names the goal's pool membership or priority (SPEC §12.1)."""
    terms = (
        request.pool,
        request.pool_share,
        request.pool_borrowing_limit,
        request.pool_lending_limit,
        request.priority,
    )
    return request.leave_pool or any(value is not None for value in terms)


def _membership(
    ledger: LedgerState, goal: str, state: cap.GoalCapacity, request: ConfigureRequest
) -> Membership:
    return membership_after(
        ledger,
        goal,
        state,
        pool=request.pool,
        share=request.pool_share,
        borrowing_limit=request.pool_borrowing_limit,
        lending_limit=request.pool_lending_limit,
        priority=request.priority,
        leave=request.leave_pool,
    )


def _append_configured(
    txn: Transaction[LedgerState],
    goal: str,
    state: cap.GoalCapacity,
    payload: cap.CapacityConfigured,
    membership: Membership,
    at_text: str,
) -> list[PendingRecord]:
    """The configure's events: `capacity.configured`, the goal's queue entries leaving
    when it joins or leaves a pool, and `pool.membership` under each pool's name."""
    own = [txn.append(cap.CONFIGURED, goal, payload, at_text)]
    if membership.moved:
        now_us = parse_at(at_text)
        for run, entry in list(state.queue.items()):
            if entry.waiting_at(now_us):
                moved = cap_events.CapacityDequeued(run=run, reason="moved")
                own.append(txn.append(cap_events.DEQUEUED, goal, moved, at_text))
    for name, event in membership.events:
        own.append(txn.append(cap.POOL_MEMBERSHIP, name, event, at_text))
    return own


def _pool_changes(state: cap.GoalCapacity, membership: Membership) -> dict[str, list[Any]]:
    """`pool` and `priority` as `changes` lists them, when they change."""
    found: dict[str, list[Any]] = {}
    old = None if state.pool is None else msgspec.to_builtins(state.pool)
    new = None if membership.pool is None else msgspec.to_builtins(membership.pool)
    if old != new:
        found["pool"] = [old, new]
    if state.priority != membership.priority:
        found["priority"] = [state.priority, membership.priority]
    return found


def inspect_goal(
    name: str,
    state: cap.GoalCapacity,
    at_us: int,
    view: cq.QueueView,
    *,
    clock_ahead: bool = False,
    pool: cap.PoolContext | None = None,
) -> GoalView:
    """One goal as of `at_us`, in the shape of SPEC §8's `inspect`, with `view`, the
    queue it waits in; `clock_ahead`: its last event is beyond the clock-skew bound
    ahead of this machine's clock; `pool`: the pool it is a member of, whose reasons
    its readiness includes (SPEC §12.1)."""
    ev = cap.evaluate(state, at_us)
    pool_reasons = cap.ready_pool_reasons(state, at_us, pool, name)
    return GoalView(
        at=format_us(at_us),
        config=config_view(ev.cases, ev.tokens, state.caps),
        usage_tpm=ev.usage.usage_tpm,
        usage=ev.usage.parts,
        reserved_tpm=ev.reserved_tpm,
        load_tpm=ev.load_tpm,
        headroom_tpm=Headroom(
            solver=ev.headroom_tpm("solver"), evaluator=ev.headroom_tpm("evaluator")
        ),
        coverage=ev.usage.coverage,
        observation_stale=ev.observation_stale,
        last_observation_at=format_us_or_none(ev.last_observation_at_us),
        cooldown_until=format_us_or_none(ev.cooldown_until_us),
        cooldown_active=ev.cooldown_active,
        active_runs=[_active_run_view(r) for r in ev.active_runs],
        active_counts=ev.active_cases,
        dimensions=dimension_views(ev),
        provider=provider_views(cap.every_dimension(state, at_us)),
        admission_ready=cap.admission_ready(ev, pool_reasons),
        clock_ahead=clock_ahead,
        next_action=cap.next_action(
            ev,
            clock_ahead=clock_ahead,
            held_in_queue=held_in_queue(view, name, at_us),
            pool_reasons=pool_reasons,
        ),
        totals=Totals(
            admissions=state.admissions_total,
            refusals=state.refusal_events_total,
            refusals_by_reason=dict(sorted(state.refusals_total.items())),
            rejections=state.rejections_total,
            releases=state.releases_total,
        ),
        spend=spend_view(ev.spend),
        queue=queue_rows(view, at_us) if any(g.queue for g in view.goals.values()) else [],
    )


def dimension_views(ev: cap.Evaluation) -> dict[str, DimensionView]:
    """Every configured dimension as of the evaluation (SPEC §3.6, inspect's shape)."""
    return {
        dimension: DimensionView(
            usage=state.usage,
            reserved=state.reserved,
            provider_used=state.provider_used,
            load=state.load,
            quota=None if state.limit is None else state.limit.quota,
            target=None if state.limit is None else state.limit.target,
            headroom=Headroom(
                solver=state.headroom("solver"), evaluator=state.headroom("evaluator")
            ),
        )
        for dimension, state in ev.dimensions.items()
    }


def provider_views(
    dimensions: dict[cap.Dimension, cap.DimensionState],
) -> dict[str, ProviderView]:
    """The latest provider report of every dimension reported (SPEC §3.6), of
    `every_dimension`'s states."""
    found: dict[str, ProviderView] = {}
    for dimension, state in dimensions.items():
        view = state.provider
        if view is None:
            continue
        report = view.report
        found[dimension] = ProviderView(
            limit=report.limit,
            remaining=report.remaining,
            reset_at=format_us_or_none(report.reset_at_us),
            reported_at=format_us(report.at_us),
            live=view.live,
            used=view.used,
            used_since=view.used_since,
            headroom=view.room,
            config_above_provider_limit=(
                state.limit is not None
                and report.limit is not None
                and state.limit.quota > report.limit
            ),
        )
    return found


def _active_run_view(run: cap.ActiveRun) -> ActiveRunView:
    request = run.request
    return ActiveRunView(
        run=request.run,
        case=request.case,
        arm=request.arm,
        class_=request.run_class,
        forecast_tpm=cap.forecast_of(request, "tpm"),
        forecasts={d: cap.forecast_of(request, d) for d in cap.DIMENSIONS},
        admitted_at=format_us(run.admitted_at_us),
        lease_until=format_us_or_none(run.lease_until_us),
        seq=run.seq,
    )


def _names_caps(request: ConfigureRequest) -> bool:
    """Whether a configure changes the spend caps (SPEC §12.4)."""
    named = (request.cap_tokens, request.cap_usd, request.cap_since)
    return any(value is not None for value in named) or bool(request.remove_cap)


def unchanged(current: cap.Config, new: cap.Config) -> bool:
    """Whether a configure changes nothing: the same gates, the same explicit fields."""
    same = (new.cases, new.tokens) == (current.cases, current.tokens)
    return same and set(new.explicit) == set(current.explicit)


def _nothing_to_configure() -> InvalidInput:
    """A configure that names no field, worded with the caller's names for the fields
    it suggests (the CLI: their flags)."""
    return InvalidInput(
        lambda names: (
            f"nothing to configure: give the case gate ({names('max_active_cases')} ...), "
            f"the token gate ({names('quota_tpm')}, {names('quota_itpm')} ...), "
            f"{names('remove_limit')} or {names('remove_gate')}"
        ),
        code=codes.INVALID_CONFIG,
        about=("max_active_cases", "quota_tpm", "quota_itpm", "remove_limit", "remove_gate"),
    )
