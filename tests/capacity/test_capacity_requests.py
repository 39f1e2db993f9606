"""The capacity use cases' typed requests: one request type per use case, decoded the
same way from CLI options and API keywords, and the one place their values are
checked (the error names the flag for the CLI, the keyword for the API)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import quotaledger.api
import quotaledger.cli.capacity
import quotaledger.cli.runner
import quotaledger.usecases.decode as decoding
from quotaledger import InvalidInput, Ledger
from quotaledger.projections.capacity import FIELDS
from quotaledger.usecases import capacity_state as uc
from quotaledger.usecases.configfields import ConfigFieldsRequest
from quotaledger.usecases.registry import USE_CASES
from tests.capacity.capacity_helpers import at
from tests.support import run_cli

COUNTS = {"uncached_input": 1, "cached_input": 0, "output": 0}

# Each capacity use case as a CLI command and as the same API call.
CALLS: dict[str, tuple[list[str], dict[str, Any]]] = {
    "configure": (
        ["configure", "--goal", "g", "--max-active-cases", "2", "--quota-tpm", "1000"],
        {"goal": "g", "max_active_cases": 2, "quota_tpm": 1000},
    ),
    "observe": (
        ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0", "--output", "0"],
        {"goal": "g", **COUNTS},
    ),
    "admit": (
        ["admit", "--goal", "g", "--run", "r1", "--arm", "baseline", "--forecast-tpm", "10"],
        {"goal": "g", "run": "r1", "arm": "baseline", "forecast_tpm": 10},
    ),
    "reject": (
        ["reject", "--goal", "g", "--run", "r1", "--retry-after-s", "1"],
        {"goal": "g", "run": "r1", "retry_after_s": 1},
    ),
    "release": (["release", "--goal", "g", "--run", "r1"], {"goal": "g", "run": "r1"}),
    "inspect": (["inspect", "--goal", "g"], {"goal": "g"}),
}


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[type]]:
    """The request types `decode` makes, in order, wherever it is called from."""
    original = decoding.decode
    seen: list[type] = []

    def recording(request_type: type[Any], values: Any, names: Callable[[str], str]) -> Any:
        seen.append(request_type)
        return original(request_type, values, names)

    for module in list(sys.modules.values()):
        if module.__name__.startswith("quotaledger") and getattr(module, "decode", None) is (
            original
        ):
            monkeypatch.setattr(module, "decode", recording)
    yield seen


def test_the_cli_and_the_api_decode_the_same_request(
    tmp_path: Any, decoded: list[type], monkeypatch: pytest.MonkeyPatch
) -> None:
    cli_journal, api_journal = str(tmp_path / "cli.jsonl"), str(tmp_path / "api.jsonl")
    assert quotaledger.cli.runner and quotaledger.cli.capacity and quotaledger.api
    for name, (args, kwargs) in CALLS.items():
        decoded.clear()
        result = run_cli(*args, "--at", at(list(CALLS).index(name)), "--journal", cli_journal)
        assert result.code in (0, 1), (name, result.stdout, result.stderr)
        by_cli = list(decoded)
        decoded.clear()
        with Ledger.open(api_journal) as ledger:
            getattr(ledger, name)(**kwargs, at=at(list(CALLS).index(name)))
        by_api = list(decoded)
        expected = USE_CASES[name].request_type()
        assert by_cli == by_api == [expected], name


def test_config_fields_are_the_config_rule_fields() -> None:
    assert ConfigFieldsRequest.__struct_fields__ == FIELDS
    assert set(FIELDS) <= set(uc.ConfigureRequest.__struct_fields__)


@pytest.mark.parametrize(
    ("method", "kwargs", "flag", "code"),
    [
        ("admit", {"run": "r", "arm": "nope"}, "--arm", "invalid_choice"),
        ("admit", {"run": "r", "class_": "judge"}, "--class", "invalid_choice"),
        ("admit", {"run": "r", "lease_s": 0}, "--lease-s", "invalid_option"),
        ("admit", {"run": "r", "case": "a b"}, "--case", "invalid_identifier"),
        ("admit", {"run": "r", "forecast_tpm": -1}, "--forecast-tpm", "invalid_token_count"),
        ("observe", {**COUNTS, "coverage": "metered"}, "--coverage", "invalid_choice"),
        ("observe", {**COUNTS, "usage_format": "x"}, "--usage-format", "invalid_choice"),
        ("observe", {**COUNTS, "source": "x" * 5000}, "--source", "text_too_long"),
        ("reject", {"retry_after_s": 2e9}, "--retry-after-s", "invalid_option"),
        ("reject", {"detail": "x" * 5000}, "--detail", "text_too_long"),
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
