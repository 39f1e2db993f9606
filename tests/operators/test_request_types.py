"""The CLI and the Python API decode the same request for each operators' use case
(SPEC §7): one request type, decoded once where the request enters, whichever way it
enters; and both answer the same."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.usecases import decode as decoding
from quotaledger.usecases.registry import USE_CASES
from tests.operators.operators_helpers import at
from tests.support import run_cli

OPERATOR_CASES = [name for name, case in USE_CASES.items() if case.module == "operator"]


def _cases(out: str) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """Each use case as CLI arguments and as the API's keywords, asking the same."""
    return {
        "goals": (["goals", "--at", at(9)], {"at": at(9)}),
        "audit": (["audit", "--goal", "g", "--run", "r2"], {"goal": "g", "run": "r2"}),
        "whatif": (
            ["whatif", "--goal", "g", "--quota-tpm", "90000", "--since", at(1)],
            {"goal": "g", "quota_tpm": 90_000, "since": at(1)},
        ),
        "report": (["report", "--goal", "g", "--out", out], {"goal": "g", "out": out}),
        "metrics": (["metrics", "--goal", "g", "--at", at(9)], {"goal": "g", "at": at(9)}),
        "validity": (
            ["validity", "--goal", "g", "--since", at(1), "--until", at(9)],
            {"goal": "g", "since": at(1), "until": at(9)},
        ),
    }


def _history(path: str) -> None:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", max_active_cases=2, quota_tpm=50_000, at=at(0))
        ledger.observe(goal="g", uncached_input=20_000, cached_input=0, output=5_000, at=at(1))
        ledger.admit(goal="g", run="r1", arm="baseline", forecast_tpm=10_000, at=at(2))
        ledger.admit(goal="g", run="r2", arm="treatment", forecast_tpm=40_000, at=at(3))


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every request `decode` makes from now on, called from a module loaded now (the
    operators' CLI commands are: a module imported later would keep the spy)."""
    importlib.import_module("quotaledger.cli.operator")
    real = decoding.decode
    decoded: list[Any] = []

    def spy(request_type: Any, values: Any, names: Any) -> Any:
        request = real(request_type, values, names)
        decoded.append(request)
        return request

    for module in list(sys.modules.values()):
        if getattr(module, "decode", None) is real:
            monkeypatch.setattr(module, "decode", spy)
    return decoded


def test_every_operator_use_case_is_covered() -> None:
    assert sorted(_cases("x")) == sorted(OPERATOR_CASES)


@pytest.mark.parametrize("name", OPERATOR_CASES)
def test_the_cli_and_the_api_decode_the_same_request(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "j.jsonl")
    _history(path)
    args, keywords = _cases(str(tmp_path / "out.file"))[name]
    decoded = _recording(monkeypatch)
    cli = run_cli(*args, "--journal", path, "--json")
    assert cli.code in (0, 1), cli.stdout + cli.stderr
    with Ledger.open(path, write=False) as ledger:
        answer = getattr(ledger, name)(**keywords)
    assert len(decoded) == 2, decoded
    from_cli, from_api = decoded
    expected = USE_CASES[name].request_type()
    assert type(from_cli) is type(from_api) is expected
    assert from_cli == from_api
    if name != "report":  # the page (and so its size) carries the time it was made
        assert cli.json == answer
