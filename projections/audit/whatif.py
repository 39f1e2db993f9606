"""What-if (SPEC §7): a goal's recorded admission requests replayed under a changed config."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from quotaledger.journal import InvalidInput, Record, codes
from quotaledger.journal.clock import format_us
from quotaledger.projections import capacity as cap
from quotaledger.projections.audit.audit import recorded_decision
from quotaledger.projections.audit.goalfold import GoalFold
from quotaledger.projections.capacity.events import (
    DEQUEUED,
    CapacityDequeued,
    CapacityQueued,
    QueuedRef,
)
from quotaledger.projections.capacity.queue import (
    all_queueable,
    decide_in_queue,
    goal_queue,
    next_step,
)

# -- what-if ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Overrides:
    """The config fields a what-if changes, applied by configure's rule (SPEC §3.5):
    only these fields change, and a derived default never set explicitly follows its
    source (so "what if I had 6 slots" moves a default target and caps)."""

    fields: dict[str, Any] = field(default_factory=dict)
    caps: dict[str, Any] = field(default_factory=dict)
    """`cap_tokens`, `cap_usd` (SPEC §12.4): caps the replay holds the goal to."""
    price: cap.PriceSet | None = None
    """A model's price from the start of the replay (SPEC §12.5): its recorded prices
    from then on are not used."""

    @classmethod
    def of(
        cls,
        fields: Mapping[str, Any],
        caps: Mapping[str, Any] | None = None,
        price: cap.PriceSet | None = None,
    ) -> "Overrides":
        given = {k: v for k, v in (caps or {}).items() if v is not None}
        if "cap_usd" in given:
            micro = cap.micro_of(given["cap_usd"])
            if micro is None:
                wrong = given["cap_usd"]
                raise InvalidInput(
                    f"cap_usd must be dollars from 0 with at most 6 decimals, got {wrong!r}",
                    code=codes.INVALID_USD,
                )
            given["cap_usd"] = cap.usd_number(micro)
        return cls(cap.given_fields(fields), given, price)

    def apply_caps(
        self, goal: cap.GoalCapacity, recorded: cap.Caps | None, at: str
    ) -> cap.Caps | None:
        """The caps in force in the replay after a configure that recorded `recorded`:
        the overridden amounts on the recorded caps; without recorded caps, the replay's
        own, counted on from `goal`'s spend (or new, counting from `at`)."""
        if not self.caps:
            return recorded
        base = recorded if recorded is not None else goal.caps
        if base is None:
            zero = cap.counted_of(cap.ZERO_TOTALS)
            return cap.Caps(
                cap_tokens=self.caps.get("cap_tokens"),
                cap_usd=self.caps.get("cap_usd"),
                cap_since=at,
                counted=zero,
            )
        counted = base.counted if recorded is not None else cap.counted_of(cap.spent_totals(goal))
        return msgspec.structs.replace(base, counted=counted, **self.caps)

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
        current = cap.Config(cases, tokens, tuple(explicit))
        flat = current.flat()
        applicable = {n: v for n, v in self.fields.items() if self._applies(n, flat)}
        try:
            new = cap.reconfigure(current, applicable)
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
        quotas = [cap.dimension_fields(d)[0] for d in cap.DIMENSIONS]
        for dimension in cap.DIMENSIONS:
            names = cap.dimension_fields(dimension)
            if name in names:
                return flat[names[0]] is not None or names[0] in given
        # a token-gate field of no one dimension
        return any(flat[q] is not None or q in given for q in quotas)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.changes().items())

    def changes(self) -> dict[str, Any]:
        """Every override, as `whatif`'s `changes` lists them."""
        price = {} if self.price is None else price_changes(self.price)
        return {**self.fields, **self.caps, **price}


def price_changes(price: cap.PriceSet) -> dict[str, Any]:
    """A what-if price as `changes` lists it: the model and its four figures."""
    return {"price_model": price.model} | {n: getattr(price, n) for n in cap.PRICE_FIELDS}


