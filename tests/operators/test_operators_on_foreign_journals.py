"""Operators' questions (SPEC §7) asked of journals quotaledger never wrote.

`independent_operators.py` is a second implementation of SPEC §3 written from the SPEC text; it
journals with the independent writer (json + hashlib) and answers the questions
itself. quotaledger's CLI must give the same answers: why a run was refused (binding
constraint, shortfall of SPEC §7's formula), what held the capacity, when it could
have started (exactly), whether a wrongly recorded decision reproduces, what a
different config would have flipped, and what `inspect`, `metrics`, `log` and
`report` show.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from tests.operators.independent_operators import (
    WINDOW_US,
    Goal,
    IndependentOperators,
    random_history,
    ts,
    us_of,
)
from tests.support import REPO, run_cli, run_process

AUDIT_KEYS = {"ok", "event", "recorded", "replayed", "reproduced", "explanation"}
EXPLANATION_KEYS = {
    "binding_constraint",
    "shortfall_tpm",
    "usage_tpm",
    "reserved_tpm",
    "load_tpm",
    "target_tpm",
    "top_contributors",
    "cooldown_until",
    "coverage",
    "earliest_admissible_at",
}
SEEDS = range(1, 13)
TOKEN_DEFAULTS = {
    "evaluator_reserve_tpm": 0,
    "cold_start_reserve_tpm": 0,
    "cached_input_weight": 1.0,
    "max_observation_age_s": 60,
    "cooldown_base_s": 15,
    "cooldown_max_s": 300,
}


def _write(tmp_path: Path, world: IndependentOperators, name: str = "foreign.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(world.bytes())
    return str(path)


def _cli(path: str, *args: str) -> Any:
    result = run_cli(*args, "--journal", path, "--json")
    assert "Traceback" not in result.stderr
    return result


def _check_audit(
    body: dict[str, Any], decision: dict[str, Any], world: IndependentOperators
) -> None:
    assert set(body) >= AUDIT_KEYS
    assert set(body["event"]) >= {"seq", "hash", "kind", "at", "goal", "run"}
    assert set(body["recorded"]) == {"admitted", "reasons"}
    assert set(body["replayed"]) == {"admitted", "reasons"}
    assert set(body["explanation"]) >= EXPLANATION_KEYS
    event = body["event"]
    record = world.records[decision["seq"]]
    assert event["seq"] == decision["seq"] and event["goal"] == decision["goal"]
    assert event["at"] == record["at"] and event["kind"] == record["kind"]
    assert event["run"] == decision["request"]["run"]
    assert body["replayed"] == {"admitted": decision["admitted"], "reasons": decision["reasons"]}
    ex, mine = body["explanation"], decision["explanation"]
    for key in ("binding_constraint", "shortfall_tpm", "usage_tpm", "reserved_tpm", "load_tpm"):
        assert ex[key] == mine[key], (key, ex[key], mine[key])
    for key in ("target_tpm", "cooldown_until", "coverage"):
        assert ex[key] == mine[key], (key, ex[key], mine[key])
    earliest = mine["earliest"]
    assert ex["earliest_admissible_at"] == (None if earliest is None else ts(earliest))
    # Top contributors: the heaviest runs of the window, by weighted usage.
    expected = sorted(mine["contributors"], key=lambda c: -c[1])
    got = [(c["run"], c["usage_tpm"]) for c in ex["top_contributors"]]
    assert [u for _, u in got] == [u for _, u in expected][: len(got)]
    assert set(got) <= set(expected)
    assert len(got) == min(len(expected), len(got)) and (len(got) >= min(len(expected), 3))


@pytest.mark.parametrize("seed", SEEDS)
def test_audit_answers_match_an_independent_computation(tmp_path: Path, seed: int) -> None:
    world = random_history(seed)
    path = _write(tmp_path, world)
    assert world.decisions
    for decision in world.decisions:
        result = _cli(path, "audit", "--seq", str(decision["seq"]))
        assert result.code == 0, result.stdout
        body = result.json
        assert body["ok"] is True and body["reproduced"] is True
        assert body["recorded"] == body["replayed"]
        _check_audit(body, decision, world)


def test_audit_by_hash_and_by_goal_run_find_the_same_decision(tmp_path: Path) -> None:
    world = random_history(3)
    path = _write(tmp_path, world)
    last_by_run: dict[tuple[str, str], dict[str, Any]] = {}
    for decision in world.decisions:
        last_by_run[(decision["goal"], decision["request"]["run"])] = decision
    for (goal, run), decision in last_by_run.items():
        body = _cli(path, "audit", "--goal", goal, "--run", run).json
        assert body["event"]["seq"] == decision["seq"]
        _check_audit(body, decision, world)
    decision = world.decisions[len(world.decisions) // 2]
    line = world.writer.lines[decision["seq"]]
    digest = json.loads(line)["hash"]
    body = _cli(path, "audit", "--hash", digest).json
    assert body["event"]["seq"] == decision["seq"] and body["event"]["hash"] == digest


def test_earliest_admissible_at_is_exact_on_independent_histories(tmp_path: Path) -> None:
    """Re-deciding (admit --dry-run on a copy) at the earliest time passes, 1 µs before fails."""
    checked = 0
    for seed in SEEDS:
        world = random_history(seed)
        for decision in world.decisions:
            earliest = decision["explanation"]["earliest"]
            if decision["admitted"] or earliest is None or checked >= 6:
                continue
            # The state just before the decision, then the same request at those times.
            prefix = b"".join(world.writer.lines[: decision["seq"]])
            path = tmp_path / f"prefix-{seed}-{decision['seq']}.jsonl"
            path.write_bytes(prefix)
            req = decision["request"]
            args = ["admit", "--dry-run", "--goal", decision["goal"], "--run", req["run"]]
            args += ["--class", req["class"]]
            for flag, key in (("--case", "case"), ("--arm", "arm")):
                if req[key] is not None:
                    args += [flag, req[key]]
            for flag, key in (("--forecast-tpm", "forecast_tpm"), ("--lease-s", "lease_s")):
                if req[key] is not None:
                    args += [flag, str(req[key])]
            at_pass = _cli(str(path), *args, "--at", ts(earliest))
            at_fail = _cli(str(path), *args, "--at", ts(earliest - 1))
            assert at_pass.code == 0 and at_pass.json["admitted"] is True, at_pass.stdout
            assert at_fail.code == 1 and at_fail.json["admitted"] is False
            checked += 1
    assert checked >= 3


def test_a_wrongly_recorded_decision_is_not_reproduced(tmp_path: Path) -> None:
    """Another implementation journaled a refusal the rules admit (and an admission they
    refuse): audit says reproduced: false, loudly, exit 1 — in a real process too."""
    t = us_of("2026-03-02T10:00:00.000000Z")
    world = IndependentOperators(t)
    tokens = {
        "quota_tpm": 10_000,
        "target_tpm": 9_000,
        "evaluator_reserve_tpm": 0,
        "cold_start_reserve_tpm": 0,
        "cached_input_weight": 1.0,
        "max_observation_age_s": 60,
        "cooldown_base_s": 15,
        "cooldown_max_s": 300,
    }
    world.configure("g", t, cases=None, tokens=tokens)
    world.observe("g", t + 1, "a", 1000, 0, 0, "measured")
    request = {"run": "a", "case": None, "arm": None, "class": "solver"}
    small = {**request, "forecast_tpm": 2000, "lease_s": None}
    wrong_refusal = world.admit("g", t + 2, small, lie=True)
    big = {**request, "run": "b", "forecast_tpm": 8500, "lease_s": None}
    wrong_admission = world.admit("g", t + 3, big, lie=True)
    path = _write(tmp_path, world)
    for seq, recorded in ((wrong_refusal, False), (wrong_admission, True)):
        result = run_process("audit", "--journal", path, "--json", "--seq", str(seq))
        assert result.code == 1, result.stdout
        body = result.json
        assert body["ok"] is False and body["reproduced"] is False
        assert body["recorded"]["admitted"] is recorded
        assert body["replayed"]["admitted"] is (not recorded)
    text = run_process("audit", "--journal", path, "--seq", str(wrong_refusal))
    assert text.code == 1 and "NOT REPRODUCED" in text.stdout + text.stderr


# -- whatif ------------------------------------------------------------------------------


def _whatif_independent(
    world: IndependentOperators, goal: str, overrides: dict[str, Any]
) -> list[dict]:
    """Replay the journaled ops of `goal` with every configure changed by `overrides`."""
    replay = IndependentOperators(us_of(world.records[0]["at"]))
    flips = []
    recorded = {d["seq"]: d for d in world.decisions}
    for record in world.records[1:]:
        if record["goal"] != goal:
            continue
        t, data = us_of(record["at"]), record["data"]
        kind = record["kind"]
        if kind == "capacity.configured":
            # A gate the record lacks appears when its defining field is given (as
            # `configure` with only that gate's flags would add it), from §3.1's defaults.
            cases, tokens = data["cases"], data["tokens"]
            case_changes, token_changes = overrides.get("cases", {}), overrides.get("tokens", {})
            if cases is None and "max_active_cases" in case_changes:
                cases = {}
            if tokens is None and "quota_tpm" in token_changes:
                tokens = {**TOKEN_DEFAULTS, "target_tpm": token_changes["quota_tpm"] * 9 // 10}
            cases = None if cases is None else {**cases, **case_changes}
            tokens = None if tokens is None else {**tokens, **token_changes}
            replay.configure(goal, t, cases=cases, tokens=tokens)
        elif kind == "capacity.observed":
            replay.observe(goal, t, data["run"], data["uncached_input"], data["cached_input"],
                           data["output"], data["coverage"])  # fmt: skip
        elif kind == "capacity.rejected":
            replay.reject(goal, t, data["run"], data["retry_after_s"])
        elif kind == "capacity.released":
            replay.release(goal, t, data["run"])
        else:
            g: Goal = replay.goal(goal)
            now = g.reasons(data["request"], t)
            was = not recorded[record["seq"]]["reasons"]
            if (not now) != was:
                flips.append({"seq": record["seq"], "run": data["request"]["run"],
                              "at": record["at"], "recorded_admitted": was,
                              "whatif_admitted": not now, "whatif_reasons": now})  # fmt: skip
            replay.admit(goal, t, data["request"])
    return flips


@pytest.mark.parametrize("seed", SEEDS)
def test_whatif_flips_match_an_independent_replay(tmp_path: Path, seed: int) -> None:
    world = random_history(seed)
    path = _write(tmp_path, world)
    before = Path(path).read_bytes()
    decisions = sum(1 for d in world.decisions if d["goal"] == "g")
    same = _cli(path, "whatif", "--goal", "g").json
    assert same["ok"] is True and same["flips"] == [] and same["decisions"] == decisions
    assert set(same) >= {"ok", "assumptions", "decisions", "flips"} and same["assumptions"]
    quota = [r["data"]["tokens"] for r in world.records[1:] if r["goal"] == "g"
             and r["kind"] == "capacity.configured" and r["data"]["tokens"]]  # fmt: skip
    cases = [r["data"]["cases"] for r in world.records[1:] if r["goal"] == "g"
             and r["kind"] == "capacity.configured" and r["data"]["cases"]]  # fmt: skip
    trials: list[tuple[list[str], dict[str, Any]]] = []
    if quota:
        big = 10 * max(t["quota_tpm"] for t in quota)
        trials.append((["--target-tpm", str(big // 2), "--quota-tpm", str(big)],
                       {"tokens": {"quota_tpm": big, "target_tpm": big // 2}}))  # fmt: skip
    if cases:
        trials.append((["--max-active-cases", "1024", "--target-active-cases", "8",
                        "--max-baseline-cases", "1024", "--max-test-cases", "1024",
                        "--reserved-test-cases", "0"],
                       {"cases": {"max_active_cases": 1024, "target_active_cases": 8,
                                  "max_baseline_cases": 1024, "max_test_cases": 1024,
                                  "reserved_test_cases": 0}}))  # fmt: skip
    if quota:
        trials.append(
            (
                ["--cooldown-max-s", "2", "--max-observation-age-s", "600"],
                {"tokens": {"cooldown_max_s": 2, "max_observation_age_s": 600}},
            )
        )
        small = min(t["target_tpm"] for t in quota) // 3
        trials.append((["--target-tpm", str(small), "--evaluator-reserve-tpm", "0",
                        "--cold-start-reserve-tpm", "0"],
                       {"tokens": {"target_tpm": small, "evaluator_reserve_tpm": 0,
                                   "cold_start_reserve_tpm": 0}}))  # fmt: skip
    if cases:
        trials.append((["--max-active-cases", "1", "--target-active-cases", "1",
                        "--max-baseline-cases", "1", "--max-test-cases", "1",
                        "--reserved-test-cases", "0"],
                       {"cases": {"max_active_cases": 1, "target_active_cases": 1,
                                  "max_baseline_cases": 1, "max_test_cases": 1,
                                  "reserved_test_cases": 0}}))  # fmt: skip
    flipped = 0
    for flags, overrides in trials:
        body = _cli(path, "whatif", "--goal", "g", *flags).json
        expected = _whatif_independent(world, "g", overrides)
        got = [{k: f[k] for k in ("seq", "run", "at", "recorded_admitted", "whatif_admitted",
                                  "whatif_reasons")} for f in body["flips"]]  # fmt: skip
        assert got == expected, (flags, got, expected)
        assert body["decisions"] == decisions
        flipped += len(got)
    assert flipped > 0  # the trials change something on every generated history
    assert Path(path).read_bytes() == before  # nothing written


# -- inspect, metrics, log, report ------------------------------------------------------------


def _probe_times(world: IndependentOperators) -> list[int]:
    times = sorted({us_of(r["at"]) for r in world.records})
    picked = times[:: max(1, len(times) // 6)]
    return [*picked, *(t + WINDOW_US for t in picked[:2]), times[-1] + 1]


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_inspect_at_matches_an_independent_fold(tmp_path: Path, seed: int) -> None:
    world = random_history(seed)
    path = _write(tmp_path, world)
    for t in _probe_times(world):
        prefix = IndependentOperators(us_of(world.records[0]["at"]))
        _replay_until(world, prefix, t)
        body = _cli(path, "inspect", "--at", ts(t)).json
        assert body["ok"] is True
        for name, g in prefix.goals.items():
            shown = body["goals"][name]
            usage_tpm, parts, coverage = g.usage(t)
            assert shown["usage_tpm"] == usage_tpm and shown["usage"] == parts
            assert shown["coverage"] == coverage
            assert shown["reserved_tpm"] == g.reserved(t) and shown["load_tpm"] == g.load(t)
            assert shown["headroom_tpm"] == {
                "solver": g.headroom(t, "solver"),
                "evaluator": g.headroom(t, "evaluator"),
            }
            until = g.cooldown_until_us
            assert shown["cooldown_until"] == (None if until is None else ts(until))
            assert [r["run"] for r in shown["active_runs"]] == [
                r.request["run"] for r in g.active(t)
            ]
            assert shown["active_counts"] == g.counts(t)
            lease = {r.request["run"]: r.lease_end_us for r in g.active(t)}
            for row in shown["active_runs"]:
                end = lease[row["run"]]
                assert row["lease_until"] == (None if end is None else ts(end))


def _replay_until(world: IndependentOperators, into: IndependentOperators, t: int) -> None:
    """Fold `world`'s records with at <= t into `into` (as recorded, no re-deciding)."""
    for record in world.records[1:]:
        at_us = us_of(record["at"])
        if at_us > t:
            continue
        g = into.goal(record["goal"])
        data = record["data"]
        kind = record["kind"]
        if kind == "capacity.configured":
            g.cases, g.tokens = data["cases"], data["tokens"]
        elif kind == "capacity.observed":
            into.observe(record["goal"], at_us, data["run"], data["uncached_input"],
                         data["cached_input"], data["output"], data["coverage"])  # fmt: skip
        elif kind == "capacity.rejected":
            until = us_of(data["cooldown_until"])
            previous = g.cooldown_until_us
            g.cooldown_until_us = until if previous is None else max(previous, until)
            g.streak = data["streak"]
        elif kind == "capacity.released":
            g.runs.pop(data["run"], None)
        elif kind == "capacity.admitted":
            req = data["request"]
            end = None if req["lease_s"] is None else at_us + req["lease_s"] * 1_000_000
            from tests.operators.independent_operators import Run

            g.runs[req["run"]] = Run(req, at_us, end, record["seq"])
            g.admissions += 1
        elif kind == "capacity.refused":
            for reason in data["reasons"]:
                g.refusals[reason] = g.refusals.get(reason, 0) + 1


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_prometheus(text: str) -> dict[tuple[str, tuple], float]:
    """Strict text exposition format 0.0.4 parse: HELP/TYPE once per family and before
    its samples, no duplicate series, valid names, labels and values."""
    helps, types, series = set(), set(), {}
    family_of_sample: dict[str, str] = {}
    for line in text.splitlines():
        assert line == line.strip() and line, repr(line)
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert name not in helps and name not in family_of_sample
            helps.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in types and name not in family_of_sample
            assert kind in {"counter", "gauge", "histogram", "summary", "untyped"}
            types.add(name)
        else:
            match = SAMPLE.match(line)
            assert match, line
            name, _, labels_text, value = match.groups()
            labels = tuple(LABEL.findall(labels_text or ""))
            rebuilt = ",".join(f'{k}="{v}"' for k, v, _ in labels)
            assert rebuilt == (labels_text or "").rstrip(","), line
            key = (name, tuple((k, v) for k, v, _ in labels))
            assert key not in series, f"duplicate series {line}"
            series[key] = float(value)
            family_of_sample[name] = name
            assert name in types and name in helps, name
    assert helps == types
    return series


