"""The capacity use cases' typed requests: the one place their values are checked (the
error names the flag for the CLI, the keyword for the API). That the CLI and the API
decode the same request: tests/package/test_one_request_per_use_case.py."""

from __future__ import annotations

from typing import Any

import pytest

import quotaledger.usecases.decode as decoding
from quotaledger import InvalidInput, Ledger
from quotaledger.projections.capacity import FIELDS
from quotaledger.usecases import capacity_state as uc
from quotaledger.usecases.configfields import ConfigFieldsRequest
from tests.support import run_cli

COUNTS = {"uncached_input": 1, "cached_input": 0, "output": 0}


def test_config_fields_are_the_config_rule_fields() -> None:
    assert ConfigFieldsRequest.__struct_fields__ == FIELDS
    assert set(FIELDS) <= set(uc.ConfigureRequest.__struct_fields__)


@pytest.mark.parametrize(
    ("method", "kwargs", "flag", "code"),
    [
        ("admit", {"run": "r", "arm": "nope"}, "--arm", "invalid_choice"),
        ("admit", {"run": "r", "class_": "judge"}, "--class", "invalid_choice"),
        ("admit", {"run": "r", "lease_s": 0}, "--lease-s", "invalid_duration"),
        ("admit", {"run": "r", "case": "a b"}, "--case", "invalid_identifier"),
        ("admit", {"run": "r", "forecast_tpm": -1}, "--forecast-tpm", "invalid_token_count"),
        ("observe", {**COUNTS, "coverage": "metered"}, "--coverage", "invalid_choice"),
        ("observe", {**COUNTS, "usage_format": "x"}, "--usage-format", "invalid_choice"),
        ("observe", {**COUNTS, "source": "x" * 5000}, "--source", "invalid_text"),
        ("reject", {"retry_after_s": 2e9}, "--retry-after-s", "invalid_duration"),
        ("reject", {"detail": "x" * 5000}, "--detail", "invalid_text"),
    ],
)
def test_a_bad_value_is_refused_by_the_request_in_the_callers_words(
    tmp_path: Any, method: str, kwargs: dict[str, Any], flag: str, code: str
) -> None:
    keyword = flag.removeprefix("--").replace("-", "_")
    keyword = "class_" if keyword == "class" else keyword
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger, pytest.raises(InvalidInput) as by_api:
        getattr(ledger, method)(goal="g", **kwargs)
    args = [method, "--goal", "g", "--journal", str(tmp_path / "j.jsonl"), "--json"]
    for name, value in kwargs.items():
        args += [decoding.CLI(name), str(value)]
    by_cli = run_cli(*args)
    assert by_api.value.code == by_cli.json["error"]["code"] == code
    assert by_api.value.message.startswith(keyword), by_api.value.message
    assert by_cli.json["error"]["message"].startswith(flag), by_cli.json
    assert not (tmp_path / "j.jsonl").exists()  # nothing was written, not even a file


def test_an_admit_requests_payload_copies_every_field_of_the_same_name() -> None:
    """`payload` spells its fields out: each field the event shares with the request
    (every one but the class, `run_class` there) must be the request's, none left out."""
    from quotaledger.usecases import capacity as ucap

    given: dict[str, Any] = {
        "goal": "g",
        "run": "r",
        "case": "c",
        "arm": "treatment",
        "class_": "evaluator",
        "forecast_tpm": 11,
        "lease_s": 12,
        "forecast_itpm": 13,
        "forecast_otpm": 14,
        "forecast_rpm": 15,
        "forecast_tokens": 16,
        "forecast_requests": 17,
        "forecast_usd": 1.5,
    }
    request = decoding.decode(ucap.AdmitRequest, given, decoding.API)
    payload = request.payload()
    shared = [f for f in payload.__struct_fields__ if f != "run_class"]
    assert set(shared) == set(given) - {"goal", "class_"}
    assert {f: getattr(payload, f) for f in shared} == {f: given[f] for f in shared}
    assert payload.run_class == "evaluator"