def override_price(state: cap.CapacityState, price: cap.PriceSet, seq: int, at_us: int) -> None:
    """Put `price` in force in `state` for every record after `seq` (a replay's start)."""
    book = state.prices.get(cap.PRICES_KEY)
    if book is None:
        book = state.prices[cap.PRICES_KEY] = cap.PriceBook()
    micro = tuple(cap.micro_of(getattr(price, n)) or 0 for n in cap.PRICE_FIELDS)
    book.models.setdefault(price.model, []).append(
        cap.ModelPrice(per_mtok_micro=micro, at_us=at_us, seq=seq)  # type: ignore[arg-type]
    )


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


@dataclass
class Wait:
    """A queued entry of the replayed range (SPEC §12.2): when it started, recorded and
    replayed (None: never, within the range), and what held it in the replay."""

    seq: int
    goal: str
    run: str
    queued_at: str
    recorded_at: str | None = None
    whatif_at: str | None = None
    whatif_reasons: tuple[str, ...] = ()


def _later(whatif_at: str | None, recorded_at: str | None) -> bool:
    """Does the replay start an entry later than it was (never counts as latest)?
    Canonical times compare as text."""
    if whatif_at is None:
        return True
    return recorded_at is not None and whatif_at > recorded_at


@dataclass(frozen=True)
class PromotionFlip:
    """A queued entry whose start the replay moves (SPEC §12.5): at once, later,
    earlier, or never (None)."""

    seq: int
    goal: str
    run: str
    queued_at: str
    recorded_admitted_at: str | None
    whatif_admitted_at: str | None
    whatif_reasons: tuple[str, ...]


def moved_promotions(waits: dict[int, Wait]) -> list[PromotionFlip]:
    """The queued entries of a replay whose replayed start differs from the recorded
    one (None: not within the range), by their queued seq."""
    return [
        PromotionFlip(
            w.seq,
            w.goal,
            w.run,
            w.queued_at,
            w.recorded_at,
            w.whatif_at,
            w.whatif_reasons if _later(w.whatif_at, w.recorded_at) else (),
        )
        for w in sorted(waits.values(), key=lambda w: w.seq)
        if w.recorded_at != w.whatif_at
    ]


