"""SPEC §8: a follow-up command the tool prints (`turn resume`'s owed `turn spend`)
carries `--journal` when the journal is not the default — a file path quoted for a
POSIX shell, a PostgreSQL URL without its password (which then comes from the
environment, and the answer says so). Pasted as printed, it runs against the journal
it was printed from, never against `./quotaledger.jsonl`."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.settlement.settlement_helpers import effect, events, open_args, writeback_args
from tests.support import run_cli

G, A = "g-follow", "agent-1"
RESUME = ("turn", "resume", "--goal", G, "--agent", A)


@contextmanager
def fresh_schema(server_url: str) -> Iterator[str]:
    """A journal URL in a schema no one has used; dropped afterwards."""
    import psycopg

    schema = f"follow_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{server_url}{'&' if '?' in server_url else '?'}schema={schema}"
    finally:
        with psycopg.connect(server_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _owe(journal: str | None, amount: int = 40, **env: str) -> None:
    """A turn of agent A whose writeback is verified and whose spend is owed."""
    for args in (open_args(G, A, "t1", "k1"), writeback_args(G, A, "t1", amount)):
        extra = [] if journal is None else ["--journal", journal]
        result = run_cli(*args, *extra, "--json", env=env or None)
        assert result.code == 0, result.stdout


def _paste(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a printed line as a user pasting it into a POSIX shell would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTALEDGER_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["/bin/sh", "-c", line + " --json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_path_the_shell_would_split_is_quoted_and_the_line_runs_there(tmp_path: Path) -> None:
    # The case: the same identity owed in ./quotaledger.jsonl and in another
    # journal; the line printed for the other one must never debit the default one.
    cwd = tmp_path / "work"
    (cwd / "other dir").mkdir(parents=True)
    default = str(cwd / "quotaledger.jsonl")
    other = str(cwd / "other dir" / "it's j.jsonl")
    _owe(default)
    _owe(other)
    resumed = run_cli(*RESUME, "--journal", other, "--json").json
    eff = effect(G, A, "k1", "t1")
    tail = f"--effect {eff} --amount 40 --journal {shlex.quote(other)}"
    assert resumed["command"].endswith(tail), resumed["command"]
    assert resumed["argv"][-2:] == ["--journal", other]
    assert shlex.split(resumed["command"]) == resumed["argv"]
    assert "journal_password" not in resumed
    pasted = _paste(resumed["command"], cwd)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert len(events(other, "quota.spent")) == 1
    assert events(default, "quota.spent") == []


def test_every_answer_that_prints_the_owed_command_names_the_journal(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.jsonl")
    _owe(journal)
    suffix = f" --journal {shlex.quote(journal)}"
    writeback = run_cli(*writeback_args(G, A, "t1", 40), "--journal", journal, "--json").json
    reopened = run_cli(*open_args(G, A, "t1", "k1"), "--journal", journal, "--json").json
    new_turn = run_cli(*open_args(G, A, "t2", "k2"), "--journal", journal, "--json").json
    status = run_cli("turn", "status", "--goal", G, "--journal", journal, "--json").json
    for command in (
        writeback["command"],
        reopened["command"],
        new_turn["command"],
        new_turn["owed"]["command"],
        status["agents"][A]["command"],
        status["agents"][A]["turns"][0]["command"],
    ):
        assert command.endswith(suffix) and command.count("--journal") == 1, command
    human = run_cli(*RESUME, "--journal", journal)
    assert human.stdout.splitlines()[-1].endswith(suffix)


def test_the_default_journal_is_not_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _owe(None)
    for extra in ([], ["--journal", "./quotaledger.jsonl"], ["--journal", "quotaledger.jsonl"]):
        resumed = run_cli(*RESUME, *extra, "--json").json
        assert "--journal" not in resumed["command"] and "--journal" not in resumed["argv"]
    # QUOTALEDGER_JOURNAL naming another journal: the line names it (a paste into
    # another shell, without that environment, must reach the same journal).
    other = str(tmp_path / "elsewhere.jsonl")
    _owe(other)
    by_env = run_cli(*RESUME, "--json", env={"QUOTALEDGER_JOURNAL": other}).json
    assert by_env["argv"][-2:] == ["--journal", other]


def test_a_postgresql_url_is_printed_without_its_password(pg_server: str, tmp_path: Path) -> None:
    with fresh_schema(pg_server) as url:
        # Trust authentication: the server ignores the password, so the line printed
        # without it still runs, as it would with PGPASSWORD set.
        scheme, rest = url.split("://", 1)
        user, host = rest.split("@", 1)
        with_password = f"{scheme}://{user}:s3cret-pw@{host}"
        _owe(with_password)
        for given in (with_password, url + "&password=s3cret-pw"):
            resumed = run_cli(*RESUME, "--journal", given, "--json").json
            assert "s3cret-pw" not in resumed["command"], resumed["command"]
            assert resumed["argv"][-2:] == ["--journal", url]
            assert "PGPASSWORD" in resumed["journal_password"]
        human = run_cli(*RESUME, "--journal", with_password)
        assert "PGPASSWORD" in human.stdout and "s3cret-pw" not in human.stdout
        plain = run_cli(*RESUME, "--journal", url, "--json").json
        assert plain["argv"][-2:] == ["--journal", url] and "journal_password" not in plain
        pasted = _paste(resumed["command"], tmp_path)
        assert pasted.returncode == 0, pasted.stdout + pasted.stderr
        spent = run_cli("turn", "status", "--goal", G, "--journal", url, "--json").json
        assert spent["spent_total"] == 40
        assert list(tmp_path.iterdir()) == []  # nothing landed in ./quotaledger.jsonl
