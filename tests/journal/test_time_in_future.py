"""SPEC §2.2: an explicit time on a writer more than the clock-skew bound ahead of the
wall clock is `time_in_future` (exit 2), nothing written; readers evaluate any time.

Without the bound one `--at 2062-...` stamps every later event of its goal in 2062:
its samples never leave the 60 s window and `--at <now>` is a time regression.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from quotaledger import Error
from quotaledger.api import Ledger
from quotaledger.journal.clock import format_us, wall_us
from tests.support import REPO, run_cli

FAR = "2062-12-01T06:00:00Z"
HOUR_US = 3600 * 1_000_000

WRITERS = {
    "configure": ["configure", "--goal", "g", "--quota-tpm", "1000"],
    "observe": ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0",
                "--output", "0"],
    "admit": ["admit", "--goal", "g", "--run", "r9", "--forecast-tpm", "1"],
    "admit --dry-run": ["admit", "--goal", "g", "--run", "r9", "--forecast-tpm", "1",
                        "--dry-run"],
    "reject": ["reject", "--goal", "g"],
    "release": ["release", "--goal", "g", "--run", "r9"],
    "host phase": ["host", "phase", "--goal", "g", "--lane", "l", "--deadline", "+1h"],
    "host stop": ["host", "stop", "--goal", "g"],
    "budget configure": ["budget", "configure", "--goal", "g", "--allowed-units", "5",
                         "--window-hours", "1"],
    "turn open": ["turn", "open", "--goal", "g", "--agent", "a", "--turn", "t", "--task", "k"],
    "probe run": ["probe", "run", "--goal", "g", "--", "true"],
}  # fmt: skip
READERS = {
    "inspect": ["inspect", "--goal", "g"],
    "turn resume": ["turn", "resume", "--goal", "g", "--agent", "a"],
    "turn status": ["turn", "status", "--goal", "g"],
    "host status": ["host", "status", "--goal", "g"],
    "metrics": ["metrics"],
}


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j.jsonl"
    seeded = [
        ["configure", "--goal", "g", "--quota-tpm", "100000"],
        ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0", "--output", "0"],
        ["host", "phase", "--goal", "g", "--lane", "l", "--deadline", "+1h"],
        ["turn", "open", "--goal", "g", "--agent", "a", "--turn", "t0", "--task", "k"],
    ]
    for args in seeded:
        assert run_cli(*args, "--journal", path, "--json").code == 0
    return path


def _with(args: list[str], *options: object) -> list[object]:
    """`args` with `options` added before a `--` (after it they would be CMD's)."""
    cut = args.index("--") if "--" in args else len(args)
    return [*args[:cut], *options, *args[cut:]]


def _files(path: Path) -> tuple[list[str], bytes]:
    return sorted(p.name for p in path.parent.iterdir()), path.read_bytes()


@pytest.mark.parametrize("name", list(WRITERS))
@pytest.mark.parametrize("when", [FAR, "9999-12-31T23:59:59Z", "+1h"])
def test_a_writer_refuses_a_far_future_at_and_writes_nothing(
    name: str, when: str, journal: Path
) -> None:
    at = format_us(wall_us() + HOUR_US) if when == "+1h" else when
    before = _files(journal)
    refused = run_cli(*_with(WRITERS[name], "--journal", journal, "--json", "--at", at))
    assert refused.code == 2, (refused.stdout, refused.stderr)
    error = refused.json["error"]
    assert error["code"] == "time_in_future", error
    assert error["max_clock_skew_s"] == 300 and error["at"].startswith(at[:19])
    assert _files(journal) == before


def test_a_new_journal_is_not_created_by_a_refused_future_at(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    refused = run_cli(*WRITERS["configure"], "--journal", path, "--json", "--at", FAR)
    assert refused.code == 2 and refused.json["error"]["code"] == "time_in_future"
    assert list(tmp_path.iterdir()) == []


def test_within_the_bound_is_accepted_and_the_bound_is_configurable(journal: Path) -> None:
    soon = format_us(wall_us() + 60 * 1_000_000)
    observe = [*WRITERS["observe"], "--journal", journal, "--json"]
    assert run_cli(*observe, "--at", soon).code == 0
    later = format_us(wall_us() + HOUR_US)
    assert run_cli(*observe, "--at", later).json["error"]["code"] == "time_in_future"
    wide = run_cli(*observe, "--at", later, env={"QUOTALEDGER_MAX_CLOCK_SKEW_S": "86400"})
    assert wide.code == 0, wide.stdout
    # 0: no explicit time ahead of the clock at all (the next event is implicit again).
    strict = run_cli(
        *observe, "--at", format_us(wall_us() + HOUR_US + 1_000_000),
        env={"QUOTALEDGER_MAX_CLOCK_SKEW_S": "0"},
    )  # fmt: skip
    assert strict.json["error"]["code"] == "time_in_future"
    assert strict.json["error"]["max_clock_skew_s"] == 0


@pytest.mark.parametrize("value", ["abc", "-1", "86401", "nan", "inf", "5x", "1d1s"])
def test_a_bad_clock_skew_bound_is_a_clear_exit_2(value: str, journal: Path) -> None:
    before = _files(journal)
    soon = format_us(wall_us() + 1_000_000)
    refused = run_cli(
        *WRITERS["observe"], "--journal", journal, "--json", "--at", soon,
        env={"QUOTALEDGER_MAX_CLOCK_SKEW_S": value},
    )  # fmt: skip
    assert refused.code == 2, refused.stdout
    error = refused.json["error"]
    # The one duration grammar's error (`5m` is a duration now): issue 29.
    assert error["code"] == "invalid_duration"
    assert error["message"].startswith(f"QUOTALEDGER_MAX_CLOCK_SKEW_S {value!r} ")
    assert _files(journal) == before


@pytest.mark.parametrize("name", list(READERS))
def test_readers_evaluate_any_time(name: str, journal: Path) -> None:
    result = run_cli(*READERS[name], "--journal", journal, "--json", "--at", FAR)
    assert result.code == 0, (result.stdout, result.stderr)


def test_repair_refuses_a_future_time_before_moving_anything(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    shutil.copyfile(REPO / "fixtures" / "corrupt_flipped_byte.jsonl", path)
    before = _files(path)
    refused = run_cli(
        "repair", "--truncate-after", "1", "--yes", "--journal", path, "--json", "--at", FAR
    )
    assert refused.code == 2 and refused.json["error"]["code"] == "time_in_future", refused.stdout
    assert _files(path) == before


def test_the_api_refuses_a_future_time_in_a_transaction(journal: Path) -> None:
    with Ledger.open(str(journal)) as ledger:
        head = ledger.journal.head.seq
        with pytest.raises(Error) as caught:
            ledger.observe(goal="g", uncached_input=1, cached_input=0, output=0, at=FAR)
        assert (caught.value.code, caught.value.exit_code) == ("time_in_future", 2)
        with (
            pytest.raises(Error, match="ahead of this machine's clock"),
            ledger.journal.transaction() as txn,
        ):
            payload = (
                b'{"run":null,"uncached_input":1,"cached_input":0,"output":0,'
                b'"requests":null,"coverage":"measured","source":null}'
            )
            txn.append("capacity.observed", "g", payload, "2062-12-01T06:00:00.000000Z")
        assert ledger.journal.head.seq == head


def test_a_batch_of_explicit_times_is_bounded_to_the_microsecond(journal: Path) -> None:
    """A transaction compares each explicit time with the bound as text (canonical
    times sort as text): the bound itself is taken, a microsecond past it refused."""
    payload = (
        b'{"run":null,"uncached_input":1,"cached_input":0,"output":0,'
        b'"requests":null,"coverage":"measured","source":null}'
    )
    with Ledger.open(str(journal)) as ledger:
        head = ledger.journal.head.seq
        with ledger.journal.transaction() as txn:
            bound_us = txn.wall_us + 300 * 1_000_000  # QUOTALEDGER_MAX_CLOCK_SKEW_S's default
            txn.append("capacity.observed", "g", payload, format_us(bound_us - 1))
            txn.append("capacity.observed", "g", payload, format_us(bound_us))
        assert ledger.journal.head.seq == head + 3  # the batch record and the two events
        with (
            pytest.raises(Error, match="ahead of this machine's clock"),
            ledger.journal.transaction() as txn,
        ):
            txn.append("capacity.observed", "h", payload, format_us(txn.wall_us))
            txn.append("capacity.observed", "h", payload, format_us(txn.wall_us + 300_000_001))
        assert ledger.journal.head.seq == head + 3
