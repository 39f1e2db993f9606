"""What-if over a pool (SPEC §12.1): every member's recorded admission requests
replayed, in journal order, under changed pool limits or shares, by the same decision
function `admit` uses (the pool's reasons after each goal's own).

The whole ledger is folded as recorded, except, from the start of the range (SPEC §7's
`--since`; records after its `--until` fold not at all): the pool's configurations
carry the overridden limits (by `pool configure`'s rule: a target never set
explicitly follows its quota), the overridden members' terms carry their new share (a
borrowing limit then at most 1 - share, a lending limit at most the share), the
pool's cooldowns are recomputed under its replayed cooldown terms (§3.2's rule, the
recorded Retry-After), and each member's decision is the replay's (an admission
refused in the replay holds nothing; one admitted in the replay holds its forecast
until its recorded release, its lease's end, or the end of the range).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.journal.clock import format_us, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.audit import recorded_decision
from quotaledger.projections.audit.whatif import (
    PromotionFlip,
    Wait,
    moved_promotions,
    override_price,
    price_changes,
)
from quotaledger.projections.capacity.events import DEQUEUED, QUEUED, CapacityDequeued, QueuedRef
from quotaledger.projections.capacity.pool_config import pool_config_of, pool_reconfigure
from quotaledger.projections.capacity.queue import (
    decide_in_queue,
    goal_queue,
    next_step,
    pool_queue,
)
from quotaledger.projections.ledger import PROJECTOR, on_pool_clock, pool_context_of
from quotaledger.projections.limits import SHARE_UNITS


@dataclass
class PoolFlip:
    """A member's recorded decision the replay decides the other way."""

    seq: int
    goal: str
    run: str
    at: str
    recorded_admitted: bool
    whatif_admitted: bool
    whatif_reasons: tuple[str, ...]
    recorded_reasons: tuple[str, ...]


