"""The real CLI against an independent model of SPEC §3 (tests/capacity/independent_model.py).

Hypothesis writes scenario scripts — configure / observe / admit (incl. dry runs and
replays) / reject / release / inspect (--at, --seq, past times) on two goals — at
explicit times that land on the fold's boundaries: a sample exactly 60 s old, 1 µs
before and after, a lease ending exactly at t, a cooldown ending exactly at t, the
streak horizon. Every answer of the real CLI (exit code, decision, the exact reason
list, every figure SPEC §3.3 lists, the JSON shapes of SPEC §8, inspect's view) is
compared with the model's; at the end the journal is verified independently (§2.1)
and its records compared with the model's log, so a refusal that wrote something,
or a decision that wrote the wrong thing, fails too.

A second test feeds generated bad CLI arguments to the five writing commands:
exit 2, one JSON error object, no traceback, nothing written.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.capacity.capacity_helpers import race
from tests.capacity.independent_model import (
    ARMS,
    US,
    WINDOW_US,
    Invalid,
    Model,
    audit_records,
    fmt,
    numbers_equal,
    verify_journal_bytes,
)
from tests.support import line_count, run_cli

BASE_US = int(datetime(2026, 11, 29, 14, 0, tzinfo=UTC).timestamp()) * US
GOALS = ("g1", "g1", "g1", "g2")
RUNS = ("r1", "r2", "r3", "r4")
FIGURE_KEYS = (
    "usage_tpm",
    "usage",
    "reserved_tpm",
    "load_tpm",
    "target_tpm",
    "headroom_tpm",
    "forecast_tpm",
    "coverage",
    "cooldown_until",
    "active_cases",
    "dimensions",
    "binding_dimension",
)
INSPECT_KEYS = (
    "config",
    "usage_tpm",
    "usage",
    "reserved_tpm",
    "load_tpm",
    "headroom_tpm",
    "coverage",
    "cooldown_until",
    "active_runs",
    "active_counts",
    "dimensions",
    "admission_ready",
    "next_action",
)
RUN_KEYS = ("run", "case", "arm", "class", "forecast_tpm", "admitted_at", "lease_until")
FORECASTS = ("forecast_itpm", "forecast_otpm", "forecast_rpm")
STEPS = [0, 0, 1, US, US, 7 * US, 7 * US, 20 * US, WINDOW_US - 1, WINDOW_US, 3 * WINDOW_US]


def render_at(at_us: int, offset_h: int) -> str:
    """The same instant in canonical UTC form or with a zone offset (both RFC 3339)."""
    if offset_h == 0:
        return fmt(at_us)
    if offset_h == 99:  # RFC 3339 §5.6: "T" and "Z" may be lower case
        return fmt(at_us).lower()
    zone = timezone(timedelta(hours=offset_h))
    return (
        (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=at_us))
        .astimezone(zone)
        .isoformat()
    )


def opt(flag: str, value: Any) -> list[str]:
    return [] if value is None else [flag, str(value)]


# -- generated inputs -----------------------------------------------------------------------

maybe = st.none

case_flags = st.fixed_dictionaries(
    {
        "max_active_cases": st.integers(1, 4),
        "target_active_cases": maybe() | st.integers(0, 4),
        "max_baseline_cases": maybe() | st.integers(0, 4),
        "max_test_cases": maybe() | st.integers(0, 4),
        "reserved_test_cases": maybe() | st.integers(0, 2),
    }
)
token_flags = st.fixed_dictionaries(
    {
        "quota_tpm": st.sampled_from([10, 1_000, 1_000, 5_000]),
        "target_tpm": maybe() | st.sampled_from([0, 500, 900, 1_000]),
        "evaluator_reserve_tpm": st.sampled_from([None, 0, 50, 200, 200]),
        "cold_start_reserve_tpm": maybe() | st.sampled_from([0, 25, 100]),
        "cached_input_weight": maybe() | st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0]),
        "max_observation_age_s": maybe() | st.sampled_from([0, 30, 120, 600]),
        "cooldown_base_s": maybe() | st.sampled_from([0, 1, 10, 15]),
        "cooldown_max_s": maybe() | st.sampled_from([0, 20, 40, 300]),
    }
)


def _dimension_flags(dim: str, quotas: list[int]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            f"quota_{dim}": st.sampled_from(quotas),
            f"target_{dim}": maybe() | st.sampled_from([0, 5, quotas[-1]]),
            f"evaluator_reserve_{dim}": maybe() | st.sampled_from([0, 1, 2]),
            f"cold_start_reserve_{dim}": maybe() | st.sampled_from([0, 1]),
        }
    )


def _some(flags: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A later configure gives only some fields (only what is given changes)."""
    return st.sets(st.sampled_from(sorted(flags)), min_size=1).map(
        lambda names: {k: v for k, v in flags.items() if k in names}
    )


