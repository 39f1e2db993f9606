"""The report's timeline computes each point without an `Evaluation` (issue 20), and
`report --since` may start at a checkpoint: both must give what the slow way gives.

- Every point equals `point_of(cap.evaluate(goal, t))` on the state it was taken
  from, and nothing changes between two points (the evaluation just before the next
  point is the point before it): on histories with leases, renewals, cooldowns,
  provider reports, every dimension and reconfigurations.
- The timeline reading the journal's own fold (the CLI's path) gives the points of
  one that folds the goal itself.
- A report started at a checkpoint (its goal's events all before `--since`) writes
  the page and the answer a replay from genesis writes, for ranges before, at and
  after the checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
from itertools import pairwise
from pathlib import Path
from typing import Any

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.journal import Error
from quotaledger.journal.clock import US_PER_S, format_us, parse_at
from quotaledger.projections import audit as au
from quotaledger.projections import capacity as cap
from quotaledger.services.operator import OperatorService
from quotaledger.usecases.decode import API, builtins, decode
from quotaledger.usecases.operator import ReportRequest
from tests.operators.operators_helpers import BASE_US

RUNS = ["r0", "r1", "r2", "r3"]
STEPS_US = [0, 1, 250_000, US_PER_S, US_PER_S, 4 * US_PER_S, 20 * US_PER_S, 59_999_999]
STEPS_US += [60 * US_PER_S, 61 * US_PER_S, 3_600 * US_PER_S]
DAY_STEP_US = 86_400 * US_PER_S - 1
"""Now and then a step of nearly a day, so that seconds leave the daily windows (a
history of a few hundred steps stays in the past)."""


def _provider(rng: random.Random, t_us: int) -> dict[str, dict[str, Any]] | None:
    if rng.random() < 0.7:
        return None
    dimension = rng.choice(cap.MINUTE_DIMENSIONS)  # the ones providers report
    reset = rng.choice([None, t_us + rng.choice([1, 5, 30, 90]) * US_PER_S])
    return {
        dimension: {
            "limit": rng.choice([None, 50_000, 200_000]),
            "remaining": rng.choice([None, 0, 10_000, 150_000]),
            "reset_at": None if reset is None else format_us(reset),
        }
    }


def _configure(ledger: Ledger, rng: random.Random, goal: str, when: str) -> None:
    fields: dict[str, Any] = {"max_active_cases": rng.choice([2, 3, 5])}
    if rng.random() < 0.8:
        fields |= {"quota_tpm": rng.choice([40_000, 100_000]), "target_tpm": None}
        fields["cached_input_weight"] = rng.choice([0.1, 0.5, 1.0])
        fields["evaluator_reserve_tpm"] = rng.choice([0, 2_000])
        fields["max_observation_age_s"] = rng.choice([30, 600])
    if rng.random() < 0.6:
        fields |= {"quota_itpm": 80_000, "target_itpm": rng.choice([30_000, 60_000])}
    if rng.random() < 0.6:
        fields |= {"quota_rpm": 50, "target_rpm": rng.choice([5, 40])}
    if rng.random() < 0.4:
        fields |= {"quota_otpm": 20_000}
    if rng.random() < 0.4:  # the daily windows (SPEC §12.3)
        fields |= {"quota_tpd": 500_000, "target_tpd": rng.choice([60_000, 400_000])}
    if rng.random() < 0.3:
        fields |= {"quota_rpd": 100, "evaluator_reserve_rpd": rng.choice([0, 10])}
    if rng.random() < 0.3:  # a spend cap (SPEC §12.4)
        fields |= {"cap_tokens": rng.choice([50_000, 400_000])}
    ledger.configure(goal=goal, at=when, **{k: v for k, v in fields.items() if v is not None})


def _step(ledger: Ledger, rng: random.Random, goal: str, t_us: int) -> None:
    when = format_us(t_us)
    op = rng.choices(["observe", "admit", "reject", "release", "configure"], [14, 6, 1, 2, 1])[0]
    if op == "observe":
        ledger.observe(
            goal=goal,
            run=rng.choice([None, *RUNS]),
            uncached_input=rng.choice([0, 500, 9_000]),
            cached_input=rng.choice([0, 3_000]),
            cache_write_input=rng.choice([0, 0, 700]),
            output=rng.choice([0, 300, 4_000]),
            coverage=rng.choice(["measured"] * 8 + ["estimated", "unmetered"]),
            provider=_provider(rng, t_us),
            at=when,
        )
    elif op == "admit":
        ledger.admit(
            goal=goal,
            run=rng.choice(RUNS),
            arm=rng.choice([None, *["baseline", "treatment"] * 4]),
            class_=rng.choice(["solver", "evaluator"]),
            forecast_tpm=rng.choice([None, 0, 2_000, 20_000, 20_000]),
            forecast_itpm=rng.choice([None, *[0, 1_000] * 4]),
            forecast_otpm=rng.choice([None, *[0, 500] * 4]),
            forecast_rpm=rng.choice([None, *[0, 2] * 4]),
            forecast_tokens=rng.choice([None, 0, 5_000, 50_000]),
            forecast_requests=rng.choice([None, 1, 10]),
            lease_s=rng.choice([None, 5, 5, 30, 90]),
            at=when,
        )
    elif op == "reject":
        ledger.reject(
            goal=goal,
            run=rng.choice([None, *RUNS]),
            retry_after_s=rng.choice([None, 1, 3, 400]),
            provider=_provider(rng, t_us),
            at=when,
        )
    elif op == "release":
        ledger.release(goal=goal, run=rng.choice(RUNS), at=when)
    else:
        _configure(ledger, rng, goal, when)


def rich_history(
    ledger: Ledger, steps: int, seed: int, goals: tuple[str, ...] = ("g",), t_us: int = BASE_US
) -> int:
    """A history using every input the figures depend on; returns its last time."""
    rng = random.Random(seed)
    for goal in goals:
        _configure(ledger, rng, goal, format_us(t_us))
    for _ in range(steps):
        t_us += DAY_STEP_US if rng.random() < 0.015 else rng.choice(STEPS_US)
        with contextlib.suppress(Error):  # e.g. a release of a run that is not active
            _step(ledger, rng, rng.choice(goals), t_us)
    return t_us


def _timeline(path: str, **options: Any) -> au.Timeline:
    with Ledger.open(path, write=False) as ledger:
        timeline = au.Timeline("g", **options)
        for record, payload, _ in ledger.journal.records():
            timeline.feed(record, payload)
        timeline.finish()
    return timeline


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every point the sampler computes is compared with the evaluation at its time, and
    the point before it with the evaluation just before it; the points checked."""
    fast = au.timeline._Sampler.point
    checked: list[int] = []
    previous: dict[int, au.Point] = {}

    def point(sampler: au.timeline._Sampler, at_us: int) -> au.Point:
        found = fast(sampler, at_us)
        goal = sampler.goal
        assert found == au.point_of(cap.evaluate(goal, at_us)), at_us
        before = previous.get(id(sampler))
        if before is not None and at_us - 1 >= max(before.at_us, goal.last_at_us):
            # No event between them: nothing may change before this point.
            just_before = au.point_of(cap.evaluate(goal, at_us - 1))
            assert msgspec.structs.replace(just_before, at_us=before.at_us) == before, at_us
        previous[id(sampler)] = found
        checked.append(at_us)
        return found

    monkeypatch.setattr(au.timeline._Sampler, "point", point)
    return checked


