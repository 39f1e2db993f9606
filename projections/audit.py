"""Operators' questions of a goal's history (SPEC §7): audit, what-if, timelines.

Pure: every function works on records and folded state handed to it, never on a
file. The decisions are re-taken with `projections.capacity.decide_admission`, looked
up on the module at call time: the audit runs the very function `admit` runs (and a
rule changed in the code shows as "not reproduced").

- `audit_decision`: the state just before a journaled decision, the recorded request
  and time -> replayed decision and whether it reproduces the record; the
  application explains it (binding constraint, shortfall, window composition from
  `top_contributors`, reservations, cooldown, coverage, earliest admissible time).
- `WhatIf`: a counterfactual replay of a goal's recorded admission requests under a
  changed config, listing the decisions that flip.
- `Timeline`: the goal's usage, reservations and limits sampled at every time they
  change (event times, samples leaving the window, leases and cooldowns ending), for
  the report's step charts.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgspec

from quotaledger.journal import InvalidInput, Record, codes
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.projections import capacity as cap
from quotaledger.projections import configrule as rule
from quotaledger.projections import hosts, settlement
from quotaledger.projections.configfields import ConfigFields

TOP_CONTRIBUTORS = 5
"""Runs listed in an explanation's window composition."""

SETTLEMENT_DECISION_KINDS = (
    settlement.BUDGET_CONFIGURED,
    settlement.TURN_OPENED,
    settlement.TURN_WRITEBACK_VERIFIED,
    settlement.QUOTA_SPENT,
)
"""Journaled settlement decisions: every input is in the event, so they replay too."""

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

    @property
    def at_us(self) -> int:
        return parse_at(self.at)


def recorded_decision(record: Record, payload: Any) -> RecordedDecision | None:
    """The admission decision a record holds, or None for any other event."""
    if record.goal is None:
        return None
    receipt: cap.Receipt | None = None
    if isinstance(payload, cap.CapacityAdmitted):
        receipt = payload.receipt
        # A receipt is the figures plus what the admission took; keep just the figures,
        # which is what a refusal records.
        figures = cap.Figures(**{f: getattr(receipt, f) for f in cap.Figures.__struct_fields__})
        reasons: tuple[str, ...] = ()
    elif isinstance(payload, cap.CapacityRefused):
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


def audit_decision(goal: cap.GoalCapacity, recorded: RecordedDecision) -> Audit:
    """Re-take a journaled decision on `goal` (folded from every record before it)."""
    at_us = recorded.at_us
    replayed = cap.decide_admission(goal, recorded.request, at_us)
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


# -- what-if ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Overrides:
    """The config fields a what-if changes, applied by configure's rule (SPEC §3.5):
    only these fields change, and a derived default never set explicitly follows its
    source (so "what if I had 6 slots" moves a default target and caps)."""

    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, fields: ConfigFields) -> "Overrides":
        return cls(rule.given_fields(fields))

    def apply(
        self,
        cases: cap.CaseConfig | None,
        tokens: cap.TokenConfig | None,
        explicit: tuple[str, ...] | list[str] = (),
    ) -> tuple[cap.CaseConfig | None, cap.TokenConfig | None]:
        """The recorded config with the given fields changed (exit 2 if that is invalid).

        A gate or dimension the record does not configure stays absent, unless the
        overrides name its defining field (`max_active_cases`, a quota): then it is
        built from the defaults and the given fields.
        """
        if not self.fields:
            return cases, tokens
        current = rule.Config(cases, tokens, tuple(explicit))
        flat = current.flat()
        applicable = {n: v for n, v in self.fields.items() if self._applies(n, flat)}
        try:
            new = rule.reconfigure(current, applicable)
        except InvalidInput as exc:
            problems = exc.context.get("problems") or [str(exc)]
            raise InvalidInput(
                "the what-if config is invalid: " + "; ".join(problems),
                code=codes.INVALID_CONFIG,
                problems=problems,
            ) from None
        return new.cases, new.tokens

    def _applies(self, name: str, flat: dict[str, Any]) -> bool:
        """Does an override of `name` apply to a config whose values are `flat`?"""
        given = self.fields
        if name in cap.CASE_FIELDS:
            return flat["max_active_cases"] is not None or "max_active_cases" in given
        quotas = [rule.dimension_fields(d)[0] for d in cap.DIMENSIONS]
        for dimension in cap.DIMENSIONS:
            names = rule.dimension_fields(dimension)
            if name in names:
                return flat[names[0]] is not None or names[0] in given
        # a token-gate field of no one dimension
        return any(flat[q] is not None or q in given for q in quotas)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.fields.items())


