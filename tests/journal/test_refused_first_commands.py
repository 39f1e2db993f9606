"""A refused or invalid first command leaves no file behind (SPEC §8: nothing
written), and removing that empty file never loses a writer that opened it
meanwhile: the writer finds it unlinked under the lock and creates the path again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_cli

OBSERVE = ["observe", "--goal", "g", "--uncached-input", "1", "--cached-input", "0"]
OBSERVE += ["--output", "0"]


def test_refused_and_invalid_first_commands_leave_no_file(tmp_path: Path) -> None:
    path = str(tmp_path / "j.jsonl")
    invalid = run_cli(*OBSERVE, "--at", "2026-01-01T00:00:00", "--journal", path, "--json")
    assert invalid.code == 2
    refused = run_cli(
        "host", "phase", "--goal", "g", "--lane", "l", "--deadline", "+0s",
        "--session", "s", "--profile", "p", "--journal", path, "--json",
    )  # fmt: skip
    assert refused.code == 1
    assert not os.path.lexists(path)
    assert run_cli(*OBSERVE, "--journal", path, "--json").code == 0
    assert Path(path).read_bytes().count(b"\n") == 2  # genesis and the observation


def test_racing_refused_and_appending_first_commands_lose_no_event(tmp_path: Path) -> None:
    for round_ in range(3):
        path = str(tmp_path / f"j{round_}.jsonl")
        refusing = ["host", "phase", "--goal", "h", "--lane", "l", "--deadline", "+0s"]
        refusing += ["--session", "s", "--profile", "p"]
        commands = [OBSERVE, refusing] * 5
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "quotaledger", *args, "--journal", path, "--json"],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for args in commands
        ]
        codes = [proc.wait(timeout=120) for proc in procs]
        # With --json an error is on stdout: show both, so a rare failure says which.
        answers = [(p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
        assert codes == [0, 1] * 5, answers
        lines = Path(path).read_bytes().splitlines()
        kinds = [json.loads(line)["kind"] for line in lines]
        assert kinds == ["journal.created"] + ["capacity.observed"] * 5
        assert run_cli("verify", "--journal", path, "--json").code == 0


def test_a_writer_holding_a_removed_empty_file_writes_to_the_path_again(tmp_path: Path) -> None:
    """The interleaving the race above can only hit by chance, made deterministic."""
    from toyprojector import TOY, Note

    from quotaledger.journal import Journal

    path = str(tmp_path / "j.jsonl")
    first = Journal.open(path, TOY)
    try:
        with first.transaction():
            pass  # the first command is refused: it appends nothing
        second = Journal.open(path, TOY)  # opens the same, still empty, file
    finally:
        first.close()  # removes the empty file it created
    assert not os.path.lexists(path)
    try:
        with second.transaction() as txn:
            txn.append("toy.note", "g", Note(n=7), txn.time_for("g"))
    finally:
        second.close()
    kinds = [json.loads(line)["kind"] for line in Path(path).read_bytes().splitlines()]
    assert kinds == ["journal.created", "toy.note"]