@pytest.mark.parametrize("seed", range(8))
def test_each_point_is_the_evaluation_at_its_time(
    tmp_path: Path, checked: list[int], seed: int
) -> None:
    path = str(tmp_path / "j.jsonl")
    with Ledger.open(path) as ledger:
        end_us = rich_history(ledger, 160, seed)
    timeline = _timeline(path)
    assert len(timeline.points) > 100
    assert [p.at_us for p in timeline.points] == checked
    assert all(a.at_us < b.at_us for a, b in pairwise(timeline.points))
    # Until the whole timeline's end (60 s after the last event): a last step of a day
    # may lie far beyond it.
    since_us = BASE_US + (end_us - BASE_US) // 3
    until_us = min(end_us, timeline.points[-1].at_us) - 1
    ranged = _timeline(path, since_us=since_us, until_us=until_us)
    # A range starts with a point at --since and ends with one at --until; between
    # them it is the whole timeline.
    assert (ranged.points[0].at_us, ranged.points[-1].at_us) == (since_us, until_us)
    assert ranged.points[1:-1] == [p for p in timeline.points if since_us < p.at_us < until_us]


@pytest.mark.parametrize("seed", range(4))
def test_reading_the_journals_fold_gives_the_points_of_folding_the_goal(
    tmp_path: Path, seed: int
) -> None:
    path = str(tmp_path / "j.jsonl")
    with Ledger.open(path) as ledger:
        end_us = rich_history(ledger, 200, seed, goals=("g", "other"))
    ranges: list[dict[str, int]] = [{}, {"since_us": BASE_US + (end_us - BASE_US) // 2}]
    ranges.append({"until_us": BASE_US + (end_us - BASE_US) // 2})
    for options in ranges:
        own = _timeline(path, **options)
        service = OperatorService.open_unfolded(path)
        shared = au.Timeline("g", folded=lambda s=service: s.journal.state.capacity, **options)
        service.journal.replay(lambda record, payload, line, t=shared: t.feed(record, payload))
        shared.finish()
        service.close()
        assert shared.points == own.points
        assert (shared.decisions, shared.cooldowns, shared.configs) == (
            own.decisions,
            own.cooldowns,
            own.configs,
        )
        assert (shared.observations, shared.releases, shared.rejections) == (
            own.observations,
            own.releases,
            own.rejections,
        )


# -- --since from a checkpoint ------------------------------------------------------------

_GENERATED = re.compile(r"generated [0-9T:.\-]+Z")


def _report(path: str, out: str, goal: str, **options: Any) -> tuple[dict[str, Any], str, int]:
    """The answer, the page (its generation time left out) and the checkpoint used."""
    service = OperatorService.open_unfolded(path)
    try:
        request = decode(ReportRequest, {"goal": goal, "out": out, **options}, API)
        answer = builtins(service.report(request))
        used = service.journal.checkpoint_seq
    finally:
        service.close()
    answer.pop("out")
    # Its audit commands name the journal: the page (and its size) as of any journal.
    answer.pop("bytes")
    page = Path(out).read_text().replace(os.path.abspath(path), "<journal>")
    return answer, _GENERATED.sub("generated -", page), used


def test_a_report_started_at_a_checkpoint_is_the_replay_from_genesis(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    with Ledger.open(path, checkpoint_every=10**9) as ledger:
        middle_us = rich_history(ledger, 150, 3, goals=("g", "other"))
        checkpoint = ledger.checkpoint()
        g_last_us = parse_at(ledger.journal.head.goal_last_at["g"])
        later_us = rich_history(ledger, 10, 4, goals=("late",), t_us=middle_us)
        end_us = rich_history(ledger, 150, 5, goals=("g", "other"), t_us=later_us)
    plain = str(tmp_path / "plain.jsonl")
    shutil.copy(path, plain)  # the same records without a checkpoint
    assert Path(path + ".checkpoint").exists() and not Path(plain + ".checkpoint").exists()
    cases: list[tuple[str, dict[str, Any], bool]] = [
        ("g", {}, False),  # the whole history: from genesis
        ("g", {"since": format_us(g_last_us - 30 * US_PER_S)}, False),  # before its end
        ("g", {"since": format_us(g_last_us)}, False),  # at the goal's last event in it
        ("g", {"since": format_us(g_last_us + 1)}, True),  # just after
        ("g", {"since": format_us(middle_us + 45 * US_PER_S)}, True),
        ("g", {"since": format_us((later_us + end_us) // 2)}, True),
        ("g", {"since": format_us(g_last_us + 1), "until": format_us(later_us + 70 * US_PER_S)},
         True),
        ("late", {}, True),  # a goal the checkpoint knows nothing of
        ("late", {"since": format_us(later_us)}, True),
    ]  # fmt: skip
    for goal, options, starts_there in cases:
        out = str(tmp_path / "r.html")
        answer, page, used = _report(path, out, goal, **options)
        expected_answer, expected_page, _ = _report(plain, out, goal, **options)
        assert used == (checkpoint["seq"] if starts_there else -1), (goal, options)
        assert answer == expected_answer, (goal, options)
        assert page == expected_page, (goal, options)
        assert answer["points"] > 0


def test_an_observation_that_renews_a_lease_moves_its_end(tmp_path: Path) -> None:
    """The one observation that changes more than the window without a provider report:
    the run's lease ends later, and the chart says so."""
    path = str(tmp_path / "j.jsonl")
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=3, at=format_us(BASE_US))
        ledger.admit(goal="g", run="r0", arm="baseline", forecast_tpm=1_000, lease_s=10,
                     at=format_us(BASE_US + 1))  # fmt: skip
        ledger.observe(
            goal="g",
            run="r0",
            uncached_input=5,
            cached_input=0,
            output=0,
            at=format_us(BASE_US + 5 * US_PER_S),
        )
        ledger.observe(
            goal="g",
            uncached_input=5,
            cached_input=0,
            output=0,
            at=format_us(BASE_US + 30 * US_PER_S),
        )
    held = [(p.at_us - BASE_US, p.active_runs, p.reserved_tpm) for p in _timeline(path).points]
    assert held[:4] == [(0, 0, 0), (1, 1, 1_000), (5 * US_PER_S, 1, 1_000), (15 * US_PER_S, 0, 0)]