@dataclass(frozen=True)
class Flip:
    seq: int
    run: str
    at: str
    recorded_admitted: bool
    whatif_admitted: bool
    whatif_reasons: tuple[str, ...]
    recorded_reasons: tuple[str, ...]
    whatif_idempotent: bool


class _GoalFold:
    """Folds one goal's capacity records, in journal order, up to the end of a range."""

    def __init__(self, goal: str, since_us: int | None, until_us: int | None) -> None:
        self.goal = goal
        self.since_us = since_us
        self.until_us = until_us
        self.state = cap.CapacityState()

    @property
    def goal_state(self) -> cap.GoalCapacity:
        return cap.goal_of(self.state, self.goal)

    def _at_us(self, record: Record) -> int | None:
        """The record's time, or None for a record this fold skips (other goal, past the end)."""
        if record.goal != self.goal or record.kind not in cap.EVENTS:
            return None
        at_us = parse_at(record.at)
        if self.until_us is not None and at_us > self.until_us:
            return None
        return at_us


class WhatIf(_GoalFold):
    """Replays one goal's records under `overrides`; feed every record in journal order.

    Before `since_us` the records fold as recorded; from then on the config is the
    recorded one with the overrides applied, each recorded admission request is
    decided again at its recorded time, and what the replay admitted holds its case
    slot and forecast until its recorded release, its lease's end, or the end of the
    range. Observed usage is the recorded usage. Provider rejections happen at their
    recorded times and their cooldowns follow the replayed config.
    """

    def __init__(
        self,
        goal: str,
        overrides: Overrides,
        *,
        since_us: int | None = None,
        until_us: int | None = None,
    ) -> None:
        super().__init__(goal, since_us, until_us)
        self.overrides = overrides
        self.decisions = 0
        self.flips: list[Flip] = []
        self.first_at: str | None = None
        self.last_at: str | None = None
        self._replaying = False

    def feed(self, record: Record, payload: Any) -> None:
        at_us = self._at_us(record)
        if at_us is None:
            return
        if not self._replaying and (self.since_us is None or at_us >= self.since_us):
            self._start_replay()
        if not self._replaying:
            cap.apply(self.state, record, payload)
            return
        if self.first_at is None:
            self.first_at = record.at
        self.last_at = record.at
        cap.apply(self.state, record, self._counterfactual(record, payload, at_us))

    def _start_replay(self) -> None:
        """From here on the config carries the overrides (validated once up front)."""
        self._replaying = True
        goal = self.state.goals.get(self.goal)
        if goal is not None:
            goal.cases, goal.tokens = self.overrides.apply(goal.cases, goal.tokens, goal.explicit)

    def _counterfactual(self, record: Record, payload: Any, at_us: int) -> Any:
        """The payload this record would have had in the replayed world."""
        goal = self.goal_state
        if isinstance(payload, cap.CapacityConfigured):
            cases, tokens = self.overrides.apply(payload.cases, payload.tokens, payload.explicit)
            return cap.CapacityConfigured(cases=cases, tokens=tokens, explicit=payload.explicit)
        if isinstance(payload, cap.CapacityRejected):
            plan = cap.plan_rejection(goal, at_us, payload.retry_after_s)
            return msgspec.structs.replace(
                payload,
                cooldown_s=plan.cooldown_s,
                clamped=plan.clamped,
                cooldown_until=format_us(plan.cooldown_until_us),
                streak=plan.streak,
            )
        recorded = recorded_decision(record, payload)
        if recorded is None:
            return payload  # observations and releases happen as recorded
        decision = cap.decide_admission(goal, recorded.request, at_us)
        self.decisions += 1
        if decision.ok != recorded.admitted:
            self.flips.append(
                Flip(
                    record.seq,
                    recorded.request.run,
                    record.at,
                    recorded.admitted,
                    decision.ok,
                    decision.reasons,
                    recorded.reasons,
                    decision.idempotent,
                )
            )
        # What admit would have appended (None for an idempotent replay: fold nothing).
        return decision.payload

    def assumptions(self) -> list[str]:
        """Every assumption the replay makes, stated for the operator."""
        changes = self.overrides.describe() or "none (the recorded config)"
        end = format_us(self.until_us) if self.until_us is not None else "the end of the journal"
        start = format_us(self.since_us) if self.since_us is not None else "the goal's first event"
        notes = [
            f"config changes: {changes}; only these fields change, applied on top of each "
            "recorded configure (and of the config in force when the range starts); every "
            "other field keeps its recorded value",
            f"range: from {start} to {end}; events before the range fold as recorded",
            "every recorded admission request (capacity.admitted and capacity.refused "
            "events) is decided again at its recorded time, in journal order, by the same "
            "decision function as admit; requests that were never journaled (dry runs, "
            "idempotent replays) are not replayed",
            "observed usage is the recorded usage: a run refused in the replay is assumed "
            "to have consumed what was observed anyway",
            "a run admitted in the replay holds its forecast and case slot until its "
            "recorded release, the end of its lease (renewed by its observations), or the "
            "end of the range",
            "a run admitted in reality but refused in the replay holds nothing",
            "provider rejections (429) happen at their recorded times; their cooldowns are "
            "recomputed under the replayed config (Retry-After as recorded)",
            "recorded configures apply even when the replay's occupancy exceeds their case "
            "limits (config_below_occupancy is not re-checked)",
        ]
        notes.append(
            "the overrides are applied by configure's rule: a derived default never set "
            "explicitly (a target from its quota, target_active_cases and the case caps "
            "from max_active_cases) follows its source; a value set explicitly keeps its "
            "recorded value unless overridden too"
        )
        return notes


