"""The product held to an independent model of SPEC §12.1 (`independent_pool.py`): a
hypothesis state machine over a pool of 2-5 goals (configure, observe with and without
provider reports, admit, release, reject, time passing). Every recorded decision
gives the model's reasons, and no admission takes a pool dimension past its target,
a goal past its borrowing limit, or another goal's guaranteed share."""

from __future__ import annotations

import os
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from quotaledger.api import Ledger
from quotaledger.journal.clock import US_PER_S, format_us, wall_us
from tests.capacity.independent_pool import Member, PoolModel

BASE_US = (wall_us() // US_PER_S - 10 * 86_400) * US_PER_S
"""Ten days ago, whole seconds: histories stay in the past (SPEC §2.2's bound)."""
SHARES = (0.1, 0.15, 0.2, 0.25, 0.3, 0.3333)
TARGETS = {"tpm": 1000, "rpm": 20, "tpd": 20_000}


@st.composite
def memberships(draw: Any) -> list[tuple[float, float, float]]:
    """2-5 members' (share, borrowing limit, lending limit), shares summing to <= 1."""
    count = draw(st.integers(2, 5))
    found = []
    left = 10_000
    for _ in range(count):
        choices = [s for s in SHARES if round(s * 10_000) <= left] or [0.0]
        share = draw(st.sampled_from(choices))
        left -= round(share * 10_000)
        room = round((1 - share) * 10_000)
        borrowing = draw(st.integers(0, room)) / 10_000
        lending = draw(st.integers(0, round(share * 10_000))) / 10_000
        found.append((share, borrowing, lending))
    return found


class PoolMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.ledger = Ledger.open(str(Path(self.dir.name) / "j.jsonl"))
        self.t_us = BASE_US
        self.runs = 0
        self.active: list[tuple[str, str]] = []
        self.model: PoolModel

    def teardown(self) -> None:
        if hasattr(self, "model"):
            self.check_the_journal()
        self.ledger.close()
        self.dir.cleanup()

    def at(self) -> str:
        return format_us(self.t_us)

    @initialize(terms=memberships(), weight=st.sampled_from([1.0, 0.5]))
    def configure(self, terms: list[tuple[float, float, float]], weight: float) -> None:
        limits = {}
        for dimension, target in TARGETS.items():
            limits[f"quota_{dimension}"] = target * 2
            limits[f"target_{dimension}"] = target
        self.ledger.pool_configure(
            pool="org", cached_input_weight=weight, cooldown_base_s=5, cooldown_max_s=40,
            at=self.at(), **limits,
        )  # fmt: skip
        self.model = PoolModel(
            targets=dict(TARGETS), weight=Fraction(str(weight)), cooldown_base_s=5,
            cooldown_max_s=40,
        )  # fmt: skip
        self.goals = [f"g{i}" for i in range(len(terms))]
        for goal, (share, borrowing, lending) in zip(self.goals, terms, strict=True):
            self.ledger.configure(
                goal=goal, pool="org", pool_share=share, pool_borrowing_limit=borrowing,
                pool_lending_limit=lending, at=self.at(),
            )  # fmt: skip
            self.model.members[goal] = Member(
                Fraction(str(share)), Fraction(str(borrowing)), Fraction(str(lending))
            )

    @rule(seconds=st.sampled_from([0, 1, 5, 20, 59, 60, 61, 3_600, 86_400]))
    def time_passes(self, seconds: int) -> None:
        self.t_us += seconds * US_PER_S

    @rule(
        index=st.integers(0, 4),
        uncached=st.integers(0, 400),
        cached=st.integers(0, 400),
        output=st.integers(0, 200),
        requests=st.one_of(st.none(), st.integers(0, 4)),
        with_run=st.booleans(),
        report=st.one_of(
            st.none(),
            st.tuples(st.sampled_from(["tpm", "rpm"]), st.integers(0, 3000), st.integers(1, 90)),
        ),
    )
    def observe(self, index: int, uncached: int, cached: int, output: int,
                requests: int | None, with_run: bool, report: Any) -> None:  # fmt: skip
        goal = self.goals[index % len(self.goals)]
        runs = [r for g, r in self.active if g == goal]
        run = runs[0] if with_run and runs else None
        provider = None
        model_report = None
        if report is not None:
            dimension, remaining, reset_s = report
            limit = 3000 if dimension == "tpm" else 60
            remaining = min(remaining, limit)
            reset_us = self.t_us + reset_s * US_PER_S
            provider = {
                dimension: {"limit": limit, "remaining": remaining, "reset_at": format_us(reset_us)}
            }
            model_report = {dimension: (limit, remaining, reset_us)}
        self.ledger.observe(
            goal=goal, run=run, uncached_input=uncached, cached_input=cached, output=output,
            requests=requests, provider=provider, at=self.at(),
        )  # fmt: skip
        self.model.observe(
            goal, self.t_us, run=run, uncached=uncached, cached=cached, output=output,
            requests=requests, report=model_report,
        )  # fmt: skip

    @rule(
        index=st.integers(0, 4),
        tpm=st.one_of(st.none(), st.integers(0, 1200)),
        rpm=st.integers(0, 25),
        tokens=st.one_of(st.integers(0, 25_000), st.none()),
    )
    def admit(self, index: int, tpm: int | None, rpm: int, tokens: int | None) -> None:
        goal = self.goals[index % len(self.goals)]
        self.runs += 1
        run = f"r{self.runs}"
        forecasts = {"forecast_tpm": tpm, "forecast_rpm": rpm, "forecast_tokens": tokens}
        expected = self.model.reasons(goal, forecasts, self.t_us)
        answer = self.ledger.admit(goal=goal, run=run, at=self.at(), **forecasts)
        figures = answer["receipt"] if answer["admitted"] else answer["figures"]
        for dimension, shown in figures["pool"]["dimensions"].items():
            load, _ = self.model.pool_load(dimension, self.t_us)
            assert abs(float(load) - shown["load"]) < 1e-5, (dimension, shown, load)
        if answer["admitted"]:
            assert expected == [], expected
            assert self.model.admission_holds(goal, forecasts, self.t_us)
            self.model.admit(goal, run, self.t_us, forecasts)
            self.active.append((goal, run))
        else:
            assert answer["reasons"] == expected
            self.model._next()

    @precondition(lambda self: bool(self.active))
    @rule(pick=st.integers(0, 100))
    def release(self, pick: int) -> None:
        goal, run = self.active.pop(pick % len(self.active))
        assert self.ledger.release(goal=goal, run=run, at=self.at())["released"]
        self.model.release(goal, run)

    @rule(index=st.integers(0, 4), retry_after=st.one_of(st.none(), st.integers(0, 60)))
    def reject(self, index: int, retry_after: int | None) -> None:
        goal = self.goals[index % len(self.goals)]
        self.ledger.reject(goal=goal, retry_after_s=retry_after, at=self.at())
        self.model.reject(self.t_us, retry_after)

    @rule(tpm=st.integers(100, 2000))
    def reconfigure(self, tpm: int) -> None:
        self.ledger.pool_configure(pool="org", target_tpm=tpm, at=self.at())
        self.model.targets["tpm"] = tpm

    def check_the_journal(self) -> None:
        """Every recorded decision re-decides as recorded (`verify --decisions`)."""
        assert self.ledger.verify(decisions=True)["ok"]

    @invariant()
    def pool_within_targets(self) -> None:
        """What the admissions reserve never exceeds a target (usage may: it is the
        provider's, observed after the fact)."""
        if not hasattr(self, "model"):
            return
        for dimension, target in self.model.targets.items():
            if dimension == "tpm" and target != TARGETS["tpm"]:
                continue  # a lowered target may leave what was admitted above it
            reserved = sum(
                (self.model.reserved(goal, dimension) for goal in self.model.members),
                Fraction(0),
            )
            assert reserved <= target, (dimension, reserved, target)


PoolMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("QUOTALEDGER_POOL_EXAMPLES", "40")),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_pool_machine = PoolMachine.TestCase
