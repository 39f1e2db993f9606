"""Issue 41: a follow-up command printed to a client of a server names the journal
as that client reaches it (the server's URL), not the server's file: pasted where the
client runs, "the exact command" must run (it failed `spend_identity_mismatch`, or
wrote a local journal)."""

from __future__ import annotations

import shlex
from pathlib import Path

from quotaledger import Ledger
from tests.server.serving import serving
from tests.support import run_cli, run_process


def _owed(journal: Path) -> None:
    with Ledger.open(str(journal)) as ledger:
        ledger.configure(goal="g", quota_tpm=1000)
        ledger.budget_configure(goal="g", allowed_units=100, window_hours=1)
        ledger.turn_open(goal="g", agent="a", turn="t", task="x")
        ledger.turn_writeback(goal="g", agent="a", turn="t", amount=1)


def test_turn_resume_through_a_server_names_the_server(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    _owed(journal)
    with serving(journal) as server:
        with Ledger.open(server.url) as remote:
            answer = remote.turn_resume(goal="g", agent="a")
        assert answer["phase"] == "spend_owed"
        assert answer["argv"][-2:] == ["--journal", server.url]
        assert answer["command"].endswith(f"--journal {server.url}")
        assert str(journal) not in answer["command"]
        shown = run_cli("turn", "resume", "--goal", "g", "--agent", "a", "--journal", server.url)
        assert shown.code == 0, shown.stderr
        assert str(journal) not in shown.stdout and server.url in shown.stdout
        # The exact command, run as printed from elsewhere, settles the spend.
        argv = shlex.split(answer["command"])
        assert argv[0] == "quotaledger"
        done = run_process(*argv[1:], "--json")
        assert done.code == 0, done.stdout + done.stderr
        assert done.json["appended"] is True
