"""Issue 27, case 5 on a file journal (SPEC §2.2, §3.5): one `observe` run on a machine
whose clock is a day ahead, with no `--at`, stamps its event a day ahead, and implicit
time (`max(now, last)`) then stamps every later event of the goal there too. Implicit
time is never refused, so `inspect` and `goals` flag such a goal (`clock_ahead: true`,
`next_action: "check_clocks"`) as long as its last event is more than the clock-skew
bound ahead of this machine's clock.

The skewed machine is a real process whose clock is injected: `time.time_ns`, which
journal/clock.py samples for every implicit time, runs a day ahead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from quotaledger import Ledger
from tests.support import REPO, run_cli

DAY_NS = 86_400 * 10**9
SKEWED = (
    "import sys, time\n"
    "real = time.time_ns\n"
    f"time.time_ns = lambda: real() + {DAY_NS}\n"
    "from quotaledger.entry import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def _observe_on_a_skewed_machine(journal: Path) -> None:
    argv = ["observe", "--goal", "g", "--uncached-input", "1000", "--cached-input", "0"]
    argv += ["--output", "100"]
    done = subprocess.run(
        [sys.executable, "-c", SKEWED, *argv, "--journal", str(journal), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _configured(tmp_path: Path) -> Path:
    journal = tmp_path / "j.jsonl"
    with Ledger.open(str(journal)) as ledger:
        ledger.configure(goal="g", quota_tpm=100_000, max_active_cases=2)
        ledger.configure(goal="other", quota_tpm=100_000, max_active_cases=2)
    return journal


def _flags(journal: Path, env: dict[str, str] | None = None) -> dict[str, tuple[bool, str]]:
    inspected = run_cli("inspect", "--journal", str(journal), "--json", env=env)
    assert inspected.code == 0, inspected.stdout
    listed = run_cli("goals", "--journal", str(journal), "--json", env=env)
    assert listed.code == 0, listed.stdout
    flags = {}
    for name, view in inspected.json["goals"].items():
        summary = listed.json["goals"][name]
        assert (summary["clock_ahead"], summary["next_action"]) == (
            view["clock_ahead"],
            view["next_action"],
        )
        flags[name] = (view["clock_ahead"], view["next_action"])
    return flags


def test_a_goal_stamped_a_day_ahead_is_flagged_check_clocks(tmp_path: Path) -> None:
    journal = _configured(tmp_path)
    assert _flags(journal)["g"][0] is False
    _observe_on_a_skewed_machine(journal)
    # A runner on this machine, no --at: its event is stamped at the goal's last time.
    with Ledger.open(str(journal)) as ledger:
        ledger.observe(goal="g", uncached_input=10, cached_input=0, output=1)
    flags = _flags(journal)
    assert flags["g"] == (True, "check_clocks")
    assert flags["other"][0] is False and flags["other"][1] != "check_clocks"


def test_the_skew_bound_decides_the_flag(tmp_path: Path) -> None:
    journal = _configured(tmp_path)
    _observe_on_a_skewed_machine(journal)
    assert _flags(journal)["g"] == (True, "check_clocks")
    # The event is a day ahead of the clock when it was stamped, so less than a day
    # ahead of any later reading: within a bound of 86400 s it is not flagged.
    assert _flags(journal, env={"QUOTALEDGER_MAX_CLOCK_SKEW_S": "86400"})["g"][0] is False
