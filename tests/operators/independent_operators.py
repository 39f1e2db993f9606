"""A second implementation of SPEC §3 (capacity admission), written from the SPEC text.

It imports nothing from quotaledger: journals it produces are written with the
independent writer of tests/journal/independent_verifier.py, and its answers to the
operators' questions (SPEC §7) are computed here, so quotaledger's `audit`, `whatif`,
`inspect`, `metrics`, `log` and `report` can be compared with an independent
computation on journals quotaledger never wrote.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.journal.independent_verifier import Writer

US = 1_000_000
WINDOW_US = 60 * US
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CASE_REASONS = [
    "target_capacity_exhausted",
    "total_capacity_exhausted",
    "baseline_capacity_exhausted",
    "test_capacity_exhausted",
    "reserved_test_capacity",
    "case_arm_required",
]
TOKEN_REASONS = [
    "token_forecast_required",
    "forecast_exceeds_target",
    "capacity_cooldown_active",
    "usage_unmetered_in_window",
    "usage_observation_stale",
    "token_headroom_exhausted",
    "evaluator_reserve_protected",
]
GROUP = {"baseline": "baseline", "control": "test", "treatment": "test", "explore": "test"}


def ts(us: int) -> str:
    return (EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def us_of(text: str) -> int:
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (moment - EPOCH) // timedelta(microseconds=1)


def _ts_or_none(us: int | None) -> str | None:
    return None if us is None else ts(us)


def num(value: float) -> float | int:
    value = round(value, 6)
    return int(value) if float(value).is_integer() else value


@dataclass
class Run:
    request: dict[str, Any]
    admitted_us: int
    lease_end_us: int | None
    seq: int

    def active(self, t: int) -> bool:
        return self.admitted_us <= t and (self.lease_end_us is None or self.lease_end_us > t)


@dataclass
class Goal:
    cases: dict[str, Any] | None = None
    tokens: dict[str, Any] | None = None
    samples: list[tuple[int, str | None, int, int, int, str, int]] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)
    cooldown_until_us: int | None = None
    streak: int = 0
    admissions: int = 0
    refusals: dict[str, int] = field(default_factory=dict)

    # -- SPEC §3.2 ---------------------------------------------------------------------
    def window(self, t: int) -> list[tuple[int, str | None, int, int, int, str, int]]:
        return [s for s in self.samples if t - WINDOW_US < s[0] <= t]

    def weight(self) -> float:
        return float(self.tokens["cached_input_weight"]) if self.tokens else 1.0

    def usage(self, t: int) -> tuple[float | int, dict[str, int], str]:
        win = self.window(t)
        parts = {
            "uncached_input": sum(s[2] for s in win),
            "cached_input": sum(s[3] for s in win),
            "cache_write_input": 0,  # this writer never records cache writes
            "output": sum(s[4] for s in win),
        }
        tpm = num(parts["uncached_input"] + parts["output"] + parts["cached_input"] * self.weight())
        kinds = {s[5] for s in win}
        coverage = next((k for k in ("unmetered", "estimated") if k in kinds), "measured")
        return tpm, parts, coverage

    def active(self, t: int) -> list[Run]:
        return sorted((r for r in self.runs.values() if r.active(t)), key=lambda r: r.seq)

    def counts(self, t: int) -> dict[str, int]:
        groups = [GROUP.get(r.request["arm"] or "") for r in self.active(t)]
        return {
            "total": len(groups),
            "baseline": groups.count("baseline"),
            "test": groups.count("test"),
        }

    def reserved(self, t: int) -> int:
        return sum(r.request["forecast_tpm"] or 0 for r in self.active(t))

    def load(self, t: int) -> float | int:
        return max(self.usage(t)[0], self.reserved(t))

    def stale(self, t: int) -> bool:
        age = (self.tokens or {}).get("max_observation_age_s", 60)
        metered = [s[0] for s in self.samples if s[5] != "unmetered" and s[0] <= t]
        return not metered or t - max(metered) > age * US

    def available(self, run_class: str) -> int | None:
        if self.tokens is None:
            return None
        protected = self.tokens["evaluator_reserve_tpm"] if run_class == "solver" else 0
        return self.tokens["target_tpm"] - protected

    def headroom(self, t: int, run_class: str) -> float | int | None:
        available = self.available(run_class)
        if available is None or self.tokens is None:
            return None
        return num(available - self.tokens["cold_start_reserve_tpm"] - self.load(t))

    # -- SPEC §3.3 ---------------------------------------------------------------------
    def reasons(self, req: dict[str, Any], t: int) -> list[str]:
        same = next((r for r in self.active(t) if r.request["run"] == req["run"]), None)
        if same is not None:
            return [] if same.request == req else ["run_exists_with_different_request"]
        if self.cases is None and self.tokens is None:
            return ["not_configured"]
        out: list[str] = []
        if self.cases is not None:
            c, n = self.cases, self.counts(t)
            if n["total"] >= c["target_active_cases"]:
                out.append("target_capacity_exhausted")
            if n["total"] >= c["max_active_cases"]:
                out.append("total_capacity_exhausted")
            arm = req["arm"]
            if arm is None:
                out.append("case_arm_required")
            elif GROUP[arm] == "baseline":
                if n["baseline"] >= c["max_baseline_cases"]:
                    out.append("baseline_capacity_exhausted")
                if c["target_active_cases"] - (n["total"] + 1) < max(
                    0, c["reserved_test_cases"] - n["test"]
                ):
                    out.append("reserved_test_capacity")
            elif n["test"] >= c["max_test_cases"]:
                out.append("test_capacity_exhausted")
        if self.tokens is not None:
            tk, forecast = self.tokens, req["forecast_tpm"]
            if forecast is None:
                out.append("token_forecast_required")
            elif forecast > tk["target_tpm"]:
                out.append("forecast_exceeds_target")
            if self.cooldown_until_us is not None and t < self.cooldown_until_us:
                out.append("capacity_cooldown_active")
            if self.usage(t)[2] == "unmetered":
                out.append("usage_unmetered_in_window")
            if self.stale(t):
                out.append("usage_observation_stale")
            if forecast is not None:
                need = self.load(t) + forecast + tk["cold_start_reserve_tpm"]
                available = self.available(req["class"])
                assert available is not None
                if need > available:
                    solver_fits = req["class"] == "solver" and need <= tk["target_tpm"]
                    out.append(
                        "evaluator_reserve_protected" if solver_fits else "token_headroom_exhausted"
                    )
        return out

    def figures(self, req: dict[str, Any], t: int) -> dict[str, Any]:
        tpm, parts, coverage = self.usage(t)
        metered = [s[0] for s in self.samples if s[5] != "unmetered" and s[0] <= t]
        tk, cs = self.tokens, self.cases
        return {
            "usage_tpm": tpm,
            "usage": parts,
            "reserved_tpm": self.reserved(t),
            "load_tpm": self.load(t),
            "target_tpm": tk and tk["target_tpm"],
            "headroom_tpm": self.headroom(t, req["class"]),
            "forecast_tpm": req["forecast_tpm"],
            "coverage": coverage,
            "observation_stale": self.stale(t),
            "last_observation_at": ts(max(metered)) if metered else None,
            "cooldown_until": _ts_or_none(self.cooldown_until_us),
            "active_cases": self.counts(t),
            "target_active_cases": cs and cs["target_active_cases"],
            "max_active_cases": cs and cs["max_active_cases"],
            "quota_tpm": tk and tk["quota_tpm"],
            "evaluator_reserve_tpm": tk and tk["evaluator_reserve_tpm"],
            "cold_start_reserve_tpm": tk and tk["cold_start_reserve_tpm"],
        }

    def change_points(self, t: int) -> list[int]:
        points = {s[0] + WINDOW_US for s in self.window(t)}
        points |= {r.lease_end_us for r in self.active(t) if r.lease_end_us is not None}
        if self.cooldown_until_us is not None:
            points.add(self.cooldown_until_us)
        return sorted(p for p in points if p > t)

    def earliest(self, req: dict[str, Any], t: int) -> int | None:
        """Brute force over the times the state can change by itself."""
        return next((p for p in self.change_points(t) if not self.reasons(req, p)), None)

    def shortfall(self, req: dict[str, Any], reasons: list[str], t: int) -> float | int | None:
        """SPEC §7: load + forecast + cold start - (target - evaluator reserve for a
        solver, target for an evaluator) when a token reason refused it."""
        if not any(r in TOKEN_REASONS for r in reasons) or req["forecast_tpm"] is None:
            return None
        assert self.tokens is not None
        available = self.available(req["class"])
        assert available is not None
        cold = self.tokens["cold_start_reserve_tpm"]
        return num(self.load(t) + req["forecast_tpm"] + cold - available)

    def contributors(self, t: int) -> list[tuple[str | None, float | int]]:
        by_run: dict[str | None, list[int]] = {}
        for s in self.window(t):
            acc = by_run.setdefault(s[1], [0, 0, 0])
            acc[0] += s[2]
            acc[1] += s[3]
            acc[2] += s[4]
        w = self.weight()
        return [(run, num(a[0] + a[2] + a[1] * w)) for run, a in by_run.items()]


class IndependentOperators:
    """Runs SPEC §3's commands and journals them with the independent writer."""

    def __init__(self, start_us: int, journal_id: str = "e1se" * 8) -> None:
        self.writer = Writer(journal_id, ts(start_us), ensure_ascii=False)
        self.goals: dict[str, Goal] = {}
        self.decisions: list[dict[str, Any]] = []
        """Every journaled decision: seq, goal, request, at_us, reasons and the explanation
        computed on the state just before it."""
        self.records: list[dict[str, Any]] = [
            {"seq": 0, "kind": "journal.created", "goal": None, "at": ts(start_us)}
        ]

    def goal(self, name: str) -> Goal:
        return self.goals.setdefault(name, Goal())

    def _write(self, kind: str, goal: str, data: dict[str, Any], t: int) -> int:
        seq = len(self.writer.lines)
        self.writer.append(kind, goal, data, ts(t))
        self.records.append({"seq": seq, "kind": kind, "goal": goal, "at": ts(t), "data": data})
        return seq

    def configure(self, goal: str, t: int, cases: Any = "keep", tokens: Any = "keep") -> int:
        g = self.goal(goal)
        if cases != "keep":
            g.cases = cases
        if tokens != "keep":
            g.tokens = tokens
        return self._write("capacity.configured", goal, {"cases": g.cases, "tokens": g.tokens}, t)

    def observe(self, goal: str, t: int, run: str | None, u: int, c: int, o: int, cov: str) -> int:
        g = self.goal(goal)
        data = {
            "run": run,
            "uncached_input": u,
            "cached_input": c,
            "output": o,
            "requests": 3,
            "coverage": cov,
            "source": "elsewhere/collector",
        }
        seq = self._write("capacity.observed", goal, data, t)
        g.samples.append((t, run, u, c, o, cov, seq))
        held = g.runs.get(run) if run is not None else None
        if held is not None and held.active(t) and held.lease_end_us is not None:
            held.lease_end_us = max(held.lease_end_us, t + held.request["lease_s"] * US)
        return seq

    def admit(self, goal: str, t: int, req: dict[str, Any], *, lie: bool = False) -> int | None:
        """Decide and journal; `lie` journals the opposite of what the rules say."""
        g = self.goal(goal)
        reasons = g.reasons(req, t)
        same = next((r for r in g.active(t) if r.request["run"] == req["run"]), None)
        if same is not None and not reasons:
            return None  # idempotent replay: nothing appended
        explanation = {
            "binding_constraint": reasons[0] if reasons else None,
            "shortfall_tpm": g.shortfall(req, reasons, t),
            "usage_tpm": g.usage(t)[0],
            "reserved_tpm": g.reserved(t),
            "load_tpm": g.load(t),
            "target_tpm": g.tokens and g.tokens["target_tpm"],
            "cooldown_until": None if g.cooldown_until_us is None else ts(g.cooldown_until_us),
            "coverage": g.usage(t)[2],
            "earliest": t if not reasons else g.earliest(req, t),
            "contributors": g.contributors(t),
        }
        figures = g.figures(req, t)
        admitted = not reasons
        recorded_reasons = reasons
        if lie:
            admitted = not admitted
            recorded_reasons = [] if admitted else ["token_headroom_exhausted"]
        if admitted:
            lease_end = None if req["lease_s"] is None else t + req["lease_s"] * US
            receipt = {
                **figures,
                "run": req["run"],
                "at": ts(t),
                "cases": "not_configured" if g.cases is None else "slot_taken",
                "tokens": "not_configured" if g.tokens is None else "reserved",
                "lease_until": None if lease_end is None else ts(lease_end),
            }
            data = {"request": req, "receipt": receipt}
            seq = self._write("capacity.admitted", goal, data, t)
            g.runs[req["run"]] = Run(req, t, lease_end, seq)
            g.admissions += 1
        else:
            data = {"request": req, "reasons": recorded_reasons, "figures": figures}
            seq = self._write("capacity.refused", goal, data, t)
            for reason in recorded_reasons:
                g.refusals[reason] = g.refusals.get(reason, 0) + 1
        self.decisions.append(
            {
                "seq": seq,
                "goal": goal,
                "request": req,
                "at_us": t,
                "admitted": not reasons,
                "reasons": reasons,
                "lie": lie,
                "explanation": explanation,
            }
        )
        return seq

    def reject(self, goal: str, t: int, run: str | None, retry_after_s: int | None) -> int:
        g = self.goal(goal)
        tk = g.tokens or {}
        base, cap_s = tk.get("cooldown_base_s", 15), tk.get("cooldown_max_s", 300)
        previous = g.cooldown_until_us
        streak = g.streak + 1 if previous is not None and t < previous + cap_s * US else 1
        wanted = retry_after_s if retry_after_s is not None else base * 2 ** (streak - 1)
        cooldown_s = min(wanted, cap_s)
        until = t + cooldown_s * US if previous is None else max(previous, t + cooldown_s * US)
        g.cooldown_until_us, g.streak = until, streak
        data = {
            "run": run,
            "retry_after_s": retry_after_s,
            "cooldown_s": cooldown_s,
            "clamped": wanted > cap_s,
            "cooldown_until": ts(until),
            "streak": streak,
            "detail": "HTTP 429 from the provider",
        }
        return self._write("capacity.rejected", goal, data, t)

    def release(self, goal: str, t: int, run: str) -> int | None:
        g = self.goal(goal)
        held = g.runs.get(run)
        if held is None or not held.active(t):
            return None  # run_not_active: nothing appended
        del g.runs[run]
        return self._write("capacity.released", goal, {"run": run}, t)

    def bytes(self) -> bytes:
        return self.writer.bytes()


