"""An independent model of SPEC §3 (capacity admission), written from the SPEC text only.

It shares no code with `projections/` or `commands/`: times are integer microseconds
formatted here, the fold is recomputed from the model's own event log for every
question ("as of t" = every event of the goal with at <= t), and the decision is a
literal transcription of §3.3. The scenario test drives the real CLI and this model
side by side and compares every answer.

Points the SPEC leaves open, and the reading taken here (each one also what the
implementation does; see the test module's docstring for how they were settled):
- `coverage` is the weakest coverage among the samples in the 60 s window
  (unmetered < estimated < measured), `measured` when the window is empty.
- `headroom_tpm` = target - cold_start_reserve - load, minus evaluator_reserve for a
  solver: the largest forecast the token gate's headroom check would pass.
- `config_below_occupancy` compares the hard caps (max, baseline cap, test cap) with
  the active counts; a target below occupancy is accepted and `next_action` says
  `release_runs`.
- A rejection without a token gate uses the default cooldown parameters, and the
  cooldown then gates nothing (it is a token-gate check).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

US = 1_000_000
WINDOW_US = 60 * US
TOKEN_MAX = 10**12
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TEST_ARMS = ("control", "treatment", "explore")
ARMS = ("baseline", *TEST_ARMS)
COVERAGES = ("measured", "estimated", "unmetered")
CLASSES = ("solver", "evaluator")

TOKEN_DEFAULTS = {
    "evaluator_reserve_tpm": 0,
    "cold_start_reserve_tpm": 0,
    "cached_input_weight": 1.0,
    "max_observation_age_s": 60,
    "cooldown_base_s": 15,
    "cooldown_max_s": 300,
}
CASE_FLAGS = (
    "max_active_cases",
    "target_active_cases",
    "max_baseline_cases",
    "max_test_cases",
    "reserved_test_cases",
)
TOKEN_FLAGS = (
    "quota_tpm",
    "target_tpm",
    "evaluator_reserve_tpm",
    "cold_start_reserve_tpm",
    "cached_input_weight",
    "max_observation_age_s",
    "cooldown_base_s",
    "cooldown_max_s",
)


def fmt(at_us: int) -> str:
    """RFC 3339 UTC with microseconds and Z (SPEC §2.1)."""
    moment = EPOCH + timedelta(microseconds=at_us)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def group_of(arm: str | None) -> str | None:
    if arm == "baseline":
        return "baseline"
    if arm in TEST_ARMS:
        return "test"
    return None


class Invalid(Exception):
    """The command is invalid input: exit 2, nothing written."""


# -- config (SPEC §3.1) -----------------------------------------------------------------


def case_config(flags: dict[str, Any]) -> dict[str, int]:
    top = flags.get("max_active_cases")
    if top is None:
        raise Invalid("case gate needs max_active_cases")
    reserved = flags.get("reserved_test_cases")
    reserved = 0 if reserved is None else reserved
    config = {
        "max_active_cases": top,
        "target_active_cases": _default(flags.get("target_active_cases"), top),
        "max_baseline_cases": _default(flags.get("max_baseline_cases"), top - reserved),
        "max_test_cases": _default(flags.get("max_test_cases"), top),
        "reserved_test_cases": reserved,
    }
    if not 1 <= top <= 1024:
        raise Invalid("max_active_cases out of 1..1024")
    if any(value < 0 for value in config.values()):
        raise Invalid("negative case limit")
    target, base_cap = config["target_active_cases"], config["max_baseline_cases"]
    test_cap = config["max_test_cases"]
    rules = (
        target <= top,
        base_cap <= top,
        test_cap <= top,
        reserved <= test_cap,
        reserved <= top,
        target <= base_cap + test_cap,
    )
    if not all(rules):
        raise Invalid("case config rules")
    return config


def token_config(flags: dict[str, Any]) -> dict[str, Any]:
    quota = flags.get("quota_tpm")
    if quota is None:
        raise Invalid("token gate needs quota_tpm")
    if not 1 <= quota <= TOKEN_MAX:
        raise Invalid("quota out of range")
    config: dict[str, Any] = {"quota_tpm": quota}
    config["target_tpm"] = _default(flags.get("target_tpm"), quota * 9 // 10)
    for name, default in TOKEN_DEFAULTS.items():
        config[name] = _default(flags.get(name), default)
    for name in ("target_tpm", "evaluator_reserve_tpm", "cold_start_reserve_tpm"):
        if not 0 <= config[name] <= TOKEN_MAX:
            raise Invalid(f"{name} out of range")
    if config["target_tpm"] > quota:
        raise Invalid("target above quota")
    if config["evaluator_reserve_tpm"] + config["cold_start_reserve_tpm"] > config["target_tpm"]:
        raise Invalid("reserves above target")
    if not 0.0 <= config["cached_input_weight"] <= 1.0:
        raise Invalid("weight out of 0..1")
    if not 0 <= config["cooldown_max_s"] <= 86400:
        raise Invalid("cooldown_max_s out of 0..86400")
    for name in ("max_observation_age_s", "cooldown_base_s"):
        if config[name] < 0:
            raise Invalid(f"{name} negative")
    config["cached_input_weight"] = float(config["cached_input_weight"])
    return config


def _default(value: Any, default: Any) -> Any:
    return default if value is None else value


# -- the log and the fold (SPEC §3.2) ---------------------------------------------------


@dataclass
class Event:
    seq: int
    goal: str | None
    kind: str
    at_us: int
    data: dict[str, Any]


@dataclass
class Run:
    request: dict[str, Any]
    admitted_at: int
    admitted_seq: int
    lease_until: int | None
    receipt: dict[str, Any] | None = None  # the real receipt, kept for replay checks

    def active(self, t: int) -> bool:
        return self.lease_until is None or self.lease_until > t


@dataclass
class GoalState:
    t: int
    cases: dict[str, int] | None = None
    tokens: dict[str, Any] | None = None
    samples: list[tuple[int, int, int, int, str]] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)  # admitted, not released
    cooldown_until: int | None = None
    streak: int = 0

    # --- derived figures at self.t
    def active_runs(self) -> list[tuple[str, Run]]:
        return [(name, run) for name, run in self.runs.items() if run.active(self.t)]

    def active_counts(self) -> dict[str, int]:
        counts = {"total": 0, "baseline": 0, "test": 0}
        for _, run in self.active_runs():
            counts["total"] += 1
            group = group_of(run.request["arm"])
            if group:
                counts[group] += 1
        return counts

    def window(self) -> list[tuple[int, int, int, int, str]]:
        return [s for s in self.samples if self.t - WINDOW_US < s[0] <= self.t]

    def weight(self) -> float:
        return self.tokens["cached_input_weight"] if self.tokens else 1.0

    def usage_parts(self) -> dict[str, int]:
        window = self.window()
        return {
            "uncached_input": sum(s[1] for s in window),
            "cached_input": sum(s[2] for s in window),
            "cache_write_input": 0,
            "output": sum(s[3] for s in window),
        }

    def usage_tpm(self) -> float:
        parts = self.usage_parts()
        return parts["uncached_input"] + parts["cached_input"] * self.weight() + parts["output"]

    def reserved_tpm(self) -> int:
        return sum(run.request["forecast_tpm"] or 0 for _, run in self.active_runs())

    def load_tpm(self) -> float:
        return max(self.usage_tpm(), self.reserved_tpm())

    def coverage(self) -> str:
        kinds = {s[4] for s in self.window()}
        for weakest in ("unmetered", "estimated"):
            if weakest in kinds:
                return weakest
        return "measured"

    def unmetered_in_window(self) -> bool:
        return any(s[4] == "unmetered" for s in self.window())

    def stale(self) -> bool:
        metered = [s[0] for s in self.samples if s[4] in ("measured", "estimated")]
        if not metered:
            return True
        max_age_s = (self.tokens or TOKEN_DEFAULTS)["max_observation_age_s"]
        return self.t - max(metered) > max_age_s * US

    def cooling(self) -> bool:
        return self.cooldown_until is not None and self.t < self.cooldown_until

    def headroom(self, klass: str) -> float | None:
        if self.tokens is None:
            return None
        tokens = self.tokens
        reserve = tokens["evaluator_reserve_tpm"] if klass == "solver" else 0
        return tokens["target_tpm"] - reserve - tokens["cold_start_reserve_tpm"] - self.load_tpm()

    def figures(self, forecast: int | None, klass: str) -> dict[str, Any]:
        return {
            "usage_tpm": self.usage_tpm(),
            "usage": self.usage_parts(),
            "reserved_tpm": self.reserved_tpm(),
            "load_tpm": self.load_tpm(),
            "target_tpm": self.tokens["target_tpm"] if self.tokens else None,
            "headroom_tpm": self.headroom(klass),
            "forecast_tpm": forecast,
            "coverage": self.coverage(),
            "cooldown_until": None if self.cooldown_until is None else fmt(self.cooldown_until),
            "active_cases": self.active_counts(),
        }


def cooldown_after(state: GoalState, at_us: int, retry_after_s: int | None) -> dict[str, Any]:
    """SPEC §3.2 cooldown: bounded exponential, Retry-After honoured and clamped."""
    tokens = state.tokens or TOKEN_DEFAULTS
    max_s, base_s = tokens["cooldown_max_s"], tokens["cooldown_base_s"]
    previous = state.cooldown_until
    within_horizon = previous is not None and at_us < previous + max_s * US
    streak = state.streak + 1 if within_horizon else 1
    wanted_s = retry_after_s if retry_after_s is not None else base_s * 2 ** (streak - 1)
    cooldown_s = min(wanted_s, max_s)
    until = at_us + cooldown_s * US
    if previous is not None:
        until = max(previous, until)
    return {
        "cooldown_s": cooldown_s,
        "clamped": wanted_s > max_s,
        "cooldown_until": until,
        "streak": streak,
    }


# -- the decision (SPEC §3.3) -----------------------------------------------------------


def case_reasons(state: GoalState, request: dict[str, Any]) -> list[str]:
    cases = state.cases
    if cases is None:
        return []
    counts = state.active_counts()
    active, reasons = counts["total"], []
    if active >= cases["target_active_cases"]:
        reasons.append("target_capacity_exhausted")
    if active >= cases["max_active_cases"]:
        reasons.append("total_capacity_exhausted")
    group = group_of(request["arm"])
    if group == "baseline" and counts["baseline"] >= cases["max_baseline_cases"]:
        reasons.append("baseline_capacity_exhausted")
    if group == "test" and counts["test"] >= cases["max_test_cases"]:
        reasons.append("test_capacity_exhausted")
    if group == "baseline":
        left_after = cases["target_active_cases"] - (active + 1)
        if left_after < max(0, cases["reserved_test_cases"] - counts["test"]):
            reasons.append("reserved_test_capacity")
    if request["arm"] is None:
        reasons.append("case_arm_required")
    return reasons


def token_reasons(state: GoalState, forecast: int | None, klass: str) -> list[str]:
    tokens = state.tokens
    if tokens is None:
        return []
    target, reasons = tokens["target_tpm"], []
    if forecast is None:
        reasons.append("token_forecast_required")
    elif forecast > target:
        reasons.append("forecast_exceeds_target")
    if state.cooling():
        reasons.append("capacity_cooldown_active")
    if state.unmetered_in_window():
        reasons.append("usage_unmetered_in_window")
    if state.stale():
        reasons.append("usage_observation_stale")
    if forecast is not None:
        need = state.load_tpm() + forecast + tokens["cold_start_reserve_tpm"]
        reserve = tokens["evaluator_reserve_tpm"] if klass == "solver" else 0
        if need > target - reserve:
            fits_without_reserve = klass == "solver" and need <= target
            reasons.append(
                "evaluator_reserve_protected"
                if fits_without_reserve
                else "token_headroom_exhausted"
            )
    return reasons


def decide(state: GoalState, request: dict[str, Any]) -> tuple[str, list[str]]:
    """('replay' | 'admit' | 'refuse', reasons)."""
    existing = state.runs.get(request["run"])
    if existing is not None and existing.active(state.t):
        if existing.request == request:
            return "replay", []
        return "refuse", ["run_exists_with_different_request"]
    if state.cases is None and state.tokens is None:
        return "refuse", ["not_configured"]
    reasons = case_reasons(state, request) + token_reasons(
        state, request["forecast_tpm"], request["class"]
    )
    return ("refuse", reasons) if reasons else ("admit", [])


# -- the model journal --------------------------------------------------------------------


class Model:
    def __init__(self) -> None:
        self.events: list[Event] = [Event(0, None, "journal.created", 0, {})]

    # -- the fold
    def last_at(self, goal: str) -> int | None:
        times = [e.at_us for e in self.events if e.goal == goal]
        return max(times) if times else None

    def goals_at(self, t: int) -> list[str]:
        names: list[str] = []
        for event in self.events:
            if event.goal is not None and event.at_us <= t and event.goal not in names:
                names.append(event.goal)
        return names

    def fold(self, goal: str, t: int, upto_seq: int | None = None) -> GoalState:
        state = GoalState(t=t)
        for event in self.events:
            if event.goal != goal or event.at_us > t:
                continue
            if upto_seq is not None and event.seq > upto_seq:
                continue
            self._apply(state, event)
        return state

    def _apply(self, state: GoalState, event: Event) -> None:
        data, at = event.data, event.at_us
        if event.kind == "capacity.configured":
            state.cases, state.tokens = data["cases"], data["tokens"]
        elif event.kind == "capacity.observed":
            state.samples.append(
                (at, data["uncached_input"], data["cached_input"], data["output"], data["coverage"])
            )
            run = state.runs.get(data["run"]) if data["run"] else None
            if run and run.lease_until is not None and run.active(at):
                run.lease_until = max(run.lease_until, at + run.request["lease_s"] * US)
        elif event.kind == "capacity.admitted":
            request = data["request"]
            lease = None if request["lease_s"] is None else at + request["lease_s"] * US
            state.runs[request["run"]] = Run(request, at, event.seq, lease, data.get("receipt"))
        elif event.kind == "capacity.released":
            state.runs.pop(data["run"], None)
        elif event.kind == "capacity.rejected":
            state.cooldown_until = data["cooldown_until_us"]
            state.streak = data["streak"]

    def _append(self, goal: str, kind: str, at_us: int, data: dict[str, Any]) -> Event:
        event = Event(len(self.events), goal, kind, at_us, data)
        self.events.append(event)
        return event

    def check_time(self, goal: str, at_us: int) -> None:
        last = self.last_at(goal)
        if last is not None and at_us < last:
            raise Invalid("time_regression")

    # -- commands: each returns the expected outcome, appending what the real one would
    def configure(self, goal: str, at_us: int, flags: dict[str, Any]) -> dict[str, Any]:
        self.check_time(goal, at_us)
        has_case = any(flags.get(name) is not None for name in CASE_FLAGS)
        has_token = any(flags.get(name) is not None for name in TOKEN_FLAGS)
        if not has_case and not has_token:
            raise Invalid("nothing to configure")
        state = self.fold(goal, at_us)
        cases = case_config(flags) if has_case else state.cases
        tokens = token_config(flags) if has_token else state.tokens
        config = {"cases": cases, "tokens": tokens}
        if has_case and cases is not None:
            counts = state.active_counts()
            below = (
                cases["max_active_cases"] < counts["total"]
                or cases["max_baseline_cases"] < counts["baseline"]
                or cases["max_test_cases"] < counts["test"]
            )
            if below:
                return {"code": 1, "reasons": ["config_below_occupancy"], "config": config}
        event = self._append(goal, "capacity.configured", at_us, config)
        return {"code": 0, "config": config, "event": event}

    def observe(self, goal: str, at_us: int, sample: dict[str, Any]) -> dict[str, Any]:
        self.check_time(goal, at_us)
        data = {
            "run": sample.get("run"),
            "uncached_input": sample["uncached_input"],
            "cached_input": sample["cached_input"],
            "output": sample["output"],
            "coverage": sample.get("coverage") or "measured",
        }
        event = self._append(goal, "capacity.observed", at_us, data)
        state = self.fold(goal, at_us)
        run = state.runs.get(data["run"]) if data["run"] else None
        lease = run.lease_until if run and run.active(at_us) else None
        return {
            "code": 0,
            "event": event,
            "usage_tpm": state.usage_tpm(),
            "usage": state.usage_parts(),
            "coverage": state.coverage(),
            "lease_until": None if lease is None else fmt(lease),
        }

    def admit(
        self, goal: str, at_us: int, request: dict[str, Any], dry_run: bool
    ) -> dict[str, Any]:
        # A dry run is refused a backwards time like the admit it previews (a poll
        # answers what the real command would answer; §2.2 does not single it out).
        self.check_time(goal, at_us)
        state = self.fold(goal, at_us)
        verdict, reasons = decide(state, request)
        figures = state.figures(request["forecast_tpm"], request["class"])
        if verdict == "replay":
            return {"code": 0, "verdict": verdict, "original": state.runs[request["run"]]}
        if dry_run:
            return {
                "code": 0 if verdict == "admit" else 1,
                "verdict": verdict,
                "reasons": reasons,
                "figures": figures,
                "event": None,
            }
        if verdict == "admit":
            event = self._append(goal, "capacity.admitted", at_us, {"request": request})
            return {"code": 0, "verdict": verdict, "figures": figures, "event": event}
        event = self._append(goal, "capacity.refused", at_us, {"request": request})
        return {
            "code": 1,
            "verdict": verdict,
            "reasons": reasons,
            "figures": figures,
            "event": event,
        }

    def reject(
        self, goal: str, at_us: int, run: str | None, retry_after_s: int | None
    ) -> dict[str, Any]:
        self.check_time(goal, at_us)
        state = self.fold(goal, at_us)
        outcome = cooldown_after(state, at_us, retry_after_s)
        data = {
            "run": run,
            "retry_after_s": retry_after_s,
            "streak": outcome["streak"],
            "cooldown_until_us": outcome["cooldown_until"],
        }
        event = self._append(goal, "capacity.rejected", at_us, data)
        return {
            "code": 0,
            "event": event,
            "run": run,
            "retry_after_s": retry_after_s,
            "cooldown_s": outcome["cooldown_s"],
            "clamped": outcome["clamped"],
            "cooldown_until": fmt(outcome["cooldown_until"]),
            "streak": outcome["streak"],
        }

    def release(self, goal: str, at_us: int, run: str) -> dict[str, Any]:
        self.check_time(goal, at_us)
        state = self.fold(goal, at_us)
        held = state.runs.get(run)
        if held is None or not held.active(at_us):
            return {"code": 0, "released": False, "reasons": ["run_not_active"], "event": None}
        event = self._append(goal, "capacity.released", at_us, {"run": run})
        return {"code": 0, "released": True, "reasons": [], "event": event}

    def remember_receipt(self, event: Event, receipt: dict[str, Any]) -> None:
        event.data["receipt"] = receipt

    # -- inspect (SPEC §3.5)
    def view(self, goal: str, t: int, upto_seq: int | None = None) -> dict[str, Any]:
        state = self.fold(goal, t, upto_seq)
        runs = [
            {
                "run": name,
                "case": run.request["case"],
                "arm": run.request["arm"],
                "class": run.request["class"],
                "forecast_tpm": run.request["forecast_tpm"],
                "admitted_at": fmt(run.admitted_at),
                "lease_until": None if run.lease_until is None else fmt(run.lease_until),
            }
            for name, run in state.active_runs()
        ]
        ready = admission_ready(state)
        return {
            "at": fmt(t),
            "config": {"cases": state.cases, "tokens": state.tokens},
            "usage_tpm": state.usage_tpm(),
            "usage": state.usage_parts(),
            "reserved_tpm": state.reserved_tpm(),
            "load_tpm": state.load_tpm(),
            "headroom_tpm": {
                "solver": state.headroom("solver"),
                "evaluator": state.headroom("evaluator"),
            },
            "coverage": state.coverage(),
            "cooldown_until": None if state.cooldown_until is None else fmt(state.cooldown_until),
            "active_runs": runs,
            "active_counts": state.active_counts(),
            "admission_ready": ready,
            "next_action": next_action(state, ready),
        }

    def interesting_times(self, goal: str, now: int) -> list[int]:
        """Boundaries of the fold after `now`: window exits, lease ends, cooldown ends."""
        state = self.fold(goal, now)
        times: set[int] = set()
        for sample in state.samples:
            times |= {sample[0] + WINDOW_US - 1, sample[0] + WINDOW_US, sample[0] + WINDOW_US + 1}
        for run in state.runs.values():
            if run.lease_until is not None:
                times |= {run.lease_until - 1, run.lease_until}
        if state.cooldown_until is not None:
            max_s = (state.tokens or TOKEN_DEFAULTS)["cooldown_max_s"]
            times |= {
                state.cooldown_until - 1,
                state.cooldown_until,
                state.cooldown_until + max_s * US - 1,
                state.cooldown_until + max_s * US,
            }
        metered = [s[0] for s in state.samples if s[4] != "unmetered"]
        if metered:
            age = (state.tokens or TOKEN_DEFAULTS)["max_observation_age_s"] * US
            times |= {max(metered) + age, max(metered) + age + 1}
        return sorted(time for time in times if time > now)


def admission_ready(state: GoalState) -> bool:
    if state.cases is None and state.tokens is None:
        return False
    cases = state.cases
    if cases is not None and state.active_counts()["total"] >= cases["target_active_cases"]:
        return False
    return not token_reasons(state, 1, "solver")


def next_action(state: GoalState, ready: bool) -> str:
    if state.cases is None and state.tokens is None:
        return "configure"
    tokens = state.tokens
    if tokens is not None and state.cooling():
        return "wait_for_cooldown"
    if tokens is not None and (state.stale() or state.unmetered_in_window()):
        return "observe_usage"
    counts = state.active_counts()
    cases = state.cases
    above_case_limit = cases is not None and (
        counts["total"] > cases["target_active_cases"]
        or counts["total"] > cases["max_active_cases"]
        or counts["baseline"] > cases["max_baseline_cases"]
        or counts["test"] > cases["max_test_cases"]
    )
    above_target = tokens is not None and state.reserved_tpm() > tokens["target_tpm"]
    if above_case_limit or above_target:
        return "release_runs"
    if ready:
        return "backfill_to_target"
    return "hold_at_target"


# -- an independent journal check (SPEC §2.1) -------------------------------------------


def verify_journal_bytes(raw: bytes) -> list[dict[str, Any]]:
    """Every line chains and hashes as §2.1 says; returns the parsed records."""
    assert raw.endswith(b"\n"), "journal must end with a newline"
    records, prev = [], "0" * 64
    for number, line in enumerate(raw.split(b"\n")[:-1]):
        marker = b',"hash":"'
        cut = line.rindex(marker)
        body = line[:cut] + b"}"
        digest = line[cut + len(marker) : -2].decode()
        assert hashlib.sha256(body).hexdigest() == digest, f"hash mismatch at line {number}"
        record = json.loads(line)
        assert list(record) == ["v", "seq", "at", "kind", "goal", "data", "prev", "hash"]
        assert record["v"] == 1 and record["seq"] == number and record["prev"] == prev
        prev = digest
        records.append(record)
    return records


def audit_records(records: list[dict[str, Any]]) -> list[str]:
    """Re-take every journaled capacity decision with the model, record by record.

    Returns the disagreements: a recorded admission or refusal whose reasons or
    figures the model would not have produced on the records before it, or a
    rejection whose cooldown arithmetic differs. An empty list means the journal
    is exactly what SPEC §3 says these requests should have produced.
    """
    model, problems = Model(), []
    for record in records[1:]:
        goal, at_us, data = record["goal"], _parse_canonical(record["at"]), record["data"]
        kind = record["kind"]
        where = f"seq {record['seq']} ({kind} at {record['at']})"
        if not kind.startswith("capacity."):
            continue
        if kind in ("capacity.admitted", "capacity.refused"):
            state = model.fold(goal, at_us)
            verdict, reasons = decide(state, data["request"])
            recorded = data.get("reasons", [])
            expected = "admit" if kind == "capacity.admitted" else "refuse"
            if (verdict, reasons) != (expected, recorded):
                problems.append(f"{where}: model says {verdict} {reasons}, journal {recorded}")
            figures = data.get("receipt") or data.get("figures") or {}
            wanted = state.figures(data["request"]["forecast_tpm"], data["request"]["class"])
            for key, value in wanted.items():
                if not numbers_equal(figures.get(key), value):
                    problems.append(f"{where}: figure {key} {figures.get(key)!r} != {value!r}")
            model._append(goal, kind, at_us, {"request": data["request"]})
        elif kind == "capacity.rejected":
            outcome = cooldown_after(model.fold(goal, at_us), at_us, data["retry_after_s"])
            got = (data["cooldown_s"], data["clamped"], data["cooldown_until"], data["streak"])
            want = (
                outcome["cooldown_s"],
                outcome["clamped"],
                fmt(outcome["cooldown_until"]),
                outcome["streak"],
            )
            if got != want:
                problems.append(f"{where}: cooldown {got} != {want}")
            model._append(
                goal,
                kind,
                at_us,
                {
                    **data,
                    "cooldown_until_us": outcome["cooldown_until"],
                    "streak": outcome["streak"],
                },
            )
        elif kind == "capacity.released":
            held = model.fold(goal, at_us).runs.get(data["run"])
            if held is None or not held.active(at_us):
                problems.append(f"{where}: released a run that was not active")
            model._append(goal, kind, at_us, data)
        else:
            model._append(goal, kind, at_us, data)
    return problems


def _parse_canonical(text: str) -> int:
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    delta = moment - EPOCH
    return (delta.days * 86400 + delta.seconds) * US + delta.microseconds


def numbers_equal(left: Any, right: Any) -> bool:
    """JSON numbers compare by value (160 == 160.0), floats with a tiny tolerance."""
    if isinstance(left, bool) or isinstance(right, bool):
        return left is right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return math.isclose(left, right, rel_tol=1e-12, abs_tol=1e-9)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(numbers_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(numbers_equal, left, right))
    return bool(left == right)
