"""Helpers for the operator tests: generated histories, a rehashing editor, a
Prometheus text parser."""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any

from quotaledger.api import Ledger
from quotaledger.journal import Error
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.journal.record import encode_line

BASE_US = parse_at("2026-11-29T14:00:00Z")
RUNS = [f"r{i}" for i in range(6)]
ARMS = [None, "baseline", "control", "treatment", "explore"]
DECISION_KINDS = ("capacity.admitted", "capacity.refused")


def at(seconds: float) -> str:
    return format_us(BASE_US + round(seconds * US_PER_S))


# -- histories ---------------------------------------------------------------------------

STEP_DT_US = [0, 0, 1, 500_000, 500_000, US_PER_S, US_PER_S, US_PER_S, 3 * US_PER_S]
STEP_DT_US += [5 * US_PER_S, 5 * US_PER_S, 5 * US_PER_S, 20 * US_PER_S, 59_999_999, 60 * US_PER_S]
"""Time steps between operations (repeated entries are likelier), with boundary cases:
1 µs, and a sample's exit from the 60 s window."""


def random_step(rng: random.Random) -> tuple[Any, ...]:
    """One operation of a runner's life, chosen at random (with the weights below)."""
    kind = rng.choices(["observe", "admit", "reject", "release", "configure"], [10, 8, 1, 4, 1])[0]
    if kind == "observe":
        return (
            "observe",
            rng.choice([None, *RUNS]),
            rng.choice([0, 500, 3_000, 12_000, 30_000]),
            rng.choice([0, 0, 1_000, 9_000]),
            rng.choice([0, 200, 2_000, 6_000]),
            rng.choice(["measured"] * 6 + ["estimated", "unmetered"]),
        )
    if kind == "admit":
        return (
            "admit",
            rng.choice(RUNS),
            rng.choice([*ARMS, *ARMS[1:], *ARMS[1:]]),  # mostly with an arm
            rng.choice(["solver", "solver", "evaluator"]),
            rng.choice([None, 0, 2_000, 8_000, 8_000, 20_000, 20_000, 60_000]),
            rng.choice([None, None, 15, 90]),
        )
    if kind == "reject":
        return ("reject", rng.choice([None, *RUNS]), rng.choice([None, None, 5, 400]))
    if kind == "release":
        return ("release", rng.choice(RUNS))
    return (
        "configure",
        rng.choice([None, 2, 3, 5]),
        rng.choice([None, 40_000, 60_000, 100_000]),
        rng.choice([0.25, 0.5, 1.0]),
        rng.choice([0, 5_000]),
        rng.choice([0, 1_000]),
        rng.choice([45, 60, 90]),
    )


def play(ledger: Ledger, steps: list[tuple[int, tuple[Any, ...]]], goal: str = "g") -> int:
    """Run `steps` ((dt_us, operation) pairs) at explicit increasing times; returns the
    last time (µs). Refusals are part of the history; config errors are skipped."""
    t_us = BASE_US
    ledger.configure(
        goal=goal,
        max_active_cases=3,
        reserved_test_cases=1,
        quota_tpm=100_000,
        evaluator_reserve_tpm=5_000,
        cold_start_reserve_tpm=1_000,
        max_observation_age_s=60,
        cooldown_base_s=10,
        cooldown_max_s=120,
        at=format_us(t_us),
    )
    for dt_us, op in steps:
        t_us += dt_us
        when = format_us(t_us)
        name = op[0]
        try:
            if name == "observe":
                _, run, uncached, cached, output, coverage = op
                ledger.observe(
                    goal=goal,
                    run=run,
                    uncached_input=uncached,
                    cached_input=cached,
                    output=output,
                    coverage=coverage,
                    at=when,
                )
            elif name == "admit":
                _, run, arm, class_, forecast, lease = op
                ledger.admit(
                    goal=goal,
                    run=run,
                    arm=arm,
                    class_=class_,
                    forecast_tpm=forecast,
                    lease_s=lease,
                    at=when,
                )
            elif name == "reject":
                ledger.reject(goal=goal, run=op[1], retry_after_s=op[2], at=when)
            elif name == "release":
                ledger.release(goal=goal, run=op[1], at=when)
            elif name == "configure":
                _, cases, quota, weight, evaluator, cold, age_s = op
                ledger.configure(
                    goal=goal,
                    max_active_cases=cases,
                    quota_tpm=quota,
                    cached_input_weight=weight if quota else None,
                    evaluator_reserve_tpm=evaluator if quota else None,
                    cold_start_reserve_tpm=cold if quota else None,
                    max_observation_age_s=age_s if quota else None,
                    at=when,
                )
        except Error:
            pass  # e.g. configure with no gate: exit 2, nothing written
    return t_us


