"""An independent model of a pool's queue (SPEC §12.2 over §12.1), written from the
spec alone, for a pool whose one dimension is `tpm` and whose members' usage stays 0
(their load is what their active runs forecast), each member with an optional case
gate of its own (N slots, baseline runs: each run takes one).

It imports nothing of the product: its own active runs, its own queue, its own
decision, its own promotion.

- A run is active from its admission until its release or its lease's end (a lease
  ending at or before t is over); load(h) is the sum of h's active runs' forecasts,
  the pool's load their sum over members (T the pool's target).
- A request of goal g forecasting f, at t (§12.1's order, usage 0):
  g's own slots full (a reason of g's own);
  f > T or f > (share_g + borrowing_g) x T: `pool_forecast_exceeds_target`, the one
  reason here that is not queueable (the request is refused, never queued);
  load + f > T: `pool_headroom_exhausted` (pool-wide);
  load(g) + f > (share_g + borrowing_g) x T: `pool_borrowing_limit` (g's own);
  load + f <= T < load + f + sum over h != g of protected(h), where protected(h) =
  max(0, max(0, share_h x T - load(h)) - lending_h x T): `pool_share_protected`
  (pool-wide).
- The queue: the entries still waiting (t < queued_at + ttl), by their goal's
  priority descending, then queued order.
- Who blocks whom: an entry that does not fit blocks the entries behind it of its own
  goal always, other goals' only when it fails a pool-wide reason. A request of a run
  not queued is refused `queue_ahead` when an entry of equal or higher priority that
  would block it so is waiting.
- Every write (an admission decision that appends, a release or a cancel that
  changes something, an observation, a poll) then admits, again and again, the first
  entry in order that fits and that no entry ahead of it blocks; it stops when none
  does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True)
class Terms:
    """A member's terms: its share, borrowing and lending limits (fractions of T), its
    priority, and its own case slots (None: no case gate)."""

    share: Fraction
    borrowing: Fraction
    lending: Fraction
    priority: int
    slots: int | None


@dataclass(frozen=True)
class Active:
    goal: str
    end_us: int | None
    forecast: int


@dataclass(frozen=True)
class Entry:
    goal: str
    run: str
    order: int
    queued_us: int
    expires_us: int
    lease_us: int
    forecast: int


@dataclass(frozen=True)
class Verdict:
    fits: bool
    queueable: bool
    pool_wide: bool


@dataclass
class PoolQueueModel:
    target: int
    members: dict[str, Terms]
    active: dict[str, Active] = field(default_factory=dict)
    entries: list[Entry] = field(default_factory=list)
    count: int = 0

    # -- time and load ----------------------------------------------------------------

    def settle(self, now_us: int) -> None:
        """Drop what ended by `now_us`: leases, expired entries."""
        self.active = {
            r: a for r, a in self.active.items() if a.end_us is None or a.end_us > now_us
        }
        self.entries = [e for e in self.entries if now_us < e.expires_us]

    def load(self, goal: str | None = None) -> int:
        return sum(a.forecast for a in self.active.values() if goal is None or a.goal == goal)

    def protected(self, goal: str) -> Fraction:
        terms = self.members[goal]
        unused = max(Fraction(0), terms.share * self.target - self.load(goal))
        return max(Fraction(0), unused - terms.lending * self.target)

    def verdict(self, goal: str, forecast: int) -> Verdict:
        terms = self.members[goal]
        ceiling = (terms.share + terms.borrowing) * self.target
        own_full = terms.slots is not None and (
            sum(1 for a in self.active.values() if a.goal == goal) + 1 > terms.slots
        )
        if forecast > self.target or forecast > ceiling:
            return Verdict(fits=False, queueable=False, pool_wide=False)
        load = self.load()
        headroom = load + forecast > self.target
        borrowing = self.load(goal) + forecast > ceiling
        others = sum((self.protected(h) for h in self.members if h != goal), Fraction(0))
        protected = not headroom and load + forecast + others > self.target
        fits = not (own_full or headroom or borrowing or protected)
        return Verdict(fits=fits, queueable=True, pool_wide=headroom or protected)

    # -- the queue ------------------------------------------------------------------------

    def queue(self) -> list[Entry]:
        return sorted(self.entries, key=lambda e: (-self.members[e.goal].priority, e.order))

    def entry(self, run: str) -> Entry | None:
        return next((e for e in self.entries if e.run == run), None)

    def position(self, run: str) -> int:
        return next(i + 1 for i, e in enumerate(self.queue()) if e.run == run)

    def blocks(self, ahead: Entry, goal: str) -> bool:
        """Does the waiting entry `ahead` hold back a request of `goal` behind it?"""
        if ahead.goal == goal:
            return True
        verdict = self.verdict(ahead.goal, ahead.forecast)
        return not verdict.fits and verdict.pool_wide

    def jumped(self, goal: str) -> bool:
        """Would a request of `goal`, not queued, jump an entry that holds it back?"""
        priority = self.members[goal].priority
        return any(
            self.blocks(e, goal) for e in self.entries if self.members[e.goal].priority >= priority
        )

    def next_admission(self) -> Entry | None:
        """The first entry in order that fits and that nothing ahead of it blocks."""
        queue = self.queue()
        for index, entry in enumerate(queue):
            if any(self.blocks(ahead, entry.goal) for ahead in queue[:index]):
                continue
            if self.verdict(entry.goal, entry.forecast).fits:
                return entry
        return None

    def promote(self, now_us: int) -> list[tuple[str, str]]:
        admitted = []
        while (entry := self.next_admission()) is not None:
            self.entries.remove(entry)
            self.active[entry.run] = Active(entry.goal, now_us + entry.lease_us, entry.forecast)
            admitted.append((entry.goal, entry.run))
        return admitted

    # -- the writes -----------------------------------------------------------------------

    def admit(
        self,
        goal: str,
        run: str,
        forecast: int,
        lease_us: int | None,
        queue: bool,
        ttl_us: int,
        now_us: int,
    ) -> tuple[str, list[tuple[str, str]]]:
        """What an admit answers ('idempotent', 'admitted', 'queued', 'refused') and
        whom its transaction promotes."""
        self.settle(now_us)
        if run in self.active:
            return "idempotent", []
        if self.entry(run) is not None:  # a poll
            promoted = self.promote(now_us)
            return ("admitted" if (goal, run) in promoted else "queued"), promoted
        verdict = self.verdict(goal, forecast)
        if verdict.fits and not self.jumped(goal):
            end_us = None if lease_us is None else now_us + lease_us
            self.active[run] = Active(goal, end_us, forecast)
            return "admitted", self.promote(now_us)
        if queue and verdict.queueable:
            assert lease_us is not None
            self.count += 1
            self.entries.append(
                Entry(goal, run, self.count, now_us, now_us + ttl_us, lease_us, forecast)
            )
            promoted = self.promote(now_us)
            return ("admitted" if (goal, run) in promoted else "queued"), promoted
        return "refused", self.promote(now_us)

    def release(self, run: str, now_us: int) -> tuple[str, list[tuple[str, str]]]:
        self.settle(now_us)
        if run in self.active:
            del self.active[run]
            return "released", self.promote(now_us)
        entry = self.entry(run)
        if entry is not None:
            self.entries.remove(entry)
            return "dequeued", self.promote(now_us)
        return "nothing", []

    def cancel(self, run: str, now_us: int) -> tuple[bool, list[tuple[str, str]]]:
        self.settle(now_us)
        entry = self.entry(run)
        if entry is None:
            return False, []
        self.entries.remove(entry)
        return True, self.promote(now_us)

    def observe(self, now_us: int) -> list[tuple[str, str]]:
        self.settle(now_us)
        return self.promote(now_us)