# -- the timeline of a goal (for the report) --------------------------------------------


class Point(msgspec.Struct, frozen=True, gc=False):
    """The goal as of `at_us` (values hold until the next point).

    A Struct untracked by the cycle collector (it holds numbers, a string and a dict of
    number tuples, never a cycle): a long report keeps one per change point, about a
    hundred thousand, and a dataclass cost several times as much to build."""

    at_us: int
    uncached_input_tpm: float
    cached_input_weighted_tpm: float
    output_tpm: float
    usage_tpm: float
    reserved_tpm: int
    load_tpm: float
    target_tpm: int | None
    quota_tpm: int | None
    solver_limit_tpm: int | None
    active_runs: int
    cooldown_active: bool
    coverage: str
    dimensions: dict[str, tuple[cap.Number, cap.Number, int]] = msgspec.field(default_factory=dict)
    """itpm, otpm, rpm where configured: (usage, load, target)."""


def point_of(ev: cap.Evaluation) -> Point:
    """The point of an evaluation: what `Timeline` computes without one (the reference
    its fast path is tested against)."""
    parts = ev.usage.parts
    tokens = ev.tokens
    weight = tokens.cached_input_weight if tokens is not None else 1.0
    return Point(
        at_us=ev.at_us,
        uncached_input_tpm=parts.uncached_input,
        cached_input_weighted_tpm=parts.cached_input * weight,
        output_tpm=parts.output,
        usage_tpm=ev.usage.usage_tpm,
        reserved_tpm=ev.reserved_tpm,
        load_tpm=ev.load_tpm,
        target_tpm=None if tokens is None else tokens.target_tpm,
        quota_tpm=None if tokens is None else tokens.quota_tpm,
        solver_limit_tpm=ev.available_tpm("solver"),
        active_runs=ev.active_cases.total,
        cooldown_active=ev.cooldown_active,
        coverage=ev.usage.coverage,
        dimensions={
            d: (s.usage, s.load, s.limit.target)
            for d, s in ev.dimensions.items()
            if d != "tpm" and s.limit is not None
        },
    )


@dataclass(frozen=True)
class Cooldown:
    start_us: int
    end_us: int
    run: str | None
    retry_after_s: cap.Number | None
    cooldown_s: cap.Number


class _Held(NamedTuple):
    """An active run as the timeline needs it: when it stops holding its forecasts."""

    lease_until_us: int | None
    forecasts: tuple[int, ...]
    """Its forecast of each of `cap.DIMENSIONS` (0 where it gives none)."""


def _reserved(held: list[_Held]) -> tuple[int, ...]:
    """Each dimension's sum of the forecasts of `held`."""
    totals = [0] * len(cap.DIMENSIONS)
    for run in held:
        for index, forecast in enumerate(run.forecasts):
            totals[index] += forecast
    return tuple(totals)


