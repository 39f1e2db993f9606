"""The inspect_ai hooks' settings and names (SPEC §13.1), without inspect_ai."""

from __future__ import annotations

import hashlib

import pytest

from quotaledger import InvalidInput
from quotaledger.adapters import inspect_names
from quotaledger.adapters.inspect_names import case_name, run_name, settings

BASE = {"QUOTALEDGER_JOURNAL": "http://127.0.0.1:8765", "QUOTALEDGER_INSPECT_GOAL": "g"}


def test_the_defaults() -> None:
    config = settings(BASE)
    assert (config.journal, config.goal, config.arm) == ("http://127.0.0.1:8765", "g", "treatment")
    assert (config.lease_s, config.wait_s, config.queue_ttl_s) == (900, 3600, 3660)
    assert config.admission("e/u", "s@1") == {
        "goal": "g",
        "run": "e/u",
        "case": "s@1",
        "arm": "treatment",
        "lease_s": 900,
    }


def test_every_variable() -> None:
    environ = {
        **BASE,
        "QUOTALEDGER_INSPECT_ARM": "baseline",
        "QUOTALEDGER_INSPECT_LEASE_S": "60",
        "QUOTALEDGER_INSPECT_WAIT_S": "86400",
        "QUOTALEDGER_INSPECT_FORECAST_TPM": "2000",
        "QUOTALEDGER_INSPECT_FORECAST_ITPM": "1500",
        "QUOTALEDGER_INSPECT_FORECAST_OTPM": "500",
        "QUOTALEDGER_INSPECT_FORECAST_RPM": "10",
        "QUOTALEDGER_INSPECT_FORECAST_TOKENS": "90000",
        "QUOTALEDGER_INSPECT_FORECAST_REQUESTS": "40",
        "QUOTALEDGER_INSPECT_FORECAST_USD": "1.25",
    }
    config = settings(environ)
    assert config.queue_ttl_s == 86400  # the wait + 60 s, within the ttl's bound
    assert config.admission("r", "c") == {
        "goal": "g",
        "run": "r",
        "case": "c",
        "arm": "baseline",
        "lease_s": 60,
        "forecast_tpm": 2000,
        "forecast_itpm": 1500,
        "forecast_otpm": 500,
        "forecast_rpm": 10,
        "forecast_tokens": 90000,
        "forecast_requests": 40,
        "forecast_usd": 1.25,
    }


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        (
            "QUOTALEDGER_INSPECT_FORECAST_TPM",
            "2k",
            "QUOTALEDGER_INSPECT_FORECAST_TPM must be an integer",
        ),
        (
            "QUOTALEDGER_INSPECT_FORECAST_USD",
            "nan",
            "QUOTALEDGER_INSPECT_FORECAST_USD must be a finite",
        ),
        ("QUOTALEDGER_INSPECT_LEASE_S", "1.5", "QUOTALEDGER_INSPECT_LEASE_S must be an integer"),
        ("QUOTALEDGER_INSPECT_WAIT_S", "0", "QUOTALEDGER_INSPECT_WAIT_S must be an integer from 1"),
        ("QUOTALEDGER_INSPECT_WAIT_S", "86401", "from 1 to 86400, got 86401"),
        ("QUOTALEDGER_JOURNAL", "", "QUOTALEDGER_JOURNAL is not set"),
    ],
)
def test_a_bad_variable_is_named(name: str, value: str, words: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        settings({**BASE, name: value})
    assert raised.value.code == "invalid_argument"
    assert words in raised.value.message


def test_the_ledger_s_complaint_names_the_variable(tmp_path: object) -> None:
    from quotaledger import Ledger

    with Ledger.open(str(tmp_path) + "/j.jsonl") as ledger, pytest.raises(InvalidInput) as raised:
        ledger.admit(**settings({**BASE, "QUOTALEDGER_INSPECT_LEASE_S": "0"}).admission("r", "c"))
    worded = inspect_names.worded_for_environment(raised.value)
    assert worded.startswith("QUOTALEDGER_INSPECT_LEASE_S must be")


def test_enabled_by_the_goal() -> None:
    assert inspect_names.enabled(BASE)
    assert not inspect_names.enabled({"QUOTALEDGER_INSPECT_GOAL": " "})
    assert not inspect_names.enabled({})


def test_names() -> None:
    assert run_name("EvalId22", "SampleUuid") == "EvalId22/SampleUuid"
    assert case_name("s1", 2) == "s1@2"
    assert case_name(17, 1) == "17@1"
    digest = hashlib.sha256(b"what is 2 + 2?").hexdigest()[:16]
    assert case_name("what is 2 + 2?", 3) == f"sha256:{digest}@3"
    long = "x" * 127  # an identifier, but not with "@1" after it
    assert case_name(long, 1) == f"sha256:{hashlib.sha256(long.encode()).hexdigest()[:16]}@1"
