"""An independent model of a goal's queue (SPEC §12.2), written from the spec alone for
a goal whose one limit is a capacity that runs take a size of: a case gate of N slots
(target = max = N, baseline runs only: each run takes 1), or a token gate whose usage
stays 0 (heartbeats, fresh for a day: each run takes its forecast of the target).

It imports nothing of the product's projections: its own active runs, its own queue,
its own promotion and its own estimate, so a test can hold every answer of the
product against it.

- A run is active from its admission until its release or its lease's end (an active
  run whose lease ends at or before t is no longer active); a run fits while the
  sizes of the active runs plus its own are at most the capacity.
- The queue is the goal's entries that still wait (t < queued_at + ttl), by seq.
- A request of a run that is not queued is refused `queue_ahead` while any entry
  waits (every entry of its own goal blocks it); with `queue`, a refusal waits.
- Every write (an admission decision that appends, a release, a cancel, an
  observation, a poll) then admits the entries at the head that fit, in order, and
  stops at the first that does not (an entry of the goal blocks the goal's entries
  behind it).
- An entry's estimate: the first time from max(now, the estimates of the entries
  ahead) among that time and the later lease ends (those of the active runs and of the
  entries ahead, admitted at their own estimates) at which it fits, if before its
  expiry; none behind an entry without one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Entry:
    run: str
    seq: int
    queued_us: int
    expires_us: int
    lease_us: int
    size: int


Held = tuple[int | None, int]
"""An active run: its lease's end (None: no lease) and its size."""


@dataclass
class Model:
    capacity: int
    active: dict[str, Held] = field(default_factory=dict)
    queue: list[Entry] = field(default_factory=list)
    seq: int = 0

    # -- time -----------------------------------------------------------------------

    def settle(self, now_us: int) -> None:
        """Drop what ended by `now_us`: leases, expired entries."""
        self.active = {r: h for r, h in self.active.items() if h[0] is None or h[0] > now_us}
        self.queue = [e for e in self.queue if now_us < e.expires_us]

    def fits(self, at_us: int, size: int, extra: list[Held] | None = None) -> bool:
        held = list(self.active.values()) + list(extra or [])
        taken = sum(size for end, size in held if end is None or end > at_us)
        return taken + size <= self.capacity

    # -- the writes ---------------------------------------------------------------------

    def promote(self, now_us: int) -> list[str]:
        admitted = []
        while self.queue and self.fits(now_us, self.queue[0].size):
            entry = self.queue.pop(0)
            self.active[entry.run] = (now_us + entry.lease_us, entry.size)
            admitted.append(entry.run)
        return admitted

    def queued(self, run: str) -> Entry | None:
        return next((e for e in self.queue if e.run == run), None)

    def admit(
        self, run: str, size: int, lease_us: int | None, queue: bool, ttl_us: int, now_us: int
    ) -> tuple[str, list[str]]:
        """What an admit answers ('admitted', 'idempotent', 'queued', 'refused') and
        whom its transaction promotes."""
        self.settle(now_us)
        if run in self.active:
            return "idempotent", []
        if self.queued(run) is not None:  # a poll
            promoted = self.promote(now_us)
            return ("admitted" if run in promoted else "queued"), promoted
        self.seq += 1
        if not self.queue and self.fits(now_us, size):
            self.active[run] = (None if lease_us is None else now_us + lease_us, size)
            return "admitted", self.promote(now_us)
        if queue:
            assert lease_us is not None
            self.queue.append(Entry(run, self.seq, now_us, now_us + ttl_us, lease_us, size))
            promoted = self.promote(now_us)
            return ("admitted" if run in promoted else "queued"), promoted
        return "refused", self.promote(now_us)

    def release(self, run: str, now_us: int) -> tuple[str, list[str]]:
        self.settle(now_us)
        if run in self.active:
            del self.active[run]
            return "released", self.promote(now_us)
        entry = self.queued(run)
        if entry is not None:
            self.queue.remove(entry)
            return "dequeued", self.promote(now_us)
        return "nothing", []

    def cancel(self, run: str, now_us: int) -> tuple[bool, list[str]]:
        self.settle(now_us)
        entry = self.queued(run)
        if entry is None:
            return False, []
        self.queue.remove(entry)
        return True, self.promote(now_us)

    def observe(self, now_us: int) -> list[str]:
        self.settle(now_us)
        return self.promote(now_us)

    # -- what a queued run is told ------------------------------------------------------

    def estimates(self, now_us: int) -> dict[str, int | None]:
        found: dict[str, int | None] = {}
        admitted: list[Held] = []
        previous: int | None = now_us
        for entry in self.queue:
            start = None if previous is None else max(now_us, previous)
            estimate = None
            if start is not None:
                ends = [end for end, _ in [*self.active.values(), *admitted] if end is not None]
                for t in [start, *sorted({end for end in ends if end > start})]:
                    if t >= entry.expires_us:
                        break
                    if self.fits(t, entry.size, admitted):
                        estimate = t
                        break
            found[entry.run] = estimate
            if estimate is not None:
                admitted.append((estimate + entry.lease_us, entry.size))
            previous = estimate
        return found

    def position(self, run: str) -> int:
        return next(i + 1 for i, e in enumerate(self.queue) if e.run == run)