class _Sampler:
    """A goal's figures at times at or after its latest folded event, without an
    `Evaluation` per time.

    Between two event times only the window's samples, the leases in force, the
    cooldown and the provider reports' liveness change; the config, the runs, the
    reports and the running totals are read once per event time (`refresh`), and the
    window's first sample steps forward from `goal.head` (where the fold left it at the
    latest event). `point(t)` equals `point_of(cap.evaluate(goal, t))`
    (tests/operators/test_report_timeline.py checks it at every point)."""

    def __init__(self, goal: cap.GoalCapacity) -> None:
        self.goal = goal
        self.start = goal.head
        self.now_totals = cap.ZERO_TOTALS
        self.held: list[_Held] = []
        self.leased = False
        """Whether a held run has a lease: then which runs hold depends on the time."""
        self.reserved: tuple[int, ...] = _reserved([])
        self.timers: list[int] = []
        """When a lease, the cooldown or a provider report ends after the latest event,
        sorted: with the samples leaving the window, the times a figure changes."""
        self.refresh(changed=True)

    def refresh(self, *, changed: bool) -> None:
        """Take up the goal's latest event time; `changed`: its events may have changed
        more than the window (config, runs, leases, cooldown, provider reports)."""
        goal = self.goal
        self.start = goal.head
        samples = goal.samples
        self.now_totals = samples[-1].totals if samples else goal.base_totals
        if not changed:
            return
        self._configured(goal.tokens)
        last_us = goal.last_at_us
        runs = [
            r for r in goal.runs.values() if r.admitted_at_us <= last_us and r.active_at(last_us)
        ]
        self.held = [
            _Held(
                r.lease_until_us, tuple(cap.forecast_of(r.request, d) or 0 for d in cap.DIMENSIONS)
            )
            for r in runs
        ]
        self.leased = any(r.lease_until_us is not None for r in runs)
        self.reserved = _reserved(self.held)
        timers = {r.lease_until_us for r in runs if r.lease_until_us is not None}
        if goal.cooldown_until_us is not None:
            timers.add(goal.cooldown_until_us)
        timers.update(report.ends_us() for report in goal.provider.values())
        self.timers = sorted(t for t in timers if t > last_us)

    def _configured(self, tokens: cap.TokenConfig | None) -> None:
        self.weight = tokens.cached_input_weight if tokens is not None else 1.0
        self.target_tpm = None if tokens is None else tokens.target_tpm
        self.quota_tpm = None if tokens is None else tokens.quota_tpm
        limits = cap.limits_of(tokens)
        tpm = limits.get("tpm")
        self.solver_limit_tpm = None if tpm is None else tpm.target - tpm.evaluator_reserve
        self.limited = [
            (index, dimension, limit.target)
            for index, dimension in enumerate(cap.DIMENSIONS)
            if dimension != "tpm" and (limit := limits.get(dimension)) is not None
        ]
        """The configured dimensions other than tpm: (index, name, target)."""

    def window_start(self, at_us: int) -> int:
        """The first sample counting at `at_us` (no earlier than the last time asked)."""
        samples = self.goal.samples
        start, count = self.start, len(samples)
        cutoff_us = at_us - cap.WINDOW_US
        while start < count and samples[start].at_us <= cutoff_us:
            start += 1
        self.start = start
        return start

    def next_change(self, after_us: int) -> int | None:
        """The first time after `after_us` at which a figure changes with no event: the
        window's oldest sample leaves it, or a timer ends; None if nothing will."""
        samples = self.goal.samples
        start = self.window_start(after_us)
        found = samples[start].at_us + cap.WINDOW_US if start < len(samples) else None
        for timer_us in self.timers:
            if timer_us > after_us:
                return timer_us if found is None or timer_us < found else found
        return found

    def point(self, at_us: int) -> Point:
        goal = self.goal
        start = self.window_start(at_us)
        before = goal.samples[start - 1].totals if start else goal.base_totals
        u1, c1, w1, o1, r1, m1, e1 = self.now_totals
        u0, c0, w0, o0, r0, m0, e0 = before
        uncached, cached, cache_write, output = u1 - u0, c1 - c0, w1 - w0, o1 - o0
        weight = self.weight
        usage_tpm = cap.weighted_tpm(uncached, cached, output, weight, cache_write)
        reserved, active = self.reserved, len(self.held)
        if self.leased:
            held = [h for h in self.held if h.lease_until_us is None or h.lease_until_us > at_us]
            reserved, active = _reserved(held), len(held)
        dimensions: dict[str, tuple[cap.Number, cap.Number, int]] = {}
        if self.limited:
            window = (uncached, cached, cache_write, output, r1 - r0, m1 - m0, e1 - e0)
            dimensions = self._dimensions(window, reserved, at_us)
        cooldown_us = goal.cooldown_until_us
        return Point(
            at_us=at_us,
            uncached_input_tpm=uncached,
            cached_input_weighted_tpm=cached * weight,
            output_tpm=output,
            usage_tpm=usage_tpm,
            reserved_tpm=reserved[0],
            load_tpm=(
                self._load("tpm", usage_tpm, reserved[0], at_us)
                if goal.provider
                else max(usage_tpm, reserved[0], 0)  # `_load` without a provider report
            ),
            target_tpm=self.target_tpm,
            quota_tpm=self.quota_tpm,
            solver_limit_tpm=self.solver_limit_tpm,
            active_runs=active,
            cooldown_active=cooldown_us is not None and at_us < cooldown_us,
            coverage="unmetered" if m1 - m0 else "estimated" if e1 - e0 else "measured",
            dimensions=dimensions,
        )

    def _dimensions(
        self, window: cap.Totals, reserved: tuple[int, ...], at_us: int
    ) -> dict[str, tuple[cap.Number, cap.Number, int]]:
        found: dict[str, tuple[cap.Number, cap.Number, int]] = {}
        for index, dimension, target in self.limited:
            usage = cap.dimension_usage(window, self.weight, dimension)
            found[dimension] = (usage, self._load(dimension, usage, reserved[index], at_us), target)
        return found

    def _load(self, dimension: str, usage: cap.Number, reserved: int, at_us: int) -> cap.Number:
        """`DimensionState.load`: the largest of usage, reservations and the count of a
        live provider report."""
        report = self.goal.provider.get(dimension)
        used = None
        if (
            report is not None
            and report.at_us <= at_us
            and report.live_at(at_us)
            and report.limit is not None
            and report.remaining is not None
        ):
            used = max(0, report.limit - report.remaining)
        return max(usage, reserved, used or 0)