def random_history(path: str, n_steps: int, seed: int, goal: str = "g") -> None:
    rng = random.Random(seed)
    steps = [(rng.choice(STEP_DT_US), random_step(rng)) for _ in range(n_steps)]
    with Ledger.open(path) as ledger:
        play(ledger, steps, goal)


def decision_seqs(path: str, goal: str | None = None) -> list[int]:
    with Ledger.open(path, write=False) as ledger:
        return [event["seq"] for event in ledger.log(goal=goal) if event["kind"] in DECISION_KINDS]


# -- editing history (and recomputing every hash after the edit) --------------------------


def rewrite(path: str, edit: Any) -> None:
    """Apply `edit(event_dict) -> event_dict | None` to every record and rewrite the file
    with a valid hash chain (the forger's move: `verify` still passes afterwards)."""
    with open(path, "rb") as handle:
        lines = handle.read().splitlines()
    out: list[bytes] = []
    prev = "0" * 64
    for raw in lines:
        event = json.loads(raw)
        edited = edit(event) or event
        data = json.dumps(edited["data"], separators=(",", ":"), ensure_ascii=False).encode()
        line, digest = encode_line(
            edited["seq"], edited["at"], edited["kind"], edited["goal"], data, prev
        )
        out.append(line)
        prev = digest
    with open(path, "wb") as handle:
        handle.write(b"".join(out))
    checkpoint = path + ".checkpoint"
    if os.path.exists(checkpoint):
        os.unlink(checkpoint)


# -- Prometheus text exposition -----------------------------------------------------------

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:\{(?P<labels>.*)\})?"
    r" (?P<value>[-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|NaN|Inf))$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_prometheus(text: str) -> dict[str, Any]:
    """Parse text exposition 0.0.4 strictly: HELP and TYPE before the samples of each
    family, label values unescaped. Returns {name: {"type", "help", "samples":
    [(labels_dict, value)]}}; raises AssertionError on any malformed line."""
    families: dict[str, Any] = {}
    for line in text.splitlines():
        assert line, "empty line in exposition"
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert name not in families, f"HELP for {name} twice"
            families[name] = {"help": help_text, "type": None, "samples": []}
            continue
        if line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name in families and families[name]["type"] is None, line
            assert kind in ("gauge", "counter", "untyped", "histogram", "summary"), line
            families[name]["type"] = kind
            continue
        assert not line.startswith("#"), f"unexpected comment {line!r}"
        match = _SAMPLE.match(line)
        assert match, f"malformed sample line {line!r}"
        name = match["name"]
        assert name in families and families[name]["type"], f"sample before TYPE: {line!r}"
        labels: dict[str, str] = {}
        rest = match["labels"] or ""
        position = 0
        while position < len(rest):
            label = _LABEL.match(rest, position)
            assert label, f"malformed labels in {line!r}"
            labels[label[1]] = _unescape(label[2])
            position = label.end()
        families[name]["samples"].append((labels, float(match["value"])))
    return families


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), text)


def sample_value(families: dict[str, Any], name: str, **labels: str) -> float:
    found = [v for got, v in families[name]["samples"] if got == labels]
    assert len(found) == 1, (name, labels, families[name]["samples"])
    return found[0]