limit_flags = st.builds(
    lambda dims: {k: v for d in dims for k, v in d.items()},
    st.lists(
        st.one_of(
            _dimension_flags("itpm", [10, 1_000]),
            _dimension_flags("otpm", [5, 100]),
            _dimension_flags("rpm", [2, 3, 10]),
        ),
        max_size=2,
    ),
)
configure_flags = st.one_of(
    case_flags,
    token_flags,
    st.builds(lambda a, b: {**a, **b}, case_flags, token_flags),
    st.builds(lambda a, b: {**a, **b}, token_flags, limit_flags),
    limit_flags.filter(bool),
    st.builds(lambda a, b: {**a, **b}, case_flags, limit_flags).flatmap(_some),
    st.builds(lambda a, b: {**a, **b}, token_flags, limit_flags).flatmap(_some),
)
observe_args = st.fixed_dictionaries(
    {
        "uncached_input": st.sampled_from([0, 0, 0, 7, 100, 333, 800]),
        "cached_input": st.sampled_from([0, 3, 100, 1_000]),
        "output": st.sampled_from([0, 1, 50]),
        "coverage": st.sampled_from([None, None, "measured", "estimated", "unmetered"]),
        "run": maybe() | st.sampled_from(RUNS),
        "requests": maybe() | st.integers(0, 5),
    }
)
admit_args = st.fixed_dictionaries(
    {
        "run": st.sampled_from(RUNS),
        "case": maybe() | st.sampled_from(["c1", "c2"]),
        "arm": st.sampled_from([*ARMS, *ARMS, None]),
        "class": maybe() | st.sampled_from(["solver", "evaluator"]),
        "forecast_tpm": st.sampled_from([None, 0, 1, 100, 100, 300, 300, 700, 2_000]),
        "forecast_itpm": st.sampled_from([None, None, 0, 5, 100, 900]),
        "forecast_otpm": st.sampled_from([None, None, 1, 50, 200]),
        "forecast_rpm": st.sampled_from([None, None, 1, 1, 2, 5]),
        "lease_s": st.sampled_from([None, 1, 5, 60, 60, 600]),
    }
)
reject_args = st.fixed_dictionaries(
    {
        "run": maybe() | st.sampled_from(RUNS),
        "retry_after_s": maybe() | st.sampled_from([0, 5, 30, 500]),
        "detail": maybe() | st.just("HTTP 429"),
    }
)
ZERO_REST = ["--cached-input", "0", "--output", "0"]
ZERO_USAGE = ["--uncached-input", "0", *ZERO_REST]

OPS = ["observe"] * 5 + ["admit"] * 6 + ["replay", "reject", "release", "release"]
OPS += ["inspect"] * 3 + ["configure"]