@dataclass
class PoolWhatIf:
    """Feed it every record in journal order (`feed`); then read `flips`."""

    pool: str
    limits: Mapping[str, Any]
    """Overridden pool fields (`quota_tpm`, `target_rpm`, ...)."""
    shares: Mapping[str, int]
    """Overridden members' shares, in units of 10^-4."""
    since_us: int | None = None
    until_us: int | None = None
    """The range replayed: before it records fold as recorded, after it not at all."""
    caps: Mapping[str, Any] = field(default_factory=dict)
    """`cap_tokens`, `cap_usd`: the pool's caps in the replay (on its recorded
    `cap_since`; a pool without one counts from its first configure)."""
    price: cap.PriceSet | None = None
    """A model's price from the start of the replay (SPEC §12.5)."""
    cap_start: str | None = None
    priced: bool = False
    state: Any = field(default_factory=PROJECTOR.initial)
    decisions: int = 0
    flips: list[PoolFlip] = field(default_factory=list)
    first_at: str | None = None
    last_at: str | None = None
    replaying: bool = False
    waits: dict[int, Wait] = field(default_factory=dict)
    """The members' queued entries of the range, by capacity.queued seq (SPEC §12.5)."""
    queued_members: set[str] = field(default_factory=set)
    """The members that queued: a write looks at the queue only when one still has an
    entry (a replay's cost stays per event, whatever the pool's size)."""

    def feed(self, record: Record, payload: Any) -> None:
        if self._skip_price(record, payload):
            return
        if self.cap_start is None and record.goal == self.pool:
            self.cap_start = record.at  # the pool's first configure
        if not on_pool_clock(self.state, self.pool, record, payload):
            PROJECTOR.apply(self.state, record, payload)  # other streams: as recorded
            return
        at_us = parse_at(record.at)  # the pool's clock: never back in journal order
        if self.until_us is not None and at_us > self.until_us:
            return
        if not self.replaying and (self.since_us is None or at_us >= self.since_us):
            self._start_replay()
        if not self.replaying:
            PROJECTOR.apply(self.state, record, payload)
            return
        replayed = self._counterfactual(record, payload, at_us)
        if replayed is not None:
            PROJECTOR.apply(self.state, *replayed)
        self._promote(record, at_us)  # every write on the pool's clock promotes

    def _counterfactual(
        self, record: Record, payload: Any, at_us: int
    ) -> tuple[Record, Any] | None:
        """The record as the replayed world has it (None: it appends nothing)."""
        if record.goal == self.pool and isinstance(payload, cap.PoolConfigured):
            return record, self._limits(payload)
        if record.goal == self.pool and isinstance(payload, cap.PoolMembership):
            return record, self._membership(payload)
        if record.goal == self.pool and isinstance(payload, cap.PoolCooldown):
            return record, self._cooldown(payload, at_us)
        if isinstance(payload, cap.CapacityConfigured) and payload.pool is not None:
            goal = record.goal
            if payload.pool.name == self.pool and goal is not None and goal in self.shares:
                ref = self._ref_for(payload.pool, goal)
                return record, msgspec.structs.replace(payload, pool=ref)
            return record, payload
        if isinstance(payload, cap.CapacityAdmitted) and payload.queued is not None:
            return self._recorded_promotion(record, payload, at_us)
        if isinstance(payload, CapacityDequeued):
            return self._dequeued(record, payload)
        if record.kind in cap.DECISION_KINDS and record.goal is not None:
            return self._decide(record, payload)
        return record, payload

    # -- the queue (SPEC §12.2, §12.5): the replay promotes by its own queue ---------------

    def _view(self, goal: str) -> Any:
        state = self.state.capacity.goals[goal]
        ctx = pool_context_of(self.state, goal)
        return goal_queue(goal, state) if ctx is None else pool_queue(ctx.with_member(goal, state))

    def _recorded_promotion(
        self, record: Record, payload: cap.CapacityAdmitted, at_us: int
    ) -> tuple[Record, Any] | None:
        """A recorded promotion gives way to the replay's own (`_promote`); its time
        is kept to compare. One of an entry queued before the range: as recorded."""
        assert payload.queued is not None and record.goal is not None
        wait = self.waits.get(payload.queued.seq)
        if wait is None:
            return record, payload
        wait.recorded_at = record.at
        state = self.state.capacity.goals.get(record.goal)
        entry = None if state is None else state.queue.get(payload.request.run)
        if wait.whatif_at is None and entry is not None and entry.waiting_at(at_us):
            view = self._view(record.goal)
            wait.whatif_reasons = decide_in_queue(view, record.goal, entry.request, at_us).reasons
        return None

    def _dequeued(self, record: Record, payload: CapacityDequeued) -> tuple[Record, Any] | None:
        """A recorded dequeue applies to what the replay still has waiting (a release of
        a queued run the replay admitted releases it); refusals the replay makes itself."""
        state = self.state.capacity.goals.get(record.goal or "")
        if state is None or payload.reason == "refused":
            return None
        if payload.run in state.queue:
            return record, payload
        if payload.reason == "released" and payload.run in state.runs:
            released = cap.CapacityReleased(run=payload.run)
            return msgspec.structs.replace(record, kind=cap.RELEASED), released
        return None

    def _promote(self, record: Record, at_us: int) -> None:
        """Every write on the pool's clock promotes the pool's queue at its time."""
        goals = self.state.capacity.goals
        self.queued_members = {m for m in self.queued_members if m in goals and goals[m].queue}
        waiting = [
            m for m in self.queued_members for e in goals[m].queue.values() if e.waiting_at(at_us)
        ]
        if not waiting:
            return
        member = waiting[0]
        while (step := next_step(self._view(member), at_us)) is not None:
            entry = step.waiting.entry
            wait = self.waits.get(entry.seq)
            moved = msgspec.structs.replace(record, goal=step.waiting.goal)
            if step.admits:
                receipt = step.decision.detail.receipt
                assert receipt is not None
                ref = QueuedRef(seq=entry.seq, at=format_us(entry.at_us))
                admitted = cap.CapacityAdmitted(request=entry.request, receipt=receipt, queued=ref)
                PROJECTOR.apply(
                    self.state, msgspec.structs.replace(moved, kind=cap.ADMITTED), admitted
                )
                if wait is not None:
                    wait.whatif_at = record.at
            else:
                refused = step.dequeued()
                PROJECTOR.apply(self.state, msgspec.structs.replace(moved, kind=DEQUEUED), refused)
                if wait is not None:
                    wait.whatif_reasons = step.decision.reasons

    def promotion_flips(self) -> list[PromotionFlip]:
        return moved_promotions(self.waits)

    def _decide(self, record: Record, payload: Any) -> tuple[Record, Any] | None:
        """The replay's decision in place of a member's recorded one (None: it appends
        nothing, an idempotent replay)."""
        goal = record.goal
        assert goal is not None
        state = self.state.capacity.goals.get(goal)
        recorded = recorded_decision(record, payload)
        if state is None or state.pool is None or state.pool.name != self.pool or not recorded:
            return record, payload
        if self.first_at is None:
            self.first_at = record.at
        self.last_at = record.at
        ctx = pool_context_of(self.state, goal)
        view = goal_queue(goal, state) if ctx is None else pool_queue(ctx.with_member(goal, state))
        decision = decide_in_queue(view, goal, recorded.request, recorded.at_us)
        self.decisions += 1
        if decision.ok != recorded.admitted:
            self.flips.append(
                PoolFlip(
                    record.seq,
                    goal,
                    recorded.request.run,
                    record.at,
                    recorded.admitted,
                    decision.ok,
                    decision.reasons,
                    recorded.reasons,
                )
            )
        if record.kind == QUEUED:
            wait = self.waits[record.seq] = Wait(record.seq, goal, recorded.request.run, record.at)
            self.queued_members.add(goal)
            if decision.ok:
                wait.whatif_at = record.at
            else:
                wait.whatif_reasons = decision.reasons
        if decision.payload is None:
            return None
        if record.kind == QUEUED and not decision.ok:
            return record, payload  # it waits as recorded
        assert decision.kind is not None
        return msgspec.structs.replace(record, kind=decision.kind), decision.payload

    def _start_replay(self) -> None:
        """From here on the pool and its overridden members carry the changes: the
        configuration and terms in force now too."""
        self.replaying = True
        pool = self.state.pools.pools.get(self.pool)
        if pool is None:
            return
        if pool.config is not None:
            pool.config = self._limits(pool.config)
        for goal, member in list(pool.members.items()):
            if goal in self.shares:
                share, borrowing, lending = self._units(
                    goal, member.borrowing_limit, member.lending_limit
                )
                pool.members[goal] = cap.PoolMember(share, borrowing, lending, member.priority)
        for goal in self.shares:
            state = self.state.capacity.goals.get(goal)
            if state is not None and state.pool is not None and state.pool.name == self.pool:
                state.pool = self._ref_for(state.pool, goal)

    def _cooldown(self, payload: cap.PoolCooldown, at_us: int) -> cap.PoolCooldown:
        """A member's 429 cools the pool down by the replayed pool's terms (SPEC §12.1)."""
        pool = self.state.pools.pools.get(self.pool)
        if pool is None:
            return payload
        plan = cap.plan_pool_rejection(pool, at_us, payload.retry_after_s)
        return msgspec.structs.replace(payload, **plan.cooldown_fields())

    def _skip_price(self, record: Record, payload: Any) -> bool:
        """With a what-if price: put it in force from the first record on, and skip the
        model's recorded prices (whether `record` is one)."""
        price = self.price
        if price is None:
            return False
        if isinstance(payload, cap.PriceSet) and payload.model == price.model:
            return True  # the what-if price holds through the replay
        if not self.priced:
            override_price(self.state.capacity, price, record.seq - 1, parse_at(record.at))
            self.priced = True
        return False

    def _limits(self, payload: cap.PoolConfigured) -> cap.PoolConfigured:
        if not self.limits and not self.caps:
            return payload
        flat, explicit = pool_reconfigure(payload, self.limits)
        caps: dict[str, Any] = {
            "cap_tokens": payload.cap_tokens,
            "cap_usd": payload.cap_usd,
            "cap_since": payload.cap_since,
            "cap_counted": payload.cap_counted,
            "cap_total": payload.cap_total,
        }
        if self.caps:
            if payload.cap_since is None:  # the replay's own cap, from the pool's start
                zero = cap.counted_of(cap.ZERO_TOTALS)
                caps |= {"cap_since": self.cap_start, "cap_counted": zero, "cap_total": zero}
            caps |= dict(self.caps)
        return pool_config_of(flat, explicit, caps)

    def _units(self, goal: str, borrowing: int, lending: int) -> tuple[int, int, int]:
        share = self.shares[goal]
        return share, min(borrowing, SHARE_UNITS - share), min(lending, share)

    def _membership(self, payload: cap.PoolMembership) -> cap.PoolMembership:
        if payload.left or payload.goal not in self.shares:
            return payload
        _, borrowing, lending = payload.units
        share, borrowing, lending = self._units(payload.goal, borrowing, lending)
        return msgspec.structs.replace(
            payload,
            share=cap.share_number(share),
            borrowing_limit=cap.share_number(borrowing),
            lending_limit=cap.share_number(lending),
        )

    def _ref_for(self, ref: cap.PoolRef, goal: str) -> cap.PoolRef:
        _, borrowing, lending = ref.units
        share, borrowing, lending = self._units(goal, borrowing, lending)
        return cap.PoolRef(
            name=ref.name,
            share=cap.share_number(share),
            borrowing_limit=cap.share_number(borrowing),
            lending_limit=cap.share_number(lending),
        )

    def assumptions(self) -> list[str]:
        changes = {**self.limits, **self.caps}
        if self.price is not None:
            changes |= price_changes(self.price)
        limits = ", ".join(f"{k}={v}" for k, v in changes.items()) or "none"
        shares = ", ".join(f"{g}={cap.share_number(u)}" for g, u in self.shares.items())
        end = format_us(self.until_us) if self.until_us is not None else "the end of the journal"
        start = format_us(self.since_us) if self.since_us is not None else "the first event"
        return [
            f"pool {self.pool}: limit changes {limits}; share changes {shares or 'none'} (a "
            "borrowing limit then at most 1 - share, a lending limit at most the share)",
            f"range: from {start} to {end}; events before the range fold as recorded (the "
            "changes apply from its start, to the configuration in force then)",
            "every member's recorded admission request in the range is decided again at "
            "its recorded time, in journal order, by admit's decision function (the pool's "
            "reasons after the goal's own); observed usage and provider reports are as "
            "recorded",
            "provider rejections (429) happen at their recorded times; the pool's cooldowns "
            "are recomputed under the replayed pool's cooldown terms (Retry-After as "
            "recorded), each member's own as recorded (its config does not change)",
            "a run admitted in the replay holds its forecast until its recorded release, "
            "its lease's end, or the end of the range; one refused in the replay holds "
            "nothing",
            "the pool's queue is replayed too: every replayed write on the pool's clock "
            "promotes the entries that then fit, in queue order, and the recorded "
            "promotions give way to the replay's; cancels and releases of queued runs "
            "happen as recorded",
        ]
