"""Issue 27: nothing outside the append path destroys what the user has. Case 1: no
output option (`metrics --out`, `report --out`) writes onto a journal, its checkpoint,
or any other file holding a journal (SPEC §7, `out_is_journal`, exit 2, untouched)."""

from __future__ import annotations

import json
import os

import pytest

from quotaledger import Ledger
from tests.support import run_cli

T0 = "2026-11-29T14:00:00Z"


def _journal(path: str) -> bytes:
    with Ledger.open(path) as ledger:
        ledger.configure(goal="g", quota_tpm=1000, at=T0)
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("command", [["metrics"], ["report", "--goal", "g"]])
@pytest.mark.parametrize("target", ["same", "other", "checkpoint", "delta"])
def test_an_output_option_never_writes_onto_a_journal(
    tmp_path: os.PathLike[str], command: list[str], target: str
) -> None:
    journal = os.path.join(tmp_path, "j.jsonl")
    before = _journal(journal)
    out = journal
    if target == "other":
        out = os.path.join(tmp_path, "other.jsonl")
        _journal(out)
    elif target in ("checkpoint", "delta"):
        out = journal + (".checkpoint" if target == "checkpoint" else ".checkpoint.delta")
        with open(out, "wb") as f:  # whatever the checkpoint holds, it is not ours to replace
            f.write(b'{"checkpoint":1}\n')
    with open(out, "rb") as f:
        out_before = f.read()
    result = run_cli(*command, "--journal", journal, "--out", out, "--json")
    assert result.code == 2, result.stdout
    assert json.loads(result.stdout)["error"]["code"] == "out_is_journal"
    with open(journal, "rb") as f:
        assert f.read() == before
    with open(out, "rb") as f:
        assert f.read() == out_before


def test_an_output_option_still_replaces_its_own_earlier_output(tmp_path: os.PathLike[str]) -> None:
    journal = os.path.join(tmp_path, "j.jsonl")
    _journal(journal)
    out = os.path.join(tmp_path, "metrics.prom")
    for _ in range(2):
        result = run_cli("metrics", "--journal", journal, "--out", out, "--json")
        assert result.code == 0, result.stdout
