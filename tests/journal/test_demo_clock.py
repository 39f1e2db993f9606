"""Issue 41: the demo's scripted session is dated in the past, never ahead of the
wall clock: right after it, `--at now` on its goals is accepted (it was a
`time_regression`: the session was stamped about 60 s ahead)."""

from __future__ import annotations

from pathlib import Path

from quotaledger import Ledger
from quotaledger.journal.clock import format_us, wall_us
from tests.support import run_cli


def test_no_demo_event_is_ahead_of_the_clock(tmp_path: Path) -> None:
    journal = tmp_path / "d.jsonl"
    done = run_cli("demo", "--journal", journal)
    assert done.code == 0, done.stderr
    now = format_us(wall_us())
    with Ledger.open(str(journal)) as ledger:
        latest = max(event["at"] for event in ledger.log())
    assert latest <= now
    for goal in ("demo-campaign", "demo-limits"):
        counts = ["--uncached-input", "0", "--cached-input", "0", "--output", "0"]
        now_at = ["--at", format_us(wall_us())]
        observed = run_cli("observe", "--goal", goal, *counts, *now_at, "--journal", journal)
        assert observed.code == 0, observed.stderr
