"""`metrics`: valid Prometheus text exposition with the figures of a known scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotaledger.api import Ledger
from quotaledger.render.prometheus import prometheus_text
from quotaledger.usecases.operator import MetricFamily, MetricSample, MetricsAnswer
from tests.operators.operators_helpers import at, parse_prometheus, sample_value
from tests.support import run_cli

REQUIRED = {
    "quotaledger_usage_tpm",
    "quotaledger_reserved_tpm",
    "quotaledger_load_tpm",
    "quotaledger_target_tpm",
    "quotaledger_active_runs",
    "quotaledger_cooldown_remaining_seconds",
    "quotaledger_admissions_total",
    "quotaledger_refusals_total",
    "quotaledger_journal_head_seq",
}


def _scenario(path: str) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=3, reserved_test_cases=2, max_baseline_cases=3,
                         quota_tpm=10_000,
                         target_tpm=9_000, cached_input_weight=0.5, at=at(0))  # fmt: skip
        ledger.observe(goal="g", run="a", uncached_input=1000, cached_input=3000, output=200,
                       at=at(1))  # fmt: skip
        ledger.admit(goal="g", run="a", arm="baseline", forecast_tpm=3000, at=at(2))
        ledger.admit(goal="g", run="b", arm="control", forecast_tpm=2000, at=at(3))
        ledger.admit(goal="g", run="c", arm="baseline", forecast_tpm=1000, at=at(4))  # reserved
        ledger.admit(goal="g", run="d", arm="treatment", forecast_tpm=9500, at=at(5))
        ledger.reject(goal="g", retry_after_s=30, at=at(6))
        # Goal h: a case gate only (no token target), and usage.
        ledger.configure(goal="h", max_active_cases=1, at=at(6.5))
        ledger.observe(goal="h", uncached_input=5, cached_input=0, output=0, at=at(7))


def _metrics(path: str, *args: str) -> dict:
    result = run_cli("metrics", "--journal", path, *map(str, args))
    assert result.code == 0, result.stderr
    return parse_prometheus(result.stdout)


def test_metrics_of_a_known_scenario(journal_path: str) -> None:
    _scenario(journal_path)
    m = _metrics(journal_path, "--at", at(10))
    assert set(m) >= REQUIRED
    assert all(m[name]["help"] and m[name]["type"] for name in m)
    assert m["quotaledger_admissions_total"]["type"] == "counter"
    assert m["quotaledger_usage_tpm"]["type"] == "gauge"
    v = lambda name, **labels: sample_value(m, name, **labels)  # noqa: E731
    assert v("quotaledger_usage_tpm", goal="g", counter="uncached_input") == 1000
    assert v("quotaledger_usage_tpm", goal="g", counter="cached_input") == 3000
    assert v("quotaledger_usage_tpm", goal="g", counter="output") == 200
    assert v("quotaledger_usage_weighted_tpm", goal="g") == 2700  # 1000 + 1500 + 200
    assert v("quotaledger_reserved_tpm", goal="g") == 5000  # a + b
    assert v("quotaledger_load_tpm", goal="g") == 5000
    assert v("quotaledger_target_tpm", goal="g") == 9000
    assert v("quotaledger_active_runs", goal="g", group="baseline") == 1
    assert v("quotaledger_active_runs", goal="g", group="test") == 1
    assert v("quotaledger_active_runs", goal="g", group="total") == 2
    assert v("quotaledger_cooldown_remaining_seconds", goal="g") == 26  # until 36 s
    assert v("quotaledger_admissions_total", goal="g") == 2
    assert v("quotaledger_refusals_total", goal="g", reason="reserved_test_capacity") == 1
    assert v("quotaledger_refusals_total", goal="g", reason="forecast_exceeds_target") == 1
    assert v("quotaledger_refusals_total", goal="g", reason="token_headroom_exhausted") == 1
    assert v("quotaledger_journal_head_seq") == 9
    # Goal h has usage but no token gate: no target sample for it.
    assert v("quotaledger_usage_tpm", goal="h", counter="uncached_input") == 5
    assert not [s for s in m["quotaledger_target_tpm"]["samples"] if s[0]["goal"] == "h"]


def test_metrics_as_of_earlier_times_and_one_goal(journal_path: str) -> None:
    _scenario(journal_path)
    m = _metrics(journal_path, "--at", at(2.5), "--goal", "g")
    assert sample_value(m, "quotaledger_admissions_total", goal="g") == 1
    assert sample_value(m, "quotaledger_cooldown_remaining_seconds", goal="g") == 0
    assert {s[0]["goal"] for s in m["quotaledger_usage_tpm"]["samples"]} == {"g"}
    later = _metrics(journal_path, "--at", at(61.5), "--goal", "g")  # the sample has left
    assert sample_value(later, "quotaledger_usage_tpm", goal="g", counter="cached_input") == 0
    assert sample_value(later, "quotaledger_observation_stale", goal="g") == 1


def test_metrics_json(journal_path: str) -> None:
    _scenario(journal_path)
    result = run_cli("metrics", "--journal", journal_path, "--json", "--at", at(10))
    assert result.code == 0
    body = result.json
    assert body["ok"] is True and set(body["metrics"]) >= REQUIRED
    reserved = body["metrics"]["quotaledger_reserved_tpm"]["samples"]
    assert {"labels": {"goal": "g"}, "value": 5000} in reserved


def test_label_values_are_escaped() -> None:
    family = MetricFamily("gauge", "a back\\slash\nand newline")
    family.samples.append(MetricSample({"goal": 'we"ird\\name\n'}, 1.5))
    result = MetricsAnswer(ok=True, at=None, goals=[], metrics={"x_metric": family})
    text = prometheus_text(result)
    assert 'goal="we\\"ird\\\\name\\n"' in text
    parsed = parse_prometheus(text)
    assert parsed["x_metric"]["samples"] == [({"goal": 'we"ird\\name\n'}, 1.5)]
    assert parsed["x_metric"]["help"] == "a back\\\\slash\\nand newline"


def test_metrics_on_an_empty_journal_and_nothing_written(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    _scenario(path)
    before = Path(path).read_bytes()
    assert set(_metrics(path)) >= REQUIRED
    assert Path(path).read_bytes() == before


@pytest.mark.parametrize("args", [["--goal", "bad goal"], ["--at", "noon"]])
def test_metrics_bad_input_exit_2(journal_path: str, args: list[str]) -> None:
    _scenario(journal_path)
    assert run_cli("metrics", "--journal", journal_path, "--json", *args).code == 2