# -- random histories -----------------------------------------------------------------------

RUN_IDS = ["run-a", "b.2", "c:3@eu/west", "D_4", "e-5"]


def case_config(rng: random.Random) -> dict[str, Any]:
    top = rng.choice([1, 2, 3, 4])
    reserved = rng.choice([0, 0, 1])
    reserved = min(reserved, top)
    return {
        "max_active_cases": top,
        "target_active_cases": rng.randint(max(1, top - 1), top),
        "max_baseline_cases": max(0, top - reserved),
        "max_test_cases": top,
        "reserved_test_cases": reserved,
    }


def token_config(rng: random.Random) -> dict[str, Any]:
    quota = rng.choice([10_000, 20_000, 50_000])
    target = rng.choice([quota * 9 // 10, quota, quota // 2])
    evaluator = rng.choice([0, 0, 1_000, 3_000])
    cold = rng.choice([0, 0, 500])
    return {
        "quota_tpm": quota,
        "target_tpm": target,
        "evaluator_reserve_tpm": evaluator,
        "cold_start_reserve_tpm": cold,
        # An int 1 is a valid JSON number for a float field.
        "cached_input_weight": rng.choice([1, 1.0, 0.5, 0.25, 0.1]),
        "max_observation_age_s": rng.choice([30, 60, 120]),
        "cooldown_base_s": rng.choice([5, 15]),
        "cooldown_max_s": rng.choice([20, 300]),
    }


def random_history(
    seed: int, steps: int = 45, goals: tuple[str, ...] = ("g", "alt/goal")
) -> IndependentOperators:
    """A runner's life on two goals, with explicit times, as another implementation wrote it."""
    rng = random.Random(seed)
    t = us_of("2026-03-01T09:00:00.000000Z") + rng.randint(0, 10**6)
    world = IndependentOperators(t)
    first = goals[0]
    gates = rng.choice(["cases", "tokens", "both", "both"])
    world.configure(
        first,
        t,
        cases=case_config(rng) if gates != "tokens" else None,
        tokens=token_config(rng) if gates != "cases" else None,
    )
    if len(goals) > 1 and rng.random() < 0.7:  # the second goal with a single gate
        single = rng.choice(["cases", "tokens"])
        world.configure(
            goals[1],
            t,
            cases=case_config(rng) if single == "cases" else None,
            tokens=token_config(rng) if single == "tokens" else None,
        )
    for _ in range(steps):
        t += rng.choice([0, 1, 250_000, US, US, 4 * US, 4 * US, 9 * US, 20 * US, 59_999_999])
        t += rng.choice([0] * 12 + [60 * US, 61 * US])
        goal = rng.choice([first, first, first, *goals[1:]])
        ops = ["observe", "admit", "reject", "release", "configure"]
        op = rng.choices(ops, [10, 8, 2, 3, 1])[0]
        run = rng.choice(RUN_IDS)
        if op == "observe":
            world.observe(
                goal,
                t,
                rng.choice([None, *RUN_IDS]),
                rng.choice([0, 400, 2_500, 7_000]),
                rng.choice([0, 0, 3_000]),
                rng.choice([0, 300, 1_500]),
                rng.choice(["measured"] * 5 + ["estimated", "unmetered"]),
            )
        elif op == "admit":
            request = {
                "run": run,
                "case": rng.choice([None, "case-17"]),
                "arm": rng.choice([None, "baseline", "control", "treatment", "explore", "control"]),
                "class": rng.choice(["solver", "solver", "evaluator"]),
                "forecast_tpm": rng.choice([None, 0, 1_500, 4_000, 4_000, 9_000, 30_000]),
                "lease_s": rng.choice([None, None, 30, 90]),
            }
            world.admit(goal, t, request)
        elif op == "reject":
            world.reject(goal, t, rng.choice([None, run]), rng.choice([None, None, 7, 500]))
        elif op == "release":
            world.release(goal, t, run)
        else:
            which = rng.choice(["cases", "tokens"])
            g = world.goal(goal)
            occupied = g.counts(t)
            new_cases = case_config(rng)
            if which == "cases" and (
                new_cases["max_active_cases"] < occupied["total"]
                or new_cases["max_baseline_cases"] < occupied["baseline"]
                or new_cases["max_test_cases"] < occupied["test"]
            ):
                continue  # config_below_occupancy: refused, nothing written
            if which == "cases":
                world.configure(goal, t, cases=new_cases)
            else:
                world.configure(goal, t, tokens=token_config(rng))
    return world