class Scenario:
    """One journal driven through the real CLI and the model side by side."""

    def __init__(self, path: str, data: st.DataObject | None) -> None:
        self.path, self.data = path, data
        self.model = Model()
        self.now = BASE_US
        self.calls = 0

    def cli(self, *args: str) -> Any:
        self.calls += 1
        result = run_cli(*args, "--journal", self.path, "--json")
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def draw(self, strategy: st.SearchStrategy[Any], label: str, scripted: Any = None) -> Any:
        """A generated value; in a scripted scenario (no data) the `scripted` one."""
        if self.data is None:
            return scripted
        return self.data.draw(strategy, label=label)

    # -- time
    def pick_time(self, goal: str, writes: bool, at_s: float | None = None) -> int:
        if at_s is not None:  # scripted: seconds after the base time
            at_us = BASE_US + round(at_s * US)
            self.now = max(self.now, at_us)
            return at_us
        mode = self.draw(st.sampled_from(["step"] * 5 + ["jump"] * 3 + ["back"]), "time")
        last = self.model.last_at(goal)
        if mode == "back" and writes and last is not None:
            return last - 1  # refused: time_regression
        if mode == "jump":
            boundaries = self.model.interesting_times(goal, self.now)
            if boundaries:
                self.now = self.draw(st.sampled_from(boundaries[:12]), "boundary")
                return self.now
        self.now += self.draw(st.sampled_from(STEPS), "step")
        return self.now

    def at_args(self, at_us: int) -> list[str]:
        return [
            "--at",
            render_at(at_us, self.draw(st.sampled_from([0, 0, 0, 2, -5, 99]), "zone", 0)),
        ]

    # -- the commands
    def step(self) -> None:
        goal = self.draw(st.sampled_from(GOALS), "goal")
        op = self.draw(st.sampled_from(OPS), "op")
        getattr(self, op)(goal)

    def expect_invalid(self, result: Any, before: bytes) -> None:
        assert result.code == 2, (result.code, result.stdout, result.stderr)
        body = result.json
        assert body["ok"] is False and set(body["error"]) >= {"code", "message"}, body
        assert self.read() == before, "an invalid command changed the journal"

    def read(self) -> bytes:
        with open(self.path, "rb") as handle:
            return handle.read()

    def check_event(self, body: dict[str, Any], event: Any) -> None:
        assert body["appended"] is True
        got = body["event"]
        assert set(got) == {"seq", "hash", "kind", "at"}, got
        assert (got["seq"], got["kind"], got["at"]) == (event.seq, event.kind, fmt(event.at_us))

    def configure(
        self, goal: str, until_valid: bool = False, at: float | None = None, **flags: Any
    ) -> None:
        flags = flags or self.draw(configure_flags, "configure")
        at_us = self.pick_time(goal, writes=True, at_s=at)
        if until_valid:  # the scenario's opening config: valid, or the fallback below
            at_us = self.now
            try:
                self.model.configure(goal, at_us, flags)
                self.model.events.pop()
            except Invalid:
                flags = {"max_active_cases": 3, "quota_tpm": 1_000}
        args = ["configure", "--goal", goal, *self.at_args(at_us)]
        for name, value in flags.items():
            args += opt("--" + name.replace("_", "-"), value)
        before = self.read()
        result = self.cli(*args)
        try:
            expected = self.model.configure(goal, at_us, flags)
        except Invalid:
            return self.expect_invalid(result, before)
        assert result.code == expected["code"], (flags, result.stdout, result.stderr)
        body = result.json
        if expected["code"] == 1:
            assert body["ok"] is False and body["appended"] is False
            assert body["reasons"] == expected["reasons"]
            assert self.read() == before
            return None
        assert body["ok"] is True
        assert numbers_equal(body["config"], expected["config"]), (body["config"], expected)
        assert body["explicit"] == expected["explicit"], (flags, body, expected)
        assert numbers_equal(body["changes"], expected["changes"]), (flags, body, expected)
        if expected["event"] is None:  # nothing changes: nothing appended (SPEC §8)
            assert body["appended"] is False and self.read() == before
            return None
        self.check_event(body, expected["event"])
        return None

    def observe(self, goal: str, at: float | None = None, **given: Any) -> None:
        if given:
            sample = {"uncached_input": 0, "cached_input": 0, "output": 0}
            sample |= {"coverage": None, "run": None}
            sample |= {"requests": None, **given}
        else:
            sample = self.draw(observe_args, "observe")
            for counter in ("uncached_input", "cached_input", "output"):
                # SPEC §3.5: all three counters are required options.
                sample[counter] = 0 if sample[counter] is None else sample[counter]
            if sample["run"] is not None:
                sample["run"] = self.some_run(goal)
        at_us = self.pick_time(goal, writes=True, at_s=at)
        args = ["observe", "--goal", goal, *self.at_args(at_us)]
        for name in ("uncached_input", "cached_input", "output", "requests", "coverage", "run"):
            args += opt("--" + name.replace("_", "-"), sample[name])
        before = self.read()
        result = self.cli(*args)
        try:
            expected = self.model.observe(goal, at_us, sample)
        except Invalid:
            return self.expect_invalid(result, before)
        assert result.code == 0, (result.stdout, result.stderr)
        body = result.json
        assert body["ok"] is True
        for key in ("usage_tpm", "usage", "coverage", "lease_until"):
            assert numbers_equal(body[key], expected[key]), (key, body, expected)
        self.check_event(body, expected["event"])
        return None

    def replay(self, goal: str) -> None:
        """Admit a run that is active again: the same request, or one field changed."""
        state = self.model.fold(goal, self.now)
        active = state.active_runs()
        if not active:
            return self.admit(goal)
        _, run = self.draw(st.sampled_from(active), "replayed run")
        request = dict(run.request)
        change = self.draw(
            st.sampled_from([None, None, "case", "forecast_tpm", "lease_s"]), "change"
        )
        if change == "case":
            request["case"] = "other" if request["case"] != "other" else None
        elif change == "forecast_tpm":
            request["forecast_tpm"] = (request["forecast_tpm"] or 0) + 1
        elif change == "lease_s":
            request["lease_s"] = None if request["lease_s"] else 60
        return self.admit(goal, request)

    def _admit_request(self, request: dict[str, Any] | None, given: dict[str, Any]) -> Any:
        """The request as given, drawn, or taken from an earlier one; as journaled, the
        forecasts of the later dimensions only when given."""
        if given:
            request = {"case": None, "arm": None, "class": "solver", "forecast_tpm": None}
            request |= {"lease_s": None, **given}
        elif request is None:
            request = self.draw(admit_args, "admit")
            request = {**request, "class": request["class"] or "solver"}
        return {k: v for k, v in request.items() if k not in FORECASTS or v is not None}

    def admit(
        self,
        goal: str,
        request: dict[str, Any] | None = None,
        at: float | None = None,
        dry_run: bool = False,
        **given: Any,
    ) -> None:
        request = self._admit_request(request, given)
        dry_run = self.draw(st.booleans(), "dry run", dry_run) and self.draw(
            st.booleans(), "dry", dry_run
        )
        at_us = self.pick_time(goal, writes=True, at_s=at)
        args = ["admit", "--goal", goal, *self.at_args(at_us), "--run", request["run"]]
        for name in ("case", "arm", "class", "forecast_tpm", "lease_s", *FORECASTS):
            args += opt("--" + name.replace("_", "-"), request.get(name))
        if dry_run:
            args.append("--dry-run")
        before = self.read()
        result = self.cli(*args)
        try:
            expected = self.model.admit(goal, at_us, request, dry_run)
        except Invalid:
            return self.expect_invalid(result, before)
        body = result.json
        context = (request, dry_run, fmt(at_us), body)
        assert result.code == expected["code"], context
        assert {"ok", "admitted", "idempotent", "appended"} <= set(body), body
        if expected["verdict"] == "replay":
            assert body["ok"] is True and body["admitted"] is True, context
            assert body["idempotent"] is True and body["appended"] is False, context
            assert body["receipt"] == expected["original"].receipt, context
            assert self.read() == before
            return None
        admitted = expected["verdict"] == "admit"
        assert body["ok"] is admitted and body["admitted"] is admitted, context
        assert body["idempotent"] is False, context
        if admitted:
            assert "reasons" not in body or body["reasons"] == [], context
            figures = body["receipt"]
            token_gate = self.model.fold(goal, at_us).tokens is not None
            assert figures["tokens"] == ("reserved" if token_gate else "not_configured")
        else:
            assert body["reasons"] == expected["reasons"], (expected, context)
            figures = body["figures"]
        for key in FIGURE_KEYS:
            assert numbers_equal(figures[key], expected["figures"][key]), (key, context)
        if dry_run:
            assert body["appended"] is False and self.read() == before, context
            return None
        event = expected["event"]
        self.check_event(body, event)
        if admitted:
            receipt = body["receipt"]
            assert receipt["run"] == request["run"] and receipt["at"] == fmt(at_us)
            assert (receipt["seq"], receipt["hash"]) == (event.seq, body["event"]["hash"])
            self.model.remember_receipt(event, receipt)
        return None

    def reject(self, goal: str, at: float | None = None, **given: Any) -> None:
        if self.data is None:
            args_in = {"run": None, "retry_after_s": None, "detail": None, **given}
        else:
            args_in = self.draw(reject_args, "reject")
        at_us = self.pick_time(goal, writes=True, at_s=at)
        args = ["reject", "--goal", goal, *self.at_args(at_us)]
        args += opt("--run", args_in["run"]) + opt("--retry-after-s", args_in["retry_after_s"])
        args += opt("--detail", args_in["detail"])
        before = self.read()
        result = self.cli(*args)
        try:
            expected = self.model.reject(goal, at_us, args_in["run"], args_in["retry_after_s"])
        except Invalid:
            return self.expect_invalid(result, before)
        assert result.code == 0, (result.stdout, result.stderr)
        body = result.json
        assert body["ok"] is True
        for key in ("run", "retry_after_s", "cooldown_s", "clamped", "cooldown_until", "streak"):
            assert body[key] == expected[key], (key, body, expected, fmt(at_us))
        self.check_event(body, expected["event"])
        return None

    def some_run(self, goal: str) -> str:
        """Mostly a run that is active (or just expired), sometimes any run id."""
        held = list(self.model.fold(goal, self.now).runs)
        if held and self.draw(st.integers(0, 3), "pick held"):
            return str(self.draw(st.sampled_from(held), "held run"))
        return str(self.draw(st.sampled_from(RUNS), "run"))

    def release(self, goal: str, at: float | None = None, run: str | None = None) -> None:
        run = run or self.some_run(goal)
        at_us = self.pick_time(goal, writes=True, at_s=at)
        before = self.read()
        result = self.cli("release", "--goal", goal, *self.at_args(at_us), "--run", run)
        try:
            expected = self.model.release(goal, at_us, run)
        except Invalid:
            return self.expect_invalid(result, before)
        assert result.code == 0, (result.stdout, result.stderr)
        body = result.json
        assert {"ok", "released", "appended", "reasons"} <= set(body), body
        assert body["ok"] is True
        assert body["released"] is expected["released"], (run, fmt(at_us), body)
        assert body["reasons"] == expected["reasons"]
        if expected["event"] is None:
            assert body["appended"] is False and self.read() == before
        else:
            self.check_event(body, expected["event"])
        return None

    def inspect(self, goal: str, at: float | None = None) -> None:
        how = self.draw(st.sampled_from(["now", "now", "past", "seq"]), "inspect", "now")
        only = self.draw(st.booleans(), "one goal", True)
        if at is not None:
            self.pick_time(goal, writes=False, at_s=at)
        args = ["inspect"] + (["--goal", goal] if only else [])
        if how == "seq":
            upto = self.draw(st.integers(1, len(self.model.events) - 1 or 1), "seq")
            result = self.cli(*args, "--seq", str(upto))
            assert result.code == 0, (result.stdout, result.stderr)
            views = {}
            for name in self.model.goals_at(self.now):
                times = [e.at_us for e in self.model.events if e.goal == name and e.seq <= upto]
                if times:
                    views[name] = self.model.view(name, max(times), upto)
            if only:
                views = {goal: views[goal]} if goal in views else None
            if views is None:  # the goal has no record up to that seq: not specified
                return
            return self.compare_views(result.json, views, ("--seq", upto))
        t = self.now if at is None else BASE_US + round(at * US)
        if how == "past":
            times = [e.at_us for e in self.model.events[1:]] or [self.now]
            t = self.draw(st.sampled_from(times), "past") + self.draw(
                st.sampled_from([-1, 0, 1]), "d"
            )
        result = self.cli(*args, *self.at_args(t))
        assert result.code == 0, (result.stdout, result.stderr)
        names = [goal] if only else self.model.goals_at(t)
        views = {name: self.model.view(name, t) for name in names}
        return self.compare_views(result.json, views, fmt(t))

    def compare_views(self, body: dict[str, Any], views: dict[str, Any], when: Any) -> None:
        assert body["ok"] is True
        assert set(body["goals"]) == set(views), (when, body, views)
        for name, expected in views.items():
            got = body["goals"][name]
            for key in INSPECT_KEYS:
                value = got[key]
                if key == "active_runs":
                    value = sorted(({k: r[k] for k in RUN_KEYS} for r in value), key=str)
                    expected[key] = sorted(expected[key], key=str)
                assert numbers_equal(value, expected[key]), (name, key, when, value, expected[key])

    # -- the journal, checked independently
    def check_journal(self) -> None:
        records = verify_journal_bytes(self.read())
        assert audit_records(records) == []
        assert len(records) == len(self.model.events), "the journal and the model differ"
        for record, event in zip(records[1:], self.model.events[1:], strict=True):
            assert (record["seq"], record["kind"], record["goal"], record["at"]) == (
                event.seq,
                event.kind,
                event.goal,
                fmt(event.at_us),
            )
            data = record["data"]
            if event.kind == "capacity.configured":
                # Members with their default values are omitted from lines (SPEC §3.1).
                if data["tokens"] is not None:
                    data["tokens"].setdefault("limits", {})
                assert numbers_equal({"explicit": [], **data}, event.data)
            elif event.kind in ("capacity.admitted", "capacity.refused"):
                assert data["request"] == event.data["request"]
            elif event.kind == "capacity.observed":
                for key in ("run", "uncached_input", "cached_input", "output", "coverage"):
                    assert data[key] == event.data[key]
            elif event.kind == "capacity.rejected":
                assert data["cooldown_until"] == fmt(event.data["cooldown_until_us"])
                assert (data["run"], data["streak"]) == (event.data["run"], event.data["streak"])
            elif event.kind == "capacity.released":
                assert data == {"run": event.data["run"]}


