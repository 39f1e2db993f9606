"""Issue 41: NUL in text is refused the same on both stores. PostgreSQL's JSON holds
no NUL (`\\u0000`), so what the file store journaled, PostgreSQL answered exit 4
`pg_error` (an invitation to retry forever) and an import of that file failed the
same way. A handoff whose content holds a NUL is `handoff_not_utf8` on both stores
(it is stored as text, which no NUL may be); a file journal that holds one (written
before the rule) is refused by an import into PostgreSQL, exit 2, nothing imported."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from quotaledger import Error, Ledger
from tests.store.store_helpers import fresh_schema


@pytest.fixture
def pg_journal(pg_server: str) -> Iterator[str]:
    with fresh_schema(pg_server) as url:
        yield url


def _code(call: object) -> str:
    try:
        call()  # type: ignore[operator]
    except Error as error:
        assert error.exit_code == 2, error
        return error.code
    return "accepted"


def test_a_handoff_holding_a_nul_is_refused_alike_on_both_stores(
    tmp_path: Path, pg_journal: str
) -> None:
    handoff = tmp_path / "handoff.txt"
    handoff.write_bytes(b"resume from\x00here")
    digest = hashlib.sha256(handoff.read_bytes()).hexdigest()
    codes = {}
    for target in (str(tmp_path / "j.jsonl"), pg_journal):
        with Ledger.open(target) as ledger:
            ledger.configure(goal="g", quota_tpm=1000)  # a head to compare
            before = ledger.digest()
            codes[target] = _code(
                lambda ledger=ledger: ledger.host_phase(
                    goal="g", lane="l", deadline="+1h", session="s", profile="p",
                    handoff=str(handoff), handoff_sha256=digest,
                )
            )  # fmt: skip
            assert ledger.digest() == before
    assert set(codes.values()) == {"handoff_not_utf8"}, codes


def test_an_import_of_a_journal_holding_a_nul_is_refused(tmp_path: Path, pg_journal: str) -> None:
    source = tmp_path / "old.jsonl"
    with Ledger.open(str(source)) as ledger:
        ledger.configure(goal="g", quota_tpm=1000)
        with ledger.journal.transaction() as txn:  # as a journal written before the rule
            payload = {"run": None, "uncached_input": 0, "cached_input": 0, "output": 0,
                       "requests": None, "coverage": "measured", "source": "a\x00b"}  # fmt: skip
            txn.append("capacity.observed", "g", payload, txn.time_for("g"))
    assert b"\\u0000" in source.read_bytes()
    with Ledger.open(pg_journal) as target:
        assert _code(lambda: target.import_(file=str(source))) == "invalid_line"
    with Ledger.open(pg_journal, write=False) as target:
        assert list(target.log()) == []
