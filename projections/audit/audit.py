"""Audit (SPEC §7): a journaled decision re-taken on the state just before it."""

from dataclasses import dataclass
from typing import Any

import msgspec

from quotaledger.journal import InvalidInput, Record, codes
from quotaledger.journal.clock import parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections import hosts, settlement
from quotaledger.projections.capacity.events import CapacityQueued
from quotaledger.projections.capacity.queue import decide_in_queue, goal_queue, pool_queue

TOP_CONTRIBUTORS = 5
"""Runs listed in an explanation's window composition."""

SETTLEMENT_DECISION_KINDS = (
    settlement.TURN_OPENED,
    settlement.TURN_WRITEBACK_VERIFIED,
    settlement.QUOTA_SPENT,
)
"""Journaled settlement decisions: every input is in the event, so they replay too.
`budget.configured` is not one: it records a setting, which nothing refuses."""

HOST_DECISION_KINDS = (hosts.PHASE_APPENDED, hosts.ATTEMPT_STARTED)
"""Journaled host decisions: their inputs (handoff file, --cursor, --max-attempts,
--max-phase) are not all recorded, so they cannot be re-decided from the journal."""


# -- the decision events ---------------------------------------------------------------


@dataclass(frozen=True)
class RecordedDecision:
    """A journaled admission decision (`capacity.admitted` or `capacity.refused`)."""

    seq: int
    hash: str
    kind: str
    at: str
    goal: str
    request: cap.AdmitRequest
    admitted: bool
    reasons: tuple[str, ...]
    figures: cap.Figures
    receipt: cap.Receipt | None
    queued_at: str | None = None
    """A promotion's: when its entry was queued (SPEC §12.2)."""

    @property
    def at_us(self) -> int:
        return parse_at(self.at)


def recorded_decision(record: Record, payload: Any) -> RecordedDecision | None:
    """The admission decision a record holds, or None for any other event."""
    if record.goal is None:
        return None
    receipt: cap.Receipt | None = None
    queued_at = None
    if isinstance(payload, cap.CapacityAdmitted):
        receipt = payload.receipt
        queued_at = None if payload.queued is None else payload.queued.at
        # A receipt is the figures plus what the admission took; keep just the figures,
        # which is what a refusal records.
        figures = cap.Figures(**{f: getattr(receipt, f) for f in cap.Figures.__struct_fields__})
        reasons: tuple[str, ...] = ()
    elif isinstance(payload, cap.CapacityRefused | CapacityQueued):
        figures, reasons = payload.figures, tuple(payload.reasons)
    else:
        return None
    return RecordedDecision(
        record.seq,
        record.hash,
        record.kind,
        record.at,
        record.goal,
        payload.request,
        receipt is not None,
        reasons,
        figures,
        receipt,
        queued_at,
    )


# -- audit ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Audit:
    recorded: RecordedDecision
    replayed: cap.AdmissionDecision
    differences: tuple[str, ...]

    @property
    def reproduced(self) -> bool:
        return not self.differences


def audit_decision(
    goal: cap.GoalCapacity, recorded: RecordedDecision, pool: cap.PoolContext | None = None
) -> Audit:
    """Re-take a journaled decision on `goal` (folded from every record before it), in
    its pool (every member folded as far) for a pooled goal."""
    at_us = recorded.at_us
    if pool is None:
        view = goal_queue(recorded.goal, goal)
    else:  # the pool's one queue: every member's entries (SPEC §12.2)
        view = pool_queue(pool.with_member(recorded.goal, goal))
    replayed = decide_in_queue(view, recorded.goal, recorded.request, at_us)
    return Audit(recorded, replayed, compare(recorded, replayed))


def compare(recorded: RecordedDecision, replayed: cap.AdmissionDecision) -> tuple[str, ...]:
    """What differs between the record and the replay (empty: reproduced)."""
    found: list[str] = []
    if replayed.idempotent:
        # An idempotent replay appends nothing: a journaled decision never is one.
        found.append("replayed: an idempotent replay of an active run (appends nothing)")
    if recorded.admitted != replayed.ok:
        found.append(f"admitted: recorded {recorded.admitted}, replayed {replayed.ok}")
    if recorded.reasons != replayed.reasons:
        found.append(
            f"reasons: recorded {list(recorded.reasons)}, replayed {list(replayed.reasons)}"
        )
    detail = replayed.detail
    if recorded.admitted and replayed.ok and not replayed.idempotent:
        assert recorded.receipt is not None and detail.receipt is not None
        found += _field_differences("receipt", recorded.receipt, detail.receipt)
    elif not recorded.admitted and not replayed.ok:
        found += _field_differences("figures", recorded.figures, detail.figures)
    return tuple(found)