class WhatIf(GoalFold):
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
        self.waits: dict[int, Wait] = {}
        """The queued entries of the range, by their capacity.queued seq."""

    def feed(self, record: Record, payload: Any) -> None:
        price = self.overrides.price
        if (
            self._replaying
            and price is not None
            and isinstance(payload, cap.PriceSet)
            and payload.model == price.model
        ):
            return  # the what-if price holds through the replay
        if self.price(record, payload):
            return
        at_us = self.record_at_us(record)
        if at_us is None:
            return
        if not self._replaying and (self.since_us is None or at_us >= self.since_us):
            self._start_replay()
            if price is not None:  # in force for this record and every later one
                override_price(self.state, price, record.seq - 1, at_us)
        if not self._replaying:
            cap.apply(self.state, record, payload)
            return
        if self.first_at is None:
            self.first_at = record.at
            self._start_caps(record.at)
        self.last_at = record.at
        cap.apply(self.state, record, self._counterfactual(record, payload, at_us))
        self._promote(record, at_us)

    def _start_replay(self) -> None:
        """From here on the config carries the overrides (validated once up front)."""
        self._replaying = True
        goal = self.state.goals.get(self.goal)
        if goal is not None:
            goal.cases, goal.tokens = self.overrides.apply(goal.cases, goal.tokens, goal.explicit)

    def _start_caps(self, at: str) -> None:
        """The caps in force when the replay starts (a goal without caps counts from here)."""
        goal = self.state.goals.get(self.goal)
        if goal is not None and self.overrides.caps:
            if goal.caps is None:
                goal.cap_totals = goal.totals
            goal.caps = self.overrides.apply_caps(goal, goal.caps, at)

    def _counterfactual(self, record: Record, payload: Any, at_us: int) -> Any:
        """The payload this record would have had in the replayed world."""
        goal = self.goal_state
        if isinstance(payload, cap.CapacityConfigured):
            cases, tokens = self.overrides.apply(payload.cases, payload.tokens, payload.explicit)
            caps = self.overrides.apply_caps(goal, payload.caps, record.at)
            return cap.CapacityConfigured(
                cases=cases,
                tokens=tokens,
                explicit=payload.explicit,
                **({} if caps is None else caps.members()),
            )
        if isinstance(payload, cap.CapacityRejected):
            plan = cap.plan_rejection(goal, at_us, payload.retry_after_s)
            return msgspec.structs.replace(payload, **plan.cooldown_fields())
        if isinstance(payload, cap.CapacityAdmitted) and payload.queued is not None:
            return self._recorded_promotion(record, payload, at_us)
        if isinstance(payload, CapacityDequeued):
            return self._dequeued(payload)
        recorded = recorded_decision(record, payload)
        if recorded is None:
            return payload  # observations and releases happen as recorded
        if isinstance(payload, CapacityQueued):
            return self._queued(record, payload, at_us)
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

    # -- the queue (SPEC §12.2): entries wait and are promoted in the replay ---------------

    def _queued(self, record: Record, payload: CapacityQueued, at_us: int) -> Any:
        """A recorded queued request, decided again with the replay's queue: admitted
        at once, waiting (as recorded), or refused for a reason that does not queue."""
        goal = self.goal_state
        request = payload.request
        decision = decide_in_queue(goal_queue(self.goal, goal), self.goal, request, at_us)
        self.decisions += 1
        wait = self.waits[record.seq] = Wait(record.seq, self.goal, request.run, record.at)
        if decision.ok:
            self.flips.append(
                Flip(
                    record.seq,
                    request.run,
                    record.at,
                    False,
                    True,
                    decision.reasons,
                    tuple(payload.reasons),
                    decision.idempotent,
                )
            )
            wait.whatif_at = record.at
            return decision.payload
        wait.whatif_reasons = decision.reasons
        if all_queueable(decision.reasons):
            return payload  # it waits, as recorded
        return decision.payload

    def _recorded_promotion(
        self, record: Record, payload: cap.CapacityAdmitted, at_us: int
    ) -> None:
        """A recorded promotion: the replay promotes by its own queue (`_promote`), so
        the record folds nothing; its time is the recorded start to compare with."""
        assert payload.queued is not None
        wait = self.waits.get(payload.queued.seq)
        if wait is None:
            return None
        wait.recorded_at = record.at
        goal = self.goal_state
        entry = goal.queue.get(payload.request.run)
        if wait.whatif_at is None and entry is not None and entry.waiting_at(at_us):
            view = goal_queue(self.goal, goal)
            wait.whatif_reasons = decide_in_queue(view, self.goal, entry.request, at_us).reasons
        return None

    def _dequeued(self, payload: CapacityDequeued) -> Any:
        """A recorded dequeue applies to an entry the replay still has waiting (a
        release of a run the replay admitted releases it); a refusal the replay's own
        promotions make for themselves."""
        goal = self.goal_state
        if payload.reason == "refused":
            return None
        if payload.run in goal.queue:
            return payload
        if payload.reason == "released" and payload.run in goal.runs:
            return cap.CapacityReleased(run=payload.run)
        return None

    def _promote(self, record: Record, at_us: int) -> None:
        """Every write promotes (SPEC §12.2): after each replayed record of the goal, the
        entries at the head of the replay's queue that now fit start, at its time."""
        goal = self.goal_state
        if not any(entry.waiting_at(at_us) for entry in goal.queue.values()):
            return
        while (step := next_step(goal_queue(self.goal, self.goal_state), at_us)) is not None:
            entry = step.waiting.entry
            wait = self.waits.get(entry.seq)
            if step.admits:
                receipt = step.decision.detail.receipt
                assert receipt is not None
                ref = QueuedRef(seq=entry.seq, at=format_us(entry.at_us))
                admitted = cap.CapacityAdmitted(request=entry.request, receipt=receipt, queued=ref)
                cap.apply(self.state, msgspec.structs.replace(record, kind=cap.ADMITTED), admitted)
                if wait is not None:
                    wait.whatif_at = record.at
            else:
                cap.apply(
                    self.state, msgspec.structs.replace(record, kind=DEQUEUED), step.dequeued()
                )
                if wait is not None:
                    wait.whatif_reasons = step.decision.reasons

    def promotion_flips(self) -> list[PromotionFlip]:
        return moved_promotions(self.waits)

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
            "the queue is replayed too: a queued request is decided again with the "
            "replay's queue (admitted at once, waiting, or refused for a reason that does "
            "not queue), every replayed event of the goal promotes the entries that then "
            "fit, in queue order, and the recorded promotions give way to the replay's; "
            "cancels and releases of queued runs happen as recorded",
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