class Timeline(_GoalFold):
    """Samples a goal at every time its figures can change; feed every record in order.

    Usage is a step function of time: it changes only at an observation's time and 60 s
    later, when the sample leaves the window; reservations change at admissions,
    releases and lease ends; limits at configures. Sampling at exactly those times
    makes a step chart of the points exact. The next such time comes from the state
    alone (the window's oldest sample, the leases, cooldown and provider reports in
    force), so a timeline can start from any folded state, a checkpoint's included, and
    before `since_us` it only follows the fold.

    By default it folds the goal's records itself. With `folded`, the caller folds each
    record into that state right after `feed` has seen it (the journal's own fold, in
    `Journal.replay`), and the timeline only reads the state.
    """

    def __init__(
        self,
        goal: str,
        *,
        since_us: int | None = None,
        until_us: int | None = None,
        folded: Callable[[], cap.CapacityState] | None = None,
    ) -> None:
        super().__init__(goal, since_us, until_us)
        self.points: list[Point] = []
        self.decisions: list[RecordedDecision] = []
        self.cooldowns: list[Cooldown] = []
        self.rejections = 0
        self.releases = 0
        self.observations = 0
        self.configs: list[tuple[str, cap.CapacityConfigured]] = []
        self._folded = folded
        self._bound = False
        self._sampler: _Sampler | None = None
        self._stale = False
        """The goal folded events since the sampler last took up its state."""
        self._changed = True
        """Those events may have changed more than the window (see `_may_change_more`)."""
        self._group_us: int | None = None
        self._last_us: int | None = None
        self._finished = False
        self._started = since_us is None

    def feed(self, record: Record, payload: Any) -> None:
        if record.goal != self.goal or record.kind not in cap.EVENTS or self._finished:
            return
        if not self._bound:
            self._bind()
        at_us = parse_at(record.at)
        if self.until_us is not None and at_us > self.until_us:
            self.finish()  # the state is the range's end now: nothing later folds into it
            return
        if at_us != self._group_us:
            self._close_group()
            self._advance_to(at_us)
            self._group_us = at_us
        self._stale = True
        if not self._changed:
            self._changed = self._may_change_more(payload)
        if self._folded is None:
            cap.apply(self.state, record, payload)
        self._last_us = at_us
        if self.since_us is None or at_us >= self.since_us:
            self._note(record, payload, at_us)

    def finish(self) -> None:
        """Sample to the end of the range (default: 60 s after the last event)."""
        if self._finished:
            return
        if not self._bound:
            self._bind()
        self._close_group()
        self._finished = True
        if self.until_us is not None:
            end_us = self.until_us
        elif self._last_us is not None:
            end_us = self._last_us + cap.WINDOW_US
        else:
            return
        self._advance_to(end_us)
        if self._last_us is not None and (self.since_us is None or end_us >= self.since_us):
            self._sample(end_us)

    def _bind(self) -> None:
        """Take up the state as the first record of the goal finds it (or the end):
        empty, or a checkpoint's holding the goal's events before the range."""
        self._bound = True
        if self._folded is not None:
            self.state = self._folded()
        goal = self.state.goals.get(self.goal)
        if goal is not None:
            self._last_us = goal.last_at_us
            self._stale = True

    def _may_change_more(self, payload: Any) -> bool:
        """Whether folding this event may change more than the window: anything but an
        observation without a provider report that renews no lease."""
        if not isinstance(payload, cap.CapacityObserved) or payload.provider is not None:
            return True
        return payload.run is not None and (self._sampler is None or self._sampler.leased)

    def _note(self, record: Record, payload: Any, at_us: int) -> None:
        if isinstance(payload, cap.CapacityObserved):  # most events: counted first
            self.observations += 1
            return
        decision = recorded_decision(record, payload)
        if decision is not None:
            self.decisions.append(decision)
        elif isinstance(payload, cap.CapacityRejected):
            self.rejections += 1
            self.cooldowns.append(
                Cooldown(
                    at_us,
                    parse_at(payload.cooldown_until),
                    payload.run,
                    payload.retry_after_s,
                    payload.cooldown_s,
                )
            )
        elif isinstance(payload, cap.CapacityReleased):
            self.releases += 1
        elif isinstance(payload, cap.CapacityConfigured):
            self.configs.append((record.at, payload))

    def _close_group(self) -> None:
        """Every event at the group's time is folded: sample it (in the range)."""
        group_us = self._group_us
        if group_us is None:
            return
        self._group_us = None
        if self.since_us is None or group_us >= self.since_us:
            self._sample(group_us)

    def _fresh_sampler(self) -> _Sampler | None:
        """The sampler on the state folded so far (None while the goal has no event)."""
        sampler = self._sampler
        if not self._stale:
            return sampler
        self._stale = False
        if sampler is None:
            goal = self.state.goals.get(self.goal)
            if goal is None:
                return None
            sampler = self._sampler = _Sampler(goal)
        else:
            sampler.refresh(changed=self._changed)
        self._changed = False
        return sampler

    def _advance_to(self, until_us: int) -> None:
        """Sample the change points before `until_us` (the state holds until then)."""
        if self._last_us is None:
            return  # nothing folded yet: nothing changes
        since_us = self.since_us
        if not self._started:
            if since_us is None or until_us <= since_us:
                return  # before the range: nothing is sampled, so nothing to look for
            self._sample(since_us)
        sampler = self._fresh_sampler()
        assert sampler is not None
        point_us = sampler.next_change(self.points[-1].at_us if self.points else self._last_us)
        while point_us is not None and point_us < until_us:
            self._sample(point_us)
            point_us = sampler.next_change(point_us)

    def _sample(self, at_us: int) -> None:
        self._started = True
        if self.points and at_us <= self.points[-1].at_us:
            return
        sampler = self._fresh_sampler()
        assert sampler is not None
        self.points.append(sampler.point(at_us))


def merged_cooldowns(cooldowns: list[Cooldown]) -> list[tuple[int, int]]:
    """The time spans during which a cooldown was active (overlaps merged)."""
    spans: list[tuple[int, int]] = []
    for c in sorted(cooldowns, key=lambda c: c.start_us):
        if spans and c.start_us <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], c.end_us))
        else:
            spans.append((c.start_us, c.end_us))
    return spans


def seconds(delta_us: int) -> float:
    return delta_us / US_PER_S