FIGURES_ADDED_LATER = ("dimensions", "binding_dimension")
"""Members figures gained with dimensions (SPEC §3.6): figures recorded before them have
none, and the replay's are not compared with what was never recorded."""


def _field_differences(label: str, recorded: msgspec.Struct, replayed: msgspec.Struct) -> list[str]:
    left, right = msgspec.to_builtins(recorded), msgspec.to_builtins(replayed)
    if left.get("dimensions") == {}:
        for name in FIGURES_ADDED_LATER:
            left.pop(name, None)
            right.pop(name, None)
    return [
        f"{label}.{name}: recorded {left.get(name)!r}, replayed {right.get(name)!r}"
        for name in sorted(set(left) | set(right))
        if left.get(name) != right.get(name)
    ]


@dataclass(frozen=True)
class Contributor:
    """One run's (weighted) usage in the window at a time; `run` None is usage
    observed without `--run`."""

    run: str | None
    usage_tpm: cap.Number
    uncached_input: int
    cached_input: int
    output: int
    share: float | None
    """Of the window's usage (None when the window is empty)."""
    held: cap.ActiveRun | None
    """The run's active admission, if it holds one."""
    samples: list[cap.Sample]


def top_contributors(
    goal: cap.GoalCapacity, at_us: int, limit: int = TOP_CONTRIBUTORS
) -> list[Contributor]:
    """The runs with the most (weighted) usage in the window at `at_us`, with their samples."""
    weight = goal.tokens.cached_input_weight if goal.tokens is not None else 1.0
    by_run: dict[str | None, list[cap.Sample]] = {}
    for sample in cap.window_samples(goal, at_us):
        by_run.setdefault(sample.run, []).append(sample)
    active = {r.request.run: r for r in cap.active_runs_at(goal, at_us)}
    total = cap.usage_at(goal, at_us).usage_tpm
    rows: list[Contributor] = []
    for run, samples in by_run.items():
        parts = (
            sum(s.uncached_input for s in samples),
            sum(s.cached_input for s in samples),
            sum(s.output for s in samples),
        )
        usage_tpm = cap.weighted_tpm(*parts, weight)
        rows.append(
            Contributor(
                run,
                usage_tpm,
                *parts,
                share=round(usage_tpm / total, 4) if total else None,
                held=active.get(run) if run is not None else None,
                samples=samples,
            )
        )
    rows.sort(key=lambda row: (-row.usage_tpm, row.run is None, row.run or ""))
    return rows[:limit]


# -- settlement decisions ------------------------------------------------------------


@dataclass(frozen=True)
class SettlementAudit:
    """A journaled settlement decision re-taken on the state before it."""

    record: Record
    recorded_payload: Any
    replayed: settlement.TurnDecision | settlement.BudgetDecision
    differences: tuple[str, ...]

    @property
    def reproduced(self) -> bool:
        return not self.differences


def audit_settlement(
    state: settlement.SettlementState, record: Record, payload: Any
) -> SettlementAudit:
    """Re-take `budget configure` / `turn open|writeback|spend` with the recorded inputs."""
    goal = record.goal or ""
    replayed: settlement.TurnDecision | settlement.BudgetDecision
    if isinstance(payload, settlement.BudgetConfigured):
        replayed = settlement.decide_budget(
            state, goal, payload.allowed_units, payload.window_hours
        )
    elif isinstance(payload, settlement.TurnOpened):
        replayed = settlement.decide_open(
            state, goal, payload.agent, payload.turn, payload.task, parse_at(record.at)
        )
    elif isinstance(payload, settlement.TurnWritebackVerified):
        replayed = settlement.decide_writeback(
            state, goal, payload.agent, payload.turn, payload.amount
        )
    elif isinstance(payload, settlement.QuotaSpent):
        replayed = settlement.decide_spend(
            state, goal, payload.agent, payload.turn, payload.effect, payload.amount
        )
    else:
        raise InvalidInput(
            f"record {record.seq} ({record.kind}) is not a settlement decision",
            code=codes.NOT_A_DECISION,
        )
    found: list[str] = []
    if not replayed.ok:
        found.append(f"replayed: refused {list(replayed.reasons)}")
    elif replayed.idempotent:
        found.append("replayed: an idempotent replay (appends nothing)")
    elif replayed.kind != record.kind:
        found.append(f"kind: recorded {record.kind}, replayed {replayed.kind}")
    elif msgspec.to_builtins(replayed.payload) != msgspec.to_builtins(payload):
        found += _field_differences("data", payload, replayed.payload)  # type: ignore[arg-type]
    return SettlementAudit(record, payload, replayed, tuple(found))