def test_metrics_match_an_independent_fold_and_the_text_format(tmp_path: Path) -> None:
    world = random_history(6)
    path = _write(tmp_path, world)
    t = max(us_of(r["at"]) for r in world.records)
    state = IndependentOperators(us_of(world.records[0]["at"]))
    _replay_until(world, state, t)
    result = run_cli("metrics", "--journal", path, "--at", ts(t))
    assert result.code == 0, result.stderr
    series = parse_prometheus(result.stdout)
    names = {name for name, _ in series}
    assert {
        "quotaledger_usage_tpm",
        "quotaledger_reserved_tpm",
        "quotaledger_load_tpm",
        "quotaledger_active_runs",
        "quotaledger_cooldown_remaining_seconds",
        "quotaledger_admissions_total",
        "quotaledger_journal_head_seq",
    } <= names
    assert series[("quotaledger_journal_head_seq", ())] == len(world.records) - 1
    for name, g in state.goals.items():
        _, parts, _ = g.usage(t)
        for counter, value in parts.items():
            assert (
                series[("quotaledger_usage_tpm", (("goal", name), ("counter", counter)))] == value
            )
        assert series[("quotaledger_reserved_tpm", (("goal", name),))] == g.reserved(t)
        assert series[("quotaledger_load_tpm", (("goal", name),))] == pytest.approx(g.load(t))
        if g.tokens:
            assert series[("quotaledger_target_tpm", (("goal", name),))] == g.tokens["target_tpm"]
        counts = g.counts(t)
        for group in ("baseline", "test"):
            assert (
                series[("quotaledger_active_runs", (("goal", name), ("group", group)))]
                == (counts[group])
            )
        remaining = 0.0
        if g.cooldown_until_us is not None:
            remaining = max(0, g.cooldown_until_us - t) / 1e6
        key = ("quotaledger_cooldown_remaining_seconds", (("goal", name),))
        assert series[key] == pytest.approx(remaining)
        assert series[("quotaledger_admissions_total", (("goal", name),))] == g.admissions
        for reason, count in g.refusals.items():
            key = ("quotaledger_refusals_total", (("goal", name), ("reason", reason)))
            assert series[key] == count
    every = run_cli("metrics", "--journal", path)
    parse_prometheus(every.stdout)
    assert "quotaledger_refusals_total" in result.stdout
    assert "quotaledger_target_tpm" in every.stdout


