"""Every rule once, on the engine's side (issue 25): the lock wait bounded where the
journal is opened, messages that name the engine's parameters (the CLI words them with
its flags), a handle shared by threads, and `txn.append`'s own checks of `at` and goal."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from quotaledger import Ledger
from quotaledger.journal import Error, InvalidInput, Journal, TimeRegression
from quotaledger.journal.limits import LOCK_TIMEOUT_S_MAX
from quotaledger.usecases.decode import API, CLI
from tests.journal.journal_helpers import toy_journal
from tests.support import run_cli
from tests.toyprojector import TOY, Note


@pytest.mark.parametrize("timeout_s", [math.inf, -math.inf, math.nan, -1.0, LOCK_TIMEOUT_S_MAX + 1])
@pytest.mark.parametrize("write", [True, False])
def test_the_lock_wait_is_bounded_where_the_journal_is_opened(
    tmp_path: Path, timeout_s: float, write: bool
) -> None:
    path = str(tmp_path / "j.jsonl")
    with pytest.raises(InvalidInput) as raised:
        Journal.open(path, TOY, write=write, lock_timeout_s=timeout_s)
    error = raised.value
    assert error.code == "invalid_option"
    assert error.about == "lock_timeout_s"
    assert error.message.startswith("lock_timeout_s must be between 0 and 86400 seconds")
    assert error.worded(CLI).startswith("--lock-timeout-s must be between 0 and 86400")
    with pytest.raises(InvalidInput) as through_api:
        Ledger.open(path, lock_timeout_s=timeout_s)
    assert through_api.value.about == "lock_timeout_s"
    assert not (tmp_path / "j.jsonl").exists()


def test_the_bounds_themselves_open(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    for timeout_s in (0, 0.0, 1, LOCK_TIMEOUT_S_MAX):
        Journal.open(path, TOY, lock_timeout_s=timeout_s).close()


def test_a_time_error_names_the_parameter_and_the_cli_its_flag(tmp_path: Path) -> None:
    journal = toy_journal(str(tmp_path / "j.jsonl"), [1])
    with pytest.raises(TimeRegression) as raised, journal.transaction() as txn:
        txn.time_for("g", "2000-01-01T00:00:00Z")
    error = raised.value
    assert error.about == "at"
    assert error.message.startswith("at 2000-01-01T00:00:00.000000Z is earlier than")
    assert error.worded(API) == error.message
    assert error.worded(CLI) == "--" + error.message
    assert error.to_json(CLI)["message"] == "--" + error.message
    assert "--" not in str(error.to_json())
    journal.close()


def test_a_handle_shared_by_threads_serialises_its_transactions(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = Journal.open(path, TOY)
    failures: list[BaseException] = []

    def appender(worker: int) -> None:
        try:
            for i in range(20):
                with journal.transaction() as txn:
                    n = worker * 100 + i
                    txn.append("toy.note", "g", Note(n=n), txn.time_for("g"))
        except BaseException as exc:  # the test reports every one
            failures.append(exc)

    threads = [threading.Thread(target=appender, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert journal.state.count == 80
    assert journal.head.seq == 80
    journal.close()
    with Journal.open(path, TOY, write=False) as reader:
        assert reader.state.count == 80


def test_a_nested_transaction_is_an_error_of_the_engine(tmp_path: Path) -> None:
    journal = toy_journal(str(tmp_path / "j.jsonl"), [1])
    with journal.transaction(), pytest.raises(Error) as raised, journal.transaction():
        pass
    assert raised.value.code == "nested_transaction"
    with journal.transaction() as txn:  # the handle is usable again
        txn.append("toy.note", "g", Note(n=2), txn.time_for("g"))
    assert journal.state.count == 2
    journal.close()


@pytest.mark.parametrize("at", [None, 17, b"2026-01-01T00:00:00.000000Z"])
def test_append_refuses_an_at_that_is_not_a_time(tmp_path: Path, at: Any) -> None:
    journal = toy_journal(str(tmp_path / "j.jsonl"), [1])
    with pytest.raises(InvalidInput) as raised, journal.transaction() as txn:
        txn.append("toy.note", "g", Note(n=2), at)
    assert raised.value.code == "invalid_time"
    assert raised.value.about == "at"
    assert journal.state.count == 1
    journal.close()


@pytest.mark.parametrize("goal", ["bad goal!", "", "x" * 129, "g\n", 5])
def test_append_refuses_a_goal_that_is_not_an_identifier(tmp_path: Path, goal: Any) -> None:
    path = str(tmp_path / "j.jsonl")
    journal = toy_journal(path, [1])
    with pytest.raises(InvalidInput) as raised, journal.transaction() as txn:
        txn.append("toy.note", goal, Note(n=2), txn.time_for("g"))
    assert raised.value.code == "invalid_identifier"
    assert raised.value.about == "goal"
    assert journal.state.count == 1
    journal.close()
    with Journal.open(path, TOY, write=False) as reader:
        assert set(reader.head.goal_last_at) == {None, "g"}


def test_append_takes_every_identifier_and_the_journal_level_goal(tmp_path: Path) -> None:
    journal = toy_journal(str(tmp_path / "j.jsonl"), [1])
    with journal.transaction() as txn:
        for goal in ("a.b_c:d@e/f-0", "x" * 128):
            txn.append("toy.note", goal, Note(n=2), txn.time_for(goal))
        txn.append("journal.repaired", None, _repaired(), txn.time_for(None))
    journal.close()


def _repaired() -> Any:
    from tests.journal.journal_helpers import repaired_payload

    return repaired_payload(0)


def test_the_identifier_rule_is_the_engines(tmp_path: Path) -> None:
    from quotaledger.journal import identifier
    from quotaledger.projections import types
    from quotaledger.usecases import fields

    assert types.IDENTIFIER_PATTERN is identifier.IDENTIFIER_PATTERN
    with pytest.raises(InvalidInput) as raised:
        fields.check_identifier("--goal", "bad goal!")
    assert raised.value.code == "invalid_identifier"
    assert raised.value.context == {"option": "--goal"}


def test_a_writing_command_takes_the_lock_once(tmp_path: Path, monkeypatch: Any) -> None:
    """Open (recovery on open), fold, decide, append, release: one lock hold. The open
    folds as readers do; the transaction takes the lock and catches up."""
    from quotaledger.journal.filestore import FileStore

    path = str(tmp_path / "j.jsonl")
    toy_journal(path, [1, 2]).close()
    locks: list[float] = []
    real_lock = FileStore.lock

    def counting_lock(store: FileStore, timeout_s: float, meanwhile: Any = None) -> None:
        locks.append(timeout_s)
        real_lock(store, timeout_s, meanwhile)

    monkeypatch.setattr(FileStore, "lock", counting_lock)
    with Journal.open(path, TOY, lock_timeout_s=7) as journal:
        assert journal.state.count == 2 and locks == []
        with journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=3), txn.time_for("g"))
    assert locks == [7.0]
    # A torn tail is still recovered on open, under the lock (SPEC §2.4).
    with open(path, "ab") as file:
        file.write(b'{"v":1,"seq":4')
    with Journal.open(path, TOY) as journal:
        assert len(journal.recovered) == 1 and len(locks) == 2
        with journal.transaction() as txn:
            txn.append("toy.note", "g", Note(n=4), txn.time_for("g"))
        assert journal.state.count == 4


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_cli_writer_flocks_once(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.jsonl")
    configure = ["configure", "--journal", journal, "--goal", "g", "--quota-tpm", "1000"]
    assert run_cli(*configure, "--max-active-cases", "1").code == 0
    trace = tmp_path / "trace"
    observe = ["observe", "--journal", journal, "--goal", "g", "--uncached-input", "1"]
    done = subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=flock", "-o", str(trace), sys.executable, "-m",
         "quotaledger", *observe, "--cached-input", "0", "--output", "1", "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    calls = trace.read_text().splitlines()
    assert len([c for c in calls if "LOCK_EX" in c]) == 1, calls


def test_a_ledger_shared_by_threads_answers_every_call(tmp_path: Path) -> None:
    """Issue 25: 40 of 80 calls failed with a bare RuntimeError before."""
    with Ledger.open(str(tmp_path / "j.jsonl")) as ledger:
        ledger.configure(goal="g", quota_tpm=10**9, max_active_cases=4)
        failures: list[BaseException] = []

        def observer() -> None:
            try:
                for _ in range(20):
                    ledger.observe(goal="g", uncached_input=1, cached_input=0, output=1)
                    ledger.inspect(goal="g")
            except BaseException as exc:  # the test reports every one
                failures.append(exc)

        threads = [threading.Thread(target=observer) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert ledger.journal.head.seq == 81  # genesis, configure, 80 observations


@pytest.mark.parametrize("target", ["{tmp}/missing/j.jsonl", "mysql://db/x", ""])
def test_the_engine_names_its_target_parameter(tmp_path: Path, target: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        Journal.open(target.format(tmp=tmp_path), TOY)
    assert raised.value.message.startswith("target "), raised.value.message
    assert raised.value.context == {"parameter": "target"}
    assert "--journal" not in raised.value.message
