"""What-if over a pool (SPEC §12.1): every member's recorded admission requests
replayed, in journal order, under changed pool limits or shares, by the same decision
function `admit` uses (the pool's reasons after each goal's own).

The whole ledger is folded as recorded, except: the pool's configurations carry the
overridden limits (by `pool configure`'s rule: a target never set explicitly follows
its quota), the overridden members' terms carry their new share (a borrowing limit
then at most 1 - share, a lending limit at most the share), and each member's
decision is the replay's (an admission refused in the replay holds nothing; one
admitted in the replay holds its forecast until its recorded release or lease end).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from quotaledger.journal import Record
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.audit import recorded_decision
from quotaledger.projections.capacity.events import QUEUED
from quotaledger.projections.capacity.pool_config import pool_config_of, pool_reconfigure
from quotaledger.projections.capacity.queue import decide_in_queue, goal_queue, pool_queue
from quotaledger.projections.ledger import PROJECTOR, pool_context_of
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
    state: Any = field(default_factory=PROJECTOR.initial)
    decisions: int = 0
    flips: list[PoolFlip] = field(default_factory=list)
    first_at: str | None = None
    last_at: str | None = None

    def feed(self, record: Record, payload: Any) -> None:
        if record.goal == self.pool and isinstance(payload, cap.PoolConfigured):
            payload = self._limits(payload)
        elif record.goal == self.pool and isinstance(payload, cap.PoolMembership):
            payload = self._membership(payload)
        elif isinstance(payload, cap.CapacityConfigured) and payload.pool is not None:
            goal = record.goal
            if payload.pool.name == self.pool and goal is not None and goal in self.shares:
                ref = self._ref_for(payload.pool, goal)
                payload = msgspec.structs.replace(payload, pool=ref)
        elif record.kind in cap.DECISION_KINDS and record.goal is not None:
            replayed = self._decide(record, payload)
            if replayed is None:
                return
            record, payload = replayed
        PROJECTOR.apply(self.state, record, payload)

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
        if decision.payload is None:
            return None
        if record.kind == QUEUED and not decision.ok:
            return record, payload  # it waits as recorded
        assert decision.kind is not None
        return msgspec.structs.replace(record, kind=decision.kind), decision.payload

    def _limits(self, payload: cap.PoolConfigured) -> cap.PoolConfigured:
        if not self.limits:
            return payload
        flat, explicit = pool_reconfigure(payload, self.limits)
        caps: dict[str, Any] = {
            "cap_tokens": payload.cap_tokens,
            "cap_usd": payload.cap_usd,
            "cap_since": payload.cap_since,
            "cap_counted": payload.cap_counted,
            "cap_total": payload.cap_total,
        }
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
        limits = ", ".join(f"{k}={v}" for k, v in self.limits.items()) or "none"
        shares = ", ".join(f"{g}={cap.share_number(u)}" for g, u in self.shares.items())
        return [
            f"pool {self.pool}: limit changes {limits}; share changes {shares or 'none'} (a "
            "borrowing limit then at most 1 - share, a lending limit at most the share)",
            "every member's recorded admission request is decided again at its recorded "
            "time, in journal order, by admit's decision function (the pool's reasons "
            "after the goal's own); observed usage, provider reports and 429s are as "
            "recorded",
            "a run admitted in the replay holds its forecast until its recorded release or "
            "its lease's end; one refused in the replay holds nothing",
        ]