def test_log_filters_match_the_records(tmp_path: Path) -> None:
    world = random_history(9)
    path = _write(tmp_path, world)
    records = world.records
    times = sorted({r["at"] for r in records})
    since, until = times[len(times) // 4], times[3 * len(times) // 4]
    cases = [
        ([], records),
        (["--goal", "alt/goal"], [r for r in records if r["goal"] == "alt/goal"]),
        (["--kind", "capacity.refused"], [r for r in records if r["kind"] == "capacity.refused"]),
        (["--kind", "capacity"], [r for r in records if r["kind"].startswith("capacity.")]),
        (["--kind", "journal."], [r for r in records if r["kind"].startswith("journal.")]),
        (["--since", since, "--until", until], [r for r in records if since <= r["at"] <= until]),
        (["--goal", "g", "--limit", "3"], [r for r in records if r["goal"] == "g"]),
    ]
    for flags, expected in cases:
        result = _cli(path, "log", *flags)
        assert result.code == 0, result.stderr
        rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        seqs = [row["seq"] for row in rows]
        want = [r["seq"] for r in expected]
        if "--limit" in flags:
            assert len(seqs) == 3 and set(seqs) <= set(want)
        else:
            assert seqs == want, flags


def test_log_refuses_a_kind_no_record_can_have(tmp_path: Path) -> None:
    # A typo must not read as "no such events": kinds and domains are a closed set.
    path = _write(tmp_path, random_history(3))
    for kind in ("capacity.refuse", "capac", "host attempt", ""):
        result = _cli(path, "log", "--kind", kind)
        assert result.code == 2, (kind, result.stdout)
        assert result.json["error"]["code"] == "unknown_kind"
    # Trailing dots name the same kind or domain, for the check and the filter alike.
    exact = _cli(path, "log", "--kind", "capacity.observed").stdout
    assert exact and _cli(path, "log", "--kind", "capacity.observed.").stdout == exact
    # Input errors come before the journal is read: exit 2, not the journal's state.
    for target in (
        str(tmp_path / "missing.jsonl"),
        str(REPO / "fixtures" / "corrupt_flipped_byte.jsonl"),
    ):
        result = _cli(target, "log", "--kind", "bogus")
        assert result.code == 2 and result.json["error"]["code"] == "unknown_kind"


def test_log_through_the_api_checks_its_filters_as_the_cli_does(tmp_path: Path) -> None:
    path = _write(tmp_path, random_history(3))
    with Ledger.open(path, write=False) as ledger:
        for filters, code in (
            ({"goal": "not an id"}, "invalid_identifier"),
            ({"kind": "bogus"}, "unknown_kind"),
            ({"limit": -1}, "invalid_option"),
            ({"since": "yesterday"}, "invalid_time"),
        ):
            with pytest.raises(InvalidInput) as refused:
                ledger.log(**filters)  # refused when called, not when first iterated
            assert refused.value.code == code
            assert _cli(path, "log", *_flags(filters)).json["error"]["code"] == code


def _flags(filters: dict[str, Any]) -> list[str]:
    return [arg for name, value in filters.items() for arg in (f"--{name}", str(value))]


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.svg = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.svg += tag == "svg"
        assert tag != "script"

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_report_lists_every_refusal_of_a_foreign_journal(tmp_path: Path) -> None:
    world = random_history(10)
    path = _write(tmp_path, world)
    out = tmp_path / "report.html"
    result = _cli(path, "report", "--goal", "g", "--out", str(out))
    assert result.code == 0, result.stdout
    refusals = [d for d in world.decisions if d["goal"] == "g" and d["reasons"]]
    assert result.json["refusals"] == len(refusals)
    page = _Rows()
    page.feed(out.read_text())
    assert page.svg >= 1
    text = " ".join(page.text)
    for decision in refusals:
        assert decision["request"]["run"] in text
        for reason in decision["reasons"]:
            assert reason in text
