"""SPEC §7 (issue 27 item 7): `verify --decisions` re-decides every recorded decision
as `audit` does and lists those not reproduced (exit 3 `decision_not_reproduced`), and
`import` refuses such a history (exit 3, nothing imported) unless
`--allow-unreproduced`.

The impossible history is well chained: five runs admitted into a goal of one slot,
the last four forged by re-chaining copies of the first admission (every hash right).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from quotaledger.api import Ledger
from quotaledger.journal.errors import Error
from quotaledger.journal.record import encode_line
from tests.pg.pg_helpers import fresh_schema
from tests.support import CliResult, run_cli

T = "2026-11-29T10:00:{:02d}.000000Z"
FORGED_RUNS = ("r2", "r3", "r4", "r5")


def cli(journal: str, *args: str) -> CliResult:
    return run_cli(*args, "--journal", journal, "--json")


def honest(path: Path) -> None:
    """One slot: r1 admitted, r2 refused (the slot is full), r1 released, r2 admitted."""
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="g", max_active_cases=1, at=T.format(0))
        ledger.admit(goal="g", run="r1", arm="baseline", at=T.format(1))
        ledger.admit(goal="g", run="r2", arm="baseline", at=T.format(2))
        ledger.release(goal="g", run="r1", at=T.format(3))
        ledger.admit(goal="g", run="r2", arm="baseline", at=T.format(4))


def five_in_one_slot(path: Path) -> list[int]:
    """A well-chained journal with five runs admitted into one slot; the forged seqs."""
    with Ledger.open(str(path)) as ledger:
        ledger.configure(goal="g", max_active_cases=1, at=T.format(0))
        ledger.admit(goal="g", run="r1", arm="baseline", at=T.format(1))
    lines = path.read_bytes().splitlines()
    admitted = json.loads(lines[-1])
    seq, prev = admitted["seq"], admitted["hash"]
    forged: list[int] = []
    with path.open("ab") as journal:
        for offset, run in enumerate(FORGED_RUNS, start=1):
            data = admitted["data"]
            data["request"]["run"] = run
            line, prev = encode_line(seq + offset, T.format(1 + offset), "capacity.admitted",
                                     "g", msgspec.json.encode(data), prev)  # fmt: skip
            journal.write(line)
            forged.append(seq + offset)
    return forged


def test_verify_passes_the_chain_but_decisions_finds_the_impossible_history(
    tmp_path: Path,
) -> None:
    path = tmp_path / "forged.jsonl"
    forged = five_in_one_slot(path)
    before = path.read_bytes()
    assert cli(str(path), "verify").code == 0  # every hash and link is right
    found = cli(str(path), "verify", "--decisions")
    assert found.code == 3, found.stdout + found.stderr
    error = found.json["error"]
    assert error["code"] == "decision_not_reproduced", error
    assert [item["seq"] for item in error["not_reproduced"]] == forged
    assert [item["run"] for item in error["not_reproduced"]] == list(FORGED_RUNS)
    assert all(item["differences"] for item in error["not_reproduced"])
    assert error["checked"] == 5
    assert path.read_bytes() == before  # verify is a reader
    text = run_cli("verify", "--decisions", "--journal", str(path))
    assert text.code == 3 and "decision_not_reproduced" in text.stdout + text.stderr


def test_verify_decisions_passes_an_honest_history(tmp_path: Path) -> None:
    path = tmp_path / "honest.jsonl"
    honest(path)
    found = cli(str(path), "verify", "--decisions")
    assert found.code == 0, found.stdout + found.stderr
    assert found.json["decisions"] == {"checked": 3, "not_reproduced": []}
    assert "decisions" not in cli(str(path), "verify").json  # only when asked


def test_import_refuses_a_history_with_unreproduced_decisions(tmp_path: Path) -> None:
    source = tmp_path / "forged.jsonl"
    forged = five_in_one_slot(source)
    target = tmp_path / "target.jsonl"
    refused = cli(str(target), "import", str(source))
    assert refused.code == 3, refused.stdout + refused.stderr
    error = refused.json["error"]
    assert error["code"] == "decision_not_reproduced"
    assert [item["seq"] for item in error["not_reproduced"]] == forged
    assert not target.exists() or target.stat().st_size == 0, "nothing imported"
    allowed = cli(str(target), "import", str(source), "--allow-unreproduced")
    assert allowed.code == 0, allowed.stdout + allowed.stderr
    assert target.read_bytes() == source.read_bytes()


def test_import_of_an_honest_history_needs_no_flag(tmp_path: Path) -> None:
    source = tmp_path / "honest.jsonl"
    honest(source)
    target = tmp_path / "target.jsonl"
    imported = cli(str(target), "import", str(source))
    assert imported.code == 0, imported.stdout + imported.stderr
    assert target.read_bytes() == source.read_bytes()


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


@pytest.mark.pg
def test_import_into_postgresql_refuses_it_too(pg_journal: str, tmp_path: Path) -> None:
    source = tmp_path / "forged.jsonl"
    five_in_one_slot(source)
    refused = cli(pg_journal, "import", str(source))
    assert refused.code == 3, refused.stdout + refused.stderr
    assert refused.json["error"]["code"] == "decision_not_reproduced"
    assert cli(pg_journal, "verify").code == 3  # still no journal: nothing was imported
    allowed = cli(pg_journal, "import", str(source), "--allow-unreproduced")
    assert allowed.code == 0, allowed.stdout + allowed.stderr
    found = cli(pg_journal, "verify", "--decisions")
    assert found.code == 3 and found.json["error"]["code"] == "decision_not_reproduced"


def test_the_refused_import_names_its_option_as_the_caller_does(tmp_path: Path) -> None:
    """Issue 29: the Python API's refusal said `--allow-unreproduced` (the CLI's flag)."""
    source = tmp_path / "forged.jsonl"
    five_in_one_slot(source)
    with Ledger.open(str(tmp_path / "target.jsonl")) as ledger, pytest.raises(Error) as raised:
        ledger.import_(file=str(source))
    assert raised.value.code == "decision_not_reproduced"
    assert "; allow_unreproduced imports it anyway" in raised.value.message
    assert "--allow" not in raised.value.message
    refused = cli(str(tmp_path / "other.jsonl"), "import", str(source))
    assert "; --allow-unreproduced imports it anyway" in refused.json["error"]["message"]