@settings(
    max_examples=int(os.environ.get("QUOTALEDGER_MODEL_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_cli_agrees_with_the_independent_model(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        scenario = Scenario(os.path.join(tmp, "j.jsonl"), data)
        # Create the journal with a heartbeat on a bystander goal (it shows in inspect).
        _bystander(scenario)
        for goal in ("g1", "g2"):
            scenario.configure(goal, until_valid=True)
        for _ in range(data.draw(st.integers(5, 30), label="steps")):
            scenario.step()
        scenario.check_journal()


TOKENS = {"quota_tpm": 100_000, "target_tpm": 90_000}
SCRIPTS: dict[str, list[tuple[Any, ...]]] = {
    "window_boundary_and_weight": [
        ("configure", 0, {**TOKENS, "cached_input_weight": 0.25, "max_observation_age_s": 3600}),
        ("observe", 0, {"uncached_input": 89_999, "cached_input": 3}),
        ("admit", 59.999999, {"run": "r1", "forecast_tpm": 1, "dry_run": True}),
        ("admit", 60, {"run": "r1", "forecast_tpm": 1}),
        ("inspect", 59.999999, {}),
        ("inspect", 60, {}),
        ("observe", 61, {"uncached_input": 1, "cached_input": 7, "output": 2}),
        ("inspect", 61, {}),
        ("inspect", 120.999999, {}),
        ("inspect", 121, {}),
    ],
    "evaluator_reserve_and_cold_start": [
        (
            "configure",
            0,
            {
                "quota_tpm": 1_000,
                "target_tpm": 800,
                "evaluator_reserve_tpm": 100,
                "cold_start_reserve_tpm": 50,
            },
        ),
        ("observe", 1, {"uncached_input": 100}),
        ("admit", 2, {"run": "r1", "forecast_tpm": 600}),
        ("admit", 2, {"run": "r2", "forecast_tpm": 700}),
        ("admit", 2, {"run": "r3", "forecast_tpm": 550}),
        ("admit", 2, {"run": "r4", "forecast_tpm": 100, "class": "evaluator"}),
        ("admit", 2, {"run": "r5", "forecast_tpm": 1, "class": "evaluator"}),
        ("admit", 2, {"run": "r6", "forecast_tpm": 900}),
        ("admit", 3, {"run": "r7"}),
        ("inspect", 3, {}),
        ("configure", 4, {"quota_tpm": 1_000, "target_tpm": 500}),
        ("inspect", 4, {}),
    ],
    "case_caps_and_reserved_test": [
        ("configure", 0, {"max_active_cases": 3, "reserved_test_cases": 1}),
        ("admit", 1, {"run": "r1", "arm": "baseline", "case": "c1"}),
        ("admit", 1, {"run": "r2", "arm": "baseline"}),
        ("admit", 1, {"run": "r3", "arm": "baseline"}),
        ("admit", 1, {"run": "r3", "arm": "treatment", "forecast_tpm": 5}),
        ("admit", 1, {"run": "r4", "arm": "explore"}),
        ("admit", 1, {"run": "r5"}),
        ("admit", 1, {"run": "r5", "arm": "control"}),
        ("configure", 2, {"max_active_cases": 2}),
        ("configure", 2, {"max_active_cases": 3, "max_test_cases": 0}),
        ("configure", 2, {"max_active_cases": 4, "target_active_cases": 1}),
        ("inspect", 2, {}),
        ("release", 3, {"run": "r1"}),
        ("release", 3, {"run": "r1"}),
        ("inspect", 3, {}),
        ("configure", 4, {"max_active_cases": 4, "target_active_cases": 4}),
        ("inspect", 4, {}),
    ],
    "cooldown_streak_and_clamp": [
        (
            "configure",
            0,
            {**TOKENS, "cooldown_base_s": 10, "cooldown_max_s": 40, "max_observation_age_s": 3600},
        ),
        ("observe", 0, {"uncached_input": 10}),
        ("reject", 1, {}),
        ("reject", 5, {"run": "r1"}),
        ("admit", 24.999999, {"run": "r1", "forecast_tpm": 1, "dry_run": True}),
        ("inspect", 24.999999, {}),
        ("admit", 25, {"run": "r1", "forecast_tpm": 1}),
        ("reject", 64.999999, {}),
        ("reject", 150, {}),
        ("reject", 200, {}),
        ("reject", 229.999999, {"retry_after_s": 500}),
        ("reject", 230, {"retry_after_s": 3}),
        ("inspect", 270, {}),
        ("reject", 310, {"retry_after_s": 0}),
        ("reject", 400, {"retry_after_s": 0}),
    ],
    "leases_expire_at_t_and_renew": [
        ("configure", 0, {"max_active_cases": 2, **TOKENS}),
        ("observe", 0, {"uncached_input": 0}),
        ("admit", 0, {"run": "r1", "arm": "baseline", "forecast_tpm": 10, "lease_s": 10}),
        ("observe", 5, {"run": "r1", "uncached_input": 0}),
        ("inspect", 14.999999, {}),
        ("inspect", 15, {}),
        ("observe", 15, {"run": "r1", "uncached_input": 0}),
        ("release", 15, {"run": "r1"}),
        ("admit", 15, {"run": "r1", "arm": "baseline", "forecast_tpm": 10, "lease_s": 10}),
        ("admit", 16, {"run": "r1", "arm": "baseline", "forecast_tpm": 10, "lease_s": 10}),
        ("admit", 16, {"run": "r1", "arm": "baseline", "forecast_tpm": 11, "lease_s": 10}),
        ("observe", 24.999999, {"run": "r1", "uncached_input": 0}),
        ("inspect", 34.999998, {}),
        ("inspect", 34.999999, {}),
        ("admit", 35, {"run": "r1", "arm": "baseline", "forecast_tpm": 10, "lease_s": 10}),
    ],
    "unmetered_ages_out_and_staleness": [
        ("configure", 0, {**TOKENS, "max_observation_age_s": 30}),
        ("admit", 0, {"run": "r0", "forecast_tpm": 1}),
        ("observe", 0, {"uncached_input": 10, "coverage": "unmetered"}),
        ("observe", 1, {"uncached_input": 0, "coverage": "estimated"}),
        ("admit", 30, {"run": "r1", "forecast_tpm": 1, "dry_run": True}),
        ("inspect", 31, {}),
        ("admit", 31, {"run": "r1", "forecast_tpm": 1, "dry_run": True}),
        ("observe", 59, {"uncached_input": 0}),
        ("admit", 59.999999, {"run": "r1", "forecast_tpm": 1}),
        ("admit", 60, {"run": "r1", "forecast_tpm": 1}),
        ("inspect", 89, {}),
        ("inspect", 89.000001, {}),
    ],
    # A goal no configure named is unknown_goal to every writer (SPEC §8).
    "unknown_goal_then_case_only_forecast": [
        ("admit", 0, {"run": "r1", "forecast_tpm": 5}),
        ("reject", 0, {}),
        ("release", 0, {"run": "r1"}),
        ("observe", 0, {"uncached_input": 1}),
        ("configure", 1, {"max_active_cases": 1}),
        ("admit", 1, {"run": "r1", "arm": "control", "forecast_tpm": 5}),
        ("admit", 1, {"run": "r2", "arm": "control"}),
        ("inspect", 1, {}),
        ("configure", 2, {"quota_tpm": 1}),
        ("admit", 2, {"run": "r2", "arm": "control", "forecast_tpm": 1}),
        ("inspect", 2, {}),
    ],
}


def _bystander(scenario: Scenario) -> None:
    """Goal g0, configured (a case gate) and observed once: it shows in inspect."""
    at = ["--at", fmt(BASE_US)]
    assert scenario.cli("configure", "--goal", "g0", *at, "--max-active-cases", "1").code == 0
    scenario.model.configure("g0", BASE_US, {"max_active_cases": 1})
    assert scenario.cli("observe", "--goal", "g0", *at, *ZERO_USAGE).code == 0
    sample = {"uncached_input": 0, "cached_input": 0, "output": 0}
    scenario.model.observe("g0", BASE_US, sample)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_scripted_scenarios_agree_with_the_model(name: str, tmp_path: Any) -> None:
    """Hand-written boundary scripts (every §3.3 reason, 60 s / 1 µs edges, leases ending
    exactly at t, cooldown horizons) through the same comparisons as the generated ones."""
    scenario = Scenario(str(tmp_path / "j.jsonl"), None)
    _bystander(scenario)
    for op, seconds, options in SCRIPTS[name]:
        getattr(scenario, op)("g", at=seconds, **options)
    scenario.check_journal()


@pytest.mark.slow
def test_racing_processes_leave_a_journal_the_model_reproduces(journal_path: str) -> None:
    """Real processes race admits (case slots and tokens), usage, a 429 and a release at
    implicit times; the journal then verifies (§2.1, checked here) and every decision in
    it is the one the model takes on the records before it — whatever order the race
    produced — and what each racer printed is what the journal holds."""
    setup = [
        [
            "configure",
            "--goal",
            "g",
            "--max-active-cases",
            "5",
            "--target-active-cases",
            "4",
            "--reserved-test-cases",
            "1",
            "--quota-tpm",
            "100000",
            "--target-tpm",
            "60000",
            "--evaluator-reserve-tpm",
            "5000",
        ],
        [
            "observe",
            "--goal",
            "g",
            "--uncached-input",
            "9000",
            "--cached-input",
            "2000",
            "--output",
            "0",
        ],
        ["admit", "--goal", "g", "--run", "r0", "--arm", "baseline", "--forecast-tpm", "8000"],
    ]
    for args in setup:
        assert run_cli(*args, "--journal", journal_path, "--json").code == 0
    arms = ["baseline", "treatment", "control", "baseline", "explore", "baseline", "control"]
    commands = [
        [
            "admit",
            "--goal",
            "g",
            "--run",
            f"r{i}",
            "--arm",
            arm,
            "--forecast-tpm",
            str(9_000 + 1_000 * i),
        ]
        for i, arm in enumerate(arms, start=1)
    ]
    commands += [
        [
            "admit",
            "--goal",
            "g",
            "--run",
            "e1",
            "--arm",
            "control",
            "--class",
            "evaluator",
            "--forecast-tpm",
            "4000",
        ],
        ["observe", "--goal", "g", "--run", "r0", "--uncached-input", "3000", *ZERO_REST],
        ["release", "--goal", "g", "--run", "r0"],
        ["admit", "--goal", "g", "--run", "h", "--arm", "control", "--forecast-tpm", "1"],
    ]
    results = race(journal_path, commands)
    with open(journal_path, "rb") as handle:
        records = verify_journal_bytes(handle.read())
    assert len(records) == 4 + len(commands)
    assert audit_records(records) == []
    by_seq = {record["seq"]: record for record in records}
    for (code, body), command in zip(results, commands, strict=True):
        record = by_seq[body["event"]["seq"]]
        assert record["hash"] == body["event"]["hash"] and record["goal"] == "g"
        if command[0] == "admit":
            assert record["data"]["request"]["run"] == command[4]
            assert code == (0 if record["kind"] == "capacity.admitted" else 1), body
    # The case gate never went past its target, the token gate never past its target.
    view = run_cli("inspect", "--journal", journal_path, "--json").json["goals"]["g"]
    assert view["active_counts"]["total"] <= 4 and view["reserved_tpm"] <= 60_000


# -- bad input: exit 2, one JSON error, nothing written --------------------------------------

BAD_INTS = st.one_of(
    st.integers(-(10**15), -1).map(str),
    st.integers(10**12 + 1, 10**18).map(str),
    st.sampled_from(["1.5", "1e3", "abc", "", "0x10", "NaN", "+-1", "1_000_000_000_001"]),
)
BAD_IDENTIFIERS = st.one_of(
    st.sampled_from(["", "a b", "x" * 129, "é", "a\n", "a;b", "$x", "a\tb", "r1\x00"]),
    st.text(min_size=1, max_size=4).filter(lambda s: any(c not in _IDENT_CHARS for c in s)),
)
_IDENT_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@/-")
BAD_TIMES = st.sampled_from(
    [
        "2026-12-01T00:00:00",
        "2026-12-01 00:00:00",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-12-01T25:00:00Z",
        "",
        "1733011200",
        "2026-12-01",
        "20261201T000001Z",
        "2026-12-01T00:00:01+0000",
        "2026-12-01T00:00Z",
        "2026-12-01T00:00:01 Z",
    ]
)
VALID = {
    "inspect": [],
    "configure": ["--max-active-cases", "3", "--quota-tpm", "1000"],
    "observe": ["--uncached-input", "1", "--cached-input", "2", "--output", "3"],
    "admit": ["--run", "r9", "--arm", "baseline", "--forecast-tpm", "1"],
    "reject": ["--run", "r1", "--retry-after-s", "5"],
    "release": ["--run", "r1"],
}
INT_FLAGS = {
    "configure": [
        "--max-active-cases",
        "--target-active-cases",
        "--max-baseline-cases",
        "--max-test-cases",
        "--reserved-test-cases",
        "--quota-tpm",
        "--target-tpm",
        "--evaluator-reserve-tpm",
        "--cold-start-reserve-tpm",
        "--max-observation-age-s",
        "--cooldown-base-s",
        "--cooldown-max-s",
    ],
    "observe": ["--uncached-input", "--cached-input", "--output", "--requests"],
    "admit": ["--forecast-tpm", "--lease-s"],
    "reject": ["--retry-after-s"],
    "release": [],
    "inspect": ["--seq"],
}
ID_FLAGS = {
    "inspect": ["--goal"],
    "configure": ["--goal"],
    "observe": ["--goal", "--run"],
    "admit": ["--goal", "--run", "--case"],
    "reject": ["--goal", "--run"],
    "release": ["--goal", "--run"],
}
ENUM_FLAGS = {
    "configure": [("--cached-input-weight", ["-0.1", "1.5", "nan", "inf", "x", "1e400"])],
    "observe": [("--coverage", ["metered", "MEASURED", "", "unknown"])],
    "admit": [
        ("--class", ["judge", "Solver", ""]),
        ("--arm", ["baseline2", "Control", "", "test"]),
    ],
    "reject": [],
    "release": [],
    "inspect": [],
}


def _replace(args: list[str], flag: str, value: str) -> list[str]:
    if flag in args:
        index = args.index(flag)
        return [*args[:index], flag, value, *args[index + 2 :]]
    return [*args, flag, value]


@st.composite
def bad_command(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(VALID)))
    args = ["--goal", "g", "--at", "2027-01-01T00:00:00Z", *VALID[command]]
    kinds = ["time", "id"] + (["int"] if INT_FLAGS[command] else [])
    kinds += ["enum"] if ENUM_FLAGS[command] else []
    kind = draw(st.sampled_from(kinds))
    if kind == "time":
        args = _replace(args, "--at", draw(BAD_TIMES))
    elif kind == "id":
        args = _replace(args, draw(st.sampled_from(ID_FLAGS[command])), draw(BAD_IDENTIFIERS))
    elif kind == "int":
        args = _replace(args, draw(st.sampled_from(INT_FLAGS[command])), draw(BAD_INTS))
    else:
        flag, values = draw(st.sampled_from(ENUM_FLAGS[command]))
        args = _replace(args, flag, draw(st.sampled_from(values)))
    return [command, *args]


@pytest.fixture(scope="module")
def busy_journal(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A journal with a configured goal, a usage sample and an active run."""
    path = str(tmp_path_factory.mktemp("bad") / "j.jsonl")
    at = "2026-12-01T00:00:00Z"
    for args in (
        ["configure", "--goal", "g", "--max-active-cases", "3", "--quota-tpm", "1000"],
        ["observe", "--goal", "g", "--run", "r1", "--uncached-input", "5", *ZERO_REST],
        ["admit", "--goal", "g", "--run", "r1", "--arm", "control", "--forecast-tpm", "10"],
    ):
        result = run_cli(*args, "--at", at, "--journal", path, "--json")
        assert result.code == 0, result.stdout
    return path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=bad_command())
def test_bad_cli_arguments_are_exit_2_and_write_nothing(busy_journal: str, args: list[str]):
    with open(busy_journal, "rb") as handle:
        before = handle.read()
    result = run_cli(*args, "--journal", busy_journal, "--json")
    assert result.code == 2, (args, result.code, result.stdout, result.stderr)
    body = result.json
    assert body["ok"] is False and {"code", "message"} <= set(body["error"]), (args, body)
    assert "Traceback" not in result.stderr + result.stdout, (args, result.stderr)
    with open(busy_journal, "rb") as handle:
        assert handle.read() == before, args
    assert line_count(busy_journal) == 4
