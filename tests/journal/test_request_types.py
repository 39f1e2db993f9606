"""The CLI and the Python API decode the same request for each journal use case
(SPEC §2): one request type, decoded once where the request enters."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from quotaledger.api import Ledger
from quotaledger.journal import InvalidInput
from quotaledger.usecases import decode as decoding
from quotaledger.usecases.registry import USE_CASES
from tests.support import run_cli

JOURNAL_CASES = [name for name, case in USE_CASES.items() if case.module == "journal"]
AT = "2026-11-29T14:00:00Z"


def _cases(tmp: Path) -> dict[str, tuple[list[str], dict[str, Any]]]:
    """Each use case as CLI arguments and as the API's keywords, asking the same."""
    return {
        "verify": (["verify"], {}),
        "digest": (["digest"], {}),
        "repair": (["repair", "--truncate-after", "0", "--yes"], {"truncate_after": 0}),
        "checkpoint": (["checkpoint"], {}),
        "log": (["log", "--goal", "g", "--last", "1"], {"goal": "g", "last": 1}),
        "export": (["export", "--to", "-"], {"to": "-"}),
        "import_": (["import", str(tmp / "src.jsonl")], {"file": str(tmp / "src.jsonl")}),
    }


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    importlib.import_module("quotaledger.cli.journal")
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


def test_every_journal_use_case_is_covered(tmp_path: Path) -> None:
    assert sorted(_cases(tmp_path)) == sorted(JOURNAL_CASES)


@pytest.mark.parametrize("name", JOURNAL_CASES)
def test_the_cli_and_the_api_decode_the_same_request(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, keywords = _cases(tmp_path)[name]
    with Ledger.open(str(tmp_path / "src.jsonl")) as ledger:
        ledger.configure(goal="g", max_active_cases=2, at=AT)
    decoded = _recording(monkeypatch)
    asked: list[Any] = []
    for number, call in enumerate(("cli", "api")):
        path = str(tmp_path / f"{call}.jsonl")
        if name != "import_":
            with Ledger.open(path) as ledger:
                ledger.configure(goal="g", max_active_cases=2, at=AT)
                ledger.configure(goal="g", max_active_cases=3, at=AT)
        before = len(decoded)
        if call == "cli":
            result = run_cli(*args, "--journal", path, "--json")
            # repair refuses a journal that verifies, after the request is decoded
            assert result.code == (2 if name == "repair" else 0), result.stdout
        else:
            with Ledger.open(path) as ledger:
                try:
                    answer = getattr(ledger, name)(**keywords)
                except InvalidInput as refused:
                    assert name == "repair", refused
                if name == "log":
                    list(answer)
        assert len(decoded) == before + 1, (number, decoded)
        asked.append(decoded[-1])
    from_cli, from_api = asked
    expected = USE_CASES[name].request_type()
    assert type(from_cli) is type(from_api) is expected
    assert from_cli == from_api
