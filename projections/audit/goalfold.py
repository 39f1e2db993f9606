"""The fold of one goal's capacity records that what-if and the timeline build on."""

from quotaledger.journal import Record
from quotaledger.journal.clock import parse_at
from quotaledger.projections import capacity as cap


class GoalFold:
    """Folds one goal's capacity records, in journal order, up to the end of a range."""

    def __init__(self, goal: str, since_us: int | None, until_us: int | None) -> None:
        self.goal = goal
        self.since_us = since_us
        self.until_us = until_us
        self.state = cap.CapacityState()

    @property
    def goal_state(self) -> cap.GoalCapacity:
        return cap.goal_of(self.state, self.goal)

    def price(self, record: Record, payload: object) -> bool:
        """Fold a journal-level `price.set` (every goal's dollars need it, SPEC §12.4);
        whether the record was one."""
        if record.goal is None and isinstance(payload, cap.PriceSet):
            cap.apply(self.state, record, payload)
            return True
        return False

    def record_at_us(self, record: Record) -> int | None:
        """The record's time, or None for a record this fold skips (other goal, past the end)."""
        if record.goal != self.goal or record.kind not in cap.EVENTS:
            return None
        at_us = parse_at(record.at)
        if self.until_us is not None and at_us > self.until_us:
            return None
        return at_us
