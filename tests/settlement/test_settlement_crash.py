"""Crashes around a settlement (SPEC §5, §2.4, seed 004): a real runtime process killed
with SIGKILL between writeback and spend, and a journal cut inside the `quota.spent`
record. Either way the fold alone returns the original spend, which then happens
exactly once."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from quotaledger.api import Ledger
from tests.settlement.settlement_helpers import (
    Snapshot,
    budget_args,
    effect,
    events,
    kill_runtime_after_writeback,
    open_args,
    run_printed,
    spend_args,
    spend_line,
    writeback_args,
)
from tests.support import REPO, run_cli, run_process

G, A = "goal-1", "agent-1"
RESUME = ("turn", "resume", "--goal", G, "--agent", A)


@pytest.mark.slow
def test_sigkill_between_writeback_and_spend_resumes_the_original_spend(cli, journal_path) -> None:
    assert cli(*budget_args(G, 500, 24)).code == 0
    assert cli(*open_args(G, A, "t1", "k1")).code == 0
    # A runner holding the API in-process across the crash (a long-lived handle).
    with Ledger.open(journal_path) as held:
        assert held.turn_resume(goal=G, agent=A)["phase"] == "open"

        assert kill_runtime_after_writeback(journal_path, G, A, "t1", 70) == -signal.SIGKILL
        eff = effect(G, A, "k1", "t1")
        expected = spend_line(G, A, "t1", eff, 70, journal=journal_path)
        assert events(journal_path, "quota.spent") == []

        # Re-entry, as a real process, from the journal alone.
        resumed = run_process(*RESUME, "--journal", journal_path, "--json")
        assert resumed.code == 0, resumed.stderr
        assert resumed.json["phase"] == "spend_owed"
        assert resumed.json["command"] == expected
        assert (resumed.json["effect"], resumed.json["amount"]) == (eff, 70)
        assert (
            held.turn_resume(goal=G, agent=A)["command"] == expected
        )  # the held handle catches up

        # A new turn for another task is refused and never displaces the owed spend.
        snap = Snapshot(journal_path)
        blocked = cli(*open_args(G, A, "t2", "k2"))
        assert blocked.code == 1 and blocked.json["reasons"] == ["settlement_owed"]
        assert blocked.json["command"] == expected
        # A spend naming a foreign turn (with the owed effect and amount) is refused.
        foreign = cli(*spend_args(G, A, "t2", eff, 70))
        assert foreign.code == 1 and foreign.json["reasons"] == ["spend_identity_mismatch"]
        snap.assert_unchanged()
        again = run_process(*RESUME, "--journal", journal_path, "--json")
        assert again.json["command"] == expected

        # The printed line, unchanged, as a real process: one debit.
        argv = shlex.split(expected)
        spent = run_process(*argv[1:], "--journal", journal_path, "--json")
        assert spent.code == 0 and spent.json["appended"] is True, spent.stdout + spent.stderr
        snap = Snapshot(journal_path)
        replay = run_process(*argv[1:], "--journal", journal_path, "--json")
        assert replay.code == 0 and replay.json["appended"] is False
        snap.assert_unchanged()
        [debit] = events(journal_path, "quota.spent")
        assert debit["data"]["amount"] == 70 and debit["data"]["spent_after"] == 70
        assert held.turn_resume(goal=G, agent=A)["effective_action"] == "settled_skip"
        assert held.turn_status(goal=G)["spent_total"] == 70
    assert run_cli("verify", "--journal", journal_path, "--json").code == 0


def _settled_journal(cli, journal_path: str) -> tuple[bytes, int]:
    """A journal whose last record is the `quota.spent` of t1; its bytes and where
    that last line starts."""
    cli(*budget_args(G, 500, 24))
    cli(*open_args(G, A, "t1", "k1"))
    cli(*writeback_args(G, A, "t1", 70))
    eff = effect(G, A, "k1", "t1")
    assert run_printed(spend_line(G, A, "t1", eff, 70, journal=journal_path), journal_path).json[
        "appended"
    ]
    data = Path(journal_path).read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    assert b'"kind":"quota.spent"' in data[start:]
    return data, start


@pytest.mark.parametrize("cut", ["first_byte", "middle", "before_hash", "no_newline"])
def test_cut_inside_the_quota_spent_record_recovers_to_spend_owed(cli, journal_path, cut) -> None:
    """A journal cut anywhere inside the `quota.spent` line (its newline is the commit
    marker) folds to spend_owed for readers (torn tail ignored) and after a writer's
    recovery (torn bytes moved aside); the spend then happens exactly once."""
    data, start = _settled_journal(cli, journal_path)
    end = len(data)
    offset = {
        "first_byte": start + 1,
        "middle": (start + end) // 2,
        "before_hash": data.rfind(b'"hash"'),
        "no_newline": end - 1,
    }[cut]
    assert start < offset < end
    Path(journal_path).write_bytes(data[:offset])
    expected = spend_line(G, A, "t1", effect(G, A, "k1", "t1"), 70, journal=journal_path)

    # A reader shows the owed spend and leaves the torn file as it is.
    resumed = run_cli(*RESUME, "--journal", journal_path, "--json")
    assert resumed.json["phase"] == "spend_owed" and resumed.json["command"] == expected
    assert Path(journal_path).read_bytes() == data[:offset]

    # The next writer open recovers: torn bytes preserved beside it, journal cut at '\n'.
    with Ledger.open(journal_path) as ledger:
        assert ledger.turn_resume(goal=G, agent=A)["command"] == expected
        [torn] = ledger.journal.recovered
    assert Path(torn).read_bytes() == data[start:offset]
    assert Path(journal_path).read_bytes() == data[:start]

    spent = run_printed(expected, journal_path)
    assert spent.code == 0 and spent.json["appended"] is True
    replay = run_printed(expected, journal_path)
    assert replay.code == 0 and replay.json["appended"] is False
    assert len(events(journal_path, "quota.spent")) == 1
    status = run_cli("turn", "status", "--goal", G, "--journal", journal_path, "--json").json
    assert status["spent_total"] == 70


def test_cut_spend_recovered_by_the_spend_itself(cli, journal_path) -> None:
    """Running the owed command straight away on the torn journal recovers and spends
    once (the writer's open does the recovery)."""
    data, start = _settled_journal(cli, journal_path)
    Path(journal_path).write_bytes(data[: start + 40])
    line = spend_line(G, A, "t1", effect(G, A, "k1", "t1"), 70, journal=journal_path)
    first = run_process(*shlex.split(line)[1:], "--journal", journal_path, "--json")
    assert first.code == 0 and first.json["appended"] is True, first.stdout + first.stderr
    assert run_printed(line, journal_path).json["appended"] is False
    assert len(events(journal_path, "quota.spent")) == 1


@pytest.mark.slow
def test_racing_processes_spend_once_and_open_one_turn(cli, journal_path) -> None:
    """Real processes racing the same owed spend append one debit; racing `turn open`
    for different tasks of one agent open exactly one turn."""
    cli(*open_args(G, A, "t1", "k1"))
    cli(*writeback_args(G, A, "t1", 9))
    line = spend_line(G, A, "t1", effect(G, A, "k1", "t1"), 9, journal=journal_path)
    common = ["--journal", journal_path, "--json"]
    spenders = [_spawn([*shlex.split(line)[1:], *common]) for _ in range(4)]
    answers = [_finish(p) for p in spenders]
    assert sorted(a["appended"] for a in answers) == [False, False, False, True]
    assert len(events(journal_path, "quota.spent")) == 1
    openers = [_spawn([*open_args(G, A, f"t{i}", f"k{i}"), *common]) for i in range(2, 6)]
    answers = [_finish(p, ok_codes=(0, 1)) for p in openers]
    assert sum(a["ok"] for a in answers) == 1
    assert {r for a in answers if not a["ok"] for r in a["reasons"]} == {"turn_in_progress"}
    assert len(events(journal_path, "turn.opened")) == 2


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "quotaledger", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _finish(proc: subprocess.Popen[str], ok_codes: tuple[int, ...] = (0,)) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in ok_codes, out + err
    return json.loads(out)


@pytest.mark.slow
@pytest.mark.pg
def test_sigkill_resume_on_the_postgresql_store(pg_server) -> None:
    """The same crash and resume with the journal in PostgreSQL (store-agnostic fold)."""
    import uuid

    import psycopg

    schema = f"settle_{uuid.uuid4().hex[:12]}"
    url = f"{pg_server}?schema={schema}"
    try:
        with Ledger.open(url) as ledger:
            assert ledger.turn_open(goal=G, agent=A, turn="t1", task="k1")["appended"] is True
        assert kill_runtime_after_writeback(url, G, A, "t1", 11) == -signal.SIGKILL
        line = spend_line(G, A, "t1", effect(G, A, "k1", "t1"), 11, journal=url)
        with Ledger.open(url, write=False) as reader:
            assert reader.turn_resume(goal=G, agent=A)["command"] == line
        assert run_printed(line, url).json["appended"] is True
        assert run_printed(line, url).json["appended"] is False
        with Ledger.open(url, write=False) as reader:
            assert reader.turn_status(goal=G)["spent_total"] == 11
            assert reader.turn_resume(goal=G, agent=A)["phase"] == "settled"
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_every_cut_inside_the_quota_spent_line_spends_exactly_once(cli, journal_path) -> None:
    """A sweep over the cut offsets (every 3rd byte of the line, and its last byte)."""
    data, start = _settled_journal(cli, journal_path)
    eff = effect(G, A, "k1", "t1")
    for offset in [*range(start + 1, len(data), 3), len(data) - 1]:
        Path(journal_path).write_bytes(data[:offset])
        with Ledger.open(journal_path, write=False) as reader:
            assert reader.turn_resume(goal=G, agent=A)["phase"] == "spend_owed", offset
        with Ledger.open(journal_path) as ledger:
            assert ledger.turn_resume(goal=G, agent=A)["amount"] == 70
            assert (
                ledger.turn_spend(goal=G, agent=A, turn="t1", effect=eff, amount=70)["appended"]
                is True
            ), offset
            assert (
                ledger.turn_spend(goal=G, agent=A, turn="t1", effect=eff, amount=70)["appended"]
                is False
            ), offset
            assert ledger.turn_status(goal=G)["spent_total"] == 70
        assert len(events(journal_path, "quota.spent")) == 1
        for torn in Path(journal_path).parent.glob("*.torn.*"):
            torn.unlink()
