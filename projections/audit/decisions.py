"""Every journaled decision re-taken on a fold of its own from genesis (SPEC §7:
`verify --decisions`, and `import` before it loads a history).

    check = check_decisions(journal.records())   # (record, payload, line) in order
    check.not_reproduced                          # what no version of the rules decided

A history can be well chained and still impossible: five runs admitted into a goal of
one slot, each record correctly hashed and linked. Only re-deciding every decision on
the state just before it, as `audit` does one at a time, catches it. The fold here is
independent of any handle's state and of any checkpoint.
"""

from dataclasses import dataclass, field
from typing import Any

from quotaledger.journal import Record
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.audit import (
    SETTLEMENT_DECISION_KINDS,
    audit_decision,
    audit_settlement,
    recorded_decision,
)
from quotaledger.projections.ledger import PROJECTOR, LedgerState, pool_context_of


@dataclass(frozen=True)
class NotReproduced:
    """A journaled decision the rules do not take again on the state before it."""

    seq: int
    hash: str
    kind: str
    goal: str | None
    run: str | None
    differences: tuple[str, ...]


@dataclass
class DecisionCheck:
    checked: int = 0
    """Decisions re-taken (capacity admissions and refusals, settlement decisions;
    host decisions are not: their inputs are not all journaled)."""
    not_reproduced: list[NotReproduced] = field(default_factory=list)


def check_decisions(records: Any) -> DecisionCheck:
    """Re-take every decision among `records` ((record, payload, line) from genesis,
    in order) on the fold of the records before it."""
    state = PROJECTOR.initial()
    check = DecisionCheck()
    apply = PROJECTOR.apply
    for record, payload, _line in records:
        differences = redecide(state, record, payload)
        if differences is not None:
            check.checked += 1
            if differences:
                check.not_reproduced.append(_not_reproduced(record, payload, differences))
        apply(state, record, payload)
    return check


def redecide(state: LedgerState, record: Record, payload: Any) -> tuple[str, ...] | None:
    """How a decision record differs from its replay on `state` (empty: reproduced);
    None for a record that is no decision audit re-takes."""
    if record.kind in cap.DECISION_KINDS:
        recorded = recorded_decision(record, payload)
        if recorded is None:
            return None
        goal = cap.goal_of(state.capacity, recorded.goal)
        pool = pool_context_of(state, recorded.goal)
        return audit_decision(goal, recorded, pool).differences
    if record.kind in SETTLEMENT_DECISION_KINDS:
        return audit_settlement(state.settlement, record, payload).differences
    return None


def _not_reproduced(record: Record, payload: Any, differences: tuple[str, ...]) -> NotReproduced:
    request = getattr(payload, "request", None)
    run = getattr(request, "run", None) if request is not None else None
    return NotReproduced(record.seq, record.hash, record.kind, record.goal, run, tuple(differences))
