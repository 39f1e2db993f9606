"""The inspect_ai hooks called in this process (inspect's own hook data types, a real
journal file or a server that is not there): what `inspect eval` rarely shows, the
hooks' faults and their safety net (SPEC §13.1)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import anyio
import pytest
from inspect_ai._eval.eval import EvalLogs  # the type RunEnd.logs names
from inspect_ai.hooks import ModelUsageData, RunEnd, SampleInit
from inspect_ai.log import EvalSampleSummary
from inspect_ai.model import ModelUsage
from inspect_ai.util import LimitExceededError

from quotaledger import Ledger
from quotaledger.adapters.inspect_ai import Quota
from tests.server.serving import free_port


def run(call: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await call

    return anyio.run(main)


def init(sample: str, inspect_run: str = "run1", sample_id: str = "s1") -> SampleInit:
    summary = EvalSampleSummary(id=sample_id, epoch=1, input="q", target="a")
    return SampleInit(None, inspect_run, "eval1", sample, summary)


def usage(tokens: int) -> ModelUsageData:
    counts = ModelUsage(input_tokens=tokens, output_tokens=3, total_tokens=tokens + 3)
    return ModelUsageData(model_name="openai/gpt-test", usage=counts, call_duration=0.1)


@pytest.fixture
def journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "j.jsonl")
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=2)
    monkeypatch.setenv("QUOTALEDGER_JOURNAL", path)
    monkeypatch.setenv("QUOTALEDGER_INSPECT_GOAL", "g")
    return path


def test_a_lost_observation_is_logged_with_its_counts(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("QUOTALEDGER_INSPECT_GOAL", "g")
    monkeypatch.setenv("QUOTALEDGER_JOURNAL", f"http://127.0.0.1:{free_port()}")
    hooks = Quota()
    with caplog.at_level(logging.ERROR, logger="quotaledger"):
        run(hooks.on_model_usage(usage(1234)))  # never the eval's problem: no exception
    assert hooks.failures == 1
    (record,) = caplog.records
    assert "observation was not recorded (server_unreachable" in record.getMessage()
    assert "'uncached_input': 1234" in record.getMessage()


def test_bad_settings_admit_no_sample(journal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUOTALEDGER_INSPECT_FORECAST_TPM", "lots")
    with pytest.raises(LimitExceededError) as raised:
        run(Quota().on_sample_init(init("u1")))
    assert "QUOTALEDGER_INSPECT_FORECAST_TPM must be an integer" in raised.value.message
    monkeypatch.setenv("QUOTALEDGER_INSPECT_FORECAST_TPM", "-1")
    with pytest.raises(LimitExceededError) as raised:
        run(Quota().on_sample_init(init("u1")))
    assert "QUOTALEDGER_INSPECT_FORECAST_TPM " in raised.value.message
    with Ledger.open(journal) as ledger:
        assert [e["kind"] for e in ledger.log(goal="g")] == ["capacity.configured"]


def test_run_end_releases_what_the_ending_run_holds(
    journal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUOTALEDGER_INSPECT_WAIT_S", "1")
    hooks = Quota()
    run(hooks.on_sample_init(init("u1")))
    run(hooks.on_sample_init(init("u2", inspect_run="run2")))
    with pytest.raises(LimitExceededError) as raised:
        run(hooks.on_sample_init(init("u3")))
    assert raised.value.message == (
        "quotaledger: goal g: run eval1/u3 waited 1 s in the queue "
        "(QUOTALEDGER_INSPECT_WAIT_S) and was not admitted: target_capacity_exhausted, "
        "total_capacity_exhausted, test_capacity_exhausted"
    )
    ended = RunEnd(eval_set_id=None, run_id="run1", exception=None, logs=EvalLogs([]))
    run(hooks.on_run_end(ended))  # u1's sample never ended
    with Ledger.open(journal) as ledger:
        active = ledger.inspect(goal="g")["goals"]["g"]["active_runs"]
        released = [e["data"]["run"] for e in ledger.log(kind="capacity.released")]
    assert [a["run"] for a in active] == ["eval1/u2"] and released == ["eval1/u1"]


def test_a_ledger_out_of_reach_admits_nothing_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("QUOTALEDGER_INSPECT_GOAL", "g")
    monkeypatch.setenv("QUOTALEDGER_JOURNAL", f"http://127.0.0.1:{free_port()}")
    with (
        caplog.at_level(logging.ERROR, logger="quotaledger"),
        pytest.raises(LimitExceededError) as raised,
    ):
        run(Quota().on_sample_init(init("u1")))
    assert raised.value.message.startswith(
        "quotaledger: goal g: run eval1/u1 could not be admitted (server_unreachable: "
    )
    withdrawal, admission = (record.getMessage() for record in caplog.records)
    assert "the queue entry of run eval1/u1, if it was queued, was not withdrawn" in withdrawal
    assert admission.startswith("quotaledger: goal g: sample eval1/u1 was not admitted: ")
