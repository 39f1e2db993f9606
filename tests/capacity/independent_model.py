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
- Dimensions (§3.6): a field given to configure is explicit from then on; a derived
  default (a target from its quota, the case target and caps from max_active_cases)
  that is not explicit -- or, in a config without `explicit`, that equals what its
  source gives -- is recomputed from its source after every configure. A provider
  report's "usage observed after the report" is every later observation of the goal
  (not only the window's).
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


DIMS = ("tpm", "itpm", "otpm", "rpm")
OTHER_DIMS = ("itpm", "otpm", "rpm")
GENERAL_TOKEN_FLAGS = (
    "cached_input_weight",
    "max_observation_age_s",
    "cooldown_base_s",
    "cooldown_max_s",
)


def dim_flags(dim: str) -> tuple[str, str, str, str]:
    return (
        f"quota_{dim}",
        f"target_{dim}",
        f"evaluator_reserve_{dim}",
        f"cold_start_reserve_{dim}",
    )


LIMIT_FLAGS = tuple(name for dim in OTHER_DIMS for name in dim_flags(dim))
ALL_FLAGS = CASE_FLAGS + TOKEN_FLAGS + LIMIT_FLAGS


def _follows(name: str, values: dict[str, Any]) -> Any:
    """What a derived default is, given its source's value (SPEC §3.1, §3.5)."""
    if name in ("target_active_cases", "max_test_cases"):
        return values["max_active_cases"]
    if name == "max_baseline_cases":
        return max(0, values["max_active_cases"] - values["reserved_test_cases"])
    quota = values["quota_" + name.split("_")[1]]
    return None if quota is None else quota * 9 // 10


DERIVED = (
    "target_active_cases",
    "max_baseline_cases",
    "max_test_cases",
    *(f"target_{dim}" for dim in DIMS),
)


def flat_of(cases: dict[str, Any] | None, tokens: dict[str, Any] | None) -> dict[str, Any]:
    values: dict[str, Any] = dict.fromkeys(ALL_FLAGS)
    if cases:
        values.update(cases)
    if tokens:
        values.update({k: v for k, v in tokens.items() if k != "limits"})
        if tokens["quota_tpm"] is None:
            values.update(dict.fromkeys(dim_flags("tpm")))
        for dim, limit in tokens.get("limits", {}).items():
            for name, part in zip(
                dim_flags(dim),
                ("quota", "target", "evaluator_reserve", "cold_start_reserve"),
                strict=True,
            ):
                values[name] = limit[part]
    return values


def reconfigure(
    cases: dict[str, Any] | None,
    tokens: dict[str, Any] | None,
    explicit: list[str],
    flags: dict[str, Any],
    remove_limits: tuple[str, ...] = (),
    remove_gates: tuple[str, ...] = (),
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[str]]:
    """SPEC §3.5: configure changes only what it is given."""
    given = {k: v for k, v in flags.items() if v is not None}
    values = flat_of(cases, tokens)
    marked = set(explicit)
    for name in DERIVED:  # a value its source would not give was given once
        if values[name] is not None and values[name] != _follows(name, values):
            marked.add(name)
    dropped: set[str] = set()
    for gate in remove_gates:
        dropped |= set(CASE_FLAGS if gate == "cases" else TOKEN_FLAGS + LIMIT_FLAGS)
    for dim in remove_limits:
        dropped |= set(dim_flags(dim))
    if dropped & set(given):
        raise Invalid("a removed field given")
    for name in dropped:
        values[name] = None
    marked -= dropped
    values.update(given)
    marked |= set(given)
    # the case gate
    if values["max_active_cases"] is None:
        if any(name in given for name in CASE_FLAGS):
            raise Invalid("case gate needs max_active_cases")
        new_cases = None
    else:
        if values["reserved_test_cases"] is None:
            values["reserved_test_cases"] = 0
        for name in ("target_active_cases", "max_baseline_cases", "max_test_cases"):
            if name not in marked or values[name] is None:
                values[name] = _follows(name, values)
        new_cases = case_config({n: values[n] for n in CASE_FLAGS})
    # the token gate's dimensions
    present = []
    for dim in DIMS:
        quota, target, evaluator, cold = dim_flags(dim)
        if values[quota] is None:
            if any(name in given for name in (target, evaluator, cold)):
                raise Invalid(f"{dim} needs its quota")
            continue
        present.append(dim)
        if target not in marked or values[target] is None:
            values[target] = _follows(target, values)
        for name in (evaluator, cold):
            values[name] = _default(values[name], 0)
    if not present:
        if any(name in given for name in GENERAL_TOKEN_FLAGS):
            raise Invalid("token gate needs a quota")
        if tokens is not None and "tokens" not in remove_gates:
            raise Invalid("the token gate's last dimension removed")
        new_tokens = None
    else:
        new_tokens = token_config(values, present)
    keep = set()
    if new_cases is not None:
        keep |= set(CASE_FLAGS)
    if new_tokens is not None:
        keep |= set(GENERAL_TOKEN_FLAGS) | {n for d in present for n in dim_flags(d)}
    return new_cases, new_tokens, [n for n in ALL_FLAGS if n in marked & keep]


def case_config(flags: dict[str, Any]) -> dict[str, int]:
    top = flags["max_active_cases"]
    config = {name: flags[name] for name in CASE_FLAGS}
    reserved = config["reserved_test_cases"]
    if not 1 <= top <= 1024:
        raise Invalid("max_active_cases out of 1..1024")
    if any(value < 0 or value > 1024 for value in config.values()):
        raise Invalid("case limit out of range")
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


def _limit_ok(quota: int, target: int, evaluator: int, cold: int) -> None:
    if not 1 <= quota <= TOKEN_MAX:
        raise Invalid("quota out of range")
    for value in (target, evaluator, cold):
        if not 0 <= value <= TOKEN_MAX:
            raise Invalid("limit out of range")
    if target > quota:
        raise Invalid("target above quota")
    if evaluator + cold > target:
        raise Invalid("reserves above target")


def token_config(values: dict[str, Any], present: list[str]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if "tpm" in present:
        for name in dim_flags("tpm"):
            config[name] = values[name]
        _limit_ok(*(values[n] for n in dim_flags("tpm")))
    else:
        config.update(
            {"quota_tpm": None, "target_tpm": None, "evaluator_reserve_tpm": 0,
             "cold_start_reserve_tpm": 0}
        )  # fmt: skip
    for name in GENERAL_TOKEN_FLAGS:
        config[name] = _default(values[name], TOKEN_DEFAULTS[name])
    if not 0.0 <= config["cached_input_weight"] <= 1.0:
        raise Invalid("weight out of 0..1")
    if not 0 <= config["cooldown_max_s"] <= 86400:
        raise Invalid("cooldown_max_s out of 0..86400")
    if not 0 <= config["cooldown_base_s"] <= 86400:
        raise Invalid("cooldown_base_s out of 0..86400")
    if not 0 <= config["max_observation_age_s"] <= 86400:
        raise Invalid("max_observation_age_s out of 0..86400")
    if values["max_observation_age_s"] == 0:  # given 0: no observation is ever fresh
        raise Invalid("max_observation_age_s must be more than 0")
    config["cached_input_weight"] = float(config["cached_input_weight"])
    limits = {}
    for dim in OTHER_DIMS:
        if dim in present:
            quota, target, evaluator, cold = (values[n] for n in dim_flags(dim))
            _limit_ok(quota, target, evaluator, cold)
            limits[dim] = {
                "quota": quota,
                "target": target,
                "evaluator_reserve": evaluator,
                "cold_start_reserve": cold,
            }
    config["limits"] = limits
    return config


def limits_of(tokens: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """Configured dimensions in order: {quota, target, evaluator_reserve, cold_start_reserve}."""
    if not tokens:
        return {}
    found = {}
    if tokens["quota_tpm"] is not None:
        found["tpm"] = {
            "quota": tokens["quota_tpm"],
            "target": tokens["target_tpm"],
            "evaluator_reserve": tokens["evaluator_reserve_tpm"],
            "cold_start_reserve": tokens["cold_start_reserve_tpm"],
        }
    for dim in OTHER_DIMS:
        if dim in tokens.get("limits", {}):
            found[dim] = tokens["limits"][dim]
    return found


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


def forecast_of(request: dict[str, Any], dim: str) -> int | None:
    """SPEC §3.6: forecast_tpm, when absent, is forecast_itpm + forecast_otpm if both given."""
    if dim == "tpm":
        if request.get("forecast_tpm") is not None:
            return int(request["forecast_tpm"])
        i, o = request.get("forecast_itpm"), request.get("forecast_otpm")
        return None if i is None or o is None else i + o
    value = request.get(f"forecast_{dim}")
    return None if value is None else int(value)


def _tidy(value: float) -> float:
    return round(value, 6)


@dataclass
class GoalState:
    t: int
    cases: dict[str, int] | None = None
    tokens: dict[str, Any] | None = None
    explicit: list[str] = field(default_factory=list)
    # (at, uncached, cached, output, coverage, cache_write, requests, seq)
    samples: list[tuple[Any, ...]] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)  # admitted, not released
    cooldown_until: int | None = None
    streak: int = 0
    # dimension -> (at, seq, limit, remaining, reset_at or None)
    provider: dict[str, tuple[int, int, int | None, int | None, int | None]] = field(
        default_factory=dict
    )

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

    def window(self) -> list[tuple[Any, ...]]:
        return [s for s in self.samples if self.t - WINDOW_US < s[0] <= self.t]

    def weight(self) -> float:
        return self.tokens["cached_input_weight"] if self.tokens else 1.0

    def usage_parts(self) -> dict[str, int]:
        window = self.window()
        return {
            "uncached_input": sum(s[1] for s in window),
            "cached_input": sum(s[2] for s in window),
            "cache_write_input": sum(s[5] for s in window),
            "output": sum(s[3] for s in window),
        }

    def usage_of(self, samples: list[tuple[Any, ...]], dim: str) -> float:
        w = self.weight()
        inputs = sum(s[1] + s[5] + s[2] * w for s in samples)
        outputs = sum(s[3] for s in samples)
        if dim == "tpm":
            return _tidy(inputs + outputs)
        if dim == "itpm":
            return _tidy(inputs)
        if dim == "otpm":
            return outputs
        return sum(s[6] for s in samples)

    def usage_tpm(self) -> float:
        return self.usage_of(self.window(), "tpm")

    def reserved(self, dim: str) -> int:
        return sum(forecast_of(run.request, dim) or 0 for _, run in self.active_runs())

    def reserved_tpm(self) -> int:
        return self.reserved("tpm")

    def report(self, dim: str) -> tuple[int, int, int | None, int | None, int | None] | None:
        """The latest provider report of `dim` while it is live (SPEC §3.6)."""
        found = self.provider.get(dim)
        if found is None:
            return None
        at, _seq, _limit, _remaining, reset_at = found
        if self.t - at > WINDOW_US or (reset_at is not None and self.t >= reset_at):
            return None
        return found

    def provider_used(self, dim: str) -> int | None:
        live = self.report(dim)
        if live is None or live[2] is None or live[3] is None:
            return None
        return max(0, live[2] - live[3])

    def provider_room(self, dim: str) -> float | None:
        live = self.report(dim)
        if live is None or live[3] is None:
            return None
        after = [s for s in self.samples if s[7] > live[1] and s[0] <= self.t]
        return _tidy(live[3] - self.usage_of(after, dim))

    def load(self, dim: str) -> float:
        return max(
            self.usage_of(self.window(), dim), self.reserved(dim), self.provider_used(dim) or 0
        )

    def load_tpm(self) -> float:
        return self.load("tpm")

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

    def dim_headroom(self, dim: str, klass: str) -> float | None:
        limit = limits_of(self.tokens).get(dim)
        if limit is None:
            return None
        reserve = limit["evaluator_reserve"] if klass == "solver" else 0
        return _tidy(limit["target"] - reserve - limit["cold_start_reserve"] - self.load(dim))

    def headroom(self, klass: str) -> float | None:
        return self.dim_headroom("tpm", klass)

    def figures(
        self, request: dict[str, Any], klass: str, binding: str | None = None
    ) -> dict[str, Any]:
        limits = limits_of(self.tokens)
        return {
            "usage_tpm": self.usage_tpm(),
            "usage": self.usage_parts(),
            "reserved_tpm": self.reserved_tpm(),
            "load_tpm": self.load_tpm(),
            "target_tpm": self.tokens["target_tpm"] if self.tokens else None,
            "headroom_tpm": self.headroom(klass),
            "forecast_tpm": forecast_of(request, "tpm"),
            "coverage": self.coverage(),
            "cooldown_until": None if self.cooldown_until is None else fmt(self.cooldown_until),
            "active_cases": self.active_counts(),
            "dimensions": {
                dim: {
                    "usage": self.usage_of(self.window(), dim),
                    "reserved": self.reserved(dim),
                    "provider_used": self.provider_used(dim),
                    "load": self.load(dim),
                    "target": limit["target"],
                    "headroom": self.dim_headroom(dim, klass),
                    "forecast": forecast_of(request, dim),
                }
                for dim, limit in limits.items()
            },
            "binding_dimension": binding,
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
    until = at_us + math.ceil(round(cooldown_s * US, 3))  # fractions round up to a µs
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


def dim_reason(dim: str, check: str) -> str:
    if dim == "tpm":
        return {
            "forecast_required": "token_forecast_required",
            "forecast_exceeds_target": "forecast_exceeds_target",
            "headroom_exhausted": "token_headroom_exhausted",
            "evaluator_reserve_protected": "evaluator_reserve_protected",
            "provider_exhausted": "tpm_provider_exhausted",
        }[check]
    return f"{dim}_{check}"


def token_reasons(state: GoalState, request: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(reason, dimension or None) in SPEC §3.6's order."""
    tokens = state.tokens
    if tokens is None:
        return []
    klass = request["class"]
    limits = limits_of(tokens)
    found: list[tuple[str, str | None]] = []

    def forecast_checks(dim: str) -> None:
        forecast = forecast_of(request, dim)
        if forecast is None:
            found.append((dim_reason(dim, "forecast_required"), dim))
        elif forecast > limits[dim]["target"]:
            found.append((dim_reason(dim, "forecast_exceeds_target"), dim))

    def room_checks(dim: str) -> None:
        forecast = forecast_of(request, dim)
        if forecast is None:
            return
        limit = limits[dim]
        need = state.load(dim) + forecast + limit["cold_start_reserve"]
        reserve = limit["evaluator_reserve"] if klass == "solver" else 0
        if need > limit["target"] - reserve:
            fits_without_reserve = klass == "solver" and need <= limit["target"]
            check = "evaluator_reserve_protected" if fits_without_reserve else "headroom_exhausted"
            found.append((dim_reason(dim, check), dim))
        room = state.provider_room(dim)
        if room is not None and forecast > room:
            found.append((dim_reason(dim, "provider_exhausted"), dim))

    if "tpm" in limits:
        forecast_checks("tpm")
    if state.cooling():
        found.append(("capacity_cooldown_active", None))
    if state.unmetered_in_window():
        found.append(("usage_unmetered_in_window", None))
    if state.stale():
        found.append(("usage_observation_stale", None))
    if "tpm" in limits:
        room_checks("tpm")
    for dim in OTHER_DIMS:
        if dim in limits:
            forecast_checks(dim)
            room_checks(dim)
    return found


def decide(state: GoalState, request: dict[str, Any]) -> tuple[str, list[str], str | None]:
    """('replay' | 'admit' | 'refuse', reasons, binding dimension)."""
    existing = state.runs.get(request["run"])
    if existing is not None and existing.active(state.t):
        if existing.request == request:
            return "replay", [], None
        return "refuse", ["run_exists_with_different_request"], None
    if state.cases is None and state.tokens is None:
        return "refuse", ["not_configured"], None
    tokens = token_reasons(state, request)
    reasons = case_reasons(state, request) + [reason for reason, _ in tokens]
    binding = next((dim for _, dim in tokens if dim is not None), None)
    return ("refuse", reasons, binding) if reasons else ("admit", [], None)


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
            state.explicit = list(data.get("explicit", []))
        elif event.kind == "capacity.observed":
            tokens = data["uncached_input"] + data["cached_input"] + data["output"]
            tokens += data.get("cache_write_input", 0)
            requests = data.get("requests")
            if requests is None:  # SPEC §3.6: one request when it carries tokens
                requests = 1 if tokens else 0
            state.samples.append(
                (
                    at,
                    data["uncached_input"],
                    data["cached_input"],
                    data["output"],
                    data["coverage"],
                    data.get("cache_write_input", 0),
                    requests,
                    event.seq,
                )
            )
            for dim, report in (data.get("provider") or {}).items():
                state.provider[dim] = (at, event.seq, *report)
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
            for dim, report in (data.get("provider") or {}).items():
                state.provider[dim] = (at, event.seq, *report)

    def _append(self, goal: str, kind: str, at_us: int, data: dict[str, Any]) -> Event:
        event = Event(len(self.events), goal, kind, at_us, data)
        self.events.append(event)
        return event

    def check_configured(self, goal: str) -> None:
        """SPEC §8: the capacity writers refuse a goal no configure named."""
        if not any(e.goal == goal and e.kind == "capacity.configured" for e in self.events):
            raise Invalid("unknown_goal")

    def check_time(self, goal: str, at_us: int) -> None:
        last = self.last_at(goal)
        if last is not None and at_us < last:
            raise Invalid("time_regression")

    # -- commands: each returns the expected outcome, appending what the real one would
    def configure(
        self,
        goal: str,
        at_us: int,
        flags: dict[str, Any],
        remove_limits: tuple[str, ...] = (),
        remove_gates: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        self.check_time(goal, at_us)
        given = {k: v for k, v in flags.items() if v is not None}
        if not given and not remove_limits and not remove_gates:
            raise Invalid("nothing to configure")
        state = self.fold(goal, at_us)
        cases, tokens, explicit = reconfigure(
            state.cases, state.tokens, state.explicit, given, remove_limits, remove_gates
        )
        config = {"cases": cases, "tokens": tokens}
        before, after = flat_of(state.cases, state.tokens), flat_of(cases, tokens)
        changes = {n: [before[n], after[n]] for n in ALL_FLAGS if before[n] != after[n]}
        if cases is not None:
            counts = state.active_counts()
            below = (
                cases["max_active_cases"] < counts["total"]
                or cases["max_baseline_cases"] < counts["baseline"]
                or cases["max_test_cases"] < counts["test"]
            )
            if below:
                return {"code": 1, "reasons": ["config_below_occupancy"], "config": config}
        data = {**config, "explicit": explicit}
        if (cases, tokens) == (state.cases, state.tokens) and set(explicit) == set(state.explicit):
            # A configure that changes nothing appends nothing (SPEC §8).
            return {"code": 0, "config": config, "explicit": explicit, "changes": changes,
                    "event": None}  # fmt: skip
        event = self._append(goal, "capacity.configured", at_us, data)
        return {
            "code": 0,
            "config": config,
            "explicit": explicit,
            "changes": changes,
            "event": event,
        }

    def observe_provider(self, goal: str, at_us: int, data: dict[str, Any]) -> Event:
        """An observation with every member given (cache writes, a provider report)."""
        self.check_time(goal, at_us)
        return self._append(goal, "capacity.observed", at_us, data)

    def observe(self, goal: str, at_us: int, sample: dict[str, Any]) -> dict[str, Any]:
        self.check_configured(goal)
        self.check_time(goal, at_us)
        data = {
            "run": sample.get("run"),
            "uncached_input": sample["uncached_input"],
            "cached_input": sample["cached_input"],
            "output": sample["output"],
            "requests": sample.get("requests"),
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
        self.check_configured(goal)
        self.check_time(goal, at_us)
        state = self.fold(goal, at_us)
        verdict, reasons, binding = decide(state, request)
        figures = state.figures(request, request["class"], binding)
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
        self.check_configured(goal)
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
        self.check_configured(goal)
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
                "forecast_tpm": forecast_of(run.request, "tpm"),
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
            "dimensions": {
                dim: {
                    "usage": state.usage_of(state.window(), dim),
                    "reserved": state.reserved(dim),
                    "provider_used": state.provider_used(dim),
                    "load": state.load(dim),
                    "quota": limit["quota"],
                    "target": limit["target"],
                    "headroom": {
                        "solver": state.dim_headroom(dim, "solver"),
                        "evaluator": state.dim_headroom(dim, "evaluator"),
                    },
                }
                for dim, limit in limits_of(state.tokens).items()
            },
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
    probe = {"class": "solver", **{f"forecast_{dim}": 1 for dim in DIMS}}
    return not token_reasons(state, probe)


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
    above_target = any(
        state.reserved(dim) > limit["target"] for dim, limit in limits_of(tokens).items()
    )
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
            verdict, reasons, binding = decide(state, data["request"])
            recorded = data.get("reasons", [])
            expected = "admit" if kind == "capacity.admitted" else "refuse"
            if (verdict, reasons) != (expected, recorded):
                problems.append(f"{where}: model says {verdict} {reasons}, journal {recorded}")
            figures = data.get("receipt") or data.get("figures") or {}
            figures = {"binding_dimension": None, **figures}
            wanted = state.figures(data["request"], data["request"]["class"], binding)
            if not figures.get("dimensions"):  # figures recorded before dimensions existed
                wanted.pop("dimensions")
                wanted.pop("binding_dimension")
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
